// rnncore — safetensors reader and writer (see safetensors.hpp).
#include "rnncore/io/safetensors.hpp"
#include "src/io/json.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

namespace rnncore {
namespace io {
namespace {

const char* display_name(const char* name) { return (name != nullptr && *name != '\0') ? name : "<input>"; }

bool is_valid_type(ElemType type) {
  return static_cast<unsigned>(type) <= static_cast<unsigned>(ElemType::boolean);
}

/// Short rendering of a JSON value for messages: "-3", "2.5", "a string", "null".
std::string describe_json(const JsonValue& value) {
  char buf[64];
  switch (value.kind) {
    case JsonValue::Kind::number:
      if (value.is_integer) {
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value.integer));
      } else {
        std::snprintf(buf, sizeof buf, "%.17g", value.number);
      }
      return buf;
    case JsonValue::Kind::string: return "a string";
    case JsonValue::Kind::array: return "an array";
    case JsonValue::Kind::object: return "an object";
    case JsonValue::Kind::boolean: return value.boolean ? "true" : "false";
    case JsonValue::Kind::null: return "null";
  }
  return "?";
}

bool is_non_negative_integer(const JsonValue& value) {
  return value.kind == JsonValue::Kind::number && value.is_integer && value.integer >= 0;
}

rnncore_status read_metadata(const char* file, const JsonValue& value,
                             std::vector<std::pair<std::string, std::string>>* out) {
  if (value.kind != JsonValue::Kind::object) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: '__metadata__' must be an object of strings, found %s", file,
                        describe_json(value).c_str());
  }
  for (const auto& member : value.members) {
    if (member.second.kind != JsonValue::Kind::string) {
      return detail::fail(RNNCORE_ERR_FORMAT, "%s: '__metadata__' value of '%s' must be a string, found %s", file,
                          printable_excerpt(member.first).c_str(), describe_json(member.second).c_str());
    }
    out->emplace_back(member.first, member.second.text);
  }
  return RNNCORE_OK;
}

rnncore_status read_entry(const char* file, const std::string& tensor_name, const JsonValue& value,
                          std::uint64_t data_size, TensorEntry* out) {
  const std::string name = printable_excerpt(tensor_name);
  const char* tensor = name.c_str();
  if (value.kind != JsonValue::Kind::object) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: tensor '%s': expected an object with dtype, shape and data_offsets, found %s", file,
                        tensor, describe_json(value).c_str());
  }
  const JsonValue* dtype = nullptr;
  const JsonValue* shape = nullptr;
  const JsonValue* offsets = nullptr;
  for (const auto& member : value.members) {
    if (member.first == "dtype") {
      dtype = &member.second;
    } else if (member.first == "shape") {
      shape = &member.second;
    } else if (member.first == "data_offsets") {
      offsets = &member.second;
    } else {
      return detail::fail(RNNCORE_ERR_FORMAT,
                          "%s: tensor '%s': unexpected field '%s' (expected dtype, shape and data_offsets)", file,
                          tensor, printable_excerpt(member.first, 24).c_str());
    }
  }
  const char* missing = dtype == nullptr ? "dtype" : shape == nullptr ? "shape" : offsets == nullptr ? "data_offsets"
                                                                                                     : nullptr;
  if (missing != nullptr) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", file, tensor, missing);
  }

  if (dtype->kind != JsonValue::Kind::string) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': 'dtype' must be a string, found %s", file, tensor,
                        describe_json(*dtype).c_str());
  }
  ElemType type = ElemType::f32;
  if (!elem_type_from_name(dtype->text, &type)) {
    return detail::fail(RNNCORE_ERR_TENSOR_DTYPE,
                        "%s: tensor '%s': unsupported dtype '%s' (supported: F16 BF16 F32 F64 I8 U8 I16 I32 I64 BOOL)",
                        file, tensor, printable_excerpt(dtype->text, 16).c_str());
  }

  if (shape->kind != JsonValue::Kind::array) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': 'shape' must be an array, found %s", file, tensor,
                        describe_json(*shape).c_str());
  }
  if (shape->items.size() > kMaxRank) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': rank %zu exceeds the maximum of %zu", file, tensor,
                        shape->items.size(), kMaxRank);
  }
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < shape->items.size(); ++i) {
    const JsonValue& dim = shape->items[i];
    if (!is_non_negative_integer(dim)) {
      return detail::fail(RNNCORE_ERR_FORMAT,
                          "%s: tensor '%s': shape[%zu] is %s; dimensions must be non-negative integers", file,
                          tensor, i, describe_json(dim).c_str());
    }
    dims.push_back(dim.integer);
  }
  const std::string shape_text = shape_to_string(dims.data(), dims.size());

  if (offsets->kind != JsonValue::Kind::array || offsets->items.size() != 2 ||
      !is_non_negative_integer(offsets->items[0]) || !is_non_negative_integer(offsets->items[1])) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: tensor '%s': 'data_offsets' must be two non-negative integers [begin, end]", file,
                        tensor);
  }
  const std::uint64_t begin = static_cast<std::uint64_t>(offsets->items[0].integer);
  const std::uint64_t end = static_cast<std::uint64_t>(offsets->items[1].integer);
  if (begin > end) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are reversed (begin > end)",
                        file, tensor, static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
  }
  std::uint64_t bytes = 0;
  if (!shape_byte_count(dims.data(), dims.size(), type, &bytes)) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': shape %s x %s is too large (its byte count overflows)",
                        file, tensor, shape_text.c_str(), elem_type_name(type));
  }
  if (bytes != end - begin) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] do not match shape %s x %s (%llu bytes)", file,
                        tensor, static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
                        shape_text.c_str(), elem_type_name(type), static_cast<unsigned long long>(bytes));
  }
  if (end > data_size) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] exceed the %llu bytes of data after the header",
                        file, tensor, static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
                        static_cast<unsigned long long>(data_size));
  }
  out->name = tensor_name;
  out->type = type;
  out->shape = std::move(dims);
  out->begin = begin;
  out->end = end;
  return RNNCORE_OK;
}

rnncore_status check_overlaps(const char* file, const std::vector<TensorEntry>& tensors) {
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return tensors[a].begin != tensors[b].begin ? tensors[a].begin < tensors[b].begin : tensors[a].end < tensors[b].end;
  });
  // Sweep in order of begin, remembering the non-empty range that reaches furthest.
  const std::size_t none = tensors.size();
  std::size_t furthest = none;
  for (const std::size_t index : order) {
    const TensorEntry& entry = tensors[index];
    if (entry.begin == entry.end) continue;  // an empty range overlaps nothing
    if (furthest != none && entry.begin < tensors[furthest].end) {
      const TensorEntry& other = tensors[furthest];
      return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", file,
                          printable_excerpt(other.name, 32).c_str(), static_cast<unsigned long long>(other.begin),
                          static_cast<unsigned long long>(other.end), printable_excerpt(entry.name, 32).c_str(),
                          static_cast<unsigned long long>(entry.begin), static_cast<unsigned long long>(entry.end));
    }
    if (furthest == none || entry.end > tensors[furthest].end) furthest = index;
  }
  return RNNCORE_OK;
}

void append_u64_le(std::uint64_t value, std::vector<std::uint8_t>* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void append_json_string(const std::string& text, std::string* out) {
  out->push_back('"');
  json_escape(text, out);
  out->push_back('"');
}

/// Returns the index of a repeated name in `names` (in sorted order), or npos.
std::size_t find_duplicate(const std::vector<const std::string*>& names) {
  std::vector<std::size_t> order(names.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return *names[a] < *names[b]; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (*names[order[i]] == *names[order[i - 1]]) return order[i];
  }
  return std::string::npos;
}

rnncore_status encode_named(const char* context, const std::vector<TensorToWrite>& tensors,
                            const std::vector<std::pair<std::string, std::string>>& metadata,
                            std::vector<std::uint8_t>* out) {
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: output is null", context);
  std::vector<std::uint64_t> sizes(tensors.size());
  std::uint64_t total = 0;
  std::vector<const std::string*> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    const std::string name = printable_excerpt(t.name);
    if (!is_valid_utf8(t.name.data(), t.name.size())) {
      return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': name is not valid UTF-8", context, name.c_str());
    }
    if (t.name == "__metadata__") {
      return detail::fail(RNNCORE_ERR_FORMAT, "%s: '__metadata__' is reserved and cannot name a tensor", context);
    }
    if (!is_valid_type(t.type)) {
      return detail::fail(RNNCORE_ERR_INVALID_ENUM, "%s: tensor '%s': element type %d is not a valid ElemType",
                          context, name.c_str(), static_cast<int>(t.type));
    }
    if (t.shape.size() > kMaxRank) {
      return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: tensor '%s': rank %zu exceeds the maximum of %zu", context,
                          name.c_str(), t.shape.size(), kMaxRank);
    }
    if (!shape_byte_count(t.shape.data(), t.shape.size(), t.type, &sizes[i]) ||
        sizes[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - total) {
      return detail::fail(RNNCORE_ERR_INVALID_SIZE,
                          "%s: tensor '%s': shape %s x %s is invalid (negative dimension or overflow)", context,
                          name.c_str(), shape_to_string(t.shape.data(), t.shape.size()).c_str(),
                          elem_type_name(t.type));
    }
    if (sizes[i] > 0 && t.data == nullptr) {
      return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: tensor '%s': data is null", context, name.c_str());
    }
    total += sizes[i];
    names.push_back(&t.name);
  }
  std::size_t dup = find_duplicate(names);
  if (dup != std::string::npos) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor name '%s' is used twice", context,
                        printable_excerpt(*names[dup]).c_str());
  }
  std::vector<const std::string*> keys;
  for (const auto& entry : metadata) {
    if (!is_valid_utf8(entry.first.data(), entry.first.size()) ||
        !is_valid_utf8(entry.second.data(), entry.second.size())) {
      return detail::fail(RNNCORE_ERR_FORMAT, "%s: metadata '%s' is not valid UTF-8", context,
                          printable_excerpt(entry.first).c_str());
    }
    keys.push_back(&entry.first);
  }
  dup = find_duplicate(keys);
  if (dup != std::string::npos) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: metadata key '%s' is used twice", context,
                        printable_excerpt(*keys[dup]).c_str());
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (std::size_t i = 0; i < metadata.size(); ++i) {
      if (i > 0) header += ',';
      append_json_string(metadata[i].first, &header);
      header += ':';
      append_json_string(metadata[i].second, &header);
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0 || !metadata.empty()) header += ',';
    append_json_string(tensors[i].name, &header);
    header += ":{\"dtype\":\"";
    header += elem_type_name(tensors[i].type);
    header += "\",\"shape\":[";
    for (std::size_t d = 0; d < tensors[i].shape.size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(tensors[i].shape[d]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    offset += sizes[i];
    header += std::to_string(offset);
    header += "]}";
  }
  header += '}';
  // Trailing spaces are valid JSON and align the data section to 8 bytes.
  while (header.size() % 8 != 0) header += ' ';
  if (header.size() > kMaxSafetensorsHeaderBytes) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: header of %zu bytes exceeds the %llu-byte limit", context,
                        header.size(), static_cast<unsigned long long>(kMaxSafetensorsHeaderBytes));
  }

  std::vector<std::uint8_t> file;
  file.reserve(8 + header.size() + static_cast<std::size_t>(total));
  append_u64_le(header.size(), &file);
  file.insert(file.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint8_t* src = static_cast<const std::uint8_t*>(tensors[i].data);
    if (sizes[i] > 0) file.insert(file.end(), src, src + sizes[i]);
  }
  *out = std::move(file);
  return RNNCORE_OK;
}

}  // namespace

const TensorEntry* SafeTensors::find(const std::string& name) const {
  for (const TensorEntry& entry : tensors) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

const std::uint8_t* SafeTensors::data(const TensorEntry& entry) const {
  return file.data() + data_start + entry.begin;
}

const std::string* SafeTensors::meta(const std::string& key) const {
  for (const auto& entry : metadata) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

rnncore_status SafeTensors::array(const std::string& name, Array* out) const {
  const char* file_name = display_name(path.c_str());
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: array: output is null", file_name);
  const TensorEntry* entry = find(name);
  if (entry == nullptr) {
    std::string known;
    for (std::size_t i = 0; i < tensors.size() && i < 3; ++i) {
      known += i == 0 ? ": '" : ", '";
      known += printable_excerpt(tensors[i].name, 32);
      known += "'";
    }
    if (tensors.size() > 3) known += ", ...";
    return detail::fail(RNNCORE_ERR_TENSOR_MISSING, "%s: no tensor named '%s' (the file has %zu%s)", file_name,
                        printable_excerpt(name).c_str(), tensors.size(), known.c_str());
  }
  // Entries normally come from parse_safetensors, but the struct is public:
  // re-check the range before copying.
  if (data_start > file.size() || entry->begin > entry->end || entry->end > file.size() - data_start) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: tensor '%s': byte range lies outside the file", file_name,
                        printable_excerpt(name).c_str());
  }
  Array result;
  result.type = entry->type;
  result.shape = entry->shape;
  const std::uint8_t* first = data(*entry);
  result.bytes.assign(first, first + (entry->end - entry->begin));
  *out = std::move(result);
  return RNNCORE_OK;
}

namespace {

// What a file that is not safetensors probably is, from its first bytes (nullptr: no idea). Users
// hand over what their framework saved; the message should say what that was.
const char* other_format(const std::vector<std::uint8_t>& f) {
  auto starts = [&](const char* magic, std::size_t n) { return f.size() >= n && std::memcmp(f.data(), magic, n) == 0; };
  if (starts("PK\x03\x04", 4)) return "a zip archive, as PyTorch's torch.save writes (.pt / .pth)";
  if (starts("\x93NUMPY", 6)) return "a NumPy .npy array";
  if (f.size() >= 2 && f[0] == 0x80 && f[1] >= 2 && f[1] <= 5) return "a Python pickle (an older torch.save file)";
  if (starts("\x89HDF\r\n\x1a\n", 8)) return "an HDF5 file (a Keras .h5 model)";
  if (f.size() >= 8 && std::memcmp(f.data() + 4, "TFL3", 4) == 0) return "a TensorFlow Lite flatbuffer";
  if (starts("{", 1) || starts("[", 1)) return "a JSON text";
  return nullptr;
}

}  // namespace

rnncore_status parse_safetensors(std::vector<std::uint8_t> file, const char* name_for_errors, SafeTensors* out) {
  const char* name = display_name(name_for_errors);
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: parse_safetensors: output is null", name);
  if (file.size() < 8) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: file is %zu bytes; a safetensors file starts with an 8-byte header length", name,
                        file.size());
  }
  std::uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= static_cast<std::uint64_t>(file[static_cast<std::size_t>(i)]) << (8 * i);
  // A header length the file cannot hold, or a header that is not a JSON object: another format.
  const bool implausible = header_length > file.size() - 8 || header_length < 2 || file[8] != '{';
  if (const char* what = implausible ? other_format(file) : nullptr) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: not a safetensors file: it looks like %s (docs/weights.md shows how to save "
                        "weights as safetensors)", name, what);
  }
  if (header_length > kMaxSafetensorsHeaderBytes) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit", name,
                        static_cast<unsigned long long>(header_length),
                        static_cast<unsigned long long>(kMaxSafetensorsHeaderBytes));
  }
  if (header_length > file.size() - 8) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: header length %llu exceeds the %zu bytes that follow it", name,
                        static_cast<unsigned long long>(header_length), file.size() - 8);
  }
  const std::size_t data_start = 8 + static_cast<std::size_t>(header_length);
  const std::string json_name = std::string(name) + " (JSON header)";
  JsonValue root;
  rnncore_status st = parse_json(reinterpret_cast<const char*>(file.data() + 8),
                                 static_cast<std::size_t>(header_length), json_name.c_str(), &root);
  if (st != RNNCORE_OK) return st;
  if (root.kind != JsonValue::Kind::object) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: the header must be a JSON object, found %s", name,
                        describe_json(root).c_str());
  }

  SafeTensors result;
  result.path = name_for_errors != nullptr ? name_for_errors : "";
  result.data_start = data_start;
  const std::uint64_t data_size = file.size() - data_start;
  result.tensors.reserve(root.members.size());
  for (const auto& member : root.members) {
    if (member.first == "__metadata__") {
      st = read_metadata(name, member.second, &result.metadata);
      if (st != RNNCORE_OK) return st;
      continue;
    }
    TensorEntry entry;
    st = read_entry(name, member.first, member.second, data_size, &entry);
    if (st != RNNCORE_OK) return st;
    result.tensors.push_back(std::move(entry));
  }
  st = check_overlaps(name, result.tensors);
  if (st != RNNCORE_OK) return st;
  result.file = std::move(file);
  *out = std::move(result);
  return RNNCORE_OK;
}

rnncore_status read_safetensors(const char* path, SafeTensors* out) {
  std::vector<std::uint8_t> bytes;
  rnncore_status st = read_file_bytes(path, &bytes);
  if (st != RNNCORE_OK) return st;
  return parse_safetensors(std::move(bytes), path, out);
}

rnncore_status encode_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::vector<std::pair<std::string, std::string>>& metadata,
                                  std::vector<std::uint8_t>* out) {
  return encode_named("encode_safetensors", tensors, metadata, out);
}

rnncore_status write_safetensors(const char* path, const std::vector<TensorToWrite>& tensors,
                                 const std::vector<std::pair<std::string, std::string>>& metadata) {
  if (path == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "write_safetensors: path is null");
  std::vector<std::uint8_t> file;
  rnncore_status st = encode_named(path, tensors, metadata, &file);
  if (st != RNNCORE_OK) return st;
  return write_file_bytes(path, file.data(), file.size());
}

}  // namespace io
}  // namespace rnncore

// rnncore — element types, conversions and the NumPy .npy format (see npy.hpp).
#include "rnncore/io/npy.hpp"
#include "src/io/json.hpp"

#include "src/shared/half.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rnncore::io stores arrays in native byte order and assumes a little-endian host"
#endif

namespace rnncore {
namespace io {
namespace {

const char* display_name(const char* name) { return (name != nullptr && *name != '\0') ? name : "<input>"; }

bool is_valid_type(ElemType type) {
  return static_cast<unsigned>(type) <= static_cast<unsigned>(ElemType::boolean);
}

/// double → float with round-to-nearest. Converting a finite double beyond
/// the float range is undefined behaviour in C++, so that case is done by hand.
float double_to_float(double value) {
  // FLT_MAX plus half an ulp: from there on IEEE rounding gives infinity (the
  // tie goes to the even neighbour, which is infinity).
  const double overflow_threshold = 0x1.ffffffp127;
  if (value >= overflow_threshold) return std::numeric_limits<float>::infinity();
  if (value <= -overflow_threshold) return -std::numeric_limits<float>::infinity();
  if (value > static_cast<double>(FLT_MAX)) return FLT_MAX;
  if (value < -static_cast<double>(FLT_MAX)) return -FLT_MAX;
  return static_cast<float>(value);
}

template <typename T>
T load(const std::uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

/// Checks that an Array's bytes agree with its type and shape.
rnncore_status check_array(const Array& array, const char* function) {
  if (!is_valid_type(array.type)) {
    return detail::fail(RNNCORE_ERR_INVALID_ENUM, "%s: element type %d is not a valid ElemType", function,
                        static_cast<int>(array.type));
  }
  if (array.shape.size() > kMaxRank) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: rank %zu exceeds the maximum of %zu", function,
                        array.shape.size(), kMaxRank);
  }
  std::uint64_t bytes = 0;
  const std::string shape = shape_to_string(array.shape.data(), array.shape.size());
  if (!shape_byte_count(array.shape.data(), array.shape.size(), array.type, &bytes)) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: shape %s x %s is invalid (negative dimension or overflow)",
                        function, shape.c_str(), elem_type_name(array.type));
  }
  if (bytes != array.bytes.size()) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: shape %s x %s needs %llu bytes but the array holds %zu",
                        function, shape.c_str(), elem_type_name(array.type),
                        static_cast<unsigned long long>(bytes), array.bytes.size());
  }
  return RNNCORE_OK;
}

// ---------------------------------------------------------------------------
// .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// ---------------------------------------------------------------------------

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(const char* text, std::size_t size, const char* file) : text_(text), size_(size), file_(file) {}

  rnncore_status parse(NpyHeader* out) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_whitespace();
    if (at_end() || peek() != '{') return error("expected '{' at the start of the header dict");
    ++pos_;
    for (;;) {
      skip_whitespace();
      if (at_end()) return error("unexpected end of header; expected a key or '}'");
      if (peek() == '}') {
        ++pos_;
        break;
      }
      std::string key;
      rnncore_status st = parse_string(&key);
      if (st != RNNCORE_OK) return st;
      skip_whitespace();
      if (at_end() || peek() != ':') return error("expected ':' after key '%s'", printable_excerpt(key).c_str());
      ++pos_;
      skip_whitespace();
      if (key == "descr") {
        if (have_descr) return error("key 'descr' appears twice");
        have_descr = true;
        if (!at_end() && peek() == '[') {
          return detail::fail(RNNCORE_ERR_TENSOR_DTYPE,
                              "%s: structured dtypes (a list as 'descr') are not supported", file_);
        }
        st = parse_string(&out->descr);
      } else if (key == "fortran_order") {
        if (have_fortran) return error("key 'fortran_order' appears twice");
        have_fortran = true;
        st = parse_bool(&out->fortran_order);
      } else if (key == "shape") {
        if (have_shape) return error("key 'shape' appears twice");
        have_shape = true;
        st = parse_shape(&out->shape);
      } else {
        return error("unexpected key '%s' (expected 'descr', 'fortran_order' and 'shape')",
                     printable_excerpt(key).c_str());
      }
      if (st != RNNCORE_OK) return st;
      skip_whitespace();
      if (at_end()) return error("unexpected end of header; expected ',' or '}'");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        break;
      }
      return error("expected ',' or '}' after the value of '%s'", key.c_str());
    }
    skip_whitespace();  // NumPy pads with spaces and ends the header with '\n'
    if (!at_end()) return error("unexpected text after the header dict");
    if (!have_descr) return error("the header lacks 'descr'");
    if (!have_fortran) return error("the header lacks 'fortran_order'");
    if (!have_shape) return error("the header lacks 'shape'");
    return RNNCORE_OK;
  }

 private:
  bool at_end() const { return pos_ >= size_; }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r' ||
                         peek() == '\f' || peek() == '\v')) {
      ++pos_;
    }
  }

#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  rnncore_status error(const char* fmt, ...) const {
    char message[200];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: malformed .npy header at column %zu: %s", file_, pos_ + 1,
                        message);
  }

  rnncore_status parse_string(std::string* out) {
    if (at_end() || (peek() != '\'' && peek() != '"')) return error("expected a quoted string");
    const char quote = peek();
    ++pos_;
    while (!at_end() && peek() != quote) {
      if (peek() == '\\') return error("escape sequences are not supported in header strings");
      if (peek() == '\n') break;
      out->push_back(peek());
      ++pos_;
    }
    if (at_end() || peek() != quote) return error("unterminated string");
    ++pos_;
    return RNNCORE_OK;
  }

  rnncore_status parse_bool(bool* out) {
    const std::size_t start = pos_;
    while (!at_end() && ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))) ++pos_;
    const std::string word(text_ + start, pos_ - start);
    if (word == "True") {
      *out = true;
    } else if (word == "False") {
      *out = false;
    } else {
      pos_ = start;
      return error("'fortran_order' must be True or False");
    }
    return RNNCORE_OK;
  }

  rnncore_status parse_dimension(std::int64_t* out) {
    if (!at_end() && peek() == '-') return error("negative dimension in 'shape'");
    if (at_end() || peek() < '0' || peek() > '9') return error("expected a non-negative integer in 'shape'");
    std::int64_t value = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
        return error("dimension in 'shape' does not fit in 64 bits");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (!at_end() && (peek() == 'L' || peek() == 'l')) ++pos_;  // Python 2 long literal, e.g. (3L,)
    *out = value;
    return RNNCORE_OK;
  }

  rnncore_status parse_shape(std::vector<std::int64_t>* out) {
    if (at_end() || peek() != '(') return error("'shape' must be a tuple such as (3, 4) or (3,)");
    ++pos_;
    bool saw_comma = false;
    for (;;) {
      skip_whitespace();
      if (at_end()) return error("unexpected end of header inside 'shape'");
      if (peek() == ')') {
        ++pos_;
        break;
      }
      if (out->size() == kMaxRank) return error("'shape' has more than %zu dimensions", kMaxRank);
      std::int64_t dim = 0;
      rnncore_status st = parse_dimension(&dim);
      if (st != RNNCORE_OK) return st;
      out->push_back(dim);
      skip_whitespace();
      if (at_end()) return error("unexpected end of header inside 'shape'");
      if (peek() == ',') {
        saw_comma = true;
        ++pos_;
        continue;
      }
      if (peek() == ')') {
        ++pos_;
        break;
      }
      return error("expected ',' or ')' in 'shape'");
    }
    // In Python "(3)" is the integer 3, not a tuple.
    if (out->size() == 1 && !saw_comma) return error("'shape' (%lld) is not a tuple; write (%lld,)",
                                                     static_cast<long long>((*out)[0]),
                                                     static_cast<long long>((*out)[0]));
    return RNNCORE_OK;
  }

  const char* text_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const char* file_;
};

/// Maps a NumPy type string to an ElemType; `*swap` tells whether the data is
/// big-endian and needs byte swapping.
rnncore_status decode_descr(const std::string& descr, const char* file, ElemType* type, bool* swap) {
  static const struct {
    const char* code;
    ElemType type;
  } kCodes[] = {{"f2", ElemType::f16}, {"f4", ElemType::f32}, {"f8", ElemType::f64},
                {"i1", ElemType::i8},  {"i2", ElemType::i16}, {"i4", ElemType::i32},
                {"i8", ElemType::i64}, {"u1", ElemType::u8},  {"b1", ElemType::boolean}};
  char order = '=';
  std::string code = descr;
  if (!code.empty() && std::strchr("<>=|", code[0]) != nullptr) {
    order = code[0];
    code.erase(0, 1);
  }
  for (const auto& entry : kCodes) {
    if (code != entry.code) continue;
    const std::size_t size = elem_type_size(entry.type);
    if (size > 1 && order == '|') {
      return detail::fail(RNNCORE_ERR_TENSOR_DTYPE, "%s: dtype '%s' lacks a byte order; expected '<%s' or '>%s'",
                          file, printable_excerpt(descr).c_str(), code.c_str(), code.c_str());
    }
    *type = entry.type;
    *swap = size > 1 && order == '>';
    return RNNCORE_OK;
  }
  return detail::fail(RNNCORE_ERR_TENSOR_DTYPE,
                      "%s: unsupported dtype '%s' (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 |b1)", file,
                      printable_excerpt(descr).c_str());
}

const char* npy_descr(ElemType type) {
  switch (type) {
    case ElemType::f16: return "<f2";
    case ElemType::f32: return "<f4";
    case ElemType::f64: return "<f8";
    case ElemType::i8: return "|i1";
    case ElemType::u8: return "|u1";
    case ElemType::i16: return "<i2";
    case ElemType::i32: return "<i4";
    case ElemType::i64: return "<i8";
    case ElemType::boolean: return "|b1";
    case ElemType::bf16: break;
  }
  return nullptr;
}

void byte_swap_elements(std::vector<std::uint8_t>* bytes, std::size_t elem_size) {
  for (std::size_t i = 0; i + elem_size <= bytes->size(); i += elem_size) {
    std::reverse(bytes->begin() + static_cast<std::ptrdiff_t>(i),
                 bytes->begin() + static_cast<std::ptrdiff_t>(i + elem_size));
  }
}

rnncore_status encode_npy_named(const char* context, ElemType type, const std::int64_t* shape, int rank,
                                const void* data, std::vector<std::uint8_t>* out) {
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: output is null", context);
  if (!is_valid_type(type)) {
    return detail::fail(RNNCORE_ERR_INVALID_ENUM, "%s: element type %d is not a valid ElemType", context,
                        static_cast<int>(type));
  }
  const char* descr = npy_descr(type);
  if (descr == nullptr) {
    return detail::fail(RNNCORE_ERR_TENSOR_DTYPE,
                        "%s: NumPy has no %s type; convert to F32 or write safetensors instead", context,
                        elem_type_name(type));
  }
  if (rank < 0 || static_cast<std::size_t>(rank) > kMaxRank) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: rank %d is outside 0..%zu", context, rank, kMaxRank);
  }
  if (rank > 0 && shape == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: shape is null", context);
  const std::size_t urank = static_cast<std::size_t>(rank);
  std::uint64_t bytes = 0;
  if (!shape_byte_count(shape, urank, type, &bytes)) {
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: shape %s x %s is invalid (negative dimension or overflow)",
                        context, shape_to_string(shape, urank).c_str(), elem_type_name(type));
  }
  if (bytes > 0 && data == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: data is null", context);

  std::string header = "{'descr': '";
  header += descr;
  header += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < urank; ++i) {
    if (i > 0) header += ", ";
    header += std::to_string(shape[i]);
  }
  if (urank == 1) header += ',';
  header += "), }";
  // Pad with spaces so that magic (6) + version (2) + length (2) + header is a
  // multiple of 64; the header ends with '\n'.
  const std::size_t preamble = 10;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';

  std::vector<std::uint8_t> file;
  file.reserve(preamble + header.size() + static_cast<std::size_t>(bytes));
  const std::uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  file.insert(file.end(), magic, magic + 8);
  file.push_back(static_cast<std::uint8_t>(header.size() & 0xFF));
  file.push_back(static_cast<std::uint8_t>(header.size() >> 8));
  file.insert(file.end(), header.begin(), header.end());
  const std::uint8_t* src = static_cast<const std::uint8_t*>(data);
  if (bytes > 0) file.insert(file.end(), src, src + bytes);
  *out = std::move(file);
  return RNNCORE_OK;
}

}  // namespace

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------

const char* elem_type_name(ElemType type) {
  switch (type) {
    case ElemType::f16: return "F16";
    case ElemType::bf16: return "BF16";
    case ElemType::f32: return "F32";
    case ElemType::f64: return "F64";
    case ElemType::i8: return "I8";
    case ElemType::u8: return "U8";
    case ElemType::i16: return "I16";
    case ElemType::i32: return "I32";
    case ElemType::i64: return "I64";
    case ElemType::boolean: return "BOOL";
  }
  return "?";
}

std::size_t elem_type_size(ElemType type) {
  switch (type) {
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::boolean: return 1;
    case ElemType::f16:
    case ElemType::bf16:
    case ElemType::i16: return 2;
    case ElemType::f32:
    case ElemType::i32: return 4;
    case ElemType::f64:
    case ElemType::i64: return 8;
  }
  return 0;
}

bool elem_type_from_name(const std::string& name, ElemType* out) {
  for (unsigned i = 0; i <= static_cast<unsigned>(ElemType::boolean); ++i) {
    const ElemType type = static_cast<ElemType>(i);
    if (name == elem_type_name(type)) {
      if (out != nullptr) *out = type;
      return true;
    }
  }
  return false;
}

std::int64_t Array::elements() const {
  std::int64_t product = 1;
  bool zero = false;
  for (const std::int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim == 0) {
      zero = true;
      continue;
    }
    if (product > std::numeric_limits<std::int64_t>::max() / dim) return -1;
    product *= dim;
  }
  return zero ? 0 : product;
}

bool shape_byte_count(const std::int64_t* shape, std::size_t rank, ElemType type, std::uint64_t* bytes) {
  const std::uint64_t elem_size = elem_type_size(type);
  if (elem_size == 0 || (shape == nullptr && rank != 0)) return false;
  // The shape is checked against int64 on every platform (files mean the same everywhere); only a
  // non-empty array must also fit this platform's size_t.
  const std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  // Zero-sized dimensions are skipped so that the result does not depend on
  // the order of the dimensions: [0, 2^62, 2^62] is rejected like [2^62, 2^62, 0].
  std::uint64_t total = elem_size;
  bool zero = false;
  for (std::size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) return false;
    const std::uint64_t dim = static_cast<std::uint64_t>(shape[i]);
    if (dim == 0) {
      zero = true;
      continue;
    }
    if (total > limit / dim) return false;
    total *= dim;
  }
  if (!zero && total > static_cast<std::uint64_t>(std::numeric_limits<std::size_t>::max())) return false;
  if (bytes != nullptr) *bytes = zero ? 0 : total;
  return true;
}

std::string shape_to_string(const std::int64_t* shape, std::size_t rank) {
  std::string out = "[";
  for (std::size_t i = 0; i < rank && shape != nullptr; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

// ---------------------------------------------------------------------------
// Half-precision conversions (bit-exact, no reliance on compiler extensions)
// ---------------------------------------------------------------------------

// The library's exact conversions (src/shared/half.hpp), exposed for the readers' users.
float f16_to_f32(std::uint16_t bits) { return detail::f16_to_f32(bits); }
float bf16_to_f32(std::uint16_t bits) { return detail::bf16_to_f32(bits); }
std::uint16_t f32_to_f16(float value) { return detail::f32_to_f16(value); }
std::uint16_t f32_to_bf16(float value) { return detail::f32_to_bf16(value); }

// ---------------------------------------------------------------------------
// Converting copies
// ---------------------------------------------------------------------------

namespace {

// A converting copy into float or double: exact except f64 → f32 (rounded).
template <class T>
rnncore_status to_floats(const Array& array, std::vector<T>* out, const char* function) {
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: output is null", function);
  rnncore_status st = check_array(array, function);
  if (st != RNNCORE_OK) return st;
  const std::size_t count = array.bytes.size() / elem_type_size(array.type);
  const std::uint8_t* p = array.bytes.data();
  std::vector<T> result(count);
  switch (array.type) {
    case ElemType::f16:
      for (std::size_t i = 0; i < count; ++i) result[i] = f16_to_f32(load<std::uint16_t>(p + 2 * i));
      break;
    case ElemType::bf16:
      for (std::size_t i = 0; i < count; ++i) result[i] = bf16_to_f32(load<std::uint16_t>(p + 2 * i));
      break;
    case ElemType::f32:
      for (std::size_t i = 0; i < count; ++i) result[i] = load<float>(p + 4 * i);
      break;
    case ElemType::f64:
      for (std::size_t i = 0; i < count; ++i) {
        const double d = load<double>(p + 8 * i);
        result[i] = sizeof(T) == 4 ? static_cast<T>(double_to_float(d)) : static_cast<T>(d);
      }
      break;
    default:
      return detail::fail(RNNCORE_ERR_TENSOR_DTYPE, "%s: cannot convert a %s array to %s (expected F16, BF16, F32 or F64)",
                          function, elem_type_name(array.type), sizeof(T) == 4 ? "float" : "double");
  }
  *out = std::move(result);
  return RNNCORE_OK;
}

}  // namespace

rnncore_status to_f32(const Array& array, std::vector<float>* out) { return to_floats(array, out, "to_f32"); }
rnncore_status to_f64(const Array& array, std::vector<double>* out) { return to_floats(array, out, "to_f64"); }

rnncore_status to_i32(const Array& array, std::vector<std::int32_t>* out) {
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "to_i32: output is null");
  rnncore_status st = check_array(array, "to_i32");
  if (st != RNNCORE_OK) return st;
  const std::size_t size = elem_type_size(array.type);
  const std::size_t count = array.bytes.size() / size;
  const std::uint8_t* p = array.bytes.data();
  std::vector<std::int32_t> result;
  switch (array.type) {
    case ElemType::i8:
      result.resize(count);
      for (std::size_t i = 0; i < count; ++i) result[i] = load<std::int8_t>(p + i);
      break;
    case ElemType::u8:
      result.resize(count);
      for (std::size_t i = 0; i < count; ++i) result[i] = p[i];
      break;
    case ElemType::boolean:
      result.resize(count);
      for (std::size_t i = 0; i < count; ++i) result[i] = p[i] != 0 ? 1 : 0;
      break;
    case ElemType::i16:
      result.resize(count);
      for (std::size_t i = 0; i < count; ++i) result[i] = load<std::int16_t>(p + 2 * i);
      break;
    case ElemType::i32:
      result.resize(count);
      if (count > 0) std::memcpy(result.data(), p, count * sizeof(std::int32_t));
      break;
    case ElemType::i64:
      result.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        const std::int64_t value = load<std::int64_t>(p + 8 * i);
        if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()) {
          return detail::fail(RNNCORE_ERR_FORMAT, "to_i32: element %zu of the I64 array (%lld) does not fit in int32",
                              i, static_cast<long long>(value));
        }
        result[i] = static_cast<std::int32_t>(value);
      }
      break;
    default:
      return detail::fail(RNNCORE_ERR_TENSOR_DTYPE, "to_i32: cannot convert a %s array to int32 (expected an "
                          "integer or BOOL type)", elem_type_name(array.type));
  }
  *out = std::move(result);
  return RNNCORE_OK;
}

// ---------------------------------------------------------------------------
// .npy
// ---------------------------------------------------------------------------

rnncore_status parse_npy(const std::uint8_t* data, std::size_t size, const char* name_for_errors, Array* out) {
  const char* name = display_name(name_for_errors);
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: parse_npy: output is null", name);
  if (data == nullptr && size != 0) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: parse_npy: data is null", name);

  static const std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size > 0 && std::memcmp(data, kMagic, std::min<std::size_t>(size, 6)) != 0) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: not a .npy file (it does not start with \\x93NUMPY)", name);
  }
  if (size < 10) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: truncated .npy file: %zu bytes, shorter than the 10-byte preamble",
                        name, size);
  }
  const unsigned major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)",
                        name, major, minor);
  }
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4.
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = 8 + length_bytes;
  if (size < preamble) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: truncated .npy file: %zu bytes, shorter than the %zu-byte preamble",
                        name, size, preamble);
  }
  std::uint64_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) header_length |= static_cast<std::uint64_t>(data[8 + i]) << (8 * i);
  if (header_length > size - preamble) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: header length %llu exceeds the %zu bytes after the preamble", name,
                        static_cast<unsigned long long>(header_length), size - preamble);
  }

  NpyHeader header;
  NpyHeaderParser parser(reinterpret_cast<const char*>(data + preamble), static_cast<std::size_t>(header_length),
                         name);
  rnncore_status st = parser.parse(&header);
  if (st != RNNCORE_OK) return st;
  ElemType type = ElemType::f32;
  bool swap = false;
  st = decode_descr(header.descr, name, &type, &swap);
  if (st != RNNCORE_OK) return st;

  const std::string shape_text = shape_to_string(header.shape.data(), header.shape.size());
  if (header.fortran_order) {
    // Column-major data has the same byte layout as row-major when at most one
    // dimension is longer than 1; anything else would need a transpose.
    const auto long_dims = std::count_if(header.shape.begin(), header.shape.end(),
                                         [](std::int64_t d) { return d > 1; });
    const bool empty = std::find(header.shape.begin(), header.shape.end(), 0) != header.shape.end();
    if (long_dims > 1 && !empty) {
      return detail::fail(RNNCORE_ERR_FORMAT,
                          "%s: fortran_order True (column-major) is not supported for shape %s; "
                          "save np.ascontiguousarray(a) instead", name, shape_text.c_str());
    }
  }
  std::uint64_t byte_count = 0;
  if (!shape_byte_count(header.shape.data(), header.shape.size(), type, &byte_count)) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: shape %s x %s is too large (its byte count overflows)", name,
                        shape_text.c_str(), elem_type_name(type));
  }
  const std::size_t data_start = preamble + static_cast<std::size_t>(header_length);
  const std::size_t available = size - data_start;
  if (byte_count > available) {
    return detail::fail(RNNCORE_ERR_FORMAT, "%s: header declares %llu bytes of data but the file has %zu", name,
                        static_cast<unsigned long long>(byte_count), available);
  }
  if (byte_count < available) {
    return detail::fail(RNNCORE_ERR_FORMAT,
                        "%s: header declares %llu bytes of data but the file has %zu (%llu trailing bytes)", name,
                        static_cast<unsigned long long>(byte_count), available,
                        static_cast<unsigned long long>(available - byte_count));
  }
  Array result;
  result.type = type;
  result.shape = std::move(header.shape);
  result.bytes.assign(data + data_start, data + size);
  if (swap) byte_swap_elements(&result.bytes, elem_type_size(type));
  *out = std::move(result);
  return RNNCORE_OK;
}

rnncore_status read_npy(const char* path, Array* out) {
  std::vector<std::uint8_t> bytes;
  rnncore_status st = read_file_bytes(path, &bytes);
  if (st != RNNCORE_OK) return st;
  return parse_npy(bytes.data(), bytes.size(), path, out);
}

rnncore_status encode_npy(ElemType type, const std::int64_t* shape, int rank, const void* data,
                          std::vector<std::uint8_t>* out) {
  return encode_npy_named("encode_npy", type, shape, rank, data, out);
}

rnncore_status write_npy(const char* path, ElemType type, const std::int64_t* shape, int rank, const void* data) {
  if (path == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "write_npy: path is null");
  std::vector<std::uint8_t> file;
  rnncore_status st = encode_npy_named(path, type, shape, rank, data, &file);
  if (st != RNNCORE_OK) return st;
  return write_file_bytes(path, file.data(), file.size());
}

}  // namespace io
}  // namespace rnncore

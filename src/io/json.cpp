// rnncore — JSON reading (nlohmann/json's parser, with source offsets), escaping and shared file
// helpers (see json.hpp).
#include "json.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

namespace rnncore {
namespace io {
namespace {

const char* display_name(const char* name) { return (name != nullptr && *name != '\0') ? name : "<input>"; }

/// Length of the well-formed UTF-8 sequence starting at s[0], or 0 if it is
/// not one (RFC 3629 table: rejects overlongs, surrogates and > U+10FFFF).
std::size_t utf8_sequence_length(const unsigned char* s, std::size_t avail) {
  if (avail == 0) return 0;
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c == 0xE0) {
    len = 3, lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    len = 3;
  } else if (c == 0xED) {
    len = 3, hi = 0x9F;  // excludes UTF-16 surrogates
  } else if (c == 0xF0) {
    len = 4, lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    len = 4;
  } else if (c == 0xF4) {
    len = 4, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (avail < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i) {
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  }
  return len;
}

// nlohmann's lexer reads the text through this iterator, which records how far it has read: the
// SAX events below use that to find the source offset of each value (nlohmann's DOM keeps none).
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** read_up_to) : p_(p), read_up_to_(read_up_to) {}
  reference operator*() const { return *p_; }
  TrackingIterator& operator++() {
    *read_up_to_ = ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** read_up_to_;
};

bool is_token_char(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.';
}

// Builds a JsonValue tree from nlohmann's SAX events, with source offsets, depth limit and
// duplicate-key check; the first problem stops the parse and is kept in message_/error_offset_.
class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  TreeBuilder(const char* text, std::size_t size, const char** read_up_to, const JsonParseOptions& options)
      : text_(text), size_(size), read_up_to_(read_up_to), options_(options) {}

  bool null() override { return leaf(JsonValue::Kind::null); }
  bool boolean(bool v) override {
    JsonValue j = make(JsonValue::Kind::boolean);
    j.boolean = v;
    return add(std::move(j));
  }
  bool number_integer(number_integer_t v) override {
    JsonValue j = make(JsonValue::Kind::number);
    j.number = v == 0 && text_[j.offset] == '-' ? -0.0 : static_cast<double>(v);  // "-0" keeps its sign
    j.is_integer = true;
    j.integer = v;
    return add(std::move(j));
  }
  bool number_unsigned(number_unsigned_t v) override {
    JsonValue j = make(JsonValue::Kind::number);
    j.number = static_cast<double>(v);
    j.is_integer = v <= static_cast<number_unsigned_t>(INT64_MAX);
    j.integer = j.is_integer ? static_cast<std::int64_t>(v) : 0;
    return add(std::move(j));
  }
  bool number_float(number_float_t v, const string_t& literal) override {
    JsonValue j = make(JsonValue::Kind::number);
    if (!std::isfinite(v)) return stop(j.offset, "number " + literal + " is too large for a double");
    j.number = v;
    return add(std::move(j));
  }
  bool string(string_t& v) override {
    JsonValue j = make(JsonValue::Kind::string);
    j.text = std::move(v);
    return add(std::move(j));
  }
  bool binary(binary_t&) override { return stop(read_offset(), "binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(JsonValue::Kind::object); }
  bool start_array(std::size_t) override { return open(JsonValue::Kind::array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    const std::size_t at = token_start();
    if (!options_.allow_duplicate_keys) {
      const auto inserted = f.keys.emplace(k, at);
      if (!inserted.second) {
        const JsonLocation first = json_location(text_, size_, inserted.first->second);
        return stop(at, "duplicate key '" + printable_excerpt(k) + "' (first defined at " + std::to_string(first.line) +
                            ":" + std::to_string(first.column) + ")");
      }
    }
    f.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 4: what" → "what", plus a hint.
    std::string what = ex.what();
    const std::size_t column = what.find("column");
    if (column != std::string::npos && what.find(": ", column) != std::string::npos) {
      what = what.substr(what.find(": ", column) + 2);
    } else if (!what.empty() && what[0] == '[' && what.find("] ") != std::string::npos) {
      what = what.substr(what.find("] ") + 2);
    }
    // The problem is at the last character read (nlohmann counts one past it), at the end of the
    // input, or at the start of the token it names.
    std::size_t at = std::min(position > 0 ? position - 1 : 0, size_);
    if (what.find("end of input;") != std::string::npos) at = size_;
    const std::size_t quote = what.find("unexpected '");
    if (quote != std::string::npos && quote + 13 < what.size() && what[quote + 13] == '\'' && size_ > 0) {
      std::size_t p = std::min(at, size_ - 1);
      while (p > 0 && text_[p] != what[quote + 12]) --p;
      if (text_[p] == what[quote + 12]) at = p;
    } else if (what.find("unexpected string literal") != std::string::npos && at < size_ && text_[at] == '"') {
      at = string_start(at);
    }
    const unsigned char c = at < size_ ? static_cast<unsigned char>(text_[at]) : 0;
    if (c == '\'') what += " (JSON strings are enclosed in double quotes)";
    if (c == '/') what += " (comments are not allowed in JSON)";
    if (what.find("invalid literal") != std::string::npos && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      what += " (JSON literals are true, false and null)";
    if (c == '}' || c == ']') {
      std::size_t p = at;
      while (p > 0 && std::strchr(" \t\r\n", text_[p - 1]) != nullptr) --p;
      if (p > 0 && text_[p - 1] == ',') what += " (trailing comma)";
    }
    return stop(at, what);
  }

  JsonValue take_root() { return std::move(root_); }
  std::size_t error_offset() const { return error_offset_; }
  const std::string& message() const { return message_; }

 private:
  struct Frame {
    JsonValue value;
    std::string key;                           // pending member name (objects)
    std::map<std::string, std::size_t> keys;   // name → offset, for duplicate detection
  };

  std::size_t read_offset() const { return static_cast<std::size_t>(*read_up_to_ - text_); }

  // Offset of the scalar token the lexer has just read: back over the one-character lookahead a
  // number leaves behind, then to the token's first character.
  std::size_t token_start() const {
    std::size_t end = read_offset();
    while (end > 0 && std::strchr(" \t\r\n,:]}", text_[end - 1]) != nullptr) --end;
    if (end == 0) return 0;
    std::size_t p = end - 1;
    if (text_[p] == '"') return string_start(p);
    while (p > 0 && is_token_char(static_cast<unsigned char>(text_[p - 1]))) --p;
    return p;
  }

  // Offset of the opening quote of the string whose closing quote is at `close`.
  std::size_t string_start(std::size_t close) const {
    std::size_t p = close;
    while (p > 0) {
      --p;
      if (text_[p] != '"') continue;
      std::size_t slashes = 0;
      while (p > slashes && text_[p - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) break;
    }
    return p;
  }

  JsonValue make(JsonValue::Kind kind) const {
    JsonValue j;
    j.kind = kind;
    j.offset = token_start();
    return j;
  }
  bool leaf(JsonValue::Kind kind) { return add(make(kind)); }

  bool open(JsonValue::Kind kind) {
    const std::size_t at = read_offset() - 1;  // just after '{' or '['
    if (static_cast<int>(stack_.size()) >= options_.max_depth)
      return stop(at, "arrays and objects nested deeper than " + std::to_string(options_.max_depth) + " levels");
    stack_.emplace_back();
    stack_.back().value.kind = kind;
    stack_.back().value.offset = at;
    return true;
  }
  bool close() {
    JsonValue done = std::move(stack_.back().value);
    stack_.pop_back();
    return add(std::move(done));
  }
  bool add(JsonValue v) {
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back().value.kind == JsonValue::Kind::array) {
      stack_.back().value.items.push_back(std::move(v));
    } else {
      stack_.back().value.members.emplace_back(std::move(stack_.back().key), std::move(v));
    }
    return true;
  }
  bool stop(std::size_t at, const std::string& what) {
    if (message_.empty()) {
      error_offset_ = at;
      message_ = what;
    }
    return false;
  }

  const char* text_;
  std::size_t size_;
  const char** read_up_to_;
  JsonParseOptions options_;
  std::vector<Frame> stack_;
  JsonValue root_;
  std::size_t error_offset_ = 0;
  std::string message_;
};

}  // namespace

const JsonValue* JsonValue::get(const char* key) const {
  if (kind != Kind::object || key == nullptr) return nullptr;
  for (const auto& member : members) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

const char* json_kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::null: return "null";
    case JsonValue::Kind::boolean: return "boolean";
    case JsonValue::Kind::number: return "number";
    case JsonValue::Kind::string: return "string";
    case JsonValue::Kind::array: return "array";
    case JsonValue::Kind::object: return "object";
  }
  return "?";
}

rnncore_status parse_json(const char* text, std::size_t size, const char* name_for_errors, JsonValue* out,
                          const JsonParseOptions& options) {
  const char* name = display_name(name_for_errors);
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: parse_json: output is null", name);
  if (text == nullptr && size != 0) {
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: parse_json: text is null", name);
  }
  static const char empty[1] = {'\0'};
  if (text == nullptr) text = empty;
  const char* read_up_to = text;
  TreeBuilder builder(text, size, &read_up_to, options);
  const bool ok = nlohmann::json::sax_parse(TrackingIterator(text, &read_up_to), TrackingIterator(text + size, &read_up_to),
                                            &builder);
  // nlohmann's lexer takes a NUL byte for the end of the input; anything after it is not JSON.
  if (ok && builder.message().empty() && read_up_to != text + size) {
    const std::size_t at = static_cast<std::size_t>(read_up_to - text) - 1;
    const JsonLocation loc = json_location(text, size, at);
    return detail::fail(RNNCORE_ERR_FORMAT, "%s:%zu:%zu: unexpected byte 0x00 after the JSON value", name, loc.line,
                        loc.column);
  }
  if (!ok || !builder.message().empty()) {
    const JsonLocation loc = json_location(text, size, builder.error_offset());
    return detail::fail(RNNCORE_ERR_FORMAT, "%s:%zu:%zu: %s", name, loc.line, loc.column,
                        builder.message().empty() ? "invalid JSON" : builder.message().c_str());
  }
  *out = builder.take_root();
  return RNNCORE_OK;
}

rnncore_status read_json_file(const char* path, JsonValue* out, std::string* text_out,
                              const JsonParseOptions& options) {
  std::vector<std::uint8_t> bytes;
  rnncore_status st = read_file_bytes(path, &bytes);
  if (st != RNNCORE_OK) return st;
  const char* text = reinterpret_cast<const char*>(bytes.data());
  st = parse_json(text, bytes.size(), path, out, options);
  if (text_out != nullptr) text_out->assign(text, bytes.size());
  return st;
}

JsonLocation json_location(const char* text, std::size_t size, std::size_t offset) {
  JsonLocation loc;
  if (text == nullptr) return loc;
  const std::size_t end = std::min(offset, size);
  for (std::size_t i = 0; i < end; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++loc.line;
      loc.column = 1;
    } else if ((c & 0xC0) != 0x80) {  // continuation bytes belong to the previous character
      ++loc.column;
    }
  }
  return loc;
}

void json_escape(const std::string& in, std::string* out) {
  const std::string quoted = nlohmann::json(in).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out->append(quoted, 1, quoted.size() - 2);
}

bool is_valid_utf8(const char* s, std::size_t size) {
  if (s == nullptr) return size == 0;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s);
  std::size_t i = 0;
  while (i < size) {
    const std::size_t len = utf8_sequence_length(p + i, size - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string printable_excerpt(const char* s, std::size_t size, std::size_t max_chars) {
  std::string out;
  if (s == nullptr) return out;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s);
  std::size_t i = 0, chars = 0;
  while (i < size) {
    if (chars == max_chars) {
      out.append("...");
      break;
    }
    const unsigned char c = p[i];
    const std::size_t len = utf8_sequence_length(p + i, size - i);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else if (len > 1) {
      out.append(s + i, len);
    } else {
      const char* named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : nullptr;
      if (named != nullptr) {
        out.append(named);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
        out.append(buf);
      }
    }
    i += len > 1 ? len : 1;
    ++chars;
  }
  return out;
}

std::string printable_excerpt(const std::string& s, std::size_t max_chars) {
  return printable_excerpt(s.data(), s.size(), max_chars);
}

rnncore_status read_file_bytes(const char* path, std::vector<std::uint8_t>* out) {
  if (path == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "read_file_bytes: path is null");
  if (out == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: read_file_bytes: output is null", path);
  std::FILE* file = std::fopen(path, "rb");
  if (file == nullptr) {
    return detail::fail(RNNCORE_ERR_IO, "%s: cannot open for reading: %s", path, std::strerror(errno));
  }
  // The size from seeking is only a hint: the file may change, be a pipe, or be
  // a directory (whose "size" can be huge). So the first read uses a small
  // buffer, which fails on a directory, and only then does the buffer grow to
  // the hint; past it, it doubles until EOF.
  const std::size_t first_chunk = 1 << 16;
  std::size_t hint = 0;
  if (std::fseek(file, 0, SEEK_END) == 0) {
    const long end = std::ftell(file);
    if (end > 0) hint = static_cast<std::size_t>(end);
  }
  std::rewind(file);
  std::vector<std::uint8_t> buffer(hint < first_chunk ? hint + 1 : first_chunk);
  std::size_t used = 0;
  for (;;) {
    used += std::fread(buffer.data() + used, 1, buffer.size() - used, file);
    if (used < buffer.size()) break;  // EOF or error, told apart below
    buffer.resize(hint >= buffer.size() ? hint + 1 : buffer.size() * 2);
  }
  const bool failed = std::ferror(file) != 0;
  const int saved_errno = errno;
  std::fclose(file);
  if (failed) return detail::fail(RNNCORE_ERR_IO, "%s: read error: %s", path, std::strerror(saved_errno));
  buffer.resize(used);
  buffer.shrink_to_fit();
  *out = std::move(buffer);
  return RNNCORE_OK;
}

rnncore_status write_file_bytes(const char* path, const void* data, std::size_t size) {
  if (path == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "write_file_bytes: path is null");
  if (data == nullptr && size != 0) {
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: write_file_bytes: data is null", path);
  }
  std::FILE* file = std::fopen(path, "wb");
  if (file == nullptr) {
    return detail::fail(RNNCORE_ERR_IO, "%s: cannot open for writing: %s", path, std::strerror(errno));
  }
  bool ok = size == 0 || std::fwrite(data, 1, size, file) == size;
  int saved_errno = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(path);
    return detail::fail(RNNCORE_ERR_IO, "%s: write error: %s", path, std::strerror(saved_errno));
  }
  return RNNCORE_OK;
}

}  // namespace io
}  // namespace rnncore

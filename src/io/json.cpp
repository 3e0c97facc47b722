// rnncore — JSON reader, escaping and shared file helpers (see json.hpp).
#include "json.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace rnncore {
namespace io {
namespace {

const char* display_name(const char* name) { return (name != nullptr && *name != '\0') ? name : "<input>"; }

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

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

void append_utf8(std::uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Recursive-descent parser over an untrusted byte range. Every access goes
/// through at_end()/peek(), which never look past `size_`.
class JsonParser {
 public:
  JsonParser(const char* text, std::size_t size, const char* name, const JsonParseOptions& options)
      : text_(reinterpret_cast<const unsigned char*>(text)), size_(size), name_(name), options_(options) {}

  rnncore_status parse_document(JsonValue* out) {
    // A UTF-8 byte-order mark is not JSON, but editors on some systems add one.
    if (size_ >= 3 && text_[0] == 0xEF && text_[1] == 0xBB && text_[2] == 0xBF) pos_ = 3;
    rnncore_status st = parse_value(out, 0);
    if (st != RNNCORE_OK) return st;
    skip_whitespace();
    if (!at_end()) {
      return error_at(pos_, "unexpected %s after the JSON value", describe(pos_).c_str());
    }
    return RNNCORE_OK;
  }

 private:
  bool at_end() const { return pos_ >= size_; }
  unsigned char peek() const { return text_[pos_]; }  // only after !at_end()

  void skip_whitespace() {
    while (!at_end()) {
      const unsigned char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  rnncore_status error_at(std::size_t offset, const char* fmt, ...) const {
    char message[256];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    const JsonLocation loc = json_location(reinterpret_cast<const char*>(text_), size_, offset);
    return detail::fail(RNNCORE_ERR_FORMAT, "%s:%zu:%zu: %s", name_, loc.line, loc.column, message);
  }

  /// Human-readable description of what sits at `offset`: "end of input",
  /// "'x'", "'“'" (a whole UTF-8 character) or "byte 0xff".
  std::string describe(std::size_t offset) const {
    if (offset >= size_) return "end of input";
    const unsigned char c = text_[offset];
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    const std::size_t len = utf8_sequence_length(text_ + offset, size_ - offset);
    if (len > 1) return "'" + std::string(reinterpret_cast<const char*>(text_ + offset), len) + "'";
    char buf[32];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  rnncore_status parse_value(JsonValue* out, int depth) {
    skip_whitespace();
    out->offset = pos_;
    if (at_end()) return error_at(pos_, "unexpected end of input; expected a value");
    const unsigned char c = peek();
    switch (c) {
      case '{':
        return parse_object(out, depth + 1);
      case '[':
        return parse_array(out, depth + 1);
      case '"':
        out->kind = JsonValue::Kind::string;
        return parse_string(&out->text);
      case '\'':
        return error_at(pos_, "strings must be enclosed in double quotes");
      case '/':
        return error_at(pos_, "comments are not allowed in JSON");
      default:
        break;
    }
    if (c == '-' || is_digit(c)) return parse_number(out);
    if (is_alpha(c)) return parse_literal(out);
    return error_at(pos_, "expected a value, found %s", describe(pos_).c_str());
  }

  rnncore_status parse_literal(JsonValue* out) {
    const std::size_t start = pos_;
    while (!at_end() && (is_alpha(peek()) || is_digit(peek()) || peek() == '_')) ++pos_;
    const std::size_t len = pos_ - start;
    const char* word = reinterpret_cast<const char*>(text_ + start);
    if (len == 4 && std::memcmp(word, "true", 4) == 0) {
      out->kind = JsonValue::Kind::boolean;
      out->boolean = true;
    } else if (len == 5 && std::memcmp(word, "false", 5) == 0) {
      out->kind = JsonValue::Kind::boolean;
      out->boolean = false;
    } else if (len == 4 && std::memcmp(word, "null", 4) == 0) {
      out->kind = JsonValue::Kind::null;
    } else {
      return error_at(start, "invalid literal '%s' (JSON literals are true, false and null)",
                      printable_excerpt(word, len, 24).c_str());
    }
    return RNNCORE_OK;
  }

  rnncore_status check_depth(int depth) const {
    if (depth > options_.max_depth) {
      return error_at(pos_, "arrays and objects nested deeper than %d levels", options_.max_depth);
    }
    return RNNCORE_OK;
  }

  rnncore_status parse_array(JsonValue* out, int depth) {
    rnncore_status st = check_depth(depth);
    if (st != RNNCORE_OK) return st;
    out->kind = JsonValue::Kind::array;
    ++pos_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return RNNCORE_OK;
    }
    for (;;) {
      skip_whitespace();
      if (!at_end() && peek() == ']' && !out->items.empty()) {
        return error_at(pos_, "trailing comma before ']' is not allowed");
      }
      out->items.emplace_back();
      st = parse_value(&out->items.back(), depth);
      if (st != RNNCORE_OK) return st;
      skip_whitespace();
      if (at_end()) return error_at(pos_, "unexpected end of input; expected ',' or ']' after array element");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return RNNCORE_OK;
      }
      return error_at(pos_, "expected ',' or ']' after array element, found %s", describe(pos_).c_str());
    }
  }

  rnncore_status parse_object(JsonValue* out, int depth) {
    rnncore_status st = check_depth(depth);
    if (st != RNNCORE_OK) return st;
    out->kind = JsonValue::Kind::object;
    ++pos_;  // '{'
    std::vector<std::size_t> key_offsets;  // for duplicate-key messages
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return RNNCORE_OK;
    }
    for (;;) {
      skip_whitespace();
      if (at_end()) return error_at(pos_, "unexpected end of input; expected a string key");
      if (peek() != '"') {
        if (peek() == '}' && !out->members.empty()) {
          return error_at(pos_, "trailing comma before '}' is not allowed");
        }
        return error_at(pos_, "expected a string key in double quotes, found %s", describe(pos_).c_str());
      }
      key_offsets.push_back(pos_);
      out->members.emplace_back();
      std::pair<std::string, JsonValue>& member = out->members.back();
      st = parse_string(&member.first);
      if (st != RNNCORE_OK) return st;
      skip_whitespace();
      if (at_end() || peek() != ':') {
        return error_at(pos_, "expected ':' after object key, found %s", describe(pos_).c_str());
      }
      ++pos_;
      st = parse_value(&member.second, depth);
      if (st != RNNCORE_OK) return st;
      skip_whitespace();
      if (at_end()) return error_at(pos_, "unexpected end of input; expected ',' or '}' after object member");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        break;
      }
      return error_at(pos_, "expected ',' or '}' after object member, found %s", describe(pos_).c_str());
    }
    return options_.allow_duplicate_keys ? RNNCORE_OK : check_duplicate_keys(*out, key_offsets);
  }

  /// Sorting keeps this O(n log n): safetensors headers may hold many members.
  rnncore_status check_duplicate_keys(const JsonValue& object, const std::vector<std::size_t>& key_offsets) const {
    const auto& members = object.members;
    if (members.size() < 2) return RNNCORE_OK;
    std::vector<std::size_t> order(members.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return members[a].first < members[b].first; });
    // Report the repeat that comes first in the document.
    std::size_t best_repeat = members.size(), best_first = 0;
    for (std::size_t i = 1; i < order.size(); ++i) {
      if (members[order[i]].first == members[order[i - 1]].first && order[i] < best_repeat) {
        std::size_t first = i - 1;
        while (first > 0 && members[order[first - 1]].first == members[order[i]].first) --first;
        best_repeat = order[i];
        best_first = order[first];
      }
    }
    if (best_repeat == members.size()) return RNNCORE_OK;
    const JsonLocation first =
        json_location(reinterpret_cast<const char*>(text_), size_, key_offsets[best_first]);
    return error_at(key_offsets[best_repeat], "duplicate key '%s' (first defined at %zu:%zu)",
                    printable_excerpt(members[best_repeat].first).c_str(), first.line, first.column);
  }

  rnncore_status parse_hex4(std::size_t escape_start, std::uint32_t* out) {
    if (size_ - pos_ < 4) return error_at(escape_start, "\\u escape needs 4 hex digits");
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const int digit = hex_value(text_[pos_ + static_cast<std::size_t>(i)]);
      if (digit < 0) return error_at(escape_start, "\\u escape needs 4 hex digits");
      value = (value << 4) | static_cast<std::uint32_t>(digit);
    }
    pos_ += 4;
    *out = value;
    return RNNCORE_OK;
  }

  rnncore_status parse_escape(std::string* out) {
    const std::size_t escape_start = pos_;
    ++pos_;  // '\'
    if (at_end()) return error_at(escape_start, "unterminated escape sequence");
    const unsigned char c = peek();
    ++pos_;
    switch (c) {
      case '"': out->push_back('"'); return RNNCORE_OK;
      case '\\': out->push_back('\\'); return RNNCORE_OK;
      case '/': out->push_back('/'); return RNNCORE_OK;
      case 'b': out->push_back('\b'); return RNNCORE_OK;
      case 'f': out->push_back('\f'); return RNNCORE_OK;
      case 'n': out->push_back('\n'); return RNNCORE_OK;
      case 'r': out->push_back('\r'); return RNNCORE_OK;
      case 't': out->push_back('\t'); return RNNCORE_OK;
      case 'u': break;
      default: {
        const std::size_t at = pos_ - 1;
        const std::size_t len = std::max<std::size_t>(1, utf8_sequence_length(text_ + at, size_ - at));
        return error_at(escape_start, "invalid escape '\\%s' in string",
                        printable_excerpt(reinterpret_cast<const char*>(text_ + at), len, 1).c_str());
      }
    }
    std::uint32_t cp = 0;
    rnncore_status st = parse_hex4(escape_start, &cp);
    if (st != RNNCORE_OK) return st;
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return error_at(escape_start, "unpaired UTF-16 low surrogate \\u%04X", static_cast<unsigned>(cp));
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate must be followed immediately by an escaped low one.
      std::uint32_t low = 0;
      if (size_ - pos_ < 2 || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') {
        return error_at(escape_start, "unpaired UTF-16 high surrogate \\u%04X", static_cast<unsigned>(cp));
      }
      const std::size_t low_start = pos_;
      pos_ += 2;
      st = parse_hex4(low_start, &low);
      if (st != RNNCORE_OK) return st;
      if (low < 0xDC00 || low > 0xDFFF) {
        return error_at(escape_start, "UTF-16 high surrogate \\u%04X is not followed by a low surrogate",
                        static_cast<unsigned>(cp));
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(cp, out);
    return RNNCORE_OK;
  }

  rnncore_status parse_string(std::string* out) {
    const std::size_t start = pos_;
    ++pos_;  // opening quote
    for (;;) {
      if (at_end()) return error_at(start, "unterminated string");
      // Copy a run of plain ASCII in one go.
      std::size_t run = pos_;
      while (run < size_) {
        const unsigned char c = text_[run];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out->append(reinterpret_cast<const char*>(text_ + pos_), run - pos_);
      pos_ = run;
      if (at_end()) return error_at(start, "unterminated string");
      const unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return RNNCORE_OK;
      }
      if (c == '\\') {
        rnncore_status st = parse_escape(out);
        if (st != RNNCORE_OK) return st;
        continue;
      }
      if (c < 0x20) {
        if (c == '\n') return error_at(pos_, "unterminated string (strings cannot span lines; use \\n)");
        return error_at(pos_, "unescaped control character U+%04X in string", static_cast<unsigned>(c));
      }
      const std::size_t len = utf8_sequence_length(text_ + pos_, size_ - pos_);
      if (len == 0) return error_at(pos_, "invalid UTF-8 (byte 0x%02x) in string", static_cast<unsigned>(c));
      out->append(reinterpret_cast<const char*>(text_ + pos_), len);
      pos_ += len;
    }
  }

  std::size_t skip_digits() {
    const std::size_t start = pos_;
    while (!at_end() && is_digit(peek())) ++pos_;
    return pos_ - start;
  }

  rnncore_status parse_number(JsonValue* out) {
    const std::size_t start = pos_;
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
    }
    if (at_end() || !is_digit(peek())) return error_at(pos_, "expected a digit after '-'");
    const std::size_t int_start = pos_;
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && is_digit(peek())) return error_at(int_start, "numbers cannot have leading zeros");
    } else {
      skip_digits();
    }
    const std::size_t int_digits = pos_ - int_start;
    std::size_t frac_start = pos_, frac_digits = 0;
    bool integral = true;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      frac_start = pos_;
      frac_digits = skip_digits();
      if (frac_digits == 0) return error_at(pos_, "expected a digit after the decimal point");
    }
    std::int64_t exponent = 0;  // saturated; only used to classify out-of-range values
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      bool exponent_negative = false;
      if (!at_end() && (peek() == '+' || peek() == '-')) {
        exponent_negative = peek() == '-';
        ++pos_;
      }
      if (at_end() || !is_digit(peek())) return error_at(pos_, "expected a digit in the exponent");
      while (!at_end() && is_digit(peek())) {
        if (exponent < 1000000000) exponent = exponent * 10 + (peek() - '0');
        ++pos_;
      }
      if (exponent_negative) exponent = -exponent;
    }
    // "1.2.3", "0x10", "12abc": say the whole token is a bad number rather than
    // complaining about a missing comma.
    if (!at_end() && (is_alpha(peek()) || is_digit(peek()) || peek() == '.' || peek() == '_')) {
      std::size_t end = pos_;
      while (end < size_ && (is_alpha(text_[end]) || is_digit(text_[end]) || text_[end] == '.' ||
                             text_[end] == '_' || text_[end] == '+' || text_[end] == '-')) {
        ++end;
      }
      return error_at(start, "invalid number '%s'",
                      printable_excerpt(reinterpret_cast<const char*>(text_ + start), end - start, 32).c_str());
    }

    const char* first = reinterpret_cast<const char*>(text_ + start);
    const char* last = reinterpret_cast<const char*>(text_ + pos_);
    out->kind = JsonValue::Kind::number;
    double value = 0.0;
    const std::from_chars_result parsed = std::from_chars(first, last, value, std::chars_format::general);
    if (parsed.ec == std::errc::result_out_of_range) {
      // Decimal exponent of the leading significant digit decides overflow
      // versus underflow (out of range only happens beyond ~1e308 / ~1e-324).
      std::int64_t leading = 0;
      bool found = false;
      for (std::size_t i = 0; i < int_digits && !found; ++i) {
        if (text_[int_start + i] != '0') {
          leading = static_cast<std::int64_t>(int_digits - i) - 1;
          found = true;
        }
      }
      for (std::size_t i = 0; i < frac_digits && !found; ++i) {
        if (text_[frac_start + i] != '0') {
          leading = -static_cast<std::int64_t>(i) - 1;
          found = true;
        }
      }
      if (leading + exponent > 0) {
        return error_at(start, "number %s is too large for a double",
                        printable_excerpt(first, static_cast<std::size_t>(last - first), 32).c_str());
      }
      value = negative ? -0.0 : 0.0;
    } else if (parsed.ec != std::errc() || parsed.ptr != last) {
      return error_at(start, "invalid number");  // unreachable after the grammar check above
    }
    out->number = value;
    out->is_integer = false;
    if (integral) {
      std::int64_t exact = 0;
      const std::from_chars_result as_int = std::from_chars(first, last, exact);
      if (as_int.ec == std::errc() && as_int.ptr == last) {
        out->is_integer = true;
        out->integer = exact;
      }
    }
    return RNNCORE_OK;
  }

  const unsigned char* text_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const char* name_;
  JsonParseOptions options_;
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
  JsonParser parser(text != nullptr ? text : empty, size, name, options);
  JsonValue result;
  const rnncore_status st = parser.parse_document(&result);
  if (st != RNNCORE_OK) return st;
  *out = std::move(result);
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
  static const char hex[] = "0123456789abcdef";
  for (const char ch : in) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(hex[c >> 4]);
          out->push_back(hex[c & 0xF]);
        } else {
          out->push_back(ch);
        }
    }
  }
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

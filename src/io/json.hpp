// rnncore — host-side file formats: a small, bounds-checked JSON reader.
//
// The JSON DOM below is used for safetensors headers and for user-written
// configuration files, so every error names the input, the line and the column
// (e.g. "config.json:3:17: expected ',' or '}' after object member").
// Nothing here throws; every function returns an rnncore_status and, on failure,
// records a one-line detail through rnncore::detail::fail.
#ifndef RNNCORE_SRC_IO_JSON_HPP
#define RNNCORE_SRC_IO_JSON_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rnncore/status.h"

namespace rnncore {
namespace detail {
/// Records the detail line of the current failure (printf-style, truncated to
/// 255 chars) and returns `code`. Implemented in src/status.cpp.
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
rnncore_status fail(rnncore_status code, const char* fmt, ...);
}  // namespace detail

namespace io {

/// One JSON value. Only the fields that belong to `kind` are meaningful.
struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind = Kind::null;
  bool boolean = false;      ///< Kind::boolean
  double number = 0.0;       ///< Kind::number: the value, rounded to nearest double
  bool is_integer = false;   ///< Kind::number: written without '.'/exponent and fits int64
  std::int64_t integer = 0;  ///< Kind::number with is_integer: the exact value
  std::string text;          ///< Kind::string: decoded UTF-8
  std::vector<JsonValue> items;                             ///< Kind::array
  std::vector<std::pair<std::string, JsonValue>> members;   ///< Kind::object, in source order
  std::size_t offset = 0;    ///< byte offset of the value in the source (see json_location)

  /// First member named `key`, or nullptr when absent or when this is not an object.
  const JsonValue* get(const char* key) const;
};

/// Lower-case name of a kind ("null", "boolean", "number", "string", "array", "object").
const char* json_kind_name(JsonValue::Kind kind);

/// Knobs of parse_json.
struct JsonParseOptions {
  int max_depth = 64;                 ///< deeper nesting of arrays/objects is a format error
  bool allow_duplicate_keys = false;  ///< false: a key repeated within one object is a format error
};

/// Parses `size` bytes of UTF-8 JSON text (RFC 8259; one leading UTF-8 BOM is
/// skipped). `name_for_errors` (may be null) prefixes error details, which read
/// "name:line:column: problem". Returns RNNCORE_ERR_FORMAT for malformed input.
/// `*out` is written only on success.
rnncore_status parse_json(const char* text, std::size_t size, const char* name_for_errors, JsonValue* out,
                          const JsonParseOptions& options = JsonParseOptions());

/// Reads and parses a JSON file. When `text_out` is not null it receives the file
/// contents so that callers can turn JsonValue::offset into line:column.
/// Returns RNNCORE_ERR_IO when the file cannot be read.
rnncore_status read_json_file(const char* path, JsonValue* out, std::string* text_out = nullptr,
                              const JsonParseOptions& options = JsonParseOptions());

/// 1-based line and column (counted in UTF-8 characters) of a byte offset.
struct JsonLocation {
  std::size_t line = 1;
  std::size_t column = 1;
};

/// Location of byte `offset` of `text` (offsets past the end are clamped).
JsonLocation json_location(const char* text, std::size_t size, std::size_t offset);

/// Appends `in` to `*out` escaped for use between the double quotes of a JSON
/// string literal (quotes not included). `in` should be valid UTF-8.
void json_escape(const std::string& in, std::string* out);

/// True when `size` bytes at `s` are well-formed UTF-8 (no overlongs, no
/// surrogates, nothing above U+10FFFF).
bool is_valid_utf8(const char* s, std::size_t size);

/// A short, single-line rendering of untrusted text for error details: control
/// characters and invalid UTF-8 become escapes, and more than `max_chars`
/// characters are cut off with "...".
std::string printable_excerpt(const char* s, std::size_t size, std::size_t max_chars = 48);
/// Overload for std::string.
std::string printable_excerpt(const std::string& s, std::size_t max_chars = 48);

/// Reads a whole file into `*out` (replacing its contents). RNNCORE_ERR_IO on failure.
rnncore_status read_file_bytes(const char* path, std::vector<std::uint8_t>* out);

/// Creates or truncates `path` and writes `size` bytes to it. RNNCORE_ERR_IO on
/// failure, in which case the partial file is removed.
rnncore_status write_file_bytes(const char* path, const void* data, std::size_t size);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_SRC_IO_JSON_HPP

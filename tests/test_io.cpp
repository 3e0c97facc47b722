// Tests of the host-side readers and writers: JSON, .npy and safetensors.
//
// Fixtures in tests/data/io/ come from tests/data/io/make_fixtures.py (numpy).
// They are located through $RNNCORE_IO_TEST_DATA, $RNNCORE_SOURCE_ROOT, the
// directory of this source file, or a few relative paths.
#include <doctest/doctest.h>

#include <stdlib.h>    // mkdtemp
#include <unistd.h>    // rmdir

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "src/io/json.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"

namespace io = rnncore::io;
using io::ElemType;

namespace {

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

void clear_detail() { rnncore::detail::fail(RNNCORE_OK, "%s", ""); }

std::string detail() { return rnncore_last_error_detail(); }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Evaluates `expr`, which must fail with `code` and leave a detail line
/// containing `fragment`.
#define CHECK_FAILS(expr, code, fragment)                         \
  do {                                                            \
    clear_detail();                                               \
    const rnncore_status status_ = (expr);                        \
    const std::string detail_ = detail();                         \
    INFO("detail: " << detail_);                                  \
    CHECK_EQ(static_cast<int>(status_), static_cast<int>(code));  \
    CHECK_MESSAGE(contains(detail_, fragment), "missing fragment: " << std::string(fragment)); \
  } while (0)

#define CHECK_OK(expr)                                                   \
  do {                                                                   \
    const rnncore_status status_ = (expr);                               \
    CHECK_MESSAGE(status_ == RNNCORE_OK, "detail: " << detail());        \
  } while (0)

const ElemType kAllTypes[] = {ElemType::f16, ElemType::bf16, ElemType::f32, ElemType::f64, ElemType::i8,
                              ElemType::u8,  ElemType::i16,  ElemType::i32, ElemType::i64, ElemType::boolean};

std::vector<std::uint8_t> random_bytes(std::size_t n, ElemType type, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(type == ElemType::boolean ? rng() & 1u : rng() & 0xFFu);
  return bytes;
}

std::vector<std::uint8_t> as_bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

template <typename T>
std::vector<T> values_of(const io::Array& array) {
  std::vector<T> out(array.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), array.bytes.data(), out.size() * sizeof(T));
  return out;
}

/// Builds a .npy file from a raw header string and `data_bytes` bytes of data.
std::vector<std::uint8_t> npy_bytes(const std::string& header, std::size_t data_bytes, int major = 1) {
  std::vector<std::uint8_t> file = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < length_bytes; ++i) file.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) file.push_back(static_cast<std::uint8_t>(i * 7));
  return file;
}

/// Builds a safetensors file from a raw header string and `data_bytes` bytes of data.
std::vector<std::uint8_t> st_bytes(const std::string& header, std::size_t data_bytes) {
  std::vector<std::uint8_t> file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) file.push_back(static_cast<std::uint8_t>(i));
  return file;
}

rnncore_status parse_npy_vec(const std::vector<std::uint8_t>& file, io::Array* out, const char* name = "x.npy") {
  // A copy of exactly the right size lets AddressSanitizer catch any over-read.
  std::vector<std::uint8_t> exact(file);
  return io::parse_npy(exact.data(), exact.size(), name, out);
}

rnncore_status parse_st_vec(const std::vector<std::uint8_t>& file, io::SafeTensors* out,
                            const char* name = "model.safetensors") {
  return io::parse_safetensors(file, name, out);
}

rnncore_status parse_json_str(const std::string& text, io::JsonValue* out, const char* name = "cfg.json",
                              const io::JsonParseOptions& options = io::JsonParseOptions()) {
  std::vector<char> exact(text.begin(), text.end());
  return io::parse_json(exact.data(), exact.size(), name, out, options);
}

/// A private temporary directory, removed with its files at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rnncore_io_test_XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (mkdtemp(buffer.data()) != nullptr) path_ = buffer.data();
  }
  ~TempDir() {
    for (const std::string& file : files_) std::remove(file.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

bool file_exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

std::string fixture_dir() {
  static const std::string dir = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("RNNCORE_IO_TEST_DATA")) candidates.push_back(env);
    if (const char* root = std::getenv("RNNCORE_SOURCE_ROOT")) candidates.push_back(std::string(root) + "/tests/data/io");
    const std::string here = __FILE__;
    const std::size_t slash = here.find_last_of('/');
    candidates.push_back((slash == std::string::npos ? std::string(".") : here.substr(0, slash)) + "/data/io");
    candidates.push_back("tests/data/io");
    candidates.push_back("../tests/data/io");
    candidates.push_back("../../tests/data/io");
    for (const std::string& c : candidates) {
      if (file_exists(c + "/f32_2x3.npy")) return c;
    }
    return std::string();
  }();
  return dir;
}

std::string fixture_path(const char* name) { return fixture_dir() + "/" + name; }

std::vector<std::uint8_t> fixture_bytes(const char* name) {
  std::vector<std::uint8_t> bytes;
  const rnncore_status st = io::read_file_bytes(fixture_path(name).c_str(), &bytes);
  CHECK_MESSAGE(st == RNNCORE_OK, "cannot read fixture " << std::string(name) << " (set RNNCORE_IO_TEST_DATA): " << detail());
  return bytes;
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

TEST_CASE("json: values, member order and lookup") {
  io::JsonValue v;
  CHECK_OK(parse_json_str(" {\"b\": [1, 2.5, -3e2, true, false, null], \"a\": {\"x\": \"y\"}, \"c\": []}\n", &v));
  CHECK(v.kind == io::JsonValue::Kind::object);
  if (v.kind != io::JsonValue::Kind::object || v.members.size() != 3) return;
  CHECK(v.members[0].first == "b");
  CHECK(v.members[1].first == "a");
  CHECK(v.members[2].first == "c");
  const io::JsonValue* b = v.get("b");
  if (b == nullptr || b->items.size() != 6) {
    CHECK(false);
    return;
  }
  CHECK(b->items[0].is_integer);
  CHECK(b->items[0].integer == 1);
  CHECK_FALSE(b->items[1].is_integer);
  CHECK(b->items[1].number == 2.5);
  CHECK_FALSE(b->items[2].is_integer);
  CHECK(b->items[2].number == -300.0);
  CHECK(b->items[3].kind == io::JsonValue::Kind::boolean);
  CHECK(b->items[3].boolean);
  CHECK_FALSE(b->items[4].boolean);
  CHECK(b->items[5].kind == io::JsonValue::Kind::null);
  CHECK(v.get("a")->get("x")->text == "y");
  CHECK(v.get("missing") == nullptr);
  CHECK(b->get("x") == nullptr);  // not an object
  CHECK(v.get("c")->kind == io::JsonValue::Kind::array);
  CHECK(v.get("b")->offset == 7);
  CHECK(std::string(io::json_kind_name(io::JsonValue::Kind::object)) == "object");

  CHECK_OK(parse_json_str("\xEF\xBB\xBF\"bom\"", &v));  // a leading BOM is skipped
  CHECK(v.text == "bom");
  CHECK_OK(parse_json_str("  42  ", &v));
  CHECK(v.integer == 42);
}

TEST_CASE("json: integers keep their exact value") {
  io::JsonValue v;
  CHECK_OK(parse_json_str("[9223372036854775807, -9223372036854775808, 9223372036854775808, 1.0, 1e2, -0, 0]", &v));
  if (v.items.size() != 7) {
    CHECK(false);
    return;
  }
  CHECK(v.items[0].is_integer);
  CHECK(v.items[0].integer == std::numeric_limits<std::int64_t>::max());
  CHECK(v.items[1].is_integer);
  CHECK(v.items[1].integer == std::numeric_limits<std::int64_t>::min());
  CHECK_FALSE(v.items[2].is_integer);  // does not fit int64, still a number
  CHECK(v.items[2].number == 9223372036854775808.0);
  CHECK_FALSE(v.items[3].is_integer);
  CHECK_FALSE(v.items[4].is_integer);
  CHECK(v.items[4].number == 100.0);
  CHECK(v.items[5].is_integer);
  CHECK(v.items[5].integer == 0);
  CHECK(std::signbit(v.items[5].number));
  CHECK(v.items[6].is_integer);

  CHECK_OK(parse_json_str("[1e-400, -1e-400, 4.9e-324, 1.7976931348623157e308, 0.1]", &v));
  CHECK(v.items[0].number == 0.0);
  CHECK(std::signbit(v.items[1].number));
  CHECK(v.items[2].number > 0.0);
  CHECK(v.items[3].number == DBL_MAX);
  CHECK(v.items[4].number == 0.1);
}

TEST_CASE("json: string escapes and UTF-8") {
  io::JsonValue v;
  CHECK_OK(parse_json_str(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00\u0000z")", &v));
  const std::string expected = std::string("a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") + '\0' + "z";
  CHECK(v.text == expected);
  CHECK_OK(parse_json_str("\"raw \xC3\xA9 \xF0\x9F\x98\x80\"", &v));
  CHECK(v.text == "raw \xC3\xA9 \xF0\x9F\x98\x80");
}

TEST_CASE("json: errors name the input, line and column") {
  struct Case {
    const char* text;
    const char* fragment;
  };
  // nlohmann/json's parser finds the problem; parse_json names the input, line and column (columns
  // count characters) and adds a hint for mistakes people make when writing JSON by hand.
  const Case cases[] = {
      {"{\n  \"a\": 1,\n  \"b\": 2\n  \"c\": 3\n}", "cfg.json:4:3: syntax error while parsing object - unexpected string literal"},
      {"", "cfg.json:1:1: syntax error while parsing value - unexpected end of input"},
      {"   \n  ", "cfg.json:2:3: syntax error while parsing value - unexpected end of input"},
      {"{\"a\": 1,}", "1:9: syntax error while parsing object key - unexpected '}'; expected string literal (trailing comma)"},
      {"[1, 2,]", "1:7: syntax error while parsing value - unexpected ']'"},
      {"[1 2]", "1:4: syntax error while parsing array - unexpected number literal; expected ']'"},
      {"{\"a\" 1}", "1:6: syntax error while parsing object separator"},
      {"{a: 1}", "1:2: syntax error while parsing object key - invalid literal"},
      {"{'a': 1}", "1:2: syntax error while parsing object key - invalid literal; last read: '{''; expected string literal (JSON strings are enclosed in double quotes)"},
      {"['a']", "(JSON strings are enclosed in double quotes)"},
      {"[1] // note", "1:5: syntax error while parsing value - invalid literal; last read: '1] /'; expected end of input (comments are not allowed in JSON)"},
      {"// c\n1", "1:1: syntax error while parsing value - invalid literal; last read: '/' (comments are not allowed in JSON)"},
      {"{\"x\": True}", "1:7: syntax error while parsing value - invalid literal; last read: '\"x\": T' (JSON literals are true, false and null)"},
      {"[NaN]", "1:2: syntax error while parsing value - invalid literal; last read: '[N' (JSON literals are true, false and null)"},
      {"[tru]", "invalid literal; last read: '[tru]'"},
      {"[01]", "1:3: syntax error while parsing array - unexpected number literal"},
      {"[1.]", "invalid number; expected digit after '.'"},
      {"[1e]", "invalid number; expected '+', '-', or digit after exponent"},
      {"[-]", "invalid number; expected digit after '-'"},
      {"[0x10]", "1:3: syntax error while parsing array - invalid literal; last read: '0x'"},
      {"[1.2.3]", "invalid literal; last read: '1.2.'"},
      {"[+1]", "1:2: syntax error while parsing value - invalid literal; last read: '[+'"},
      {"[1e400]", "1:6: number overflow parsing '1e400'"},
      {"\"abc", "invalid string: missing closing quote"},
      {"\"ab\ncd\"", "1:4: syntax error while parsing value - invalid string: control character U+000A (LF) must be escaped"},
      {"\"a\tb\"", "1:3: syntax error while parsing value - invalid string: control character U+0009 (HT) must be escaped"},
      {"\"\\x\"", "1:3: syntax error while parsing value - invalid string: forbidden character after backslash"},
      {"\"\\u12G4\"", "'\\u' must be followed by 4 hex digits"},
      {"\"\\u12", "'\\u' must be followed by 4 hex digits"},
      {"\"\\ud800\"", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"\"\\ud800\\u0041\"", "1:13: syntax error while parsing value - invalid string: surrogate U+D800..U+DBFF must be followed"},
      {"\"\\udc00\"", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"},
      {"\"\xC3\x28\"", "1:3: syntax error while parsing value - invalid string: ill-formed UTF-8 byte"},
      {"\"\xC0\x80\"", "ill-formed UTF-8 byte"},           // overlong NUL
      {"\"\xED\xA0\x80\"", "ill-formed UTF-8 byte"},       // encoded surrogate
      {"\"\xF4\x90\x80\x80\"", "ill-formed UTF-8 byte"},   // above U+10FFFF
      {"[\xE2\x80\x9Cx\xE2\x80\x9D]", "1:2: syntax error while parsing value - invalid literal"}, // smart quotes pasted from a document
      {"{\"\xC3\xA9\": 1 2}", "1:9: syntax error while parsing object"},  // columns count characters, not bytes
      {"[1]]", "1:4: syntax error while parsing value - unexpected ']'; expected end of input"},
      {"[1,\x01]", "1:4: syntax error while parsing value - invalid literal"},
      {"{\"a\":1,\"b\":2,\"a\":3}", "1:14: duplicate key 'a' (first defined at 1:2)"},
  };
  for (const Case& c : cases) {
    const std::string text(c.text);
    CAPTURE(text);
    io::JsonValue v;
    CHECK_FAILS(parse_json_str(c.text, &v), RNNCORE_ERR_FORMAT, c.fragment);
  }
  io::JsonValue v;
  CHECK_FAILS(io::parse_json("[", 1, nullptr, &v), RNNCORE_ERR_FORMAT, "<input>:1:2:");
  // nlohmann's lexer stops at a NUL byte; what follows must still be refused.
  CHECK_FAILS(io::parse_json("[1]\0x", 5, "n.json", &v), RNNCORE_ERR_FORMAT, "n.json:1:4: unexpected byte 0x00 after the JSON value");
  CHECK_FAILS(io::parse_json("[1,\0 2]", 7, "n.json", &v), RNNCORE_ERR_FORMAT, "n.json:1:");
  CHECK_FAILS(io::parse_json(nullptr, 3, "n.json", &v), RNNCORE_ERR_NULL_POINTER, "n.json");
  CHECK_FAILS(io::parse_json("1", 1, "n.json", nullptr), RNNCORE_ERR_NULL_POINTER, "n.json");
}

TEST_CASE("json: nesting depth is limited") {
  io::JsonValue v;
  CHECK_OK(parse_json_str(std::string(64, '[') + std::string(64, ']'), &v));
  CHECK_FAILS(parse_json_str(std::string(65, '[') + std::string(65, ']'), &v), RNNCORE_ERR_FORMAT,
              "nested deeper than 64 levels");
  // Far deeper than any stack could take if the parser recursed without a limit.
  CHECK_FAILS(parse_json_str(std::string(1000000, '['), &v), RNNCORE_ERR_FORMAT, "1:65: arrays and objects nested");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  CHECK_FAILS(parse_json_str(objects, &v), RNNCORE_ERR_FORMAT, "nested deeper");
  io::JsonParseOptions shallow;
  shallow.max_depth = 2;
  CHECK_OK(parse_json_str("[[1]]", &v, "cfg.json", shallow));
  CHECK_FAILS(parse_json_str("[[[1]]]", &v, "cfg.json", shallow), RNNCORE_ERR_FORMAT, "deeper than 2 levels");
}

TEST_CASE("json: duplicate keys") {
  io::JsonValue v;
  CHECK_FAILS(parse_json_str("{\n \"k\": 1,\n \"k\": 2\n}", &v), RNNCORE_ERR_FORMAT,
              "cfg.json:3:2: duplicate key 'k' (first defined at 2:2)");
  CHECK_FAILS(parse_json_str("[{\"a\":1},{\"b\":{\"c\":1,\"d\":2,\"c\":3}}]", &v), RNNCORE_ERR_FORMAT,
              "duplicate key 'c'");
  io::JsonParseOptions allow;
  allow.allow_duplicate_keys = true;
  CHECK_OK(parse_json_str("{\"k\": 1, \"k\": 2}", &v, "cfg.json", allow));
  CHECK(v.members.size() == 2);
  CHECK(v.get("k")->integer == 1);  // get() returns the first
  // Many distinct keys are fine (and checked in O(n log n)).
  std::string many = "{";
  for (int i = 0; i < 20000; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  many += "}";
  CHECK_OK(parse_json_str(many, &v));
  CHECK(v.members.size() == 20000);
}

TEST_CASE("json: every proper prefix of a document is an error") {
  const std::string doc = "{\"a\": [1, -2.5e3, \"x\\u00e9\\ud83d\\ude00\", true, null], \"b\": {\"c\": false}}";
  io::JsonValue v;
  CHECK_OK(parse_json_str(doc, &v));
  for (std::size_t n = 0; n < doc.size(); ++n) {
    CAPTURE(n);
    CHECK_EQ(static_cast<int>(parse_json_str(doc.substr(0, n), &v)), static_cast<int>(RNNCORE_ERR_FORMAT));
  }
}

TEST_CASE("json: escape round trip and helpers") {
  std::string all;
  for (int c = 1; c < 128; ++c) all.push_back(static_cast<char>(c));
  all.push_back('\0');
  all += "\xC3\xA9\xF0\x9F\x98\x80";
  std::string literal = "\"";
  io::json_escape(all, &literal);
  literal += "\"";
  CHECK(literal.find('\n') == std::string::npos);
  io::JsonValue v;
  CHECK_OK(parse_json_str(literal, &v));
  CHECK(v.text == all);

  CHECK(io::is_valid_utf8("abc\xC3\xA9", 5));
  CHECK_FALSE(io::is_valid_utf8("\xC3", 1));
  CHECK_FALSE(io::is_valid_utf8("\xC0\x80", 2));
  CHECK_FALSE(io::is_valid_utf8("\xED\xA0\x80", 3));
  CHECK_FALSE(io::is_valid_utf8("\xF4\x90\x80\x80", 4));
  CHECK(io::is_valid_utf8("\xF4\x8F\xBF\xBF", 4));
  CHECK(io::is_valid_utf8(nullptr, 0));

  CHECK(io::printable_excerpt(std::string("a\nb\x01\xC3\xA9\xFF")) == "a\\nb\\x01\xC3\xA9\\xff");
  CHECK(io::printable_excerpt(std::string(100, 'x'), 5) == "xxxxx...");

  const std::string text = "ab\n\xC3\xA9x\n";
  const io::JsonLocation loc = io::json_location(text.data(), text.size(), 5);
  CHECK(loc.line == 2);
  CHECK(loc.column == 2);
  CHECK(io::json_location(text.data(), text.size(), 1000).line == 3);
}

TEST_CASE("json: read_json_file") {
  TempDir tmp;
  if (!tmp.ok()) return;
  const std::string path = tmp.file("c.json");
  const std::string text = "{\n  \"hidden\": 4,\n  \"x\": [\n}";
  CHECK_OK(io::write_file_bytes(path.c_str(), text.data(), text.size()));
  io::JsonValue v;
  std::string got;
  CHECK_FAILS(io::read_json_file(path.c_str(), &v, &got), RNNCORE_ERR_FORMAT, "c.json:4:1: syntax error while parsing value - unexpected '}'");
  CHECK(got == text);
  CHECK_FAILS(io::read_json_file((path + ".missing").c_str(), &v), RNNCORE_ERR_IO, "cannot open for reading");
  // A directory opens on POSIX systems but cannot be read (and its "size" is not trusted).
  io::Array array;
  CHECK_FAILS(io::read_npy(tmp.path().c_str(), &array), RNNCORE_ERR_IO, tmp.path() + ": read error");
  std::vector<std::uint8_t> bytes;
  CHECK_OK(io::write_file_bytes(path.c_str(), nullptr, 0));
  CHECK_OK(io::read_file_bytes(path.c_str(), &bytes));
  CHECK(bytes.empty());
  std::vector<std::uint8_t> big(200000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31 + (i >> 9));
  CHECK_OK(io::write_file_bytes(path.c_str(), big.data(), big.size()));
  CHECK_OK(io::read_file_bytes(path.c_str(), &bytes));
  CHECK(bytes == big);
}

// ---------------------------------------------------------------------------
// Element types and conversions
// ---------------------------------------------------------------------------

TEST_CASE("element types: names and sizes") {
  const char* names[] = {"F16", "BF16", "F32", "F64", "I8", "U8", "I16", "I32", "I64", "BOOL"};
  const std::size_t sizes[] = {2, 2, 4, 8, 1, 1, 2, 4, 8, 1};
  for (int i = 0; i < 10; ++i) {
    CHECK(std::string(io::elem_type_name(kAllTypes[i])) == names[i]);
    CHECK(io::elem_type_size(kAllTypes[i]) == sizes[i]);
    ElemType back = ElemType::f32;
    CHECK(io::elem_type_from_name(names[i], &back));
    CHECK(back == kAllTypes[i]);
  }
  CHECK_FALSE(io::elem_type_from_name("f32", nullptr));
  CHECK_FALSE(io::elem_type_from_name("F8_E4M3", nullptr));
  CHECK(io::elem_type_size(static_cast<ElemType>(42)) == 0);
  CHECK(std::string(io::elem_type_name(static_cast<ElemType>(42))) == "?");

  io::Array a;
  CHECK(a.elements() == 1);
  a.shape = {2, 3, 4};
  CHECK(a.elements() == 24);
  a.shape = {2, 0, 1ll << 40};
  CHECK(a.elements() == 0);
  a.shape = {2, 0, std::numeric_limits<std::int64_t>::max()};  // non-zero dims overflow, whatever the order
  CHECK(a.elements() == -1);
  a.shape = {-1};
  CHECK(a.elements() == -1);
  a.shape = {1ll << 32, 1ll << 32};
  CHECK(a.elements() == -1);

  std::uint64_t bytes = 0;
  const std::int64_t ok[] = {4, 7};
  CHECK(io::shape_byte_count(ok, 2, ElemType::f32, &bytes));
  CHECK(bytes == 112);
  const std::int64_t too_big[] = {1ll << 61, 4};  // 2^63 elements... bytes overflow
  CHECK_FALSE(io::shape_byte_count(too_big, 2, ElemType::u8, &bytes));
  const std::int64_t just_fits[] = {1ll << 60, 2};
  CHECK(io::shape_byte_count(just_fits, 2, ElemType::i32, &bytes) == false);  // 2^61 * 4 = 2^63 > INT64_MAX
  // 2^61 bytes: a valid shape, addressable only where size_t has 64 bits.
  CHECK(io::shape_byte_count(just_fits, 2, ElemType::u8, &bytes) == (sizeof(std::size_t) >= 8));
  const std::int64_t zero_first[] = {0, 1ll << 62, 1ll << 62};
  CHECK_FALSE(io::shape_byte_count(zero_first, 3, ElemType::u8, &bytes));  // order-independent
  const std::int64_t empty[] = {0, 1ll << 40};
  CHECK(io::shape_byte_count(empty, 2, ElemType::f64, &bytes));
  CHECK(bytes == 0);
  CHECK(io::shape_to_string(ok, 2) == "[4, 7]");
  CHECK(io::shape_to_string(nullptr, 0) == "[]");
}

double f16_value(std::uint16_t magnitude_bits) {
  // 0x7C00 is infinity; treat it as 65536, the value the next exponent step would have.
  return magnitude_bits == 0x7C00 ? 65536.0 : static_cast<double>(io::f16_to_f32(magnitude_bits));
}

double bf16_value(std::uint16_t magnitude_bits) {
  return magnitude_bits == 0x7F80 ? std::ldexp(1.0, 128) : static_cast<double>(io::bf16_to_f32(magnitude_bits));
}

float float_from(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST_CASE("f16: exhaustive round trip and exact values") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = io::f16_to_f32(static_cast<std::uint16_t>(h));
    const std::uint16_t back = io::f32_to_f16(f);
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) {
      CHECK(std::isnan(f));
      CHECK(((back & 0x7C00) == 0x7C00 && (back & 0x3FF) != 0));
      CHECK((back & 0x8000) == (h & 0x8000));
    } else if (back != h) {
      CHECK_MESSAGE(back == h, "half 0x" << std::hex << h);
    }
  }
  // Every half against its value computed in double: (-1)^s · 2^(e-15) · (1 + m/1024), m · 2^-24
  // for e = 0, infinities and NaNs (with the payload in f32's top mantissa bits) for e = 31.
  int wrong = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const std::uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const float f = io::f16_to_f32(static_cast<std::uint16_t>(h));
    const double magnitude = e == 0 ? std::ldexp(static_cast<double>(m), -24) : std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15);
    const bool ok = e == 31 ? bits_of(f) == (((h & 0x8000u) << 16) | 0x7F800000u | (m << 13))
                            : static_cast<double>(f) == ((h & 0x8000) ? -magnitude : magnitude) && std::signbit(f) == ((h & 0x8000) != 0);
    if (!ok && ++wrong <= 5) CHECK_MESSAGE(ok, "half 0x" << std::hex << h << " decoded as " << f);
  }
  CHECK(wrong == 0);
  CHECK(io::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(io::f16_to_f32(0x03FF) == 1023.0f * std::ldexp(1.0f, -24));
  CHECK(io::f16_to_f32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(io::f16_to_f32(0x3C00) == 1.0f);
  CHECK(io::f16_to_f32(0xC100) == -2.5f);
  CHECK(io::f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(std::isinf(io::f16_to_f32(0x7C00)));
  CHECK(std::signbit(io::f16_to_f32(0x8000)));
  CHECK(io::f32_to_f16(65519.99f) == 0x7BFF);
  CHECK(io::f32_to_f16(65520.0f) == 0x7C00);
  CHECK(io::f32_to_f16(1e10f) == 0x7C00);
  CHECK(io::f32_to_f16(-1e10f) == 0xFC00);
  CHECK(io::f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);             // tie with 0 → even (0)
  CHECK(io::f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(io::f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);             // 1.5 ulp tie → even (2)
  CHECK(io::f32_to_f16(-std::ldexp(1.0f, -30)) == 0x8000);
  CHECK(io::f32_to_f16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(io::f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie → even
  CHECK(io::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie → even (up)
  CHECK(io::f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);          // rounds up into the normals
  CHECK((io::f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7FFF) > 0x7C00);
  CHECK((io::f32_to_f16(float_from(0x7F800001)) & 0x7FFF) > 0x7C00);  // signalling NaN stays NaN
}

TEST_CASE("f16: conversion rounds to nearest, ties to even") {
  // Every midpoint between neighbouring halves, and a float either side of it.
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const double lo = f16_value(static_cast<std::uint16_t>(h)), hi = f16_value(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: needs 12 significant bits
    const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : static_cast<std::uint16_t>(h);
    const std::uint16_t got = io::f32_to_f16(mid);
    if (got != even) CHECK_MESSAGE(got == even, "midpoint above 0x" << std::hex << h);
    const std::uint16_t below = io::f32_to_f16(std::nextafter(mid, 0.0f));
    if (below != h) CHECK_MESSAGE(below == h, "below midpoint above 0x" << std::hex << h);
    const std::uint16_t above = io::f32_to_f16(std::nextafter(mid, 1e30f));
    if (above != h + 1) CHECK_MESSAGE(above == h + 1, "above midpoint above 0x" << std::hex << h);
    const std::uint16_t negative = io::f32_to_f16(-mid);
    if (negative != (0x8000 | even)) CHECK(negative == (0x8000 | even));
  }
  // Random floats across the half range: the result is a nearest half.
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t exponent = 100 + rng() % 43;  // 2^-27 .. 2^15
    const float x = float_from((exponent << 23) | (rng() & 0x7FFFFF));
    const std::uint16_t h = io::f32_to_f16(x);
    const double err = std::fabs(f16_value(h) - x);
    // 0x7C00 (infinity) stands for 65536 here, so 0x7C01 is never a neighbour.
    const bool ok = (h == 0 || std::fabs(f16_value(static_cast<std::uint16_t>(h - 1)) - x) >= err) &&
                    (h == 0x7C00 || std::fabs(f16_value(static_cast<std::uint16_t>(h + 1)) - x) >= err);
    if (!ok) CHECK_MESSAGE(ok, "x = " << x);
  }
}

TEST_CASE("bf16: round trip and rounding") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = io::bf16_to_f32(static_cast<std::uint16_t>(b));
    CHECK(bits_of(f) == b << 16);
    const std::uint16_t back = io::f32_to_bf16(f);
    if (std::isnan(f)) {
      CHECK(std::isnan(io::bf16_to_f32(back)));
    } else if (back != b) {
      CHECK_MESSAGE(back == b, "bf16 0x" << std::hex << b);
    }
  }
  for (std::uint32_t b = 0; b < 0x7F80; ++b) {
    const double lo = bf16_value(static_cast<std::uint16_t>(b)), hi = bf16_value(static_cast<std::uint16_t>(b + 1));
    const double mid_d = (lo + hi) / 2;
    if (mid_d > FLT_MAX) continue;  // the midpoint above the largest bfloat16 is not a float
    const float mid = static_cast<float>(mid_d);
    const std::uint16_t even = (b & 1) ? static_cast<std::uint16_t>(b + 1) : static_cast<std::uint16_t>(b);
    const std::uint16_t got = io::f32_to_bf16(mid);
    if (got != even) CHECK_MESSAGE(got == even, "midpoint above 0x" << std::hex << b);
    const std::uint16_t above = io::f32_to_bf16(std::nextafter(mid, 1e38f * 10));
    if (above != b + 1) CHECK_MESSAGE(above == b + 1, "above midpoint above 0x" << std::hex << b);
  }
  CHECK(io::f32_to_bf16(FLT_MAX) == 0x7F80);  // rounds up to infinity
  CHECK(io::f32_to_bf16(-FLT_MAX) == 0xFF80);
  CHECK(io::f32_to_bf16(3.140625f) == 0x4049);
  CHECK(std::isnan(io::bf16_to_f32(io::f32_to_bf16(float_from(0x7F800001)))));  // payload only in low bits
}

io::Array make_array(ElemType type, std::vector<std::int64_t> shape, const void* data, std::size_t bytes) {
  io::Array a;
  a.type = type;
  a.shape = std::move(shape);
  a.bytes.assign(static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + bytes);
  return a;
}

TEST_CASE("converters: to_f32, to_f64, to_i32") {
  std::vector<float> f;
  std::vector<double> d;
  std::vector<std::int32_t> i;

  const std::uint16_t halves[] = {0x3C00, 0xC100, 0x0001, 0x7C00};
  io::Array a = make_array(ElemType::f16, {4}, halves, sizeof halves);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24), std::numeric_limits<float>::infinity()});
  CHECK_OK(io::to_f64(a, &d));
  CHECK(d[2] == std::ldexp(1.0, -24));

  const std::uint16_t brains[] = {0x3F80, 0xC020};
  a = make_array(ElemType::bf16, {2, 1}, brains, sizeof brains);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{1.0f, -2.5f});

  const double doubles[] = {0.1, 1e300, -1e300, 3.4028235677973366e38, static_cast<double>(FLT_MAX),
                            3.4028235677973362e38, std::numeric_limits<double>::quiet_NaN(), 1e-50};
  a = make_array(ElemType::f64, {8}, doubles, sizeof doubles);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f[0] == 0.1f);
  CHECK(f[1] == std::numeric_limits<float>::infinity());
  CHECK(f[2] == -std::numeric_limits<float>::infinity());
  CHECK(f[3] == std::numeric_limits<float>::infinity());  // at FLT_MAX + half ulp: tie → infinity
  CHECK(f[4] == FLT_MAX);
  CHECK(f[5] == FLT_MAX);  // just below the tie
  CHECK(std::isnan(f[6]));
  CHECK(f[7] == 0.0f);
  CHECK_OK(io::to_f64(a, &d));
  CHECK(d[1] == 1e300);

  const float floats[] = {1.5f, -0.25f};
  a = make_array(ElemType::f32, {2}, floats, sizeof floats);
  CHECK_OK(io::to_f64(a, &d));
  CHECK(d == std::vector<double>{1.5, -0.25});
  CHECK_FAILS(io::to_i32(a, &i), RNNCORE_ERR_TENSOR_DTYPE, "cannot convert a F32 array to int32");

  const std::int8_t i8s[] = {-128, 127};
  a = make_array(ElemType::i8, {2}, i8s, sizeof i8s);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{-128, 127});
  CHECK_FAILS(io::to_f32(a, &f), RNNCORE_ERR_TENSOR_DTYPE, "cannot convert a I8 array to float");
  CHECK_FAILS(io::to_f64(a, &d), RNNCORE_ERR_TENSOR_DTYPE, "cannot convert a I8 array to double");

  const std::uint8_t u8s[] = {0, 255, 2};
  a = make_array(ElemType::u8, {3}, u8s, sizeof u8s);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{0, 255, 2});
  a.type = ElemType::boolean;
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{0, 1, 1});

  const std::int16_t i16s[] = {-32768, 32767};
  a = make_array(ElemType::i16, {2}, i16s, sizeof i16s);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{-32768, 32767});

  const std::int32_t i32s[] = {std::numeric_limits<std::int32_t>::min(), 5};
  a = make_array(ElemType::i32, {2}, i32s, sizeof i32s);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i[0] == std::numeric_limits<std::int32_t>::min());

  const std::int64_t i64s[] = {-2147483648ll, 2147483647ll, 2147483648ll};
  a = make_array(ElemType::i64, {2}, i64s, 16);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 2147483647});
  a = make_array(ElemType::i64, {3}, i64s, sizeof i64s);
  i = {42};
  CHECK_FAILS(io::to_i32(a, &i), RNNCORE_ERR_FORMAT, "element 2 of the I64 array (2147483648) does not fit");
  CHECK(i == std::vector<std::int32_t>{42});  // untouched on failure

  a = make_array(ElemType::f32, {3}, floats, sizeof floats);  // 3 elements declared, 2 present
  CHECK_FAILS(io::to_f32(a, &f), RNNCORE_ERR_INVALID_SIZE, "needs 12 bytes but the array holds 8");
  a.shape = {-1};
  CHECK_FAILS(io::to_f64(a, &d), RNNCORE_ERR_INVALID_SIZE, "invalid");
  a.shape = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  CHECK_FAILS(io::to_f32(a, &f), RNNCORE_ERR_INVALID_SIZE, "rank 9");
  a.shape = {2};
  a.type = static_cast<ElemType>(99);
  CHECK_FAILS(io::to_f32(a, &f), RNNCORE_ERR_INVALID_ENUM, "99");
  CHECK_FAILS(io::to_f32(a, nullptr), RNNCORE_ERR_NULL_POINTER, "null");

  io::Array empty;
  empty.shape = {0, 3};
  CHECK_OK(io::to_f32(empty, &f));
  CHECK(f.empty());
}

// ---------------------------------------------------------------------------
// .npy
// ---------------------------------------------------------------------------

TEST_CASE("npy: round trip of every element type NumPy has") {
  TempDir tmp;
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {5}, {2, 3}, {0, 4}, {1, 2, 1, 2, 1, 2, 1, 2}};
  std::uint32_t seed = 1;
  for (const ElemType type : kAllTypes) {
    for (const auto& shape : shapes) {
      const std::string type_name = io::elem_type_name(type);
      CAPTURE(type_name);
      CAPTURE(shape.size());
      std::uint64_t bytes = 0;
      CHECK(io::shape_byte_count(shape.data(), shape.size(), type, &bytes));
      const std::vector<std::uint8_t> data = random_bytes(static_cast<std::size_t>(bytes), type, seed++);
      std::vector<std::uint8_t> file;
      const int rank = static_cast<int>(shape.size());
      if (type == ElemType::bf16) {
        CHECK_FAILS(io::encode_npy(type, shape.data(), rank, data.data(), &file), RNNCORE_ERR_TENSOR_DTYPE,
                    "NumPy has no BF16 type");
        continue;
      }
      CHECK_OK(io::encode_npy(type, shape.data(), rank, data.data(), &file));
      // NumPy layout: data starts at a multiple of 64 and the header ends in '\n'.
      const std::size_t header_length = file[8] | (file[9] << 8);
      CHECK((10 + header_length) % 64 == 0);
      CHECK(file[9 + header_length] == '\n');
      CHECK(file.size() == 10 + header_length + bytes);
      io::Array back;
      CHECK_OK(parse_npy_vec(file, &back));
      CHECK(back.type == type);
      CHECK(back.shape == shape);
      CHECK(back.bytes == data);
      if (tmp.ok()) {
        const std::string path = tmp.file("a.npy");
        CHECK_OK(io::write_npy(path.c_str(), type, shape.data(), rank, data.data()));
        io::Array from_file;
        CHECK_OK(io::read_npy(path.c_str(), &from_file));
        CHECK(from_file.bytes == data);
        CHECK(from_file.shape == shape);
      }
    }
  }
  std::vector<std::uint8_t> file;
  CHECK_FAILS(io::encode_npy(ElemType::f32, nullptr, 0, nullptr, &file), RNNCORE_ERR_NULL_POINTER, "data is null");
}

TEST_CASE("npy: writer argument checks") {
  std::vector<std::uint8_t> file;
  const std::int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const float x[1] = {1.0f};
  CHECK_FAILS(io::encode_npy(ElemType::f32, nine, 9, x, &file), RNNCORE_ERR_INVALID_SIZE, "rank 9 is outside 0..8");
  CHECK_FAILS(io::encode_npy(ElemType::f32, nine, -1, x, &file), RNNCORE_ERR_INVALID_SIZE, "rank -1");
  const std::int64_t negative[2] = {2, -3};
  CHECK_FAILS(io::encode_npy(ElemType::f32, negative, 2, x, &file), RNNCORE_ERR_INVALID_SIZE, "[2, -3]");
  const std::int64_t huge[2] = {1ll << 40, 1ll << 40};
  CHECK_FAILS(io::encode_npy(ElemType::f32, huge, 2, x, &file), RNNCORE_ERR_INVALID_SIZE, "overflow");
  const std::int64_t one[1] = {1};
  CHECK_FAILS(io::encode_npy(ElemType::f32, one, 1, nullptr, &file), RNNCORE_ERR_NULL_POINTER, "data is null");
  CHECK_FAILS(io::encode_npy(ElemType::f32, nullptr, 1, x, &file), RNNCORE_ERR_NULL_POINTER, "shape is null");
  CHECK_FAILS(io::encode_npy(static_cast<ElemType>(12), one, 1, x, &file), RNNCORE_ERR_INVALID_ENUM, "12");
  CHECK_FAILS(io::write_npy("/nonexistent-dir/x.npy", ElemType::f32, one, 1, x), RNNCORE_ERR_IO,
              "/nonexistent-dir/x.npy: cannot open for writing");
  CHECK_FAILS(io::write_npy("w.npy", ElemType::bf16, one, 1, x), RNNCORE_ERR_TENSOR_DTYPE, "w.npy: NumPy has no BF16");
  CHECK_OK(io::encode_npy(ElemType::f32, nullptr, 0, x, &file));  // a scalar
  const std::string header(file.begin() + 10, file.end() - 4);
  CHECK(contains(header, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"));
}

TEST_CASE("npy: files written by NumPy") {
  if (fixture_dir().empty()) {
    FAIL("fixtures not found; set RNNCORE_IO_TEST_DATA to tests/data/io");
    return;
  }
  io::Array a;
  std::vector<float> f;
  std::vector<double> d;
  std::vector<std::int32_t> i;

  CHECK_OK(io::read_npy(fixture_path("f32_2x3.npy").c_str(), &a));
  CHECK(a.type == ElemType::f32);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(values_of<float>(a) == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});

  CHECK_OK(io::read_npy(fixture_path("f64_3.npy").c_str(), &a));
  CHECK(a.type == ElemType::f64);
  CHECK(values_of<double>(a) == std::vector<double>{1.5, -2.25, 1e300});

  CHECK_OK(io::read_npy(fixture_path("f16_4.npy").c_str(), &a));
  CHECK(a.type == ElemType::f16);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{0.0f, 1.0f, -2.5f, 65504.0f});

  CHECK_OK(io::read_npy(fixture_path("i8_4.npy").c_str(), &a));
  CHECK(a.type == ElemType::i8);
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{-128, -1, 0, 127});

  CHECK_OK(io::read_npy(fixture_path("u8_3.npy").c_str(), &a));
  CHECK(a.type == ElemType::u8);
  CHECK(a.bytes == std::vector<std::uint8_t>{0, 128, 255});

  CHECK_OK(io::read_npy(fixture_path("bool_3.npy").c_str(), &a));
  CHECK(a.type == ElemType::boolean);
  CHECK(a.bytes == std::vector<std::uint8_t>{1, 0, 1});

  CHECK_OK(io::read_npy(fixture_path("i16_2x2.npy").c_str(), &a));
  CHECK(a.type == ElemType::i16);
  CHECK(values_of<std::int16_t>(a) == std::vector<std::int16_t>{-32768, 1, 2, 32767});

  CHECK_OK(io::read_npy(fixture_path("i32_3.npy").c_str(), &a));
  CHECK(a.type == ElemType::i32);
  CHECK(values_of<std::int32_t>(a) == std::vector<std::int32_t>{-7, 0, 2147483647});

  CHECK_OK(io::read_npy(fixture_path("i64_2.npy").c_str(), &a));
  CHECK(a.type == ElemType::i64);
  CHECK(values_of<std::int64_t>(a) == std::vector<std::int64_t>{-5, 1ll << 40});

  CHECK_OK(io::read_npy(fixture_path("scalar_f32.npy").c_str(), &a));
  CHECK(a.shape.empty());
  CHECK(values_of<float>(a) == std::vector<float>{3.25f});

  CHECK_OK(io::read_npy(fixture_path("empty_0x3_f32.npy").c_str(), &a));
  CHECK(a.shape == std::vector<std::int64_t>{0, 3});
  CHECK(a.bytes.empty());

  CHECK_OK(io::read_npy(fixture_path("v2_i32_3.npy").c_str(), &a));
  CHECK(values_of<std::int32_t>(a) == std::vector<std::int32_t>{1, 2, 3});

  CHECK_OK(io::read_npy(fixture_path("v3_f32_2.npy").c_str(), &a));
  CHECK(values_of<float>(a) == std::vector<float>{0.25f, -8.0f});

  // Big-endian data is byte-swapped to native order.
  CHECK_OK(io::read_npy(fixture_path("be_f32_2x2.npy").c_str(), &a));
  CHECK(a.type == ElemType::f32);
  CHECK(values_of<float>(a) == std::vector<float>{1.0f, -2.0f, 0.5f, 1e-3f});
  CHECK_OK(io::read_npy(fixture_path("be_i16_3.npy").c_str(), &a));
  CHECK(values_of<std::int16_t>(a) == std::vector<std::int16_t>{1, -2, 300});

  const std::string fortran = fixture_path("fortran_f32_2x3.npy");
  CHECK_FAILS(io::read_npy(fortran.c_str(), &a), RNNCORE_ERR_FORMAT,
              fortran + ": fortran_order True (column-major) is not supported for shape [2, 3]");
  const std::string u32 = fixture_path("u32_2.npy");
  CHECK_FAILS(io::read_npy(u32.c_str(), &a), RNNCORE_ERR_TENSOR_DTYPE, u32 + ": unsupported dtype '<u4'");
  CHECK_FAILS(io::read_npy(fixture_path("missing.npy").c_str(), &a), RNNCORE_ERR_IO,
              "missing.npy: cannot open for reading: No such file");
}

TEST_CASE("npy: the writer produces the same bytes as numpy.save") {
  if (fixture_dir().empty()) {
    FAIL("fixtures not found; set RNNCORE_IO_TEST_DATA to tests/data/io");
    return;
  }
  const char* names[] = {"f32_2x3.npy", "f64_3.npy", "f16_4.npy", "i8_4.npy", "u8_3.npy", "bool_3.npy",
                         "i16_2x2.npy", "i32_3.npy", "i64_2.npy", "scalar_f32.npy", "empty_0x3_f32.npy"};
  for (const char* name : names) {
    const std::string fixture(name);
    CAPTURE(fixture);
    const std::vector<std::uint8_t> original = fixture_bytes(name);
    io::Array a;
    CHECK_OK(parse_npy_vec(original, &a));
    std::vector<std::uint8_t> encoded;
    CHECK_OK(io::encode_npy(a.type, a.shape.data(), static_cast<int>(a.shape.size()), a.bytes.data(), &encoded));
    CHECK(encoded == original);
  }
}

TEST_CASE("npy: every truncation of a valid file is a format error") {
  const char* names[] = {"f32_2x3.npy", "v2_i32_3.npy", "v3_f32_2.npy", "scalar_f32.npy", "be_i16_3.npy"};
  for (const char* name : names) {
    const std::vector<std::uint8_t> file = fixture_bytes(name);
    io::Array a;
    CHECK_OK(parse_npy_vec(file, &a));
    for (std::size_t n = 0; n < file.size(); ++n) {
      const std::vector<std::uint8_t> prefix(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
      io::Array out;
      out.shape = {77};
      const rnncore_status st = io::parse_npy(prefix.data(), prefix.size(), name, &out);
      if (st != RNNCORE_ERR_FORMAT) {
        CHECK_MESSAGE(st == RNNCORE_ERR_FORMAT, name << " truncated to " << n << " bytes");
      }
      if (out.shape != std::vector<std::int64_t>{77}) CHECK_MESSAGE(false, "output modified on failure");
    }
    // One extra byte is an error too.
    std::vector<std::uint8_t> longer = file;
    longer.push_back(0);
    CHECK_FAILS(parse_npy_vec(longer, &a, name), RNNCORE_ERR_FORMAT, "(1 trailing bytes)");
  }
}

TEST_CASE("npy: header syntax variations NumPy accepts") {
  struct Case {
    std::string header;
    std::vector<std::int64_t> shape;
    ElemType type;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", {3}, ElemType::f32},
      {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<i2'}\n", {2, 3}, ElemType::i16},
      {"  {  \"descr\" :\"=f8\"  ,'fortran_order':False,'shape':(  1 , 2 ,3 , ) ,}      \n", {1, 2, 3}, ElemType::f64},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': ()}", {}, ElemType::u8},
      {"{'descr': '<i1', 'fortran_order': False, 'shape': (3L, 2L)}", {3, 2}, ElemType::i8},
      {"{'descr': '>b1', 'fortran_order': False, 'shape': (2,)}", {2}, ElemType::boolean},
      {"{'descr': 'f2', 'fortran_order': False, 'shape': (2,)}", {2}, ElemType::f16},
      {"{'descr': '<i8', 'fortran_order': True, 'shape': (4,)}", {4}, ElemType::i64},        // same layout as C
      {"{'descr': '<i4', 'fortran_order': True, 'shape': (1, 5, 1)}", {1, 5, 1}, ElemType::i32},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (0, 5, 3)}", {0, 5, 3}, ElemType::f32},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2305843009213693951)}", {0, 2305843009213693951ll},
       ElemType::f32},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 2)}", {1, 1, 1, 1, 1, 1, 1, 2},
       ElemType::f32},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    std::uint64_t bytes = 0;
    CHECK(io::shape_byte_count(c.shape.data(), c.shape.size(), c.type, &bytes));
    for (int major = 1; major <= 3; ++major) {
      io::Array a;
      CHECK_OK(parse_npy_vec(npy_bytes(c.header, static_cast<std::size_t>(bytes), major), &a));
      CHECK(a.shape == c.shape);
      CHECK(a.type == c.type);
      CHECK(a.bytes.size() == bytes);
    }
  }
}

TEST_CASE("npy: malformed headers") {
  struct Case {
    const char* header;
    std::size_t data_bytes;
    rnncore_status code;
    const char* fragment;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", 0, RNNCORE_ERR_FORMAT, "the header lacks 'shape'"},
      {"{'shape': (1,), 'fortran_order': False}", 4, RNNCORE_ERR_FORMAT, "the header lacks 'descr'"},
      {"{'descr': '<f4', 'shape': (1,)}", 4, RNNCORE_ERR_FORMAT, "the header lacks 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", 4, RNNCORE_ERR_FORMAT,
       "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, RNNCORE_ERR_FORMAT,
       "key 'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, RNNCORE_ERR_FORMAT,
       "'shape' (3) is not a tuple; write (3,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", 12, RNNCORE_ERR_FORMAT, "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", 12, RNNCORE_ERR_FORMAT,
       "negative dimension in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, x)}", 12, RNNCORE_ERR_FORMAT,
       "expected a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0, RNNCORE_ERR_FORMAT,
       "does not fit in 64 bits"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}", 0, RNNCORE_ERR_FORMAT,
       "shape [4611686018427387904, 4] x F32 is too large"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,)}", 0, RNNCORE_ERR_FORMAT,
       "too large"},
      // Zero-sized dimensions do not hide an overflowing product (NumPy rejects this too).
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9223372036854775807)}", 0, RNNCORE_ERR_FORMAT,
       "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", 4, RNNCORE_ERR_FORMAT,
       "'shape' has more than 8 dimensions"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", 4, RNNCORE_ERR_FORMAT,
       "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 24, RNNCORE_ERR_FORMAT,
       "x.npy: fortran_order True (column-major) is not supported for shape [2, 3]"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8, RNNCORE_ERR_TENSOR_DTYPE,
       "x.npy: unsupported dtype '<c8' (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 |b1)"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (1,)}", 2, RNNCORE_ERR_TENSOR_DTYPE, "'<u2'"},
      {"{'descr': '|S5', 'fortran_order': False, 'shape': (1,)}", 5, RNNCORE_ERR_TENSOR_DTYPE, "'|S5'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8, RNNCORE_ERR_TENSOR_DTYPE, "'|O'"},
      {"{'descr': '', 'fortran_order': False, 'shape': (1,)}", 8, RNNCORE_ERR_TENSOR_DTYPE, "dtype ''"},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", 4, RNNCORE_ERR_TENSOR_DTYPE,
       "dtype '|f4' lacks a byte order"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4, RNNCORE_ERR_TENSOR_DTYPE,
       "structured dtypes"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, RNNCORE_ERR_FORMAT, "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, RNNCORE_ERR_FORMAT, "unexpected end of header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4, RNNCORE_ERR_FORMAT,
       "unexpected text after the header dict"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", 4, RNNCORE_ERR_FORMAT, "escape sequences"},
      {"{'descr: '<f4'}", 4, RNNCORE_ERR_FORMAT, "expected ':' after key"},
      {"['descr', '<f4']", 4, RNNCORE_ERR_FORMAT, "column 1: expected '{'"},
      {"", 4, RNNCORE_ERR_FORMAT, "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (30,)}", 64, RNNCORE_ERR_FORMAT,
       "x.npy: header declares 120 bytes of data but the file has 64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 20, RNNCORE_ERR_FORMAT,
       "x.npy: header declares 12 bytes of data but the file has 20 (8 trailing bytes)"},
  };
  for (const Case& c : cases) {
    const std::string header(c.header);
    CAPTURE(header);
    io::Array a;
    CHECK_FAILS(parse_npy_vec(npy_bytes(header, c.data_bytes), &a), c.code, c.fragment);
  }
}

TEST_CASE("npy: malformed preambles") {
  io::Array a;
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  std::vector<std::uint8_t> file = npy_bytes(good, 4);
  CHECK_OK(parse_npy_vec(file, &a));

  std::vector<std::uint8_t> bad = file;
  bad[1] = 'n';
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "x.npy: not a .npy file");
  CHECK_FAILS(parse_npy_vec(as_bytes("PK\x03\x04"), &a), RNNCORE_ERR_FORMAT, "not a .npy file");
  CHECK_FAILS(parse_npy_vec({}, &a), RNNCORE_ERR_FORMAT, "truncated .npy file: 0 bytes");
  bad = file;
  bad[6] = 4;
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "unsupported .npy format version 4.0");
  bad = file;
  bad[7] = 1;
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "version 1.1");
  bad = file;
  bad[8] = 0xFF;
  bad[9] = 0xFF;
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "header length 65535 exceeds the");
  bad = npy_bytes(good, 4, 2);
  bad[11] = 0xFF;  // header length ~4 GiB
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "exceeds the");
  bad = file;
  bad[8] = static_cast<std::uint8_t>(good.size() - 10);  // header length cuts the dict short
  CHECK_FAILS(parse_npy_vec(bad, &a), RNNCORE_ERR_FORMAT, "malformed .npy header");
  CHECK_FAILS(io::parse_npy(nullptr, 5, "p.npy", &a), RNNCORE_ERR_NULL_POINTER, "p.npy");
  CHECK_FAILS(io::parse_npy(file.data(), file.size(), "p.npy", nullptr), RNNCORE_ERR_NULL_POINTER, "p.npy");
  CHECK_FAILS(io::parse_npy(bad.data(), bad.size(), nullptr, &a), RNNCORE_ERR_FORMAT, "<input>:");
}

// ---------------------------------------------------------------------------
// safetensors
// ---------------------------------------------------------------------------

TEST_CASE("safetensors: round trip of every element type with metadata") {
  std::vector<std::vector<std::uint8_t>> buffers;
  std::vector<io::TensorToWrite> tensors;
  std::uint32_t seed = 100;
  for (const ElemType type : kAllTypes) {
    io::TensorToWrite t;
    t.name = std::string("layer.") + io::elem_type_name(type);
    t.type = type;
    t.shape = {3, static_cast<std::int64_t>(seed % 4 + 1)};
    buffers.push_back(random_bytes(static_cast<std::size_t>(3 * t.shape[1]) * io::elem_type_size(type), type, seed++));
    t.data = buffers.back().data();
    tensors.push_back(t);
  }
  io::TensorToWrite scalar;
  scalar.name = "scalar \"quoted\" \xC3\xA9";
  scalar.type = ElemType::f64;
  const double pi = 3.141592653589793;
  scalar.data = &pi;
  tensors.push_back(scalar);
  io::TensorToWrite empty;
  empty.name = "empty";
  empty.shape = {0, 5};
  tensors.push_back(empty);
  const std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}, {"note", "line\nbreak \xE2\x9C\x93"}};

  std::vector<std::uint8_t> file;
  CHECK_OK(io::encode_safetensors(tensors, metadata, &file));
  const std::size_t header_length = file[0] | (file[1] << 8) | (file[2] << 16);
  CHECK((8 + header_length) % 8 == 0);
  const std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(header_length));
  CHECK(header.rfind("{\"__metadata__\":{\"format\":\"pt\",", 0) == 0);

  io::SafeTensors st;
  CHECK_OK(parse_st_vec(file, &st));
  CHECK(st.data_start == 8 + header_length);
  CHECK(st.tensors.size() == tensors.size());
  CHECK(st.metadata == metadata);
  CHECK(*st.meta("note") == "line\nbreak \xE2\x9C\x93");
  CHECK(st.meta("absent") == nullptr);
  for (std::size_t i = 0; i < tensors.size() && i < st.tensors.size(); ++i) {
    CAPTURE(tensors[i].name);
    CHECK(st.tensors[i].name == tensors[i].name);  // header order is write order
    io::Array a;
    CHECK_OK(st.array(tensors[i].name, &a));
    CHECK(a.type == tensors[i].type);
    CHECK(a.shape == tensors[i].shape);
    if (i < buffers.size()) CHECK(a.bytes == buffers[i]);
    const io::TensorEntry* e = st.find(tensors[i].name);
    CHECK(e != nullptr);
    if (e != nullptr && !a.bytes.empty()) CHECK(std::memcmp(st.data(*e), a.bytes.data(), a.bytes.size()) == 0);
  }
  io::Array a;
  std::vector<double> d;
  CHECK_OK(st.array(scalar.name, &a));
  CHECK_OK(io::to_f64(a, &d));
  CHECK(d == std::vector<double>{pi});

  TempDir tmp;
  if (tmp.ok()) {
    const std::string path = tmp.file("m.safetensors");
    CHECK_OK(io::write_safetensors(path.c_str(), tensors, metadata));
    io::SafeTensors from_file;
    CHECK_OK(io::read_safetensors(path.c_str(), &from_file));
    CHECK(from_file.file == file);
    CHECK(from_file.path == path);
    CHECK_FAILS(from_file.array("nope", &a), RNNCORE_ERR_TENSOR_MISSING,
                path + ": no tensor named 'nope' (the file has 12: 'layer.F16', 'layer.BF16', 'layer.F32', ...)");
  }

  // No tensors and no metadata is a valid (if useless) file.
  CHECK_OK(io::encode_safetensors({}, {}, &file));
  CHECK(file.size() == 16);
  CHECK_OK(parse_st_vec(file, &st));
  CHECK(st.tensors.empty());
  CHECK_FAILS(st.array("w", &a), RNNCORE_ERR_TENSOR_MISSING, "no tensor named 'w' (the file has 0)");
}

TEST_CASE("safetensors: writer argument checks") {
  std::vector<std::uint8_t> file;
  const float x[2] = {1, 2};
  io::TensorToWrite t;
  t.name = "w";
  t.shape = {2};
  t.data = x;
  CHECK_FAILS(io::encode_safetensors({t, t}, {}, &file), RNNCORE_ERR_FORMAT, "tensor name 'w' is used twice");
  CHECK_FAILS(io::encode_safetensors({t}, {{"k", "a"}, {"k", "b"}}, &file), RNNCORE_ERR_FORMAT,
              "metadata key 'k' is used twice");
  CHECK_FAILS(io::encode_safetensors({t}, {{"k", "\xFF"}}, &file), RNNCORE_ERR_FORMAT, "not valid UTF-8");
  io::TensorToWrite bad = t;
  bad.name = "__metadata__";
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_FORMAT, "'__metadata__' is reserved");
  bad.name = "\xC3";
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_FORMAT, "name is not valid UTF-8");
  bad = t;
  bad.data = nullptr;
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_NULL_POINTER, "tensor 'w': data is null");
  bad = t;
  bad.shape = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_INVALID_SIZE, "rank 9 exceeds");
  bad.shape = {-2};
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_INVALID_SIZE, "shape [-2] x F32 is invalid");
  bad.shape = {1ll << 62, 4};
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_INVALID_SIZE, "invalid");
  bad = t;
  bad.type = static_cast<ElemType>(-1);
  CHECK_FAILS(io::encode_safetensors({bad}, {}, &file), RNNCORE_ERR_INVALID_ENUM, "not a valid ElemType");
  CHECK_FAILS(io::write_safetensors("/nonexistent-dir/m.safetensors", {t}, {}), RNNCORE_ERR_IO,
              "/nonexistent-dir/m.safetensors: cannot open for writing");
  CHECK_FAILS(io::write_safetensors("m.safetensors", {t, t}, {}), RNNCORE_ERR_FORMAT, "m.safetensors: tensor name");
}

TEST_CASE("safetensors: a file in the reference layout") {
  if (fixture_dir().empty()) {
    FAIL("fixtures not found; set RNNCORE_IO_TEST_DATA to tests/data/io");
    return;
  }
  io::SafeTensors st;
  CHECK_OK(io::read_safetensors(fixture_path("small.safetensors").c_str(), &st));
  CHECK(st.tensors.size() == 11);
  CHECK(st.metadata.size() == 2);
  CHECK(*st.meta("format") == "pt");
  CHECK(*st.meta("note") == "tiny fixture \xE2\x9C\x93");
  CHECK(st.data_start % 8 == 0);

  io::Array a;
  std::vector<float> f;
  std::vector<double> d;
  std::vector<std::int32_t> i;
  CHECK_OK(st.array("weight", &a));
  CHECK(a.type == ElemType::f32);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
  CHECK_OK(st.array("bias", &a));
  CHECK_OK(io::to_f64(a, &d));
  CHECK(d == std::vector<double>{0.125, -3.0, 1e-300});
  CHECK_OK(st.array("half", &a));
  CHECK(a.type == ElemType::f16);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{1.5f, -0.0f});
  CHECK(std::signbit(f[1]));
  CHECK_OK(st.array("brain", &a));
  CHECK(a.type == ElemType::bf16);
  CHECK_OK(io::to_f32(a, &f));
  CHECK(f == std::vector<float>{1.0f, -2.5f, 3.140625f});
  CHECK_OK(st.array("steps", &a));
  CHECK(values_of<std::int64_t>(a) == std::vector<std::int64_t>{-1, 1ll << 33});
  CHECK_FAILS(io::to_i32(a, &i), RNNCORE_ERR_FORMAT, "(8589934592) does not fit in int32");
  CHECK_OK(st.array("ints", &a));
  CHECK(a.shape == std::vector<std::int64_t>{2, 1});
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{7, -9});
  CHECK_OK(st.array("mid", &a));
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{-300, 300});
  CHECK_OK(st.array("small", &a));
  CHECK_OK(io::to_i32(a, &i));
  CHECK(i == std::vector<std::int32_t>{-3, 4});
  CHECK_OK(st.array("codes", &a));
  CHECK(a.bytes == std::vector<std::uint8_t>{0, 1, 254, 255});
  CHECK_OK(st.array("mask", &a));
  CHECK(a.type == ElemType::boolean);
  CHECK(a.bytes == std::vector<std::uint8_t>{1, 0, 0, 1});
  CHECK_OK(st.array("empty", &a));
  CHECK(a.shape == std::vector<std::int64_t>{0, 4});
  CHECK(a.bytes.empty());
  CHECK_FAILS(st.array("Weight", &a), RNNCORE_ERR_TENSOR_MISSING, "small.safetensors: no tensor named 'Weight'");
  CHECK_FAILS(io::read_safetensors(fixture_path("missing.safetensors").c_str(), &st), RNNCORE_ERR_IO,
              "missing.safetensors: cannot open for reading");
}

TEST_CASE("safetensors: re-encoding the reference-layout file reproduces it byte for byte") {
  if (fixture_dir().empty()) {
    FAIL("fixtures not found; set RNNCORE_IO_TEST_DATA to tests/data/io");
    return;
  }
  const std::vector<std::uint8_t> original = fixture_bytes("small.safetensors");
  io::SafeTensors st;
  CHECK_OK(parse_st_vec(original, &st));
  std::vector<io::TensorToWrite> tensors;
  for (const io::TensorEntry& e : st.tensors) {
    io::TensorToWrite t;
    t.name = e.name;
    t.type = e.type;
    t.shape = e.shape;
    t.data = st.data(e);
    tensors.push_back(t);
  }
  std::vector<std::uint8_t> encoded;
  CHECK_OK(io::encode_safetensors(tensors, st.metadata, &encoded));
  CHECK(encoded == original);
}

TEST_CASE("safetensors: every truncation of a valid file is a format error") {
  std::vector<std::vector<std::uint8_t>> files;
  if (!fixture_dir().empty()) files.push_back(fixture_bytes("small.safetensors"));
  const float x[3] = {1, 2, 3};
  io::TensorToWrite t;
  t.name = "x";
  t.shape = {3};
  t.data = x;
  std::vector<std::uint8_t> encoded;
  CHECK_OK(io::encode_safetensors({t}, {{"a", "b"}}, &encoded));
  files.push_back(encoded);
  for (const auto& file : files) {
    io::SafeTensors st;
    CHECK_OK(parse_st_vec(file, &st));
    for (std::size_t n = 0; n < file.size(); ++n) {
      io::SafeTensors out;
      out.path = "untouched";
      const rnncore_status status =
          io::parse_safetensors(std::vector<std::uint8_t>(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n)),
                                "t.safetensors", &out);
      if (status != RNNCORE_ERR_FORMAT) CHECK_MESSAGE(status == RNNCORE_ERR_FORMAT, "truncated to " << n);
      if (out.path != "untouched") CHECK_MESSAGE(false, "output modified on failure");
    }
  }
}

TEST_CASE("safetensors: malformed headers") {
  struct Case {
    std::string header;
    std::size_t data_bytes;
    rnncore_status code;
    std::string fragment;
  };
  const std::string f32x3 = "{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}";
  const Case cases[] = {
      {"{\"w\":{\"dtype\":\"F32\" \"shape\":[3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "model.safetensors (JSON header):1:21: syntax error while parsing object - unexpected string literal"},
      {"[]", 0, RNNCORE_ERR_FORMAT, "model.safetensors: the header must be a JSON object, found an array"},
      {"", 0, RNNCORE_ERR_FORMAT, "unexpected end of input"},
      {"{\"w\":" + f32x3 + "} \x01", 12, RNNCORE_ERR_FORMAT, "1:57: syntax error while parsing value - invalid literal; last read: '12]}} <U+0001>'; expected end of input"},
      {"{\"w\xFF\":" + f32x3 + "}", 12, RNNCORE_ERR_FORMAT, "ill-formed UTF-8 byte"},
      {"{\"w\":" + f32x3 + ",\"w\":" + f32x3 + "}", 12, RNNCORE_ERR_FORMAT, "duplicate key 'w'"},
      {"{\"w\":[1,2]}", 0, RNNCORE_ERR_FORMAT,
       "tensor 'w': expected an object with dtype, shape and data_offsets, found an array"},
      {"{\"w\":{\"shape\":[3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT, "tensor 'w': missing field 'dtype'"},
      {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT, "missing field 'shape'"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3]}}", 12, RNNCORE_ERR_FORMAT, "missing field 'data_offsets'"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12],\"offset\":0}}", 12, RNNCORE_ERR_FORMAT,
       "tensor 'w': unexpected field 'offset'"},
      {"{\"w\":{\"dtype\":5,\"shape\":[3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "'dtype' must be a string, found 5"},
      {"{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3, RNNCORE_ERR_TENSOR_DTYPE,
       "model.safetensors: tensor 'w': unsupported dtype 'F8_E4M3'"},
      {"{\"w\":{\"dtype\":\"f32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_TENSOR_DTYPE,
       "unsupported dtype 'f32'"},
      {"{\"w\":{\"dtype\":\"U16\",\"shape\":[3],\"data_offsets\":[0,6]}}", 6, RNNCORE_ERR_TENSOR_DTYPE, "'U16'"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "'shape' must be an array, found 3"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "tensor 'w': shape[0] is -3; dimensions must be non-negative integers"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "shape[1] is 2.5"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3.0],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT, "shape[0] is 3"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"3\"],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "shape[0] is a string"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "shape[0] is 9.2233720368547758e+18"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,3],\"data_offsets\":[0,12]}}", 12, RNNCORE_ERR_FORMAT,
       "tensor 'w': rank 9 exceeds the maximum of 8"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,12]}}", 12,
       RNNCORE_ERR_FORMAT, "shape [4294967296, 4294967296] x F32 is too large (its byte count overflows)"},
      {"{\"w\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, RNNCORE_ERR_FORMAT,
       "too large"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0]}}", 12, RNNCORE_ERR_FORMAT,
       "'data_offsets' must be two non-negative integers [begin, end]"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12,24]}}", 24, RNNCORE_ERR_FORMAT,
       "'data_offsets' must be two"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[-12,0]}}", 12, RNNCORE_ERR_FORMAT,
       "'data_offsets' must be two"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":\"0,12\"}}", 12, RNNCORE_ERR_FORMAT,
       "'data_offsets' must be two"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,0]}}", 12, RNNCORE_ERR_FORMAT,
       "data_offsets [12, 0] are reversed"},
      {"{\"weight_ih_l0\":{\"dtype\":\"F32\",\"shape\":[4,7],\"data_offsets\":[0,96]}}", 112, RNNCORE_ERR_FORMAT,
       "model.safetensors: tensor 'weight_ih_l0': data_offsets [0, 96] do not match shape [4, 7] x F32 (112 bytes)"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 8, RNNCORE_ERR_FORMAT,
       "tensor 'w': data_offsets [0, 12] exceed the 8 bytes of data after the header"},
      {"{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[9223372036854775805,9223372036854775807]}}", 8,
       RNNCORE_ERR_FORMAT, "exceed the 8 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
       24, RNNCORE_ERR_FORMAT, "model.safetensors: tensors 'a' [0, 16] and 'b' [8, 24] overlap"},
      {"{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
       "\"a\":{\"dtype\":\"U8\",\"shape\":[10],\"data_offsets\":[0,10]}}",
       10, RNNCORE_ERR_FORMAT, "tensors 'a' [0, 10] and 'b' [4, 6] overlap"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
       4, RNNCORE_ERR_FORMAT, "overlap"},
      {"{\"__metadata__\":{\"a\":1}}", 0, RNNCORE_ERR_FORMAT, "'__metadata__' value of 'a' must be a string, found 1"},
      {"{\"__metadata__\":[\"a\"]}", 0, RNNCORE_ERR_FORMAT, "'__metadata__' must be an object of strings"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, RNNCORE_ERR_FORMAT, "duplicate key '__metadata__'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    io::SafeTensors st;
    CHECK_FAILS(parse_st_vec(st_bytes(c.header, c.data_bytes), &st), c.code, c.fragment);
  }
}

TEST_CASE("safetensors: accepted oddities") {
  io::SafeTensors st;
  // Gaps between tensors, unused trailing bytes, empty tensors sharing an offset,
  // whitespace and escapes in the header.
  const std::string header =
      " { \"__metadata__\" : { } , \"a\\u0062\" : {\"shape\": [2], \"data_offsets\": [4, 6], \"dtype\": \"U8\"},"
      "\"e1\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[5,5]},"
      "\"e2\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[5,5]},"
      "\"s\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[0,2]}}  \n\t";
  CHECK_OK(parse_st_vec(st_bytes(header, 9), &st));
  CHECK(st.tensors.size() == 4);
  CHECK(st.metadata.empty());
  io::Array a;
  CHECK_OK(st.array("ab", &a));
  CHECK(a.bytes == std::vector<std::uint8_t>{4, 5});
  CHECK_OK(st.array("s", &a));
  CHECK(a.shape.empty());
  CHECK(a.bytes.size() == 2);
}

TEST_CASE("safetensors: files of other formats are named, not parsed") {
  io::SafeTensors st;
  std::vector<std::uint8_t> npy;
  const std::int64_t shape[1] = {3};
  const float values[3] = {1, 2, 3};
  REQUIRE(io::encode_npy(io::ElemType::f32, shape, 1, values, &npy) == RNNCORE_OK);
  CHECK_FAILS(io::parse_safetensors(npy, "w.safetensors", &st), RNNCORE_ERR_FORMAT,
              "w.safetensors: not a safetensors file: it looks like a NumPy .npy array");
  std::vector<std::uint8_t> zip = {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0};
  CHECK_FAILS(io::parse_safetensors(zip, "m.pt", &st), RNNCORE_ERR_FORMAT,
              "m.pt: not a safetensors file: it looks like a zip archive, as PyTorch's torch.save writes");
  std::vector<std::uint8_t> pickle = {0x80, 2, ']', 'q', 0, '(', 'K', 1, 'e', '.'};
  CHECK_FAILS(io::parse_safetensors(pickle, "m.pt", &st), RNNCORE_ERR_FORMAT, "a Python pickle");
  std::vector<std::uint8_t> h5 = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0};
  CHECK_FAILS(io::parse_safetensors(h5, "m.h5", &st), RNNCORE_ERR_FORMAT, "an HDF5 file (a Keras .h5 model)");
  std::vector<std::uint8_t> tflite = {0x1c, 0, 0, 0, 'T', 'F', 'L', '3', 0, 0, 0, 0};
  CHECK_FAILS(io::parse_safetensors(tflite, "m.tflite", &st), RNNCORE_ERR_FORMAT, "a TensorFlow Lite flatbuffer");
  // Unknown bytes with an impossible header length still get the length message.
  std::vector<std::uint8_t> junk = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK_FAILS(io::parse_safetensors(junk, "j.bin", &st), RNNCORE_ERR_FORMAT, "j.bin: header length");
}

TEST_CASE("safetensors: lying lengths") {
  io::SafeTensors st;
  CHECK_FAILS(parse_st_vec({1, 2, 3}, &st), RNNCORE_ERR_FORMAT,
              "model.safetensors: file is 3 bytes; a safetensors file starts with an 8-byte header length");
  CHECK_FAILS(io::parse_safetensors({}, nullptr, &st), RNNCORE_ERR_FORMAT, "<input>: file is 0 bytes");
  const std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
  std::vector<std::uint8_t> file = st_bytes(header, 12);
  CHECK_OK(parse_st_vec(file, &st));

  std::vector<std::uint8_t> bad = file;
  bad[0] = static_cast<std::uint8_t>(header.size() + 13);
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT,
              "header length " + std::to_string(header.size() + 13) + " exceeds the " +
                  std::to_string(header.size() + 12) + " bytes that follow it");
  bad = file;
  bad[7] = 0x80;  // 2^63 + ...
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT, "exceeds the 100000000-byte limit");
  bad = file;
  bad[0] = 0x00;
  bad[1] = 0xE2;
  bad[2] = 0xF5;
  bad[3] = 0x05;  // 100000256 > the limit
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT, "limit");
  bad = file;
  bad[0] = static_cast<std::uint8_t>(header.size() - 2);  // JSON cut short
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT, "(JSON header):1:");
  bad = file;
  bad[0] = static_cast<std::uint8_t>(header.size() + 4);  // JSON runs into the data
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT, "unexpected byte 0x00 after the JSON value");
  bad = file;
  bad.resize(bad.size() - 1);
  CHECK_FAILS(parse_st_vec(bad, &st), RNNCORE_ERR_FORMAT, "exceed the 11 bytes of data");
  CHECK_FAILS(io::parse_safetensors(file, "m", nullptr), RNNCORE_ERR_NULL_POINTER, "m:");

  // A hand-edited entry pointing outside the file is caught before copying.
  CHECK_OK(parse_st_vec(file, &st));
  st.tensors[0].end = 1000;
  io::Array a;
  CHECK_FAILS(st.array("w", &a), RNNCORE_ERR_FORMAT, "byte range lies outside the file");
}

}  // namespace

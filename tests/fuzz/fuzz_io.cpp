// libFuzzer entry point for the host-side readers: every input is fed to the
// JSON, .npy and safetensors parsers. Besides "no crash, no out-of-bounds
// access, no undefined behaviour" it checks a few invariants and traps when
// one breaks:
//   - an accepted array's byte count agrees with its shape and type;
//   - accepted .npy / safetensors inputs re-encode and re-parse to the same
//     tensors, and accepted JSON re-serialises and re-parses to the same tree.
//
// CI runs it for a bounded time per parser (.ci/stage_fuzz.sh). Build by hand (from the repository
// root; the stub supplies rnncore::detail::fail; nlohmann-json3-dev for src/io/json.cpp):
//   clang++-14 -std=c++17 -g -O1 -fno-rtti \
//     -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. -Iinclude \
//     src/io/json.cpp src/io/npy.cpp src/io/safetensors.cpp \
//     tests/fuzz/fuzz_io.cpp tests/fuzz/io_test_stub.cpp -o /tmp/fuzz_io
// Run one parser only with RNNCORE_FUZZ_ONLY=json|npy|safetensors, e.g.
//   RNNCORE_FUZZ_ONLY=npy /tmp/fuzz_io -max_total_time=180 /tmp/corpus_npy tests/data/io
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/io/json.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"

namespace io = rnncore::io;

namespace {

enum Target : unsigned { kJson = 1, kNpy = 2, kSafetensors = 4, kAll = 7 };

unsigned selected_targets() {
  static const unsigned targets = [] {
    const char* only = std::getenv("RNNCORE_FUZZ_ONLY");
    if (only == nullptr || *only == '\0') return static_cast<unsigned>(kAll);
    if (std::strcmp(only, "json") == 0) return static_cast<unsigned>(kJson);
    if (std::strcmp(only, "npy") == 0) return static_cast<unsigned>(kNpy);
    if (std::strcmp(only, "safetensors") == 0) return static_cast<unsigned>(kSafetensors);
    std::fprintf(stderr, "RNNCORE_FUZZ_ONLY must be json, npy or safetensors\n");
    std::abort();
  }();
  return targets;
}

/// Traps (reported by libFuzzer as a crash) when an invariant does not hold.
void require(bool condition) {
  if (!condition) __builtin_trap();
}

void check_array(const io::Array& array) {
  std::uint64_t bytes = 0;
  require(array.shape.size() <= io::kMaxRank);
  require(io::shape_byte_count(array.shape.data(), array.shape.size(), array.type, &bytes));
  require(bytes == array.bytes.size());
  std::vector<float> f;
  std::vector<double> d;
  std::vector<std::int32_t> i;
  // Results vary with the type; only their memory safety matters here.
  (void)io::to_f32(array, &f);
  (void)io::to_f64(array, &d);
  (void)io::to_i32(array, &i);
}

bool same_array(const io::Array& a, const io::Array& b) {
  return a.type == b.type && a.shape == b.shape && a.bytes == b.bytes;
}

// --- JSON -------------------------------------------------------------------

void serialize(const io::JsonValue& value, std::string* out) {
  switch (value.kind) {
    case io::JsonValue::Kind::null: *out += "null"; return;
    case io::JsonValue::Kind::boolean: *out += value.boolean ? "true" : "false"; return;
    case io::JsonValue::Kind::number: {
      char buf[40];
      if (value.is_integer) {
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value.integer));
      } else {
        std::snprintf(buf, sizeof buf, "%.17g", value.number);  // round-trips every double
      }
      *out += buf;
      return;
    }
    case io::JsonValue::Kind::string:
      *out += '"';
      io::json_escape(value.text, out);
      *out += '"';
      return;
    case io::JsonValue::Kind::array:
      *out += '[';
      for (std::size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) *out += ',';
        serialize(value.items[i], out);
      }
      *out += ']';
      return;
    case io::JsonValue::Kind::object:
      *out += '{';
      for (std::size_t i = 0; i < value.members.size(); ++i) {
        if (i > 0) *out += ',';
        *out += '"';
        io::json_escape(value.members[i].first, out);
        *out += "\":";
        serialize(value.members[i].second, out);
      }
      *out += '}';
      return;
  }
}

bool same_json(const io::JsonValue& a, const io::JsonValue& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case io::JsonValue::Kind::null: return true;
    case io::JsonValue::Kind::boolean: return a.boolean == b.boolean;
    case io::JsonValue::Kind::number:
      // "1.0" comes back as the integer literal "1": compare values, and the
      // exact integer whenever both sides have one.
      if (a.is_integer && b.is_integer && a.integer != b.integer) return false;
      return std::memcmp(&a.number, &b.number, sizeof(double)) == 0 || a.number == b.number;
    case io::JsonValue::Kind::string: return a.text == b.text;
    case io::JsonValue::Kind::array:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i) {
        if (!same_json(a.items[i], b.items[i])) return false;
      }
      return true;
    case io::JsonValue::Kind::object:
      if (a.members.size() != b.members.size()) return false;
      for (std::size_t i = 0; i < a.members.size(); ++i) {
        if (a.members[i].first != b.members[i].first || !same_json(a.members[i].second, b.members[i].second)) {
          return false;
        }
      }
      return true;
  }
  return false;
}

void fuzz_json(const std::uint8_t* data, std::size_t size) {
  io::JsonValue value;
  const char* text = reinterpret_cast<const char*>(data);
  if (io::parse_json(text, size, "fuzz.json", &value) != RNNCORE_OK) return;
  std::string again;
  serialize(value, &again);
  io::JsonValue reparsed;
  require(io::parse_json(again.data(), again.size(), "reserialized.json", &reparsed) == RNNCORE_OK);
  require(same_json(value, reparsed));
  (void)io::json_location(text, size, size / 2);
}

// --- .npy -------------------------------------------------------------------

void fuzz_npy(const std::uint8_t* data, std::size_t size) {
  io::Array array;
  if (io::parse_npy(data, size, "fuzz.npy", &array) != RNNCORE_OK) return;
  check_array(array);
  std::vector<std::uint8_t> encoded;
  require(io::encode_npy(array.type, array.shape.data(), static_cast<int>(array.shape.size()), array.bytes.data(),
                         &encoded) == RNNCORE_OK);
  io::Array again;
  require(io::parse_npy(encoded.data(), encoded.size(), "reencoded.npy", &again) == RNNCORE_OK);
  require(same_array(array, again));
}

// --- safetensors ------------------------------------------------------------

void fuzz_safetensors(const std::uint8_t* data, std::size_t size) {
  io::SafeTensors st;
  if (io::parse_safetensors(std::vector<std::uint8_t>(data, data + size), "fuzz.safetensors", &st) != RNNCORE_OK) {
    return;
  }
  require(st.data_start <= st.file.size());
  std::vector<io::TensorToWrite> tensors;
  std::vector<io::Array> arrays(st.tensors.size());
  for (std::size_t i = 0; i < st.tensors.size(); ++i) {
    const io::TensorEntry& entry = st.tensors[i];
    require(entry.begin <= entry.end && entry.end <= st.file.size() - st.data_start);
    require(st.find(entry.name) == &entry);
    require(st.array(entry.name, &arrays[i]) == RNNCORE_OK);
    check_array(arrays[i]);
    io::TensorToWrite t;
    t.name = entry.name;
    t.type = entry.type;
    t.shape = entry.shape;
    t.data = arrays[i].bytes.data();
    tensors.push_back(t);
  }
  for (const auto& m : st.metadata) require(st.meta(m.first) != nullptr);
  io::Array missing;
  require(st.array(std::string("\xFF not a valid name"), &missing) == RNNCORE_ERR_TENSOR_MISSING);

  std::vector<std::uint8_t> encoded;
  require(io::encode_safetensors(tensors, st.metadata, &encoded) == RNNCORE_OK);
  io::SafeTensors again;
  require(io::parse_safetensors(encoded, "reencoded.safetensors", &again) == RNNCORE_OK);
  require(again.tensors.size() == st.tensors.size() && again.metadata == st.metadata);
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    io::Array copy;
    require(again.array(st.tensors[i].name, &copy) == RNNCORE_OK);
    require(same_array(copy, arrays[i]));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const unsigned targets = selected_targets();
  if (targets & kJson) fuzz_json(data, size);
  if (targets & kNpy) fuzz_npy(data, size);
  if (targets & kSafetensors) fuzz_safetensors(data, size);
  return 0;
}

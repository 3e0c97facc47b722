// `rnncore export-c` as a user runs it: the header's arrays read back to exactly the weights the
// library imports from the same file (and the sample to exactly the .npy files), its spec and
// size constants are the plan's, the output is deterministic, and bad arguments get exit 2 (usage)
// or exit 1 (one line naming the file). The firmware example compiles and runs a fresh export
// (examples/firmware/meson.build), so the header is also known to be valid C.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "rnncore/int8.h"
#include "rnncore/io/export_c.hpp"
#include "rnncore/io/npy.hpp"
#include "tests/test_util.hpp"
#include "tests/tool_run.hpp"
#include "rnncore/io/model.hpp"

using namespace rnncore;
using rnncore_test::Result;
using rnncore_test::run;
using rnncore_test::slurp;
using rnncore_test::temp_dir;

namespace {

const std::string kSource = RNNCORE_SOURCE_DIR;

// The C header as the test reads it: #define constants, float array initialisers, the
// `.field = value` lines of the spec initialiser, and a float model's packed weights (the
// `NAME_packed` object: header words, then floats; its floats in arrays["NAME_packed"]).
struct Header {
  std::map<std::string, std::string> defines, fields;
  std::map<std::string, std::vector<float>> arrays;
  std::map<std::string, long> declared_sizes;
  std::vector<std::uint32_t> packed_header;  // the packed object's header words
  std::string text;  // the whole header
};

// Reads the packed object: "} NAME_packed = {", "  {", header words, "  },", "  {", floats, "  },", "};".
void parse_packed(std::istringstream* lines, const std::string& name, long declared, Header* h) {
  std::string line;
  h->declared_sizes[name] = declared;
  std::vector<float>& floats = h->arrays[name];
  int part = -1;  // 0: the header words, 1: the floats
  while (std::getline(*lines, line) && line != "};") {
    if (line == "  {") {
      ++part;
      continue;
    }
    if (line == "  }," || line.find("/*") != std::string::npos) continue;
    const char* p = line.c_str();
    for (;;) {
      while (*p == ' ' || *p == ',') ++p;
      if (*p == '\0') break;
      char* end = nullptr;
      if (part == 0) {
        h->packed_header.push_back(static_cast<std::uint32_t>(std::strtoul(p, &end, 16)));
        REQUIRE_MESSAGE(end != p, "not a header word: " << p);
      } else {
        floats.push_back(std::strtof(p, &end));
        REQUIRE_MESSAGE(end != p, "not a float literal: " << p);
        REQUIRE_MESSAGE(*end == 'f', "a float literal without its f suffix: " << p);
        ++end;
      }
      p = end;
    }
  }
}

Header parse(const std::string& text) {
  Header h;
  h.text = text;
  std::istringstream lines(text);
  std::string line, array;
  long packed_floats = -1;
  while (std::getline(lines, line)) {
    if (line.compare(0, 16, "  float weights[") == 0) {
      packed_floats = std::strtol(line.c_str() + 16, nullptr, 10);
    } else if (line.compare(0, 2, "} ") == 0 && line.find("_packed = {") != std::string::npos) {
      parse_packed(&lines, line.substr(2, line.find(" = ") - 2), packed_floats, &h);
    } else if (line.compare(0, 8, "#define ") == 0) {
      std::istringstream w(line.substr(8));
      std::string name, value;
      w >> name >> value;
      h.defines[name] = value;
    } else if (line.compare(0, 19, "static const float ") == 0) {
      const std::size_t open = line.find('[');
      array = line.substr(19, open - 19);
      h.declared_sizes[array] = std::strtol(line.c_str() + open + 1, nullptr, 10);
      h.arrays[array];
    } else if (!array.empty()) {
      if (line == "};") {
        array.clear();
        continue;
      }
      const std::size_t comment = line.find("/*");
      if (comment != std::string::npos) continue;  // block labels sit on lines of their own
      const char* p = line.c_str();
      for (;;) {
        while (*p == ' ' || *p == ',') ++p;
        if (*p == '\0') break;
        char* end = nullptr;
        const float v = std::strtof(p, &end);
        REQUIRE_MESSAGE(end != p, "not a float literal: " << p);
        REQUIRE_MESSAGE(*end == 'f', "a float literal without its f suffix: " << p);
        h.arrays[array].push_back(v);
        p = end + 1;
      }
    } else if (line.compare(0, 5, "    .") == 0) {
      const std::size_t eq = line.find(" = ");
      std::string value = line.substr(eq + 3);
      if (!value.empty() && value.back() == ',') value.pop_back();
      h.fields[line.substr(5, eq - 5)] = value;
    }
  }
  return h;
}

unsigned char* align_up(unsigned char* p) {
  return p + (kAlignment - reinterpret_cast<std::uintptr_t>(p) % kAlignment) % kAlignment;
}

bool same_bits(const std::vector<float>& a, const float* b, std::size_t n) {
  return a.size() == n && (n == 0 || std::memcmp(a.data(), b, n * sizeof(float)) == 0);
}

// Exports `weights` with `flags` and checks the header against the library's own import and plan.
Header check_export(const std::string& weights, const std::string& flags, const io::ModelHints& hints,
                    int max_batch, int max_seq_len) {
  INFO(weights, " ", flags);
  const std::string out = temp_dir() + "/model.h";
  const Result r = run("export-c --weights " + weights + " --output " + out + " --name net " + flags);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Header h = parse(slurp(out));

  io::LoadedModel model;
  std::string err;
  REQUIRE_MESSAGE(io::load_weights(weights, hints, nullptr, &model, &err) == Status::ok, err);
  const RnnSpec& spec = model.spec;
  const std::size_t n = model.canonical.size() / sizeof(float);
  // The packed object: the canonical weights after the header, zero-padded to PACKED_BYTES.
  const std::vector<float>& packed = h.arrays.at("net_packed");
  REQUIRE(packed.size() >= n);
  CHECK(h.declared_sizes.at("net_packed") == static_cast<long>(packed.size()));
  CHECK(same_bits(std::vector<float>(packed.begin(), packed.begin() + n), reinterpret_cast<const float*>(model.canonical.data()), n));
  for (std::size_t i = n; i < packed.size(); ++i) CHECK(packed[i] == 0.0f);
  CHECK(h.packed_header.size() == 16);
  CHECK(h.defines.at("NET_KERNEL_FAMILY") == "\"f32_rnn__reference\"");
  CHECK(h.defines.at("NET_MAX_ISA") == "RNNCORE_ISA_NONE");
  CHECK(h.defines.at("NET_PARAM_COUNT") == std::to_string(n));
  CHECK(h.defines.at("NET_INPUT_SIZE") == std::to_string(spec.input_size));
  CHECK(h.defines.at("NET_HIDDEN_SIZE") == std::to_string(spec.hidden_size));
  CHECK(h.fields.at("input_size") == std::to_string(spec.input_size));
  CHECK(h.fields.at("hidden_size") == std::to_string(spec.hidden_size));
  CHECK(h.fields.at("num_layers") == std::to_string(spec.num_layers));
  CHECK(h.fields.at("direction") == (spec.direction == Direction::bidirectional ? "RNNCORE_BIDIRECTIONAL" : "RNNCORE_UNIDIRECTIONAL"));
  if (spec.mode == Mode::gru)
    CHECK(h.fields.at("gru_variant") ==
          (spec.gru_variant == GruVariant::reset_before ? "RNNCORE_GRU_RESET_BEFORE" : "RNNCORE_GRU_RESET_AFTER"));

  // The sizes are those of the portable scalar path for the requested limits.
  PlanOptions opt;
  opt.max_batch = max_batch;
  opt.max_seq_len = max_seq_len;
  opt.max_isa = Isa::none;
  Plan whole, step;
  REQUIRE(Plan::create(spec, opt, &whole) == Status::ok);
  opt.max_seq_len = 1;
  REQUIRE(Plan::create(spec, opt, &step) == Status::ok);
  CHECK(h.defines.at("NET_MAX_BATCH") == std::to_string(max_batch));
  CHECK(h.defines.at("NET_MAX_SEQ_LEN") == std::to_string(max_seq_len));
  CHECK(h.defines.at("NET_PACKED_BYTES") == std::to_string(whole.packed_weight_bytes()));
  CHECK(h.defines.at("NET_WORKSPACE_BYTES") == std::to_string(whole.workspace_bytes()));
  if (spec.direction == Direction::bidirectional) {
    // A bidirectional network cannot stream: no step workspace, a comment saying why.
    CHECK(h.defines.count("NET_STEP_WORKSPACE_BYTES") == 0);
    CHECK(h.text.find("/* No NET_STEP_WORKSPACE_BYTES: the network is bidirectional and cannot stream") !=
          std::string::npos);
    CHECK(r.out.find("bidirectional: no streaming") != std::string::npos);
  } else {
    CHECK(h.defines.at("NET_STEP_WORKSPACE_BYTES") == std::to_string(step.workspace_bytes()));
    CHECK(h.text.find("No NET_STEP_WORKSPACE_BYTES") == std::string::npos);
  }
  CHECK(h.defines.count("NET_ARENA_BYTES") == 0);  // the weights are not in RAM: the workspace is the arena
  CHECK(64 + 4 * packed.size() == whole.packed_weight_bytes());
  // The header's packed object is what pack_weights of that plan writes, byte for byte.
  std::vector<unsigned char> fresh(whole.packed_weight_bytes() + kAlignment);
  unsigned char* at = align_up(fresh.data());
  REQUIRE(whole.pack_weights(model.canonical.data(), at, whole.packed_weight_bytes()) == Status::ok);
  CHECK(std::memcmp(at, h.packed_header.data(), 64) == 0);
  CHECK(std::memcmp(at + 64, packed.data(), 4 * packed.size()) == 0);
  return h;
}

// The header's packed object laid out in memory as a little-endian compiler lays it out.
struct PackedCopy {
  std::vector<unsigned char> bytes;
  unsigned char* at = nullptr;
  explicit PackedCopy(const Header& h) : bytes(64 + 4 * h.arrays.at("net_packed").size() + kAlignment) {
    at = align_up(bytes.data());
    std::memcpy(at, h.packed_header.data(), 64);
    std::memcpy(at + 64, h.arrays.at("net_packed").data(), 4 * h.arrays.at("net_packed").size());
  }
};

std::vector<float> npy_floats(const std::string& path) {
  io::Array a;
  REQUIRE(io::read_npy(path.c_str(), &a) == RNNCORE_OK);
  std::vector<float> v;
  REQUIRE(io::to_f32(a, &v) == RNNCORE_OK);
  return v;
}

}  // namespace

TEST_CASE("export-c: weights, spec and sizes read back exactly, for every cell and format") {
  const std::string golden = kSource + "/tests/golden/";
  io::ModelHints hints;
  SUBCASE("PyTorch GRU, 2 layers, bidirectional (odd sizes)") {
    hints.prefix = "rnn.";
    hints.prefix_given = true;
    check_export(golden + "pytorch/gru_l2_bi_full_I33_H17_h0.safetensors", "--prefix rnn. --max-batch 3 --max-seq-len 7",
                 hints, 3, 7);
  }
  SUBCASE("PyTorch Elman RNN (relu): the mode comes from --mode") {
    hints.prefix = "rnn.";
    hints.prefix_given = true;
    hints.mode = "rnn_relu";
    const Header h = check_export(golden + "pytorch/rnn_relu_l1_uni_full_I33_H33_h0.safetensors",
                                  "--prefix rnn. --mode rnn_relu", hints, 1, 1);
    CHECK(h.fields.at("mode") == "RNNCORE_MODE_RNN_RELU");
  }
  SUBCASE("ONNX GRU: reset-before is the format's default and is exported as such") {
    const Header h = check_export(golden + "onnx/gru_lbr0_uni_I3_H3_B3_T7.safetensors", "", hints, 1, 1);
    CHECK(h.fields.at("gru_variant") == "RNNCORE_GRU_RESET_BEFORE");
  }
  SUBCASE("TF LSTMCell with peepholes, cell clip and a projection: the spec's fields and the state sizes") {
    const Header h = check_export(golden + "tf/lstm_peep_cellclip_proj_l2_len.model.safetensors", "--max-batch 2", hints, 2, 1);
    CHECK(h.fields.at("proj_size") == "2");
    CHECK(h.fields.at("peepholes") == "1");
    CHECK(h.fields.at("cell_clip") == "0.25");
    CHECK(h.fields.count("proj_clip") == 0);  // 0: not written
    CHECK(h.defines.at("NET_OUTPUT_SIZE") == "2");      // D·P
    CHECK(h.defines.at("NET_STATE_SIZE") == "4");       // L·D·P
    CHECK(h.defines.at("NET_CELL_STATE_SIZE") == "8");  // L·D·H
    CHECK(h.text.find("/* layer 1: W_proj [2, 4] */") != std::string::npos);
    CHECK(h.text.find("/* layer 0: p_o [4] */") != std::string::npos);
  }
  SUBCASE("plain models get no extension fields (their headers keep their bytes)") {
    const Header h = check_export(golden + "onnx/gru_lbr0_uni_I3_H3_B3_T7.safetensors", "", hints, 1, 1);
    CHECK(h.fields.count("proj_size") == 0);
    CHECK(h.defines.count("NET_CELL_STATE_SIZE") == 0);
  }
}

TEST_CASE("export-c: a file whose layers clip differently is refused (one rnncore_spec holds every layer)") {
  const Result r = run("export-c --weights " + kSource + "/tests/golden/tf/lstm_perlayer_clips_l3.model.safetensors --output " +
                       temp_dir() + "/clips.h");
  CHECK(r.code == 1);
  CHECK(r.err.find("layer 1 differs from layer 0 (size, projection, peepholes or clips)") != std::string::npos);
}

TEST_CASE("export-c: the sample input and expected output are the .npy files, bit for bit") {
  const std::string models = kSource + "/examples/models/";
  const std::string flags = "--sample-input " + models + "lstm_small_input.npy --sample-output " + models +
                            "lstm_small_expected_y.npy";
  const Header h = check_export(models + "lstm_small.safetensors", flags, io::ModelHints{}, 4, 50);
  const std::vector<float> x = npy_floats(models + "lstm_small_input.npy"), y = npy_floats(models + "lstm_small_expected_y.npy");
  CHECK(same_bits(h.arrays.at("net_sample_input"), x.data(), x.size()));
  CHECK(same_bits(h.arrays.at("net_sample_output"), y.data(), y.size()));
  CHECK(h.defines.at("NET_SAMPLE_STEPS") == "50");
  CHECK(h.defines.at("NET_SAMPLE_BATCH") == "4");
  CHECK(h.fields.at("mode") == "RNNCORE_MODE_LSTM");

  // The packed object runs in place on a plan of its family (max_isa = RNNCORE_ISA_NONE) and gives
  // the sample output; a plan of another family (this host's SIMD kernels) refuses it, naming
  // both families and the max_isa that matches.
  const PackedCopy packed(h);
  io::LoadedModel model;
  std::string err;
  REQUIRE_MESSAGE(io::load_weights(models + "lstm_small.safetensors", io::ModelHints{}, nullptr, &model, &err) == Status::ok,
                  err);
  const RnnSpec& spec = model.spec;
  PlanOptions opt;
  opt.max_batch = 4;
  opt.max_seq_len = 50;
  opt.max_isa = Isa::none;
  Plan scalar, best;
  REQUIRE(Plan::create(spec, opt, &scalar) == Status::ok);
  std::vector<unsigned char> ws(scalar.workspace_bytes() + kAlignment);
  std::vector<float> out(y.size());
  ForwardArgs a;
  a.batch = 4;
  a.seq_len = 50;
  a.x = x.data();
  a.y = out.data();
  CHECK(scalar.forward(packed.at, align_up(ws.data()), scalar.workspace_bytes(), a) == Status::ok);
  float worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(out[i] - y[i]));
  CHECK(worst <= 1e-5f);  // PyTorch's output, float32-level differences
  opt.max_isa = Isa::best;
  REQUIRE(Plan::create(spec, opt, &best) == Status::ok);
  if (best.backend() == Backend::reference) {
    MESSAGE("no SIMD kernels on this machine or build: the refusal of another family is not checked");
  } else {
    std::vector<unsigned char> ws2(best.workspace_bytes() + kAlignment);
    CHECK(best.forward(packed.at, align_up(ws2.data()), best.workspace_bytes(), a) == Status::weights_not_packed);
    const std::string detail = last_error_detail();
    INFO(detail);
    CHECK(detail.find("the packed weights are for f32_rnn__reference (ISA none), this plan runs " +
                      std::string(best.kernel_name())) != std::string::npos);
    CHECK(detail.find("plan with max_isa = RNNCORE_ISA_NONE (the family they were packed or exported for)") !=
          std::string::npos);
  }

  // Deterministic: the same command writes the same bytes.
  const std::string first = slurp(temp_dir() + "/model.h");
  REQUIRE(run("export-c --weights " + models + "lstm_small.safetensors --output " + temp_dir() + "/model.h --name net " +
              flags).code == 0);
  CHECK(slurp(temp_dir() + "/model.h") == first);
}

TEST_CASE("export-c: a bidirectional int8 layer is written as its two directions") {
  // (tests/int8_bidi_header.c runs such a header through the C API against LiteRT.)
  const std::string d = temp_dir();
  const Result r = run("export-c --weights " + kSource + "/tests/golden/tflite_int8/stacks/bidi_I5_H6_T7_B2_seq.safetensors" +
                       " --name net --output " + d + "/bidi.h");
  REQUIRE(r.code == 0);
  const std::string h = slurp(d + "/bidi.h");
  CHECK(h.find("#define NET_L0_BIDIRECTIONAL 1") != std::string::npos);
  CHECK(h.find("#define NET_L0_HIDDEN_SIZE 12") != std::string::npos);
  CHECK(h.find("#define NET_L0_FW_HIDDEN_SIZE 6") != std::string::npos);
  CHECK(h.find("static const rnncore_int8_lstm_quantization net_l0_bw_quantization") != std::string::npos);
}

namespace {

// The integer values of the C array `name` in a header (its comment lines skipped).
std::vector<long> int_array(const std::string& text, const std::string& name) {
  std::vector<long> v;
  const std::size_t at = text.find(" " + name + "[");
  REQUIRE_MESSAGE(at != std::string::npos, name);
  std::istringstream lines(text.substr(text.find('\n', at) + 1));
  std::string line;
  while (std::getline(lines, line) && line != "};") {
    if (line.find("/*") != std::string::npos) continue;
    for (const char* p = line.c_str(); *p != '\0';) {
      char* end = nullptr;
      const long x = std::strtol(p, &end, 10);
      if (end == p) break;
      v.push_back(x);
      p = end + (*end == ',' ? 1 : 0);
    }
  }
  return v;
}

// Element (j, k) of gate g of the interleaved layout, from its definition (int8.h): panels of 4 rows,
// each 16 bytes a word of 4 columns of each of the panel's rows; rows and columns padded to 4.
std::size_t interleaved_at(int g, int j, int k, int rows, int cols) {
  const std::size_t words = static_cast<std::size_t>((cols + 3) / 4), panels = static_cast<std::size_t>((rows + 3) / 4);
  // within a group of 4 columns: words (rows 0 1, columns 0 2), (2 3, 0 2), (0 1, 1 3), (2 3, 1 3);
  // in a word, (row even, column c), (odd, c), (even, c + 2), (odd, c + 2)
  return g * panels * words * 16 + ((j / 4) * words + k / 4) * 16 + (k % 2) * 8 + (j % 4 / 2) * 4 + (k % 4 / 2) * 2 + j % 2;
}

}  // namespace

TEST_CASE("export-c --interleave: every LSTM's weights interleaved and 4-byte aligned, the rest as row-major") {
  // (tests/int8_*_header.c run such headers through the C API against LiteRT: the *_interleaved tests.)
  // Two Bidirectional layers, H 6 and 5, inputs 4 and 12: rows padded in every direction.
  const std::string d = temp_dir();
  const std::string model = kSource + "/tests/golden/tflite_int8/stacks/bidi_stack2_I4_H6_5_T6_B2_seq_bibi.safetensors";
  REQUIRE(run("export-c --weights " + model + " --name net --output " + d + "/rows.h").code == 0);
  const Result r = run("export-c --weights " + model + " --name net --output " + d + "/panels.h --interleave");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("interleaved") != std::string::npos);
  const std::string rows = slurp(d + "/rows.h"), panels = slurp(d + "/panels.h");
  const Header h = parse(panels);
  CHECK(rows.find("INTERLEAVED4") == std::string::npos);
  CHECK(panels.find("#define RNNCORE_INT8_ALIGN4 __attribute__((aligned(4)))") != std::string::npos);
  // A library of another layout revision than the header's refuses it at compile time.
  CHECK(panels.find("#if !defined(RNNCORE_INT8_INTERLEAVED4_REVISION) || RNNCORE_INT8_INTERLEAVED4_REVISION != " +
                    std::to_string(RNNCORE_INT8_INTERLEAVED4_REVISION) + "\n#error") != std::string::npos);
  int layers = 0;
  for (const char* lstm : {"l0_fw", "l0_bw", "l1_fw", "l1_bw"}) {
    const std::string n = std::string("net_") + lstm;
    std::string N = n;
    for (char& c : N) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CAPTURE(n);
    const int I = std::stoi(h.defines.at(N.substr(0, 6) + "_INPUT_SIZE"));  // NET_L<k>_INPUT_SIZE
    const int H = std::stoi(h.defines.at(N + "_HIDDEN_SIZE"));
    const auto pad = [](int x) { return (x + 3) / 4 * 4; };
    CHECK(h.defines.at(N + "_SCRATCH_BYTES") == std::to_string(3 + 2 * (pad(I) + pad(H))));
    for (const auto& [m, k] : {std::make_pair(n + "_w", I), std::make_pair(n + "_r", H)}) {
      CAPTURE(m);
      CHECK(panels.find("static RNNCORE_INT8_ALIGN4 const int8_t " + m + "[") != std::string::npos);
      const std::vector<long> a = int_array(rows, m), b = int_array(panels, m);
      REQUIRE(a.size() == 4u * H * k);
      REQUIRE(b.size() == 4u * pad(H) * pad(k));
      std::vector<long> expected(b.size(), 0);
      // An odd row's weight less 1 where its even row's is negative (the int16 half is then
      // 256 · odd + even); the padding rows are 0 by that rule too.
      const auto weight = [&](int g, int j, int c) { return j < H ? a[(static_cast<std::size_t>(g) * H + j) * k + c] : 0L; };
      for (int g = 0; g < 4; ++g)
        for (int j = 0; j < pad(H); ++j)
          for (int c = 0; c < k; ++c)
            expected[interleaved_at(g, j, c, H, k)] = weight(g, j, c) - (j % 2 == 1 && weight(g, j - 1, c) < 0 ? 1 : 0);
      CHECK(b == expected);
      const std::string gate1 = m + " + " + std::to_string(pad(H) * pad(k)) + ", ";
      CHECK(panels.find(gate1) != std::string::npos);  // the pointer tables step by a gate's padded size
    }
    for (const std::string& m : {n + "_bias", n + "_folded_bias"}) CHECK(int_array(rows, m) == int_array(panels, m));
    ++layers;
  }
  CHECK(layers == 4);
  std::size_t fields = 0;
  const std::string field = "    .weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4,\n";
  for (std::size_t at = panels.find(field); at != std::string::npos; at = panels.find(field, at + 1)) ++fields;
  CHECK(fields == 4);

  // A float model has no int8 weights to interleave: a usage error.
  const Result f = run("export-c --weights " + kSource + "/examples/models/lstm_small.safetensors --output " + d +
                       "/f.h --interleave");
  CHECK(f.code == 2);
  CHECK(f.err.find("--interleave") != std::string::npos);
  CHECK(run("help export-c").out.find("--interleave") != std::string::npos);
}

TEST_CASE("export-c: a Bidirectional merged by sum, mul or ave is written with its prepared ADD / MUL") {
  // (tests/int8_merge_header.c runs an ave header through the C API against LiteRT.)
  const std::string d = temp_dir();
  const std::string stacks = kSource + "/tests/golden/tflite_int8/stacks/";
  const Result sum = run("export-c --weights " + stacks + "bidi_sum_I5_H8_T7_B2_seq.safetensors --name net --output " +
                         d + "/sum.h");
  REQUIRE(sum.code == 0);
  std::string h = slurp(d + "/sum.h");
  CHECK(h.find("#define NET_L0_MERGE 1") != std::string::npos);
  CHECK(h.find("#define NET_L0_HIDDEN_SIZE 8") != std::string::npos);  // one direction's width
  CHECK(h.find("static const rnncore_int8_add net_l0_merge_add = {") != std::string::npos);
  CHECK(h.find("net_l0_merge_mul") == std::string::npos);
  const Result mul = run("export-c --weights " + stacks + "bidi_mul_dense_I6_H6_T8_B3_last_4.safetensors --name net --output " +
                         d + "/mul.h");
  REQUIRE(mul.code == 0);
  h = slurp(d + "/mul.h");
  CHECK(h.find("#define NET_L0_MERGE 2") != std::string::npos);
  CHECK(h.find("static const rnncore_int8_mul net_l0_merge_mul = {") != std::string::npos);
  CHECK(h.find("#define NET_L0_MERGE_HALF") == std::string::npos);
}

TEST_CASE("export-c: int8 heads with a table activation and a softmax are written as constants") {
  // (tests/int8_head_header.c runs such a header through the C API against LiteRT.)
  const std::string d = temp_dir();
  Result r = run("export-c --weights " + kSource + "/tests/golden/tflite_int8/stacks/dense_tanh_stack2_I4_H12_8_T6_B3_tanh6_3.safetensors" +
                 " --name net --output " + d + "/tanh.h");
  REQUIRE(r.code == 0);
  std::string h = slurp(d + "/tanh.h");
  CHECK(h.find("#define NET_FC0_ACTIVATION RNNCORE_INT8_TANH") != std::string::npos);
  CHECK(h.find("static const int8_t net_fc0_table[256]") != std::string::npos);
  CHECK(h.find("#define NET_FC1_ACTIVATION 0") != std::string::npos);
  CHECK(h.find("#define NET_SOFTMAX 0") != std::string::npos);
  r = run("export-c --weights " + kSource + "/tests/golden/tflite_int8/stacks/dense_softmax_I6_H12_T10_B4_softmax5.safetensors" +
          " --name net --output " + d + "/softmax.h");
  REQUIRE(r.code == 0);
  h = slurp(d + "/softmax.h");
  CHECK(h.find("#define NET_SOFTMAX 1") != std::string::npos);
  CHECK(h.find("static const rnncore_int8_softmax net_softmax = {") != std::string::npos);
}

TEST_CASE("export-c: a float Linear head and an Embedding go into a rnncore_stack_spec with the packed weights") {
  // The header runs through the C API in tests/float_head_header.c (tests/meson.build); here its text.
  const std::string d = temp_dir();
  const std::string head = kSource + "/tests/golden/pytorch_head/bilstm_linear_last_step_softmax";
  const Result r = run("export-c --weights " + head + ".safetensors --sample-input " + head + ".x.npy --sample-output " + head +
                       ".y.npy --output " + d + "/head.h --name net");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string h = slurp(d + "/head.h");
  CHECK(h.find("static const rnncore_stack_spec net_stack = {") != std::string::npos);
  CHECK(h.find("static const rnncore_spec net_spec") == std::string::npos);  // it would not match net_packed
  CHECK(h.find(".head_out_features = 4,") != std::string::npos);
  CHECK(h.find(".head_activation = RNNCORE_ACTIVATION_SOFTMAX,") != std::string::npos);
  CHECK(h.find(".head_last_step_only = 1,") != std::string::npos);
  CHECK(h.find("#define NET_OUTPUT_SIZE 4\n") != std::string::npos);
  CHECK(h.find("and the expected output [B, F]") != std::string::npos);
  // A sample output of the wrong shape for a last-step head is named.
  const Result wrong = run("export-c --weights " + head + ".safetensors --sample-input " + head + ".x.npy --sample-output " +
                           head + ".x.npy --output " + d + "/bad.h");
  CHECK(wrong.code == 1);
  CHECK(wrong.err.find("expected shape [B, 4] (the head's output on each row's last step)") != std::string::npos);

  const std::string embed = kSource + "/tests/data/quantize/embed_lstm_linear_tanh";
  const Result e = run("export-c --weights " + embed + ".safetensors --output " + d + "/embed.h --name net");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const std::string eh = slurp(d + "/embed.h");
  CHECK(eh.find(".embedding_vocab_size = 7,") != std::string::npos);
  CHECK(eh.find("#define NET_EMBEDDING_VOCAB 7\n") != std::string::npos);
  CHECK(eh.find(".head_activation = RNNCORE_ACTIVATION_TANH,") != std::string::npos);
  const Result ids = run("export-c --weights " + embed + ".safetensors --sample-input " + embed + "_ids.npy --output " + d + "/e.h");
  CHECK(ids.code == 2);
  CHECK(ids.err.find("a float header's sample of token ids is not written yet") != std::string::npos);
}

TEST_CASE("export-c: usage errors exit 2, other errors exit 1 with one line naming the file") {
  const std::string model = kSource + "/examples/models/lstm_small.safetensors";
  const std::string out = " --output " + temp_dir() + "/bad.h";
  CHECK(run("export-c --weights " + model).code == 2);                                   // no --output
  CHECK(run("export-c --weights " + model + out + " --name 9lives").code == 2);          // not a C identifier
  CHECK(run("export-c --weights " + model + out + " --frobnicate").code == 2);           // unknown option
  CHECK(run("export-c --weights " + model + out + " --sample-output " + model).code == 2);  // output without input
  CHECK(run("export-c --weights " + model + out + " --max-batch 0").code == 2);

  const Result missing = run("export-c --weights " + temp_dir() + "/none.safetensors" + out);
  CHECK(missing.code == 1);
  CHECK(missing.err.find("none.safetensors") != std::string::npos);

  // A sample whose feature size is not the model's input size: the file and both shapes are named.
  const Result wrong = run("export-c --weights " + model + out + " --sample-input " + kSource +
                           "/examples/models/lstm_small_expected_y.npy");
  CHECK(wrong.code == 1);
  CHECK(wrong.err.find("lstm_small_expected_y.npy: expected shape [T, B, 16]") != std::string::npos);
  CHECK(wrong.err.find("found [50, 4, 32]") != std::string::npos);

  const Result help = run("help export-c");
  CHECK(help.code == 0);
  CHECK(help.out.find("--sample-input") != std::string::npos);
}

TEST_CASE("export-c: io::export_c, called as a library function, gives the command's header byte for byte") {
  const std::string d = temp_dir(), m = kSource + "/examples/models/";
  for (const char* model : {"lstm_small", "lstm_int8"}) {
    INFO(model);
    const std::string w = m + model + ".safetensors", x = m + model + "_input.npy";
    const Result r = run("export-c --weights " + w + " --sample-input " + x + " --output " + d + "/cmd-model.h");
    REQUIRE(r.code == 0);
    io::ExportCOptions o;
    o.weights = w;
    o.sample_input = x;
    o.output = d + "/cmd-model.h";  // named in the header's first line
    o.name = io::c_identifier_from(o.output);
    CHECK(o.name == "cmd_model");
    std::string header, err;
    io::ExportCReport report;
    REQUIRE_MESSAGE(io::export_c(o, &header, &report, &err) == Status::ok, err);
    CHECK(header == slurp(d + "/cmd-model.h"));
    CHECK(r.out == o.output + ": " + report.summary + "\n");
    CHECK(!report.option_error);
    // an option that does not fit the model: an option error (the command's exit 2)
    if (std::string(model) == "lstm_int8") o.max_batch = 2;
    else o.interleave = true;
    CHECK(io::export_c(o, &header, &report, &err) == Status::unsupported);
    CHECK(report.option_error);
    o.max_batch = 0;
    o.interleave = false;
    o.name = "9lives";
    CHECK(io::export_c(o, &header, &report, &err) != Status::ok);
    CHECK(report.option_error);
    CHECK(err == "--name must be a C identifier, got '9lives'");
  }
  CHECK(io::c_identifier_from("models/9-lives.h") == "model_9_lives");
}

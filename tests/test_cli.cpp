// The rnncore command as a user runs it (docs/design.md §8): every golden case through `rnncore run` from
// weights-only files (no metadata: layers, directions, sizes and mode are inferred), and the error
// contract — exit 2 for usage, exit 1 with one line naming the file, tensor and shapes, never a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rnncore/gpu.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "tests/golden_files.hpp"
#include "tests/test_util.hpp"
#include "tests/tool_run.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

// Writes tensor `name` of a golden file as .npy.
void extract(const io::SafeTensors& f, const std::string& name, const std::string& path) {
  io::Array a;
  REQUIRE(f.array(name, &a) == RNNCORE_OK);
  REQUIRE(io::write_npy(path.c_str(), a.type, a.shape.data(), static_cast<int>(a.shape.size()), a.bytes.data()) == RNNCORE_OK);
}

double compare_npy(const std::string& got_path, const io::SafeTensors& f, const std::string& expected) {
  io::Array got, want;
  REQUIRE(io::read_npy(got_path.c_str(), &got) == RNNCORE_OK);
  REQUIRE(f.array(expected, &want) == RNNCORE_OK);
  REQUIRE(got.shape == want.shape);
  CHECK(got.type == io::ElemType::f32);
  std::vector<double> g, w;
  REQUIRE(io::to_f64(got, &g) == RNNCORE_OK);
  REQUIRE(io::to_f64(want, &w) == RNNCORE_OK);
  return rel_error(g.data(), w.data(), w.size());
}

// Runs one golden case through the tool from a weights-only copy of its file.
void run_golden(const std::string& path) {
  INFO(path);
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
  const bool onnx = *f.meta("format") == "onnx", keras = *f.meta("format") == "keras";
  const std::string mode = *f.meta("mode");
  const std::string d = temp_dir();
  std::vector<io::TensorToWrite> weights;
  for (const io::TensorEntry& e : f.tensors) {
    const bool param = onnx    ? (e.name == "W" || e.name == "R" || e.name == "B")
                       : keras ? (e.name.compare(0, 6, "kernel") == 0 || e.name.compare(0, 16, "recurrent_kernel") == 0 ||
                                  e.name.compare(0, 4, "bias") == 0)
                               : e.name.compare(0, 4, "rnn.") == 0;
    if (param) weights.push_back({e.name, e.type, e.shape, f.data(e)});
  }
  REQUIRE(io::write_safetensors((d + "/w.safetensors").c_str(), weights, {}) == RNNCORE_OK);
  extract(f, "input", d + "/x.npy");
  std::string args = "run --weights " + d + "/w.safetensors --input " + d + "/x.npy --output " + d + "/y.npy --hn " + d + "/hn.npy";
  if (mode == "lstm") args += " --cn " + d + "/cn.npy";
  if (mode == "rnn_tanh" || mode == "rnn_relu") args += " --mode " + mode;  // one gate: the activation must be given
  if (mode == "gru" && onnx && *f.meta("gru") == "reset-after") args += " --gru reset-after";  // ONNX default is reset-before
  if (mode == "gru" && keras && f.find("bias") == nullptr) args += " --gru " + *f.meta("gru");  // no bias shape to tell
  if (*f.meta("batch_first") == "1") args += " --batch-first";
  const char* h0 = onnx ? "initial_h" : "h0";
  const char* c0 = onnx ? "initial_c" : "c0";
  const char* len = onnx ? "sequence_lens" : "seq_lengths";
  if (f.find(h0) != nullptr) {
    extract(f, h0, d + "/h0.npy");
    args += " --h0 " + d + "/h0.npy";
  }
  if (f.find(c0) != nullptr) {
    extract(f, c0, d + "/c0.npy");
    args += " --c0 " + d + "/c0.npy";
  }
  if (f.find(len) != nullptr) {
    extract(f, len, d + "/len.npy");
    args += " --seq-lengths " + d + "/len.npy";
  }
  const Result r = run(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  // PyTorch has one GRU (reset-after): nothing was chosen, so nothing is noted.
  if (!onnx && !keras) CHECK(r.err.find("GRU variant") == std::string::npos);
  CHECK(compare_npy(d + "/y.npy", f, "expected.y") < 1e-5);
  CHECK(compare_npy(d + "/hn.npy", f, "expected.hn") < 1e-5);
  if (mode == "lstm") CHECK(compare_npy(d + "/cn.npy", f, "expected.cn") < 1e-5);
}

std::string src(const std::string& rel) { return std::string(RNNCORE_SOURCE_DIR) + "/" + rel; }
const std::string kModel = "examples/models/lstm_small";

// An error run: exit 1 and exactly one stderr line "rnncore: error: ..." containing `fragment`.
void expect_error(const std::string& args, const std::string& fragment) {
  const Result r = run(args);
  INFO(args);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.compare(0, 16, "rnncore: error: ") == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(fragment) != std::string::npos);
}

std::string base_args() {
  return "run --weights " + src(kModel + ".safetensors") + " --input " + src(kModel + "_input.npy") + " --output " +
         temp_dir() + "/out.npy";
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes, std::size_t n) {
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("cli: the bundled example reproduces PyTorch") {
  const Result r = run(base_args() + " --expect " + src(kModel + "_expected_y.npy") + " --expect-hn " +
                       src(kModel + "_expected_hn.npy") + " --expect-cn " + src(kModel + "_expected_cn.npy") +
                       " --tolerance 1e-5");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("model: lstm, 2 layer(s), unidirectional, input 16, hidden 32") != std::string::npos);
  CHECK(r.out.find("y: max_abs_diff=") != std::string::npos);
}

TEST_CASE("cli: every golden case through rnncore run with inferred specs") {
  for (const char* dir : {"tests/golden/pytorch", "tests/golden/onnx", "tests/golden/keras"}) {
    const auto cases = list_cases(src(dir));
    REQUIRE(cases.size() >= 20);
    for (const std::string& c : cases) run_golden(c);
  }
}

TEST_CASE("cli: PyTorch nn.LSTM(proj_size) golden cases through rnncore run (P inferred, reference backend)") {
  const auto cases = list_cases(src("tests/golden/pytorch_proj"));
  REQUIRE(cases.size() >= 4);
  for (const std::string& c : cases) run_golden(c);
}

TEST_CASE("cli: usage errors exit 2") {
  CHECK(run("").code == 2);
  CHECK(run("frobnicate").code == 2);
  CHECK(run("run --input x.npy --output y.npy").code == 2);
  CHECK(run(base_args() + " --no-such-flag").code == 2);
  CHECK(run(base_args() + " --threads zero").code == 2);
  CHECK(run(base_args() + " --backend quantum").code == 2);
  CHECK(run(base_args() + " --mode lstm --mode gru").code == 2);
  CHECK(run("run --help").code == 0);
  CHECK(run("help").code == 0);
  CHECK(run("info").code == 0);
  CHECK(run("help nope").code == 2);
  CHECK(run(base_args() + " --train --mc-dropout").code == 2);
  CHECK(run(base_args() + " --seed -1").code == 2);
  CHECK(run("export-c --weights w.safetensors --output m.h --sample-output y.npy").code == 2);
}

TEST_CASE("cli: --threads above the core count is refused unless --oversubscribe") {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || cores > 64) return;  // unknown, or too many threads to start for a test
  const std::string too_many = " --threads " + std::to_string(cores + 1);
  for (const std::string& args : {base_args() + too_many, "bench --seq 2 --input 4 --hidden 4 --reps 1" + too_many}) {
    INFO(args);
    const Result r = run(args);
    CHECK(r.code == 2);
    CHECK(r.err.find("is more than the " + std::to_string(cores) + " cores of this machine") != std::string::npos);
    CHECK(r.err.find("--oversubscribe") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);  // the problem, the hint
    const Result forced = run(args + " --oversubscribe");
    INFO(forced.err);
    CHECK(forced.code == 0);
  }
  CHECK(run(base_args() + " --threads " + std::to_string(cores)).code == 0);
}

TEST_CASE("cli: a usage error is one line naming the problem and a hint, not the usage text") {
  const Result r = run("bench --hidden 0");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "rnncore bench: --hidden: needs an integer in 1..65536, got '0'\n"
                 "run 'rnncore bench --help' for the options\n");
  const Result unknown = run(base_args() + " --no-such-flag");
  CHECK(unknown.code == 2);
  CHECK(std::count(unknown.err.begin(), unknown.err.end(), '\n') == 2);
  CHECK(unknown.err.find("--no-such-flag") != std::string::npos);
  CHECK(unknown.err.find("run 'rnncore run --help' for the options") != std::string::npos);
  // --gpu-half-math means the GPU's matrix units (16-bit weights, or TF32 for f32 ones): another
  // backend is refused.
  for (const char* args : {"bench --gpu-half-math --hidden 8", "bench --gpu-half-math --backend simd --dtype f16"}) {
    const Result half = run(args);
    CHECK(half.code == 2);
    CHECK(half.err.find("--gpu-half-math needs --backend gpu") != std::string::npos);
  }
  const Result missing = run("run --input x.npy --output y.npy");
  CHECK(missing.err.find("--weights is required") != std::string::npos);
}

TEST_CASE("cli: bench --dtype int8 times the integer LSTM and refuses what it lacks") {
  for (const std::string backend : {"auto", "reference"}) {
    CAPTURE(backend);
    const Result r = run(std::string("bench --dtype int8 --seq 3 --batch 2 --input 5 --hidden 12 --layers 2 --reps 2 --backend ") +
                         backend);
    CHECK(r.code == 0);
    CHECK(r.out.find("lstm int8 T=3 B=2 I=5 H=12 L=2 unidirectional threads=1") != std::string::npos);
    CHECK(r.out.find("median_ms=") != std::string::npos);
    CHECK(r.out.find(" gops=") != std::string::npos);
    if (backend == "reference") CHECK(r.out.find("+ scalar step") != std::string::npos);
  }
  // An int8 stack is a Model: its batch rows run on the plan's threads.
  const Result threads = run("bench --dtype int8 --seq 3 --batch 4 --input 5 --hidden 12 --reps 1 --threads 2 --oversubscribe");
  CHECK(threads.code == 0);
  CHECK(threads.out.find("threads=2") != std::string::npos);
  for (const char* args : {"--bidirectional", "--mode gru", "--backend gpu", "--backward",
                           "--dropout 0.5", "--proj 4", "--peak"}) {
    CAPTURE(args);
    const Result r = run(std::string("bench --dtype int8 --seq 2 --input 4 --hidden 8 --reps 1 ") + args);
    CHECK(r.code == 2);
    CHECK(r.err.find("int8") != std::string::npos);
  }
}

TEST_CASE("cli: run on an int8 model takes --threads: the batch rows on the plan's threads, the same bits") {
  const std::string m = src("examples/models/"), d = temp_dir();
  const std::string args = "run --weights " + m + "lstm_int8.safetensors --input " + m + "lstm_int8_input.npy --output " + d;
  const Result one = run(args + "/y1.npy"), two = run(args + "/y2.npy --threads 2 --oversubscribe");
  REQUIRE(one.code == 0);
  REQUIRE_MESSAGE(two.code == 0, two.err);
  CHECK(slurp(d + "/y1.npy") == slurp(d + "/y2.npy"));
  CHECK(slurp(d + "/y1.npy").substr(128) == slurp(m + "lstm_int8_expected_y.npy").substr(128));
}

TEST_CASE("cli: --help lists every command's options with their defaults") {
  const Result bench = run("bench --help");
  CHECK(bench.code == 0);
  CHECK(bench.out.find("--hidden H=512") != std::string::npos);
  CHECK(bench.out.find("--seq T=100") != std::string::npos);
  CHECK(bench.out.find("--reps R=20") != std::string::npos);
  const std::size_t hidden_line = bench.out.find("--hidden");
  CHECK(bench.out.substr(hidden_line, bench.out.find('\n', hidden_line) - hidden_line).find("REQUIRED") == std::string::npos);
  const Result help = run("help run");  // the same as run --help
  CHECK(help.code == 0);
  CHECK(help.out.find("docs/config.md") != std::string::npos);  // where the --config schema is
  CHECK(help.out == run("run --help").out);
  for (const char* option : {"--weights M.safetensors REQUIRED", "--threads N=1", "--seed S=0", "--backend", "--config",
                             "--mc-dropout", "--tolerance", "--row-ids"})
    CHECK_MESSAGE(help.out.find(option) != std::string::npos, option);
  for (const char* command : {"grad", "info", "export-c"}) {
    const Result r = run(std::string(command) + " --help");
    INFO(command);
    CHECK(r.code == 0);
    CHECK(r.out.find(std::string("rnncore ") + command) != std::string::npos);
  }
}

TEST_CASE("cli: bad files and shapes exit 1 with one line naming the file, tensor and shapes") {
  const std::string d = temp_dir();
  expect_error("run --weights " + d + "/absent.safetensors --input x.npy --output y.npy", "absent.safetensors");

  // Truncated and lying weight files: never a crash, always the file's name.
  const std::vector<std::uint8_t> good = read_bytes(src(kModel + ".safetensors"));
  REQUIRE(good.size() > 1000);
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{9}, std::size_t{200}, good.size() / 2, good.size() - 1}) {
    write_bytes(d + "/trunc.safetensors", good, n);
    expect_error("run --weights " + d + "/trunc.safetensors --input " + src(kModel + "_input.npy") + " --output " + d + "/o.npy",
                 "trunc.safetensors");
  }
  std::vector<std::uint8_t> lying = good;
  lying[0] = 0xff;  // header length far beyond the file
  write_bytes(d + "/lying.safetensors", lying, lying.size());
  expect_error("run --weights " + d + "/lying.safetensors --input " + src(kModel + "_input.npy") + " --output " + d + "/o.npy",
               "lying.safetensors");

  // Input shape and type.
  const float bad_x[2 * 3 * 5] = {};
  const std::int64_t bad_shape[3] = {2, 3, 5};
  REQUIRE(io::write_npy((d + "/x5.npy").c_str(), io::ElemType::f32, bad_shape, 3, bad_x) == RNNCORE_OK);
  expect_error("run --weights " + src(kModel + ".safetensors") + " --input " + d + "/x5.npy --output " + d + "/o.npy",
               "x5.npy: expected shape [T, B, 16] (time-major), found [2, 3, 5]");
  const std::int32_t ints[2 * 3 * 16] = {};
  const std::int64_t x_shape[3] = {2, 3, 16};
  REQUIRE(io::write_npy((d + "/xi.npy").c_str(), io::ElemType::i32, x_shape, 3, ints) == RNNCORE_OK);
  expect_error("run --weights " + src(kModel + ".safetensors") + " --input " + d + "/xi.npy --output " + d + "/o.npy",
               "expected a floating-point array, found I32");
  std::vector<std::uint8_t> npy = read_bytes(src(kModel + "_input.npy"));
  write_bytes(d + "/xt.npy", npy, npy.size() - 7);
  expect_error("run --weights " + src(kModel + ".safetensors") + " --input " + d + "/xt.npy --output " + d + "/o.npy", "xt.npy");

  // Lengths and states.
  const std::int32_t lengths[4] = {50, 51, 0, 3};
  const std::int64_t len_shape[1] = {4};
  REQUIRE(io::write_npy((d + "/len.npy").c_str(), io::ElemType::i32, len_shape, 1, lengths) == RNNCORE_OK);
  expect_error(base_args() + " --seq-lengths " + d + "/len.npy", "len.npy: length 51 of row 1 is outside 0..50");
  const std::int64_t len3_shape[1] = {3};
  REQUIRE(io::write_npy((d + "/len3.npy").c_str(), io::ElemType::i32, len3_shape, 1, lengths) == RNNCORE_OK);
  expect_error(base_args() + " --seq-lengths " + d + "/len3.npy", "len3.npy: expected shape [4], found [3]");
  const float h0[2 * 4 * 31] = {};
  const std::int64_t h0_shape[3] = {2, 4, 31};
  REQUIRE(io::write_npy((d + "/h0.npy").c_str(), io::ElemType::f32, h0_shape, 3, h0) == RNNCORE_OK);
  expect_error(base_args() + " --h0 " + d + "/h0.npy", "h0.npy: expected shape [2, 4, 32]");

  // Model inference disagreements.
  expect_error(base_args() + " --mode gru", "mode gru has 3 gates but tensor 'lstm.weight_hh_l0' [128, 32] holds 4");
  // A file of another format: said so, not "header length 578712552184433488 exceeds ...".
  expect_error("run --weights " + src(kModel + "_input.npy") + " --input " + src(kModel + "_input.npy") + " --output " +
                   temp_dir() + "/out.npy",
               "_input.npy: not a safetensors file: it looks like a NumPy .npy array");
  {
    const std::string pt = temp_dir() + "/model.pt";
    write_bytes(pt, {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0}, 16);  // torch.save writes a zip
    expect_error("run --weights " + pt + " --input " + src(kModel + "_input.npy") + " --output " + temp_dir() + "/out.npy",
                 "model.pt: not a safetensors file: it looks like a zip archive, as PyTorch's torch.save writes");
  }
  expect_error(base_args() + " --prefix nope.", "no pytorch recurrent weights under prefix 'nope.'; the file has them under 'lstm.'");
  // A prefix without its separator: the message says which one was meant.
  expect_error(base_args() + " --prefix lstm", "did you mean --prefix lstm. (a prefix ends with its separator)?");
  expect_error(base_args() + " --format onnx", "no onnx recurrent weights found (expected a tensor named 'R' or 'R_l0')");
  char gpu[256];  // --backend gpu fails cleanly where the build or machine has no GPU (else tests/gpu runs it)
  if (gpu_describe(0, gpu, sizeof gpu) != Status::ok) expect_error(base_args() + " --backend gpu", "backend gpu");
}

TEST_CASE("cli: an Elman RNN needs its activation; missing or extra tensors are named") {
  const std::string d = temp_dir();
  const float w[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  std::vector<io::TensorToWrite> t = {{"weight_ih_l0", io::ElemType::f32, {2, 3}, w},
                                      {"weight_hh_l0", io::ElemType::f32, {2, 2}, w}};
  REQUIRE(io::write_safetensors((d + "/rnn.safetensors").c_str(), t, {}) == RNNCORE_OK);
  const float x[3] = {1, 2, 3};
  const std::int64_t xs[3] = {1, 1, 3};
  REQUIRE(io::write_npy((d + "/x3.npy").c_str(), io::ElemType::f32, xs, 3, x) == RNNCORE_OK);
  const std::string args = "run --weights " + d + "/rnn.safetensors --input " + d + "/x3.npy --output " + d + "/o.npy";
  expect_error(args, "pass --mode rnn_tanh or --mode rnn_relu");
  CHECK(run(args + " --mode rnn_relu").code == 0);
  expect_error(args + " --mode rnn_tanh --c0 " + d + "/x3.npy", "has no cell state");

  t.push_back({"weight_ih_l0_reverse", io::ElemType::f32, {2, 3}, w});  // reverse direction without its weight_hh
  REQUIRE(io::write_safetensors((d + "/rnn2.safetensors").c_str(), t, {}) == RNNCORE_OK);
  expect_error("run --weights " + d + "/rnn2.safetensors --input " + d + "/x3.npy --output " + d + "/o.npy --mode rnn_tanh",
               "weight_ih_l0_reverse");
  std::vector<io::TensorToWrite> two = {{"a.weight_hh_l0", io::ElemType::f32, {2, 2}, w},
                                        {"b.weight_hh_l0", io::ElemType::f32, {2, 2}, w}};
  REQUIRE(io::write_safetensors((d + "/two.safetensors").c_str(), two, {}) == RNNCORE_OK);
  expect_error("run --weights " + d + "/two.safetensors --input " + d + "/x3.npy --output " + d + "/o.npy",
               "several recurrent models in the file (prefixes 'a.', 'b.'); pass --prefix");
}

// The values of a float .npy file, in f64.
std::vector<double> npy_values(const std::string& path) {
  io::Array a;
  REQUIRE(io::read_npy(path.c_str(), &a) == RNNCORE_OK);
  std::vector<double> v;
  REQUIRE(io::to_f64(a, &v) == RNNCORE_OK);
  return v;
}

TEST_CASE("cli: a Linear head saved beside the LSTM runs; other tensors are named in a note") {
  // The bundled PyTorch LSTM with a Linear head (fc.weight, fc.bias) saved beside it, as a
  // state_dict of nn.Module(lstm, fc) would have it, and a tensor of something else.
  const std::string d = temp_dir();
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(src(kModel + ".safetensors").c_str(), &f) == RNNCORE_OK);
  std::vector<io::TensorToWrite> tensors;
  for (const io::TensorEntry& e : f.tensors) tensors.push_back({e.name, e.type, e.shape, f.data(e)});
  std::vector<float> fc_weight(3 * 32, 0.5f), fc_bias(3, 0.25f), other(4, 1.0f);
  tensors.push_back({"fc.weight", io::ElemType::f32, {3, 32}, fc_weight.data()});
  tensors.push_back({"fc.bias", io::ElemType::f32, {3}, fc_bias.data()});
  tensors.push_back({"scaler.mean", io::ElemType::f32, {4}, other.data()});
  REQUIRE(io::write_safetensors((d + "/with_head.safetensors").c_str(), tensors, {}) == RNNCORE_OK);
  const Result r = run("run --weights " + d + "/with_head.safetensors --input " + src(kModel + "_input.npy") +
                       " --output " + d + "/y_head.npy");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("rnncore: note: the Linear head 'fc.weight' [3, 32] runs after the last layer with no activation") !=
        std::string::npos);
  CHECK(r.err.find("rnncore: note: 1 tensor of the file is not part of the recurrent model and is ignored: scaler.mean [4]") !=
        std::string::npos);
  // y = W o + b on every step: 0.5 Σ o + 0.25 from the LSTM's own output (zero past a row's length).
  const std::vector<double> o = npy_values(src(kModel + "_expected_y.npy")), y = npy_values(d + "/y_head.npy");
  REQUIRE(y.size() == o.size() / 32 * 3);
  double worst = 0;
  for (std::size_t row = 0; row < o.size() / 32; ++row) {
    double sum = 0;
    bool active = false;
    for (std::size_t u = 0; u < 32; ++u) {
      sum += o[row * 32 + u];
      active = active || o[row * 32 + u] != 0.0;
    }
    for (std::size_t j = 0; j < 3; ++j)
      worst = std::max(worst, std::fabs(y[row * 3 + j] - (active ? 0.5 * sum + 0.25 : 0.0)));
  }
  CHECK(worst < 1e-5);
}


TEST_CASE("cli: run --mc-samples N writes the mean and variance of N Monte-Carlo dropout samples") {
  const std::string d = temp_dir();
  const std::string model = "run --weights " + src(kModel + ".safetensors") + " --input " + src(kModel + "_input.npy");
  // The bundled 2-layer LSTM with inter-layer dropout 0.3: masks between the layers.
  const std::string mc = " --mc-dropout --dropout 0.3 --seed 5";

  // N = 1: the mean is the single --mc-dropout run, bit for bit, and the variance 0.
  Result r = run(model + mc + " --step 10 --output " + d + "/single.npy");
  REQUIRE(r.code == 0);
  r = run(model + mc + " --step 10 --mc-samples 1 --output " + d + "/mean1.npy --output-variance " + d + "/var1.npy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<double> single = npy_values(d + "/single.npy"), mean1 = npy_values(d + "/mean1.npy"),
                            var1 = npy_values(d + "/var1.npy");
  CHECK(mean1 == single);
  CHECK(std::all_of(var1.begin(), var1.end(), [](double v) { return v == 0.0; }));

  // N = 3: the mean and population variance of three separate runs with steps 10, 11, 12.
  std::vector<std::vector<double>> runs;
  for (int k = 0; k < 3; ++k) {
    const std::string out = d + "/sample" + std::to_string(k) + ".npy";
    REQUIRE(run(model + mc + " --step " + std::to_string(10 + k) + " --output " + out).code == 0);
    runs.push_back(npy_values(out));
  }
  CHECK(runs[0] != runs[1]);  // distinct masks per sample
  r = run(model + mc + " --step 10 --mc-samples 3 --output " + d + "/mean3.npy --output-variance " + d + "/var3.npy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("3 sample(s) with steps 10..12") != std::string::npos);
  const std::vector<double> mean3 = npy_values(d + "/mean3.npy"), var3 = npy_values(d + "/var3.npy");
  REQUIRE(mean3.size() == single.size());
  REQUIRE(var3.size() == single.size());
  double max_var = 0;
  std::size_t varying = 0;
  for (std::size_t i = 0; i < mean3.size(); ++i) {
    const double m = (runs[0][i] + runs[1][i] + runs[2][i]) / 3.0;
    double v = 0;
    for (int k = 0; k < 3; ++k) v += (runs[k][i] - m) * (runs[k][i] - m) / 3.0;
    // Both are f64 results rounded to float32 once: they agree to float32 rounding.
    CHECK(std::fabs(mean3[i] - m) <= 1e-7 * std::max(1.0, std::fabs(m)));
    CHECK(std::fabs(var3[i] - v) <= 1e-6 * v + 1e-12);
    max_var = std::max(max_var, v);
    varying += v > 0;
  }
  CHECK(max_var > 1e-4);            // the samples do differ
  CHECK(varying > mean3.size() / 2);

  // No dropout in the model: the samples are identical, variance 0, and a note says so.
  r = run(model + " --mc-dropout --mc-samples 3 --output " + d + "/mean_nd.npy --output-variance " + d + "/var_nd.npy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("no dropout acts in this model") != std::string::npos);
  CHECK(r.err.find("the 3 samples are identical and their variance is 0") != std::string::npos);
  const std::vector<double> var_nd = npy_values(d + "/var_nd.npy");
  CHECK(std::all_of(var_nd.begin(), var_nd.end(), [](double v) { return v == 0.0; }));
  REQUIRE(run(model + " --output " + d + "/deterministic.npy").code == 0);
  CHECK(npy_values(d + "/mean_nd.npy") == npy_values(d + "/deterministic.npy"));

  // Usage: only with --mc-dropout; no final states (N samples have N of them); the variance needs N.
  CHECK(run(model + " --output " + d + "/o.npy --mc-samples 3").code == 2);
  CHECK(run(model + mc + " --output " + d + "/o.npy --mc-samples 3 --hn " + d + "/hn.npy").code == 2);
  CHECK(run(model + mc + " --output " + d + "/o.npy --output-variance " + d + "/v.npy").code == 2);
  CHECK(run(model + mc + " --output " + d + "/o.npy --mc-samples 0").code == 2);
}

TEST_CASE("cli: stacks from JSON configs with --train reproduce the dropout golden data") {
  const std::string dir = src("tests/golden/dropout");
  int cases = 0;
  for (const std::string& weights : list_cases(dir)) {
    const std::string json = weights.substr(0, weights.size() - 12) + ".json";
    if (!std::ifstream(json).good()) continue;
    ++cases;
    INFO(json);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(weights.c_str(), &f) == RNNCORE_OK);
    const std::string d = temp_dir();
    extract(f, "input", d + "/x.npy");
    std::string args = "run --weights " + weights + " --config " + json + " --input " + d + "/x.npy --output " + d +
                       "/y.npy --hn " + d + "/hn.npy --train --seed " + *f.meta("seed") + " --step " + *f.meta("step");
    for (const char* name : {"h0", "c0", "seq_lengths", "row_ids"})
      if (f.find(name) != nullptr) {
        extract(f, name, d + "/" + name + ".npy");
        args += std::string(" --") + (std::string(name) == "seq_lengths" ? "seq-lengths" : std::string(name) == "row_ids" ? "row-ids" : name) +
                " " + d + "/" + name + ".npy";
      }
    if (f.find("expected.cn") != nullptr) args += " --cn " + d + "/cn.npy";
    const Result r = run(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("dropout: training run") != std::string::npos);
    CHECK(compare_npy(d + "/y.npy", f, "expected.y") < 1e-5);
    CHECK(compare_npy(d + "/hn.npy", f, "expected.hn") < 1e-5);
    if (f.find("expected.cn") != nullptr) CHECK(compare_npy(d + "/cn.npy", f, "expected.cn") < 1e-5);
  }
  CHECK(cases >= 3);
  // A config that does not match the weights is named.
  const std::string d = temp_dir();
  std::ofstream(d + "/wrong.json") << R"({"layers": [{"mode": "gru", "hidden_size": 32}, {"mode": "lstm", "hidden_size": 32}]})";
  expect_error(base_args() + " --config " + d + "/wrong.json", "tensor 'lstm.weight_ih_l0': expected shape [96, 16], found [128, 16]");
  std::ofstream(d + "/typo.json") << "{\"layers\": [{\"mode\": \"lstm\", \"hidden_size\": 32,\n \"wrapers\": []}]}";
  expect_error(base_args() + " --config " + d + "/typo.json", "typo.json:2:13: unknown key 'wrapers' in layers[0]");
  const Result bad_p = run(base_args() + " --train --dropout 1.5");
  CHECK(bad_p.code == 2);
  CHECK(bad_p.err.find("--dropout: needs a number in [0, 1), got '1.5'") != std::string::npos);
}

namespace {

// `rnncore grad` on a gradient golden case (tests/golden/grad/ and resets/): the gradients of the
// inputs, initial states and every weight tensor against PyTorch's.
void check_grad_case(const std::string& path, const std::string& d) {
  INFO(path);
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
  std::vector<io::TensorToWrite> weights;
  for (const io::TensorEntry& e : f.tensors)
    if (e.name.compare(0, 4, "rnn.") == 0) weights.push_back({e.name, e.type, e.shape, f.data(e)});
  REQUIRE(io::write_safetensors((d + "/w.safetensors").c_str(), weights, {}) == RNNCORE_OK);
  std::ofstream(d + "/stack.json") << *f.meta("config");
  extract(f, "input", d + "/x.npy");
  extract(f, "dy", d + "/dy.npy");
  std::string args = "grad --weights " + d + "/w.safetensors --config " + d + "/stack.json --input " + d +
                     "/x.npy --dy " + d + "/dy.npy --grads " + d + "/g.safetensors --dx " + d + "/dx.npy --dh0 " + d +
                     "/dh0.npy";
  const bool lstm = f.find("expected.dc0") != nullptr;
  if (lstm) args += " --dc0 " + d + "/dc0.npy";
  if (*f.meta("run_mode") == "training") args += " --train --seed " + *f.meta("seed") + " --step " + *f.meta("step");
  if (*f.meta("batch_first") == "1") args += " --batch-first";
  const char* const inputs[][2] = {{"h0", "h0"}, {"c0", "c0"}, {"seq_lengths", "seq-lengths"}, {"row_ids", "row-ids"},
                                   {"dhn", "dhn"}, {"dcn", "dcn"}, {"resets", "resets"}};
  for (const auto& in : inputs)
    if (f.find(in[0]) != nullptr) {
      extract(f, in[0], d + "/" + in[0] + ".npy");
      args += std::string(" --") + in[1] + " " + d + "/" + in[0] + ".npy";
    }
  const Result r = run(args);
  INFO(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("grad: ") != std::string::npos);
  CHECK(compare_npy(d + "/dx.npy", f, "expected.dx") < 2e-4);
  CHECK(compare_npy(d + "/dh0.npy", f, "expected.dh0") < 2e-4);
  if (lstm) CHECK(compare_npy(d + "/dc0.npy", f, "expected.dc0") < 2e-4);
  // G holds one float32 tensor per weight tensor, with the weight's name and shape.
  io::SafeTensors g;
  REQUIRE(io::read_safetensors((d + "/g.safetensors").c_str(), &g) == RNNCORE_OK);
  CHECK(g.tensors.size() == weights.size());
  for (const io::TensorToWrite& w : weights) {
    INFO(w.name);
    const io::TensorEntry* e = g.find(w.name);
    REQUIRE(e != nullptr);
    CHECK(e->type == io::ElemType::f32);
    CHECK(e->shape == w.shape);
    io::Array got, want;
    REQUIRE(g.array(w.name, &got) == RNNCORE_OK);
    REQUIRE(f.array("grad." + w.name, &want) == RNNCORE_OK);
    std::vector<double> gv, wv;
    REQUIRE(io::to_f64(got, &gv) == RNNCORE_OK);
    REQUIRE(io::to_f64(want, &wv) == RNNCORE_OK);
    CHECK(rel_error(gv.data(), wv.data(), wv.size()) < 2e-4);
  }
}

}  // namespace

TEST_CASE("cli: rnncore grad reproduces the PyTorch autograd golden gradients") {
  const std::vector<std::string> cases = list_cases(src("tests/golden/grad"));
  REQUIRE(cases.size() >= 30);
  const std::string d = temp_dir();
  for (const std::string& path : cases) check_grad_case(path, d);
}

TEST_CASE("cli: rnncore run --resets and grad --resets reproduce PyTorch stepped and reset by hand") {
  const std::vector<std::string> cases = list_cases(src("tests/golden/resets"));
  REQUIRE(cases.size() >= 7);
  const std::string d = temp_dir();
  for (const std::string& path : cases) {
    check_grad_case(path, d);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    // run: the same weights (written by check_grad_case) and inputs, resets from an int32 .npy.
    std::string args = "run --weights " + d + "/w.safetensors --config " + d + "/stack.json --input " + d +
                       "/x.npy --resets " + d + "/resets.npy --output " + d + "/y.npy --hn " + d + "/hn.npy";
    for (const char* name : {"h0", "c0", "seq_lengths"})
      if (f.find(name) != nullptr)
        args += std::string(" --") + (std::string(name) == "seq_lengths" ? "seq-lengths" : name) + " " + d + "/" + name + ".npy";
    if (*f.meta("batch_first") == "1") args += " --batch-first";
    if (f.find("expected.cn") != nullptr) args += " --cn " + d + "/cn.npy";
    const Result r = run(args);
    INFO(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(compare_npy(d + "/y.npy", f, "expected.y") < 1e-5);
    CHECK(compare_npy(d + "/hn.npy", f, "expected.hn") < 1e-5);
    if (f.find("expected.cn") != nullptr) CHECK(compare_npy(d + "/cn.npy", f, "expected.cn") < 1e-5);
  }
  // Errors: a shape that is not [T, B], a float dtype, a bidirectional model.
  const std::string model = " --weights " + src(kModel + ".safetensors") + " --input " + src(kModel + "_input.npy") +
                            " --output " + d + "/o.npy";
  const std::int64_t shape[] = {3};
  const std::int32_t three[] = {0, 1, 0};
  REQUIRE(io::write_npy((d + "/bad_shape.npy").c_str(), io::ElemType::i32, shape, 1, three) == RNNCORE_OK);
  expect_error("run" + model + " --resets " + d + "/bad_shape.npy", "bad_shape.npy: expected resets of shape [");
  const std::int64_t tb[] = {50, 4};  // the model's input is [50, 4, 16]
  const std::vector<float> floats(200, 0.0f);
  REQUIRE(io::write_npy((d + "/float.npy").c_str(), io::ElemType::f32, tb, 2, floats.data()) == RNNCORE_OK);
  expect_error("run" + model + " --resets " + d + "/float.npy", "float.npy: expected integer or bool resets, found ");
  {  // a bidirectional model: refused by the library, in one line
    io::SafeTensors f;
    const std::string bi = src("tests/golden/grad/lstm_l1_bi_I9_H17_bf_h0.safetensors");
    REQUIRE(io::read_safetensors(bi.c_str(), &f) == RNNCORE_OK);
    std::vector<io::TensorToWrite> weights;
    for (const io::TensorEntry& e : f.tensors)
      if (e.name.compare(0, 4, "rnn.") == 0) weights.push_back({e.name, e.type, e.shape, f.data(e)});
    REQUIRE(io::write_safetensors((d + "/bi_w.safetensors").c_str(), weights, {}) == RNNCORE_OK);
    extract(f, "input", d + "/bi_x.npy");  // batch-first [2, 3, 9]
    const std::int64_t bt[] = {2, 3};
    const std::vector<std::uint8_t> ones(6, 1);
    REQUIRE(io::write_npy((d + "/bi_r.npy").c_str(), io::ElemType::u8, bt, 2, ones.data()) == RNNCORE_OK);
    expect_error("run --weights " + d + "/bi_w.safetensors --batch-first --input " + d + "/bi_x.npy --resets " + d +
                     "/bi_r.npy --output " + d + "/o.npy",
                 "resets need a unidirectional network; layer 0 is bidirectional");
  }
  const Result help = run("help run");
  CHECK(help.out.find("--resets") != std::string::npos);
  // bench --resets: the forward and the training step timed with them too (a bidirectional network is refused).
  const Result bench = run("bench --seq 6 --batch 3 --input 5 --hidden 8 --reps 2 --backward --resets 0.5");
  INFO(bench.err);
  CHECK(bench.code == 0);
  CHECK(bench.out.find(" (step, row) pairs: median_ms=") != std::string::npos);
  CHECK(bench.out.find("training_step_ms=") != bench.out.rfind("training_step_ms="));  // the line with resets has one too
  // bench --backward --no-dx: the step without dx, said in its line; --no-dx alone is a usage error.
  const Result no_dx = run("bench --seq 6 --batch 3 --input 5 --hidden 8 --reps 2 --backward --no-dx");
  INFO(no_dx.err);
  CHECK(no_dx.code == 0);
  CHECK(no_dx.out.find("(training step without dx / inference forward;") != std::string::npos);
  const Result alone = run("bench --seq 2 --input 4 --hidden 8 --reps 1 --no-dx");
  CHECK(alone.code == 2);
  CHECK(alone.err.find("--no-dx requires --backward") != std::string::npos);
  expect_error("bench --seq 2 --input 4 --hidden 8 --reps 1 --bidirectional --resets 0.5",
               "resets need a unidirectional network; layer 0 is bidirectional");
  CHECK(run("bench --dtype int8 --seq 2 --input 4 --hidden 8 --reps 1 --resets 0.5").code == 2);
}

TEST_CASE("cli: rnncore grad reproduces TF LSTMCell's gradients (peepholes, clips, projection) from tf.GradientTape") {
  const std::string d = temp_dir();
  int cases = 0;
  for (const std::string& model : list_cases(src("tests/golden/tf_grad"))) {
    const std::size_t n = model.size();
    if (n < 18 || model.compare(n - 18, 18, ".model.safetensors") != 0) continue;
    ++cases;
    INFO(model);
    io::SafeTensors f, m;
    REQUIRE(io::read_safetensors((model.substr(0, n - 18) + ".data.safetensors").c_str(), &f) == RNNCORE_OK);
    REQUIRE(io::read_safetensors(model.c_str(), &m) == RNNCORE_OK);
    extract(f, "input", d + "/x.npy");
    extract(f, "dy", d + "/dy.npy");
    std::string args = "grad --weights " + model + " --input " + d + "/x.npy --dy " + d + "/dy.npy --grads " + d +
                       "/g.safetensors --dx " + d + "/dx.npy --dh0 " + d + "/dh0.npy --dc0 " + d + "/dc0.npy";
    const char* const inputs[][2] = {{"h0", "h0"}, {"c0", "c0"}, {"seq_lengths", "seq-lengths"}, {"dhn", "dhn"},
                                     {"dcn", "dcn"}};
    for (const auto& in : inputs)
      if (f.find(in[0]) != nullptr) {
        extract(f, in[0], d + "/" + in[0] + ".npy");
        args += std::string(" --") + in[1] + " " + d + "/" + in[0] + ".npy";
      }
    const Result r = run(args);
    INFO(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(compare_npy(d + "/dx.npy", f, "expected.dx") < 2e-4);
    CHECK(compare_npy(d + "/dh0.npy", f, "expected.dh0") < 2e-4);
    CHECK(compare_npy(d + "/dc0.npy", f, "expected.dc0") < 2e-4);
    io::SafeTensors g;  // one tensor per variable of the model file, named as there
    REQUIRE(io::read_safetensors((d + "/g.safetensors").c_str(), &g) == RNNCORE_OK);
    CHECK(g.tensors.size() == m.tensors.size());
    for (const io::TensorEntry& e : m.tensors) {
      INFO(e.name);
      io::Array got, want;
      REQUIRE(g.array(e.name, &got) == RNNCORE_OK);
      REQUIRE(f.array("grad." + e.name, &want) == RNNCORE_OK);
      std::vector<double> gv, wv;
      REQUIRE(io::to_f64(got, &gv) == RNNCORE_OK);
      REQUIRE(io::to_f64(want, &wv) == RNNCORE_OK);
      REQUIRE(gv.size() == wv.size());
      CHECK(rel_error(gv.data(), wv.data(), wv.size()) < 2e-4);
    }
  }
  CHECK(cases >= 4);
}

TEST_CASE("cli: rnncore grad through a Linear head and an Embedding reproduces PyTorch autograd (tests/golden/head_grad)") {
  // The cases with a Dense chain before the head (fc1., fc2.) are the API's (test_head_grad): the
  // command's float loaders attach one Dense head (fc.), so they are not run through it here.
  const std::vector<std::string> all = list_cases(src("tests/golden/head_grad"));
  std::vector<std::string> cases;
  for (const std::string& path : all)
    if (path.find("_mlp_") == std::string::npos) cases.push_back(path);
  REQUIRE(all.size() == 4);
  REQUIRE(cases.size() == 2);
  const std::string d = temp_dir();
  for (const std::string& path : cases) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    REQUIRE(f.find("fc.weight") != nullptr);
    std::vector<io::TensorToWrite> weights;  // the module's state_dict, as a user saves it
    for (const io::TensorEntry& e : f.tensors)
      if (e.name.compare(0, 5, "lstm.") == 0 || e.name.compare(0, 3, "fc.") == 0 || e.name.compare(0, 10, "embedding.") == 0)
        weights.push_back({e.name, e.type, e.shape, f.data(e)});
    REQUIRE(io::write_safetensors((d + "/w.safetensors").c_str(), weights,
                                  {{"head_activation", *f.meta("head_activation")},
                                   {"head_last_step", *f.meta("head_last_step")}}) == RNNCORE_OK);
    extract(f, "input", d + "/x.npy");
    extract(f, "dy", d + "/dy.npy");
    const std::string args = "grad --weights " + d + "/w.safetensors --input " + d + "/x.npy --dy " + d +
                             "/dy.npy --grads " + d + "/g.safetensors --output " + d + "/y.npy";
    const Result r = run(args);
    INFO(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(compare_npy(d + "/y.npy", f, "expected.y") < 1e-5);
    io::SafeTensors g;
    REQUIRE(io::read_safetensors((d + "/g.safetensors").c_str(), &g) == RNNCORE_OK);
    CHECK(g.tensors.size() == weights.size());  // the head's and the table's gradients too
    for (const io::TensorToWrite& w : weights) {
      INFO(w.name);
      const io::TensorEntry* e = g.find(w.name);
      REQUIRE(e != nullptr);
      CHECK(e->shape == w.shape);
      io::Array got, want;
      REQUIRE(g.array(w.name, &got) == RNNCORE_OK);
      REQUIRE(f.array("grad." + w.name, &want) == RNNCORE_OK);
      std::vector<double> gv, wv;
      REQUIRE(io::to_f64(got, &gv) == RNNCORE_OK);
      REQUIRE(io::to_f64(want, &wv) == RNNCORE_OK);
      CHECK(rel_error(gv.data(), wv.data(), wv.size()) < 2e-4);
    }
    if (f.find("embedding.weight") != nullptr) {  // token ids have no gradient
      const Result dx = run(args + " --dx " + d + "/dx.npy");
      CHECK(dx.code == 1);
      CHECK(dx.err.find("starts with an Embedding: its input is token ids") != std::string::npos);
    }
  }
}

TEST_CASE("cli: rnncore grad errors") {
  const std::string d = temp_dir();
  const std::string model = " --weights " + src(kModel + ".safetensors") + " --input " + src(kModel + "_input.npy");
  const Result missing = run("grad" + model + " --grads " + d + "/g.safetensors");
  CHECK(missing.code == 2);
  CHECK(missing.err.find("--dy is required") != std::string::npos);
  const float dy[] = {1, 2, 3};
  const std::int64_t shape[] = {3};
  REQUIRE(io::write_npy((d + "/bad_dy.npy").c_str(), io::ElemType::f32, shape, 1, dy) == RNNCORE_OK);
  expect_error("grad" + model + " --dy " + d + "/bad_dy.npy --grads " + d + "/g.safetensors", "bad_dy.npy: expected shape [");
  const Result help = run("help grad");
  CHECK(help.code == 0);
  CHECK(help.out.find("--dh0") != std::string::npos);
}

TEST_CASE("cli: files converted by tools/tf_to_safetensors.py (tests/golden/tf) run with no model flags") {
  // The converter's metadata (format, mode, GRU variant, forget bias, clips) is all rnncore run needs;
  // wrappers and stacks of different cells come from --config, dropout runs from --train --seed --step.
  int plain = 0, configured = 0;
  for (const std::string& model : list_cases(src("tests/golden/tf"))) {
    if (model.size() < 18 || model.compare(model.size() - 18, 18, ".model.safetensors") != 0) continue;
    const std::string data_path = model.substr(0, model.size() - 18) + ".data.safetensors";
    INFO(data_path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(data_path.c_str(), &f) == RNNCORE_OK);
    const std::string d = temp_dir();
    extract(f, "input", d + "/x.npy");
    std::string args = "run --weights " + model + " --input " + d + "/x.npy --output " + d + "/y.npy --hn " + d + "/hn.npy";
    if (f.find("expected.cn") != nullptr) args += " --cn " + d + "/cn.npy";
    for (const char* name : {"h0", "c0", "seq_lengths"})
      if (f.find(name) != nullptr) {
        extract(f, name, d + "/" + name + ".npy");
        args += std::string(" --") + (std::string(name) == "seq_lengths" ? "seq-lengths" : name) + " " + d + "/" + name + ".npy";
      }
    if (f.meta("config") != nullptr) {
      std::ofstream(d + "/stack.json") << *f.meta("config");
      args += " --config " + d + "/stack.json";
      ++configured;
    } else {
      ++plain;
    }
    if (f.meta("run_mode") != nullptr) args += " --train --seed " + *f.meta("seed") + " --step " + *f.meta("step");
    const Result r = run(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // hn of a stack whose layers differ in direction is written flat; compare the values.
    io::Array got, want;
    for (const char* out : {"y", "hn", "cn"}) {
      const std::string expected = std::string("expected.") + out;
      if (f.find(expected) == nullptr) continue;
      REQUIRE(io::read_npy((d + "/" + out + ".npy").c_str(), &got) == RNNCORE_OK);
      REQUIRE(f.array(expected, &want) == RNNCORE_OK);
      std::vector<double> g, w;
      REQUIRE(io::to_f64(got, &g) == RNNCORE_OK);
      REQUIRE(io::to_f64(want, &w) == RNNCORE_OK);
      REQUIRE(g.size() == w.size());
      INFO(out);
      CHECK(rel_error(g.data(), w.data(), w.size()) < 1e-5);
    }
  }
  CHECK(plain >= 25);
  CHECK(configured >= 5);
}

TEST_CASE("cli: --config keeps a TF file's projection, peepholes and clips; clips per layer from the metadata") {
  const std::string d = temp_dir();
  struct Case {
    const char* name;
    const char* config;  // says nothing of the LSTM extensions: they come from the file
    const char* printed;
  };
  const Case cases[] = {
      {"lstm_peep_proj_projclip_len",
       R"({"layers": [{"mode": "lstm", "hidden_size": 5, "wrappers": [{"type": "dropout", "output_keep": 0.9}]}]})",
       "[lstm 5 proj 2 peepholes proj_clip 0.125 +dropout]"},
      {"lstm_perlayer_clips_l3",
       R"({"layers": [{"mode": "lstm", "hidden_size": 4, "wrappers": [{"type": "dropout", "state_keep": 0.5}]},
                     {"mode": "lstm", "hidden_size": 4}, {"mode": "lstm", "hidden_size": 4}]})",
       "[lstm 4 proj 2 peepholes cell_clip 0.25 proj_clip 0.015625 +dropout, lstm 4 proj 2 cell_clip 0.125 proj_clip "
       "0.03125, lstm 4 proj 2 cell_clip 0.125 proj_clip 0.03125]"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string model = src(std::string("tests/golden/tf/") + c.name + ".model.safetensors");
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(src(std::string("tests/golden/tf/") + c.name + ".data.safetensors").c_str(), &f) ==
            RNNCORE_OK);
    std::ofstream(d + "/ext.json") << c.config;
    std::string args = "run --weights " + model + " --config " + d + "/ext.json --output " + d + "/y.npy --hn " + d + "/hn.npy";
    for (const char* name : {"input", "h0", "c0", "seq_lengths"})
      if (f.find(name) != nullptr) {
        extract(f, name, d + "/" + name + ".npy");
        args += std::string(" --") + (std::string(name) == "seq_lengths" ? "seq-lengths" : name) + " " + d + "/" + name + ".npy";
      }
    const Result r = run(args);  // an inference run: the dropout wrapper is idle, the outputs are TF's
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find(c.printed) != std::string::npos);
    CHECK(compare_npy(d + "/y.npy", f, "expected.y") < 1e-5);
    CHECK(compare_npy(d + "/hn.npy", f, "expected.hn") < 1e-5);
  }
  // Without --config the per-layer values are printed per layer.
  const std::string perlayer = src("tests/golden/tf/lstm_perlayer_clips_l3.model.safetensors");
  const Result p = run("run --weights " + perlayer + " --input " + d + "/input.npy --output " + d + "/y.npy");
  INFO(p.err);
  CHECK(p.code == 0);
  CHECK(p.out.find("proj_size 2, peepholes 1/0/0, cell_clip 0.25/0.125/0.125, proj_clip 0.015625/0.03125/0.03125") !=
        std::string::npos);
  // A configuration's own clip wins over the file's.
  std::ofstream(d + "/own.json") << R"({"layers": [{"mode": "lstm", "hidden_size": 4, "cell_clip": 8},
      {"mode": "lstm", "hidden_size": 4}, {"mode": "lstm", "hidden_size": 4}]})";
  const Result own = run("run --weights " + perlayer + " --config " + d + "/own.json --input " + d + "/input.npy --output " +
                         d + "/y.npy");
  CHECK(own.code == 0);
  CHECK(own.out.find("[lstm 4 proj 2 peepholes cell_clip 8 proj_clip 0.015625, lstm 4 proj 2 cell_clip 0.125") !=
        std::string::npos);
  // A list of per-layer clips must have one value per layer; only LSTM layers clip.
  const std::vector<float> w(6 * 16, 0.1f);
  const std::vector<io::TensorToWrite> t = {{"cell_0/kernel", io::ElemType::f32, {6, 16}, w.data()},
                                            {"cell_0/bias", io::ElemType::f32, {16}, w.data()}};
  REQUIRE(io::write_safetensors((d + "/clips2.safetensors").c_str(), t, {{"mode", "lstm"}, {"cell_clip", "0.5,0.25"}}) ==
          RNNCORE_OK);
  const float x[2] = {1, 2};
  const std::int64_t xs[3] = {1, 1, 2};
  REQUIRE(io::write_npy((d + "/x2.npy").c_str(), io::ElemType::f32, xs, 3, x) == RNNCORE_OK);
  expect_error("run --weights " + d + "/clips2.safetensors --input " + d + "/x2.npy --output " + d + "/o.npy",
               "metadata cell_clip lists 2 values for a model of 1 layer(s)");
  REQUIRE(io::write_safetensors((d + "/clips_bad.safetensors").c_str(), t, {{"mode", "lstm"}, {"cell_clip", "0.5,x"}}) ==
          RNNCORE_OK);
  expect_error("run --weights " + d + "/clips_bad.safetensors --input " + d + "/x2.npy --output " + d + "/o.npy",
               "metadata cell_clip '0.5,x' is not a finite number >= 0 (or a comma-separated list of one per layer)");
}

TEST_CASE("cli: TensorFlow cell files: a kernel needs its mode; peepholes and projections; forget bias") {
  const std::string d = temp_dir();
  const std::vector<float> w(6 * 16, 0.1f);
  std::vector<io::TensorToWrite> t = {{"cell_0/kernel", io::ElemType::f32, {6, 16}, w.data()},  // I 2 + H 4, 4 gates
                                      {"cell_0/bias", io::ElemType::f32, {16}, w.data()}};
  REQUIRE(io::write_safetensors((d + "/tf_lstm.safetensors").c_str(), t, {}) == RNNCORE_OK);
  const float x[3] = {1, 2, 3};
  const std::int64_t xs[3] = {1, 1, 2}, xs3[3] = {1, 1, 3};
  REQUIRE(io::write_npy((d + "/x2.npy").c_str(), io::ElemType::f32, xs, 3, x) == RNNCORE_OK);
  REQUIRE(io::write_npy((d + "/x3.npy").c_str(), io::ElemType::f32, xs3, 3, x) == RNNCORE_OK);
  const std::string io_args = " --input " + d + "/x2.npy --output " + d + "/o.npy";
  const std::string args = "run --weights " + d + "/tf_lstm.safetensors" + io_args;
  expect_error(args, "does not tell an LSTM (G = 4) from an Elman RNN (G = 1); pass --mode");
  CHECK(run(args + " --mode lstm").code == 0);
  CHECK(run(args + " --mode lstm --forget-bias 1.0").code == 0);
  expect_error(args + " --mode lstm --forget-bias one", "forget bias 'one' is not a finite number");

  // LSTMCell(use_peepholes=True): all three w_*_diag, on every CPU backend.
  std::vector<io::TensorToWrite> peep = t;
  peep.push_back({"cell_0/w_f_diag", io::ElemType::f32, {4}, w.data()});
  REQUIRE(io::write_safetensors((d + "/tf_peep1.safetensors").c_str(), peep, {{"mode", "lstm"}}) == RNNCORE_OK);
  expect_error("run --weights " + d + "/tf_peep1.safetensors" + io_args, "tensor 'cell_0/w_i_diag' [4] is missing");
  peep.push_back({"cell_0/w_i_diag", io::ElemType::f32, {4}, w.data()});
  peep.push_back({"cell_0/w_o_diag", io::ElemType::f32, {4}, w.data()});
  REQUIRE(io::write_safetensors((d + "/tf_peep.safetensors").c_str(), peep, {{"mode", "lstm"}, {"cell_clip", "0.5"}}) ==
          RNNCORE_OK);
  const Result pr = run("run --weights " + d + "/tf_peep.safetensors" + io_args);
  INFO(pr.err);
  CHECK(pr.code == 0);
  CHECK(pr.out.find("hidden 4, peepholes, cell_clip 0.5") != std::string::npos);
  const std::vector<double> by_auto = npy_values(d + "/o.npy");
  for (const char* backend : {"reference", "simd"}) {  // the SIMD backend runs them too, when this machine has one
    const Result br = run("run --weights " + d + "/tf_peep.safetensors" + io_args + " --backend " + backend);
    if (br.code != 0 && std::string(backend) == "simd" && br.err.find("no SIMD kernels") != std::string::npos) continue;
    INFO(backend << ": " << br.err);
    REQUIRE(br.code == 0);
    const std::vector<double> got = npy_values(d + "/o.npy");
    REQUIRE(got.size() == by_auto.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(by_auto[i]).epsilon(1e-5));
  }
  std::vector<io::TensorToWrite> clip = t;
  REQUIRE(io::write_safetensors((d + "/tf_clip.safetensors").c_str(), clip, {{"mode", "lstm"}, {"cell_clip", "-1"}}) ==
          RNNCORE_OK);
  expect_error("run --weights " + d + "/tf_clip.safetensors" + io_args, "metadata cell_clip '-1' is not a finite number >= 0");
  // LSTMCell(num_proj=3): kernel [I + P, 4H] = [6, 16] is I = 3.
  std::vector<io::TensorToWrite> proj = t;
  proj.push_back({"cell_0/projection/kernel", io::ElemType::f32, {4, 3}, w.data()});
  REQUIRE(io::write_safetensors((d + "/tf_proj.safetensors").c_str(), proj, {{"mode", "lstm"}}) == RNNCORE_OK);
  const Result pj = run("run --weights " + d + "/tf_proj.safetensors --input " + d + "/x3.npy --output " + d +
                        "/o.npy --hn " + d + "/hn.npy --cn " + d + "/cn.npy");
  INFO(pj.err);
  CHECK(pj.code == 0);
  CHECK(pj.out.find("input 3, hidden 4, proj_size 3") != std::string::npos);
  io::Array hn, cn;
  REQUIRE(io::read_npy((d + "/hn.npy").c_str(), &hn) == RNNCORE_OK);
  REQUIRE(io::read_npy((d + "/cn.npy").c_str(), &cn) == RNNCORE_OK);
  CHECK(hn.shape == std::vector<std::int64_t>{1, 1, 3});
  CHECK(cn.shape == std::vector<std::int64_t>{1, 1, 4});

  std::vector<io::TensorToWrite> pt = {{"weight_ih_l0", io::ElemType::f32, {16, 2}, w.data()},
                                       {"weight_hh_l0", io::ElemType::f32, {16, 4}, w.data()}};
  REQUIRE(io::write_safetensors((d + "/pt_lstm.safetensors").c_str(), pt, {}) == RNNCORE_OK);
  expect_error("run --weights " + d + "/pt_lstm.safetensors" + io_args + " --forget-bias 1",
               "a forget bias belongs to TF LSTM cells (format tensorflow), not to the pytorch format");
}

TEST_CASE("cli: int8 models converted by tools/tflite_to_safetensors.py run bit for bit as LiteRT") {
  // tests/golden/tflite_int8/converted/<case>.safetensors: the converter's output for <case>.tflite;
  // <case>.safetensors beside it holds LiteRT's int8 input x and output y.
  int cases = 0;
  for (const std::string& model : list_cases(src("tests/golden/tflite_int8/converted"))) {
    const std::string name = model.substr(model.rfind('/') + 1);
    const std::string golden = src("tests/golden/tflite_int8/") + name;
    INFO(model);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(golden.c_str(), &f) == RNNCORE_OK);
    const std::string d = temp_dir();
    extract(f, "x", d + "/x.npy");
    const Result r = run("run --weights " + model + " --input " + d + "/x.npy --output " + d + "/y.npy --hn " + d +
                         "/hn.npy --cn " + d + "/cn.npy");
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("int8 LSTM") != std::string::npos);
    for (const char* state : {"hn", "cn"}) {  // the op's variable tensors after LiteRT's run
      io::Array g, w;
      REQUIRE(io::read_npy((d + "/" + state + ".npy").c_str(), &g) == RNNCORE_OK);
      REQUIRE(f.array(state, &w) == RNNCORE_OK);
      CHECK(g.type == w.type);
      CHECK(g.shape == w.shape);
      CHECK(g.bytes == w.bytes);
    }
    io::Array got, want;
    REQUIRE(io::read_npy((d + "/y.npy").c_str(), &got) == RNNCORE_OK);
    REQUIRE(f.array("y", &want) == RNNCORE_OK);
    CHECK(got.type == io::ElemType::i8);
    CHECK(got.shape == want.shape);
    CHECK(got.bytes == want.bytes);  // every element, bit for bit
    ++cases;
  }
  CHECK(cases == 12);
}

TEST_CASE("cli: an int8 model with an Embedding takes token ids only, each inside its vocabulary") {
  // embed_V40_*: Keras Embedding(40, 8) -> LSTM(12); its golden x holds int32 ids [3, 9].
  const std::string d = temp_dir();
  const std::string golden = src("tests/golden/tflite_int8/stacks/embed_V40_E8_H12_T9_B3_last");
  io::SafeTensors f;
  REQUIRE(io::read_safetensors((golden + ".io.safetensors").c_str(), &f) == RNNCORE_OK);
  io::Array x;
  REQUIRE(f.array("x", &x) == RNNCORE_OK);
  REQUIRE(x.type == io::ElemType::i32);
  const std::string run_ids = "run --weights " + golden + ".safetensors --input " + d + "/ids.npy --output " + d + "/y.npy";

  // int64 ids run as int32 ones do.
  std::vector<std::int64_t> wide(x.bytes.size() / 4);
  for (std::size_t k = 0; k < wide.size(); ++k) {
    std::int32_t v;
    std::memcpy(&v, x.bytes.data() + 4 * k, 4);
    wide[k] = v;
  }
  REQUIRE(io::write_npy((d + "/ids.npy").c_str(), io::ElemType::i64, x.shape.data(), 2, wide.data()) == RNNCORE_OK);
  Result r = run(run_ids);
  INFO(r.err);
  REQUIRE(r.code == 0);
  io::Array got, want;
  REQUIRE(io::read_npy((d + "/y.npy").c_str(), &got) == RNNCORE_OK);
  REQUIRE(f.array("y", &want) == RNNCORE_OK);
  CHECK(got.bytes == want.bytes);

  // An id outside [0, 40) is refused, naming its position and value (LiteRT's GATHER fails too).
  for (const std::int64_t bad : {std::int64_t{40}, std::int64_t{-1}}) {
    std::vector<std::int64_t> ids = wide;
    ids[1 * 9 + 4] = bad;
    REQUIRE(io::write_npy((d + "/ids.npy").c_str(), io::ElemType::i64, x.shape.data(), 2, ids.data()) == RNNCORE_OK);
    r = run(run_ids);
    CHECK(r.code == 1);
    CHECK(r.err.find("token id " + std::to_string(bad) + " at [1, 4]") != std::string::npos);
    CHECK(r.err.find("[0, 40)") != std::string::npos);
  }
  // int8 or float input to the embedding model, and ids to a model without one, are refused.
  const std::int64_t shape3[3] = {3, 9, 8};
  std::vector<std::int8_t> rows(3 * 9 * 8, 1);
  REQUIRE(io::write_npy((d + "/ids.npy").c_str(), io::ElemType::i8, shape3, 3, rows.data()) == RNNCORE_OK);
  r = run(run_ids);
  CHECK(r.code == 1);
  CHECK(r.err.find("starts with an Embedding: expected token ids") != std::string::npos);
  REQUIRE(io::write_npy((d + "/ids.npy").c_str(), io::ElemType::i32, x.shape.data(), 2, x.bytes.data()) == RNNCORE_OK);
  r = run("run --weights " + src("tests/golden/tflite_int8/stacks/stack2_I6_H12_8_T10_B2_last.safetensors") +
          " --input " + d + "/ids.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("which has no Embedding") != std::string::npos);

  // A table whose quantization is not the first layer's input is refused, naming both.
  std::string bytes = slurp(golden + ".safetensors");
  const std::string key = "\"embedding.zp\":\"";
  const std::size_t at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  bytes[at + key.size()] = bytes[at + key.size()] == '5' ? '6' : '5';
  {
    std::ofstream out(d + "/bad_embedding.safetensors", std::ios::binary);
    out << bytes;
  }
  r = run("run --weights " + d + "/bad_embedding.safetensors --input " + d + "/ids.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("is not the embedding's rows") != std::string::npos);
}

TEST_CASE("cli: stacked int8 LSTMs, go_backwards, Bidirectional and Dense layers run bit for bit as LiteRT") {
  // tests/golden/tflite_int8/stacks/<case>.safetensors: the converter's output (metadata layers = L);
  // <case>.io.safetensors: LiteRT's int8 input x and output y, and every LSTM op's final states hn,
  // cn (the [B, H] blocks of layer 0 forward, backward, layer 1, ... flattened). bidi_*: Keras
  // Bidirectional layers.
  int cases = 0;
  const std::string d = temp_dir();
  for (const std::string& model : list_cases(src("tests/golden/tflite_int8/stacks"))) {
    if (model.find(".io.safetensors") != std::string::npos) continue;
    INFO(model);
    io::SafeTensors f;
    const std::string golden = model.substr(0, model.size() - 12) + ".io.safetensors";
    REQUIRE(io::read_safetensors(golden.c_str(), &f) == RNNCORE_OK);
    extract(f, "x", d + "/x.npy");
    Result r = run("run --weights " + model + " --input " + d + "/x.npy --output " + d + "/y.npy --hn " + d +
                   "/hn.npy --cn " + d + "/cn.npy");
    INFO(r.err);
    const std::string name = model.substr(model.rfind('/') + 1);
    if (name.rfind("bidi_widths", 0) == 0) {  // a narrower backward LSTM: no StackSpec holds it, refused naming the layer
      CHECK(r.code != 0);
      CHECK(r.err.find("layer 0 (bidirectional): directions of widths 6 and 4") != std::string::npos);
      continue;
    }
    REQUIRE(r.code == 0);
    CHECK((r.out.find(" layers (H ") != std::string::npos) == (name.find("stack") != std::string::npos));
    CHECK((r.out.find("(go_backwards)") != std::string::npos) == (name.find("backwards") != std::string::npos));
    CHECK((r.out.find("then Dense ") != std::string::npos) == (name.find("dense") != std::string::npos));
    CHECK((r.out.find("bidirectional ") != std::string::npos) == (name.find("bidi") != std::string::npos));
    CHECK((r.out.find("then softmax ") != std::string::npos) == (name.find("softmax") != std::string::npos));
    CHECK((r.out.find("token ids") != std::string::npos) == (name.find("embed") != std::string::npos));
    io::Array got, want;
    REQUIRE(io::read_npy((d + "/y.npy").c_str(), &got) == RNNCORE_OK);
    REQUIRE(f.array("y", &want) == RNNCORE_OK);
    CHECK(got.shape == want.shape);
    CHECK(got.bytes == want.bytes);  // every element, bit for bit
    for (const char* state : {"hn", "cn"}) {  // LiteRT's variable tensors after the run, bit for bit
      io::Array g, w;
      REQUIRE(io::read_npy((d + "/" + state + ".npy").c_str(), &g) == RNNCORE_OK);
      REQUIRE(f.array(state, &w) == RNNCORE_OK);
      CHECK(g.type == w.type);
      CHECK(g.bytes == w.bytes);
      // [B, H] for one LSTM, [L·D, B, H] for LSTMs of one width, else the blocks flattened
      const std::int64_t B = got.shape[0];
      if (name.rfind("backwards_I6_H12", 0) == 0) CHECK(g.shape == std::vector<std::int64_t>{B, 12});
      if (name.rfind("bidi_I5_H6", 0) == 0) CHECK(g.shape == std::vector<std::int64_t>{2, B, 6});
      if (name.rfind("stack3_I4_H16_16_8", 0) == 0) CHECK(g.shape == std::vector<std::int64_t>{B * (16 + 16 + 8)});
    }
    ++cases;
  }
  CHECK(cases == 28);  // with softmax_*, dense_relu_softmax_*, dense_sigmoid_softmax_*: a softmax head of its own

  {  // --expect*, --tolerance and --repeat, as for a float model: LiteRT's y, hn and cn exactly
    const std::string m = src("tests/golden/tflite_int8/stacks/dense_relu_softmax_I6_H10_T8_B3_relu5_softmax");
    io::SafeTensors f;
    REQUIRE(io::read_safetensors((m + ".io.safetensors").c_str(), &f) == RNNCORE_OK);
    for (const char* t : {"x", "y"}) extract(f, t, d + "/e_" + t + ".npy");
    for (const char* t : {"hn", "cn"}) {  // the golden's flattened states in the shape --hn writes: [B, H]
      io::Array s;
      REQUIRE(f.array(t, &s) == RNNCORE_OK);
      const std::int64_t shape[2] = {3, s.shape[0] / 3};
      REQUIRE(io::write_npy((d + "/e_" + t + ".npy").c_str(), s.type, shape, 2, s.bytes.data()) == RNNCORE_OK);
    }
    const std::string base = "run --weights " + m + ".safetensors --input " + d + "/e_x.npy --output " + d + "/e_out.npy";
    Result r = run(base + " --expect " + d + "/e_y.npy --expect-hn " + d + "/e_hn.npy --expect-cn " + d +
                   "/e_cn.npy --tolerance 0 --repeat 2");
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("y: max_abs_diff=0 max_rel_err=0") != std::string::npos);
    CHECK(r.out.find("cn: max_abs_diff=0 max_rel_err=0") != std::string::npos);
    CHECK(r.out.find("(median of 2)") != std::string::npos);
    io::Array y;
    REQUIRE(f.array("y", &y) == RNNCORE_OK);
    y.bytes[0] = static_cast<unsigned char>(y.bytes[0] + 1);  // one output one step off
    REQUIRE(io::write_npy((d + "/e_y1.npy").c_str(), y.type, y.shape.data(), static_cast<int>(y.shape.size()),
                          y.bytes.data()) == RNNCORE_OK);
    r = run(base + " --expect " + d + "/e_y1.npy --tolerance 0");
    CHECK(r.code == 1);
    CHECK(r.err.find("y: relative error") != std::string::npos);
  }

  // A stack whose layer 1 does not read layer 0's quantization is refused, naming both.
  const std::string model = src("tests/golden/tflite_int8/stacks/stack2_I6_H12_8_T10_B2_last.safetensors");
  std::string bytes = slurp(model);
  const std::string key = "\"l1.input_zp\":\"";
  const std::size_t at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  bytes[at + key.size()] = bytes[at + key.size()] == '5' ? '6' : '5';
  {
    std::ofstream out(d + "/bad_stack.safetensors", std::ios::binary);
    out << bytes;
  }
  const Result r = run("run --weights " + d + "/bad_stack.safetensors --input " + d + "/x.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("layer 1's input") != std::string::npos);
  CHECK(r.err.find("is not layer 0's output") != std::string::npos);

  // A bidirectional layer of another merge mode than concat is refused, naming the key.
  bytes = slurp(src("tests/golden/tflite_int8/stacks/bidi_I5_H6_T7_B2_seq.safetensors"));
  const std::string mode = "\"l0.bidirectional\":\"concat\"";
  const std::size_t m = bytes.find(mode);
  REQUIRE(m != std::string::npos);
  bytes.replace(m + mode.size() - 7, 6, "summed");
  {
    std::ofstream out(d + "/bad_bidi.safetensors", std::ios::binary);
    out << bytes;
  }
  const Result rb = run("run --weights " + d + "/bad_bidi.safetensors --input " + d + "/x.npy --output " + d + "/y.npy");
  CHECK(rb.code == 1);
  CHECK(rb.err.find("'l0.bidirectional' is 'summed'; expected concat, sum, mul or ave") != std::string::npos);
}

namespace {

// Steps [t0, t1) of a batch-major array [B, T, n] (an int8 model's x or y), as an .npy [B, t1 - t0, n].
void write_steps(const io::Array& a, std::int64_t t0, std::int64_t t1, const std::string& path) {
  const std::int64_t B = a.shape[0], T = a.shape[1], n = a.shape[2];
  std::vector<std::uint8_t> part;
  for (std::int64_t b = 0; b < B; ++b)
    part.insert(part.end(), a.bytes.begin() + (b * T + t0) * n, a.bytes.begin() + (b * T + t1) * n);
  const std::int64_t shape[3] = {B, t1 - t0, n};
  REQUIRE(io::write_npy(path.c_str(), a.type, shape, 3, part.data()) == RNNCORE_OK);
}

}  // namespace

TEST_CASE("cli: int8 models stream in chunks: --hn/--cn of one call as --h0/--c0 of the next give LiteRT's run") {
  // A single LSTM and a stack of three (widths 16, 16, 8: the states are the blocks flattened), both
  // returning every step: the sequence in two chunks, the states carried through files, equals the
  // golden's one run of LiteRT -- y, and the final states.
  const std::string d = temp_dir();
  const std::string cases[][2] = {
      {"tests/golden/tflite_int8/converted/lstm_I16_H32_T50_B4_seq.safetensors", "tests/golden/tflite_int8/lstm_I16_H32_T50_B4_seq.safetensors"},
      {"tests/golden/tflite_int8/stacks/stack3_I4_H16_16_8_T12_B3_seq.safetensors",
       "tests/golden/tflite_int8/stacks/stack3_I4_H16_16_8_T12_B3_seq.io.safetensors"}};
  for (const auto& c : cases) {
    INFO(c[0]);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(src(c[1]).c_str(), &f) == RNNCORE_OK);
    io::Array x, y;
    REQUIRE(f.array("x", &x) == RNNCORE_OK);
    REQUIRE(f.array("y", &y) == RNNCORE_OK);
    const std::int64_t T = x.shape[1], split = T / 3;
    write_steps(x, 0, split, d + "/x1.npy");
    write_steps(x, split, T, d + "/x2.npy");
    const std::string run1 = "run --weights " + src(c[0]) + " --input " + d + "/x1.npy --output " + d + "/y1.npy --hn " + d +
                             "/h1.npy --cn " + d + "/c1.npy";
    Result r = run(run1);
    INFO(r.err);
    REQUIRE(r.code == 0);
    r = run("run --weights " + src(c[0]) + " --input " + d + "/x2.npy --output " + d + "/y2.npy --h0 " + d +
            "/h1.npy --c0 " + d + "/c1.npy --hn " + d + "/h2.npy --cn " + d + "/c2.npy");
    REQUIRE(r.code == 0);
    for (int k = 0; k < 2; ++k) {
      write_steps(y, k == 0 ? 0 : split, k == 0 ? split : T, d + "/want.npy");
      CHECK(slurp(d + (k == 0 ? "/y1.npy" : "/y2.npy")) == slurp(d + "/want.npy"));
    }
    for (const char* state : {"hn", "cn"}) {
      io::Array got, want;
      REQUIRE(io::read_npy((d + (state[0] == 'h' ? "/h2.npy" : "/c2.npy")).c_str(), &got) == RNNCORE_OK);
      REQUIRE(f.array(state, &want) == RNNCORE_OK);
      CHECK(got.bytes == want.bytes);
    }
    // The initial states must have the final states' dtype and shape.
    r = run("run --weights " + src(c[0]) + " --input " + d + "/x2.npy --output " + d + "/y2.npy --h0 " + d + "/c1.npy");
    CHECK(r.code == 1);
    CHECK(r.err.find("c1.npy: expected I8 ") != std::string::npos);
    CHECK(r.err.find("(the model's output states, as --hn / --cn write them), found I16") != std::string::npos);
    const std::int64_t wrong[2] = {1, 3};
    const std::int16_t zeros[3] = {};
    REQUIRE(io::write_npy((d + "/c_wrong.npy").c_str(), io::ElemType::i16, wrong, 2, zeros) == RNNCORE_OK);
    r = run("run --weights " + src(c[0]) + " --input " + d + "/x2.npy --output " + d + "/y2.npy --c0 " + d + "/c_wrong.npy");
    CHECK(r.code == 1);
    CHECK(r.err.find("(the model's cell states, as --hn / --cn write them), found I16 [1, 3]") != std::string::npos);
  }
}

TEST_CASE("cli: int8 models: float input is quantized; wrong dtype, shape and options are refused") {
  const std::string model = src("tests/golden/tflite_int8/converted/lstm_I8_H16_T6_B2_seq.safetensors");
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(model.c_str(), &f) == RNNCORE_OK);
  const std::string d = temp_dir();
  const float s = static_cast<float>(std::strtod(f.meta("input_scale")->c_str(), nullptr));
  const int zp = std::atoi(f.meta("input_zp")->c_str());
  // float32 input: x·(1/s) rounded half to even (LiteRT's QUANTIZE on XNNPACK), clamped to int8.
  const std::int64_t shape[3] = {1, 2, 8};
  const float xf[16] = {0.0f, 2.5f * s, 3.5f * s, -2.5f * s, 1e9f, -1e9f, 0.49f * s, -7.0f * s,
                        1.0f, -1.0f, 0.25f, 3.0f * s, 0.0f, 0.0f, 0.0f, 0.0f};
  std::int8_t xq[16];
  for (int k = 0; k < 16; ++k) {
    const float v = std::nearbyint(std::min(std::max(xf[k] * (1.0f / s), -128.0f - zp), 127.0f - zp));
    xq[k] = static_cast<std::int8_t>(static_cast<int>(v) + zp);
  }
  CHECK(xq[1] == zp + 2);
  CHECK(xq[4] == 127);
  CHECK(xq[5] == -128);
  REQUIRE(io::write_npy((d + "/xf.npy").c_str(), io::ElemType::f32, shape, 3, xf) == RNNCORE_OK);
  REQUIRE(io::write_npy((d + "/xq.npy").c_str(), io::ElemType::i8, shape, 3, xq) == RNNCORE_OK);
  Result r = run("run --weights " + model + " --input " + d + "/xf.npy --output " + d + "/yf.npy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  r = run("run --weights " + model + " --input " + d + "/xq.npy --output " + d + "/yq.npy");
  REQUIRE(r.code == 0);
  io::Array a, b;
  REQUIRE(io::read_npy((d + "/yf.npy").c_str(), &a) == RNNCORE_OK);
  REQUIRE(io::read_npy((d + "/yq.npy").c_str(), &b) == RNNCORE_OK);
  CHECK(a.shape == std::vector<std::int64_t>{1, 2, 16});
  CHECK(a.bytes == b.bytes);

  // float64 input: refused, naming the dtypes
  const double x64[16] = {};
  REQUIRE(io::write_npy((d + "/x64.npy").c_str(), io::ElemType::f64, shape, 3, x64) == RNNCORE_OK);
  r = run("run --weights " + model + " --input " + d + "/x64.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("expected int8 or float32 input [B, T, 8]") != std::string::npos);
  CHECK(r.err.find("found F64") != std::string::npos);
  // wrong input size I, and a 2-D input
  const std::int64_t bad[3] = {1, 2, 7};
  REQUIRE(io::write_npy((d + "/x7.npy").c_str(), io::ElemType::i8, bad, 3, xq) == RNNCORE_OK);
  r = run("run --weights " + model + " --input " + d + "/x7.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("expected shape [B, T, 8] (batch-major, as the TFLite op), found [1, 2, 7]") != std::string::npos);
  REQUIRE(io::write_npy((d + "/x2.npy").c_str(), io::ElemType::i8, shape + 1, 2, xq) == RNNCORE_OK);
  r = run("run --weights " + model + " --input " + d + "/x2.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("found [2, 8]") != std::string::npos);
  // options of float models: a usage error
  r = run("run --weights " + model + " --input " + d + "/xq.npy --output " + d + "/y.npy --batch-first");
  CHECK(r.code == 2);
  CHECK(r.err.find("--batch-first does not apply") != std::string::npos);
  // damaged copies of the model (same header length): one line naming the file and what is wrong
  const std::string bytes = slurp(model);
  auto damaged = [&](const std::string& from, const std::string& to, const std::string& needle) {
    std::string b = bytes;
    const std::size_t at = b.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(from.size() == to.size());
    b.replace(at, from.size(), to);
    const std::string path = d + "/damaged.safetensors";
    std::ofstream(path, std::ios::binary) << b;
    const Result rd = run("run --weights " + path + " --input " + d + "/xq.npy --output " + d + "/y.npy");
    INFO(from << " -> " << to);
    CHECK(rd.code == 1);
    CHECK_MESSAGE(rd.err.find(needle) != std::string::npos, rd.err);
    CHECK(rd.err.find(path) != std::string::npos);
  };
  damaged("\"w_f\":{", "\"w_x\":{", "tensor 'w_f' missing");
  damaged("\"cell_scale\":\"6.103515625e-05\"", "\"cell_scale\":\"6.103515625e-04\"", "not a power of two");
  damaged("\"cell_scale\":\"6.103515625e-05\"", "\"cell_scale\":\"6.1035156x5e-05\"", "metadata 'cell_scale'");
  damaged("\"input_zp\":\"-2\"", "\"input_zp\":\"-x\"", "metadata 'input_zp' is '-x'");
  damaged("\"w_f\":{\"dtype\":\"I8\"", "\"w_f\":{\"dtype\":\"U8\"", "tensor 'w_f' is U8, expected I8");

  // export-c writes an int8 model's header for rnncore/int8.h; float-only options are usage errors
  r = run("export-c --weights " + model + " --output " + d + "/m.h");
  CHECK(r.code == 0);
  CHECK(slurp(d + "/m.h").find("static const rnncore_int8_lstm_quantization m_quantization = {") != std::string::npos);
  for (const char* opt : {"--max-batch 2", "--mode lstm"}) {
    r = run("export-c --weights " + model + " --output " + d + "/m.h " + opt);
    CHECK(r.code == 2);
  }
  r = run("export-c --weights " + model + " --output " + d + "/m.h --sample-input " + d + "/xf.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("expected int8 [B, T, 8] (input, batch-major), found F32 [1, 2, 8]") != std::string::npos);
  {  // a last-step model's sample output is [B, H]
    const std::string last = "tests/golden/tflite_int8/lstm_I16_H32_T8_B2_last.safetensors";
    io::SafeTensors g;
    REQUIRE(io::read_safetensors(src(last).c_str(), &g) == RNNCORE_OK);
    extract(g, "x", d + "/x_last.npy");
    extract(g, "y", d + "/y_last.npy");
    r = run("export-c --weights " + src("tests/golden/tflite_int8/converted/lstm_I16_H32_T8_B2_last.safetensors") +
            " --sample-input " + d + "/x_last.npy --sample-output " + d + "/y_last.npy --output " + d + "/last.h");
    CHECK(r.code == 0);
    const std::string h = slurp(d + "/last.h");
    CHECK(h.find("#define LAST_RETURN_SEQUENCES 0\n") != std::string::npos);
    CHECK(h.find("static const int8_t last_sample_output[64] = {") != std::string::npos);
    r = run("export-c --weights " + src("tests/golden/tflite_int8/converted/lstm_I16_H32_T8_B2_last.safetensors") +
            " --sample-input " + d + "/x_last.npy --sample-output " + d + "/x_last.npy --output " + d + "/last.h");
    CHECK(r.code == 1);
    CHECK(r.err.find("expected int8 [B, 32] (B and T of the sample input)") != std::string::npos);
  }

  // a golden data file (no metadata format=tflite_int8) is not taken for an int8 model
  r = run("run --weights " + src("tests/golden/tflite_int8/lstm_I8_H16_T6_B2_seq.safetensors") + " --input " + d +
          "/xq.npy --output " + d + "/y.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("no recurrent weights found") != std::string::npos);
}

// Issue 30 item 4: what a new user found.
TEST_CASE("cli: --tolerance names the output whose relative error exceeds it, in %.3g") {
  const std::string m = src("examples/models/"), d = temp_dir();
  const std::string base = "run --weights " + m + "lstm_small.safetensors --input " + m + "lstm_small_input.npy --output " +
                           d + "/y.npy --expect " + m + "lstm_small_expected_y.npy";
  Result r = run(base + " --expect-hn " + m + "lstm_small_expected_hn.npy --tolerance 1e-3");
  CHECK(r.code == 0);
  r = run(base + " --expect-hn " + m + "lstm_small_expected_hn.npy --tolerance 1e-12");
  CHECK(r.code == 1);
  // the largest of the outputs' errors, the one the tool printed for it, and the tolerance
  double rel[2] = {0, 0};
  const char* labels[2] = {"y: ", "hn: "};
  for (int k = 0; k < 2; ++k) {
    const std::size_t at = r.out.find(labels[k]);
    REQUIRE(at != std::string::npos);
    const std::size_t v = r.out.find("max_rel_err=", at);
    REQUIRE(v != std::string::npos);
    rel[k] = std::strtod(r.out.c_str() + v + 12, nullptr);
    CHECK(rel[k] > 1e-12);  // float32 results against float64 references
  }
  const int worst = rel[1] > rel[0] ? 1 : 0;
  char want[96];
  std::snprintf(want, sizeof want, "%srelative error %.3g exceeds --tolerance 1e-12", labels[worst], rel[worst]);
  CHECK_MESSAGE(r.err.find(want) != std::string::npos, r.err);
  CHECK(r.err.find("0.000000") == std::string::npos);
}

TEST_CASE("cli: an int8 run prints the kernels that ran, as `rnncore info` names them") {
  const std::string m = src("examples/models/"), d = temp_dir();
  const std::string args = "run --weights " + m + "lstm_int8.safetensors --input " + m + "lstm_int8_input.npy --output " + d +
                           "/y.npy";
  const char* env = std::getenv("RNNCORE_MAX_ISA");  // a CI stage may cap the ISA for every test
  const std::string given = env != nullptr ? env : "";
  for (const char* cap : {"", "none"}) {
    INFO("RNNCORE_MAX_ISA=" << (*cap != '\0' ? cap : given.c_str()));
    if (*cap != '\0') setenv("RNNCORE_MAX_ISA", cap, 1);
    const Result info = run("info"), r = run(args);
    if (*cap != '\0') {
      if (env != nullptr) setenv("RNNCORE_MAX_ISA", given.c_str(), 1);
      else unsetenv("RNNCORE_MAX_ISA");
    }
    REQUIRE(r.code == 0);
    const std::string key = "int8 LSTM kernels: ";
    const std::size_t at = info.out.find(key);
    REQUIRE(at != std::string::npos);
    const std::string dot = info.out.substr(at + key.size(), info.out.find(',', at) - at - key.size());
    const std::size_t rest = info.out.find("rest of the step: ", at);
    REQUIRE(rest != std::string::npos);
    std::string step = info.out.substr(rest + 18, info.out.find('\n', rest) - rest - 18);
    if (step == "scalar") step = "scalar step";
    CHECK_MESSAGE(r.out.find("int8 kernels " + dot + " + " + step + ",") != std::string::npos, r.out);
    CHECK(r.out.find("scalar integer") == std::string::npos);
    // Capped to no SIMD instruction set: the portable kernel, or on 32-bit ARM the DSP one (SMLAD is
    // the base ISA of ARMv7E-M / ARMv7-A, not a SIMD extension that RNNCORE_MAX_ISA caps).
    if (*cap != '\0') CHECK_MESSAGE((dot == "i8_dot_1x1__scalar" || dot == "i8_dot_4x16__dsp"), dot);
  }
}

TEST_CASE("cli: a model option that does not apply to the model is a usage error") {
  const std::string m = src("examples/models/"), d = temp_dir();
  const std::string args = "--weights " + m + "lstm_small.safetensors --input " + m + "lstm_small_input.npy";
  Result r = run("run " + args + " --output " + d + "/y.npy --gru reset-before");
  CHECK(r.code == 2);
  CHECK(r.err.find("--gru reset-before does not apply to a model without GRU layers (layer 0 is lstm)") != std::string::npos);
  r = run("run " + args + " --output " + d + "/y.npy --gru reset-after");
  CHECK(r.code == 2);
  r = run("grad " + args + " --dy " + m + "lstm_small_expected_y.npy --grads " + d + "/g.safetensors --gru reset-before");
  CHECK(r.code == 2);
  r = run("export-c --weights " + m + "lstm_small.safetensors --output " + d + "/m.h --gru reset-before");
  CHECK(r.code == 2);
  CHECK(r.err.find("--gru reset-before does not apply") != std::string::npos);
  r = run("quantize --weights " + m + "lstm_small.safetensors --calibration " + m + "lstm_small_input.npy --output " + d +
          "/q.safetensors --gru reset-after");
  CHECK(r.code == 2);
  CHECK(r.err.find("--gru reset-after does not apply") != std::string::npos);
  r = run("run " + args + " --output " + d + "/y.npy --forget-bias 1");  // as --forget-bias already was
  CHECK(r.code == 1);
  CHECK(r.err.find("a forget bias belongs to TF LSTM cells") != std::string::npos);
}

TEST_CASE("cli: grad on an int8 model names where the model came from") {
  const std::string m = src("examples/models/"), d = temp_dir();
  Result q = run("quantize --weights " + m + "lstm_small.safetensors --calibration " + m + "lstm_small_input.npy --output " + d +
                 "/q.safetensors");
  REQUIRE(q.code == 0);
  const std::string grad = " --input " + m + "lstm_small_input.npy --dy " + m + "lstm_small_expected_y.npy --grads " + d +
                           "/g.safetensors";
  Result r = run("grad --weights " + d + "/q.safetensors" + grad);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.err.find("written by rnncore quantize from lstm_small.safetensors") != std::string::npos, r.err);
  CHECK(r.err.find("tflite_to_safetensors") == std::string::npos);
  r = run("grad --weights " + m + "lstm_int8.safetensors" + grad);  // converted from a .tflite
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.err.find("converted by tools/tflite_to_safetensors.py") != std::string::npos, r.err);
}

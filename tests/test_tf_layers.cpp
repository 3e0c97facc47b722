// TF1 checkpoints whose layers differ (tests/golden/tf_layers/, made by tests/golden/make_tf_layers_golden.py):
// per-layer cell_clip, proj_clip, forget_bias and BasicRNNCell activation in per-layer bidirectional
// stacks, static_rnn over a MultiRNNCell, layers of different sizes or cells. Each converted file runs
// with no flag, through the io library and through `rnncore run`, and gives TensorFlow's outputs; the
// loader's side of what the converter writes (a stack carried in the metadata, a forget bias per layer)
// refuses what it cannot take with one line. The converter's own refusals are checked by the script.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "rnncore/io/model.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "tests/golden_files.hpp"
#include "tests/test_util.hpp"
#include "tests/tool_run.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

struct LayersCase {
  std::string model, name;
  io::SafeTensors data;
};

std::vector<LayersCase> layers_cases() {
  std::vector<LayersCase> out;
  for (const std::string& p : list_cases(golden_dir("tf_layers"))) {
    const std::size_t n = p.size();
    if (n < 18 || p.compare(n - 18, 18, ".model.safetensors") != 0) continue;
    LayersCase c;
    c.model = p;
    c.name = p.substr(p.rfind('/') + 1, n - 18 - p.rfind('/') - 1);
    REQUIRE(io::read_safetensors((p.substr(0, n - 18) + ".data.safetensors").c_str(), &c.data) == RNNCORE_OK);
    out.push_back(std::move(c));
  }
  REQUIRE(out.size() >= 11);
  return out;
}

// The file as `rnncore run` loads it with no flag (no --config, no hint), run on one backend.
template <class T>
void run_case(const LayersCase& c, Backend backend, Isa isa, double tolerance) {
  io::ModelHints hints;
  hints.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  io::LoadedModel m;
  std::string err;
  REQUIRE_MESSAGE(io::load_weights(c.model, hints, nullptr, &m, &err) == Status::ok, err);
  CHECK(m.format == WeightFormat::tensorflow);
  CHECK(m.ignored.empty());
  const T* w = reinterpret_cast<const T*>(m.canonical.data());
  const std::vector<T> canonical(w, w + m.canonical.size() / sizeof(T));
  const std::vector<T> x = floats<T>(c.data, "input");
  std::vector<T> h0, c0;
  if (c.data.find("h0") != nullptr) h0 = floats<T>(c.data, "h0");
  if (c.data.find("c0") != nullptr) c0 = floats<T>(c.data, "c0");
  ForwardArgs a;
  a.seq_len = std::stoi(meta(c.data, "seq_len"));
  a.batch = std::stoi(meta(c.data, "batch"));
  a.x = x.data();
  a.h0 = h0.empty() ? nullptr : h0.data();
  a.c0 = c0.empty() ? nullptr : c0.data();
  PlanOptions opt;
  opt.max_batch = a.batch;
  opt.max_seq_len = a.seq_len;
  opt.backend = backend;
  opt.max_isa = isa;
  Outputs<T> out;
  REQUIRE_MESSAGE(run_forward(m.stack, opt, canonical, a, &out) == Status::ok, last_error_detail());
  // States of layers that differ in size are per-layer [B, O_l] blocks, flattened, in both.
  const std::vector<double> y = floats<double>(c.data, "expected.y"), hn = floats<double>(c.data, "expected.hn");
  REQUIRE(out.y.size() == y.size());
  REQUIRE(out.hy.size() == hn.size());
  CHECK(rel_error(out.y.data(), y.data(), y.size()) < tolerance);
  CHECK(rel_error(out.hy.data(), hn.data(), hn.size()) < tolerance);
  if (c.data.find("expected.cn") != nullptr) {
    const std::vector<double> cn = floats<double>(c.data, "expected.cn");
    REQUIRE(out.cy.size() == cn.size());
    CHECK(rel_error(out.cy.data(), cn.data(), cn.size()) < tolerance);
  }
}

void extract(const io::SafeTensors& f, const std::string& name, const std::string& path) {
  io::Array a;
  REQUIRE(f.array(name, &a) == RNNCORE_OK);
  REQUIRE(io::write_npy(path.c_str(), a.type, a.shape.data(), static_cast<int>(a.shape.size()), a.bytes.data()) == RNNCORE_OK);
}

double compare_flat(const std::string& got_path, const io::SafeTensors& f, const std::string& expected) {
  io::Array got;
  REQUIRE(io::read_npy(got_path.c_str(), &got) == RNNCORE_OK);
  std::vector<double> g;
  REQUIRE(io::to_f64(got, &g) == RNNCORE_OK);
  const std::vector<double> w = floats<double>(f, expected);
  REQUIRE(g.size() == w.size());
  return rel_error(g.data(), w.data(), w.size());
}

}  // namespace

TEST_CASE("tf_layers: converted TF stacks whose layers differ load with no flag and give TF's outputs") {
  for (const LayersCase& c : layers_cases()) {
    INFO(c.name);
    run_case<double>(c, Backend::reference, Isa::best, 1e-10);
    run_case<float>(c, Backend::reference, Isa::best, 1e-5);
    for (Isa isa : isas_here()) {
      INFO("simd " << std::string(to_string(isa)));
      run_case<float>(c, Backend::simd, isa, 1e-5);
    }
  }
}

TEST_CASE("tf_layers: rnncore run, no flag, prints each layer's facts and writes TF's outputs") {
  // What `rnncore run` prints of the model: the per-layer facts the converter read from each layer's own ops.
  const std::pair<const char*, const char*> printed[] = {
      {"sbidir_lstm_cellclip_then_none", "lstm, 2 layer(s), bidirectional, input 3, hidden 4, cell_clip 0.5/0 "},
      {"sbidir_rnn_tanh_then_relu", "[rnn_tanh 4 bi, rnn_relu 4 bi]"},
      {"sbidir_lstm_clips_per_layer", "cell_clip 0.5/0.25 "},
      {"sbidir_lstm_projclip_l0", "proj_size 2/0, proj_clip 0.125/0 "},
      {"sbidir_lstm_forget_bias_per_layer", "lstm, 2 layer(s), bidirectional, input 3, hidden 4 (tensorflow"},
      {"static_lstm_cellclip_l2", "lstm, 2 layer(s), unidirectional, input 3, hidden 4, cell_clip 0.25 "},
      {"static_rnn_relu_l2", "rnn_relu, 2 layer(s), unidirectional, input 3, hidden 4 "},
      {"static_lstm_clip_rnn_relu", "[lstm 5 cell_clip 0.25, rnn_relu 3]"},
      {"multi_lstm_8_then_5", "[lstm 8, lstm 5]"},
      {"sbidir_lstm_6_then_3_clip", "[lstm 6 bi, lstm 3 bi cell_clip 0.25]"},
      {"sbidir_v1graph_lstm_fb_clip", "lstm, 2 layer(s), bidirectional, input 3, hidden 4, cell_clip 0.5/0 "},
  };
  const std::string d = temp_dir();
  int seen = 0;
  for (const LayersCase& c : layers_cases()) {
    INFO(c.name);
    std::string args = "run --weights " + c.model + " --output " + d + "/y.npy --hn " + d + "/hn.npy";
    if (c.data.find("expected.cn") != nullptr) args += " --cn " + d + "/cn.npy";
    for (const char* name : {"input", "h0", "c0"})
      if (c.data.find(name) != nullptr) {
        extract(c.data, name, d + "/" + name + ".npy");
        args += std::string(" --") + name + " " + d + "/" + name + ".npy";
      }
    const Result r = run(args);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    for (const auto& p : printed)
      if (c.name == p.first) {
        CHECK(r.out.find(p.second) != std::string::npos);
        ++seen;
      }
    CHECK(compare_flat(d + "/y.npy", c.data, "expected.y") < 1e-5);
    CHECK(compare_flat(d + "/hn.npy", c.data, "expected.hn") < 1e-5);
    if (c.data.find("expected.cn") != nullptr) CHECK(compare_flat(d + "/cn.npy", c.data, "expected.cn") < 1e-5);
  }
  CHECK(seen == 11);
}

TEST_CASE("tf_layers: a stack and forget biases in the metadata; what the loader refuses") {
  const std::string d = temp_dir();
  const std::string stack = golden_dir("tf_layers/multi_lstm_8_then_5.model.safetensors");
  const std::string x = golden_dir("tf_layers/multi_lstm_8_then_5.data.safetensors");
  io::SafeTensors data;
  REQUIRE(io::read_safetensors(x.c_str(), &data) == RNNCORE_OK);
  extract(data, "input", d + "/x.npy");
  const std::string io_args = " --input " + d + "/x.npy --output " + d + "/o.npy";
  // The file says each layer's cell: --mode and --gru do not apply; --config replaces the file's stack.
  Result r = run("run --weights " + stack + io_args + " --mode lstm");
  CHECK(r.code == 1);
  CHECK(r.err.find("the file carries its stack of layers (metadata 'config'), which says each layer's cell: --mode and "
                   "--gru do not apply") != std::string::npos);
  std::ofstream(d + "/wrong.json") << R"({"layers": [{"mode": "lstm", "hidden_size": 8}, {"mode": "lstm", "hidden_size": 8}]})";
  r = run("run --weights " + stack + io_args + " --config " + d + "/wrong.json");
  CHECK(r.code == 1);
  CHECK(r.err.find("tensor 'cell_1/kernel': expected shape") != std::string::npos);

  // A stack in the metadata is read strictly, as a --config file; its errors name the metadata.
  const std::vector<float> w(6 * 16, 0.1f);
  const std::vector<io::TensorToWrite> t = {{"cell_0/kernel", io::ElemType::f32, {6, 16}, w.data()},
                                            {"cell_0/bias", io::ElemType::f32, {16}, w.data()}};
  const float x2[2] = {1, 2};
  const std::int64_t xs[3] = {1, 1, 2};
  REQUIRE(io::write_npy((d + "/x2.npy").c_str(), io::ElemType::f32, xs, 3, x2) == RNNCORE_OK);
  const std::string io2 = " --input " + d + "/x2.npy --output " + d + "/o.npy";
  REQUIRE(io::write_safetensors((d + "/bad_config.safetensors").c_str(), t,
                                {{"config", R"({"layers": [{"mode": "lstm", "hiden_size": 4}]})"}}) == RNNCORE_OK);
  r = run("run --weights " + d + "/bad_config.safetensors" + io2);
  CHECK(r.code == 1);
  CHECK(r.err.find("(metadata 'config')") != std::string::npos);
  CHECK(r.err.find("unknown key 'hiden_size'") != std::string::npos);

  // forget_bias: one value, or one per layer.
  REQUIRE(io::write_safetensors((d + "/fb.safetensors").c_str(), t, {{"mode", "lstm"}, {"forget_bias", "1.0,0.5"}}) ==
          RNNCORE_OK);
  r = run("run --weights " + d + "/fb.safetensors" + io2);
  CHECK(r.code == 1);
  CHECK(r.err.find("forget bias '1.0,0.5' lists 2 values for a model of 1 layer(s)") != std::string::npos);
  REQUIRE(io::write_safetensors((d + "/fb1.safetensors").c_str(), t, {{"mode", "lstm"}, {"forget_bias", "0.5"}}) ==
          RNNCORE_OK);
  CHECK(run("run --weights " + d + "/fb1.safetensors" + io2).code == 0);
}

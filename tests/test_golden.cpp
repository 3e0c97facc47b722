// Golden tests: every case made by tests/golden/make_pytorch_golden.py (PyTorch 1.13, float64) and
// tests/golden/make_onnx_golden.py (ONNX's reference implementations) and
// tests/golden/make_keras_golden.py (TensorFlow 2.21 / Keras 3 layers) and tests/golden/make_tf_golden.py
// (TensorFlow 2.21 tf.compat.v1 cells, checkpoints converted by tools/tf_to_safetensors.py) and
// tests/golden/make_pytorch_proj_golden.py (nn.LSTM(proj_size)), run through the library's
// importers and every backend: the f64 reference, the f32 reference and each SIMD instruction set
// this machine has (LSTM projections, peepholes and clips included). Tolerances: relative error
// (∞-norm, tests/golden/README.md) ≤ 1e-10 for f64, ≤ 1e-5 for f32.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rnncore/io/model.hpp"
#include "rnncore/io/safetensors.hpp"
#include "tests/golden_files.hpp"
#include "tests/test_util.hpp"
#include "rnncore/io/stack_config.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

struct GoldenCase {
  io::SafeTensors file;
  RnnSpec spec;
  WeightFormat format = WeightFormat::pytorch;
  std::string prefix;
  int T = 0, B = 0;
  bool batch_first = false;
  std::vector<std::int32_t> lengths;
  std::string h0_name, c0_name, lengths_name;
};

void load_case(const std::string& path, GoldenCase* c) {
  REQUIRE(io::read_safetensors(path.c_str(), &c->file) == RNNCORE_OK);
  const io::SafeTensors& f = c->file;
  const std::string mode = meta(f, "mode");
  c->spec.mode = mode == "lstm" ? Mode::lstm : mode == "gru" ? Mode::gru : mode == "rnn_tanh" ? Mode::rnn_tanh : Mode::rnn_relu;
  if (c->spec.mode == Mode::gru)
    c->spec.gru_variant = meta(f, "gru") == "reset-before" ? GruVariant::reset_before : GruVariant::reset_after;
  c->spec.input_size = std::stoi(meta(f, "input_size"));
  c->spec.hidden_size = std::stoi(meta(f, "hidden_size"));
  c->spec.num_layers = std::stoi(meta(f, "num_layers"));
  if (f.meta("proj_size") != nullptr) c->spec.proj_size = std::stoi(meta(f, "proj_size"));  // nn.LSTM(proj_size)
  c->spec.direction = meta(f, "bidirectional") == "1" ? Direction::bidirectional : Direction::unidirectional;
  c->T = std::stoi(meta(f, "seq_len"));
  c->B = std::stoi(meta(f, "batch"));
  c->batch_first = meta(f, "batch_first") == "1";
  const std::string format = meta(f, "format");
  const bool onnx = format == "onnx";
  c->format = onnx ? WeightFormat::onnx : format == "keras" ? WeightFormat::keras : WeightFormat::pytorch;
  c->prefix = format == "pytorch" ? "rnn." : "";
  c->h0_name = onnx ? "initial_h" : "h0";
  c->c0_name = onnx ? "initial_c" : "c0";
  c->lengths_name = onnx ? "sequence_lens" : "seq_lengths";
  if (f.find(c->lengths_name) != nullptr) {
    io::Array a;
    REQUIRE(f.array(c->lengths_name, &a) == RNNCORE_OK);
    REQUIRE(io::to_i32(a, &c->lengths) == RNNCORE_OK);
  }
}

// Imports the case's weights into a canonical buffer of T.
template <class T>
std::vector<T> import_case(const GoldenCase& c, const RnnSpec& spec) {
  std::vector<TensorView> views;
  for (const io::TensorEntry& e : c.file.tensors) {
    TensorView v;
    v.name = e.name.c_str();
    if (e.type == io::ElemType::f32) v.dtype = DType::f32;
    else if (e.type == io::ElemType::f64) v.dtype = DType::f64;
    else continue;  // lengths
    v.shape.ndim = static_cast<int>(e.shape.size());
    for (std::size_t i = 0; i < e.shape.size(); ++i) v.shape.dims[i] = e.shape[i];
    v.data = c.file.data(e);
    views.push_back(v);
  }
  std::vector<T> canonical(param_count(spec));
  const Status s = import_weights(spec, c.format, views.data(), views.size(), c.prefix.c_str(), canonical.data());
  INFO(last_error_detail());
  REQUIRE(s == Status::ok);
  return canonical;
}

template <class T>
void run_case(const GoldenCase& c, Backend backend, Isa isa, double tolerance) {
  RnnSpec spec = c.spec;
  spec.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  const std::vector<T> canonical = import_case<T>(c, spec);
  const std::vector<T> x = floats<T>(c.file, "input");
  std::vector<T> h0, c0;
  if (c.file.find(c.h0_name) != nullptr) h0 = floats<T>(c.file, c.h0_name);
  if (c.file.find(c.c0_name) != nullptr) c0 = floats<T>(c.file, c.c0_name);
  ForwardArgs a;
  a.batch = c.B;
  a.seq_len = c.T;
  a.layout = c.batch_first ? Layout::batch_major : Layout::time_major;
  a.x = x.data();
  a.seq_lengths = c.lengths.empty() ? nullptr : c.lengths.data();
  a.h0 = h0.empty() ? nullptr : h0.data();
  a.c0 = c0.empty() ? nullptr : c0.data();
  PlanOptions opt;
  opt.max_batch = c.B;
  opt.max_seq_len = c.T;
  opt.backend = backend;
  opt.max_isa = isa;
  Outputs<T> out;
  REQUIRE(run_forward(spec, opt, canonical, a, &out) == Status::ok);

  const std::vector<double> y = floats<double>(c.file, "expected.y"), hn = floats<double>(c.file, "expected.hn");
  REQUIRE(y.size() == out.y.size());
  REQUIRE(hn.size() == out.hy.size());
  CHECK(rel_error(out.y.data(), y.data(), y.size()) <= tolerance);
  CHECK(rel_error(out.hy.data(), hn.data(), hn.size()) <= tolerance);
  if (spec.mode == Mode::lstm) {
    const std::vector<double> cn = floats<double>(c.file, "expected.cn");
    CHECK(rel_error(out.cy.data(), cn.data(), cn.size()) <= tolerance);
  }
  // Outputs past a row's length are exactly zero.
  if (!c.lengths.empty()) {
    const int width = num_directions(spec) * output_size(to_stack(spec).layers[0]);
    for (int b = 0; b < c.B; ++b)
      for (int t = c.lengths[b]; t < c.T; ++t)
        for (int u = 0; u < width; ++u) {
          const std::size_t i = c.batch_first ? (static_cast<std::size_t>(b) * c.T + t) * width + u
                                              : (static_cast<std::size_t>(t) * c.B + b) * width + u;
          REQUIRE(out.y[i] == T(0));
        }
  }
}

void run_all_backends(const std::string& path) {
  GoldenCase c;
  load_case(path, &c);
  INFO(path);
  {
    INFO("backend reference f64");
    run_case<double>(c, Backend::reference, Isa::best, 1e-10);
  }
  {
    INFO("backend reference f32");
    run_case<float>(c, Backend::reference, Isa::best, 1e-5);
  }
  for (Isa isa : isas_here()) {
    INFO("backend simd " << to_string(isa));
    run_case<float>(c, Backend::simd, isa, 1e-5);
  }
}

}  // namespace

TEST_CASE("golden: PyTorch nn.LSTM(proj_size) on the CPU backends; the GPU refuses it") {
  const std::vector<std::string> cases = list_cases(golden_dir("pytorch_proj"));
  REQUIRE(cases.size() >= 4);
  for (const std::string& p : cases) {
    GoldenCase c;
    load_case(p, &c);
    INFO(p);
    REQUIRE(c.spec.proj_size > 0);
    run_case<double>(c, Backend::reference, Isa::best, 1e-10);
    run_case<float>(c, Backend::reference, Isa::best, 1e-5);
    for (Isa isa : isas_here()) {
      INFO("simd " << std::string(to_string(isa)));
      run_case<float>(c, Backend::simd, isa, 1e-5);
    }
    PlanOptions opt;
    opt.max_batch = c.B;
    opt.max_seq_len = c.T;
    Plan plan;
    opt.backend = Backend::gpu;  // the GPU runs the projection (the emulator checks it); a build without one refuses
    const Status on_gpu = Plan::create(c.spec, opt, &plan);
    CHECK((on_gpu == Status::ok || on_gpu == Status::backend_unavailable));
    // The model-file loader infers P from weight_hr_l0 [P, H] and weight_hh_l0 [4H, P].
    io::ModelHints hints;
    io::LoadedModel m;
    std::string err;
    REQUIRE_MESSAGE(io::load_weights(p, hints, nullptr, &m, &err) == Status::ok, err);
    CHECK(m.spec.proj_size == c.spec.proj_size);
    CHECK(m.spec.hidden_size == c.spec.hidden_size);
    CHECK(m.spec.num_layers == c.spec.num_layers);
  }
}

TEST_CASE("golden: PyTorch nn.LSTM / nn.GRU / nn.RNN, all modes, 1-3 layers, uni/bidirectional, lengths") {
  const auto cases = list_cases(golden_dir("pytorch"));
  REQUIRE(cases.size() >= 48);
  for (const std::string& p : cases) run_all_backends(p);
}

TEST_CASE("golden: Keras layouts (LSTM, GRU reset_after True/False, SimpleRNN) against TensorFlow/Keras layers") {
  const auto cases = list_cases(golden_dir("keras"));
  REQUIRE(cases.size() >= 23);
  for (const std::string& p : cases) run_all_backends(p);
}

TEST_CASE("golden: ONNX layouts and both GRU variants against ONNX's reference implementations") {
  const auto cases = list_cases(golden_dir("onnx"));
  REQUIRE(cases.size() >= 20);
  for (const std::string& p : cases) run_all_backends(p);
}

namespace {

// The canonical weights of a stack from a golden file's PyTorch tensors ("rnn." prefix).
template <class T>
std::vector<T> import_pytorch(const io::SafeTensors& f, const StackSpec& st) {
  std::vector<TensorView> views;
  for (const io::TensorEntry& e : f.tensors) {
    if (e.type != io::ElemType::f32 || e.name.compare(0, 4, "rnn.") != 0) continue;
    TensorView v;
    v.name = e.name.c_str();
    v.shape.ndim = static_cast<int>(e.shape.size());
    for (std::size_t i = 0; i < e.shape.size(); ++i) v.shape.dims[i] = e.shape[i];
    v.data = f.data(e);
    views.push_back(v);
  }
  std::vector<T> w(static_cast<std::size_t>(param_count(st)));
  INFO(last_error_detail());
  REQUIRE(import_weights(st, WeightFormat::pytorch, views.data(), views.size(), "rnn.", w.data()) == Status::ok);
  return w;
}

// A golden file's optional int32 tensor (seq_lengths, row_ids); empty when absent.
std::vector<std::int32_t> optional_ints(const io::SafeTensors& f, const char* name) {
  std::vector<std::int32_t> v;
  io::Array a;
  if (f.find(name) == nullptr) return v;
  REQUIRE(f.array(name, &a) == RNNCORE_OK);
  REQUIRE(io::to_i32(a, &v) == RNNCORE_OK);
  return v;
}

// A dropout golden case (tests/golden/make_dropout_golden.py): a stack from its JSON config, run
// in training mode with the stored seed, step and row ids.
// Checks y, hn and (when the file has it) cn against the file's expected outputs; returns expected y.
template <class T>
std::vector<double> check_outputs(const Outputs<T>& out, const io::SafeTensors& f, double tolerance) {
  const std::vector<double> y = floats<double>(f, "expected.y"), hn = floats<double>(f, "expected.hn");
  REQUIRE(y.size() == out.y.size());
  REQUIRE(hn.size() == out.hy.size());
  CHECK(rel_error(out.y.data(), y.data(), y.size()) <= tolerance);
  CHECK(rel_error(out.hy.data(), hn.data(), hn.size()) <= tolerance);
  if (f.find("expected.cn") != nullptr) {
    const std::vector<double> cn = floats<double>(f, "expected.cn");
    REQUIRE(cn.size() == out.cy.size());
    CHECK(rel_error(out.cy.data(), cn.data(), cn.size()) <= tolerance);
  }
  return y;
}

template <class T>
void run_dropout_case(const io::SafeTensors& f, Backend backend, Isa isa, double tolerance) {
  StackSpec st;
  std::string err;
  const std::string cfg = meta(f, "config");
  REQUIRE_MESSAGE(io::parse_stack_config(cfg.data(), cfg.size(), "config", &st, &err) == Status::ok, err);
  st.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  const std::vector<T> canonical = import_pytorch<T>(f, st);
  const std::vector<T> x = floats<T>(f, "input");
  std::vector<T> h0, c0;
  if (f.find("h0") != nullptr) h0 = floats<T>(f, "h0");
  if (f.find("c0") != nullptr) c0 = floats<T>(f, "c0");
  const std::vector<std::int32_t> lengths = optional_ints(f, "seq_lengths"), ids32 = optional_ints(f, "row_ids");
  const std::vector<std::uint32_t> ids(ids32.begin(), ids32.end());
  ForwardArgs args;
  args.seq_len = std::stoi(meta(f, "seq_len"));
  args.batch = std::stoi(meta(f, "batch"));
  args.x = x.data();
  args.h0 = h0.empty() ? nullptr : h0.data();
  args.c0 = c0.empty() ? nullptr : c0.data();
  args.seq_lengths = lengths.empty() ? nullptr : lengths.data();
  args.row_ids = ids.empty() ? nullptr : ids.data();
  args.run_mode = RunMode::training;
  args.seed = std::stoull(meta(f, "seed"));
  args.step = std::stoull(meta(f, "step"));
  PlanOptions opt;
  opt.max_batch = args.batch;
  opt.max_seq_len = args.seq_len;
  opt.backend = backend;
  opt.max_isa = isa;
  Outputs<T> out;
  REQUIRE(run_forward(st, opt, canonical, args, &out) == Status::ok);
  const std::vector<double> y = check_outputs(out, f, tolerance);
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE((out.y[i] == T(0)) == (y[i] == 0.0));  // the same drops
}

}  // namespace

TEST_CASE("golden: stacks with DropoutWrapper, ResidualWrapper and inter-layer dropout (PyTorch cells, masks.py)") {
  const auto cases = list_cases(golden_dir("dropout"));
  REQUIRE(cases.size() >= 16);
  for (const std::string& path : cases) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    run_dropout_case<double>(f, Backend::reference, Isa::best, 1e-10);
    run_dropout_case<float>(f, Backend::reference, Isa::best, 1e-5);
    for (Isa isa : isas_here()) {
      INFO("simd " << std::string(to_string(isa)));
      run_dropout_case<float>(f, Backend::simd, isa, 1e-5);
    }
  }
}

namespace {

// The training forward and backward of a gradient golden case (f: its inputs, dy, dhn, dcn and the
// expected outputs and gradients); weight gradients are exported to `format` and compared per
// tensor (f's grad.<prefix><name>), relative to the tensor's largest reference magnitude.
template <class T>
void check_gradients(const io::SafeTensors& f, const StackSpec& st, const std::vector<T>& w, WeightFormat format,
                     const char* prefix, Backend backend, Isa isa, double tolerance) {
  const std::vector<T> x = floats<T>(f, "input"), dy = floats<T>(f, "dy");
  std::vector<T> h0, c0, dhn, dcn;
  if (f.find("h0") != nullptr) h0 = floats<T>(f, "h0");
  if (f.find("c0") != nullptr) c0 = floats<T>(f, "c0");
  if (f.find("dhn") != nullptr) dhn = floats<T>(f, "dhn");
  if (f.find("dcn") != nullptr) dcn = floats<T>(f, "dcn");
  const std::vector<std::int32_t> lengths = optional_ints(f, "seq_lengths"), ids32 = optional_ints(f, "row_ids");
  const std::vector<std::uint32_t> ids(ids32.begin(), ids32.end());
  const std::vector<std::int32_t> resets32 = optional_ints(f, "resets");  // tests/golden/resets/
  std::vector<std::uint8_t> resets(resets32.size());
  for (std::size_t i = 0; i < resets32.size(); ++i) resets[i] = resets32[i] != 0 ? 1 : 0;
  bool lstm = false;
  for (int l = 0; l < st.num_layers; ++l) lstm = lstm || st.layers[l].mode == Mode::lstm;

  PlanOptions opt;
  opt.max_batch = std::stoi(meta(f, "batch"));
  opt.max_seq_len = std::stoi(meta(f, "seq_len"));
  opt.backend = backend;
  opt.max_isa = isa;
  opt.training = true;
  Plan plan;
  REQUIRE_MESSAGE(Plan::create(st, opt, &plan) == Status::ok, last_error_detail());
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
  const std::size_t states = static_cast<std::size_t>(state_elements(st, opt.max_batch));
  const std::size_t cells = lstm ? static_cast<std::size_t>(cell_state_elements(st, opt.max_batch)) : 0;  // H (h: P)
  std::vector<T> y(dy.size()), hy(states), cy(cells), dx(x.size()), dh0(states), dc0(cells), dw(w.size());
  ForwardArgs fa;
  fa.batch = opt.max_batch;
  fa.seq_len = opt.max_seq_len;
  fa.layout = meta(f, "batch_first") == "1" ? Layout::batch_major : Layout::time_major;
  fa.x = x.data();
  fa.h0 = h0.empty() ? nullptr : h0.data();
  fa.c0 = c0.empty() ? nullptr : c0.data();
  fa.seq_lengths = lengths.empty() ? nullptr : lengths.data();
  fa.row_ids = ids.empty() ? nullptr : ids.data();
  fa.resets = resets.empty() ? nullptr : resets.data();
  fa.run_mode = meta(f, "run_mode") == "training" ? RunMode::training : RunMode::inference;
  fa.seed = std::stoull(meta(f, "seed"));
  fa.step = std::stoull(meta(f, "step"));
  fa.y = y.data();
  fa.hy = hy.data();
  fa.cy = lstm ? cy.data() : nullptr;
  fa.reserve = reserve.ptr;
  fa.reserve_bytes = reserve.size;
  REQUIRE_MESSAGE(plan.forward(packed.ptr, ws.ptr, ws.size, fa) == Status::ok, last_error_detail());
  BackwardArgs ba;
  ba.forward = fa;
  ba.dy = dy.data();
  ba.dhy = dhn.empty() ? nullptr : dhn.data();
  ba.dcy = dcn.empty() ? nullptr : dcn.data();
  ba.dx = dx.data();
  ba.dh0 = dh0.data();
  ba.dc0 = lstm ? dc0.data() : nullptr;
  ba.dweights = dw.data();
  REQUIRE_MESSAGE(plan.backward(packed.ptr, bws.ptr, bws.size, ba) == Status::ok, last_error_detail());

  auto check = [&](const char* what, const T* got, const std::string& name) {
    const std::vector<double> want = floats<double>(f, name);
    INFO(what << " " << name);
    CHECK(rel_error(got, want.data(), want.size()) <= tolerance);
  };
  check("forward", y.data(), "expected.y");
  check("forward", hy.data(), "expected.hn");
  if (!resets.empty()) {  // (the resets cases) cy too, and an inference run (no reserve) gives the same outputs
    if (lstm) check("forward", cy.data(), "expected.cn");
    std::vector<T> y2(y.size()), hy2(hy.size()), cy2(cy.size());
    ForwardArgs inf = fa;
    inf.reserve = nullptr;
    inf.reserve_bytes = 0;
    inf.y = y2.data();
    inf.hy = hy2.data();
    inf.cy = lstm ? cy2.data() : nullptr;
    REQUIRE_MESSAGE(plan.forward(packed.ptr, ws.ptr, ws.size, inf) == Status::ok, last_error_detail());
    check("inference", y2.data(), "expected.y");
    check("inference", hy2.data(), "expected.hn");
    if (lstm) check("inference", cy2.data(), "expected.cn");
  }
  check("backward", dx.data(), "expected.dx");
  check("backward", dh0.data(), "expected.dh0");
  if (lstm) check("backward", dc0.data(), "expected.dc0");
  int checked = 0;
  for (int i = 0; i < format_tensor_count(st, format); ++i) {
    TensorInfo info;
    REQUIRE(format_tensor_info(st, format, i, prefix, &info) == Status::ok);
    if (f.find(std::string("grad.") + info.name) == nullptr) continue;  // bias=False
    std::vector<T> g(static_cast<std::size_t>(info.shape.elements()));
    REQUIRE(export_gradient_tensor(st, format, i, dw.data(), g.data()) == Status::ok);
    check("weights", g.data(), std::string("grad.") + info.name);
    ++checked;
  }
  CHECK(checked > 0);
}

// A gradient golden case (tests/golden/make_grad_golden.py, PyTorch float64 autograd): a stack from
// its JSON config, weights in the PyTorch layout.
template <class T>
void run_grad_case(const io::SafeTensors& f, Backend backend, Isa isa, double tolerance) {
  StackSpec st;
  std::string err;
  const std::string cfg = meta(f, "config");
  REQUIRE_MESSAGE(io::parse_stack_config(cfg.data(), cfg.size(), "config", &st, &err) == Status::ok, err);
  st.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  check_gradients<T>(f, st, import_pytorch<T>(f, st), WeightFormat::pytorch, "rnn.", backend, isa, tolerance);
}

// A TF gradient golden case (tests/golden/make_tf_grad_golden.py, tf.GradientTape in float64): the
// model file as tools/tf_to_safetensors.py wrote it, loaded as `rnncore run` loads it.
template <class T>
void run_tf_grad_case(const std::string& model_path, const io::SafeTensors& data, Backend backend, double tolerance) {
  io::ModelHints hints;
  hints.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  io::LoadedModel m;
  std::string err;
  REQUIRE_MESSAGE(io::load_weights(model_path, hints, nullptr, &m, &err) == Status::ok, err);
  REQUIRE(m.format == WeightFormat::tensorflow);
  const T* w = reinterpret_cast<const T*>(m.canonical.data());
  check_gradients<T>(data, m.stack, std::vector<T>(w, w + m.canonical.size() / sizeof(T)), WeightFormat::tensorflow, "",
                     backend, Isa::best, tolerance);
}

}  // namespace

TEST_CASE("golden resets: per-step state resets, forward and every gradient, against PyTorch stepped and reset by hand") {
  const auto cases = list_cases(golden_dir("resets"));
  REQUIRE(cases.size() >= 7);
  for (const std::string& path : cases) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    REQUIRE(f.find("resets") != nullptr);
    run_grad_case<double>(f, Backend::reference, Isa::best, 1e-9);
    run_grad_case<float>(f, Backend::reference, Isa::best, 1e-4);
    for (Isa isa : isas_here()) {
      INFO("simd " << std::string(to_string(isa)));
      run_grad_case<float>(f, Backend::simd, isa, 1e-4);
    }
  }
}

TEST_CASE("golden gradients: every mode, wrapper and dropout kind against PyTorch float64 autograd") {
  const auto cases = list_cases(golden_dir("grad"));
  REQUIRE(cases.size() >= 30);
  for (const std::string& path : cases) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    run_grad_case<double>(f, Backend::reference, Isa::best, 1e-9);
    run_grad_case<float>(f, Backend::reference, Isa::best, 1e-4);
    if (!cpu_backends().empty() && cpu_backends().back() == Backend::simd) run_grad_case<float>(f, Backend::simd, Isa::best, 1e-4);
  }
}

TEST_CASE("golden gradients: TF LSTMCell peepholes, cell clip, projection and projection clip against tf.GradientTape") {
  std::vector<std::string> models;
  for (const std::string& p : list_cases(golden_dir("tf_grad")))
    if (p.size() > 18 && p.compare(p.size() - 18, 18, ".model.safetensors") == 0) models.push_back(p);
  REQUIRE(models.size() >= 4);
  for (const std::string& model : models) {
    INFO(model);
    io::SafeTensors data;
    const std::string data_path = model.substr(0, model.size() - 18) + ".data.safetensors";
    REQUIRE(io::read_safetensors(data_path.c_str(), &data) == RNNCORE_OK);
    run_tf_grad_case<double>(model, data, Backend::reference, 1e-9);
    for (Backend backend : cpu_backends()) {
      INFO("backend " << to_string(backend));
      run_tf_grad_case<float>(model, data, backend, 1e-4);
    }
  }
}

namespace {

// A TensorFlow case (tests/golden/make_tf_golden.py): <case>.model.safetensors is what
// tools/tf_to_safetensors.py wrote from TF's checkpoint (or, for keras_file_*, from a Keras 3 .keras
// file), loaded as `rnncore run` loads it (metadata gives format, mode, GRU variant, forget bias and
// clips; wrappers come from the data file's 'config'); <case>.data.safetensors holds the input and
// TF's float64 outputs, and for DropoutWrapper cases (dropout_*) the training run's seed and step.
template <class T>
void run_tf_case(const std::string& model_path, const io::SafeTensors& data, Backend backend, Isa isa,
                 double tolerance) {
  io::ModelHints hints;
  hints.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  StackSpec config;
  std::string err;
  const std::string* cfg = data.meta("config");
  if (cfg != nullptr)
    REQUIRE_MESSAGE(io::parse_stack_config(cfg->data(), cfg->size(), "config", &config, &err) == Status::ok, err);
  io::LoadedModel m;
  REQUIRE_MESSAGE(io::load_weights(model_path, hints, cfg != nullptr ? &config : nullptr, &m, &err) == Status::ok, err);
  // A Keras .keras file through the converter is in the keras layout; checkpoints in the tensorflow one.
  const std::string* format = data.meta("format");
  CHECK(m.format == (format != nullptr && *format == "keras" ? WeightFormat::keras : WeightFormat::tensorflow));
  CHECK(m.ignored.empty());
  const T* w = reinterpret_cast<const T*>(m.canonical.data());
  const std::vector<T> canonical(w, w + m.canonical.size() / sizeof(T));
  const std::vector<T> x = floats<T>(data, "input");
  std::vector<T> h0, c0;
  if (data.find("h0") != nullptr) h0 = floats<T>(data, "h0");
  if (data.find("c0") != nullptr) c0 = floats<T>(data, "c0");
  const std::vector<std::int32_t> lengths = optional_ints(data, "seq_lengths");
  ForwardArgs a;
  a.seq_len = std::stoi(meta(data, "seq_len"));
  a.batch = std::stoi(meta(data, "batch"));
  a.x = x.data();
  a.h0 = h0.empty() ? nullptr : h0.data();
  a.c0 = c0.empty() ? nullptr : c0.data();
  a.seq_lengths = lengths.empty() ? nullptr : lengths.data();
  const std::string* run_mode = data.meta("run_mode");  // DropoutWrapper keep < 1: TF's wrapper given rnncore's masks
  if (run_mode != nullptr) {
    REQUIRE(*run_mode == "training");
    a.run_mode = RunMode::training;
    a.seed = std::stoull(meta(data, "seed"));
    a.step = std::stoull(meta(data, "step"));
  }
  PlanOptions opt;
  opt.max_batch = a.batch;
  opt.max_seq_len = a.seq_len;
  opt.backend = backend;
  opt.max_isa = isa;
  Outputs<T> out;
  REQUIRE_MESSAGE(run_forward(m.stack, opt, canonical, a, &out) == Status::ok, last_error_detail());
  const std::vector<double> y = check_outputs(out, data, tolerance);
  if (run_mode != nullptr)
    for (std::size_t i = 0; i < y.size(); ++i) REQUIRE((out.y[i] == T(0)) == (y[i] == 0.0));  // the same drops
}

}  // namespace

TEST_CASE("golden: TensorFlow checkpoints (TF1 cells, MultiRNNCell, bidirectional, wrappers, DropoutWrapper keep < 1) and .keras files via tf_to_safetensors") {
  std::vector<std::string> models;
  for (const std::string& p : list_cases(golden_dir("tf")))
    if (p.size() > 18 && p.compare(p.size() - 18, 18, ".model.safetensors") == 0) models.push_back(p);
  REQUIRE(models.size() >= 35);
  for (const std::string& model : models) {
    INFO(model);
    const std::string data_path = model.substr(0, model.size() - 18) + ".data.safetensors";
    io::SafeTensors data;
    REQUIRE(io::read_safetensors(data_path.c_str(), &data) == RNNCORE_OK);
    run_tf_case<double>(model, data, Backend::reference, Isa::best, 1e-10);
    run_tf_case<float>(model, data, Backend::reference, Isa::best, 1e-5);
    for (Isa isa : isas_here()) {
      INFO("simd " << std::string(to_string(isa)));
      run_tf_case<float>(model, data, Backend::simd, isa, 1e-5);
    }
  }
}

namespace {

// Runs a model file through io::load_model (every CPU backend) and compares y with expected.y.
void run_head_file(const std::string& path, const io::SafeTensors& data, double tolerance) {
  const io::TensorEntry* xe = data.find("input");
  const io::TensorEntry* ye = data.find("expected.y");
  REQUIRE(xe != nullptr);
  REQUIRE(ye != nullptr);
  io::Array xa, ya;
  std::vector<double> x64, want;
  REQUIRE(data.array("input", &xa) == RNNCORE_OK);
  REQUIRE(data.array("expected.y", &ya) == RNNCORE_OK);
  REQUIRE(io::to_f64(xa, &x64) == RNNCORE_OK);
  REQUIRE(io::to_f64(ya, &want) == RNNCORE_OK);
  const std::vector<float> x(x64.begin(), x64.end());
  const int T = static_cast<int>(xe->shape[0]), B = static_cast<int>(xe->shape[1]);
  for (Backend backend : cpu_backends()) {
    INFO("backend " << to_string(backend));
    io::LoadOptions opt;
    opt.plan.max_batch = B;
    opt.plan.max_seq_len = T;
    opt.plan.backend = backend;
    Model model;
    io::LoadedModel info;
    std::string err;
    REQUIRE_MESSAGE(io::load_model(path, opt, &model, &info, &err) == Status::ok, err);
    CHECK(info.stack.head.out_features > 0);
    CHECK(info.ignored.size() == 2);  // input and expected.y: the head is run, not ignored
    std::vector<float> y(want.size(), -7.0f);
    ForwardArgs a;
    a.batch = B;
    a.seq_len = T;
    a.x = x.data();
    a.y = y.data();
    REQUIRE(model.forward(a) == Status::ok);
    CHECK(rel_error(y.data(), want.data(), want.size()) <= tolerance);
  }
}

}  // namespace

TEST_CASE("golden: a PyTorch LSTM -> Linear and the same Keras LSTM -> Dense run their head through io::load_model") {
  const std::vector<std::string> cases = list_cases(golden_dir("pytorch_head"));
  REQUIRE(cases.size() >= 2);
  for (const std::string& p : cases) {
    INFO(p);
    io::SafeTensors file;
    REQUIRE(io::read_safetensors(p.c_str(), &file) == RNNCORE_OK);
    run_head_file(p, file, 1e-5);
    // The same network in the Keras layout: the LSTM's tensors exported, the Dense kernel [in, out].
    io::LoadedModel m;
    std::string err;
    REQUIRE_MESSAGE(io::load_weights(p, io::ModelHints(), nullptr, &m, &err) == Status::ok, err);
    StackSpec plain = m.stack;
    plain.head = DenseSpec();
    const int n = format_tensor_count(plain, WeightFormat::keras);
    std::vector<std::vector<float>> store(static_cast<std::size_t>(n) + 2);
    std::vector<io::TensorToWrite> tensors;
    for (int i = 0; i < n; ++i) {
      TensorInfo t;
      REQUIRE(format_tensor_info(plain, WeightFormat::keras, i, "lstm/", &t) == Status::ok);
      store[static_cast<std::size_t>(i)].resize(static_cast<std::size_t>(t.shape.elements()));
      REQUIRE(export_tensor(plain, WeightFormat::keras, i, m.canonical.data(), store[static_cast<std::size_t>(i)].data()) ==
              Status::ok);
      tensors.push_back({t.name, io::ElemType::f32, std::vector<std::int64_t>(t.shape.dims, t.shape.dims + t.shape.ndim),
                         store[static_cast<std::size_t>(i)].data()});
    }
    const int out = m.stack.head.out_features, in = stack_output_size(plain);
    const float* W = reinterpret_cast<const float*>(m.canonical.data()) + canonical_offset(m.stack, 0, 0, ParamKind::dense_weight, 0);
    std::vector<float>& kernel = store[static_cast<std::size_t>(n)];
    for (int k = 0; k < in; ++k)
      for (int j = 0; j < out; ++j) kernel.push_back(W[j * in + k]);
    tensors.push_back({"dense/kernel", io::ElemType::f32, {in, out}, kernel.data()});
    const float* b = reinterpret_cast<const float*>(m.canonical.data()) + canonical_offset(m.stack, 0, 0, ParamKind::dense_bias, 0);
    store[static_cast<std::size_t>(n) + 1].assign(b, b + out);
    tensors.push_back({"dense/bias", io::ElemType::f32, {out}, store[static_cast<std::size_t>(n) + 1].data()});
    for (const char* name : {"input", "expected.y"}) {
      const io::TensorEntry* e = file.find(name);
      tensors.push_back({e->name, e->type, e->shape, file.data(*e)});
    }
    std::vector<std::pair<std::string, std::string>> meta;
    for (const char* key : {"head_activation", "head_last_step"}) meta.emplace_back(key, *file.meta(key));
    const std::string tmp = std::string(std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp") + "/rnncore_keras_head.safetensors";
    REQUIRE(io::write_safetensors(tmp.c_str(), tensors, meta) == RNNCORE_OK);
    run_head_file(tmp, file, 1e-5);
    std::remove(tmp.c_str());
  }
}

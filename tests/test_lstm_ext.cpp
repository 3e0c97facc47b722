// LSTM extensions (TF LSTMCell's use_peepholes, cell_clip, num_proj, proj_clip; PyTorch's proj_size):
// validation, the canonical layout and state shapes, the reference backend against a hand-written
// step, the weight formats that carry them, and the backends and modes that refuse them.
// Golden data from PyTorch and TensorFlow: tests/test_golden.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "rnncore/rnncore.h"
#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

RnnSpec ext_spec(int I, int H, int P, bool peep, double cell_clip, double proj_clip, int L = 1, bool bi = false) {
  RnnSpec s;
  s.input_size = I;
  s.hidden_size = H;
  s.num_layers = L;
  s.direction = bi ? Direction::bidirectional : Direction::unidirectional;
  s.proj_size = P;
  s.peepholes = peep;
  s.cell_clip = cell_clip;
  s.proj_clip = proj_clip;
  s.dtype = DType::f64;
  return s;
}

void expect_invalid(const RnnSpec& s, Status want, const char* fragment) {
  INFO(fragment);
  CHECK(validate(s) == want);
  CHECK(std::string(last_error_detail()).find(fragment) != std::string::npos);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double clip(double v, double c) { return c > 0 ? std::min(std::max(v, -c), c) : v; }

// One row of a one-layer unidirectional extended LSTM, written from TF LSTMCell's equations over
// canonical offsets.
void hand_forward(const RnnSpec& s, const std::vector<double>& w, const std::vector<double>& x, int T,
                  std::vector<double>* y, std::vector<double>* h, std::vector<double>* c) {
  const int I = s.input_size, H = s.hidden_size, P = s.proj_size;
  auto at = [&](ParamKind k, int g) { return w.data() + canonical_offset(s, 0, 0, k, g); };
  h->assign(P, 0.0);
  c->assign(H, 0.0);
  y->clear();
  for (int t = 0; t < T; ++t) {
    std::vector<double> m(H), pre(4);
    for (int u = 0; u < H; ++u) {
      for (int g = 0; g < 4; ++g) {
        double v = at(ParamKind::input_bias, g)[u] + at(ParamKind::recurrent_bias, g)[u];
        for (int k = 0; k < I; ++k) v += at(ParamKind::input_weight, g)[u * I + k] * x[t * I + k];
        for (int k = 0; k < P; ++k) v += at(ParamKind::recurrent_weight, g)[u * P + k] * (*h)[k];
        pre[g] = v;
      }
      const double i = sigmoid(pre[0] + at(ParamKind::peephole, 0)[u] * (*c)[u]);
      const double f = sigmoid(pre[1] + at(ParamKind::peephole, 1)[u] * (*c)[u]);
      (*c)[u] = clip(f * (*c)[u] + i * std::tanh(pre[2]), s.cell_clip);
      const double o = sigmoid(pre[3] + at(ParamKind::peephole, 3)[u] * (*c)[u]);
      m[u] = o * std::tanh((*c)[u]);
    }
    for (int p = 0; p < P; ++p) {
      double v = 0;
      for (int u = 0; u < H; ++u) v += at(ParamKind::projection, 0)[p * H + u] * m[u];
      (*h)[p] = clip(v, s.proj_clip);
      y->push_back((*h)[p]);
    }
  }
}

}  // namespace

TEST_CASE("lstm extensions: validation names the field") {
  CHECK(validate(ext_spec(3, 4, 2, true, 0.5, 0.3)) == Status::ok);
  expect_invalid(ext_spec(3, 4, 4, false, 0, 0), Status::invalid_size, "spec.proj_size = 4");
  expect_invalid(ext_spec(3, 4, 5, false, 0, 0), Status::invalid_size, "proj_size = 5");
  expect_invalid(ext_spec(3, 4, -1, false, 0, 0), Status::invalid_size, "proj_size = -1");
  expect_invalid(ext_spec(3, 4, 2, false, -0.5, 0), Status::invalid_size, "spec.cell_clip = -0.5");
  expect_invalid(ext_spec(3, 4, 2, false, std::numeric_limits<double>::infinity(), 0), Status::invalid_size,
                 "cell_clip = inf");
  expect_invalid(ext_spec(3, 4, 2, false, std::nan(""), 0), Status::invalid_size, "cell_clip = nan");
  expect_invalid(ext_spec(3, 4, 2, false, 0, -1), Status::invalid_size, "spec.proj_clip = -1");
  expect_invalid(ext_spec(3, 4, 0, false, 0, 0.5), Status::invalid_size, "proj_clip = 0.5 without a projection");
  RnnSpec gru = ext_spec(3, 4, 0, true, 0, 0);
  gru.mode = Mode::gru;
  expect_invalid(gru, Status::unsupported, "are LSTM features; mode is gru");
  StackSpec st = to_stack(ext_spec(3, 4, 0, false, 0, 0, 2));
  st.layers[1].proj_size = 4;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("layers[1].proj_size = 4") != std::string::npos);
}

TEST_CASE("lstm extensions: canonical layout, sizes and state shapes") {
  // I 3, H 4, P 2, peepholes, 2 layers, bidirectional: per direction of layer 0
  // 4·(4·3 + 4·2 + 2·4) + 3·4 + 2·4 = 132; layer 1 reads D·P = 4 features: 4·(16 + 8 + 8) + 20 = 148.
  const RnnSpec s = ext_spec(3, 4, 2, true, 0, 0, 2, true);
  REQUIRE(validate(s) == Status::ok);
  CHECK(layer_input_size(s, 1) == 4);
  CHECK(param_count(s) == 2 * 132 + 2 * 148);
  CHECK(canonical_offset(s, 0, 0, ParamKind::recurrent_weight, 1) == 4 * 12 + 8);
  CHECK(canonical_offset(s, 0, 0, ParamKind::input_bias, 0) == 4 * 20);
  CHECK(canonical_offset(s, 0, 0, ParamKind::peephole, 0) == 4 * 28);
  CHECK(canonical_offset(s, 0, 0, ParamKind::peephole, 1) == 4 * 28 + 4);
  CHECK(canonical_offset(s, 0, 0, ParamKind::peephole, 2) == -1);
  CHECK(canonical_offset(s, 0, 0, ParamKind::peephole, 3) == 4 * 28 + 8);
  CHECK(canonical_offset(s, 0, 0, ParamKind::projection, 0) == 4 * 28 + 12);
  CHECK(canonical_offset(s, 0, 1, ParamKind::input_weight, 0) == 132);
  CHECK(canonical_offset(s, 1, 0, ParamKind::projection, 0) == 264 + 148 - 8);
  CHECK(canonical_offset(ext_spec(3, 4, 0, false, 0.5, 0), 0, 0, ParamKind::peephole, 0) == -1);
  CHECK(canonical_offset(ext_spec(3, 4, 0, false, 0.5, 0), 0, 0, ParamKind::projection, 0) == -1);
  const Shape hs = state_shape(s, 3);
  CHECK(hs.dims[0] == 4);
  CHECK(hs.dims[2] == 2);
  const StackSpec st = to_stack(s);
  CHECK(state_elements(st, 3) == 4 * 3 * 2);
  CHECK(cell_state_elements(st, 3) == 4 * 3 * 4);
  CHECK(state_offset(st, 3, 1, 1) == 3 * 3 * 2);
  CHECK(cell_state_offset(st, 3, 1, 1) == 3 * 3 * 4);
  Shape shapes[64];
  int n = 0;
  REQUIRE(canonical_weight_shapes(s, shapes, 64, &n) == Status::ok);
  CHECK(n == 4 * 9);  // per (layer, direction): W ×4, R ×4, W_proj
  CHECK(shapes[4].dims[0] == 4);
  CHECK(shapes[4].dims[1] == 2);  // R_i [H, P]
  CHECK(shapes[8].dims[0] == 2);
  CHECK(shapes[8].dims[1] == 4);  // W_proj [P, H]
  REQUIRE(canonical_bias_shapes(s, shapes, 64, &n) == Status::ok);
  CHECK(n == 4 * 11);  // bW ×4, bR ×4, p_i, p_f, p_o
}

TEST_CASE("lstm extensions: the reference backend equals TF LSTMCell's equations written out") {
  Rng rng(15);
  for (const RnnSpec& s : {ext_spec(3, 5, 2, true, 0.4, 0.25), ext_spec(2, 4, 3, true, 0, 0), ext_spec(3, 4, 1, true, 0.7, 0)}) {
    const int T = 6;
    const std::vector<double> w = random_vector<double>(rng, static_cast<std::size_t>(param_count(s)), 0.9);
    const std::vector<double> x = random_vector<double>(rng, static_cast<std::size_t>(T) * s.input_size, 2.0);
    std::vector<double> y, h, c;
    hand_forward(s, w, x, T, &y, &h, &c);
    for (DType dt : {DType::f64, DType::f32}) {
      RnnSpec sd = s;
      sd.dtype = dt;
      PlanOptions opt;
      opt.max_seq_len = T;
      ForwardArgs a;
      a.batch = 1;
      a.seq_len = T;
      const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
      if (dt == DType::f64) {
        a.x = x.data();
        Outputs<double> out;
        REQUIRE(run_forward(sd, opt, w, a, &out) == Status::ok);
        CHECK(rel_error(out.y.data(), y.data(), y.size()) <= tol);
        CHECK(rel_error(out.hy.data(), h.data(), h.size()) <= tol);
        CHECK(rel_error(out.cy.data(), c.data(), c.size()) <= tol);
      } else {
        const std::vector<float> wf(w.begin(), w.end()), xf(x.begin(), x.end());
        a.x = xf.data();
        Outputs<float> out;
        REQUIRE(run_forward(sd, opt, wf, a, &out) == Status::ok);
        CHECK(rel_error(out.y.data(), y.data(), y.size()) <= tol);
        CHECK(rel_error(out.cy.data(), c.data(), c.size()) <= tol);
      }
    }
  }
}

TEST_CASE("lstm extensions: zero peepholes and unreachable clips give the plain LSTM") {
  Rng rng(7);
  const RnnSpec plain = ext_spec(3, 4, 0, false, 0, 0, 2, true);
  RnnSpec ext = plain;
  ext.peepholes = true;
  ext.cell_clip = 1e30;
  const std::vector<double> w = random_vector<double>(rng, static_cast<std::size_t>(param_count(plain)), 0.7);
  std::vector<double> we(static_cast<std::size_t>(param_count(ext)), 0.0);
  for (int l = 0; l < 2; ++l)  // every plain block at its place in the extended layout; peepholes stay 0
    for (int d = 0; d < 2; ++d)
      for (ParamKind k : {ParamKind::input_weight, ParamKind::recurrent_weight, ParamKind::input_bias,
                          ParamKind::recurrent_bias}) {
        const std::int64_t n = k == ParamKind::input_weight ? 4 * layer_input_size(plain, l)
                               : k == ParamKind::recurrent_weight ? 16 : 4;
        for (int g = 0; g < 4; ++g)
          for (std::int64_t e = 0; e < n; ++e)
            we[canonical_offset(ext, l, d, k, g) + e] = w[canonical_offset(plain, l, d, k, g) + e];
      }
  const std::vector<double> x = random_vector<double>(rng, 5 * 2 * 3, 1.5);
  const std::int32_t lengths[2] = {5, 2};
  PlanOptions opt;
  opt.max_batch = 2;
  opt.max_seq_len = 5;
  ForwardArgs a;
  a.batch = 2;
  a.seq_len = 5;
  a.x = x.data();
  a.seq_lengths = lengths;
  Outputs<double> p, e;
  REQUIRE(run_forward(plain, opt, w, a, &p) == Status::ok);
  REQUIRE(run_forward(ext, opt, we, a, &e) == Status::ok);
  CHECK(rel_error(e.y.data(), p.y.data(), p.y.size()) == 0.0);
  CHECK(rel_error(e.hy.data(), p.hy.data(), p.hy.size()) == 0.0);
  CHECK(rel_error(e.cy.data(), p.cy.data(), p.cy.size()) == 0.0);
}

TEST_CASE("lstm extensions: the GPU does not refuse them, training plans them; auto picks the SIMD backend for f32") {
  RnnSpec s = ext_spec(3, 4, 2, false, 0, 0);
  s.dtype = DType::f32;
  PlanOptions opt;
  Plan plan;
  REQUIRE(Plan::create(s, opt, &plan) == Status::ok);
  CHECK(plan.backend() == (isas_here().empty() ? Backend::reference : Backend::simd));
  opt.backend = Backend::gpu;  // the GPU runs them (docs/gpu.md, tests/gpu/): only a missing device or backend refuses
  for (bool training : {false, true}) {
    opt.training = training;
    const Status st = Plan::create(s, opt, &plan);
    CHECK((st == Status::ok || st == Status::backend_unavailable));
  }
  opt.training = true;
  for (Backend backend : cpu_backends()) {  // their gradients: test_train_lstm_ext.cpp
    opt.backend = backend;
    CHECK(Plan::create(s, opt, &plan) == Status::ok);
    CHECK(plan.reserve_bytes() > 0);
  }
}

namespace {

// Random extended stacks: every layer an LSTM with some of projection, peepholes and clips (sizes
// around the vector widths), some layers plain, some wrapped in dropout; random lengths and states.
StackSpec random_extended_stack(Rng& rng) {
  static const int kSizes[] = {1, 3, 4, 7, 8, 9, 16, 17, 24, 33, 40};
  StackSpec st;
  st.input_size = kSizes[rng.range(0, 10)];
  st.num_layers = rng.range(1, 3);
  st.dropout = rng.range(0, 3) == 0 ? 0.25 : 0.0;
  for (int l = 0; l < st.num_layers; ++l) {
    LayerSpec& ls = st.layers[l];
    ls.mode = Mode::lstm;
    ls.hidden_size = kSizes[rng.range(1, 10)];
    ls.direction = rng.range(0, 1) ? Direction::bidirectional : Direction::unidirectional;
    if (rng.range(0, 4) == 0) continue;  // a plain layer now and then
    ls.proj_size = rng.range(0, 2) == 0 ? 0 : rng.range(1, ls.hidden_size - 1);
    ls.peepholes = rng.range(0, 1) == 1;
    ls.cell_clip = rng.range(0, 1) ? 0.0 : 0.3 + 0.1 * rng.range(0, 5);
    ls.proj_clip = ls.proj_size > 0 && rng.range(0, 1) ? 0.1 + 0.05 * rng.range(0, 4) : 0.0;
    if (rng.range(0, 2) == 0) ls.wrappers[ls.num_wrappers++] = dropout_wrapper(0.9, 0.8, 0.7, rng.range(0, 1) == 1);
  }
  return st;
}

}  // namespace

TEST_CASE("lstm extensions: every SIMD path and weight type matches the f64 reference") {
  Rng rng(1515);
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(3, &pool) == Status::ok);
  const std::vector<Isa> isas = isas_here();
  int checked = 0;
  for (int i = 0; i < 40; ++i) {
    StackSpec st = random_extended_stack(rng);
    if (validate(st) != Status::ok) {  // e.g. a projection wider than its cell: draw again
      --i;
      continue;
    }
    const int T = rng.range(1, 8), B = rng.range(1, 11);
    int widest = 1;
    for (int l = 0; l < st.num_layers; ++l) widest = std::max(widest, st.layers[l].hidden_size);
    const auto w = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 1.5 / std::sqrt(double(widest)));
    const auto x = random_vector<float>(rng, static_cast<std::size_t>(T) * B * st.input_size, 1.5);
    const auto h0 = random_vector<float>(rng, static_cast<std::size_t>(state_elements(st, B)), 0.5);
    const auto c0 = random_vector<float>(rng, static_cast<std::size_t>(cell_state_elements(st, B)), 1.0);
    std::vector<std::int32_t> lengths(B);
    for (auto& len : lengths) len = rng.range(0, T);
    const bool with_lengths = rng.range(0, 1) == 1, initial = rng.range(0, 1) == 1;
    StackSpec st64 = st;
    st64.dtype = DType::f64;
    const std::vector<double> w64(w.begin(), w.end()), x64(x.begin(), x.end()), h64(h0.begin(), h0.end()),
        c64(c0.begin(), c0.end());
    ForwardArgs a;
    a.batch = B;
    a.seq_len = T;
    a.layout = rng.range(0, 1) ? Layout::batch_major : Layout::time_major;
    a.seq_lengths = with_lengths ? lengths.data() : nullptr;
    a.run_mode = RunMode::training;  // dropout on
    a.seed = 40 + i;
    PlanOptions o;
    o.max_batch = B;
    o.max_seq_len = T;
    o.backend = Backend::reference;
    Outputs<double> ref;
    a.x = x64.data();
    a.h0 = initial ? h64.data() : nullptr;
    a.c0 = initial ? c64.data() : nullptr;
    REQUIRE(run_forward(st64, o, w64, a, &ref) == Status::ok);
    a.x = x.data();
    a.h0 = initial ? h0.data() : nullptr;
    a.c0 = initial ? c0.data() : nullptr;
    o.backend = Backend::simd;
    o.threads = 1 + i % 3;
    o.thread_pool = pool;
    for (Isa isa : isas)
      for (DType wd : {DType::f32, DType::f16, DType::bf16}) {
        o.max_isa = isa;
        o.weight_dtype = wd;
        Plan probe;
        if (Plan::create(st, o, &probe) != Status::ok || probe.isa() != isa) continue;  // not on this ISA
        INFO("case " << i << " isa " << std::string(to_string(isa)) << " weights " << std::string(to_string(wd))
                     << " layers " << st.num_layers << " P0 " << st.layers[0].proj_size << " H0 "
                     << st.layers[0].hidden_size << " B " << B << " T " << T << " threads " << o.threads);
        Outputs<float> got;
        REQUIRE(run_forward(st, o, w, a, &got) == Status::ok);
        // f32: accumulation error only; f16 and bf16: test_lowp's stated bounds.
        const double tol = wd == DType::f32 ? 1e-5 : wd == DType::f16 ? 2e-3 : 2e-2;
        CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) < tol);
        CHECK(rel_error(got.hy.data(), ref.hy.data(), ref.hy.size()) < tol);
        CHECK(rel_error(got.cy.data(), ref.cy.data(), ref.cy.size()) < tol);
        ++checked;
      }
  }
  MESSAGE("extended SIMD runs checked: " << checked);
  ThreadPool::destroy(pool);
}

TEST_CASE("lstm extensions: formats that hold them round-trip; the others refuse them") {
  Rng rng(3);
  struct Case {
    WeightFormat format;
    RnnSpec spec;
  };
  const Case cases[] = {{WeightFormat::canonical, ext_spec(3, 4, 2, true, 0, 0, 2, true)},
                        {WeightFormat::pytorch, ext_spec(3, 4, 2, false, 0, 0, 2, true)},
                        {WeightFormat::tensorflow, ext_spec(3, 4, 2, true, 0.5, 0.2, 2, true)},
                        {WeightFormat::onnx, ext_spec(3, 4, 0, true, 0, 0, 1, true)}};
  for (const Case& c : cases) {
    INFO(to_string(c.format));
    const std::vector<double> w = random_vector<double>(rng, static_cast<std::size_t>(param_count(c.spec)), 1.0);
    const int n = format_tensor_count(c.spec, c.format);
    std::vector<TensorInfo> info(n);
    std::vector<std::vector<double>> data(n);
    std::vector<TensorView> views(n);
    for (int i = 0; i < n; ++i) {
      REQUIRE(format_tensor_info(c.spec, c.format, i, "", &info[i]) == Status::ok);
      data[i].resize(static_cast<std::size_t>(info[i].shape.elements()));
      REQUIRE(export_tensor(c.spec, c.format, i, w.data(), data[i].data()) == Status::ok);
      views[i].name = info[i].name;
      views[i].dtype = DType::f64;
      views[i].shape = info[i].shape;
      views[i].data = data[i].data();
    }
    std::vector<double> back(w.size(), -1.0);
    REQUIRE(import_weights(c.spec, c.format, views.data(), views.size(), "", back.data()) == Status::ok);
    if (c.format == WeightFormat::tensorflow) {  // one folded bias: bW + bR arrives as bW
      for (int l = 0; l < 2; ++l)
        for (int d = 0; d < 2; ++d)
          for (int g = 0; g < 4; ++g)
            for (int u = 0; u < 4; ++u) {
              const std::int64_t bw = canonical_offset(c.spec, l, d, ParamKind::input_bias, g) + u,
                                 br = canonical_offset(c.spec, l, d, ParamKind::recurrent_bias, g) + u;
              CHECK(back[bw] == doctest::Approx(w[bw] + w[br]));
              back[bw] = w[bw];
              back[br] = w[br];
            }
    }
    CHECK(back == w);
  }
  // Element by element: PyTorch weight_hr_l0 [P, H] is W_proj; TF projection/kernel [H, P] its transpose;
  // ONNX P [D, 3H] holds p_i, p_o, p_f.
  const RnnSpec pt = ext_spec(3, 4, 2, false, 0, 0);
  const std::vector<double> w = random_vector<double>(rng, static_cast<std::size_t>(param_count(pt)), 1.0);
  TensorInfo ti;
  REQUIRE(format_tensor_info(pt, WeightFormat::pytorch, 4, "lstm.", &ti) == Status::ok);
  CHECK(std::string(ti.name) == "lstm.weight_hr_l0");
  CHECK(ti.shape.dims[0] == 2);
  CHECK(ti.shape.dims[1] == 4);
  REQUIRE(format_tensor_info(pt, WeightFormat::pytorch, 1, "", &ti) == Status::ok);
  CHECK(ti.shape.dims[1] == 2);  // weight_hh_l0 [4H, P]
  std::vector<double> hr(8), tfp(8);
  REQUIRE(export_tensor(pt, WeightFormat::pytorch, 4, w.data(), hr.data()) == Status::ok);
  const std::int64_t proj = canonical_offset(pt, 0, 0, ParamKind::projection, 0);
  for (int e = 0; e < 8; ++e) CHECK(hr[e] == w[proj + e]);
  REQUIRE(format_tensor_info(pt, WeightFormat::tensorflow, 2, "", &ti) == Status::ok);
  CHECK(std::string(ti.name) == "cell_0/projection/kernel");
  REQUIRE(export_tensor(pt, WeightFormat::tensorflow, 2, w.data(), tfp.data()) == Status::ok);
  for (int h = 0; h < 4; ++h)
    for (int p = 0; p < 2; ++p) CHECK(tfp[h * 2 + p] == w[proj + p * 4 + h]);
  REQUIRE(format_tensor_info(pt, WeightFormat::tensorflow, 0, "", &ti) == Status::ok);
  CHECK(ti.shape.dims[0] == 3 + 2);  // kernel [I + P, 4H]
  const RnnSpec on = ext_spec(3, 4, 0, true, 0, 0);
  const std::vector<double> wo = random_vector<double>(rng, static_cast<std::size_t>(param_count(on)), 1.0);
  std::vector<double> P(12);
  REQUIRE(format_tensor_info(on, WeightFormat::onnx, 3, "", &ti) == Status::ok);
  CHECK(std::string(ti.name) == "P");
  CHECK(ti.optional);
  REQUIRE(export_tensor(on, WeightFormat::onnx, 3, wo.data(), P.data()) == Status::ok);
  for (int u = 0; u < 4; ++u) {
    CHECK(P[u] == wo[canonical_offset(on, 0, 0, ParamKind::peephole, 0) + u]);
    CHECK(P[4 + u] == wo[canonical_offset(on, 0, 0, ParamKind::peephole, 3) + u]);
    CHECK(P[8 + u] == wo[canonical_offset(on, 0, 0, ParamKind::peephole, 1) + u]);
  }
  CHECK(format_tensor_count(ext_spec(3, 4, 0, true, 0, 0), WeightFormat::pytorch) == 0);
  CHECK(format_tensor_info(ext_spec(3, 4, 0, true, 0, 0), WeightFormat::pytorch, 0, "", &ti) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("the pytorch format has no LSTM peepholes") != std::string::npos);
  CHECK(format_tensor_info(pt, WeightFormat::onnx, 0, "", &ti) == Status::unsupported);
  CHECK(format_tensor_info(pt, WeightFormat::keras, 0, "", &ti) == Status::unsupported);
}

TEST_CASE("lstm extensions: the C API carries the fields") {
  rnncore_spec cs;
  rnncore_spec_init(&cs);
  cs.input_size = 3;
  cs.hidden_size = 4;
  cs.proj_size = 2;
  cs.peepholes = 1;
  cs.cell_clip = 0.5;
  CHECK(rnncore_validate(&cs) == RNNCORE_OK);
  CHECK(rnncore_param_count(&cs) == param_count(ext_spec(3, 4, 2, true, 0.5, 0)));
  CHECK(rnncore_canonical_offset(&cs, 0, 0, RNNCORE_PARAM_PROJECTION, 0) == 4 * 28 + 12);
  CHECK(rnncore_state_shape(&cs, 2).dims[2] == 2);
  cs.proj_clip = -1;
  CHECK(rnncore_validate(&cs) == RNNCORE_ERR_INVALID_SIZE);
}

TEST_CASE("lstm extensions: output dropout and residuals act on the P-wide output") {
  // Layer 1 (I = D·P = 2, H 4, P 2) has a residual (input width 2 = P) inside an output dropout.
  Rng rng(21);
  StackSpec st = to_stack(ext_spec(3, 5, 2, true, 0.6, 0.4, 2));
  st.layers[1].hidden_size = 4;
  st.layers[1].num_wrappers = 2;
  st.layers[1].wrappers[0] = residual_wrapper();
  st.layers[1].wrappers[1] = dropout_wrapper(1.0, 0.5, 0.8);
  st.dropout = 0.3;
  REQUIRE(validate(st) == Status::ok);
  const std::vector<double> w = random_vector<double>(rng, static_cast<std::size_t>(param_count(st)), 0.8);
  const std::vector<double> x = random_vector<double>(rng, 4 * 2 * 3, 1.0);
  PlanOptions opt;
  opt.max_batch = 2;
  opt.max_seq_len = 4;
  ForwardArgs a;
  a.batch = 2;
  a.seq_len = 4;
  a.x = x.data();
  a.seed = 5;
  Outputs<double> plain, dropped;
  REQUIRE(run_forward(st, opt, w, a, &plain) == Status::ok);
  a.run_mode = RunMode::training;
  REQUIRE(run_forward(st, opt, w, a, &dropped) == Status::ok);
  REQUIRE(dropped.y.size() == 4 * 2 * 2);
  int zeros = 0;
  for (double v : dropped.y) {
    CHECK(std::isfinite(v));
    zeros += v == 0.0;
  }
  CHECK(zeros > 0);                         // output dropout (keep 0.5) hit some of the 16 outputs
  CHECK(zeros < 16);
  CHECK(plain.y != dropped.y);
  CHECK(dropped.cy.size() == 2 * 5 + 2 * 4);  // c: [B, 5] then [B, 4]
  CHECK(dropped.hy.size() == 2 * 2 + 2 * 2);  // h: [B, 2] twice
}

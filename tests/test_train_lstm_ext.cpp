// Training of the LSTM extensions (projection, peepholes, cell and projection clips): backward
// against central differences of the f64 reference forward, f32 reference and SIMD plans (every
// instruction set this machine runs) against f64, bit-identical gradients for any thread count,
// and clips that bind in every case that has one.
// Goldens from PyTorch autograd and TF's GradientTape: test_golden.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "test_util.hpp"

using namespace rnncore;
using rnncore_test::AlignedBuffer;
using rnncore_test::Rng;

namespace {

struct Case {
  std::string name;
  StackSpec stack;
  int batch = 3, steps = 4;
  std::vector<std::int32_t> lengths;  // empty: all steps
  std::vector<std::uint8_t> resets;   // [T, B] (or [B, T] batch-major); empty: none
  bool initial_state = false, batch_major = false, training = true;
};

std::size_t out_width(const StackSpec& st) { return static_cast<std::size_t>(stack_output_size(st)); }

// Weights, input, states and the output gradients that define the loss
// Σ y·dy + Σ hy·dhy + Σ cy·dcy (h tensors of state_elements, c of cell_state_elements).
template <class T>
struct Problem {
  std::vector<T> w, x, h0, c0, dy, dhy, dcy;
};

template <class T>
Problem<T> make_problem(const Case& c, std::uint64_t seed) {
  Rng rng(seed);
  Problem<T> p;
  const auto h = static_cast<std::size_t>(state_elements(c.stack, c.batch));
  const auto cs = static_cast<std::size_t>(cell_state_elements(c.stack, c.batch));
  const std::size_t tb = static_cast<std::size_t>(c.steps) * c.batch;
  p.w = rnncore_test::random_vector<T>(rng, static_cast<std::size_t>(param_count(c.stack)), 0.6);
  p.x = rnncore_test::random_vector<T>(rng, tb * c.stack.input_size, 1.0);
  p.h0 = rnncore_test::random_vector<T>(rng, h, 0.8);
  p.c0 = rnncore_test::random_vector<T>(rng, cs, 0.8);
  p.dy = rnncore_test::random_vector<T>(rng, tb * out_width(c.stack), 1.0);
  p.dhy = rnncore_test::random_vector<T>(rng, h, 1.0);
  p.dcy = rnncore_test::random_vector<T>(rng, cs, 1.0);
  return p;
}

template <class T>
ForwardArgs forward_args(const Case& c, const Problem<T>& p) {
  ForwardArgs a;
  a.batch = c.batch;
  a.seq_len = c.steps;
  a.layout = c.batch_major ? Layout::batch_major : Layout::time_major;
  a.x = p.x.data();
  a.seq_lengths = c.lengths.empty() ? nullptr : c.lengths.data();
  a.resets = c.resets.empty() ? nullptr : c.resets.data();
  a.h0 = c.initial_state ? p.h0.data() : nullptr;
  a.c0 = c.initial_state ? p.c0.data() : nullptr;
  a.run_mode = c.training ? RunMode::training : RunMode::inference;
  a.seed = 7;
  a.step = 3;
  return a;
}

template <class T>
struct Grads {
  std::vector<T> y, hy, cy, dx, dh0, dc0, dw;
};

template <class T>
Grads<T> train_step(const Case& c, const Problem<T>& p, Backend backend, int threads = 1, ThreadPool* pool = nullptr,
                    Isa isa = Isa::best, DType weight_dtype = DType::f32) {
  StackSpec st = c.stack;
  st.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  PlanOptions opt;
  opt.max_batch = c.batch;
  opt.max_seq_len = c.steps;
  opt.backend = backend;
  opt.training = true;
  opt.threads = threads;
  opt.thread_pool = pool;
  opt.max_isa = isa;
  opt.weight_dtype = weight_dtype;
  Plan plan;
  REQUIRE_MESSAGE(Plan::create(st, opt, &plan) == Status::ok, last_error_detail());
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  REQUIRE(plan.pack_weights(p.w.data(), packed.ptr, packed.size) == Status::ok);
  Grads<T> g;
  g.y.assign(static_cast<std::size_t>(c.steps) * c.batch * out_width(st), T(-7));
  g.hy.assign(p.h0.size(), T(-7));
  g.cy.assign(p.c0.size(), T(-7));
  g.dx.assign(p.x.size(), T(-7));
  g.dh0.assign(p.h0.size(), T(-7));
  g.dc0.assign(p.c0.size(), T(-7));
  g.dw.assign(p.w.size(), T(-7));
  ForwardArgs fa = forward_args(c, p);
  fa.y = g.y.data();
  fa.hy = g.hy.data();
  fa.cy = g.cy.data();
  fa.reserve = reserve.ptr;
  fa.reserve_bytes = reserve.size;
  REQUIRE_MESSAGE(plan.forward(packed.ptr, ws.ptr, ws.size, fa) == Status::ok, last_error_detail());
  BackwardArgs ba;
  ba.forward = fa;
  ba.dy = p.dy.data();
  ba.dhy = p.dhy.data();
  ba.dcy = p.dcy.data();
  ba.dx = g.dx.data();
  ba.dh0 = g.dh0.data();
  ba.dc0 = g.dc0.data();
  ba.dweights = g.dw.data();
  REQUIRE_MESSAGE(plan.backward(packed.ptr, bws.ptr, bws.size, ba) == Status::ok, last_error_detail());
  return g;
}

rnncore_test::Outputs<double> forward64(const Case& c, const Problem<double>& p, const StackSpec& stack) {
  StackSpec st = stack;
  st.dtype = DType::f64;
  PlanOptions opt;
  opt.max_batch = c.batch;
  opt.max_seq_len = c.steps;
  opt.backend = Backend::reference;
  rnncore_test::Outputs<double> out;
  REQUIRE_MESSAGE(rnncore_test::run_forward(st, opt, p.w, forward_args(c, p), &out) == Status::ok, last_error_detail());
  return out;
}

double loss(const Case& c, const Problem<double>& p) {
  const rnncore_test::Outputs<double> out = forward64(c, p, c.stack);
  double s = 0;
  for (std::size_t i = 0; i < out.y.size(); ++i) s += out.y[i] * p.dy[i];  // y is zero past a length
  for (std::size_t i = 0; i < out.hy.size(); ++i) s += out.hy[i] * p.dhy[i];
  for (std::size_t i = 0; i < out.cy.size(); ++i) s += out.cy[i] * p.dcy[i];
  return s;
}

// Largest |central difference − analytic| over the largest |central difference|.
double fd_error(const Case& c, Problem<double> p, std::vector<double> Problem<double>::*member,
                const std::vector<double>& analytic) {
  const double eps = 1e-6;
  double num = 0, den = 0;
  std::vector<double>& v = p.*member;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double up = loss(c, p);
    v[i] = keep - eps;
    const double down = loss(c, p);
    v[i] = keep;
    const double fd = (up - down) / (2 * eps);
    num = std::max(num, std::fabs(fd - analytic[i]));
    den = std::max(den, std::fabs(fd));
  }
  return num / std::max(den, 1e-30);
}

LayerSpec lstm(int hidden, int proj, bool peepholes, double cell_clip = 0, double proj_clip = 0, bool bi = false) {
  LayerSpec l;
  l.mode = Mode::lstm;
  l.hidden_size = hidden;
  l.proj_size = proj;
  l.peepholes = peepholes;
  l.cell_clip = cell_clip;
  l.proj_clip = proj_clip;
  l.direction = bi ? Direction::bidirectional : Direction::unidirectional;
  return l;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  Case peep;
  peep.name = "peepholes_l1_len_h0";
  peep.stack.num_layers = 1;
  peep.stack.input_size = 3;
  peep.stack.layers[0] = lstm(4, 0, true);
  peep.lengths = {2, 0, 4};
  peep.initial_state = true;
  peep.training = false;
  out.push_back(peep);

  Case proj;
  proj.name = "projection_l2_bi_interlayer_len_h0";
  proj.stack.input_size = 3;
  proj.stack.num_layers = 2;
  proj.stack.layers[0] = lstm(5, 3, false, 0, 0, true);
  proj.stack.layers[1] = lstm(4, 2, false, 0, 0, true);
  proj.stack.dropout = 0.3;
  proj.lengths = {4, 1, 3};
  proj.initial_state = true;
  out.push_back(proj);

  Case all;  // TF LSTMCell with every option; state dropout on h (P units) and c (H units), a residual
  all.name = "all_extensions_wrappers_batch_major";
  all.stack.input_size = 2;
  all.stack.num_layers = 2;
  all.stack.layers[0] = lstm(5, 3, true, 0.3, 0.1);
  all.stack.layers[0].num_wrappers = 1;
  all.stack.layers[0].wrappers[0] = rnncore_test::dropout_wrapper(0.8, 0.9, 0.75, false, false, StateFilter::h_and_c);
  all.stack.layers[1] = lstm(4, 3, true, 0.25, 0.12);
  all.stack.layers[1].num_wrappers = 2;  // Residual(Dropout(cell))
  all.stack.layers[1].wrappers[0] = rnncore_test::dropout_wrapper(0.8, 0.7, 0.8, false, false, StateFilter::h_and_c);
  all.stack.layers[1].wrappers[1] = rnncore_test::residual_wrapper();
  all.batch_major = true;
  all.lengths = {3, 4, 0};
  all.initial_state = true;
  out.push_back(all);

  Case clip;
  clip.name = "cell_clip_only_bi";
  clip.stack.num_layers = 1;
  clip.stack.input_size = 4;
  clip.stack.layers[0] = lstm(3, 0, false, 0.4, 0, true);
  clip.batch = 2;
  clip.steps = 5;
  clip.initial_state = true;
  out.push_back(clip);

  Case resets;  // per-step state resets restore h at the projection's width and c at the cell's
  resets.name = "all_extensions_resets_l2_len_h0";
  resets.stack.input_size = 3;
  resets.stack.num_layers = 2;
  resets.stack.layers[0] = lstm(5, 3, true, 0.3, 0.1);
  resets.stack.layers[1] = lstm(4, 2, false, 0, 0.1);
  resets.steps = 5;
  resets.lengths = {5, 3, 4};
  resets.resets = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1};  // [T, B]; row 0 resets at t = 1, 3
  resets.initial_state = true;
  out.push_back(resets);
  return out;
}

// Whether every clip of the stack binds somewhere in the run: removing any one changes the output.
void check_clips_bind(const Case& c, const Problem<double>& p) {
  const rnncore_test::Outputs<double> with = forward64(c, p, c.stack);
  for (int l = 0; l < c.stack.num_layers; ++l)
    for (double LayerSpec::*clip : {&LayerSpec::cell_clip, &LayerSpec::proj_clip}) {
      if (c.stack.layers[l].*clip == 0.0) continue;
      StackSpec st = c.stack;
      st.layers[l].*clip = 0.0;
      CAPTURE(l);
      CHECK(forward64(c, p, st).y != with.y);
    }
}

Problem<float> narrow(const Problem<double>& p) {
  auto n = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  Problem<float> q;
  q.w = n(p.w), q.x = n(p.x), q.h0 = n(p.h0), q.c0 = n(p.c0), q.dy = n(p.dy), q.dhy = n(p.dhy), q.dcy = n(p.dcy);
  return q;
}

Problem<double> widen(const Problem<float>& p) {
  auto w = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  Problem<double> q;
  q.w = w(p.w), q.x = w(p.x), q.h0 = w(p.h0), q.c0 = w(p.c0), q.dy = w(p.dy), q.dhy = w(p.dhy), q.dcy = w(p.dcy);
  return q;
}

// The same case on two threads gives the same bits as `one` (one thread's run).
void check_same_on_two_threads(const Grads<float>& one, const Case& c, const Problem<float>& p, Backend backend) {
#ifndef RNNCORE_NO_THREADS
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
  const Grads<float> two = train_step(c, p, backend, 2, pool);
  ThreadPool::destroy(pool);
  CHECK(one.y == two.y);
  CHECK(one.dw == two.dw);
  CHECK(one.dx == two.dx);
  CHECK(one.dh0 == two.dh0);
  CHECK(one.dc0 == two.dc0);
#else
  (void)one, (void)c, (void)p, (void)backend;
#endif
}

}  // namespace

TEST_CASE("LSTM extensions: backward equals central differences of the f64 reference forward") {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    const Problem<double> p = make_problem<double>(c, 11);
    check_clips_bind(c, p);
    const Grads<double> g = train_step(c, p, Backend::reference);
    const rnncore_test::Outputs<double> out = forward64(c, p, c.stack);  // the training forward's, bit for bit
    CHECK(out.y == g.y);
    CHECK(out.hy == g.hy);
    CHECK(out.cy == g.cy);
    CHECK(fd_error(c, p, &Problem<double>::w, g.dw) < 1e-6);
    CHECK(fd_error(c, p, &Problem<double>::x, g.dx) < 1e-6);
    if (c.initial_state) {
      CHECK(fd_error(c, p, &Problem<double>::h0, g.dh0) < 1e-6);
      CHECK(fd_error(c, p, &Problem<double>::c0, g.dc0) < 1e-6);
    }
  }
}

TEST_CASE("LSTM extensions: f32 reference and SIMD training (every instruction set here) agree with f64 within 1e-4") {
  std::vector<std::pair<Backend, Isa>> runs = {{Backend::reference, Isa::best}};
  for (Isa isa : rnncore_test::isas_here()) runs.emplace_back(Backend::simd, isa);
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    const Problem<float> p32 = narrow(make_problem<double>(c, 5));
    const Grads<double> want = train_step(c, widen(p32), Backend::reference);
    for (const auto& run : runs) {
      CAPTURE(to_string(run.first));
      CAPTURE(to_string(run.second));
      const Grads<float> got = train_step(c, p32, run.first, 1, nullptr, run.second);
      CHECK(rnncore_test::rel_error(got.y.data(), want.y.data(), want.y.size()) < 1e-5);
      CHECK(rnncore_test::rel_error(got.hy.data(), want.hy.data(), want.hy.size()) < 1e-5);
      CHECK(rnncore_test::rel_error(got.cy.data(), want.cy.data(), want.cy.size()) < 1e-5);
      CHECK(rnncore_test::rel_error(got.dw.data(), want.dw.data(), want.dw.size()) < 1e-4);
      CHECK(rnncore_test::rel_error(got.dx.data(), want.dx.data(), want.dx.size()) < 1e-4);
      CHECK(rnncore_test::rel_error(got.dh0.data(), want.dh0.data(), want.dh0.size()) < 1e-4);
      CHECK(rnncore_test::rel_error(got.dc0.data(), want.dc0.data(), want.dc0.size()) < 1e-4);
    }
  }
}

TEST_CASE("LSTM extensions: f16 and bf16 weight storage on the SIMD backend against f64 on the stored weights") {
  // The recurrent products through the stored panels with K = P, a projection and peepholes. f16
  // (and bf16 converted, AVX2): f32's on the stored weights. bf16 by vdpbf16ps rounds h and dpre to
  // bf16 in those products (trains_from_stored_panels): 2^-6 as in test_train.cpp (measured 2.2e-3).
  for (const DType wd : {DType::f16, DType::bf16}) {
    CAPTURE(to_string(wd));
    for (const Case& c : cases()) {
      CAPTURE(c.name);
      PlanOptions opt;
      opt.backend = Backend::simd;
      opt.training = true;
      opt.weight_dtype = wd;
      Plan plan;
      const Status made = Plan::create(c.stack, opt, &plan);
      if (made != Status::ok) {  // no AVX2 (or no SIMD kernels): refused with one line
        CHECK((made == Status::unsupported || made == Status::backend_unavailable));
        CHECK((made != Status::unsupported || std::string(last_error_detail()).find("weight_dtype") != std::string::npos));
        continue;
      }
      const Problem<float> p32 = narrow(make_problem<double>(c, 5));
      Problem<double> stored = widen(p32);
      stored.w = rnncore_test::stored_weights(c.stack, p32.w, wd);
      const Grads<double> want = train_step(c, stored, Backend::reference);
      const Grads<float> got = train_step(c, p32, Backend::simd, 1, nullptr, Isa::best, wd);
      const double tol = wd == DType::bf16 && rnncore_test::bf16_native(c.stack) ? 0x1p-6 : 1e-5;
      CHECK(rnncore_test::rel_error(got.y.data(), want.y.data(), want.y.size()) < tol);
      CHECK(rnncore_test::rel_error(got.dw.data(), want.dw.data(), want.dw.size()) < tol);
      CHECK(rnncore_test::rel_error(got.dx.data(), want.dx.data(), want.dx.size()) < tol);
      CHECK(rnncore_test::rel_error(got.dh0.data(), want.dh0.data(), want.dh0.size()) < tol);
      CHECK(rnncore_test::rel_error(got.dc0.data(), want.dc0.data(), want.dc0.size()) < tol);
    }
  }
}

TEST_CASE("LSTM extensions: gradients are bit-identical run to run and for any thread count") {
  Case c;  // big enough that the products split over threads (≥ 16 rows a thread)
  c.name = "threads";
  c.stack.input_size = 20;
  c.stack.num_layers = 2;
  c.stack.layers[0] = lstm(24, 10, true, 1.0, 0.5, true);
  c.stack.layers[1] = lstm(16, 0, true, 0.8);
  c.stack.dropout = 0.3;
  c.batch = 40;
  c.steps = 5;
  c.lengths.assign(40, 5);
  c.lengths[3] = 0;
  c.lengths[7] = 2;
  c.initial_state = true;
  const Problem<float> p = narrow(make_problem<double>(c, 3));
  const Backend backend = rnncore_test::cpu_backends().back();
  const Grads<float> one = train_step(c, p, backend);
  const Grads<float> again = train_step(c, p, backend);
  CHECK(one.dw == again.dw);
  CHECK(one.dx == again.dx);
  check_same_on_two_threads(one, c, p, backend);
}

TEST_CASE("LSTM extensions: a small batch on two threads shares its products by columns, same bits") {
  // 3 rows: the steps run on the calling thread and the per-step products (R: 4·512 × 256, W_proj:
  // 256 × 512, both ≥ 128 Ki floats) split their columns over the threads, forward and backward.
  Case c;
  c.name = "small_batch_threads";
  c.stack.input_size = 8;
  c.stack.num_layers = 1;
  c.stack.layers[0] = lstm(512, 256, true, 1.0, 0.5, true);
  c.batch = 3;
  c.steps = 3;
  c.lengths = {3, 1, 3};
  c.initial_state = true;
  const Problem<float> p = narrow(make_problem<double>(c, 7));
  const Backend backend = rnncore_test::cpu_backends().back();
  const Grads<float> one = train_step(c, p, backend);
  check_same_on_two_threads(one, c, p, backend);
}

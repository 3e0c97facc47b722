// Cases shared by the GPU tests (the emulator's and the device's): CudnnLSTM-style random
// shapes, stacks with every kind of wrapper, and the comparison with the f64 reference backend.
#ifndef RNNCORE_TESTS_GPU_GPU_CASES_HPP
#define RNNCORE_TESTS_GPU_GPU_CASES_HPP

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "src/shared/half.hpp"
#include "tests/test_util.hpp"

namespace rnncore_test {

using namespace rnncore;

/// One comparison: a stack and a run.
struct Case {
  StackSpec stack;
  int T = 1, B = 1;
  bool lengths = false, initial = false, batch_major = false, row_ids = false;
  bool resets = false;  ///< ForwardArgs::resets drawn at random (unidirectional stacks only)
  RunMode run_mode = RunMode::inference;
  std::uint64_t seed = 0, step = 0;
  DType weights = DType::f32;  ///< GPU weight storage; the weights are drawn representable in it
  std::uint32_t time_offset = 0;
  bool half_math = false;    ///< PlanOptions::gpu_half_math for the GPU run
  double tolerance = 1e-5;   ///< relative error allowed against the f64 reference
};

inline std::string describe(const Case& c) {
  std::string s;
  for (int l = 0; l < c.stack.num_layers; ++l) {
    const LayerSpec& ls = c.stack.layers[l];
    s += std::string(l ? " | " : "") + to_string(ls.mode) + (ls.mode == Mode::gru ? std::string("/") + to_string(ls.gru_variant) : "") +
         " H=" + std::to_string(ls.hidden_size) + (ls.proj_size > 0 ? " P=" + std::to_string(ls.proj_size) : "") +
         (ls.direction == Direction::bidirectional ? " bi" : "") +
         " wrappers=" + std::to_string(ls.num_wrappers);
  }
  return s + " I=" + std::to_string(c.stack.input_size) + " T=" + std::to_string(c.T) + " B=" + std::to_string(c.B) +
         " len=" + std::to_string(c.lengths) + " h0=" + std::to_string(c.initial) + " bm=" + std::to_string(c.batch_major) +
         " skip=" + std::to_string(uses_skip_input(c.stack)) + " train=" + std::to_string(c.run_mode != RunMode::inference) +
         " rows=" + std::to_string(c.row_ids) + " p=" + std::to_string(c.stack.dropout) + " weights=" + to_string(c.weights) + " t0=" + std::to_string(c.time_offset) +
         " resets=" + std::to_string(c.resets) + " vocab=" + std::to_string(c.stack.embedding.vocab_size) +
         " pre_head=" + std::to_string(c.stack.num_pre_head) + " head=" + std::to_string(c.stack.head.out_features) + "/" +
         to_string(c.stack.head.activation) + (c.stack.head.last_step_only ? "/last" : "");
}

/// Per-step resets [T·B] (either layout): about one in three nonzero, of varied values (any nonzero
/// byte is a reset).
inline std::vector<std::uint8_t> draw_resets(Rng& rng, int T, int B) {
  std::vector<std::uint8_t> r(static_cast<std::size_t>(T) * B);
  for (auto& v : r) v = rng.range(0, 2) == 0 ? static_cast<std::uint8_t>(rng.range(1, 255)) : 0;
  return r;
}

/// Runs a stack on the GPU (or its emulation) in f32: plans, packs, runs and returns host outputs.
using GpuRunner = std::function<rnncore::Status(const rnncore::StackSpec&, const rnncore::PlanOptions&, const std::vector<float>&,
                                                const rnncore::ForwardArgs&, Outputs<float>*)>;

inline double g_forward_worst = 0;  ///< the largest relative error compare_case saw (tests report it)

/// Runs a case through `gpu` and the f64 reference with the same f32-rounded data; checks the case's
/// relative error (1e-5 unless half-precision math makes it larger) and, in dropout runs, that
/// exactly the same outputs are zero (the masks agree bit for bit). `what` describes the GPU configuration for failure messages.
inline void compare_case(const Case& c, std::uint64_t data_seed, const GpuRunner& gpu, const std::string& what) {
  Rng rng(data_seed);
  StackSpec s32 = c.stack, s64 = c.stack;
  s32.dtype = DType::f32;
  s64.dtype = DType::f64;
  const int L = s32.num_layers;
  int H0 = s32.layers[0].hidden_size;
  const std::size_t states = static_cast<std::size_t>(state_elements(s32, c.B));
  auto w32 = random_vector<float>(rng, static_cast<std::size_t>(param_count(s32)), 1.0 / std::sqrt(static_cast<double>(H0)));
  for (float& w : w32) {  // representable in the storage type, so both sides use the same weights
    if (c.weights == DType::f16) w = detail::f16_to_f32(detail::f32_to_f16(w));
    if (c.weights == DType::bf16) w = detail::bf16_to_f32(detail::f32_to_bf16(w));
  }
  const auto x32 = random_vector<float>(rng, static_cast<std::size_t>(c.T) * c.B * s32.input_size, 1.0);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(c.T) * c.B);  // token ids, for a stack with an embedding
  for (auto& id : ids) id = rng.range(0, std::max(1, s32.embedding.vocab_size) - 1);
  const bool tokens = s32.embedding.vocab_size > 0;
  const auto h32 = random_vector<float>(rng, states, 0.5);
  const auto c32 = random_vector<float>(rng, static_cast<std::size_t>(cell_state_elements(s32, c.B)), 0.5);  // H units
  std::vector<std::int32_t> lengths(c.B);
  for (auto& l : lengths) l = rng.range(0, c.T);
  std::vector<std::uint32_t> rows(c.B);
  for (auto& r : rows) r = static_cast<std::uint32_t>(rng.next());
  const std::vector<std::uint8_t> resets = draw_resets(rng, c.T, c.B);
  const std::vector<double> w64(w32.begin(), w32.end()), x64(x32.begin(), x32.end()), h64(h32.begin(), h32.end()),
      c64(c32.begin(), c32.end());
  bool lstm = false;
  for (int l = 0; l < L; ++l) lstm = lstm || s32.layers[l].mode == Mode::lstm;

  ForwardArgs a;
  a.batch = c.B;
  a.seq_len = c.T;
  a.layout = c.batch_major ? Layout::batch_major : Layout::time_major;
  a.seq_lengths = c.lengths ? lengths.data() : nullptr;
  a.row_ids = c.row_ids ? rows.data() : nullptr;
  a.run_mode = c.run_mode;
  a.seed = c.seed;
  a.step = c.step;
  a.time_offset = c.time_offset;
  a.resets = c.resets ? resets.data() : nullptr;
  PlanOptions opt;
  opt.max_batch = c.B + 1;
  opt.max_seq_len = c.T + 1;

  INFO(describe(c) << " | " << what);
  Outputs<double> ref;
  opt.backend = Backend::reference;
  a.x = tokens ? static_cast<const void*>(ids.data()) : x64.data();
  a.h0 = c.initial ? h64.data() : nullptr;
  a.c0 = c.initial && lstm ? c64.data() : nullptr;
  REQUIRE(run_forward(s64, opt, w64, a, &ref) == Status::ok);

  Outputs<float> got;
  opt.weight_dtype = c.weights;
  opt.gpu_half_math = c.half_math;
  a.x = tokens ? static_cast<const void*>(ids.data()) : x32.data();
  a.h0 = c.initial ? h32.data() : nullptr;
  a.c0 = c.initial && lstm ? c32.data() : nullptr;
  const Status st = gpu(s32, opt, w32, a, &got);
  REQUIRE(st == Status::ok);
  const double ey = rel_error(got.y.data(), ref.y.data(), ref.y.size());
  const double eh = rel_error(got.hy.data(), ref.hy.data(), ref.hy.size());
  const double ec = lstm ? rel_error(got.cy.data(), ref.cy.data(), ref.cy.size()) : 0.0;
  g_forward_worst = std::max({g_forward_worst, ey, eh, ec});
  CHECK(ey < c.tolerance);
  CHECK(eh < c.tolerance);
  if (lstm) CHECK(ec < c.tolerance);
  if (c.run_mode != RunMode::inference) {
    // A dropped element is exactly 0 in both; anything else that is 0 on one side only must be
    // tiny on the other (a ReLU at its kink), not a kept value of ordinary size.
    double scale = 0;
    for (double v : ref.y) scale = std::max(scale, std::fabs(v));
    std::size_t mismatched = 0;
    for (std::size_t i = 0; i < ref.y.size(); ++i)
      if ((ref.y[i] == 0.0) != (got.y[i] == 0.0f))
        mismatched += std::max(std::fabs(ref.y[i]), std::fabs(static_cast<double>(got.y[i]))) > c.tolerance * scale;
    CHECK(mismatched == 0);
  }
}

/// Relative error allowed against the f64 reference with PlanOptions::gpu_half_math and weight
/// storage `wt` on a device with matrix units: x rounded to f16 keeps 11 significant bits, to bf16 8
/// (2e-3 and 2e-2: about 4x and 5x the rounding's 2^-11 and 2^-8). f32 weights take TF32 products on
/// NVIDIA, x and W both rounded to 11 significant bits: up to 2 · 2^-11 per product, so 4e-3 keeps
/// f16's margin.
inline double half_math_tolerance(DType wt) { return wt == DType::bf16 ? 2e-2 : wt == DType::f32 ? 4e-3 : 2e-3; }

/// A CudnnLSTM-style random case (as tests/test_simd_vs_reference.cpp draws them).
inline Case random_case(Rng& rng) {
  static const Mode kModes[] = {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  static const int kSizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 24, 33};
  RnnSpec spec;
  spec.mode = kModes[rng.range(0, 3)];
  spec.gru_variant = rng.range(0, 1) ? GruVariant::reset_before : GruVariant::reset_after;
  spec.input_size = kSizes[rng.range(0, 11)];
  spec.hidden_size = kSizes[rng.range(0, 11)];
  spec.num_layers = rng.range(1, 3);
  spec.direction = rng.range(0, 1) ? Direction::bidirectional : Direction::unidirectional;
  spec.input_mode = rng.range(0, 3) == 0 ? InputMode::auto_select : InputMode::linear;
  Case c;
  c.stack = to_stack(spec);
  c.T = rng.range(1, 6);
  c.B = rng.range(1, 7);
  c.lengths = rng.range(0, 1);
  c.initial = rng.range(0, 1);
  c.batch_major = rng.range(0, 1);
  return c;
}

/// A layer of `mode` with the given wrappers.
inline LayerSpec layer(Mode mode, int hidden, bool bidirectional, std::initializer_list<Wrapper> wrappers,
                GruVariant variant = GruVariant::reset_after) {
  LayerSpec ls;
  ls.mode = mode;
  ls.gru_variant = variant;
  ls.hidden_size = hidden;
  ls.direction = bidirectional ? Direction::bidirectional : Direction::unidirectional;
  for (const Wrapper& w : wrappers) ls.wrappers[ls.num_wrappers++] = w;
  return ls;
}

/// A one-layer stack (no wrappers) on `input` features, T steps of B rows.
inline Case one_layer_case(Mode mode, int input, int hidden, bool bidirectional, int T, int B,
                           GruVariant variant = GruVariant::reset_after) {
  Case c;
  c.stack.input_size = input;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(mode, hidden, bidirectional, {}, variant);
  c.T = T;
  c.B = B;
  return c;
}

/// c with weights stored as wt and PlanOptions::gpu_half_math, at wt's half-math tolerance.
inline Case with_half_math(Case c, DType wt) {
  c.weights = wt;
  c.half_math = true;
  c.tolerance = half_math_tolerance(wt);
  return c;
}

inline Wrapper seeded(Wrapper w, std::uint64_t seed) {
  w.dropout.has_seed = true;
  w.dropout.seed = seed;
  return w;
}


/// A stack with the ends of case i: an Embedding before layer 0 (every other case), a Dense head
/// with activation i % 5 (none, relu, sigmoid, tanh, softmax) on every step or the last one (each
/// activation on both in ten cases), and 0 to 2 Dense layers before it; a bidirectional last layer
/// every third case (cases 3 and 6: with a last-step head).
inline Case ends_case(int i, Rng& rng) {
  static const Mode kModes[] = {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  Case c;
  c.stack.input_size = rng.range(2, 9);
  c.stack.embedding.vocab_size = i % 2 == 0 ? rng.range(3, 40) : 0;
  c.stack.num_layers = 1 + i % 2;
  for (int l = 0; l < c.stack.num_layers; ++l)
    c.stack.layers[l] = layer(kModes[(i + l) % 4], rng.range(3, 21), l + 1 == c.stack.num_layers && i % 3 == 0, {},
                              i % 4 < 2 ? GruVariant::reset_after : GruVariant::reset_before);
  c.stack.head.out_features = rng.range(1, 12);
  c.stack.head.activation = static_cast<Activation>(i % 5);
  c.stack.head.last_step_only = (i / 5 + i) % 2 == 1;  // each activation on both in ten cases
  c.stack.num_pre_head = i % 3;
  for (int k = 0; k < c.stack.num_pre_head; ++k) {
    c.stack.pre_head[k].out_features = rng.range(2, 10);
    c.stack.pre_head[k].activation = static_cast<Activation>((i + k + 1) % 5);
  }
  c.T = rng.range(1, 6);
  c.B = rng.range(1, 6);
  c.lengths = i % 3 != 1;
  c.initial = i % 2 == 1;
  c.batch_major = i % 5 >= 3;
  return c;
}

/// A three-layer stack with every wrapper arrangement (variant v in 0..3): layer 0
/// Residual(Dropout(cell)); layer 1 (bidirectional) Dropout(Dropout(cell)) with its own seed and
/// variational masks; layer 2 Dropout(Residual(cell)) (TF's nesting semantics); inter-layer
/// dropout unless v == 3; state filters, lengths, initial states, layouts and row ids vary with v.
inline Case wrapper_case(Mode mode, int v, Rng& rng) {
  static const StateFilter kFilters[] = {StateFilter::default_filter, StateFilter::h_and_c, StateFilter::c_only,
                                         StateFilter::none};
  Case c;
  const int H = 12;
  c.stack.input_size = H;  // residual wrappers need I == H on the first layer
  c.stack.num_layers = 3;
  c.stack.dropout = v == 3 ? 0.0 : 0.3;
  const GruVariant gv = v % 2 ? GruVariant::reset_before : GruVariant::reset_after;
  c.stack.layers[0] = layer(mode, H, false, {dropout_wrapper(0.8, 0.7, 0.6, v == 1, v == 2, kFilters[v]), residual_wrapper()}, gv);
  c.stack.layers[1] = layer(mode, 9, true,
                            {dropout_wrapper(0.9, 0.75, 0.65, true, v % 2 == 0, kFilters[(v + 1) % 4]),
                             seeded(dropout_wrapper(0.7, 0.85, 0.9, v == 0, false, kFilters[(v + 2) % 4]), 0xabcdef12345ull)},
                            gv);
  c.stack.layers[2] = layer(mode, 18, false, {residual_wrapper(), dropout_wrapper(0.6, 0.8, 0.7, false, false, kFilters[v])}, gv);
  c.T = 5;
  c.B = 1 + v * 2;
  c.lengths = v != 0;
  c.initial = v % 2 == 1;
  c.batch_major = v == 2;
  c.row_ids = v >= 2;
  c.run_mode = v == 3 ? RunMode::monte_carlo : RunMode::training;
  c.seed = rng.next();
  c.step = rng.next();
  c.time_offset = v == 1 ? 1000 : 0;  // a later chunk of a streamed sequence
  return c;
}

// ------------------------------------------------------------------------------ training

/// A training run's results.
template <class T>
struct TrainResults {
  std::vector<T> y, hy, cy, dx, dh0, dc0, dw;
};

/// The data of a case, in f32 (representable in the weight storage type) and f64.
struct TrainData {
  std::vector<float> w, x, h0, c0, dy, dhy, dcy;
  std::vector<std::int32_t> lengths;
  std::vector<std::uint32_t> rows;
  std::vector<std::uint8_t> resets;
  std::vector<std::int32_t> ids;  ///< token ids [T·B] in the run's layout (a stack with an embedding)
};

/// The elements of a training run's y: the head's (every step or last step) or the last layer's.
inline std::size_t train_output_size(const Case& c) {
  const StackSpec& st = c.stack;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  if (st.head.out_features > 0)
    return static_cast<std::size_t>(st.head.last_step_only ? c.B : c.T * c.B) * st.head.out_features;
  return static_cast<std::size_t>(c.T) * c.B * num_directions(last) * output_size(last);
}

inline bool has_lstm(const StackSpec& st) {
  for (int l = 0; l < st.num_layers; ++l)
    if (st.layers[l].mode == Mode::lstm) return true;
  return false;
}

inline TrainData draw_training(const Case& c, std::uint64_t seed) {
  Rng rng(seed);
  const StackSpec& st = c.stack;
  const std::size_t states = static_cast<std::size_t>(state_elements(st, c.B));
  const std::size_t cells = static_cast<std::size_t>(cell_state_elements(st, c.B));  // c has H units, h O
  const std::size_t out = train_output_size(c);
  TrainData d;
  d.w = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 1.0 / std::sqrt(double(st.layers[0].hidden_size)));
  for (float& w : d.w) {
    if (c.weights == DType::f16) w = detail::f16_to_f32(detail::f32_to_f16(w));
    if (c.weights == DType::bf16) w = detail::bf16_to_f32(detail::f32_to_bf16(w));
  }
  d.x = random_vector<float>(rng, static_cast<std::size_t>(c.T) * c.B * st.input_size, 1.0);
  d.h0 = random_vector<float>(rng, states, 0.5);
  d.c0 = random_vector<float>(rng, cells, 0.5);
  d.dy = random_vector<float>(rng, out, 1.0);
  d.dhy = random_vector<float>(rng, states, 1.0);
  d.dcy = random_vector<float>(rng, cells, 1.0);
  d.lengths.resize(c.B);
  for (auto& l : d.lengths) l = rng.range(0, c.T);
  d.rows.resize(c.B);
  for (auto& r : d.rows) r = static_cast<std::uint32_t>(rng.next());
  d.resets = draw_resets(rng, c.T, c.B);
  if (st.embedding.vocab_size > 0) {
    d.ids.resize(static_cast<std::size_t>(c.T) * c.B);
    for (auto& id : d.ids) id = rng.range(0, st.embedding.vocab_size - 1);
  }
  return d;
}

/// The run's arguments over `data` (of T), outputs into `r`.
template <class T>
void bind(const Case& c, const std::vector<T>& x, const std::vector<T>& h0, const std::vector<T>& c0, const TrainData& d,
          TrainResults<T>* r, ForwardArgs* a) {
  const StackSpec& st = c.stack;
  const bool lstm = has_lstm(st);
  const std::size_t states = static_cast<std::size_t>(state_elements(st, c.B));
  const std::size_t cells = static_cast<std::size_t>(cell_state_elements(st, c.B));
  r->y.assign(train_output_size(c), T(-7));
  r->hy.assign(states, T(-7));
  r->cy.assign(lstm ? cells : 0, T(-7));
  r->dx.assign(x.size(), T(-7));
  r->dh0.assign(states, T(-7));
  r->dc0.assign(lstm ? cells : 0, T(-7));
  r->dw.assign(d.w.size(), T(-7));
  a->batch = c.B;
  a->seq_len = c.T;
  a->layout = c.batch_major ? Layout::batch_major : Layout::time_major;
  a->seq_lengths = c.lengths ? d.lengths.data() : nullptr;
  a->row_ids = c.row_ids ? d.rows.data() : nullptr;
  a->run_mode = c.run_mode;
  a->seed = c.seed;
  a->step = c.step;
  a->time_offset = c.time_offset;
  a->resets = c.resets ? d.resets.data() : nullptr;
  a->x = st.embedding.vocab_size > 0 ? static_cast<const void*>(d.ids.data()) : x.data();
  a->h0 = c.initial ? h0.data() : nullptr;
  a->c0 = c.initial && lstm ? c0.data() : nullptr;
  a->y = r->y.data();
  a->hy = r->hy.data();
  a->cy = lstm ? r->cy.data() : nullptr;
}

template <class T>
void bind_backward(const Case& c, const std::vector<T>& dy, const std::vector<T>& dhy, const std::vector<T>& dcy,
                   TrainResults<T>* r, BackwardArgs* b) {
  const bool lstm = has_lstm(c.stack);
  b->dy = dy.data();
  b->dhy = dhy.data();
  b->dcy = lstm ? dcy.data() : nullptr;
  b->dx = c.stack.embedding.vocab_size > 0 ? nullptr : r->dx.data();  // token ids: the table's gradient is in dweights
  b->dh0 = r->dh0.data();
  b->dc0 = lstm ? r->dc0.data() : nullptr;
  b->dweights = r->dw.data();
}

/// The f64 reference backend's training forward and backward.
inline TrainResults<double> train_reference(const Case& c, const TrainData& d) {
  StackSpec st = c.stack;
  st.dtype = DType::f64;
  PlanOptions opt;
  opt.max_batch = c.B + 1;
  opt.max_seq_len = c.T + 1;
  opt.backend = Backend::reference;
  opt.training = true;
  Plan plan;
  REQUIRE_MESSAGE(Plan::create(st, opt, &plan) == Status::ok, last_error_detail());
  const auto to64 = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const std::vector<double> w = to64(d.w), x = to64(d.x), h0 = to64(d.h0), c0 = to64(d.c0), dy = to64(d.dy),
                            dhy = to64(d.dhy), dcy = to64(d.dcy);
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
  TrainResults<double> r;
  ForwardArgs a;
  bind(c, x, h0, c0, d, &r, &a);
  a.reserve = reserve.ptr;
  a.reserve_bytes = reserve.size;
  REQUIRE_MESSAGE(plan.forward(packed.ptr, ws.ptr, ws.size, a) == Status::ok, last_error_detail());
  BackwardArgs b;
  b.forward = a;
  bind_backward(c, dy, dhy, dcy, &r, &b);
  REQUIRE_MESSAGE(plan.backward(packed.ptr, bws.ptr, bws.size, b) == Status::ok, last_error_detail());
  return r;
}

inline double g_training_worst = 0;  ///< the largest relative error check_training saw (tests report it)

/// A GPU training run (emulated or on a device): the training forward and backward of a case.
using GpuTrainRunner = std::function<Status(const Case&, const TrainData&, TrainResults<float>*)>;

/// Runs case c both ways and compares everything at the case's tolerance (1e-5 relative error
/// unless half-precision math makes it larger; rel_error: the largest difference over the largest
/// reference magnitude; f32 sums against f64).
inline void check_training(const Case& c, std::uint64_t seed, const GpuTrainRunner& gpu, const std::string& what) {
  INFO(describe(c) << " | " << what);
  const TrainData d = draw_training(c, seed);
  const TrainResults<double> want = train_reference(c, d);
  TrainResults<float> got;
  const Status s = gpu(c, d, &got);
  REQUIRE_MESSAGE(s == Status::ok, last_error_detail());
  const double tol = c.tolerance;
  const auto check = [&](const char* name, const std::vector<float>& g, const std::vector<double>& w) {
    const double e = rel_error(g.data(), w.data(), w.size());
    g_training_worst = std::max(g_training_worst, e);
    CHECK_MESSAGE(e < tol, name);
  };
  check("y", got.y, want.y);
  check("hy", got.hy, want.hy);
  check("cy", got.cy, want.cy);
  check("dx", got.dx, want.dx);
  check("dh0", got.dh0, want.dh0);
  check("dc0", got.dc0, want.dc0);
  check("dweights", got.dw, want.dw);
}

}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GPU_GPU_CASES_HPP

// Training on the GPU without a GPU: the training forward (reserve rows written by the cell
// epilogue) and backward through time (src/gpu/device/backward.hpp, src/gpu/host/backward.hpp) run in the
// emulator and are compared with the f64 reference backend's training forward and backward on the
// same f32-rounded data: every output, the input, initial-state and weight gradients, for every
// cell, both directions, lengths, layouts, wrappers with dropout (masks regenerated in backward),
// residuals and inter-layer dropout. The emulator's race detector watches every buffer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tests/gpu/emu_kernels.hpp"
#include "tests/gpu/gpu_cases.hpp"
#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

/// The emulated device the GPU plan is made for.
struct Device {
  int warp = 32;
  int sm_count = 4;
  int blocks_per_sm = 2;
  gpu::Recurrence recurrence = gpu::Recurrence::auto_select;
  std::uint64_t sched_seed = 1;
  std::map<std::string, int>* launches = nullptr;  ///< if set: the launches per kernel name
  emu::Mutation mutation;                          ///< a synchronisation site left out
  std::map<emu::Site, std::set<std::string>>* census = nullptr;  ///< if set: the sites reached
  std::size_t* reports = nullptr;  ///< if set: the detector's report count (else reports fail the test)
};

/// The GPU backend's training forward and backward in the emulator; buffers start as NaN bytes.
Status train_emulated(const Case& c, const TrainData& d, const Device& dev, TrainResults<float>* r) {
  StackSpec st = c.stack;
  st.dtype = DType::f32;
  PlanOptions opt;
  opt.max_batch = c.B + 1;
  opt.max_seq_len = c.T + 1;
  opt.training = true;
  opt.weight_dtype = c.weights;
  opt.gpu_half_math = c.half_math;
  gpu::DescribedDevice on;
  on.device.mma = c.half_math ? 1 : 0;  // a device with matrix units where the case asks for them
  on.device.mma_tf32 = c.half_math && dev.warp == 32 ? 1 : 0;  // TF32 too at warp 32 (NVIDIA)
  on.device.sm_count = dev.sm_count;
  on.device.warp_size = dev.warp;
  on.device.smem_optin = 48 * 1024;
  std::snprintf(on.device.arch, sizeof on.device.arch, "emu%d", dev.warp);
  on.choices.recurrence = dev.recurrence;
  on.blocks_per_sm = dev.blocks_per_sm;
  Plan plan;
  RNNCORE_RETURN_IF_ERROR(gpu::plan_for_device(st, opt, on, &plan));
  const detail::PlanImpl& p = detail::impl(plan);
  AlignedBuffer packed(p.packed_bytes), ws(p.ws.total), bws(p.train.backward_total), reserve(p.train.reserve_total);
  for (AlignedBuffer* b : {&packed, &ws, &bws, &reserve}) std::memset(b->ptr, 0xff, b->size);
  emu::detector::reset();
  (void)emu::detector::take_reports();
  emu::detector::track(packed.ptr, packed.size, "packed");
  emu::detector::track(ws.ptr, ws.size, "ws");
  emu::detector::track(bws.ptr, bws.size, "backward ws");
  emu::detector::track(reserve.ptr, reserve.size, "reserve");
  emu::Launcher ln(p.gpu.target, dev.blocks_per_sm, dev.sched_seed);
  ln.mutation = dev.mutation;
  ln.census = dev.census;
  RNNCORE_RETURN_IF_ERROR(emu::pack(ln, p, p.gpu, d.w.data(), packed.ptr));
  ForwardArgs a;
  bind(c, d.x, d.h0, d.c0, d, r, &a);
  a.reserve = reserve.ptr;
  a.reserve_bytes = reserve.size;
  RNNCORE_RETURN_IF_ERROR(emu::forward(ln, p, p.gpu, packed.ptr, ws.ptr, a));
  BackwardArgs b;
  b.forward = a;
  bind_backward(c, d.dy, d.dhy, d.dcy, r, &b);
  const Status s = emu::backward(ln, p, p.gpu, packed.ptr, bws.ptr, b);
  if (dev.reports != nullptr) *dev.reports = emu::detector::report_count();
  for (const std::string& rep : emu::detector::take_reports())
    if (dev.reports == nullptr) FAIL_CHECK(rep);
  emu::detector::reset();
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
  if (dev.launches != nullptr) *dev.launches = ln.launches;
  return s;
}

/// check_training with the emulator.
void check_emulated(const Case& c, std::uint64_t seed, const Device& dev = Device()) {
  check_training(c, seed, [&](const Case& cc, const TrainData& d, TrainResults<float>* r) { return train_emulated(cc, d, dev, r); },
                 "warp=" + std::to_string(dev.warp) + " recurrence=" + std::to_string(static_cast<int>(dev.recurrence)));
}

}  // namespace

TEST_CASE("emulated GPU training: every cell, both directions, lengths and layouts against the reference") {
  g_training_worst = 0;
  Rng rng(2026112401);
  for (int i = 0; i < 24; ++i) {
    Case c = random_case(rng);
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = i % 3 == 0 ? gpu::Recurrence::persistent : gpu::Recurrence::auto_select;
    dev.sched_seed = rng.next();
    check_emulated(c, rng.next(), dev);
  }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("emulated GPU training: dropout wrappers, residuals, state filters and inter-layer dropout" * doctest::test_suite("long")) {
  g_training_worst = 0;
  Rng rng(2026112402);
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    for (int v = 0; v < 4; ++v) {
      Case c = wrapper_case(mode, v, rng);
      if (c.run_mode == RunMode::monte_carlo) c.run_mode = RunMode::training;  // (the same masks; training is the point)
      check_emulated(c, rng.next());
    }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("emulated GPU training with f16 and bf16 weight storage") {
  g_training_worst = 0;
  Rng rng(2026112403);
  for (DType wt : {DType::f16, DType::bf16})
    for (int i = 0; i < 4; ++i) {
      Case c = random_case(rng);
      c.weights = wt;
      check_emulated(c, rng.next());
    }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("emulated GPU training with gpu_half_math at batch >= 8: the forward's recurrence on the matrix units") {
  // The training forward's per-step recurrence on the matrix units writes the reserve rows through
  // the shared epilogue; backward (f32) reads them. Against the f64 reference at the forward's
  // half-math tolerances, every output and gradient.
  double worst[3] = {0, 0, 0};  // f16, bf16, f32 (TF32)
  Rng rng(2026112405);
  const struct {
    Mode mode;
    GruVariant variant;
    int hidden, B;
    bool bidirectional;
    DType weights;
  } shapes[] = {{Mode::lstm, GruVariant::reset_after, 20, 9, true, DType::f16},
                {Mode::gru, GruVariant::reset_before, 37, 17, false, DType::bf16},
                {Mode::gru, GruVariant::reset_after, 20, 8, true, DType::bf16},
                {Mode::rnn_tanh, GruVariant::reset_after, 37, 9, false, DType::f16},
                {Mode::lstm, GruVariant::reset_after, 20, 9, true, DType::f32}};  // TF32: warp 32
  int i = 0;
  for (const auto& sh : shapes) {
    Case c;
    c.stack.input_size = 11;
    c.stack.num_layers = 1;
    c.stack.layers[0] = layer(sh.mode, sh.hidden, sh.bidirectional, {}, sh.variant);
    c.T = 3;
    c.B = sh.B;
    c.lengths = i % 2 == 0;
    c.initial = true;
    c.weights = sh.weights;
    c.half_math = true;
    c.tolerance = half_math_tolerance(c.weights);
    std::map<std::string, int> launches;
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = gpu::Recurrence::tiled;
    dev.launches = &launches;
    g_training_worst = 0;
    check_emulated(c, rng.next(), dev);
    const int w = c.weights == DType::bf16 ? 1 : c.weights == DType::f32 ? 2 : 0;
    worst[w] = std::max(worst[w], g_training_worst);
    const int per_step = sh.mode == Mode::gru && sh.variant == GruVariant::reset_before ? 2 : 1;
    int mma_steps = 0;  // launches of the matrix-unit step kernel
    for (const auto& kv : launches)
      if (kv.first.find("_mma_16x16") != std::string::npos) mma_steps += kv.second;
    CHECK(mma_steps == c.T * per_step);
    ++i;
  }
  MESSAGE("largest relative error: f16 " << worst[0] << " (tolerance " << half_math_tolerance(DType::f16) << "), bf16 "
                                         << worst[1] << " (tolerance " << half_math_tolerance(DType::bf16) << "), TF32 "
                                         << worst[2] << " (tolerance " << half_math_tolerance(DType::f32) << ")");
}

TEST_CASE("emulated GPU training: shapes large enough for the tiled products (edges in every dimension)" * doctest::test_suite("long")) {
  Rng rng(2026112404);
  g_training_worst = 0;
  const struct {
    Mode mode;
    GruVariant variant;
    int input, hidden, T, B;
    bool bidirectional;
  } shapes[] = {{Mode::lstm, GruVariant::reset_after, 36, 40, 7, 9, true},
                {Mode::gru, GruVariant::reset_before, 70, 33, 3, 33, false},
                {Mode::gru, GruVariant::reset_after, 17, 65, 4, 40, true},
                {Mode::rnn_relu, GruVariant::reset_after, 66, 67, 5, 35, false}};
  for (const auto& sh : shapes) {
    Case c;
    c.stack.input_size = sh.input;
    c.stack.num_layers = 2;
    c.stack.layers[0] = layer(sh.mode, sh.hidden, sh.bidirectional, {}, sh.variant);
    c.stack.layers[1] = layer(sh.mode, sh.hidden - 1, false, {}, sh.variant);
    c.T = sh.T;
    c.B = sh.B;
    c.lengths = true;
    c.initial = true;
    std::map<std::string, int> launches;
    Device dev;
    dev.launches = &launches;
    check_emulated(c, rng.next(), dev);
    CHECK(launches["f32_rnn_grad_gemm_tiled"] > 0);
    if (sh.B >= 32) CHECK(launches["f32_rnn_grad_gemm_tiled"] > 2 * sh.T);  // the steps' products too
  }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("GPU gradients are the same bits for any grid size and block order (no atomics)" * doctest::test_suite("long")) {
  Rng rng(2026112405);
  for (Mode mode : {Mode::lstm, Mode::gru}) {
    Case c = wrapper_case(mode, 2, rng);
    const TrainData d = draw_training(c, rng.next());
    TrainResults<float> first, other;
    Device a, b;
    a.sm_count = 1;
    a.sched_seed = 3;
    b.sm_count = 13;
    b.blocks_per_sm = 3;
    b.sched_seed = 977;
    REQUIRE(train_emulated(c, d, a, &first) == Status::ok);
    REQUIRE(train_emulated(c, d, b, &other) == Status::ok);
    const auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
      return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), sizeof(float) * x.size()) == 0);
    };
    CHECK(same(first.dw, other.dw));
    CHECK(same(first.dx, other.dx));
    CHECK(same(first.dh0, other.dh0));
    CHECK(same(first.dc0, other.dc0));
  }
}

TEST_CASE("mutants: leaving out any barrier of the backward kernels is caught") {
  // Every synchronisation site of src/gpu/device/backward.hpp that a training run reaches is left out in
  // turn; the mutant is caught when the detector reports a race or a gradient's bits change.
  if (!emu::detector::available()) {
    MESSAGE("no access instrumentation in this build (AddressSanitizer): mutants not run");
    return;
  }
  Case c;
  c.stack.input_size = 36;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(Mode::lstm, 40, true, {});
  c.T = 7;
  c.B = 33;
  c.lengths = true;
  const TrainData d = draw_training(c, 99);
  std::map<emu::Site, std::set<std::string>> census;
  Device dev;
  std::size_t found = 0;
  dev.census = &census;
  dev.reports = &found;
  TrainResults<float> base;
  REQUIRE(train_emulated(c, d, dev, &base) == Status::ok);
  CHECK(found == 0);
  dev.census = nullptr;
  int sites = 0;
  for (const auto& site : census) {
    if (site.first.file != "backward.hpp") continue;  // the emulator records base names: src/gpu/device/'s
    ++sites;
    dev.mutation.kind = site.first.kind;
    dev.mutation.line = site.first.line;
    dev.mutation.file = "backward.hpp";
    TrainResults<float> got;
    found = 0;
    REQUIRE(train_emulated(c, d, dev, &got) == Status::ok);
    const bool changed = std::memcmp(got.dw.data(), base.dw.data(), sizeof(float) * base.dw.size()) != 0 ||
                         std::memcmp(got.dx.data(), base.dx.data(), sizeof(float) * base.dx.size()) != 0;
    const std::string how = found > 0 ? "caught by the detector" : changed ? "caught by the results" : "SURVIVED";
    MESSAGE(std::string(emu::site_kind_name(site.first.kind)) << " at src/gpu/device/backward.hpp:" << site.first.line << ": " << how);
    CHECK((found > 0 || changed));
  }
  CHECK(sites >= 2);  // the tiled product's two barriers
}

TEST_CASE("a GPU backward refuses a reserve of another run") {
  Rng rng(7);
  const Case c = wrapper_case(Mode::lstm, 1, rng);  // with dropout: the reserve records the seed
  const TrainData d = draw_training(c, 1);
  PlanOptions opt;
  opt.max_batch = c.B + 1;
  opt.max_seq_len = c.T + 1;
  opt.training = true;
  gpu::DescribedDevice on;
  on.device.sm_count = 4;
  on.device.warp_size = 32;
  on.device.smem_optin = 48 * 1024;
  on.blocks_per_sm = 2;
  Plan plan;
  REQUIRE(gpu::plan_for_device(c.stack, opt, on, &plan) == Status::ok);
  const detail::PlanImpl& p = detail::impl(plan);
  AlignedBuffer packed(p.packed_bytes), ws(p.ws.total), bws(p.train.backward_total), reserve(p.train.reserve_total);
  std::memset(reserve.ptr, 0, reserve.size);
  emu::Launcher ln(p.gpu.target, 2, 1);
  REQUIRE(emu::pack(ln, p, p.gpu, d.w.data(), packed.ptr) == Status::ok);
  TrainResults<float> r;
  ForwardArgs a;
  bind(c, d.x, d.h0, d.c0, d, &r, &a);
  a.reserve = reserve.ptr;
  a.reserve_bytes = reserve.size;
  BackwardArgs b;
  b.forward = a;
  bind_backward(c, d.dy, d.dhy, d.dcy, &r, &b);
  CHECK(emu::backward(ln, p, p.gpu, packed.ptr, bws.ptr, b) == Status::weights_not_packed);  // never filled
  REQUIRE(emu::forward(ln, p, p.gpu, packed.ptr, ws.ptr, a) == Status::ok);
  CHECK(emu::backward(ln, p, p.gpu, packed.ptr, bws.ptr, b) == Status::ok);
  b.forward.seed = a.seed + 1;
  CHECK(emu::backward(ln, p, p.gpu, packed.ptr, bws.ptr, b) == Status::invalid_size);
  b.forward = a;
  b.forward.seq_lengths = nullptr;
  CHECK(emu::backward(ln, p, p.gpu, packed.ptr, bws.ptr, b) == Status::bad_length);
}

// Training on the GPU without a GPU: the training forward (reserve rows written by the cell
// epilogue) and backward through time (hip/rnn_backward.hpp, src/gpu/backward.hpp) run in the
// emulator and are compared with the f64 reference backend's training forward and backward on the
// same f32-rounded data: every output, the input, initial-state and weight gradients, for every
// cell, both directions, lengths, layouts, wrappers with dropout (masks regenerated in backward),
// residuals and inter-layer dropout. The emulator's race detector watches every buffer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
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
  gpu::DescribedDevice on;
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
  for (const std::string& rep : emu::detector::take_reports()) FAIL_CHECK(rep);
  emu::detector::reset();
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
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

TEST_CASE("emulated GPU training: dropout wrappers, residuals, state filters and inter-layer dropout") {
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

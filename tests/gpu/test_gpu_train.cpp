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

#if RNNCORE_GPU_GOLDEN
#include "rnncore/io/safetensors.hpp"
#include "rnncore/io/stack_config.hpp"
#include "tests/golden_files.hpp"
#endif
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
  gpu::TileChoice tile = gpu::TileChoice::auto_select;
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
  on.choices.tile = dev.tile;
  // The persistent kernels run blocks of two warps here: the planner's 256 threads made every grid
  // barrier of a cooperative launch a switch of 8 blocks x 256 fibers, the emulator's costliest
  // cases. Two warps still split each block's units over warps; the forward's tests in
  // test_gpu_emulator.cpp run the planner's block sizes.
  on.choices.persist_threads = 2 * dev.warp;
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


// Checks c at batch 9 with weights wt and gpu_half_math through the tiled recurrence (bf16 at warp
// 64, TF32 at warp 32); returns how many matrix-unit step kernels (_mma_16x16) it launched.
int check_on_matrix_units(Case c, DType wt, std::uint64_t seed) {
  c.B = 9;
  c.weights = wt;
  c.half_math = true;
  c.tolerance = half_math_tolerance(wt);
  Device dev;
  dev.warp = wt == DType::f32 ? 32 : 64;
  dev.recurrence = gpu::Recurrence::tiled;
  std::map<std::string, int> launches;
  dev.launches = &launches;
  check_emulated(c, seed, dev);
  int mma = 0;
  for (const auto& kv : launches)
    if (kv.first.find("_mma_16x16") != std::string::npos) mma += kv.second;
  return mma;
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
    Case c = with_half_math(one_layer_case(sh.mode, 11, sh.hidden, sh.bidirectional, 3, sh.B, sh.variant), sh.weights);
    c.lengths = i % 2 == 0;
    c.initial = true;
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

TEST_CASE("emulated GPU training with gpu_half_math at batch 8 to 16: the forward on the persistent kernel on the matrix units") {
  // The training forward's persistent recurrence on the matrix units (one launch per layer) writes
  // the reserve rows through the shared epilogue; backward (f32) reads them. Every output and
  // gradient against the f64 reference at the half-math tolerances; f16 and TF32 at warp 32, bf16
  // (the reset-before GRU's two grid barriers per step) at warp 64.
  Rng rng(2026112906);
  const struct {
    Mode mode;
    GruVariant variant;
    int B;
    bool bidirectional;
    DType weights;
    int warp;
  } shapes[] = {{Mode::lstm, GruVariant::reset_after, 9, true, DType::f16, 32},
                {Mode::gru, GruVariant::reset_before, 16, false, DType::bf16, 64},
                {Mode::rnn_relu, GruVariant::reset_after, 8, true, DType::f32, 32}};
  double worst = 0;
  int i = 0;
  for (const auto& sh : shapes) {
    Case c = with_half_math(one_layer_case(sh.mode, 7, i % 2 ? 37 : 20, sh.bidirectional, 3, sh.B, sh.variant), sh.weights);
    c.lengths = i % 2 == 0;
    c.initial = true;
    std::map<std::string, int> launches;
    Device dev;
    dev.warp = sh.warp;
    dev.launches = &launches;
    g_training_worst = 0;
    check_emulated(c, rng.next(), dev);
    worst = std::max(worst, g_training_worst / half_math_tolerance(c.weights));
    int persistent_mma = 0, other = 0;  // launches of the recurrence kernels
    for (const auto& kv : launches) {
      if (kv.first.find("recurrence_persistent_mma") != std::string::npos) persistent_mma += kv.second;
      else if (kv.first.find("_mma_16x16") != std::string::npos || kv.first.find("persistent") != std::string::npos) other += kv.second;
    }
    CHECK(persistent_mma == 1);
    CHECK(other == 0);
    ++i;
  }
  MESSAGE("largest relative error as a share of its tolerance: " << worst);
}

TEST_CASE("emulated GPU training with gpu_half_math under dropout wrappers, residuals and inter-layer dropout") {
  // The training forward on the matrix units (B >= 8) with every dropout site; backward (f32)
  // regenerates the same masks. At the half-math tolerances.
  Rng rng(2026112906);
  int i = 0;
  for (Mode mode : {Mode::lstm, Mode::gru})
    for (DType wt : {DType::f16, DType::f32}) {
      Case c = wrapper_case(mode, i % 3, rng);
      c.run_mode = RunMode::training;
      c.B = 9;
      c.weights = wt;
      c.half_math = true;
      c.tolerance = half_math_tolerance(wt);
      Device dev;
      dev.warp = wt == DType::f32 ? 32 : 64;  // TF32 is NVIDIA's
      dev.recurrence = gpu::Recurrence::tiled;
      std::map<std::string, int> launches;
      dev.launches = &launches;
      check_emulated(c, rng.next(), dev);
      int mma = 0;
      for (const auto& kv : launches)
        if (kv.first.find("_mma_") != std::string::npos) mma += kv.second;
      CHECK(mma > 0);
      ++i;
    }
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

namespace {

/// Leaves out, in turn, every synchronisation site of src/gpu/device/backward.hpp that a training run
/// of c on dev reaches in a kernel whose name contains `kernel` (empty: any); each mutant must be
/// caught by the race detector or change a gradient's bits. A site whose source line contains
/// `exempt` (if given) is reported but need not be caught. Returns how many sites were left out.
/// `launches`, if set, receives the unmutated run's launches per kernel.
int check_backward_mutants(const Case& c, const TrainData& d, Device dev, const std::string& kernel,
                           const char* exempt = nullptr, std::map<std::string, int>* launches = nullptr) {
  std::map<emu::Site, std::set<std::string>> census;
  std::size_t found = 0;
  dev.census = &census;
  dev.reports = &found;
  dev.launches = launches;
  TrainResults<float> base;
  REQUIRE(train_emulated(c, d, dev, &base) == Status::ok);
  CHECK(found == 0);
  dev.census = nullptr;
  dev.launches = nullptr;
  int sites = 0;
  for (const auto& site : census) {
    bool in_kernel = kernel.empty();
    for (const std::string& k : site.second) in_kernel = in_kernel || k.find(kernel) != std::string::npos;
    if (site.first.file != "backward.hpp" || !in_kernel) continue;  // (the emulator records base names)
    ++sites;
    dev.mutation.kind = site.first.kind;
    dev.mutation.line = site.first.line;
    dev.mutation.file = "backward.hpp";
    TrainResults<float> got;
    found = 0;
    REQUIRE(train_emulated(c, d, dev, &got) == Status::ok);
    const bool changed = std::memcmp(got.dw.data(), base.dw.data(), sizeof(float) * base.dw.size()) != 0 ||
                         std::memcmp(got.dx.data(), base.dx.data(), sizeof(float) * base.dx.size()) != 0;
    const std::string text = device_source_line("backward.hpp", site.first.line);
    const bool exempted = exempt != nullptr && text.find(exempt) != std::string::npos;
    const std::string how = found > 0  ? "caught by the detector"
                            : changed  ? "caught by the results"
                            : exempted ? "survives (a known survivor)"
                                       : "SURVIVED";
    MESSAGE(std::string(emu::site_kind_name(site.first.kind)) << " at src/gpu/device/backward.hpp:" << site.first.line << ": " << how
                                                              << " | " << text);
    if (!exempted) CHECK((found > 0 || changed));
  }
  return sites;
}

}  // namespace

TEST_CASE("mutants: leaving out any barrier of the backward kernels is caught") {
  // Every synchronisation site of src/gpu/device/backward.hpp that a training run reaches is left out in
  // turn; the mutant is caught when the detector reports a race or a gradient's bits change.
  if (!emu::detector::available()) {
    MESSAGE("no access instrumentation in this build (AddressSanitizer): mutants not run");
    return;
  }
  // Both product kernels of the per-step products: the tiled one (33 rows), and with
  // RNNCORE_GPU_TILE=direct f32_rnn_grad_gemm_direct (split over k, partial sums in shared memory).
  Case c = one_layer_case(Mode::lstm, 36, 40, true, 7, 33);
  c.lengths = true;
  const TrainData d = draw_training(c, 99);
  int sites = 0;
  for (const gpu::TileChoice tile : {gpu::TileChoice::auto_select, gpu::TileChoice::direct}) {
    Device dev;
    dev.tile = tile;
    // Each block of the direct product runs one row tile (grid.y = row tiles, at most 65535): no
    // next tile reuses the area that barrier guards.
    sites += check_backward_mutants(c, d, dev, "", "the partial-sum area of the next row tile");
  }
  CHECK(sites >= 6);  // the tiled product's two barriers in each run, the direct product's two
}

// ------------------------------------------------------------------------ per-step resets

namespace {

/// A unidirectional stack of `layers` layers of one cell (H 7, 10, 6) for runs with resets.
Case reset_case(Mode mode, GruVariant variant, int layers, int i) {
  Case c;
  c.stack.input_size = 5;
  c.stack.num_layers = layers;
  const int widths[] = {7, 10, 6};
  for (int l = 0; l < layers; ++l) c.stack.layers[l] = layer(mode, widths[l], false, {}, variant);
  c.T = 6;
  c.B = 4;
  c.lengths = i % 2 == 0;
  c.initial = i % 3 != 2;  // resets to given initial states, and (every third case) to zeros
  c.batch_major = i % 4 == 1;
  c.resets = true;
  return c;
}

/// The largest relative error of a GPU training run (emulated on `dev`) against the f64 reference,
/// over every output and gradient.
double training_error(const Case& c, std::uint64_t seed, const Device& dev) {
  const TrainData d = draw_training(c, seed);
  const TrainResults<double> want = train_reference(c, d);
  TrainResults<float> got;
  REQUIRE(train_emulated(c, d, dev, &got) == Status::ok);
  double e = 0;
  const auto worst = [&](const std::vector<float>& g, const std::vector<double>& w) {
    e = std::max(e, rel_error(g.data(), w.data(), w.size()));
  };
  worst(got.y, want.y);
  worst(got.hy, want.hy);
  worst(got.cy, want.cy);
  worst(got.dx, want.dx);
  worst(got.dh0, want.dh0);
  worst(got.dc0, want.dc0);
  worst(got.dw, want.dw);
  return e;
}

}  // namespace

TEST_CASE("emulated GPU training with per-step resets: every cell, stacks, both recurrences, wrappers, matrix units") {
  // design.md §3.5 on the GPU: the cell epilogue carries the initial state on where the next step
  // restarts a row, backward reads the initial state there (grad_previous) and moves the state's
  // gradient into dh0 / dc0 (grad_fold_reset). Against the f64 reference backend's training run,
  // every output and gradient; resets at t = 0, past a row's length and on consecutive steps occur.
  g_training_worst = 0;
  Rng rng(2026112901);
  const Mode modes[] = {Mode::lstm, Mode::gru, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  const GruVariant variants[] = {GruVariant::reset_after, GruVariant::reset_after, GruVariant::reset_before,
                                 GruVariant::reset_after, GruVariant::reset_after};
  int i = 0, persistent_cases = 0;
  for (int m = 0; m < 5; ++m)
    for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
      const Case c = reset_case(modes[m], variants[m], 1 + i % 3, i);
      Device dev;
      dev.warp = i % 2 ? 64 : 32;
      dev.recurrence = r;
      dev.sched_seed = rng.next();
      std::map<std::string, int> launches;
      dev.launches = &launches;
      check_emulated(c, rng.next(), dev);
      int persistent = 0, per_step = 0;
      for (const auto& kv : launches) {
        if (kv.first.find("_recurrence_persistent") != std::string::npos) persistent += kv.second;
        if (kv.first.find("_tiled") != std::string::npos && kv.first.find("gemm") == std::string::npos) per_step += kv.second;
      }
      if (r == gpu::Recurrence::tiled) CHECK(per_step > 0);
      persistent_cases += persistent > 0;
      ++i;
    }
  // (where a persistent grid cannot be co-resident on the emulated device, the per-step kernels run)
  CHECK(persistent_cases >= 3);
  // Dropout wrappers (state dropout before the reset), a residual, inter-layer dropout, row ids.
  for (Mode mode : {Mode::lstm, Mode::gru}) {
    Case c = reset_case(mode, GruVariant::reset_after, 2, i++);
    c.stack.input_size = 7;  // the residual needs I == H
    c.stack.layers[0] = layer(mode, 7, false, {dropout_wrapper(0.8, 0.7, 0.6, false, false, StateFilter::h_and_c), residual_wrapper()});
    c.stack.layers[1] = layer(mode, 10, false, {dropout_wrapper(0.9, 0.8, 0.7, true)});
    c.stack.dropout = 0.3;
    c.run_mode = RunMode::training;
    c.row_ids = true;
    c.seed = rng.next();
    c.step = rng.next();
    check_emulated(c, rng.next());
  }
  // f16 weights; and the training forward's per-step recurrence on the matrix units (B >= 8).
  Case f16 = reset_case(Mode::lstm, GruVariant::reset_after, 2, i++);
  f16.weights = DType::f16;
  check_emulated(f16, rng.next());
  MESSAGE("largest relative error (f32 arithmetic): " << g_training_worst);
  g_training_worst = 0;
  for (DType wt : {DType::bf16, DType::f32}) {  // bf16 at warp 64, TF32 at warp 32
    Case c = reset_case(Mode::gru, GruVariant::reset_before, 1, i++);
    CHECK(check_on_matrix_units(c, wt, rng.next()) == 2 * c.T);
  }
  MESSAGE("largest relative error on the matrix units (bf16, TF32): " << g_training_worst);
}

TEST_CASE("mutants: ignoring the resets at any place a kernel reads them is caught against the reference") {
  // Every ex.reset_flag call site that runs with resets reach (the forward epilogue's, backward's
  // grad_previous and grad_fold_reset) is left out in turn, i.e. reads every reset as 0 there. The
  // mutant must miss the f64 reference by far more than the tolerance on some case; the unmutated
  // runs stay within it.
  std::vector<std::pair<Case, Device>> cases;
  int i = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh})
    for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
      Device dev;
      dev.recurrence = r;
      dev.warp = i % 2 ? 64 : 32;
      cases.emplace_back(reset_case(mode, GruVariant::reset_after, 2, i), dev);
      ++i;
    }
  std::map<emu::Site, std::set<std::string>> census;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    Device dev = cases[k].second;
    dev.census = &census;
    CHECK(training_error(cases[k].first, 700 + k, dev) < 1e-5);
  }
  int sites = 0;
  for (const auto& site : census) {
    if (site.first.kind != emu::kResetFlag) continue;
    ++sites;
    std::string kernels;
    for (const std::string& k : site.second) kernels += (kernels.empty() ? "" : ", ") + k;
    double worst = 0;
    for (std::size_t k = 0; k < cases.size(); ++k) {
      Device dev = cases[k].second;
      dev.mutation.kind = emu::kResetFlag;
      dev.mutation.line = site.first.line;
      dev.mutation.file = site.first.file.c_str();
      worst = std::max(worst, training_error(cases[k].first, 700 + k, dev));
    }
    MESSAGE("reset_flag at " << site.first.file << ":" << site.first.line << " (" << kernels << "): largest relative error "
                             << worst << std::string(worst > 1e-3 ? ", caught" : ", SURVIVED"));
    CHECK(worst > 1e-3);
  }
  CHECK(sites == 3);
}

// ------------------------------------------------------------- LSTM peepholes and the cell clip

namespace {

/// c's layer 0 made unidirectional, in Dropout(h and c) then a residual; inter-layer dropout 0.3; a
/// training run with row ids, its seed and step from rng.
Case with_dropout_residual(Case c, Rng& rng) {
  LayerSpec& l0 = c.stack.layers[0];
  l0.direction = Direction::unidirectional;
  l0.wrappers[l0.num_wrappers++] = dropout_wrapper(0.8, 0.7, 0.6, false, false, StateFilter::h_and_c);
  l0.wrappers[l0.num_wrappers++] = residual_wrapper();
  c.stack.dropout = 0.3;
  c.run_mode = RunMode::training;
  c.row_ids = true;
  c.seed = rng.next();
  c.step = rng.next();
  return c;
}

/// An LSTM stack with TF LSTMCell's extensions, the same shapes in every variant. Without a projection:
/// peepholes (variant 0), a cell clip (1) or both (2); a clip of 0.3 binds on most cell states, so a
/// backward that ignores it misses by far. With one (`projection`): P = 5..7 < H, a projection clip
/// of 0.05 that binds on most projected units (variant 1, 2), and peepholes with a cell clip (2).
Case ext_case(int variant, int layers, int i, bool projection = false) {
  Case c;
  c.stack.input_size = 6;
  c.stack.num_layers = layers;
  for (int l = 0; l < layers; ++l) {
    auto& s = c.stack.layers[l];
    s = layer(Mode::lstm, 9 + 3 * l, (i + l) % 3 == 1, {});
    if (projection) {
      s.proj_size = 5 + (i + l) % 3;
      s.proj_clip = variant != 0 ? 0.05 : 0.0;
    }
    s.peepholes = projection ? variant == 2 : variant != 1;
    s.cell_clip = (projection ? variant == 2 : variant != 0) ? 0.3 : 0.0;
  }
  c.T = 5;
  c.B = 3 + i % 3;
  c.lengths = i % 2 == 0;
  c.initial = i % 3 != 2;
  c.batch_major = i % 4 == 3;
  return c;
}

}  // namespace

TEST_CASE("emulated GPU training with LSTM peepholes and a cell clip: both recurrences, stacks, wrappers, matrix units") {
  // TF LSTMCell's peepholes and cell clip in a training plan: the cell epilogue keeps the CPU's wider
  // reserve row (c before the clip too), backward's cell is lstm_ext_unit_backward (the CPU's) and
  // the peepholes' gradients are f32_rnn_grad_peepholes' sums. Against the f64 reference backend's
  // training run, every output and gradient (the peepholes' among the weights').
  g_training_worst = 0;
  Rng rng(2026112911);
  int i = 0;
  for (int variant = 0; variant < 3; ++variant)
    for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
      const Case c = ext_case(variant, 1 + i % 2, i);
      Device dev;
      dev.warp = i % 2 ? 64 : 32;
      dev.recurrence = r;
      dev.sched_seed = rng.next();
      check_emulated(c, rng.next(), dev);
      ++i;
    }
  // State dropout on h and c (the c masks reach the peepholes' c_{t−1}), a residual, inter-layer
  // dropout and row ids; then per-step resets; then f16 weight storage.
  Case w = ext_case(2, 2, i++);
  w.stack.input_size = 9;  // the residual needs I == H
  w = with_dropout_residual(w, rng);  // (its draws before the data's seed, as before)
  check_emulated(w, rng.next());
  Case rs = ext_case(2, 2, 0);
  for (int l = 0; l < rs.stack.num_layers; ++l) rs.stack.layers[l].direction = Direction::unidirectional;
  rs.resets = true;
  check_emulated(rs, rng.next());
  Case f16 = ext_case(0, 1, i++);
  f16.weights = DType::f16;
  check_emulated(f16, rng.next());
  MESSAGE("largest relative error (f32 arithmetic): " << g_training_worst);
  g_training_worst = 0;
  for (DType wt : {DType::bf16, DType::f32}) {  // the forward's step on the matrix units: bf16 at warp 64, TF32 at 32
    Case c = ext_case(2, 1, 0);
    CHECK(check_on_matrix_units(c, wt, rng.next()) == c.T);
  }
  MESSAGE("largest relative error on the matrix units (bf16, TF32): " << g_training_worst);
}

TEST_CASE("emulated GPU training with LSTM peepholes and a cell clip at larger shapes (tiled products, many rows)" *
          doctest::test_suite("long")) {
  // The peepholes' gradients sum over T·B = 231 rows per unit, the products run tiled, the layer
  // widths leave partial unit groups (H = 41, 38); and two emulated devices (1 SM; 13 SMs × 3
  // blocks, other block orders) running the same forward kernels give the same gradient bits.
  g_training_worst = 0;
  Case c = ext_case(2, 2, 1);
  c.stack.input_size = 36;
  c.stack.layers[0].hidden_size = 41;
  c.stack.layers[1].hidden_size = 38;
  c.T = 7;
  c.B = 33;
  std::map<std::string, int> launches;
  Device dev;
  dev.launches = &launches;
  check_emulated(c, 4242, dev);
  CHECK(launches["f32_rnn_grad_gemm_tiled"] > 0);
  CHECK(launches["f32_rnn_grad_peepholes"] == 3);  // one per (layer, direction): layer 0 is bidirectional
  MESSAGE("largest relative error: " << g_training_worst);
  const TrainData d = draw_training(c, 4243);
  TrainResults<float> first, other;
  Device one, many;
  one.sm_count = 1;
  one.sched_seed = 3;
  many.sm_count = 13;
  many.blocks_per_sm = 3;
  many.sched_seed = 977;
  one.recurrence = many.recurrence = gpu::Recurrence::tiled;  // the same forward kernels, so the same reserve
  one.tile = many.tile = gpu::TileChoice::small;
  REQUIRE(train_emulated(c, d, one, &first) == Status::ok);
  REQUIRE(train_emulated(c, d, many, &other) == Status::ok);
  CHECK(std::memcmp(first.y.data(), other.y.data(), sizeof(float) * first.y.size()) == 0);
  CHECK(std::memcmp(first.dw.data(), other.dw.data(), sizeof(float) * first.dw.size()) == 0);
}

TEST_CASE("mutants: leaving out any term of the LSTM extensions' backward is caught against the reference") {
  // Every ex.term call site of backward.hpp (the peepholes in the cell's gradient, the cell clip's
  // cut, c_{t−1} in the peepholes' gradients) is left out in turn; the mutant must miss the f64
  // reference by far more than the tolerance on some case (the first that does ends the search),
  // the unmutated runs stay within it.
  if (!emu::detector::available()) {  // the sanitizer build: the same kernel source, at a sanitizer's cost
    MESSAGE("no access instrumentation in this build (AddressSanitizer): the terms' mutants run in the release build");
    return;
  }
  std::vector<std::pair<Case, Device>> cases;
  for (int variant = 0; variant < 3; ++variant) {
    Device dev;
    dev.warp = variant % 2 ? 64 : 32;
    dev.recurrence = variant == 1 ? gpu::Recurrence::persistent : gpu::Recurrence::tiled;
    cases.emplace_back(ext_case(variant, 1, variant), dev);
  }
  std::map<emu::Site, std::set<std::string>> census;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    Device dev = cases[k].second;
    dev.census = &census;
    CHECK(training_error(cases[k].first, 800 + k, dev) < 1e-5);
  }
  int sites = 0;
  for (const auto& site : census) {
    if (site.first.kind != emu::kTerm) continue;
    ++sites;
    std::string kernels;
    for (const std::string& k : site.second) kernels += (kernels.empty() ? "" : ", ") + k;
    double worst = 0;
    for (std::size_t k = 0; k < cases.size() && worst <= 1e-3; ++k) {  // until a case catches it
      Device dev = cases[k].second;
      dev.mutation.kind = emu::kTerm;
      dev.mutation.line = site.first.line;
      dev.mutation.file = site.first.file.c_str();
      worst = std::max(worst, training_error(cases[k].first, 800 + k, dev));
    }
    MESSAGE("term at " << site.first.file << ":" << site.first.line << " (" << kernels << "): largest relative error " << worst
                       << std::string(worst > 1e-3 ? ", caught" : ", SURVIVED"));
    CHECK(worst > 1e-3);
  }
  CHECK(sites == 3);
}

// ------------------------------------------------------------------------------- LSTM projection

namespace {

/// ext_case's projected stacks (variant 0: the projection alone; 1: its clip; 2: with peepholes and a cell clip).
Case projection_case(int variant, int layers, int i) { return ext_case(variant, layers, i, /*projection=*/true); }

}  // namespace

TEST_CASE("emulated GPU training with an LSTM projection: stacks, both directions, wrappers, resets, matrix units") {
  // h = clip(W_proj m) in a training plan: the forward's f32_lstm_projection_step keeps h and h̃ in
  // the reserve row; backward per step runs f32_lstm_grad_projection (dh̃ through the clip), the
  // product dm = dh̃ · W_proj, the cell, then R's product over h's P units; after the steps
  // f32_lstm_grad_projection_weights sums dW_proj. Against the f64 reference backend's training
  // run, every output and gradient.
  g_training_worst = 0;
  Rng rng(2026112921);
  int i = 0;
  for (int variant = 0; variant < 3; ++variant) {
    const Case c = projection_case(variant, 1 + i % 2, i);
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = i % 2 ? gpu::Recurrence::persistent : gpu::Recurrence::tiled;  // persistent: planned per step
    dev.sched_seed = rng.next();
    std::map<std::string, int> launches;
    dev.launches = &launches;
    check_emulated(c, rng.next(), dev);
    int dirs = 0;
    for (int l = 0; l < c.stack.num_layers; ++l) dirs += num_directions(c.stack.layers[l]);
    CHECK(launches["f32_lstm_grad_projection"] == dirs * c.T);
    CHECK(launches["f32_lstm_grad_projection_weights"] == dirs);
    ++i;
  }
  // State and output dropout with a residual (I == P), inter-layer dropout, row ids; resets; f16.
  Case w = projection_case(1, 2, i++);
  w.stack.layers[0].proj_size = 6;  // = the input size, for the residual
  w = with_dropout_residual(w, rng);  // (its draws before the data's seed, as before)
  check_emulated(w, rng.next());
  Case rs = projection_case(2, 2, 0);
  for (int l = 0; l < rs.stack.num_layers; ++l) rs.stack.layers[l].direction = Direction::unidirectional;
  rs.resets = true;
  rs.initial = true;
  check_emulated(rs, rng.next());
  Case f16 = projection_case(1, 1, i++);
  f16.weights = DType::f16;
  check_emulated(f16, rng.next());
  MESSAGE("largest relative error (f32 arithmetic): " << g_training_worst);
  g_training_worst = 0;
  Case mu = projection_case(1, 1, 0);
  CHECK(check_on_matrix_units(mu, DType::f32, rng.next()) == mu.T);  // TF32 step at warp 32
  MESSAGE("largest relative error on the matrix units (TF32): " << g_training_worst);
}

TEST_CASE("mutants: leaving out the projection clip's cut in backward is caught against the reference") {
  // The ex.term sites of a projected layer's training run that the peephole cases never reach:
  // the forward's clip (f32_lstm_projection_step) and backward's cut where the clip bound
  // (f32_lstm_grad_projection). Each left out misses the f64 reference.
  const Case c = projection_case(1, 1, 0);
  Device dev;
  std::map<emu::Site, std::set<std::string>> census;
  dev.census = &census;
  CHECK(training_error(c, 990, dev) < 1e-5);
  int sites = 0;
  for (const auto& site : census) {
    if (site.first.kind != emu::kTerm) continue;
    if (!site.second.count("f32_lstm_projection_step") && !site.second.count("f32_lstm_grad_projection")) continue;
    ++sites;
    Device m;
    m.mutation.kind = emu::kTerm;
    m.mutation.line = site.first.line;
    m.mutation.file = site.first.file.c_str();
    const double worst = training_error(c, 990, m);
    MESSAGE("term at " << site.first.file << ":" << site.first.line << ": largest relative error " << worst
                       << std::string(worst > 1e-3 ? ", caught" : ", SURVIVED"));
    CHECK(worst > 1e-3);
  }
  CHECK(sites == 2);
}

#if RNNCORE_GPU_GOLDEN  // builds with file I/O (tests/meson.build)
TEST_CASE("emulated GPU training on the golden resets cases: forward and every gradient against PyTorch") {
  // tests/golden/resets/ (make_grad_golden.py: PyTorch float64, stepped and reset by hand), as
  // tests/test_golden.cpp runs them on the CPU backends at the same f32 tolerance.
  const auto cases = list_cases(golden_dir("resets"));
  REQUIRE(cases.size() >= 7);
  double worst = 0;
  for (const std::string& path : cases) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    Case c;
    std::string err;
    const std::string cfg = meta(f, "config");
    REQUIRE_MESSAGE(io::parse_stack_config(cfg.data(), cfg.size(), "config", &c.stack, &err) == Status::ok, err);
    c.stack.dtype = DType::f32;
    c.B = std::stoi(meta(f, "batch"));
    c.T = std::stoi(meta(f, "seq_len"));
    c.batch_major = meta(f, "batch_first") == "1";
    c.run_mode = meta(f, "run_mode") == "training" ? RunMode::training : RunMode::inference;
    c.seed = std::stoull(meta(f, "seed"));
    c.step = std::stoull(meta(f, "step"));
    c.resets = true;
    const bool lstm = has_lstm(c.stack);
    const std::size_t states = static_cast<std::size_t>(state_elements(c.stack, c.B));
    const auto tensor_or_zeros = [&](const char* name) {
      return f.find(name) != nullptr ? floats<float>(f, name) : std::vector<float>(states, 0.0f);
    };
    TrainData d;
    std::vector<TensorView> views;  // the PyTorch weights ("rnn." prefix), as canonical
    for (const io::TensorEntry& e : f.tensors) {
      if (e.type != io::ElemType::f32 || e.name.compare(0, 4, "rnn.") != 0) continue;
      TensorView v;
      v.name = e.name.c_str();
      v.shape.ndim = static_cast<int>(e.shape.size());
      for (std::size_t i = 0; i < e.shape.size(); ++i) v.shape.dims[i] = e.shape[i];
      v.data = f.data(e);
      views.push_back(v);
    }
    d.w.resize(static_cast<std::size_t>(param_count(c.stack)));
    REQUIRE(import_weights(c.stack, WeightFormat::pytorch, views.data(), views.size(), "rnn.", d.w.data()) == Status::ok);
    d.x = floats<float>(f, "input");
    d.dy = floats<float>(f, "dy");
    c.initial = f.find("h0") != nullptr;
    d.h0 = tensor_or_zeros("h0");
    d.c0 = tensor_or_zeros("c0");
    d.dhy = tensor_or_zeros("dhn");
    d.dcy = tensor_or_zeros("dcn");
    if (f.find("seq_lengths") != nullptr) {
      c.lengths = true;
      io::Array a;
      REQUIRE(f.array("seq_lengths", &a) == RNNCORE_OK);
      REQUIRE(io::to_i32(a, &d.lengths) == RNNCORE_OK);
    }
    std::vector<std::int32_t> r32;
    io::Array ra;
    REQUIRE(f.array("resets", &ra) == RNNCORE_OK);
    REQUIRE(io::to_i32(ra, &r32) == RNNCORE_OK);
    for (std::int32_t v : r32) d.resets.push_back(v != 0 ? 1 : 0);
    TrainResults<float> got;
    REQUIRE_MESSAGE(train_emulated(c, d, Device(), &got) == Status::ok, last_error_detail());
    const auto check = [&](const char* what, const std::vector<float>& g, const std::string& name) {
      const std::vector<double> want = floats<double>(f, name);
      REQUIRE(g.size() >= want.size());
      const double e = rel_error(g.data(), want.data(), want.size());
      worst = std::max(worst, e);
      CHECK_MESSAGE(e <= 1e-4, what << " " << name);
    };
    check("forward", got.y, "expected.y");
    check("forward", got.hy, "expected.hn");
    if (lstm) check("forward", got.cy, "expected.cn");
    check("backward", got.dx, "expected.dx");
    check("backward", got.dh0, "expected.dh0");
    if (lstm) check("backward", got.dc0, "expected.dc0");
    int checked = 0;
    for (int i = 0; i < format_tensor_count(c.stack, WeightFormat::pytorch); ++i) {
      TensorInfo info;
      REQUIRE(format_tensor_info(c.stack, WeightFormat::pytorch, i, "rnn.", &info) == Status::ok);
      if (f.find(std::string("grad.") + info.name) == nullptr) continue;  // bias=False
      std::vector<float> g(static_cast<std::size_t>(info.shape.elements()));
      REQUIRE(export_gradient_tensor(c.stack, WeightFormat::pytorch, i, got.dw.data(), g.data()) == Status::ok);
      check("weights", g, std::string("grad.") + info.name);
      ++checked;
    }
    CHECK(checked > 0);
  }
  MESSAGE("largest relative error against PyTorch: " << worst << " (tolerance 1e-4, as the CPU backends' f32 runs)");
}
#endif

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

TEST_CASE("emulated GPU training with an Embedding and a Dense head: every activation, every step and last step") {
  // The head's dz, the last layer's output gradient, dW and db (src/gpu/device/backward.hpp's ends),
  // those of 0 to 2 Dense layers before the head (each activation among them), and the table's
  // gradient against the f64 reference: each activation on every step and the last step, a
  // bidirectional last layer (cases 0, 3, 6, 9), lengths drawn in 0..T (zero-length rows), both
  // layouts, warp 32 and 64, both recurrence kernels; a head without an embedding and an embedding
  // without a head.
  Rng rng(3801);
  g_training_worst = 0;
  for (int i = 0; i < 10; ++i) {
    Case c = ends_case(i, rng);
    if (i == 9) c.stack.head = DenseSpec();  // the embedding alone: layer 0's input gradient into the table
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = i % 3 == 2 ? gpu::Recurrence::tiled : gpu::Recurrence::auto_select;
    std::map<std::string, int> launches;
    dev.launches = &launches;
    check_emulated(c, 3900 + static_cast<std::uint64_t>(i), dev);
    const bool head = c.stack.head.out_features > 0;
    const int dense = head ? 1 + c.stack.num_pre_head : 0;  // per Dense: its input gradient; and its dz
    CHECK(launches["f32_head_grad_dz"] == dense);
    CHECK(launches["f32_head_grad_rows"] == dense);
    CHECK(launches["f32_embedding_grad"] == (c.stack.embedding.vocab_size > 0 ? 1 : 0));
  }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("emulated GPU training with an Embedding and a Dense head: batch-major ids, T = 0") {
  Rng rng(3811);
  Case c = ends_case(0, rng);
  c.batch_major = true;
  check_emulated(c, 3920);
  c.T = 0;  // a last-step head's rows are zeros; every step: no rows
  c.lengths = false;
  for (bool last : {false, true}) {
    c.stack.head.last_step_only = last;
    check_emulated(c, 3921);
  }
}

TEST_CASE("the embedding's gradient keeps every row of a repeated token (a segmented sum, no atomics)") {
  // Ids [T = 3][B = 2] time-major: (0,0) 2, (0,1) 2, (1,0) 0, (1,1) 2, (2,0) 0 past row 0's length 2.
  const std::int32_t ids[6] = {2, 2, 0, 2, 0, 1};
  const std::int32_t lengths[2] = {2, 3};
  float dx[6 * 2], table[3 * 2];
  for (int i = 0; i < 12; ++i) dx[i] = static_cast<float>(1 << (i % 6)) * (i < 6 ? 1.0f : -0.5f) + 0.25f * static_cast<float>(i);
  for (float& v : table) v = 0.5f;
  gpu::EmbedGradArgs m;
  std::memset(&m, 0, sizeof m);
  m.ids = ids;
  m.id_st = 2;
  m.id_sb = 1;
  m.dx = dx;
  m.dtable = table;
  m.lengths = lengths;
  m.steps = 3;
  m.batch = 2;
  m.vocab = 3;
  m.width = 2;
  for (int warp : {32, 64}) {
    for (float& v : table) v = 0.5f;
    gpu::DeviceDescription target;
    target.warp_size = warp;
    target.sm_count = 2;
    emu::Launcher ln(target, 2, 7);
    gpu::Dims d;
    d.gx = 2;
    d.block = static_cast<std::uint32_t>(warp);
    REQUIRE(ln.launch<gpu::f32_embedding_grad>(d, m, &m, 0) == Status::ok);
    for (int u = 0; u < 2; ++u) {
      // id 2 at m = 0, 1, 3 (three rows: a lost sum keeps one or two of them), id 0 at m = 2 only (m = 4 is
      // past its length), id 1 at m = 5.
      const float want2 = 0.5f + dx[0 * 2 + u] + dx[1 * 2 + u] + dx[3 * 2 + u];
      CHECK(table[2 * 2 + u] == want2);
      CHECK(table[2 * 2 + u] != 0.5f + dx[3 * 2 + u]);                 // the last row alone
      CHECK(table[2 * 2 + u] != 0.5f + dx[1 * 2 + u] + dx[3 * 2 + u]);  // the first row lost
      CHECK(table[0 * 2 + u] == 0.5f + dx[2 * 2 + u]);
      CHECK(table[1 * 2 + u] == 0.5f + dx[5 * 2 + u]);
    }
  }
}

TEST_CASE("emulated GPU training on the direct and lanes per-step kernels: the forward's reserve, every cell") {
  // The training forward's reserve comes from the step kernel's epilogue, the backward's per-step
  // products from f32_rnn_grad_gemm_direct: with RNNCORE_GPU_TILE=direct, lanes and lanes8 every
  // gradient still matches the f64 reference (every cell, both directions, lengths, f16 weights).
  g_training_worst = 0;
  Rng rng(2026113002);
  for (int i = 0; i < 9; ++i) {
    Case c = random_case(rng);
    if (i % 4 == 3) c.weights = DType::f16;
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = gpu::Recurrence::tiled;
    const gpu::TileChoice tiles[] = {gpu::TileChoice::direct, gpu::TileChoice::lanes, gpu::TileChoice::lanes8};
    dev.tile = tiles[i % 3];
    dev.sched_seed = rng.next();
    std::map<std::string, int> launches;
    dev.launches = &launches;
    check_emulated(c, rng.next(), dev);
    const char* kernel = i % 3 == 0 ? "_direct" : i % 3 == 1 ? "_lanes" : "_lanes8";
    int step = 0;
    for (const auto& kv : launches) step += kv.first.find(kernel) != std::string::npos ? kv.second : 0;
    if (c.T > 0 && c.B > 0) CHECK(step > 0);
    if (c.T > 0 && c.B > 0) CHECK(launches["f32_rnn_grad_gemm_direct"] > 0);  // the backward's per-step products
  }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("emulated GPU training on backward's persistent kernel: every cell, both directions, lengths, resets, wrappers") {
  // RNNCORE_GPU_RECURRENCE=persistent runs backward's steps as one cooperative launch per direction
  // (f32_rnn_grad_persistent) where the plan has a slice for them: every gradient still matches the
  // f64 reference. Projected LSTMs keep the per-step kernels; auto never takes the kernel (not
  // timed on a device yet).
  g_training_worst = 0;
  Rng rng(2026120101);
  int fused_cases = 0;
  for (int i = 0; i < 12; ++i) {
    Case c = random_case(rng);
    if (i % 4 == 3) c.weights = DType::f16;
    if (i % 5 == 4) c.B = 9 + i;  // the second grad bucket (MAXB 16)
    Device dev;
    dev.warp = i % 2 ? 64 : 32;
    dev.recurrence = i % 6 == 5 ? gpu::Recurrence::auto_select : gpu::Recurrence::persistent;
    dev.sched_seed = rng.next();
    std::map<std::string, int> launches;
    dev.launches = &launches;
    check_emulated(c, rng.next(), dev);
    int fused = 0, cells = 0;
    for (const auto& kv : launches) {
      if (kv.first.find("_grad_persistent") != std::string::npos) fused += kv.second;
      if (kv.first == "f32_rnn_grad_cell") cells += kv.second;
    }
    if (dev.recurrence == gpu::Recurrence::auto_select || c.T == 0 || c.B == 0 || c.B > 16) {  // (B > 16: no grad bucket)
      CHECK(fused == 0);
    } else {
      const int dirs = c.stack.layers[0].direction == Direction::bidirectional ? 2 : 1;
      CHECK(fused == c.stack.num_layers * dirs);  // every direction of every layer, one launch each
      CHECK(cells == 0);
    }
    fused_cases += fused > 0;
  }
  CHECK(fused_cases >= 5);
  // Resets, dropout wrappers (state dropout), a residual and inter-layer dropout, row ids.
  for (int k = 0; k < 4; ++k) {
    const Mode mode = k == 0 ? Mode::lstm : k == 3 ? Mode::rnn_relu : Mode::gru;
    const GruVariant variant = k == 2 ? GruVariant::reset_before : GruVariant::reset_after;
    Case c = reset_case(mode, variant, 2, k);
    c.stack.input_size = 7;  // the residual needs I == H
    c.stack.layers[0] =
        layer(mode, 7, false, {dropout_wrapper(0.8, 0.7, 0.6, false, false, StateFilter::h_and_c), residual_wrapper()}, variant);
    c.stack.layers[1] = layer(mode, 10, false, {dropout_wrapper(0.9, 0.8, 0.7, true)}, variant);
    c.stack.dropout = 0.3;
    c.run_mode = RunMode::training;
    c.row_ids = true;
    c.seed = rng.next();
    c.step = rng.next();
    Device dev;
    dev.recurrence = gpu::Recurrence::persistent;
    std::map<std::string, int> launches;
    dev.launches = &launches;
    check_emulated(c, rng.next(), dev);
    int fused = 0;
    for (const auto& kv : launches) fused += kv.first.find("_grad_persistent") != std::string::npos ? kv.second : 0;
    CHECK(fused == 2);
  }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("mutants: leaving out any barrier or coherent load of backward's persistent kernel is caught") {
  if (!emu::detector::available()) {
    MESSAGE("no access instrumentation in this build (AddressSanitizer): mutants not run");
    return;
  }
  // H 20 on the emulated device (8 co-resident blocks): several blocks, each with units of its own,
  // so every unit's dh needs other blocks' dgates.
  for (int k = 0; k < 3; ++k) {  // LSTM, reset-after and reset-before GRU (its second grid barrier)
    Case c = one_layer_case(k == 0 ? Mode::lstm : Mode::gru, 6, 20, true, 5, 6, k == 2 ? GruVariant::reset_before : GruVariant::reset_after);
    c.lengths = true;
    const TrainData d = draw_training(c, 7);
    Device dev;
    dev.recurrence = gpu::Recurrence::persistent;
    std::map<std::string, int> launches;
    const int sites = check_backward_mutants(c, d, dev, "_grad_persistent", nullptr, &launches);
    int fused = 0;
    for (const auto& kv : launches) fused += kv.first.find("_grad_persistent") != std::string::npos ? kv.second : 0;
    CHECK(fused == 2);
    CHECK(sites >= 4);  // the grid barrier, the partial sums' two barriers, the coherent load
  }
}

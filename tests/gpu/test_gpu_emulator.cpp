// The GPU backend without a GPU: its kernels (src/gpu/device/kernels.hpp), launch schedules, layouts and
// persistent-kernel planning (src/gpu/host/plan.hpp, src/gpu/host/schedule.hpp) run in the host emulator (tests/gpu/emulator.hpp)
// and are compared with the reference backend, for every mode and option, both recurrence kernels
// (persistent and per step, both tile shapes) and warp sizes 32 and 64. The masks the kernels draw
// are compared bit for bit with the CPU's mask rows. Built in every configuration (no GPU compiler
// needed); tests/gpu/test_gpu_device.cpp is the same comparison on a real device.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>

#include "src/gpu/host/device_profiles.hpp"
#include "src/shared/half.hpp"
#include "tests/gpu/emu_kernels.hpp"
#include "tests/gpu/gpu_cases.hpp"
#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

/// The emulated device and the kernel choices forced on the plan.
struct EmuConfig {
  int warp = 32;
  gpu::Recurrence recurrence = gpu::Recurrence::auto_select;
  gpu::TileChoice tile = gpu::TileChoice::auto_select;
  int sm_count = 4;
  int blocks_per_sm = 2;
  std::int64_t smem = 48 * 1024;
  int persist_threads = gpu::kPersistentThreads;  ///< the planner's block size on a GPU
  bool refuse_cooperative = false;  ///< the runtime refuses cooperative launches (MPS)
  bool mma = false;                 ///< the device has matrix units (DeviceDescription::mma)
  bool mma_tf32 = false;            ///< they take TF32 (DeviceDescription::mma_tf32)
  std::uint64_t sched_seed = 1;     ///< the emulator's block and thread order
  /// A real device's profile instead of the fields above (sm_count, warp, smem, blocks_per_sm):
  /// planned for with its modeled occupancy.
  const gpu::DeviceProfile* profile = nullptr;
};

std::string describe(const EmuConfig& c) {
  static const char* const rec[] = {"auto", "persistent", "tiled"};
  static const char* const tile[] = {"auto", "small", "large", "direct", "lanes", "lanes8"};
  static_assert(sizeof tile / sizeof tile[0] == gpu::kTileChoiceCount, "a name per TileChoice");
  return "warp=" + std::to_string(c.warp) + " recurrence=" + rec[static_cast<int>(c.recurrence)] +
         " tile=" + tile[static_cast<int>(c.tile)] + " sms=" + std::to_string(c.sm_count) + "x" +
         std::to_string(c.blocks_per_sm) + " persist_threads=" + std::to_string(c.persist_threads) +
         " sched_seed=" + std::to_string(c.sched_seed) + (c.profile ? std::string(" profile=") + c.profile->device.name : "");
}

/// The plan a GPU build makes for `stack` on a described device (gpu::plan_for_device).
Status plan_for(const StackSpec& stack, const PlanOptions& opt, const gpu::DescribedDevice& on, detail::PlanImpl* out) {
  Plan plan;
  RNNCORE_RETURN_IF_ERROR(gpu::plan_for_device(stack, opt, on, &plan));
  *out = detail::impl(plan);
  return Status::ok;
}

/// plan_for a device profile, with the modeled occupancy of its persistent kernels (and a forced
/// recurrence kernel, if given).
Status make_profile_plan(const StackSpec& stack, PlanOptions opt, const gpu::DeviceProfile& profile, detail::PlanImpl* out,
                         gpu::Recurrence recurrence = gpu::Recurrence::auto_select) {
  gpu::DescribedDevice on;
  on.device = profile.device;
  on.registers = profile.persistent_registers;
  on.choices.recurrence = recurrence;
  return plan_for(stack, opt, on, out);
}

/// Blocks of the persistent kernel one multiprocessor of `profile` holds, shared memory aside.
int profile_blocks_per_sm(const gpu::DeviceProfile& profile) {
  return gpu::modeled_blocks_per_sm(profile.device, gpu::kPersistentThreads, profile.persistent_registers, 0);
}

/// plan_for the emulated device of `cfg`.
Status make_gpu_plan(const StackSpec& stack, PlanOptions opt, const EmuConfig& cfg, detail::PlanImpl* out) {
  if (cfg.profile != nullptr) return make_profile_plan(stack, opt, *cfg.profile, out, cfg.recurrence);
  gpu::DescribedDevice on;
  on.device.sm_count = cfg.sm_count;
  on.device.warp_size = cfg.warp;
  on.device.smem_optin = cfg.smem;
  on.device.mma = cfg.mma ? 1 : 0;
  on.device.mma_tf32 = cfg.mma_tf32 ? 1 : 0;
  std::snprintf(on.device.arch, sizeof on.device.arch, "emu%d", cfg.warp);
  on.choices.recurrence = cfg.recurrence;
  on.choices.tile = cfg.tile;
  on.choices.persist_threads = cfg.persist_threads;
  on.blocks_per_sm = cfg.blocks_per_sm;
  return plan_for(stack, opt, on, out);
}

/// While alive, the detector checks accesses to the buffers named here (and to shared memory);
/// check() turns what it found into test failures.
struct Tracked {
  Tracked() {
    emu::detector::reset();
    (void)emu::detector::take_reports();
  }
  ~Tracked() { emu::detector::reset(); }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  void buffer(const void* p, std::size_t bytes, const std::string& name) { emu::detector::track(p, bytes, name); }
  /// The workspace, with its parts named for reports.
  void workspace(const detail::PlanImpl& p, const gpu::GpuPlan& g, const unsigned char* ws) {
    buffer(ws, p.ws.total, "ws");
    const auto name = [&](std::size_t at, const std::string& n) {
      if (at != 0) emu::detector::label(ws + at, "ws." + n);
    };
    for (int d = 0; d < 2; ++d) {
      const std::string dd = "[" + std::to_string(d) + "]";
      name(p.ws.proj[d], "proj" + dd);
      name(p.ws.h[d][0], "h" + dd + "[0]");
      name(p.ws.h[d][1], "h" + dd + "[1]");
      name(p.ws.c[d], "c" + dd);
      name(p.ws.rh[d], "rh" + dd);
      name(p.ws.z[d], "z" + dd);
      name(p.ws.x_cell[d], "x_cell" + dd);
      name(p.ws.layer_out[d], "layer_out" + dd);
    }
    name(g.ws_lengths, "lengths");
    name(g.ws_row_ids, "row_ids");
    name(g.ws_args, "args");
    if (p.ws.proj[0] == 0) emu::detector::label(ws, "ws.proj[0]");
  }
  /// Fails the test for every race or stale read found since the last check.
  static std::size_t check(const std::string& what) {
    const std::size_t n = emu::detector::report_count();
    for (const std::string& r : emu::detector::take_reports()) FAIL_CHECK(what << ": " << r);
    return n;
  }
};

/// Packs and runs a forward on the emulated device; outputs start poisoned (-7), the packed buffer
/// and workspace start as NaN bytes, so anything read before it is written shows.
Status run_emulated(const StackSpec& stack, const PlanOptions& opt, const EmuConfig& cfg, const std::vector<float>& canonical,
                    ForwardArgs args, Outputs<float>* out, std::map<std::string, int>* launches,
                    const emu::Mutation& mutation = emu::Mutation(), std::map<emu::Site, std::set<std::string>>* census = nullptr,
                    std::size_t* reports = nullptr) {
  detail::PlanImpl p;
  RNNCORE_RETURN_IF_ERROR(make_gpu_plan(stack, opt, cfg, &p));
  const gpu::GpuPlan g = p.gpu;
  AlignedBuffer packed(p.packed_bytes), ws(p.ws.total);
  std::memset(packed.ptr, 0xff, p.packed_bytes);
  std::memset(ws.ptr, 0xff, p.ws.total);
  emu::Launcher ln(g.target, cfg.profile ? profile_blocks_per_sm(*cfg.profile) : cfg.blocks_per_sm, cfg.sched_seed);
  ln.refuse_cooperative = cfg.refuse_cooperative;
  ln.mutation = mutation;
  ln.census = census;
  Tracked tracked;
  tracked.buffer(packed.ptr, p.packed_bytes, "packed");
  tracked.workspace(p, g, ws.ptr);
  Status s = emu::pack(ln, p, g, canonical.data(), packed.ptr);
  if (s == Status::ok) {
    bool lstm = false;
    for (int l = 0; l < stack.num_layers; ++l) lstm = lstm || stack.layers[l].mode == Mode::lstm;
    const std::size_t steps = stack.head.last_step_only ? 1 : static_cast<std::size_t>(args.seq_len);  // y [B, out]
    out->y.assign(steps * args.batch * stack_output_size(stack), -7.0f);
    out->hy.assign(static_cast<std::size_t>(state_elements(stack, args.batch)), -7.0f);
    out->cy.assign(lstm ? static_cast<std::size_t>(cell_state_elements(stack, args.batch)) : 0, -7.0f);
    args.y = out->y.data();
    args.hy = out->hy.data();
    args.cy = lstm ? out->cy.data() : nullptr;
    const std::size_t in_bytes = sizeof(float) * static_cast<std::size_t>(args.seq_len) * args.batch *
                                 (stack.embedding.vocab_size > 0 ? 1 : stack.input_size);  // token ids, or rows
    tracked.buffer(args.x, in_bytes, "x");
    tracked.buffer(out->y.data(), sizeof(float) * out->y.size(), "y");
    tracked.buffer(out->hy.data(), sizeof(float) * out->hy.size(), "hy");
    tracked.buffer(out->cy.data(), sizeof(float) * out->cy.size(), "cy");
    tracked.buffer(args.h0, sizeof(float) * out->hy.size(), "h0");
    tracked.buffer(args.c0, sizeof(float) * out->cy.size(), "c0");
    s = emu::forward(ln, p, g, packed.ptr, ws.ptr, args);
  }
  if (reports != nullptr) {  // the caller judges what was found (mutants)
    *reports = emu::detector::report_count();
    (void)emu::detector::take_reports();
  } else {
    Tracked::check(describe(cfg));
  }
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
  if (launches != nullptr) *launches = ln.launches;
  return s;
}

/// Runs a case in the emulator with `cfg` and compares it with the reference.
void check_case(const Case& c, const EmuConfig& cfg, std::uint64_t data_seed, std::map<std::string, int>* launches = nullptr) {
  compare_case(c, data_seed,
               [&](const StackSpec& st, const PlanOptions& opt, const std::vector<float>& w, const ForwardArgs& a, Outputs<float>* out) {
                 return run_emulated(st, opt, cfg, w, a, out, launches);
               },
               describe(cfg));
}

EmuConfig config(int warp, gpu::Recurrence r, gpu::TileChoice t = gpu::TileChoice::auto_select) {
  EmuConfig c;
  c.warp = warp;
  c.recurrence = r;
  c.tile = t;
  return c;
}

int count_prefix(const std::map<std::string, int>& launches, const std::string& part) {
  int n = 0;
  for (const auto& kv : launches)
    if (kv.first.find(part) != std::string::npos) n += kv.second;
  return n;
}

/// Case c on the matrix units in TF32 (f32 weights, half math and its tolerance, device profile 0's
/// tiled recurrence) against the reference, every step on the 16x16 MMA tiles; returns the launches.
std::map<std::string, int> check_on_tf32_units(Case c, std::uint64_t data_seed) {
  c.weights = DType::f32;
  c.half_math = true;
  c.tolerance = half_math_tolerance(DType::f32);
  const gpu::DeviceProfile prof = gpu::device_profile(0);
  EmuConfig cfg;
  cfg.profile = &prof;
  cfg.recurrence = gpu::Recurrence::tiled;
  std::map<std::string, int> launches;
  check_case(c, cfg, data_seed, &launches);
  CHECK(count_prefix(launches, "_mma_16x16") == c.T);
  return launches;
}

}  // namespace

TEST_CASE("device mask helper equals the CPU mask function bit for bit") {
  Rng rng(7);
  for (int i = 0; i < 2000; ++i) {
    gpu::MaskSite m{};
    m.seed = rng.next();
    m.site = static_cast<std::uint32_t>(rng.next());
    m.width = static_cast<std::uint32_t>(rng.range(1, 300));
    m.variational = rng.range(0, 1);
    m.shared = m.variational && rng.range(0, 1);
    m.active = 1;
    m.time_offset = i % 3 == 0 ? static_cast<std::uint32_t>(rng.next()) : 0u;
    const double keep = i % 50 == 0 ? 1.0 : rng.uniform(0.01, 0.99);
    rnncore_mask_params_init(&m.params, keep);
    const std::uint32_t step = static_cast<std::uint32_t>(rng.next()), q = static_cast<std::uint32_t>(rng.range(0, 80));
    const int t = rng.range(0, 1000), b = rng.range(0, 20);
    std::uint32_t ids[21];
    for (auto& id : ids) id = static_cast<std::uint32_t>(rng.next());
    const std::uint32_t* row_ids = rng.range(0, 1) ? ids : nullptr;
    const std::uint32_t bits = gpu::mask_bits4(m, step, t, row_ids, b, q);
    const std::uint32_t row = m.shared ? 0u : (row_ids ? row_ids[b] : static_cast<std::uint32_t>(b));
    for (std::uint32_t j = 0; j < 4; ++j) {
      const std::uint32_t t_prime = m.variational ? 0u : static_cast<std::uint32_t>(t) + m.time_offset;
      const int keep_ref = rnncore_mask_keep(m.seed, step, m.site, t_prime, row,
                                             4 * q + j, m.width, &m.params);
      REQUIRE(static_cast<int>((bits >> j) & 1u) == keep_ref);
    }
  }
}

TEST_CASE("mask kernels draw the CPU's mask rows bit for bit") {
  // Inter-layer dropout and wrapper input dropout on all-ones tensors, against detail::mask_row
  // (the generator the CPU backends use), for every (t, row), with and without row ids.
  for (int warp : {32, 64}) {
    const gpu::DeviceDescription facts = [&] {
      gpu::DeviceDescription f;
      f.warp_size = warp;
      f.sm_count = 2;
      return f;
    }();
    gpu::GpuPlan g{};
    g.target = facts;
    Rng rng(11);
    for (int iter = 0; iter < 12; ++iter) {
      const int T = rng.range(1, 5), B = rng.range(1, 6), width = rng.range(1, 37);
      std::vector<std::uint32_t> ids(B);
      for (auto& id : ids) id = static_cast<std::uint32_t>(rng.next());
      const bool with_ids = iter % 2 == 1;
      detail::RunDropout run;
      run.on = true;
      run.seed = rng.next();
      run.step = static_cast<std::uint32_t>(rng.next());
      run.row_ids = with_ids ? ids.data() : nullptr;
      run.time_offset = iter % 3 == 2 ? static_cast<std::uint32_t>(rng.next()) : 0u;

      // Inter-layer dropout of a 2-layer stack whose first layer has `width` = D·H outputs.
      StackSpec st;
      st.input_size = 3;
      st.num_layers = 2;
      st.dropout = rng.uniform(0.05, 0.9);
      st.layers[0] = layer(Mode::rnn_tanh, width, false, {});
      st.layers[1] = layer(Mode::rnn_tanh, 2, false, {});
      const detail::Mask inter = detail::inter_layer_mask(st, run, 0);
      REQUIRE(inter.active);
      std::vector<float> buf(static_cast<std::size_t>(T) * B * width, 1.0f);
      gpu::InterLayerArgs ia{};
      ia.out = buf.data();
      ia.steps = T;
      ia.batch = B;
      ia.width = width;
      ia.row_ids = run.row_ids;
      ia.step = run.step;
      ia.mask = gpu::schedule::to_site(inter);
      emu::Launcher ln(facts, 1);
      const std::int64_t items = static_cast<std::int64_t>(T) * B * ((width + 3) / 4);
      REQUIRE(emu::inter_layer_dropout(ln, gpu::elementwise_dims(g, items, 1), ia) == Status::ok);
      std::vector<float> row(width);
      for (int t = 0; t < T; ++t)
        for (int b = 0; b < B; ++b) {
          detail::mask_row(nullptr, inter, run, t, b, row.data());
          REQUIRE(std::memcmp(row.data(), buf.data() + (static_cast<std::size_t>(t) * B + b) * width, sizeof(float) * width) == 0);
        }

      // Input dropout of two nested dropout wrappers (outer first), variational or not, per direction.
      StackSpec ws;
      ws.input_size = width;
      ws.num_layers = 1;
      const bool variational = iter % 3 == 0, per_sequence = iter % 4 == 0;
      ws.layers[0] = layer(Mode::gru, 4, true,
                           {dropout_wrapper(rng.uniform(0.1, 0.9), 1.0, 1.0, variational, per_sequence),
                            seeded(dropout_wrapper(rng.uniform(0.1, 0.9), 1.0, 1.0), rng.next())});
      gpu::LayerArgs la{};
      la.batch = B;
      la.steps = T;
      la.in_size = width;
      la.dirs = 2;
      la.num_wrappers = 2;
      la.row_ids = run.row_ids;
      la.step = run.step;
      std::vector<float> ones(static_cast<std::size_t>(T) * B * width, 1.0f), cell[2];
      for (int d = 0; d < 2; ++d) {
        cell[d].assign(ones.size(), -1.0f);
        gpu::DirArgs& da = la.dir[d];
        da.x_raw = ones.data();
        da.xr_st = static_cast<std::int64_t>(B) * width;
        da.xr_sb = width;
        da.x_cell = cell[d].data();
        for (int w = 0; w < 2; ++w)
          da.input[w] = gpu::schedule::to_site(detail::wrapper_mask(ws, run, 0, d, w, detail::MaskKind::input));
      }
      REQUIRE(emu::input_dropout(ln, gpu::elementwise_dims(g, items, 2), la) == Status::ok);
      std::vector<float> m0(width), m1(width);
      for (int d = 0; d < 2; ++d) {
        const detail::Mask outer = detail::wrapper_mask(ws, run, 0, d, 1, detail::MaskKind::input);
        const detail::Mask inner = detail::wrapper_mask(ws, run, 0, d, 0, detail::MaskKind::input);
        for (int t = 0; t < T; ++t)
          for (int b = 0; b < B; ++b) {
            detail::mask_row(nullptr, outer, run, t, b, m0.data());
            detail::mask_row(nullptr, inner, run, t, b, m1.data());
            for (int u = 0; u < width; ++u) {
              const float want = 1.0f * m0[u] * m1[u];
              REQUIRE(cell[d][(static_cast<std::size_t>(t) * B + b) * width + u] == want);
            }
          }
      }
    }
  }
}

TEST_CASE("emulated GPU forward matches the reference: CudnnLSTM-style random cases") {
  Rng rng(2024);
  int persistent = 0, tiled = 0;
  for (int i = 0; i < 24; ++i) {
    const Case c = random_case(rng);
    const int warp = i % 2 == 0 ? 32 : 64;
    std::map<std::string, int> launches;
    const EmuConfig cfg = config(warp, i % 3 == 0 ? gpu::Recurrence::tiled : gpu::Recurrence::persistent,
                                 i % 4 < 2 ? gpu::TileChoice::small : gpu::TileChoice::large);
    check_case(c, cfg, 500 + i, &launches);
    persistent += count_prefix(launches, "persistent");
    tiled += count_prefix(launches, "tiled");
  }
  MESSAGE("persistent launches: " << persistent << ", per-step launches: " << tiled);
  CHECK(persistent > 0);
  CHECK(tiled > 0);
}

TEST_CASE("emulated GPU forward: every cell through both recurrence kernels, multi-tile shapes" * doctest::test_suite("long")) {
  // Shapes with several GEMM tiles (T·B > 64, G·H > 64, I > 16), several step tiles and several
  // persistent slices; every batch bucket of the persistent kernel up to 32.
  const Mode modes[] = {Mode::lstm, Mode::gru, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  const GruVariant variants[] = {GruVariant::reset_after, GruVariant::reset_after, GruVariant::reset_before,
                                 GruVariant::reset_after, GruVariant::reset_after};
  const int batches[] = {1, 2, 3, 5, 9, 17, 33};
  for (int m = 0; m < 5; ++m)
    for (int r = 0; r < 3; ++r) {
      Case c;
      c.stack.input_size = 19;
      c.stack.num_layers = 1;
      c.stack.layers[0] = layer(modes[m], 21, m % 2 == 0, {}, variants[m]);
      c.T = 4;
      c.B = r == 0 ? batches[m % 7] : batches[(m + 2 * r) % 7];
      c.lengths = true;
      c.initial = true;
      EmuConfig cfg = config(r == 1 ? 64 : 32, r == 2 ? gpu::Recurrence::tiled : gpu::Recurrence::persistent,
                             r == 2 && m % 2 ? gpu::TileChoice::large : gpu::TileChoice::small);
      cfg.smem = 24 * 1024;  // forces slices of more than 4 units for some shapes
      std::map<std::string, int> launches;
      check_case(c, cfg, 900 + m * 3 + r, &launches);
      CHECK(count_prefix(launches, r == 2 ? "tiled" : "persistent") > 0);
    }
}

TEST_CASE("emulated GPU forward: dropout wrappers, residuals, inter-layer dropout, row ids" * doctest::test_suite("long")) {
  Rng rng(77);
  int n = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh})
    for (int v = 0; v < 4; ++v) {
      const Case c = wrapper_case(mode, v, rng);
      for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
        check_case(c, config(n % 2 ? 64 : 32, r), 3000 + n, nullptr);
        ++n;
      }
      Case inference = c;  // the same stack in an inference run: no masks at all
      inference.run_mode = RunMode::inference;
      check_case(inference, config(32, gpu::Recurrence::auto_select), 3100 + n, nullptr);
    }
}

TEST_CASE("emulated GPU forward: streaming in chunks (time_offset, hy aliasing h0) equals one run") {
  // Two chunks of a unidirectional stack with per-step dropout, the state carried in place
  // (hy == h0, cy == c0), against the f64 reference running the whole sequence at once.
  StackSpec st;
  st.input_size = 6;
  st.num_layers = 2;
  st.dropout = 0.25;
  st.layers[0] = layer(Mode::lstm, 8, false, {dropout_wrapper(0.8, 0.7, 0.75)});
  st.layers[1] = layer(Mode::gru, 5, false, {dropout_wrapper(0.9, 0.6, 0.7)});
  const int T = 6, B = 3, half = 3;
  Rng rng(31);
  StackSpec s64 = st;
  s64.dtype = DType::f64;
  const auto w32 = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.4);
  const auto x32 = random_vector<float>(rng, static_cast<std::size_t>(T) * B * st.input_size, 1.0);
  const std::vector<double> w64(w32.begin(), w32.end()), x64(x32.begin(), x32.end());
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.run_mode = RunMode::training;
  a.seed = 99;
  a.step = 7;
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  opt.backend = Backend::reference;
  Outputs<double> ref;
  a.x = x64.data();
  REQUIRE(run_forward(s64, opt, w64, a, &ref) == Status::ok);

  for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
    const EmuConfig cfg = config(32, r);
    detail::PlanImpl p;
    REQUIRE(make_gpu_plan(st, opt, cfg, &p) == Status::ok);
    const gpu::GpuPlan g = p.gpu;
    AlignedBuffer packed(p.packed_bytes), ws(p.ws.total);
    emu::Launcher ln(g.target, cfg.blocks_per_sm);
    Tracked tracked;
    tracked.buffer(packed.ptr, p.packed_bytes, "packed");
    tracked.workspace(p, g, ws.ptr);
    REQUIRE(emu::pack(ln, p, g, w32.data(), packed.ptr) == Status::ok);
    const std::size_t states = static_cast<std::size_t>(state_elements(st, B));
    std::vector<float> h(states, 0.0f), c(states, 0.0f), y(static_cast<std::size_t>(T) * B * 5, -7.0f);
    tracked.buffer(h.data(), sizeof(float) * h.size(), "h0 = hy");
    tracked.buffer(c.data(), sizeof(float) * c.size(), "c0 = cy");
    tracked.buffer(y.data(), sizeof(float) * y.size(), "y");
    tracked.buffer(x32.data(), sizeof(float) * x32.size(), "x");
    for (int chunk = 0; chunk < 2; ++chunk) {
      ForwardArgs k = a;
      k.seq_len = half;
      k.x = x32.data() + static_cast<std::size_t>(chunk) * half * B * st.input_size;
      k.y = y.data() + static_cast<std::size_t>(chunk) * half * B * 5;
      k.h0 = k.hy = h.data();
      k.c0 = k.cy = c.data();
      k.time_offset = static_cast<std::uint32_t>(chunk * half);
      REQUIRE(emu::forward(ln, p, g, packed.ptr, ws.ptr, k) == Status::ok);
    }
    INFO(describe(cfg));
    CHECK(rel_error(y.data(), ref.y.data(), ref.y.size()) < 1e-5);
    CHECK(rel_error(h.data(), ref.hy.data(), ref.hy.size()) < 1e-5);
    CHECK(ln.errors.empty());
    Tracked::check(describe(cfg));
  }
}

TEST_CASE("emulated GPU forward with an Embedding and a Dense head (every step, last step; each activation; Dense chains)") {
  // The ends on the GPU (f32_embedding_gather, f32_head_last_rows, f32_dense, f32_dense_softmax)
  // against the f64 reference, warp 32 and 64, both recurrence kernels, lengths (rows of length 0
  // give zero rows), both layouts; and a stack without a head but with an embedding.
  Rng rng(3501);
  g_forward_worst = 0;
  for (int i = 0; i < 10; ++i) {
    const Case c = ends_case(i, rng);
    std::map<std::string, int> launches;
    check_case(c, config(i % 2 ? 64 : 32, i % 3 == 2 ? gpu::Recurrence::tiled : gpu::Recurrence::auto_select), 3600 + i, &launches);
    CHECK(count_prefix(launches, "f32_embedding_gather") == (c.stack.embedding.vocab_size > 0 ? 1 : 0));
    CHECK(count_prefix(launches, "f32_head_last_rows") == (c.stack.head.last_step_only ? 1 : 0));
    CHECK(count_prefix(launches, "f32_dense") - count_prefix(launches, "f32_dense_softmax") == 1 + c.stack.num_pre_head);
  }
  Case c = ends_case(0, rng);
  c.stack.head = DenseSpec();
  c.stack.num_pre_head = 0;
  check_case(c, config(32, gpu::Recurrence::auto_select), 3700);
  MESSAGE("largest relative error: " << g_forward_worst);
}

TEST_CASE("GPU plans with an Embedding or a Dense head: inference and training plans (the reserve keeps the head's rows)") {
  StackSpec st;
  st.input_size = 4;
  st.num_layers = 1;
  st.layers[0] = layer(Mode::gru, 5, false, {});
  st.head.out_features = 3;
  PlanOptions opt;
  detail::PlanImpl p;
  REQUIRE(make_gpu_plan(st, opt, EmuConfig(), &p) == Status::ok);
  CHECK(p.gpu.ws_ends_args != 0);
  CHECK(p.ends != 0);
  opt.training = true;
  REQUIRE(make_gpu_plan(st, opt, EmuConfig(), &p) == Status::ok);
  CHECK(p.train.head_in != 0);
  CHECK(p.train.head_y > p.train.head_in);
  CHECK(p.train.head_dz != p.train.dlayer[0]);
}

TEST_CASE("emulated GPU forward: zero-length rows, T = 0, skip input, auto choices") {
  Case c;
  RnnSpec spec;
  spec.mode = Mode::lstm;
  spec.input_size = spec.hidden_size = 8;
  spec.input_mode = InputMode::skip;
  spec.num_layers = 2;
  spec.direction = Direction::bidirectional;
  c.stack = to_stack(spec);
  c.T = 3;
  c.B = 4;
  c.lengths = true;  // lengths drawn in 0..T include 0 for some seeds
  c.initial = true;
  for (int i = 0; i < 4; ++i) check_case(c, config(32, gpu::Recurrence::auto_select), 40 + i, nullptr);
  c.T = 0;  // no steps: y is empty and the final state is the initial one
  check_case(c, config(64, gpu::Recurrence::auto_select), 50, nullptr);
}

TEST_CASE("device weight conversions equal the library's f16 / bf16 conversions bit for bit") {
  Rng rng(5);
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t u = static_cast<std::uint32_t>(rng.next());
    if (i % 4 == 0) u = (u & 0x80000000u) | (static_cast<std::uint32_t>(rng.range(90, 160)) << 23) | (u & 0x7fffffu);
    const float f = detail::bits_to_f32(u);
    const gpu::WeightF16 h = gpu::from_float<gpu::WeightF16>(f);
    const gpu::WeightBF16 bh = gpu::from_float<gpu::WeightBF16>(f);
    REQUIRE(h.bits == detail::f32_to_f16(f));
    REQUIRE(bh.bits == detail::f32_to_bf16(f));
    const float hf = gpu::to_float(h), bf = gpu::to_float(bh), hr = detail::f16_to_f32(h.bits), br = detail::bf16_to_f32(bh.bits);
    REQUIRE(std::memcmp(&hf, &hr, 4) == 0);
    REQUIRE(std::memcmp(&bf, &br, 4) == 0);
  }
}

TEST_CASE("emulated GPU forward with f16 and bf16 weight storage") {
  // Weights already representable in the storage type: the GPU's packing must keep them exactly, so
  // the comparison with the f64 reference stays at 1e-5 and checks every storage-type code path.
  Rng rng(4242);
  int n = 0;
  for (DType wt : {DType::f16, DType::bf16})
    for (int i = 0; i < 6; ++i) {
      Case c = random_case(rng);
      c.weights = wt;
      check_case(c, config(n % 2 ? 64 : 32, i % 2 ? gpu::Recurrence::tiled : gpu::Recurrence::persistent,
                           i % 3 ? gpu::TileChoice::small : gpu::TileChoice::large),
                 6000 + n, nullptr);
      ++n;
    }
  Case w = wrapper_case(Mode::lstm, 2, rng);
  w.weights = DType::bf16;
  check_case(w, config(32, gpu::Recurrence::persistent), 6100, nullptr);
}

TEST_CASE("GPU plans refuse what the kernels cannot run") {
  StackSpec st = to_stack([] {
    RnnSpec s;
    s.input_size = s.hidden_size = 4;
    return s;
  }());
  PlanOptions opt;
  st.dtype = DType::f64;
  CHECK(gpu::check_supported(st, opt) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("f32") != std::string::npos);
  st.dtype = DType::f32;
  CHECK(gpu::check_supported(st, opt) == Status::ok);
  opt.weight_dtype = DType::bf16;
  CHECK(gpu::check_supported(st, opt) == Status::ok);
  opt.weight_dtype = DType::f64;
  CHECK(gpu::check_supported(st, opt) == Status::unsupported);
  opt.weight_dtype = DType::f32;
  Wrapper w = residual_wrapper();
  w.residual.f32 = [](const float* in, const float* out, float* res, std::int32_t n, void*) {
    for (int i = 0; i < n; ++i) res[i] = in[i] - out[i];
  };
  st.layers[0].wrappers[st.layers[0].num_wrappers++] = w;
  CHECK(gpu::check_supported(st, opt) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("custom residual") != std::string::npos);
}

TEST_CASE("persistent-kernel planning respects shared memory and co-residency") {
  RnnSpec spec;
  spec.mode = Mode::lstm;
  spec.input_size = 16;
  spec.hidden_size = 1024;
  spec.direction = Direction::bidirectional;
  PlanOptions opt;
  opt.max_batch = 64;
  opt.max_seq_len = 100;
  EmuConfig h100;  // an H100-like device: 132 SMs, 227 KiB of shared memory per block
  h100.sm_count = 132;
  h100.smem = 227 * 1024;
  h100.persist_threads = 256;
  detail::PlanImpl p;
  REQUIRE(make_gpu_plan(to_stack(spec), opt, h100, &p) == Status::ok);
  gpu::GpuPlan g = p.gpu;
  for (int k = 0; k < gpu::kBucketCount; ++k) {
    const int units = g.persist_units[0][k];
    INFO("bucket " << gpu::kBuckets[k] << " units " << units);
    if (units == 0) continue;
    const std::int64_t blocks = 2 * ((1024 + units - 1) / units);
    CHECK(blocks <= 132 * h100.blocks_per_sm);
    CHECK(static_cast<std::int64_t>(gpu::persistent_smem_bytes(4, gpu::kBuckets[k], units, 1024, gpu::kBuckets[k], 4)) <=
          h100.smem);
  }
  spec.direction = Direction::unidirectional;
  spec.hidden_size = 512;
  REQUIRE(make_gpu_plan(to_stack(spec), opt, h100, &p) == Status::ok);
  g = p.gpu;
  MESSAGE("H=512 LSTM units per block by bucket: " << g.persist_units[0][0] << " " << g.persist_units[0][3] << " "
                                                     << g.persist_units[0][4]);
  CHECK(g.persist_units[0][0] == 4);  // B = 1: 128 blocks of 4 units, a 32 KiB slice each
  CHECK(gpu::persistent_units(g, 0, 1) == 4);
  CHECK(gpu::persistent_units(g, 0, 64) == 0);  // auto: large batches run the per-step kernel
}

TEST_CASE("the backend's planner plans for H100, A100, MI250X and MI300X profiles, and the plans run") {
  // Plan::create's path with each profile's description and modeled occupancy (no runtime): the
  // persistent slices fit the device's shared memory and are co-resident, and a forward with
  // that plan, at the profile's warp size, matches the reference in the emulator.
  struct Shape {
    Mode mode;
    int hidden;
    bool bidirectional;
    int batch;
  };
  const Shape shapes[] = {{Mode::lstm, 512, false, 1}, {Mode::lstm, 1024, true, 16}, {Mode::gru, 256, false, 8},
                          {Mode::rnn_tanh, 2048, false, 4}};
  for (int i = 0; i < gpu::kProfileCount; ++i) {
    const gpu::DeviceProfile prof = gpu::device_profile(i);
    const int per_sm = profile_blocks_per_sm(prof);
    CAPTURE(prof.device.name);
    CHECK(per_sm >= 1);
    for (const Shape& sh : shapes) {
      RnnSpec spec;
      spec.mode = sh.mode;
      spec.input_size = 64;
      spec.hidden_size = sh.hidden;
      spec.direction = sh.bidirectional ? Direction::bidirectional : Direction::unidirectional;
      PlanOptions opt;
      opt.max_batch = sh.batch;
      opt.max_seq_len = 50;
      detail::PlanImpl p;
      REQUIRE(make_profile_plan(to_stack(spec), opt, prof, &p) == Status::ok);
      CHECK(std::string(p.kernel_name).find(prof.device.arch) != std::string::npos);
      const int k = gpu::bucket_index(sh.batch), units = p.gpu.persist_units[0][k];
      const int G = num_gates(sh.mode), dirs = sh.bidirectional ? 2 : 1;
      const std::string what = std::string(prof.device.name) + ": " + to_string(sh.mode) + " H=" + std::to_string(sh.hidden) +
                               (sh.bidirectional ? " bi" : "") + " B=" + std::to_string(sh.batch) + ": " +
                               (units ? std::to_string(units) + " units per block" : "per-step kernel");
      MESSAGE(what);
      if (units == 0) continue;
      const std::int64_t blocks = dirs * ((sh.hidden + units - 1) / units);
      const std::size_t smem = gpu::persistent_smem_bytes(G, gpu::kBuckets[k], units, p.layers[0].hidden_stride, sh.batch, 4);
      CHECK(static_cast<std::int64_t>(smem) <= prof.device.smem_optin);
      CHECK(blocks <= static_cast<std::int64_t>(prof.device.sm_count) *
                          gpu::modeled_blocks_per_sm(prof.device, gpu::kPersistentThreads, prof.persistent_registers,
                                                     static_cast<std::int64_t>(smem)));
    }
    // H = 512 at B = 1 on an H100: 128 blocks of 4 units, a 32 KiB slice of R each.
    if (i == 0) {
      RnnSpec spec;
      spec.input_size = spec.hidden_size = 512;
      detail::PlanImpl p;
      PlanOptions opt;
      REQUIRE(make_profile_plan(to_stack(spec), opt, prof, &p) == Status::ok);
      CHECK(gpu::persistent_units(p.gpu, 0, 1) == 4);
    }
    // A small network planned for the profile runs correctly in the emulator, at its warp size.
    Case c;
    c.stack.input_size = 12;
    c.stack.num_layers = 2;
    c.stack.layers[0] = layer(Mode::lstm, 24, true, {});
    c.stack.layers[1] = layer(Mode::gru, 20, false, {});
    c.T = 3;
    c.B = 3;
    c.lengths = true;
    EmuConfig cfg;
    cfg.profile = &prof;
    std::map<std::string, int> launches;
    check_case(c, cfg, 4200 + i, &launches);
    CHECK(count_prefix(launches, "persistent") > 0);
  }
}

namespace {

// A two-layer stack of `mode` with one poisoned input (t = 1, row `row`) through the reference and
// the emulated GPU (`cfg`; half_math: f16 weights and gpu_half_math, the matrix-unit step): NaN in
// exactly the same outputs of y and hy.
void check_nan_propagation(Mode mode, GruVariant variant, float poison, int B, int row, std::uint64_t seed,
                           const EmuConfig& cfg, bool half_math) {
  const int T = 4, I = 5, H = 7;
  StackSpec st;
  st.input_size = I;
  st.num_layers = 2;
  st.layers[0] = layer(mode, H, true, {}, variant);
  st.layers[1] = layer(mode, H, false, {}, variant);
  Rng rng(seed);
  const auto w = random_vector<float>(rng, param_count(st), 0.4);
  auto x = random_vector<float>(rng, static_cast<std::size_t>(T) * B * I, 1.0);
  x[(static_cast<std::size_t>(1) * B + row) * I + 2] = poison;
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.x = x.data();
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  opt.backend = Backend::reference;
  Outputs<float> want, got;
  REQUIRE(run_forward(st, opt, w, a, &want) == Status::ok);
  if (half_math) {
    opt.weight_dtype = DType::f16;
    opt.gpu_half_math = true;
  }
  std::map<std::string, int> launches;
  REQUIRE(run_emulated(st, opt, cfg, w, a, &got, &launches) == Status::ok);
  INFO(to_string(mode) << " " << to_string(variant) << " poison " << poison << " " << describe(cfg)
                       << (half_math ? " half math" : ""));
  if (half_math) CHECK(count_prefix(launches, "_mma_16x16") > 0);
  std::size_t nans = 0;
  for (std::size_t i = 0; i < want.y.size(); ++i) {
    nans += std::isnan(want.y[i]);
    CHECK(std::isnan(want.y[i]) == std::isnan(got.y[i]));
  }
  for (std::size_t i = 0; i < want.hy.size(); ++i) CHECK(std::isnan(want.hy[i]) == std::isnan(got.hy[i]));
  if (std::isnan(poison)) CHECK(nans > 0);
}

}  // namespace

TEST_CASE("emulated GPU forward: NaN and Inf give NaN where the reference does, in every cell and kernel") {
  const Mode modes[] = {Mode::lstm, Mode::gru, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  const GruVariant variants[] = {GruVariant::reset_after, GruVariant::reset_after, GruVariant::reset_before,
                                 GruVariant::reset_after, GruVariant::reset_after};
  const float poisons[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1e30f};
  // Named arrays, not braced lists: GCC 12 at -O3 for armv7 appears to hoist one loop's braced-list array out
  // of the outer loop and give its stack slot to the other's: `rec` read NaN bits (CI, qemu-arm).
  const gpu::Recurrence recurrences[] = {gpu::Recurrence::persistent, gpu::Recurrence::tiled};
  for (int m = 0; m < 5; ++m) {
    for (float poison : poisons)
      for (gpu::Recurrence rec : recurrences)
        check_nan_propagation(modes[m], variants[m], poison, 3, 1, 40 + m, config(32, rec), false);
    // The matrix-unit step (gpu_half_math, f16 weights, B = 9): NaN and Inf propagate through the
    // rounding and the MMA as in f32 (-1e30 is left out: it overflows f16, as documented).
    EmuConfig cfg = config(32, gpu::Recurrence::tiled);
    cfg.mma = true;
    for (int p = 0; p < 2; ++p) check_nan_propagation(modes[m], variants[m], poisons[p], 9, 4, 50 + m, cfg, true);
  }
}

TEST_CASE("a kernel's shared-memory limit is raised once per device, to the device's maximum") {
  // src/gpu/host/launcher.hpp raises the process-wide cudaFuncAttributeMaxDynamicSharedMemorySize through
  // gpu::raise_smem_limit_once; here the runtime is a fake: one attribute per device, which a
  // launch of `smem` bytes needs to be at least `smem`.
  constexpr int kOptin[2] = {227 * 1024, 99 * 1024};  // H100-like and a smaller device
  std::atomic<int> attribute[2];
  std::atomic<int> sets{0};
  for (auto& a : attribute) a = 48 * 1024;
  const auto query = [&](int device, int* bytes) {
    *bytes = kOptin[device];
    return Status::ok;
  };
  const auto set = [&](int device, int bytes) {
    attribute[device] = bytes;
    ++sets;
    return Status::ok;
  };
  // What per-launch setting got wrong: plan A (200 KiB) opts in, plan B (60 KiB) opts in, A launches.
  struct KernelA {};
  REQUIRE(gpu::raise_smem_limit_once<KernelA>(0, query, set) == Status::ok);
  REQUIRE(gpu::raise_smem_limit_once<KernelA>(0, query, set) == Status::ok);
  CHECK(attribute[0] >= 200 * 1024);
  CHECK(attribute[0] == kOptin[0]);
  CHECK(sets == 1);  // once per (kernel, device)
  REQUIRE(gpu::raise_smem_limit_once<KernelA>(1, query, set) == Status::ok);
  CHECK(attribute[1] == kOptin[1]);
  CHECK(sets == 2);

  // Many threads with different plans of another kernel: every launch finds its size allowed.
  struct KernelB {};
  attribute[0] = attribute[1] = 48 * 1024;
  sets = 0;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const int device = (t + i) & 1, smem = 48 * 1024 + 1 + (t * 7919 + i * 104729) % (kOptin[device] - 48 * 1024);
        if (gpu::raise_smem_limit_once<KernelB>(device, query, set) != Status::ok || attribute[device] < smem) ++refused;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(refused == 0);
  CHECK(attribute[0] == kOptin[0]);
  CHECK(attribute[1] == kOptin[1]);
  CHECK(sets >= 2);
  CHECK(sets <= 16);  // at most every thread's first call per device, all with the same value
}

TEST_CASE("a GPU forward refuses a packed buffer of another layout or weight type") {
  // The plan's fingerprint covers the GPU weight storage type, and forward reads the packed
  // header back before anything runs (gpu::check_packed), as the CPU backends read theirs.
  StackSpec st;
  st.input_size = 5;
  st.num_layers = 2;
  st.layers[0] = layer(Mode::lstm, 12, true, {});
  st.layers[1] = layer(Mode::gru, 8, false, {});
  EmuConfig cfg;
  detail::PlanImpl plans[3];
  const DType types[3] = {DType::f32, DType::f16, DType::bf16};
  for (int i = 0; i < 3; ++i) {
    PlanOptions opt;
    opt.max_batch = 3;
    opt.max_seq_len = 4;
    opt.weight_dtype = types[i];
    REQUIRE(make_gpu_plan(st, opt, cfg, &plans[i]) == Status::ok);
  }
  CHECK(plans[0].fingerprint != plans[1].fingerprint);
  CHECK(plans[0].fingerprint != plans[2].fingerprint);
  CHECK(plans[1].fingerprint != plans[2].fingerprint);
  CHECK(plans[1].packed_bytes == plans[2].packed_bytes);  // same layout, other element type: the fingerprint still differs

  Rng rng(5);
  std::vector<float> canonical(static_cast<std::size_t>(param_count(st)));
  for (float& v : canonical) v = static_cast<float>(rng.uniform(-0.5, 0.5));
  std::vector<float> x(static_cast<std::size_t>(4 * 3 * 5), 0.25f), y(static_cast<std::size_t>(4 * 3 * 8), -7.0f);
  ForwardArgs a;
  a.x = x.data();
  a.y = y.data();
  a.batch = 3;
  a.seq_len = 4;
  for (int packer = 0; packer < 3; ++packer)
    for (int runner = 0; runner < 3; ++runner) {
      const detail::PlanImpl& pp = plans[packer];
      const detail::PlanImpl& pr = plans[runner];
      AlignedBuffer packed(std::max(pp.packed_bytes, pr.packed_bytes)), ws(pr.ws.total);
      std::memset(packed.ptr, 0xff, packed.size);
      emu::Launcher ln(pp.gpu.target, cfg.blocks_per_sm);
      REQUIRE(emu::pack(ln, pp, pp.gpu, canonical.data(), packed.ptr) == Status::ok);
      const std::map<std::string, int> packing = ln.launches;
      const Status s = emu::forward(ln, pr, pr.gpu, packed.ptr, ws.ptr, a);
      CAPTURE(packer);
      CAPTURE(runner);
      if (packer == runner) {
        CHECK(s == Status::ok);
      } else {
        CHECK(s == Status::weights_not_packed);
        CHECK(ln.launches == packing);  // refused before any launch
        CHECK(std::string(last_error_detail()).find("pack_weights") != std::string::npos);
      }
    }
  // A buffer nothing packed (its bytes as a fresh allocation might hold).
  AlignedBuffer raw(plans[0].packed_bytes), ws(plans[0].ws.total);
  std::memset(raw.ptr, 0, raw.size);
  emu::Launcher ln(plans[0].gpu.target, cfg.blocks_per_sm);
  CHECK(emu::forward(ln, plans[0], plans[0].gpu, raw.ptr, ws.ptr, a) == Status::weights_not_packed);
  CHECK(ln.launches.empty());
}

TEST_CASE("a refused cooperative launch falls back to the per-step kernels") {
  // Plans made for the persistent kernel, run where the runtime refuses cooperative launches (as
  // under MPS): the same results as the reference, from the per-step kernels, for every cell.
  Rng rng(31);
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh}) {
    for (bool reset_before : {false, true}) {
      if (reset_before && mode != Mode::gru) continue;
      Case c;
      c.stack.input_size = 6;
      c.stack.num_layers = 2;
      c.stack.layers[0] = layer(mode, 10, true, {});
      c.stack.layers[1] = layer(mode, 7, false, {});
      if (reset_before) c.stack.layers[0].gru_variant = GruVariant::reset_before;
      c.T = 5;
      c.B = 3;
      EmuConfig cfg = config(32, gpu::Recurrence::persistent);
      std::map<std::string, int> launches;
      check_case(c, cfg, rng.next(), &launches);
      REQUIRE(count_prefix(launches, "persistent") > 0);  // the plan does choose the persistent kernel
      REQUIRE(count_prefix(launches, "step_tiled") == 0);
      cfg.refuse_cooperative = true;
      launches.clear();
      check_case(c, cfg, rng.next(), &launches);
      CHECK(count_prefix(launches, "persistent") == 0);
      CHECK(count_prefix(launches, "step_tiled") > 0);
    }
  }
  // The persistent kernel on the matrix units (gpu_half_math, B = 9) falls back to the matrix-unit step.
  const Case c = with_half_math(one_layer_case(Mode::lstm, 6, 10, true, 3, 9), DType::f16);
  EmuConfig cfg = config(32, gpu::Recurrence::persistent);
  cfg.mma = true;
  std::map<std::string, int> launches;
  check_case(c, cfg, rng.next(), &launches);
  CHECK(count_prefix(launches, "f16_lstm_recurrence_persistent_mma") == 1);
  cfg.refuse_cooperative = true;
  check_case(c, cfg, rng.next(), &launches);
  CHECK(count_prefix(launches, "persistent") == 0);
  CHECK(count_prefix(launches, "f16_lstm_step_mma_16x16") == c.T);
}

// ------------------------------------------------------------------------------------ the emulator itself

TEST_CASE("the emulator's detector reports the defective probes, naming kernel, buffer and threads") {
  if (!emu::detector::available()) {
    MESSAGE("no access instrumentation in this build (AddressSanitizer): the detector is not tested");
    return;
  }
  gpu::DeviceDescription f;
  f.warp_size = 32;
  f.sm_count = 2;
  struct Expect {
    emu::Probe probe;
    bool barrier;
    const char* report;  // null: none
  };
  const Expect cases[] = {
      {emu::Probe::smem_neighbour, true, nullptr},         {emu::Probe::smem_neighbour, false, "race in probe at shared memory+"},
      {emu::Probe::global_other_block, true, nullptr},     {emu::Probe::global_other_block, false, "race in probe at buf+"},
      {emu::Probe::grid_plain_load, true, "stale read in probe at buf+"},
      {emu::Probe::grid_coherent_load, true, nullptr},     {emu::Probe::same_value_writes, true, nullptr},
      {emu::Probe::same_value_writes, false, "race in probe at buf+"},
      {emu::Probe::grid_no_barrier, true, nullptr},        {emu::Probe::grid_no_barrier, false, "race in probe at buf+"},
  };
  const int blocks = 4, threads = 64;
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    for (const Expect& e : cases) {
      CAPTURE(static_cast<int>(e.probe));
      CAPTURE(e.barrier);
      CAPTURE(seed);
      std::vector<float> buf(static_cast<std::size_t>(blocks) * threads, 0.0f);
      Tracked tracked;
      tracked.buffer(buf.data(), sizeof(float) * buf.size(), "buf");
      emu::Launcher ln(f, 2, seed);
      REQUIRE(emu::run_probe(ln, e.probe, e.barrier, buf.data(), blocks, threads) == Status::ok);
      const std::size_t n = emu::detector::report_count();
      const std::vector<std::string> lines = emu::detector::take_reports();
      CHECK((n > 0) == (e.report != nullptr));
      if (e.report != nullptr && !lines.empty()) {
        INFO(lines[0]);
        CHECK(lines[0].rfind(e.report, 0) == 0);
        CHECK(lines[0].find("thread") != std::string::npos);
        CHECK(lines[0].find("block") != std::string::npos);
      }
    }
}

TEST_CASE("emulated GPU forward: wrapper stacks under several scheduling seeds and device shapes" * doctest::test_suite("long")) {
  // The same cases with other block and thread orders, and other co-resident capacities (which
  // change the persistent kernel's slices); the detector checks every run.
  Rng rng(515);
  int n = 0;
  for (Mode mode : {Mode::lstm, Mode::gru})
    for (int v : {1, 2}) {
      const Case c = wrapper_case(mode, v, rng);
      for (std::uint64_t seed : {11u, 12u, 13u}) {
        EmuConfig cfg = config(n % 2 ? 64 : 32, seed % 2 ? gpu::Recurrence::persistent : gpu::Recurrence::tiled);
        cfg.sched_seed = seed * 1000 + static_cast<std::uint64_t>(n);
        cfg.sm_count = 1 + n % 5;
        cfg.blocks_per_sm = 1 + n % 3;
        cfg.persist_threads = n % 3 == 0 ? 128 : gpu::kPersistentThreads;
        check_case(c, cfg, 7000 + static_cast<std::uint64_t>(n), nullptr);
        ++n;
      }
    }
}

TEST_CASE("emulated GPU forward at the device's block sizes with H >= 256 and a large T·B·H" * doctest::test_suite("long")) {
  struct Big {
    Mode mode;
    GruVariant variant;
    int H, I, T, B;
    bool bidirectional;
    gpu::Recurrence rec;
  };
  const Big bigs[] = {
      {Mode::lstm, GruVariant::reset_after, 256, 48, 3, 2, false, gpu::Recurrence::persistent},
      {Mode::gru, GruVariant::reset_before, 260, 40, 2, 3, true, gpu::Recurrence::persistent},
      {Mode::gru, GruVariant::reset_after, 256, 32, 5, 40, false, gpu::Recurrence::tiled},  // T·B·H = 51200
      {Mode::rnn_tanh, GruVariant::reset_after, 300, 20, 6, 70, false, gpu::Recurrence::tiled},
  };
  int i = 0;
  for (const Big& b : bigs) {
    Case c;
    c.stack.input_size = b.I;
    c.stack.num_layers = 1;
    c.stack.layers[0] = layer(b.mode, b.H, b.bidirectional, {}, b.variant);
    c.T = b.T;
    c.B = b.B;
    c.lengths = true;
    c.initial = i % 2 == 0;
    EmuConfig cfg = config(32, b.rec, i == 3 ? gpu::TileChoice::large : gpu::TileChoice::auto_select);
    cfg.sm_count = 8;  // 16 co-resident blocks of 256 threads for the persistent kernel
    cfg.smem = 227 * 1024;
    cfg.sched_seed = 90 + static_cast<std::uint64_t>(i);
    std::map<std::string, int> launches;
    check_case(c, cfg, 8000 + static_cast<std::uint64_t>(i), &launches);
    CHECK(count_prefix(launches, b.rec == gpu::Recurrence::persistent ? "persistent" : "tiled") > 0);
    ++i;
  }
}

namespace {

/// Runs case `c` on the emulator (no reference), with a mutation; returns the outputs, and the
/// number of detector reports in *found.
Outputs<float> run_mutant(const Case& c, const EmuConfig& cfg, std::uint64_t data_seed, const emu::Mutation& m,
                          std::map<emu::Site, std::set<std::string>>* census, std::size_t* found) {
  Rng rng(data_seed);
  StackSpec st = c.stack;
  st.dtype = DType::f32;
  const auto w = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.3);
  const auto x = random_vector<float>(rng, static_cast<std::size_t>(c.T) * c.B * st.input_size, 1.0);
  std::vector<std::int32_t> lengths(static_cast<std::size_t>(c.B));
  for (auto& l : lengths) l = rng.range(0, c.T);
  ForwardArgs a;
  a.batch = c.B;
  a.seq_len = c.T;
  a.x = x.data();
  a.seq_lengths = c.lengths ? lengths.data() : nullptr;
  PlanOptions opt;
  opt.max_batch = c.B;
  opt.max_seq_len = c.T;
  opt.weight_dtype = c.weights;
  opt.gpu_half_math = c.half_math;
  Outputs<float> out;
  REQUIRE(run_emulated(st, opt, cfg, w, a, &out, nullptr, m, census, found) == Status::ok);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}


}  // namespace

TEST_CASE("mutants: leaving out any barrier, grid barrier or coherent load is caught, or is a known survivor") {
  // Every synchronisation site the kernels reach (a census of ex.sync / ex.grid_sync /
  // ex.load_coherent calls by source line) is left out in turn, in every kernel that calls it,
  // over cases that reach every site (every cell, both recurrence kernels, several k chunks,
  // partial sums, several persistent slices, rows past their length). A mutant is caught when
  // the detector reports it or the outputs differ from the unmutated run's bits. Sites whose
  // removal is harmless with the launch shapes the schedules use are listed (by their source
  // text) with the reason; any other survivor fails.
  if (!emu::detector::available()) {
    MESSAGE("no access instrumentation in this build (AddressSanitizer): mutants not run");
    return;
  }
  struct Survivor {
    const char* text;  // part of the site's source line
    const char* why;
  };
  const char* const own_units =
      "a block of the persistent kernel owns the same units at every step, so the h it reads here is its own (the same "
      "thread's) write of the previous step; the per-step kernels read h written by an earlier launch";
  const Survivor survivors[] = {
      {"ex.sync();  // the partial-sum area is the tile area of the next row tile",
       "each block of the per-step kernel runs one row tile (grid.y = row tiles, at most 65535), so no next tile reuses the area"},
      {"ex.sync();  // the sums are the next row tile's partial-sum area",
       "each block of the direct per-step kernel runs one row tile (grid.y = row tiles, at most 65535), so no next tile "
       "reuses the area"},
      {"ex.sync();  // `pre` is the staging area of the next row tile",
       "each block of the matrix-unit step kernel runs one row tile (grid.y = row tiles, at most 65535), so no next tile "
       "reuses the area"},
      {"hn[u0 + j] = ex.load_coherent(hp + u0 + j);", own_units},
      {"d.rh[b * Hs + u0 + j] = r * ex.load_coherent(hp + u0 + j);", own_units},
      {"hnew[j] = (1.0f - z) * nn + z * ex.load_coherent(hp + u0 + j);", own_units},
  };
  std::vector<std::pair<Case, EmuConfig>> cases;
  const Mode modes[] = {Mode::lstm, Mode::gru, Mode::gru, Mode::rnn_tanh};
  const GruVariant variants[] = {GruVariant::reset_after, GruVariant::reset_after, GruVariant::reset_before,
                                 GruVariant::reset_after};
  for (int m = 0; m < 4; ++m)
    for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
      Case c;
      c.stack.input_size = 19;  // two k chunks of the projection GEMM
      c.stack.num_layers = 1;
      c.stack.layers[0] = layer(modes[m], 37, m % 2 == 0, {}, variants[m]);  // Hs = 40: two k chunks of a step tile
      c.T = 3;
      c.B = 5;
      c.lengths = true;
      EmuConfig cfg = config(32, r, m % 2 ? gpu::TileChoice::large : gpu::TileChoice::small);
      cfg.persist_threads = 64;
      cfg.sched_seed = static_cast<std::uint64_t>(m);
      cases.emplace_back(c, cfg);
      if (r == gpu::Recurrence::tiled) cases.emplace_back(c, config(m % 2 ? 64 : 32, r, gpu::TileChoice::direct));
    }
  // The matrix-unit kernels: one LSTM layer of 37 units under gpu_half_math (per step; the
  // persistent kernel on the matrix units also for the reset-before GRU).
  const auto add_matrix_unit_case = [&](int input_size, int T, int B, bool lengths, DType weights, int warp, bool tf32,
                                        gpu::Recurrence r = gpu::Recurrence::tiled, Mode mode = Mode::lstm,
                                        GruVariant variant = GruVariant::reset_after) {
    Case c;
    c.stack.input_size = input_size;
    c.stack.num_layers = 1;
    c.stack.layers[0] = layer(mode, 37, false, {}, variant);
    c.T = T;
    c.B = B;
    c.lengths = lengths;
    c.weights = weights;
    c.half_math = true;
    EmuConfig cfg = config(warp, r);
    cfg.mma = true;
    cfg.mma_tf32 = tf32;
    cases.emplace_back(c, cfg);
  };
  // the projection GEMM (f16; TF32 on NVIDIA only): two k chunks, two m and three n tiles
  for (int warp : {32, 64}) add_matrix_unit_case(40, 14, 5, false, DType::f16, warp, false);
  add_matrix_unit_case(40, 14, 5, false, DType::f32, 32, true);
  // the step kernel (TF32, then bf16): two k chunks, two unit tiles, padded rows
  add_matrix_unit_case(8, 2, 9, true, DType::f32, 32, true);
  for (int warp : {32, 64}) add_matrix_unit_case(8, 2, 9, true, DType::bf16, warp, false);
  // the persistent kernel on the matrix units: three blocks of 16 units, two k chunks, padded rows
  add_matrix_unit_case(8, 2, 9, true, DType::f16, 32, false, gpu::Recurrence::persistent);
  add_matrix_unit_case(8, 2, 9, true, DType::bf16, 64, false, gpu::Recurrence::persistent, Mode::gru, GruVariant::reset_before);
  std::map<emu::Site, std::set<std::string>> census;
  std::map<emu::Site, std::vector<std::size_t>> reached_by;  // the cases that reach a site
  std::vector<Outputs<float>> baseline;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::size_t found = 0;
    std::map<emu::Site, std::set<std::string>> mine;
    baseline.push_back(run_mutant(cases[i].first, cases[i].second, 100 + i, emu::Mutation(), &mine, &found));
    CHECK(found == 0);
    for (const auto& site : mine) {
      census[site.first].insert(site.second.begin(), site.second.end());
      reached_by[site.first].push_back(i);
    }
  }
  REQUIRE(census.size() >= 10);
  int killed_by_detector = 0, killed_by_results = 0, survived = 0;
  for (const auto& site : census) {
    const emu::Site& s = site.first;
    std::string kernels;
    for (const std::string& k : site.second) kernels += (kernels.empty() ? "" : ", ") + k;
    const std::string text = device_source_line("kernels.hpp", s.line);
    emu::Mutation m;
    m.kind = s.kind;
    m.line = s.line;
    std::string how;
    for (std::size_t i : reached_by[s]) {
      if (!how.empty()) break;
      std::size_t found = 0;
      const Outputs<float> out = run_mutant(cases[i].first, cases[i].second, 100 + i, m, nullptr, &found);
      if (found > 0) how = "detector";
      else if (!same_bits(out.y, baseline[i].y) || !same_bits(out.hy, baseline[i].hy) || !same_bits(out.cy, baseline[i].cy))
        how = "results";
    }
    const char* why = nullptr;
    for (const Survivor& sv : survivors)
      if (text.find(sv.text) != std::string::npos) why = sv.why;
    killed_by_detector += how == "detector";
    killed_by_results += how == "results";
    survived += how.empty();
    MESSAGE(std::string(emu::site_kind_name(s.kind)) << " at " << s.file << ":" << s.line << " (" << kernels << "): "
                                        << (how.empty() ? "SURVIVED" : "caught by the " + how) << " | " << text);
    if (how.empty()) CHECK_MESSAGE(why != nullptr, "an unexplained survivor");
    else CHECK_MESSAGE(why == nullptr, "a listed survivor is caught now: update the list");
  }
  MESSAGE("mutants: " << census.size() << " sites, " << killed_by_detector << " caught by the detector, " << killed_by_results
                      << " by the results only, " << survived << " survived");
}

// ---------------------------------------------------------------------------------- matrix units

namespace {

/// An emulated device with matrix units (or without) at a warp size.
gpu::DeviceDescription mma_device(int warp, bool mma) {
  gpu::DeviceDescription d;
  d.sm_count = 4;
  d.warp_size = warp;
  d.mma = mma ? 1 : 0;
  d.mma_tf32 = mma && warp == 32 ? 1 : 0;  // TF32 is NVIDIA's (warp 32)
  std::snprintf(d.arch, sizeof d.arch, "emu%d", warp);
  return d;
}

/// `n` random 16-bit values of f16 (bf16 false) or bf16 in [-scale, scale], and their f32 values.
std::vector<std::uint16_t> random_halves(Rng& rng, std::size_t n, double scale, bool bf16, std::vector<float>* values) {
  std::vector<std::uint16_t> bits(n);
  values->resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(rng.uniform(-scale, scale));
    bits[i] = bf16 ? detail::f32_to_bf16(f) : detail::f32_to_f16(f);
    (*values)[i] = bf16 ? detail::bf16_to_f32(bits[i]) : detail::f16_to_f32(bits[i]);
  }
  return bits;
}

/// Largest |D - (A·B + C)| of the probe (float64 reference) and the largest |reference| value.
double mma_probe_error(int warp, bool bf16, emu::MmaPlacement placement, std::uint64_t seed, double* scale) {
  Rng rng(seed);
  std::vector<float> av, bv;
  const std::vector<std::uint16_t> a = random_halves(rng, 256, 2.0, bf16, &av), b = random_halves(rng, 256, 2.0, bf16, &bv);
  const std::vector<float> c = random_vector<float>(rng, 256, 1.0);
  std::vector<float> d(256, std::numeric_limits<float>::quiet_NaN());
  emu::Launcher ln(mma_device(warp, true), 1, seed);
  Tracked tracked;
  tracked.buffer(d.data(), sizeof(float) * d.size(), "d");
  REQUIRE(emu::mma_probe(ln, a.data(), b.data(), c.data(), d.data(), bf16, placement) == Status::ok);
  Tracked::check("mma probe");
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
  double err = 0;
  *scale = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double ref = c[m * 16 + n];
      for (int k = 0; k < 16; ++k) ref += static_cast<double>(av[m * 16 + k]) * bv[k * 16 + n];
      err = std::max(err, std::fabs(d[m * 16 + n] - ref));  // NaN (an element never written) fails below
      if (std::isnan(d[m * 16 + n])) err = std::numeric_limits<double>::infinity();
      *scale = std::max(*scale, std::fabs(ref));
    }
  return err;
}

}  // namespace

TEST_CASE("the matrix-unit op in the vendors' fragment layouts computes A·B + C at warp 32 and 64") {
  // mma_coord (the kernels' statement of the layouts) against the emulator's own model (mma_owner):
  // with the vendor's placement the product is exact up to f32 sums (16 exact products of 16-bit
  // inputs); with any wrong placement of A the result is wrong, so the layout is really checked.
  for (int warp : {32, 64})
    for (bool bf16 : {false, true}) {
      CAPTURE(warp);
      CAPTURE(bf16);
      double scale = 0;
      const double err = mma_probe_error(warp, bf16, emu::MmaPlacement::vendor, 7 + warp + bf16, &scale);
      CHECK(err <= 1e-6 * scale);
      for (emu::MmaPlacement wrong : {emu::MmaPlacement::swap_lanes, emu::MmaPlacement::a_transposed, emu::MmaPlacement::other_vendor}) {
        CAPTURE(static_cast<int>(wrong));
        CHECK(mma_probe_error(warp, bf16, wrong, 7 + warp + bf16, &scale) > 1e-2 * scale);
      }
    }
}

TEST_CASE("the emulator refuses a matrix-unit kernel on a device without matrix units") {
  std::vector<std::uint16_t> a(256, 0), b(256, 0);
  std::vector<float> c(256, 0.0f), d(256, 0.0f);
  emu::Launcher ln(mma_device(32, false), 1);
  CHECK(emu::mma_probe(ln, a.data(), b.data(), c.data(), d.data(), false, emu::MmaPlacement::vendor) == Status::device);
  REQUIRE(ln.errors.size() == 1);
  CHECK(ln.errors[0].find("without matrix units") != std::string::npos);
}

TEST_CASE("TF32 rounding: to nearest, ties away from zero, at 10 mantissa bits (cvt.rna.tf32.f32)") {
  const auto bits = [](float f) { return detail::f32_to_bits(f); };
  const auto round = [](float f) { return detail::tf32_to_f32(detail::f32_to_tf32(f)); };
  const float ulp = std::ldexp(1.0f, -10);  // TF32's unit at 1
  CHECK(round(1.0f + ulp / 2) == 1.0f + ulp);  // a tie goes away from zero (to even would give 1)
  CHECK(round(-(1.0f + ulp / 2)) == -(1.0f + ulp));
  CHECK(round(1.0f + ulp / 2 - std::ldexp(1.0f, -23)) == 1.0f);  // below the tie: down
  CHECK(round(1.0f + 3 * ulp / 2) == 1.0f + 2 * ulp);
  CHECK(round(2.0f - ulp / 4) == 2.0f);  // a carry into the exponent
  CHECK(std::isinf(round(std::numeric_limits<float>::max())));  // past the largest TF32
  CHECK(round(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(round(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(detail::tf32_to_f32(detail::f32_to_tf32(detail::bits_to_f32(0x7f800001u)))));  // payload in the low bits only
  CHECK(bits(round(std::ldexp(1.0f, -149))) == 0u);  // the smallest subnormal: below half a TF32 unit
  CHECK(bits(round(std::ldexp(1.0f, -137))) == 0x2000u);  // subnormal tie: away
  CHECK((detail::f32_to_tf32(3.14159265f) & 0x1fffu) == 0u);
}

namespace {

/// Largest |D - (Ã·B̃ + C)| of the TF32 probe (float64 reference of the TF32-rounded operands; the
/// probe is given f32 patterns rounded by detail::f32_to_tf32) and the largest |reference| value.
double mma_tf32_probe_error(emu::MmaPlacement placement, std::uint64_t seed, double* scale) {
  Rng rng(seed);
  const std::vector<float> af = random_vector<float>(rng, 128, 2.0), bf = random_vector<float>(rng, 128, 2.0);
  const std::vector<float> c = random_vector<float>(rng, 256, 1.0);
  std::vector<std::uint32_t> a(128), b(128);
  for (int i = 0; i < 128; ++i) a[i] = detail::f32_to_tf32(af[i]), b[i] = detail::f32_to_tf32(bf[i]);
  std::vector<float> d(256, std::numeric_limits<float>::quiet_NaN());
  emu::Launcher ln(mma_device(32, true), 1, seed);
  Tracked tracked;
  tracked.buffer(d.data(), sizeof(float) * d.size(), "d");
  REQUIRE(emu::mma_tf32_probe(ln, a.data(), b.data(), c.data(), d.data(), placement) == Status::ok);
  Tracked::check("mma tf32 probe");
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
  double err = 0;
  *scale = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double ref = c[m * 16 + n];
      for (int k = 0; k < 8; ++k) ref += static_cast<double>(detail::tf32_to_f32(a[m * 8 + k])) * detail::tf32_to_f32(b[k * 16 + n]);
      err = std::max(err, std::fabs(d[m * 16 + n] - ref));
      if (std::isnan(d[m * 16 + n])) err = std::numeric_limits<double>::infinity();
      *scale = std::max(*scale, std::fabs(ref));
    }
  return err;
}

}  // namespace

TEST_CASE("the TF32 matrix-unit op (NVIDIA m16n8k8 twice) computes A·B + C in its fragment layout at warp 32") {
  // mma_coord_tf32 (the kernels' statement of PTX's m16n8k8 .tf32 layout) against the emulator's own
  // model (mma_owner_tf32): exact up to f32 sums with the PTX placement (8 exact products of TF32
  // inputs); wrong with lanes swapped, A's 8 × 8 blocks transposed, or the f16 op's layout.
  double scale = 0;
  const double err = mma_tf32_probe_error(emu::MmaPlacement::vendor, 41, &scale);
  CHECK(err <= 1e-6 * scale);
  MESSAGE("TF32 op: largest error " << err << " at largest |D| " << scale);
  for (emu::MmaPlacement wrong : {emu::MmaPlacement::swap_lanes, emu::MmaPlacement::a_transposed, emu::MmaPlacement::f16_layout}) {
    CAPTURE(static_cast<int>(wrong));
    CHECK(mma_tf32_probe_error(wrong, 41, &scale) > 1e-2 * scale);
  }
  // A device whose matrix units take no TF32 (AMD) refuses the kernel.
  std::vector<std::uint32_t> a(128, 0), b(128, 0);
  std::vector<float> c(256, 0.0f), d(256, 0.0f);
  gpu::DeviceDescription amd = mma_device(32, true);
  amd.mma_tf32 = 0;
  emu::Launcher ln(amd, 1);
  CHECK(emu::mma_tf32_probe(ln, a.data(), b.data(), c.data(), d.data(), emu::MmaPlacement::vendor) == Status::device);
  REQUIRE(ln.errors.size() == 1);
  CHECK(ln.errors[0].find("without TF32") != std::string::npos);
}

namespace {

/// One projection GEMM problem: proj [M = T·B][N = G·H] = x [T][B][K] · Wᵀ + bias, W [N][Kp] in WT bits.
struct GemmProblem {
  int T, B, K, G, H;
  bool batch_major;
};

/// Runs the projection of `pr` with `weights` on the emulated device (mma: the matrix-unit kernel,
/// else the f32 tiled one) and checks it. The matrix-unit result must match a float64 reference of
/// x rounded to the weight type within f32 summation error (1e-5 of Σ|x̃||W|), and the f32 kernel
/// within the x rounding's bound (2^-11 (f16) or 2^-8 (bf16) of Σ|x||W|, plus the same 1e-5).
double check_gemm(const GemmProblem& pr, int warp, int weights) {
  const bool bf16 = weights == gpu::kWeightBF16, f32 = weights == gpu::kWeightF32;
  const int M = pr.T * pr.B, N = pr.G * pr.H, Kp = (pr.K + 3) / 4 * 4;
  Rng rng(static_cast<std::uint64_t>(M * 131 + N * 7 + pr.K + warp + weights));
  std::vector<float> wv;  // the weights' values (f32: as stored; the TF32 kernel rounds them)
  std::vector<std::uint16_t> w = random_halves(rng, static_cast<std::size_t>(N) * Kp, 1.0 / std::sqrt(pr.K), bf16, &wv);
  if (f32) wv = random_vector<float>(rng, static_cast<std::size_t>(N) * Kp, 1.0 / std::sqrt(pr.K));
  for (int n = 0; n < N; ++n)
    for (int k = pr.K; k < Kp; ++k) w[static_cast<std::size_t>(n) * Kp + k] = 0, wv[static_cast<std::size_t>(n) * Kp + k] = 0.0f;
  const std::vector<float> x = random_vector<float>(rng, static_cast<std::size_t>(M) * pr.K, 1.0);
  const std::vector<float> bias = random_vector<float>(rng, static_cast<std::size_t>(N), 0.5);
  gpu::LayerArgs a;
  std::memset(&a, 0, sizeof a);
  a.gates = pr.G;
  a.hidden = pr.H;
  a.batch = pr.B;
  a.steps = pr.T;
  a.in_size = pr.K;
  a.in_pad = Kp;
  a.dirs = 1;
  gpu::DirArgs& d = a.dir[0];
  d.x = x.data();
  d.x_st = pr.batch_major ? pr.K : static_cast<std::int64_t>(pr.B) * pr.K;  // x [T][B][K] or [B][T][K]
  d.x_sb = pr.batch_major ? static_cast<std::int64_t>(pr.T) * pr.K : pr.K;
  d.w = f32 ? static_cast<const void*>(wv.data()) : static_cast<const void*>(w.data());
  d.bias = bias.data();
  const auto tf32 = [](float v) { return detail::tf32_to_f32(detail::f32_to_tf32(v)); };
  const auto round_x = [&](float v) {
    return f32 ? tf32(v) : bf16 ? detail::bf16_to_f32(detail::f32_to_bf16(v)) : detail::f16_to_f32(detail::f32_to_f16(v));
  };
  // x's rounding, the f32 kernel's distance from the rounded reference (f32 weights: x and W, TF32)
  const double u = bf16 ? 1.0 / 256 : f32 ? 2.0 / 2048 : 1.0 / 2048;
  double worst_mma = 0;
  for (bool mma : {true, false}) {
    CAPTURE(mma);
    std::vector<float> proj(static_cast<std::size_t>(M) * N, std::numeric_limits<float>::quiet_NaN());
    d.proj = proj.data();
    emu::Launcher ln(mma_device(warp, true), 2, 11);
    Tracked tracked;
    tracked.buffer(proj.data(), sizeof(float) * proj.size(), "proj");
    REQUIRE(emu::proj_gemm(ln, a, weights, mma) == Status::ok);
    Tracked::check(mma ? "mma gemm" : "f32 gemm");
    for (const std::string& e : ln.errors) FAIL_CHECK(e);
    double worst = 0;  // the largest error as a fraction of its bound
    for (int m = 0; m < M; ++m) {
      const int t = m / pr.B, b = m % pr.B;
      const float* xr = x.data() + t * d.x_st + b * d.x_sb;
      for (int n = 0; n < N; ++n) {
        double ref = bias[n], mag = std::fabs(bias[n]), mag_exact = 0;
        for (int k = 0; k < pr.K; ++k) {
          const double w_exact = wv[static_cast<std::size_t>(n) * Kp + k], wk = f32 ? tf32(static_cast<float>(w_exact)) : w_exact;
          ref += static_cast<double>(round_x(xr[k])) * wk;
          mag += std::fabs(round_x(xr[k]) * wk);
          mag_exact += std::fabs(xr[k] * w_exact);
        }
        const double bound = 1e-5 * mag + (mma ? 0.0 : u * mag_exact) + 1e-30;
        const double got = proj[static_cast<std::size_t>(m) * N + n];
        worst = std::isnan(got) ? INFINITY : std::max(worst, std::fabs(got - ref) / bound);
      }
    }
    CHECK(worst <= 1.0);
    if (mma) worst_mma = worst;
  }
  return worst_mma;
}

}  // namespace

TEST_CASE("the matrix-unit projection GEMM matches the float64 reference with x rounded to the weight type") {
  // Edges in every dimension (M, N, K not multiples of 16 or of the 64 × 64 tile), a K of one
  // chunk and of several, both layouts of x, f16 and bf16, warp 32 (NVIDIA) and 64 (AMD).
  const GemmProblem problems[] = {{3, 5, 23, 4, 9, false},   {7, 11, 70, 3, 43, true}, {1, 1, 1, 1, 1, false},
                                  {2, 33, 32, 4, 16, false}, {5, 13, 100, 1, 130, true}};
  for (int warp : {32, 64})
    for (int weights : {static_cast<int>(gpu::kWeightF16), static_cast<int>(gpu::kWeightBF16)})
      for (const GemmProblem& pr : problems) {
        CAPTURE(warp);
        CAPTURE(weights);
        CAPTURE(pr.T * pr.B);
        CAPTURE(pr.G * pr.H);
        CAPTURE(pr.K);
        check_gemm(pr, warp, weights);
      }
}

TEST_CASE("the TF32 projection GEMM matches the float64 reference with x and W rounded to TF32") {
  // The same edge shapes as the f16 / bf16 GEMM, f32 weights, warp 32 (TF32 is NVIDIA's): within
  // f32 summation error (1e-5 of Σ|x̃||W̃|) of the rounded operands' exact product; the f32 kernel
  // within 2 · 2^-11 of Σ|x||W| of the same reference (the two roundings).
  const GemmProblem problems[] = {{3, 5, 23, 4, 9, false},   {7, 11, 70, 3, 43, true}, {1, 1, 1, 1, 1, false},
                                  {2, 33, 32, 4, 16, false}, {5, 13, 100, 1, 130, true}};
  double worst = 0;
  for (const GemmProblem& pr : problems) {
    CAPTURE(pr.T * pr.B);
    CAPTURE(pr.G * pr.H);
    CAPTURE(pr.K);
    worst = std::max(worst, check_gemm(pr, 32, gpu::kWeightF32));
  }
  MESSAGE("TF32 GEMM: largest error " << worst << " of the bound 1e-5 * sum |x~||W~|");
}

TEST_CASE("gpu_half_math: the planner picks the matrix units only with 16-bit weights on a device that has them" * doctest::test_suite("long")) {
  Case c;
  c.stack.input_size = 40;
  c.stack.num_layers = 2;
  c.stack.layers[0] = layer(Mode::lstm, 36, true, {});
  c.stack.layers[1] = layer(Mode::gru, 20, false, {});
  c.T = 4;
  c.B = 5;
  c.lengths = true;
  c.initial = true;
  for (int i : {0, 2}) {  // H100 (warp 32), MI250X (warp 64)
    const gpu::DeviceProfile prof = gpu::device_profile(i);
    for (DType wt : {DType::f16, DType::bf16})
      for (bool half : {false, true}) {
        CAPTURE(prof.device.name);
        CAPTURE(to_string(wt));
        CAPTURE(half);
        c.weights = wt;
        c.half_math = half;
        // x rounded to the weight type: f16 keeps 11 bits, bf16 8 (docs/gpu.md, "Tensor cores").
        c.tolerance = half ? half_math_tolerance(wt) : 1e-5;
        EmuConfig cfg;
        cfg.profile = &prof;
        std::map<std::string, int> launches;
        check_case(c, cfg, 4300 + i, &launches);
        CHECK(count_prefix(launches, "proj_gemm_mma") == (half ? 2 : 0));
        CHECK(count_prefix(launches, "f32_rnn_proj_gemm_tiled") == (half ? 0 : 2));
      }
  }
  // f32 weights: TF32 on the H100 (tested below), the f32 kernel on AMD; a device without matrix
  // units (RDNA): the f32 kernel, whatever the option.
  PlanOptions opt;
  opt.gpu_half_math = true;
  opt.weight_dtype = DType::f32;
  detail::PlanImpl p;
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(0), &p) == Status::ok);
  CHECK(p.gpu.mma_proj == 1);
  CHECK(p.gpu.mma_step == 1);
  CHECK(std::string(p.kernel_name) == "f32_rnn_tf32__cuda_sm_90");
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(2), &p) == Status::ok);
  CHECK(p.gpu.mma_proj == 0);
  opt.weight_dtype = DType::f16;
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(0), &p) == Status::ok);
  CHECK(p.gpu.mma_proj == 1);
  CHECK(std::string(p.kernel_name) == "f32_rnn_f16w_mma__cuda_sm_90");
  gpu::DeviceProfile rdna = gpu::device_profile(2);
  rdna.device.mma = 0;
  std::snprintf(rdna.device.arch, sizeof rdna.device.arch, "gfx1030");
  rdna.device.warp_size = 32;
  REQUIRE(make_profile_plan(c.stack, opt, rdna, &p) == Status::ok);
  CHECK(p.gpu.mma_proj == 0);
  c.weights = DType::f16;
  c.half_math = true;
  c.tolerance = 1e-5;  // unchanged numerics there
  EmuConfig cfg;
  cfg.profile = &rdna;
  std::map<std::string, int> launches;
  check_case(c, cfg, 4310, &launches);
  CHECK(count_prefix(launches, "proj_gemm_mma") == 0);
}

TEST_CASE("the per-step f32 kernel: auto is the direct one on NVIDIA profiles, a staged tile on AMD ones, a forced tile stays") {
  // DeviceDescription::direct_step (rnncore_gpu_arch_prefers_direct_step on a real device): the H200
  // timed f32_rnn_step_direct faster than the staged tiles (bench/results/gpu_h200_2026-11-30/).
  Case c;
  c.stack.input_size = 8;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(Mode::lstm, 16, false, {});
  for (int i = 0; i < gpu::kProfileCount; ++i) {
    const gpu::DeviceProfile prof = gpu::device_profile(i);
    CAPTURE(prof.device.name);
    const bool nvidia = std::string(prof.device.arch).rfind("sm_", 0) == 0;
    CHECK(prof.device.direct_step == (nvidia ? 1 : 0));
    for (const gpu::TileChoice forced : {gpu::TileChoice::auto_select, gpu::TileChoice::small, gpu::TileChoice::large}) {
      gpu::DescribedDevice on;
      on.device = prof.device;
      on.registers = prof.persistent_registers;
      on.choices.tile = forced;
      detail::PlanImpl p;
      REQUIRE(plan_for(c.stack, PlanOptions(), on, &p) == Status::ok);
      const bool direct = nvidia && forced == gpu::TileChoice::auto_select;
      CHECK(p.gpu.tile == (direct ? gpu::TileChoice::direct : forced));
    }
  }
}

TEST_CASE("gpu_half_math with f32 weights: TF32 projections on the H100 and A100, f32 on MI250X and MI300X") {
  // Whole forwards (two layers, both directions, lengths, initial states; B = 3: the step in f32) against
  // the f64 reference within half_math_tolerance(f32) = 4e-3 on the H100 profile, where the TF32
  // GEMM must run; on the MI250X one the plan keeps the f32 GEMM and f32 accuracy (1e-5). The
  // A100 and MI300X plans make the same choices.
  Case c;
  c.stack.input_size = 40;
  c.stack.num_layers = 2;
  c.stack.layers[0] = layer(Mode::lstm, 20, true, {});  // K = 40: two k chunks of the GEMM
  c.stack.layers[1] = layer(Mode::gru, 12, false, {});
  c.T = 3;
  c.B = 3;
  c.lengths = true;
  c.initial = true;
  c.weights = DType::f32;
  c.half_math = true;
  double worst = 0;
  for (int i : {0, 2}) {  // H100, MI250X run; A100 and MI300X are planned for below
    const gpu::DeviceProfile prof = gpu::device_profile(i);
    CAPTURE(prof.device.name);
    const bool nvidia = prof.device.warp_size == 32;
    c.tolerance = nvidia ? half_math_tolerance(DType::f32) : 1e-5;
    EmuConfig cfg;
    cfg.profile = &prof;
    std::map<std::string, int> launches;
    g_forward_worst = 0;
    check_case(c, cfg, 4400 + static_cast<std::uint64_t>(i), &launches);
    if (nvidia) worst = std::max(worst, g_forward_worst);
    CHECK(count_prefix(launches, "tf32_rnn_proj_gemm_mma_64x64") == (nvidia ? 2 : 0));
    CHECK(count_prefix(launches, "f32_rnn_proj_gemm_tiled") == (nvidia ? 0 : 2));
    CHECK(count_prefix(launches, "_mma_16x16") == 0);
  }
  MESSAGE("TF32 forwards: largest relative error " << worst << " (tolerance " << half_math_tolerance(DType::f32) << ")");
  PlanOptions opt;
  opt.gpu_half_math = true;
  opt.weight_dtype = DType::f32;
  for (int i = 0; i < gpu::kProfileCount; ++i) {
    detail::PlanImpl p;
    REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(i), &p) == Status::ok);
    CHECK(p.gpu.mma_proj == (i < 2 ? 1 : 0));  // H100, A100: TF32; MI250X, MI300X: none
    CHECK(p.gpu.mma_step == (i < 2 ? 1 : 0));
  }
}

TEST_CASE("gpu_half_math with f32 weights: CudnnLSTM-style random cases with TF32 projections on the H100 profile") {
  Rng rng(4444);
  double worst = 0;
  const gpu::DeviceProfile h100 = gpu::device_profile(0);
  for (int i = 0; i < 3; ++i) {
    Case r = random_case(rng);
    r.weights = DType::f32;
    r.half_math = true;
    r.tolerance = half_math_tolerance(DType::f32);
    EmuConfig cfg;
    cfg.profile = &h100;
    std::map<std::string, int> launches;
    g_forward_worst = 0;
    check_case(r, cfg, 6600 + static_cast<std::uint64_t>(i), &launches);
    worst = std::max(worst, g_forward_worst);
    if (!uses_skip_input(r.stack) || r.stack.num_layers > 1) CHECK(count_prefix(launches, "tf32_rnn_proj_gemm_mma_64x64") > 0);
  }
  MESSAGE("TF32 random forwards: largest relative error " << worst);
}

TEST_CASE("emulated GPU forward with gpu_half_math: CudnnLSTM-style random cases on the matrix units") {
  // The cases tests/gpu/test_gpu_device.cpp runs on a device with the option, here on the H100 and
  // MI250X profiles (warp 32 and 64): the same tolerance holds.
  Rng rng(4343);
  for (int i = 0; i < 16; ++i) {
    Case c = random_case(rng);
    c.weights = i % 2 ? DType::bf16 : DType::f16;
    c.half_math = true;
    c.tolerance = half_math_tolerance(c.weights);
    const gpu::DeviceProfile prof = gpu::device_profile(i % 4 < 2 ? 0 : 2);
    EmuConfig cfg;
    cfg.profile = &prof;
    std::map<std::string, int> launches;
    check_case(c, cfg, 6500 + static_cast<std::uint64_t>(i), &launches);
    if (!uses_skip_input(c.stack) || c.stack.num_layers > 1) CHECK(count_prefix(launches, "proj_gemm_mma") > 0);
  }
}

namespace {

/// Every cell kind, for the matrix-unit step tests.
struct StepCell {
  Mode mode;
  GruVariant variant;
};
const StepCell kStepCells[] = {{Mode::lstm, GruVariant::reset_after},
                               {Mode::gru, GruVariant::reset_after},
                               {Mode::gru, GruVariant::reset_before},
                               {Mode::rnn_tanh, GruVariant::reset_after},
                               {Mode::rnn_relu, GruVariant::reset_after}};

/// One layer of `cell` (I = 11, T = 3) at batch B and width H with gpu_half_math and `weights`,
/// planned for `prof` with the per-step recurrence forced where the persistent kernel would take
/// the batch (the auto choice with `persistent`), against the f64 reference within half_math_tolerance; case `i` varies direction,
/// lengths and initial states. Returns the largest relative error; the launches go to *launches.
double check_mma_step_case(const StepCell& cell, int B, int H, DType weights, bool batch_major, int i,
                           std::uint64_t sched_seed, std::uint64_t data_seed, const gpu::DeviceProfile& prof,
                           std::map<std::string, int>* launches, bool persistent = false) {
  Case c;
  c.stack.input_size = 11;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(cell.mode, H, i % 3 != 1, {}, cell.variant);
  c.T = 3;
  c.B = B;
  c.lengths = i % 2 == 0;
  c.initial = i % 4 < 2;
  c.batch_major = batch_major;
  c.weights = weights;
  c.half_math = true;
  c.tolerance = half_math_tolerance(weights);
  EmuConfig cfg;
  cfg.profile = &prof;
  cfg.recurrence = B <= gpu::kAutoPersistentMaxBatch && !persistent ? gpu::Recurrence::tiled : gpu::Recurrence::auto_select;
  cfg.sched_seed = sched_seed;
  g_forward_worst = 0;
  check_case(c, cfg, data_seed, launches);
  return g_forward_worst;
}

/// Launches of the step kernel per time step: two for the reset-before GRU (its phases).
int step_launches(const StepCell& cell) { return cell.variant == GruVariant::reset_before && cell.mode == Mode::gru ? 2 : 1; }

}  // namespace

TEST_CASE("emulated GPU forward with gpu_half_math at batch >= 8: the per-step recurrence on the matrix units, every cell") {
  // Every cell at B = 8, 9, 16, 33 (one, two and three 16-row tiles, rows of padding), H not a
  // multiple of 16 (partial unit tiles, and Hs = 40: two k chunks), both directions, lengths and
  // initial states, f16 and bf16, on the H100 (warp 32) and MI250X (warp 64) profiles, against the
  // f64 reference with the tolerances of the matrix-unit projection (x and h rounded alike). The
  // per-step recurrence is forced where the persistent kernel would run the batch (B <= 16).
  const int batches[] = {8, 9, 16, 33};
  double worst[2] = {0, 0};  // f16, bf16
  int i = 0;
  for (const StepCell& cell : kStepCells)
    for (int B : batches) {
      const DType weights = i % 3 == 2 ? DType::bf16 : DType::f16;
      const gpu::DeviceProfile prof = gpu::device_profile(i % 2 ? 2 : 0);
      std::map<std::string, int> launches;
      const double err = check_mma_step_case(cell, B, i % 2 ? 37 : 20, weights, i % 5 == 3, i, 70 + static_cast<std::uint64_t>(i),
                                             7100 + static_cast<std::uint64_t>(i), prof, &launches);
      worst[weights == DType::bf16] = std::max(worst[weights == DType::bf16], err);
      CHECK(count_prefix(launches, "_mma_16x16") == 3 * step_launches(cell));  // T = 3
      CHECK(count_prefix(launches, "persistent") + count_prefix(launches, "_tiled") - count_prefix(launches, "proj_gemm_tiled") == 0);
      ++i;
    }
  MESSAGE("largest relative error: f16 " << worst[0] << " (tolerance " << half_math_tolerance(DType::f16) << "), bf16 "
                                         << worst[1] << " (tolerance " << half_math_tolerance(DType::bf16) << ")");
}

TEST_CASE("gpu_half_math with f32 weights at batch >= 8: the per-step recurrence in TF32 on the H100 profile, every cell") {
  // Every cell at B = 9 or 33 (one or three row tiles with padding; the LSTM at both), H = 20 and
  // 37, lengths, initial states, uni- and bidirectional, against the f64 reference within
  // half_math_tolerance(f32) (h and R rounded to TF32 as x and W are), checking that the TF32 step
  // ran at every step.
  const gpu::DeviceProfile prof = gpu::device_profile(0);
  double worst = 0;
  int i = 0;
  for (const StepCell& cell : kStepCells)
    for (int B : {9, 33}) {
      if (i / 2 > 0 && (B == 33) != (i / 2 % 2 == 0)) {  // past the LSTM: one batch per cell, alternating
        ++i;
        continue;
      }
      std::map<std::string, int> launches;
      worst = std::max(worst, check_mma_step_case(cell, B, i % 4 < 2 ? 37 : 20, DType::f32, false, i,
                                                  80 + static_cast<std::uint64_t>(i), 7200 + static_cast<std::uint64_t>(i),
                                                  prof, &launches));
      CHECK(count_prefix(launches, "tf32_") - count_prefix(launches, "tf32_rnn_proj_gemm") == 3 * step_launches(cell));
      CHECK(count_prefix(launches, "tf32_rnn_proj_gemm_mma_64x64") == 1);
      ++i;
    }
  MESSAGE("TF32 step: largest relative error " << worst << " (tolerance " << half_math_tolerance(DType::f32) << ")");
}

TEST_CASE("gpu_half_math: the recurrence takes the matrix units from batch 8, the persistent kernel too") {
  // The run's batch decides (the plan's max_batch is B + 1): B = 7 keeps the f32 per-step kernel
  // and the matrix-unit projection; at B = 8 the auto choice is the persistent kernel on the matrix
  // units (its slices fit), the per-step one takes them as well.
  Case c;
  c.stack.input_size = 9;
  c.stack.num_layers = 2;
  c.stack.layers[0] = layer(Mode::lstm, 21, true, {});
  c.stack.layers[1] = layer(Mode::gru, 18, false, {}, GruVariant::reset_before);
  c.T = 3;
  c.B = 7;
  c.weights = DType::f16;
  c.half_math = true;
  c.tolerance = half_math_tolerance(c.weights);
  const gpu::DeviceProfile prof = gpu::device_profile(0);
  EmuConfig cfg;
  cfg.profile = &prof;
  cfg.recurrence = gpu::Recurrence::tiled;
  std::map<std::string, int> launches;
  check_case(c, cfg, 7300, &launches);
  CHECK(count_prefix(launches, "_mma_16x16") == 0);
  // (the H100 profile's per-step f32 kernel is the direct one: DeviceDescription::direct_step)
  CHECK(count_prefix(launches, "step_direct") + count_prefix(launches, "phase1_direct") == 2 * c.T);
  CHECK(count_prefix(launches, "proj_gemm_mma") == 2);
  c.B = 8;
  cfg.recurrence = gpu::Recurrence::auto_select;
  check_case(c, cfg, 7301, &launches);
  CHECK(count_prefix(launches, "_mma_16x16") == 0);
  CHECK(count_prefix(launches, "f16_lstm_recurrence_persistent_mma") == 1);
  CHECK(count_prefix(launches, "f16_gru_reset_before_recurrence_persistent_mma") == 1);
  CHECK(count_prefix(launches, "recurrence_persistent") == 2);
  c.B = 7;  // below 8 rows the f32 persistent kernel keeps the batch
  check_case(c, cfg, 7302, &launches);
  CHECK(count_prefix(launches, "persistent_mma") == 0);
  CHECK(count_prefix(launches, "f32_lstm_recurrence_persistent") == 1);
  CHECK(count_prefix(launches, "f32_gru_reset_before_recurrence_persistent") == 1);

  PlanOptions opt;
  opt.max_batch = 64;
  opt.gpu_half_math = true;
  opt.weight_dtype = DType::bf16;
  detail::PlanImpl p;
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(2), &p) == Status::ok);
  CHECK(p.gpu.mma_step == 1);
  CHECK(!gpu::use_mma_step(p.gpu, 7));
  CHECK(gpu::use_mma_step(p.gpu, 8));
  // The persistent kernel on the matrix units: one 16-row tile from 8 rows, not with the
  // per-step recurrence forced, nor without the option, with f32 weights on AMD, without matrix units.
  for (int l = 0; l < 2; ++l) {
    CHECK(p.gpu.persist_mma_units[l] == 16);
    CHECK(gpu::persistent_mma_units(p.gpu, l, 7) == 0);
    CHECK(gpu::persistent_mma_units(p.gpu, l, 8) == 16);
    CHECK(gpu::persistent_mma_units(p.gpu, l, 16) == 16);
    CHECK(gpu::persistent_mma_units(p.gpu, l, 17) == 0);
  }
  p.gpu.recurrence = gpu::Recurrence::tiled;
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 0);
  opt.training = true;  // the epilogue writes the reserve rows on this path too
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(2), &p) == Status::ok);
  CHECK(gpu::use_mma_step(p.gpu, 64));
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 16);
  opt.gpu_half_math = false;
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(2), &p) == Status::ok);
  CHECK(!gpu::use_mma_step(p.gpu, 64));
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 0);
  opt.gpu_half_math = true;
  opt.weight_dtype = DType::f32;
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(2), &p) == Status::ok);
  CHECK(!gpu::use_mma_step(p.gpu, 64));
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 0);
  REQUIRE(make_profile_plan(c.stack, opt, gpu::device_profile(0), &p) == Status::ok);  // TF32 on the H100
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 16);
  gpu::DeviceProfile rdna = gpu::device_profile(2);
  rdna.device.mma = 0;
  opt.weight_dtype = DType::f16;
  REQUIRE(make_profile_plan(c.stack, opt, rdna, &p) == Status::ok);
  CHECK(!gpu::use_mma_step(p.gpu, 64));
  CHECK(gpu::persistent_mma_units(p.gpu, 0, 8) == 0);
  // A slice that does not fit the opt-in: a layer of 2048 units takes 16 · 4 gates · 2 KiB rows.
  c.stack.layers[0] = layer(Mode::lstm, 2048, true, {});
  gpu::DeviceProfile small = gpu::device_profile(0);
  small.device.smem_optin = 64 * 1024;
  REQUIRE(make_profile_plan(c.stack, opt, small, &p) == Status::ok);
  CHECK(p.gpu.persist_mma_units[0] == 0);
  CHECK(p.gpu.persist_mma_units[1] == 16);
}

TEST_CASE("gpu_half_math at batch 8 to 16: the persistent kernel on the matrix units, every cell") {
  // Every cell at B = 8, 9, 16 (one 16-row tile, rows of padding), H = 20 and 37 (a partial
  // block of 16 units; Hs = 40: two k chunks), both directions, lengths and initial states, both
  // layouts; f16 and bf16 on the H100 (warp 32) and MI250X (warp 64) profiles, TF32 on the H100;
  // against the f64 reference with the matrix-unit step's tolerances. The persistent kernel on the
  // matrix units runs once per layer and no other recurrence kernel does.
  double worst[3] = {0, 0, 0};  // f32 (TF32), f16, bf16
  int i = 0;
  for (const StepCell& cell : kStepCells)
    for (int B : {8, 9, 16}) {
      const DType weights = i % 3 == 0 ? DType::f16 : i % 3 == 1 ? DType::bf16 : DType::f32;
      const gpu::DeviceProfile prof = gpu::device_profile(weights != DType::f32 && i % 2 ? 2 : 0);
      std::map<std::string, int> launches;
      const double err = check_mma_step_case(cell, B, i % 2 ? 37 : 20, weights, i % 4 == 1, i, 90 + static_cast<std::uint64_t>(i),
                                             7600 + static_cast<std::uint64_t>(i), prof, &launches, true);
      const int w = weights == DType::f32 ? 0 : weights == DType::f16 ? 1 : 2;
      worst[w] = std::max(worst[w], err);
      CHECK(count_prefix(launches, "recurrence_persistent_mma") == 1);
      CHECK(count_prefix(launches, "persistent") + count_prefix(launches, "_mma_16x16") + count_prefix(launches, "step_tiled") == 1);
      ++i;
    }
  MESSAGE("largest relative error: TF32 " << worst[0] << ", f16 " << worst[1] << ", bf16 " << worst[2]);
}

TEST_CASE("emulated GPU forward with per-step resets: every cell, both recurrence kernels and tiles, the matrix units") {
  // design.md §3.5: where resets[t][b] != 0 (t < the row's length) row b starts step t from its
  // initial state. The cell epilogue of step t - 1 carries that state on instead of the new one
  // (after the state dropout), so every recurrence kernel reads it. Against the f64 reference,
  // unidirectional stacks of 1-3 layers, lengths, given and zero initial states, both layouts.
  Rng rng(2026112902);
  const gpu::TileChoice tiles[] = {gpu::TileChoice::small, gpu::TileChoice::large};
  int i = 0;
  for (const StepCell& cell : kStepCells)
    for (gpu::Recurrence r : {gpu::Recurrence::persistent, gpu::Recurrence::tiled}) {
      Case c;
      c.stack.input_size = 6;
      c.stack.num_layers = 1 + i % 3;
      for (int l = 0; l < c.stack.num_layers; ++l) c.stack.layers[l] = layer(cell.mode, 9 + 4 * l, false, {}, cell.variant);
      c.T = 7;
      c.B = 3 + i % 4;
      c.lengths = i % 2 == 0;
      c.initial = i % 3 != 2;
      c.batch_major = i % 4 == 1;
      c.resets = true;
      EmuConfig cfg = config(i % 2 ? 64 : 32, r, tiles[(i / 2) % 2]);
      if (r == gpu::Recurrence::persistent) cfg.smem = 12 * 1024;  // several persistent slices
      cfg.sched_seed = rng.next();
      std::map<std::string, int> launches;
      check_case(c, cfg, rng.next(), &launches);
      CHECK(count_prefix(launches, r == gpu::Recurrence::persistent ? "persistent" : "tiled") > 0);
      ++i;
    }
  // The per-step recurrence on the matrix units (B >= 8), f16 on the MI250X profile (warp 64),
  // TF32 on the H100's (warp 32).
  for (const StepCell& cell : {kStepCells[0], kStepCells[2]})
    for (DType wt : {DType::f16, DType::f32}) {
      Case c;
      c.stack.input_size = 11;
      c.stack.num_layers = 1;
      c.stack.layers[0] = layer(cell.mode, 20, false, {}, cell.variant);
      c.T = 5;
      c.B = 9;
      c.lengths = true;
      c.initial = true;
      c.resets = true;
      c.weights = wt;
      c.half_math = true;
      c.tolerance = half_math_tolerance(wt);
      const gpu::DeviceProfile prof = gpu::device_profile(wt == DType::f32 ? 0 : 2);
      EmuConfig cfg;
      cfg.profile = &prof;
      cfg.recurrence = gpu::Recurrence::tiled;
      std::map<std::string, int> launches;
      check_case(c, cfg, rng.next(), &launches);
      CHECK(count_prefix(launches, "_mma_16x16") == c.T * step_launches(cell));
    }
}

TEST_CASE("emulated GPU forward with LSTM peepholes and a cell clip: both recurrence kernels, both directions, the matrix units") {
  // TF LSTMCell's use_peepholes and cell_clip in the shared cell epilogue: i, f see p ⊙ c_{t-1},
  // c_t = clip(f c_{t-1} + i g), o sees p_o ⊙ c_t; peepholes packed beside the biases. Against the
  // f64 reference (tests/test_lstm_ext.cpp proves it against TF / PyTorch). A clip of 0.3 clips
  // most cell states, so a kernel without it would miss by far more than the tolerance.
  Rng rng(2026112903);
  const gpu::Recurrence recurrences[] = {gpu::Recurrence::persistent, gpu::Recurrence::tiled, gpu::Recurrence::tiled};
  const gpu::TileChoice tiles[] = {gpu::TileChoice::auto_select, gpu::TileChoice::small, gpu::TileChoice::large};
  for (int i = 0; i < 9; ++i) {
    const int variant = i % 3;  // peepholes, cell clip, both
    Case c;
    c.stack.input_size = 7;
    c.stack.num_layers = 1 + i % 2;
    for (int l = 0; l < c.stack.num_layers; ++l) {
      c.stack.layers[l] = layer(Mode::lstm, 10 + 3 * l, (i + l) % 3 == 1, {});
      c.stack.layers[l].peepholes = variant != 1;
      c.stack.layers[l].cell_clip = variant != 0 ? 0.3 : 0.0;
    }
    c.T = 6;
    c.B = 2 + i % 5;
    c.lengths = i % 2 == 0;
    c.initial = true;
    c.batch_major = i % 4 == 3;
    c.weights = i == 7 ? DType::f16 : DType::f32;
    EmuConfig cfg = config(i % 2 ? 64 : 32, recurrences[i % 3], tiles[i % 3]);
    cfg.sched_seed = rng.next();
    std::map<std::string, int> launches;
    check_case(c, cfg, rng.next(), &launches);
    CHECK(count_prefix(launches, i % 3 == 0 ? "persistent" : "tiled") > 0);
  }
  // with resets, and on the matrix units (B >= 8, TF32 on the H100 profile)
  Case c;
  c.stack.input_size = 11;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(Mode::lstm, 20, false, {});
  c.stack.layers[0].peepholes = true;
  c.stack.layers[0].cell_clip = 0.5;
  c.T = 5;
  c.B = 9;
  c.lengths = true;
  c.initial = true;
  c.resets = true;
  check_case(c, config(32, gpu::Recurrence::persistent), rng.next(), nullptr);
  check_on_tf32_units(c, rng.next());
}

TEST_CASE("GPU plans run every LSTM extension in inference and training; a projected layer runs the per-step kernels") {
  StackSpec st;
  st.input_size = 3;
  st.num_layers = 1;
  st.layers[0] = layer(Mode::lstm, 4, false, {});
  st.layers[0].peepholes = true;
  st.layers[0].cell_clip = 1.0;
  st.layers[0].proj_size = 2;
  st.layers[0].proj_clip = 0.5;
  EmuConfig cfg = config(32, gpu::Recurrence::auto_select);
  detail::PlanImpl p;
  for (bool training : {false, true}) {
    PlanOptions opt;
    opt.training = training;
    CHECK(make_gpu_plan(st, opt, cfg, &p) == Status::ok);
    CHECK(p.gpu.ws_m[0] != p.gpu.ws_m[1]);           // each direction has its own m rows
    CHECK(gpu::persistent_units(p.gpu, 0, 1) == 0);  // not the persistent kernel
  }
}

TEST_CASE("emulated GPU forward with an LSTM projection: both per-step kernels and tiles, both directions, the matrix units") {
  // h = clip(W_proj m) (TF LSTMCell's num_proj, proj_clip; PyTorch's proj_size) after every step's
  // cell kernel, in f32_lstm_projection_step; R reads h's P units. Against the f64 reference
  // (tests/test_lstm_ext.cpp proves it against TF / PyTorch). P not a multiple of 4, clips that bind
  // (0.2 on h, 0.3 on c), peepholes, lengths, initial states, layouts, resets, f16 weights, two
  // layers (the second's input is D·P wide) and state / output dropout with a residual (I == P).
  Rng rng(2026112905);
  g_forward_worst = 0;
  const gpu::Recurrence recurrences[] = {gpu::Recurrence::persistent, gpu::Recurrence::tiled, gpu::Recurrence::tiled};
  const gpu::TileChoice tiles[] = {gpu::TileChoice::auto_select, gpu::TileChoice::small, gpu::TileChoice::large};
  for (int i = 0; i < 6; ++i) {
    Case c;
    c.stack.input_size = 7;
    c.stack.num_layers = 1 + i % 2;
    for (int l = 0; l < c.stack.num_layers; ++l) {
      c.stack.layers[l] = layer(Mode::lstm, 10 + 3 * l, (i + l) % 3 == 1 && i != 4, {});
      c.stack.layers[l].proj_size = 5 + (i + l) % 3;
      c.stack.layers[l].proj_clip = i % 3 == 2 ? 0.2 : 0.0;
      c.stack.layers[l].peepholes = i == 3;
      c.stack.layers[l].cell_clip = i == 3 ? 0.3 : 0.0;
    }
    c.T = 5;
    c.B = 2 + i % 4;
    c.lengths = i % 2 == 0;
    c.initial = i != 1;
    c.batch_major = i == 3;
    c.resets = i == 4;  // unidirectional layers only
    c.weights = i == 5 ? DType::f16 : DType::f32;
    EmuConfig cfg = config(i % 2 ? 64 : 32, recurrences[i % 3], tiles[i % 3]);
    cfg.sched_seed = rng.next();
    std::map<std::string, int> launches;
    check_case(c, cfg, rng.next(), &launches);
    CHECK(launches["f32_lstm_projection_step"] == c.stack.num_layers * c.T);  // both directions in one launch
    CHECK(count_prefix(launches, "persistent") == 0);
  }
  MESSAGE("largest relative error in f32: " << g_forward_worst);
  // wrappers: state and output dropout around a projected layer, a residual with I == P, inter-layer dropout
  Case w;
  w.stack.input_size = 6;
  w.stack.num_layers = 2;
  w.stack.dropout = 0.3;
  w.stack.layers[0] = layer(Mode::lstm, 9, false, {dropout_wrapper(0.8, 0.7, 0.6, true, false, StateFilter::h_and_c), residual_wrapper()});
  w.stack.layers[0].proj_size = 6;
  w.stack.layers[1] = layer(Mode::lstm, 11, true, {dropout_wrapper(0.9, 0.75, 0.65, false, true, StateFilter::default_filter)});
  w.stack.layers[1].proj_size = 3;
  w.stack.layers[1].proj_clip = 0.25;
  w.T = 4;
  w.B = 3;
  w.lengths = true;
  w.initial = true;
  w.run_mode = RunMode::training;
  w.seed = rng.next();
  w.step = rng.next();
  check_case(w, config(32, gpu::Recurrence::auto_select), rng.next(), nullptr);
  // on the matrix units (B >= 8, TF32 on the H100 profile)
  Case c;
  c.stack.input_size = 11;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(Mode::lstm, 20, false, {});
  c.stack.layers[0].proj_size = 7;
  c.stack.layers[0].proj_clip = 0.3;
  c.T = 4;
  c.B = 9;
  c.lengths = true;
  c.initial = true;
  std::map<std::string, int> launches = check_on_tf32_units(c, rng.next());
  CHECK(launches["f32_lstm_projection_step"] == c.T);
  MESSAGE("largest relative error (TF32 last): " << g_forward_worst);
  g_forward_worst = 0;
}

TEST_CASE("emulated GPU forward with an LSTM projection: multi-tile shapes, both tiles, the matrix units" * doctest::test_suite("long")) {
  // H = 70 (several unit tiles and k chunks of R's padded rows), P = 33 (several groups of 4 past a
  // multiple of 4), B = 37 (several row tiles and grid-stride rows in the projection kernel).
  Rng rng(2026112906);
  g_forward_worst = 0;
  for (int i = 0; i < 3; ++i) {
    Case c;
    c.stack.input_size = 13;
    c.stack.num_layers = 2;
    c.stack.layers[0] = layer(Mode::lstm, 70, i == 1, {});
    c.stack.layers[0].proj_size = 33;
    c.stack.layers[0].proj_clip = i == 2 ? 0.2 : 0.0;
    c.stack.layers[1] = layer(Mode::lstm, 24, false, {});
    c.stack.layers[1].proj_size = 9;
    c.T = 4;
    c.B = 37;
    c.lengths = true;
    c.initial = true;
    EmuConfig cfg = config(i == 1 ? 64 : 32, gpu::Recurrence::tiled, i == 0 ? gpu::TileChoice::small : gpu::TileChoice::large);
    cfg.sched_seed = rng.next();
    std::map<std::string, int> launches;
    if (i == 2) {  // TF32 on the H100 profile
      c.half_math = true;
      c.tolerance = half_math_tolerance(DType::f32);
      static const gpu::DeviceProfile prof = gpu::device_profile(0);
      cfg = EmuConfig();
      cfg.profile = &prof;
      cfg.recurrence = gpu::Recurrence::tiled;
    }
    check_case(c, cfg, rng.next(), &launches);
    CHECK(launches["f32_lstm_projection_step"] == 2 * c.T);
  }
  MESSAGE("largest relative error: " << g_forward_worst);
}

namespace {

/// Relative error (y and hy, the larger) against the f64 reference of case `c` (run with resets) on
/// the emulator with mutation `m`; `census` collects the sites the run reaches.
double projection_mutant_error(const Case& c, const EmuConfig& cfg, std::uint64_t data_seed, const emu::Mutation& m,
                               std::map<emu::Site, std::set<std::string>>* census) {
  Rng rng(data_seed);
  StackSpec s32 = c.stack, s64 = c.stack;
  s32.dtype = DType::f32;
  s64.dtype = DType::f64;
  const auto w32 = random_vector<float>(rng, static_cast<std::size_t>(param_count(s32)), 0.4);
  const auto x32 = random_vector<float>(rng, static_cast<std::size_t>(c.T) * c.B * s32.input_size, 1.0);
  const auto h32 = random_vector<float>(rng, static_cast<std::size_t>(state_elements(s32, c.B)), 0.5);
  const auto c32 = random_vector<float>(rng, static_cast<std::size_t>(cell_state_elements(s32, c.B)), 0.5);
  const std::vector<std::uint8_t> resets = draw_resets(rng, c.T, c.B);
  const std::vector<double> w64(w32.begin(), w32.end()), x64(x32.begin(), x32.end()), h64(h32.begin(), h32.end()),
      c64(c32.begin(), c32.end());
  ForwardArgs a;
  a.batch = c.B;
  a.seq_len = c.T;
  a.resets = resets.data();
  PlanOptions opt;
  opt.max_batch = c.B;
  opt.max_seq_len = c.T;
  Outputs<double> ref;
  opt.backend = Backend::reference;
  a.x = x64.data();
  a.h0 = h64.data();
  a.c0 = c64.data();
  REQUIRE(run_forward(s64, opt, w64, a, &ref) == Status::ok);
  Outputs<float> got;
  a.x = x32.data();
  a.h0 = h32.data();
  a.c0 = c32.data();
  REQUIRE(run_emulated(s32, opt, cfg, w32, a, &got, nullptr, m, census) == Status::ok);
  return std::max(rel_error(got.y.data(), ref.y.data(), ref.y.size()), rel_error(got.hy.data(), ref.hy.data(), ref.hy.size()));
}

}  // namespace

TEST_CASE("mutants: leaving out the projection's clip or its reset read is caught against the reference") {
  // The ex.term and ex.reset_flag sites of f32_lstm_projection_step (the proj_clip, and the reset
  // that carries h0 on instead of the projected h) are left out in turn: each mutant misses the f64
  // reference by far more than the tolerance, the unmutated run stays within it. The kernel has no
  // barrier (the launch boundaries order it), so the barrier census above covers the rest.
  Case c;
  c.stack.input_size = 5;
  c.stack.num_layers = 1;
  c.stack.layers[0] = layer(Mode::lstm, 9, false, {});
  c.stack.layers[0].proj_size = 6;
  c.stack.layers[0].proj_clip = 0.1;  // binds on most projected units
  c.T = 5;
  c.B = 4;
  const EmuConfig cfg = config(32, gpu::Recurrence::tiled);
  std::map<emu::Site, std::set<std::string>> census;
  CHECK(projection_mutant_error(c, cfg, 901, emu::Mutation(), &census) < 1e-5);
  int sites = 0;
  for (const auto& site : census) {
    if ((site.first.kind != emu::kTerm && site.first.kind != emu::kResetFlag) || !site.second.count("f32_lstm_projection_step"))
      continue;
    ++sites;
    emu::Mutation m;
    m.kind = site.first.kind;
    m.line = site.first.line;
    m.file = site.first.file.c_str();
    const double err = projection_mutant_error(c, cfg, 901, m, nullptr);
    MESSAGE(std::string(emu::site_kind_name(site.first.kind)) << " at " << site.first.file << ":" << site.first.line
                                                              << ": relative error " << err
                                                              << std::string(err > 1e-3 ? ", caught" : ", SURVIVED"));
    CHECK(err > 1e-3);
  }
  CHECK(sites == 2);
}

TEST_CASE("emulated GPU forward with gpu_half_math: dropout wrappers, residuals and inter-layer dropout on the matrix units") {
  // The matrix-unit projection and per-step kernels (B >= 8) under the wrapper stacks: input
  // dropout before the projection, state dropout in the shared epilogue, output chain and
  // inter-layer dropout after; exactly the reference's zeros (masks bit for bit), on the H100
  // (TF32, f16) and MI250X (bf16, warp 64) profiles.
  Rng rng(2026112904);
  int i = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh})
    for (DType wt : {DType::f16, DType::bf16, DType::f32}) {
      Case c = wrapper_case(mode, i % 3, rng);
      c.B = 9;
      c.weights = wt;
      c.half_math = true;
      c.tolerance = half_math_tolerance(wt);
      const gpu::DeviceProfile prof = gpu::device_profile(wt == DType::bf16 ? 2 : 0);
      EmuConfig cfg;
      cfg.profile = &prof;
      cfg.recurrence = gpu::Recurrence::tiled;
      std::map<std::string, int> launches;
      check_case(c, cfg, rng.next(), &launches);
      CHECK(count_prefix(launches, "_mma_16x16") > 0);
      CHECK(count_prefix(launches, "proj_gemm_mma") > 0);
      ++i;
    }
}

// ------------------------------------------------------------------------------------ graph replay

namespace {

/// The graph tests' network: an LSTM with a dropout wrapper, then a bidirectional GRU (no cell
/// state: forward zeroes its part of cy), inter-layer dropout, on the per-step kernels.
struct GraphFixture {
  StackSpec st;
  detail::PlanImpl p;
  EmuConfig cfg = config(32, gpu::Recurrence::tiled);
  std::vector<float> canonical;
  static constexpr int kT = 5, kB = 3;

  explicit GraphFixture(gpu::Recurrence r = gpu::Recurrence::tiled) {
    st.input_size = 6;
    st.num_layers = 2;
    st.dropout = 0.3;
    st.layers[0] = layer(Mode::lstm, 10, false, {dropout_wrapper(0.8, 0.7, 0.6)});
    st.layers[1] = layer(Mode::gru, 7, true, {});
    cfg.recurrence = r;
    PlanOptions opt;
    opt.max_batch = kB;
    opt.max_seq_len = kT;
    REQUIRE(make_gpu_plan(st, opt, cfg, &p) == Status::ok);
    p.gpu.graphs = 1;
    Rng rng(34);
    canonical = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.4);
  }
};

/// One call's tensors, kept alive for the whole test: a graph that baked an address reads (and
/// writes) the buffers of the call it was captured in, never freed memory.
struct GraphCall {
  std::vector<float> x, h0, c0, y[2], hy[2], cy[2];
  std::vector<std::int32_t> lengths;
  ForwardArgs a;
  GraphCall(const GraphFixture& f, Rng& rng, int T, std::uint64_t step) {
    const std::size_t states = static_cast<std::size_t>(state_elements(f.st, f.kB));
    const std::size_t cells = static_cast<std::size_t>(cell_state_elements(f.st, f.kB));
    x = random_vector<float>(rng, static_cast<std::size_t>(T) * f.kB * f.st.input_size, 1.0);
    h0 = random_vector<float>(rng, states, 0.5);
    c0 = random_vector<float>(rng, cells, 0.5);
    for (int k = 0; k < 2; ++k) {
      y[k].assign(static_cast<std::size_t>(T) * f.kB * stack_output_size(f.st), -7.0f);
      hy[k].assign(states, -7.0f);
      cy[k].assign(cells, -7.0f);
    }
    lengths.resize(f.kB);
    for (auto& l : lengths) l = rng.range(0, T);
    a.batch = f.kB;
    a.seq_len = T;
    a.x = x.data();
    a.h0 = h0.data();
    a.c0 = c0.data();
    a.seq_lengths = lengths.data();
    a.run_mode = RunMode::training;  // the dropout masks depend on the step
    a.seed = 0x5eed;
    a.step = step;
  }
  ForwardArgs out(int k) {
    ForwardArgs o = a;
    o.y = y[k].data();
    o.hy = hy[k].data();
    o.cy = cy[k].data();
    return o;
  }
  bool same() const { return y[0] == y[1] && hy[0] == hy[1] && cy[0] == cy[1]; }  // (no NaN here: bit for bit)
};

}  // namespace

TEST_CASE("graph replay: captured once, replayed with new inputs, lengths and dropout steps, equals direct launches bit for bit") {
  GraphFixture f;
  AlignedBuffer packed(f.p.packed_bytes), ws_direct(f.p.ws.total), ws_graph(f.p.ws.total);
  emu::Launcher ln(f.p.gpu.target, f.cfg.blocks_per_sm);
  REQUIRE(emu::pack(ln, f.p, f.p.gpu, f.canonical.data(), packed.ptr) == Status::ok);
  for (bool bake : {false, true}) {  // bake: the mutation, a graph that replays the values of its capture
    CAPTURE(bake);
    emu::GraphRuntime rt(&ln);
    rt.bake = bake;
    gpu::GraphTable table;
    Rng rng(7);
    std::vector<std::unique_ptr<GraphCall>> calls;
    std::vector<gpu::GraphUse> uses;
    int differing = 0;
    const int lengths_of[] = {f.kT, f.kT, f.kT, f.kT, f.kT, f.kT - 2, f.kT - 2, f.kT - 2};
    for (int T : lengths_of) {
      calls.push_back(std::make_unique<GraphCall>(f, rng, T, 11 + 3 * calls.size()));
      GraphCall& c = *calls.back();
      REQUIRE(emu::forward(ln, f.p, f.p.gpu, packed.ptr, ws_direct.ptr, c.out(0)) == Status::ok);
      gpu::GraphUse use = gpu::GraphUse::direct;
      char note[160] = "";
      REQUIRE(emu::forward_graphed(ln, rt, table, f.p, f.p.gpu, packed.ptr, ws_graph.ptr, c.out(1), &use, note, sizeof note) ==
              Status::ok);
      INFO("call " << calls.size() << ": " << note);
      uses.push_back(use);
      if (!bake) CHECK(c.same());
      differing += c.same() ? 0 : 1;
    }
    for (const std::string& e : ln.errors) FAIL_CHECK(e);
    using U = gpu::GraphUse;
    // First run direct, the repeat captured, replays; T changes: direct, then captured again.
    const std::vector<U> want = {U::direct, U::captured, U::replayed, U::replayed, U::replayed, U::direct, U::captured, U::replayed};
    CHECK(uses == want);
    CHECK(rt.captures == 2);
    CHECK(rt.replays == 6);    // each capture's own run, and the 4 replays
    CHECK(rt.destroyed == 1);  // the first graph, replaced by the second
    // The mutation: every replay with other tensors and another dropout step than its capture's differs.
    if (bake) CHECK(differing == 4);
    else CHECK(differing == 0);
  }
}

TEST_CASE("graph signatures: by pointer only the launch list counts; by value also every argument a graph would bake") {
  GraphFixture f;
  AlignedBuffer packed(f.p.packed_bytes), ws(f.p.ws.total), ws2(f.p.ws.total);
  emu::Launcher ln(f.p.gpu.target, f.cfg.blocks_per_sm);
  REQUIRE(emu::pack(ln, f.p, f.p.gpu, f.canonical.data(), packed.ptr) == Status::ok);
  Rng rng(9);
  GraphCall base(f, rng, f.kT, 5), other(f, rng, f.kT, 5), shorter(f, rng, f.kT - 1, 5);
  const auto sign = [&](const ForwardArgs& a, bool by_value, unsigned char* w) {
    gpu::GraphSignature s;
    REQUIRE(emu::forward_signature(ln, f.p, f.p.gpu, packed.ptr, w, a, by_value, &s) == Status::ok);
    return s;
  };
  const ForwardArgs a = base.out(0);
  ForwardArgs moved = other.out(1);  // other tensors' addresses
  ForwardArgs stepped = a;
  stepped.step += 1;
  ForwardArgs seeded = a;
  seeded.seed += 1;
  for (bool by_value : {false, true}) {
    CAPTURE(by_value);
    const gpu::GraphSignature s = sign(a, by_value, ws.ptr);
    CHECK(s.launches > 2 * static_cast<std::uint32_t>(f.kT));  // per-step launches of both layers
    CHECK(s.zeroings == 0);                                       // the GRU's cy is zeroed before the launches
    CHECK_FALSE(s.cooperative);
    const std::int32_t length = base.lengths[0];  // the same buffers with other contents (lengths reach
    base.lengths[0] = (length + 1) % (f.kT + 1);  // the kernels through the workspace)
    base.x[0] += 1.0f;
    base.h0[1] -= 1.0f;
    CHECK(sign(a, by_value, ws.ptr) == s);
    base.lengths[0] = length;
    CHECK((sign(moved, by_value, ws.ptr) == s) == !by_value);
    CHECK((sign(stepped, by_value, ws.ptr) == s) == !by_value);
    CHECK((sign(seeded, by_value, ws.ptr) == s) == !by_value);
    CHECK(sign(shorter.out(0), by_value, ws.ptr) != s);  // T: the number of step launches
    CHECK(sign(a, by_value, ws2.ptr) != s);              // the argument blocks' device copies move with the workspace
  }
  // A persistent layer is one cooperative launch: its runs are never captured.
  GraphFixture persistent(gpu::Recurrence::persistent);
  AlignedBuffer pp(persistent.p.packed_bytes), pws(persistent.p.ws.total);
  REQUIRE(emu::pack(ln, persistent.p, persistent.p.gpu, persistent.canonical.data(), pp.ptr) == Status::ok);
  emu::GraphRuntime rt(&ln);
  gpu::GraphTable table;
  for (int call = 0; call < 3; ++call) {
    gpu::GraphUse use = gpu::GraphUse::replayed;
    char note[160] = "";
    REQUIRE(emu::forward_graphed(ln, rt, table, persistent.p, persistent.p.gpu, pp.ptr, pws.ptr, base.out(1), &use, note,
                                 sizeof note) == Status::ok);
    CHECK(use == gpu::GraphUse::direct);
    CHECK(std::string(note).find("persistent") != std::string::npos);
  }
  CHECK(rt.captures == 0);
  // A runtime that refuses the capture: the run launches directly, and so do later ones (one try).
  emu::GraphRuntime refusing(&ln);
  refusing.refuse = true;
  gpu::GraphTable t2;
  std::vector<gpu::GraphUse> uses;
  std::string last;
  for (int call = 0; call < 4; ++call) {
    gpu::GraphUse use = gpu::GraphUse::replayed;
    char note[160] = "";
    REQUIRE(emu::forward_graphed(ln, refusing, t2, f.p, f.p.gpu, packed.ptr, ws.ptr, base.out(1), &use, note, sizeof note) ==
            Status::ok);
    uses.push_back(use);
    last = note;
  }
  CHECK(uses == std::vector<gpu::GraphUse>(4, gpu::GraphUse::direct));
  CHECK(refusing.captures == 1);
  CHECK(last.find("refused") != std::string::npos);
  for (const std::string& e : ln.errors) FAIL_CHECK(e);
}

TEST_CASE("emulated GPU forward on the direct and lanes per-step kernels (RNNCORE_GPU_TILE=direct, lanes, lanes8): every cell and feature") {
  // f32_rnn_step_direct reads h and R where they lie and sums each k group apart, f32_rnn_step_lanes
  // splits a task's k across 32 or 8 lanes and folds the sums in halves (at H = 5 and 37 most lanes
  // read nothing, at 64 each of 8 lanes reads two quads of k and each of 32 at most one): against the f64
  // reference, every cell with its phases at H = 5 (groups without k), 37 (a partial unit tile,
  // Hs = 40 over eight groups) and 64, B = 1, 17 and 35 (partial row tiles, three of them), both
  // directions, lengths, initial states, resets, both layouts, warps of 32 and 64, f16 / bf16
  // weights; then the wrapper stacks (dropout of every kind, residuals, inter-layer dropout), LSTM
  // peepholes with a cell clip and a projection, and random CudnnLSTM-style stacks. Each case must
  // have run the chosen kernel, and no staged one.
  Rng rng(2026113001);
  const int hiddens[] = {5, 37, 64}, batches[] = {1, 17, 35};
  const DType weights[] = {DType::f32, DType::f16, DType::bf16};
  std::vector<Case> cases;
  int i = 0;
  for (const StepCell& cell : kStepCells)
    for (int k = 0; k < 3; ++k, ++i) {
      Case c = one_layer_case(cell.mode, 7, hiddens[(i + k) % 3], i % 4 == 1, 4, batches[k], cell.variant);
      c.lengths = i % 2 == 0;
      c.initial = i % 3 != 2;
      c.batch_major = i % 4 == 3;
      c.resets = i % 4 != 1;  // unidirectional stacks only
      c.weights = weights[i % 3];
      cases.push_back(c);
    }
  for (int v = 0; v < 4; ++v) cases.push_back(wrapper_case(v % 2 ? Mode::gru : Mode::lstm, v, rng));
  Case ext = one_layer_case(Mode::lstm, 6, 21, true, 5, 19);
  ext.stack.layers[0].peepholes = true;
  ext.stack.layers[0].cell_clip = 0.3;
  ext.stack.layers[0].proj_size = 9;
  ext.lengths = ext.initial = true;
  cases.push_back(ext);
  for (int r = 0; r < 6; ++r) cases.push_back(random_case(rng));
  for (const gpu::TileChoice tile : {gpu::TileChoice::direct, gpu::TileChoice::lanes, gpu::TileChoice::lanes8}) {
    const char* kernel = tile == gpu::TileChoice::direct ? "_direct" : tile == gpu::TileChoice::lanes ? "_lanes" : "_lanes8";
    i = 0;
    for (const Case& c : cases) {
      CAPTURE(describe(c));
      EmuConfig cfg = config(i % 2 ? 64 : 32, gpu::Recurrence::tiled, tile);
      cfg.sched_seed = rng.next();
      std::map<std::string, int> launches;
      check_case(c, cfg, rng.next(), &launches);
      if (c.T > 0 && c.B > 0) CHECK(count_prefix(launches, kernel) > 0);
      if (tile != gpu::TileChoice::lanes8) CHECK(count_prefix(launches, "_lanes8") == 0);
      CHECK(count_prefix(launches, "step_tiled") + count_prefix(launches, "phase1_tiled") +
                count_prefix(launches, "phase2_tiled") == 0);  // no staged step kernel
      ++i;
    }
  }
}

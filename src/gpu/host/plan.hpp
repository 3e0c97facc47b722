// The GPU backend's planning, a pure function of the network, the options and a device
// description: the packed and workspace layouts, the persistent kernel's slices per layer and batch
// bucket, and the kernel choices the schedules (src/gpu/host/schedule.hpp) read. No GPU runtime is
// touched here: src/gpu/gpu_backend.hip queries the device and calls plan_select / plan_layout;
// the tests and the speed model call them with src/gpu/host/device_profiles.hpp's descriptions, so
// they plan for an H100 or an MI300X exactly as the backend would on one.
#ifndef RNNCORE_SRC_GPU_HOST_PLAN_HPP
#define RNNCORE_SRC_GPU_HOST_PLAN_HPP

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "src/gpu/device/backward.hpp"  // grad_persistent_smem_bytes (and kernels.hpp)
#include "src/internal/arena.hpp"
#include "src/internal/error.hpp"
#include "src/gpu/host/plan_data.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace gpu {

static_assert(kWrappers == kMaxWrappers, "device argument blocks hold every wrapper");
static_assert(static_cast<int>(simd::Cell::lstm) == kLstm && static_cast<int>(simd::Cell::gru_reset_after) == kGruResetAfter &&
                  static_cast<int>(simd::Cell::gru_reset_before) == kGruResetBefore &&
                  static_cast<int>(simd::Cell::rnn_tanh) == kRnnTanh && static_cast<int>(simd::Cell::rnn_relu) == kRnnRelu,
              "cell numbering");

/// The argument blocks of one layer of a forward run. forward() fills one per layer on the host;
/// where the launcher passes kernels a pointer (AMD), it copies them into the workspace
/// (GpuPlan::ws_args) with one asynchronous copy per run, before the run's first launch. A
/// by-value block of 2 KiB is copied into private memory (scratch) by hipcc whenever a kernel
/// indexes its `dir` array with the block index; nvcc reads it in place when it is marked
/// __grid_constant__ (docs/gpu.md, "Kernel arguments").
struct LayerArgBlock {
  LayerArgs layer;
  InterLayerArgs inter;
};
static_assert(std::is_trivially_copyable<LayerArgBlock>::value && std::is_trivially_copyable<PackArgs>::value,
              "argument blocks are copied to the device as bytes");

/// What the GPU kernels cannot do, as a plan-time error.
inline Status check_supported(const StackSpec& st, const PlanOptions& options) {
  RNNCORE_ENSURE(st.dtype == DType::f32, Status::unsupported,
                 "backend gpu computes f32; the dtype is %s (use the reference backend for f64)", to_string(st.dtype));
  RNNCORE_ENSURE(options.weight_dtype == DType::f32 || options.weight_dtype == DType::f16 || options.weight_dtype == DType::bf16,
                 Status::unsupported, "backend gpu: weight_dtype %s is not a weight storage type (f32, f16 or bf16)",
                 to_string(options.weight_dtype));
  for (int l = 0; l < st.num_layers; ++l)
    for (int w = 0; w < st.layers[l].num_wrappers; ++w) {
      const Wrapper& wr = st.layers[l].wrappers[w];
      RNNCORE_ENSURE(wr.kind != WrapperKind::residual || (wr.residual.f32 == nullptr && wr.residual.f64 == nullptr),
                     Status::unsupported,
                     "layers[%d].wrappers[%d]: a custom residual function is host code and cannot run on the GPU; "
                     "backend gpu supports the default (additive) residual only",
                     l, w);
    }
  return Status::ok;
}

/// Storage type of W and R for PlanOptions::weight_dtype.
inline WeightId weight_id(DType d) { return d == DType::f16 ? kWeightF16 : d == DType::bf16 ? kWeightBF16 : kWeightF32; }
inline std::size_t weight_bytes(std::int32_t id) { return id == kWeightF32 ? 4 : 2; }

/// Bucket index of a batch (-1: larger than every bucket).
inline int bucket_index(int batch) {
  for (int k = 0; k < kBucketCount; ++k)
    if (batch <= kBuckets[k]) return k;
  return -1;
}

// ---------------------------------------------------------------------------------- layout


/// Canonical span [begin, begin + count) of one (layer, direction)'s parameters.
inline void canonical_span(const StackSpec& st, int layer, int dir, std::int64_t* begin, std::int64_t* count) {
  const int G = num_gates(st.layers[layer].mode), H = st.layers[layer].hidden_size;
  const std::int64_t w = canonical_offset(st, layer, dir, ParamKind::input_weight, 0);
  *begin = w >= 0 ? w : canonical_offset(st, layer, dir, ParamKind::recurrent_weight, 0);
  std::int64_t end = canonical_offset(st, layer, dir, ParamKind::recurrent_bias, G - 1) + H;
  if (st.layers[layer].peepholes)  // p_i, p_f, p_o (canonical gates 0, 1, 3)
    for (int g : {0, 1, 3}) end = std::max<std::int64_t>(end, canonical_offset(st, layer, dir, ParamKind::peephole, g) + H);
  if (st.layers[layer].proj_size > 0)  // W_proj [P][H]
    end = std::max<std::int64_t>(end, canonical_offset(st, layer, dir, ParamKind::projection, 0) +
                                          static_cast<std::int64_t>(st.layers[layer].proj_size) * H);
  *count = end - *begin;
}

/// Packed-buffer and workspace offsets of a GPU plan (PlanImpl::layers[].dir[], ws, packed_bytes,
/// hidden_stride; the staging area and the length / row-id copies in `g`). On overflow ws.total
/// is ~0, which Plan::create reports.
inline void compute_layout(detail::PlanImpl* p, GpuPlan* g) {
  const StackSpec& st = p->stack;
  const std::uint64_t B = static_cast<std::uint64_t>(p->options.max_batch), T = static_cast<std::uint64_t>(p->options.max_seq_len);
  detail::Arena packed(detail::kPackedHeaderBytes);
  std::uint64_t proj = 0, state = 0, x_cell = 0, inner_out = 0, staging = 0;
  bool lstm = false, reset_before = false, projection = false;
  const std::uint64_t wb = weight_bytes(g->weights);
  for (int l = 0; l < st.num_layers; ++l) {
    detail::LayerPlan& lp = p->layers[l];
    const std::uint64_t H = static_cast<std::uint64_t>(lp.hidden), G = static_cast<std::uint64_t>(lp.gates);
    const std::uint64_t Hs = (H + 3) / 4 * 4, Ip = (static_cast<std::uint64_t>(lp.input_size) + 3) / 4 * 4;
    lp.hidden_stride = static_cast<std::int32_t>(Hs);
    for (int d = 0; d < lp.dirs; ++d) {
      detail::DirectionPack& dp = lp.dir[d];
      dp.w_panel = lp.skip_input ? 0 : packed.take(G * H * Ip, wb);  // W [G·H][Ip]
      dp.r_panel = packed.take(G * H * Hs, wb);                       // R [G·H][Hs]
      dp.r_panel_n = 0;
      dp.bias = packed.take(G * H, 4);
      dp.bias_rn = lp.cell == simd::Cell::gru_reset_after ? packed.take(H, 4) : 0;
      dp.peepholes = st.layers[l].peepholes ? packed.take(3 * H, 4) : 0;  // p_i, p_f, p_o [H] each
      // W_proj [P][H] of the weight storage type (h has P ≤ H units in the Hs-wide state rows).
      dp.proj_panel = st.layers[l].proj_size > 0 ? packed.take(static_cast<std::uint64_t>(lp.out) * H, wb) : 0;
      std::int64_t begin = 0, count = 0;
      canonical_span(st, l, d, &begin, &count);
      staging = std::max<std::uint64_t>(staging, static_cast<std::uint64_t>(count));
    }
    proj = std::max(proj, T * B * G * H);
    state = std::max(state, B * Hs);
    if (lp.input_dropout) x_cell = std::max(x_cell, T * B * static_cast<std::uint64_t>(lp.input_size));
    if (l + 1 < st.num_layers) inner_out = std::max(inner_out, T * B * static_cast<std::uint64_t>(lp.dirs) * H);
    lstm = lstm || lp.mode == Mode::lstm;
    projection = projection || st.layers[l].proj_size > 0;
    reset_before = reset_before || lp.cell == simd::Cell::gru_reset_before;
  }
  // The ends (embedding table, the Dense chain's W and b) in canonical order, f32 as on the CPU.
  const std::uint64_t tail = static_cast<std::uint64_t>(param_count(st) - detail::recurrent_param_count(st));
  p->ends = tail > 0 ? static_cast<std::size_t>(packed.take(tail, 4)) : 0;
  g->pack_args = packed.take(1, sizeof(PackArgs));
  g->staging = packed.take(staging, 4);
  g->staging_bytes = staging * 4;
  p->packed_bytes = static_cast<std::size_t>(packed.size());

  detail::Arena ws(0);
  detail::WorkspaceLayout& w = p->ws;
  w = detail::WorkspaceLayout();
  detail::DirectionBuffers sizes;
  sizes.proj = proj;
  sizes.state = state;
  sizes.x_cell = x_cell;
  sizes.lstm = lstm;
  sizes.reset_before = reset_before;
  for (int d = 0; d < 2; ++d) detail::take_direction_buffers(&ws, sizes, d, &w);
  if (st.num_layers > 1) w.layer_out[0] = ws.take(inner_out, 4);
  if (st.num_layers > 2) w.layer_out[1] = ws.take(inner_out, 4);
  for (int d = 0; d < 2; ++d) g->ws_m[d] = projection ? ws.take(state, 4) : 0;
  if (st.embedding.vocab_size > 0) w.embed_x = ws.take(T * B * static_cast<std::uint64_t>(st.input_size), 4);
  if (st.head.out_features > 0) {
    const std::uint64_t in = static_cast<std::uint64_t>(detail::head_input_size(st)), rows = st.head.last_step_only ? B : T * B;
    w.head_in = ws.take(T * B * in, 4);
    if (st.head.last_step_only) w.head_rows = ws.take(B * in, 4);
    std::uint64_t mid = 0;  // the chain's activations between its Dense layers
    for (int k = 0; k < st.num_pre_head; ++k) mid = std::max<std::uint64_t>(mid, st.pre_head[k].out_features);
    for (int m = 0; m < std::min<int>(st.num_pre_head, 2); ++m) w.head_mid[m] = ws.take(rows * mid, 4);
  }
  g->ws_ends_args = st.embedding.vocab_size > 0 || st.head.out_features > 0 ? ws.take(1, sizeof(EndsArgs)) : 0;
  g->ws_lengths = ws.take(B, 4);
  g->ws_row_ids = ws.take(B, 4);
  g->ws_resets = ws.take(T * B, 1);
  g->ws_args = ws.take(static_cast<std::uint64_t>(st.num_layers), sizeof(LayerArgBlock));
  w.total = static_cast<std::size_t>(ws.size());
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
}

/// Chooses, per layer, how many units (a multiple of 16) each block of the persistent kernel on
/// the matrix units owns: the fewest such that the R slice as operand bits, the staged 16-row
/// operand and the accumulators fit the device's shared memory and every block of both
/// directions is co-resident; 0 where none does (a projected layer: never, as for the f32 kernel).
template <class Occupancy>
void plan_persistent_mma(const detail::PlanImpl& p, GpuPlan* g, Occupancy blocks_per_sm) {
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    if (p.stack.layers[l].proj_size > 0) continue;
    const int H = lp.hidden, G = lp.gates, cell = static_cast<int>(lp.cell);
    for (int units = kMmaDim; units < H + kMmaDim; units += kMmaDim) {
      const std::int64_t blocks = static_cast<std::int64_t>(lp.dirs) * ((H + units - 1) / units);
      const std::size_t smem = persistent_mma_smem_bytes(G, units, lp.hidden_stride, weight_bytes(g->weights));
      if (static_cast<std::int64_t>(smem) > g->target.smem_optin) break;  // more units only need more
      if (blocks > static_cast<std::int64_t>(g->target.sm_count) * 32) continue;
      const int per_sm = blocks_per_sm(cell, kPersistentMmaBucket, g->weights, g->persist_threads, smem);
      if (per_sm > 0 && blocks <= static_cast<std::int64_t>(per_sm) * g->target.sm_count) {
        g->persist_mma_units[l] = static_cast<std::int16_t>(units);
        break;
      }
    }
  }
}

/// Chooses, per layer and batch bucket, how many units each block of the persistent kernel owns:
/// the fewest (most blocks, shortest dot products) such that the slice of R fits in shared memory
/// and every block of both directions is co-resident. `blocks_per_sm(cell, bucket_index, weights,
/// threads, smem)` is the occupancy of that kernel instance (0 if it cannot launch).
template <class Occupancy>
void plan_persistent(const detail::PlanImpl& p, GpuPlan* g, Occupancy blocks_per_sm) {
  std::memset(g->persist_units, 0, sizeof g->persist_units);
  std::memset(g->persist_mma_units, 0, sizeof g->persist_mma_units);
  if (!g->target.cooperative || g->persist_threads < g->target.warp_size) return;
  if (g->mma_step && p.options.max_batch >= kMmaStepMinBatch) plan_persistent_mma(p, g, blocks_per_sm);
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    // A projection needs every unit's m before any h of the next step: a second grid barrier per
    // step that this kernel does not have, so a projected layer runs the per-step kernels.
    if (p.stack.layers[l].proj_size > 0) continue;
    const int H = lp.hidden, G = lp.gates, cell = static_cast<int>(lp.cell);
    const std::int64_t Hs = lp.hidden_stride;
    for (int k = 0; k < kBucketCount; ++k) {
      const int lowest = k == 0 ? 1 : kBuckets[k - 1] + 1;
      if (lowest > p.options.max_batch) break;
      const int batch = std::min(kBuckets[k], p.options.max_batch);
      for (int units = 4; units < H + 4; units += 4) {
        const std::int64_t blocks = static_cast<std::int64_t>(lp.dirs) * ((H + units - 1) / units);
        const std::size_t smem = persistent_smem_bytes(G, kBuckets[k], units, Hs, batch, weight_bytes(g->weights));
        if (static_cast<std::int64_t>(smem) > g->target.smem_optin) break;  // more units only need more
        if (blocks > static_cast<std::int64_t>(g->target.sm_count) * 32) continue;  // no device holds that many
        const int per_sm = blocks_per_sm(cell, k, g->weights, g->persist_threads, smem);
        if (per_sm > 0 && blocks <= static_cast<std::int64_t>(per_sm) * g->target.sm_count) {
          g->persist_units[l][k] = static_cast<std::int16_t>(units);
          break;
        }
      }
    }
  }
}

/// Chooses, per layer and grad bucket, how many units (a multiple of 4) each block of backward's
/// persistent kernel owns: the fewest such that R's columns for them (all G·H rows) fit in shared
/// memory and every block of one direction is co-resident. Training plans only; not a projected
/// layer (dm needs every unit's dh̃ first: a barrier this kernel does not have).
template <class Occupancy>
void plan_grad_persistent(const detail::PlanImpl& p, GpuPlan* g, Occupancy blocks_per_sm) {
  std::memset(g->grad_persist_units, 0, sizeof g->grad_persist_units);
  if (!p.options.training || !g->target.cooperative || g->persist_threads < g->target.warp_size) return;
  const int warps = g->persist_threads / g->target.warp_size;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    if (p.stack.layers[l].proj_size > 0) continue;
    const int H = lp.hidden, G = lp.gates, cell = static_cast<int>(lp.cell);
    for (int k = 0; k < kGradBucketCount; ++k) {
      if ((k == 0 ? 1 : kGradBuckets[k - 1] + 1) > p.options.max_batch) break;
      for (int units = 4; units < H + 4; units += 4) {
        const std::int64_t blocks = (H + units - 1) / units;
        const std::size_t smem = grad_persistent_smem_bytes(G, H, units, warps, kGradBuckets[k], weight_bytes(g->weights));
        if (static_cast<std::int64_t>(smem) > g->target.smem_optin) break;  // more units only need more
        if (blocks > static_cast<std::int64_t>(g->target.sm_count) * 32) continue;
        const int per_sm = blocks_per_sm(cell, kGradPersistentBucket + k, g->weights, g->persist_threads, smem);
        if (per_sm > 0 && blocks <= static_cast<std::int64_t>(per_sm) * g->target.sm_count) {
          g->grad_persist_units[l][k] = static_cast<std::int16_t>(units);
          break;
        }
      }
    }
  }
}

/// Units per block of backward's persistent kernel for a direction of `batch` rows, or 0 (the
/// per-step kernels): only with a forced persistent recurrence (Recurrence's note).
inline int grad_persistent_units(const GpuPlan& g, int layer, int batch) {
  const int k = grad_bucket_index(batch);
  if (k < 0 || g.recurrence != Recurrence::persistent) return 0;
  return g.grad_persist_units[layer][k];
}

/// Which recurrence a layer of `batch` rows runs: the persistent kernel's units per block, or 0
/// for the per-step kernel.
inline int persistent_units(const GpuPlan& g, int layer, int batch) {
  const int k = bucket_index(batch);
  if (k < 0 || g.recurrence == Recurrence::tiled) return 0;
  if (g.recurrence == Recurrence::auto_select && batch > kAutoPersistentMaxBatch) return 0;
  return g.persist_units[layer][k];
}

/// Units per block of the persistent kernel on the matrix units for a run of `batch` rows, or 0:
/// the plan has a slice for the layer (GpuPlan::persist_mma_units: gpu_half_math on a device with
/// matrix units, the slice fits) and the batch fills one 16-row tile from kMmaStepMinBatch rows;
/// not with a forced per-step recurrence. It takes those batches from the f32 persistent kernel.
inline int persistent_mma_units(const GpuPlan& g, int layer, int batch) {
  if (g.recurrence == Recurrence::tiled || batch < kMmaStepMinBatch || batch > kMmaDim) return 0;
  return g.persist_mma_units[layer];
}

/// Whether the per-step recurrence of a run of `batch` rows runs on the matrix units
/// (rnn_step_mma_16x16) rather than in f32 (f32_rnn_step_tiled): the plan allows it
/// (gpu_half_math on a device with them, 16-bit weights or f32 ones as TF32: GpuPlan::mma_step) and the batch fills at
/// least kMmaStepMinBatch of a tile's 16 rows. Where the persistent kernel runs the batch
/// (persistent_mma_units or persistent_units > 0) it keeps doing so: a launch per step costs more
/// than a grid barrier and R comes from L2 instead of shared memory (docs/gpu.md, "Speed model").
inline bool use_mma_step(const GpuPlan& g, int batch) { return g.mma_step != 0 && batch >= kMmaStepMinBatch; }

/// Whether the per-step kernel uses the large tile: when even large tiles fill every multiprocessor.
/// (Forced choices: small, large or direct.)
inline bool use_large_tile(const GpuPlan& g, int hidden, int batch, int dirs) {
  if (g.tile != TileChoice::auto_select) return g.tile == TileChoice::large;
  const std::int64_t blocks = static_cast<std::int64_t>((hidden + StepTileLarge::kBU - 1) / StepTileLarge::kBU) *
                              ((batch + StepTileLarge::kBM - 1) / StepTileLarge::kBM) * dirs;
  return blocks >= g.target.sm_count;
}

/// Kernel choices forced for tests and tuning (the backend reads them from the environment).
struct Choices {
  Recurrence recurrence = Recurrence::auto_select;
  TileChoice tile = TileChoice::auto_select;
  int persist_threads = kPersistentThreads;  ///< block size of the persistent kernel
  bool graphs = false;  ///< forward replays captured graphs (env RNNCORE_GPU_GRAPHS=on)
};

/// The backend family of a device: "cuda" for NVIDIA (sm_XY), "hip" for AMD (gfxN).
inline const char* vendor_of(const DeviceDescription& d) { return std::strncmp(d.arch, "gfx", 3) == 0 ? "hip" : "cuda"; }

/// The backend choice of Plan::create for a GPU plan on `device` (ordinal `ordinal`): checks what
/// the kernels support, records the device and the choices, and names the kernel family.
inline Status plan_select(const PlanOptions& options, const DeviceDescription& device, int ordinal, Choices choices,
                          detail::PlanImpl* p) {
  RNNCORE_RETURN_IF_ERROR(check_supported(p->stack, options));
  GpuPlan& g = p->gpu;
  g = GpuPlan();
  g.device = ordinal;
  g.target = device;
  g.recurrence = choices.recurrence;
  g.tile = choices.tile == TileChoice::auto_select && device.direct_step != 0 ? TileChoice::direct : choices.tile;
  g.persist_threads = choices.persist_threads;
  g.graphs = choices.graphs ? 1 : 0;
  g.weights = weight_id(options.weight_dtype);
  // Reduced-precision products only where asked for, on a device with matrix units: f16 / bf16
  // products for 16-bit weights; for f32 weights TF32 products (x, h, W and R rounded to 10
  // mantissa bits) where the matrix units take TF32 (NVIDIA sm_80+, not AMD).
  g.mma_proj = options.gpu_half_math && device.mma != 0 && (g.weights != kWeightF32 || device.mma_tf32 != 0) ? 1 : 0;
  g.mma_step = g.mma_proj;  // also in training plans: the step's epilogue writes the same reserve rows
  static const char* const kWeights[] = {"", "_f16w", "_bf16w"};  // f32 computation; W, R stored as
  const char* products = !g.mma_proj ? "" : g.weights == kWeightF32 ? "_tf32" : "_mma";
  const int n = std::snprintf(p->kernel_name, sizeof p->kernel_name, "f32_rnn%s%s__%s_", kWeights[g.weights], products,
                              vendor_of(device));  // at most 24 of the 31 characters
  std::snprintf(p->kernel_name + n, sizeof p->kernel_name - static_cast<std::size_t>(n), "%s", device.arch);
  p->isa = Isa::none;
  p->vector = 1;
  return Status::ok;
}

/// The layouts and the persistent kernel's slices of a plan that plan_select made.
/// `blocks_per_sm(cell, bucket_index, weights, threads, smem)` is the occupancy of that persistent
/// kernel instance: the runtime's answer on a device, modeled_blocks_per_sm elsewhere.
template <class Occupancy>
void plan_layout(detail::PlanImpl* p, Occupancy blocks_per_sm) {
  compute_layout(p, &p->gpu);
  plan_persistent(*p, &p->gpu, blocks_per_sm);
  plan_grad_persistent(*p, &p->gpu, blocks_per_sm);
}

/// Blocks of `threads` threads, `registers` registers each and `smem` bytes of shared memory that
/// one multiprocessor holds at once, from the device's limits alone (what the runtime's occupancy
/// query answers on the device; register allocation granularity is ignored, so this is an upper
/// bound within a few registers). 0: the block cannot launch.
inline int modeled_blocks_per_sm(const DeviceDescription& d, int threads, int registers, std::int64_t smem) {
  if (threads <= 0 || threads > d.max_threads || smem > d.smem_optin) return 0;
  const std::int64_t warps = (threads + d.warp_size - 1) / d.warp_size;
  std::int64_t n = d.max_blocks_per_sm;
  n = std::min<std::int64_t>(n, d.max_threads_per_sm / (warps * d.warp_size));
  if (registers > 0) n = std::min<std::int64_t>(n, d.registers_per_sm / (static_cast<std::int64_t>(registers) * warps * d.warp_size));
  if (smem > 0) n = std::min<std::int64_t>(n, d.smem_per_sm / smem);
  return static_cast<int>(std::max<std::int64_t>(n, 0));
}

/// A device planned for without a runtime: its description, the kernel choices, and the occupancy
/// of the persistent kernels — `blocks_per_sm` for every instance if > 0, else modeled from
/// `registers` per thread.
struct DescribedDevice {
  DeviceDescription device;
  Choices choices;
  int blocks_per_sm = 0;
  int registers = 0;
};

/// Plan::create's own path (detail::create_plan) for `on`, with plan_select and plan_layout as the
/// backend calls them after querying its device: what the tests and the speed model plan with.
inline Status plan_for_device(const StackSpec& stack, PlanOptions options, const DescribedDevice& on, Plan* out) {
  detail::GpuPlanner planner;
  planner.context = &on;
  planner.select = [](const PlanOptions& o, detail::PlanImpl* p, const void* c) {
    const DescribedDevice& d = *static_cast<const DescribedDevice*>(c);
    return plan_select(o, d.device, 0, d.choices, p);
  };
  planner.layout = [](detail::PlanImpl* p, const void* c) {
    const DescribedDevice& d = *static_cast<const DescribedDevice*>(c);
    plan_layout(p, [&d](int, int, int, int threads, std::size_t smem) {
      return d.blocks_per_sm > 0 ? d.blocks_per_sm
                                 : modeled_blocks_per_sm(d.device, threads, d.registers, static_cast<std::int64_t>(smem));
    });
    return Status::ok;
  };
  options.backend = Backend::gpu;
  return detail::create_plan(stack, options, planner, out);
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_PLAN_HPP

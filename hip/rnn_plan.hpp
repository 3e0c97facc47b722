// The GPU backend's host side that does not touch a GPU runtime: what a GPU plan records, the
// packed and workspace layouts, the choice of the persistent kernel's slices, and the schedules of
// pack_weights and forward as sequences of kernel launches on a `Launcher`. It is compiled into the
// GPU backend (src/gpu/gpu_backend.hip, where the launcher is hip/rnn_launch.hpp's DeviceLauncher)
// and into the host tests (tests/gpu/, where the launcher runs the kernels in the emulator), so the
// tests check these schedules, offsets and grids exactly as the GPU runs them.
//
// A Launcher provides:
//   template <class K> Status launch(const Dims&, const typename K::Args& host, const typename K::Args* dev, int arg);
//   template <class K> Status launch_cooperative(const Dims&, const typename K::Args& host, const typename K::Args* dev, int arg);
//       Status::unsupported when the runtime refuses the cooperative launch itself (not supported
//       here, e.g. under MPS, or more blocks than can be co-resident now): nothing was queued
//   static constexpr bool kArgsInDeviceMemory;  // whether kernels read `dev` (else `host` is passed by value)
// `host` is the argument block on the host; `dev`, when kArgsInDeviceMemory, its copy in device
// memory (the workspace or the packed buffer) that a copy on the same stream filled before the
// launch. Which one a kernel receives is the vendor's choice (hip/gpu_compat.hpp,
// RNNCORE_GPU_ARGS_BY_VALUE; see LayerArgBlock).
//   Status copy_to_device(void* dst, const void* src, size_t bytes);        // synchronous (packing)
//   Status copy_to_device_async(void* dst, const void* src, size_t bytes);  // on the run's stream
//   Status copy_to_host(void* dst, const void* src, size_t bytes);  // synchronous, of memory already
//                                                                   // written (the packed header)
//   Status zero_async(void* dst, size_t bytes);                             // on the run's stream
//   Status finish(const char* what);  // packing: wait and check; forward: check launches (no wait)
#ifndef RNNCORE_HIP_RNN_PLAN_HPP
#define RNNCORE_HIP_RNN_PLAN_HPP

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hip/rnn_device.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
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

/// Batch buckets of the persistent kernel: MAXB of the instance that runs a batch B is the
/// smallest bucket ≥ B.
constexpr int kBuckets[] = {1, 2, 4, 8, 16, 32, 64};
constexpr int kBucketCount = 7;
/// With Recurrence::auto_select the persistent kernel runs batches up to this size.
constexpr int kAutoPersistentMaxBatch = 16;

/// How the recurrence of a layer runs (env RNNCORE_GPU_RECURRENCE=auto|persistent|tiled).
enum class Recurrence : std::int32_t { auto_select = 0, persistent = 1, tiled = 2 };
/// Tile of the per-step kernel (env RNNCORE_GPU_TILE=auto|small|large).
enum class TileChoice : std::int32_t { auto_select = 0, small = 1, large = 2 };

/// What the backend needs to know about the device (read on the host at plan time).
struct DeviceFacts {
  std::int32_t sm_count = 1;     ///< multiprocessors / compute units
  std::int32_t warp_size = 32;   ///< hipDeviceAttributeWarpSize (device code has its own constant)
  std::int32_t max_threads = 1024;
  std::int32_t cooperative = 1;  ///< cooperative launches supported
  std::int64_t smem_optin = 48 * 1024;  ///< largest dynamic shared memory of one block
};

/// Everything a GPU plan records beyond PlanImpl's common fields; kept in PlanImpl::gpu.
struct GpuPlan {
  std::uint32_t magic;
  std::int32_t device;
  DeviceFacts facts;
  std::int32_t recurrence;       ///< Recurrence
  std::int32_t tile;             ///< TileChoice
  std::int32_t persist_threads;  ///< block size of the persistent kernel (a multiple of the warp size)
  std::int32_t weights;          ///< WeightId: storage type of W and R (PlanOptions::weight_dtype)
  std::uint64_t staging;         ///< packed-buffer offset of the canonical staging area (used by pack only)
  std::uint64_t staging_bytes;
  std::uint64_t ws_lengths;      ///< workspace offset of the device copy of seq_lengths [B]
  std::uint64_t ws_row_ids;      ///< ... of row_ids [B]
  std::uint64_t ws_args;         ///< workspace offset of the run's LayerArgBlock [layers]
  std::uint64_t pack_args;       ///< packed-buffer offset of the PackArgs of the (layer, direction) being packed
  /// Units per block of the persistent kernel per layer and batch bucket; 0: that bucket does not
  /// fit (shared memory or co-residency) and the per-step kernel runs instead.
  std::int16_t persist_units[kMaxLayers][kBucketCount];
};
constexpr std::uint32_t kGpuPlanMagic = 0x47505531u;
static_assert(sizeof(GpuPlan) <= detail::kGpuPlanBytes, "PlanImpl::gpu too small for GpuPlan");
static_assert(std::is_trivially_copyable<GpuPlan>::value, "GpuPlan lives in the plan's bytes");

inline GpuPlan get_gpu_plan(const detail::PlanImpl& p) {
  GpuPlan g;
  std::memcpy(&g, p.gpu, sizeof g);
  return g;
}
inline void set_gpu_plan(detail::PlanImpl* p, const GpuPlan& g) { std::memcpy(p->gpu, &g, sizeof g); }

/// Grid of a launch: gx × gy × gz blocks of `block` threads with `smem` bytes of dynamic shared memory.
struct Dims {
  std::uint32_t gx = 1, gy = 1, gz = 1, block = 1;
  std::size_t smem = 0;
};

/// Devices for which the backend remembers per-kernel settings (more are served, uncached).
constexpr int kMaxDevices = 64;

/// A kernel's dynamic shared-memory limit (cudaFuncAttributeMaxDynamicSharedMemorySize) is one
/// value per (kernel, device) for the whole process. Setting it per launch to that launch's size
/// let two host threads with different plans race: one lowered it between another's setting and
/// its launch, which then failed. Instead it is raised once per (Tag = kernel, device) to the
/// device's opt-in maximum: `query_max(device, &bytes)` then `set(device, bytes)`, both returning
/// Status. Every caller sets the same value, so the limit never decreases once raised, and
/// threads that race through the first call only set it twice to that value. Launches still ask
/// for the plan's own size; the limit only allows it.
template <class Tag, class Query, class Set>
Status raise_smem_limit_once(int device, Query query_max, Set set) {
  static std::atomic<int> raised[kMaxDevices];  // zero-initialised (static storage)
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && raised[device].load(std::memory_order_acquire) != 0) return Status::ok;
  int bytes = 0;
  RNNCORE_RETURN_IF_ERROR(query_max(device, &bytes));
  RNNCORE_RETURN_IF_ERROR(set(device, bytes));
  if (cached) raised[device].store(1, std::memory_order_release);
  return Status::ok;
}

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

namespace layout_detail {
// Regions of a buffer, each aligned to kAlignment, with an overflow guard (as in src/plan.cpp).
class Regions {
 public:
  explicit Regions(std::uint64_t start) : size_(start) {}
  std::size_t take(std::uint64_t count, std::uint64_t elem_bytes) {
    constexpr std::uint64_t kMax = std::uint64_t{1} << 46;
    if (count != 0 && elem_bytes > kMax / count) overflow_ = true;
    const std::uint64_t at = size_;
    size_ = overflow_ ? size_ : (size_ + count * elem_bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (size_ > kMax) overflow_ = true;
    return static_cast<std::size_t>(at);
  }
  std::uint64_t size() const { return size_; }
  bool overflow() const { return overflow_; }

 private:
  std::uint64_t size_;
  bool overflow_ = false;
};
}  // namespace layout_detail

/// Canonical span [begin, begin + count) of one (layer, direction)'s parameters.
inline void canonical_span(const StackSpec& st, int layer, int dir, std::int64_t* begin, std::int64_t* count) {
  const int G = num_gates(st.layers[layer].mode), H = st.layers[layer].hidden_size;
  const std::int64_t w = canonical_offset(st, layer, dir, ParamKind::input_weight, 0);
  *begin = w >= 0 ? w : canonical_offset(st, layer, dir, ParamKind::recurrent_weight, 0);
  *count = canonical_offset(st, layer, dir, ParamKind::recurrent_bias, G - 1) + H - *begin;
}

/// Packed-buffer and workspace offsets of a GPU plan (PlanImpl::layers[].dir[], ws, packed_bytes,
/// hidden_stride; the staging area and the length / row-id copies in `g`). On overflow ws.total
/// is ~0, which Plan::create reports.
inline void compute_layout(detail::PlanImpl* p, GpuPlan* g) {
  const StackSpec& st = p->stack;
  const std::uint64_t B = static_cast<std::uint64_t>(p->options.max_batch), T = static_cast<std::uint64_t>(p->options.max_seq_len);
  layout_detail::Regions packed(detail::kPackedHeaderBytes);
  std::uint64_t proj = 0, state = 0, x_cell = 0, inner_out = 0, staging = 0;
  bool lstm = false, reset_before = false;
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
      std::int64_t begin = 0, count = 0;
      canonical_span(st, l, d, &begin, &count);
      staging = std::max<std::uint64_t>(staging, static_cast<std::uint64_t>(count));
    }
    proj = std::max(proj, T * B * G * H);
    state = std::max(state, B * Hs);
    if (lp.input_dropout) x_cell = std::max(x_cell, T * B * static_cast<std::uint64_t>(lp.input_size));
    if (l + 1 < st.num_layers) inner_out = std::max(inner_out, T * B * static_cast<std::uint64_t>(lp.dirs) * H);
    lstm = lstm || lp.mode == Mode::lstm;
    reset_before = reset_before || lp.cell == simd::Cell::gru_reset_before;
  }
  g->pack_args = packed.take(1, sizeof(PackArgs));
  g->staging = packed.take(staging, 4);
  g->staging_bytes = staging * 4;
  p->packed_bytes = static_cast<std::size_t>(packed.size());

  layout_detail::Regions ws(0);
  detail::WorkspaceLayout& w = p->ws;
  w = detail::WorkspaceLayout();
  for (int d = 0; d < 2; ++d) {
    w.proj[d] = ws.take(proj, 4);
    w.h[d][0] = ws.take(state, 4);
    w.h[d][1] = ws.take(state, 4);
    if (lstm) w.c[d] = ws.take(state, 4);
    if (reset_before) {
      w.rh[d] = ws.take(state, 4);
      w.z[d] = ws.take(state, 4);
    }
    if (x_cell > 0) w.x_cell[d] = ws.take(x_cell, 4);
  }
  if (st.num_layers > 1) w.layer_out[0] = ws.take(inner_out, 4);
  if (st.num_layers > 2) w.layer_out[1] = ws.take(inner_out, 4);
  g->ws_lengths = ws.take(B, 4);
  g->ws_row_ids = ws.take(B, 4);
  g->ws_args = ws.take(static_cast<std::uint64_t>(st.num_layers), sizeof(LayerArgBlock));
  w.total = static_cast<std::size_t>(ws.size());
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
}

/// Chooses, per layer and batch bucket, how many units each block of the persistent kernel owns:
/// the fewest (most blocks, shortest dot products) such that the slice of R fits in shared memory
/// and every block of both directions is co-resident. `blocks_per_sm(cell, bucket_index, weights,
/// threads, smem)` is the occupancy of that kernel instance (0 if it cannot launch).
template <class Occupancy>
void plan_persistent(const detail::PlanImpl& p, GpuPlan* g, Occupancy blocks_per_sm) {
  std::memset(g->persist_units, 0, sizeof g->persist_units);
  if (!g->facts.cooperative || g->persist_threads < g->facts.warp_size) return;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    const int H = lp.hidden, G = lp.gates, cell = static_cast<int>(lp.cell);
    const std::int64_t Hs = lp.hidden_stride;
    for (int k = 0; k < kBucketCount; ++k) {
      const int lowest = k == 0 ? 1 : kBuckets[k - 1] + 1;
      if (lowest > p.options.max_batch) break;
      const int batch = std::min(kBuckets[k], p.options.max_batch);
      for (int units = 4; units < H + 4; units += 4) {
        const std::int64_t blocks = static_cast<std::int64_t>(lp.dirs) * ((H + units - 1) / units);
        const std::size_t smem = persistent_smem_bytes(G, kBuckets[k], units, Hs, batch, weight_bytes(g->weights));
        if (static_cast<std::int64_t>(smem) > g->facts.smem_optin) break;  // more units only need more
        if (blocks > static_cast<std::int64_t>(g->facts.sm_count) * 32) continue;  // no device holds that many
        const int per_sm = blocks_per_sm(cell, k, g->weights, g->persist_threads, smem);
        if (per_sm > 0 && blocks <= static_cast<std::int64_t>(per_sm) * g->facts.sm_count) {
          g->persist_units[l][k] = static_cast<std::int16_t>(units);
          break;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------- launches

/// A grid-stride launch over `elements` items (at most 16 blocks per multiprocessor), `dirs` deep.
inline Dims elementwise_dims(const GpuPlan& g, std::int64_t elements, int dirs) {
  Dims d;
  const std::int64_t cap = static_cast<std::int64_t>(g.facts.sm_count) * 16;
  const std::int64_t blocks = (elements + kBlockThreads - 1) / kBlockThreads;
  d.gx = static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::min(blocks, cap)));
  d.gz = static_cast<std::uint32_t>(dirs);
  d.block = kBlockThreads;
  return d;
}

/// Which recurrence a layer of `batch` rows runs: the persistent kernel's units per block, or 0
/// for the per-step kernel.
inline int persistent_units(const GpuPlan& g, int layer, int batch) {
  const int k = bucket_index(batch);
  if (k < 0 || g.recurrence == static_cast<std::int32_t>(Recurrence::tiled)) return 0;
  if (g.recurrence == static_cast<std::int32_t>(Recurrence::auto_select) && batch > kAutoPersistentMaxBatch) return 0;
  return g.persist_units[layer][k];
}

/// Whether the per-step kernel uses the large tile: when even large tiles fill every multiprocessor.
inline bool use_large_tile(const GpuPlan& g, int hidden, int batch, int dirs) {
  if (g.tile != static_cast<std::int32_t>(TileChoice::auto_select)) return g.tile == static_cast<std::int32_t>(TileChoice::large);
  const std::int64_t blocks = static_cast<std::int64_t>((hidden + StepTileLarge::kBU - 1) / StepTileLarge::kBU) *
                              ((batch + StepTileLarge::kBM - 1) / StepTileLarge::kBM) * dirs;
  return blocks >= g.facts.sm_count;
}

namespace schedule {

template <class Tile, class K>
Dims step_dims(const LayerArgs& la) {
  Dims d;
  d.gx = static_cast<std::uint32_t>((la.hidden + Tile::kBU - 1) / Tile::kBU);
  d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((la.batch + Tile::kBM - 1) / Tile::kBM, 65535));
  d.gz = static_cast<std::uint32_t>(la.dirs);
  d.block = Tile::kThreads;
  d.smem = K::smem_bytes();
  return d;
}

// `la` is the host copy of a layer's arguments (grids are computed from it), `dev` its device copy.
template <int C, class Tile, class WT, class L>
Status steps_tiled(L& ln, const LayerArgs& la, const LayerArgs* dev) {
  if constexpr (C == kGruResetBefore) {
    using P1 = f32_rnn_step_tiled<C, 0, 2, 1, Tile, WT>;
    using P2 = f32_rnn_step_tiled<C, 2, 1, 2, Tile, WT>;
    const Dims d1 = step_dims<Tile, P1>(la), d2 = step_dims<Tile, P2>(la);
    for (int s = 0; s < la.steps; ++s) {
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P1>(d1, la, dev, s));
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P2>(d2, la, dev, s));
    }
  } else {
    using K = f32_rnn_step_tiled<C, 0, cell_gates(C), 0, Tile, WT>;
    const Dims d = step_dims<Tile, K>(la);
    for (int s = 0; s < la.steps; ++s) RNNCORE_RETURN_IF_ERROR(ln.template launch<K>(d, la, dev, s));
  }
  return Status::ok;
}

template <int C, int MAXB, class WT, class L>
Status persistent(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int units) {
  using K = f32_rnn_recurrence_persistent<C, MAXB, WT>;
  Dims d;
  d.gx = static_cast<std::uint32_t>((la.hidden + units - 1) / units);
  d.gz = static_cast<std::uint32_t>(la.dirs);
  d.block = static_cast<std::uint32_t>(g.persist_threads);
  d.smem = persistent_smem_bytes(cell_gates(C), MAXB, units, la.hidden_stride, la.batch, sizeof(WT));
  return ln.template launch_cooperative<K>(d, la, dev, units);
}

template <int C, class WT, class L>
Status recurrence(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int layer) {
  const int units = persistent_units(g, layer, la.batch);
  if (units > 0) {
    Status s = Status::internal;
    switch (bucket_index(la.batch)) {
      case 0: s = persistent<C, 1, WT>(ln, g, la, dev, units); break;
      case 1: s = persistent<C, 2, WT>(ln, g, la, dev, units); break;
      case 2: s = persistent<C, 4, WT>(ln, g, la, dev, units); break;
      case 3: s = persistent<C, 8, WT>(ln, g, la, dev, units); break;
      case 4: s = persistent<C, 16, WT>(ln, g, la, dev, units); break;
      case 5: s = persistent<C, 32, WT>(ln, g, la, dev, units); break;
      default: s = persistent<C, 64, WT>(ln, g, la, dev, units); break;
    }
    // A refused cooperative launch (MPS, a device shared with other work, co-residency lower than
    // at plan time) queued nothing: the per-step kernels below compute the same recurrence.
    if (s != Status::unsupported) return s;
  }
  if (use_large_tile(g, la.hidden, la.batch, la.dirs)) return steps_tiled<C, StepTileLarge, WT>(ln, la, dev);
  return steps_tiled<C, StepTileSmall, WT>(ln, la, dev);
}

template <class WT, class L>
Status recurrence_of(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int layer, simd::Cell cell) {
  switch (cell) {
    case simd::Cell::lstm: return recurrence<kLstm, WT>(ln, g, la, dev, layer);
    case simd::Cell::gru_reset_after: return recurrence<kGruResetAfter, WT>(ln, g, la, dev, layer);
    case simd::Cell::gru_reset_before: return recurrence<kGruResetBefore, WT>(ln, g, la, dev, layer);
    case simd::Cell::rnn_tanh: return recurrence<kRnnTanh, WT>(ln, g, la, dev, layer);
    case simd::Cell::rnn_relu: return recurrence<kRnnRelu, WT>(ln, g, la, dev, layer);
  }
  return Status::internal;
}

inline MaskSite to_site(const detail::Mask& m) {
  MaskSite s;
  s.seed = m.seed;
  s.site = m.site;
  s.width = m.width;
  s.params = m.params;
  s.active = m.active ? 1 : 0;
  s.variational = m.variational ? 1 : 0;
  s.time_offset = m.time_offset;
  s.shared = m.shared ? 1 : 0;
  return s;
}

template <class T>
T* at(unsigned char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace schedule

// ---------------------------------------------------------------------------------- pack

/// pack_weights on the GPU: per (layer, direction), the canonical parameters are copied into the
/// staging area at the end of the packed buffer and a kernel writes the packed blocks from there.
/// No memory beyond the packed buffer is used.
template <class WT, class L>
Status pack_with(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const float* canonical, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const detail::PackedHeader header{detail::kPackedMagic, p.fingerprint};
  unsigned char head[detail::kPackedHeaderBytes] = {};
  std::memcpy(head, &header, sizeof header);
  RNNCORE_RETURN_IF_ERROR(ln.copy_to_device(packed, head, sizeof head));
  for (int l = 0; l < st.num_layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    const std::int64_t H = lp.hidden, I = lp.input_size, G = lp.gates;
    for (int d = 0; d < lp.dirs; ++d) {
      std::int64_t begin = 0, count = 0;
      canonical_span(st, l, d, &begin, &count);
      // The kernel assumes each kind's gate blocks follow one another (DESIGN §4); say so if not.
      const std::int64_t w0 = canonical_offset(st, l, d, ParamKind::input_weight, 0);
      const std::int64_t r0 = canonical_offset(st, l, d, ParamKind::recurrent_weight, 0);
      const std::int64_t bw0 = canonical_offset(st, l, d, ParamKind::input_bias, 0);
      const std::int64_t br0 = canonical_offset(st, l, d, ParamKind::recurrent_bias, 0);
      for (int gate = 1; gate < G; ++gate) {
        const bool ok = (w0 < 0 || canonical_offset(st, l, d, ParamKind::input_weight, gate) == w0 + gate * H * I) &&
                        canonical_offset(st, l, d, ParamKind::recurrent_weight, gate) == r0 + gate * H * H &&
                        canonical_offset(st, l, d, ParamKind::input_bias, gate) == bw0 + gate * H &&
                        canonical_offset(st, l, d, ParamKind::recurrent_bias, gate) == br0 + gate * H;
        RNNCORE_ENSURE(ok, Status::internal, "gpu pack: canonical gate blocks of layer %d are not consecutive", l);
      }
      RNNCORE_RETURN_IF_ERROR(
          ln.copy_to_device(packed + g.staging, canonical + begin, static_cast<std::size_t>(count) * sizeof(float)));
      const detail::DirectionPack& dp = lp.dir[d];
      PackArgs a;
      std::memset(&a, 0, sizeof a);
      a.staging = schedule::at<float>(packed, g.staging);
      a.w_at = w0 < 0 ? -1 : w0 - begin;
      a.r_at = r0 - begin;
      a.bw_at = bw0 - begin;
      a.br_at = br0 - begin;
      a.w = lp.skip_input ? nullptr : packed + dp.w_panel;
      a.r = packed + dp.r_panel;
      a.bias = schedule::at<float>(packed, dp.bias);
      a.bias_rn = lp.cell == simd::Cell::gru_reset_after ? schedule::at<float>(packed, dp.bias_rn) : nullptr;
      a.gates = lp.gates;
      a.hidden = lp.hidden;
      a.in_size = lp.input_size;
      a.in_pad = (lp.input_size + 3) / 4 * 4;
      a.hidden_stride = lp.hidden_stride;
      a.cell = static_cast<std::int32_t>(lp.cell);
      // The argument block goes next to the staging area; like the staging copy, this synchronous
      // copy waits for the previous (layer, direction)'s kernel, which read both.
      if (L::kArgsInDeviceMemory) RNNCORE_RETURN_IF_ERROR(ln.copy_to_device(packed + g.pack_args, &a, sizeof a));
      using K = f32_rnn_pack_weights<WT>;
      RNNCORE_RETURN_IF_ERROR(ln.template launch<K>(elementwise_dims(g, K::elements(a), 1), a,
                                                    schedule::at<const PackArgs>(packed, g.pack_args), 0));
    }
  }
  return ln.finish("pack_weights");
}

/// pack_weights on the GPU (see pack_with), for the plan's weight storage type.
template <class L>
Status pack(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const float* canonical, unsigned char* packed) {
  if (g.weights == kWeightF16) return pack_with<WeightF16>(ln, p, g, canonical, packed);
  if (g.weights == kWeightBF16) return pack_with<WeightBF16>(ln, p, g, canonical, packed);
  return pack_with<float>(ln, p, g, canonical, packed);
}

// ---------------------------------------------------------------------------------- forward

/// Reads the packed buffer's header back from the device and checks it as the CPU backends do: a
/// buffer that pack_weights of this plan's layout (shapes, weight storage type, size) did not
/// fill is refused before anything runs, never read as weights.
template <class L>
Status check_packed(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed) {
  detail::PackedHeader header;
  std::memset(&header, 0, sizeof header);
  RNNCORE_RETURN_IF_ERROR(ln.copy_to_host(&header, packed, sizeof header));
  static const char* const kWeights[] = {"f32", "f16", "bf16"};
  RNNCORE_ENSURE(header.magic == detail::kPackedMagic && header.fingerprint == p.fingerprint, Status::weights_not_packed,
                 "forward: the packed buffer was not filled by pack_weights of this plan's layout (GPU, %s weights)",
                 kWeights[g.weights >= 0 && g.weights < 3 ? g.weights : 0]);
  return Status::ok;
}

/// The forward pass as launches on the launcher's stream: per layer, input dropout (if any), the
/// input projection of all steps, the initial state, the recurrence (persistent or per step, both
/// directions in each launch), the final state, the output chain of the wrappers, and the
/// inter-layer dropout. Host seq_lengths / row_ids are copied into the workspace on the stream.
template <class WT, class L>
Status forward_with(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed_c, unsigned char* ws,
                    const ForwardArgs& a) {
  using schedule::at;
  auto* packed = const_cast<unsigned char*>(packed_c);  // kernels only read it
  RNNCORE_RETURN_IF_ERROR(check_packed(ln, p, g, packed_c));
  const StackSpec& st = p.stack;
  const int B = a.batch, T = a.seq_len, layers = st.num_layers;
  const bool batch_major = a.layout == Layout::batch_major;
  detail::RunDropout run;
  run.on = a.run_mode != RunMode::inference && p.any_dropout;
  run.seed = a.seed;
  run.step = static_cast<std::uint32_t>(a.step);
  run.row_ids = a.row_ids;
  run.time_offset = a.time_offset;
  const std::int32_t* lengths = nullptr;
  const std::uint32_t* row_ids = nullptr;
  if (a.seq_lengths != nullptr) {
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + g.ws_lengths, a.seq_lengths, sizeof(std::int32_t) * B));
    lengths = at<std::int32_t>(ws, g.ws_lengths);
  }
  if (a.row_ids != nullptr && run.on) {  // only masks read row ids
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + g.ws_row_ids, a.row_ids, sizeof(std::uint32_t) * B));
    row_ids = at<std::uint32_t>(ws, g.ws_row_ids);
  }

  // First every layer's argument blocks on the host, then one copy of them into the workspace,
  // then the launches, which pass the kernels pointers to those device copies.
  LayerArgBlock host[kMaxLayers];
  bool input_dropped[kMaxLayers] = {};
  for (int l = 0; l < layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    const LayerSpec& ls = st.layers[l];
    const std::int64_t I = lp.input_size, H = lp.hidden, out_w = static_cast<std::int64_t>(lp.dirs) * H;
    std::memset(&host[l], 0, sizeof host[l]);
    LayerArgs& la = host[l].layer;
    la.gates = lp.gates;
    la.batch = B;
    la.steps = T;
    la.in_size = lp.input_size;
    la.in_pad = static_cast<std::int32_t>((I + 3) / 4 * 4);
    la.hidden = lp.hidden;
    la.hidden_stride = lp.hidden_stride;
    la.dirs = lp.dirs;
    la.num_wrappers = ls.num_wrappers;
    for (int w = 0; w < ls.num_wrappers; ++w) la.residual[w] = ls.wrappers[w].kind == WrapperKind::residual ? 1 : 0;
    la.lengths = lengths;
    la.row_ids = row_ids;
    la.step = run.step;

    // The layer's input (the caller's x in its layout, else the previous layer's time-major output)
    // and output (the caller's y, else a workspace buffer), as src/forward.cpp walks them.
    const float* x;
    std::int64_t x_st, x_sb;
    if (l == 0) {
      x = static_cast<const float*>(a.x);
      x_st = batch_major ? I : B * I;
      x_sb = batch_major ? static_cast<std::int64_t>(T) * I : I;
    } else {
      x = at<float>(ws, p.ws.layer_out[(l - 1) & 1]);
      x_st = B * I;
      x_sb = I;
    }
    float* out;
    std::int64_t y_st, y_sb;
    if (l == layers - 1) {
      out = static_cast<float*>(a.y);
      y_st = batch_major ? out_w : B * out_w;
      y_sb = batch_major ? static_cast<std::int64_t>(T) * out_w : out_w;
    } else {
      out = at<float>(ws, p.ws.layer_out[l & 1]);
      y_st = B * out_w;
      y_sb = out_w;
    }
    for (int d = 0; d < lp.dirs; ++d) {
      DirArgs& da = la.dir[d];
      const detail::DirectionPack& dp = lp.dir[d];
      const std::size_t slot = static_cast<std::size_t>(state_offset(st, B, l, d)) * sizeof(float);
      da.x = da.x_raw = x;
      da.x_st = da.xr_st = x_st;
      da.x_sb = da.xr_sb = x_sb;
      da.y = out + d * H;
      da.y_st = y_st;
      da.y_sb = y_sb;
      da.w = lp.skip_input ? nullptr : packed + dp.w_panel;
      da.r = packed + dp.r_panel;
      da.bias = at<float>(packed, dp.bias);
      da.bias_rn = lp.cell == simd::Cell::gru_reset_after ? at<float>(packed, dp.bias_rn) : nullptr;
      da.proj = at<float>(ws, p.ws.proj[d]);
      da.h[0] = at<float>(ws, p.ws.h[d][0]);
      da.h[1] = at<float>(ws, p.ws.h[d][1]);
      da.c = lp.mode == Mode::lstm ? at<float>(ws, p.ws.c[d]) : nullptr;
      da.rh = lp.cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.rh[d]) : nullptr;
      da.zg = lp.cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.z[d]) : nullptr;
      da.h0 = a.h0 != nullptr ? reinterpret_cast<const float*>(static_cast<const unsigned char*>(a.h0) + slot) : nullptr;
      da.c0 = a.c0 != nullptr && lp.mode == Mode::lstm
                  ? reinterpret_cast<const float*>(static_cast<const unsigned char*>(a.c0) + slot)
                  : nullptr;
      da.hy = a.hy != nullptr ? reinterpret_cast<float*>(static_cast<unsigned char*>(a.hy) + slot) : nullptr;
      da.cy = a.cy != nullptr && lp.mode == Mode::lstm ? reinterpret_cast<float*>(static_cast<unsigned char*>(a.cy) + slot)
                                                      : nullptr;
      for (int w = 0; w < ls.num_wrappers; ++w) {
        da.input[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::input));
        da.output[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::output));
        da.state_h[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_h));
        da.state_c[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_c));
        input_dropped[l] = input_dropped[l] || da.input[w].active;
      }
      da.reverse = d == 1 ? 1 : 0;
      if (input_dropped[l]) {  // the cell reads x_cell, which the input-dropout pre-pass writes
        da.x_cell = at<float>(ws, p.ws.x_cell[d]);
        da.x = da.x_cell;
        da.x_st = B * I;
        da.x_sb = I;
      }
    }
    const detail::Mask inter = detail::inter_layer_mask(st, run, l);
    if (inter.active) {
      InterLayerArgs& ia = host[l].inter;
      ia.out = out;
      ia.steps = T;
      ia.batch = B;
      ia.width = static_cast<std::int32_t>(out_w);
      ia.row_ids = row_ids;
      ia.step = run.step;
      ia.mask = schedule::to_site(inter);
    }
  }
  if (L::kArgsInDeviceMemory && layers > 0)
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + g.ws_args, host, sizeof(LayerArgBlock) * static_cast<std::size_t>(layers)));
  const LayerArgBlock* dev = at<const LayerArgBlock>(ws, g.ws_args);

  for (int l = 0; l < layers; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    const LayerArgs& la = host[l].layer;
    const LayerArgs* dla = &dev[l].layer;
    const std::int64_t I = lp.input_size, H = lp.hidden, out_w = static_cast<std::int64_t>(lp.dirs) * H;
    if (T > 0) {
      if (input_dropped[l]) {
        const std::int64_t items = static_cast<std::int64_t>(T) * B * ((I + 3) / 4);
        RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_input_dropout>(elementwise_dims(g, items, lp.dirs), la, dla, 0));
      }
      if (lp.skip_input) {
        const std::int64_t items = static_cast<std::int64_t>(T) * B * lp.gates * H;
        RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_proj_skip>(elementwise_dims(g, items, lp.dirs), la, dla, 0));
      } else {
        using K = f32_rnn_proj_gemm_tiled<WT>;
        Dims d;
        d.gx = static_cast<std::uint32_t>((static_cast<std::int64_t>(lp.gates) * H + K::kBN - 1) / K::kBN);
        d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((static_cast<std::int64_t>(T) * B + K::kBM - 1) / K::kBM, 65535));
        d.gz = static_cast<std::uint32_t>(lp.dirs);
        d.block = K::kThreads;
        d.smem = K::smem_bytes();
        RNNCORE_RETURN_IF_ERROR(ln.template launch<K>(d, la, dla, 0));
      }
    }
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_state_init>(
        elementwise_dims(g, static_cast<std::int64_t>(B) * lp.hidden_stride, lp.dirs), la, dla, 0));
    if (T > 0) RNNCORE_RETURN_IF_ERROR(schedule::recurrence_of<WT>(ln, g, la, dla, l, lp.cell));
    if (a.hy != nullptr || (a.cy != nullptr && lp.mode == Mode::lstm))
      RNNCORE_RETURN_IF_ERROR(
          ln.template launch<f32_rnn_state_final>(elementwise_dims(g, static_cast<std::int64_t>(B) * H, lp.dirs), la, dla, 0));
    if (T > 0 && lp.output_chain) {
      const std::int64_t items = static_cast<std::int64_t>(T) * B * ((H + 3) / 4);
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_output_chain>(elementwise_dims(g, items, lp.dirs), la, dla, 0));
    }
    if (a.cy != nullptr && lp.mode != Mode::lstm)  // a layer without cell state reports c = 0
      RNNCORE_RETURN_IF_ERROR(ln.zero_async(static_cast<unsigned char*>(a.cy) + static_cast<std::size_t>(state_offset(st, B, l, 0)) * sizeof(float),
                                            static_cast<std::size_t>(out_w) * B * sizeof(float)));
    if (host[l].inter.mask.active && T > 0) {
      const std::int64_t items = static_cast<std::int64_t>(T) * B * ((out_w + 3) / 4);
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_inter_layer_dropout>(elementwise_dims(g, items, 1), host[l].inter,
                                                                                      &dev[l].inter, 0));
    }
  }
  return ln.finish("forward");
}

/// The forward pass on the GPU (see forward_with), for the plan's weight storage type.
template <class L>
Status forward(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed, unsigned char* ws,
               const ForwardArgs& a) {
  if (g.weights == kWeightF16) return forward_with<WeightF16>(ln, p, g, packed, ws, a);
  if (g.weights == kWeightBF16) return forward_with<WeightBF16>(ln, p, g, packed, ws, a);
  return forward_with<float>(ln, p, g, packed, ws, a);
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_HIP_RNN_PLAN_HPP

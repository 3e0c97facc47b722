// The schedules of pack_weights and forward on the GPU as sequences of kernel launches on a
// `Launcher`, from a plan that src/gpu/host/plan.hpp made; no GPU runtime is touched here. It is compiled into the
// GPU backend (src/gpu/gpu_backend.hip, where the launcher is src/gpu/host/launcher.hpp's DeviceLauncher)
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
// launch. Which one a kernel receives is the vendor's choice (src/gpu/vendor.hpp,
// RNNCORE_GPU_ARGS_BY_VALUE; see LayerArgBlock).
//   Status copy_to_device(void* dst, const void* src, size_t bytes);        // synchronous (packing)
//   Status copy_to_device_async(void* dst, const void* src, size_t bytes);  // on the run's stream
//   Status copy_to_host(void* dst, const void* src, size_t bytes);  // synchronous, of memory already
//                                                                   // written (the packed header)
//   Status copy_to_host_in_order(void* dst, const void* src, size_t bytes);  // on the run's stream, then
//                                                                   // waits for it (backward's reserve header)
//   Status zero_async(void* dst, size_t bytes);                             // on the run's stream
//   Status finish(const char* what);  // packing: wait and check; forward: check launches (no wait)
#ifndef RNNCORE_SRC_GPU_HOST_SCHEDULE_HPP
#define RNNCORE_SRC_GPU_HOST_SCHEDULE_HPP

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/gpu/device/kernels.hpp"
#include "src/gpu/host/plan.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace gpu {
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

// ---------------------------------------------------------------------------------- launches

/// A grid-stride launch over `elements` items (at most 16 blocks per multiprocessor), `dirs` deep.
inline Dims elementwise_dims(const GpuPlan& g, std::int64_t elements, int dirs) {
  Dims d;
  const std::int64_t cap = static_cast<std::int64_t>(g.target.sm_count) * 16;
  const std::int64_t blocks = (elements + kBlockThreads - 1) / kBlockThreads;
  d.gx = static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::min(blocks, cap)));
  d.gz = static_cast<std::uint32_t>(dirs);
  d.block = kBlockThreads;
  return d;
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

/// A projected LSTM's step s ends in f32_lstm_projection_step (h = clip(W_proj m) of every row);
/// other layers launch nothing here.
template <int C, class WT, class L>
Status projection_step(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int s) {
  if constexpr (C != kLstm) return Status::ok;
  if (la.out == la.hidden) return Status::ok;  // no projection (P < H where there is one)
  const std::int64_t items = static_cast<std::int64_t>(la.batch) * ((la.out + 3) / 4);
  return ln.template launch<f32_lstm_projection_step<WT>>(elementwise_dims(g, items, la.dirs), la, dev, s);
}

// `la` is the host copy of a layer's arguments (grids are computed from it), `dev` its device copy.
// Step: f32_rnn_step_tiled (staged tiles), f32_rnn_step_direct or f32_rnn_step_lanes, each on its tile's grid.
template <int C, template <int, int, int, int, class, class> class Step, class Tile, class WT, class L>
Status steps_tiled(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev) {
  if constexpr (C == kGruResetBefore) {
    using P1 = Step<C, 0, 2, 1, Tile, WT>;
    using P2 = Step<C, 2, 1, 2, Tile, WT>;
    const Dims d1 = step_dims<Tile, P1>(la), d2 = step_dims<Tile, P2>(la);
    for (int s = 0; s < la.steps; ++s) {
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P1>(d1, la, dev, s));
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P2>(d2, la, dev, s));
    }
  } else {
    using K = Step<C, 0, cell_gates(C), 0, Tile, WT>;
    const Dims d = step_dims<Tile, K>(la);
    for (int s = 0; s < la.steps; ++s) {
      RNNCORE_RETURN_IF_ERROR(ln.template launch<K>(d, la, dev, s));
      RNNCORE_RETURN_IF_ERROR((projection_step<C, WT>(ln, g, la, dev, s)));
    }
  }
  return Status::ok;
}

/// Grid of the matrix-unit step kernel K: 16-unit tiles × 16-row tiles (strided) × directions.
template <class K>
Dims mma_step_dims(const GpuPlan& g, const LayerArgs& la) {
  Dims d;
  d.gx = static_cast<std::uint32_t>((la.hidden + kMmaDim - 1) / kMmaDim);
  d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((la.batch + kMmaDim - 1) / kMmaDim, 65535));
  d.gz = static_cast<std::uint32_t>(la.dirs);
  d.block = static_cast<std::uint32_t>(K::threads(g.target.warp_size));
  d.smem = K::smem_bytes();
  return d;
}

/// The per-step recurrence on the matrix units (the reset-before GRU as two launches per step).
template <int C, class WT, class L>
Status steps_mma(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev) {
  if constexpr (C == kGruResetBefore) {
    using P1 = rnn_step_mma_16x16<C, 0, 2, 1, WT>;
    using P2 = rnn_step_mma_16x16<C, 2, 1, 2, WT>;
    const Dims d1 = mma_step_dims<P1>(g, la), d2 = mma_step_dims<P2>(g, la);
    for (int s = 0; s < la.steps; ++s) {
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P1>(d1, la, dev, s));
      RNNCORE_RETURN_IF_ERROR(ln.template launch<P2>(d2, la, dev, s));
    }
  } else {
    using K = rnn_step_mma_16x16<C, 0, cell_gates(C), 0, WT>;
    const Dims d = mma_step_dims<K>(g, la);
    for (int s = 0; s < la.steps; ++s) {
      RNNCORE_RETURN_IF_ERROR(ln.template launch<K>(d, la, dev, s));
      RNNCORE_RETURN_IF_ERROR((projection_step<C, WT>(ln, g, la, dev, s)));
    }
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
Status persistent_mma(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int units) {
  using K = rnn_recurrence_persistent_mma<C, WT>;
  Dims d;
  d.gx = static_cast<std::uint32_t>((la.hidden + units - 1) / units);
  d.gz = static_cast<std::uint32_t>(la.dirs);
  d.block = static_cast<std::uint32_t>(g.persist_threads);
  d.smem = K::smem_bytes(units, la.hidden_stride);
  return ln.template launch_cooperative<K>(d, la, dev, units);
}

template <int C, class WT, class L>
Status recurrence(L& ln, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int layer) {
  const int mma_units = persistent_mma_units(g, layer, la.batch);  // plan_select checked the device
  if (mma_units > 0) {
    const Status s = persistent_mma<C, WT>(ln, g, la, dev, mma_units);
    if (s != Status::unsupported) return s;  // refused: nothing queued, the per-step kernels below
  }
  const int units = mma_units > 0 ? 0 : persistent_units(g, layer, la.batch);
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
  if (use_mma_step(g, la.batch)) return steps_mma<C, WT>(ln, g, la, dev);  // plan_select checked the device (TF32 for f32)
  switch (g.tile) {
    case TileChoice::direct: return steps_tiled<C, f32_rnn_step_direct, StepTileDirect, WT>(ln, g, la, dev);
    case TileChoice::lanes: return steps_tiled<C, f32_rnn_step_lanes, StepTileLanes, WT>(ln, g, la, dev);
    case TileChoice::lanes8: return steps_tiled<C, f32_rnn_step_lanes, StepTileLanes8, WT>(ln, g, la, dev);
    default: break;  // auto (resolved to small or large here), small, large
  }
  if (use_large_tile(g, la.hidden, la.batch, la.dirs))
    return steps_tiled<C, f32_rnn_step_tiled, StepTileLarge, WT>(ln, g, la, dev);
  return steps_tiled<C, f32_rnn_step_tiled, StepTileSmall, WT>(ln, g, la, dev);
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

/// A mask site of the argument blocks; an inactive one is all zeros (no seed), so that runs without
/// masks have the same argument bytes whatever their seed (src/gpu/host/graph.hpp).
inline MaskSite to_site(const detail::Mask& m) {
  MaskSite s;
  std::memset(&s, 0, sizeof s);
  if (!m.active) return s;
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
    const std::int64_t H = lp.hidden, I = lp.input_size, G = lp.gates, O = lp.out;
    for (int d = 0; d < lp.dirs; ++d) {
      std::int64_t begin = 0, count = 0;
      canonical_span(st, l, d, &begin, &count);
      // The kernel assumes each kind's gate blocks follow one another (docs/design.md §4.1); say so if not.
      const std::int64_t w0 = canonical_offset(st, l, d, ParamKind::input_weight, 0);
      const std::int64_t r0 = canonical_offset(st, l, d, ParamKind::recurrent_weight, 0);
      const std::int64_t bw0 = canonical_offset(st, l, d, ParamKind::input_bias, 0);
      const std::int64_t br0 = canonical_offset(st, l, d, ParamKind::recurrent_bias, 0);
      for (int gate = 1; gate < G; ++gate) {
        const bool ok = (w0 < 0 || canonical_offset(st, l, d, ParamKind::input_weight, gate) == w0 + gate * H * I) &&
                        canonical_offset(st, l, d, ParamKind::recurrent_weight, gate) == r0 + gate * H * O &&
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
      if (st.layers[l].peepholes) {
        a.peep = schedule::at<float>(packed, dp.peepholes);
        const int peep_gates[3] = {0, 1, 3};  // canonical gates of p_i, p_f, p_o
        for (int k = 0; k < 3; ++k) a.peep_at[k] = canonical_offset(st, l, d, ParamKind::peephole, peep_gates[k]) - begin;
      }
      if (st.layers[l].proj_size > 0) {
        a.wp = packed + dp.proj_panel;
        a.wp_at = canonical_offset(st, l, d, ParamKind::projection, 0) - begin;
      }
      a.out = lp.out;
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
  // The ends' parameters (embedding table, the Dense chain) as they are in the canonical buffer.
  const std::int64_t first = detail::recurrent_param_count(st), tail = param_count(st) - first;
  if (tail > 0)
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device(packed + p.ends, canonical + first, static_cast<std::size_t>(tail) * sizeof(float)));
  return ln.finish("pack_weights");
}

/// f(WT()) for the plan's weight storage type WT: how a schedule picks its kernels' instances.
template <class F>
Status with_weight_type(const GpuPlan& g, F&& f) {
  if (g.weights == kWeightF16) return f(WeightF16());
  if (g.weights == kWeightBF16) return f(WeightBF16());
  return f(float());
}

/// pack_weights on the GPU (see pack_with), for the plan's weight storage type.
template <class L>
Status pack(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const float* canonical, unsigned char* packed) {
  return with_weight_type(g, [&](auto wt) { return pack_with<decltype(wt)>(ln, p, g, canonical, packed); });
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

/// Device copies of the run's lengths, row ids and resets (null where the run has none or needs
/// none), with the resets' strides.
struct RunArrays {
  const std::int32_t* lengths = nullptr;
  const std::uint32_t* row_ids = nullptr;
  detail::Resets resets;
};

/// Copies the run's host arrays (seq_lengths, row_ids where masks read them, resets) to `lengths_at`,
/// `row_ids_at` and `resets_at` of the workspace, in stream order.
template <class L>
Status copy_run_arrays(L& ln, const ForwardArgs& a, bool masks, unsigned char* ws, std::uint64_t lengths_at,
                       std::uint64_t row_ids_at, std::uint64_t resets_at, RunArrays* out) {
  if (a.seq_lengths != nullptr) {
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + lengths_at, a.seq_lengths, sizeof(std::int32_t) * a.batch));
    out->lengths = schedule::at<std::int32_t>(ws, lengths_at);
  }
  if (a.row_ids != nullptr && masks) {  // only masks read row ids
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + row_ids_at, a.row_ids, sizeof(std::uint32_t) * a.batch));
    out->row_ids = schedule::at<std::uint32_t>(ws, row_ids_at);
  }
  if (a.resets != nullptr && a.seq_len > 0 && a.batch > 0) {
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + resets_at, a.resets, static_cast<std::size_t>(a.seq_len) * a.batch));
    out->resets = detail::resets_of(ws + resets_at, a.layout, a.batch, a.seq_len);
  }
  return Status::ok;
}

/// The arguments of direction `d` of layer `l`: inputs, outputs and state slots as the CPU
/// backends walk them (detail::direction_io), the packed blocks, the workspace and the masks.
/// Returns whether a wrapper drops this layer's input.
inline bool direction_args(const detail::PlanImpl& p, const ForwardArgs& a, const detail::RunDropout& run,
                           unsigned char* packed, unsigned char* ws, int l, int d, DirArgs* da) {
  using schedule::at;
  const StackSpec& st = p.stack;
  const detail::LayerPlan& lp = p.layers[l];
  auto* reserve = static_cast<unsigned char*>(a.reserve);
  const detail::DirectionIO io = reserve != nullptr ? detail::reserve_direction_io(p, a, ws, l, d, run, reserve)
                                                    : detail::direction_io(p, a, ws, l, d, run);
  const detail::DirectionPack& dp = lp.dir[d];
  da->x = da->x_raw = static_cast<const float*>(io.x);
  da->x_st = da->xr_st = io.x_st;
  da->x_sb = da->xr_sb = io.x_sb;
  da->y = static_cast<float*>(io.y);
  da->y_st = io.y_st;
  da->y_sb = io.y_sb;
  da->h0 = static_cast<const float*>(io.h0);
  da->c0 = static_cast<const float*>(io.c0);
  da->hy = static_cast<float*>(io.hy);
  da->cy = static_cast<float*>(io.cy);
  da->reverse = io.reverse ? 1 : 0;
  da->keep = static_cast<float*>(io.keep);
  da->w = lp.skip_input ? nullptr : packed + dp.w_panel;
  da->r = packed + dp.r_panel;
  da->bias = at<float>(packed, dp.bias);
  da->bias_rn = lp.cell == simd::Cell::gru_reset_after ? at<float>(packed, dp.bias_rn) : nullptr;
  da->peep = st.layers[l].peepholes ? at<float>(packed, dp.peepholes) : nullptr;
  const bool projected = st.layers[l].proj_size > 0;
  da->wp = projected ? packed + dp.proj_panel : nullptr;
  da->m = projected ? at<float>(ws, p.gpu.ws_m[d]) : nullptr;
  da->proj = at<float>(ws, p.ws.proj[d]);
  da->h[0] = at<float>(ws, p.ws.h[d][0]);
  da->h[1] = at<float>(ws, p.ws.h[d][1]);
  da->c = lp.mode == Mode::lstm ? at<float>(ws, p.ws.c[d]) : nullptr;
  da->rh = lp.cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.rh[d]) : nullptr;
  da->zg = lp.cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.z[d]) : nullptr;
  bool input_dropped = false;
  for (int w = 0; w < st.layers[l].num_wrappers; ++w) {
    da->input[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::input));
    da->output[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::output));
    da->state_h[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_h));
    da->state_c[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_c));
    input_dropped = input_dropped || da->input[w].active;
  }
  if (input_dropped) {  // the cell reads x_cell, which the input-dropout pre-pass writes
    da->x_cell = at<float>(ws, p.ws.x_cell[d]);
    da->x = da->x_cell;
    da->x_st = static_cast<std::int64_t>(a.batch) * lp.input_size;
    da->x_sb = lp.input_size;
  }
  return input_dropped;
}

/// The argument blocks of layer `l` of a run (the layer's and, where it applies, the inter-layer
/// dropout's). Returns whether a wrapper drops the layer's input.
inline bool layer_args(const detail::PlanImpl& p, const ForwardArgs& a, const detail::RunDropout& run, const RunArrays& arrays,
                       unsigned char* packed, unsigned char* ws, int l, LayerArgBlock* out) {
  const detail::LayerPlan& lp = p.layers[l];
  const LayerSpec& ls = p.stack.layers[l];
  std::memset(out, 0, sizeof *out);
  LayerArgs& la = out->layer;
  la.gates = lp.gates;
  la.batch = a.batch;
  la.steps = a.seq_len;
  la.in_size = lp.input_size;
  la.in_pad = (lp.input_size + 3) / 4 * 4;
  la.hidden = lp.hidden;
  la.hidden_stride = lp.hidden_stride;
  la.dirs = lp.dirs;
  la.out = lp.out;
  la.proj_clip = static_cast<float>(ls.proj_clip);
  la.num_wrappers = ls.num_wrappers;
  la.cell_clip = static_cast<float>(ls.cell_clip);
  la.keep_width = detail::keep_width(lp);
  la.keep_h = detail::keep_h(lp);
  la.lstm_ext = lp.mode == Mode::lstm && lp.extensions ? 1 : 0;
  for (int w = 0; w < ls.num_wrappers; ++w) la.residual[w] = ls.wrappers[w].kind == WrapperKind::residual ? 1 : 0;
  la.lengths = arrays.lengths;
  la.row_ids = arrays.row_ids;
  la.step = run.on ? run.step : 0;  // masks only: a run without them has the same bytes at every step
  la.resets = arrays.resets.r;
  la.reset_st = arrays.resets.st;
  la.reset_sb = arrays.resets.sb;
  bool input_dropped = false;
  for (int d = 0; d < lp.dirs; ++d) input_dropped = direction_args(p, a, run, packed, ws, l, d, &la.dir[d]) || input_dropped;
  const detail::Mask inter = detail::inter_layer_mask(p.stack, run, l);
  if (inter.active) {
    InterLayerArgs& ia = out->inter;
    ia.out = la.dir[0].y;  // the layer's whole output row starts at direction 0's columns
    ia.steps = a.seq_len;
    ia.batch = a.batch;
    ia.width = lp.dirs * lp.out;
    ia.row_ids = arrays.row_ids;
    ia.step = run.step;
    ia.mask = schedule::to_site(inter);
  }
  return input_dropped;
}

/// Layer `l`'s input projection of all steps: the tiled GEMM (on the matrix units where the plan
/// says so), or the skip-input copy.
template <class WT, class L>
Status input_projection(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const LayerArgs& la, const LayerArgs* dev, int l) {
  const detail::LayerPlan& lp = p.layers[l];
  if (lp.skip_input) {
    const std::int64_t items = static_cast<std::int64_t>(la.steps) * la.batch * lp.gates * lp.hidden;
    return ln.template launch<f32_rnn_proj_skip>(elementwise_dims(g, items, lp.dirs), la, dev, 0);
  }
  if (g.mma_proj) {  // the matrix units, TF32 for f32 weights (plan_select checked the option and the device)
    using M = rnn_proj_gemm_mma_64x64<WT>;
    Dims d;
    d.gx = static_cast<std::uint32_t>((static_cast<std::int64_t>(lp.gates) * lp.hidden + M::kBN - 1) / M::kBN);
    d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((static_cast<std::int64_t>(la.steps) * la.batch + M::kBM - 1) / M::kBM, 65535));
    d.gz = static_cast<std::uint32_t>(lp.dirs);
    d.block = static_cast<std::uint32_t>(M::threads(g.target.warp_size));
    d.smem = M::smem_bytes();
    return ln.template launch<M>(d, la, dev, 0);
  }
  using K = f32_rnn_proj_gemm_tiled<WT>;
  Dims d;
  d.gx = static_cast<std::uint32_t>((static_cast<std::int64_t>(lp.gates) * lp.hidden + K::kBN - 1) / K::kBN);
  d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((static_cast<std::int64_t>(la.steps) * la.batch + K::kBM - 1) / K::kBM, 65535));
  d.gz = static_cast<std::uint32_t>(lp.dirs);
  d.block = K::kThreads;
  d.smem = K::smem_bytes();
  return ln.template launch<K>(d, la, dev, 0);
}

/// The launches of layer `l`, in stream order: input dropout, input projection, initial state,
/// recurrence, final state, the wrappers' output chain, the inter-layer dropout. (A layer without
/// cell state reports c = 0: forward_prepare zeroes its part of cy.)
template <class WT, class L>
Status launch_layer(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const ForwardArgs& a, const LayerArgBlock& host,
                    const LayerArgBlock* dev, bool input_dropped, int l) {
  const detail::LayerPlan& lp = p.layers[l];
  const LayerArgs& la = host.layer;
  const LayerArgs* dla = &dev->layer;
  const std::int64_t T = a.seq_len, B = a.batch, H = lp.hidden, out_w = static_cast<std::int64_t>(lp.dirs) * lp.out;
  if (T > 0 && input_dropped) {
    const std::int64_t items = T * B * ((lp.input_size + 3) / 4);
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_input_dropout>(elementwise_dims(g, items, lp.dirs), la, dla, 0));
  }
  if (T > 0) RNNCORE_RETURN_IF_ERROR(input_projection<WT>(ln, p, g, la, dla, l));
  RNNCORE_RETURN_IF_ERROR(
      ln.template launch<f32_rnn_state_init>(elementwise_dims(g, B * lp.hidden_stride, lp.dirs), la, dla, 0));
  if (T > 0) RNNCORE_RETURN_IF_ERROR(schedule::recurrence_of<WT>(ln, g, la, dla, l, lp.cell));
  if (a.hy != nullptr || (a.cy != nullptr && lp.mode == Mode::lstm))
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_state_final>(elementwise_dims(g, B * H, lp.dirs), la, dla, 0));
  if (T > 0 && lp.output_chain) {
    const std::int64_t items = T * B * ((lp.out + 3) / 4);
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_output_chain>(elementwise_dims(g, items, lp.dirs), la, dla, 0));
  }
  if (T > 0 && host.inter.mask.active) {
    const std::int64_t items = T * B * ((out_w + 3) / 4);
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_inter_layer_dropout>(elementwise_dims(g, items, 1), host.inter, &dev->inter, 0));
  }
  return Status::ok;
}

/// The argument blocks of the ends of a run (the embedding's gather, the head's rows and its Dense
/// chain), as src/head.cpp walks them on the CPU: device pointers into the packed buffer, the
/// workspace (p.ws's embed_x, head_in, head_rows, head_mid) and the caller's x and y. A training
/// forward keeps the embedded rows, the head's input, each pre_head Dense's activations and the
/// head's in the reserve instead (TrainLayout's embed_x, head_in, pre_head_y, head_y), where
/// backward reads them.
inline EndsArgs ends_args(const detail::PlanImpl& p, const ForwardArgs& a, const RunArrays& arrays, unsigned char* packed,
                          unsigned char* ws) {
  using schedule::at;
  const StackSpec& st = p.stack;
  auto* reserve = static_cast<unsigned char*>(a.reserve);
  EndsArgs e;
  std::memset(&e, 0, sizeof e);
  const std::int64_t first = detail::recurrent_param_count(st), T = a.seq_len, B = a.batch;
  const auto param = [&](ParamKind kind, int k) {
    return at<float>(packed, p.ends + static_cast<std::size_t>(canonical_offset(st, k, 0, kind, 0) - first) * sizeof(float));
  };
  if (st.embedding.vocab_size > 0) {
    EmbedArgs& m = e.embed;
    m.ids = static_cast<const std::int32_t*>(a.x);
    m.id_st = a.layout == Layout::batch_major ? 1 : B;
    m.id_sb = a.layout == Layout::batch_major ? T : 1;
    m.table = param(ParamKind::embedding, 0);
    m.out = reserve != nullptr ? at<float>(reserve, p.train.embed_x) : at<float>(ws, p.ws.embed_x);
    m.steps = a.seq_len;
    m.batch = a.batch;
    m.vocab = st.embedding.vocab_size;
    m.width = st.input_size;
  }
  if (st.head.out_features == 0) return e;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  const int in = static_cast<int>(detail::head_input_size(st));
  const float* rows = reserve != nullptr ? at<float>(reserve, p.train.head_in) : at<float>(ws, p.ws.head_in);
  if (st.head.last_step_only) {
    LastRowsArgs& r = e.last;
    r.in = rows;
    r.out = at<float>(ws, p.ws.head_rows);
    r.lengths = arrays.lengths;
    r.steps = a.seq_len;
    r.batch = a.batch;
    r.width = in;
    r.per_dir = output_size(last);
    rows = r.out;
  }
  for (int k = 0; k <= st.num_pre_head; ++k) {
    const DenseSpec& ds = k < st.num_pre_head ? st.pre_head[k] : st.head;
    DenseArgs& d = e.dense[k];
    d.in = rows;
    d.w = param(ParamKind::dense_weight, k);
    d.bias = param(ParamKind::dense_bias, k);
    d.rows = static_cast<std::int32_t>(st.head.last_step_only ? B : T * B);
    d.in_w = static_cast<std::int32_t>(detail::dense_input_size(st, k));
    d.out_w = ds.out_features;
    d.act = static_cast<std::int32_t>(ds.activation);
    if (k < st.num_pre_head) {  // (a training forward keeps them where backward reads them)
      d.out = reserve != nullptr ? at<float>(reserve, p.train.pre_head_y[k]) : at<float>(ws, p.ws.head_mid[k % 2]);
      rows = d.out;
    } else {
      d.y = static_cast<float*>(a.y);
      d.keep = reserve != nullptr ? at<float>(reserve, p.train.head_y) : nullptr;
      d.lengths = arrays.lengths;
      d.steps = a.seq_len;
      d.batch = a.batch;
      d.last_step = st.head.last_step_only ? 1 : 0;
      d.batch_major = a.layout == Layout::batch_major ? 1 : 0;
    }
  }
  return e;
}

/// The head's launches after the last layer: the last rows, then each Dense of the chain (and its
/// softmax), the head's into y.
template <class L>
Status launch_head(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const EndsArgs& host, const EndsArgs* dev) {
  const StackSpec& st = p.stack;
  if (st.head.last_step_only)
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_head_last_rows>(
        elementwise_dims(g, static_cast<std::int64_t>(host.last.batch) * host.last.width, 1), host.last, &dev->last, 0));
  for (int k = 0; k <= st.num_pre_head; ++k) {
    const DenseArgs& d = host.dense[k];
    const std::int64_t items = static_cast<std::int64_t>(d.rows) * d.out_w;
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_dense>(elementwise_dims(g, items, 1), d, &dev->dense[k], 0));
    if (d.act == kDenseSoftmax)
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_dense_softmax>(elementwise_dims(g, d.rows, 1), d, &dev->dense[k], 0));
  }
  return Status::ok;
}

/// What forward_prepare made for forward_launches: the host argument blocks of every layer and of
/// the ends, and where their device copies are (kernels that read arguments from device memory).
struct ForwardPrep {
  LayerArgBlock host[kMaxLayers];
  bool input_dropped[kMaxLayers] = {};
  const LayerArgBlock* dev = nullptr;
  bool ends = false;  ///< an embedding or a head runs
  EndsArgs ends_host;
  const EndsArgs* ends_dev = nullptr;
};

/// The first part of a forward pass: checks the packed buffer, then queues every copy the run
/// needs — the reserve's header, host seq_lengths / row_ids / resets into the workspace, and every
/// layer's (and the ends') argument blocks, built on the host, into the workspace at once (where
/// kernels read them from device memory). What the run's kernels read per call reaches them here,
/// so a captured graph of forward_launches stays valid when only these contents change.
template <class L>
Status forward_prepare(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed_c, unsigned char* ws,
                       const ForwardArgs& a, ForwardPrep* f) {
  auto* packed = const_cast<unsigned char*>(packed_c);  // kernels only read it
  RNNCORE_RETURN_IF_ERROR(check_packed(ln, p, g, packed_c));
  const detail::RunDropout run = detail::run_dropout(p, a);
  unsigned char header[detail::kReserveHeaderBytes];  // a training forward: what backward checks
  if (a.reserve != nullptr) {
    detail::describe_reserve(p, a, header);
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(a.reserve, header, sizeof header));
  }
  RunArrays arrays;
  RNNCORE_RETURN_IF_ERROR(copy_run_arrays(ln, a, run.on, ws, g.ws_lengths, g.ws_row_ids, g.ws_resets, &arrays));
  const int layers = p.stack.num_layers;
  for (int l = 0; l < layers; ++l) f->input_dropped[l] = layer_args(p, a, run, arrays, packed, ws, l, &f->host[l]);
  if (L::kArgsInDeviceMemory && layers > 0)
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + g.ws_args, f->host, sizeof(LayerArgBlock) * static_cast<std::size_t>(layers)));
  f->dev = schedule::at<const LayerArgBlock>(ws, g.ws_args);
  f->ends = g.ws_ends_args != 0 && a.batch > 0;  // (T = 0: a last-step head's rows are zeros)
  if (f->ends) f->ends_host = ends_args(p, a, arrays, packed, ws);
  else std::memset(&f->ends_host, 0, sizeof f->ends_host);
  f->ends_dev = schedule::at<const EndsArgs>(ws, g.ws_ends_args);
  if (f->ends && L::kArgsInDeviceMemory)
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + g.ws_ends_args, &f->ends_host, sizeof f->ends_host));
  // A layer without cell state reports c = 0. No kernel of the run touches that part of cy (nor of
  // c0, which cy may alias: such a layer has none), so it is zeroed here, before the launches, and
  // a graph of them bakes no cy address.
  for (int l = 0; l < layers && a.cy != nullptr; ++l) {
    const detail::LayerPlan& lp = p.layers[l];
    if (lp.mode == Mode::lstm) continue;
    const std::size_t at = static_cast<std::size_t>(cell_state_offset(p.stack, a.batch, l, 0)) * sizeof(float);
    RNNCORE_RETURN_IF_ERROR(ln.zero_async(static_cast<unsigned char*>(a.cy) + at,
                                          static_cast<std::size_t>(lp.dirs) * lp.hidden * a.batch * sizeof(float)));
  }
  return Status::ok;
}

/// The second part: the run's kernels (and zeroings) in stream order — the embedding's gather,
/// each layer's launches (launch_layer, both directions in each launch), the head's. No copies:
/// this is the sequence a graph captures (src/gpu/host/graph.hpp).
template <class WT, class L>
Status forward_launches(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const ForwardArgs& a, const ForwardPrep& f) {
  if (f.ends && p.stack.embedding.vocab_size > 0) {
    const std::int64_t items = static_cast<std::int64_t>(a.seq_len) * a.batch * p.stack.input_size;
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_embedding_gather>(elementwise_dims(g, items, 1), f.ends_host.embed, &f.ends_dev->embed, 0));
  }
  for (int l = 0; l < p.stack.num_layers; ++l)
    RNNCORE_RETURN_IF_ERROR(launch_layer<WT>(ln, p, g, a, f.host[l], &f.dev[l], f.input_dropped[l], l));
  if (f.ends && p.stack.head.out_features > 0) RNNCORE_RETURN_IF_ERROR(launch_head(ln, p, g, f.ends_host, f.ends_dev));
  return Status::ok;
}

/// The forward pass as launches on the launcher's stream: forward_prepare's copies, then
/// forward_launches.
template <class WT, class L>
Status forward_with(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed, unsigned char* ws,
                    const ForwardArgs& a) {
  ForwardPrep f;
  RNNCORE_RETURN_IF_ERROR(forward_prepare(ln, p, g, packed, ws, a, &f));
  RNNCORE_RETURN_IF_ERROR(forward_launches<WT>(ln, p, g, a, f));
  return ln.finish("forward");
}

/// The forward pass on the GPU (see forward_with), for the plan's weight storage type.
template <class L>
Status forward(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed, unsigned char* ws,
               const ForwardArgs& a) {
  return with_weight_type(g, [&](auto wt) { return forward_with<decltype(wt)>(ln, p, g, packed, ws, a); });
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_SCHEDULE_HPP

// The GPU backend's part of a plan (PlanImpl::gpu): the device it was planned for and the kernel
// choices made then. Plain host data, no GPU runtime; left out of firmware builds
// (RNNCORE_NO_GPU_PLAN). src/gpu/host/plan.hpp fills it; src/gpu/host/schedule.hpp reads it.
#ifndef RNNCORE_SRC_GPU_HOST_PLAN_DATA_HPP
#define RNNCORE_SRC_GPU_HOST_PLAN_DATA_HPP

#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace gpu {

/// What planning needs to know about a device. The backend reads it from the runtime at plan time
/// (src/gpu/gpu_backend.hip); tests and the speed model take it from src/gpu/host/device_profiles.hpp.
struct DeviceDescription {
  char name[24] = "device";      ///< e.g. "H100 SXM"
  char arch[16] = "?";           ///< e.g. "sm_90", "gfx90a" (the kernel family name carries it)
  std::int32_t sm_count = 1;     ///< multiprocessors / compute units
  std::int32_t warp_size = 32;   ///< host-side value; device code has its own constant
  std::int32_t max_threads = 1024;          ///< per block
  std::int32_t max_threads_per_sm = 2048;   ///< resident threads per multiprocessor
  std::int32_t max_blocks_per_sm = 32;      ///< resident blocks per multiprocessor
  std::int32_t registers_per_sm = 65536;    ///< 32-bit registers of a multiprocessor (all SIMDs)
  std::int32_t cooperative = 1;             ///< cooperative launches supported
  std::int64_t smem_per_sm = 64 * 1024;     ///< shared memory / LDS of a multiprocessor
  std::int64_t smem_optin = 48 * 1024;      ///< largest dynamic shared memory of one block
  /// Matrix units the kernels can use (NVIDIA sm_80+: mma.sync; AMD CDNA gfx90a / gfx94x: MFMA);
  /// 0 elsewhere (RDNA, older NVIDIA), where no plan chooses a matrix-unit kernel.
  std::int32_t mma = 0;
  /// The matrix units also take TF32 operands (NVIDIA sm_80+: mma.sync m16n8k8 .tf32); AMD CDNA 2
  /// has no TF32, so f32 weights never go to the matrix units there.
  std::int32_t mma_tf32 = 0;
  /// Auto's per-step f32 kernel is f32_rnn_step_direct, and the backward's per-step products
  /// f32_rnn_grad_gemm_direct (rnncore_gpu_arch_prefers_direct_step: NVIDIA, where the H200 timed them
  /// faster than the staged tiles); 0: the staged small or large tile (AMD, not yet timed there).
  std::int32_t direct_step = 0;
};

/// Batch buckets of the persistent kernel: MAXB of the instance that runs a batch B is the
/// smallest bucket ≥ B.
constexpr int kBuckets[] = {1, 2, 4, 8, 16, 32, 64};
constexpr int kBucketCount = 7;
/// With Recurrence::auto_select the persistent kernel runs batches up to this size.
constexpr int kAutoPersistentMaxBatch = 16;
/// With PlanOptions::gpu_half_math on a device with matrix units, the per-step recurrence of
/// batches of at least this many rows runs on them (src/gpu/host/plan.hpp, use_mma_step): below it most
/// of the 16 rows of a matrix tile would be padding.
constexpr int kMmaStepMinBatch = 8;
/// The bucket index that plan_persistent's occupancy callback receives for the persistent kernel
/// on the matrix units (rnn_recurrence_persistent_mma, one instance per cell and weight type).
constexpr int kPersistentMmaBucket = kBucketCount;

/// The occupancy callback's bucket index for f32_rnn_grad_persistent of grad bucket k is
/// kGradPersistentBucket + k.
constexpr int kGradPersistentBucket = kPersistentMmaBucket + 1;
/// Batch buckets of backward's persistent kernel (f32_rnn_grad_persistent): MAXB of the instance
/// that runs a batch B is the smallest bucket ≥ B; larger batches run backward's per-step kernels.
constexpr int kGradBuckets[] = {4, 16};
constexpr int kGradBucketCount = 2;
constexpr int grad_bucket_index(int batch) { return batch < 1 ? -1 : batch <= 4 ? 0 : batch <= 16 ? 1 : -1; }

/// How the recurrence of a layer runs (env RNNCORE_GPU_RECURRENCE=auto|persistent|tiled). A forced
/// persistent recurrence also runs backward's steps on f32_rnn_grad_persistent where the plan has
/// a slice for them (grad_persist_units); auto does not yet: that kernel has not been timed on a device.
enum class Recurrence : std::int32_t { auto_select = 0, persistent = 1, tiled = 2 };
/// Tile of the per-step kernel (env RNNCORE_GPU_TILE=auto|small|large|direct|lanes|lanes8): the
/// staged small or large tile of f32_rnn_step_tiled, f32_rnn_step_direct, or f32_rnn_step_lanes
/// with a warp's 32 lanes or 8 lanes splitting a task's k (not timed on a device yet, so never
/// auto's). Auto is direct where the device prefers it (DeviceDescription::direct_step;
/// plan_select resolves it), else small or large by occupancy. direct and both lanes tiles run the
/// backward's per-step products on f32_rnn_grad_gemm_direct (direct_products).
enum class TileChoice : std::int32_t { auto_select = 0, small = 1, large = 2, direct = 3, lanes = 4, lanes8 = 5 };
constexpr int kTileChoiceCount = 6;
/// Whether a tile choice runs the backward's per-step products on f32_rnn_grad_gemm_direct.
constexpr bool direct_products(TileChoice t) {
  return t == TileChoice::direct || t == TileChoice::lanes || t == TileChoice::lanes8;
}

/// Everything a GPU plan records beyond PlanImpl's common fields.
struct GpuPlan {
  std::int32_t device = -1;      ///< device ordinal
  /// Forward replays a captured graph of its launches where it can (env RNNCORE_GPU_GRAPHS=on;
  /// src/gpu/host/graph.hpp); 0: every run launches its kernels one by one. (In the padding
  /// before `target`: the field costs PlanImpl no bytes.)
  std::int32_t graphs = 0;
  DeviceDescription target;      ///< the device planned for
  Recurrence recurrence = Recurrence::auto_select;
  TileChoice tile = TileChoice::auto_select;
  std::int32_t persist_threads = 0;  ///< block size of the persistent kernel (a multiple of the warp size)
  std::int32_t weights = 0;          ///< storage type of W and R (src/gpu/device/kernels.hpp's WeightId)
  /// The input projection runs on the matrix units (rnn_proj_gemm_mma_64x64): PlanOptions::gpu_half_math
  /// on a device with them (DeviceDescription::mma) with f16 / bf16 weights, or with f32 weights
  /// where they take TF32 (DeviceDescription::mma_tf32; x and W rounded to TF32).
  std::int32_t mma_proj = 0;
  /// The per-step recurrence may run on the matrix units (rnn_step_mma_16x16): the same
  /// conditions as mma_proj; a run takes it when use_mma_step says so (the batch).
  std::int32_t mma_step = 0;
  std::uint64_t staging = 0;         ///< packed-buffer offset of the canonical staging area (used by pack only)
  std::uint64_t staging_bytes = 0;
  std::uint64_t ws_lengths = 0;      ///< workspace offset of the device copy of seq_lengths [B]
  std::uint64_t ws_row_ids = 0;      ///< ... of row_ids [B]
  std::uint64_t ws_resets = 0;       ///< ... of resets [T][B] (or [B][T]) bytes
  std::uint64_t ws_m[2] = {0, 0};    ///< per direction: a projected LSTM's m [B][Hs] (0: no projection)
  std::uint64_t ws_args = 0;         ///< workspace offset of the run's argument blocks [layers]
  std::uint64_t ws_ends_args = 0;    ///< ... of the ends' argument block (EndsArgs), 0: no embedding nor head
  std::uint64_t pack_args = 0;       ///< packed-buffer offset of the (layer, direction) being packed's arguments
  /// Training plans, backward workspace offsets: device copies of seq_lengths and row_ids [B], resets [T·B], and
  /// the argument blocks of every layer's backward kernels (src/gpu/host/backward.hpp).
  std::uint64_t train_lengths = 0;
  std::uint64_t train_row_ids = 0;
  std::uint64_t train_resets = 0;
  std::uint64_t train_args = 0;
  /// Units per block of the persistent kernel per layer and batch bucket; 0: that bucket does not
  /// fit (shared memory or co-residency) and the per-step kernel runs instead.
  std::int16_t persist_units[kMaxLayers][kBucketCount] = {};
  /// Units per block of the persistent kernel on the matrix units (rnn_recurrence_persistent_mma)
  /// per layer, for batches of kMmaStepMinBatch to 16 rows; 0: not planned (no mma_step, a
  /// projection, or the slice does not fit).
  std::int16_t persist_mma_units[kMaxLayers] = {};
  /// Units per block of backward's persistent kernel (f32_rnn_grad_persistent, one direction a
  /// launch) per layer and grad bucket; 0: not planned (not a training plan, a projection, or the
  /// slice does not fit) and backward runs its per-step kernels.
  std::int16_t grad_persist_units[kMaxLayers][kGradBucketCount] = {};
};

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_PLAN_DATA_HPP

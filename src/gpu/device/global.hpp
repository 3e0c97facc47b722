// The one __global__ template that runs a kernel body of src/gpu/device/kernels.hpp or backward.hpp
// with the GPU's Exec (DeviceExec). Compiled by hipcc or nvcc only; src/gpu/host/launcher.hpp
// launches it.
#ifndef RNNCORE_SRC_GPU_DEVICE_GLOBAL_HPP
#define RNNCORE_SRC_GPU_DEVICE_GLOBAL_HPP

#include <type_traits>

#include "src/gpu/device/kernels.hpp"
#include "src/gpu/vendor.hpp"

namespace rnncore {
namespace gpu {

/// The GPU's side of the Exec interface of src/gpu/device/kernels.hpp: built-in indices and
/// src/gpu/vendor.hpp's barrier, shuffle, load and matrix primitives.
struct DeviceExec {
  __device__ int bx() const { return static_cast<int>(blockIdx.x); }
  __device__ int by() const { return static_cast<int>(blockIdx.y); }
  __device__ int bz() const { return static_cast<int>(blockIdx.z); }
  __device__ int gdx() const { return static_cast<int>(gridDim.x); }
  __device__ int gdy() const { return static_cast<int>(gridDim.y); }
  __device__ int tx() const { return static_cast<int>(threadIdx.x); }
  __device__ int bdx() const { return static_cast<int>(blockDim.x); }
  __device__ int warp_size() const { return RNNCORE_GPU_WARP_SIZE; }
  __device__ void sync() const { __syncthreads(); }
  __device__ void grid_sync() const { rnncore_gpu_grid_sync(); }
  __device__ float shfl_xor(float v, int mask) const { return rnncore_gpu_shfl_xor(v, mask); }
  __device__ float load_coherent(const float* p) const { return rnncore_gpu_load_coherent(p); }
  __device__ bool reset_flag(const uint8_t* p) const { return *p != 0; }
  __device__ bool term(bool taken) const { return taken; }
  __device__ void mma_16x16x16(const MmaFrag<WeightF16>& a, const MmaFrag<WeightF16>& b, MmaAcc& c) const {
    rnncore_gpu_mma_f16(a.r, b.r, c.c);
  }
  __device__ void mma_16x16x16(const MmaFrag<WeightBF16>& a, const MmaFrag<WeightBF16>& b, MmaAcc& c) const {
    rnncore_gpu_mma_bf16(a.r, b.r, c.c);
  }
  __device__ void mma_16x16x8(const MmaFrag<Tf32>& a, const MmaFrag<Tf32>& b, MmaAcc& c) const {
    rnncore_gpu_mma_tf32(a.r, b.r, c.c);
  }
};

/// K::kMinBlocks where a kernel has one (the resident blocks per SM it asks ptxas to plan for,
/// RNNCORE_GPU_LAUNCH_BOUNDS), else 0: no hint.
template <class K, class = void>
struct KernelMinBlocks {
  static constexpr int value = 0;
};
template <class K>
struct KernelMinBlocks<K, std::void_t<decltype(K::kMinBlocks)>> {
  static constexpr int value = K::kMinBlocks;
};

/// Every rnncore kernel: K's body with the device Exec and the dynamic shared memory. Profilers
/// show the body's name as the template argument (f32_lstm_recurrence_persistent<8>, ...).
/// The argument block (LayerArgs is 2 KiB) must never be copied into private memory, which is
/// what a by-value block that a body indexes with blockIdx.z (a.dir[bz]) becomes under hipcc
/// (2 KiB of scratch per lane on gfx90a). How that is avoided is the vendor's (src/gpu/vendor.hpp):
///  - NVIDIA (RNNCORE_GPU_ARGS_BY_VALUE): by value, __grid_constant__: read in place from the
///    parameter bank, also with a dynamic index, and re-readable at any point;
///  - AMD: a const __restrict__ pointer to the copy that src/gpu/host/schedule.hpp made in the workspace
///    or the packed buffer: uniform scalar loads (s_load).
/// (A pointer on NVIDIA too was measured: ptxas then spilled values loaded through it in 37
/// instead of 11 kernels on sm_90; docs/gpu.md, "Kernel arguments".)
#if RNNCORE_GPU_ARGS_BY_VALUE
template <class K>
__global__ void RNNCORE_GPU_LAUNCH_BOUNDS(K::kMaxThreads, KernelMinBlocks<K>::value) rnncore_kernel(RNNCORE_GPU_GRID_CONSTANT const typename K::Args args, int arg) {
  RNNCORE_GPU_DYNAMIC_SMEM(rnncore_smem);
  K::run(DeviceExec(), args, arg, rnncore_smem);
}
#else
template <class K>
__global__ void RNNCORE_GPU_LAUNCH_BOUNDS(K::kMaxThreads, KernelMinBlocks<K>::value) rnncore_kernel(const typename K::Args* __restrict__ args, int arg) {
  RNNCORE_GPU_DYNAMIC_SMEM(rnncore_smem);
  K::run(DeviceExec(), *args, arg, rnncore_smem);
}
#endif

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_DEVICE_GLOBAL_HPP

// The one file of rnncore that knows the GPU vendor (DESIGN §9, after ggml-cuda).
//
// rnncore's GPU code is written against the HIP runtime names (hipMalloc, hipStream_t, ...). hipcc
// compiles it for AMD targets with ROCm's own <hip/hip_runtime.h>. For NVIDIA targets, the same
// sources are compiled by nvcc: Debian's HIP headers for NVIDIA do not work with CUDA 13, so this
// header maps every HIP name the backend uses onto the CUDA runtime instead. Nothing else in hip/,
// src/gpu/ or tests/gpu/ tests for a vendor; vendor differences that matter to kernels are the
// functions and constants at the end of this file:
//   RNNCORE_GPU_WARP_SIZE           physical warp / wavefront size of the target being compiled
//                                   (device code only; the host reads hipDeviceAttributeWarpSize)
//   rnncore_gpu_shfl_xor(v, mask)   butterfly exchange within a warp
//   rnncore_gpu_grid_sync()         grid-wide barrier of a cooperative launch
//   rnncore_gpu_load_coherent(p)    a load that sees other blocks' stores after a grid barrier
//   RNNCORE_GPU_DYNAMIC_SMEM(name)  declares the dynamic shared-memory array
//   RNNCORE_GPU_ARGS_BY_VALUE       1: kernels take their argument block by value, marked
//                                   RNNCORE_GPU_GRID_CONSTANT; 0: a pointer to a device copy
//   rnncore_gpu_smem_optin(...)     the largest dynamic shared memory one block may request
//   rnncore_gpu_arch_name(...)      "sm_90", "gfx90a", ... for messages
#ifndef RNNCORE_HIP_GPU_COMPAT_HPP
#define RNNCORE_HIP_GPU_COMPAT_HPP

#include <cstddef>
#include <cstdio>

#if defined(__CUDACC__) && !defined(__HIP__) && !defined(__HIP_PLATFORM_AMD__)
// ---------------------------------------------------------------- NVIDIA: CUDA runtime under HIP names
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#define RNNCORE_GPU_VENDOR "cuda"

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceAttr hipDeviceAttribute_t;
typedef cudaFuncAttribute hipFuncAttribute;
typedef cudaMemcpyKind hipMemcpyKind;

#define hipSuccess cudaSuccess
#define hipErrorCooperativeLaunchTooLarge cudaErrorCooperativeLaunchTooLarge
#define hipErrorNotSupported cudaErrorNotSupported
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeCooperativeLaunch cudaDevAttrCooperativeLaunch
#define hipDeviceAttributeMaxThreadsPerMultiProcessor cudaDevAttrMaxThreadsPerMultiProcessor
#define hipDeviceAttributeMaxRegistersPerMultiprocessor cudaDevAttrMaxRegistersPerMultiprocessor
#define hipDeviceAttributeMaxSharedMemoryPerMultiprocessor cudaDevAttrMaxSharedMemoryPerMultiprocessor
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipLaunchCooperativeKernel cudaLaunchCooperativeKernel
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor

/// Physical warp size of the NVIDIA target being compiled.
#define RNNCORE_GPU_WARP_SIZE 32

#define RNNCORE_GPU_DYNAMIC_SMEM(name) extern __shared__ __align__(16) float name[]

/// Kernel argument blocks by value in the parameter space, __grid_constant__ (CUDA 11.7+, sm_70+):
/// read in place, also through a dynamic index, with no per-thread copy (hip/rnn_launch.hpp).
#define RNNCORE_GPU_ARGS_BY_VALUE 1
// Launch bounds: the block size, and on NVIDIA the fewest resident blocks per SM the kernel needs
// (0: no hint). Without a hint ptxas aims at an occupancy of its own and may spill a few bytes to
// reach it; the kernels that did name a target they reach without spills (docs/gpu.md, "Resources
// and the CI gate").
#define RNNCORE_GPU_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#define RNNCORE_GPU_GRID_CONSTANT __grid_constant__

/// Butterfly exchange: the value of lane (this lane ^ mask). All lanes of the warp take part.
__device__ __forceinline__ float rnncore_gpu_shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask, RNNCORE_GPU_WARP_SIZE);
}
/// Grid-wide barrier; needs a cooperative launch. Includes the fences that make earlier global
/// stores of every block visible to later loads of every block.
__device__ __forceinline__ void rnncore_gpu_grid_sync() { cooperative_groups::this_grid().sync(); }
/// Load that bypasses the (incoherent) L1, for data other blocks wrote in this kernel.
__device__ __forceinline__ float rnncore_gpu_load_coherent(const float* p) { return __ldcg(p); }

/// Largest dynamic shared memory per block after opting in (cudaFuncSetAttribute).
inline hipError_t rnncore_gpu_smem_optin(int device, int* bytes) {
  return cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
}
/// Architecture name of a device, e.g. "sm_90".
inline hipError_t rnncore_gpu_arch_name(int device, char* out, std::size_t capacity) {
  int major = 0, minor = 0;
  hipError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e == cudaSuccess) std::snprintf(out, capacity, "sm_%d%d", major, minor);
  return e;
}
/// Marketing name of a device, e.g. "NVIDIA H100 80GB HBM3".
inline hipError_t rnncore_gpu_device_name(int device, char* out, std::size_t capacity) {
  cudaDeviceProp prop;
  const hipError_t e = cudaGetDeviceProperties(&prop, device);
  if (e == cudaSuccess) std::snprintf(out, capacity, "%s", prop.name);
  return e;
}

#else
// ---------------------------------------------------------------- AMD: ROCm's HIP runtime
#include <hip/hip_runtime.h>  // before the cooperative groups, which use its index macros (HIP 5.2)
#include <hip/hip_cooperative_groups.h>

#define RNNCORE_GPU_VENDOR "hip"

/// Physical wavefront size of the AMD target being compiled: 64 on CDNA (gfx90a), 32 on RDNA
/// (gfx1030, gfx1100). Defined by the compiler per target in device code only.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define RNNCORE_GPU_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define RNNCORE_GPU_WARP_SIZE 64  // host pass: never used by host code (it reads the device attribute)
#endif

#define RNNCORE_GPU_DYNAMIC_SMEM(name) extern __shared__ __attribute__((aligned(16))) float name[]

/// hipcc (ROCm 5.2, LLVM 14) copies a by-value aggregate kernel argument into private memory
/// (scratch) when the body indexes it dynamically, and has no __grid_constant__: kernels take a
/// pointer to a copy of the block in device memory instead (hip/rnn_launch.hpp).
#define RNNCORE_GPU_ARGS_BY_VALUE 0
// (HIP's second __launch_bounds__ argument means waves per execution unit, not blocks: AMD takes the block size only.)
#define RNNCORE_GPU_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#define RNNCORE_GPU_GRID_CONSTANT

__device__ inline float rnncore_gpu_shfl_xor(float v, int mask) { return __shfl_xor(v, mask, RNNCORE_GPU_WARP_SIZE); }
__device__ inline void rnncore_gpu_grid_sync() { cooperative_groups::this_grid().sync(); }
/// AMD's vector L1 is write-through and the grid barrier's acquire invalidates it: a plain load.
__device__ inline float rnncore_gpu_load_coherent(const float* p) { return *p; }

/// HIP reports the per-block limit directly (no opt-in step on AMD).
inline hipError_t rnncore_gpu_smem_optin(int device, int* bytes) {
  return hipDeviceGetAttribute(bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device);
}
inline hipError_t rnncore_gpu_arch_name(int device, char* out, std::size_t capacity) {
  hipDeviceProp_t prop;
  const hipError_t e = hipGetDeviceProperties(&prop, device);
  if (e == hipSuccess) {
    // gcnArchName is e.g. "gfx90a:sramecc+:xnack-": keep the processor name.
    std::size_t n = 0;
    while (n + 1 < capacity && prop.gcnArchName[n] != '\0' && prop.gcnArchName[n] != ':') {
      out[n] = prop.gcnArchName[n];
      ++n;
    }
    if (capacity > 0) out[n] = '\0';
  }
  return e;
}
inline hipError_t rnncore_gpu_device_name(int device, char* out, std::size_t capacity) {
  hipDeviceProp_t prop;
  const hipError_t e = hipGetDeviceProperties(&prop, device);
  if (e == hipSuccess) std::snprintf(out, capacity, "%s", prop.name);
  return e;
}
#endif

#endif  // RNNCORE_HIP_GPU_COMPAT_HPP

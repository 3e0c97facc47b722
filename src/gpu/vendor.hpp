// The one file of rnncore that knows which compiler builds the GPU code, and so the vendor (docs/design.md
// §9, after ggml-cuda): nvcc (NVIDIA, CUDA runtime), hipcc (AMD, ROCm's HIP runtime) or a host C++
// compiler (the emulator of tests/gpu/, which runs the kernel bodies on the CPU and needs no runtime).
//
// rnncore's GPU code is written against the HIP runtime names (hipMalloc, hipStream_t, ...). hipcc
// compiles it for AMD targets with ROCm's own <hip/hip_runtime.h>. For NVIDIA targets, the same
// sources are compiled by nvcc: Debian's HIP headers for NVIDIA do not work with CUDA 13, so this
// header maps every HIP name the backend uses onto the CUDA runtime instead. Nothing else in src/gpu/
// or tests/gpu/ tests for a vendor or a compiler (the shared host/device math, rnncore/philox.h and
// src/shared/half.hpp, keeps its own host/device switch); what the kernels see is:
//   RNNCORE_GPU_VENDOR              "cuda", "hip" or "emulator"
//   RNNCORE_GPU_INLINE              forced inlining under GPU compilers (so accumulators never take
//                                   the address of a stack copy), plain inline on the host
//   RNNCORE_GPU_UNROLL              #pragma unroll in device passes, nothing elsewhere
// and, under nvcc and hipcc only (src/gpu/device/global.hpp, src/gpu/host/launcher.hpp, gpu_backend.hip):
//   RNNCORE_GPU_WARP_SIZE           physical warp / wavefront size of the target being compiled
//                                   (device code only; the host reads hipDeviceAttributeWarpSize)
//   rnncore_gpu_shfl_xor(v, mask)   butterfly exchange within a warp
//   rnncore_gpu_grid_sync()         grid-wide barrier of a cooperative launch
//   rnncore_gpu_load_coherent(p)    a load that sees other blocks' stores after a grid barrier
//   RNNCORE_GPU_HAS_MMA             1 where the target being compiled has matrix units the kernels use
//                                   (NVIDIA sm_80+, AMD CDNA gfx90a / gfx94x), else 0
//   rnncore_gpu_mma_f16(a, b, c)    a warp's 16x16x16 multiply-accumulate, f16 / bf16 in, f32
//   rnncore_gpu_mma_bf16(a, b, c)   accumulate, fragments as src/gpu/device/kernels.hpp's mma_coord lays them
//                                   out (a trap where RNNCORE_GPU_HAS_MMA is 0: never planned there)
//   rnncore_gpu_mma_tf32(a, b, c)   a warp's 16x16x8 multiply-accumulate, TF32 in, f32 accumulate (NVIDIA
//                                   sm_80+ only; a trap elsewhere, AMD included: never planned there)
//   rnncore_gpu_arch_has_mma(arch)  host: whether a device of that arch name has them
//   rnncore_gpu_arch_has_mma_tf32(arch)  host: whether its matrix units take TF32
//   rnncore_gpu_arch_prefers_direct_step(arch)  host: whether auto's per-step f32 kernel is the
//                                   direct one (no shared-memory staging) rather than a staged tile
//   RNNCORE_GPU_DYNAMIC_SMEM(name)  declares the dynamic shared-memory array
//   RNNCORE_GPU_ARGS_BY_VALUE       1: kernels take their argument block by value, marked
//                                   RNNCORE_GPU_GRID_CONSTANT; 0: a pointer to a device copy
//   rnncore_gpu_smem_optin(...)     the largest dynamic shared memory one block may request
//   rnncore_gpu_arch_name(...)      "sm_90", "gfx90a", ... for messages
//   hipGraph_t, hipGraphExec_t, hipStreamBeginCapture / hipStreamEndCapture (thread-local mode),
//   hipGraphLaunch, hipGraphExecDestroy, hipGraphDestroy: stream capture and graph replay (HIP's own
//                                   names on AMD, mapped onto CUDA's for nvcc)
//   rnncore_gpu_graph_instantiate(exec, graph)  the two runtimes' different hipGraphInstantiate signatures
#ifndef RNNCORE_SRC_GPU_VENDOR_HPP
#define RNNCORE_SRC_GPU_VENDOR_HPP

#include <cstddef>
#include <cstdio>
#include <cstring>

#if defined(__CUDACC__) && !defined(__HIP__) && !defined(__HIP_PLATFORM_AMD__)
// ---------------------------------------------------------------- NVIDIA: CUDA runtime under HIP names
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#define RNNCORE_GPU_VENDOR "cuda"
#define RNNCORE_GPU_INLINE __forceinline__
#if defined(__CUDA_ARCH__)  // device passes only (nvcc's host pass is GCC)
#define RNNCORE_GPU_UNROLL _Pragma("unroll")
#else
#define RNNCORE_GPU_UNROLL
#endif

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceAttr hipDeviceAttribute_t;
typedef cudaFuncAttribute hipFuncAttribute;
typedef cudaMemcpyKind hipMemcpyKind;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;

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
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy

/// Instantiates a captured graph (CUDA 12+: flags, no error node or log).
inline hipError_t rnncore_gpu_graph_instantiate(hipGraphExec_t* exec, hipGraph_t graph) {
  return cudaGraphInstantiate(exec, graph, 0);
}

/// Physical warp size of the NVIDIA target being compiled.
#define RNNCORE_GPU_WARP_SIZE 32

#define RNNCORE_GPU_DYNAMIC_SMEM(name) extern __shared__ __align__(16) float name[]

/// Kernel argument blocks by value in the parameter space, __grid_constant__ (CUDA 11.7+, sm_70+):
/// read in place, also through a dynamic index, with no per-thread copy (src/gpu/host/launcher.hpp).
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define RNNCORE_GPU_HAS_MMA 1
#else
#define RNNCORE_GPU_HAS_MMA 0
#endif
/// D = A·B + C on 16x16x16 as two mma.sync m16n8k16 (columns 0-7, then 8-15): a[0..3] are A's four
/// .f16x2 / .bf16x2 registers, b[0..1] and b[2..3] B's two per half, c[0..3] and c[4..7] C's four f32
/// per half (PTX ISA, "Matrix Fragments for mma.m16n8k16").
#define RNNCORE_GPU_MMA_M16N8K16(type, a, b, c, h)                                                            \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "    \
      "{%8, %9}, {%0, %1, %2, %3};"                                                                          \
      : "+f"(c[4 * (h)]), "+f"(c[4 * (h) + 1]), "+f"(c[4 * (h) + 2]), "+f"(c[4 * (h) + 3])                  \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[2 * (h)]), "r"(b[2 * (h) + 1]))
__device__ __forceinline__ void rnncore_gpu_mma_f16(const unsigned* a, const unsigned* b, float* c) {
#if RNNCORE_GPU_HAS_MMA
  RNNCORE_GPU_MMA_M16N8K16("f16", a, b, c, 0);
  RNNCORE_GPU_MMA_M16N8K16("f16", a, b, c, 1);
#else
  (void)a, (void)b, (void)c;
  __trap();
#endif
}
__device__ __forceinline__ void rnncore_gpu_mma_bf16(const unsigned* a, const unsigned* b, float* c) {
#if RNNCORE_GPU_HAS_MMA
  RNNCORE_GPU_MMA_M16N8K16("bf16", a, b, c, 0);
  RNNCORE_GPU_MMA_M16N8K16("bf16", a, b, c, 1);
#else
  (void)a, (void)b, (void)c;
  __trap();
#endif
}
/// D = A·B + C on 16x16x8 as two mma.sync m16n8k8 .tf32 (columns 0-7, then 8-15): a[0..3] are A's
/// four TF32 registers, b[0..1] and b[2..3] B's two per half, c[0..3] and c[4..7] C's four f32 per
/// half (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32). The operands are already rounded
/// (detail::f32_to_tf32, the rounding of cvt.rna.tf32.f32, done by the kernels in shared code).
__device__ __forceinline__ void rnncore_gpu_mma_tf32(const unsigned* a, const unsigned* b, float* c) {
#if RNNCORE_GPU_HAS_MMA
  for (int h = 0; h < 2; ++h)
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[4 * h]), "+f"(c[4 * h + 1]), "+f"(c[4 * h + 2]), "+f"(c[4 * h + 3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[2 * h]), "r"(b[2 * h + 1]));
#else
  (void)a, (void)b, (void)c;
  __trap();
#endif
}
/// Whether an NVIDIA device of `arch` ("sm_XY") has the mma.sync the kernels use: sm_80 and later.
inline bool rnncore_gpu_arch_has_mma(const char* arch) {
  int v = 0;
  return std::sscanf(arch, "sm_%d", &v) == 1 && v >= 80;
}
/// TF32 came with the same generation (sm_80).
inline bool rnncore_gpu_arch_has_mma_tf32(const char* arch) { return rnncore_gpu_arch_has_mma(arch); }
/// The direct per-step kernel (and the backward's direct products): on the H200 (sm_90) it took an
/// LSTM of H 512, B 64 from 4.9 to 3.1 ms a forward and a training step from 37 to 11 ms
/// (bench/results/gpu_h200_2026-11-30/); other NVIDIA generations are assumed alike (L1 and shared
/// memory are one array since sm_70).
inline bool rnncore_gpu_arch_prefers_direct_step(const char*) { return true; }

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

#elif defined(__HIPCC__) || defined(__HIP__)
// ---------------------------------------------------------------- AMD: ROCm's HIP runtime
#include <hip/hip_runtime.h>  // before the cooperative groups, which use its index macros (HIP 5.2)
#include <hip/hip_cooperative_groups.h>

#define RNNCORE_GPU_VENDOR "hip"
#define RNNCORE_GPU_INLINE __forceinline__
#if defined(__HIP_DEVICE_COMPILE__)  // device passes only
#define RNNCORE_GPU_UNROLL _Pragma("unroll")
#else
#define RNNCORE_GPU_UNROLL
#endif

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
/// pointer to a copy of the block in device memory instead (src/gpu/host/launcher.hpp).
#define RNNCORE_GPU_ARGS_BY_VALUE 0
// (HIP's second __launch_bounds__ argument means waves per execution unit, not blocks: AMD takes the block size only.)
#define RNNCORE_GPU_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#define RNNCORE_GPU_GRID_CONSTANT

__device__ inline float rnncore_gpu_shfl_xor(float v, int mask) { return __shfl_xor(v, mask, RNNCORE_GPU_WARP_SIZE); }
__device__ inline void rnncore_gpu_grid_sync() { cooperative_groups::this_grid().sync(); }
/// AMD's vector L1 is write-through and the grid barrier's acquire invalidates it: a plain load.
__device__ inline float rnncore_gpu_load_coherent(const float* p) { return *p; }

#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define RNNCORE_GPU_HAS_MMA 1
typedef _Float16 rnncore_gpu_half4 __attribute__((ext_vector_type(4)));
typedef short rnncore_gpu_short4 __attribute__((ext_vector_type(4)));
typedef float rnncore_gpu_float4 __attribute__((ext_vector_type(4)));
/// A fragment's two 32-bit registers as the builtins' 4-element operand.
template <class V>
__device__ inline V rnncore_gpu_frag4(const unsigned* r) {
  const unsigned long long bits = static_cast<unsigned long long>(r[0]) | static_cast<unsigned long long>(r[1]) << 32;
  return __builtin_bit_cast(V, bits);
}
#else
#define RNNCORE_GPU_HAS_MMA 0
#endif
/// D = A·B + C on 16x16x16 with one v_mfma_f32_16x16x16f16 / _bf16_1k on a wave64: a[0..1], b[0..1]
/// hold the lane's 4 elements of A and B, c[0..3] its 4 of C.
__device__ inline void rnncore_gpu_mma_f16(const unsigned* a, const unsigned* b, float* c) {
#if RNNCORE_GPU_HAS_MMA
  rnncore_gpu_float4 acc = {c[0], c[1], c[2], c[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16f16(rnncore_gpu_frag4<rnncore_gpu_half4>(a),
                                              rnncore_gpu_frag4<rnncore_gpu_half4>(b), acc, 0, 0, 0);
  for (int i = 0; i < 4; ++i) c[i] = acc[i];
#else
  (void)a, (void)b, (void)c;
  __builtin_trap();
#endif
}
__device__ inline void rnncore_gpu_mma_bf16(const unsigned* a, const unsigned* b, float* c) {
#if RNNCORE_GPU_HAS_MMA
  rnncore_gpu_float4 acc = {c[0], c[1], c[2], c[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(rnncore_gpu_frag4<rnncore_gpu_short4>(a),
                                                  rnncore_gpu_frag4<rnncore_gpu_short4>(b), acc, 0, 0, 0);
  for (int i = 0; i < 4; ++i) c[i] = acc[i];
#else
  (void)a, (void)b, (void)c;
  __builtin_trap();
#endif
}
/// CDNA 2 (gfx90a) has no TF32 (CDNA 3's xf32 is a different format): the op is never planned on AMD.
__device__ inline void rnncore_gpu_mma_tf32(const unsigned* a, const unsigned* b, float* c) {
  (void)a, (void)b, (void)c;
  __builtin_trap();
}
/// Whether an AMD device of `arch` has the MFMA instructions the kernels use: CDNA 2 and 3
/// (gfx90a, gfx940-942). RDNA (gfx10xx, gfx11xx) has none.
inline bool rnncore_gpu_arch_has_mma(const char* arch) {
  return std::strcmp(arch, "gfx90a") == 0 || std::strcmp(arch, "gfx940") == 0 || std::strcmp(arch, "gfx941") == 0 ||
         std::strcmp(arch, "gfx942") == 0;
}

/// No AMD target takes the TF32 op.
inline bool rnncore_gpu_arch_has_mma_tf32(const char*) { return false; }
/// The staged tiles until an AMD device times the direct kernel (wave64, and a separate LDS).
inline bool rnncore_gpu_arch_prefers_direct_step(const char*) { return false; }

/// Instantiates a captured graph (ROCm 5.2: an error node and a log buffer, both unused).
inline hipError_t rnncore_gpu_graph_instantiate(hipGraphExec_t* exec, hipGraph_t graph) {
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
}

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

#else
// ---------------------------------------------------------------- host compiler: the emulator
// The kernel bodies only (src/gpu/device/kernels.hpp, backward.hpp), run by tests/gpu/emulator.hpp's
// Exec; no runtime, no __global__, no launcher.
#define RNNCORE_GPU_VENDOR "emulator"
#define RNNCORE_GPU_INLINE inline
#define RNNCORE_GPU_UNROLL
#endif

#endif  // RNNCORE_SRC_GPU_VENDOR_HPP

// Descriptions of real GPUs for planning without one: the emulator tests plan for them, and the
// speed model (bench/gpu/speed_model.cpp) bounds the kernels' time on them. Planning fields are the
// values the runtime reports for the device (vendors' data sheets and programming guides); the
// bandwidths and peak rates are the data sheets' (dense, no sparsity), for the speed model only.
#ifndef RNNCORE_SRC_GPU_HOST_DEVICE_PROFILES_HPP
#define RNNCORE_SRC_GPU_HOST_DEVICE_PROFILES_HPP

#include <cstdio>
#include <cstring>

#include "src/gpu/host/plan_data.hpp"

namespace rnncore {
namespace gpu {

/// A device as the planner sees it, plus what bounds the speed of a run on it.
struct DeviceProfile {
  DeviceDescription device;
  double memory_gbs = 0;        ///< HBM bandwidth, GB/s
  double l2_bytes = 0;          ///< last-level cache on the die (L2; MI300X: per XCD × 8, without Infinity Cache)
  double f32_tflops = 0;        ///< vector (SIMT) f32 FMA rate, TFLOP/s
  double f16_matrix_tflops = 0; ///< tensor / matrix cores, f16 in, f32 accumulate, TFLOP/s
  double tf32_matrix_tflops = 0; ///< tensor cores, TF32 in, f32 accumulate, TFLOP/s (0: none, AMD)
  /// Registers per thread of the largest persistent-kernel instance on this target, for the
  /// modeled occupancy (an upper bound for the others; docs/gpu_resources.md): nvcc 13's
  /// --resource-usage, sm_90 123 and sm_80 119 (with the training forward's reserve writes);
  /// Debian hipcc 5.2's kernel-resource-usage, gfx90a 238 VGPRs (batch bucket 64; 61-136 below
  /// it), used for gfx942 too.
  int persistent_registers = 0;
};

constexpr int kProfileCount = 4;

/// Profile `i` of H100 SXM, A100 SXM 80 GB, MI250X (one GCD, which is one device to the runtime),
/// MI300X.
inline DeviceProfile device_profile(int i) {
  DeviceProfile p;
  DeviceDescription& d = p.device;
  auto set = [&](const char* name, const char* arch, int sms, int warp, int threads_per_sm, int registers_per_sm,
                 long smem_per_sm, long smem_optin) {
    std::snprintf(d.name, sizeof d.name, "%s", name);
    std::snprintf(d.arch, sizeof d.arch, "%s", arch);
    d.sm_count = sms;
    d.warp_size = warp;
    d.max_threads = 1024;
    d.max_threads_per_sm = threads_per_sm;
    d.max_blocks_per_sm = 32;
    d.registers_per_sm = registers_per_sm;
    d.cooperative = 1;
    d.smem_per_sm = smem_per_sm;
    d.smem_optin = smem_optin;
    d.mma = 1;  // all four have matrix units: tensor cores (sm_80, sm_90), MFMA (gfx90a, gfx942)
    d.mma_tf32 = 0;  // TF32 operands: the NVIDIA two only (set below)
  };
  switch (i) {
    case 0:  // NVIDIA H100 SXM5 80 GB (sm_90)
      set("H100 SXM", "sm_90", 132, 32, 2048, 65536, 228 * 1024, 227 * 1024);
      p.memory_gbs = 3350, p.l2_bytes = 50e6, p.f32_tflops = 67, p.f16_matrix_tflops = 989, p.tf32_matrix_tflops = 494.7;
      p.persistent_registers = 123;
      d.mma_tf32 = 1;
      d.direct_step = 1;
      break;
    case 1:  // NVIDIA A100 SXM4 80 GB (sm_80)
      set("A100 SXM 80GB", "sm_80", 108, 32, 2048, 65536, 164 * 1024, 163 * 1024);
      p.memory_gbs = 2039, p.l2_bytes = 40e6, p.f32_tflops = 19.5, p.f16_matrix_tflops = 312, p.tf32_matrix_tflops = 156;
      p.persistent_registers = 119;
      d.mma_tf32 = 1;
      d.direct_step = 1;
      break;
    case 2:  // AMD Instinct MI250X, one GCD (gfx90a, wave64): 512 VGPRs per SIMD lane, 4 SIMDs
      set("MI250X (1 GCD)", "gfx90a", 110, 64, 2048, 4 * 64 * 512, 64 * 1024, 64 * 1024);
      p.memory_gbs = 1638, p.l2_bytes = 8e6, p.f32_tflops = 23.9, p.f16_matrix_tflops = 191.5;
      p.persistent_registers = 238;
      break;
    default:  // AMD Instinct MI300X (gfx942, wave64)
      set("MI300X", "gfx942", 304, 64, 2048, 4 * 64 * 512, 64 * 1024, 64 * 1024);
      p.memory_gbs = 5300, p.l2_bytes = 32e6, p.f32_tflops = 81.7, p.f16_matrix_tflops = 1307.4;
      p.persistent_registers = 238;
      break;
  }
  return p;
}

/// The profile whose name or arch is `key` ("H100 SXM", "sm_90", "MI300X", ...); false if none.
inline bool find_device_profile(const char* key, DeviceProfile* out) {
  for (int i = 0; i < kProfileCount; ++i) {
    const DeviceProfile p = device_profile(i);
    if (std::strcmp(key, p.device.name) == 0 || std::strcmp(key, p.device.arch) == 0) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_DEVICE_PROFILES_HPP

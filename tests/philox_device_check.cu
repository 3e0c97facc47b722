// Compile-only check that include/rnncore/philox.h is usable in CUDA (and, with hipcc, HIP) device
// code, and that a kernel can draw a mask row with it:
//   nvcc -std=c++17 -arch=sm_80 -Iinclude -c tests/philox_device_check.cu -o /tmp/philox_device_check.o
// The kernel is not launched by any test (no GPU is needed to build it).
#include "rnncore/philox.h"

/// One thread per group of four units: out[row * width + u] = mask value of unit u of that row.
__global__ void rnncore_philox_device_check(unsigned long long seed, unsigned long long step, uint32_t site,
                                            uint32_t t_prime, uint32_t rows, uint32_t width, double keep,
                                            float* out, uint32_t* raw) {
  rnncore_mask_params p;
  rnncore_mask_params_init(&p, keep);
  const uint32_t groups = rnncore_mask_groups(width);
  const uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= rows * groups) return;
  const uint32_t row = idx / groups, q = idx % groups;
  const uint32_t bits = rnncore_mask_word4(seed, step, site, t_prime, row, q, width, &p);
  for (uint32_t w = 0; w < 4u && 4u * q + w < width; ++w)
    out[row * width + 4u * q + w] = ((bits >> w) & 1u) ? p.scale : 0.0f;
  if (idx == 0) {  // known answer 3 of the design document, for a device-side check
    const uint32_t ctr[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
    rnncore_philox4x32_10(ctr, key, raw);
    raw[4] = rnncore_mask_site(1u, 1u, 0u, RNNCORE_SITE_STATE_H, 1);
    raw[5] = rnncore_mask_keep(seed, step, site, t_prime, 0u, 0u, width, &p);
    rnncore_mask_row(seed, step, site, t_prime, 0u, 4u, &p, out);
  }
}

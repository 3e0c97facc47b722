// The int8 matrix-vector kernel on AArch64 with the dot-product extension (SDOT; compiled with
// -march=armv8.2-a+dotprod, chosen at run time only where the CPU reports it): 4 rows × 16
// columns per step sharing the loads of v. vdotq_s32 adds, in each int32 lane, four int8 products
// (at most 4 · 2^14: exact); the int32 lanes wrap as the scalar sum does. An 8-column step, then
// scalar code, take the rest of a row.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "simd/i8_dot_tail.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {

void i8_dot_rows_sdot_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  const int k16 = k_size & ~15;
  const int k8 = k_size & ~7;
  int j = 0;
  for (; j + 4 <= rows; j += 4) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    const std::int8_t* r1 = r0 + K;
    const std::int8_t* r2 = r1 + K;
    const std::int8_t* r3 = r2 + K;
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < k16; k += 16) {
      const int8x16_t x = vld1q_s8(v + k);
      a0 = vdotq_s32(a0, vld1q_s8(r0 + k), x);
      a1 = vdotq_s32(a1, vld1q_s8(r1 + k), x);
      a2 = vdotq_s32(a2, vld1q_s8(r2 + k), x);
      a3 = vdotq_s32(a3, vld1q_s8(r3 + k), x);
    }
    int32x4_t s = vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));  // [Σa0, Σa1, Σa2, Σa3]
    if (k16 < k8) {
      // 8 columns: two lanes of each 64-bit dot product, summed pairwise.
      const int8x8_t x = vld1_s8(v + k16);
      const int32x2_t z = vdup_n_s32(0);
      const int32x2_t d0 = vdot_s32(z, vld1_s8(r0 + k16), x), d1 = vdot_s32(z, vld1_s8(r1 + k16), x);
      const int32x2_t d2 = vdot_s32(z, vld1_s8(r2 + k16), x), d3 = vdot_s32(z, vld1_s8(r3 + k16), x);
      s = vaddq_s32(s, vcombine_s32(vpadd_s32(d0, d1), vpadd_s32(d2, d3)));
    }
    s = vaddq_s32(s, vld1q_s32(bias + j));
    if (k8 == k_size) {
      vst1q_s32(out + j, s);
      continue;
    }
    out[j] = tail::dot_rest(vgetq_lane_s32(s, 0), r0, v, k8, k_size);
    out[j + 1] = tail::dot_rest(vgetq_lane_s32(s, 1), r1, v, k8, k_size);
    out[j + 2] = tail::dot_rest(vgetq_lane_s32(s, 2), r2, v, k8, k_size);
    out[j + 3] = tail::dot_rest(vgetq_lane_s32(s, 3), r3, v, k8, k_size);
  }
  for (; j < rows; ++j) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    int32x4_t a0 = vdupq_n_s32(0);
    for (int k = 0; k < k16; k += 16) a0 = vdotq_s32(a0, vld1q_s8(r0 + k), vld1q_s8(v + k));
    std::int32_t sum = vaddvq_s32(a0);
    if (k16 < k8) {
      const int32x2_t d = vdot_s32(vdup_n_s32(0), vld1_s8(r0 + k16), vld1_s8(v + k16));
      sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(sum) + static_cast<std::uint32_t>(vaddv_s32(d)));
    }
    // The bias joins in unsigned arithmetic: the sum may wrap.
    const std::int32_t s = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) + static_cast<std::uint32_t>(sum));
    out[j] = tail::dot_rest(s, r0, v, k8, k_size);
  }
}

}  // namespace q8
}  // namespace rnncore

// The int8 matrix-vector kernel on NEON, AArch64 and ARMv7 (src/internal/int8_kernels.hpp): 4 rows
// × 16 columns per step sharing the loads of v. vmull_s8 forms 8 int16 products (each within
// ±2^14, exact) and vpadalq_s16 adds them pairwise into int32 lanes. Not vmlal_s8: it would add
// two products in an int16 lane, and (−128)² + (−128)² = 2^15 does not fit. The int32 lanes wrap
// as the scalar sum does. An 8-column step, then scalar code, take the rest of a row.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "simd/i8_dot_tail.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

inline int32x4_t mac16(int32x4_t acc, int8x16_t w, int8x16_t x) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
  return vpadalq_s16(acc, vmull_s8(vget_high_s8(w), vget_high_s8(x)));
}

// [Σa0, Σa1, Σa2, Σa3]
inline int32x4_t sum4(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3) {
#if defined(__aarch64__)
  return vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
#else
  const int32x2_t s0 = vadd_s32(vget_low_s32(a0), vget_high_s32(a0));
  const int32x2_t s1 = vadd_s32(vget_low_s32(a1), vget_high_s32(a1));
  const int32x2_t s2 = vadd_s32(vget_low_s32(a2), vget_high_s32(a2));
  const int32x2_t s3 = vadd_s32(vget_low_s32(a3), vget_high_s32(a3));
  return vcombine_s32(vpadd_s32(s0, s1), vpadd_s32(s2, s3));
#endif
}

inline std::int32_t sum1(int32x4_t a) {
  const int32x2_t s = vadd_s32(vget_low_s32(a), vget_high_s32(a));
  return vget_lane_s32(vpadd_s32(s, s), 0);
}

}  // namespace

void i8_dot_rows_neon_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
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
      a0 = mac16(a0, vld1q_s8(r0 + k), x);
      a1 = mac16(a1, vld1q_s8(r1 + k), x);
      a2 = mac16(a2, vld1q_s8(r2 + k), x);
      a3 = mac16(a3, vld1q_s8(r3 + k), x);
    }
    if (k16 < k8) {
      const int8x8_t x = vld1_s8(v + k16);
      a0 = vpadalq_s16(a0, vmull_s8(vld1_s8(r0 + k16), x));
      a1 = vpadalq_s16(a1, vmull_s8(vld1_s8(r1 + k16), x));
      a2 = vpadalq_s16(a2, vmull_s8(vld1_s8(r2 + k16), x));
      a3 = vpadalq_s16(a3, vmull_s8(vld1_s8(r3 + k16), x));
    }
    const int32x4_t s = vaddq_s32(sum4(a0, a1, a2, a3), vld1q_s32(bias + j));
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
    for (int k = 0; k < k16; k += 16) a0 = mac16(a0, vld1q_s8(r0 + k), vld1q_s8(v + k));
    if (k16 < k8) a0 = vpadalq_s16(a0, vmull_s8(vld1_s8(r0 + k16), vld1_s8(v + k16)));
    // The bias joins in unsigned arithmetic: the sum may wrap.
    const std::int32_t s = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) + static_cast<std::uint32_t>(sum1(a0)));
    out[j] = tail::dot_rest(s, r0, v, k8, k_size);
  }
}

}  // namespace q8
}  // namespace rnncore

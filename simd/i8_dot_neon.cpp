// The int8 matrix-vector kernel on NEON, AArch64 and ARMv7 (src/internal/int8_kernels.hpp; the
// driver is simd/i8_dot_driver.hpp): 4 rows
// × 16 columns per step sharing the loads of v. vmull_s8 forms 8 int16 products (each within
// ±2^14, exact) and vpadalq_s16 adds them pairwise into int32 lanes. Not vmlal_s8: it would add
// two products in an int16 lane, and (−128)² + (−128)² = 2^15 does not fit. The int32 lanes wrap
// as the scalar sum does. An 8-column step, then scalar code, take the rest of a row.
#include <arm_neon.h>

#include <cstdint>

#include "simd/i8_dot_driver.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

// [Σa0, Σa1, Σa2, Σa3]
inline int32x4_t sum4_lanes(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3) {
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

struct Neon {
  using Acc = int32x4_t;
  using X = int8x16_t;
  static constexpr int kStep = 16;
  static Acc zero() { return vdupq_n_s32(0); }
  static X load(const std::int8_t* v) { return vld1q_s8(v); }
  static Acc mac(Acc acc, const std::int8_t* row, X x) {
    const int8x16_t w = vld1q_s8(row);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    return vpadalq_s16(acc, vmull_s8(vget_high_s8(w), vget_high_s8(x)));
  }
  // 8 columns more where K mod 16 >= 8.
  static int rest(Acc* a, const std::int8_t* const* r, int n, const std::int8_t* v, int k, int k_size) {
    if (k + 8 > k_size) return k;
    const int8x8_t x = vld1_s8(v + k);
    for (int i = 0; i < n; ++i) a[i] = vpadalq_s16(a[i], vmull_s8(vld1_s8(r[i] + k), x));
    return k + 8;
  }
  static void sum4(const Acc* a, const std::int32_t* bias, std::int32_t* out) {
    vst1q_s32(out, vaddq_s32(sum4_lanes(a[0], a[1], a[2], a[3]), vld1q_s32(bias)));
  }
  static std::int32_t sum1(Acc a) {
    const int32x2_t s = vadd_s32(vget_low_s32(a), vget_high_s32(a));
    return vget_lane_s32(vpadd_s32(s, s), 0);
  }
};

}  // namespace

void i8_dot_4x16__neon(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                       std::int32_t* out) {
  driver::dot_rows<Neon>(w, rows, k_size, v, bias, out);
}

}  // namespace q8
}  // namespace rnncore

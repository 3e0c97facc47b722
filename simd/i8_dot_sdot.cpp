// The int8 matrix-vector kernel on AArch64 with the dot-product extension (SDOT; the driver is
// simd/i8_dot_driver.hpp; compiled with
// -march=armv8.2-a+dotprod, chosen at run time only where the CPU reports it): 4 rows × 16
// columns per step sharing the loads of v. vdotq_s32 adds, in each int32 lane, four int8 products
// (at most 4 · 2^14: exact); the int32 lanes wrap as the scalar sum does. An 8-column step, then
// scalar code, take the rest of a row.
#include <arm_neon.h>

#include <cstdint>

#include "simd/i8_dot_driver.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

struct Sdot {
  using Acc = int32x4_t;
  using X = int8x16_t;
  static constexpr int kStep = 16;
  static Acc zero() { return vdupq_n_s32(0); }
  static X load(const std::int8_t* v) { return vld1q_s8(v); }
  static Acc mac(Acc acc, const std::int8_t* row, X x) { return vdotq_s32(acc, vld1q_s8(row), x); }
  // 8 columns more where K mod 16 >= 8: a 64-bit dot product into the low lanes.
  static int rest(Acc* a, const std::int8_t* const* r, int n, const std::int8_t* v, int k, int k_size) {
    if (k + 8 > k_size) return k;
    const int8x8_t x = vld1_s8(v + k);
    const int32x2_t z = vdup_n_s32(0);
    for (int i = 0; i < n; ++i) a[i] = vaddq_s32(a[i], vcombine_s32(vdot_s32(z, vld1_s8(r[i] + k), x), z));
    return k + 8;
  }
  static void sum4(const Acc* a, const std::int32_t* bias, std::int32_t* out) {
    const int32x4_t s = vpaddq_s32(vpaddq_s32(a[0], a[1]), vpaddq_s32(a[2], a[3]));  // [Σa0, Σa1, Σa2, Σa3]
    vst1q_s32(out, vaddq_s32(s, vld1q_s32(bias)));
  }
  static std::int32_t sum1(Acc a) { return vaddvq_s32(a); }
};

}  // namespace

void i8_dot_4x16__sdot(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                       std::int32_t* out) {
  driver::dot_rows<Sdot>(w, rows, k_size, v, bias, out);
}

}  // namespace q8
}  // namespace rnncore

// Vector math for the f32 kernels: fused multiply-add, exp, sigmoid and tanh over xsimd::batch.
//
// Why our own and not xsimd's: xsimd 8.1 has no native fma for AVX-512 (it writes mul + add, which
// the compiler may or may not contract), and its exp/tanh inherit that. Here every FMA-capable
// path (AVX2+FMA, AVX-512, NEON with FMA) issues exactly the same fused operations in the same
// order, so those paths produce bit-identical results; SSE2 and NEON without FMA round the product
// separately (documented in docs/dropout.md).
//
// Accuracy (checked against double precision by tests/test_simd_math.cpp): exp and sigmoid within a
// few ulp; tanh within 2e-7 relative error.
// Coefficients: least-squares minimax fits made for rnncore (exp: degree 6 on [−ln2/2, ln2/2],
// 3e-9 relative; tanh(x)/x: degree 5 in x² on [0, 0.625], 4e-9 relative).
#ifndef RNNCORE_SIMD_MATH_HPP
#define RNNCORE_SIMD_MATH_HPP

#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#if defined(RNNCORE_SIMD_ISA_AVX512)
#include <immintrin.h>
#endif

namespace rnncore {
namespace simd {
namespace {

template <class Arch>
using vf = xsimd::batch<float, Arch>;
template <class Arch>
using vi = xsimd::batch<std::int32_t, Arch>;

// The activations run inside the step kernels' epilogues, next to live accumulator tiles: a call
// would spill them. (GCC declined to inline tanh on its own.)
#if defined(__GNUC__)
#define RNNCORE_SIMD_INLINE inline __attribute__((always_inline))
#else
#define RNNCORE_SIMD_INLINE inline
#endif

/// a · b + c, fused wherever the instruction set can fuse.
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> fmadd(vf<Arch> a, vf<Arch> b, vf<Arch> c) {
#if defined(RNNCORE_SIMD_ISA_AVX512)
  if constexpr (std::is_same<Arch, xsimd::avx512bw>::value) return _mm512_fmadd_ps(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

/// e^x for x clamped to [−87, 88] (results stay normal; σ(x) is 1 below anyway), and +Inf beyond
/// ln(FLT_MAX) ≈ 88.72 where std::exp overflows too: σ(−∞) is then exactly 0 as on the reference,
/// and 0·∞ gives the same NaN. NaN stays NaN: x86's min/max return their second operand when
/// either is NaN, so x goes second; NEON's propagate NaN. test_simd_math and test_nonfinite hold
/// every instruction set to this.
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> exp_f32(vf<Arch> x) {
  using F = vf<Arch>;
  const auto overflow = x > F(88.72283935546875f);
  x = xsimd::min(F(88.0f), xsimd::max(F(-87.0f), x));
  // n = round(x / ln 2) through the 1.5·2^23 trick: the integer lands in the low mantissa bits.
  const F magic(12582912.0f);
  const F n_magic = fmadd(x, F(1.44269504088896341f), magic);
  const F n = n_magic - magic;
  F r = fmadd(n, F(-0.693145751953125f), x);    // ln 2, high part (exact in 16 bits)
  r = fmadd(n, F(-1.4286068203094172e-06f), r);  // ln 2, low part
  F p(0.00138148567393508f);
  p = fmadd(p, r, F(0.00836871326959026f));
  p = fmadd(p, r, F(0.04166838293799011f));
  p = fmadd(p, r, F(0.1666652065408528f));
  p = fmadd(p, r, F(0.4999999347071716f));
  p = fmadd(p, r * r, r);  // e^r − 1
  const vi<Arch> n_int = xsimd::bitwise_cast<vi<Arch>>(n_magic) - vi<Arch>(0x4B400000);
  const F scale = xsimd::bitwise_cast<F>((n_int + vi<Arch>(127)) << 23);  // 2^n
  return xsimd::select(overflow, F(std::numeric_limits<float>::infinity()), fmadd(p, scale, scale));
}

/// 1 / (1 + e^−x).
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> sigmoid_f32(vf<Arch> x) {
  return vf<Arch>(1.0f) / (vf<Arch>(1.0f) + exp_f32<Arch>(-x));
}

/// max(x, 0), with NaN kept (a compare is false for NaN) and −0 giving +0, as the reference computes it.
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> relu_f32(vf<Arch> x) {
  return xsimd::select(x <= vf<Arch>(0.0f), vf<Arch>(0.0f), x);
}

/// x clipped to [−limit, limit] (TF's clip_by_value; limit > 0), NaN kept as in exp_f32: x goes second.
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> clip_f32(vf<Arch> x, float limit) {
  return xsimd::min(vf<Arch>(limit), xsimd::max(vf<Arch>(-limit), x));
}

/// tanh x: an odd polynomial near 0 (where 1 − 2/(e^2x + 1) would cancel), the exponential form beyond.
template <class Arch>
RNNCORE_SIMD_INLINE vf<Arch> tanh_f32(vf<Arch> x) {
  using F = vf<Arch>;
  const F a = xsimd::abs(x);
  const F u = a * a;
  F q(-0.00570546137863057f);
  q = fmadd(q, u, F(0.02063952803254694f));
  q = fmadd(q, u, F(-0.05373985891884273f));
  q = fmadd(q, u, F(0.13331444099873724f));
  q = fmadd(q, u, F(-0.3333328202345766f));
  const F small = fmadd(a * u, q, a);
  const F large = F(1.0f) - F(2.0f) / (exp_f32<Arch>(a + a) + F(1.0f));
  const F t = xsimd::select(a < F(0.625f), small, large);
  return xsimd::bitwise_or(t, xsimd::bitwise_and(x, F(-0.0f)));  // the sign of x
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_MATH_HPP

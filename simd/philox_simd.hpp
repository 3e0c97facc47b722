// rnncore — vectorised Philox4x32-10 and dropout-mask rows over xsimd 8.1.
//
// Bit-identical to the scalar mask function of include/rnncore/philox.h (see the block comment
// there). One lane of a xsimd::batch<uint32_t, Arch> runs one Philox call, i.e. one group of four
// mask units; a batch of N lanes thus yields 4N consecutive mask values.
//
// 32x32 -> 64-bit products. xsimd 8.1 has no widening multiply, and its integer mul is not native
// everywhere (uint32 on sse2 and uint64 on sse2 / neon fall back to scalar code). mulhilo therefore
// has two implementations, chosen by a policy tag:
//   mul_native   (default): the even-lane widening multiplies of each ISA — _mm_mul_epu32 (SSE2 and
//                later 128-bit x86), _mm256_mul_epu32 (AVX2), _mm512_mul_epu32 (AVX-512F), vmull_u32
//                (NEON, NEON64); any other Arch (e.g. xsimd::avx without AVX2) uses mul_portable.
//   mul_portable: only xsimd operations — four 16x16 -> 32-bit partial products formed with xsimd's
//                uint32 multiply, then recombined with shifts and adds.
// Both give the exact product; the tests check each against the scalar code.
//
// ODR. Compile this header into one translation unit per target (e.g. -mavx2 -mfma), instantiating
// the templates for that target's Arch only. Everything here is a template or lives in an inline
// namespace named after the ISA macros of the translation unit (RNNCORE_SIMD_ABI_TAG), so two units
// built with different -m flags never share a symbol defined here. Do not call
// xsimd::available_architectures() from such a unit (it is an inline non-template xsimd function:
// its copy would carry the unit's ISA); dispatch from baseline code instead.
#ifndef RNNCORE_SIMD_PHILOX_SIMD_HPP
#define RNNCORE_SIMD_PHILOX_SIMD_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

// GCC 12.2's AVX-512 intrinsic headers trip -Wuninitialized / -Wmaybe-uninitialized on their own
// _mm512_undefined_* self-initialisation once inlined (GCC bug 105593, fixed in 12.3 and 13);
// the diagnostics point into those headers, so silencing them around the include suffices.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
#else
#include <xsimd/xsimd.hpp>
#endif

#include "rnncore/philox.h"

#if XSIMD_VERSION_MAJOR != 8
#error "simd/philox_simd.hpp is written against xsimd 8.x (zip, bitwise_cast and select semantics)"
#endif

#ifndef RNNCORE_SIMD_ABI_TAG
#if defined(__AVX512BW__)
#define RNNCORE_SIMD_ABI_TAG abi_avx512bw
#elif defined(__AVX512F__)
#define RNNCORE_SIMD_ABI_TAG abi_avx512f
#elif defined(__AVX2__)
#define RNNCORE_SIMD_ABI_TAG abi_avx2
#elif defined(__AVX__)
#define RNNCORE_SIMD_ABI_TAG abi_avx
#elif defined(__SSE4_1__)
#define RNNCORE_SIMD_ABI_TAG abi_sse4_1
#elif defined(__SSE2__) || defined(_M_X64)
#define RNNCORE_SIMD_ABI_TAG abi_sse2
#elif defined(__aarch64__) || defined(_M_ARM64)
#define RNNCORE_SIMD_ABI_TAG abi_neon64
#elif defined(__ARM_NEON)
#define RNNCORE_SIMD_ABI_TAG abi_neon
#else
#define RNNCORE_SIMD_ABI_TAG abi_generic
#endif
#endif

namespace rnncore {
namespace simd_detail {
inline namespace RNNCORE_SIMD_ABI_TAG {

/// Multiply policy: the ISA's widening multiply where this header knows one, else mul_portable.
struct mul_native {};
/// Multiply policy: xsimd operations only (16-bit partial products).
struct mul_portable {};

template <class Arch>
using u32_batch = xsimd::batch<std::uint32_t, Arch>;
template <class Arch>
using i32_batch = xsimd::batch<std::int32_t, Arch>;

namespace detail {

/// (hi, lo) = a * m as 64-bit products, from 16x16-bit partial products (xsimd uint32 mul only).
template <class Arch>
inline void mulhilo_portable(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo) {
  using B = u32_batch<Arch>;
  const B mask16(0xFFFFu);
  const B m_lo(m & 0xFFFFu), m_hi(m >> 16);
  const B a_lo = a & mask16, a_hi = a >> 16;
  const B ll = a_lo * m_lo, lh = a_lo * m_hi, hl = a_hi * m_lo, hh = a_hi * m_hi;
  const B mid = (ll >> 16) + (lh & mask16) + (hl & mask16);  // < 3 * 2^16: no overflow
  hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
  lo = (mid << 16) | (ll & mask16);
}

// Native overloads, selected by the most derived ISA tag (xsimd's archs form an inheritance chain).
template <class Arch>
inline void mulhilo_native(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo,
                           xsimd::generic const&) {
  mulhilo_portable<Arch>(a, m, hi, lo);
}

#if XSIMD_WITH_SSE2
template <class Arch>
inline void mulhilo_native(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo,
                           xsimd::sse2 const&) {
  const __m128i av = a, mv = _mm_set1_epi32(static_cast<int>(m));
  const __m128i lo_words = _mm_set_epi32(0, -1, 0, -1);
  const __m128i pe = _mm_mul_epu32(av, mv);                     // lanes 0, 2 as 64-bit products
  const __m128i po = _mm_mul_epu32(_mm_srli_epi64(av, 32), mv);  // lanes 1, 3
  hi = _mm_or_si128(_mm_srli_epi64(pe, 32), _mm_andnot_si128(lo_words, po));
  lo = _mm_or_si128(_mm_and_si128(pe, lo_words), _mm_slli_epi64(po, 32));
}
#endif

#if XSIMD_WITH_AVX2
template <class Arch>
inline void mulhilo_native(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo,
                           xsimd::avx2 const&) {
  const __m256i av = a, mv = _mm256_set1_epi32(static_cast<int>(m));
  const __m256i pe = _mm256_mul_epu32(av, mv);
  const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(av, 32), mv);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}
#endif

#if XSIMD_WITH_AVX512F
template <class Arch>
inline void mulhilo_native(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo,
                           xsimd::avx512f const&) {
  const __m512i av = a, mv = _mm512_set1_epi32(static_cast<int>(m));
  const __m512i pe = _mm512_mul_epu32(av, mv);
  const __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(av, 32), mv);
  hi = _mm512_mask_blend_epi32(static_cast<__mmask16>(0xAAAA), _mm512_srli_epi64(pe, 32), po);
  lo = _mm512_mask_blend_epi32(static_cast<__mmask16>(0xAAAA), pe, _mm512_slli_epi64(po, 32));
}
#endif

#if XSIMD_WITH_NEON
template <class Arch>
inline void mulhilo_native(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo,
                           xsimd::neon const&) {
  const uint32x4_t av = a;
  const uint32x2_t mv = vdup_n_u32(m);
  const uint64x2_t p01 = vmull_u32(vget_low_u32(av), mv);
  const uint64x2_t p23 = vmull_u32(vget_high_u32(av), mv);
  const uint32x4x2_t words = vuzpq_u32(vreinterpretq_u32_u64(p01), vreinterpretq_u32_u64(p23));
  lo = words.val[0];  // even 32-bit words: low halves of the four products
  hi = words.val[1];
}
#endif

template <class Arch, class Mul>
inline void mulhilo(u32_batch<Arch> const& a, std::uint32_t m, u32_batch<Arch>& hi, u32_batch<Arch>& lo) {
  if (std::is_same<Mul, mul_portable>::value)
    mulhilo_portable<Arch>(a, m, hi, lo);
  else
    mulhilo_native<Arch>(a, m, hi, lo, Arch{});
}

/// Mask values from uniform words: scale_bits where u < threshold (unsigned), else 0. Generic form:
/// the unsigned compare as a signed compare of sign-flipped values (native on every ISA), then select.
template <class Arch>
inline i32_batch<Arch> keep_values(u32_batch<Arch> const& u, i32_batch<Arch> const& thr_flipped,
                                   i32_batch<Arch> const& scale_bits, xsimd::generic const&) {
  using I = i32_batch<Arch>;
  return xsimd::select((xsimd::bitwise_cast<I>(u) ^ I(INT32_MIN)) < thr_flipped, scale_bits, I(0));
}

#if XSIMD_WITH_AVX512F
// AVX-512F has the unsigned compare and a zero-masking move. (This also sidesteps xsimd 8.1's
// integer select for avx512bw, which GCC 12 rejects at -O0 where _mm512_mask_blend_epi8 is a macro.)
template <class Arch>
inline i32_batch<Arch> keep_values(u32_batch<Arch> const& u, i32_batch<Arch> const& thr_flipped,
                                   i32_batch<Arch> const& scale_bits, xsimd::avx512f const&) {
  const __m512i thr = _mm512_xor_si512(thr_flipped, _mm512_set1_epi32(INT32_MIN));
  return _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(u, thr), scale_bits);
}
#endif

/// One Philox round on batches, with the round key (k0, k1).
template <class Arch, class Mul>
inline void philox_round(u32_batch<Arch>& x0, u32_batch<Arch>& x1, u32_batch<Arch>& x2, u32_batch<Arch>& x3,
                         std::uint32_t k0, std::uint32_t k1) {
  using B = u32_batch<Arch>;
  B hi0, lo0, hi1, lo1;
  mulhilo<Arch, Mul>(x0, RNNCORE_PHILOX_M0, hi0, lo0);
  mulhilo<Arch, Mul>(x2, RNNCORE_PHILOX_M1, hi1, lo1);
  x0 = hi1 ^ x1 ^ B(k0);
  x1 = lo1;
  x2 = hi0 ^ x3 ^ B(k1);
  x3 = lo0;
}

/// Mask-row constants that do not depend on the lane (only c0 varies across a row).
struct row_constants {
  std::uint32_t key0[RNNCORE_PHILOX_ROUNDS], key1[RNNCORE_PHILOX_ROUNDS];
  // Round 1 sees uniform c1, c2, c3; round 2 a uniform x0. Their uniform parts:
  std::uint32_t r1_x0, r1_x1;          // x0, x1 after round 1
  std::uint32_t r1_x2_xor;             // x2 after round 1 = hi(M0 * c0) ^ r1_x2_xor
  std::uint32_t r2_x1_xor;             // x0 after round 2 = hi(M1 * x2) ^ r2_x1_xor
  std::uint32_t r2_hi0, r2_lo0;        // M0 * (x0 after round 1)
};

inline row_constants make_row_constants(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t row) {
  row_constants rc;
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int r = 0; r < RNNCORE_PHILOX_ROUNDS; ++r) {
    rc.key0[r] = k0;
    rc.key1[r] = k1;
    k0 += RNNCORE_PHILOX_W0;
    k1 += RNNCORE_PHILOX_W1;
  }
  const std::uint64_t p1 = static_cast<std::uint64_t>(RNNCORE_PHILOX_M1) * site;
  rc.r1_x0 = static_cast<std::uint32_t>(p1 >> 32) ^ row ^ rc.key0[0];
  rc.r1_x1 = static_cast<std::uint32_t>(p1);
  rc.r1_x2_xor = static_cast<std::uint32_t>(step) ^ rc.key1[0];
  rc.r2_x1_xor = rc.r1_x1 ^ rc.key0[1];
  const std::uint64_t p0 = static_cast<std::uint64_t>(RNNCORE_PHILOX_M0) * rc.r1_x0;
  rc.r2_hi0 = static_cast<std::uint32_t>(p0 >> 32);
  rc.r2_lo0 = static_cast<std::uint32_t>(p0);
  return rc;
}

/// Philox4x32-10 of the counters (c0, row, site, step) for the lanes of c0; rounds 1 and 2 use
/// the precomputed uniform parts.
template <class Arch, class Mul>
inline void philox_row_block(u32_batch<Arch> const& c0, row_constants const& rc, u32_batch<Arch>& x0,
                             u32_batch<Arch>& x1, u32_batch<Arch>& x2, u32_batch<Arch>& x3) {
  using B = u32_batch<Arch>;
  B hi, lo;
  mulhilo<Arch, Mul>(c0, RNNCORE_PHILOX_M0, hi, lo);     // round 1
  const B r1_x2 = hi ^ B(rc.r1_x2_xor), r1_x3 = lo;
  mulhilo<Arch, Mul>(r1_x2, RNNCORE_PHILOX_M1, hi, lo);  // round 2
  x0 = hi ^ B(rc.r2_x1_xor);
  x1 = lo;
  x2 = r1_x3 ^ B(rc.r2_hi0 ^ rc.key1[1]);
  x3 = B(rc.r2_lo0);
  for (int r = 2; r < RNNCORE_PHILOX_ROUNDS; ++r) philox_round<Arch, Mul>(x0, x1, x2, x3, rc.key0[r], rc.key1[r]);
}

/// 4x4 transposes within the batch: from word-major (x_w[lane]) to memory order. Which lane lands
/// where depends on xsimd's zip semantics (per 128-bit block in 8.1); lane_layout discovers it.
template <class Arch, class T>
inline void transpose4(xsimd::batch<T, Arch>& a, xsimd::batch<T, Arch>& b, xsimd::batch<T, Arch>& c,
                       xsimd::batch<T, Arch>& d) {
  using W = xsimd::batch<std::uint64_t, Arch>;
  using B = xsimd::batch<T, Arch>;
  const W t0 = xsimd::bitwise_cast<W>(xsimd::zip_lo(a, b)), t1 = xsimd::bitwise_cast<W>(xsimd::zip_hi(a, b));
  const W t2 = xsimd::bitwise_cast<W>(xsimd::zip_lo(c, d)), t3 = xsimd::bitwise_cast<W>(xsimd::zip_hi(c, d));
  a = xsimd::bitwise_cast<B>(xsimd::zip_lo(t0, t2));
  b = xsimd::bitwise_cast<B>(xsimd::zip_hi(t0, t2));
  c = xsimd::bitwise_cast<B>(xsimd::zip_lo(t1, t3));
  d = xsimd::bitwise_cast<B>(xsimd::zip_hi(t1, t3));
}

/// offset[lane]: the group (relative to the block's first) a lane must compute so that, after
/// transpose4 and four consecutive stores, memory holds groups 0..N-1 in order. valid is false if
/// the transpose does not put word (p mod 4) at position p (then the row falls back to scalar code).
template <class Arch>
struct lane_layout {
  static constexpr std::size_t N = u32_batch<Arch>::size;
  alignas(64) std::uint32_t offset[N];
  bool valid;
};

template <class Arch>
inline lane_layout<Arch> make_lane_layout() {
  using B = u32_batch<Arch>;
  constexpr std::size_t N = B::size;
  lane_layout<Arch> L;
  alignas(64) std::uint32_t in[4][N];
  alignas(64) std::uint32_t moved[4 * N];
  for (std::size_t w = 0; w < 4; ++w)
    for (std::size_t j = 0; j < N; ++j) in[w][j] = static_cast<std::uint32_t>(4 * j + w);  // (lane, word)
  B a = B::load_aligned(in[0]), b = B::load_aligned(in[1]), c = B::load_aligned(in[2]), d = B::load_aligned(in[3]);
  transpose4<Arch>(a, b, c, d);
  a.store_aligned(moved);
  b.store_aligned(moved + N);
  c.store_aligned(moved + 2 * N);
  d.store_aligned(moved + 3 * N);
  bool seen[N] = {};
  L.valid = true;
  for (std::size_t j = 0; j < N; ++j) L.offset[j] = 0;
  for (std::size_t p = 0; p < 4 * N; ++p) {
    const std::uint32_t lane = moved[p] / 4, word = moved[p] % 4;
    if (word != p % 4 || lane >= N) {
      L.valid = false;
      continue;
    }
    if (p % 4 == 0) {
      if (seen[lane]) L.valid = false;
      seen[lane] = true;
      L.offset[lane] = static_cast<std::uint32_t>(p / 4);
    } else if (!seen[lane] || L.offset[lane] != p / 4) {
      L.valid = false;
    }
  }
  return L;
}

template <class Arch>
inline lane_layout<Arch> const& get_lane_layout() {
  static const lane_layout<Arch> layout = make_lane_layout<Arch>();
  return layout;
}

}  // namespace detail

/// Number of uint32 lanes (Philox calls per batch) of Arch; a batch produces 4 * lanes mask values.
template <class Arch>
constexpr std::size_t lanes() {
  return u32_batch<Arch>::size;
}

/// Philox4x32-10 of N independent counters (lane j of x[0..3] is counter j), in place; the key is
/// shared by all lanes. Bit-identical to rnncore_philox4x32_10 per lane.
template <class Arch, class Mul = mul_native>
inline void philox4x32_10(u32_batch<Arch> x[4], std::uint32_t k0, std::uint32_t k1) {
  for (int r = 0; r < RNNCORE_PHILOX_ROUNDS; ++r) {
    detail::philox_round<Arch, Mul>(x[0], x[1], x[2], x[3], k0, k1);
    k0 += RNNCORE_PHILOX_W0;
    k1 += RNNCORE_PHILOX_W1;
  }
}

/// One mask row: out[u] = params.scale if unit u is kept, else 0, for u in [0, width); identical
/// bits to rnncore_mask_row (include/rnncore/philox.h). out needs no alignment.
/// seed, step, site, t_prime, row: as in the mask function (t_prime = t, or 0 for variational masks).
template <class Arch, class Mul = mul_native>
inline void mask_row_range(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t t_prime,
                           std::uint32_t row, std::uint32_t width, std::uint32_t unit_begin, std::uint32_t unit_end,
                           rnncore_mask_params const& params, float* out);

template <class Arch, class Mul = mul_native>
inline void mask_row(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t t_prime,
                     std::uint32_t row, std::uint32_t width, rnncore_mask_params const& params, float* out) {
  mask_row_range<Arch, Mul>(seed, step, site, t_prime, row, width, 0, width, params, out);
}

/// Units [unit_begin, unit_end) of a mask row into out[0, unit_end − unit_begin); unit_begin must be a
/// multiple of 4 (a Philox call covers four units). Bit-identical to the same units of mask_row.
template <class Arch, class Mul>
inline void mask_row_range(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t t_prime,
                           std::uint32_t row, std::uint32_t width, std::uint32_t unit_begin, std::uint32_t unit_end,
                           rnncore_mask_params const& params, float* out) {
  using B = u32_batch<Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr std::size_t N = B::size;
  if (unit_end > width) unit_end = width;
  if (unit_begin >= unit_end) return;
  const std::uint32_t count = unit_end - unit_begin;
  if (params.always_keep) {
    const F s(params.scale);
    std::size_t u = 0;
    for (; u + N <= count; u += N) s.store_unaligned(out + u);
    for (; u < count; ++u) out[u] = params.scale;
    return;
  }
  detail::lane_layout<Arch> const& layout = detail::get_lane_layout<Arch>();
  if (!layout.valid || unit_begin % 4 != 0) {
    for (std::uint32_t u = unit_begin; u < unit_end; ++u)
      out[u - unit_begin] = rnncore_mask_value(seed, step, site, t_prime, row, u, width, &params);
    return;
  }
  const detail::row_constants rc = detail::make_row_constants(seed, step, site, row);
  const std::uint32_t groups = rnncore_mask_groups(width);
  const B offsets = B::load_aligned(layout.offset);
  // The threshold with its sign bit flipped, for keep_values' signed compare.
  const I thr(static_cast<std::int32_t>(params.threshold ^ 0x80000000u));
  std::uint32_t scale_bits;
  std::memcpy(&scale_bits, &params.scale, sizeof scale_bits);
  const I scale_i(static_cast<std::int32_t>(scale_bits));
  const std::uint32_t c0_base = t_prime * groups;  // wraps mod 2^32, as the scalar code
  alignas(64) float tail[4 * N];
  std::uint32_t q = unit_begin / 4;
  for (std::size_t u = 0; u < count; q += static_cast<std::uint32_t>(N), u += 4 * N) {
    B x0, x1, x2, x3;
    detail::philox_row_block<Arch, Mul>(B(c0_base + q) + offsets, rc, x0, x1, x2, x3);
    I v0 = detail::keep_values<Arch>(x0, thr, scale_i, Arch{});
    I v1 = detail::keep_values<Arch>(x1, thr, scale_i, Arch{});
    I v2 = detail::keep_values<Arch>(x2, thr, scale_i, Arch{});
    I v3 = detail::keep_values<Arch>(x3, thr, scale_i, Arch{});
    detail::transpose4<Arch>(v0, v1, v2, v3);
    const bool full = static_cast<std::size_t>(count) - u >= 4 * N;
    float* dst = full ? out + u : tail;  // the last, partial block goes through tail
    xsimd::bitwise_cast<F>(v0).store_unaligned(dst);
    xsimd::bitwise_cast<F>(v1).store_unaligned(dst + N);
    xsimd::bitwise_cast<F>(v2).store_unaligned(dst + 2 * N);
    xsimd::bitwise_cast<F>(v3).store_unaligned(dst + 3 * N);
    if (!full) std::memcpy(out + u, tail, (count - u) * sizeof(float));
  }
}

/// True when mask_row<Arch> runs vectorised. False only if xsimd's zip_lo / zip_hi were to permute
/// lanes in a way the 4x4 transposes cannot undo, in which case mask_row uses the scalar code.
template <class Arch>
inline bool mask_row_is_vectorised() {
  return detail::get_lane_layout<Arch>().valid;
}

/// True when mul_native uses an ISA widening multiply for Arch (false: it falls back to mul_portable).
template <class Arch>
constexpr bool has_native_mulhilo() {
  return false
#if XSIMD_WITH_SSE2
         || std::is_base_of<xsimd::sse2, Arch>::value
#endif
#if XSIMD_WITH_AVX2
         || std::is_base_of<xsimd::avx2, Arch>::value
#endif
#if XSIMD_WITH_AVX512F
         || std::is_base_of<xsimd::avx512f, Arch>::value
#endif
#if XSIMD_WITH_NEON
         || std::is_base_of<xsimd::neon, Arch>::value
#endif
      ;
}

}  // inline namespace RNNCORE_SIMD_ABI_TAG
}  // namespace simd_detail
}  // namespace rnncore

#endif  // RNNCORE_SIMD_PHILOX_SIMD_HPP

// The int8 matrix-vector kernel on SSE2 (src/internal/int8_kernels.hpp): 4 rows × 16 columns per
// step. SSE2 has no pmovsxbw: a byte is sign-extended by unpacking it into the high byte of a
// 16-bit lane and shifting right arithmetically by 8. pmaddwd then sums two int16 products into
// an int32 lane (at most 2 · 2^14, exact); the int32 lanes wrap as the scalar sum does.
#include <emmintrin.h>

#include <cstddef>
#include <cstdint>

#include "simd/i8_dot_tail.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

inline __m128i load16(const std::int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m128i lo16(__m128i x) { return _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8); }
inline __m128i hi16(__m128i x) { return _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8); }

// Σ of 16 products of one row into acc's four lanes.
inline __m128i mac16(__m128i acc, __m128i w, __m128i vlo, __m128i vhi) {
  acc = _mm_add_epi32(acc, _mm_madd_epi16(lo16(w), vlo));
  return _mm_add_epi32(acc, _mm_madd_epi16(hi16(w), vhi));
}

// The lane sums of four accumulators, as one vector [Σa0, Σa1, Σa2, Σa3].
inline __m128i sum4(__m128i a0, __m128i a1, __m128i a2, __m128i a3) {
  const __m128i s01 = _mm_add_epi32(_mm_unpacklo_epi32(a0, a1), _mm_unpackhi_epi32(a0, a1));
  const __m128i s23 = _mm_add_epi32(_mm_unpacklo_epi32(a2, a3), _mm_unpackhi_epi32(a2, a3));
  return _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23));
}

inline std::int32_t sum1(__m128i a) {
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(a);
}

}  // namespace

void i8_dot_rows_sse2_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  const int k16 = k_size & ~15;
  int j = 0;
  for (; j + 4 <= rows; j += 4) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    const std::int8_t* r1 = r0 + K;
    const std::int8_t* r2 = r1 + K;
    const std::int8_t* r3 = r2 + K;
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < k16; k += 16) {
      const __m128i x = load16(v + k);
      const __m128i xl = lo16(x), xh = hi16(x);
      a0 = mac16(a0, load16(r0 + k), xl, xh);
      a1 = mac16(a1, load16(r1 + k), xl, xh);
      a2 = mac16(a2, load16(r2 + k), xl, xh);
      a3 = mac16(a3, load16(r3 + k), xl, xh);
    }
    const __m128i s = _mm_add_epi32(sum4(a0, a1, a2, a3), _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias + j)));
    alignas(16) std::int32_t t[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), s);
    out[j] = tail::dot_rest(t[0], r0, v, k16, k_size);
    out[j + 1] = tail::dot_rest(t[1], r1, v, k16, k_size);
    out[j + 2] = tail::dot_rest(t[2], r2, v, k16, k_size);
    out[j + 3] = tail::dot_rest(t[3], r3, v, k16, k_size);
  }
  for (; j < rows; ++j) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    __m128i a0 = _mm_setzero_si128();
    for (int k = 0; k < k16; k += 16) {
      const __m128i x = load16(v + k);
      a0 = mac16(a0, load16(r0 + k), lo16(x), hi16(x));
    }
    // The bias joins in unsigned arithmetic: the sum may wrap.
    const std::int32_t s = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) + static_cast<std::uint32_t>(sum1(a0)));
    out[j] = tail::dot_rest(s, r0, v, k16, k_size);
  }
}

}  // namespace q8
}  // namespace rnncore

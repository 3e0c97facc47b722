// The int8 matrix-vector kernel on AVX2 (src/internal/int8_kernels.hpp): 4 rows × 16 columns per
// step, the 16 bytes of v loaded and widened once for the four rows. vpmovsxbw widens 16 int8 to
// int16, vpmaddwd sums pairs of int16 products into int32 lanes (at most 2 · 2^14: exact), and the
// int32 lanes wrap as the scalar sum does. (vpmaddubsw is avoided: its int16 pair sums saturate.)
// An 8-column step, then scalar code, take the rest of a row.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "simd/i8_dot_tail.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

inline __m256i widen16(const std::int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m128i widen8(const std::int8_t* p) {
  return _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline __m128i fold(__m256i a) { return _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)); }

// The lane sums of four accumulators, as one vector [Σa0, Σa1, Σa2, Σa3].
inline __m128i sum4(__m128i a0, __m128i a1, __m128i a2, __m128i a3) {
  const __m128i s01 = _mm_hadd_epi32(a0, a1);  // [a0 01, a0 23, a1 01, a1 23]
  const __m128i s23 = _mm_hadd_epi32(a2, a3);
  return _mm_hadd_epi32(s01, s23);
}

inline std::int32_t sum1(__m128i a) {
  a = _mm_hadd_epi32(a, a);
  a = _mm_hadd_epi32(a, a);
  return _mm_cvtsi128_si32(a);
}

}  // namespace

void i8_dot_rows_avx2_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
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
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < k16; k += 16) {
      const __m256i x = widen16(v + k);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(widen16(r0 + k), x));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(widen16(r1 + k), x));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(widen16(r2 + k), x));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(widen16(r3 + k), x));
    }
    __m128i b0 = fold(a0), b1 = fold(a1), b2 = fold(a2), b3 = fold(a3);
    if (k16 < k8) {
      const __m128i x = widen8(v + k16);
      b0 = _mm_add_epi32(b0, _mm_madd_epi16(widen8(r0 + k16), x));
      b1 = _mm_add_epi32(b1, _mm_madd_epi16(widen8(r1 + k16), x));
      b2 = _mm_add_epi32(b2, _mm_madd_epi16(widen8(r2 + k16), x));
      b3 = _mm_add_epi32(b3, _mm_madd_epi16(widen8(r3 + k16), x));
    }
    const __m128i s = _mm_add_epi32(sum4(b0, b1, b2, b3), _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias + j)));
    if (k8 == k_size) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), s);
      continue;
    }
    alignas(16) std::int32_t t[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), s);
    out[j] = tail::dot_rest(t[0], r0, v, k8, k_size);
    out[j + 1] = tail::dot_rest(t[1], r1, v, k8, k_size);
    out[j + 2] = tail::dot_rest(t[2], r2, v, k8, k_size);
    out[j + 3] = tail::dot_rest(t[3], r3, v, k8, k_size);
  }
  for (; j < rows; ++j) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    __m256i a0 = _mm256_setzero_si256();
    for (int k = 0; k < k16; k += 16) a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(widen16(r0 + k), widen16(v + k)));
    __m128i b0 = fold(a0);
    if (k16 < k8) b0 = _mm_add_epi32(b0, _mm_madd_epi16(widen8(r0 + k16), widen8(v + k16)));
    // The bias joins in unsigned arithmetic: the sum may wrap.
    const std::int32_t s = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) + static_cast<std::uint32_t>(sum1(b0)));
    out[j] = tail::dot_rest(s, r0, v, k8, k_size);
  }
}

}  // namespace q8
}  // namespace rnncore

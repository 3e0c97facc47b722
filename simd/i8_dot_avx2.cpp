// The int8 matrix-vector kernel on AVX2 (src/internal/int8_kernels.hpp; the driver is
// simd/i8_dot_driver.hpp): 4 rows × 16 columns per step, the 16 bytes of v loaded and widened once
// for the four rows. vpmovsxbw widens 16 int8 to int16, vpmaddwd sums pairs of int16 products into
// int32 lanes (at most 2 · 2^14: exact), and the int32 lanes wrap as the scalar sum does.
// (vpmaddubsw is avoided: its int16 pair sums saturate.) An 8-column step, then scalar code, take
// the rest of a row.
#include <immintrin.h>

#include <cstdint>

#include "simd/i8_dot_driver.hpp"
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

struct Avx2 {
  using Acc = __m256i;
  using X = __m256i;
  static constexpr int kStep = 16;
  static Acc zero() { return _mm256_setzero_si256(); }
  static X load(const std::int8_t* v) { return widen16(v); }
  static Acc mac(Acc acc, const std::int8_t* row, X x) { return _mm256_add_epi32(acc, _mm256_madd_epi16(widen16(row), x)); }
  // 8 columns more where K mod 16 >= 8, into the low half of each accumulator.
  static int rest(Acc* a, const std::int8_t* const* r, int n, const std::int8_t* v, int k, int k_size) {
    if (k + 8 > k_size) return k;
    const __m128i x = widen8(v + k);
    for (int i = 0; i < n; ++i)
      a[i] = _mm256_add_epi32(a[i], _mm256_zextsi128_si256(_mm_madd_epi16(widen8(r[i] + k), x)));
    return k + 8;
  }
  static void sum4(const Acc* a, const std::int32_t* bias, std::int32_t* out) {
    const __m128i s01 = _mm_hadd_epi32(fold(a[0]), fold(a[1]));  // [a0 01, a0 23, a1 01, a1 23]
    const __m128i s23 = _mm_hadd_epi32(fold(a[2]), fold(a[3]));
    const __m128i s = _mm_hadd_epi32(s01, s23);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_add_epi32(s, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias))));
  }
  static std::int32_t sum1(Acc acc) {
    __m128i a = fold(acc);
    a = _mm_hadd_epi32(a, a);
    a = _mm_hadd_epi32(a, a);
    return _mm_cvtsi128_si32(a);
  }
};

}  // namespace

void i8_dot_4x16__avx2(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                       std::int32_t* out) {
  driver::dot_rows<Avx2>(w, rows, k_size, v, bias, out);
}

}  // namespace q8
}  // namespace rnncore

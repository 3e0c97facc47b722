// The int8 matrix-vector kernel on SSE2 (src/internal/int8_kernels.hpp; the driver is
// simd/i8_dot_driver.hpp): 4 rows × 16 columns per step. SSE2 has no pmovsxbw: a byte is
// sign-extended by unpacking it into the high byte of a 16-bit lane and shifting right
// arithmetically by 8. pmaddwd then sums two int16 products into an int32 lane (at most 2 · 2^14,
// exact); the int32 lanes wrap as the scalar sum does. Scalar code takes the last K mod 16 columns.
#include <emmintrin.h>

#include <cstdint>

#include "simd/i8_dot_driver.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

inline __m128i load16(const std::int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m128i lo16(__m128i x) { return _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8); }
inline __m128i hi16(__m128i x) { return _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8); }

struct Sse2 : driver::NoRest {
  using Acc = __m128i;
  struct X {
    __m128i lo, hi;  // v's 16 columns widened to int16
  };
  static constexpr int kStep = 16;
  static Acc zero() { return _mm_setzero_si128(); }
  static X load(const std::int8_t* v) {
    const __m128i x = load16(v);
    return {lo16(x), hi16(x)};
  }
  static Acc mac(Acc acc, const std::int8_t* row, const X& x) {
    const __m128i w = load16(row);
    acc = _mm_add_epi32(acc, _mm_madd_epi16(lo16(w), x.lo));
    return _mm_add_epi32(acc, _mm_madd_epi16(hi16(w), x.hi));
  }
  static void sum4(const Acc* a, const std::int32_t* bias, std::int32_t* out) {
    const __m128i s01 = _mm_add_epi32(_mm_unpacklo_epi32(a[0], a[1]), _mm_unpackhi_epi32(a[0], a[1]));
    const __m128i s23 = _mm_add_epi32(_mm_unpacklo_epi32(a[2], a[3]), _mm_unpackhi_epi32(a[2], a[3]));
    const __m128i s = _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_add_epi32(s, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias))));
  }
  static std::int32_t sum1(Acc a) {
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
  }
};

}  // namespace

void i8_dot_4x16__sse2(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                       std::int32_t* out) {
  driver::dot_rows<Sse2>(w, rows, k_size, v, bias, out);
}

}  // namespace q8
}  // namespace rnncore

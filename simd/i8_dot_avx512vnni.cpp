// The int8 matrix-vector kernel on AVX-512 VNNI (the driver is simd/i8_dot_driver.hpp; compiled with -mavx512vnni and AVX-512 BW/VL;
// chosen at run time only where the CPU reports VNNI): 4 rows × 64 columns per step sharing the
// loads of v. vpdpbusd multiplies unsigned by signed bytes and adds each group of four products
// to an int32 lane without saturation (at most 4 · 255 · 128: exact), so v is made unsigned by
// flipping its sign bit, u = v + 128, and the excess is taken off again:
//   Σ w·v = Σ w·u − 128 · Σ w,
// the second sum a vpdpbusd of the constant 128 against the same weights. All of it is int32
// arithmetic modulo 2^32, which is how the scalar sum wraps, so the result is the same bits.
// The last columns of a row (K mod 64) are masked loads: masked-out bytes read as zero weights,
// which add nothing to either sum, and no byte past a row or past v is touched.
#include <immintrin.h>

#include <cstdint>

#include "simd/i8_dot_driver.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

// Σ w·u − Σ 128·w of one row, folded to four int32 lanes (vector adds: they wrap).
inline __m128i fold(__m512i wu, __m512i w128) {
  const __m512i d = _mm512_sub_epi32(wu, w128);
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

inline __m512i sign_bits() { return _mm512_set1_epi8(static_cast<char>(0x80)); }  // u = v ^ 0x80; also the 128s

struct Vnni {
  struct Acc {
    __m512i wu;    // Σ w·u
    __m512i w128;  // Σ 128·w
  };
  using X = __m512i;  // u
  static constexpr int kStep = 64;
  static Acc zero() { return {_mm512_setzero_si512(), _mm512_setzero_si512()}; }
  static X load(const std::int8_t* v) { return _mm512_xor_si512(_mm512_loadu_si512(v), sign_bits()); }
  static Acc add(Acc acc, __m512i u, __m512i w) {
    return {_mm512_dpbusd_epi32(acc.wu, u, w), _mm512_dpbusd_epi32(acc.w128, sign_bits(), w)};
  }
  static Acc mac(Acc acc, const std::int8_t* row, X u) { return add(acc, u, _mm512_loadu_si512(row)); }
  // The last K mod 64 columns as masked loads: masked-out bytes read as zero weights, which add
  // nothing to either sum, and no byte past a row or past v is touched.
  static int rest(Acc* a, const std::int8_t* const* r, int n, const std::int8_t* v, int k, int k_size) {
    if (k == k_size) return k;
    const __mmask64 keep = ~__mmask64{0} >> (64 - (k_size - k));
    const __m512i u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(keep, v + k), sign_bits());
    for (int i = 0; i < n; ++i) a[i] = add(a[i], u, _mm512_maskz_loadu_epi8(keep, r[i] + k));
    return k_size;
  }
  static void sum4(const Acc* a, const std::int32_t* bias, std::int32_t* out) {
    const __m128i s = _mm_hadd_epi32(_mm_hadd_epi32(fold(a[0].wu, a[0].w128), fold(a[1].wu, a[1].w128)),
                                     _mm_hadd_epi32(fold(a[2].wu, a[2].w128), fold(a[3].wu, a[3].w128)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_add_epi32(s, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias))));
  }
  static std::int32_t sum1(const Acc& acc) {
    const __m128i s = fold(acc.wu, acc.w128);
    const __m128i s2 = _mm_hadd_epi32(s, s);
    return _mm_cvtsi128_si32(_mm_hadd_epi32(s2, s2));
  }
};

}  // namespace

void i8_dot_4x64__avx512vnni(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                             std::int32_t* out) {
  driver::dot_rows<Vnni>(w, rows, k_size, v, bias, out);
}

}  // namespace q8
}  // namespace rnncore

// The int8 matrix-vector kernel on AVX-512 VNNI (compiled with -mavx512vnni and AVX-512 BW/VL;
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

#include <cstddef>
#include <cstdint>

#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

// The bytes of the columns [k, k + n) of a row, n <= 64, the rest zero.
inline __m512i load_cols(const std::int8_t* p, __mmask64 keep) { return _mm512_maskz_loadu_epi8(keep, p); }

// Σ w·u − Σ 128·w of one row, folded to four int32 lanes (vector adds: they wrap).
inline __m128i fold(__m512i wu, __m512i w128) {
  const __m512i d = _mm512_sub_epi32(wu, w128);
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The lane sums of four rows, as one vector [Σ0, Σ1, Σ2, Σ3].
inline __m128i sum4(__m128i s0, __m128i s1, __m128i s2, __m128i s3) {
  return _mm_hadd_epi32(_mm_hadd_epi32(s0, s1), _mm_hadd_epi32(s2, s3));
}

}  // namespace

void i8_dot_rows_avx512vnni_4x64(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                                 const std::int32_t* bias, std::int32_t* out) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  const int k64 = k_size & ~63;
  const int rest = k_size - k64;
  const __mmask64 tail = rest == 0 ? 0 : (~__mmask64{0} >> (64 - rest));
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));  // u = v ^ 0x80; also the 128s
  const __m512i zero = _mm512_setzero_si512();
  int j = 0;
  for (; j + 4 <= rows; j += 4) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    const std::int8_t* r1 = r0 + K;
    const std::int8_t* r2 = r1 + K;
    const std::int8_t* r3 = r2 + K;
    __m512i a0 = zero, a1 = zero, a2 = zero, a3 = zero;  // Σ w·u
    __m512i c0 = zero, c1 = zero, c2 = zero, c3 = zero;  // Σ 128·w
    for (int k = 0; k < k64; k += 64) {
      const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(v + k), sign);
      const __m512i w0 = _mm512_loadu_si512(r0 + k), w1 = _mm512_loadu_si512(r1 + k);
      const __m512i w2 = _mm512_loadu_si512(r2 + k), w3 = _mm512_loadu_si512(r3 + k);
      a0 = _mm512_dpbusd_epi32(a0, u, w0), c0 = _mm512_dpbusd_epi32(c0, sign, w0);
      a1 = _mm512_dpbusd_epi32(a1, u, w1), c1 = _mm512_dpbusd_epi32(c1, sign, w1);
      a2 = _mm512_dpbusd_epi32(a2, u, w2), c2 = _mm512_dpbusd_epi32(c2, sign, w2);
      a3 = _mm512_dpbusd_epi32(a3, u, w3), c3 = _mm512_dpbusd_epi32(c3, sign, w3);
    }
    if (rest != 0) {
      const __m512i u = _mm512_xor_si512(load_cols(v + k64, tail), sign);
      const __m512i w0 = load_cols(r0 + k64, tail), w1 = load_cols(r1 + k64, tail);
      const __m512i w2 = load_cols(r2 + k64, tail), w3 = load_cols(r3 + k64, tail);
      a0 = _mm512_dpbusd_epi32(a0, u, w0), c0 = _mm512_dpbusd_epi32(c0, sign, w0);
      a1 = _mm512_dpbusd_epi32(a1, u, w1), c1 = _mm512_dpbusd_epi32(c1, sign, w1);
      a2 = _mm512_dpbusd_epi32(a2, u, w2), c2 = _mm512_dpbusd_epi32(c2, sign, w2);
      a3 = _mm512_dpbusd_epi32(a3, u, w3), c3 = _mm512_dpbusd_epi32(c3, sign, w3);
    }
    const __m128i s = sum4(fold(a0, c0), fold(a1, c1), fold(a2, c2), fold(a3, c3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm_add_epi32(s, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias + j))));
  }
  for (; j < rows; ++j) {
    const std::int8_t* r0 = w + static_cast<std::size_t>(j) * K;
    __m512i a0 = zero, c0 = zero;
    for (int k = 0; k < k64; k += 64) {
      const __m512i w0 = _mm512_loadu_si512(r0 + k);
      a0 = _mm512_dpbusd_epi32(a0, _mm512_xor_si512(_mm512_loadu_si512(v + k), sign), w0);
      c0 = _mm512_dpbusd_epi32(c0, sign, w0);
    }
    if (rest != 0) {
      const __m512i w0 = load_cols(r0 + k64, tail);
      a0 = _mm512_dpbusd_epi32(a0, _mm512_xor_si512(load_cols(v + k64, tail), sign), w0);
      c0 = _mm512_dpbusd_epi32(c0, sign, w0);
    }
    const __m128i s = fold(a0, c0);
    const __m128i s2 = _mm_hadd_epi32(s, s);
    // The bias joins in unsigned arithmetic: the sum may wrap.
    out[j] = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) +
                                       static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_hadd_epi32(s2, s2))));
  }
}

}  // namespace q8
}  // namespace rnncore

// The integer LSTM's step kernels on AVX2 (src/internal/int8_kernels.hpp): a gate's activations
// and the cell update, 8 units in the 8 int32 lanes of a register, the arithmetic of the
// reference (src/int8_reference.cpp) lane by lane, so bit-identical to it. Intrinsics, as the
// matrix-vector kernels: the 32 × 32 → 64-bit products of the rescaling and the table gathers have
// no xsimd form.
//
// The rescaling x · m ≈ x · M · 2^(shift − 31) (TFLite's MultiplyByQuantizedMultiplier): x shifted
// left by max(shift, 0), wrapping; the high multiply floor((a · M + 2^30) / 2^31), which is
// gemmlowp's rounding doubling high multiply for M in [2^30, 2^31) (no saturating case: M is
// positive), from vpmuldq's exact 64-bit products of the even and the odd lanes; then a right
// shift by max(−shift, 0) rounding half away from zero (the remainder against half the divisor,
// plus one for negative values, as rounding_divide_by_pot).
#include <immintrin.h>

#include <cstdint>

#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

// A multiplier per lane: M, the left and the right shift.
struct Scaling8 {
  __m256i m, left, right;
};

inline Scaling8 broadcast(QuantizedMultiplier q) {
  return {_mm256_set1_epi32(q.multiplier), _mm256_set1_epi32(q.shift > 0 ? q.shift : 0),
          _mm256_set1_epi32(q.shift > 0 ? 0 : -q.shift)};
}

// Eight (multiplier, shift) pairs from rows[0 .. 15].
inline Scaling8 load_pairs(const std::int32_t* rows) {
  const __m256i evens_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i a = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows)), evens_first);
  const __m256i b = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + 8)), evens_first);
  const __m256i shift = _mm256_permute2x128_si256(a, b, 0x31);
  const __m256i zero = _mm256_setzero_si256();
  return {_mm256_permute2x128_si256(a, b, 0x20), _mm256_max_epi32(shift, zero), _mm256_max_epi32(_mm256_sub_epi32(zero, shift), zero)};
}

// floor((a · m + 2^30) / 2^31) per lane; the result fits int32 for m in [2^30, 2^31).
inline __m256i high_multiply(__m256i a, __m256i m) {
  const __m256i nudge = _mm256_set1_epi64x(std::int64_t{1} << 30);
  const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(a, m), nudge);
  const __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(m, 32)), nudge);
  // bits 31..62 of each sum: into the low word of an even lane, the high word of an odd one
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 31), _mm256_slli_epi64(odd, 1), 0xAA);
}

// x / 2^e rounded half away from zero, e in 0..31 per lane (rounding_divide_by_pot).
inline __m256i rounding_shift(__m256i x, __m256i e) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, e), one);
  const __m256i remainder = _mm256_and_si256(x, mask);
  const __m256i threshold = _mm256_sub_epi32(_mm256_srli_epi32(mask, 1), _mm256_srai_epi32(x, 31));
  return _mm256_sub_epi32(_mm256_srav_epi32(x, e), _mm256_cmpgt_epi32(remainder, threshold));
}

inline __m256i rescale(__m256i x, const Scaling8& s) {
  return rounding_shift(high_multiply(_mm256_sllv_epi32(x, s.left), s.m), s.right);
}

// The low 16 bits of each lane, sign-extended.
inline __m256i wrap16(__m256i v) { return _mm256_srai_epi32(_mm256_slli_epi32(v, 16), 16); }

inline __m256i clamp(__m256i v, __m256i low, __m256i high) { return _mm256_min_epi32(_mm256_max_epi32(v, low), high); }

// centre[z] per lane, z an int16 value: 32-bit gathers at centre + 2z, the low half kept.
inline __m256i lookup(const std::int16_t* centre, __m256i z) {
  return wrap16(_mm256_i32gather_epi32(reinterpret_cast<const int*>(centre), z, 2));
}

inline __m256i load8_i16(const std::int16_t* p) {
  return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i load8_i32(const std::int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Eight int32 lanes holding int16 values, stored as int16.
inline void store8_i16(std::int16_t* p, __m256i v) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(v, v), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

// Eight int32 lanes, saturated to int8 and stored.
inline void store8_i8_saturated(std::int8_t* p, __m256i v) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(words, words));
}

}  // namespace

int i32_gate_act_8__avx2(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act) {
  const int whole = n & ~7;
  const __m256i low = _mm256_set1_epi32(-32768), high = _mm256_set1_epi32(32767);
  const Scaling8 x_tensor = broadcast(s.x), h_tensor = broadcast(s.h);
  for (int u = 0; u < whole; u += 8) {
    const Scaling8 xs = s.x_rows != nullptr ? load_pairs(s.x_rows + 2 * u) : x_tensor;
    const Scaling8 hs = s.h_rows != nullptr ? load_pairs(s.h_rows + 2 * u) : h_tensor;
    // each part rescaled to Q3.12 and saturated, then their sum saturated (as the scalar gate_units)
    const __m256i zx = clamp(rescale(load8_i32(ax + u), xs), low, high);
    const __m256i z = clamp(_mm256_add_epi32(rescale(load8_i32(ah + u), hs), zx), low, high);
    store8_i16(act + u, lookup(centre, z));
  }
  return whole;
}

int i16_cell_update_8__avx2(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  const int whole = n & ~7;
  const __m256i clip_high = _mm256_set1_epi32(cu.cell_clip > 0 ? cu.cell_clip : 32767);
  const __m256i clip_low = _mm256_set1_epi32(cu.cell_clip > 0 ? -cu.cell_clip : -32768);
  const __m256i i16_low = _mm256_set1_epi32(-32768), i16_high = _mm256_set1_epi32(32767);
  const __m256i fc_shift = _mm256_set1_epi32(15), ig_shift = _mm256_set1_epi32(30 + cu.cell_log2);
  const Scaling8 out = broadcast(cu.hidden_mult);
  const __m256i zp = _mm256_set1_epi32(cu.hidden_zp);
  for (int u = 0; u < whole; u += 8) {
    const __m256i gi = load8_i16(gates.i + u), gf = load8_i16(gates.f + u), gg = load8_i16(gates.g + u);
    // f · c and i · g rounded to the cell's scale and each wrapped to int16 (i · g can exceed it
    // below 2^-15), their sum saturated, then clipped
    const __m256i fc = wrap16(rounding_shift(_mm256_mullo_epi32(gf, load8_i16(c + u)), fc_shift));
    const __m256i ig = wrap16(rounding_shift(_mm256_mullo_epi32(gi, gg), ig_shift));
    const __m256i cell = clamp(clamp(_mm256_add_epi32(fc, ig), i16_low, i16_high), clip_low, clip_high);
    store8_i16(c + u, cell);
    // o · tanh(c) to the output state (o · i below 2^-15, as LiteRT)
    const __m256i t = cu.tanh_centre != nullptr ? lookup(cu.tanh_centre, cell) : gi;
    const __m256i hq = _mm256_add_epi32(rescale(_mm256_mullo_epi32(load8_i16(gates.o + u), t), out), zp);
    store8_i8_saturated(h_next + u, hq);
  }
  return whole;
}

}  // namespace q8
}  // namespace rnncore

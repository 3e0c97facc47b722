// The integer LSTM's matrix-vector kernel for ARM's 32-bit DSP extension (ARMv7E-M: Cortex-M4,
// M7, M33 with DSP; also ARMv6 / ARMv7-A in A32 and T32): dual 16-bit multiply-accumulates,
// SMLAD, on int8 values widened two at a time by SXTB16. See src/internal/int8_kernels.hpp.
// Built where the compiler defines __ARM_FEATURE_SIMD32 as well as __ARM_FEATURE_DSP: ARMv5TE
// has the DSP multiplies but not SXTB16 / SMLAD (<arm_acle.h> declares them under SIMD32).
//
// One 32-bit word holds four int8 values b0 b1 b2 b3 (little-endian). SXTB16(x) sign-extends
// bytes 0 and 2 into the two int16 halves, SXTB16(ROR(x, 8)) bytes 1 and 3, so
//   SMLAD(SXTB16(w), SXTB16(v), SMLAD(SXTB16(ROR(w,8)), SXTB16(ROR(v,8)), acc))
//     = acc + w0·v0 + w2·v2 + w1·v1 + w3·v3,
// four multiply-accumulates in 2 SMLADs and (for the weights) 3 more instructions: a load and two
// SXTB16 (the rotate is part of SXTB16's encoding). The vector's word is widened once and used for
// 4 rows, and the loop takes 16 columns per iteration: (4·3 + 16·5 + 2) / 64 = 1.47 instructions
// per multiply-accumulate (rows4_cols16).
//
// Exactness (equal to i8_dot_rows_scalar's wrapping int32 sums): SMLAD computes
// Ra + Rn.lo·Rm.lo + Rn.hi·Rm.hi exactly (as a wider integer) and writes its low 32 bits to Rd;
// on signed overflow it only sets the sticky Q flag, which nothing here reads (ARM ARM, SMLAD).
// So each SMLAD is acc + p1 + p2 modulo 2^32. The scalar kernel adds the same products (each an
// exact int8·int8 value, |p| <= 2^14, and SXTB16 widens exactly) to the same bias modulo 2^32.
// Addition modulo 2^32 is associative and commutative (it is the ring Z/2^32), so any grouping
// and order of the same terms gives the same residue, which both kernels then read as the same
// two's-complement int32. Hence out[j] is bit-identical, including sums that wrap (a bias near
// the int32 limits).
#include "src/internal/int8_kernels.hpp"

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)

#include <arm_acle.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rnncore {
namespace q8 {
namespace {

// Four int8 at any alignment: ARMv6 and later load unaligned words with LDR (ARMv7-M faults only
// with CCR.UNALIGN_TRP set, which no toolchain default sets; GCC itself emits such LDRs for
// memcpy under its default -munaligned-access). The assembly below relies on the same.
inline std::uint32_t load4(const std::int8_t* p) {
  std::uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// The int16 pairs (b0, b2) and (b1, b3) of a word of four int8.
inline int16x2_t even_pairs(std::uint32_t x) { return __sxtb16(static_cast<int8x4_t>(x)); }
// SXTB16 with its own ROR #8, one instruction: ACLE has no rotate operand for __sxtb16, and GCC 12
// keeps __sxtb16(__ror(x, 8)) as two (a MOV with ROR, then SXTB16).
inline int16x2_t odd_pairs(std::uint32_t x) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}

// acc + the dot product of four int8 weights with the widened vector word (ve, vo).
inline std::int32_t mac4(std::int32_t acc, std::uint32_t w, int16x2_t ve, int16x2_t vo) {
  return __smlad(odd_pairs(w), vo, __smlad(even_pairs(w), ve, acc));
}

// The last k % 4 columns, one product at a time; wrapping as the scalar kernel does.
inline std::int32_t tail(std::int32_t acc, const std::int8_t* w, const std::int8_t* v, int n) {
  std::uint32_t a = static_cast<std::uint32_t>(acc);
  for (int k = 0; k < n; ++k) a += static_cast<std::uint32_t>(static_cast<std::int32_t>(w[k]) * v[k]);
  return static_cast<std::int32_t>(a);
}

// The hot loop in assembly, so that the instruction count is what the design says on every
// compiler and optimization level (GCC 12 spills the sums of the same loop in C at -Os and -O2:
// 4 sums, 4 row pointers, the vector pointer, a count and 4 temporaries exceed the 13 free
// registers). Rows 1 and 3 are read at a register offset K from rows 0 and 2, which saves two
// pointers: 13 registers in all. One word of 4 columns: the vector's word (load, two SXTB16), then
// per row a weight word (load, two SXTB16) and two SMLADs: 3 + 4 · 5 = 23 instructions for 16
// multiply-accumulates. rows4_cols16 runs 4 words per iteration plus SUBS and BNE: 94 instructions
// for 64 MACs, 1.47 per MAC.
#if defined(__OPTIMIZE__)
#define RNNCORE_DSP_ROW(ACC, LOAD)          \
  LOAD "\n\t"                              \
  "sxtb16 %[u], %[t]\n\t"                   \
  "sxtb16 %[t], %[t], ror #8\n\t"           \
  "smlad " ACC ", %[u], %[ve], " ACC "\n\t" \
  "smlad " ACC ", %[t], %[vo], " ACC "\n\t"
#define RNNCORE_DSP_WORD                                \
  "ldr %[vo], [%[vp]], #4\n\t"                         \
  "sxtb16 %[ve], %[vo]\n\t"                            \
  "sxtb16 %[vo], %[vo], ror #8\n\t"                    \
  RNNCORE_DSP_ROW("%[a1]", "ldr %[t], [%[w0], %[K]]")   \
  RNNCORE_DSP_ROW("%[a0]", "ldr %[t], [%[w0]], #4")     \
  RNNCORE_DSP_ROW("%[a3]", "ldr %[t], [%[w2], %[K]]")   \
  RNNCORE_DSP_ROW("%[a2]", "ldr %[t], [%[w2]], #4")
// Every operand read-write ("+r"): with 13 operands GCC finds no allocation at -O2 when the
// temporaries are write-only early clobbers.
#define RNNCORE_DSP_OPERANDS                                                                    \
  [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w0] "+r"(w0), [w2] "+r"(w2),      \
      [vp] "+r"(vp), [n] "+r"(n), [ve] "+r"(ve), [vo] "+r"(vo), [t] "+r"(t), [u] "+r"(u), [K] "+r"(k)

// n >= 1 iterations of 16 columns (4 words) for rows 0..3; advances w0, w2 and vp.
inline void rows4_cols16(const std::int8_t*& w0, const std::int8_t*& w2, std::int32_t K,
                         const std::int8_t*& vp, int n, std::int32_t& a0, std::int32_t& a1,
                         std::int32_t& a2, std::int32_t& a3) {
  std::uint32_t ve = 0, vo = 0, t = 0, u = 0;
  std::int32_t k = K;
  __asm__("1:\n\t" RNNCORE_DSP_WORD RNNCORE_DSP_WORD RNNCORE_DSP_WORD RNNCORE_DSP_WORD
          "subs %[n], %[n], #1\n\t"
          "bne 1b\n\t"
          : RNNCORE_DSP_OPERANDS
          :
          : "cc", "memory");
}

// 4 columns (one word) for rows 0..3; advances w0, w2 and vp.
inline void rows4_cols4(const std::int8_t*& w0, const std::int8_t*& w2, std::int32_t K,
                        const std::int8_t*& vp, std::int32_t& a0, std::int32_t& a1, std::int32_t& a2,
                        std::int32_t& a3) {
  std::uint32_t ve = 0, vo = 0, t = 0, u = 0;
  std::int32_t k = K;
  int n = 0;
  __asm__(RNNCORE_DSP_WORD : RNNCORE_DSP_OPERANDS : : "memory");
}
#undef RNNCORE_DSP_OPERANDS
#undef RNNCORE_DSP_WORD
#undef RNNCORE_DSP_ROW
#else
// Unoptimized builds keep a frame pointer (r7), which leaves 12 registers: the same in C.
inline void rows4_cols4(const std::int8_t*& w0, const std::int8_t*& w2, std::int32_t K,
                        const std::int8_t*& vp, std::int32_t& a0, std::int32_t& a1, std::int32_t& a2,
                        std::int32_t& a3) {
  const std::uint32_t x = load4(vp);
  const int16x2_t ve = even_pairs(x), vo = odd_pairs(x);
  a0 = mac4(a0, load4(w0), ve, vo);
  a1 = mac4(a1, load4(w0 + K), ve, vo);
  a2 = mac4(a2, load4(w2), ve, vo);
  a3 = mac4(a3, load4(w2 + K), ve, vo);
  vp += 4, w0 += 4, w2 += 4;
}
inline void rows4_cols16(const std::int8_t*& w0, const std::int8_t*& w2, std::int32_t K,
                         const std::int8_t*& vp, int n, std::int32_t& a0, std::int32_t& a1,
                         std::int32_t& a2, std::int32_t& a3) {
  for (int i = 0; i < 4 * n; ++i) rows4_cols4(w0, w2, K, vp, a0, a1, a2, a3);
}
#endif

}  // namespace

void i8_dot_rows_dsp_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                         const std::int32_t* bias, std::int32_t* out) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  // Unsigned: k_size > 0, and the signed divisions would cost sign fix-ups on every call.
  const unsigned uk = static_cast<unsigned>(k_size);
  const int k16 = static_cast<int>(uk >> 4), words_left = static_cast<int>((uk >> 2) & 3u),
            rem = static_cast<int>(uk & 3u);
  const std::int8_t* const v_tail = v + (k_size & ~3);
  const std::int32_t K32 = static_cast<std::int32_t>(k_size);
  int j = 0;
  // 4 rows per pass: each word of v is widened once for four rows.
  for (; j + 4 <= rows; j += 4) {
    const std::int8_t* w0 = w + static_cast<std::size_t>(j) * K;
    const std::int8_t* w2 = w0 + 2 * K;
    const std::int8_t* vp = v;
    std::int32_t a0 = bias[j], a1 = bias[j + 1], a2 = bias[j + 2], a3 = bias[j + 3];
    if (k16 > 0) rows4_cols16(w0, w2, K32, vp, k16, a0, a1, a2, a3);
    for (int i = 0; i < words_left; ++i) rows4_cols4(w0, w2, K32, vp, a0, a1, a2, a3);
    if (rem != 0) {  // tested once: an LSTM's K is most often a multiple of 4
      const std::int8_t* const w1 = w0 + K;
      const std::int8_t* const w3 = w2 + K;
      a0 = tail(a0, w0, v_tail, rem);
      a1 = tail(a1, w1, v_tail, rem);
      a2 = tail(a2, w2, v_tail, rem);
      a3 = tail(a3, w3, v_tail, rem);
    }
    out[j] = a0;
    out[j + 1] = a1;
    out[j + 2] = a2;
    out[j + 3] = a3;
  }
  // The last rows % 4 rows, one at a time.
  for (; j < rows; ++j) {
    const std::int8_t* w0 = w + static_cast<std::size_t>(j) * K;
    std::int32_t a0 = bias[j];
    for (int k = 0; k + 4 <= k_size; k += 4) {
      const std::uint32_t x = load4(v + k);
      a0 = mac4(a0, load4(w0), even_pairs(x), odd_pairs(x));
      w0 += 4;
    }
    out[j] = tail(a0, w0, v_tail, rem);
  }
}

}  // namespace q8
}  // namespace rnncore

#endif  // __ARM_FEATURE_DSP && __ARM_FEATURE_SIMD32

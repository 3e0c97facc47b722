// The integer LSTM's fixed-point library (gemmlowp's FixedPoint<int16_t, N> and TFLite's
// rescaling, as LiteRT's 8x8_16 LSTM kernel runs them): the rounding of every fixed-point product
// and shift, where results saturate and where 16-bit sums wrap, each helper saying which. Header
// only, in an unnamed namespace, so that the step (src/int8_lstm_step.cpp) inlines all of it as
// before; the compile-time tables the firmware profile builds from these functions live here too.
// Only the step's units (the step, its loops' headers int8_step_loops.hpp and int8_thumb2.hpp, the
// reference src/int8_reference.cpp, src/int8_thumb2.cpp) and the host tables' include it.
#ifndef RNNCORE_SRC_INTERNAL_INT8_FIXED_POINT_HPP
#define RNNCORE_SRC_INTERNAL_INT8_FIXED_POINT_HPP

#include <cstdint>
#include <limits>

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SAT)
#include <arm_acle.h>
#define RNNCORE_Q8_ACLE 1  // SMLABB and SSAT (Cortex-M4/M7/M33, 32-bit ARMv7-A): the same values
#endif

#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace q8 {
namespace {

constexpr std::int32_t kI16Min = -32768;
constexpr std::int32_t kI16Max = 32767;

// 16-bit fixed-point arithmetic (gemmlowp's FixedPoint<int16_t, N> semantics), written for few
// instructions: a literal transcription (tests/int8_fixed_point_reference.hpp, the first version
// of this file) costs about 2,500 Cortex-M4 instructions per unit and step. Every function here
// equals it on every input it can receive (tests/test_int8_lstm.cpp: all int16 inputs of the
// sigmoid and of tanh with each integer_bits; random and extreme inputs of the rescaling). Where a
// 16-bit sum of the reference wraps only for inputs the activations never produce, it is a plain
// sum here; the exhaustive tests are what shows those cases do not occur.

#if defined(__GNUC__)
#define RNNCORE_Q8_INLINE inline __attribute__((always_inline))
#define RNNCORE_Q8_NOINLINE __attribute__((noinline))
#else
#define RNNCORE_Q8_INLINE inline
#define RNNCORE_Q8_NOINLINE
#endif

inline std::int16_t wrap16(std::int32_t v) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(static_cast<std::uint32_t>(v) & 0xFFFFu));
}

// Tells the optimizer that cond holds (where it cannot see it), so that it drops a test.
#if defined(__GNUC__)
#define RNNCORE_Q8_ASSUME(cond) \
  do {                          \
    if (!(cond)) __builtin_unreachable(); \
  } while (0)
#else
#define RNNCORE_Q8_ASSUME(cond) ((void)0)
#endif

RNNCORE_Q8_INLINE std::int32_t sat16(std::int32_t v) {
#if defined(RNNCORE_Q8_ACLE)
  return __ssat(v, 16);
#else
  return v < kI16Min ? kI16Min : (v > kI16Max ? kI16Max : v);
#endif
}

// gemmlowp's rounding doubling high multiply on int16: (a·b + nudge) / 2^15 truncated, nudge
// 2^14 for a·b >= 0 and 1 − 2^14 below. For a·b < 0 the sum is negative, so truncation is the
// ceiling, and ceil((ab + 1 − 2^14) / 2^15) = floor((ab + 2^14) / 2^15): one add and one
// arithmetic shift for both signs. Only (−2^15)² exceeds int16 (to 2^15), which saturates; the
// result is never below −2^15, so a signed saturation to 16 bits is the same clamp. a and b are
// int16 values (SMLABB multiplies the low halves).
RNNCORE_Q8_INLINE std::int32_t rdhm16(std::int32_t a, std::int32_t b) {
#if defined(RNNCORE_Q8_ACLE)
  return __ssat(static_cast<std::int32_t>(__smlabb(a, b, 1 << 14)) >> 15, 16);
#else
  const std::int32_t r = (a * b + (1 << 14)) >> 15;
  return r > kI16Max ? kI16Max : r;
#endif
}

// x / 2^E rounded half away from zero, for |x| < 2^30: floor((x + 2^(E−1) − [x < 0]) / 2^E).
template <int E>
constexpr RNNCORE_Q8_INLINE std::int32_t round_shift(std::int32_t x) {
  static_assert(E >= 1 && E <= 29, "round_shift: E in 1..29");
  return (x + (std::int32_t{1} << (E - 1)) - (x < 0 ? 1 : 0)) >> E;
}

// The same for any int32 and a run-time e in 0..31 (arithmetic shift plus a remainder test,
// which cannot overflow).
RNNCORE_Q8_INLINE std::int32_t rounding_divide_by_pot(std::int32_t x, int e) {
  const std::uint32_t mask = (std::uint32_t{1} << e) - 1u;
  const std::uint32_t remainder = static_cast<std::uint32_t>(x) & mask;
  const std::uint32_t threshold = (mask >> 1) + (x < 0 ? 1u : 0u);
  return (x >> e) + (remainder > threshold ? 1 : 0);
}

// The 16-bit constant gemmlowp derives from a Q(n).(31−n) 32-bit constant: the constant divided by
// 2^16, rounded to nearest (ties away from zero).
constexpr std::int16_t c16(std::int32_t q31) {
  return static_cast<std::int16_t>((q31 >> 16) + (((q31 & 0xFFFF) > (0x7FFF + (q31 < 0 ? 1 : 0))) ? 1 : 0));
}

constexpr std::int16_t kOneQ0 = 32767;           // "1" in Q0.15 (the largest value)
constexpr std::int16_t kOneQ2 = 1 << 13;         // 1 in Q2.13
constexpr std::int16_t kHalfQ0 = c16(1 << 30);   // 0.5
constexpr std::int16_t kExpMinusEighth = c16(1895147668);  // exp(−1/8), Q0.31
constexpr std::int16_t kOneThird = c16(715827883);         // 1/3, Q0.31
constexpr std::int16_t k48Over17 = c16(1515870810);        // 48/17, Q2.29
constexpr std::int16_t kMinus32Over17 = c16(-1010580540);  // −32/17, Q2.29
// exp(−2^k) in Q0.15 for k = −2 .. 4
constexpr std::int16_t kExpFactor[7] = {c16(1672461947), c16(1302514674), c16(790015084), c16(290630308),
                                        c16(39332535),   c16(720401),     c16(242)};

// rdhm16 and sat16 evaluable at compile time (for the tables below), and the choice between them:
// kConst the portable arithmetic, for constant evaluation; else the target's.
constexpr std::int32_t rdhm16_portable(std::int32_t a, std::int32_t b) {
  const std::int32_t r = (a * b + (1 << 14)) >> 15;
  return r > kI16Max ? kI16Max : r;
}
constexpr std::int32_t sat16_portable(std::int32_t v) { return v < kI16Min ? kI16Min : (v > kI16Max ? kI16Max : v); }
template <bool kConst>
constexpr RNNCORE_Q8_INLINE std::int32_t mul16(std::int32_t a, std::int32_t b) {
  if constexpr (kConst) {
    return rdhm16_portable(a, b);
  } else {
    return rdhm16(a, b);
  }
}
template <bool kConst>
constexpr RNNCORE_Q8_INLINE std::int32_t saturate16(std::int32_t v) {
  if constexpr (kConst) {
    return sat16_portable(v);
  } else {
    return sat16(v);
  }
}

// exp(a) for a in [−1/4, 0), Q0.15 in and out: fourth-order Taylor expansion around −1/8.
// kConst: the portable arithmetic, for constant evaluation.
template <bool kConst>
constexpr std::int32_t exp_on_interval_quarter(std::int32_t a) {
  const auto mul = [](std::int32_t u, std::int32_t v) { return mul16<kConst>(u, v); };
  const std::int32_t x = a + (1 << 12);  // a + 1/8, in [−1/8, 1/8)
  const std::int32_t x2 = mul(x, x);
  const std::int32_t x3 = mul(x2, x);
  const std::int32_t x4 = mul(x2, x2);
  // x2 and x4 are squares' products, never negative: round_shift<2>(x4) is (x4 + 2) >> 2
  const std::int32_t poly = round_shift<1>(mul(((x4 + 2) >> 2) + x3, kOneThird) + x2);
  return saturate16<kConst>(kExpMinusEighth + mul(kExpMinusEighth, x + poly));
}

#if defined(RNNCORE_Q8_ACLE)
// Two factors of the barrel below at a time, for bits kBit and kBit + 1 of the remainder ~a, given
// a: one LSLS puts a's bit kBit in N and bit kBit + 1 in C (the last bit shifted out), and neither
// SMLABB nor SSAT changes the flags, so that a test of a bit is one branch, not a shift and a
// branch. A factor applies where a's bit is clear; the products are mul16's (rdhm16).
template <int kBit>
RNNCORE_Q8_INLINE std::int32_t exp_factor_pair(std::int32_t result, std::int32_t a, std::int16_t f0, std::int16_t f1) {
  std::int32_t scratch;
  __asm__(
      "lsls %[t], %[a], %[shift]\n\t"
      "bmi 1f\n\t"
      "movw %[t], %[f0]\n\t"
      "smlabb %[r], %[r], %[t], %[nudge]\n\t"
      "ssat %[r], #16, %[r], asr #15\n"
      "1:\n\t"
      "bcs 2f\n\t"
      "movw %[t], %[f1]\n\t"
      "smlabb %[r], %[r], %[t], %[nudge]\n\t"
      "ssat %[r], #16, %[r], asr #15\n"
      "2:"
      : [r] "+r"(result), [t] "=&r"(scratch)
      : [a] "r"(a), [shift] "I"(31 - kBit), [f0] "n"(f0), [f1] "n"(f1), [nudge] "r"(1 << 14)
      : "cc");
  return result;
}
#endif

// The factors exp(−2^k), k = K .. min(4, IB − 1), for the set bits of the remainder, unrolled at
// compile time (bit positions and constants become immediates). Every partial product is in
// [0, 2^15) and every factor positive: mul16's saturation never acts here.
template <int IB, int K, bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t apply_exp_factors(std::int32_t result, std::int32_t remainder) {
  if constexpr (K > 4 || K >= IB) {
    (void)remainder;
    return result;
#if defined(RNNCORE_Q8_ACLE)
  } else if constexpr (!kConst && K + 1 <= 4 && K + 1 < IB) {
    result = exp_factor_pair<15 - IB + K>(result, ~remainder, kExpFactor[K + 2], kExpFactor[K + 3]);
    return apply_exp_factors<IB, K + 2, kConst>(result, remainder);
#endif
  } else {
    if ((remainder & (std::int32_t{1} << (15 - IB + K))) != 0) result = mul16<kConst>(result, kExpFactor[K + 2]);
    return apply_exp_factors<IB, K + 1, kConst>(result, remainder);
  }
}

// exp on [−2^kExpTableFolds / 4, 0) at the multiples of 2^-kExpStepBits, computed at compile time
// as the computation below does it: with 15 − kExpStepBits or more integer bits every argument the
// exponential passes it is one of those, so a load replaces ~28 instructions, and the first
// kExpTableFolds factors' tests and multiplies. 2^-12 over [−1/2, 0) (2,048 values, 4 KiB of flash:
// the residue in [−1/4, 0) and the factor exp(−1/4)) serves 3 or more integer bits: the sigmoid,
// the cell gate's tanh and tanh of a cell state of scale 2^-13 or coarser. Firmware builds with
// the activation tables take 2^-14 over [−1/4, 0) (4,096 values, 8 KiB), which also serves tanh of
// a cell state of scale 2^-15 and 2^-14 (exp with 1 and 2 integer bits): what Keras conversions
// without a cell clip get, and the one activation those builds compute.
#if defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_ACTIVATION_TABLES)
constexpr int kExpStepBits = 14;
constexpr int kExpTableFolds = 0;
#else
constexpr int kExpStepBits = 12;
constexpr int kExpTableFolds = 1;
#endif
struct ExpTable {
  static constexpr int kQuarter = 1 << (kExpStepBits - 2);  // entries per quarter
  std::int16_t v[kQuarter << kExpTableFolds] = {};
  constexpr ExpTable() {
    for (int i = 0; i < (kQuarter << kExpTableFolds); ++i) {
      // entry i: the argument (i − size) · 2^-kExpStepBits; its quarter residue, then the factors
      // exp(−2^k) for k = −2 .. kExpTableFolds − 3 whose bit the argument has (the remainder's)
      const std::int32_t residue = i & (kQuarter - 1);
      std::int32_t r = exp_on_interval_quarter<true>(residue * (1 << (15 - kExpStepBits)) - 8192);
      const std::int32_t remainder = ((kQuarter << kExpTableFolds) - 1 - i) >> (kExpStepBits - 2);  // quarters
      for (int k = 0; k < kExpTableFolds; ++k) {
        if ((remainder >> k) & 1) r = rdhm16_portable(r, kExpFactor[k]);
      }
      v[i] = static_cast<std::int16_t>(r);
    }
  }
};
constexpr ExpTable kExpTable{};

template <int IB, bool kConst>
constexpr std::int32_t exp_on_negative_values(std::int32_t a);
inline const std::int16_t* exp_odd_values();  // kExpOdd.v, defined below the exponential
inline const std::int16_t* exp_quarter_odd_values();  // kExpQuarterOdd.v, likewise
// Builds whose exp table steps by 2^-12 (the default firmware build, hosts) also hold exp at the
// odd multiples of 2^-13 in [−1/2, 0) (2,048 values, 4 KiB, computed at compile time by the
// arithmetic below, the factor exp(−1/4) included): with kExpTable that serves exp with 2
// integer bits, tanh of a cell state of scale 2^-14 (1 integer bit: what Keras conversions without
// a cell clip get when |c| stays below 2), which otherwise evaluates the polynomial.
// A third table at the odd multiples of 2^-14 in [−1/2, 0) (4,096 values, 8 KiB, computed alike)
// completes the 2^-14 grid for exp with 1 integer bit: tanh of a cell state of scale 2^-15 (0
// integer bits), read from the three tables by the argument's two lowest bits.
#if defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_ACTIVATION_TABLES)
constexpr bool kExpHalfStep = false;  // these builds step by 2^-14 instead
inline const std::int16_t* exp_odd_values() { return nullptr; }
inline const std::int16_t* exp_quarter_odd_values() { return nullptr; }
#else
constexpr bool kExpHalfStep = true;
struct ExpOddTable {
  std::int16_t v[2048] = {};
  constexpr ExpOddTable() {
    for (int j = 0; j < 2048; ++j) v[j] = static_cast<std::int16_t>(exp_on_negative_values<2, true>(2 * j + 1 - 4096));
  }
};
#endif

// exp(a) for a ≤ 0 given with IB integer bits (Q(IB).(15−IB)), result in Q0.15: exp of the
// residue in [−1/4, 0), then one factor exp(−2^k) per set bit of the rest (k = −2 .. 4).
template <int IB, bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t exp_on_negative_values(std::int32_t a) {
  static_assert(IB >= 1 && IB <= 7, "exp_on_negative_values: 1..7 integer bits");
  constexpr std::int32_t quarter = std::int32_t{1} << (13 - IB);
  // The residue (a & (quarter − 1)) − quarter lies in [−quarter, 0), residue · 2^IB in [−2^13, 0):
  // the reference's saturating shift never saturates here.
  // The rest, residue − a = quarter · (−floor(a / quarter) − 1), is ~a = −a − 1 without its bits
  // below the quarter (floor((−a − 1) / q) = −floor(a / q) − 1): the factors test the bits of ~a,
  // that is the clear bits of a (for a = 0 the result is replaced below).
  const std::int32_t rest = ~a;
  std::int32_t result = 0;
  if constexpr (IB == 1 && kExpHalfStep && !kConst) {
    // a in Q1.14: a mod 1/2 at 2^-14; multiples of 2^-12 from kExpTable, odd multiples of 2^-13
    // from kExpOdd, odd multiples of 2^-14 from kExpQuarterOdd (each with exp(−1/4) folded in)
    const std::int32_t low = a & 8191;
    result = (low & 1) != 0 ? exp_quarter_odd_values()[low >> 1] : ((low & 2) != 0 ? exp_odd_values() : kExpTable.v)[low >> 2];
    result = apply_exp_factors<IB, -1, kConst>(result, rest);
  } else if constexpr (IB == 2 && kExpHalfStep && !kConst) {
    // a in Q2.13: the even arguments are kExpTable's (2^-12 apart), the odd ones kExpOdd's, each
    // with the first factor exp(−1/4) folded in as there
    const std::int32_t low = a & 4095;  // a mod 1/2, at 2^-13
    result = ((low & 1) != 0 ? exp_odd_values() : kExpTable.v)[low >> 1];
    result = apply_exp_factors<IB, -1, kConst>(result, rest);
  } else if constexpr (IB >= 15 - kExpStepBits) {
    // the entry of the argument in [−span, 0) with a's bits below the span (a mod span), at the
    // table's step; it holds the first kExpTableFolds factors too
    constexpr std::int32_t span = quarter << kExpTableFolds;
    result = kExpTable.v[(a & (span - 1)) << (IB - 15 + kExpStepBits)];
    result = apply_exp_factors<IB, kExpTableFolds - 2, kConst>(result, rest);
  } else {
    // residue · 2^IB, as (a mod quarter) · 2^IB − 2^13 (one shift and one constant fewer)
    result = exp_on_interval_quarter<kConst>((a & (quarter - 1)) * (std::int32_t{1} << IB) - 8192);
    result = apply_exp_factors<IB, -2, kConst>(result, rest);
  }
  if constexpr (IB > 5) {
    constexpr std::int16_t clamp = c16(-(std::int32_t{1} << (36 - IB)));  // −32 in Q(IB)
    if (a < clamp) result = 0;
  }
  return a == 0 ? kOneQ0 : result;
}

#if !(defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_ACTIVATION_TABLES))
constexpr ExpOddTable kExpOdd{};
inline const std::int16_t* exp_odd_values() { return kExpOdd.v; }
struct ExpQuarterOddTable {
  std::int16_t v[4096] = {};
  constexpr ExpQuarterOddTable() {
    for (int j = 0; j < 4096; ++j) v[j] = static_cast<std::int16_t>(exp_on_negative_values<1, true>(2 * j + 1 - 8192));
  }
};
constexpr ExpQuarterOddTable kExpQuarterOdd{};
inline const std::int16_t* exp_quarter_odd_values() { return kExpQuarterOdd.v; }
#endif

// Newton–Raphson reciprocal of (1 + a)/2 for a in [0, 1], in Q2.13 (three iterations, as gemmlowp),
// from the rounded half denominator (1 + a)/2 in [1/2, 1]. kConst: the portable arithmetic, for
// constant evaluation.
template <bool kConst>
constexpr std::int32_t reciprocal_of_half_denominator(std::int32_t half_denominator) {
  const auto mul = [](std::int32_t u, std::int32_t v) { return mul16<kConst>(u, v); };
  std::int32_t x = k48Over17 + mul(half_denominator, kMinus32Over17);
  // each iteration's correction goes from Q0.15 to Q2.13 by a saturating ·4
  for (int i = 0; i < 3; ++i) x += saturate16<kConst>(mul(x, kOneQ2 - mul(half_denominator, x)) * 4);
  return x;
}

#if defined(RNNCORE_NO_HEAP) && !defined(RNNCORE_Q8_NO_RECIPROCAL_TABLE) && (!defined(__arm__) || defined(__ARM_FEATURE_IDIV))
// Firmware builds divide instead (UDIV: one instruction on ARMv7E-M and ARMv8-M Mainline): the
// reciprocal depends on a only through hd = (a + 1)/2, 2^14 .. 2^15 − 1 in Q0.15, and is within 4 of
// floor(2^28 / hd) for every one of those 16,384 values, so an int8 table of the differences (16 KiB
// of flash, computed at compile time from the iteration itself) gives the same values for a
// division, a load and an add instead of about 30 instructions. The table's index, hd − 2^14, is
// a >> 1 (a ≥ 0), and the dividend a constant: no rounding term. tests/cross/int8_kernels_baremetal.cpp
// compares the activations built on it with the reference on every int16 input. Define
// RNNCORE_Q8_NO_RECIPROCAL_TABLE (meson option int8_reciprocal_table=false) to keep the 16 KiB. With
// the activation tables (below) only tanh of a cell state with fewer than 3 integer bits divides:
// what Keras conversions without a cell clip get, so those builds keep the table too.
#define RNNCORE_Q8_RECIPROCAL_TABLE 1
constexpr std::uint32_t kReciprocalDividend = std::uint32_t{1} << 28;
struct ReciprocalDeltas {
  std::int8_t d[1 << 14] = {};
  bool fits = true;  // every difference in int8 (checked below at compile time)
  constexpr ReciprocalDeltas() {
    for (std::int32_t i = 0; i < (1 << 14); ++i) {
      const std::int32_t hd = (1 << 14) + i;
      const std::int32_t diff = reciprocal_of_half_denominator<true>(hd) -
                                static_cast<std::int32_t>(kReciprocalDividend / static_cast<std::uint32_t>(hd));
      fits = fits && diff >= -128 && diff <= 127;
      d[i] = static_cast<std::int8_t>(diff);
    }
  }
};
constexpr ReciprocalDeltas kReciprocalDeltas{};
static_assert(kReciprocalDeltas.fits, "reciprocal table: a difference outside int8");
#endif

// The reciprocal of (1 + a)/2 in Q2.13 for a in [0, 2^15) (Q0.15).
template <bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t reciprocal_of_one_plus(std::int32_t a) {
  if constexpr (kConst) return reciprocal_of_half_denominator<true>((a + kOneQ0 + 1) >> 1);
#if defined(RNNCORE_Q8_RECIPROCAL_TABLE)
  // (a + 2^15) >> 1 rounds (a + 1)/2 as gemmlowp does; for a ≥ 0 it is 2^14 + (a >> 1).
  const std::uint32_t i = static_cast<std::uint32_t>(a) >> 1;
  return static_cast<std::int32_t>(kReciprocalDividend / (i + (1u << 14))) + kReciprocalDeltas.d[i];
#else
  return reciprocal_of_half_denominator<false>((a + kOneQ0 + 1) >> 1);  // (a + 1)/2 rounded; a + 1 > 0
#endif
}

// 1 / (1 + e^(−|x|)) in Q0.15 for a Q3.12 value x ≠ 0, given −|x| (−2^15 for x = −2^15).
template <bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t sigmoid_of_abs(std::int32_t minus_abs) {
  return saturate16<kConst>(reciprocal_of_one_plus<kConst>(exp_on_negative_values<3, kConst>(minus_abs)) * 2);  // Q2.13 → Q0.15
}
// tanh|x| in Q0.15 for x ≠ 0 with IB integer bits, given −|x|: (1 − e^(−2|x|)) / (1 + e^(−2|x|));
// −2|x| is the same raw value with one more integer bit.
template <int IB, bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t tanh_of_abs(std::int32_t minus_abs) {
  const std::int32_t recip = reciprocal_of_one_plus<kConst>(exp_on_negative_values<IB + 1, kConst>(minus_abs));
  return saturate16<kConst>((recip - kOneQ2) * 4);  // (2/(1 + e) − 1), Q2.13 → Q0.15
}

#if defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_ACTIVATION_TABLES)
// Firmware builds that trade 128 KiB of flash for speed (meson option int8_activation_tables=true):
// the sigmoid and tanh(Q3.12) of every |x| in 1 .. 2^15, computed at compile time by the functions
// above, so that an activation is a load and a sign instead of about 45 instructions. tanh with
// IB > 3 integer bits reads the same table at x · 2^(IB − 3) saturated to int16 (the same real
// argument; equal on every int16 input and IB 4..6, which tests/cross/int8_kernels_baremetal.cpp
// checks on the emulated core). Host builds have run-time tables instead ("Activation tables").
// Two objects, not one: an entry of the second would sit 64 KiB into the first's, an offset that
// GCC adds with two more instructions per lookup.
template <bool kTanh>
struct AbsTable {
  std::int16_t v[32769] = {};
  constexpr AbsTable() {
    v[0] = kTanh ? 0 : kHalfQ0;  // the value at x = 0, so that a lookup needs no test for it
    for (std::int32_t m = 1; m <= 32768; ++m) {
      v[m] = static_cast<std::int16_t>(kTanh ? tanh_of_abs<3, true>(-m) : sigmoid_of_abs<true>(-m));
    }
  }
};
constexpr AbsTable<false> kAbsSigmoid{};
constexpr AbsTable<true> kAbsTanh3{};
#if defined(RNNCORE_Q8_SIGNED_TABLES)
// int8_activation_tables=signed: the same values over every int16 argument, mirrored from the
// tables above at compile time (256 KiB; those two are then not emitted), so that an activation is
// one load from the table's centre: 5 instructions fewer than a lookup of |x| and its sign.
template <bool kTanh>
struct SignedTable {
  std::int16_t v[65536] = {};
  explicit constexpr SignedTable(const AbsTable<kTanh>& of_abs) {
    for (std::int32_t x = -32768; x <= 32767; ++x) {
      const std::int32_t p = of_abs.v[x < 0 ? -x : x];
      v[x + 32768] = static_cast<std::int16_t>(x >= 0 ? p : (kTanh ? -p : kOneQ0 - p));
    }
  }
};
constexpr SignedTable<false> kSignedSigmoid{kAbsSigmoid};
constexpr SignedTable<true> kSignedTanh3{kAbsTanh3};
#define RNNCORE_Q8_CENTRED_TABLES 1
#if defined(RNNCORE_Q8_CELL_TANH_BITS)
// int8_cell_tanh_bits=N (with the signed tables): tanh of a cell state with N = 0, 1 or 2 integer
// bits (cell scale 2^-15, 2^-14, 2^-13: what Keras conversions without a cell clip get), which the
// Q3.12 table cannot serve, over every int16 argument: 128 KiB more, and the cell loop's tanh is
// one load there too.
constexpr int kCellTanhBits = RNNCORE_Q8_CELL_TANH_BITS;
static_assert(kCellTanhBits >= 0 && kCellTanhBits <= 2, "int8_cell_tanh_bits: 0, 1 or 2");
struct CellTanhTable {
  std::int16_t v[65536] = {};
  constexpr CellTanhTable() {
    for (std::int32_t x = -32768; x <= 32767; ++x) {
      const std::int32_t t = x == 0 ? 0 : tanh_of_abs<kCellTanhBits, true>(x < 0 ? x : -x);
      v[x + 32768] = static_cast<std::int16_t>(x < 0 ? -t : t);
    }
  }
};
constexpr CellTanhTable kCellTanh{};
#else
constexpr int kCellTanhBits = -1;  // none
#endif
#else
#define RNNCORE_Q8_ABS_TABLES 1
#endif
#endif

// Logistic of a Q3.12 value, Q0.15: 1 / (1 + e^(−|x|)), then 1 − that for x < 0. x is an int16
// value, passed as int32 so that a saturated sum needs no sign extension first; the result is an
// int16 value, returned as int32 so that a store of it needs no sign extension either.
RNNCORE_Q8_INLINE std::int32_t sigmoid_fixed(std::int32_t x) {
#if defined(RNNCORE_Q8_SIGNED_TABLES)
  return kSignedSigmoid.v[x + 32768];
#elif defined(RNNCORE_Q8_ABS_TABLES)
  // Branch-free with the sign mask m (0 or −1): |x| = (x ^ m) − m, and for x < 0 the mirror
  // 1 − σ = 32767 − p = (p ^ −1) + 2^15.
  const std::int32_t m = static_cast<std::int32_t>(x) >> 31;
  const std::int32_t positive = kAbsSigmoid.v[static_cast<std::uint32_t>((x ^ m) - m)];
  return static_cast<std::int16_t>((positive ^ m) - m * (kOneQ0 + 1));
#else
  // With the sign mask m (0 or −1): −|x| = m − (x ^ m), and for x < 0 the mirror 1 − σ = 32767 − p
  // = p ^ 32767 (0 ≤ p ≤ 32767), 32767 being m >> 17 unsigned: two instructions, no branch.
  if (x == 0) return kHalfQ0;
  const std::int32_t m = x >> 31;
  const std::int32_t minus_abs = m - (x ^ m);
  RNNCORE_Q8_ASSUME(minus_abs < 0);
  const std::int32_t positive = sigmoid_of_abs(minus_abs);
  return positive ^ static_cast<std::int32_t>(static_cast<std::uint32_t>(m) >> 17);
#endif
}

template <int IB>
RNNCORE_Q8_INLINE std::int32_t tanh_fixed(std::int32_t x) {  // x and the result: int16 values, as sigmoid_fixed
#if defined(RNNCORE_Q8_SIGNED_TABLES)
  if constexpr (IB >= 3) return kSignedTanh3.v[(IB > 3 ? sat16(x * (1 << (IB - 3))) : x) + 32768];
#if defined(RNNCORE_Q8_CELL_TANH_BITS)
  if constexpr (IB == kCellTanhBits) return kCellTanh.v[x + 32768];
#endif
#elif defined(RNNCORE_Q8_ABS_TABLES)
  if constexpr (IB >= 3) {
    const std::int32_t y = IB > 3 ? sat16(static_cast<std::int32_t>(x) * (1 << (IB - 3))) : x;
    const std::int32_t m = y >> 31;  // as in sigmoid_fixed; y has x's sign
    const std::int32_t t = kAbsTanh3.v[static_cast<std::uint32_t>((y ^ m) - m)];
    return static_cast<std::int16_t>((t ^ m) - m);
  }
#endif
  if (x == 0) return 0;
  const std::int32_t m = x >> 31;  // as in sigmoid_fixed
  const std::int32_t minus_abs = m - (x ^ m);
  RNNCORE_Q8_ASSUME(minus_abs < 0);
  const std::int32_t t = tanh_of_abs<IB>(minus_abs);
  return (t ^ m) - m;
}

inline std::int32_t sat_rdhm32(std::int32_t a, std::int32_t b) {
  // as rdhm16: floor((ab + 2^30) / 2^31) equals gemmlowp's nudged truncating division
  if (a == std::numeric_limits<std::int32_t>::min() && b == a) return std::numeric_limits<std::int32_t>::max();
  return static_cast<std::int32_t>((static_cast<std::int64_t>(a) * b + (std::int64_t{1} << 30)) >> 31);
}

RNNCORE_Q8_INLINE std::int32_t rescale(std::int32_t x, QuantizedMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  // TFLite multiplies in int32; with left > 0 that wraps on overflow, reproduced without UB.
  const std::int32_t shifted = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << left);
  return rounding_divide_by_pot(sat_rdhm32(shifted, m.multiplier), right);
}

// rescale for the step's loops, with both roundings in one sum. The step's multipliers M come
// from quantize_multiplier, in [2^30, 2^31) (multiply_by_quantized_multiplier sends others to
// rescale). With a = x · 2^left, the high multiply is h = floor((a·M + 2^30) / 2^31) (as in
// sat_rdhm32: −2^31 · −2^31 cannot occur), and for a right shift r >= 1 the rounding shift is
// floor((h + k) / 2^r) with k = 2^(r−1) − [h < 0]. [h < 0] may be replaced by [a < 0]: they
// differ only at a = −1, M = 2^30 (h = 0), where both give 0. Without a right shift (r = 0) the
// result is h itself.
//
// On ARM, SMMLAR computes (acc · 2^32 + p · q + 2^31) >> 32, the top word of an exact 64-bit sum.
// With q = 2M − 2^32 (the bit pattern of 2M, stored as int32 in `doubled`) and acc = a − [a < 0]:
//   s = a − [a < 0] + floor((2aM − a · 2^32 + 2^31) / 2^32) = floor((a·M + 2^30) / 2^31) − [a < 0]
//     = h − [a < 0],
// for every int32 a: s lies in int32 (h ≥ −M > −2^31, and h ≤ 2^31 − 2), so the top word of the
// wrapped operand's sum is s itself. The rounding shift is then floor((s + 2^(r−1)) / 2^r) =
// floor((floor(s / 2^(r−1)) + 1) / 2), which cannot overflow where s + 2^(r−1) could: an add,
// SMMLAR and three shifts and adds, five instructions (SMLAL onto a 64-bit nudge took six or seven).
// Elsewhere one 64-bit sum, floor((a·M + 2^30 + k · 2^31) / 2^(31+r)) with k = 2^(r−1) − [a < 0]
// (the inner floor can go: floor((floor(y) + k) / m) = floor((y + k) / m) for integers k, m).
struct StepMultiplier {
  std::int32_t multiplier;
  std::int32_t doubled;  // 2 · multiplier − 2^32 (its bit pattern), SMMLAR's operand
  int left, right;
  std::int32_t half;  // 2^(right − 1) for right >= 1
  explicit StepMultiplier(QuantizedMultiplier m)
      : multiplier(m.multiplier),
        doubled(static_cast<std::int32_t>(static_cast<std::uint32_t>(m.multiplier) << 1)),
        left(m.shift > 0 ? m.shift : 0),
        right(m.shift > 0 ? 0 : -m.shift),
        half(m.shift < 0 ? std::int32_t{1} << (-m.shift - 1) : 0) {}
  RNNCORE_Q8_INLINE std::int32_t operator()(std::int32_t x) const { return apply<false>(x); }
  // kRightShift: the caller knows right >= 1 (no test of the left-shift case).
  template <bool kRightShift>
  RNNCORE_Q8_INLINE std::int32_t apply(std::int32_t x) const {
    if (!kRightShift && right == 0) {
      const std::int32_t shifted = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << left);
      return static_cast<std::int32_t>(high_sum(shifted, std::int32_t{1} << 30, 0) >> 31);
    }
#if defined(RNNCORE_Q8_ACLE)
    const std::int32_t acc = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) + static_cast<std::uint32_t>(x >> 31));
    std::int32_t s;  // h − [x < 0]
    __asm__("smmlar %0, %1, %2, %3" : "=r"(s) : "r"(x), "r"(doubled), "r"(acc));
    return ((s >> (right - 1)) + 1) >> 1;
#else
    const std::int32_t k = half + (x >> 31);  // 2^(r−1) − [x < 0]
    const std::uint32_t lo = (static_cast<std::uint32_t>(k) << 31) | (std::uint32_t{1} << 30);
    return static_cast<std::int32_t>(high_sum(x, static_cast<std::int32_t>(lo), k >> 1) >> (31 + right));
#endif
  }
  // a · M + hi:lo in 64 bits (hi:lo a two's-complement 64-bit addend).
  RNNCORE_Q8_INLINE std::int64_t high_sum(std::int32_t a, std::int32_t lo, std::int32_t hi) const {
#if defined(RNNCORE_Q8_ACLE)
    std::uint32_t l = static_cast<std::uint32_t>(lo);
    std::int32_t h = hi;
    // One SMLAL: GCC 12 otherwise sometimes widens the hoisted multiplier and emits a full
    // 64 × 64 multiply (UMULL, MUL, MLA).
    __asm__("smlal %0, %1, %2, %3" : "+r"(l), "+r"(h) : "r"(a), "r"(multiplier));
    return static_cast<std::int64_t>((static_cast<std::uint64_t>(static_cast<std::uint32_t>(h)) << 32) | l);
#else
    const std::uint64_t addend = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(hi)) << 32) |
                                 static_cast<std::uint32_t>(lo);
    return static_cast<std::int64_t>(a) * multiplier + static_cast<std::int64_t>(addend);
#endif
  }
};

#if defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_SIGNED_TABLES)
// The centre of a gate's table (entry 0 of int16 argument 0): the firmware's compile-time tables
// (hosts: src/internal/int8_tables.hpp).
template <bool kTanh>
const std::int16_t* gate_table_centre() {
  return (kTanh ? kSignedTanh3.v : kSignedSigmoid.v) + 32768;
}
#endif

}  // namespace
}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_FIXED_POINT_HPP

// The integer LSTM's scalar reference (src/internal/int8_lstm.hpp; semantics in docs/int8.md).
//
// Bit-exactness with LiteRT rests on reproducing, operation by operation, the integer arithmetic
// of its 8x8_16 kernel: the rounding of every fixed-point product and shift, where results
// saturate and where 16-bit sums wrap. Each helper below says which of those it is.
#include "src/internal/int8_lstm.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SAT)
#include <arm_acle.h>
#define RNNCORE_Q8_ACLE 1  // SMLABB and SSAT (Cortex-M4/M7/M33, 32-bit ARMv7-A): the same values
#endif

#include "src/internal/error.hpp"

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
  const std::int32_t poly = round_shift<1>(mul(round_shift<2>(x4) + x3, kOneThird) + x2);
  return saturate16<kConst>(kExpMinusEighth + mul(kExpMinusEighth, x + poly));
}

// exp on [−1/4, 0) at the multiples of 2^-kExpStepBits, computed at compile time: with
// 15 − kExpStepBits or more integer bits every argument the exponential passes it is one of
// those, so a load replaces ~28 instructions. 2^-12 (1,024 values, 2 KiB of flash) serves 3 or
// more integer bits: the sigmoid, the cell gate's tanh and tanh of a cell state of scale 2^-13 or
// coarser. Firmware builds with the activation tables take 2^-14 (4,096 values, 8 KiB), which
// also serves tanh of a cell state of scale 2^-15 and 2^-14 (exp with 1 and 2 integer bits): what
// Keras conversions without a cell clip get, and the one activation those builds compute.
#if defined(RNNCORE_NO_HEAP) && defined(RNNCORE_Q8_ACTIVATION_TABLES)
constexpr int kExpStepBits = 14;
#else
constexpr int kExpStepBits = 12;
#endif
struct ExpQuarterTable {
  std::int16_t v[1 << (kExpStepBits - 2)] = {};
  constexpr ExpQuarterTable() {
    for (int i = 0; i < (1 << (kExpStepBits - 2)); ++i) {
      v[i] = static_cast<std::int16_t>(exp_on_interval_quarter<true>(i * (1 << (15 - kExpStepBits)) - 8192));
    }
  }
};
constexpr ExpQuarterTable kExpQuarter{};

// The factors exp(−2^k), k = K .. min(4, IB − 1), for the set bits of the remainder, unrolled at
// compile time (bit positions and constants become immediates).
template <int IB, int K, bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t apply_exp_factors(std::int32_t result, std::int32_t remainder) {
  if constexpr (K > 4 || K >= IB) {
    (void)remainder;
    return result;
  } else {
    if ((remainder & (std::int32_t{1} << (15 - IB + K))) != 0) result = mul16<kConst>(result, kExpFactor[K + 2]);
    return apply_exp_factors<IB, K + 1, kConst>(result, remainder);
  }
}

// exp(a) for a ≤ 0 given with IB integer bits (Q(IB).(15−IB)), result in Q0.15: exp of the
// residue in [−1/4, 0), then one factor exp(−2^k) per set bit of the rest (k = −2 .. 4).
template <int IB, bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t exp_on_negative_values(std::int32_t a) {
  static_assert(IB >= 1 && IB <= 7, "exp_on_negative_values: 1..7 integer bits");
  constexpr std::int32_t quarter = std::int32_t{1} << (13 - IB);
  const std::int32_t residue = (a & (quarter - 1)) - quarter;  // in [−quarter, 0)
  // residue · 2^IB lies in [−2^13, 0): the reference's saturating shift never saturates here.
  std::int32_t result = 0;
  if constexpr (IB >= 15 - kExpStepBits) {
    // residue · 2^IB = index · 2^(15 − kExpStepBits) − 2^13
    result = kExpQuarter.v[(a & (quarter - 1)) << (IB - 15 + kExpStepBits)];
  } else {
    result = exp_on_interval_quarter<kConst>(residue * (std::int32_t{1} << IB));
  }
  result = apply_exp_factors<IB, -2, kConst>(result, residue - a);
  if constexpr (IB > 5) {
    constexpr std::int16_t clamp = c16(-(std::int32_t{1} << (36 - IB)));  // −32 in Q(IB)
    if (a < clamp) result = 0;
  }
  return a == 0 ? kOneQ0 : result;
}

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
// reciprocal depends on a only through hd = (a + 1)/2, 2^14 .. 2^15 − 1 in Q0.15, and is within 3 of
// round(2^28 / hd) for every one of those 16,384 values, so an int8 table of the differences (16 KiB
// of flash, computed at compile time from the iteration itself) gives the same values for a
// division, a load and an add instead of about 30 instructions. tests/cross/int8_kernels_baremetal.cpp
// compares the activations built on it with the reference on every int16 input. Define
// RNNCORE_Q8_NO_RECIPROCAL_TABLE (meson option int8_reciprocal_table=false) to keep the 16 KiB. With
// the activation tables (below) only tanh of a cell state with fewer than 3 integer bits divides:
// what Keras conversions without a cell clip get, so those builds keep the table too.
#define RNNCORE_Q8_RECIPROCAL_TABLE 1
constexpr std::uint32_t rounded_reciprocal(std::uint32_t hd) { return ((std::uint32_t{1} << 28) + (hd >> 1)) / hd; }
struct ReciprocalDeltas {
  std::int8_t d[1 << 14] = {};
  constexpr ReciprocalDeltas() {
    for (std::int32_t i = 0; i < (1 << 14); ++i) {
      const std::int32_t hd = (1 << 14) + i;
      d[i] = static_cast<std::int8_t>(reciprocal_of_half_denominator<true>(hd) -
                                      static_cast<std::int32_t>(rounded_reciprocal(static_cast<std::uint32_t>(hd))));
    }
  }
};
constexpr ReciprocalDeltas kReciprocalDeltas{};
#endif

template <bool kConst = false>
constexpr RNNCORE_Q8_INLINE std::int32_t reciprocal_of_one_plus(std::int32_t a) {
  const std::int32_t half_denominator = (a + kOneQ0 + 1) >> 1;  // (a + 1)/2 rounded; a + 1 > 0
  if constexpr (kConst) return reciprocal_of_half_denominator<true>(half_denominator);
#if defined(RNNCORE_Q8_RECIPROCAL_TABLE)
  const std::uint32_t hd = static_cast<std::uint32_t>(half_denominator);
  return static_cast<std::int32_t>(rounded_reciprocal(hd)) + kReciprocalDeltas.d[hd - (1u << 14)];
#else
  return reciprocal_of_half_denominator<false>(half_denominator);
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
// value, passed as int32 so that a saturated sum needs no sign extension first.
RNNCORE_Q8_INLINE std::int16_t sigmoid_fixed(std::int32_t x) {
#if defined(RNNCORE_Q8_SIGNED_TABLES)
  return kSignedSigmoid.v[x + 32768];
#elif defined(RNNCORE_Q8_ABS_TABLES)
  // Branch-free with the sign mask m (0 or −1): |x| = (x ^ m) − m, and for x < 0 the mirror
  // 1 − σ = 32767 − p = (p ^ −1) + 2^15.
  const std::int32_t m = static_cast<std::int32_t>(x) >> 31;
  const std::int32_t positive = kAbsSigmoid.v[static_cast<std::uint32_t>((x ^ m) - m)];
  return static_cast<std::int16_t>((positive ^ m) - m * (kOneQ0 + 1));
#else
  if (x == 0) return kHalfQ0;
  const std::int32_t positive = sigmoid_of_abs(x < 0 ? x : -x);
  return static_cast<std::int16_t>(x > 0 ? positive : kOneQ0 - positive);
#endif
}

template <int IB>
RNNCORE_Q8_INLINE std::int16_t tanh_fixed(std::int32_t x) {  // x: an int16 value, as sigmoid_fixed
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
  const std::int32_t t = tanh_of_abs<IB>(x < 0 ? x : -x);
  return static_cast<std::int16_t>(x < 0 ? -t : t);
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

}  // namespace

Status quantize_multiplier(double scale, const char* what, QuantizedMultiplier* out) {
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "quantize_multiplier: out is null");
  RNNCORE_ENSURE(std::isfinite(scale) && scale > 0.0, Status::invalid_size,
                 "%s: scale %g must be finite and positive", what, scale);
  int shift = 0;
  const double q = std::frexp(scale, &shift);  // scale = q · 2^shift, q in [0.5, 1)
  std::int64_t q_fixed = static_cast<std::int64_t>(std::round(q * static_cast<double>(std::int64_t{1} << 31)));
  if (q_fixed == (std::int64_t{1} << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  RNNCORE_ENSURE(shift >= -31, Status::invalid_size,
                 "%s: scale %g is below 2^-32; its fixed-point multiplier would round every product to 0",
                 what, scale);
  RNNCORE_ENSURE(shift <= 30, Status::invalid_size,
                 "%s: scale %g is 2^30 or more; its fixed-point multiplier overflows", what, scale);
  out->multiplier = static_cast<std::int32_t>(q_fixed);
  out->shift = shift;
  return Status::ok;
}

std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m) {
  // the step's arithmetic wherever it applies, so that the tests of this function cover it
  return m.multiplier >= (std::int32_t{1} << 30) ? StepMultiplier(m)(x) : rescale(x, m);
}

std::int16_t sigmoid_q3_12(std::int16_t x) { return sigmoid_fixed(x); }

std::int16_t tanh_q(std::int16_t x, int integer_bits) {
  switch (integer_bits) {
    case 0: return tanh_fixed<0>(x);
    case 1: return tanh_fixed<1>(x);
    case 2: return tanh_fixed<2>(x);
    case 3: return tanh_fixed<3>(x);
    case 4: return tanh_fixed<4>(x);
    case 5: return tanh_fixed<5>(x);
    case 6: return tanh_fixed<6>(x);
    default: return 0;
  }
}

namespace {

#if !defined(RNNCORE_NO_HEAP)
// Host builds look the activations up instead of computing them: the sigmoid and the cell
// gate's tanh (3 integer bits) map int16 to int16, so two tables of 65,536 entries, filled once by
// the functions above, give the same bits for about one load each (the computed activation is some
// 30 dependent multiplies; the step's rest cost 100 ns a unit on x86 with it). 256 KiB of static
// storage, filled on the first prepare (a guarded static: no heap, thread-safe). The firmware
// profile (RNNCORE_NO_HEAP) computes them: the tables would not fit its RAM.
struct GateTables {
  std::int16_t sigmoid[65536];
  std::int16_t tanh3[65536];
  std::int16_t gather_pad[2];  // the step kernels' 32-bit gathers read one int16 past the last entry
  GateTables() {
    for (std::int32_t v = -32768; v <= 32767; ++v) {
      sigmoid[v + 32768] = sigmoid_fixed(static_cast<std::int16_t>(v));
      tanh3[v + 32768] = tanh_fixed<3>(static_cast<std::int16_t>(v));
    }
  }
};

const GateTables& gate_tables() {
  static const GateTables tables;
  return tables;
}

// The centre of a gate's table (entry 0 of int16 argument 0): see GateActivation.
template <bool kTanh>
const std::int16_t* gate_table_centre() {
  const GateTables& t = gate_tables();
  return (kTanh ? t.tanh3 : t.sigmoid) + 32768;
}
#define RNNCORE_Q8_CENTRED_TABLES 1

// tanh of a cell state with IB integer bits, the same way: a table per IB, filled at the prepare of
// the first layer whose cell scale gives that IB (most models use one or two of the seven).
template <int IB>
const std::int16_t* cell_tanh_table_for() {
  struct Table {
    std::int16_t v[65536];
    std::int16_t gather_pad[2];  // as GateTables'
    Table() {
      for (std::int32_t x = -32768; x <= 32767; ++x) v[x + 32768] = tanh_fixed<IB>(static_cast<std::int16_t>(x));
    }
  };
  static const Table table;
  return table.v;
}

// The table of tanh with `bits` integer bits (0..6), or null (a finer cell scale: no tanh).
const std::int16_t* cell_tanh_table(int bits) {
  switch (bits) {
    case 0: return cell_tanh_table_for<0>();
    case 1: return cell_tanh_table_for<1>();
    case 2: return cell_tanh_table_for<2>();
    case 3: return gate_tables().tanh3;
    case 4: return cell_tanh_table_for<4>();
    case 5: return cell_tanh_table_for<5>();
    case 6: return cell_tanh_table_for<6>();
    default: return nullptr;
  }
}

// Fills the tables a layer with this cell scale uses now, so that its first step does not.
void fill_tables(int cell_log2) {
  (void)gate_tables();
  (void)cell_tanh_table(15 + cell_log2);
}
#else
#if defined(RNNCORE_Q8_SIGNED_TABLES)
template <bool kTanh>
const std::int16_t* gate_table_centre() {
  return (kTanh ? kSignedTanh3.v : kSignedSigmoid.v) + 32768;
}
#endif
void fill_tables(int) {}
#endif

// The step's loops in Thumb-2 assembly, units in pairs (gate_pairs_thumb2, cell_pairs_thumb2,
// output_pairs_thumb2): optimized builds only, as their 13 registers are more than GCC leaves an
// asm statement at -O0.
#if defined(RNNCORE_Q8_ACLE) && defined(__thumb2__) && defined(__OPTIMIZE__)
#define RNNCORE_Q8_THUMB2_LOOPS 1
#endif

// Hides a pointer's value from the optimizer: GCC would otherwise fold a table's constant centre
// back into every lookup (one more add per activation on ARM).
template <class T>
RNNCORE_Q8_INLINE T* opaque_pointer(T* p) {
#if defined(__GNUC__)
  __asm__("" : "+r"(p));
#endif
  return p;
}

// A gate's activation of an int16 value z: one load from the centre of a table over every int16
// argument where the build has those (hosts; firmware with int8_activation_tables=signed), else
// sigmoid_fixed or tanh_fixed<3>. Made once per loop, so that the centre stays in a register.
template <bool kTanh>
struct GateActivation {
#if defined(RNNCORE_Q8_CENTRED_TABLES)
  const std::int16_t* centre = opaque_pointer(gate_table_centre<kTanh>());
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t z) const { return centre[z]; }
#else
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t z) const { return kTanh ? tanh_fixed<3>(z) : sigmoid_fixed(z); }
#endif
};

// tanh of a cell state with IB integer bits (0..6), as GateActivation: on hosts its table's centre;
// with the firmware's signed tables and IB >= 3, tanh(Q3.12) at c · 2^(IB − 3) saturated (the same
// real argument, as tanh_fixed reads it); else tanh_fixed<IB>.
// kPrescale: where a centre is read, the left shift of c before it (saturated to int16); else −1.
template <int IB>
struct CellTanh {
#if !defined(RNNCORE_NO_HEAP)
  static constexpr int kPrescale = 0;
  const std::int16_t* centre = opaque_pointer(cell_tanh_table(IB) + 32768);
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const { return centre[c]; }
#elif defined(RNNCORE_Q8_SIGNED_TABLES)
  static constexpr int kPrescale = IB >= 3 ? IB - 3 : (IB == kCellTanhBits ? 0 : -1);
  const std::int16_t* centre = opaque_pointer(cell_table_centre());
  static const std::int16_t* cell_table_centre() {
#if defined(RNNCORE_Q8_CELL_TANH_BITS)
    if constexpr (IB == kCellTanhBits) return kCellTanh.v + 32768;
#endif
    return gate_table_centre<true>();
  }
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const {
    if constexpr (kPrescale >= 0) {
      return centre[kPrescale > 0 ? sat16(c * (1 << kPrescale)) : c];
    } else {
      return tanh_fixed<IB>(c);
    }
  }
#else
  static constexpr int kPrescale = -1;
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const { return tanh_fixed<IB>(c); }
#endif
};

const char* const kGateName[kGates] = {"i", "f", "g", "o"};

// The weights' layout: a known one, and interleaved weights 4-byte aligned (the kernel reads
// them with LDM, which faults on an unaligned address). Sets the layout and its kernel.
Status check_layout(Int8WeightLayout layout, const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                    Int8LstmParams* p) {
  RNNCORE_ENSURE(layout == Int8WeightLayout::row_major || layout == Int8WeightLayout::interleaved4,
                 Status::invalid_enum, "int8_lstm_prepare: weight layout %d is neither row-major (0) nor interleaved (1)",
                 static_cast<int>(layout));
  p->layout = layout;
  if (layout != Int8WeightLayout::interleaved4) return Status::ok;
  for (int g = 0; g < kGates; ++g) {
    RNNCORE_ENSURE(reinterpret_cast<std::uintptr_t>(w[g]) % 4 == 0 && reinterpret_cast<std::uintptr_t>(r[g]) % 4 == 0,
                   Status::misaligned, "int8_lstm_prepare: interleaved weights of gate %s are not 4-byte aligned",
                   kGateName[g]);
  }
  int n = 0;
  const DotPanelsKernel* kernels = int8_panel_kernels(&n);
  p->dot_panels = kernels[n - 1].fn;
  return Status::ok;
}

// Weight (j, k) of a [rows, k_size] matrix in `layout`.
inline std::int8_t weight_at(const std::int8_t* m, Int8WeightLayout layout, int j, int k, int k_size) {
  return layout == Int8WeightLayout::interleaved4 ? interleaved4_weight(m, j, k, interleaved4_words(k_size))
                                                  : m[static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size) + k];
}

// Everything prepare derives from the quantization alone: the checks of sizes, zero points and
// scales, the fixed-point multipliers, the cell shift and clip (into *out, weights untouched).
Status derive_scales(const Int8LstmQuantization& q, int input_size, int hidden_size,
                     const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                     const std::int32_t* bias_storage, std::size_t bias_storage_words, Int8LstmParams* out) {
  RNNCORE_ENSURE(out != nullptr && w != nullptr && r != nullptr && bias_storage != nullptr,
                 Status::null_pointer, "int8_lstm_prepare: out, w, r and the bias storage must not be null");
  // Up to 2^16 units an int8 dot product (|w x| <= 2^14 per term) stays within 2^30.
  RNNCORE_ENSURE(input_size > 0 && hidden_size > 0 && input_size <= (1 << 16) && hidden_size <= (1 << 16),
                 Status::invalid_size, "int8_lstm_prepare: input_size %d and hidden_size %d must be in 1..65536",
                 input_size, hidden_size);
  const bool per_channel = int8_lstm_per_channel(q);
  for (int g = 0; g < kGates; ++g) {
    RNNCORE_ENSURE(w[g] != nullptr && r[g] != nullptr, Status::null_pointer,
                   "int8_lstm_prepare: weights of gate %s are null", kGateName[g]);
    RNNCORE_ENSURE((q.w_scales[g] != nullptr) == per_channel && (q.r_scales[g] != nullptr) == per_channel,
                   Status::null_pointer,
                   "int8_lstm_prepare: per-channel weight scales are given for some weights only (gate %s); give "
                   "them for the input and recurrent weights of every gate, or for none",
                   kGateName[g]);
  }
  RNNCORE_ENSURE(bias_storage_words >= int8_lstm_storage_words(q, hidden_size), Status::buffer_too_small,
                 "int8_lstm_prepare: bias_storage has %zu int32 words, needs %zu", bias_storage_words,
                 int8_lstm_storage_words(q, hidden_size));
  const auto zp_ok = [](std::int32_t zp) { return zp >= -128 && zp <= 127; };
  RNNCORE_ENSURE(zp_ok(q.input_zp) && zp_ok(q.state_zp) && zp_ok(q.hidden_zp), Status::invalid_size,
                 "int8_lstm_prepare: zero points (input %d, state %d, hidden %d) must be in -128..127",
                 static_cast<int>(q.input_zp), static_cast<int>(q.state_zp), static_cast<int>(q.hidden_zp));
  const auto scale_ok = [](float s) { return std::isfinite(s) && s > 0.0f; };
  RNNCORE_ENSURE(scale_ok(q.input_scale), Status::invalid_size, "input scale %g must be finite and positive",
                 static_cast<double>(q.input_scale));
  RNNCORE_ENSURE(scale_ok(q.state_scale), Status::invalid_size,
                 "output state scale %g must be finite and positive", static_cast<double>(q.state_scale));
  RNNCORE_ENSURE(scale_ok(q.hidden_scale), Status::invalid_size, "hidden scale %g must be finite and positive",
                 static_cast<double>(q.hidden_scale));
  RNNCORE_ENSURE(scale_ok(q.cell_scale), Status::invalid_size, "cell state scale %g must be finite and positive",
                 static_cast<double>(q.cell_scale));
  RNNCORE_ENSURE(std::isfinite(q.cell_clip) && q.cell_clip >= 0.0f, Status::invalid_size,
                 "cell clip %g must be finite and >= 0 (0: none)", static_cast<double>(q.cell_clip));

  Int8LstmParams p;
  p.input_size = input_size;
  p.hidden_size = hidden_size;
  // The gate pre-activations are int16 Q3.12 (scale 2^-12); the effective scales are formed in
  // float, as TFLite forms them, before they become fixed-point multipliers.
  const float gate_scale = 1.0f / 4096.0f;
  // Named without snprintf: firmware images link no printf.
  static const char* const kInputWhat[kGates] = {"effective input scale of gate i", "effective input scale of gate f",
                                                 "effective input scale of gate g", "effective input scale of gate o"};
  static const char* const kRecurrentWhat[kGates] = {
      "effective recurrent scale of gate i", "effective recurrent scale of gate f",
      "effective recurrent scale of gate g", "effective recurrent scale of gate o"};
  for (int g = 0; g < kGates && !per_channel; ++g) {  // per channel: derive_row_multipliers
    RNNCORE_ENSURE(scale_ok(q.w_scale[g]), Status::invalid_size,
                   "input weight scale of gate %s is %g; it must be finite and positive", kGateName[g],
                   static_cast<double>(q.w_scale[g]));
    RNNCORE_ENSURE(scale_ok(q.r_scale[g]), Status::invalid_size,
                   "recurrent weight scale of gate %s is %g; it must be finite and positive", kGateName[g],
                   static_cast<double>(q.r_scale[g]));
    const float ex = q.w_scale[g] * q.input_scale / gate_scale;
    const float eh = q.r_scale[g] * q.state_scale / gate_scale;
    RNNCORE_RETURN_IF_ERROR(quantize_multiplier(ex, kInputWhat[g], &p.x_mult[g]));
    RNNCORE_RETURN_IF_ERROR(quantize_multiplier(eh, kRecurrentWhat[g], &p.h_mult[g]));
  }
  const float two_m15 = 1.0f / 32768.0f;
  RNNCORE_RETURN_IF_ERROR(
      quantize_multiplier(two_m15 / q.hidden_scale * two_m15, "effective hidden scale", &p.hidden_mult));

  int cell_log2 = 0;
  const float mantissa = std::frexp(q.cell_scale, &cell_log2);
  RNNCORE_ENSURE(mantissa == 0.5f, Status::unsupported,
                 "cell state scale %g is not a power of two (the integer LSTM needs 2^k)",
                 static_cast<double>(q.cell_scale));
  cell_log2 -= 1;
  // Finer than 2^-15 the cell state has a negative number of integer bits: LiteRT's ApplyTanh has
  // no case for it and leaves its output buffer as it was (see int8_lstm_step); below 2^-30 the
  // input-times-cell-gate shift 30 + k would be negative.
  RNNCORE_ENSURE(cell_log2 >= -30 && cell_log2 <= -9, Status::unsupported,
                 "cell state scale 2^%d is outside 2^-30 .. 2^-9 (tanh of the cell state needs at most 6 integer bits)",
                 cell_log2);
  p.cell_log2 = cell_log2;
  if (q.cell_clip > 0.0f) {
    float c = q.cell_clip / q.cell_scale;
    c = c < -32768.0f ? -32768.0f : (c > 32767.0f ? 32767.0f : c);
    p.cell_clip = static_cast<std::int16_t>(c);
  }
  p.hidden_zp = q.hidden_zp;
  for (int g = 0; g < kGates; ++g) {
    p.w[g] = w[g];
    p.r[g] = r[g];
  }
  p.dot = int8_best_dot_kernel().fn;
  if (const StepKernels* k = int8_best_step_kernels()) {
    p.gate_activations = k->gate;
    p.cell_update = k->cell;
  }
  RNNCORE_RETURN_IF_ERROR(check_layout(q.weight_layout, w, r, &p));
  *out = p;
  return Status::ok;
}

// The effective biases: the zero points' products with the weights' row sums, folded once. With
// `check` the values are already in `storage` (folded earlier, e.g. by `rnncore export-c` into
// flash) and must equal what folding gives; otherwise they are written there.
Status fold_biases(const Int8LstmQuantization& q, const std::int32_t* const bias[kGates], const std::int32_t* check,
                   std::int32_t* storage, Int8LstmParams* p) {
  const int H = p->hidden_size, I = p->input_size;
  for (int g = 0; g < kGates; ++g) {
    const std::size_t xo = static_cast<std::size_t>(g) * H, ho = static_cast<std::size_t>(kGates + g) * H;
    for (int j = 0; j < H; ++j) {
      std::int32_t sw = 0, sr = 0;
      for (int k = 0; k < I; ++k) sw += weight_at(p->w[g], p->layout, j, k, I);
      for (int k = 0; k < H; ++k) sr += weight_at(p->r[g], p->layout, j, k, H);
      const std::int64_t bx = static_cast<std::int64_t>(bias != nullptr && bias[g] != nullptr ? bias[g][j] : 0) -
                              static_cast<std::int64_t>(q.input_zp) * sw;
      const std::int64_t bh = -static_cast<std::int64_t>(q.state_zp) * sr;  // |z_h| <= 128, |sum| <= 2^23
      RNNCORE_ENSURE(bx >= std::numeric_limits<std::int32_t>::min() && bx <= std::numeric_limits<std::int32_t>::max(),
                     Status::invalid_size, "effective input bias of gate %s, unit %d (%lld) overflows int32",
                     kGateName[g], j, static_cast<long long>(bx));
      if (check != nullptr) {
        RNNCORE_ENSURE(check[xo + j] == bx && check[ho + j] == bh, Status::invalid_size,
                       "the folded biases of gate %s, unit %d do not match the weights, biases and zero points "
                       "(fold them again, e.g. export the model again%s)",
                       kGateName[g], j,
                       p->layout == Int8WeightLayout::interleaved4
                           ? "; interleaved weights exported before 2026-11-25 are in the older interleaved layout"
                           : "");
      } else {
        storage[xo + j] = static_cast<std::int32_t>(bx);
        storage[ho + j] = static_cast<std::int32_t>(bh);
      }
    }
    const std::int32_t* base = check != nullptr ? check : storage;
    p->x_bias[g] = base + xo;
    p->h_bias[g] = base + ho;
  }
  return Status::ok;
}

// Per channel: each unit's input and recurrent multipliers, formed as the per-tensor ones are,
// from the row's own weight scale; into storage after the biases (or checked there, as
// fold_biases checks a folded table).
Status derive_row_multipliers(const Int8LstmQuantization& q, const std::int32_t* check, std::int32_t* storage,
                              Int8LstmParams* p) {
  if (!int8_lstm_per_channel(q)) return Status::ok;
  const int H = p->hidden_size;
  const float gate_scale = 1.0f / 4096.0f;
  static const char* const kWhat[2] = {"effective input scale of a unit", "effective recurrent scale of a unit"};
  for (int part = 0; part < 2; ++part) {  // input weights, then recurrent weights
    for (int g = 0; g < kGates; ++g) {
      const float* const scales = part == 0 ? q.w_scales[g] : q.r_scales[g];
      const float operand_scale = part == 0 ? q.input_scale : q.state_scale;
      const std::size_t offset = (static_cast<std::size_t>(2 * kGates) + static_cast<std::size_t>(part * kGates + g) * 2) *
                                 static_cast<std::size_t>(H);
      for (int j = 0; j < H; ++j) {
        const float ws = scales[j];
        RNNCORE_ENSURE(std::isfinite(ws) && ws > 0.0f, Status::invalid_size,
                       "%s weight scale of gate %s, unit %d is %g; it must be finite and positive",
                       part == 0 ? "input" : "recurrent", kGateName[g], j, static_cast<double>(ws));
        QuantizedMultiplier m;
        RNNCORE_RETURN_IF_ERROR(quantize_multiplier(ws * operand_scale / gate_scale, kWhat[part], &m));
        const std::size_t at = offset + 2 * static_cast<std::size_t>(j);
        if (check != nullptr) {
          RNNCORE_ENSURE(check[at] == m.multiplier && check[at + 1] == m.shift, Status::invalid_size,
                         "the folded multipliers of gate %s, unit %d do not match the weight scales "
                         "(fold them again, e.g. export the model again)",
                         kGateName[g], j);
        } else {
          storage[at] = m.multiplier;
          storage[at + 1] = m.shift;
        }
      }
      const std::int32_t* const rows = (check != nullptr ? check : storage) + offset;
      (part == 0 ? p->x_mult_rows : p->h_mult_rows)[g] = rows;
    }
  }
  return Status::ok;
}

}  // namespace

Status int8_lstm_prepare(const Int8LstmQuantization& q, int input_size, int hidden_size,
                         const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                         const std::int32_t* const bias[kGates], std::int32_t* bias_storage,
                         std::size_t bias_storage_words, Int8LstmParams* out) {
  detail::clear_error();
  Int8LstmParams p;
  RNNCORE_RETURN_IF_ERROR(derive_scales(q, input_size, hidden_size, w, r, bias_storage, bias_storage_words, &p));
  fill_tables(p.cell_log2);
  RNNCORE_RETURN_IF_ERROR(fold_biases(q, bias, nullptr, bias_storage, &p));
  RNNCORE_RETURN_IF_ERROR(derive_row_multipliers(q, nullptr, bias_storage, &p));
  *out = p;
  return Status::ok;
}

Status int8_lstm_prepare_folded(const Int8LstmQuantization& q, int input_size, int hidden_size,
                                const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                                const std::int32_t* const bias[kGates], const std::int32_t* folded_biases,
                                std::size_t folded_words, Int8LstmParams* out) {
  detail::clear_error();
  Int8LstmParams p;
  RNNCORE_RETURN_IF_ERROR(derive_scales(q, input_size, hidden_size, w, r, folded_biases, folded_words, &p));
  fill_tables(p.cell_log2);
  RNNCORE_RETURN_IF_ERROR(fold_biases(q, bias, folded_biases, nullptr, &p));
  RNNCORE_RETURN_IF_ERROR(derive_row_multipliers(q, folded_biases, nullptr, &p));
  *out = p;
  return Status::ok;
}

namespace {

// The new output state of n units from o and tanh(c): o · tanh(c) requantized to int8. A loop of
// its own after the cell loop, out of line: one copy for every cell scale, a loop per direction
// of the multiplier's shift instead of a test per unit, and registers left to the cell loop.
template <bool kRightShift>
RNNCORE_Q8_INLINE void output_units(const StepMultiplier& m, std::int32_t zp, int n, const std::int16_t* o,
                                    const std::int16_t* tanh_c, std::int8_t* out) {
  for (int u = 0; u < n; ++u) {
    const std::int32_t hq = m.apply<kRightShift>(static_cast<std::int32_t>(o[u]) * tanh_c[u]) + zp;
#if defined(RNNCORE_Q8_ACLE)
    out[u] = static_cast<std::int8_t>(__ssat(hq, 8));
#else
    out[u] = static_cast<std::int8_t>(hq < -128 ? -128 : (hq > 127 ? 127 : hq));
#endif
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS)
// output_units<true> on Thumb-2, two pairs of units a pass: their o and tanh(c) loaded in pairs and
// one loop test, 9.5 instructions a unit instead of 12 (the same arithmetic as StepMultiplier::apply). tanh_c
// is act[0] of a block (4-byte aligned), o its act[3], 6 · kUnitBlock bytes on; `pairs` >= 1.
RNNCORE_Q8_INLINE void output_pairs_thumb2(int pairs, const StepMultiplier& m, std::int32_t zp, const std::int16_t* tanh_c,
                                           std::int8_t* out) {
  const std::int16_t* const end = tanh_c + 2 * pairs;
  const std::int32_t shift = m.right - 1;
  std::int32_t o, t, x;
  std::int32_t k = pairs & 1;  // first an odd count's flag (two pairs a pass), then a temporary
#define RNNCORE_Q8_OUTPUT_PAIR                      \
  "ldr %[o], [%[tanh_c], %[o_row]]\n\t"            \
  "ldr %[t], [%[tanh_c]], #4\n\t"                  \
  "smulbb %[x], %[o], %[t]\n\t"                    \
  "smultt %[o], %[o], %[t]\n\t"                    \
  "add %[k], %[x], %[x], asr #31\n\t"              \
  "smmlar %[x], %[x], %[q], %[k]\n\t"              \
  "asr %[x], %[x], %[shift]\n\t"                   \
  "add %[x], %[x], #1\n\t"                         \
  "add %[x], %[zp], %[x], asr #1\n\t"              \
  "ssat %[x], #8, %[x]\n\t"                        \
  "strb %[x], [%[out]], #2\n\t"                    \
  "add %[k], %[o], %[o], asr #31\n\t"              \
  "smmlar %[o], %[o], %[q], %[k]\n\t"              \
  "asr %[o], %[o], %[shift]\n\t"                   \
  "add %[o], %[o], #1\n\t"                         \
  "add %[o], %[zp], %[o], asr #1\n\t"              \
  "ssat %[o], #8, %[o]\n\t"                        \
  "strb %[o], [%[out], #-1]\n\t"
  __asm__ volatile(
      "cmp %[k], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_OUTPUT_PAIR
      "2:\n\t"
      RNNCORE_Q8_OUTPUT_PAIR
      "cmp %[tanh_c], %[end]\n\t"
      "bne 1b"
      : [tanh_c] "+r"(tanh_c), [out] "+r"(out), [o] "=&r"(o), [t] "=&r"(t), [x] "=&r"(x), [k] "+r"(k)
      : [end] "r"(end), [q] "r"(m.doubled), [shift] "r"(shift), [zp] "r"(zp), [o_row] "i"(6 * kUnitBlock)
      : "cc", "memory");
#undef RNNCORE_Q8_OUTPUT_PAIR
}
#endif

RNNCORE_Q8_NOINLINE void update_outputs(const Int8LstmParams& p, int n, const std::int16_t* o, const std::int16_t* tanh_c,
                                        std::int8_t* out) {
  const StepMultiplier m(p.hidden_mult);
  if (m.right > 0) {  // an output scale of 2^-30 or coarser: every model seen
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    const int paired = n & ~1;
    if (paired > 0) output_pairs_thumb2(paired / 2, m, p.hidden_zp, tanh_c, out);
    if (paired < n) output_units<true>(m, p.hidden_zp, 1, o + paired, tanh_c + paired, out + paired);
#else
    output_units<true>(m, p.hidden_zp, n, o, tanh_c, out);
#endif
  } else {
    output_units<false>(m, p.hidden_zp, n, o, tanh_c, out);
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
// update_cells' loop on Thumb-2 where tanh of the cell is a table centre (CellTanh::kPrescale >= 0),
// two pairs of units a pass: 18.5 instructions a unit instead of 27. The same values, by three facts:
// - gf and gi are sigmoids, never negative, so [gf · c < 0] = [c < 0] and [gi · gg < 0] = [gg < 0]
//   wherever the product is not 0 (and a product of 0 rounds to 0 with either): the rounding
//   constant 2^(k−1) − [·< 0] is formed from the factor and added by SMLABB / SMLATB;
// - |f · c| <= 32767 · 2^15 and |i · g| < 2^30, so both rounded products are int16 values
//   already (the wrap to int16 changes nothing) and their sum is saturated by SSAT;
// - min(v, high) = sat16(sat16(v + K) − K) with K = 32767 − high, and max(v, low) =
//   sat16(sat16(v − L) + L) with L = 32768 + low (K, L in 0 .. 32767): QADD16 / QSUB16 on the low
//   halves. The high halves keep v's sign bits, which the clamp does not change (high >= 1,
//   low <= −1), so the register is the clamped int16 sign-extended, as the prescale's SSAT needs.
// act: the block's gates (i, f, g in rows 0..2, 2 · kUnitBlock bytes apart; tanh(c) goes into row 0), 4-byte
// aligned; cells: the pairs' cell states (int16, any alignment); `pairs` >= 1.
template <int IB, int kPrescale>
RNNCORE_Q8_INLINE void cell_pairs_thumb2(int pairs, std::int16_t* act, std::int16_t* cells, std::int32_t clip_high,
                                         std::int32_t clip_low, const std::int16_t* centre) {
  static_assert(IB >= 0 && IB <= 6 && kPrescale >= 0 && kPrescale <= 3, "cell_pairs_thumb2: IB 0..6");
  std::int16_t* const end = act + 2 * pairs;
  const std::int32_t fc_round = 1 << 14, ig_round = 1 << (14 + IB);
  const std::int32_t high_gap = kI16Max - clip_high, low_gap = 32768 + clip_low;
  std::int32_t gi, gf, v, f, k;
#define RNNCORE_Q8_CELL_UNIT(half, g_row, i_row)                            \
  "ldrsh %[v], [%[cells]]\n\t"                                             \
  "add %[k], %[fc_round], %[v], asr #31\n\t"                               \
  "smla" half "b %[f], %[gf], %[v], %[k]\n\t"                               \
  "ldrsh %[v], [%[act], %[" g_row "]]\n\t"                                  \
  "add %[k], %[ig_round], %[v], asr #31\n\t"                               \
  "smla" half "b %[k], %[gi], %[v], %[k]\n\t"                               \
  "asr %[f], %[f], #15\n\t"                                                \
  "add %[f], %[f], %[k], asr %[ig_shift]\n\t"                              \
  "ssat %[f], #16, %[f]\n\t"                                               \
  "qadd16 %[f], %[f], %[high_gap]\n\t"                                     \
  "qsub16 %[f], %[f], %[high_gap]\n\t"                                     \
  "qsub16 %[f], %[f], %[low_gap]\n\t"                                      \
  "qadd16 %[f], %[f], %[low_gap]\n\t"                                      \
  "strh %[f], [%[cells]], #2\n\t"                                          \
  "ssat %[f], #16, %[f], lsl %[prescale]\n\t"                              \
  "ldrh %[f], [%[centre], %[f], lsl #1]\n\t"                               \
  "strh %[f], [%[act], %[" i_row "]]\n\t"
  // act advances as i's pair is loaded, so the rows' offsets are 4 bytes short
#define RNNCORE_Q8_CELL_PAIR                   \
  "ldr %[gi], [%[act]], #4\n\t"               \
  "ldr %[gf], [%[act], %[f_row]]\n\t"         \
  RNNCORE_Q8_CELL_UNIT("b", "g_row0", "i_row0") \
  RNNCORE_Q8_CELL_UNIT("t", "g_row1", "i_row1")
  k = pairs & 1;  // first an odd count's flag (two pairs a pass, an odd count entering at the second)
  __asm__ volatile(
      "cmp %[k], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_CELL_PAIR
      "2:\n\t"
      RNNCORE_Q8_CELL_PAIR
      "cmp %[act], %[end]\n\t"
      "bne 1b"
      : [act] "+r"(act), [cells] "+r"(cells), [gi] "=&r"(gi), [gf] "=&r"(gf), [v] "=&r"(v), [f] "=&r"(f), [k] "+r"(k)
      : [end] "r"(end), [fc_round] "r"(fc_round), [ig_round] "r"(ig_round), [high_gap] "r"(high_gap),
        [low_gap] "r"(low_gap), [centre] "r"(centre), [ig_shift] "i"(15 + IB), [prescale] "i"(kPrescale),
        [f_row] "i"(2 * kUnitBlock - 4), [g_row0] "i"(4 * kUnitBlock - 4), [g_row1] "i"(4 * kUnitBlock - 2),
        [i_row0] "i"(-4), [i_row1] "i"(-2)
      : "cc", "memory");
#undef RNNCORE_Q8_CELL_PAIR
#undef RNNCORE_Q8_CELL_UNIT
}
#endif

// The cell and the new output state of units [j, j + n) from their gate activations. IB: the cell
// state's integer bits, 15 + cell_log2, as a template argument so that the firmware's computed
// tanh is inlined with constant shifts (the host reads its table); −1 stands for every finer scale.
// tanh(c) goes into act[0] (i's slot, read first) for update_outputs.
template <int IB>
void update_cells(const Int8LstmParams& p, std::size_t j, int n, std::int16_t (*act)[kUnitBlock], std::int16_t* c,
                  std::int8_t* h_next) {
  const CellTanh<IB >= 0 ? IB : 0> cell_tanh;
  std::int16_t* const cells = c + j;
  // The clip as two bounds, the int16 range without one (the sum is saturated to it already), so
  // that the loop does not test for it.
  const std::int32_t clip_high = p.cell_clip > 0 ? p.cell_clip : kI16Max;
  const std::int32_t clip_low = p.cell_clip > 0 ? -p.cell_clip : kI16Min;
  int first = 0;  // units a step kernel finished, output state included
  int u = 0;      // units whose cell is done
#if !defined(RNNCORE_NO_HEAP)
  if (p.cell_update != nullptr) {  // the rest (fewer than its lanes) in C below
    const CellUpdate cu{IB >= 0 ? cell_tanh.centre : nullptr, p.cell_log2, p.cell_clip, p.hidden_mult, p.hidden_zp};
    first = u = p.cell_update(n, cu, BlockGates{act[0], act[1], act[2], act[3]}, cells, h_next + j);
    if (first == n) return;
  } else  // (the Thumb-2 loop, where the build has it)
#endif
  {
#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
    if constexpr (IB >= 0 && decltype(cell_tanh)::kPrescale >= 0) {
      u = n & ~1;
      if (u > 0) {
        cell_pairs_thumb2<IB, decltype(cell_tanh)::kPrescale>(u / 2, act[0], cells, clip_high, clip_low, cell_tanh.centre);
      }
    }
#endif
  }
  for (; u < n; ++u) {
    const std::int16_t gi = act[0][u], gf = act[1][u], gg = act[2][u];
    std::int16_t& cell = cells[u];
    const std::int32_t fc = round_shift<15>(static_cast<std::int32_t>(gf) * cell);
    // Q0.15 · Q0.15 → cell scale 2^cell_log2: a shift by 30 + cell_log2 (|gi · gg| < 2^30)
    std::int32_t ig;
    if constexpr (IB >= 0) {
      ig = round_shift<15 + IB>(static_cast<std::int32_t>(gi) * gg);
    } else {
      ig = rounding_divide_by_pot(static_cast<std::int32_t>(gi) * gg, 30 + p.cell_log2);
    }
    std::int32_t clipped = sat16(wrap16(fc) + wrap16(ig));  // each product is stored as int16 first
    clipped = clipped > clip_high ? clip_high : clipped;
    const std::int16_t cn = static_cast<std::int16_t>(clipped < clip_low ? clip_low : clipped);
    cell = cn;
    // A cell scale finer than 2^-15 (the converter picks one when the calibrated |c| stays below
    // 1/2) gives tanh −1 .. −15 integer bits; LiteRT's ApplyTanh (portable_tensor_utils.cc)
    // dispatches only 0..6 and otherwise returns without writing its output, which is the input
    // gate's scratch buffer: LiteRT then multiplies o by the input gate i instead of tanh(c).
    // Reproduced here, bit for bit (tested on Keras models converted with cell scale 2^-16): i is
    // left in act[0].
    if constexpr (IB >= 0) act[0][u] = cell_tanh(cn);
  }
  update_outputs(p, n - first, act[3] + first, act[0] + first, h_next + j + first);
}

// update_cells for the parameters' cell scale.
RNNCORE_Q8_INLINE void update_cells_any(const Int8LstmParams& p, std::size_t j, int n, std::int16_t (*act)[kUnitBlock],
                                        std::int16_t* c, std::int8_t* h_next) {
  switch (15 + p.cell_log2) {  // derive_scales admits cell_log2 <= −9
    case 0: update_cells<0>(p, j, n, act, c, h_next); break;
    case 1: update_cells<1>(p, j, n, act, c, h_next); break;
    case 2: update_cells<2>(p, j, n, act, c, h_next); break;
    case 3: update_cells<3>(p, j, n, act, c, h_next); break;
    case 4: update_cells<4>(p, j, n, act, c, h_next); break;
    case 5: update_cells<5>(p, j, n, act, c, h_next); break;
    case 6: update_cells<6>(p, j, n, act, c, h_next); break;
    default: update_cells<-1>(p, j, n, act, c, h_next); break;
  }
}

// A gate's activations of n units from their int32 sums (`activation` of an int16 value: a
// GateActivation, the sigmoid or the cell gate's tanh); x_mult(u) and h_mult(u) give unit u's
// multipliers (the same for all units per tensor, where the compiler hoists them). kRightShifts:
// every multiplier shifts right (StepMultiplier::apply).
template <bool kRightShifts, class XMult, class HMult, class Activation>
RNNCORE_Q8_INLINE void gate_units(int n, const std::int32_t* ax, const std::int32_t* ah, std::int16_t* act,
                                  XMult x_mult, HMult h_mult, const Activation& activation) {
  for (int u = 0; u < n; ++u) {
    // Each product is rescaled to Q3.12 on its own and saturated; then the two are summed and
    // saturated again (TFLite accumulates the recurrent part onto the saturated input part).
    const std::int32_t zx = sat16(x_mult(u).template apply<kRightShifts>(ax[u]));
    const std::int32_t z = sat16(h_mult(u).template apply<kRightShifts>(ah[u]) + zx);
    act[u] = activation(z);
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
// gate_units for per-tensor multipliers that both shift right, units in pairs, on Thumb-2 with a
// table centre: the same instructions as GCC's loop for a unit (StepMultiplier::apply, the two
// saturations, the lookup), with the sums loaded in pairs (LDRD), the two activations stored as one
// word and one loop test for two pairs (an odd count enters at the second): 14.5 instructions a
// unit instead of 17. ax and ah are the two rows of
// StepSums (ah = ax + kUnitBlock), act 4-byte aligned; `pairs` >= 1.
RNNCORE_Q8_INLINE void gate_pairs_thumb2(int pairs, const std::int32_t* ax, std::int16_t* act, QuantizedMultiplier mx,
                                         QuantizedMultiplier mh, const std::int16_t* centre) {
  std::int16_t* const end = act + 2 * pairs;
  // StepMultiplier's `doubled` and right − 1 (the shifts are negative: both shift right)
  const std::int32_t x_doubled = static_cast<std::int32_t>(static_cast<std::uint32_t>(mx.multiplier) << 1);
  const std::int32_t h_doubled = static_cast<std::int32_t>(static_cast<std::uint32_t>(mh.multiplier) << 1);
  const std::int32_t x_shift = -mx.shift - 1, h_shift = -mh.shift - 1;
  std::int32_t x0, x1, h0, h1;
  std::int32_t t = pairs & 1;  // first an odd count's flag (the loop takes two pairs a pass), then a temporary
#define RNNCORE_Q8_GATE_UNIT(x, h)                    \
  "add %[t], %[" x "], %[" x "], asr #31\n\t"          \
  "smmlar %[" x "], %[" x "], %[xq], %[t]\n\t"         \
  "asr %[" x "], %[" x "], %[xs]\n\t"                  \
  "add %[" x "], %[" x "], #1\n\t"                     \
  "ssat %[" x "], #16, %[" x "], asr #1\n\t"           \
  "add %[t], %[" h "], %[" h "], asr #31\n\t"          \
  "smmlar %[" h "], %[" h "], %[hq], %[t]\n\t"         \
  "asr %[" h "], %[" h "], %[hs]\n\t"                  \
  "add %[" h "], %[" h "], #1\n\t"                     \
  "add %[" x "], %[" x "], %[" h "], asr #1\n\t"       \
  "ssat %[" x "], #16, %[" x "]\n\t"                   \
  "ldrh %[" x "], [%[centre], %[" x "], lsl #1]\n\t"
#define RNNCORE_Q8_GATE_PAIR                         \
  "ldrd %[h0], %[h1], [%[ax], %[h_offset]]\n\t"      \
  "ldrd %[x0], %[x1], [%[ax]], #8\n\t"               \
  RNNCORE_Q8_GATE_UNIT("x0", "h0")                    \
  RNNCORE_Q8_GATE_UNIT("x1", "h1")                    \
  "pkhbt %[x0], %[x0], %[x1], lsl #16\n\t"           \
  "str %[x0], [%[act]], #4\n\t"
  __asm__ volatile(
      "cmp %[t], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_GATE_PAIR
      "2:\n\t"
      RNNCORE_Q8_GATE_PAIR
      "cmp %[act], %[end]\n\t"
      "bne 1b"
      : [ax] "+r"(ax), [act] "+r"(act), [x0] "=&r"(x0), [x1] "=&r"(x1), [h0] "=&r"(h0), [h1] "=&r"(h1), [t] "+r"(t)
      : [end] "r"(end), [xq] "r"(x_doubled), [xs] "r"(x_shift), [hq] "r"(h_doubled), [hs] "r"(h_shift),
        [centre] "r"(centre), [h_offset] "i"(4 * kUnitBlock)
      : "cc", "memory");
#undef RNNCORE_Q8_GATE_PAIR
#undef RNNCORE_Q8_GATE_UNIT
}
#endif

// A gate per tensor: one pair of multipliers, and the loop without the left-shift case where (as
// for most models: effective scales below 1) both shift right.
template <bool kTanh>
RNNCORE_Q8_INLINE void gate_units_per_tensor(int n, const std::int32_t* ax, const std::int32_t* ah, std::int16_t* act,
                                             const StepMultiplier& mx, const StepMultiplier& mh) {
  const auto x_mult = [&mx](int) -> const StepMultiplier& { return mx; };
  const auto h_mult = [&mh](int) -> const StepMultiplier& { return mh; };
  const GateActivation<kTanh> activation;
  if (mx.right > 0 && mh.right > 0) {
    gate_units<true>(n, ax, ah, act, x_mult, h_mult, activation);
  } else {
    gate_units<false>(n, ax, ah, act, x_mult, h_mult, activation);
  }
}

// A block's int32 sums of one gate, the input part then the recurrent part (gate_pairs_thumb2
// reads both from one pointer).
struct StepSums {
  std::int32_t x[kUnitBlock];
  std::int32_t h[kUnitBlock];
};

// A step's operands for one batch row: x and h, and with interleaved weights the same widened
// (widen_pairs; null otherwise).
struct StepOperands {
  const std::int8_t* x;
  const std::int8_t* h;
  const std::int16_t* x_pairs;
  const std::int16_t* h_pairs;
};

// Units [j0, j0 + n) of one batch row (n <= kUnitBlock): the four gates from x and the previous
// output state h, then the cell (c, in place) and the new output state (into h_next; h itself
// is still read by the blocks after this one). kPerChannel: the multipliers are per unit;
// kInterleaved: the weights are interleaved (the panel kernel, on x and h widened).

template <bool kPerChannel, bool kInterleaved>
RNNCORE_Q8_INLINE void step_block(const Int8LstmParams& p, int j0, int n, const StepOperands& in, std::int16_t* c,
                                  std::int8_t* h_next) {
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t j = static_cast<std::size_t>(j0);
  const int x_words = interleaved4_words(p.input_size), h_words = interleaved4_words(p.hidden_size);
  StepSums sums;
  std::int32_t* const ax = sums.x;
  std::int32_t* const ah = sums.h;
  alignas(4) std::int16_t act[kGates][kUnitBlock];
  // Interleaved weights: a gate's two products (x and h), set up once a block but for the weights
  // and biases. j0 is a multiple of kUnitBlock, so of 4: the block starts at a panel.
  PanelProduct products[2] = {{nullptr, in.x_pairs, nullptr, ax, n, x_words}, {nullptr, in.h_pairs, nullptr, ah, n, h_words}};
  const std::size_t x_panels = kInterleaved ? interleaved4_offset(j0, 0, x_words) : j * I;
  const std::size_t h_panels = kInterleaved ? interleaved4_offset(j0, 0, h_words) : j * H;
#if defined(RNNCORE_Q8_CENTRED_TABLES)
  [[maybe_unused]] const std::int16_t* const sigmoid_centre = GateActivation<false>().centre;
  [[maybe_unused]] const std::int16_t* const tanh_centre = GateActivation<true>().centre;
#endif
  for (int g = 0; g < kGates; ++g) {
    // int32 accumulators as in TFLite (the kernels wrap, as TFLite's do, without overflow UB).
    if constexpr (!kInterleaved) {
      p.dot(p.w[g] + x_panels, n, p.input_size, in.x, p.x_bias[g] + j, ax);
      p.dot(p.r[g] + h_panels, n, p.hidden_size, in.h, p.h_bias[g] + j, ah);
    } else {
      products[0].w = p.w[g] + x_panels;
      products[0].bias = p.x_bias[g] + j;
      products[1].w = p.r[g] + h_panels;
      products[1].bias = p.h_bias[g] + j;
      p.dot_panels(products, 2);
    }
    int done = 0;  // units a step kernel or the assembly loop took; the rest go to the C loops below
#if !defined(RNNCORE_NO_HEAP)
    if (p.gate_activations != nullptr) {
      GateScaling s{p.x_mult[g], p.h_mult[g]};
      if constexpr (kPerChannel) {
        s.x_rows = p.x_mult_rows[g] + 2 * j;
        s.h_rows = p.h_mult_rows[g] + 2 * j;
      }
      done = p.gate_activations(n, ax, ah, s, g == 2 ? tanh_centre : sigmoid_centre, act[g]);
    } else  // (the Thumb-2 loop, where the build has it)
#endif
    {
#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
      // the usual case: per tensor, both multipliers shift right; an odd block's last unit goes below
      if (!kPerChannel && p.x_mult[g].shift < 0 && p.h_mult[g].shift < 0 && n >= 2) {
        done = n & ~1;
        gate_pairs_thumb2(done / 2, ax, act[g], p.x_mult[g], p.h_mult[g], g == 2 ? tanh_centre : sigmoid_centre);
      }
#endif
    }
    if (done == n) continue;
    if constexpr (!kPerChannel) {
      const StepMultiplier mx(p.x_mult[g]), mh(p.h_mult[g]);
      g == 2 ? gate_units_per_tensor<true>(n - done, ax + done, ah + done, act[g] + done, mx, mh)
             : gate_units_per_tensor<false>(n - done, ax + done, ah + done, act[g] + done, mx, mh);
    } else {  // each unit's own multipliers
      const std::int32_t* const xm = p.x_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const std::int32_t* const hm = p.h_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const auto x_mult = [xm](int u) { return StepMultiplier({xm[2 * u], xm[2 * u + 1]}); };
      const auto h_mult = [hm](int u) { return StepMultiplier({hm[2 * u], hm[2 * u + 1]}); };
      g == 2 ? gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<true>())
             : gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<false>());
    }
  }
  update_cells_any(p, j, n, act, c, h_next);
}

}  // namespace

#if !defined(RNNCORE_NO_HEAP)
const std::int16_t* int8_gate_table_centre(bool tanh) {
  return tanh ? gate_table_centre<true>() : gate_table_centre<false>();
}

const std::int16_t* int8_cell_tanh_centre(int integer_bits) {
  const std::int16_t* t = cell_tanh_table(integer_bits);
  return t != nullptr ? t + 32768 : nullptr;
}

int i32_gate_act_scalar(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act) {
  const auto lookup = [centre](std::int32_t z) { return centre[z]; };
  const StepMultiplier mx(s.x), mh(s.h);
  const auto x_mult = [&s, &mx](int u) { return s.x_rows ? StepMultiplier({s.x_rows[2 * u], s.x_rows[2 * u + 1]}) : mx; };
  const auto h_mult = [&s, &mh](int u) { return s.h_rows ? StepMultiplier({s.h_rows[2 * u], s.h_rows[2 * u + 1]}) : mh; };
  gate_units<false>(n, ax, ah, act, x_mult, h_mult, lookup);
  return n;
}

int i16_cell_update_scalar(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  Int8LstmParams p;  // what update_cells reads, and no step kernel
  p.cell_log2 = cu.cell_log2;
  p.cell_clip = cu.cell_clip;
  p.hidden_mult = cu.hidden_mult;
  p.hidden_zp = cu.hidden_zp;
  alignas(4) std::int16_t act[kGates][kUnitBlock];  // as step_block's (the Thumb-2 loops load pairs)
  for (int j0 = 0; j0 < n; j0 += kUnitBlock) {
    const int m = n - j0 < kUnitBlock ? n - j0 : kUnitBlock;
    for (int u = 0; u < m; ++u) {
      act[0][u] = gates.i[j0 + u];
      act[1][u] = gates.f[j0 + u];
      act[2][u] = gates.g[j0 + u];
      act[3][u] = gates.o[j0 + u];
    }
    update_cells_any(p, static_cast<std::size_t>(j0), m, act, c, h_next);
  }
  return n;
}
#endif

void int8_lstm_step(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                    std::int16_t* c, std::int8_t* scratch) {
  const int H = p.hidden_size;
  const std::size_t Hs = static_cast<std::size_t>(H), Is = static_cast<std::size_t>(p.input_size);
  // Interleaved weights: x and h widened once per step, after the new state, 4-byte aligned.
  std::int16_t* x_pairs = nullptr;
  std::int16_t* h_pairs = nullptr;
  if (p.layout == Int8WeightLayout::interleaved4) {
    const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(scratch + Hs) + 3u) & ~std::uintptr_t{3};
    x_pairs = reinterpret_cast<std::int16_t*>(at);
    h_pairs = x_pairs + 4 * interleaved4_words(p.input_size);
  }
  for (int b = 0; b < batch; ++b) {
    const std::size_t bs = static_cast<std::size_t>(b);
    std::int8_t* hb = h + bs * Hs;
    const StepOperands in{x + bs * Is, hb, x_pairs, h_pairs};
    if (x_pairs != nullptr) {
      widen_pairs(in.x, p.input_size, x_pairs);
      widen_pairs(hb, H, h_pairs);
    }
    for (int j0 = 0; j0 < H; j0 += kUnitBlock) {
      const int n = H - j0 < kUnitBlock ? H - j0 : kUnitBlock;
      std::int16_t* const cb = c + bs * Hs;
      const bool per_channel = p.x_mult_rows[0] != nullptr;
      if (x_pairs == nullptr) {
        per_channel ? step_block<true, false>(p, j0, n, in, cb, scratch) : step_block<false, false>(p, j0, n, in, cb, scratch);
      } else {
        per_channel ? step_block<true, true>(p, j0, n, in, cb, scratch) : step_block<false, true>(p, j0, n, in, cb, scratch);
      }
    }
    std::memcpy(hb, scratch, Hs);
  }
}

Status int8_lstm_sequence(const Int8LstmParams& p, int batch, int seq_len, const std::int8_t* x,
                          std::int8_t* y, std::int8_t* h, std::int16_t* c, std::int8_t* scratch,
                          std::size_t scratch_bytes) {
  detail::clear_error();
  RNNCORE_ENSURE(x != nullptr && h != nullptr && c != nullptr && scratch != nullptr, Status::null_pointer,
                 "int8_lstm_sequence: x, h, c and scratch must not be null");
  RNNCORE_ENSURE(p.hidden_size > 0 && p.input_size > 0 && p.w[0] != nullptr, Status::weights_not_packed,
                 "int8_lstm_sequence: the parameters were not prepared (int8_lstm_prepare)");
  RNNCORE_ENSURE(batch >= 0 && seq_len >= 0, Status::invalid_size,
                 "int8_lstm_sequence: batch %d and seq_len %d must be >= 0", batch, seq_len);
  RNNCORE_ENSURE(scratch_bytes >= int8_lstm_scratch_bytes(p), Status::buffer_too_small,
                 "int8_lstm_sequence: scratch has %zu bytes, needs %zu", scratch_bytes, int8_lstm_scratch_bytes(p));
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t T = static_cast<std::size_t>(seq_len);
  for (int b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < T; ++t) {
      int8_lstm_step(p, 1, x + (b * T + t) * I, h + b * H, c + b * H, scratch);
      if (y != nullptr) {
        for (std::size_t j = 0; j < H; ++j) y[(b * T + t) * H + j] = h[b * H + j];
      }
    }
  }
  return Status::ok;
}

}  // namespace q8
}  // namespace rnncore

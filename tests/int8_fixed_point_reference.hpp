// The integer LSTM's fixed-point functions as the integer LSTM first wrote them (now src/internal/int8_fixed_point.hpp): a literal,
// operation-by-operation transcription of the 16-bit gemmlowp arithmetic and of TFLite's
// MultiplyByQuantizedMultiplier (the one that matched LiteRT on the goldens). The library's
// faster formulations are tested against these (tests/test_int8_lstm.cpp): every int16 input of
// the activations, random and extreme inputs of the rescaling.
#pragma once

#include <cstdint>
#include <limits>

#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace q8 {
namespace reference {

constexpr std::int32_t kI16Min = -32768;
constexpr std::int32_t kI16Max = 32767;

// 16-bit fixed-point arithmetic (gemmlowp's FixedPoint<int16_t, N> semantics).

// Plain 16-bit addition or subtraction of raw values: wraps (two's complement).
inline std::int16_t wrap16(std::int32_t v) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(static_cast<std::uint32_t>(v) & 0xFFFFu));
}

inline std::int32_t wrap32(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v) & 0xFFFFFFFFu));
}

inline std::int16_t sat16(std::int32_t v) {
  return static_cast<std::int16_t>(v < kI16Min ? kI16Min : (v > kI16Max ? kI16Max : v));
}

// round(a · b / 2^15), ties away from zero; the one overflowing case (−1 · −1) gives the maximum.
inline std::int16_t rdhm16(std::int16_t a, std::int16_t b) {
  if (a == kI16Min && b == kI16Min) return static_cast<std::int16_t>(kI16Max);
  const std::int32_t ab = static_cast<std::int32_t>(a) * static_cast<std::int32_t>(b);
  const std::int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return static_cast<std::int16_t>((ab + nudge) / (1 << 15));  // division truncates toward zero
}

// x / 2^e rounded to nearest, ties away from zero (arithmetic shift plus a remainder test).
template <class T>
inline T rounding_divide_by_pot(T x, int e) {
  const std::int32_t xi = x;
  const std::int32_t mask = static_cast<std::int32_t>((std::uint32_t{1} << e) - 1u);  // e = 31 must not overflow
  const std::int32_t remainder = xi & mask;
  const std::int32_t threshold = (mask >> 1) + (xi < 0 ? 1 : 0);
  return static_cast<T>((xi >> e) + (remainder > threshold ? 1 : 0));
}

// x · 2^e for e > 0, saturating at the int16 range.
inline std::int16_t sat_shl16(std::int16_t x, int e) {
  const std::int32_t threshold = (std::int32_t{1} << (15 - e)) - 1;
  if (x > threshold) return static_cast<std::int16_t>(kI16Max);
  if (x < -threshold) return static_cast<std::int16_t>(kI16Min);
  return static_cast<std::int16_t>(static_cast<std::int32_t>(x) * (std::int32_t{1} << e));
}

// (a + b) / 2 rounded half away from zero, in 32 bits.
inline std::int16_t rounding_half_sum16(std::int16_t a, std::int16_t b) {
  const std::int32_t sum = static_cast<std::int32_t>(a) + b;
  return static_cast<std::int16_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
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

// exp(a) for a in [−1/4, 0), Q0.15 in and out: fourth-order Taylor expansion around −1/8.
inline std::int16_t exp_on_interval_quarter(std::int16_t a) {
  const std::int16_t x = wrap16(a + (1 << 12));  // a + 1/8
  const std::int16_t x2 = rdhm16(x, x);
  const std::int16_t x3 = rdhm16(x2, x);
  const std::int16_t x4 = rdhm16(x2, x2);
  const std::int16_t x4_over_4 = rounding_divide_by_pot<std::int16_t>(x4, 2);
  const std::int16_t poly = rounding_divide_by_pot<std::int16_t>(
      wrap16(rdhm16(wrap16(x4_over_4 + x3), kOneThird) + x2), 1);  // x²/2 + x³/6 + x⁴/24
  return sat16(static_cast<std::int32_t>(kExpMinusEighth) + rdhm16(kExpMinusEighth, wrap16(x + poly)));
}

// exp(a) for a ≤ 0 given with `ib` integer bits (Q(ib).(15−ib)), result in Q0.15: exp of the
// residue in [−1/4, 0), then one factor exp(−2^k) per set bit of the rest (k = −2 .. 4).
inline std::int16_t exp_on_negative_values(std::int16_t a, int ib) {
  const int frac = 15 - ib;
  const std::int32_t quarter = std::int32_t{1} << (frac - 2);
  const std::int16_t a_mod_quarter_minus_quarter = wrap16((a & (quarter - 1)) - quarter);
  std::int16_t result = exp_on_interval_quarter(
      ib > 0 ? sat_shl16(a_mod_quarter_minus_quarter, ib) : a_mod_quarter_minus_quarter);
  const std::int32_t remainder = wrap16(a_mod_quarter_minus_quarter - a);
  struct Factor {
    int exponent;
    std::int16_t value;  // exp(−2^exponent) in Q0.15
  };
  static constexpr Factor kFactors[] = {
      {-2, c16(1672461947)}, {-1, c16(1302514674)}, {0, c16(790015084)}, {1, c16(290630308)},
      {2, c16(39332535)},    {3, c16(720401)},      {4, c16(242)},
  };
  for (const Factor& f : kFactors) {
    if (ib > f.exponent && (remainder & (std::int32_t{1} << (frac + f.exponent))) != 0) {
      result = rdhm16(result, f.value);
    }
  }
  if (ib > 5) {
    const std::int16_t clamp = c16(-(std::int32_t{1} << (36 - ib)));  // −32 in Q(ib)
    if (a < clamp) result = 0;
  }
  if (a == 0) result = kOneQ0;
  return result;
}

// Newton–Raphson reciprocal of (1 + a)/2 for a in [0, 1], in Q2.13 (three iterations).
inline std::int16_t reciprocal_half_denominator(std::int16_t half_denominator) {
  std::int16_t x = wrap16(k48Over17 + rdhm16(half_denominator, kMinus32Over17));
  for (int i = 0; i < 3; ++i) {
    const std::int16_t half_denominator_times_x = rdhm16(half_denominator, x);
    const std::int16_t one_minus = wrap16(kOneQ2 - half_denominator_times_x);
    x = wrap16(x + sat_shl16(rdhm16(x, one_minus), 2));
  }
  return x;
}

// 1 / (1 + a), a in [0, 1], Q0.15.
inline std::int16_t one_over_one_plus_x(std::int16_t a) {
  return sat_shl16(reciprocal_half_denominator(rounding_half_sum16(a, kOneQ0)), 1);
}

// (1 − a) / (1 + a), a in [0, 1], Q0.15.
inline std::int16_t one_minus_x_over_one_plus_x(std::int16_t a) {
  return sat_shl16(wrap16(reciprocal_half_denominator(rounding_half_sum16(a, kOneQ0)) - kOneQ2), 2);
}

inline std::int32_t sat_rdhm32(std::int32_t a, std::int32_t b) {
  if (a == std::numeric_limits<std::int32_t>::min() && b == a) return std::numeric_limits<std::int32_t>::max();
  const std::int64_t ab = static_cast<std::int64_t>(a) * b;
  const std::int64_t nudge = ab >= 0 ? (std::int64_t{1} << 30) : (1 - (std::int64_t{1} << 30));
  return static_cast<std::int32_t>((ab + nudge) / (std::int64_t{1} << 31));
}


inline std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  // TFLite multiplies in int32; with left > 0 that wraps on overflow, reproduced without UB.
  const std::int32_t shifted = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) << left);
  return rounding_divide_by_pot<std::int32_t>(sat_rdhm32(shifted, m.multiplier), right);
}

inline std::int16_t sigmoid_q3_12(std::int16_t x) {
  if (x == 0) return kHalfQ0;
  const std::int16_t abs_x = x > 0 ? x : wrap16(-static_cast<std::int32_t>(x));
  const std::int16_t positive = one_over_one_plus_x(exp_on_negative_values(wrap16(-static_cast<std::int32_t>(abs_x)), 3));
  return x > 0 ? positive : wrap16(kOneQ0 - positive);
}

inline std::int16_t tanh_q(std::int16_t x, int integer_bits) {
  if (integer_bits < 0 || integer_bits > 6) return 0;
  if (x == 0) return 0;
  const std::int16_t neg_abs = x < 0 ? x : wrap16(-static_cast<std::int32_t>(x));
  // tanh|x| = (1 − e^(−2|x|)) / (1 + e^(−2|x|)); −2|x| is the same raw value with one more integer bit
  const std::int16_t t = one_minus_x_over_one_plus_x(exp_on_negative_values(neg_abs, integer_bits + 1));
  return x < 0 ? wrap16(-static_cast<std::int32_t>(t)) : t;
}

}  // namespace reference
}  // namespace q8
}  // namespace rnncore

// Element-wise int8 ADD and MUL as LiteRT runs them on x86, where its default XNNPACK delegate
// takes the ops: a Keras Bidirectional with merge_mode "sum" (ADD), "mul" (MUL) or "ave" (ADD,
// then MUL by a quantized constant 0.5). docs/int8.md, "Bidirectional layers".
//
// ADD (XNNPACK's qs8 vadd): each operand's scale over the output scale, formed in float32; the
// larger gives a shift s = 20 − its binary exponent, each ratio times 2^s rounded to nearest even is
// its integer multiplier (< 2^21), and out = clamp(((bias + a·m_a + b·m_b) >> s) + z_out), bias =
// 2^(s−1) − m_a·z_a − m_b·z_b, the shift arithmetic. MUL (XNNPACK's qs8 vmul, "fp32"): the product
// (a − z_a)(b − z_b) in int32, times (s_a·s_b)/s_out in float32, clamped to [−128 − z_out,
// 127 − z_out], rounded to nearest even, plus z_out. Both checked against LiteRT exhaustively (all
// 65,536 operand pairs, 6 quantizations each). LiteRT's own built-in kernels (without XNNPACK) and
// XNNPACK on ARM (whose MUL rounds in fixed point) can differ in the last bit.
#ifndef RNNCORE_SRC_INTERNAL_INT8_ELEMENTWISE_HPP
#define RNNCORE_SRC_INTERNAL_INT8_ELEMENTWISE_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/int8.h"
#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace q8 {

/// An int8 quantization: real = scale · (q − zero_point).
struct Int8Quant {
  float scale = 0.0f;
  std::int32_t zero_point = 0;
};

/// A prepared ADD: the C API's plain struct, so that export-c can write one as a constant.
using Int8AddParams = ::rnncore_int8_add;
/// A prepared MUL (scale: (s_a · s_b) / s_out in float32), the C API's struct as well.
using Int8MulParams = ::rnncore_int8_mul;

/// Errors: invalid_size for scales not finite and positive or zero points outside int8;
/// unsupported where XNNPACK would not take the op (an operand's scale over the output's outside
/// [2^-10, 2^8)), so that LiteRT would run its own kernel instead.
Status int8_add_prepare(Int8Quant a, Int8Quant b, Int8Quant out, Int8AddParams* p);
/// Errors as int8_add_prepare; unsupported for (s_a · s_b) / s_out outside [2^-16, 2^8).
Status int8_mul_prepare(Int8Quant a, Int8Quant b, Int8Quant out, Int8MulParams* p);

/// out[i] = a[i] + b[i] for n values (out may be a or b).
void int8_add(const Int8AddParams& p, std::size_t n, const std::int8_t* a, const std::int8_t* b, std::int8_t* out);
/// out[i] = a[i] · b[i] for n values (out may be a or b).
void int8_mul(const Int8MulParams& p, std::size_t n, const std::int8_t* a, const std::int8_t* b, std::int8_t* out);
/// out[i] = a[i] · b for n values and one constant operand b (out may be a).
void int8_mul_constant(const Int8MulParams& p, std::size_t n, const std::int8_t* a, std::int8_t b, std::int8_t* out);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_ELEMENTWISE_HPP

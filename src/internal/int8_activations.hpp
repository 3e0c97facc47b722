// The int8 activations of a classifier head after an int8 LSTM, as LiteRT runs them.
//
// Sigmoid and tanh (a Keras Dense with activation="sigmoid" / "tanh": a FULLY_CONNECTED, then a
// LOGISTIC or TANH op) are a table of the 256 int8 inputs, built as TFLite builds it: the input
// dequantized in float32, the function in float32 (1 / (1 + expf(−v)), tanhf), times the float32
// reciprocal of the output scale, rounded half away from zero, plus the output zero point, clamped.
//
// The softmax over the last axis (activation="softmax": a SOFTMAX op) is TFLite's int8 SOFTMAX:
// a table of 256 float32 values exp(−s·β·v) for every distance v from the row's maximum (s: the
// input scale), a float32 sum in element order, each probability table · 1/(sum · output scale),
// rounded half up, plus the output zero point, clamped to int8.
//
// Bit-exact with LiteRT where the C library's expf and tanhf are LiteRT's (the tables are built
// with them, as TFLite builds its own). docs/int8.md, "Classifier heads". Plain C++: no
// allocation, no exceptions.
#ifndef RNNCORE_SRC_INTERNAL_INT8_ACTIVATIONS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_ACTIVATIONS_HPP

#include <cstdint>

#include "rnncore/int8.h"
#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace q8 {

/// A function of a lookup-table activation.
enum class TableActivation { sigmoid, tanh };

/// table[v + 128] = the int8 output for the int8 input v. Errors: invalid_size for scales not
/// finite and positive or zero points outside int8.
Status int8_activation_table(TableActivation f, float input_scale, std::int32_t input_zp, float output_scale,
                             std::int32_t output_zp, std::int8_t table[256]);

/// y[i] = table[x[i] + 128] for n values.
void int8_lookup(const std::int8_t table[256], int n, const std::int8_t* x, std::int8_t* y);

/// A prepared softmax: its table (table[255 − v] = expf(−input_scale · beta · v)) and output
/// quantization; the C API's plain struct, so that export-c can write one as a constant.
using Int8SoftmaxParams = ::rnncore_int8_softmax;

/// Fills the table. Errors: invalid_size for scales or beta not finite and positive, or an output
/// zero point outside int8.
Status int8_softmax_prepare(float input_scale, float beta, float output_scale, std::int32_t output_zp,
                            Int8SoftmaxParams* out);

/// y [rows, n] = softmax of x [rows, n] along n. No checks: prepare validated the params.
void int8_softmax(const Int8SoftmaxParams& p, int rows, int n, const std::int8_t* x, std::int8_t* y);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_ACTIVATIONS_HPP

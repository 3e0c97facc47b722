// An integer fully connected layer (a Keras Dense after an int8 LSTM), as LiteRT runs TFLite's
// int8 FULLY_CONNECTED on its default CPU path (the XNNPACK delegate): int8 input and output
// (per tensor), int8 symmetric weights per output channel, int32 bias, and XNNPACK's "fp32"
// requantization — the int32 sum times a float32 scale (input · weight scale / output scale,
// formed in float32), clamped, rounded half to even, plus the output zero point. docs/int8.md.
// Plain C++: no allocation, no exceptions; memory is the caller's.
#ifndef RNNCORE_SRC_INTERNAL_INT8_DENSE_HPP
#define RNNCORE_SRC_INTERNAL_INT8_DENSE_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/rnncore.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {

/// What a quantized Dense layer states.
struct Int8DenseQuantization {
  float input_scale = 0.0f;
  std::int32_t input_zp = 0;
  const float* w_scales = nullptr;  ///< [out] per output channel, or [1] per tensor (w_scale_count)
  int w_scale_count = 0;
  float output_scale = 0.0f;
  std::int32_t output_zp = 0;
  bool relu = false;  ///< the fused activation: RELU, else none
};

/// Prepared: pointers into the caller's weights and the storage prepare filled.
struct Int8DenseParams {
  int in_size = 0, out_size = 0;
  const std::int8_t* w = nullptr;      ///< [out, in] row-major
  const std::int32_t* bias = nullptr;  ///< bias − input_zp · row sums  [out]
  const float* scale = nullptr;        ///< requantization scale per output  [out]
  std::int32_t output_zp = 0, act_min = -128, act_max = 127;
  DotRowsFn dot = nullptr;
};

/// Checks the quantization and fills `bias_storage` (int32 [out]) and `scale_storage` (float
/// [out]). `bias` may be null. Errors: null_pointer; invalid_size (sizes outside 1..65536, scales
/// not finite and positive, zero points outside int8, a folded bias beyond int32).
Status int8_dense_prepare(const Int8DenseQuantization& q, int in_size, int out_size, const std::int8_t* w,
                          const std::int32_t* bias, std::int32_t* bias_storage, float* scale_storage,
                          Int8DenseParams* out);

/// y [batch, out] from x [batch, in]. No checks: prepare validated the params.
void int8_dense(const Int8DenseParams& p, int batch, const std::int8_t* x, std::int8_t* y);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_DENSE_HPP

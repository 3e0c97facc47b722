// The int8 head activations of src/internal/int8_activations.hpp: sigmoid / tanh tables, softmax.
#include "src/internal/int8_activations.hpp"

#include <cmath>

#include "src/internal/error.hpp"

namespace rnncore {
namespace q8 {

namespace {
bool positive_finite(float v) { return std::isfinite(v) && v > 0.0f; }
bool int8_zero_point(std::int32_t zp) { return zp >= -128 && zp <= 127; }
// Bounds a value to be rounded to well within int32 (tiny output scales make it huge); anything
// beyond ±1000 clamps to the same int8 either way.
float bounded(float v) { return v > 1000.0f ? 1000.0f : v < -1000.0f ? -1000.0f : v; }
}  // namespace

Status int8_activation_table(TableActivation f, float input_scale, std::int32_t input_zp, float output_scale,
                             std::int32_t output_zp, std::int8_t table[256]) {
  RNNCORE_ENSURE(positive_finite(input_scale) && positive_finite(output_scale), Status::invalid_size,
                 "int8 %s: input scale %g and output scale %g must be finite and positive",
                 f == TableActivation::sigmoid ? "sigmoid" : "tanh", static_cast<double>(input_scale),
                 static_cast<double>(output_scale));
  RNNCORE_ENSURE(int8_zero_point(input_zp) && int8_zero_point(output_zp), Status::invalid_size,
                 "int8 activation: zero points %d and %d must be in int8", static_cast<int>(input_zp),
                 static_cast<int>(output_zp));
  const float inverse = 1.0f / output_scale;
  for (int v = -128; v <= 127; ++v) {
    const float x = input_scale * static_cast<float>(v - input_zp);
    const float y = f == TableActivation::sigmoid ? 1.0f / (1.0f + std::exp(-x)) : std::tanh(x);
    const long q = std::lround(bounded(y * inverse)) + output_zp;  // half away from zero, as std::round
    table[v + 128] = static_cast<std::int8_t>(q < -128 ? -128 : q > 127 ? 127 : q);
  }
  return Status::ok;
}

void int8_lookup(const std::int8_t table[256], int n, const std::int8_t* x, std::int8_t* y) {
  for (int i = 0; i < n; ++i) y[i] = table[x[i] + 128];
}

Status int8_softmax_prepare(float input_scale, float beta, float output_scale, std::int32_t output_zp,
                            Int8SoftmaxParams* out) {
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "%s", "int8 softmax: out is null");
  RNNCORE_ENSURE(positive_finite(input_scale) && positive_finite(beta) && positive_finite(output_scale),
                 Status::invalid_size, "int8 softmax: input scale %g, beta %g and output scale %g must be finite and positive",
                 static_cast<double>(input_scale), static_cast<double>(beta), static_cast<double>(output_scale));
  RNNCORE_ENSURE(int8_zero_point(output_zp), Status::invalid_size,
                 "int8 softmax: output zero point %d is outside int8", static_cast<int>(output_zp));
  // TFLite forms −scale·β in float32 and multiplies by the distance in float32.
  const float step = -input_scale * beta;
  for (int v = 0; v < 256; ++v) out->table[255 - v] = std::exp(step * static_cast<float>(v));
  out->output_scale = output_scale;
  out->output_zp = output_zp;
  return Status::ok;
}

void int8_softmax(const Int8SoftmaxParams& p, int rows, int n, const std::int8_t* x, std::int8_t* y) {
  for (int r = 0; r < rows; ++r, x += n, y += n) {
    // Inputs as uint8 (int8 + 128), so that the table index is 255 − (max − x).
    int max_u = 0;
    for (int j = 0; j < n; ++j) max_u = x[j] + 128 > max_u ? x[j] + 128 : max_u;
    const float* from_max = p.table + (255 - max_u);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += from_max[x[j] + 128];
    const float inv = 1.0f / (sum * p.output_scale);
    for (int j = 0; j < n; ++j) {
      const std::int32_t q = static_cast<std::int32_t>(bounded(from_max[x[j] + 128] * inv + 0.5f)) + p.output_zp;
      y[j] = static_cast<std::int8_t>(q < -128 ? -128 : q > 127 ? 127 : q);
    }
  }
}

}  // namespace q8
}  // namespace rnncore

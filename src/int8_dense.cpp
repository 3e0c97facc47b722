// The integer fully connected layer (src/internal/int8_dense.hpp).
#include "src/internal/int8_dense.hpp"

#include <cmath>
#include <limits>

#include "src/internal/error.hpp"

namespace rnncore {
namespace q8 {
namespace {

// round(v) half to even, v within int32: std::nearbyint in the default rounding mode. On a 32-bit
// ARM FPU one VCVTR (the FPSCR's mode, round to nearest even unless changed, as nearbyint reads
// it) where GCC calls newlib's nearbyintf and rintf: 3 instructions instead of about 35 per output
// on a Cortex-M4F (a Dense head over a 65-symbol vocabulary at every step: 0.2 % of the text model).
inline std::int32_t round_to_int(float v) {
#if defined(__arm__) && defined(__ARM_FP) && (__ARM_FP & 4)
  std::int32_t r;
  __asm__("vcvtr.s32.f32 %1, %1\n\tvmov %0, %1" : "=r"(r), "+t"(v));
  return r;
#else
  return static_cast<std::int32_t>(std::nearbyint(v));
#endif
}

}  // namespace

Status int8_dense_prepare(const Int8DenseQuantization& q, int in_size, int out_size, const std::int8_t* w,
                          const std::int32_t* bias, std::int32_t* bias_storage, float* scale_storage,
                          Int8DenseParams* out) {
  detail::clear_error();
  RNNCORE_ENSURE(out != nullptr && w != nullptr && bias_storage != nullptr && scale_storage != nullptr &&
                     q.w_scales != nullptr,
                 Status::null_pointer, "int8_dense_prepare: out, w, the storage and the weight scales must not be null");
  RNNCORE_ENSURE(in_size > 0 && out_size > 0 && in_size <= (1 << 16) && out_size <= (1 << 16), Status::invalid_size,
                 "int8_dense_prepare: sizes %d x %d must be in 1..65536", out_size, in_size);
  RNNCORE_ENSURE(q.w_scale_count == 1 || q.w_scale_count == out_size, Status::invalid_size,
                 "int8_dense_prepare: %d weight scales for %d outputs (1 or one per output)", q.w_scale_count, out_size);
  const auto zp_ok = [](std::int32_t zp) { return zp >= -128 && zp <= 127; };
  RNNCORE_ENSURE(zp_ok(q.input_zp) && zp_ok(q.output_zp), Status::invalid_size,
                 "int8_dense_prepare: zero points %d and %d must be in -128..127", static_cast<int>(q.input_zp),
                 static_cast<int>(q.output_zp));
  const auto scale_ok = [](float s) { return std::isfinite(s) && s > 0.0f; };
  RNNCORE_ENSURE(scale_ok(q.input_scale) && scale_ok(q.output_scale), Status::invalid_size,
                 "int8_dense_prepare: input scale %g and output scale %g must be finite and positive",
                 static_cast<double>(q.input_scale), static_cast<double>(q.output_scale));
  Int8DenseParams p;
  p.in_size = in_size;
  p.out_size = out_size;
  p.w = w;
  for (int j = 0; j < out_size; ++j) {
    const float ws = q.w_scales[q.w_scale_count == 1 ? 0 : j];
    RNNCORE_ENSURE(scale_ok(ws), Status::invalid_size, "int8_dense_prepare: weight scale %g of output %d",
                   static_cast<double>(ws), j);
    // Formed in float32 as XNNPACK forms it: (input scale · weight scale) / output scale.
    const float s = q.input_scale * ws / q.output_scale;
    RNNCORE_ENSURE(scale_ok(s), Status::invalid_size, "int8_dense_prepare: requantization scale of output %d is %g",
                   j, static_cast<double>(s));
    scale_storage[j] = s;
    std::int64_t sum = 0;
    for (int k = 0; k < in_size; ++k) sum += w[static_cast<std::size_t>(j) * in_size + k];
    const std::int64_t b = (bias != nullptr ? bias[j] : 0) - static_cast<std::int64_t>(q.input_zp) * sum;
    RNNCORE_ENSURE(b >= std::numeric_limits<std::int32_t>::min() && b <= std::numeric_limits<std::int32_t>::max(),
                   Status::invalid_size, "int8_dense_prepare: folded bias of output %d (%lld) overflows int32", j,
                   static_cast<long long>(b));
    bias_storage[j] = static_cast<std::int32_t>(b);
  }
  p.bias = bias_storage;
  p.scale = scale_storage;
  p.output_zp = q.output_zp;
  p.act_min = q.relu ? (q.output_zp > -128 ? q.output_zp : -128) : -128;
  p.act_max = 127;
  p.dot = int8_best_dot_kernel().fn;
  *out = p;
  return Status::ok;
}

void int8_dense(const Int8DenseParams& p, int batch, const std::int8_t* x, std::int8_t* y) {
  constexpr int kBlock = 8;  // outputs per kernel call (the accumulators live on the stack)
  std::int32_t acc[kBlock];
  const float lo = static_cast<float>(p.act_min - p.output_zp), hi = static_cast<float>(p.act_max - p.output_zp);
  for (int b = 0; b < batch; ++b) {
    const std::int8_t* xb = x + static_cast<std::size_t>(b) * p.in_size;
    std::int8_t* yb = y + static_cast<std::size_t>(b) * p.out_size;
    for (int j0 = 0; j0 < p.out_size; j0 += kBlock) {
      const int n = p.out_size - j0 < kBlock ? p.out_size - j0 : kBlock;
      p.dot(p.w + static_cast<std::size_t>(j0) * p.in_size, n, p.in_size, xb, p.bias + j0, acc);
      for (int u = 0; u < n; ++u) {
        // XNNPACK's fp32 requantization: float product, clamp, round half to even, zero point.
        float v = static_cast<float>(acc[u]) * p.scale[j0 + u];
        v = v < lo ? lo : (v > hi ? hi : v);
        yb[j0 + u] = static_cast<std::int8_t>(round_to_int(v) + p.output_zp);
      }
    }
  }
}

}  // namespace q8
}  // namespace rnncore

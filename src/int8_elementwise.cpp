// The element-wise int8 ADD and MUL of src/internal/int8_elementwise.hpp.
#include "src/internal/int8_elementwise.hpp"

#include <cmath>
#include <cstring>

#include "src/internal/error.hpp"

namespace rnncore {
namespace q8 {

namespace {

bool valid(Int8Quant q) { return std::isfinite(q.scale) && q.scale > 0.0f && q.zero_point >= -128 && q.zero_point <= 127; }

std::uint32_t bits_of(float v) {
  std::uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float float_of(std::uint32_t u) {
  float v = 0.0f;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

std::int8_t clamp8(std::int32_t v) { return static_cast<std::int8_t>(v < -128 ? -128 : v > 127 ? 127 : v); }

// The MUL's requantization of one int32 product: float32 multiply, clamp, round half to even.
std::int8_t requantize_product(const Int8MulParams& p, std::int32_t product) {
  float v = static_cast<float>(product) * p.scale;
  const float lo = static_cast<float>(-128 - p.output_zp), hi = static_cast<float>(127 - p.output_zp);
  v = v < lo ? lo : v > hi ? hi : v;
  return static_cast<std::int8_t>(static_cast<std::int32_t>(std::nearbyint(v)) + p.output_zp);
}

}  // namespace

Status int8_add_prepare(Int8Quant a, Int8Quant b, Int8Quant out, Int8AddParams* p) {
  RNNCORE_ENSURE(p != nullptr, Status::null_pointer, "%s", "int8 add: params is null");
  RNNCORE_ENSURE(valid(a) && valid(b) && valid(out), Status::invalid_size,
                 "int8 add: scales %g, %g, %g must be finite and positive and zero points %d, %d, %d in int8",
                 static_cast<double>(a.scale), static_cast<double>(b.scale), static_cast<double>(out.scale),
                 static_cast<int>(a.zero_point), static_cast<int>(b.zero_point), static_cast<int>(out.zero_point));
  const float ra = a.scale / out.scale, rb = b.scale / out.scale;
  RNNCORE_ENSURE(ra >= 0x1.0p-10f && ra < 0x1.0p+8f && rb >= 0x1.0p-10f && rb < 0x1.0p+8f, Status::unsupported,
                 "int8 add: operand scales over the output scale %g and %g lie outside [2^-10, 2^8), where "
                 "LiteRT's XNNPACK delegate does not take the op",
                 static_cast<double>(ra), static_cast<double>(rb));
  const float larger = ra > rb ? ra : rb;
  const int exponent = static_cast<int>(bits_of(larger) >> 23) - 127;
  const int shift = 20 - exponent;  // in [12, 30]
  // ratio · 2^shift, exact (the exponent field moved), rounded to nearest even: < 2^21.
  const auto multiplier = [shift](float r) {
    return static_cast<std::int32_t>(std::nearbyint(float_of(bits_of(r) + (static_cast<std::uint32_t>(shift) << 23))));
  };
  p->a_multiplier = multiplier(ra);
  p->b_multiplier = multiplier(rb);
  p->shift = shift;
  p->bias = (std::int32_t{1} << (shift - 1)) - p->a_multiplier * a.zero_point - p->b_multiplier * b.zero_point;
  p->output_zp = out.zero_point;
  return Status::ok;
}

Status int8_mul_prepare(Int8Quant a, Int8Quant b, Int8Quant out, Int8MulParams* p) {
  RNNCORE_ENSURE(p != nullptr, Status::null_pointer, "%s", "int8 mul: params is null");
  RNNCORE_ENSURE(valid(a) && valid(b) && valid(out), Status::invalid_size,
                 "int8 mul: scales %g, %g, %g must be finite and positive and zero points %d, %d, %d in int8",
                 static_cast<double>(a.scale), static_cast<double>(b.scale), static_cast<double>(out.scale),
                 static_cast<int>(a.zero_point), static_cast<int>(b.zero_point), static_cast<int>(out.zero_point));
  const float product_scale = a.scale * b.scale;
  const float scale = product_scale / out.scale;
  RNNCORE_ENSURE(scale >= 0x1.0p-16f && scale < 0x1.0p+8f, Status::unsupported,
                 "int8 mul: the product's scale over the output scale %g lies outside [2^-16, 2^8), where "
                 "LiteRT's XNNPACK delegate does not take the op",
                 static_cast<double>(scale));
  p->a_zp = a.zero_point;
  p->b_zp = b.zero_point;
  p->output_zp = out.zero_point;
  p->scale = scale;
  return Status::ok;
}

void int8_add(const Int8AddParams& p, std::size_t n, const std::int8_t* a, const std::int8_t* b, std::int8_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    // |a·m| < 2^28 and the bias < 2^30 + 2^29: no int32 overflow.
    const std::int32_t acc = p.bias + a[i] * p.a_multiplier + b[i] * p.b_multiplier;
    out[i] = clamp8((acc >> p.shift) + p.output_zp);
  }
}

void int8_mul(const Int8MulParams& p, std::size_t n, const std::int8_t* a, const std::int8_t* b, std::int8_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = requantize_product(p, (a[i] - p.a_zp) * (b[i] - p.b_zp));
}

void int8_mul_constant(const Int8MulParams& p, std::size_t n, const std::int8_t* a, std::int8_t b, std::int8_t* out) {
  const std::int32_t bb = b - p.b_zp;
  for (std::size_t i = 0; i < n; ++i) out[i] = requantize_product(p, (a[i] - p.a_zp) * bb);
}

}  // namespace q8
}  // namespace rnncore

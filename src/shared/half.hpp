// IEEE binary16 and bfloat16 conversions (exact, round-to-nearest-even on narrowing): the one
// definition, for the host (weights, the SIMD backend's packing, .npy files) and for GPU kernels
// (src/gpu/device/kernels.hpp's weight loads and packing), which include it under nvcc and hipcc. Bits move
// between float and uint32 by memcpy on the host and the compilers' bit-cast intrinsics on the
// device (__uint_as_float, __float_as_uint), never through a union.
#ifndef RNNCORE_SRC_SHARED_HALF_HPP
#define RNNCORE_SRC_SHARED_HALF_HPP

#include <cstdint>
#include <cstring>

/// Host and device under nvcc / hipcc, host only otherwise (as RNNCORE_HD of rnncore/philox.h).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define RNNCORE_HALF_HD __host__ __device__
#else
#define RNNCORE_HALF_HD
#endif

namespace rnncore {
namespace detail {

RNNCORE_HALF_HD inline float bits_to_f32(std::uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
RNNCORE_HALF_HD inline std::uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

RNNCORE_HALF_HD inline float bf16_to_f32(std::uint16_t h) { return bits_to_f32(static_cast<std::uint32_t>(h) << 16); }

// f32 rounded to the nearest bf16 (ties to even; a NaN quieted), still as an f32: without a branch,
// so that a loop of it vectorizes (the training copy of bf16 weights).
RNNCORE_HALF_HD inline float round_to_bf16(float f) {
  const std::uint32_t u = f32_to_bits(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u, quiet_nan = (u & 0xffff0000u) | 0x400000u;
  return bits_to_f32((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

RNNCORE_HALF_HD inline std::uint16_t f32_to_bf16(float f) {
  return static_cast<std::uint16_t>(f32_to_bits(round_to_bf16(f)) >> 16);
}

// Without a branch (the GPU kernels widen f16 weights in their inner loops: with the branches the
// H200 ran their f16 forward 1.8-2.3x slower, bench/results/gpu_h200_2026-11-30c/): the
// exponent and mantissa shifted into f32's places, rebiased from 15 to 127 for normal numbers; a
// subnormal (m · 2^-24) as 2^-14 · (1 + m/1024) − 2^-14, exact; infinities and NaNs (payload kept)
// with f32's top exponent. Only integer operations and one f32 subtraction of normal numbers.
RNNCORE_HALF_HD inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = static_cast<std::uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa, in f32's places
  const std::uint32_t normal = em + 0x38000000u;                            // exponent + (127 - 15)
  const float subnormal = bits_to_f32(normal + 0x00800000u) - bits_to_f32(0x38800000u);  // ... − 2^-14
  const std::uint32_t special = em | 0x7f800000u;
  const std::uint32_t magnitude = em >= 0x0f800000u ? special : em >= 0x00800000u ? normal : f32_to_bits(subnormal);
  return bits_to_f32(sign | magnitude);
}

RNNCORE_HALF_HD inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = f32_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // nan
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 → 15
  r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  return static_cast<std::uint16_t>(sign | r);
}

/// f32 → TF32 (1 + 8 + 10 bits) as the 32-bit pattern the tensor cores read, rounded to nearest
/// with ties away from zero: the rounding of PTX cvt.rna.tf32.f32, written as bit arithmetic so
/// that the kernels and the emulator (tests/gpu/emulator.hpp) run the very same rounding. Adding
/// half a unit of the 10th mantissa bit to the magnitude and clearing the 13 bits below rounds
/// ties away; a carry into the exponent is the right result (up to +-inf past the largest TF32).
/// Inf passes unchanged; NaN gets its quiet bit, so that it stays NaN without its 13 low bits.
RNNCORE_HALF_HD inline std::uint32_t f32_to_tf32(float f) {
  const std::uint32_t u = f32_to_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) != 0 ? u | 0x00400000u : u;
  return (u + 0x1000u) & 0xffffe000u;
}
/// A TF32 pattern's value (the 13 low bits, which the tensor cores ignore, cleared).
RNNCORE_HALF_HD inline float tf32_to_f32(std::uint32_t t) { return bits_to_f32(t & 0xffffe000u); }

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_SHARED_HALF_HPP

// What the int8 matrix-vector kernels (simd/i8_dot_<isa>.cpp) share: the scalar remainder of a
// row. Header-only and free of intrinsics, so that each kernel's unit compiles it with its own flags.
#ifndef RNNCORE_SIMD_I8_DOT_TAIL_HPP
#define RNNCORE_SIMD_I8_DOT_TAIL_HPP

#include <cstdint>

namespace rnncore {
namespace q8 {
namespace tail {

// acc + Σ_{k0 <= k < k_size} row[k] · v[k], wrapping (unsigned, as the scalar kernel sums).
inline std::int32_t dot_rest(std::int32_t acc, const std::int8_t* row, const std::int8_t* v, int k0, int k_size) {
  std::uint32_t a = static_cast<std::uint32_t>(acc);
  for (int k = k0; k < k_size; ++k)
    a += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(v[k]));
  return static_cast<std::int32_t>(a);
}

}  // namespace tail
}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SIMD_I8_DOT_TAIL_HPP

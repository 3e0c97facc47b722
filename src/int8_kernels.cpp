// The integer LSTM's matrix-vector kernels (src/internal/int8_kernels.hpp): the portable one and
// the list of those this build and CPU have.
#include "src/internal/int8_kernels.hpp"

#include <cstddef>
#include <cstdint>

namespace rnncore {
namespace q8 {

void i8_dot_rows_scalar(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                        const std::int32_t* bias, std::int32_t* out) {
  for (int j = 0; j < rows; ++j) {
    const std::int8_t* row = w + static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size);
    // Unsigned, so that a sum beyond int32 (reachable only with a bias near the limits) wraps as
    // TFLite's int32 accumulator does, without undefined behaviour.
    std::uint32_t acc = static_cast<std::uint32_t>(bias[j]);
    for (int k = 0; k < k_size; ++k) {
      acc += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(v[k]));
    }
    out[j] = static_cast<std::int32_t>(acc);
  }
}

namespace {
const DotRowsKernel kKernels[] = {
    {"i8_dot_rows_scalar", i8_dot_rows_scalar},
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    // Every ARMv7E-M and ARMv7-A core has it (compile-time feature, no run-time check needed).
    {"i8_dot_rows_dsp_4x16", i8_dot_rows_dsp_4x16},
#endif
};
}  // namespace

const DotRowsKernel* int8_dot_kernels(int* count) {
  *count = static_cast<int>(sizeof kKernels / sizeof kKernels[0]);
  return kKernels;
}

DotRowsKernel int8_best_dot_kernel() {
  int n = 0;
  const DotRowsKernel* k = int8_dot_kernels(&n);
  return k[n - 1];
}

}  // namespace q8
}  // namespace rnncore

// The integer LSTM's matrix-vector kernels: the one operation of an int8 LSTM step whose speed
// matters (a row block of a gate's weights times the int8 input or state). Everything around it
// (rescaling, activations, the cell) is the scalar reference's own code in src/int8_lstm.cpp, so
// a kernel need only produce exact int32 sums: every kernel is bit-identical to `scalar` by
// construction, and tests/test_int8_lstm.cpp proves it on every kernel this build has.
#ifndef RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

#include <cstdint>

namespace rnncore {
namespace q8 {

/// out[j] = bias[j] + Σ_k w[j·k_size + k] · v[k] for 0 <= j < rows, in wrapping (two's
/// complement) int32 arithmetic. w is row-major int8 [rows, k_size] with any alignment.
using DotRowsFn = void (*)(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);

/// One kernel: its name (dtype, op, ISA, tile) and function.
struct DotRowsKernel {
  const char* name;
  DotRowsFn fn;
};

/// The portable kernel, the specification of the others.
void i8_dot_rows_scalar(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                        const std::int32_t* bias, std::int32_t* out);

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// ARM's DSP extension (Cortex-M4/M7, ARMv7-A): SXTB16 widening, SMLAD dual 16-bit MACs; 4 rows
/// and 16 columns per loop iteration (src/int8_dot_dsp.cpp).
void i8_dot_rows_dsp_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                         const std::int32_t* bias, std::int32_t* out);
#endif

/// The kernels this build has and this CPU runs, the scalar one first and the fastest last;
/// `count` receives how many. The list is static (no allocation).
const DotRowsKernel* int8_dot_kernels(int* count);

/// The fastest kernel this CPU runs (the last of int8_dot_kernels).
DotRowsKernel int8_best_dot_kernel();

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

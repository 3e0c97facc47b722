// The integer LSTM's matrix-vector kernels: the one operation of an int8 LSTM step whose speed
// matters (a row block of a gate's weights times the int8 input or state). Everything around it
// (rescaling, activations, the cell) is the scalar reference's own code in src/int8_lstm.cpp, so
// a kernel need only produce exact int32 sums: every kernel is bit-identical to `scalar` by
// construction, and tests/test_int8_lstm.cpp proves it on every kernel this build has.
#ifndef RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace q8 {

/// out[j] = bias[j] + Σ_k w[j·k_size + k] · v[k] for 0 <= j < rows, in wrapping (two's
/// complement) int32 arithmetic. w is row-major int8 [rows, k_size] with any alignment.
using DotRowsFn = void (*)(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);

/// One kernel: its name (dtype, op, ISA, tile), function, and the instruction set a cap
/// (RNNCORE_MAX_ISA) compares with: none for portable code (never excluded), neon for the NEON
/// and SDOT kernels (SDOT is an extension of NEON, with no cap value of its own).
struct DotRowsKernel {
  const char* name;
  DotRowsFn fn;
  Isa isa;
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
// The vector kernels (simd/i8_dot_<isa>.cpp, each compiled with its ISA's flags; built when
// meson.build defines RNNCORE_BUILD_I8_<ISA>). Rows are taken 4 at a time sharing the loads of v;
// products are widened to int16 and summed pairwise into int32 lanes (never an int16 sum of two
// products: (−128)² + (−128)² = 2^15 does not fit), so every int32 sum is exact and wraps as the
// scalar one does.
void i8_dot_rows_sse2_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
void i8_dot_rows_avx2_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
void i8_dot_rows_neon_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
/// AArch64 with the dot-product extension (SDOT, Armv8.2-A+dotprod), chosen at run time.
void i8_dot_rows_sdot_4x16(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
/// x86 AVX-512 VNNI (vpdpbusd on unsigned-shifted v, the shift's sum taken off again), chosen at
/// run time; capped as avx512.
void i8_dot_rows_avx512vnni_4x64(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                                 const std::int32_t* bias, std::int32_t* out);

/// The kernels this build has and this CPU runs, the scalar one first and the fastest last;
/// `count` receives how many. The list is static (no allocation).
const DotRowsKernel* int8_dot_kernels(int* count);

/// The fastest kernel this CPU runs within `cap` and the environment's cap RNNCORE_MAX_ISA (the
/// last of int8_dot_kernels that both allow; the scalar one at worst).
DotRowsKernel int8_best_dot_kernel(Isa cap = Isa::best);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

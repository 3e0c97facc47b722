// The integer LSTM's matrix-vector kernels: the one operation of an int8 LSTM step whose speed
// matters (a row block of a gate's weights times the int8 input or state). Everything around it
// (rescaling, activations, the cell) is the scalar reference's own code in src/int8_lstm.cpp, so
// a kernel need only produce exact int32 sums: every kernel is bit-identical to `scalar` by
// construction, and tests/test_int8_lstm.cpp proves it on every kernel this build has.
#ifndef RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

#include <cstddef>
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

/// The interleaved layout (Int8WeightLayout::interleaved4, docs/int8.md "Interleaved weights"): a
/// matrix [rows, K] stored as panels of 4 rows A B C D, rows and K padded with zeros to multiples
/// of 4. For each group of 4 columns a panel holds 16 bytes, 4 words: rows A, B at columns 0, 2;
/// rows C, D at columns 0, 2; A, B at columns 1, 3; C, D at columns 1, 3 (the order SXTB16 widens
/// a word of the vector in). A word's bytes are (A, c), (B, c)', (A, c + 2), (B, c + 2)': its two
/// int16 halves pair the two rows' weights of one column. The odd row's byte is stored as
/// w(B, c) − [w(A, c) < 0], so that the half, read as one
/// int16, is exactly 256 · w(B, c) + w(A, c): one SMLAD on the raw word then adds
/// 256 · (B's products) + (A's products), and one on SXTB16 of it A's alone (src/int8_dot_dsp.cpp).
/// An odd row's −128 beside a negative weight of its even row cannot be stored (interleave4
/// refuses it; TFLite's and rnncore's quantizers give weights in −127..127).
/// Groups of 4 columns of a K-column matrix in that layout (and of a widened vector's 4 int16).
constexpr int interleaved4_words(int k_size) { return (k_size + 3) / 4; }
/// Bytes of a [rows, k_size] matrix in that layout.
constexpr std::size_t interleaved4_bytes(int rows, int k_size) {
  return 16 * static_cast<std::size_t>(interleaved4_words(rows)) * static_cast<std::size_t>(interleaved4_words(k_size));
}
/// Offset of the byte of element (row j, column k) in that layout, k_words = ceil(K / 4).
constexpr std::size_t interleaved4_offset(int j, int k, int k_words) {
  return (static_cast<std::size_t>(j >> 2) * static_cast<std::size_t>(k_words) + static_cast<std::size_t>(k >> 2)) * 16 +
         static_cast<std::size_t>(k & 1) * 8 + static_cast<std::size_t>(j & 2) * 2 + static_cast<std::size_t>(k & 2) +
         static_cast<std::size_t>(j & 1);
}
/// Element (row j, column k) of a matrix in that layout: the stored byte, for an odd row plus the
/// correction its even row's byte implies.
inline std::int8_t interleaved4_weight(const std::int8_t* m, int j, int k, int k_words) {
  const std::size_t at = interleaved4_offset(j, k, k_words);
  return (j & 1) == 0 ? m[at] : static_cast<std::int8_t>(m[at] + (m[at - 1] < 0 ? 1 : 0));
}
/// Whether row-major int8 [rows, k_size] has that layout: false where an odd row's −128 meets a
/// negative weight of the row before it, the first such weight then in *bad_row, *bad_column (if
/// not null).
bool interleavable4(const std::int8_t* w, int rows, int k_size, int* bad_row = nullptr, int* bad_column = nullptr);
/// Writes row-major int8 [rows, k_size] into `out` (interleaved4_bytes(rows, k_size) bytes) in that
/// layout, the padding zero. Returns false, writing nothing, where interleavable4 is false (and
/// says where as it does).
bool interleave4(const std::int8_t* w, int rows, int k_size, std::int8_t* out, int* bad_row = nullptr,
                 int* bad_column = nullptr);

/// The vector an interleaved kernel reads: the int8 vector widened once to int16, each group of 4
/// (v0 v1 v2 v3) as the pairs (v0, v2) and (v1, v3), the columns of a weight word's halves and the
/// order SXTB16 gives; n padded with zeros to a multiple of 4 (out: 4 · ceil(n / 4) int16, 4-byte
/// aligned).
void widen_pairs(const std::int8_t* v, int n, std::int16_t* out);
/// Position of column k in a vector widened so.
constexpr int widened_index(int k) { return (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1); }
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// widen_pairs of the first 4 · floor(n / 4) values with SXTB16 (src/int8_dot_dsp.cpp); returns how many.
int widen_pairs_dsp(const std::int8_t* v, int n, std::int16_t* out);
#endif

/// One product of an interleaved kernel: out[j] = bias[j] + Σ_k w(j, k) · v[k] for 0 <= j < rows,
/// wrapping as DotRowsFn, with w in the interleaved layout (starting at a panel; 4-byte aligned), v
/// widened by widen_pairs and k_words = ceil(K / 4) >= 1. The field order is the one the assembly
/// kernel reads (src/int8_dot_dsp.cpp).
struct PanelProduct {
  const std::int8_t* w;
  const std::int16_t* v;
  const std::int32_t* bias;
  std::int32_t* out;
  int rows;
  int k_words;
};
/// `count` products in one call: a step block's 8 (4 gates, times x and h), so that what a call
/// costs is paid once a block.
using DotPanelsFn = void (*)(const PanelProduct* products, int count);
struct DotPanelsKernel {
  const char* name;
  DotPanelsFn fn;
};
/// The portable interleaved kernel, the specification of the other.
void i8_dot_panels_scalar(const PanelProduct* products, int count);
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// ARM's DSP extension on the interleaved layout: per 4 columns of 4 rows, one LDM of the 4 weight
/// words, one of the widened vector's 2 words, 4 SXTB16 and 8 SMLAD (0.875 instructions per
/// multiply-accumulate); 4 rows and 16 columns per loop iteration (src/int8_dot_dsp.cpp: a
/// function in assembly, hence C linkage; its kernel name is i8_dot_panels_dsp_4x16).
extern "C" void rnncore_i8_dot_panels_dsp_4x16(const PanelProduct* products, int count);
#endif
/// The interleaved kernels this build has, the scalar one first and the fastest last; `count`
/// receives how many (the DSP one is a compile-time feature: no CPU check, no ISA cap).
const DotPanelsKernel* int8_panel_kernels(int* count);

/// The kernels this build has and this CPU runs, the scalar one first and the fastest last;
/// `count` receives how many. The list is static (no allocation).
const DotRowsKernel* int8_dot_kernels(int* count);

/// The fastest kernel this CPU runs within `cap` and the environment's cap RNNCORE_MAX_ISA (the
/// last of int8_dot_kernels that both allow; the scalar one at worst).
DotRowsKernel int8_best_dot_kernel(Isa cap = Isa::best);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

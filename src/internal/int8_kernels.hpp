// The integer LSTM's kernels. The matrix-vector kernels do the step's multiply-adds (a row block
// of a gate's weights times the int8 input or state) and need only produce exact int32 sums, so
// every one is bit-identical to `scalar` by construction. The step kernels do the rest of a step
// on SIMD lanes or in Thumb-2 assembly (rescaling, activations, the cell and the output), the
// arithmetic of the scalar kernels. The scalar kernels of every op are the reference
// (src/int8_reference.cpp; the step's C loops, src/internal/int8_step_loops.hpp): the
// specification. tests/checkkernels.cpp proves every kernel this build has against it, bit for bit.
#ifndef RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

#include <cstddef>
#include <cstdint>

// Thumb-2 with the DSP extension (Cortex-M4/M7/M33, 32-bit ARMv7-A), optimized builds: the step's
// loops in assembly (src/internal/int8_thumb2.hpp; at -O0 GCC leaves an asm statement fewer
// registers than their 13).
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SAT) && defined(__thumb2__) && defined(__OPTIMIZE__)
#define RNNCORE_Q8_THUMB2_LOOPS 1
#endif

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace q8 {

/// A real multiplier m as TFLite represents it: m ≈ multiplier · 2^(shift − 31), multiplier in
/// [2^30, 2^31). `quantize_multiplier` derives it from a scale once, at prepare time.
struct QuantizedMultiplier {
  std::int32_t multiplier = 0;
  int shift = 0;  ///< > 0: shift left before the high multiply; < 0: rounding shift right after it
};

/// out[j] = bias[j] + Σ_k w[j·k_size + k] · v[k] for 0 <= j < rows, in wrapping (two's
/// complement) int32 arithmetic. w is row-major int8 [rows, k_size] with any alignment.
using DotRowsFn = void (*)(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);

/// One kernel: its name (<dtype>_<op>_<tile>__<isa>), function, and the instruction set a cap
/// (RNNCORE_MAX_ISA) compares with: none for portable code (never excluded), neon for the NEON
/// and SDOT kernels (SDOT is an extension of NEON, with no cap value of its own).
struct DotRowsKernel {
  const char* name;
  DotRowsFn fn;
  Isa isa;
};

/// The portable kernel, the specification of the others.
void i8_dot_1x1__scalar(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                        const std::int32_t* bias, std::int32_t* out);

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// ARM's DSP extension (Cortex-M4/M7, ARMv7-A): SXTB16 widening, SMLAD dual 16-bit MACs; 4 rows
/// and 16 columns per loop iteration (src/int8_dot_dsp.cpp).
void i8_dot_4x16__dsp(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                         const std::int32_t* bias, std::int32_t* out);
#endif
// The vector kernels (simd/i8_dot_<isa>.cpp, each compiled with its ISA's flags; built when
// meson.build defines RNNCORE_BUILD_I8_<ISA>). Rows are taken 4 at a time sharing the loads of v;
// products are widened to int16 and summed pairwise into int32 lanes (never an int16 sum of two
// products: (−128)² + (−128)² = 2^15 does not fit), so every int32 sum is exact and wraps as the
// scalar one does.
void i8_dot_4x16__sse2(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
void i8_dot_4x16__avx2(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
void i8_dot_4x16__neon(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
/// AArch64 with the dot-product extension (SDOT, Armv8.2-A+dotprod), chosen at run time.
void i8_dot_4x16__sdot(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                           const std::int32_t* bias, std::int32_t* out);
/// x86 AVX-512 VNNI (vpdpbusd on unsigned-shifted v, the shift's sum taken off again), chosen at
/// run time; capped as avx512.
void i8_dot_4x64__avx512vnni(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
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
/// The int16 panel layout (Int8WeightLayout::interleaved4_i16, docs/int8.md "Interleaved
/// weights"): the int8 weights pre-widened to int16 at pack time, so that a kernel multiplies them
/// with SMLAD as they are (no SXTB16, no correction): twice the interleaved layout's bytes. Panels
/// of 4 rows A B C D (rows and K padded with zeros to multiples of 4); for each group of 4 columns
/// c..c+3 a panel holds 8 words, 32 bytes: rows A, B, C, D at columns (c, c + 2), then A, B, C, D
/// at columns (c + 1, c + 3), each word's low half the first column: the pairs of a widened
/// vector's two words (widen_pairs). Element (row j, column k) is int16 number
/// interleaved4_i16_index(j, k, k_words).
constexpr std::size_t interleaved4_i16_bytes(int rows, int k_size) { return 2 * interleaved4_bytes(rows, k_size); }
constexpr std::size_t interleaved4_i16_index(int j, int k, int k_words) {
  return (static_cast<std::size_t>(j >> 2) * static_cast<std::size_t>(k_words) + static_cast<std::size_t>(k >> 2)) * 16 +
         static_cast<std::size_t>(k & 1) * 8 + static_cast<std::size_t>(j & 3) * 2 + static_cast<std::size_t>((k >> 1) & 1);
}
/// Element (row j, column k) of a matrix in that layout (m: its bytes, any alignment).
std::int8_t interleaved4_i16_weight(const std::int8_t* m, int j, int k, int k_words);
/// Writes row-major int8 [rows, k_size] into `out` (interleaved4_i16_bytes(rows, k_size) bytes) in
/// that layout, the padding zero (little-endian int16: any int8 weight has this form).
void interleave4_i16(const std::int8_t* w, int rows, int k_size, std::int8_t* out);

/// `count` products in one call: a step block's 8 (4 gates, times x and h), so that what a call
/// costs is paid once a block.
using DotPanelsFn = void (*)(const PanelProduct* products, int count);
struct DotPanelsKernel {
  const char* name;
  DotPanelsFn fn;
};
/// The portable interleaved kernel, the specification of the other.
void i8_dot_panels_1x1__scalar(const PanelProduct* products, int count);
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// ARM's DSP extension on the interleaved layout: per 4 columns of 4 rows, one LDM of the 4 weight
/// words, one of the widened vector's 2 words, 4 SXTB16 and 8 SMLAD (0.875 instructions per
/// multiply-accumulate); 4 rows and 64 columns per loop iteration (src/int8_dot_dsp.cpp: a
/// function in assembly, hence C linkage; its kernel name is i8_dot_panels_4x16__dsp).
extern "C" void rnncore_i8_dot_panels_dsp_4x16(const PanelProduct* products, int count);
#endif
/// The portable kernel of the int16 panel layout (PanelProduct::w in that layout, 4-byte aligned;
/// the same product otherwise), the specification of the other.
void i16_dot_panels_1x1__scalar(const PanelProduct* products, int count);
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
/// ARM's DSP extension on the int16 panel layout: per 4 columns of 4 rows, one LDM of the widened
/// vector's 2 words, two LDMs of 4 weight words and 8 SMLAD (0.6875 instructions per
/// multiply-accumulate); 4 rows and 64 columns per loop iteration (src/int8_dot_dsp.cpp; kernel
/// name i16_dot_panels_4x16__dsp).
extern "C" void rnncore_i16_dot_panels_dsp_4x16(const PanelProduct* products, int count);
#endif
// The lists and choices below are views of the one kernel registry (src/internal/kernels.hpp).

/// The interleaved kernels this build has, the scalar one first and the fastest last; `count`
/// receives how many (the DSP one is a compile-time feature: no CPU check, no ISA cap).
const DotPanelsKernel* int8_panel_kernels(int* count);
/// The same for the int16 panel layout (Int8WeightLayout::interleaved4_i16).
const DotPanelsKernel* int16_panel_kernels(int* count);

/// The kernels this build has and this CPU runs, the scalar one first and the fastest last;
/// `count` receives how many. The list is static (no allocation).
const DotRowsKernel* int8_dot_kernels(int* count);

/// The fastest kernel this CPU runs within `cap` and the environment's cap RNNCORE_MAX_ISA
/// (detail::select_kernel; the scalar one at worst).
DotRowsKernel int8_best_dot_kernel(Isa cap = Isa::best);

// ---- The step kernels: the rest of a step after the products ----
// Each takes the units of a block in whole groups of its tile (the number in its name: its lanes,
// 2 for the Thumb-2 pairs) and returns how many units it did; the reference's loops do the rest (a
// block's last n mod 8 units), so that a kernel holds no scalar copy of the arithmetic. A SIMD
// kernel takes every call; a Thumb-2 one takes what its loop serves and returns 0 otherwise (its
// declaration says what). Hosts only: they read the activations from the 128 KiB tables of every
// int16 argument that host builds fill (src/int8_tables.cpp), by their centres (entry 0 at argument
// 0), and may read one int16 past a table's last entry (a gather of 32-bit words).

/// A gate's fixed-point multipliers: per tensor, or per unit ((multiplier, shift) pairs from
/// `x_rows[2 · u]` and `h_rows[2 · u]`, replacing x and h where not null).
struct GateScaling {
  QuantizedMultiplier x, h;
  const std::int32_t* x_rows = nullptr;
  const std::int32_t* h_rows = nullptr;
};

/// act[u] = centre[sat16(sat16(rescale(ax[u], x)) + rescale(ah[u], h))] for u below the count
/// returned (a multiple of the tile, at most n): a gate's activations from its sums, with
/// rescale TFLite's MultiplyByQuantizedMultiplier (multiply_by_quantized_multiplier).
using GateActivationsFn = int (*)(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                                  const std::int16_t* centre, std::int16_t* act);

/// What the cell update of a step needs beside the gates (int8_lstm_prepare derives it).
struct CellUpdate {
  const std::int16_t* tanh_centre;  ///< tanh of the cell's integer bits; null below 2^-15 (o · i, as LiteRT)
  int cell_log2;                    ///< −30 .. −9
  std::int16_t cell_clip;           ///< 0: none
  QuantizedMultiplier hidden_mult;  ///< o · tanh(c) to the output state's scale
  std::int32_t hidden_zp;
};

/// The block's gate activations, one row of units each (Q0.15).
struct BlockGates {
  const std::int16_t* i;
  const std::int16_t* f;
  const std::int16_t* g;
  const std::int16_t* o;
};

/// For u below the count returned (as GateActivationsFn): the new cell state c[u] (in place) and
/// the new output state h_next[u], as the reference computes them.
using CellUpdateFn = int (*)(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c,
                             std::int8_t* h_next);

/// For u below the count returned (as GateActivationsFn): the new output state out[u] =
/// sat8(rescale(o[u] · tanh_c[u], m) + zp), the last part of a cell update (o: the output gate,
/// tanh_c: tanh of the new cell state, or i below a cell scale of 2^-15).
using OutputFn = int (*)(int n, const QuantizedMultiplier& m, std::int32_t zp, const std::int16_t* o,
                         const std::int16_t* tanh_c, std::int8_t* out);

#if !defined(RNNCORE_NO_HEAP)
/// The reference (src/int8_reference.cpp): the step's C loops behind the kernels' signatures, any
/// n, every unit.
int i32_gate_act_1x1__scalar(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                             const std::int16_t* centre, std::int16_t* act);
int i16_cell_update_1x1__scalar(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next);
int i16_output_1x1__scalar(int n, const QuantizedMultiplier& m, std::int32_t zp, const std::int16_t* o,
                           const std::int16_t* tanh_c, std::int8_t* out);
#endif

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && !defined(RNNCORE_NO_HEAP)
/// The step's Thumb-2 loops (src/internal/int8_thumb2.hpp) behind the kernels' signatures
/// (src/int8_thumb2.cpp), units in pairs: the gates where both multipliers are per tensor and shift
/// right (else 0), the cell where tanh of its scale is tabled (cell_log2 −15 .. −9; else 0), the
/// output where its multiplier shifts right (else 0). The step inlines the same loops.
int i32_gate_act_2__thumb2(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                           const std::int16_t* centre, std::int16_t* act);
int i16_cell_update_2__thumb2(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next);
int i16_output_2__thumb2(int n, const QuantizedMultiplier& m, std::int32_t zp, const std::int16_t* o,
                         const std::int16_t* tanh_c, std::int8_t* out);
#endif

/// A pair of step kernels for one instruction set (names say op, ISA and lanes).
struct StepKernels {
  const char* gate_name;
  GateActivationsFn gate;
  const char* cell_name;
  CellUpdateFn cell;
  Isa isa;
};

int i32_gate_act_8__avx2(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act);
int i16_cell_update_8__avx2(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next);
int i32_gate_act_8__neon(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act);
int i16_cell_update_8__neon(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next);

/// The step kernels this build has and this CPU runs, slowest first (none in firmware builds, on
/// SSE2-only CPUs, or on builds without SIMD); `count` receives how many.
const StepKernels* int8_step_kernels(int* count);

/// The fastest step kernels within `cap` and RNNCORE_MAX_ISA, or null: the scalar code.
const StepKernels* int8_best_step_kernels(Isa cap = Isa::best);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_KERNELS_HPP

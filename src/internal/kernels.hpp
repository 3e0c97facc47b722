// The kernel registry: every kernel this build has, of every kind (the f32 tables with their bf16
// and f16 paths, the int8 matrix-vector kernels of both weight layouts, the int8 step kernels),
// in one list, each named <dtype>_<op>_<tile>__<isa> (XNNPACK's order: f32_rnn_6x2__avx2,
// i8_dot_4x16__avx2, i32_gate_act_8__avx2, i8_dot_panels_4x16__dsp), and one function that
// chooses among them under a cap (PlanOptions::max_isa, and env RNNCORE_MAX_ISA). The scalar
// kernel of each op is the specification of the others; tests/checkkernels.cpp runs every entry
// against it; the int8 references are src/int8_reference.cpp. The step's Thumb-2 loops are entries
// too where a host has them (i32_gate_act_2__thumb2…, src/int8_thumb2.cpp: 32-bit ARM Linux): the
// step inlines the same functions (src/internal/int8_thumb2.hpp), chosen at compile time, as a call
// would change the Cortex-M step's instructions; the entries are what checkkernels checks and what
// a cap of none selects (int8_best_step_kernels then leaves the step to its inline code).
#ifndef RNNCORE_SRC_INTERNAL_KERNELS_HPP
#define RNNCORE_SRC_INTERNAL_KERNELS_HPP

#include "rnncore/rnncore.hpp"
#include "simd/kernels.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace detail {

/// What a kernel computes (its interface).
enum class KernelOp : int {
  f32_rnn,          ///< an F32Kernels table: the f32 backend's GEMM, step, matmul and math kernels
  i8_dot,           ///< q8::DotRowsFn: row-major int8 weights times a vector
  i8_dot_panels,    ///< q8::DotPanelsFn: interleaved int8 weights times a widened vector
  i16_dot_panels,   ///< q8::DotPanelsFn: the int8 weights pre-widened to int16 panels times a widened vector
  i32_gate_act,     ///< q8::GateActivationsFn: a gate's activations from its int32 sums
  i16_cell_update,  ///< q8::CellUpdateFn: the cell and output state from the gates
  i16_output,       ///< q8::OutputFn: the output state from o and tanh(c)
};
constexpr int kKernelOpCount = 7;
const char* to_string(KernelOp op);

/// One kernel. Exactly one function field, the one of `op`, is set. The registry is a constant
/// array (flash in firmware, no RAM); what the CPU runs is asked when needed (`runs`).
struct Kernel {
  const char* own_name;  ///< <dtype>_<op>_<tile>__<isa>; null for an f32 table, which names itself
  KernelOp op;
  Isa isa;                ///< what a cap compares with: none for portable code (never excluded)
  const char* family;     ///< the instruction-set family the name's suffix says (scalar, sse2, avx512vnni, sdot, dsp…)
  bool (*cpu_runs)();     ///< whether this CPU runs it; null: portable or a compile-time feature (always)
  const simd::F32Kernels* const* f32;  ///< f32_rnn: the table's pointer (simd/kernels.hpp)
  q8::DotRowsFn dot;
  q8::DotPanelsFn dot_panels;
  q8::GateActivationsFn gate;
  q8::CellUpdateFn cell;
  q8::OutputFn output;

  const char* name() const { return f32 != nullptr ? (*f32)->name : own_name; }
  bool runs() const { return cpu_runs == nullptr || cpu_runs(); }
  const simd::F32Kernels* table() const { return f32 != nullptr ? *f32 : nullptr; }
};

/// The kernels of `op` this build has, slowest (the scalar reference, where the op has one) first
/// and fastest last; `count` receives how many. A constant array per op.
const Kernel* kernel_registry(KernelOp op, int* count);

/// The one choice of a kernel: the fastest of `op` that this CPU runs within `cap` and the
/// environment's cap RNNCORE_MAX_ISA; null when there is none (an f32 build without SIMD).
const Kernel* select_kernel(KernelOp op, Isa cap = Isa::best);

/// A plan keeps a kernel as its index in its op's registry (no pointer in a plan value): the index
/// of `k` (an entry of kernel_registry(op)), or -1 (k null); and the entry at an index (null for -1).
int kernel_index(KernelOp op, const Kernel* k);
const Kernel* kernel_at(KernelOp op, int index);

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_KERNELS_HPP

// The kernel registry (src/internal/kernels.hpp): the one list of every kernel this build has and
// the one choice among them. The views below (the f32 tables a plan picks, the int8 lists of
// src/internal/int8_kernels.hpp) all read it.
#include "src/internal/kernels.hpp"

#include <cstddef>

#include "src/internal/int8_lstm.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

const char* to_string(KernelOp op) {
  switch (op) {
    case KernelOp::f32_rnn: return "f32_rnn";
    case KernelOp::i8_dot: return "i8_dot";
    case KernelOp::i8_dot_panels: return "i8_dot_panels";
    case KernelOp::i16_dot_panels: return "i16_dot_panels";
    case KernelOp::i32_gate_act: return "i32_gate_act";
    case KernelOp::i16_cell_update: return "i16_cell_update";
    case KernelOp::i16_output: return "i16_output";
  }
  return "?";
}

namespace {

// What the CPU runs (registered kernels of each instruction set ask these).
[[maybe_unused]] bool runs_sse2() { return cpu_has_isa(Isa::sse2); }
[[maybe_unused]] bool runs_avx2() { return cpu_has_isa(Isa::avx2); }
[[maybe_unused]] bool runs_avx512() { return cpu_has_isa(Isa::avx512); }
[[maybe_unused]] bool runs_avx512vnni() { return cpu_has_avx512_vnni(); }
[[maybe_unused]] bool runs_neon() { return cpu_has_isa(Isa::neon); }
[[maybe_unused]] bool runs_sdot() { return cpu_has_isa(Isa::neon) && cpu_has_arm_dotprod(); }

constexpr Kernel f32_table(const simd::F32Kernels* const* table, Isa isa, const char* family, bool (*runs)()) {
  return {nullptr, KernelOp::f32_rnn, isa, family, runs, table, nullptr, nullptr, nullptr, nullptr, nullptr};
}
constexpr Kernel i8_dot(const char* name, Isa isa, const char* family, bool (*runs)(), q8::DotRowsFn fn) {
  return {name, KernelOp::i8_dot, isa, family, runs, nullptr, fn, nullptr, nullptr, nullptr, nullptr};
}
constexpr Kernel i8_dot_panels(const char* name, const char* family, q8::DotPanelsFn fn,
                               KernelOp op = KernelOp::i8_dot_panels) {
  return {name, op, Isa::none, family, nullptr, nullptr, nullptr, fn, nullptr, nullptr, nullptr};
}
[[maybe_unused]] constexpr Kernel i32_gate_act(const char* name, Isa isa, const char* family, bool (*runs)(),
                                               q8::GateActivationsFn fn) {
  return {name, KernelOp::i32_gate_act, isa, family, runs, nullptr, nullptr, nullptr, fn, nullptr, nullptr};
}
[[maybe_unused]] constexpr Kernel i16_cell_update(const char* name, Isa isa, const char* family, bool (*runs)(),
                                                  q8::CellUpdateFn fn) {
  return {name, KernelOp::i16_cell_update, isa, family, runs, nullptr, nullptr, nullptr, nullptr, fn, nullptr};
}
[[maybe_unused]] constexpr Kernel i16_output(const char* name, const char* family, q8::OutputFn fn) {
  return {name, KernelOp::i16_output, Isa::none, family, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, fn};
}

// One constant array per op, each slowest first and ended by an entry without a name (so that none
// is empty), so that a program that chooses only f32 tables links none of the int8 kernels (and
// firmware's flash holds only what it calls). SDOT is an extension of NEON and VNNI of AVX-512,
// with no cap value of their own; the DSP kernels are a compile-time feature (no CPU check, no
// cap), as are the Thumb-2 loops. The step kernels are hosts' only: they read the host builds'
// activation tables.
constexpr Kernel kF32Tables[] = {
#if defined(RNNCORE_BUILD_SSE2)
    f32_table(&simd::f32_kernels_sse2, Isa::sse2, "sse2", runs_sse2),
#endif
#if defined(RNNCORE_BUILD_AVX2)
    f32_table(&simd::f32_kernels_avx2, Isa::avx2, "avx2", runs_avx2),
#endif
#if defined(RNNCORE_BUILD_AVX512)
    f32_table(&simd::f32_kernels_avx512, Isa::avx512, "avx512", runs_avx512),
#endif
#if defined(RNNCORE_BUILD_NEON)
    f32_table(&simd::f32_kernels_neon, Isa::neon, "neon", runs_neon),
#endif
    f32_table(nullptr, Isa::none, nullptr, nullptr),
};

constexpr Kernel kI8Dot[] = {
    i8_dot("i8_dot_1x1__scalar", Isa::none, "scalar", nullptr, q8::i8_dot_1x1__scalar),
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    i8_dot("i8_dot_4x16__dsp", Isa::none, "dsp", nullptr, q8::i8_dot_4x16__dsp),
#endif
#if defined(RNNCORE_BUILD_I8_SSE2)
    i8_dot("i8_dot_4x16__sse2", Isa::sse2, "sse2", runs_sse2, q8::i8_dot_4x16__sse2),
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
    i8_dot("i8_dot_4x16__avx2", Isa::avx2, "avx2", runs_avx2, q8::i8_dot_4x16__avx2),
#endif
#if defined(RNNCORE_BUILD_I8_AVX512VNNI)
    i8_dot("i8_dot_4x64__avx512vnni", Isa::avx512, "avx512vnni", runs_avx512vnni, q8::i8_dot_4x64__avx512vnni),
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    i8_dot("i8_dot_4x16__neon", Isa::neon, "neon", runs_neon, q8::i8_dot_4x16__neon),
#endif
#if defined(RNNCORE_BUILD_I8_SDOT)
    i8_dot("i8_dot_4x16__sdot", Isa::neon, "sdot", runs_sdot, q8::i8_dot_4x16__sdot),
#endif
    i8_dot(nullptr, Isa::none, nullptr, nullptr, nullptr),
};

constexpr Kernel kI8DotPanels[] = {
    i8_dot_panels("i8_dot_panels_1x1__scalar", "scalar", q8::i8_dot_panels_1x1__scalar),
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    i8_dot_panels("i8_dot_panels_4x16__dsp", "dsp", q8::rnncore_i8_dot_panels_dsp_4x16),  // the assembly function
#endif
    i8_dot_panels(nullptr, nullptr, nullptr),
};

constexpr Kernel kI16DotPanels[] = {
    i8_dot_panels("i16_dot_panels_1x1__scalar", "scalar", q8::i16_dot_panels_1x1__scalar, KernelOp::i16_dot_panels),
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    i8_dot_panels("i16_dot_panels_4x16__dsp", "dsp", q8::rnncore_i16_dot_panels_dsp_4x16, KernelOp::i16_dot_panels),
#endif
    i8_dot_panels(nullptr, nullptr, nullptr, KernelOp::i16_dot_panels),
};

constexpr Kernel kI32GateAct[] = {
#if !defined(RNNCORE_NO_HEAP)
    i32_gate_act("i32_gate_act_1x1__scalar", Isa::none, "scalar", nullptr, q8::i32_gate_act_1x1__scalar),
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    i32_gate_act("i32_gate_act_2__thumb2", Isa::none, "thumb2", nullptr, q8::i32_gate_act_2__thumb2),
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
    i32_gate_act("i32_gate_act_8__avx2", Isa::avx2, "avx2", runs_avx2, q8::i32_gate_act_8__avx2),
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    i32_gate_act("i32_gate_act_8__neon", Isa::neon, "neon", runs_neon, q8::i32_gate_act_8__neon),
#endif
#endif
    i32_gate_act(nullptr, Isa::none, nullptr, nullptr, nullptr),
};

constexpr Kernel kI16CellUpdate[] = {
#if !defined(RNNCORE_NO_HEAP)
    i16_cell_update("i16_cell_update_1x1__scalar", Isa::none, "scalar", nullptr, q8::i16_cell_update_1x1__scalar),
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    i16_cell_update("i16_cell_update_2__thumb2", Isa::none, "thumb2", nullptr, q8::i16_cell_update_2__thumb2),
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
    i16_cell_update("i16_cell_update_8__avx2", Isa::avx2, "avx2", runs_avx2, q8::i16_cell_update_8__avx2),
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    i16_cell_update("i16_cell_update_8__neon", Isa::neon, "neon", runs_neon, q8::i16_cell_update_8__neon),
#endif
#endif
    i16_cell_update(nullptr, Isa::none, nullptr, nullptr, nullptr),
};

// The output state alone (the last part of a cell kernel): the reference and the Thumb-2 loop,
// which the step inlines; no step selects from this list.
constexpr Kernel kI16Output[] = {
#if !defined(RNNCORE_NO_HEAP)
    i16_output("i16_output_1x1__scalar", "scalar", q8::i16_output_1x1__scalar),
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    i16_output("i16_output_2__thumb2", "thumb2", q8::i16_output_2__thumb2),
#endif
#endif
    i16_output(nullptr, nullptr, nullptr),
};

template <std::size_t N>
constexpr int count(const Kernel (&)[N]) {
  return static_cast<int>(N) - 1;  // without the end
}

// The fastest of `n` kernels this CPU runs within `cap` and RNNCORE_MAX_ISA, or null.
const Kernel* select_in(const Kernel* k, int n, Isa cap) {
  const Isa env = env_isa_cap();
  for (int i = n - 1; i >= 0; --i)
    if (isa_within_cap(k[i].isa, cap) && isa_within_cap(k[i].isa, env) && k[i].runs()) return &k[i];
  return nullptr;
}

}  // namespace

const Kernel* kernel_registry(KernelOp op, int* n) {
  switch (op) {
    case KernelOp::f32_rnn: *n = count(kF32Tables); return kF32Tables;
    case KernelOp::i8_dot: *n = count(kI8Dot); return kI8Dot;
    case KernelOp::i8_dot_panels: *n = count(kI8DotPanels); return kI8DotPanels;
    case KernelOp::i16_dot_panels: *n = count(kI16DotPanels); return kI16DotPanels;
    case KernelOp::i32_gate_act: *n = count(kI32GateAct); return kI32GateAct;
    case KernelOp::i16_cell_update: *n = count(kI16CellUpdate); return kI16CellUpdate;
    case KernelOp::i16_output: *n = count(kI16Output); return kI16Output;
  }
  *n = 0;
  return kF32Tables;
}

const Kernel* select_kernel(KernelOp op, Isa cap) {
  int n = 0;
  const Kernel* k = kernel_registry(op, &n);
  return select_in(k, n, cap);
}

// (not through select_kernel: a program that plans only f32 layers links no int8 kernel)
const simd::F32Kernels* select_f32_kernels(Isa cap, Isa* chosen) {
  const Kernel* k = select_in(kF32Tables, count(kF32Tables), cap);
  *chosen = k != nullptr ? k->isa : Isa::none;
  return k != nullptr ? k->table() : nullptr;
}

int f32_table_index(const simd::F32Kernels* table) {
  for (int i = 0; table != nullptr && i < count(kF32Tables); ++i)
    if (kF32Tables[i].table() == table) return i;
  return -1;
}

const simd::F32Kernels* SimdPlan::kernels() const {
  return table >= 0 && table < count(kF32Tables) ? kF32Tables[table].table() : nullptr;
}

int kernel_index(KernelOp op, const Kernel* k) {
  int n = 0;
  const Kernel* list = kernel_registry(op, &n);
  return k != nullptr && k >= list && k < list + n ? static_cast<int>(k - list) : -1;
}

const Kernel* kernel_at(KernelOp op, int index) {
  int n = 0;
  const Kernel* list = kernel_registry(op, &n);
  return index >= 0 && index < n ? &list[index] : nullptr;
}

}  // namespace detail

int available_isas(Isa* out, int capacity) {
  int n = 0;
  for (int i = 0; i < detail::count(detail::kF32Tables); ++i)
    if (detail::kF32Tables[i].runs() && n < capacity) out[n++] = detail::kF32Tables[i].isa;
  return n;
}

// ---- The int8 lists of src/internal/int8_kernels.hpp, as views of the registry ----
namespace q8 {
namespace {

using detail::count;
using detail::KernelOp;

template <class T, int N>
struct List {
  T k[N > 0 ? N : 1];
  int n = 0;
};

// Those this CPU runs, found once (a function-local static sized to the registry's entries).
List<DotRowsKernel, count(detail::kI8Dot)> dot_list() {
  List<DotRowsKernel, count(detail::kI8Dot)> l;
  for (int i = 0; i < count(detail::kI8Dot); ++i) {
    const detail::Kernel& k = detail::kI8Dot[i];
    if (k.runs()) l.k[l.n++] = {k.own_name, k.dot, k.isa};
  }
  return l;
}

// The interleaved kernels need no CPU check: constant lists.
template <int N>
constexpr List<DotPanelsKernel, N> panel_list(const detail::Kernel (&k)[N]) {
  List<DotPanelsKernel, N> l{};
  for (int i = 0; i < count(k); ++i) l.k[l.n++] = {k[i].own_name, k[i].dot_panels};
  return l;
}
constexpr auto kPanelList = panel_list(detail::kI8DotPanels);
constexpr auto kPanel16List = panel_list(detail::kI16DotPanels);

// The vector step kernels this CPU runs, each gate kernel with the cell kernel of its family.
List<StepKernels, count(detail::kI32GateAct)> step_list() {
  List<StepKernels, count(detail::kI32GateAct)> l;
  for (int i = 0; i < count(detail::kI32GateAct); ++i) {
    const detail::Kernel& g = detail::kI32GateAct[i];
    if (g.isa == Isa::none || !g.runs()) continue;
    for (int j = 0; j < count(detail::kI16CellUpdate); ++j) {
      const detail::Kernel& c = detail::kI16CellUpdate[j];
      if (c.isa == g.isa) l.k[l.n++] = {g.own_name, g.gate, c.own_name, c.cell, g.isa};
    }
  }
  return l;
}

}  // namespace

const DotRowsKernel* int8_dot_kernels(int* count) {
  static const auto list = dot_list();
  *count = list.n;
  return list.k;
}

DotRowsKernel int8_best_dot_kernel(Isa cap) {
  const detail::Kernel* k = detail::select_kernel(KernelOp::i8_dot, cap);  // the scalar one at worst
  return {k->own_name, k->dot, k->isa};
}

const DotPanelsKernel* int8_panel_kernels(int* count) {
  *count = kPanelList.n;
  return kPanelList.k;
}

const DotPanelsKernel* int16_panel_kernels(int* count) {
  *count = kPanel16List.n;
  return kPanel16List.k;
}

const StepKernels* int8_step_kernels(int* count) {
  static const auto list = step_list();
  *count = list.n;
  return list.k;
}

const StepKernels* int8_best_step_kernels(Isa cap) {
  if constexpr (count(detail::kI32GateAct) == 0) {  // (firmware: none, and no RAM for their list)
    (void)cap;
    return nullptr;
  } else {
    const detail::Kernel* g = detail::select_kernel(KernelOp::i32_gate_act, cap);
    if (g == nullptr || g->isa == Isa::none) return nullptr;  // the step's own scalar code
    int n = 0;
    const StepKernels* k = int8_step_kernels(&n);
    for (int i = 0; i < n; ++i)
      if (k[i].gate == g->gate) return &k[i];
    return nullptr;
  }
}

}  // namespace q8
}  // namespace rnncore

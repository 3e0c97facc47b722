// The kernel registry (src/internal/kernels.hpp): the one list of every kernel this build has and
// the one choice among them. The views below (the f32 tables a plan picks, the int8 lists of
// src/internal/int8_kernels.hpp) all read it.
#include "src/internal/kernels.hpp"

#include "src/internal/int8_lstm.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

const char* to_string(KernelOp op) {
  switch (op) {
    case KernelOp::f32_rnn: return "f32_rnn";
    case KernelOp::i8_dot: return "i8_dot";
    case KernelOp::i8_dot_panels: return "i8_dot_panels";
    case KernelOp::i32_gate_act: return "i32_gate_act";
    case KernelOp::i16_cell_update: return "i16_cell_update";
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
  return {nullptr, KernelOp::f32_rnn, isa, family, runs, table, nullptr, nullptr, nullptr, nullptr};
}
constexpr Kernel i8_dot(const char* name, Isa isa, const char* family, bool (*runs)(), q8::DotRowsFn fn) {
  return {name, KernelOp::i8_dot, isa, family, runs, nullptr, fn, nullptr, nullptr, nullptr};
}
constexpr Kernel i8_dot_panels(const char* name, const char* family, q8::DotPanelsFn fn) {
  return {name, KernelOp::i8_dot_panels, Isa::none, family, nullptr, nullptr, nullptr, fn, nullptr, nullptr};
}
[[maybe_unused]] constexpr Kernel i32_gate_act(const char* name, Isa isa, const char* family, bool (*runs)(),
                                               q8::GateActivationsFn fn) {
  return {name, KernelOp::i32_gate_act, isa, family, runs, nullptr, nullptr, nullptr, fn, nullptr};
}
[[maybe_unused]] constexpr Kernel i16_cell_update(const char* name, Isa isa, const char* family, bool (*runs)(),
                                                  q8::CellUpdateFn fn) {
  return {name, KernelOp::i16_cell_update, isa, family, runs, nullptr, nullptr, nullptr, nullptr, fn};
}

// Grouped by op, each op slowest first. SDOT is an extension of NEON and VNNI of AVX-512, with no
// cap value of their own; the DSP kernels are a compile-time feature (no CPU check, no cap). The
// step kernels are hosts' only: they read the host builds' activation tables.
constexpr Kernel kRegistry[] = {
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
    i8_dot_panels("i8_dot_panels_1x1__scalar", "scalar", q8::i8_dot_panels_1x1__scalar),
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    i8_dot_panels("i8_dot_panels_4x16__dsp", "dsp", q8::rnncore_i8_dot_panels_dsp_4x16),  // the assembly function
#endif
#if !defined(RNNCORE_NO_HEAP)
    i32_gate_act("i32_gate_act_1x1__scalar", Isa::none, "scalar", nullptr, q8::i32_gate_act_1x1__scalar),
#if defined(RNNCORE_BUILD_I8_AVX2)
    i32_gate_act("i32_gate_act_8__avx2", Isa::avx2, "avx2", runs_avx2, q8::i32_gate_act_8__avx2),
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    i32_gate_act("i32_gate_act_8__neon", Isa::neon, "neon", runs_neon, q8::i32_gate_act_8__neon),
#endif
    i16_cell_update("i16_cell_update_1x1__scalar", Isa::none, "scalar", nullptr, q8::i16_cell_update_1x1__scalar),
#if defined(RNNCORE_BUILD_I8_AVX2)
    i16_cell_update("i16_cell_update_8__avx2", Isa::avx2, "avx2", runs_avx2, q8::i16_cell_update_8__avx2),
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    i16_cell_update("i16_cell_update_8__neon", Isa::neon, "neon", runs_neon, q8::i16_cell_update_8__neon),
#endif
#endif
};
constexpr int kRegistryCount = static_cast<int>(sizeof kRegistry / sizeof kRegistry[0]);

constexpr int count_of(KernelOp op) {
  int n = 0;
  for (const Kernel& k : kRegistry) n += k.op == op ? 1 : 0;
  return n;
}

}  // namespace

const Kernel* kernel_registry(int* count) {
  *count = kRegistryCount;
  return kRegistry;
}

const Kernel* select_kernel(KernelOp op, Isa cap) {
  const Isa env = env_isa_cap();
  for (int i = kRegistryCount - 1; i >= 0; --i) {
    const Kernel& k = kRegistry[i];
    if (k.op == op && isa_within_cap(k.isa, cap) && isa_within_cap(k.isa, env) && k.runs()) return &k;
  }
  return nullptr;
}

const simd::F32Kernels* select_f32_kernels(Isa cap, Isa* chosen) {
  const Kernel* k = select_kernel(KernelOp::f32_rnn, cap);
  *chosen = k != nullptr ? k->isa : Isa::none;
  return k != nullptr ? k->table() : nullptr;
}

}  // namespace detail

int available_isas(Isa* out, int capacity) {
  int n = 0;
  for (const detail::Kernel& k : detail::kRegistry)
    if (k.op == detail::KernelOp::f32_rnn && k.runs() && n < capacity) out[n++] = k.isa;
  return n;
}

// ---- The int8 lists of src/internal/int8_kernels.hpp, as views of the registry ----
namespace q8 {
namespace {

using detail::count_of;
using detail::KernelOp;
using detail::kRegistry;

template <class T, int N>
struct List {
  T k[N > 0 ? N : 1];
  int n = 0;
};

// Those this CPU runs, found once (a function-local static sized to the registry's entries).
List<DotRowsKernel, count_of(KernelOp::i8_dot)> dot_list() {
  List<DotRowsKernel, count_of(KernelOp::i8_dot)> l;
  for (const detail::Kernel& k : kRegistry)
    if (k.op == KernelOp::i8_dot && k.runs()) l.k[l.n++] = {k.own_name, k.dot, k.isa};
  return l;
}

// The interleaved kernels need no CPU check: a constant list.
constexpr List<DotPanelsKernel, count_of(KernelOp::i8_dot_panels)> panel_list() {
  List<DotPanelsKernel, count_of(KernelOp::i8_dot_panels)> l{};
  for (const detail::Kernel& k : kRegistry)
    if (k.op == KernelOp::i8_dot_panels) l.k[l.n++] = {k.own_name, k.dot_panels};
  return l;
}
constexpr auto kPanelList = panel_list();

// The vector step kernels this CPU runs, each gate kernel with the cell kernel of its family.
List<StepKernels, count_of(KernelOp::i32_gate_act)> step_list() {
  List<StepKernels, count_of(KernelOp::i32_gate_act)> l;
  for (const detail::Kernel& g : kRegistry) {
    if (g.op != KernelOp::i32_gate_act || g.isa == Isa::none || !g.runs()) continue;
    for (const detail::Kernel& c : kRegistry)
      if (c.op == KernelOp::i16_cell_update && c.isa == g.isa) l.k[l.n++] = {g.own_name, g.gate, c.own_name, c.cell, g.isa};
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

const StepKernels* int8_step_kernels(int* count) {
  static const auto list = step_list();
  *count = list.n;
  return list.k;
}

const StepKernels* int8_best_step_kernels(Isa cap) {
  const detail::Kernel* g = detail::select_kernel(KernelOp::i32_gate_act, cap);
  if (g == nullptr || g->isa == Isa::none) return nullptr;  // the step's own scalar code
  int n = 0;
  const StepKernels* k = int8_step_kernels(&n);
  for (int i = 0; i < n; ++i)
    if (k[i].gate == g->gate) return &k[i];
  return nullptr;
}

}  // namespace q8
}  // namespace rnncore

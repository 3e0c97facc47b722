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

constexpr int kMaxKernels = 32;

struct Registry {
  Kernel k[kMaxKernels];
  int n = 0;
  Kernel& add(const char* name, KernelOp op, Isa isa, const char* family, bool runs) {
    Kernel& e = k[n++];
    e.name = name;
    e.op = op;
    e.isa = isa;
    e.family = family;
    e.runs = runs;
    return e;
  }
};

void add_f32(Registry& r) {
  struct Table {
    const simd::F32Kernels* kernels;
    Isa isa;
    const char* family;
  };
  const Table tables[] = {{simd::f32_kernels_sse2, Isa::sse2, "sse2"},
                          {simd::f32_kernels_avx2, Isa::avx2, "avx2"},
                          {simd::f32_kernels_avx512, Isa::avx512, "avx512"},
                          {simd::f32_kernels_neon, Isa::neon, "neon"}};
  for (const Table& t : tables)
    if (t.kernels != nullptr) r.add(t.kernels->name, KernelOp::f32_rnn, t.isa, t.family, cpu_has_isa(t.isa)).f32 = t.kernels;
}

// The int8 matrix-vector kernels; SDOT is an extension of NEON and VNNI of AVX-512, with no cap
// value of their own; the DSP kernels are a compile-time feature (no CPU check, no cap).
void add_i8_dot(Registry& r) {
  r.add("i8_dot_1x1__scalar", KernelOp::i8_dot, Isa::none, "scalar", true).dot = q8::i8_dot_1x1__scalar;
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  r.add("i8_dot_4x16__dsp", KernelOp::i8_dot, Isa::none, "dsp", true).dot = q8::i8_dot_4x16__dsp;
#endif
#if defined(RNNCORE_BUILD_I8_SSE2)
  r.add("i8_dot_4x16__sse2", KernelOp::i8_dot, Isa::sse2, "sse2", cpu_has_isa(Isa::sse2)).dot = q8::i8_dot_4x16__sse2;
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
  r.add("i8_dot_4x16__avx2", KernelOp::i8_dot, Isa::avx2, "avx2", cpu_has_isa(Isa::avx2)).dot = q8::i8_dot_4x16__avx2;
#endif
#if defined(RNNCORE_BUILD_I8_AVX512VNNI)
  r.add("i8_dot_4x64__avx512vnni", KernelOp::i8_dot, Isa::avx512, "avx512vnni", cpu_has_avx512_vnni()).dot =
      q8::i8_dot_4x64__avx512vnni;
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
  r.add("i8_dot_4x16__neon", KernelOp::i8_dot, Isa::neon, "neon", cpu_has_isa(Isa::neon)).dot = q8::i8_dot_4x16__neon;
#endif
#if defined(RNNCORE_BUILD_I8_SDOT)
  r.add("i8_dot_4x16__sdot", KernelOp::i8_dot, Isa::neon, "sdot", cpu_has_isa(Isa::neon) && cpu_has_arm_dotprod()).dot =
      q8::i8_dot_4x16__sdot;
#endif
  r.add("i8_dot_panels_1x1__scalar", KernelOp::i8_dot_panels, Isa::none, "scalar", true).dot_panels =
      q8::i8_dot_panels_1x1__scalar;
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  r.add("i8_dot_panels_4x16__dsp", KernelOp::i8_dot_panels, Isa::none, "dsp", true).dot_panels =
      q8::rnncore_i8_dot_panels_dsp_4x16;  // the assembly function (C linkage)
#endif
}

// The int8 step kernels. Hosts only: they read the host builds' activation tables.
void add_i8_step(Registry& r) {
#if !defined(RNNCORE_NO_HEAP)
  r.add("i32_gate_act_1x1__scalar", KernelOp::i32_gate_act, Isa::none, "scalar", true).gate = q8::i32_gate_act_1x1__scalar;
#if defined(RNNCORE_BUILD_I8_AVX2)
  r.add("i32_gate_act_8__avx2", KernelOp::i32_gate_act, Isa::avx2, "avx2", cpu_has_isa(Isa::avx2)).gate =
      q8::i32_gate_act_8__avx2;
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
  r.add("i32_gate_act_8__neon", KernelOp::i32_gate_act, Isa::neon, "neon", cpu_has_isa(Isa::neon)).gate =
      q8::i32_gate_act_8__neon;
#endif
  r.add("i16_cell_update_1x1__scalar", KernelOp::i16_cell_update, Isa::none, "scalar", true).cell =
      q8::i16_cell_update_1x1__scalar;
#if defined(RNNCORE_BUILD_I8_AVX2)
  r.add("i16_cell_update_8__avx2", KernelOp::i16_cell_update, Isa::avx2, "avx2", cpu_has_isa(Isa::avx2)).cell =
      q8::i16_cell_update_8__avx2;
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
  r.add("i16_cell_update_8__neon", KernelOp::i16_cell_update, Isa::neon, "neon", cpu_has_isa(Isa::neon)).cell =
      q8::i16_cell_update_8__neon;
#endif
#else
  (void)r;
#endif
}

Registry build_registry() {
  Registry r;
  add_f32(r);
  add_i8_dot(r);
  add_i8_step(r);
  return r;
}

const Registry& registry() {
  static const Registry r = build_registry();  // once (a function-local static: no allocation)
  return r;
}

}  // namespace

const Kernel* kernel_registry(int* count) {
  const Registry& r = registry();
  *count = r.n;
  return r.k;
}

const Kernel* select_kernel(KernelOp op, Isa cap) {
  const Registry& r = registry();
  const Isa env = env_isa_cap();
  for (int i = r.n - 1; i >= 0; --i) {
    const Kernel& k = r.k[i];
    if (k.op == op && k.runs && isa_within_cap(k.isa, cap) && isa_within_cap(k.isa, env)) return &k;
  }
  return nullptr;
}

const simd::F32Kernels* select_f32_kernels(Isa cap, Isa* chosen) {
  const Kernel* k = select_kernel(KernelOp::f32_rnn, cap);
  *chosen = k != nullptr ? k->isa : Isa::none;
  return k != nullptr ? k->f32 : nullptr;
}

}  // namespace detail

int available_isas(Isa* out, int capacity) {
  int count = 0, n = 0;
  const detail::Kernel* k = detail::kernel_registry(&count);
  for (int i = 0; i < count; ++i)
    if (k[i].op == detail::KernelOp::f32_rnn && k[i].runs && n < capacity) out[n++] = k[i].isa;
  return n;
}

// ---- The int8 lists of src/internal/int8_kernels.hpp, as views of the registry ----
namespace q8 {
namespace {

template <class T, int N>
struct List {
  T k[N];
  int n = 0;
};

List<DotRowsKernel, detail::kMaxKernels> dot_list() {
  List<DotRowsKernel, detail::kMaxKernels> l;
  int count = 0;
  const detail::Kernel* k = detail::kernel_registry(&count);
  for (int i = 0; i < count; ++i)
    if (k[i].op == detail::KernelOp::i8_dot && k[i].runs) l.k[l.n++] = {k[i].name, k[i].dot, k[i].isa};
  return l;
}

List<DotPanelsKernel, detail::kMaxKernels> panel_list() {
  List<DotPanelsKernel, detail::kMaxKernels> l;
  int count = 0;
  const detail::Kernel* k = detail::kernel_registry(&count);
  for (int i = 0; i < count; ++i)
    if (k[i].op == detail::KernelOp::i8_dot_panels) l.k[l.n++] = {k[i].name, k[i].dot_panels};
  return l;
}

// The vector step kernels this CPU runs, each gate kernel with the cell kernel of its family.
List<StepKernels, detail::kMaxKernels> step_list() {
  List<StepKernels, detail::kMaxKernels> l;
  int count = 0;
  const detail::Kernel* k = detail::kernel_registry(&count);
  for (int i = 0; i < count; ++i) {
    if (k[i].op != detail::KernelOp::i32_gate_act || !k[i].runs || k[i].isa == Isa::none) continue;
    for (int j = 0; j < count; ++j)
      if (k[j].op == detail::KernelOp::i16_cell_update && k[j].isa == k[i].isa)
        l.k[l.n++] = {k[i].name, k[i].gate, k[j].name, k[j].cell, k[i].isa};
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
  const detail::Kernel* k = detail::select_kernel(detail::KernelOp::i8_dot, cap);  // the scalar one at worst
  return {k->name, k->dot, k->isa};
}

const DotPanelsKernel* int8_panel_kernels(int* count) {
  static const auto list = panel_list();
  *count = list.n;
  return list.k;
}

const StepKernels* int8_step_kernels(int* count) {
  static const auto list = step_list();
  *count = list.n;
  return list.k;
}

const StepKernels* int8_best_step_kernels(Isa cap) {
  const detail::Kernel* g = detail::select_kernel(detail::KernelOp::i32_gate_act, cap);
  if (g == nullptr || g->isa == Isa::none) return nullptr;  // the step's own scalar code
  int n = 0;
  const StepKernels* k = int8_step_kernels(&n);
  for (int i = 0; i < n; ++i)
    if (k[i].gate == g->gate) return &k[i];
  return nullptr;
}

}  // namespace q8
}  // namespace rnncore

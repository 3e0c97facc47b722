// The integer LSTM's matrix-vector kernels (src/internal/int8_kernels.hpp): the portable one and
// the list of those this build and CPU have.
#include "src/internal/int8_kernels.hpp"

#include "src/internal/plan_impl.hpp"

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

bool interleavable4(const std::int8_t* w, int rows, int k_size, int* bad_row, int* bad_column) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  for (int j = 1; j < rows; j += 2) {
    const std::int8_t* odd = w + static_cast<std::size_t>(j) * K;
    for (int k = 0; k < k_size; ++k) {
      if (odd[k] == -128 && odd[static_cast<std::ptrdiff_t>(k) - k_size] < 0) {
        if (bad_row != nullptr) *bad_row = j;
        if (bad_column != nullptr) *bad_column = k;
        return false;
      }
    }
  }
  return true;
}

bool interleave4(const std::int8_t* w, int rows, int k_size, std::int8_t* out, int* bad_row, int* bad_column) {
  if (!interleavable4(w, rows, k_size, bad_row, bad_column)) return false;
  const int k_words = interleaved4_words(k_size);
  const std::size_t bytes = interleaved4_bytes(rows, k_size);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = 0;
  const auto at = [w, rows, k_size](int j, int k) -> int {
    return j < rows ? w[static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size) + static_cast<std::size_t>(k)] : 0;
  };
  for (int j = 0; j < rows; j += 2) {  // a pair of rows: j stored as it is, j + 1 corrected (the padding row too)
    for (int k = 0; k < k_size; ++k) {
      const int even = at(j, k);
      out[interleaved4_offset(j, k, k_words)] = static_cast<std::int8_t>(even);
      out[interleaved4_offset(j + 1, k, k_words)] = static_cast<std::int8_t>(at(j + 1, k) - (even < 0 ? 1 : 0));
    }
  }
  return true;
}

void widen_pairs(const std::int8_t* v, int n, std::int16_t* out) {
  int k = 0;
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  k = widen_pairs_dsp(v, n, out);
#endif
  for (const int padded = 4 * interleaved4_words(n); k < padded; ++k) out[widened_index(k)] = k < n ? v[k] : 0;
}

void i8_dot_panels_scalar(const PanelProduct* products, int count) {
  for (int i = 0; i < count; ++i) {
    const PanelProduct& p = products[i];
    for (int j = 0; j < p.rows; ++j) {
      std::uint32_t acc = static_cast<std::uint32_t>(p.bias[j]);  // wraps as i8_dot_rows_scalar
      for (int k = 0; k < 4 * p.k_words; ++k) {
        acc += static_cast<std::uint32_t>(interleaved4_weight(p.w, j, k, p.k_words) *
                                          static_cast<std::int32_t>(p.v[widened_index(k)]));
      }
      p.out[j] = static_cast<std::int32_t>(acc);
    }
  }
}

namespace {

const DotPanelsKernel kPanelKernels[] = {
    {"i8_dot_panels_scalar", i8_dot_panels_scalar},
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    {"i8_dot_panels_dsp_4x16", rnncore_i8_dot_panels_dsp_4x16},
#endif
};

}  // namespace

const DotPanelsKernel* int8_panel_kernels(int* count) {
  *count = static_cast<int>(sizeof kPanelKernels / sizeof kPanelKernels[0]);
  return kPanelKernels;
}

namespace {

// Every kernel this build has, scalar first and then slowest to fastest; each with whether this
// CPU runs it.
struct Candidate {
  DotRowsKernel kernel;
  bool (*runs)();
};

bool always() { return true; }
#if defined(RNNCORE_BUILD_I8_SSE2)
bool has_sse2() { return detail::cpu_has_isa(Isa::sse2); }
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
bool has_avx2() { return detail::cpu_has_isa(Isa::avx2); }
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
bool has_neon() { return detail::cpu_has_isa(Isa::neon); }
#endif
#if defined(RNNCORE_BUILD_I8_AVX512VNNI)
bool has_avx512vnni() { return detail::cpu_has_avx512_vnni(); }
#endif
#if defined(RNNCORE_BUILD_I8_SDOT)
bool has_sdot() { return detail::cpu_has_isa(Isa::neon) && detail::cpu_has_arm_dotprod(); }
#endif

const Candidate kCandidates[] = {
    {{"i8_dot_rows_scalar", i8_dot_rows_scalar, Isa::none}, always},
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
    // Every ARMv7E-M and ARMv7-A core has it (a compile-time feature); no ISA cap excludes it.
    {{"i8_dot_rows_dsp_4x16", i8_dot_rows_dsp_4x16, Isa::none}, always},
#endif
#if defined(RNNCORE_BUILD_I8_SSE2)
    {{"i8_dot_rows_sse2_4x16", i8_dot_rows_sse2_4x16, Isa::sse2}, has_sse2},
#endif
#if defined(RNNCORE_BUILD_I8_AVX2)
    {{"i8_dot_rows_avx2_4x16", i8_dot_rows_avx2_4x16, Isa::avx2}, has_avx2},
#endif
#if defined(RNNCORE_BUILD_I8_AVX512VNNI)
    {{"i8_dot_rows_avx512vnni_4x64", i8_dot_rows_avx512vnni_4x64, Isa::avx512}, has_avx512vnni},
#endif
#if defined(RNNCORE_BUILD_I8_NEON)
    {{"i8_dot_rows_neon_4x16", i8_dot_rows_neon_4x16, Isa::neon}, has_neon},
#endif
#if defined(RNNCORE_BUILD_I8_SDOT)
    {{"i8_dot_rows_sdot_4x16", i8_dot_rows_sdot_4x16, Isa::neon}, has_sdot},
#endif
};
constexpr int kCandidateCount = static_cast<int>(sizeof kCandidates / sizeof kCandidates[0]);

// Those this CPU runs, found once (a function-local static: no allocation, initialised once even
// with several threads).
struct KernelList {
  DotRowsKernel k[kCandidateCount];
  int n = 0;
};

KernelList detect() {
  KernelList l;
  for (const Candidate& c : kCandidates)
    if (c.runs()) l.k[l.n++] = c.kernel;
  return l;
}

}  // namespace

const DotRowsKernel* int8_dot_kernels(int* count) {
  static const KernelList list = detect();
  *count = list.n;
  return list.k;
}

DotRowsKernel int8_best_dot_kernel(Isa cap) {
  int n = 0;
  const DotRowsKernel* k = int8_dot_kernels(&n);
  const Isa env = detail::env_isa_cap();
  for (int i = n - 1; i > 0; --i)
    if (detail::isa_within_cap(k[i].isa, cap) && detail::isa_within_cap(k[i].isa, env)) return k[i];
  return k[0];
}

namespace {

// The step kernels, as the matrix-vector ones: every pair this build has, slowest first, with
// whether this CPU runs it. Hosts only: the kernels read the host builds' activation tables.
struct StepCandidate {
  StepKernels kernels;
  bool (*runs)();
};

const StepCandidate kStepCandidates[] = {
#if !defined(RNNCORE_NO_HEAP) && defined(RNNCORE_BUILD_I8_AVX2)
    {{"i32_gate_act_avx2_8", i32_gate_act_avx2_8, "i16_cell_update_avx2_8", i16_cell_update_avx2_8, Isa::avx2}, has_avx2},
#endif
#if !defined(RNNCORE_NO_HEAP) && defined(RNNCORE_BUILD_I8_NEON)
    {{"i32_gate_act_neon_8", i32_gate_act_neon_8, "i16_cell_update_neon_8", i16_cell_update_neon_8, Isa::neon}, has_neon},
#endif
    {{nullptr, nullptr, nullptr, nullptr, Isa::none}, nullptr},  // the end (keeps the array non-empty)
};
constexpr int kStepCandidateCount = static_cast<int>(sizeof kStepCandidates / sizeof kStepCandidates[0]) - 1;

struct StepKernelList {
  StepKernels k[kStepCandidateCount + 1];
  int n = 0;
};

StepKernelList detect_step_kernels() {
  StepKernelList l;
  for (int i = 0; i < kStepCandidateCount; ++i)
    if (kStepCandidates[i].runs()) l.k[l.n++] = kStepCandidates[i].kernels;
  return l;
}

}  // namespace

const StepKernels* int8_step_kernels(int* count) {
  static const StepKernelList list = detect_step_kernels();
  *count = list.n;
  return list.k;
}

const StepKernels* int8_best_step_kernels(Isa cap) {
  int n = 0;
  const StepKernels* k = int8_step_kernels(&n);
  const Isa env = detail::env_isa_cap();
  for (int i = n - 1; i >= 0; --i)
    if (detail::isa_within_cap(k[i].isa, cap) && detail::isa_within_cap(k[i].isa, env)) return &k[i];
  return nullptr;
}

}  // namespace q8
}  // namespace rnncore

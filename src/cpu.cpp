// CPU feature detection and the instruction-set cap (PlanOptions::max_isa or env
// RNNCORE_MAX_ISA), which forces lower paths so that every path can be tested on one machine.
// The kernel registry (src/kernels.cpp) asks these which of its kernels run and are allowed.
//
// Detection uses the compiler's __builtin_cpu_supports, which also checks that the OS saves the
// wide registers (XGETBV); xsimd 8.1's own detection does not.
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "src/internal/plan_impl.hpp"

#if defined(__linux__) && defined(__arm__) && !defined(__ARM_NEON)
#include <sys/auxv.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace rnncore {
namespace simd {
#if !defined(RNNCORE_BUILD_SSE2)
const F32Kernels* const f32_kernels_sse2 = nullptr;
#endif
#if !defined(RNNCORE_BUILD_AVX2)
const F32Kernels* const f32_kernels_avx2 = nullptr;
#endif
#if !defined(RNNCORE_BUILD_AVX512)
const F32Kernels* const f32_kernels_avx512 = nullptr;
#endif
#if !defined(RNNCORE_BUILD_NEON)
const F32Kernels* const f32_kernels_neon = nullptr;
#endif
}  // namespace simd

namespace detail {
namespace {

bool cpu_has(Isa isa) {
  switch (isa) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    case Isa::sse2: return __builtin_cpu_supports("sse2");
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
#if defined(__aarch64__) || defined(__ARM_NEON)
    case Isa::neon: return true;  // baseline of the target the library was compiled for
#elif defined(__linux__) && defined(__arm__)
    case Isa::neon: return (getauxval(AT_HWCAP) & HWCAP_NEON) != 0;
#endif
    default: return false;
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  return cpu_has(Isa::avx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool cpu_has_isa(Isa isa) { return cpu_has(isa); }

bool cpu_has_arm_dotprod() {
#if defined(__ARM_FEATURE_DOTPROD)
  return true;  // the whole library targets a CPU that has it
#elif defined(__linux__) && defined(__aarch64__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;  // elsewhere only where the compiler's target promises it (above)
#endif
}

namespace {

// Rank for capping: neon sits beside the x86 ladder, so compare within a family.
bool within_cap(Isa isa, Isa cap) {
  if (cap == Isa::best) return true;
  if (isa == Isa::none) return true;  // portable code
  if (cap == Isa::none) return false;
  if (isa == Isa::neon || cap == Isa::neon) return isa == cap;
  return static_cast<int>(isa) <= static_cast<int>(cap);
}

Isa env_cap() {
#if defined(RNNCORE_NO_GETENV)  // firmware has no environment
  return Isa::best;
#else
  const char* v = std::getenv("RNNCORE_MAX_ISA");
  if (v == nullptr || *v == '\0') return Isa::best;
  for (Isa isa : {Isa::none, Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon, Isa::best})
    if (std::strcmp(v, to_string(isa)) == 0) return isa;
  return Isa::best;
#endif
}

}  // namespace

bool isa_within_cap(Isa isa, Isa cap) { return within_cap(isa, cap); }
Isa env_isa_cap() { return env_cap(); }

}  // namespace detail

}  // namespace rnncore

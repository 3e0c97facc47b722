// f32 kernels for neon: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_NEON
#include "simd/kernels_impl.hpp"

#if defined(__aarch64__)
#define RNNCORE_NEON_ARCH xsimd::neon64
#else
#define RNNCORE_NEON_ARCH xsimd::neon
#endif

namespace rnncore {
namespace simd {
namespace {
const F32Kernels kernels_neon = make_kernels<RNNCORE_NEON_ARCH>("f32_rnn__neon");
}  // namespace
const F32Kernels* const f32_kernels_neon = &kernels_neon;
}  // namespace simd
}  // namespace rnncore

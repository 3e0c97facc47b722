// f32 kernels for sse2: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_SSE2
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
const F32Kernels kernels_sse2 = make_kernels<xsimd::sse2>("f32_rnn__sse2");
}  // namespace
const F32Kernels* const f32_kernels_sse2 = &kernels_sse2;
}  // namespace simd
}  // namespace rnncore

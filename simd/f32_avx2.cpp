// f32 kernels for avx2: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_AVX2
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
const F32Kernels kernels_avx2 = make_kernels<xsimd::fma3<xsimd::avx2>>("f32_rnn__avx2");
}  // namespace
const F32Kernels* const f32_kernels_avx2 = &kernels_avx2;
}  // namespace simd
}  // namespace rnncore

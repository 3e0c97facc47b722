// f32 kernels for avx512: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_AVX512
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
const F32Kernels kernels_avx512 = make_kernels<xsimd::avx512bw>("f32_rnn__avx512");
}  // namespace
const F32Kernels* const f32_kernels_avx512 = &kernels_avx512;
}  // namespace simd
}  // namespace rnncore

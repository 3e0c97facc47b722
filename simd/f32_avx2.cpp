// f32 kernels for avx2: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_AVX2
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
constexpr char kName[] = "f32_rnn_6x2__avx2";  // dtype_op_tile__isa (tile: rows x vectors)
static_assert(names_its_tile<xsimd::fma3<xsimd::avx2>>(kName), "the name must carry the tile");
const F32Kernels kernels_avx2 = make_kernels<xsimd::fma3<xsimd::avx2>>(kName);
}  // namespace
const F32Kernels* const f32_kernels_avx2 = &kernels_avx2;
}  // namespace simd
}  // namespace rnncore

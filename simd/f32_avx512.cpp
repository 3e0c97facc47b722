// f32 kernels for avx512: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_AVX512
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
constexpr char kName[] = "f32_rnn_6x4__avx512";  // dtype_op_tile__isa (tile: rows x vectors)
static_assert(names_its_tile<xsimd::avx512bw>(kName), "the name must carry the tile");
const F32Kernels kernels_avx512 = make_kernels<xsimd::avx512bw>(kName);
}  // namespace
const F32Kernels* const f32_kernels_avx512 = &kernels_avx512;
}  // namespace simd
}  // namespace rnncore

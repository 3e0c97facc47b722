// f32 kernels for sse2: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_SSE2
#include "simd/kernels_impl.hpp"

namespace rnncore {
namespace simd {
namespace {
constexpr char kName[] = "f32_rnn_6x2__sse2";  // dtype_op_tile__isa (tile: rows x vectors)
static_assert(names_its_tile<xsimd::sse2>(kName), "the name must carry the tile");
const F32Kernels kernels_sse2 = make_kernels<xsimd::sse2>(kName);
}  // namespace
const F32Kernels* const f32_kernels_sse2 = &kernels_sse2;
}  // namespace simd
}  // namespace rnncore

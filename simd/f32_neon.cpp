// f32 kernels for neon: the templates of kernels_impl.hpp instantiated with this ISA's flags.
#define RNNCORE_SIMD_ISA_NEON
#include "simd/kernels_impl.hpp"

#if defined(__aarch64__)
#define RNNCORE_NEON_ARCH xsimd::neon64
#define RNNCORE_NEON_NAME "f32_rnn_6x4__neon"  // 32 registers: a whole LSTM block per tile
#else
#define RNNCORE_NEON_ARCH xsimd::neon
#define RNNCORE_NEON_NAME "f32_rnn_6x2__neon"  // ARMv7: 16 q registers
#endif

namespace rnncore {
namespace simd {
namespace {
static_assert(names_its_tile<RNNCORE_NEON_ARCH>(RNNCORE_NEON_NAME), "the name must carry the tile");
const F32Kernels kernels_neon = make_kernels<RNNCORE_NEON_ARCH>(RNNCORE_NEON_NAME);
}  // namespace
const F32Kernels* const f32_kernels_neon = &kernels_neon;
}  // namespace simd
}  // namespace rnncore

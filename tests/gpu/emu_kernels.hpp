// Entry points of the one translation unit that runs kernels in the emulator
// (tests/gpu/emu_kernels.cpp, compiled with the access instrumentation of emu_detector.hpp).
#ifndef RNNCORE_TESTS_GPU_EMU_KERNELS_HPP
#define RNNCORE_TESTS_GPU_EMU_KERNELS_HPP

#include "src/gpu/host/backward.hpp"
#include "tests/gpu/emulator.hpp"

namespace rnncore_test {
namespace emu {

/// gpu::pack and gpu::forward (src/gpu/host/schedule.hpp) on the emulator.
rnncore::Status pack(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g, const float* canonical,
                     unsigned char* packed);
rnncore::Status forward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                        const unsigned char* packed, unsigned char* ws, const rnncore::ForwardArgs& a);
/// gpu::backward (src/gpu/host/backward.hpp) on the emulator.
rnncore::Status backward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                         const unsigned char* packed, unsigned char* ws, const rnncore::BackwardArgs& a);
/// Single launches of the mask kernels.
rnncore::Status inter_layer_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::InterLayerArgs& a);
rnncore::Status input_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::LayerArgs& a);

/// How the MMA probe places its fragments: as mma_coord says, or deliberately wrong.
enum class MmaPlacement {
  vendor,        ///< src/gpu/device/kernels.hpp's mma_coord (the vendor's layout)
  swap_lanes,    ///< lanes 0 and 1 load each other's elements of A
  a_transposed,  ///< A's positions with row and column exchanged
  other_vendor,  ///< A at the other warp size's positions (one vendor's layout on the other's
                 ///< hardware; B and C as the vendor's, since the other layout used for all three
                 ///< operands happens to be a consistent relabelling that gives the right D)
  f16_layout,    ///< TF32 probe only: A at the f16 op's positions (mma_coord, elements 0-3)
};
/// One warp computes D = A·B + C with ex.mma_16x16x16: A [16][16], B [16][16] (k rows) given as
/// f16 (bf16 false) or bf16 bits, C [16][16] f32 in, D out, row-major.
rnncore::Status mma_probe(Launcher& ln, const std::uint16_t* a, const std::uint16_t* b, const float* c, float* d, bool bf16,
                          MmaPlacement placement);
/// One warp computes D = A·B + C with ex.mma_16x16x8 (TF32): A [16][8], B [8][16] as TF32 patterns,
/// C [16][16] f32 in, D out, row-major; A's fragments placed as `placement` says (a_transposed:
/// each 8 × 8 block of A transposed).
rnncore::Status mma_tf32_probe(Launcher& ln, const std::uint32_t* a, const std::uint32_t* b, const float* c, float* d,
                               MmaPlacement placement);
/// The input projection of `a` (direction 0) by the matrix-unit GEMM (mma; TF32 for f32 weights) or
/// the f32 tiled one, with the weight storage `weights` (WeightId), on the launcher's device.
rnncore::Status proj_gemm(Launcher& ln, const rnncore::gpu::LayerArgs& a, int weights, bool mma);

/// Small kernels with a known defect (or without it), to test the detector itself.
enum class Probe {
  smem_neighbour,          ///< threads read a neighbour's shared-memory write after (or without) a barrier
  global_other_block,      ///< blocks read another block's global write in the same ordinary launch
  grid_plain_load,         ///< cooperative: another block's write read after a grid barrier with a plain load
  grid_coherent_load,      ///< ... with ex.load_coherent
  same_value_writes,       ///< every thread of a block writes the same value to one address
  grid_no_barrier,         ///< cooperative: another block's write read with no grid barrier (coherent load)
};
/// Runs `probe` (`with_barrier` false: its barrier left out) on `buf` (blocks × threads floats,
/// tracked by the caller); returns the launch status.
rnncore::Status run_probe(Launcher& ln, Probe probe, bool with_barrier, float* buf, int blocks, int threads);

}  // namespace emu
}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GPU_EMU_KERNELS_HPP

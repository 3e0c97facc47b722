// Entry points of the one translation unit that runs kernels in the emulator
// (tests/gpu/emu_kernels.cpp, compiled with the access instrumentation of emu_detector.hpp).
#ifndef RNNCORE_TESTS_GPU_EMU_KERNELS_HPP
#define RNNCORE_TESTS_GPU_EMU_KERNELS_HPP

#include "src/gpu/backward.hpp"
#include "tests/gpu/emulator.hpp"

namespace rnncore_test {
namespace emu {

/// gpu::pack and gpu::forward (src/gpu/schedule.hpp) on the emulator.
rnncore::Status pack(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g, const float* canonical,
                     unsigned char* packed);
rnncore::Status forward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                        const unsigned char* packed, unsigned char* ws, const rnncore::ForwardArgs& a);
/// gpu::backward (src/gpu/backward.hpp) on the emulator.
rnncore::Status backward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                         const unsigned char* packed, unsigned char* ws, const rnncore::BackwardArgs& a);
/// Single launches of the mask kernels.
rnncore::Status inter_layer_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::InterLayerArgs& a);
rnncore::Status input_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::LayerArgs& a);

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

// Entry points of the one translation unit that runs kernels in the emulator
// (tests/gpu/emu_kernels.cpp, compiled with the access instrumentation of emu_detector.hpp).
#ifndef RNNCORE_TESTS_GPU_EMU_KERNELS_HPP
#define RNNCORE_TESTS_GPU_EMU_KERNELS_HPP

#include <cstring>
#include <memory>
#include <vector>

#include "src/gpu/host/backward.hpp"
#include "src/gpu/host/graph.hpp"
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
/// The emulator's GraphRuntime (src/gpu/host/graph.hpp): a capture records the launch list — each
/// kernel with its grid, argument pointer and integer argument, each zeroing — and a launch replays
/// it on the Launcher, every kernel reading its argument block from (emulated) device memory as a
/// graph node of the by-pointer vendor (AMD) does. `bake` (a mutation): the capture also keeps each
/// launch's argument bytes and the replay passes those instead, as a graph of by-value arguments
/// (NVIDIA) would run if the signature did not cover them.
class GraphRuntime {
 public:
  struct Entry {
    rnncore::Status (*replay)(Launcher&, const Entry&, bool bake) = nullptr;  ///< null: a zeroing
    rnncore::gpu::Dims d;
    const void* dev = nullptr;  ///< the argument block's device copy; a zeroing's target
    std::size_t bytes = 0;      ///< a zeroing's size
    int arg = 0;
    std::vector<unsigned char> baked;  ///< the argument block's bytes at capture
  };
  /// What capture records: a Launcher of the schedule's interface that queues nothing.
  struct Recorder {
    static constexpr bool kArgsInDeviceMemory = Launcher::kArgsInDeviceMemory;
    std::vector<Entry>* out;
    template <class K>
    rnncore::Status launch(const rnncore::gpu::Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
      Entry e;
      e.replay = &replay_one<K>;
      e.d = d;
      e.dev = dev;
      e.arg = arg;
      e.baked.resize(sizeof host);
      std::memcpy(e.baked.data(), &host, sizeof host);
      out->push_back(std::move(e));
      return rnncore::Status::ok;
    }
    template <class K>
    rnncore::Status launch_cooperative(const rnncore::gpu::Dims&, const typename K::Args&, const typename K::Args*, int) {
      return rnncore::Status::unsupported;  // never captured (forward_graphed launches such runs directly)
    }
    rnncore::Status zero_async(void* dst, std::size_t bytes) {
      Entry e;
      e.dev = dst;
      e.bytes = bytes;
      out->push_back(std::move(e));
      return rnncore::Status::ok;
    }
    rnncore::Status copy_to_device(void*, const void*, std::size_t) { return rnncore::Status::internal; }
    rnncore::Status copy_to_device_async(void*, const void*, std::size_t) { return rnncore::Status::internal; }
    rnncore::Status copy_to_host(void*, const void*, std::size_t) { return rnncore::Status::internal; }
    rnncore::Status copy_to_host_in_order(void*, const void*, std::size_t) { return rnncore::Status::internal; }
    rnncore::Status finish(const char*) { return rnncore::Status::ok; }
  };

  explicit GraphRuntime(Launcher* ln) : ln_(ln) {}

  template <class F>
  rnncore::Status capture(F launches, void** exec) {
    ++captures;
    if (refuse) return rnncore::Status::unsupported;
    auto graph = std::make_unique<std::vector<Entry>>();
    Recorder rec{graph.get()};
    RNNCORE_RETURN_IF_ERROR(launches(rec));
    *exec = graph.get();
    graphs_.push_back(std::move(graph));
    return rnncore::Status::ok;
  }
  rnncore::Status launch(void* exec) {
    ++replays;
    for (const Entry& e : *static_cast<const std::vector<Entry>*>(exec)) {
      if (e.replay == nullptr) {
        RNNCORE_RETURN_IF_ERROR(ln_->zero_async(const_cast<void*>(e.dev), e.bytes));
      } else {
        RNNCORE_RETURN_IF_ERROR(e.replay(*ln_, e, bake));
      }
    }
    return rnncore::Status::ok;
  }
  void destroy(void* exec) {
    ++destroyed;
    for (auto& g : graphs_)
      if (g.get() == exec) g.reset();
  }

  bool bake = false;    ///< the mutation: replay the argument bytes of the capture
  bool refuse = false;  ///< refuse every capture, as a runtime that cannot capture
  int captures = 0, replays = 0, destroyed = 0;

 private:
  template <class K>
  static rnncore::Status replay_one(Launcher& ln, const Entry& e, bool bake);

  Launcher* ln_;
  std::vector<std::unique_ptr<std::vector<Entry>>> graphs_;
};

/// A lock that locks nothing (the emulator's tests are single-threaded).
struct NoMutex {
  void lock() {}
  void unlock() {}
};

/// gpu::forward_graphed (src/gpu/host/graph.hpp) on the emulator, with `rt` for the graphs.
rnncore::Status forward_graphed(Launcher& ln, GraphRuntime& rt, rnncore::gpu::GraphTable& table,
                                const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g, const unsigned char* packed,
                                unsigned char* ws, const rnncore::ForwardArgs& a, rnncore::gpu::GraphUse* use, char* note,
                                std::size_t note_bytes);
/// The signature of a run's launches (gpu::SignatureLauncher after gpu::forward_prepare on `ln`),
/// as a vendor whose kernels take their arguments by value (`by_value`) or by pointer would bake them.
rnncore::Status forward_signature(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                                  const unsigned char* packed, unsigned char* ws, const rnncore::ForwardArgs& a, bool by_value,
                                  rnncore::gpu::GraphSignature* out);

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

#ifdef RNNCORE_SOURCE_DIR  // the test executables' (tests/meson.build)
#include <cstdio>
#include <string>

namespace rnncore_test {

/// Line `line` of src/gpu/device/FILE (the mutation tests name a site by its source text).
inline std::string device_source_line(const char* file, int line) {
  std::FILE* f = std::fopen((std::string(RNNCORE_SOURCE_DIR "/src/gpu/device/") + file).c_str(), "r");
  if (f == nullptr) return "";
  char buf[1024];
  std::string text;
  for (int i = 1; std::fgets(buf, sizeof buf, f) != nullptr; ++i)
    if (i == line) {
      text = buf;
      break;
    }
  std::fclose(f);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace rnncore_test
#endif

#endif  // RNNCORE_TESTS_GPU_EMU_KERNELS_HPP

// The kernels on the emulator: the only translation unit that instantiates Launcher::run, compiled
// with -fsanitize=thread where available so that every memory access of the kernel bodies reaches
// the detector (tests/gpu/emu_detector.hpp). It must contain no atomics (their ThreadSanitizer entry
// points are not served).
#define RNNCORE_EMU_KERNELS_TU 1
#include "tests/gpu/emu_kernels.hpp"

#if defined(__SANITIZE_THREAD__)
#define RNNCORE_EMU_INSTRUMENTED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RNNCORE_EMU_INSTRUMENTED 1
#endif
#endif

namespace rnncore_test {
namespace emu {

#if defined(RNNCORE_EMU_INSTRUMENTED)
namespace {
const bool kInstrumented = (detector::set_instrumented(), true);
}
#endif

rnncore::Status pack(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g, const float* canonical,
                     unsigned char* packed) {
  return rnncore::gpu::pack(ln, p, g, canonical, packed);
}
rnncore::Status forward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                        const unsigned char* packed, unsigned char* ws, const rnncore::ForwardArgs& a) {
  return rnncore::gpu::forward(ln, p, g, packed, ws, a);
}
rnncore::Status backward(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                         const unsigned char* packed, unsigned char* ws, const rnncore::BackwardArgs& a) {
  return rnncore::gpu::backward(ln, p, g, packed, ws, a);
}
rnncore::Status inter_layer_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::InterLayerArgs& a) {
  return ln.launch<rnncore::gpu::f32_rnn_inter_layer_dropout>(d, a, &a, 0);
}
rnncore::Status input_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::LayerArgs& a) {
  return ln.launch<rnncore::gpu::f32_rnn_input_dropout>(d, a, &a, 0);
}

namespace {

struct ProbeArgs {
  float* buf;
  std::int32_t probe, with_barrier;
};

struct probe_kernel {
  using Args = ProbeArgs;
  static const char* name() { return "probe"; }
  static constexpr int kMaxThreads = 256;
  template <class Exec>
  static void run(const Exec& ex, const Args& a, int, float* smem) {
    const int t = ex.tx(), n = ex.bdx(), b = ex.bx(), nb = ex.gdx();
    float* mine = a.buf + static_cast<std::int64_t>(b) * n;
    float* next = a.buf + static_cast<std::int64_t>((b + 1) % nb) * n;
    switch (static_cast<Probe>(a.probe)) {
      case Probe::smem_neighbour:
        smem[t] = static_cast<float>(t);
        if (a.with_barrier) ex.sync();
        mine[t] = smem[(t + 1) % n];
        break;
      case Probe::global_other_block:  // a block barrier orders the block's own threads only
        mine[t] = static_cast<float>(b);
        ex.sync();
        smem[t] = a.with_barrier ? mine[(t + 1) % n] : next[t];
        break;
      case Probe::grid_plain_load:
      case Probe::grid_coherent_load:
        mine[t] = static_cast<float>(b);
        ex.grid_sync();
        smem[t] = static_cast<Probe>(a.probe) == Probe::grid_plain_load ? next[t] : ex.load_coherent(next + t);
        break;
      case Probe::same_value_writes:
        if (a.with_barrier ? t == 0 : true) mine[0] = 1.0f;
        break;
      case Probe::grid_no_barrier:
        mine[t] = static_cast<float>(b);
        if (a.with_barrier) ex.grid_sync();
        smem[t] = ex.load_coherent(next + t);
        break;
    }
  }
};

}  // namespace

rnncore::Status run_probe(Launcher& ln, Probe probe, bool with_barrier, float* buf, int blocks, int threads) {
  ProbeArgs a{buf, static_cast<std::int32_t>(probe), with_barrier ? 1 : 0};
  rnncore::gpu::Dims d;
  d.gx = static_cast<std::uint32_t>(blocks);
  d.block = static_cast<std::uint32_t>(threads);
  d.smem = sizeof(float) * static_cast<std::size_t>(threads);
  const bool coop = probe == Probe::grid_plain_load || probe == Probe::grid_coherent_load || probe == Probe::grid_no_barrier;
  return coop ? ln.launch_cooperative<probe_kernel>(d, a, &a, 0) : ln.launch<probe_kernel>(d, a, &a, 0);
}

}  // namespace emu
}  // namespace rnncore_test

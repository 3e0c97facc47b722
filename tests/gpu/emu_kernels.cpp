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
template <class K>
rnncore::Status GraphRuntime::replay_one(Launcher& ln, const Entry& e, bool bake) {
  const auto* dev = static_cast<const typename K::Args*>(e.dev);
  if (!bake) return ln.launch<K>(e.d, *dev, dev, e.arg);
  typename K::Args baked;
  std::memcpy(&baked, e.baked.data(), sizeof baked);
  return ln.launch<K>(e.d, baked, &baked, e.arg);
}

rnncore::Status forward_graphed(Launcher& ln, GraphRuntime& rt, rnncore::gpu::GraphTable& table,
                                const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g, const unsigned char* packed,
                                unsigned char* ws, const rnncore::ForwardArgs& a, rnncore::gpu::GraphUse* use, char* note,
                                std::size_t note_bytes) {
  NoMutex mutex;
  return rnncore::gpu::with_weight_type(g, [&](auto wt) {
    return rnncore::gpu::forward_graphed<decltype(wt)>(ln, rt, table, mutex, p, g, packed, ws, a, use, note, note_bytes);
  });
}

rnncore::Status forward_signature(Launcher& ln, const rnncore::detail::PlanImpl& p, const rnncore::gpu::GpuPlan& g,
                                  const unsigned char* packed, unsigned char* ws, const rnncore::ForwardArgs& a, bool by_value,
                                  rnncore::gpu::GraphSignature* out) {
  using namespace rnncore::gpu;
  ForwardPrep f;
  RNNCORE_RETURN_IF_ERROR(forward_prepare(ln, p, g, packed, ws, a, &f));
  return with_weight_type(g, [&](auto wt) {
    if (by_value) {
      SignatureLauncher<true> s;
      RNNCORE_RETURN_IF_ERROR(forward_launches<decltype(wt)>(s, p, g, a, f));
      *out = s.signature();
    } else {
      SignatureLauncher<false> s;
      RNNCORE_RETURN_IF_ERROR(forward_launches<decltype(wt)>(s, p, g, a, f));
      *out = s.signature();
    }
    return rnncore::Status::ok;
  });
}

rnncore::Status inter_layer_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::InterLayerArgs& a) {
  return ln.launch<rnncore::gpu::f32_rnn_inter_layer_dropout>(d, a, &a, 0);
}
rnncore::Status input_dropout(Launcher& ln, const rnncore::gpu::Dims& d, const rnncore::gpu::LayerArgs& a) {
  return ln.launch<rnncore::gpu::f32_rnn_input_dropout>(d, a, &a, 0);
}

namespace {

struct MmaProbeArgs {
  const std::uint16_t* a;
  const std::uint16_t* b;
  const float* c;
  float* d;
  std::int32_t placement;
};

/// One warp: fragments of A, B and C from global memory, one MMA, D back (tests of the op itself).
template <class WT>
struct mma_probe_kernel {
  using Args = MmaProbeArgs;
  static const char* name() { return "mma_probe"; }
  static constexpr bool kUsesMma = true;
  static constexpr int kMaxThreads = 64;
  template <class Exec>
  static void run(const Exec& ex, const Args& p, int, float*) {
    using namespace rnncore::gpu;
    const int ws = ex.warp_size(), lane = ex.tx(), e = 256 / ws;
    const auto place = static_cast<MmaPlacement>(p.placement);
    const auto coord = [&](int op, int l, int i, int* row, int* col) {
      if (place == MmaPlacement::swap_lanes && op == kMmaA && l < 2) l ^= 1;
      if (place == MmaPlacement::a_transposed && op == kMmaA) {
        mma_coord(ws, kMmaA, l, i, col, row);
        return;
      }
      if (place == MmaPlacement::other_vendor && op == kMmaA) {  // warp 64's positions for the lanes and elements they cover
        mma_coord(ws == 32 ? 64 : 32, op, ws == 32 ? l + 32 * (i / 4) : l % 32, ws == 32 ? i % 4 : i + 4 * (l / 32), row, col);
        return;
      }
      mma_coord(ws, op, l, i, row, col);
    };
    MmaFrag<WT> fa = {{0u, 0u, 0u, 0u}}, fb = {{0u, 0u, 0u, 0u}};
    MmaAcc acc = {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}};
    for (int i = 0; i < e; ++i) {
      int r = 0, c = 0;
      coord(kMmaA, lane, i, &r, &c);
      fa.r[i / 2] |= static_cast<std::uint32_t>(p.a[r * 16 + c]) << (16 * (i % 2));
      coord(kMmaB, lane, i, &r, &c);
      fb.r[i / 2] |= static_cast<std::uint32_t>(p.b[r * 16 + c]) << (16 * (i % 2));
      coord(kMmaC, lane, i, &r, &c);
      acc.c[i] = p.c[r * 16 + c];
    }
    ex.mma_16x16x16(fa, fb, acc);
    for (int i = 0; i < e; ++i) {
      int r = 0, c = 0;
      coord(kMmaC, lane, i, &r, &c);
      p.d[r * 16 + c] = acc.c[i];
    }
  }
};

struct MmaTf32ProbeArgs {
  const std::uint32_t* a;  // [16][8] TF32 patterns
  const std::uint32_t* b;  // [8][16]
  const float* c;
  float* d;
  std::int32_t placement;
};

/// mma_probe_kernel for the TF32 op (ex.mma_16x16x8, warp 32). The wrong placements of A: lanes 0
/// and 1 exchanged, each 8 × 8 block of A transposed, or the f16 op's positions (mma_coord's
/// elements 0-3, which lie in A's 8 columns too).
struct mma_tf32_probe_kernel {
  using Args = MmaTf32ProbeArgs;
  static const char* name() { return "mma_tf32_probe"; }
  static constexpr bool kUsesMma = true;
  static constexpr bool kUsesMmaTf32 = true;
  static constexpr int kMaxThreads = 64;
  template <class Exec>
  static void run(const Exec& ex, const Args& p, int, float*) {
    using namespace rnncore::gpu;
    const int lane = ex.tx();
    const auto place = static_cast<MmaPlacement>(p.placement);
    const auto coord = [&](int op, int l, int i, int* row, int* col) {
      if (place == MmaPlacement::swap_lanes && op == kMmaA && l < 2) l ^= 1;
      if (place == MmaPlacement::f16_layout && op == kMmaA) return mma_coord(32, kMmaA, l, i, row, col);
      mma_coord_tf32(op, l, i, row, col);
      if (place == MmaPlacement::a_transposed && op == kMmaA) {
        const int r = *row;
        *row = 8 * (r / 8) + *col;
        *col = r % 8;
      }
    };
    MmaFrag<Tf32> fa = {{0u, 0u, 0u, 0u}}, fb = {{0u, 0u, 0u, 0u}};
    MmaAcc acc = {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}};
    for (int i = 0; i < 4; ++i) {
      int r = 0, c = 0;
      coord(kMmaA, lane, i, &r, &c);
      fa.r[i] = p.a[r * 8 + c];
      coord(kMmaB, lane, i, &r, &c);
      fb.r[i] = p.b[r * 16 + c];
    }
    for (int i = 0; i < 8; ++i) {
      int r = 0, c = 0;
      coord(kMmaC, lane, i, &r, &c);
      acc.c[i] = p.c[r * 16 + c];
    }
    ex.mma_16x16x8(fa, fb, acc);
    for (int i = 0; i < 8; ++i) {
      int r = 0, c = 0;
      coord(kMmaC, lane, i, &r, &c);
      p.d[r * 16 + c] = acc.c[i];
    }
  }
};

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

rnncore::Status mma_probe(Launcher& ln, const std::uint16_t* a, const std::uint16_t* b, const float* c, float* d, bool bf16,
                          MmaPlacement placement) {
  const MmaProbeArgs args{a, b, c, d, static_cast<std::int32_t>(placement)};
  rnncore::gpu::Dims dims;
  dims.block = static_cast<std::uint32_t>(ln.warp_size());
  if (bf16) return ln.launch<mma_probe_kernel<rnncore::gpu::WeightBF16>>(dims, args, &args, 0);
  return ln.launch<mma_probe_kernel<rnncore::gpu::WeightF16>>(dims, args, &args, 0);
}

rnncore::Status mma_tf32_probe(Launcher& ln, const std::uint32_t* a, const std::uint32_t* b, const float* c, float* d,
                               MmaPlacement placement) {
  const MmaTf32ProbeArgs args{a, b, c, d, static_cast<std::int32_t>(placement)};
  rnncore::gpu::Dims dims;
  dims.block = static_cast<std::uint32_t>(ln.warp_size());
  return ln.launch<mma_tf32_probe_kernel>(dims, args, &args, 0);
}

namespace {
template <class WT>
rnncore::Status proj_gemm_with(Launcher& ln, const rnncore::gpu::LayerArgs& a, bool mma) {
  using namespace rnncore::gpu;
  const std::int64_t M = static_cast<std::int64_t>(a.steps) * a.batch, N = static_cast<std::int64_t>(a.gates) * a.hidden;
  Dims d;
  if (mma) {  // f32 weights: the TF32 instance
    using K = rnn_proj_gemm_mma_64x64<WT>;
    d.gx = static_cast<std::uint32_t>((N + K::kBN - 1) / K::kBN);
    d.gy = static_cast<std::uint32_t>((M + K::kBM - 1) / K::kBM);
    d.block = static_cast<std::uint32_t>(K::threads(ln.warp_size()));
    d.smem = K::smem_bytes();
    return ln.launch<K>(d, a, &a, 0);
  }
  using K = f32_rnn_proj_gemm_tiled<WT>;
  d.gx = static_cast<std::uint32_t>((N + K::kBN - 1) / K::kBN);
  d.gy = static_cast<std::uint32_t>((M + K::kBM - 1) / K::kBM);
  d.block = K::kThreads;
  d.smem = K::smem_bytes();
  return ln.launch<K>(d, a, &a, 0);
}
}  // namespace

rnncore::Status proj_gemm(Launcher& ln, const rnncore::gpu::LayerArgs& a, int weights, bool mma) {
  if (weights == rnncore::gpu::kWeightF16) return proj_gemm_with<rnncore::gpu::WeightF16>(ln, a, mma);
  if (weights == rnncore::gpu::kWeightBF16) return proj_gemm_with<rnncore::gpu::WeightBF16>(ln, a, mma);
  return proj_gemm_with<float>(ln, a, mma);
}

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

// Graph replay of the forward's launches (docs/gpu.md, "Graphs"): a run's kernels are captured once
// into a CUDA / HIP graph and replayed by later runs whose launch sequence is the same, one graph
// launch in place of one launch per kernel and step. No GPU runtime is touched here: the runtime's
// part (capture, instantiate, launch, destroy) is a `GraphRuntime` — the device's in
// src/gpu/host/launcher.hpp, the emulator's in tests/gpu/ — so the tests check this logic as the
// device runs it.
//
// What a captured graph bakes in is each launch's kernel, grid, dynamic shared memory, integer
// argument (the step) and argument pointer, each zeroing's target and size and, where kernels take
// their argument block by value (RNNCORE_GPU_ARGS_BY_VALUE, NVIDIA), the block's bytes. Everything
// else a kernel reads per call — x, y, h0, c0, hy, cy, the lengths, row ids and resets, the dropout
// step and seeds, T and B — it reads through the argument block, which forward_prepare copies into
// the workspace before the graph runs (where kernels read it from device memory, AMD). A run
// replays the graph only when the signature of what it would bake equals the graph's, so a value
// that would go stale in a replayed graph makes the signatures differ and the run launches directly.
//
// A GraphRuntime provides:
//   template <class F> Status capture(F launches, void** exec);  // launches(L&) on a capturing launcher,
//                      // instantiated; Status::unsupported (nothing kept) where the runtime refuses
//   Status launch(void* exec);                                   // replays it on the run's stream
//   void destroy(void* exec);
#ifndef RNNCORE_SRC_GPU_HOST_GRAPH_HPP
#define RNNCORE_SRC_GPU_HOST_GRAPH_HPP

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "src/gpu/host/schedule.hpp"

namespace rnncore {
namespace gpu {

/// What a captured graph of a launch sequence bakes in, hashed (64 bits) and counted.
struct GraphSignature {
  std::uint64_t hash = 0;
  std::uint32_t launches = 0;
  std::uint32_t zeroings = 0;
  bool cooperative = false;  ///< a persistent (cooperative) launch: never captured
  bool operator==(const GraphSignature& o) const {
    return hash == o.hash && launches == o.launches && zeroings == o.zeroings && cooperative == o.cooperative;
  }
  bool operator!=(const GraphSignature& o) const { return !(*this == o); }
  bool empty() const { return launches == 0 && zeroings == 0; }
};

/// An address that names kernel K in this process (one per instance).
template <class K>
const void* kernel_tag() {
  static const char tag = 0;
  return &tag;
}

/// A Launcher that launches nothing: it hashes what a graph of the launches would bake in (see the
/// top of this file). kByValue: kernels take their argument block by value, so its bytes are baked
/// too (each distinct block hashed once per run, where consecutive launches share it).
template <bool kByValue>
class SignatureLauncher {
 public:
  static constexpr bool kArgsInDeviceMemory = !kByValue;

  template <class K>
  Status launch(const Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
    ++sig_.launches;
    mix_launch(kernel_tag<K>(), d, dev, arg);
    if (kByValue && static_cast<const void*>(&host) != last_host_) {
      last_host_ = &host;
      mix_bytes(&host, sizeof host);
    }
    return Status::ok;
  }
  template <class K>
  Status launch_cooperative(const Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
    sig_.cooperative = true;
    return launch<K>(d, host, dev, arg);
  }
  Status zero_async(void* dst, std::size_t bytes) {
    ++sig_.zeroings;
    mix(0x7a65726fu);
    mix(reinterpret_cast<std::uintptr_t>(dst));
    mix(bytes);
    return Status::ok;
  }
  // forward_launches copies nothing: a copy here is a schedule that would bake host data into a graph.
  Status copy_to_device(void*, const void*, std::size_t) { return copies_refused(); }
  Status copy_to_device_async(void*, const void*, std::size_t) { return copies_refused(); }
  Status copy_to_host(void*, const void*, std::size_t) { return copies_refused(); }
  Status copy_to_host_in_order(void*, const void*, std::size_t) { return copies_refused(); }
  Status finish(const char*) { return Status::ok; }

  const GraphSignature& signature() const { return sig_; }

 private:
  static Status copies_refused() {
    return detail::fail_status(Status::internal, "gpu graphs: a copy among the launches a graph would capture");
  }
  void mix(std::uint64_t v) {  // splitmix64's finaliser over the running hash
    std::uint64_t z = sig_.hash ^ (v + 0x9e3779b97f4a7c15ull + (sig_.hash << 6) + (sig_.hash >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    sig_.hash = z ^ (z >> 31);
  }
  void mix_launch(const void* kernel, const Dims& d, const void* dev, int arg) {
    mix(reinterpret_cast<std::uintptr_t>(kernel));
    mix(static_cast<std::uint64_t>(d.gx) | static_cast<std::uint64_t>(d.gy) << 32);
    mix(static_cast<std::uint64_t>(d.gz) | static_cast<std::uint64_t>(d.block) << 32);
    mix(d.smem);
    mix(reinterpret_cast<std::uintptr_t>(dev));
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(arg)));
  }
  void mix_bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t v;
      std::memcpy(&v, b + i, 8);
      mix(v);
    }
    std::uint64_t tail = n;
    for (; i < n; ++i) tail = tail << 8 | b[i];
    mix(tail);
  }

  GraphSignature sig_;
  const void* last_host_ = nullptr;
};

/// One workspace's graph: the signature it was captured from, and the last run's that missed it.
struct GraphSlot {
  int device = -1;
  const void* ws = nullptr;
  void* exec = nullptr;  ///< the runtime's instantiated graph, or null
  GraphSignature graph;  ///< what `exec` was captured from
  GraphSignature missed; ///< the last run's signature that was not the graph's (or empty)
  bool refused = false;  ///< the runtime refused a capture: this workspace launches directly
  std::uint64_t used = 0;
};

/// Graphs of the process, one per (device, workspace) in use, the least recently used replaced.
constexpr int kGraphSlots = 16;
struct GraphTable {
  GraphSlot slot[kGraphSlots];
  std::uint64_t clock = 0;
};

/// How a run went (gpu_graph_report's line): replayed, captured then replayed, or launched directly.
enum class GraphUse { direct, captured, replayed };

/// The slot of (device, ws), or the least recently used one, emptied (its graph destroyed).
template <class R>
GraphSlot& graph_slot(R& rt, GraphTable& t, int device, const void* ws) {
  GraphSlot* victim = &t.slot[0];
  for (GraphSlot& s : t.slot) {
    if (s.device == device && s.ws == ws) return s;
    if (s.used < victim->used) victim = &s;
  }
  if (victim->exec != nullptr) rt.destroy(victim->exec);
  *victim = GraphSlot();
  victim->device = device;
  victim->ws = ws;
  return *victim;
}

/// The forward pass with graph replay, for a plan whose GpuPlan::graphs is set; `table` is used
/// under `mutex` only (the copies, the signing and direct launches run outside it). forward_prepare's copies go to `ln` as in any run. Then the run's
/// launch sequence is signed (SignatureLauncher) and:
///   - it equals the slot's graph's: the graph is replayed;
///   - it equals the previous run's (the same sequence on two runs in a row of this workspace):
///     it is captured and instantiated (the one allocation, in the runtime) and replayed;
///   - otherwise (a first run, another shape, a persistent layer, new values baked by value, a
///     capture the runtime refused) the kernels are launched directly and the signature kept for
///     the next run.
/// `note` gets one line saying which, and why a run launched directly.
template <class WT, class L, class R, class M>
Status forward_graphed(L& ln, R& rt, GraphTable& table, M& mutex, const detail::PlanImpl& p, const GpuPlan& g,
                       const unsigned char* packed, unsigned char* ws, const ForwardArgs& a, GraphUse* use, char* note,
                       std::size_t note_bytes) {
  ForwardPrep f;
  RNNCORE_RETURN_IF_ERROR(forward_prepare(ln, p, g, packed, ws, a, &f));
  SignatureLauncher<!L::kArgsInDeviceMemory> signer;
  RNNCORE_RETURN_IF_ERROR(forward_launches<WT>(signer, p, g, a, f));
  const GraphSignature sig = signer.signature();
  std::unique_lock<M> lock(mutex);
  GraphSlot& slot = graph_slot(rt, table, g.device, ws);
  slot.used = ++table.clock;
  const auto say = [&](GraphUse u, const char* what) {
    *use = u;
    std::snprintf(note, note_bytes, "%s (%u launches, %u zeroings)", what, sig.launches, sig.zeroings);
  };
  if (sig.cooperative) {
    say(GraphUse::direct, "direct: a layer runs the persistent kernel (one launch per layer; not captured)");
  } else if (slot.refused) {
    say(GraphUse::direct, "direct: the runtime refused an earlier capture for this workspace");
  } else if (slot.exec != nullptr && slot.graph == sig) {
    RNNCORE_RETURN_IF_ERROR(rt.launch(slot.exec));
    say(GraphUse::replayed, "replayed the graph");
    return ln.finish("forward");
  } else if (!slot.missed.empty() && slot.missed == sig) {
    void* exec = nullptr;
    const Status s = rt.capture([&](auto& capturing) { return forward_launches<WT>(capturing, p, g, a, f); }, &exec);
    if (s == Status::ok) {
      if (slot.exec != nullptr) rt.destroy(slot.exec);
      slot.exec = exec;
      slot.graph = sig;
      slot.missed = GraphSignature();
      RNNCORE_RETURN_IF_ERROR(rt.launch(exec));
      say(GraphUse::captured, "captured and replayed a graph");
      return ln.finish("forward");
    }
    if (s != Status::unsupported) return s;
    slot.refused = true;
    say(GraphUse::direct, "direct: the runtime refused the capture");
  } else {
    slot.missed = sig;
    say(GraphUse::direct, slot.exec != nullptr ? "direct: the launch sequence differs from the graph's (captured if the next run repeats it)"
                                               : "direct: a first run of this workspace (captured if the next run repeats it)");
  }
  lock.unlock();
  RNNCORE_RETURN_IF_ERROR(forward_launches<WT>(ln, p, g, a, f));
  return ln.finish("forward");
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_GRAPH_HPP

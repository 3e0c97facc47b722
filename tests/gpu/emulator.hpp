// A host emulator of the GPU for rnncore's kernels (hip/rnn_device.hpp): every GPU thread of a
// launch is a fiber (a user-level thread with its own stack, ucontext) executing the kernel body
// itself, with
//   - __syncthreads as a real barrier of the block's threads,
//   - the grid barrier of a cooperative launch as a barrier of every thread of the grid (all blocks
//     run together, as co-residency guarantees on a GPU),
//   - warp shuffles through a per-warp exchange buffer and barrier, for any warp size (32 and 64
//     are tested: kernels must not assume one),
//   - shared memory filled with NaN before each block, so a read of anything the block did not
//     write first shows up in the results,
//   - threads scheduled round-robin from barrier to barrier, in ascending order in one launch and
//     descending in the next, so a missing barrier lets some thread read stale data either way,
//   - a deadlock (a barrier some thread never reaches) reported and aborted,
// and the launch checks a GPU would make (block size against the kernel's bound, shared memory
// against the device limit, co-residency of a cooperative grid). Device memory is host memory.
// Everything runs on the calling thread, deterministically.
//
// What it cannot show: the vendor's compilers and runtime, the hardware memory model (weakly
// ordered stores, L1 coherence), timing and occupancy. Those need a GPU (tests/gpu/test_gpu_device.cpp).
#ifndef RNNCORE_TESTS_GPU_EMULATOR_HPP
#define RNNCORE_TESTS_GPU_EMULATOR_HPP

#include <sys/mman.h>
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "hip/rnn_plan.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define RNNCORE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNNCORE_EMU_ASAN 1
#endif
#endif
#if defined(RNNCORE_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace rnncore_test {
namespace emu {

/// Runs fn(0..n-1) as fibers on the calling thread until every one has returned; fibers give way
/// only in yield() (inside barriers).
class Fibers {
 public:
  Fibers() = default;
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;
  ~Fibers() {
    for (Fiber& f : fibers_) munmap(f.stack, kStackBytes);
  }

  void run(int n, const std::function<void(int)>& fn, bool reverse) {
    while (static_cast<int>(fibers_.size()) < n) {
      Fiber f;
      f.stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (f.stack == MAP_FAILED) fatal("cannot map a fiber stack");
      fibers_.push_back(f);
    }
    fn_ = &fn;
    for (int i = 0; i < n; ++i) {
      Fiber& f = fibers_[i];
      f.done = false;
      f.fake = nullptr;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack;
      f.ctx.uc_stack.ss_size = kStackBytes;
      f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, &Fibers::entry, 0);
    }
    int alive = n;
    while (alive > 0) {
      const unsigned long before = progress_;
      for (int k = 0; k < n; ++k) {
        const int i = reverse ? n - 1 - k : k;
        if (fibers_[i].done) continue;
        resume(i);
        if (fibers_[i].done) --alive;
      }
      if (alive > 0 && progress_ == before) fatal("deadlock: threads wait at barriers that others never reach");
    }
    fn_ = nullptr;
  }

  /// Inside a fiber: back to the scheduler (called while waiting at a barrier).
  void yield() {
    Fiber& f = fibers_[current_];
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(&f.fake, main_bottom_, main_size_);
#endif
    swapcontext(&f.ctx, &main_);
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(f.fake, nullptr, nullptr);
#endif
  }
  /// Something happened that may let a waiting fiber go on (deadlock detection).
  void progress() { ++progress_; }

 private:
  static constexpr std::size_t kStackBytes = 256 * 1024;
  struct Fiber {
    ucontext_t ctx;
    void* stack = nullptr;
    void* fake = nullptr;  // AddressSanitizer's fake stack while switched out
    bool done = false;
  };

  static void fatal(const char* what) {
    std::fprintf(stderr, "emulator: %s\n", what);
    std::abort();
  }

  void resume(int i) {
    current_ = i;
    active() = this;
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(&main_fake_, fibers_[i].stack, kStackBytes);
#endif
    swapcontext(&main_, &fibers_[i].ctx);
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(main_fake_, nullptr, nullptr);
#endif
  }

  static Fibers*& active() {
    static thread_local Fibers* fibers = nullptr;
    return fibers;
  }

  static void entry() {
    Fibers* self = active();
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &self->main_bottom_, &self->main_size_);
#endif
    const int id = self->current_;
    (*self->fn_)(id);
    self->fibers_[id].done = true;
    self->progress();
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(nullptr, self->main_bottom_, self->main_size_);
#endif
    setcontext(&self->main_);  // this fiber is finished: never resumed
  }

  std::vector<Fiber> fibers_;
  ucontext_t main_;
  void* main_fake_ = nullptr;
  const void* main_bottom_ = nullptr;
  std::size_t main_size_ = 0;
  const std::function<void(int)>* fn_ = nullptr;
  int current_ = 0;
  unsigned long progress_ = 0;
};

/// A barrier of `count` fibers.
class Barrier {
 public:
  Barrier(Fibers* fibers, int count) : fibers_(fibers), count_(count) {}
  void wait() {
    const unsigned long generation = generation_;
    fibers_->progress();
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    while (generation_ == generation) fibers_->yield();
  }

 private:
  Fibers* fibers_;
  const int count_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
};

/// What the threads of one block share.
struct Block {
  Block(Fibers* fibers, int threads, int warp, std::size_t smem_bytes)
      : barrier(fibers, threads),
        smem_floats(smem_bytes / sizeof(float) + 4),
        smem(new (std::align_val_t(64)) float[smem_floats]),
        exchange(static_cast<std::size_t>(threads) * 2) {
    for (int w = 0; w < threads / warp; ++w) warp_barriers.emplace_back(new Barrier(fibers, warp));
  }
  ~Block() { ::operator delete[](smem, std::align_val_t(64)); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  void poison() {
    for (std::size_t i = 0; i < smem_floats; ++i) smem[i] = std::numeric_limits<float>::quiet_NaN();
  }
  Barrier barrier;
  std::size_t smem_floats;
  float* smem;
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<float> exchange;  // per warp: two buffers of `warp` floats, used alternately
};

/// The emulator's side of the Exec interface of hip/rnn_device.hpp.
class Exec {
 public:
  Exec(const rnncore::gpu::Dims& d, std::int64_t block, int thread, int warp, Block* b, Barrier* grid)
      : bx_(static_cast<int>(block % d.gx)),
        by_(static_cast<int>((block / d.gx) % d.gy)),
        bz_(static_cast<int>(block / (static_cast<std::int64_t>(d.gx) * d.gy))),
        gdx_(static_cast<int>(d.gx)),
        gdy_(static_cast<int>(d.gy)),
        tx_(thread),
        bdx_(static_cast<int>(d.block)),
        warp_(warp),
        block_(b),
        grid_(grid) {}
  int bx() const { return bx_; }
  int by() const { return by_; }
  int bz() const { return bz_; }
  int gdx() const { return gdx_; }
  int gdy() const { return gdy_; }
  int tx() const { return tx_; }
  int bdx() const { return bdx_; }
  int warp_size() const { return warp_; }
  void sync() const { block_->barrier.wait(); }
  void grid_sync() const {
    if (grid_ == nullptr) {
      std::fprintf(stderr, "emulator: grid_sync outside a cooperative launch\n");
      std::abort();
    }
    grid_->wait();
  }
  float shfl_xor(float v, int mask) const {
    const int w = tx_ / warp_, lane = tx_ % warp_;
    float* buf = block_->exchange.data() + (static_cast<std::size_t>(w) * 2 + phase_) * warp_;
    buf[lane] = v;
    block_->warp_barriers[w]->wait();
    const int src = lane ^ mask;  // outside the warp: the lane's own value, as on the hardware
    const float r = src < warp_ ? buf[src] : v;
    phase_ ^= 1;  // the other buffer next time: no second barrier needed before it is rewritten
    return r;
  }
  float load_coherent(const float* p) const { return *p; }
  float* smem() const { return block_->smem; }

 private:
  int bx_, by_, bz_, gdx_, gdy_, tx_, bdx_, warp_;
  Block* block_;
  Barrier* grid_;
  mutable int phase_ = 0;
};

/// A Launcher (see hip/rnn_plan.hpp) that runs every kernel in the emulator, with the device
/// facts given, and counts launches by kernel name.
class Launcher {
 public:
  Launcher(const rnncore::gpu::DeviceFacts& facts, int blocks_per_sm) : facts_(facts), blocks_per_sm_(blocks_per_sm) {}

  /// Kernels read the argument block's copy in (emulated) device memory, and the launch checks
  /// that the copy equals the host's block: a schedule that launches before copying, or copies
  /// to the wrong place, fails here (the GPU's by-pointer path, AMD's, would read stale bytes).
  static constexpr bool kArgsInDeviceMemory = true;
  template <class K>
  rnncore::Status launch(const rnncore::gpu::Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
    if (!same_args<K>(host, dev)) return rnncore::Status::device;
    return run<K>(d, *dev, arg, false);
  }
  template <class K>
  rnncore::Status launch_cooperative(const rnncore::gpu::Dims& d, const typename K::Args& host, const typename K::Args* dev,
                                     int arg) {
    if (!same_args<K>(host, dev)) return rnncore::Status::device;
    if (refuse_cooperative) {  // as a runtime that refuses the launch (MPS): nothing runs
      ++refused[K::name()];
      return rnncore::Status::unsupported;
    }
    return run<K>(d, *dev, arg, true);
  }
  rnncore::Status copy_to_device(void* dst, const void* src, std::size_t bytes) {
    std::memcpy(dst, src, bytes);
    return rnncore::Status::ok;
  }
  rnncore::Status copy_to_device_async(void* dst, const void* src, std::size_t bytes) { return copy_to_device(dst, src, bytes); }
  rnncore::Status copy_to_host(void* dst, const void* src, std::size_t bytes) { return copy_to_device(dst, src, bytes); }
  rnncore::Status zero_async(void* dst, std::size_t bytes) {
    std::memset(dst, 0, bytes);
    return rnncore::Status::ok;
  }
  rnncore::Status finish(const char*) { return rnncore::Status::ok; }

  /// Launches per kernel name since construction.
  std::map<std::string, int> launches;
  /// Refuse every cooperative launch as a runtime that does not allow them (e.g. under MPS) does.
  bool refuse_cooperative = false;
  /// Cooperative launches refused per kernel name.
  std::map<std::string, int> refused;
  /// Problems a GPU would have reported (empty when all launches were valid).
  std::vector<std::string> errors;

 private:
  template <class K>
  bool same_args(const typename K::Args& host, const typename K::Args* dev) {
    if (dev != nullptr && std::memcmp(&host, dev, sizeof host) == 0) return true;
    errors.push_back(std::string(K::name()) + ": the argument block in device memory differs from the host's");
    return false;
  }
  template <class K>
  rnncore::Status run(const rnncore::gpu::Dims& d, const typename K::Args& a, int arg, bool cooperative) {
    ++launches[K::name()];
    const int threads = static_cast<int>(d.block), warp = facts_.warp_size;
    const std::int64_t blocks = static_cast<std::int64_t>(d.gx) * d.gy * d.gz;
    char what[256];
    const char* problem = nullptr;
    if (threads < 1 || threads > K::kMaxThreads) problem = "block size above the kernel's launch bound";
    else if (threads % warp != 0) problem = "block size not a multiple of the warp size";
    else if (static_cast<std::int64_t>(d.smem) > facts_.smem_optin) problem = "shared memory above the device limit";
    else if (cooperative && blocks > static_cast<std::int64_t>(facts_.sm_count) * blocks_per_sm_)
      problem = "cooperative grid larger than the co-resident capacity";
    else if (d.gy > 65535 || d.gz > 65535) problem = "grid y or z above 65535";
    if (problem != nullptr) {
      std::snprintf(what, sizeof what, "%s: %s (grid %ux%ux%u, block %d, smem %zu)", K::name(), problem, d.gx, d.gy, d.gz,
                    threads, d.smem);
      errors.push_back(what);
      return rnncore::Status::device;
    }
    reverse_ = !reverse_;
    if (cooperative) {  // all blocks at once: the grid barrier needs them co-resident
      std::vector<std::unique_ptr<Block>> state;
      for (std::int64_t b = 0; b < blocks; ++b) {
        state.emplace_back(new Block(&fibers_, threads, warp, d.smem));
        state.back()->poison();
      }
      Barrier grid(&fibers_, static_cast<int>(blocks * threads));
      fibers_.run(static_cast<int>(blocks * threads), [&](int i) {
        const std::int64_t b = i / threads;
        Exec ex(d, b, i % threads, warp, state[b].get(), &grid);
        K::run(ex, a, arg, ex.smem());
      }, reverse_);
    } else {  // one block after another
      Block block(&fibers_, threads, warp, d.smem);
      for (std::int64_t b = 0; b < blocks; ++b) {
        block.poison();
        fibers_.run(threads, [&](int tid) {
          Exec ex(d, b, tid, warp, &block, nullptr);
          K::run(ex, a, arg, ex.smem());
        }, reverse_);
      }
    }
    return rnncore::Status::ok;
  }

  rnncore::gpu::DeviceFacts facts_;
  int blocks_per_sm_;
  Fibers fibers_;
  bool reverse_ = true;
};

}  // namespace emu
}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GPU_EMULATOR_HPP

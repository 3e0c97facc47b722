// A host emulator of the GPU for rnncore's kernels (src/gpu/device/kernels.hpp): every GPU thread of a
// launch is a fiber (a user-level thread with its own stack, ucontext) executing the kernel body
// itself, with
//   - __syncthreads as a real barrier of the block's threads,
//   - the grid barrier of a cooperative launch as a barrier of every thread of the grid (all blocks
//     resident together, as co-residency guarantees on a GPU),
//   - the blocks of an ordinary launch started in a seeded random order, as many resident at once
//     as the device holds (SMs × blocks per SM), their threads interleaved,
//   - threads scheduled in a seeded random order: each runs from barrier to barrier, and the next
//     to run is drawn from every runnable thread of every resident block (deterministic per seed),
//   - warp shuffles through a per-warp exchange buffer and barrier, for any warp size (32 and 64
//     are tested: kernels must not assume one),
//   - the warp's matrix multiply-accumulate (ex.mma_16x16x16) through the same kind of exchange: the
//     lanes' fragments are gathered by this file's own model of the vendors' layouts (warp 32:
//     NVIDIA mma.sync m16n8k16 twice; warp 64: AMD MFMA 16x16x16; mma_owner), the product formed in
//     f32 from the f16 / bf16 inputs, and each lane's results scattered back by the same model; a
//     launch of a kernel that uses it on a device without matrix units is refused; likewise the
//     TF32 op (ex.mma_16x16x8: mma.sync m16n8k8 .tf32 twice, mma_owner_tf32; warp 32 only), refused
//     on a device without TF32 (DeviceDescription::mma_tf32),
//   - shared memory filled with NaN before each block, so a read of anything the block did not
//     write first shows up in the results,
//   - every access to tracked device memory and shared memory checked by the race and coherence
//     detector (tests/gpu/emu_detector.hpp), where the build has it,
//   - a deadlock (a barrier some thread never reaches) reported and aborted,
//   - mutations: one barrier, grid barrier or coherent load of the kernels, named by its source
//     line, can be left out (or made a plain load) to show that the detector or the results notice,
// and the launch checks a GPU would make (block size against the kernel's bound, shared memory
// against the device limit, co-residency of a cooperative grid). Device memory is host memory.
// Everything runs on the calling thread.
//
// Launcher::run, which runs kernel bodies, is defined only in the translation unit that defines
// RNNCORE_EMU_KERNELS_TU (tests/gpu/emu_kernels.cpp, the instrumented one): kernels instantiated
// anywhere else would fail to link instead of running unchecked.
//
// What it cannot show: the vendor's compilers and runtime, the hardware memory model beyond the
// detector's two rules, timing and occupancy. Those need a GPU (tests/gpu/test_gpu_device.cpp).
#ifndef RNNCORE_TESTS_GPU_EMULATOR_HPP
#define RNNCORE_TESTS_GPU_EMULATOR_HPP

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "src/gpu/host/schedule.hpp"
#include "src/shared/half.hpp"
#include "tests/gpu/emu_detector.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define RNNCORE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNNCORE_EMU_ASAN 1
#endif
#endif
#if defined(RNNCORE_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace rnncore_test {
namespace emu {

/// splitmix64: the scheduler's choices, deterministic per seed.
struct SchedRng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

/// Fibers on the calling thread. spawn() adds one; run() resumes a randomly drawn runnable fiber
/// until none is left. A fiber gives way only in block() (waiting at a barrier) or yield().
class Fibers {
 public:
  Fibers() = default;
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;
  ~Fibers() {
    for (auto& f : fibers_)
      if (f->stack != nullptr) pool().push_back(f->stack);
  }

  /// A new fiber running `body` as GPU thread `ctx`; `tag` is handed to run()'s on_done.
  void spawn(std::function<void()> body, const detector::ThreadCtx& ctx, int tag) {
    int id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<int>(fibers_.size());
      fibers_.emplace_back(new Fiber());
    }
    Fiber& f = *fibers_[id];
    if (f.stack == nullptr) {
      if (!pool().empty()) {
        f.stack = pool().back();
        pool().pop_back();
      } else {
        f.stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (f.stack == MAP_FAILED) fatal("cannot map a fiber stack");
      }
    }
    f.body = std::move(body);
    f.ctx_gpu = ctx;
    f.tag = tag;
    f.done = f.blocked = false;
    f.fake = nullptr;
#if defined(RNNCORE_EMU_ASAN)
    // A reused stack keeps the poisoned redzones of the frames its last fiber left (entry() never
    // returns); swapcontext's interceptor would clear them, the fast switch does not.
    __asan_unpoison_memory_region(f.stack, kStackBytes);
#endif
#if defined(RNNCORE_EMU_FAST_SWITCH)
    // The first switch to the fiber pops six callee-saved registers and returns into entry(),
    // with the stack aligned as at a call.
    void** top = reinterpret_cast<void**>(static_cast<char*>(f.stack) + kStackBytes);
    *--top = nullptr;  // entry()'s return address: it never returns
    *--top = reinterpret_cast<void*>(&Fibers::entry);
    for (int r = 0; r < 6; ++r) *--top = nullptr;
    f.sp = top;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, &Fibers::entry, 0);
#endif
    runnable_.push_back(id);
    ++live_;
  }

  /// Runs until every fiber has returned; on_done(tag) after each (it may spawn more).
  void run(SchedRng& rng, const std::function<void(int)>& on_done) {
    while (live_ > 0) {
      if (runnable_.empty()) fatal("deadlock: threads wait at barriers that others never reach");
      const std::size_t k = rng.below(runnable_.size());
      const int id = runnable_[k];
      runnable_[k] = runnable_.back();
      runnable_.pop_back();
      resume(id);
      Fiber& f = *fibers_[id];
      if (f.done) {
        --live_;
        f.body = nullptr;
        free_.push_back(id);
        on_done(f.tag);
      } else if (!f.blocked) {
        runnable_.push_back(id);
      }
    }
  }

  /// Inside a fiber: wait until wake(current()).
  void block() {
    fibers_[current_]->blocked = true;
    yield();
  }
  void wake(int id) {
    fibers_[id]->blocked = false;
    runnable_.push_back(id);
  }
  int current() const { return current_; }
  /// Inside a fiber: back to the scheduler, staying runnable.
  void yield() {
    Fiber& f = *fibers_[current_];
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(&f.fake, main_bottom_, main_size_);
#endif
#if defined(RNNCORE_EMU_FAST_SWITCH)
    rnncore_emu_switch(&f.sp, main_sp_);
#else
    swapcontext(&f.ctx, &main_);
#endif
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(f.fake, nullptr, nullptr);
#endif
  }

 private:
  static constexpr std::size_t kStackBytes = 256 * 1024;
  struct Fiber {
    ucontext_t ctx;
    void* sp = nullptr;  // saved stack pointer (fast switch)
    void* stack = nullptr;
    void* fake = nullptr;  // AddressSanitizer's fake stack while switched out
    std::function<void()> body;
    detector::ThreadCtx ctx_gpu;
    int tag = 0;
    bool done = false, blocked = false;
  };

  static void fatal(const char* what) {
    std::fprintf(stderr, "emulator: %s\n", what);
    std::abort();
  }
  /// Fiber stacks of the process, reused from launch to launch (mapping them is what costs).
  static std::vector<void*>& pool() {
    static std::vector<void*> stacks;
    return stacks;
  }

  void resume(int i) {
    current_ = i;
    active() = this;
    detector::current = &fibers_[i]->ctx_gpu;
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(&main_fake_, fibers_[i]->stack, kStackBytes);
#endif
#if defined(RNNCORE_EMU_FAST_SWITCH)
    rnncore_emu_switch(&main_sp_, fibers_[i]->sp);
#else
    swapcontext(&main_, &fibers_[i]->ctx);
#endif
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_finish_switch_fiber(main_fake_, nullptr, nullptr);
#endif
    detector::current = nullptr;
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
    self->fibers_[id]->body();
    self->fibers_[id]->done = true;
#if defined(RNNCORE_EMU_ASAN)
    __sanitizer_start_switch_fiber(nullptr, self->main_bottom_, self->main_size_);
#endif
#if defined(RNNCORE_EMU_FAST_SWITCH)
    void* finished = nullptr;
    rnncore_emu_switch(&finished, self->main_sp_);  // this fiber is finished: never resumed
#else
    setcontext(&self->main_);  // this fiber is finished: never resumed
#endif
  }

  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<int> free_, runnable_;
  int live_ = 0;
  ucontext_t main_;
  void* main_sp_ = nullptr;
  void* main_fake_ = nullptr;
  const void* main_bottom_ = nullptr;
  std::size_t main_size_ = 0;
  int current_ = 0;
};

/// A barrier of `count` fibers; `epoch` (if given) counts its completions for the detector.
class Barrier {
 public:
  Barrier(Fibers* fibers, int count, std::uint32_t* epoch = nullptr) : fibers_(fibers), count_(count), epoch_(epoch) {}
  void wait() {
    if (++arrived_ == count_) {
      arrived_ = 0;
      if (epoch_ != nullptr) ++*epoch_;
      for (int w : waiters_) fibers_->wake(w);
      waiters_.clear();
      fibers_->yield();  // the last to arrive need not be the first to go on
      return;
    }
    waiters_.push_back(fibers_->current());
    fibers_->block();
  }

 private:
  Fibers* fibers_;
  const int count_;
  std::uint32_t* epoch_;
  int arrived_ = 0;
  std::vector<int> waiters_;
};

/// What the threads of one resident block share (a block slot: the next block reuses it).
struct Block {
  Block(Fibers* fibers, int threads, int warp, std::size_t smem_bytes)
      : barrier(fibers, threads, &epoch),
        smem_floats(smem_bytes / sizeof(float) + 4),
        smem(new (std::align_val_t(64)) float[smem_floats]),
        exchange(static_cast<std::size_t>(threads) * 2),
        mma_exchange(static_cast<std::size_t>(threads) * 2 * kMmaWords) {
    for (int w = 0; w < threads / warp; ++w) warp_barriers.emplace_back(new Barrier(fibers, warp));
    detector::track(smem, smem_floats * sizeof(float), "shared memory");
  }
  ~Block() {
    detector::untrack(smem);
    ::operator delete[](smem, std::align_val_t(64));
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  /// A new block in this slot: fresh (NaN) shared memory with no access history.
  void start(std::int64_t block_id, int threads) {
    for (std::size_t i = 0; i < smem_floats; ++i) smem[i] = std::numeric_limits<float>::quiet_NaN();
    detector::forget(smem, smem_floats * sizeof(float));
    id = block_id;
    remaining = threads;
  }
  std::uint32_t epoch = 0;  // block barriers completed
  Barrier barrier;
  std::size_t smem_floats;
  float* smem;
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<float> exchange;  // per warp: two buffers of `warp` floats, used alternately
  /// Words of one lane's MMA operands in the exchange: A (4), B (4), C (8).
  static constexpr std::size_t kMmaWords = 16;
  std::vector<std::uint32_t> mma_exchange;  // per warp: two buffers of `warp` × kMmaWords, used alternately
  std::int64_t id = -1;
  int remaining = 0;
};

/// Kinds of mutation sites: the places a kernel synchronises, where it reads a reset, and where it
/// takes a term of the LSTM extensions' calculus (ex.term).
enum SiteKind : int { kSync = 0, kGridSync = 1, kCoherentLoad = 2, kResetFlag = 3, kTerm = 4 };
inline const char* site_kind_name(int k) {
  return k == kSync ? "sync" : k == kGridSync ? "grid_sync" : k == kCoherentLoad ? "load_coherent" : k == kResetFlag ? "reset_flag" : "term";
}

/// One synchronisation call site of the kernels: its kind, source line and a kernel that reached it.
struct Site {
  int kind;
  int line;
  std::string file;
  bool operator<(const Site& o) const { return std::tie(kind, line, file) < std::tie(o.kind, o.line, o.file); }
};

/// A site left out (a barrier skipped, a coherent load made plain); kind -1: none.
struct Mutation {
  int kind = -1;
  int line = 0;
  const char* file = nullptr;  ///< the site's file name (no directory); null: any file
};

/// The emulator's model of the matrix units' fragment layouts, written from the vendors' documents
/// as the inverse of src/gpu/device/kernels.hpp's mma_coord (which lane holds an element, and where), so that
/// the two are independent statements of the same fact: (lane, element) of the fragment of operand
/// `op` (0 A [m][k], 1 B [k][n], 2 C [m][n]) that holds (row, col). Warp 32: NVIDIA PTX ISA,
/// mma.m16n8k16 f16/bf16, one instruction per 8 columns n; warp 64: AMD CDNA3 ISA,
/// v_mfma_f32_16x16x16f16 (four lane groups of 16 along k for A and B, along m for C).
inline bool mma_owner(int warp, int op, int row, int col, int* lane, int* elem) {
  if (warp == 64) {
    const int k = op == 0 ? col : row, other = op == 0 ? row : col;  // A, B: lane % 16 is m or n
    if (op == 2) {  // C: lane % 16 = n, lane / 16 and the element split m
      *lane = col + 16 * (row / 4);
      *elem = row % 4;
      return true;
    }
    *lane = other + 16 * (k / 4);
    *elem = k % 4;
    return true;
  }
  if (warp != 32) return false;
  if (op == 0) {  // A [m][k]: thread group m % 8, pair k % 8 / 2; + 2 for m ≥ 8, + 4 for k ≥ 8
    *lane = 4 * (row % 8) + (col % 8) / 2;
    *elem = col % 2 + 2 * (row / 8) + 4 * (col / 8);
  } else if (op == 1) {  // B [k][n] of the instruction for n / 8: group n % 8, pair k % 8 / 2; + 2 for k ≥ 8
    *lane = 4 * (col % 8) + (row % 8) / 2;
    *elem = 4 * (col / 8) + row % 2 + 2 * (row / 8);
  } else {  // C [m][n] of the instruction for n / 8: group m % 8, pair n % 8 / 2; + 2 for m ≥ 8
    *lane = 4 * (row % 8) + (col % 8) / 2;
    *elem = 4 * (col / 8) + col % 2 + 2 * (row / 8);
  }
  return true;
}

/// The emulator's model of the TF32 fragments (NVIDIA PTX ISA, mma.m16n8k8 .tf32, one instruction
/// per 8 columns n; warp 32 only), written as the inverse of the hardware's table and independent
/// of src/gpu/device/kernels.hpp's mma_coord_tf32: (lane, register) holding A [16 m][8 k] (op 0) or B [8 k][16
/// n] (op 1) at (row, col). A: thread group m % 8, column k % 4 of the group; m ≥ 8 is the odd
/// register, k ≥ 4 the upper pair. B: group n % 8, row k % 4; k ≥ 4 the odd register, n ≥ 8 the
/// second instruction's pair. C / D are laid out as mma.m16n8k16's (mma_owner, op 2).
inline bool mma_owner_tf32(int op, int row, int col, int* lane, int* reg) {
  if (op == 0) {
    *lane = 4 * (row % 8) + col % 4;
    *reg = row / 8 + 2 * (col / 4);
  } else if (op == 1) {
    *lane = 4 * (col % 8) + row % 4;
    *reg = row / 4 + 2 * (col / 8);
  } else {
    return mma_owner(32, op, row, col, lane, reg);
  }
  return true;
}

/// 16-bit operand bits as f32.
inline float mma_input(std::uint16_t bits, bool bf16) {
  return bf16 ? rnncore::detail::bf16_to_f32(bits) : rnncore::detail::f16_to_f32(bits);
}

/// What the threads of one launch share beyond their block.
struct LaunchShared {
  Barrier* grid = nullptr;
  const Mutation* mutation = nullptr;
  std::map<Site, std::set<std::string>>* census = nullptr;
  const char* kernel = "";
  /// Records a reached site; whether the mutation leaves it out.
  bool skip(int kind, const char* file, int line) const {
    const char* slash = std::strrchr(file, '/');
    const char* base = slash != nullptr ? slash + 1 : file;
    if (census != nullptr) (*census)[Site{kind, line, base}].insert(kernel);
    return mutation->kind == kind && mutation->line == line && (mutation->file == nullptr || std::strcmp(mutation->file, base) == 0);
  }
};

/// The emulator's side of the Exec interface of src/gpu/device/kernels.hpp. The synchronising calls take
/// their call site (file, line) as default arguments: the kernels call them as ex.sync().
class Exec {
 public:
  Exec(const rnncore::gpu::Dims& d, std::int64_t block, int thread, int warp, Block* b, const LaunchShared* launch)
      : bx_(static_cast<int>(block % d.gx)),
        by_(static_cast<int>((block / d.gx) % d.gy)),
        bz_(static_cast<int>(block / (static_cast<std::int64_t>(d.gx) * d.gy))),
        gdx_(static_cast<int>(d.gx)),
        gdy_(static_cast<int>(d.gy)),
        tx_(thread),
        bdx_(static_cast<int>(d.block)),
        warp_(warp),
        block_(b),
        launch_(launch) {}
  int bx() const { return bx_; }
  int by() const { return by_; }
  int bz() const { return bz_; }
  int gdx() const { return gdx_; }
  int gdy() const { return gdy_; }
  int tx() const { return tx_; }
  int bdx() const { return bdx_; }
  int warp_size() const { return warp_; }
  void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    if (!launch_->skip(kSync, file, line)) block_->barrier.wait();
  }
  void grid_sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    if (launch_->grid == nullptr) {
      std::fprintf(stderr, "emulator: grid_sync outside a cooperative launch\n");
      std::abort();
    }
    if (!launch_->skip(kGridSync, file, line)) launch_->grid->wait();
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
  /// The warp's D = A·B + C (src/gpu/device/kernels.hpp, "matrix units"). Every lane of the warp must call it
  /// (a lane that does not leaves the others waiting: a reported deadlock).
  void mma_16x16x16(const rnncore::gpu::MmaFrag<rnncore::gpu::WeightF16>& a, const rnncore::gpu::MmaFrag<rnncore::gpu::WeightF16>& b,
                    rnncore::gpu::MmaAcc& c) const {
    mma(a.r, b.r, c.c, false);
  }
  void mma_16x16x16(const rnncore::gpu::MmaFrag<rnncore::gpu::WeightBF16>& a,
                    const rnncore::gpu::MmaFrag<rnncore::gpu::WeightBF16>& b, rnncore::gpu::MmaAcc& c) const {
    mma(a.r, b.r, c.c, true);
  }
  /// The warp's D = A·B + C on TF32 operands, A [16][8], B [8][16] (NVIDIA only: a warp of 64 is an
  /// error, as the op does not exist there).
  void mma_16x16x8(const rnncore::gpu::MmaFrag<rnncore::gpu::Tf32>& a, const rnncore::gpu::MmaFrag<rnncore::gpu::Tf32>& b,
                   rnncore::gpu::MmaAcc& c) const {
    if (warp_ != 32) {
      std::fprintf(stderr, "emulator: the TF32 matrix op exists on NVIDIA only (warp 32), not at warp %d\n", warp_);
      std::abort();
    }
    mma(a.r, b.r, c.c, false, true);
  }
  float load_coherent(const float* p, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    return detector::load(p, !launch_->skip(kCoherentLoad, file, line));
  }
  /// A byte of the run's resets; a mutation of its call site ignores every reset read there.
  bool reset_flag(const std::uint8_t* p, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    const bool left_out = launch_->skip(kResetFlag, file, line);
    return *p != 0 && !left_out;
  }
  /// Whether a term is taken; a mutation of its call site leaves the term out there.
  bool term(bool taken, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    const bool left_out = launch_->skip(kTerm, file, line);
    return taken && !left_out;
  }
  float* smem() const { return block_->smem; }

 private:
  /// Publishes this lane's operands, meets the warp, and computes its own elements of D from every
  /// lane's operands as the model places them: 16-bit ones (bf16 or f16) over k = 16, or TF32 ones
  /// (tf32: a whole register each, its 13 low bits ignored as the tensor cores do) over k = 8.
  void mma(const std::uint32_t* a, const std::uint32_t* b, float* c, bool bf16, bool tf32 = false) const {
    const int w = tx_ / warp_, lane = tx_ % warp_, e = 256 / warp_, depth = tf32 ? 8 : 16;
    std::uint32_t* buf = block_->mma_exchange.data() + (static_cast<std::size_t>(w) * 2 + mma_phase_) * warp_ * Block::kMmaWords;
    std::uint32_t* mine = buf + static_cast<std::size_t>(lane) * Block::kMmaWords;
    for (int i = 0; i < 4; ++i) mine[i] = a[i], mine[4 + i] = b[i];
    block_->warp_barriers[w]->wait();
    const auto input = [&](int op, int row, int col) {  // the operand element at (row, col)
      int l = 0, el = 0;
      if (!(tf32 ? mma_owner_tf32(op, row, col, &l, &el) : mma_owner(warp_, op, row, col, &l, &el))) {
        std::fprintf(stderr, "emulator: no matrix-unit layout for warp size %d\n", warp_);
        std::abort();
      }
      if (tf32) return rnncore::detail::tf32_to_f32(buf[static_cast<std::size_t>(l) * Block::kMmaWords + 4 * op + el]);
      const std::uint32_t word = buf[static_cast<std::size_t>(l) * Block::kMmaWords + 4 * op + el / 2];
      return mma_input(static_cast<std::uint16_t>(word >> (16 * (el % 2))), bf16);
    };
    float d[8];
    int done = 0;
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 16; ++col) {  // the elements of C the model gives this lane
        int l = 0, el = 0;
        if (!mma_owner(warp_, 2, row, col, &l, &el) || l != lane) continue;
        float sum = 0.0f;  // products of 16-bit or TF32 inputs are exact in f32; the sum is f32
        for (int k = 0; k < depth; ++k) sum += input(0, row, k) * input(1, k, col);
        d[el] = sum + c[el];
        ++done;
      }
    if (done != e) {
      std::fprintf(stderr, "emulator: the matrix-unit layout gives lane %d %d elements, not %d\n", lane, done, e);
      std::abort();
    }
    for (int i = 0; i < e; ++i) c[i] = d[i];
    mma_phase_ ^= 1;  // as shfl_xor: the next op uses the other buffer
  }

  int bx_, by_, bz_, gdx_, gdy_, tx_, bdx_, warp_;
  Block* block_;
  const LaunchShared* launch_;
  mutable int phase_ = 0;
  mutable int mma_phase_ = 0;
};

/// Whether kernel K uses the matrix units (K::kUsesMma).
template <class K, class = void>
struct UsesMma {
  static constexpr bool value = false;
};
template <class K>
struct UsesMma<K, std::void_t<decltype(K::kUsesMma)>> {
  static constexpr bool value = K::kUsesMma;
};
template <class K>
constexpr bool uses_mma() {
  return UsesMma<K>::value;
}
/// Whether kernel K uses the TF32 matrix op (K::kUsesMmaTf32).
template <class K, class = void>
struct UsesMmaTf32 {
  static constexpr bool value = false;
};
template <class K>
struct UsesMmaTf32<K, std::void_t<decltype(K::kUsesMmaTf32)>> {
  static constexpr bool value = K::kUsesMmaTf32;
};

/// A Launcher (see src/gpu/host/schedule.hpp) that runs every kernel in the emulator, with the device
/// facts given, and counts launches by kernel name.
class Launcher {
 public:
  Launcher(const rnncore::gpu::DeviceDescription& facts, int blocks_per_sm, std::uint64_t seed = 1)
      : facts_(facts), blocks_per_sm_(blocks_per_sm), seed_(seed) {}

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
  rnncore::Status copy_to_host_in_order(void* dst, const void* src, std::size_t bytes) { return copy_to_device(dst, src, bytes); }
  rnncore::Status zero_async(void* dst, std::size_t bytes) {
    std::memset(dst, 0, bytes);
    return rnncore::Status::ok;
  }
  rnncore::Status finish(const char*) { return rnncore::Status::ok; }
  /// The emulated device's warp size.
  int warp_size() const { return facts_.warp_size; }

  /// Launches per kernel name since construction.
  std::map<std::string, int> launches;
  /// Refuse every cooperative launch as a runtime that does not allow them (e.g. under MPS) does.
  bool refuse_cooperative = false;
  /// Cooperative launches refused per kernel name.
  std::map<std::string, int> refused;
  /// Problems a GPU would have reported (empty when all launches were valid).
  std::vector<std::string> errors;
  /// The site left out of every launch (none by default).
  Mutation mutation;
  /// If set: every synchronisation site the kernels reach, with the kernels that reach it.
  std::map<Site, std::set<std::string>>* census = nullptr;

 private:
  template <class K>
  bool same_args(const typename K::Args& host, const typename K::Args* dev) {
    if (dev != nullptr && std::memcmp(&host, dev, sizeof host) == 0) return true;
    errors.push_back(std::string(K::name()) + ": the argument block in device memory differs from the host's");
    return false;
  }
  template <class K>
  rnncore::Status run(const rnncore::gpu::Dims& d, const typename K::Args& a, int arg, bool cooperative);

  rnncore::gpu::DeviceDescription facts_;
  int blocks_per_sm_;
  std::uint64_t seed_;
  std::uint64_t runs_ = 0;
  Fibers fibers_;
};

#if defined(RNNCORE_EMU_KERNELS_TU)
template <class K>
rnncore::Status Launcher::run(const rnncore::gpu::Dims& d, const typename K::Args& a, int arg, bool cooperative) {
  ++launches[K::name()];
  const int threads = static_cast<int>(d.block), warp = facts_.warp_size;
  const std::int64_t blocks = static_cast<std::int64_t>(d.gx) * d.gy * d.gz;
  const std::int64_t resident = static_cast<std::int64_t>(facts_.sm_count) * blocks_per_sm_;
  char what[256];
  const char* problem = nullptr;
  if (threads < 1 || threads > K::kMaxThreads) problem = "block size above the kernel's launch bound";
  else if (threads % warp != 0) problem = "block size not a multiple of the warp size";
  else if (static_cast<std::int64_t>(d.smem) > facts_.smem_optin) problem = "shared memory above the device limit";
  else if (cooperative && blocks > resident) problem = "cooperative grid larger than the co-resident capacity";
  else if (d.gy > 65535 || d.gz > 65535) problem = "grid y or z above 65535";
  else if (uses_mma<K>() && facts_.mma == 0) problem = "a matrix-unit kernel on a device without matrix units";
  else if (UsesMmaTf32<K>::value && facts_.mma_tf32 == 0) problem = "a TF32 matrix-unit kernel on a device without TF32";
  if (problem != nullptr) {
    std::snprintf(what, sizeof what, "%s: %s (grid %ux%ux%u, block %d, smem %zu)", K::name(), problem, d.gx, d.gy, d.gz,
                  threads, d.smem);
    errors.push_back(what);
    return rnncore::Status::device;
  }
  if (blocks == 0) return rnncore::Status::ok;  // an empty grid runs nothing
  SchedRng rng{seed_ * 0x2545f4914f6cdd1dull + ++runs_};
  // Blocks start in a random order; a cooperative grid is resident at once, an ordinary one as
  // many blocks as the device holds, the next starting where one finished.
  std::vector<std::int64_t> order(static_cast<std::size_t>(blocks));
  for (std::int64_t b = 0; b < blocks; ++b) order[static_cast<std::size_t>(b)] = b;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const std::int64_t slots = cooperative ? blocks : std::max<std::int64_t>(1, std::min(blocks, resident));
  std::uint32_t grid_epoch = 0;
  std::unique_ptr<Barrier> grid;
  if (cooperative) grid.reset(new Barrier(&fibers_, static_cast<int>(blocks * threads), &grid_epoch));
  LaunchShared shared;
  shared.grid = grid.get();
  shared.mutation = &mutation;
  shared.census = census;
  shared.kernel = K::name();
  detector::ThreadCtx ctx;
  ctx.launch = detector::next_launch();
  ctx.grid_epoch = &grid_epoch;
  ctx.kernel = K::name();
  ctx.cooperative = cooperative;
  ctx.gx = d.gx;
  ctx.gy = d.gy;
  std::vector<std::unique_ptr<Block>> slot(static_cast<std::size_t>(slots));
  std::size_t next = 0;
  const auto start = [&](int s) {
    Block* blk = slot[static_cast<std::size_t>(s)].get();
    const std::int64_t b = order[next++];
    blk->start(b, threads);
    ctx.block = static_cast<std::uint32_t>(b);
    ctx.block_epoch = &blk->epoch;
    for (int t = 0; t < threads; ++t) {
      ctx.thread = static_cast<std::uint32_t>(t);
      fibers_.spawn([&d, &a, &shared, arg, blk, b, t, warp] {
        const Exec ex(d, b, t, warp, blk, &shared);
        K::run(ex, a, arg, ex.smem());
      }, ctx, s);
    }
  };
  for (std::int64_t s = 0; s < slots; ++s) {
    slot[static_cast<std::size_t>(s)].reset(new Block(&fibers_, threads, warp, d.smem));
    start(static_cast<int>(s));
  }
  fibers_.run(rng, [&](int s) {
    Block* blk = slot[static_cast<std::size_t>(s)].get();
    if (--blk->remaining == 0 && next < order.size()) start(s);
  });
  return rnncore::Status::ok;
}
#endif

}  // namespace emu
}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GPU_EMULATOR_HPP

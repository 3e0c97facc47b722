// The emulator's race and coherence detector (tests/gpu/emulator.hpp, docs/gpu.md "The emulator").
//
// Kernel bodies read and write device memory through plain pointers. Rather than route every
// access of src/gpu/device/kernels.hpp through helpers, the one translation unit that runs kernels in the
// emulator (tests/gpu/emu_kernels.cpp) is compiled with GCC's / Clang's ThreadSanitizer
// instrumentation, which calls __tsan_read4(addr), __tsan_write16(addr), ... before every memory
// access; emu_detector.cpp (not instrumented) defines those entry points itself instead of linking
// the ThreadSanitizer runtime, and checks each access of a fiber running kernel code against a
// shadow of the tracked buffers (device buffers the test names, and each block's shared memory).
// The kernels and the GPU builds stay unchanged. Where the instrumentation is unavailable (under
// AddressSanitizer, which cannot be combined with it), RNNCORE_EMU_DETECTOR is 0: kernels still run,
// unchecked.
//
// The rules, per 2-byte granule (the smallest access the kernels make):
//   - a race: two accesses by different GPU threads, at least one a write, with no barrier between
//     them: threads of one block need a __syncthreads (or grid barrier) between them, threads of
//     different blocks a grid barrier; kernels of one stream are ordered by the launch boundary.
//     Writes of the same value count (the CUDA memory model calls them a data race too); the
//     kernels use no atomics (the instrumented code may not contain any: they would not link);
//   - a stale read: in a cooperative launch, a plain load of global memory that another block
//     wrote during the same launch. The grid barrier orders the write, but on NVIDIA the reading
//     SM's L1 may still hold the line from before it; ex.load_coherent (__ldcg, or a plain load on
//     AMD where the barrier invalidates L1) is the load that sees it.
// A granule remembers its last write and the last reads of two different threads, so a race with
// an older read of a third thread in the same barrier interval can be missed.
#ifndef RNNCORE_TESTS_GPU_EMU_DETECTOR_HPP
#define RNNCORE_TESTS_GPU_EMU_DETECTOR_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// x86-64 Linux: fibers switch with rnncore_emu_switch (emu_detector.cpp) rather than swapcontext,
// which makes two system calls per switch. Under AddressSanitizer too: the emulator announces each
// switch to it (__sanitizer_start/finish_switch_fiber) and clears a reused stack's shadow itself.
#if defined(__x86_64__) && defined(__linux__)
#define RNNCORE_EMU_FAST_SWITCH 1
#endif
#if defined(RNNCORE_EMU_FAST_SWITCH)
extern "C" void rnncore_emu_switch(void** from_sp, void* to_sp);
#endif

namespace rnncore_test {
namespace emu {
namespace detector {

/// The GPU thread a fiber runs, as the detector sees it.
struct ThreadCtx {
  std::uint32_t launch = 0;  ///< launch number (1, 2, ...): launches are ordered one after another
  std::uint32_t block = 0;   ///< linear block index
  std::uint32_t thread = 0;
  const std::uint32_t* block_epoch = nullptr;  ///< __syncthreads the block has completed
  const std::uint32_t* grid_epoch = nullptr;   ///< grid barriers the launch has completed
  const char* kernel = "";
  bool cooperative = false;
  std::uint32_t gx = 1, gy = 1;  ///< grid shape, to name blocks (x, y, z)
};

/// The thread whose accesses are checked now; null outside kernel code (set by the scheduler).
extern ThreadCtx* current;

/// Whether this build checks accesses (the kernel TU is instrumented; it calls set_instrumented).
bool available();
void set_instrumented();

/// A new launch number.
std::uint32_t next_launch();
/// Checks accesses to [p, p + bytes), named `name` in reports. Later ranges may not overlap earlier ones.
void track(const void* p, std::size_t bytes, const std::string& name);
/// Names the part of a tracked range from p on (e.g. "ws.h[0][1]"), for reports.
void label(const void* p, const std::string& name);
void untrack(const void* p);
/// Forgets what was accessed in [p, p + bytes) (a block's shared memory, handed to the next block).
void forget(const void* p, std::size_t bytes);
/// Forgets every range and every access.
void reset();

/// One access by the current thread (the instrumentation's entry points call it).
void access(const void* p, std::size_t bytes, bool write, bool coherent);
/// ex.load_coherent: a load that sees other blocks' writes after a grid barrier (`coherent`
/// false: the mutation that makes it a plain load).
float load(const float* p, bool coherent);

/// Problems found since the last take_reports(): one line each, at most one per (kernel, kind,
/// buffer) so that a missing barrier does not print a line per element.
std::vector<std::string> take_reports();
/// Problems found since the last take_reports(), including those not kept as lines.
std::size_t report_count();

}  // namespace detector
}  // namespace emu
}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GPU_EMU_DETECTOR_HPP

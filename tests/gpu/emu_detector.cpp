// The emulator's race and coherence detector, and the ThreadSanitizer entry points that feed it
// (see emu_detector.hpp). This file must not be compiled with -fsanitize=thread itself.
#include "tests/gpu/emu_detector.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

namespace rnncore_test {
namespace emu {
namespace detector {

ThreadCtx* current = nullptr;
bool instrumented = false;  // set by the instrumented kernel TU at start-up

namespace {

/// One access: who, and how far its block and grid had got (launch 0: none).
struct Acc {
  std::uint32_t launch = 0, block = 0, thread = 0, bepoch = 0, gepoch = 0;
};
struct Cell {
  Acc w, r1, r2;  // the last write; the last reads of two different threads since
};
constexpr std::size_t kGranule = 2, kPageBytes = 4096, kCells = kPageBytes / kGranule;

struct Range {
  std::uintptr_t begin, end;
  std::string name;
  std::map<std::uintptr_t, std::string> labels;
};

struct State {
  std::vector<Range> ranges;  // sorted by begin
  std::size_t last_range = 0;
  std::uintptr_t gap_begin = 0, gap_end = 0;  // the last untracked interval found
  std::unordered_map<std::uintptr_t, std::unique_ptr<Cell[]>> pages;
  std::uintptr_t last_page = ~std::uintptr_t{0};
  Cell* last_cells = nullptr;
  std::uint32_t launches = 0;
  std::set<std::string> keys;
  std::vector<std::string> lines;
  std::size_t count = 0;
};
State g_state;  // not a function-local static: access() runs for every load and store
inline State& state() { return g_state; }

const Range* find(State& s, std::uintptr_t a) {
  if (s.last_range < s.ranges.size() && a >= s.ranges[s.last_range].begin && a < s.ranges[s.last_range].end)
    return &s.ranges[s.last_range];
  if (a >= s.gap_begin && a < s.gap_end) return nullptr;  // most accesses are to fiber stacks: one gap
  auto it = std::upper_bound(s.ranges.begin(), s.ranges.end(), a, [](std::uintptr_t v, const Range& r) { return v < r.begin; });
  s.gap_end = it == s.ranges.end() ? ~std::uintptr_t{0} : it->begin;
  if (it == s.ranges.begin()) {
    s.gap_begin = 0;
    return nullptr;
  }
  --it;
  if (a >= it->end) {
    s.gap_begin = it->end;
    return nullptr;
  }
  s.gap_begin = s.gap_end = 0;
  s.last_range = static_cast<std::size_t>(it - s.ranges.begin());
  return &*it;
}

Cell& cell(State& s, std::uintptr_t a) {
  const std::uintptr_t page = a / kPageBytes;
  if (page != s.last_page) {
    std::unique_ptr<Cell[]>& cells = s.pages[page];
    if (!cells) cells.reset(new Cell[kCells]());
    s.last_page = page;
    s.last_cells = cells.get();
  }
  return s.last_cells[(a % kPageBytes) / kGranule];
}

/// Whether `a` happens before the current thread's access now.
bool ordered(const Acc& a, const ThreadCtx& c, std::uint32_t bepoch, std::uint32_t gepoch) {
  if (a.launch != c.launch) return true;  // an earlier launch (or none)
  if (a.block == c.block) return a.thread == c.thread || a.bepoch < bepoch || a.gepoch < gepoch;
  return a.gepoch < gepoch;
}

std::string where(const Range& r, std::uintptr_t a) {
  std::string name = r.name;
  std::uintptr_t base = r.begin;
  auto it = r.labels.upper_bound(a);
  if (it != r.labels.begin()) {
    --it;
    name = it->second;
    base = it->first;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "+%zu bytes", static_cast<std::size_t>(a - base));
  return name + buf;
}

std::string who(const ThreadCtx& c, std::uint32_t block, std::uint32_t thread) {
  char buf[96];
  const std::uint32_t x = block % c.gx, y = (block / c.gx) % c.gy, z = block / (c.gx * c.gy);
  std::snprintf(buf, sizeof buf, "block %u (%u,%u,%u) thread %u", block, x, y, z, thread);
  return buf;
}

void report(State& s, const ThreadCtx& c, const char* kind, const Range& r, std::uintptr_t a, const Acc& prev,
            const char* prev_op, const char* op, const char* why) {
  ++s.count;
  std::string key = std::string(c.kernel) + "|" + kind + "|" + r.name;
  if (!s.keys.insert(key).second || s.lines.size() >= 64) return;
  s.lines.push_back(std::string(kind) + " in " + c.kernel + " at " + where(r, a) + ": " + prev_op + " by " +
                    who(c, prev.block, prev.thread) + ", " + op + " by " + who(c, c.block, c.thread) + " " + why);
}

}  // namespace

bool available() { return instrumented; }
void set_instrumented() { instrumented = true; }

std::uint32_t next_launch() { return ++state().launches; }

void track(const void* p, std::size_t bytes, const std::string& name) {
  State& s = state();
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || p == nullptr) return;
  for (const Range& r : s.ranges)
    if (b < r.end && r.begin < b + bytes) return;  // already tracked (e.g. h0 aliasing hy): keep the first name
  Range r{b, b + bytes, name, {}};
  s.ranges.insert(std::upper_bound(s.ranges.begin(), s.ranges.end(), b, [](std::uintptr_t v, const Range& x) { return v < x.begin; }),
                  std::move(r));
  s.last_range = 0;
  s.gap_begin = s.gap_end = 0;
}

void label(const void* p, const std::string& name) {
  State& s = state();
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  for (Range& r : s.ranges)
    if (a >= r.begin && a < r.end) r.labels[a] = name;
}

void untrack(const void* p) {
  State& s = state();
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  for (std::size_t i = 0; i < s.ranges.size(); ++i)
    if (s.ranges[i].begin == a) {
      forget(p, s.ranges[i].end - s.ranges[i].begin);
      s.ranges.erase(s.ranges.begin() + static_cast<std::ptrdiff_t>(i));
      s.last_range = 0;
      s.gap_begin = s.gap_end = 0;
      return;
    }
}

void forget(const void* p, std::size_t bytes) {
  State& s = state();
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(p) & ~(kGranule - 1), e = reinterpret_cast<std::uintptr_t>(p) + bytes;
  for (std::uintptr_t a = b; a < e;) {
    const std::uintptr_t page = a / kPageBytes, page_end = std::min(e, (page + 1) * kPageBytes);
    auto it = s.pages.find(page);
    if (it != s.pages.end())
      std::fill(&it->second[(a % kPageBytes) / kGranule], &it->second[0] + ((page_end - 1) % kPageBytes) / kGranule + 1, Cell());
    a = page_end;
  }
}

void reset() {
  State& s = state();
  s.ranges.clear();
  s.pages.clear();
  s.last_page = ~std::uintptr_t{0};
  s.last_cells = nullptr;
  s.last_range = 0;
  s.gap_begin = s.gap_end = 0;
}

void access(const void* p, std::size_t bytes, bool write, bool coherent) {
  const ThreadCtx* c = current;
  if (c == nullptr) return;
  State& s = state();
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(p);
  const Range* r = find(s, first);
  if (r == nullptr) return;
  const std::uint32_t bepoch = *c->block_epoch, gepoch = *c->grid_epoch;
  const Acc now{c->launch, c->block, c->thread, bepoch, gepoch};
  const char* const why_block = "with no barrier between";
  bool reported = false;  // one line per access, not one per granule
  for (std::uintptr_t a = first & ~(kGranule - 1); a < first + bytes && a < r->end; a += kGranule) {
    Cell& e = cell(s, a);
    if (e.w.launch != 0 && !ordered(e.w, *c, bepoch, gepoch) && !reported) {
      report(s, *c, "race", *r, a, e.w, "write", write ? "write" : "read", why_block);
      reported = true;
    }
    if (write) {
      for (const Acc* rd : {&e.r1, &e.r2})
        if (rd->launch != 0 && !ordered(*rd, *c, bepoch, gepoch) && !reported) {
          report(s, *c, "race", *r, a, *rd, "read", "write", why_block);
          reported = true;
        }
      e.w = now;
      e.r1 = e.r2 = Acc();
      continue;
    }
    if (!coherent && c->cooperative && e.w.launch == c->launch && e.w.block != c->block && !reported) {
      report(s, *c, "stale read", *r, a, e.w, "write", "plain load",
             "(another block's write of this launch: a plain load may hit the reader's stale L1; use ex.load_coherent)");
      reported = true;
    }
    if (e.r1.launch == 0 || ordered(e.r1, *c, bepoch, gepoch)) {  // the newest read replaces ordered ones
      if (e.r2.launch != 0 && ordered(e.r2, *c, bepoch, gepoch)) e.r2 = Acc();
      e.r1 = now;
    } else {  // e.r1 is another thread's concurrent read: keep it as the second reader
      e.r2 = e.r1;
      e.r1 = now;
    }
  }
}

float load(const float* p, bool coherent) {
  access(p, sizeof(float), false, coherent);
  return *p;
}

std::vector<std::string> take_reports() {
  State& s = state();
  std::vector<std::string> out;
  out.swap(s.lines);
  s.keys.clear();
  s.count = 0;
  return out;
}

std::size_t report_count() { return state().count; }

}  // namespace detector
}  // namespace emu
}  // namespace rnncore_test

#if defined(RNNCORE_EMU_FAST_SWITCH)
// rnncore_emu_switch(&from_sp, to_sp): saves the callee-saved registers on this stack, stores its
// stack pointer in *from_sp and resumes the stack at to_sp. swapcontext does the same plus two
// sigprocmask system calls, which were half of the emulator's time.
asm(R"(
  .text
  .globl rnncore_emu_switch
  .type rnncore_emu_switch,@function
rnncore_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size rnncore_emu_switch, .-rnncore_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

// ThreadSanitizer's compiler interface (what -fsanitize=thread code calls), served by the detector
// instead of the ThreadSanitizer runtime. Only tests/gpu/emu_kernels.cpp is compiled that way, and
// only where the build defines RNNCORE_EMU_SERVE_TSAN (never next to the real runtime).
#if defined(RNNCORE_EMU_SERVE_TSAN)
namespace {
inline void rd(void* p, std::size_t n) {
  if (rnncore_test::emu::detector::current != nullptr) rnncore_test::emu::detector::access(p, n, false, false);
}
inline void wr(void* p, std::size_t n) {
  if (rnncore_test::emu::detector::current != nullptr) rnncore_test::emu::detector::access(p, n, true, false);
}
}  // namespace

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
#define RNNCORE_EMU_HOOKS(n)                                   \
  void __tsan_read##n(void* p) { rd(p, n); }                   \
  void __tsan_write##n(void* p) { wr(p, n); }                  \
  void __tsan_unaligned_read##n(void* p) { rd(p, n); }         \
  void __tsan_unaligned_write##n(void* p) { wr(p, n); }        \
  void __tsan_volatile_read##n(void* p) { rd(p, n); }          \
  void __tsan_volatile_write##n(void* p) { wr(p, n); }
RNNCORE_EMU_HOOKS(1)
RNNCORE_EMU_HOOKS(2)
RNNCORE_EMU_HOOKS(4)
RNNCORE_EMU_HOOKS(8)
RNNCORE_EMU_HOOKS(16)
#undef RNNCORE_EMU_HOOKS
// Function-local statics' guard checks (the only atomics in the instrumented code).
unsigned char __tsan_atomic8_load(const volatile unsigned char* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }
void __tsan_read_range(void* p, std::size_t n) { rd(p, n); }
void __tsan_write_range(void* p, std::size_t n) { wr(p, n); }
}
#endif

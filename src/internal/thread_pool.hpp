// The thread pool behind rnncore::ThreadPool, and the team a run's work is split over.
#ifndef RNNCORE_SRC_INTERNAL_THREAD_POOL_HPP
#define RNNCORE_SRC_INTERNAL_THREAD_POOL_HPP

#include <atomic>
#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace detail {

// A spinning barrier for `count` threads (reusable: sense by generation).
class SpinBarrier {
 public:
  void reset(int count) {
    count_ = count;
    arrived_.store(0, std::memory_order_relaxed);
  }
  void wait();

 private:
  int count_ = 1;
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
};

// The threads of one run working together: this thread's index, the team size, and its barrier.
struct Team {
  int index = 0;
  int size = 1;
  SpinBarrier* barrier = nullptr;
  void sync() const {
    if (size > 1) barrier->wait();
  }
  // This member's share [begin, end) of n items, in contiguous blocks.
  void share(int n, int* begin, int* end) const {
    *begin = static_cast<int>(static_cast<std::int64_t>(n) * index / size);
    *end = static_cast<int>(static_cast<std::int64_t>(n) * (index + 1) / size);
  }
};

// Runs fn(context, thread_index) on threads 0..threads−1 of the pool (the caller is thread 0) and
// returns when all are done. Barriers for the run: the pool's three (whole team, and two halves).
using PoolTask = void (*)(void* context, int thread_index);
void pool_run(ThreadPool* pool, int threads, PoolTask fn, void* context);
SpinBarrier* pool_barrier(ThreadPool* pool, int which);

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_THREAD_POOL_HPP

// rnncore::ThreadPool: workers started once with pthreads (a failed start is a status, not an
// exception), woken per run, spinning briefly before they sleep. A run hands each one task.
#include "src/internal/thread_pool.hpp"

#include <new>

#include "src/internal/error.hpp"

#if !defined(RNNCORE_NO_THREADS)
#include <pthread.h>
#include <sched.h>
#endif

namespace rnncore {

namespace {
#if defined(__x86_64__) || defined(__i386__)
inline void cpu_relax() { __builtin_ia32_pause(); }
#elif defined(__aarch64__) || defined(__arm__)
inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
inline void cpu_relax() {}
#endif
}  // namespace

namespace detail {

void SpinBarrier::wait() {
  const std::uint32_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == count_ - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return;
  }
  for (unsigned spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins) {
    cpu_relax();
#if !defined(RNNCORE_NO_THREADS)
    if (spins > 4096) sched_yield();  // oversubscribed: let the others run
#endif
  }
}

}  // namespace detail

#if defined(RNNCORE_NO_THREADS)

struct ThreadPool::Impl {};

Status ThreadPool::create(int, ThreadPool** out) {
  if (out != nullptr) *out = nullptr;
  return detail::fail_status(Status::unsupported, "ThreadPool: this build has no threads (firmware profile or -Dthreads=false)");
}
void ThreadPool::destroy(ThreadPool*) {}
int ThreadPool::size() const { return 1; }

namespace detail {
void pool_run(ThreadPool*, int, PoolTask fn, void* context) { fn(context, 0); }
SpinBarrier* pool_barrier(ThreadPool*, int) { return nullptr; }
}  // namespace detail

#else

namespace {
constexpr int kMaxThreads = 256;
}

struct ThreadPool::Impl {
  int size = 1;
  pthread_t workers[kMaxThreads];
  int started = 0;
  // A run: the generation counter moves on; workers with an index below run_threads take part.
  alignas(64) std::atomic<std::uint64_t> generation{0};
  alignas(64) std::atomic<int> pending{0};
  detail::PoolTask task = nullptr;
  void* context = nullptr;
  int run_threads = 0;
  bool stopping = false;
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
  detail::SpinBarrier barriers[3];
};

namespace {

struct WorkerStart {
  ThreadPool::Impl* pool;
  int index;
};

void* worker_main(void* arg) {
  const WorkerStart start = *static_cast<WorkerStart*>(arg);
  delete static_cast<WorkerStart*>(arg);
  ThreadPool::Impl* pool = start.pool;
  std::uint64_t seen = 0;
  for (;;) {
    // Spin a little (runs come in quick succession), then sleep until the next run.
    std::uint64_t gen = pool->generation.load(std::memory_order_acquire);
    for (unsigned spins = 0; gen == seen && spins < 20000; ++spins) {
      cpu_relax();
      gen = pool->generation.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock(&pool->mutex);
      while (!pool->stopping && pool->generation.load(std::memory_order_acquire) == seen)
        pthread_cond_wait(&pool->wake, &pool->mutex);
      const bool stop = pool->stopping;
      pthread_mutex_unlock(&pool->mutex);
      if (stop) return nullptr;
      gen = pool->generation.load(std::memory_order_acquire);
    }
    seen = gen;
    if (start.index < pool->run_threads) {
      pool->task(pool->context, start.index);
      pool->pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace

Status ThreadPool::create(int threads, ThreadPool** out) {
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "ThreadPool::create: out is null");
  *out = nullptr;
  RNNCORE_ENSURE(threads >= 1 && threads <= kMaxThreads, Status::invalid_size, "ThreadPool::create: threads = %d (1..%d)",
                 threads, kMaxThreads);
  ThreadPool* face = new (std::nothrow) ThreadPool();
  Impl* pool = new (std::nothrow) Impl();
  if (face == nullptr || pool == nullptr) {
    delete face;
    delete pool;
    return detail::fail_status(Status::out_of_memory, "ThreadPool::create: out of memory");
  }
  face->impl_ = pool;
  pool->size = threads;
  for (int i = 1; i < threads; ++i) {
    WorkerStart* start = new (std::nothrow) WorkerStart{pool, i};
    const int rc = start == nullptr ? -1 : pthread_create(&pool->workers[i], nullptr, worker_main, start);
    if (rc != 0) {
      delete start;
      destroy(face);
      return detail::fail_status(Status::out_of_memory, "ThreadPool::create: could not start thread %d of %d (error %d)", i,
                                 threads, rc);
    }
    pool->started = i;
  }
  *out = face;
  return Status::ok;
}

void ThreadPool::destroy(ThreadPool* face) {
  if (face == nullptr) return;
  Impl* pool = face->impl_;
  pthread_mutex_lock(&pool->mutex);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  for (int i = 1; i <= pool->started; ++i) pthread_join(pool->workers[i], nullptr);
  delete pool;
  delete face;
}

int ThreadPool::size() const { return impl_->size; }

namespace detail {

void pool_run(ThreadPool* face, int threads, PoolTask fn, void* context) {
  if (threads <= 1 || face == nullptr) {
    fn(context, 0);
    return;
  }
  ThreadPool::Impl* pool = face->impl();
  pool->task = fn;
  pool->context = context;
  pool->run_threads = threads;
  pool->pending.store(threads - 1, std::memory_order_relaxed);
  pthread_mutex_lock(&pool->mutex);  // so that no sleeper misses the new generation
  pool->generation.fetch_add(1, std::memory_order_acq_rel);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  fn(context, 0);
  while (pool->pending.load(std::memory_order_acquire) != 0) cpu_relax();
}

SpinBarrier* pool_barrier(ThreadPool* face, int which) { return &face->impl()->barriers[which]; }

}  // namespace detail

#endif  // RNNCORE_NO_THREADS

}  // namespace rnncore

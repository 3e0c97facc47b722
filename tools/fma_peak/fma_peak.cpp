// Driver of the FMA peak loops: detects the instruction sets, calibrates the loop length, keeps
// the best of several runs. Compiled without special flags.
#include "fma_peak.hpp"

#include <chrono>
#include <cstdio>

namespace bench {

namespace {

using LoopFn = float (*)(long, float, float);

// Best GFLOP/s of `runs` runs of about `seconds` each; `flops_per_iter` counts 2 per lane FMA.
double time_loop(LoopFn fn, double flops_per_iter, int runs, double seconds) {
  using clock = std::chrono::steady_clock;
  volatile float a = 0.999999f, b = 1e-7f, sink = 0.0f;  // volatile: operands unknown to the compiler
  long iters = 1 << 16;
  for (;;) {  // calibrate: grow until one run takes a tenth of the target
    const auto t0 = clock::now();
    sink = sink + fn(iters, a, b);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s >= seconds / 10 || iters > (1L << 40)) {
      iters = static_cast<long>(static_cast<double>(iters) * seconds / (s > 0 ? s : 1e-9));
      break;
    }
    iters *= 4;
  }
  if (iters < 1) iters = 1;
  double best = 0.0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = clock::now();
    sink = sink + fn(iters, a, b);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    const double gflops = flops_per_iter * static_cast<double>(iters) / s * 1e-9;
    if (gflops > best) best = gflops;
  }
  return best;
}

}  // namespace

int measure_fma_peaks(int runs, double seconds, FmaPeak out[2]) {
  int n = 0;
#if defined(BENCH_HAVE_X86_FMA) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    out[n].isa = "avx512";
    out[n].gflops = time_loop(fma_loop_avx512, 2.0 * 16 * kFmaAccumulatorsAvx512, runs, seconds);
    ++n;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    out[n].isa = "avx2";
    out[n].gflops = time_loop(fma_loop_avx2, 2.0 * 8 * kFmaAccumulatorsAvx2, runs, seconds);
    ++n;
  }
#else
  (void)runs;
  (void)seconds;
  (void)out;
#endif
  return n;
}

}  // namespace bench

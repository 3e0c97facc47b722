// The machine's fp32 FMA peak, measured: a loop of independent fused multiply-adds per instruction
// set, each in its own translation unit compiled with that set's flags (meson.build), and a driver
// that picks what the CPU runs, times it and keeps the best of several runs. Used by
// `rnncore bench --peak` and bench/onednn_compare; not part of the library.
#ifndef RNNCORE_TOOLS_FMA_PEAK_FMA_PEAK_HPP
#define RNNCORE_TOOLS_FMA_PEAK_FMA_PEAK_HPP

namespace bench {

// `iters` rounds of kFmaAccumulators* independent vector FMAs; returns a value derived from every
// accumulator so that nothing can be dropped. Defined only in builds for x86.
float fma_loop_avx2(long iters, float a, float b);
float fma_loop_avx512(long iters, float a, float b);
constexpr int kFmaAccumulatorsAvx2 = 12;    // 12 ymm accumulators + 2 operands of 16 registers
constexpr int kFmaAccumulatorsAvx512 = 24;  // 24 zmm accumulators + 2 operands of 32 registers

struct FmaPeak {
  const char* isa = "none";  // "avx512", "avx2" or "none" (not measured)
  double gflops = 0.0;       // best run, one thread
};

// Measures each vector instruction set the CPU runs (best of `runs` runs of about `seconds` each)
// on the calling thread; out[0] is the widest. Returns how many were measured (0..2).
int measure_fma_peaks(int runs, double seconds, FmaPeak out[2]);

}  // namespace bench

#endif  // RNNCORE_TOOLS_FMA_PEAK_FMA_PEAK_HPP

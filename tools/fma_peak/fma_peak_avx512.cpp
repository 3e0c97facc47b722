// AVX-512 FMA loop (compiled with -mavx512f -mfma; called only where the CPU has AVX-512F).
#include <immintrin.h>

#include "fma_peak.hpp"

namespace bench {

float fma_loop_avx512(long iters, float a, float b) {
  constexpr int n = kFmaAccumulatorsAvx512;
  __m512 acc[n];
  for (int k = 0; k < n; ++k) acc[k] = _mm512_set1_ps(0.01f * static_cast<float>(k));
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < n; ++k) acc[k] = _mm512_fmadd_ps(acc[k], va, vb);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < n; ++k) sum = _mm512_add_ps(sum, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float v : lanes) total += v;
  return total;
}

}  // namespace bench

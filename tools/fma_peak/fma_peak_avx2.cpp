// AVX2 + FMA loop (compiled with -mavx2 -mfma; called only where the CPU has both).
#include <immintrin.h>

#include "fma_peak.hpp"

namespace bench {

float fma_loop_avx2(long iters, float a, float b) {
  constexpr int n = kFmaAccumulatorsAvx2;
  __m256 acc[n];
  for (int k = 0; k < n; ++k) acc[k] = _mm256_set1_ps(0.01f * static_cast<float>(k));
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < n; ++k) acc[k] = _mm256_fmadd_ps(acc[k], va, vb);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < n; ++k) sum = _mm256_add_ps(sum, acc[k]);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

}  // namespace bench

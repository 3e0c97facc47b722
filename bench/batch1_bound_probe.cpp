// What bounds a batch-1 step on one x86 core (AVX-512): a probe, not part of the library.
//
// A batch-1 LSTM step is a matrix-vector product over the packed recurrent panel (simd/kernels.hpp:
// blocks of K × 4 vectors, 4·H·H floats), and the input projection of the steps is a compute-bound
// product over the input panel. This program times, per step of an LSTM with H = K = I:
//   gemv     the recurrent product alone, blocks in the runtime's alternating order, at H 64–1024
//            (so the panel lies in L1/L2, in L2, at L2's size, in L3);
//   gemv+pf  the same with a software prefetch of every line at a distance (1, 4, 16 KiB ahead);
//   gemm     one step's share of the input projection alone: 24 rows (steps) × the input panel,
//            4 × 4 register tiles in k slabs of 64, the order the fused loop uses;
//   fused    both in one loop: four k of the recurrent product, then one k of a projection tile
//            whose rows are 24 future steps (the work of one step per step when I = H), the
//            projection's tile in registers for a slab of 64 k, its weights loaded once a k.
// If the recurrent product were bound by the L3's bandwidth, it would run faster from L2 (H ≤ 128)
// and the fused loop would hide the projection's FMAs in its waits.
//
//   g++ -O3 -march=native bench/batch1_bound_probe.cpp -o /tmp/probe && /tmp/probe [reps]
//
// (a machine with AVX-512F; one thread: pin it with taskset on a quiet machine). Results and what
// they mean: bench/results/batch1_bound_amd_epyc_zen4_avx512_2026-12-01.md.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kRows = 24, kMR = 4, kSlab = 64, kTiles = kRows / kMR;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Problem {
  int k = 0, blocks = 0;  // H = K; an LSTM block: 16 units × 4 gates = 64 floats a k
  float *r = nullptr, *w = nullptr, *x = nullptr, *h = nullptr, *out = nullptr, *proj = nullptr;
  alignas(64) float acc[kRows][64];
  int jw = 0, k0 = 0, tile = 0;  // the projection's cursor: input block, k slab, row tile
};

float* floats(long n, float v) {
  n = std::max(n, 16L);
  auto* p = static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(n + 15) / 16 * 64));
  for (long i = 0; i < n; ++i) p[i] = v * static_cast<float>(i % 7);
  return p;
}

// Four accumulators a block over k, two k an iteration (eight chains), each weight line loaded once.
template <int Dist>
__attribute__((noinline)) void gemv_block(const Problem& p, const float* r, float* o) {
  __m512 a[8];
  for (auto& v : a) v = _mm512_setzero_ps();
  for (int k = 0; k < p.k; k += 2, r += 128) {
    if (Dist > 0)
      for (int l = 0; l < 8; ++l) _mm_prefetch(reinterpret_cast<const char*>(r + Dist / 4 + 16 * l), _MM_HINT_T0);
    const __m512 x0 = _mm512_set1_ps(p.h[k]), x1 = _mm512_set1_ps(p.h[k + 1]);
    for (int q = 0; q < 4; ++q) {
      a[q] = _mm512_fmadd_ps(x0, _mm512_load_ps(r + 16 * q), a[q]);
      a[4 + q] = _mm512_fmadd_ps(x1, _mm512_load_ps(r + 64 + 16 * q), a[4 + q]);
    }
  }
  for (int q = 0; q < 4; ++q) _mm512_store_ps(o + 16 * q, _mm512_add_ps(a[q], a[4 + q]));
}

template <int Dist>
void gemv_step(const Problem& p, bool descending) {
  for (int i = 0; i < p.blocks; ++i) {
    const int j = descending ? p.blocks - 1 - i : i;
    gemv_block<Dist>(p, p.r + static_cast<std::size_t>(j) * p.k * 64, p.out + j * 64);
  }
}

// The projection's next item (row tile, then k slab, then input block); a finished block's rows out.
void next_item(Problem& p) {
  if (++p.tile < kTiles) return;
  p.tile = 0;
  if ((p.k0 += kSlab) < p.k) return;
  p.k0 = 0;
  for (int i = 0; i < kRows; ++i) {
    std::memcpy(p.proj + static_cast<std::size_t>(i) * p.blocks * 64 + p.jw * 64, p.acc[i], sizeof p.acc[i]);
    std::memset(p.acc[i], 0, sizeof p.acc[i]);
  }
  p.jw = (p.jw + 1) % p.blocks;
}

// One item's k-iterations of the projection's 4 × 4 tile; with `fused`, four k of the recurrent
// product (accumulators a, weights at *r, k at *kr) before each.
template <bool Fused>
inline void item(Problem& p, __m512* a, const float** r, int* kr) {
  __m512 c[kMR][4];
  for (int i = 0; i < kMR; ++i)
    for (int q = 0; q < 4; ++q) c[i][q] = _mm512_load_ps(p.acc[p.tile * kMR + i] + 16 * q);
  const float* w = p.w + (static_cast<std::size_t>(p.jw) * p.k + p.k0) * 64;
  const float* x = p.x + static_cast<std::size_t>(p.tile) * kMR * p.k + p.k0;
  for (int s = 0; s < kSlab; ++s, w += 64, ++x) {
    if (Fused) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u, ++*kr, *r += 64) {
        const __m512 xb = _mm512_set1_ps(p.h[*kr]);
        for (int q = 0; q < 4; ++q) a[q] = _mm512_fmadd_ps(xb, _mm512_load_ps(*r + 16 * q), a[q]);
      }
    }
    __m512 w0 = _mm512_load_ps(w), w1 = _mm512_load_ps(w + 16), w2 = _mm512_load_ps(w + 32), w3 = _mm512_load_ps(w + 48);
    asm("" : "+v"(w0), "+v"(w1), "+v"(w2), "+v"(w3));  // one load a vector (GCC would fold one per FMA)
#pragma GCC unroll 4
    for (int i = 0; i < kMR; ++i) {
      const __m512 b = _mm512_set1_ps(x[i * p.k]);
      c[i][0] = _mm512_fmadd_ps(b, w0, c[i][0]);
      c[i][1] = _mm512_fmadd_ps(b, w1, c[i][1]);
      c[i][2] = _mm512_fmadd_ps(b, w2, c[i][2]);
      c[i][3] = _mm512_fmadd_ps(b, w3, c[i][3]);
    }
  }
  for (int i = 0; i < kMR; ++i)
    for (int q = 0; q < 4; ++q) _mm512_store_ps(p.acc[p.tile * kMR + i] + 16 * q, c[i][q]);
  next_item(p);
}

// One step's share of the projection alone: blocks · K / (4 · slab) items (as many FMAs as the step).
__attribute__((noinline)) void gemm_step(Problem& p) {
  for (int n = p.blocks * p.k / (4 * kSlab); n > 0; --n) item<false>(p, nullptr, nullptr, nullptr);
}

// The step's recurrent product with the projection's share woven in (4 · slab divides K).
__attribute__((noinline)) void fused_step(Problem& p, bool descending) {
  for (int i = 0; i < p.blocks; ++i) {
    const int j = descending ? p.blocks - 1 - i : i;
    const float* r = p.r + static_cast<std::size_t>(j) * p.k * 64;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int k = 0; k < p.k;) item<true>(p, a, &r, &k);
    for (int q = 0; q < 4; ++q) _mm512_store_ps(p.out + j * 64 + 16 * q, a[q]);
  }
}

template <class F>
double us_per_step(int steps, F f) {
  const double t0 = now();
  for (int s = 0; s < steps; ++s) f(s);
  return (now() - t0) / steps * 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::printf("per step (µs), median of %d alternating repeats; GB/s = the recurrent panel's bytes / time\n", reps);
  std::printf("| H | panel KiB | gemv | GB/s | gemv+pf 1K | 4K | 16K | gemm | gemv + gemm | fused | fused / (gemv + gemm) |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int k : {64, 128, 256, 512, 1024}) {
    auto* p = new Problem;
    p->k = k, p->blocks = k / 16;
    const std::size_t panel = static_cast<std::size_t>(p->blocks) * k * 64;
    p->r = floats(static_cast<long>(panel) + 8192, 1e-3f), p->w = floats(static_cast<long>(panel), 1e-3f), p->x = floats(long{kRows} * k, 1e-2f);
    p->h = floats(k, 0.1f), p->out = floats(long{p->blocks} * 64, 0.0f), p->proj = floats(long{kRows} * p->blocks * 64, 0.0f);
    std::memset(p->acc, 0, sizeof p->acc);
    const int steps = std::max(20, static_cast<int>(200000 / (panel / 1024 + 1)));
    std::vector<double> t[7];
    for (int rep = 0; rep < reps; ++rep) {
      t[0].push_back(us_per_step(steps, [&](int s) { gemv_step<0>(*p, s & 1); }));
      t[1].push_back(us_per_step(steps, [&](int s) { gemv_step<1024>(*p, s & 1); }));
      t[2].push_back(us_per_step(steps, [&](int s) { gemv_step<4096>(*p, s & 1); }));
      t[3].push_back(us_per_step(steps, [&](int s) { gemv_step<16384>(*p, s & 1); }));
      if (k % (4 * kSlab) != 0) continue;  // the fused loop takes a block's K in items of 4 · slab k
      t[4].push_back(us_per_step(steps, [&](int) { gemm_step(*p); }));
      t[5].push_back(us_per_step(steps, [&](int s) { gemv_step<0>(*p, s & 1); gemm_step(*p); }));
      t[6].push_back(us_per_step(steps, [&](int s) { fused_step(*p, s & 1); }));
    }
    double m[7];
    for (int i = 0; i < 7; ++i) m[i] = t[i].empty() ? 0.0 : median(t[i]);
    std::printf("| %d | %zu | %.2f | %.0f | %.2f | %.2f | %.2f |", k, panel * 4 / 1024, m[0], panel * 4 / (m[0] * 1e3), m[1],
                m[2], m[3]);
    if (t[4].empty())
      std::printf(" – | – | – | – |\n");
    else
      std::printf(" %.2f | %.2f | %.2f | %.2f |\n", m[4], m[5], m[6], m[6] / m[5]);
    std::free(p->r), std::free(p->w), std::free(p->x), std::free(p->h), std::free(p->out), std::free(p->proj);
    delete p;
  }
  return 0;
}

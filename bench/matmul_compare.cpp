// matmul_compare: the library's f32_matmul (F32Kernels::matmul, simd/train_impl.hpp) against
// oneDNN's dnnl_sgemm on the products of one training step (src/train.cpp), both on one thread.
//
// For each cell, H (input size = H, as bench/onednn_compare) and B at T steps, the products the
// SIMD training path runs, with its shapes, strides, transposition of A and accumulation:
//   fwd_x   x · Wᵀ             M = T·B, N = G·H, K = H   (Wᵀ packed at plan time)
//   fwd_h   h · Rᵀ, per step   M = B,   N = G·H, K = H   (Rᵀ packed; T calls)
//   bwd_dh  dpre · R, per step M = B,   N = H,   K = G·H (R packed; GRU: K = 2H and K = H; T calls)
//   bwd_dW  dpreᵀ · x          M = G·H, N = H,   K = T·B (A transposed: read down dpre's columns)
//   bwd_dR  dpreᵀ · h_prev     M = G·H, N = H,   K = T·B (A transposed; h read from the reserve
//                                                          rows, slots·H apart; GRU: 2H and H)
//   bwd_dx  dpre · W           M = T·B, N = H,   K = G·H (W packed per call from its rows)
// (bwd_dW and bwd_dR with the wide scratch the plan gives the backward where T·B > 256 and H > 512:
// blocks of 768 × up to 1,024 on AVX-512, simd/train_impl.hpp kWideKc.)
// dpre rows are (G+1)·H wide (src/train.cpp's gw_). oneDNN gets the same operands in place
// (dnnl_sgemm, row-major, transa 'T' for the transposed A; it packs whatever it packs per call).
// Timed runs alternate the two libraries, `--reps` rounds; each figure is the median round's
// thread CPU time. GFLOP/s = 2·M·N·K / time; ratio = oneDNN's time / rnncore's (> 1: rnncore faster).
#include <oneapi/dnnl/dnnl.h>
#if BENCH_HAVE_OPENMP
#include <omp.h>
#endif

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "simd/kernels.hpp"
#include "src/internal/plan_impl.hpp"

namespace {

using rnncore::simd::F32Kernels;
using rnncore::simd::MatmulArgs;

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p != '\0';) {
    v.push_back(std::atoi(p));
    while (*p != '\0' && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

// One product: C[M, N] (+)= A(m, k) · B[k, :], `calls` times (the per-step products: one a step,
// each on its own rows of A and C).
struct Product {
  const char* name;
  int m, n, k;
  bool a_transposed;   // A(m, k) = a[m + k·lda], else a[m·lda + k]
  std::int64_t lda, ldb;
  bool accumulate;
  bool b_prepacked;    // rnncore reads B packed by pack_b (packed once, not timed)
  int calls;
  std::int64_t a_step, c_step;  // per call: A and C advance by these
};

struct Buffers {
  std::vector<float> a, b, c, packed;
};

void fill(std::vector<float>& v, std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  v.resize(n);
  for (float& x : v) x = d(rng);
}

std::size_t a_floats(const Product& p) {
  return p.a_transposed ? static_cast<std::size_t>(p.k) * p.lda + p.m
                        : static_cast<std::size_t>(p.m) * p.lda + p.k + (p.calls - 1) * p.a_step;
}

// `wide`: the plan's backward has the wide matmul scratch (src/train_plan.cpp wide_backward_pack:
// T·B over 256 and H over 512), which the weight gradients' products (A transposed) use.
void run_rnncore(const F32Kernels* kn, const Product& p, Buffers& bf, float* scratch, bool wide) {
  for (int s = 0; s < p.calls; ++s) {
    MatmulArgs g;
    g.a = bf.a.data() + s * p.a_step;
    g.a_m = p.a_transposed ? 1 : p.lda;
    g.a_k = p.a_transposed ? p.lda : 1;
    g.b = p.b_prepacked ? nullptr : bf.b.data();
    g.ldb = p.ldb;
    g.b_packed = p.b_prepacked ? bf.packed.data() : nullptr;
    g.c = bf.c.data() + s * p.c_step;
    g.ldc = p.n;
    g.n = p.n;
    g.k = p.k;
    g.row_begin = 0;
    g.row_end = p.m;
    g.accumulate = p.accumulate;
    g.scratch = scratch;
    g.wide_scratch = wide && p.a_transposed;
    kn->matmul(g);
  }
}

void run_onednn(const Product& p, Buffers& bf) {
  for (int s = 0; s < p.calls; ++s)
    dnnl_sgemm(p.a_transposed ? 'T' : 'N', 'N', p.m, p.n, p.k, 1.0f, bf.a.data() + s * p.a_step, p.lda, bf.b.data(),
               p.ldb, p.accumulate ? 1.0f : 0.0f, bf.c.data() + s * p.c_step, p.n);
}

// The products of one layer's training step (see the top of the file).
std::vector<Product> step_products(bool gru, int H, int B, int T) {
  const int G = gru ? 3 : 4, GH = G * H, gw = (G + 1) * H, slots = gru ? 5 : 6, TB = T * B;
  std::vector<Product> v;
  v.push_back({"fwd_x", TB, GH, H, false, H, GH, false, true, 1, 0, 0});
  v.push_back({"fwd_h", B, GH, H, false, H, GH, false, true, T, 0, 0});
  if (gru) {
    v.push_back({"bwd_dh_rz", B, H, 2 * H, false, gw, H, true, true, T, static_cast<std::int64_t>(B) * gw, 0});
    v.push_back({"bwd_dh_n", B, H, H, false, gw, H, true, true, T, static_cast<std::int64_t>(B) * gw, 0});
  } else {
    v.push_back({"bwd_dh", B, H, GH, false, gw, H, true, true, T, static_cast<std::int64_t>(B) * gw, 0});
  }
  v.push_back({"bwd_dW", GH, H, TB, true, gw, H, true, false, 1, 0, 0});
  if (gru) {
    v.push_back({"bwd_dR_rz", 2 * H, H, TB, true, gw, static_cast<std::int64_t>(slots) * H, true, false, 1, 0, 0});
    v.push_back({"bwd_dR_n", H, H, TB, true, gw, static_cast<std::int64_t>(slots) * H, true, false, 1, 0, 0});
  } else {
    v.push_back({"bwd_dR", GH, H, TB, true, gw, static_cast<std::int64_t>(slots) * H, true, false, 1, 0, 0});
  }
  v.push_back({"bwd_dx", TB, H, GH, false, gw, H, true, false, 1, 0, 0});
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int usage() {
  std::fprintf(stderr,
               "usage: matmul_compare [--modes lstm,gru] [--hidden 128,256,512] [--batch 16,64] [--seq 50] [--reps 7]\n"
               "  f32_matmul (rnncore) against dnnl_sgemm (oneDNN) on a training step's products, one thread,\n"
               "  alternating; the median round of --reps each. RNNCORE_MAX_ISA caps rnncore's kernels.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> hidden{128, 256, 512}, batch{16, 64};
  std::vector<std::string> modes{"lstm", "gru"};
  int seq = 50, reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--hidden") hidden = parse_list(argv[++i]);
    else if (a == "--batch") batch = parse_list(argv[++i]);
    else if (a == "--seq") seq = std::atoi(argv[++i]);
    else if (a == "--reps") reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--modes") {
      modes.clear();
      for (std::string s = argv[++i]; !s.empty();) {
        const std::size_t c = s.find(',');
        modes.push_back(s.substr(0, c));
        s = c == std::string::npos ? "" : s.substr(c + 1);
      }
    } else return usage();
  }
#if BENCH_HAVE_OPENMP
  omp_set_num_threads(1);
#endif
  rnncore::Isa isa = rnncore::Isa::none;
  const F32Kernels* kn = rnncore::detail::select_f32_kernels(rnncore::Isa::best, &isa);
  if (kn == nullptr) {
    std::fprintf(stderr, "matmul_compare: no SIMD f32 kernels in this build\n");
    return 1;
  }
  std::printf("# matmul_compare: f32_matmul (%s, %s) vs dnnl_sgemm, 1 thread, T=%d, median of %d alternating rounds\n",
              kn->name, rnncore::to_string(isa), seq, reps);
  std::printf("%-4s %4s %3s %-10s %5s %5s %5s %2s %3s %5s %9s %9s %7s %7s %6s\n", "mode", "H", "B", "product", "M", "N",
              "K", "tA", "acc", "calls", "rn_ms", "dn_ms", "rn_GF/s", "dn_GF/s", "ratio");
  std::vector<float> scratch(rnncore::simd::kMatmulWideScratchFloats + 16);
  float* sc = scratch.data() + (16 - reinterpret_cast<std::uintptr_t>(scratch.data()) / 4 % 16) % 16;
  std::mt19937 rng(33);
  for (const std::string& mode : modes)
    for (int H : hidden)
      for (int B : batch) {
        double rn_total = 0, dn_total = 0;
        const bool wide = static_cast<long>(seq) * B > 256 && H > 512;
        for (const Product& p : step_products(mode == "gru", H, B, seq)) {
          Buffers bf;
          fill(bf.a, a_floats(p), rng);
          fill(bf.b, static_cast<std::size_t>(p.k) * p.ldb, rng);
          fill(bf.c, static_cast<std::size_t>(p.m) * p.n + (p.calls - 1) * p.c_step, rng);
          if (p.b_prepacked) {
            bf.packed.resize(static_cast<std::size_t>(rnncore::simd::packed_b_floats(p.k, p.n)));
            kn->pack_b(bf.b.data(), p.ldb, 1, p.k, p.n, bf.packed.data());
          }
          run_rnncore(kn, p, bf, sc, wide);  // warm-up of both
          run_onednn(p, bf);
          std::vector<double> rn, dn;
          for (int r = 0; r < reps; ++r) {
            double t0 = thread_seconds();
            run_rnncore(kn, p, bf, sc, wide);
            double t1 = thread_seconds();
            run_onednn(p, bf);
            double t2 = thread_seconds();
            rn.push_back(t1 - t0);
            dn.push_back(t2 - t1);
          }
          const double rm = median(rn), dm = median(dn);
          const double flop = 2.0 * p.m * p.n * static_cast<double>(p.k) * p.calls;
          rn_total += rm;
          dn_total += dm;
          std::printf("%-4s %4d %3d %-10s %5d %5d %5d %2s %3s %5d %9.3f %9.3f %7.1f %7.1f %6.2f\n", mode.c_str(), H, B,
                      p.name, p.m, p.n, p.k, p.a_transposed ? "T" : "N", p.accumulate ? "+" : "=", p.calls, rm * 1e3,
                      dm * 1e3, flop / rm * 1e-9, flop / dm * 1e-9, dm / rm);
          std::fflush(stdout);
        }
        std::printf("%-4s %4d %3d %-10s %5s %5s %5s %2s %3s %5s %9.3f %9.3f %7s %7s %6.2f\n", mode.c_str(), H, B, "all", "",
                    "", "", "", "", "", rn_total * 1e3, dn_total * 1e3, "", "", dn_total / rn_total);
      }
  return 0;
}

// checkkernels (dav1d's checkasm): every kernel this build has (src/internal/kernels.hpp, the one
// registry) against its reference, on random and edge inputs, bit for bit where the kernel is
// specified so (the int8 kernels against the scalar code) and within stated tolerances otherwise
// (the f32 tables against f64 loops; their step and GEMM kernels are checked at layer level by
// simd_vs_reference, golden and lowp, and here a step's batch-1 paths against its batch path, bit
// for bit). It FAILS when a kernel this CPU runs went unchecked, or when
// the machine has an instruction set the build targets (RNNCORE_CHECK_ISAS) and no kernel of it
// was checked.
//
//   checkkernels                 the checks (a meson test)
//   checkkernels --bench [reps]  times every kernel against its reference instead: the median of
//                                alternating repetitions of each, and the ratio
//   (other arguments go to doctest)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "src/shared/cell_grad.hpp"
#include "src/shared/half.hpp"
#include "src/internal/int8_lstm.hpp"
#include "src/internal/kernels.hpp"
#include "src/internal/plan_impl.hpp"
#include "tests/test_util.hpp"

#ifndef RNNCORE_CHECK_ISAS
#define RNNCORE_CHECK_ISAS ""
#endif

using namespace rnncore;
using namespace rnncore::q8;
using detail::Kernel;
using detail::KernelOp;

namespace {

// The names of the kernels a check compared with their reference.
std::set<std::string>& checked_names() {
  static std::set<std::string> s;
  return s;
}
void checked(const char* name) { checked_names().insert(name); }

// Every kernel of the build, op after op (the registry keeps one array per op).
const Kernel* registry(int* n) {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> v;
    for (int op = 0; op < detail::kKernelOpCount; ++op) {
      int count = 0;
      const Kernel* k = detail::kernel_registry(static_cast<KernelOp>(op), &count);
      v.insert(v.end(), k, k + count);
    }
    return v;
  }();
  *n = static_cast<int>(all.size());
  return all.data();
}

// The largest relative error of a product C (M rows of N floats) against f64 sums:
// |c[r, j] − (c0[r, j] + Σ_q p(r, j, q))| / (|c0[r, j]| + Σ_q |p(r, j, q)|), c0 null: zero.
template <class Product>
double matmul_error(int M, int N, int K, const float* c0, const float* c, const Product& p) {
  double worst = 0;
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < N; ++j) {
      const std::size_t at = static_cast<std::size_t>(r) * N + j;
      double s = c0 != nullptr ? c0[at] : 0.0, mag = std::fabs(s);
      for (int q = 0; q < K; ++q) {
        const double v = p(r, j, q);
        s += v;
        mag += std::fabs(v);
      }
      worst = std::max(worst, std::fabs(c[at] - s) / (mag + 1e-30));
    }
  return worst;
}

}  // namespace

// ---- the f32 tables: the training matmul, the activations and the vector math against f64 loops,
// the bf16 rounding bit for bit ----
// Every path of matmul sums each element's k in the same order (simd/train_impl.hpp), so they agree
// bit for bit: A packed (strided A), read in place (row-major or transposed A against a packed B),
// or neither (no scratch); B packed by pack_b, packed per call, or read in place; row tiles with
// every edge (M = 67: 6-row tiles leave 1) and rows split in two calls (as the threads split them).
TEST_CASE("f32 kernels: matmul's paths agree bit for bit") {
  int n = 0;
  const Kernel* k = registry(&n);
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    if (k[i].op != KernelOp::f32_rnn || !k[i].runs()) continue;
    const simd::F32Kernels& t = *k[i].table();
    CAPTURE(std::string(k[i].name()));
    constexpr int M = 67, lda_pad = 5;
    // 203: a last partial vector for every V; K 1,700 × N 1,100: the wide scratch's blocks (three
    // 768-deep, 1,024 columns then the rest) for the transposed A.
    constexpr int kShapes[][2] = {{600, 16}, {600, 200}, {600, 203}, {600, 576}, {1700, 1100}};
    for (const auto& shape : kShapes) {
      const int K = shape[0], N = shape[1];
      for (const int layout : {0, 1, 2}) {  // A row-major, transposed, or strided both ways
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(layout);
        const std::int64_t a_m = layout == 0 ? K + lda_pad : layout == 1 ? 1 : 2 * (K + lda_pad);
        const std::int64_t a_k = layout == 0 ? 1 : layout == 1 ? M + lda_pad : 2;
        std::vector<float> a(static_cast<std::size_t>(2 * (K + lda_pad) * (M + lda_pad))), b(static_cast<std::size_t>(K * N)),
            c0(static_cast<std::size_t>(M * N)), bp(static_cast<std::size_t>(simd::packed_b_floats(K, N))),
            scratch(static_cast<std::size_t>(simd::kMatmulWideScratchFloats));
        for (float& x : a) x = u(rng);
        for (float& x : b) x = u(rng);
        for (float& x : c0) x = u(rng);
        t.pack_b(b.data(), N, 1, K, N, bp.data());
        auto run = [&](bool with_scratch, bool packed, int r0, int r1, std::vector<float>& c, bool wide = false) {
          simd::MatmulArgs m;
          m.a = a.data();
          m.a_m = a_m;
          m.a_k = a_k;
          m.b = packed ? nullptr : b.data();
          m.ldb = N;
          m.b_packed = packed ? bp.data() : nullptr;
          m.c = c.data();
          m.ldc = N;
          m.n = N;
          m.k = K;
          m.row_begin = r0;
          m.row_end = r1;
          m.accumulate = true;
          m.scratch = with_scratch ? scratch.data() : nullptr;
          m.wide_scratch = wide;
          t.matmul(m);
        };
        std::vector<float> want = c0;
        run(false, false, 0, M, want);
        for (const bool packed : {false, true}) {
          std::vector<float> c = c0, split = c0;
          run(true, packed, 0, M, c);
          run(true, packed, 0, 31, split);
          run(true, packed, 31, M, split);
          CHECK(std::memcmp(c.data(), want.data(), sizeof(float) * c.size()) == 0);
          CHECK(std::memcmp(split.data(), want.data(), sizeof(float) * c.size()) == 0);
        }
        std::vector<float> wide = c0;  // the wide scratch (its blocks: transposed A, K 1,700, N 1,100)
        run(true, false, 0, M, wide, true);
        CHECK(std::memcmp(wide.data(), want.data(), sizeof(float) * wide.size()) == 0);
      }
    }
  }
}

// MatmulArgs::bf16 (the weight gradients of layers on bf16 panels; tables with bf16 pairs): C (+)=
// Aᵀ · B with both rounded to bf16, against f64 on the rounded values within 1e-5 · Σ|a·b| (which an
// f32 product of the unrounded values misses: ~1e-3), and its rows split in two calls (as threads
// split them) bit for bit. Shapes: M 67 (16-row groups leave 3), odd K and N, K over three blocks
// (480 deep; wide scratch 1,440), N over the blocks (512 wide; wide 1,024) and partial 48-column tiles.
TEST_CASE("f32 kernels: bf16 matmul (vdpbf16ps) against f64 on the rounded inputs") {
  int n = 0;
  const Kernel* k = registry(&n);
  std::mt19937 rng(20261201);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto bf16 = [](float v) { return static_cast<double>(detail::bf16_to_f32(detail::f32_to_bf16(v))); };
  for (int i = 0; i < n; ++i) {
    if (k[i].op != KernelOp::f32_rnn || !k[i].runs() || !k[i].table()->bf16_pairs) continue;
    const simd::F32Kernels& t = *k[i].table();
    CAPTURE(std::string(k[i].name()));
    constexpr int M = 67, lda = M + 5;
    constexpr int kShapes[][2] = {{35, 5}, {1001, 203}, {97, 1100}, {3001, 70}};
    for (const auto& shape : kShapes) {
      const int K = shape[0], N = shape[1];
      CAPTURE(K);
      CAPTURE(N);
      std::vector<float> a(static_cast<std::size_t>(K) * lda), b(static_cast<std::size_t>(K) * N), c0(static_cast<std::size_t>(M) * N),
          scratch(static_cast<std::size_t>(simd::kMatmulWideScratchFloats));
      for (float& x : a) x = u(rng);
      for (float& x : b) x = u(rng);
      for (float& x : c0) x = u(rng);
      auto run = [&](int r0, int r1, bool wide, std::vector<float>& c) {
        simd::MatmulArgs m;
        m.a = a.data();
        m.a_m = 1;
        m.a_k = lda;
        m.b = b.data();
        m.ldb = N;
        m.c = c.data();
        m.ldc = N;
        m.n = N;
        m.k = K;
        m.row_begin = r0;
        m.row_end = r1;
        m.accumulate = true;
        m.scratch = scratch.data();
        m.wide_scratch = wide;
        m.bf16 = true;
        t.matmul(m);
      };
      for (const bool wide : {false, true}) {
        CAPTURE(wide);
        std::vector<float> c = c0, split = c0;
        run(0, M, wide, c);
        run(0, 31, wide, split);
        run(31, M, wide, split);
        CHECK(std::memcmp(c.data(), split.data(), sizeof(float) * c.size()) == 0);
        const double worst = matmul_error(M, N, K, c0.data(), c.data(), [&](int r, int j, int q) {
          return bf16(a[static_cast<std::size_t>(q) * lda + r]) * bf16(b[static_cast<std::size_t>(q) * N + j]);
        });
        CHECK(worst <= 1e-5);
        MESSAGE("bf16 matmul K ", K, " N ", N, " wide ", wide, ": ", worst);
      }
    }
    checked(k[i].name());
  }
}

TEST_CASE("f32 kernels: matmul, activations, vector math and bf16 rounding against their references") {
  int n = 0;
  const Kernel* k = registry(&n);
  std::mt19937 rng(20261128);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    if (k[i].op != KernelOp::f32_rnn || !k[i].runs()) continue;
    const simd::F32Kernels& t = *k[i].table();
    CAPTURE(std::string(k[i].name()));
    // matmul: C = A·B (+ C) on odd shapes, A row-major and transposed; error within 1e-5 · Σ|a·b|.
    for (const int M : {1, 7, 33}) {
      for (const int N : {1, 5, 17, 64}) {
        for (const int K : {1, 3, 31, 100}) {
          for (const bool transposed : {false, true}) {
            std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N)),
                c(static_cast<std::size_t>(M * N));
            for (float& x : a) x = u(rng);
            for (float& x : b) x = u(rng);
            for (float& x : c) x = u(rng);
            const std::vector<float> c0 = c;
            simd::MatmulArgs m;
            m.a = a.data();
            m.a_m = transposed ? 1 : K;
            m.a_k = transposed ? M : 1;
            m.b = b.data();
            m.ldb = N;
            m.c = c.data();
            m.ldc = N;
            m.n = N;
            m.k = K;
            m.row_end = M;
            m.accumulate = K % 2 == 1;
            t.matmul(m);
            const double worst = matmul_error(M, N, K, m.accumulate ? c0.data() : nullptr, c.data(), [&](int r, int j, int q) {
              return static_cast<double>(a[static_cast<std::size_t>(r * m.a_m + q * m.a_k)]) * b[static_cast<std::size_t>(q * N + j)];
            });
            CHECK(worst <= 1e-5);
          }
        }
      }
    }
    // The one-row path (batch 1: A read in place, several packed panels at a time) against the row
    // tiles: an element sums k in order whatever the tiling, so each row of a 7-row product equals
    // the same row computed alone, bit for bit — B packed by pack_b or read in place, three K
    // blocks, N over every remainder of wide panels mod 3 (each ISA's panel width) and over three
    // N blocks, the panels visited in either order (`descending`); B of 0.3–2.6 MB and, with K = 2,000
    // and N = 1,100, past kSingleRowFarBytes (AVX-512 groups its panels by size: row_panel_group) —
    // and the product is within 1e-5 of the f64 sums.
    for (const int N : {147, 200, 320, 1100}) {
      for (const int K : {600, 2000}) {
      if (K == 2000 && N != 1100) continue;
      CAPTURE(K);
      for (const bool packed : {false, true}) {
        constexpr int M = 7;
        std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N)),
            c0(static_cast<std::size_t>(M * N)), bp(static_cast<std::size_t>(simd::packed_b_floats(K, N))),
            scratch(static_cast<std::size_t>(simd::kMatmulScratchFloats));
        for (float& x : a) x = u(rng);
        for (float& x : b) x = u(rng);
        for (float& x : c0) x = u(rng);
        if (packed) t.pack_b(b.data(), N, 1, K, N, bp.data());
        auto run = [&](int rows, const float* a_rows, float* c, bool descending = false) {
          simd::MatmulArgs m;
          m.a = a_rows;
          m.a_m = K;
          m.a_k = 1;
          m.b = packed ? nullptr : b.data();
          m.ldb = N;
          m.b_packed = packed ? bp.data() : nullptr;
          m.c = c;
          m.ldc = N;
          m.n = N;
          m.k = K;
          m.row_end = rows;
          m.accumulate = true;
          m.scratch = scratch.data();
          m.descending = descending;
          t.matmul(m);
        };
        std::vector<float> c = c0;
        run(M, a.data(), c.data());
        for (int r = 0; r < M; ++r)
          for (const bool descending : {false, true}) {
            std::vector<float> one(c0.begin() + r * N, c0.begin() + (r + 1) * N);
            run(1, a.data() + r * K, one.data(), descending);
            CHECK(std::memcmp(one.data(), c.data() + r * N, sizeof(float) * N) == 0);
          }
        const double worst = matmul_error(M, N, K, c0.data(), c.data(), [&](int r, int j, int q) {
          return static_cast<double>(a[static_cast<std::size_t>(r * K + q)]) * b[static_cast<std::size_t>(q * N + j)];
        });
        CHECK(worst <= 1e-5);
      }
      }
    }
    // activate: sigmoid, tanh, relu in place, within 4e-6 absolute of the f64 functions.
    const int V = t.vector;
    for (const auto kind : {simd::Activation::sigmoid, simd::Activation::tanh, simd::Activation::relu}) {
      std::vector<float> v(static_cast<std::size_t>(7 * V + 3));
      for (std::size_t j = 0; j < v.size(); ++j) v[j] = 12.0f * u(rng);
      v[0] = 0.0f;
      const std::vector<float> x = v;
      t.activate(kind, v.data(), static_cast<std::int32_t>(v.size()));
      double worst = 0;
      for (std::size_t j = 0; j < v.size(); ++j) {
        const double want = kind == simd::Activation::sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(x[j])))
                            : kind == simd::Activation::tanh  ? std::tanh(static_cast<double>(x[j]))
                                                              : std::max(0.0, static_cast<double>(x[j]));
        worst = std::max(worst, std::fabs(v[j] - want));
      }
      CHECK(worst <= 4e-6);
    }
    // math: exp within 4 ulp-ish relative (2e-6), sigmoid and tanh within 4e-6 absolute.
    {
      std::vector<float> x(static_cast<std::size_t>(16 * V)), e(x.size()), s(x.size()), th(x.size());
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = 20.0f * u(rng);
      t.math(x.data(), e.data(), s.data(), th.data(), static_cast<std::int32_t>(x.size()));
      double we = 0, ws = 0, wt = 0;
      for (std::size_t j = 0; j < x.size(); ++j) {
        const double xd = x[j];
        we = std::max(we, std::fabs(e[j] - std::exp(xd)) / std::exp(xd));
        ws = std::max(ws, std::fabs(s[j] - 1.0 / (1.0 + std::exp(-xd))));
        wt = std::max(wt, std::fabs(th[j] - std::tanh(xd)));
      }
      CHECK(we <= 2e-6);
      CHECK(ws <= 4e-6);
      CHECK(wt <= 4e-6);
    }
    // lstm_backward: one row of the LSTM cell's gradients against lstm_unit_backward in f64 (the
    // kernel's tanh of c_t within 4e-6: every output within 1e-5 of values below 4), H = 2V + 3.
    {
      const int H = 2 * V + 3;
      std::vector<float> keep(static_cast<std::size_t>(5 * H)), cp(static_cast<std::size_t>(H)), dh(cp.size()), dc(cp.size()),
          d(static_cast<std::size_t>(4 * H), 7.0f);
      for (int j = 0; j < 4 * H; ++j) keep[static_cast<std::size_t>(j)] = 0.5f + 0.5f * u(rng);  // gates in (0, 1)
      for (int j = 0; j < H; ++j) {
        keep[static_cast<std::size_t>(2 * H + j)] = u(rng);  // g in (−1, 1)
        keep[static_cast<std::size_t>(4 * H + j)] = 3.0f * u(rng);
        cp[static_cast<std::size_t>(j)] = 2.0f * u(rng);
        dh[static_cast<std::size_t>(j)] = u(rng);
        dc[static_cast<std::size_t>(j)] = u(rng);
      }
      const std::vector<float> dc_in = dc;
      t.lstm_backward(keep.data(), cp.data(), dh.data(), dc.data(), d.data(), H);
      double worst = 0;
      for (int j = 0; j < H; ++j) {
        double want[4];
        const auto kd = [&](int g) { return static_cast<double>(keep[static_cast<std::size_t>(g * H + j)]); };
        const double dprev = detail::lstm_unit_backward<double>(kd(0), kd(1), kd(2), kd(3), std::tanh(kd(4)), cp[static_cast<std::size_t>(j)],
                                                               dh[static_cast<std::size_t>(j)], dc_in[static_cast<std::size_t>(j)], want, 1);
        worst = std::max(worst, std::fabs(dc[static_cast<std::size_t>(j)] - dprev));
        for (int g = 0; g < 4; ++g) worst = std::max(worst, std::fabs(d[static_cast<std::size_t>(g * H + j)] - want[g]));
      }
      CHECK(worst <= 1e-5);
    }
    // gru_backward, both variants: against gru_unit_backward in f64 (no transcendental: within
    // 1e-6 of values below 4); the gates a variant does not write keep their values.
    for (const bool after : {false, true}) {
      const int H = 2 * V + 3;
      std::vector<float> keep(static_cast<std::size_t>(4 * H)), hp(static_cast<std::size_t>(H)), dh(hp.size()), direct(hp.size()),
          d(static_cast<std::size_t>(4 * H), 7.0f);
      for (float& x : keep) x = 0.5f + 0.5f * u(rng);
      for (int j = 0; j < H; ++j) {
        keep[static_cast<std::size_t>(2 * H + j)] = u(rng);  // n in (−1, 1)
        hp[static_cast<std::size_t>(j)] = u(rng);
        dh[static_cast<std::size_t>(j)] = u(rng);
      }
      t.gru_backward[after ? 1 : 0](keep.data(), hp.data(), dh.data(), direct.data(), d.data(), H);
      double worst = 0;
      for (int j = 0; j < H; ++j) {
        double want[4] = {7.0, 7.0, 7.0, 7.0};
        const auto kd = [&](int g) { return static_cast<double>(keep[static_cast<std::size_t>(g * H + j)]); };
        const double direct_want = detail::gru_unit_backward<double>(after, kd(0), kd(1), kd(2), after ? kd(3) : 0.0, hp[static_cast<std::size_t>(j)],
                                                                     dh[static_cast<std::size_t>(j)], want, 1);
        worst = std::max(worst, std::fabs(direct[static_cast<std::size_t>(j)] - direct_want));
        for (int g = 0; g < 4; ++g) worst = std::max(worst, std::fabs(d[static_cast<std::size_t>(g * H + j)] - want[g]));
      }
      CHECK(worst <= 1e-6);
    }
    // lstm_forward and gru_forward (the training forward's cells): against the cell in f64 (the
    // activations within 4e-6: every slot within 1e-5), H = 2V + 3 (a partial last vector).
    {
      const int H = 2 * V + 3;
      auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
      std::vector<float> pj(static_cast<std::size_t>(4 * H)), rc(pj.size()), prev(static_cast<std::size_t>(H)), bn(prev.size()),
          keep(static_cast<std::size_t>(6 * H));
      for (float& x : pj) x = 2.0f * u(rng);
      for (float& x : rc) x = 2.0f * u(rng);
      for (float& x : prev) x = u(rng);
      for (float& x : bn) x = u(rng);
      auto at = [](const std::vector<float>& v, int i) { return static_cast<double>(v[static_cast<std::size_t>(i)]); };
      t.lstm_forward(pj.data(), rc.data(), prev.data(), keep.data(), H);
      double worst = 0;
      for (int j = 0; j < H; ++j) {
        auto pre = [&](int g) { return at(pj, g * H + j) + at(rc, g * H + j); };
        const double i = sig(pre(0)), f = sig(pre(1)), g = std::tanh(pre(2)), o = sig(pre(3)), c = f * at(prev, j) + i * g;
        const double want[6] = {i, f, g, o, c, o * std::tanh(c)};
        for (int s = 0; s < 6; ++s) worst = std::max(worst, std::fabs(at(keep, s * H + j) - want[s]));
      }
      CHECK(worst <= 1e-5);
      t.gru_forward(pj.data(), rc.data(), bn.data(), prev.data(), keep.data(), H);
      worst = 0;
      for (int j = 0; j < H; ++j) {
        const double r = sig(at(pj, j) + at(rc, j)), z = sig(at(pj, H + j) + at(rc, H + j)), rec_n = at(rc, 2 * H + j) + at(bn, j),
                     n = std::tanh(at(pj, 2 * H + j) + r * rec_n);
        const double want[5] = {r, z, n, rec_n, (1.0 - z) * n + z * at(prev, j)};
        for (int s = 0; s < 5; ++s) worst = std::max(worst, std::fabs(at(keep, s * H + j) - want[s]));
      }
      CHECK(worst <= 1e-5);
    }
    // to_bf16: round to nearest even, bit for bit with the scalar conversion, any length.
    {
      std::vector<float> x(37);
      for (float& f : x) f = 1000.0f * u(rng);
      x[0] = 1.0f + 1.0f / 256.0f;  // a tie: rounds to even
      x[1] = -0.0f;
      std::vector<std::uint16_t> got(x.size() + 1, 0x5A5A);
      t.to_bf16(x.data(), got.data(), static_cast<std::int32_t>(x.size()));
      for (std::size_t j = 0; j < x.size(); ++j) CHECK(got[j] == detail::f32_to_bf16(x[j]));
      CHECK(got[x.size()] == 0x5A5A);
    }
    checked(k[i].name());
  }
}

// ---- the int8 kernels (moved from tests/test_int8_lstm.cpp) ----
// The step kernels take a batch in row tiles and one row (batch 1) in groups of unit blocks
// (simd/kernels_impl.hpp, single_row_blocks), in either block order (StepArgs::descending): each
// unit's sum runs k upwards in all of them, so a row's outputs and state are the same bits. Seven
// blocks (the last one partly padding) leave every group size a tail; K = H, and K = 4,800 (the
// panels past kSingleRowFarBytes: AVX-512's other grouping); random panels, inputs and states, f32
// weights; the reset-before GRU's phase 1 (r, z, r ⊙ h).
TEST_CASE("f32 kernels: a step's row is the same bits alone (batch 1, either block order) as in a batch") {
  int n = 0;
  const Kernel* k = registry(&n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    if (k[i].op != KernelOp::f32_rnn || !k[i].runs()) continue;
    const simd::F32Kernels& t = *k[i].table();
    CAPTURE(std::string(k[i].name()));
    for (int cell = 0; cell < simd::kCellCount; ++cell)
    for (const bool deep : {false, true}) {
      const auto C = static_cast<simd::Cell>(cell);
      CAPTURE(cell);
      CAPTURE(deep);
      const int V = t.vector, NV = simd::vectors_per_gate(C), blocks = 7;
      const int gates = C == simd::Cell::lstm ? 4 : C == simd::Cell::gru_reset_after ? 3 : C == simd::Cell::gru_reset_before ? 2 : 1;
      // Hp: the rows' stride (h holds K units; the kernel computes H)
      const int H = blocks * NV * V - 3, K = deep ? 4800 : H, Hp = std::max(blocks * NV * V, K), rows = 3, PW = gates * NV;
      const int proj_gates = C == simd::Cell::gru_reset_before ? 3 : gates;  // (its n gate's projection too)
      const std::size_t panel_n = static_cast<std::size_t>(blocks) * K * PW * V, row_n = static_cast<std::size_t>(rows) * Hp;
      rnncore_test::AlignedBuffer panel_b(4 * panel_n), proj_b(4 * row_n * proj_gates), bias_b(4 * Hp), h_b(4 * row_n),
          c0_b(4 * row_n);
      auto fill = [&](unsigned char* p, std::size_t count) {
        auto* f = reinterpret_cast<float*>(p);
        for (std::size_t e = 0; e < count; ++e) f[e] = uni(rng);
      };
      fill(panel_b.ptr, panel_n);
      fill(proj_b.ptr, row_n * proj_gates);
      fill(bias_b.ptr, Hp);
      fill(h_b.ptr, row_n);
      fill(c0_b.ptr, row_n);
      auto* h = reinterpret_cast<float*>(h_b.ptr);
      for (int r = 0; r < rows; ++r) std::fill(h + r * Hp + K, h + (r + 1) * Hp, 0.0f);
      // One run's outputs: y, h_next, c (LSTM), r ⊙ h and z (reset-before).
      struct Out {
        rnncore_test::AlignedBuffer y, h, c, rh, z;
        explicit Out(std::size_t bytes) : y(bytes), h(bytes), c(bytes), rh(bytes), z(bytes) {}
      };
      auto run = [&](Out& o, int r0, int r1, bool descending) {
        for (auto* b : {&o.y, &o.h, &o.rh, &o.z}) std::memset(b->ptr, 0, b->size);
        std::memcpy(o.c.ptr, c0_b.ptr, o.c.size);
        simd::StepArgs s;
        s.hidden = H;
        s.hidden_padded = Hp;
        s.state_size = K;
        s.proj = reinterpret_cast<const float*>(proj_b.ptr);
        s.proj_row_stride = static_cast<std::int64_t>(proj_gates) * Hp;
        s.panel = panel_b.ptr;
        s.bias_rn = reinterpret_cast<const float*>(bias_b.ptr);
        s.h_prev = h;
        s.h_next = reinterpret_cast<float*>(o.h.ptr);
        s.c = reinterpret_cast<float*>(o.c.ptr);
        s.rh = reinterpret_cast<float*>(o.rh.ptr);
        s.z = reinterpret_cast<float*>(o.z.ptr);
        s.y = reinterpret_cast<float*>(o.y.ptr);
        s.y_row_stride = Hp;
        s.row_begin = r0;
        s.row_end = r1;
        s.block_begin = 0;
        s.block_end = blocks;
        s.descending = descending;
        t.step[0][cell](s);
      };
      Out batch(4 * row_n);
      run(batch, 0, rows, false);
      for (const bool descending : {false, true}) {
        CAPTURE(descending);
        Out one(4 * row_n);
        run(one, 1, 2, descending);
        const std::size_t at = static_cast<std::size_t>(Hp) * 4, bytes = static_cast<std::size_t>(Hp) * 4;
        CHECK(std::memcmp(one.y.ptr + at, batch.y.ptr + at, 4 * static_cast<std::size_t>(H)) == 0);
        CHECK(std::memcmp(one.h.ptr + at, batch.h.ptr + at, bytes) == 0);
        CHECK(std::memcmp(one.c.ptr + at, batch.c.ptr + at, bytes) == 0);
        CHECK(std::memcmp(one.rh.ptr + at, batch.rh.ptr + at, bytes) == 0);
        CHECK(std::memcmp(one.z.ptr + at, batch.z.ptr + at, bytes) == 0);
      }
    }
  }
}

TEST_CASE("f32 kernels: f16 and bf16 weights read every 16-bit pattern exactly") {
  // The GEMM with K = 1 and the input 1 returns its panel's weights converted to f32: F16C on AVX2 /
  // AVX-512, integer operations on SSE2 and NEON (subnormals included). Against
  // src/shared/half.hpp's conversions, every pattern but NaNs (whose payloads the instructions may
  // quiet), a zero's sign (1 · −0 + 0 is +0) and bf16 subnormals where the arithmetic flushes them.
  int n = 0;
  const Kernel* k = registry(&n);
  for (int i = 0; i < n; ++i) {
    if (k[i].op != KernelOp::f32_rnn || !k[i].runs()) continue;
    const simd::F32Kernels& t = *k[i].table();
    CAPTURE(std::string(k[i].name()));
    const int V = t.vector, count = 1 << 16;
    for (const simd::Weights w : {simd::Weights::f16, simd::Weights::bf16}) {
      if (w == simd::Weights::bf16 && t.bf16_pairs) continue;  // its panels hold k pairs: the layer tests cover it
      CAPTURE(static_cast<int>(w));
      REQUIRE(static_cast<bool>(t.gemm[static_cast<int>(w)]));
      // Panel, biases and C as the kernels load and store them: aligned.
      rnncore_test::AlignedBuffer panel_bytes(sizeof(std::uint16_t) * count), bias_bytes(sizeof(float) * count),
          c_bytes(sizeof(float) * count);
      auto* panel = reinterpret_cast<std::uint16_t*>(panel_bytes.ptr);
      auto* bias = reinterpret_cast<float*>(bias_bytes.ptr);
      auto* c = reinterpret_cast<float*>(c_bytes.ptr);
      for (int b = 0; b < count; ++b) {
        panel[b] = static_cast<std::uint16_t>(b);
        bias[b] = 0.0f;
        c[b] = -7.0f;
      }
      std::vector<std::uint16_t> one16(2, 0);
      one16[0] = detail::f32_to_bf16(1.0f);
      std::vector<float> one(1, 1.0f);
      simd::GemmArgs g;
      g.a = one.data();
      g.a16 = one16.data();
      g.a16_stride = 2;
      g.k = 1;
      g.vectors = 1;
      g.panel = panel;
      g.bias = bias;
      g.c = c;
      g.c_row_stride = count;
      g.row_end = 1;
      g.block_end = count / V;
      t.gemm[static_cast<int>(w)](g);
      int wrong = 0;
      for (int b = 0; b < count; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float want = w == simd::Weights::f16 ? detail::f16_to_f32(bits) : detail::bf16_to_f32(bits);
        if (std::isnan(want)) {
          wrong += !std::isnan(c[b]);
          continue;
        }
        // a bf16 subnormal is an f32 subnormal: ARMv7's NEON arithmetic flushes it to zero
        if (std::fpclassify(want) == FP_SUBNORMAL && c[b] == 0.0f) continue;
        wrong += c[b] != want;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("int8 kernels: the list, and the choice within a cap") {
  int n = 0;
  const DotRowsKernel* k = int8_dot_kernels(&n);
  REQUIRE(n >= 1);
  CHECK(std::strcmp(k[0].name, "i8_dot_1x1__scalar") == 0);
  CHECK(k[0].isa == Isa::none);
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  // ARM's DSP extension (src/int8_dot_dsp.cpp) is built in and listed right after the scalar kernel.
  REQUIRE(n >= 2);
  CHECK(std::strcmp(k[1].name, "i8_dot_4x16__dsp") == 0);
#endif
  for (int i = 0; i < n; ++i) MESSAGE("int8 kernel " << i << ": " << std::string(k[i].name));
  // No cap: the last (fastest), unless RNNCORE_MAX_ISA caps it; cap none: no SIMD kernel (the
  // scalar one, or the DSP kernel where the build has it: a compile-time feature of the target).
  const char* env = std::getenv("RNNCORE_MAX_ISA");
  if (env == nullptr || *env == '\0') CHECK((int8_best_dot_kernel().fn == k[n - 1].fn));
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  CHECK(std::strcmp(int8_best_dot_kernel(Isa::none).name, "i8_dot_4x16__dsp") == 0);
#else
  CHECK((int8_best_dot_kernel(Isa::none).fn == &i8_dot_1x1__scalar));
#endif
  // A cap picks the fastest kernel within it: x86's ladder, or NEON's family (SDOT included).
  for (Isa cap : {Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon}) {
    const DotRowsKernel best = int8_best_dot_kernel(cap);
    const std::string cap_name = to_string(cap), best_name = best.name;
    CAPTURE(cap_name);
    CAPTURE(best_name);
    if (best.isa == Isa::none) continue;
    if (cap == Isa::neon) CHECK(best.isa == Isa::neon);
    else CHECK((best.isa != Isa::neon && static_cast<int>(best.isa) <= static_cast<int>(cap)));
  }
}

TEST_CASE("int8 kernels: every kernel equals the scalar one, bit for bit") {
  int nk = 0;
  const DotRowsKernel* kernels = int8_dot_kernels(&nk);
  std::mt19937 rng(20261124);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_int_distribution<std::int32_t> any32(std::numeric_limits<std::int32_t>::min(),
                                                    std::numeric_limits<std::int32_t>::max());
  std::vector<int> ks;
  for (int k = 1; k <= 40; ++k) ks.push_back(k);
  for (int k : {47, 48, 49, 63, 64, 65, 95, 127, 128, 129, 191, 255, 256, 257, 289, 299, 300, 383, 384, 385}) ks.push_back(k);
  constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  long compared = 0;
  for (int rows = 1; rows <= kUnitBlock + 1; ++rows) {  // the step calls with up to kUnitBlock rows
    for (int K : ks) {
      // Values: random; all −128 (the largest products, (−128)² each, a pair 2^15); all 127;
      // −128 against 127 (the most negative products); random against −128.
      for (int pattern = 0; pattern < 5; ++pattern) {
        // Offsets make w and v unaligned; each buffer ends where the kernel's reads must end, so
        // that AddressSanitizer sees any read past it.
        const int ow = (pattern + rows) % 4, ov = (pattern + K) % 3;
        std::vector<std::int8_t> wbuf(static_cast<std::size_t>(ow + rows * K)), vbuf(static_cast<std::size_t>(ov + K));
        std::int8_t* w = wbuf.data() + ow;
        std::int8_t* v = vbuf.data() + ov;
        for (int i = 0; i < rows * K; ++i)
          w[i] = static_cast<std::int8_t>(pattern == 0 || pattern == 4 ? byte(rng) : (pattern == 2 ? 127 : -128));
        for (int i = 0; i < K; ++i)
          v[i] = static_cast<std::int8_t>(pattern == 0 ? byte(rng) : (pattern == 1 || pattern == 4 ? -128 : 127));
        // Biases: random, and near both limits so that the sums wrap (either way).
        for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
          std::vector<std::int32_t> bias(static_cast<std::size_t>(rows));
          for (int j = 0; j < rows; ++j)
            bias[static_cast<std::size_t>(j)] = bias_kind == 0 ? any32(rng) : (bias_kind == 1 ? kMax - j : kMin + j);
          std::vector<std::int32_t> want(static_cast<std::size_t>(rows));
          i8_dot_1x1__scalar(w, rows, K, v, bias.data(), want.data());
          for (int ki = 0; ki < nk; ++ki) {
            // One guard word past the rows: a kernel writes exactly `rows` sums.
            std::vector<std::int32_t> got(static_cast<std::size_t>(rows) + 1, 0x5A5A5A5A);
            kernels[ki].fn(w, rows, K, v, bias.data(), got.data());
            checked(kernels[ki].name);
            ++compared;
            const bool same = std::equal(want.begin(), want.end(), got.begin()) && got[static_cast<std::size_t>(rows)] == 0x5A5A5A5A;
            if (!same) {
              FAIL_CHECK(kernels[ki].name << " differs: rows " << rows << ", K " << K << ", pattern " << pattern
                                          << ", bias kind " << bias_kind);
            }
          }
        }
      }
    }
  }
  MESSAGE(compared << " kernel calls compared with the scalar kernel (" << nk << " kernels)");
  // The extremes above do wrap: 300 products (−128)² onto INT32_MAX pass the limit.
  std::vector<std::int8_t> w(300, -128), v(300, -128);
  const std::int32_t b = kMax;
  std::int32_t out = 0;
  i8_dot_1x1__scalar(w.data(), 1, 300, v.data(), &b, &out);
  CHECK(out == static_cast<std::int32_t>(static_cast<std::uint32_t>(kMax) + 300u * 16384u));
  CHECK(out < 0);
}

#if !defined(RNNCORE_NO_HEAP)
namespace {

// What the step's scalar code computes for one gate sum (multiply_by_quantized_multiplier), and
// whether adding a saturated int16 to it stays within int32: the scalar code (as TFLite) adds
// them in int32, so inputs beyond that are not fed to it.
bool sum_fits(std::int32_t a, QuantizedMultiplier m, std::int64_t addend) {
  const std::int64_t v = multiply_by_quantized_multiplier(a, m) + addend;
  return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max();
}

// A multiplier as int8_lstm_prepare makes them: M in [2^30, 2^31), the shift mostly right.
QuantizedMultiplier random_multiplier(std::mt19937& rng, int shift_low, int shift_high) {
  std::uniform_int_distribution<std::int32_t> m(1 << 30, std::numeric_limits<std::int32_t>::max());
  std::uniform_int_distribution<int> shift(shift_low, shift_high);
  const std::int32_t pick = std::uniform_int_distribution<int>(0, 9)(rng);
  return {pick == 0 ? (1 << 30) : (pick == 1 ? std::numeric_limits<std::int32_t>::max() : m(rng)), shift(rng)};
}

// An int32 sum: random, small, or one of the extremes.
std::int32_t random_sum(std::mt19937& rng) {
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0: return std::uniform_int_distribution<std::int32_t>(kMin, kMax)(rng);
    case 1: return std::uniform_int_distribution<std::int32_t>(-(1 << 20), 1 << 20)(rng);
    case 2: return std::uniform_int_distribution<int>(0, 1)(rng) ? kMin : kMax;
    case 3: return std::uniform_int_distribution<std::int32_t>(-4, 4)(rng);
    default: return std::uniform_int_distribution<std::int32_t>(-(1 << 26), 1 << 26)(rng);
  }
}

// A gate activation: a sigmoid's (0 .. 32767: the Thumb-2 cell loop's products rely on i and f
// not being negative) or, for g, any int16; extremes often. A cell state: any int16.
std::int16_t random_i16(std::mt19937& rng, bool sigmoid) {
  const int pick = std::uniform_int_distribution<int>(0, 7)(rng);
  if (pick == 0) return sigmoid ? std::int16_t{0} : std::int16_t{-32768};
  if (pick == 1) return std::int16_t{32767};
  if (sigmoid) return static_cast<std::int16_t>(std::uniform_int_distribution<int>(0, 32767)(rng));
  return static_cast<std::int16_t>(std::uniform_int_distribution<int>(-32768, 32767)(rng));
}

// The kernels of `op` this CPU runs, without the op's reference (its scalar kernel).
std::vector<const Kernel*> kernels_of(KernelOp op) {
  int n = 0;
  const Kernel* k = detail::kernel_registry(op, &n);
  std::vector<const Kernel*> v;
  for (int i = 0; i < n; ++i)
    if (k[i].runs() && std::strcmp(k[i].family, "scalar") != 0) v.push_back(&k[i]);
  return v;
}

// The units a step kernel takes together: the number its name carries between the op and the ISA
// (i32_gate_act_8__avx2: 8, i16_output_2__thumb2: 2).
int tile_of(const Kernel& k) {
  const std::string name = k.name();
  const std::size_t end = name.find("__");
  const std::size_t begin = name.rfind('_', end - 1) + 1;
  return std::atoi(name.substr(begin, end - begin).c_str());
}

// What a step kernel returned for n units: all but the last n mod tile (a SIMD kernel always; a
// Thumb-2 one where its loop serves the arguments), or none (a Thumb-2 one that does not serve
// them). `took` counts the calls where it did units, so that one that never does fails.
void check_done(const Kernel& k, int n, int done, std::map<std::string, int>& took) {
  const int tile = tile_of(k);
  REQUIRE(tile >= 1);
  CHECK((done == n - n % tile || (done == 0 && k.isa == Isa::none)));
  if (done > 0) ++took[k.name()];
}

}  // namespace

TEST_CASE("int8 step kernels: every step kernel equals the reference, bit for bit") {
  int nk = 0;
  const StepKernels* pairs = int8_step_kernels(&nk);
  for (int i = 0; i < nk; ++i)
    MESSAGE("int8 step kernels " << i << ": " << std::string(pairs[i].gate_name) << ", " << std::string(pairs[i].cell_name));
  // The choice: the last kernels within the cap; none (the step's inline code) under Isa::none.
  CHECK(int8_best_step_kernels(Isa::none) == nullptr);
  const char* env = std::getenv("RNNCORE_MAX_ISA");
  if (nk > 0 && (env == nullptr || *env == '\0')) CHECK(int8_best_step_kernels() == &pairs[nk - 1]);
  const std::vector<const Kernel*> gate_kernels = kernels_of(KernelOp::i32_gate_act);
  const std::vector<const Kernel*> cell_kernels = kernels_of(KernelOp::i16_cell_update);
  std::map<std::string, int> took;
  std::mt19937 rng(20261127);
  long gate_calls = 0, cell_calls = 0;
  constexpr std::int16_t kGuard16 = 0x5A5A;
  constexpr std::int8_t kGuard8 = 0x5A;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial < 80 ? 1 + trial % 40 : std::uniform_int_distribution<int>(1, 100)(rng);
    CAPTURE(n);
    CAPTURE(trial);
    // ---- a gate: per tensor (right shifts as in every model seen, or left / no shift) or per unit
    const int kind = trial % 4;
    const int shift_high = kind == 1 ? 3 : -1;
    GateScaling s{random_multiplier(rng, -24, shift_high), random_multiplier(rng, -24, shift_high)};
    std::vector<std::int32_t> x_rows(2 * static_cast<std::size_t>(n)), h_rows(x_rows.size());
    if (kind == 3) {
      for (int u = 0; u < n; ++u) {
        const QuantizedMultiplier mx = random_multiplier(rng, -24, 2), mh = random_multiplier(rng, -24, 2);
        x_rows[2 * u] = mx.multiplier;
        x_rows[2 * u + 1] = mx.shift;
        h_rows[2 * u] = mh.multiplier;
        h_rows[2 * u + 1] = mh.shift;
      }
      s.x_rows = x_rows.data();
      s.h_rows = h_rows.data();
    }
    std::vector<std::int32_t> ax(static_cast<std::size_t>(n)), ah(ax.size());
    for (int u = 0; u < n; ++u) {
      const auto mult = [&](const std::int32_t* rows, QuantizedMultiplier m) {
        return rows != nullptr ? QuantizedMultiplier{rows[2 * u], rows[2 * u + 1]} : m;
      };
      ax[u] = random_sum(rng);
      ah[u] = random_sum(rng);
      if (!sum_fits(ah[u], mult(s.h_rows, s.h), 32768)) ah[u] = 0;
      if (!sum_fits(ah[u], mult(s.h_rows, s.h), -32768)) ah[u] = 0;
    }
    const bool tanh = trial % 3 == 0;
    const std::int16_t* centre = int8_gate_table_centre(tanh);
    std::vector<std::int16_t> want(static_cast<std::size_t>(n));
    REQUIRE(i32_gate_act_1x1__scalar(n, ax.data(), ah.data(), s, centre, want.data()) == n);
    checked("i32_gate_act_1x1__scalar");  // the reference (the step's C loops)
    for (const Kernel* k : gate_kernels) {
      CAPTURE(std::string(k->name()));
      std::vector<std::int16_t> got(static_cast<std::size_t>(n) + 1, kGuard16);
      const int done = k->gate(n, ax.data(), ah.data(), s, centre, got.data());
      ++gate_calls;
      check_done(*k, n, done, took);
      for (int u = 0; u < done; ++u) {
        if (got[u] != want[u]) {
          FAIL_CHECK("unit " << u << ": " << got[u] << " vs " << want[u] << " (ax " << ax[u] << ", ah " << ah[u] << ")");
          break;
        }
      }
      for (int u = done; u <= n; ++u) CHECK(got[u] == kGuard16);
    }
    // ---- a cell update: every cell scale, with and without a clip, outputs shifted either way
    CellUpdate cu{};
    cu.cell_log2 = -30 + trial % 22;
    cu.cell_clip = trial % 5 == 0 ? static_cast<std::int16_t>(std::uniform_int_distribution<int>(1, 32767)(rng)) : 0;
    // (no left shift: the scalar code adds the zero point in int32, which o · t = 2^30 shifted left
    // could overflow; a real output scale would have to be below 2^-31 for one)
    cu.hidden_mult = random_multiplier(rng, -31, trial % 7 == 0 ? 0 : -1);
    cu.hidden_zp = std::uniform_int_distribution<int>(-128, 127)(rng);
    cu.tanh_centre = int8_cell_tanh_centre(15 + cu.cell_log2);
    CAPTURE(cu.cell_log2);
    std::vector<std::int16_t> gi(static_cast<std::size_t>(n)), gf(gi.size()), gg(gi.size()), go(gi.size()), c0(gi.size());
    for (int u = 0; u < n; ++u) {
      gi[u] = random_i16(rng, true);
      gf[u] = random_i16(rng, true);
      gg[u] = random_i16(rng, false);
      go[u] = random_i16(rng, true);
      c0[u] = random_i16(rng, false);
    }
    const BlockGates gates{gi.data(), gf.data(), gg.data(), go.data()};
    std::vector<std::int16_t> want_c = c0;
    std::vector<std::int8_t> want_h(static_cast<std::size_t>(n));
    REQUIRE(i16_cell_update_1x1__scalar(n, cu, gates, want_c.data(), want_h.data()) == n);
    checked("i16_cell_update_1x1__scalar");  // the reference (the step's C loops)
    for (const Kernel* k : cell_kernels) {
      CAPTURE(std::string(k->name()));
      std::vector<std::int16_t> got_c = c0;
      got_c.push_back(kGuard16);
      std::vector<std::int8_t> got_h(static_cast<std::size_t>(n) + 1, kGuard8);
      const int done = k->cell(n, cu, gates, got_c.data(), got_h.data());
      ++cell_calls;
      check_done(*k, n, done, took);
      for (int u = 0; u < done; ++u) {
        if (got_c[u] != want_c[u] || got_h[u] != want_h[u]) {
          FAIL_CHECK("unit " << u << ": c " << got_c[u] << " vs " << want_c[u] << ", h " << int(got_h[u]) << " vs "
                             << int(want_h[u]) << " (i " << gi[u] << ", f " << gf[u] << ", g " << gg[u] << ", o " << go[u]
                             << ", c " << c0[u] << ")");
          break;
        }
      }
      for (int u = done; u < n; ++u) CHECK(got_c[u] == c0[u]);
      CHECK(got_c[static_cast<std::size_t>(n)] == kGuard16);
      for (int u = done; u <= n; ++u) CHECK(got_h[u] == kGuard8);
    }
  }
  for (const auto* list : {&gate_kernels, &cell_kernels}) {
    for (const Kernel* k : *list) {
      CAPTURE(std::string(k->name()));
      CHECK(took[k->name()] > 0);  // it did units, which were compared
      if (took[k->name()] > 0) checked(k->name());
    }
  }
  MESSAGE(gate_calls << " gate and " << cell_calls << " cell kernel calls compared with the reference");
}

TEST_CASE("int8 output kernels: every output kernel equals the reference, bit for bit") {
  const std::vector<const Kernel*> kernels = kernels_of(KernelOp::i16_output);
  std::map<std::string, int> took;
  std::mt19937 rng(20261128);
  constexpr std::int8_t kGuard8 = 0x5A;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial < 80 ? 1 + trial % 40 : std::uniform_int_distribution<int>(1, 100)(rng);
    CAPTURE(n);
    CAPTURE(trial);
    // shifts as a cell update's (see there: no left shift), extremes of o and tanh(c) often
    const QuantizedMultiplier m = random_multiplier(rng, -31, trial % 7 == 0 ? 0 : -1);
    const std::int32_t zp = std::uniform_int_distribution<int>(-128, 127)(rng);
    std::vector<std::int16_t> o(static_cast<std::size_t>(n)), t(o.size());
    for (int u = 0; u < n; ++u) {
      o[u] = random_i16(rng, true);
      t[u] = random_i16(rng, false);
    }
    std::vector<std::int8_t> want(static_cast<std::size_t>(n));
    REQUIRE(i16_output_1x1__scalar(n, m, zp, o.data(), t.data(), want.data()) == n);
    checked("i16_output_1x1__scalar");
    for (const Kernel* k : kernels) {
      CAPTURE(std::string(k->name()));
      std::vector<std::int8_t> got(static_cast<std::size_t>(n) + 1, kGuard8);
      const int done = k->output(n, m, zp, o.data(), t.data(), got.data());
      check_done(*k, n, done, took);
      for (int u = 0; u < done; ++u) {
        if (got[u] != want[u]) {
          FAIL_CHECK("unit " << u << ": " << int(got[u]) << " vs " << int(want[u]) << " (o " << o[u] << ", tanh " << t[u] << ")");
          break;
        }
      }
      for (int u = done; u <= n; ++u) CHECK(got[u] == kGuard8);
    }
  }
  for (const Kernel* k : kernels) {
    CAPTURE(std::string(k->name()));
    CHECK(took[k->name()] > 0);
    if (took[k->name()] > 0) checked(k->name());
  }
}
#endif

// The two panel layouts (src/internal/int8_kernels.hpp) and their kernels, for the comparisons
// below: interleaved int8 (an odd row's −128 beside a negative weight has no form there, so those
// tests draw −127 instead) and int16 panels (every weight).
struct PanelLayout {
  const DotPanelsKernel* (*kernels)(int* n);
  std::size_t (*bytes)(int rows, int K);
  void (*pack)(const std::int8_t* w, int rows, int K, std::int8_t* out);
  bool odd_rows_above_minus128;
};
const PanelLayout kInterleaved{int8_panel_kernels, [](int rows, int K) { return interleaved4_bytes(rows, K); },
                               [](const std::int8_t* w, int rows, int K, std::int8_t* out) {
                                 REQUIRE(interleave4(w, rows, K, out));
                               },
                               true};
const PanelLayout kPanelsI16{int16_panel_kernels, [](int rows, int K) { return interleaved4_i16_bytes(rows, K); },
                             interleave4_i16, false};

// Every kernel of `layout` against the row-major scalar kernel on one product of rows × K: weights
// and vector random (pattern 0) or at the extremes (−128 weights against −128 (1) and 127 (2)).
// Returns the calls compared.
long compare_panel_product(const PanelLayout& layout, int rows, int K, int pattern, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_int_distribution<std::int32_t> any32(std::numeric_limits<std::int32_t>::min(),
                                                    std::numeric_limits<std::int32_t>::max());
  std::vector<std::int8_t> w(static_cast<std::size_t>(rows * K)), v(static_cast<std::size_t>(K));
  for (std::size_t i = 0; i < w.size(); ++i) {
    const bool odd_row = (i / static_cast<std::size_t>(K)) % 2 == 1;
    const int x = pattern == 0 ? byte(rng) : -128;
    w[i] = static_cast<std::int8_t>(layout.odd_rows_above_minus128 && odd_row && x == -128 ? -127 : x);
  }
  for (std::int8_t& x : v) x = static_cast<std::int8_t>(pattern == 0 ? byte(rng) : (pattern == 1 ? -128 : 127));
  std::vector<std::int32_t> bias(static_cast<std::size_t>(rows));
  for (int j = 0; j < rows; ++j) bias[static_cast<std::size_t>(j)] = pattern == 0 ? any32(rng) : std::numeric_limits<std::int32_t>::max() - j;
  std::vector<std::int32_t> want(static_cast<std::size_t>(rows));
  i8_dot_1x1__scalar(w.data(), rows, K, v.data(), bias.data(), want.data());
  // Exactly sized buffers: AddressSanitizer sees a read past the layout or the widened vector.
  std::vector<std::int8_t> packed(layout.bytes(rows, K));
  layout.pack(w.data(), rows, K, packed.data());
  const int k_words = interleaved4_words(K);
  std::vector<std::int16_t> pairs(static_cast<std::size_t>(4 * k_words));
  widen_pairs(v.data(), K, pairs.data());
  int np = 0;
  const DotPanelsKernel* panels = layout.kernels(&np);
  for (int ki = 0; ki < np; ++ki) {
    std::vector<std::int32_t> got(static_cast<std::size_t>(rows) + 1, 0x5A5A5A5A);
    const PanelProduct product{packed.data(), pairs.data(), bias.data(), got.data(), rows, k_words};
    panels[ki].fn(&product, 1);
    checked(panels[ki].name);
    if (!std::equal(want.begin(), want.end(), got.begin()) || got[static_cast<std::size_t>(rows)] != 0x5A5A5A5A)
      FAIL_CHECK(panels[ki].name << " differs: rows " << rows << ", K " << K << ", pattern " << pattern);
  }
  return np;
}

// Every kernel of `layout` on a list of products in one call: shapes the DSP kernels take whole
// (every loop entry: K mod 16 = 0, 4, 8, 12 columns, one and several panels) and ones they do not
// (rows not a multiple of 4, more than 512 columns, no rows), in an order that mixes them, each
// product with its own weights, vector and biases.
void compare_panel_list(const PanelLayout& layout, std::mt19937& rng) {
  const int shapes[][2] = {{4, 16}, {8, 36}, {16, 8}, {4, 1}, {5, 20}, {12, 44}, {8, 600}, {0, 8}, {4, 64}, {7, 3}, {32, 32}};
  constexpr int kCount = static_cast<int>(sizeof shapes / sizeof shapes[0]);
  std::uniform_int_distribution<int> weight(layout.odd_rows_above_minus128 ? -127 : -128, 127), byte(-128, 127);
  std::uniform_int_distribution<std::int32_t> any32(std::numeric_limits<std::int32_t>::min(),
                                                    std::numeric_limits<std::int32_t>::max());
  std::vector<std::vector<std::int8_t>> packed(kCount);
  std::vector<std::vector<std::int16_t>> pairs(kCount);
  std::vector<std::vector<std::int32_t>> bias(kCount), want(kCount), got(kCount);
  std::vector<PanelProduct> products(kCount);
  for (int i = 0; i < kCount; ++i) {
    const int rows = shapes[i][0], K = shapes[i][1];
    std::vector<std::int8_t> w(static_cast<std::size_t>(rows * K)), v(static_cast<std::size_t>(K));
    for (std::int8_t& x : w) x = static_cast<std::int8_t>(weight(rng));
    for (std::int8_t& x : v) x = static_cast<std::int8_t>(byte(rng));
    bias[i].resize(static_cast<std::size_t>(rows));
    for (std::int32_t& b : bias[i]) b = any32(rng);
    want[i].resize(static_cast<std::size_t>(rows));
    i8_dot_1x1__scalar(w.data(), rows, K, v.data(), bias[i].data(), want[i].data());
    packed[i].resize(layout.bytes(rows, K));
    layout.pack(w.data(), rows, K, packed[i].data());
    pairs[i].resize(static_cast<std::size_t>(4 * interleaved4_words(K)));
    widen_pairs(v.data(), K, pairs[i].data());
  }
  int np = 0;
  const DotPanelsKernel* panels = layout.kernels(&np);
  for (int ki = 0; ki < np; ++ki) {
    CAPTURE(panels[ki].name);
    for (int i = 0; i < kCount; ++i) {
      got[i].assign(static_cast<std::size_t>(shapes[i][0]) + 1, 0x5A5A5A5A);
      products[i] = PanelProduct{packed[i].data(), pairs[i].data(), bias[i].data(), got[i].data(), shapes[i][0],
                                 interleaved4_words(shapes[i][1])};
    }
    panels[ki].fn(products.data(), kCount);
    for (int i = 0; i < kCount; ++i) {
      CAPTURE(i);
      CHECK(std::equal(want[i].begin(), want[i].end(), got[i].begin()));
      CHECK(got[i].back() == 0x5A5A5A5A);  // nothing written past the product's rows
    }
  }
}

TEST_CASE("int8 kernels: the interleaved layout's kernels equal the row-major scalar one, bit for bit") {
  int np = 0;
  const DotPanelsKernel* panels = int8_panel_kernels(&np);
  REQUIRE(np >= 1);
  CHECK(std::string(panels[0].name) == "i8_dot_panels_1x1__scalar");
  // The layout itself: rows paired in each word's halves, element (j, k) at interleaved4_offset;
  // a word holds columns c and c + 2 (the order SXTB16 widens the vector in).
  {
    std::vector<std::int8_t> w(5 * 7);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(i + 1);
    std::vector<std::int8_t> out(interleaved4_bytes(5, 7), 0x55);
    REQUIRE(out.size() == 8 * 8);
    REQUIRE(interleave4(w.data(), 5, 7, out.data()));
    CHECK(std::vector<std::int8_t>(out.begin(), out.begin() + 12) ==
          std::vector<std::int8_t>{1, 8, 3, 10, 15, 22, 17, 24, 2, 9, 4, 11});  // rows 0..3, columns 0..3
    CHECK(out[16] == 5);   // row 0, column 4 (the panel's second group of columns)
    CHECK(out[17] == 12);  // row 1, column 4
    CHECK(out[26] == 0);   // row 0, column 7: padding
    CHECK(out[32] == 29);  // row 4, column 0 (the second panel)
    CHECK(out[33] == 0);   // row 5: padding
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 7; ++k) CHECK(interleaved4_weight(out.data(), j, k, 2) == w[static_cast<std::size_t>(j * 7 + k)]);
    // An odd row's byte is corrected where its even row's is negative: the half is 256·odd + even.
    const std::int8_t neg[4] = {-3, 5, 7, -128};
    std::vector<std::int8_t> two(16, 0x55);
    REQUIRE(interleave4(neg, 2, 2, two.data()));
    CHECK(std::vector<std::int8_t>{two[0], two[1], two[8], two[9]} == std::vector<std::int8_t>{-3, 6, 5, -128});
    CHECK(static_cast<std::int16_t>((two[1] << 8) | (two[0] & 0xFF)) == 256 * 7 - 3);
    for (int k = 0; k < 2; ++k) CHECK(interleaved4_weight(two.data(), 1, k, 1) == neg[2 + k]);
    const std::int8_t pad[1] = {-3};  // the padding row beside a negative weight decodes as 0
    REQUIRE(interleave4(pad, 1, 1, two.data()));
    CHECK(interleaved4_weight(two.data(), 1, 0, 1) == 0);
    // −128 in an odd row beside a negative weight has no such half.
    const std::int8_t bad[4] = {5, -3, 0, -128};
    int bad_row = -1, bad_column = -1;
    CHECK_FALSE(interleave4(bad, 2, 2, two.data(), &bad_row, &bad_column));
    CHECK(bad_row == 1);
    CHECK(bad_column == 1);
    std::vector<std::int16_t> pairs(8, 0x5555);
    const std::int8_t v[7] = {1, 2, 3, 4, 5, 6, 7};
    widen_pairs(v, 7, pairs.data());
    CHECK(pairs == std::vector<std::int16_t>{1, 3, 2, 4, 5, 7, 6, 0});
  }
  std::mt19937 rng(20261125);
  long compared = 0;
  for (int rows = 1; rows <= kUnitBlock + 1; ++rows) {
    // Up to 512 columns the DSP kernel takes a panel in one piece; beyond, in pieces of 512.
    for (int K : {1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 17, 20, 31, 32, 33, 48, 63, 64, 65, 100, 128, 129, 255, 256, 300, 512,
                  513, 1100}) {
      if (K > 300 && rows % 4 != 1) continue;
      // random; the extremes −128 (−127 in odd rows) against −128 and 127
      for (int pattern = 0; pattern < 3; ++pattern) compared += compare_panel_product(kInterleaved, rows, K, pattern, rng);
    }
  }
  MESSAGE(compared << " interleaved kernel calls compared with the row-major scalar kernel (" << np << " kernels)");
}

TEST_CASE("int8 kernels: an interleaved kernel takes a list of products in one call") {
  std::mt19937 rng(20261125);
  compare_panel_list(kInterleaved, rng);
}

TEST_CASE("int8 kernels: the int16 panel layout's kernels equal the row-major scalar one, bit for bit") {
  int np = 0;
  const DotPanelsKernel* panels = int16_panel_kernels(&np);
  REQUIRE(np >= 1);
  CHECK(std::string(panels[0].name) == "i16_dot_panels_1x1__scalar");
  {  // the layout: per group of 4 columns, rows A..D at columns (c, c + 2), then at (c + 1, c + 3)
    std::vector<std::int8_t> w(5 * 7);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(i % 2 == 0 ? i + 1 : -128);
    std::vector<std::int8_t> out(interleaved4_i16_bytes(5, 7), 0x55);
    REQUIRE(out.size() == 2 * 8 * 8);
    interleave4_i16(w.data(), 5, 7, out.data());
    std::vector<std::int16_t> h(out.size() / 2);
    std::memcpy(h.data(), out.data(), out.size());
    CHECK(std::vector<std::int16_t>(h.begin(), h.begin() + 16) ==
          std::vector<std::int16_t>{1, 3, -128, -128, 15, 17, -128, -128, -128, -128, 9, 11, -128, -128, 23, 25});
    CHECK(h[16] == 5);    // row 0, column 4
    CHECK(h[27] == 0);    // row 1, column 7: padding
    CHECK(h[32] == 29);   // row 4, column 0 (the second panel: 16 int16 a group of columns)
    CHECK(h[34] == 0);    // row 5: padding
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 7; ++k) CHECK(interleaved4_i16_weight(out.data(), j, k, 2) == w[static_cast<std::size_t>(j * 7 + k)]);
  }
  std::mt19937 rng(20261129);
  long compared = 0;
  for (int rows = 1; rows <= kUnitBlock + 1; ++rows) {
    for (int K : {1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 17, 20, 31, 32, 33, 48, 63, 64, 65, 100, 128, 129, 256, 300, 513, 1100}) {
      if (K > 300 && rows % 4 != 1) continue;
      // random; −128 weights against −128 and 127
      for (int pattern = 0; pattern < 3; ++pattern) compared += compare_panel_product(kPanelsI16, rows, K, pattern, rng);
    }
  }
  MESSAGE(compared << " int16 panel kernel calls compared with the row-major scalar kernel");
  compare_panel_list(kPanelsI16, rng);  // a list of products in one call
}

// ---- the registry itself ----
TEST_CASE("the registry: names are <dtype>_<op>_<tile>__<isa>, and the one choice keeps within a cap") {
  int n = 0;
  const Kernel* k = registry(&n);
  REQUIRE(n >= 2);  // at least the scalar int8 kernels of both layouts
  for (int i = 0; i < n; ++i) {
    const std::string name = k[i].name(), op = detail::to_string(k[i].op);
    CAPTURE(name);
    MESSAGE("kernel " << name << std::string(k[i].runs() ? "" : " (this CPU lacks it)"));
    // f32 tables are named after their LSTM step kernel (f32_rnn_6x2__avx2); the rest after their op.
    CHECK(name.rfind(op + "_", 0) == 0);
    const std::size_t sep = name.find("__");
    REQUIRE(sep != std::string::npos);
    CHECK(name.substr(sep + 2) == k[i].family);
    CHECK((k[i].op == KernelOp::f32_rnn) == (k[i].table() != nullptr));  // f32 entries are tables
    CHECK(sep > op.size() + 1);  // a tile between the op and the ISA
    if (k[i].isa == Isa::none) CHECK(k[i].runs());
    if (i > 0) CHECK(static_cast<int>(k[i - 1].op) <= static_cast<int>(k[i].op));  // grouped by op
  }
  for (int op = 0; op < detail::kKernelOpCount; ++op) {
    for (Isa cap : {Isa::none, Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon, Isa::best}) {
      const Kernel* s = detail::select_kernel(static_cast<KernelOp>(op), cap);
      if (s == nullptr) continue;
      CAPTURE(std::string(s->name()));
      CHECK(static_cast<int>(s->op) == op);
      CHECK(s->runs());
      CHECK(detail::isa_within_cap(s->isa, cap));
    }
  }
}

// ---- --bench: each kernel against its reference ----
namespace {

// The thread's CPU time where POSIX has it: on a shared machine the time the thread waits for a
// core is left out. Elsewhere wall time.
double seconds_now() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

double time_calls(const std::function<void()>& f, int calls) {
  const double t0 = seconds_now();
  for (int i = 0; i < calls; ++i) f();
  return (seconds_now() - t0) / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median time of a kernel and of its reference, their repetitions alternating (so that a
// change of clock or load falls on both), each repetition long enough (~2 ms) to time.
void bench_pair(const std::string& what, const char* name, const char* ref_name, const std::function<void()>& kernel,
                const std::function<void()>& ref, int reps) {
  int calls = 1;
  while (calls < (1 << 24) && time_calls(ref, calls) * calls < 2e-3) calls *= 2;
  std::vector<double> tk, tr;
  for (int r = 0; r < reps; ++r) {
    tr.push_back(time_calls(ref, calls));
    tk.push_back(time_calls(kernel, calls));
  }
  const double mk = median(tk), mr = median(tr);
  std::printf("%-30s %-16s %12.1f ns   %-28s %12.1f ns   x%.2f\n", name, what.c_str(), 1e9 * mk, ref_name, 1e9 * mr, mr / mk);
}

void naive_matmul(const simd::MatmulArgs& m) {
  for (int r = m.row_begin; r < m.row_end; ++r)
    for (int j = 0; j < m.n; ++j) {
      float s = m.accumulate ? m.c[r * m.ldc + j] : 0.0f;
      for (int q = 0; q < m.k; ++q) s += m.a[r * m.a_m + q * m.a_k] * m.b[q * m.ldb + j];
      m.c[r * m.ldc + j] = s;
    }
}

void bench_f32(const Kernel& k, int reps, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int M = 32, N = 256, K = 256;
  std::vector<float> a(M * K), b(K * N), c(M * N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  simd::MatmulArgs m;
  m.a = a.data(), m.a_m = K, m.a_k = 1, m.b = b.data(), m.ldb = N, m.c = c.data(), m.ldc = N, m.n = N, m.k = K, m.row_end = M;
  bench_pair("matmul 32x256x256", k.name(), "naive f32 loops", [&] { k.table()->matmul(m); }, [&] { naive_matmul(m); }, reps);
  std::vector<float> x(1024), e(x.size()), s(x.size()), t(x.size());
  for (float& v : x) v = 10.0f * u(rng);
  bench_pair("math n=1024", k.name(), "std::exp, std::tanh",
             [&] { k.table()->math(x.data(), e.data(), s.data(), t.data(), 1024); },
             [&] {
               for (int i = 0; i < 1024; ++i) {
                 e[i] = std::exp(x[i]);
                 s[i] = 1.0f / (1.0f + std::exp(-x[i]));
                 t[i] = std::tanh(x[i]);
               }
             },
             reps);
}

void bench_dot(const Kernel& k, int reps, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(-127, 127);
  for (const int K : {64, 256, 1024}) {
    const int rows = kUnitBlock;
    std::vector<std::int8_t> w(static_cast<std::size_t>(rows * K)), v(static_cast<std::size_t>(K));
    for (std::int8_t& x : w) x = static_cast<std::int8_t>(byte(rng));
    for (std::int8_t& x : v) x = static_cast<std::int8_t>(byte(rng));
    std::vector<std::int32_t> bias(rows, 7), out(rows);
    const std::string what = std::to_string(rows) + " rows, K " + std::to_string(K);
    if (k.op == KernelOp::i8_dot) {
      bench_pair(what, k.name(), "i8_dot_1x1__scalar", [&] { k.dot(w.data(), rows, K, v.data(), bias.data(), out.data()); },
                 [&] { i8_dot_1x1__scalar(w.data(), rows, K, v.data(), bias.data(), out.data()); }, reps);
      continue;
    }
    const bool i16 = k.op == KernelOp::i16_dot_panels;
    std::vector<std::int8_t> packed(i16 ? interleaved4_i16_bytes(rows, K) : interleaved4_bytes(rows, K));
    i16 ? interleave4_i16(w.data(), rows, K, packed.data()) : static_cast<void>(interleave4(w.data(), rows, K, packed.data()));
    std::vector<std::int16_t> pairs(static_cast<std::size_t>(4 * interleaved4_words(K)));
    widen_pairs(v.data(), K, pairs.data());
    const PanelProduct p{packed.data(), pairs.data(), bias.data(), out.data(), rows, interleaved4_words(K)};
    const DotPanelsFn reference = i16 ? i16_dot_panels_1x1__scalar : i8_dot_panels_1x1__scalar;
    bench_pair(what, k.name(), i16 ? "i16_dot_panels_1x1__scalar" : "i8_dot_panels_1x1__scalar",
               [&] { k.dot_panels(&p, 1); }, [&] { reference(&p, 1); }, reps);
  }
}

#if !defined(RNNCORE_NO_HEAP)
void bench_step(const Kernel& k, int reps, std::mt19937& rng) {
  const int n = kUnitBlock;
  std::uniform_int_distribution<std::int32_t> sum(-(1 << 22), 1 << 22);
  std::uniform_int_distribution<int> sig(0, 32767), any16(-32768, 32767);
  if (k.op == KernelOp::i32_gate_act) {
    std::vector<std::int32_t> ax(n), ah(n);
    for (int u = 0; u < n; ++u) ax[u] = sum(rng), ah[u] = sum(rng);
    const GateScaling s{{1518500250, -12}, {1518500250, -13}};
    const std::int16_t* centre = int8_gate_table_centre(false);
    std::vector<std::int16_t> act(n);
    bench_pair(std::to_string(n) + " units", k.name(), "i32_gate_act_1x1__scalar",
               [&] { k.gate(n, ax.data(), ah.data(), s, centre, act.data()); },
               [&] { i32_gate_act_1x1__scalar(n, ax.data(), ah.data(), s, centre, act.data()); }, reps);
    return;
  }
  if (k.op == KernelOp::i16_output) {
    std::vector<std::int16_t> o(n), t(n);
    for (int u = 0; u < n; ++u) o[u] = sig(rng), t[u] = any16(rng);
    const QuantizedMultiplier m{1518500250, -8};
    std::vector<std::int8_t> h(n);
    bench_pair(std::to_string(n) + " units", k.name(), "i16_output_1x1__scalar",
               [&] { k.output(n, m, 3, o.data(), t.data(), h.data()); },
               [&] { i16_output_1x1__scalar(n, m, 3, o.data(), t.data(), h.data()); }, reps);
    return;
  }
  std::vector<std::int16_t> gi(n), gf(n), gg(n), go(n), c(n);
  for (int u = 0; u < n; ++u) gi[u] = sig(rng), gf[u] = sig(rng), gg[u] = any16(rng), go[u] = sig(rng), c[u] = any16(rng);
  CellUpdate cu{};
  cu.cell_log2 = -11;
  cu.hidden_mult = {1518500250, -8};
  cu.tanh_centre = int8_cell_tanh_centre(15 + cu.cell_log2);
  const BlockGates gates{gi.data(), gf.data(), gg.data(), go.data()};
  std::vector<std::int8_t> h(n);
  bench_pair(std::to_string(n) + " units", k.name(), "i16_cell_update_1x1__scalar",
             [&] { k.cell(n, cu, gates, c.data(), h.data()); },
             [&] { i16_cell_update_1x1__scalar(n, cu, gates, c.data(), h.data()); }, reps);
}
#endif

int bench(int reps) {
  std::printf("checkkernels --bench: median of %d alternating repetitions (kernel, then reference); x = reference / kernel\n",
              reps);
  std::mt19937 rng(1);
  int n = 0;
  const Kernel* k = registry(&n);
  for (int i = 0; i < n; ++i) {
    if (!k[i].runs() || std::strcmp(k[i].family, "scalar") == 0) continue;  // not the references themselves
    switch (k[i].op) {
      case KernelOp::f32_rnn: bench_f32(k[i], reps, rng); break;
      case KernelOp::i8_dot:
      case KernelOp::i8_dot_panels:
      case KernelOp::i16_dot_panels: bench_dot(k[i], reps, rng); break;
      case KernelOp::i32_gate_act:
      case KernelOp::i16_cell_update:
      case KernelOp::i16_output:
#if !defined(RNNCORE_NO_HEAP)
        bench_step(k[i], reps, rng);
#endif
        break;
    }
  }
  return 0;
}

// After a full run: every kernel this CPU runs was checked, and every instruction set that the
// build targets and this CPU has had kernels checked. Returns the number of failures.
int coverage() {
  int failures = 0, n = 0, runs = 0;
  const Kernel* k = registry(&n);
  for (int i = 0; i < n; ++i) {
    if (!k[i].runs()) continue;
    ++runs;
    if (checked_names().count(k[i].name()) == 0) {
      std::printf("checkkernels: FAIL: %s runs here and was not checked\n", k[i].name());
      ++failures;
    }
  }
  const std::string targets = RNNCORE_CHECK_ISAS;
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon}) {
    const std::string name = to_string(isa);
    if (("," + targets + ",").find("," + name + ",") == std::string::npos || !detail::cpu_has_isa(isa)) continue;
    bool any = false;
    for (int i = 0; i < n; ++i) any = any || (k[i].isa == isa && checked_names().count(k[i].name()) != 0);
    if (!any) {
      std::printf("checkkernels: FAIL: this CPU has %s, which the build targets, and no %s kernel was checked\n",
                  name.c_str(), name.c_str());
      ++failures;
    }
  }
  std::printf("checkkernels: %zu of the %d kernels this CPU runs checked (build targets: %s):",
              checked_names().size(), runs, targets.empty() ? "no SIMD" : targets.c_str());
  for (const std::string& s : checked_names()) std::printf(" %s", s.c_str());
  std::printf("\n");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--bench") == 0) return bench(argc >= 3 ? std::max(1, std::atoi(argv[2])) : 15);
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit() || rc != 0) return rc;
  // The coverage rule needs every check to have run: not with doctest's filters or options.
  if (argc > 1) return rc;
  return coverage() == 0 ? 0 : 1;
}

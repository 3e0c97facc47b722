// Kernels of the training path, written once over xsimd::batch<float, Arch> (included by
// kernels_impl.hpp, so instantiated once per instruction set with that ISA's flags).
//
// f32_matmul: C (+)= A · B with A read through strides (so Aᵀ costs nothing) and B, C row-major.
// Blocked over K (kKc) and N (kNc) so that a B panel stays in L2 while every row tile of A passes;
// a register tile holds MR rows × NR vectors. Every element of C sums k in increasing order within
// a K block and adds the blocks in order: the result depends on M, N, K only, never on tiling by
// rows or on threads, which is what makes gradients bit-identical for any thread count.
#ifndef RNNCORE_SIMD_TRAIN_IMPL_HPP
#define RNNCORE_SIMD_TRAIN_IMPL_HPP

namespace rnncore {
namespace simd {
namespace {

constexpr int kMatmulKc = 256;  // K block: rows of B per pass
constexpr int kMatmulNc = 512;  // N block: columns of B per pass (kKc × kNc floats: 512 KiB)

// Rows of a register tile: MR·NR accumulators, NR loads of B and a broadcast fit the register file.
template <class Arch>
constexpr int matmul_rows() {
  return RegisterFile<Arch>::count >= 32 ? 6 : 4;
}
template <class Arch>
constexpr int matmul_vectors() {
  return RegisterFile<Arch>::count >= 32 ? 4 : 3;
}

// One MR × NR·V tile of C over k in [0, k_count): C = (load ? C : 0) + Σ_k A(m, k) · B[k, :].
template <class Arch, int MR, int NR>
inline void matmul_tile(const float* a, std::int64_t a_m, std::int64_t a_k, const float* b, std::int64_t ldb, float* c,
                        std::int64_t ldc, int k_count, bool load) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  vf<Arch> acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = load ? vf<Arch>::load_unaligned(c + i * ldc + j * V) : vf<Arch>(0.0f);
  for (int p = 0; p < k_count; ++p) {
    vf<Arch> bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = vf<Arch>::load_unaligned(b + p * ldb + j * V);
    for (int i = 0; i < MR; ++i) {
      const vf<Arch> x(a[i * a_m + p * a_k]);
      for (int j = 0; j < NR; ++j) acc[i][j] = fmadd<Arch>(x, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j].store_unaligned(c + i * ldc + j * V);
}

// Columns past the last whole vector: scalar, k in the same order, fused like the vector lanes.
inline void matmul_columns(const float* a, std::int64_t a_m, std::int64_t a_k, const float* b, std::int64_t ldb, float* c,
                           std::int64_t ldc, int rows, int cols, int k_count, bool load) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float s = load ? c[i * ldc + j] : 0.0f;
      for (int p = 0; p < k_count; ++p) s = __builtin_fmaf(a[i * a_m + p * a_k], b[p * ldb + j], s);
      c[i * ldc + j] = s;
    }
}

template <class Arch>
void matmul(const MatmulArgs& g) {
  constexpr int V = static_cast<int>(vf<Arch>::size), MR = matmul_rows<Arch>(), NR = matmul_vectors<Arch>();
  if (g.k == 0) {
    if (!g.accumulate)
      for (int i = g.row_begin; i < g.row_end; ++i) std::memset(g.c + i * g.ldc, 0, sizeof(float) * g.n);
    return;
  }
  for (int n0 = 0; n0 < g.n; n0 += kMatmulNc) {
    const int nc = std::min(kMatmulNc, g.n - n0);
    for (int k0 = 0; k0 < g.k; k0 += kMatmulKc) {
      const int kc = std::min(kMatmulKc, g.k - k0);
      const bool load = g.accumulate || k0 > 0;
      const float* b = g.b + static_cast<std::int64_t>(k0) * g.ldb + n0;
      for (int m0 = g.row_begin; m0 < g.row_end; m0 += MR) {
        const int mr = std::min(MR, g.row_end - m0);
        const float* a = g.a + static_cast<std::int64_t>(m0) * g.a_m + static_cast<std::int64_t>(k0) * g.a_k;
        float* c = g.c + static_cast<std::int64_t>(m0) * g.ldc + n0;
        int j = 0;
        with_rows<MR>(mr, [&](auto rows) {
          for (; j + NR * V <= nc; j += NR * V) matmul_tile<Arch, decltype(rows)::value, NR>(a, g.a_m, g.a_k, b + j, g.ldb, c + j, g.ldc, kc, load);
          for (; j + V <= nc; j += V) matmul_tile<Arch, decltype(rows)::value, 1>(a, g.a_m, g.a_k, b + j, g.ldb, c + j, g.ldc, kc, load);
        });
        if (j < nc) matmul_columns(a, g.a_m, g.a_k, b + j, g.ldb, c + j, g.ldc, mr, nc - j, kc, load);
      }
    }
  }
}

// v[0, n) ← act(v) with the step kernels' vector math (a partial vector through a padded copy).
template <class Arch>
void activate(Activation kind, float* v, std::int32_t n) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  auto apply = [kind](vf<Arch> x) {
    switch (kind) {
      case Activation::sigmoid: return sigmoid_f32<Arch>(x);
      case Activation::tanh: return tanh_f32<Arch>(x);
      case Activation::relu: return xsimd::max(x, vf<Arch>(0.0f));
    }
    return x;
  };
  int i = 0;
  for (; i + V <= n; i += V) apply(vf<Arch>::load_unaligned(v + i)).store_unaligned(v + i);
  if (i < n) {
    alignas(64) float tmp[V] = {};
    for (int j = i; j < n; ++j) tmp[j - i] = v[j];
    apply(vf<Arch>::load_aligned(tmp)).store_aligned(tmp);
    for (int j = i; j < n; ++j) v[j] = tmp[j - i];
  }
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_TRAIN_IMPL_HPP

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

static_assert(kMatmulScratchFloats >= kMatmulKc * kMatmulNc + kMatmulKc * 8, "matmul scratch too small");

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
// A is read at a[i·a_m + p·a_k]; B row p at b + p·ldb (a packed panel: ldb = NR·V).
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

// Widths of the column panels of an nc-wide block: NR·V, then single vectors; `rest` < V columns remain.
template <class Arch>
struct Panels {
  static constexpr int V = static_cast<int>(vf<Arch>::size), W = matmul_vectors<Arch>() * V;
  int wide, narrow, rest;  // counts of NR·V panels and V panels, leftover columns
  explicit Panels(int nc) : wide(nc / W), narrow((nc - nc / W * W) / V), rest(nc - nc / W * W - (nc - nc / W * W) / V * V) {}
};

// B[k0 + p, n0 + j] for the block's whole-vector columns into consecutive panels, each kc × width.
template <class Arch>
void pack_b(const float* b, std::int64_t ldb, int kc, const Panels<Arch>& pn, float* out) {
  auto panel = [&](int col, int width) {
    float* dst = out + static_cast<std::int64_t>(col) * kc;
    for (int p = 0; p < kc; ++p) std::memcpy(dst + p * width, b + p * ldb + col, sizeof(float) * width);
  };
  for (int w = 0; w < pn.wide; ++w) panel(w * pn.W, pn.W);
  for (int v = 0; v < pn.narrow; ++v) panel(pn.wide * pn.W + v * pn.V, pn.V);
}

// A's MR × kc tile k-major (ap[p·MR + i]); rows past `rows` are zero.
template <int MR>
void pack_a(const float* a, std::int64_t a_m, std::int64_t a_k, int rows, int kc, float* out) {
  for (int p = 0; p < kc; ++p)
    for (int i = 0; i < MR; ++i) out[p * MR + i] = i < rows ? a[i * a_m + p * a_k] : 0.0f;
}

template <class Arch>
void matmul(const MatmulArgs& g) {
  constexpr int V = static_cast<int>(vf<Arch>::size), MR = matmul_rows<Arch>(), NR = matmul_vectors<Arch>();
  if (g.k == 0) {
    if (!g.accumulate)
      for (int i = g.row_begin; i < g.row_end; ++i) std::memset(g.c + i * g.ldc, 0, sizeof(float) * g.n);
    return;
  }
  // Packing B pays when many row tiles reuse it; A tiles are always packed (cheap, and their
  // broadcasts then read consecutive memory).
  const bool pack = g.scratch != nullptr && g.row_end - g.row_begin >= 8 * MR;
  float* a_tile = g.scratch;
  float* b_block = g.scratch + kMatmulKc * 8;
  for (int n0 = 0; n0 < g.n; n0 += kMatmulNc) {
    const int nc = std::min(kMatmulNc, g.n - n0);
    const Panels<Arch> pn(nc);
    for (int k0 = 0; k0 < g.k; k0 += kMatmulKc) {
      const int kc = std::min(kMatmulKc, g.k - k0);
      const bool load = g.accumulate || k0 > 0;
      const float* b = g.b + static_cast<std::int64_t>(k0) * g.ldb + n0;
      if (pack) pack_b<Arch>(b, g.ldb, kc, pn, b_block);
      for (int m0 = g.row_begin; m0 < g.row_end; m0 += MR) {
        const int mr = std::min(MR, g.row_end - m0);
        const float* a = g.a + static_cast<std::int64_t>(m0) * g.a_m + static_cast<std::int64_t>(k0) * g.a_k;
        std::int64_t a_m = g.a_m, a_k = g.a_k;
        if (g.scratch != nullptr) {
          pack_a<MR>(a, a_m, a_k, mr, kc, a_tile);
          a = a_tile, a_m = 1, a_k = MR;
        }
        float* c = g.c + static_cast<std::int64_t>(m0) * g.ldc + n0;
        if (mr == 1 && !pack) {  // one row (batch 1): eight vectors a tile, so that eight FMA chains hide the latency
          constexpr int NR1 = 8;
          int j = 0;
          for (; j + NR1 * V <= nc - pn.rest; j += NR1 * V) matmul_tile<Arch, 1, NR1>(a, a_m, a_k, b + j, g.ldb, c + j, g.ldc, kc, load);
          for (; j + V <= nc - pn.rest; j += V) matmul_tile<Arch, 1, 1>(a, a_m, a_k, b + j, g.ldb, c + j, g.ldc, kc, load);
          if (pn.rest > 0) matmul_columns(a, a_m, a_k, b + j, g.ldb, c + j, g.ldc, 1, pn.rest, kc, load);
          continue;
        }
        with_rows<MR>(mr, [&](auto rows) {
          constexpr int R = decltype(rows)::value;
          int j = 0;
          for (int w = 0; w < pn.wide; ++w, j += NR * V)
            matmul_tile<Arch, R, NR>(a, a_m, a_k, pack ? b_block + static_cast<std::int64_t>(j) * kc : b + j,
                                     pack ? NR * V : g.ldb, c + j, g.ldc, kc, load);
          for (int v = 0; v < pn.narrow; ++v, j += V)
            matmul_tile<Arch, R, 1>(a, a_m, a_k, pack ? b_block + static_cast<std::int64_t>(j) * kc : b + j,
                                    pack ? V : g.ldb, c + j, g.ldc, kc, load);
        });
        if (pn.rest > 0) matmul_columns(a, a_m, a_k, b + (nc - pn.rest), g.ldb, c + (nc - pn.rest), g.ldc, mr, pn.rest, kc, load);
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

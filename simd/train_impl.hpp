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

// Blocks of B a pass of every row tile reads, 512 KiB, so that they stay in L2: kMatmulKc × kMatmulNc,
// or twice as deep and half as wide (kDeepKc × kDeepNc, deep_blocks) where K outgrows kMatmulKc and A
// is cheap to read again: for a whole B packed ahead (pack_b: the weights at plan time) and for a B
// packed per call against a row-major A (dx = dpre · W). A C of T·B × G·H floats outgrows L2 and
// each K block loads and stores it once: deep blocks halve the passes. Zen 5, B = 64, against
// dnnl_sgemm: H 1024 fwd_x 0.87–0.90 → 0.91–0.95, dx 0.87–0.89 → 0.90–0.91 (dx at N = H ≤ 256,
// deep since before: 5–10 %); the training step against oneDNN's, H 512–1024, B 16 / 64, 1–3 points
// better (bench/results/deep_blocks_amd_epyc_avx512_2026-11-30.md). The weight gradients (A = dpreᵀ,
// transposed) keep the wide blocks: half as wide, each would pack or read its A tiles twice as
// often, from kc pages apart (dW at H 1024 0.88 → 0.78 when tried).
constexpr int kMatmulKc = 256, kMatmulNc = 512;
constexpr int kDeepKc = 2 * kMatmulKc, kDeepNc = kMatmulNc / 2;
static_assert(kDeepKc * kDeepNc == kMatmulKc * kMatmulNc, "the deep blocks fill the same scratch");
static_assert(kMatmulScratchFloats >= kMatmulKc * kMatmulNc + kDeepKc * 8, "matmul scratch too small");

// The weight gradients' blocks where the caller gives more scratch (MatmulArgs::wide_scratch) and
// N outgrows a wide block: all of N up to 1024 at once, so that A (dpreᵀ, G·H × T·B, read down its
// columns: the costly operand to pack) is packed once rather than once per 512 columns, and 768
// deep, so that C (G·H × N, 16 MB at H 1024) is loaded and stored a third as often. The block
// (3 MB) outgrows L2; its panels stream from L3 with the tiles' prefetches. Zen 5, M 4096, N 1024,
// K 3200 (an LSTM's dW at H 1024, B 64): 207–213 → 229–232 GFLOP/s; N 768 the same (±1 %); N ≤ 512
// keeps the wide blocks (deeper ones measured no better there). AVX-512 only: AVX2's 4 × 3 tiles
// went from 0.94–0.96 of dnnl_sgemm to 0.91–0.94 with them (H 1024, capped on the same machine).
constexpr int kWideKc = 768, kWideNc = 1024;
static_assert(kMatmulWideScratchFloats >= kWideKc * kWideNc + kWideKc * 8, "wide matmul scratch too small");

// A transposed A (dpreᵀ, rows G·H or more floats apart) is read in place by blocks of at most this
// many register tiles' columns (4: 256 columns with the 6 × 4 AVX-512 tile, 64 with the 6 × 2 AVX2
// one) and packed for wider ones: in place, each tile a block passes reads its kc rows from kc pages
// again; packed, once. Measured on Zen 5: AVX-512 in place 5–20 % faster at N = H ≤ 256, packed 3–7 %
// faster at N = 512; AVX2 at N = 256 (16 tiles) in place made a GRU's backward 28–34 % slower.
constexpr int kMatmulDirectTransposedTiles = 4;

// Rows of a packed B panel a tile asks the cache for ahead of its FMAs. The panel streams from L2
// (a block is kKc × kNc, 512 KiB) or, in the per-step products, from R in L3; with the hardware
// prefetchers alone the 6 × 4 AVX-512 tile waited on those loads (70–80 GFLOP/s against a
// measured peak of ~100–130 on the Xeon of docs/performance.md; 90–100 with this). 16 rows ahead
// rather than 8: where R outgrows L3 (H ≈ 1000, 16 MB) the per-step products' first row tile of a
// block pulls it from memory (Zen 5, LSTM H 1000 B 64: training step 3–6 % faster; H 256–512 the
// same). A prefetch never faults: the rows past a panel's end cost a cache line at most. The
// one-row paths stream few enough lines for the hardware prefetchers and have none.
constexpr int kMatmulPrefetchRows = 16;

// One prefetch per cache line of `floats` consecutive floats.
template <int Floats>
RNNCORE_SIMD_INLINE void prefetch_floats(const float* p) {
  for (int q = 0; q < Floats; q += 16) __builtin_prefetch(p + q);
}
// The same with intent to write (a C tile: loaded, then stored).
template <int Floats>
RNNCORE_SIMD_INLINE void prefetch_floats_write(const float* p) {
  for (int q = 0; q < Floats; q += 16) __builtin_prefetch(p + q, 1);
}

// Rows of a register tile: MR·NR accumulators, NR loads of B and a broadcast fit the register file.
template <class Arch>
constexpr int matmul_rows() {
  return RegisterFile<Arch>::count >= 32 ? 6 : 4;
}
template <class Arch>
constexpr int matmul_vectors() {
  return RegisterFile<Arch>::count >= 32 ? 4 : 3;
}

// The blocks of a K × N B that may be deep (see kDeepKc): deep where K outgrows a wide block, wide
// otherwise (with K ≤ kMatmulKc deep blocks would only cut N finer). A deep block's columns: all N
// up to kDeepNc, else kDeepNc rounded down to whole register tiles (AVX2's tiles are 24 wide: 240,
// where 256 would leave two one-vector panels in every block). pack_b and the products that read
// its blocks use the same.
struct Blocks {
  int kc, nc;
};
template <class Arch>
constexpr Blocks deep_blocks(int k, int n) {
  constexpr int W = matmul_vectors<Arch>() * static_cast<int>(vf<Arch>::size);
  if (k <= kMatmulKc) return {kMatmulKc, kMatmulNc};
  return {kDeepKc, n <= kDeepNc ? kDeepNc : kDeepNc / W * W};
}

// The blocks of a B packed per call against a transposed A (see kWideKc): wide ones, or with
// MatmulArgs::wide_scratch on AVX-512, where K and N outgrow them, 768 deep and N (at most 1024,
// whole tiles) wide.
template <class Arch>
constexpr Blocks transposed_blocks(int k, int n, bool wide_scratch) {
  constexpr int W = matmul_vectors<Arch>() * static_cast<int>(vf<Arch>::size);
  if (vf<Arch>::size != 16 || !wide_scratch || k <= kMatmulKc || n <= kMatmulNc) return {kMatmulKc, kMatmulNc};
  return {kWideKc, n <= kWideNc ? kWideNc : kWideNc / W * W};
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

// The same tile over packed operands, with compile-time strides: A k-major (ap[p·AS + i]), B a
// panel of NR vectors per k.
// c_next: the C tile the caller takes next, asked for ahead (a short K leaves too few FMAs to hide
// its misses: the weight gradients at batch 1 have K = T).
template <class Arch, int MR, int NR, int AS>
inline void matmul_tile_packed(const float* ap, const float* bp, float* c, std::int64_t ldc, int k_count, bool load,
                               const float* c_next) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  for (int i = 0; i < MR; ++i) prefetch_floats<NR * V>(c_next + i * ldc);
  vf<Arch> acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = load ? vf<Arch>::load_unaligned(c + i * ldc + j * V) : vf<Arch>(0.0f);
  for (int p = 0; p < k_count; ++p, ap += AS, bp += NR * V) {
    prefetch_floats<NR * V>(bp + kMatmulPrefetchRows * NR * V);
    vf<Arch> bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = vf<Arch>::load_unaligned(bp + j * V);
    for (int i = 0; i < MR; ++i) {
      const vf<Arch> x(ap[i]);
      for (int j = 0; j < NR; ++j) acc[i][j] = fmadd<Arch>(x, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j].store_unaligned(c + i * ldc + j * V);
}

// The same tile over a packed B panel with A read in place (no packing: copying A would cost about
// one cycle an element, 10–20 % of the products with N = H ≤ 256): row-major A (kTransposed false,
// A(i, p) = a[i·lda + p]) or transposed (A(i, p) = a[p·lda + i]: a tile's MR values of one k are
// adjacent; the rows lda apart are asked for ahead, as the hardware prefetchers miss such strides).
template <class Arch, int MR, int NR, bool kTransposed>
inline void matmul_tile_direct(const float* a, std::int64_t lda, const float* bp, float* c, std::int64_t ldc, int k_count,
                               bool load, const float* c_next) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  for (int i = 0; i < MR; ++i) prefetch_floats_write<NR * V>(c_next + i * ldc);
  vf<Arch> acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = load ? vf<Arch>::load_unaligned(c + i * ldc + j * V) : vf<Arch>(0.0f);
  for (int p = 0; p < k_count; ++p, bp += NR * V) {
    prefetch_floats<NR * V>(bp + kMatmulPrefetchRows * NR * V);
    if (kTransposed) {
      __builtin_prefetch(a + (p + kMatmulPrefetchRows) * lda);
      __builtin_prefetch(a + (p + kMatmulPrefetchRows) * lda + MR - 1);
    }
    vf<Arch> bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = vf<Arch>::load_unaligned(bp + j * V);
    for (int i = 0; i < MR; ++i) {
      const vf<Arch> x(kTransposed ? a[p * lda + i] : a[i * lda + p]);
      for (int j = 0; j < NR; ++j) acc[i][j] = fmadd<Arch>(x, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j].store_unaligned(c + i * ldc + j * V);
}

// Part `part` of `parts` of a row-major A tile's MR rows (lda apart, kc floats each) asked for ahead,
// one cache line a prefetch: the next row tile's, spread over this one's column tiles. Its rows are
// short runs pages apart once K outgrows a block (kc of K floats a row), which the hardware
// prefetchers take too late.
template <int MR>
inline void prefetch_a_part(const float* a, std::int64_t lda, int kc, int part, int parts) {
  const int lines = (kc + 15) / 16, total = MR * lines, end = total * (part + 1) / parts;
  int q = total * part / parts, row = q / lines, line = q - row * lines;
  for (; q < end; ++q) {
    __builtin_prefetch(a + row * lda + line * 16);
    if (++line == lines) line = 0, ++row;
  }
}

// Columns past the last whole vector of a B read in place: one element at a time, k in the same
// order, each step the vector lanes' fmadd (fused where the instruction set fuses, as theirs: SSE2
// and 32-bit NEON do not). A packed B pads them to a vector instead (matmul_rest).
template <class Arch>
void matmul_columns(const float* a, std::int64_t a_m, std::int64_t a_k, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc, int rows, int cols, int k_count, bool load) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      vf<Arch> s(load ? c[i * ldc + j] : 0.0f);
      for (int p = 0; p < k_count; ++p) s = fmadd<Arch>(vf<Arch>(a[i * a_m + p * a_k]), vf<Arch>(b[p * ldb + j]), s);
      c[i * ldc + j] = s.get(0);
    }
}

// The column panels of an nc-wide block: `wide` panels of NR·V columns, `narrow` of V, then one of
// the `rest` < V columns. Packed, they lie one after the other: the panel at column j starts at j·kc,
// and the rest's rows are a whole vector, zeros past nc (`width` floats a row of k in all).
template <class Arch>
struct Panels {
  static constexpr int V = static_cast<int>(vf<Arch>::size), W = matmul_vectors<Arch>() * V;
  int wide, narrow, rest, width;
  explicit Panels(int nc) : wide(nc / W), narrow(nc % W / V), rest(nc % W % V), width((nc + V - 1) / V * V) {}
};

// B(p, j) = b[p·b_k + j·b_n] for p < kc and the block's nc columns into its panels (strides let a
// transposed matrix be packed in place of a copy). A transposed one (b_k 1: a column of B is a row
// of b) is read 16 k (a cache line of each row) at a time into a tile: a k at a time, the panel's
// W rows, b_n apart, shared a few L1 sets (at b_n 512 two) and every read missed.
template <class Arch>
void pack_block(const float* b, std::int64_t b_k, std::int64_t b_n, int kc, const Panels<Arch>& pn, float* out) {
  auto panel = [&](int col, int width, int stride) {
    float* dst = out + static_cast<std::int64_t>(col) * kc;
    const float* src = b + col * b_n;
    if (b_n != 1 && b_k == 1) {
      constexpr int kChunk = 16;
      float tile[Panels<Arch>::W][kChunk];
      for (int p0 = 0; p0 < kc; p0 += kChunk) {
        const int n = std::min(kChunk, kc - p0);
        for (int j = 0; j < width; ++j) {
          const float* from = src + j * b_n + p0;
          if (n == kChunk) {
            std::memcpy(tile[j], from, sizeof(float) * kChunk);  // a constant size: inlined, not a call
            if (p0 + 3 * kChunk <= kc) __builtin_prefetch(from + 2 * kChunk);  // too many rows for the prefetchers
          } else
            for (int p = 0; p < n; ++p) tile[j][p] = from[p];
        }
        for (int p = 0; p < n; ++p) {
          float* row = dst + (p0 + p) * stride;
          for (int j = 0; j < width; ++j) row[j] = tile[j][p];
          for (int j = width; j < stride; ++j) row[j] = 0.0f;
        }
      }
      return;
    }
    for (int p = 0; p < kc; ++p, src += b_k) {
      if (b_n == 1)
        std::memcpy(dst + p * stride, src, sizeof(float) * width);
      else
        for (int j = 0; j < width; ++j) dst[p * stride + j] = src[j * b_n];
      for (int j = width; j < stride; ++j) dst[p * stride + j] = 0.0f;
    }
  };
  for (int w = 0; w < pn.wide; ++w) panel(w * pn.W, pn.W, pn.W);
  for (int v = 0; v < pn.narrow; ++v) panel(pn.wide * pn.W + v * pn.V, pn.V, pn.V);
  if (pn.rest > 0) panel(pn.wide * pn.W + pn.narrow * pn.V, pn.rest, pn.V);
}

// Where block (n0, k0) of a whole packed B with k rows lies: a column range's blocks stack by k
// (every block before the last is deep_blocks' nc wide, whole vectors; `width`: Panels::width of
// this one).
inline std::int64_t packed_block_offset(int n0, int k0, int k, int width) {
  return static_cast<std::int64_t>(n0) * k + static_cast<std::int64_t>(k0) * width;
}
static_assert(kMatmulNc % 16 == 0 && kDeepNc % 16 == 0, "blocks but the last are whole vectors");

// A whole K × N matrix B(k, n) = b[k·b_k + n·b_n] packed for MatmulArgs::b_packed (at most
// packed_b_floats(k, n) floats).
template <class Arch>
void pack_b(const float* b, std::int64_t b_k, std::int64_t b_n, std::int32_t k, std::int32_t n, float* out) {
  const Blocks bl = deep_blocks<Arch>(k, n);
  for (int n0 = 0; n0 < n; n0 += bl.nc) {
    const Panels<Arch> pn(std::min(bl.nc, n - n0));
    for (int k0 = 0; k0 < k; k0 += bl.kc)
      pack_block<Arch>(b + k0 * b_k + n0 * b_n, b_k, b_n, std::min(bl.kc, k - k0), pn,
                       out + packed_block_offset(n0, k0, k, pn.width));
  }
}

// A's MR × kc tile k-major (ap[p·MR + i]); rows past `rows` are zero.
template <int MR>
void pack_a(const float* a, std::int64_t a_m, std::int64_t a_k, int rows, int kc, float* out) {
  if (a_m == 1 && rows == MR) {  // a transposed A: a whole tile's values of one k are adjacent
    // Each k's row is pages away from the last (a_k ≥ G·H floats), beyond the hardware
    // prefetchers' reach; the next cache line of each is asked for now, two or three row tiles
    // before its first use.
    for (int p = 0; p < kc; ++p) {
      __builtin_prefetch(a + p * a_k + 16);
      std::memcpy(out + p * MR, a + p * a_k, sizeof(float) * MR);
    }
    return;
  }
  for (int p = 0; p < kc; ++p)
    for (int i = 0; i < MR; ++i) out[p * MR + i] = i < rows ? a[i * a_m + p * a_k] : 0.0f;
}

// Whether the tile (or run of panels) starting at column `col` is this call's (MatmulArgs::col_begin
// / col_end: each tile is one thread's).
inline bool in_column_share(const MatmulArgs& g, int col) { return col >= g.col_begin && col < g.col_end; }

// The last `cols` < V columns of `rows` ≤ MR rows against their packed panel (V floats a k, zeros
// past `cols`): one vector a row into a copy of C's corner, whose padding lanes are dropped. Each
// element's sum is the one a whole vector's lane makes (k in the same order, fused).
template <class Arch>
void matmul_rest(const float* a, std::int64_t a_m, std::int64_t a_k, const float* panel, float* c, std::int64_t ldc,
                 int rows, int cols, int kc, bool load) {
  constexpr int V = static_cast<int>(vf<Arch>::size), MR = matmul_rows<Arch>();
  alignas(64) float corner[MR * V];
  if (load)
    for (int i = 0; i < rows; ++i) std::memcpy(corner + i * V, c + i * ldc, sizeof(float) * cols);
  with_rows<MR>(rows, [&](auto r) {
    matmul_tile<Arch, decltype(r)::value, 1>(a, a_m, a_k, panel, V, corner, V, kc, load);
  });
  for (int i = 0; i < rows; ++i) std::memcpy(c + i * ldc, corner + i * V, sizeof(float) * cols);
}

// One row against P consecutive packed wide panels at once (P·NR accumulators: enough FMA chains
// for a single row).
template <class Arch, int NR, int P>
inline void matmul_row_panels(const float* a, std::int64_t a_k, const float* panels, int kc, float* c, bool load) {
  constexpr int V = static_cast<int>(vf<Arch>::size), W = NR * V;
  vf<Arch> acc[P * NR];
  for (int j = 0; j < P * NR; ++j) acc[j] = load ? vf<Arch>::load_unaligned(c + j * V) : vf<Arch>(0.0f);
  for (int p = 0; p < kc; ++p) {
    const vf<Arch> x(a[p * a_k]);
    for (int q = 0; q < P; ++q)
      for (int j = 0; j < NR; ++j)
        acc[q * NR + j] = fmadd<Arch>(x, vf<Arch>::load_unaligned(panels + (static_cast<std::int64_t>(q) * kc + p) * W + j * V),
                                      acc[q * NR + j]);
  }
  for (int j = 0; j < P * NR; ++j) acc[j].store_unaligned(c + j * V);
}

// Wide panels a one-row product takes at once (P of matmul_row_panels): three, 9–12 FMA chains; on
// AVX-512 one (4 chains) where B streams from L2 (more than kRowPanelNearBytes, at most
// kSingleRowFarBytes), as the step kernels' single-row tiles (single_row_blocks). Zen 5, batch 1,
// T 50: an LSTM's training step at H 256 / 512 1.04–1.07× faster, at H 128 (B 256 KiB) 0.98×.
constexpr std::int64_t kRowPanelNearBytes = std::int64_t{512} << 10;
template <class Arch>
inline int row_panel_group(std::int64_t b_bytes) {
  if constexpr (vf<Arch>::size == 16) return b_bytes > kRowPanelNearBytes && b_bytes <= kSingleRowFarBytes ? 1 : 3;
  return 3;
}

// One row (batch 1) against a packed B: groups of column panels outer, K blocks inner. Each
// element's sum still runs k upwards, as by blocks, so the groups may go in either order; from the
// last with `descending`, so that a per-step product starts on the panels the previous step read
// last, still in cache (B is R: larger than L2 from H ≈ 256).
template <class Arch>
void matmul_packed_row(const MatmulArgs& g) {
  constexpr int V = static_cast<int>(vf<Arch>::size), NR = matmul_vectors<Arch>(), W = NR * V;
  const float* a = g.a + static_cast<std::int64_t>(g.row_begin) * g.a_m;
  float* c_row = g.c + static_cast<std::int64_t>(g.row_begin) * g.ldc;
  const Blocks bl = deep_blocks<Arch>(g.k, g.n);
  const int blocks = (g.n + bl.nc - 1) / bl.nc;
  const int P = row_panel_group<Arch>(static_cast<std::int64_t>(g.k) * g.n * static_cast<std::int64_t>(sizeof(float)));
  for (int bi = 0; bi < blocks; ++bi) {
    const int n0 = (g.descending ? blocks - 1 - bi : bi) * bl.nc, nc = std::min(bl.nc, g.n - n0);
    const Panels<Arch> pn(nc);
    // The block's groups: P wide panels at a time, the last fewer, each narrow one, the rest.
    const int full = pn.wide / P, odd = pn.wide % P;
    const int groups = full + (odd > 0) + pn.narrow + (pn.rest > 0);
    for (int gi = 0; gi < groups; ++gi) {
      const int q = g.descending ? groups - 1 - gi : gi;
      int j, kind;  // kind: wide panels (1..3), 0 a narrow one, -1 the rest
      if (q < full) {
        j = q * P * W, kind = P;
      } else if (odd > 0 && q == full) {
        j = full * P * W, kind = odd;
      } else if (q - full - (odd > 0) < pn.narrow) {
        j = pn.wide * W + (q - full - (odd > 0)) * V, kind = 0;
      } else {
        j = pn.wide * W + pn.narrow * V, kind = -1;
      }
      if (!in_column_share(g, n0 + j)) continue;  // another thread's
      for (int k0 = 0; k0 < g.k; k0 += bl.kc) {
        const int kc = std::min(bl.kc, g.k - k0);
        const bool load = g.accumulate || k0 > 0;
        const float* ak = a + static_cast<std::int64_t>(k0) * g.a_k;
        const float* bp = g.b_packed + packed_block_offset(n0, k0, g.k, pn.width) + static_cast<std::int64_t>(j) * kc;
        float* c = c_row + n0 + j;
        if (kind == 3) matmul_row_panels<Arch, NR, 3>(ak, g.a_k, bp, kc, c, load);
        else if (kind == 2) matmul_row_panels<Arch, NR, 2>(ak, g.a_k, bp, kc, c, load);
        else if (kind == 1) matmul_row_panels<Arch, NR, 1>(ak, g.a_k, bp, kc, c, load);
        else if (kind == 0) matmul_tile<Arch, 1, 1>(ak, g.a_m, g.a_k, bp, V, c, g.ldc, kc, load);
        else matmul_rest<Arch>(ak, g.a_m, g.a_k, bp, c, g.ldc, 1, pn.rest, kc, load);
      }
    }
  }
}

#if RNNCORE_SIMD_BF16_PAIRS
// ---- bf16 products (MatmulArgs::bf16): the weight gradients of layers on bf16 panels ----
//
// C (+)= A · B with A transposed (a_m = 1: for each k, A's rows m lie contiguous), both operands
// rounded to bf16 (to nearest even, as to_bf16) and multiplied two k at a time by vdpbf16ps into
// f32 accumulators. A packed word holds a k-pair: low half k even, high half k + 1. A is packed 16
// rows at a time ([pair][16 rows]); B in blocks of kc × nc, [tile of 48 columns][pair][48]. A
// register tile is 8 rows × 3 vectors: 24 accumulators, 3 loads of B and 8 broadcasts of A a pair.
// Each element of C sums a K block's pairs in order and adds the blocks in order: the result
// depends on M, N, K only (not on the rows a thread takes).
constexpr int kBf16Rows = 8, kBf16Vectors = 3, kBf16Cols = kBf16Vectors * 16, kBf16Group = 16;
// Blocks: 480 deep × 512 wide (11 tiles: 516 KiB with A's group), or with wide scratch 1440 × 1024
// (3 MiB: streams from L3; C passed a third as often). Zen 5, LSTM H 1024 B 64, the backward:
// 304–307 ms with the narrow blocks, 263–269 with these (960 deep: 267–270).
struct Bf16Blocks {
  int kc, nc;
  constexpr int tiles() const { return (nc + kBf16Cols - 1) / kBf16Cols; }
  constexpr std::int64_t words() const { return static_cast<std::int64_t>(kc / 2) * (tiles() * kBf16Cols + kBf16Group); }
};
constexpr Bf16Blocks kBf16Blocks{480, 512}, kBf16WideBlocks{1440, 1024};
static_assert(kBf16Blocks.words() <= kMatmulScratchFloats && kBf16WideBlocks.words() <= kMatmulWideScratchFloats,
              "bf16 blocks outgrow the matmul scratch");

// dst[j] = (bf16(r0[j]), bf16(r1[j])) for j < n (≤ 16), zero words from n to 16; r1 null: high halves zero.
inline void bf16_pair_words(const float* r0, const float* r1, int n, std::uint32_t* dst) {
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                               8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1);
  const __m512 lo = _mm512_maskz_loadu_ps(m, r0);
  const __m512 hi = r1 != nullptr ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
  const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // 16-bit lanes 0–15: lo, 16–31: hi
  _mm512_storeu_si512(dst, _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), halves));
}

// C[0, rows) × [0, cols) (+)= the tile's 8 rows of packed A (words 16 apart a pair) · its 48
// columns of packed B (48 words a pair).
inline void bf16_tile(const std::uint32_t* ap, const std::uint32_t* bp, int pairs, float* c, std::int64_t ldc, int rows,
                      int cols, bool load) {
  __m512 acc[kBf16Rows][kBf16Vectors];
#pragma GCC unroll 8
  for (int i = 0; i < kBf16Rows; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < kBf16Vectors; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512bh b[kBf16Vectors];
#pragma GCC unroll 3
    for (int v = 0; v < kBf16Vectors; ++v) b[v] = (__m512bh)_mm512_loadu_si512(bp + p * kBf16Cols + v * 16);
#pragma GCC unroll 8
    for (int i = 0; i < kBf16Rows; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[p * kBf16Group + i]));
#pragma GCC unroll 3
      for (int v = 0; v < kBf16Vectors; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
    }
  }
  for (int i = 0; i < rows; ++i)
    for (int v = 0; v < kBf16Vectors && v * 16 < cols; ++v) {
      const int n = cols - v * 16;
      const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
      float* dst = c + i * ldc + v * 16;
      const __m512 sum = load ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), acc[i][v]) : acc[i][v];
      _mm512_mask_storeu_ps(dst, m, sum);
    }
}

// Rows m0 … m0 + rows of A (transposed, its row k at a + k·a_k) over k in [k0, k0 + kc) as pair
// words [pair][16] (rows past `rows` and the pair past an odd kc zero).
inline void bf16_pack_a(const float* a, std::int64_t a_k, int rows, int kc, std::uint32_t* dst) {
  for (int p = 0; 2 * p < kc; ++p) {
    const float* r0 = a + static_cast<std::int64_t>(2 * p) * a_k;
    bf16_pair_words(r0, 2 * p + 1 < kc ? r0 + a_k : nullptr, rows, dst + p * kBf16Group);
  }
}

// Columns [0, nc) of B's rows k0 … k0 + kc (row k at b + k·ldb) as [tile][pair][48 words].
inline void bf16_pack_b(const float* b, std::int64_t ldb, int kc, int nc, std::uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  for (int t = 0; t * kBf16Cols < nc; ++t)
    for (int p = 0; p < pairs; ++p)
      for (int v = 0; v < kBf16Vectors; ++v) {
        const int col = t * kBf16Cols + v * 16;
        const float* r0 = b + static_cast<std::int64_t>(2 * p) * ldb + col;
        bf16_pair_words(r0, 2 * p + 1 < kc ? r0 + ldb : nullptr, nc - col, dst + (static_cast<std::int64_t>(t) * pairs + p) * kBf16Cols + v * 16);
      }
}

void matmul_bf16(const MatmulArgs& g) {
  const Bf16Blocks bl = g.wide_scratch ? kBf16WideBlocks : kBf16Blocks;
  auto* b_words = reinterpret_cast<std::uint32_t*>(g.scratch);
  std::uint32_t* a_words = b_words + static_cast<std::int64_t>(bl.kc / 2) * bl.tiles() * kBf16Cols;
  for (int n0 = 0; n0 < g.n; n0 += bl.nc) {
    const int nc = std::min(bl.nc, g.n - n0);
    for (int k0 = 0; k0 < g.k; k0 += bl.kc) {
      const int kc = std::min(bl.kc, g.k - k0), pairs = (kc + 1) / 2;
      const bool load = g.accumulate || k0 > 0;
      bf16_pack_b(g.b + static_cast<std::int64_t>(k0) * g.ldb + n0, g.ldb, kc, nc, b_words);
      for (int m0 = g.row_begin; m0 < g.row_end; m0 += kBf16Group) {
        const int rows = std::min(kBf16Group, g.row_end - m0);
        bf16_pack_a(g.a + m0 + static_cast<std::int64_t>(k0) * g.a_k, g.a_k, rows, kc, a_words);
        for (int t = 0; t * kBf16Cols < nc; ++t)
          for (int h = 0; h < rows; h += kBf16Rows)
            bf16_tile(a_words + h, b_words + static_cast<std::int64_t>(t) * pairs * kBf16Cols, pairs,
                      g.c + static_cast<std::int64_t>(m0 + h) * g.ldc + n0 + t * kBf16Cols, g.ldc,
                      std::min(kBf16Rows, rows - h), std::min(kBf16Cols, nc - t * kBf16Cols), load);
      }
    }
  }
}
#endif  // RNNCORE_SIMD_BF16_PAIRS

template <class Arch>
void matmul(const MatmulArgs& g) {
  constexpr int V = static_cast<int>(vf<Arch>::size), MR = matmul_rows<Arch>(), NR = matmul_vectors<Arch>();
  if (g.k == 0) {
    if (!g.accumulate)
      for (int i = g.row_begin; i < g.row_end; ++i) std::memset(g.c + i * g.ldc, 0, sizeof(float) * g.n);
    return;
  }
#if RNNCORE_SIMD_BF16_PAIRS
  if (g.bf16 && g.a_m == 1 && g.b != nullptr && g.scratch != nullptr) return matmul_bf16(g);
#endif
  if (g.row_end - g.row_begin == 1 && g.b_packed != nullptr) return matmul_packed_row<Arch>(g);
  // B comes packed (b_packed), or is packed here when enough row tiles reuse it; A tiles are
  // packed whenever there is scratch (cheap, and their broadcasts then read consecutive memory).
  const bool pack_here = g.b_packed == nullptr && g.scratch != nullptr && g.row_end - g.row_begin >= 8 * MR;
  float* a_tile = g.scratch;
  float* b_block = g.scratch + (g.wide_scratch ? kWideKc : kDeepKc) * 8;
  const Blocks bl = g.b_packed != nullptr || (pack_here && g.a_k == 1) ? deep_blocks<Arch>(g.k, g.n)
                    : pack_here && g.a_m == 1                          ? transposed_blocks<Arch>(g.k, g.n, g.wide_scratch)
                                                                       : Blocks{kMatmulKc, kMatmulNc};
  const int kc_max = bl.kc, nc_max = bl.nc;
  for (int n0 = 0; n0 < g.n; n0 += nc_max) {
    const int nc = std::min(nc_max, g.n - n0);
    const Panels<Arch> pn(nc);
    const int rest_at = nc - pn.rest;
    for (int k0 = 0; k0 < g.k; k0 += kc_max) {
      const int kc = std::min(kc_max, g.k - k0);
      const bool load = g.accumulate || k0 > 0;
      const float* b = g.b == nullptr ? nullptr : g.b + static_cast<std::int64_t>(k0) * g.ldb + n0;
      const float* bp = g.b_packed != nullptr ? g.b_packed + packed_block_offset(n0, k0, g.k, pn.width) : nullptr;
      if (pack_here) {
        pack_block<Arch>(b, g.ldb, 1, kc, pn, b_block);
        bp = b_block;
      }
      // Panel j of the block: packed (rows of its own width) or B itself.
      auto panel = [&](int j, int width, std::int64_t* ld) {
        *ld = bp != nullptr ? width : g.ldb;
        return bp != nullptr ? bp + static_cast<std::int64_t>(j) * kc : b + j;
      };
      for (int m0 = g.row_begin; m0 < g.row_end; m0 += MR) {
        const int mr = std::min(MR, g.row_end - m0);
        const float* a = g.a + static_cast<std::int64_t>(m0) * g.a_m + static_cast<std::int64_t>(k0) * g.a_k;
        std::int64_t a_m = g.a_m, a_k = g.a_k;
        // A is read in place against a packed B when its rows are contiguous, or its columns in a
        // narrow block.
        const bool direct = bp != nullptr && mr > 1 && (a_k == 1 || (a_m == 1 && nc <= kMatmulDirectTransposedTiles * NR * V));
        if (g.scratch != nullptr && mr > 1 && !direct) {  // one row (batch 1) is read in place: packing would pad it to MR
          pack_a<MR>(a, a_m, a_k, mr, kc, a_tile);
          a = a_tile, a_m = 1, a_k = MR;
        }
        float* c = g.c + static_cast<std::int64_t>(m0) * g.ldc + n0;
        int j = 0;
        std::int64_t ld = 0;
        const auto mine = [&](int col) { return in_column_share(g, n0 + col); };
        if (mr == 1 && bp == nullptr) {  // one row (batch 1): eight vectors a tile, eight FMA chains
          for (; j + 8 * V <= rest_at; j += 8 * V)
            if (mine(j)) matmul_tile<Arch, 1, 8>(a, a_m, a_k, b + j, g.ldb, c + j, g.ldc, kc, load);
        } else if (mr == 1) {  // the same over packed panels (a taller product's last row): three at a time, then a pair
          for (int w = 0; w + 3 <= pn.wide; w += 3, j += 3 * NR * V)
            if (mine(j)) matmul_row_panels<Arch, NR, 3>(a, a_k, bp + static_cast<std::int64_t>(j) * kc, kc, c + j, load);
          if (pn.wide % 3 == 2) {
            if (mine(j)) matmul_row_panels<Arch, NR, 2>(a, a_k, bp + static_cast<std::int64_t>(j) * kc, kc, c + j, load);
            j += 2 * NR * V;
          }
        }
        with_rows<MR>(mr, [&](auto rows) {
          constexpr int R = decltype(rows)::value;
          if (direct) {
            const int wide_end = pn.wide * NR * V;
            auto run = [&](auto transposed) {
              constexpr bool kT = decltype(transposed)::value;
              const std::int64_t lda = kT ? a_k : a_m;
              const bool next = !kT && m0 + MR < g.row_end;
              for (; j + NR * V <= wide_end; j += NR * V) {
                if (!mine(j)) continue;
                if (next) prefetch_a_part<MR>(a + MR * lda, lda, kc, j / (NR * V), pn.wide);
                matmul_tile_direct<Arch, R, NR, kT>(a, lda, bp + static_cast<std::int64_t>(j) * kc, c + j, g.ldc, kc, load,
                                                    j + NR * V < wide_end ? c + j + NR * V : c + MR * g.ldc);
              }
              for (; j + V <= rest_at; j += V)
                if (mine(j))
                  matmul_tile_direct<Arch, R, 1, kT>(a, lda, bp + static_cast<std::int64_t>(j) * kc, c + j, g.ldc, kc, load,
                                                     c + j + V);
            };
            if (a_m == 1) run(std::true_type{});
            else run(std::false_type{});
            return;
          }
          if (bp != nullptr && a == a_tile) {  // both packed: the strides are constants
            const int wide_end = pn.wide * NR * V;
            for (; j + NR * V <= wide_end; j += NR * V)
              if (mine(j))
                matmul_tile_packed<Arch, R, NR, MR>(a, bp + static_cast<std::int64_t>(j) * kc, c + j, g.ldc, kc, load,
                                                    j + NR * V < wide_end ? c + j + NR * V : c + MR * g.ldc);
            for (; j + V <= rest_at; j += V)
              if (mine(j))
                matmul_tile_packed<Arch, R, 1, MR>(a, bp + static_cast<std::int64_t>(j) * kc, c + j, g.ldc, kc, load,
                                                   c + j + V);
            return;
          }
          for (; j + NR * V <= pn.wide * NR * V; j += NR * V) {
            const float* bj = panel(j, NR * V, &ld);
            if (mine(j)) matmul_tile<Arch, R, NR>(a, a_m, a_k, bj, ld, c + j, g.ldc, kc, load);
          }
          for (; j + V <= rest_at; j += V) {
            const float* bj = panel(j, V, &ld);
            if (mine(j)) matmul_tile<Arch, R, 1>(a, a_m, a_k, bj, ld, c + j, g.ldc, kc, load);
          }
        });
        if (pn.rest > 0 && mine(rest_at)) {
          if (bp != nullptr)
            matmul_rest<Arch>(a, a_m, a_k, bp + static_cast<std::int64_t>(rest_at) * kc, c + rest_at, g.ldc, mr, pn.rest,
                              kc, load);
          else
            matmul_columns<Arch>(a, a_m, a_k, b + rest_at, g.ldb, c + rest_at, g.ldc, mr, pn.rest, kc, load);
        }
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
      case Activation::relu: return relu_f32<Arch>(x);
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

// One LSTM row of the training forward over V units: gate g's input part at pj[g·gs], recurrent
// part at rc[g·gs]; keep slot s at k[s·ks]. The products and sums as the scalar cell loop had
// them (unfused: the kernels are built with -ffp-contract=off), the activations of activate.
template <class Arch>
RNNCORE_SIMD_INLINE void lstm_forward_vector(const float* pj, const float* rc, std::int64_t gs, const float* c_prev, float* k,
                                             std::int64_t ks) {
  using F = vf<Arch>;
  auto pre = [&](int g) { return F::load_unaligned(pj + g * gs) + F::load_unaligned(rc + g * gs); };
  const F i = sigmoid_f32<Arch>(pre(0)), f = sigmoid_f32<Arch>(pre(1)), g = tanh_f32<Arch>(pre(2)), o = sigmoid_f32<Arch>(pre(3));
  const F c = f * F::load_unaligned(c_prev) + i * g;
  i.store_unaligned(k);
  f.store_unaligned(k + ks);
  g.store_unaligned(k + 2 * ks);
  o.store_unaligned(k + 3 * ks);
  c.store_unaligned(k + 4 * ks);
  (tanh_f32<Arch>(c) * o).store_unaligned(k + 5 * ks);
}

// The whole row (keep = i, f, g, o, c_t, h_t; h each); a partial last vector through padded copies.
template <class Arch>
void lstm_forward_row(const float* pj, const float* rc, const float* c_prev, float* keep, std::int32_t h) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  int u = 0;
  for (; u + V <= h; u += V) lstm_forward_vector<Arch>(pj + u, rc + u, h, c_prev + u, keep + u, h);
  if (u == h) return;
  alignas(64) float p[4 * V] = {}, r[4 * V] = {}, cp[V] = {}, k[6 * V];
  const int n = h - u;
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < 4; ++g) p[g * V + j] = pj[g * h + u + j], r[g * V + j] = rc[g * h + u + j];
    cp[j] = c_prev[u + j];
  }
  lstm_forward_vector<Arch>(p, r, V, cp, k, V);
  for (int j = 0; j < n; ++j)
    for (int s = 0; s < 6; ++s) keep[s * h + u + j] = k[s * V + j];
}

// One reset-after GRU row of the training forward over V units (keep = r, z, n, rc_n + b_Rn, h_t).
template <class Arch>
RNNCORE_SIMD_INLINE void gru_forward_vector(const float* pj, const float* rc, std::int64_t gs, const float* b_rn,
                                            const float* h_prev, float* k, std::int64_t ks) {
  using F = vf<Arch>;
  const F r = sigmoid_f32<Arch>(F::load_unaligned(pj) + F::load_unaligned(rc));
  const F z = sigmoid_f32<Arch>(F::load_unaligned(pj + gs) + F::load_unaligned(rc + gs));
  const F rec_n = F::load_unaligned(rc + 2 * gs) + F::load_unaligned(b_rn);
  const F n = tanh_f32<Arch>(F::load_unaligned(pj + 2 * gs) + r * rec_n);
  r.store_unaligned(k);
  z.store_unaligned(k + ks);
  n.store_unaligned(k + 2 * ks);
  rec_n.store_unaligned(k + 3 * ks);
  ((F(1.0f) - z) * n + z * F::load_unaligned(h_prev)).store_unaligned(k + 4 * ks);
}

template <class Arch>
void gru_forward_row(const float* pj, const float* rc, const float* b_rn, const float* h_prev, float* keep, std::int32_t h) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  int u = 0;
  for (; u + V <= h; u += V) gru_forward_vector<Arch>(pj + u, rc + u, h, b_rn + u, h_prev + u, keep + u, h);
  if (u == h) return;
  alignas(64) float p[3 * V] = {}, r[3 * V] = {}, b[V] = {}, hp[V] = {}, k[5 * V];
  const int n = h - u;
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < 3; ++g) p[g * V + j] = pj[g * h + u + j], r[g * V + j] = rc[g * h + u + j];
    b[j] = b_rn[u + j], hp[j] = h_prev[u + j];
  }
  gru_forward_vector<Arch>(p, r, V, b, hp, k, V);
  for (int j = 0; j < n; ++j)
    for (int s = 0; s < 5; ++s) keep[s * h + u + j] = k[s * V + j];
}

// One LSTM row's cell gradients over V units: lstm_unit_backward (src/shared/cell_grad.hpp) in
// vectors, with tanh(c_t) from the step kernels' tanh. Gate k of unit u at k[g·ks], its gradient
// at d[g·ds].
template <class Arch>
RNNCORE_SIMD_INLINE void lstm_backward_vector(const float* k, std::int64_t ks, const float* c_prev, const float* dh,
                                              float* dc, float* d, std::int64_t ds) {
  using F = vf<Arch>;
  const F one(1.0f), i = F::load_unaligned(k), f = F::load_unaligned(k + ks), g = F::load_unaligned(k + 2 * ks),
          o = F::load_unaligned(k + 3 * ks), tc = tanh_f32<Arch>(F::load_unaligned(k + 4 * ks)),
          h = F::load_unaligned(dh);
  const F dct = F::load_unaligned(dc) + h * o * (one - tc * tc);
  (dct * g * i * (one - i)).store_unaligned(d);
  (dct * F::load_unaligned(c_prev) * f * (one - f)).store_unaligned(d + ds);
  (dct * i * (one - g * g)).store_unaligned(d + 2 * ds);
  (h * tc * o * (one - o)).store_unaligned(d + 3 * ds);
  (dct * f).store_unaligned(dc);
}

// The whole row: keep = i, f, g, o, c_t (H each); dc holds the gradient at c_t and gets dc_{t−1};
// d[0, 4H) the pre-activation gradients. A partial last vector runs through padded copies.
template <class Arch>
void lstm_backward_row(const float* keep, const float* c_prev, const float* dh, float* dc, float* d, std::int32_t h) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  int u = 0;
  for (; u + V <= h; u += V) lstm_backward_vector<Arch>(keep + u, h, c_prev + u, dh + u, dc + u, d + u, h);
  if (u == h) return;
  alignas(64) float k[5 * V] = {}, cp[V] = {}, dhv[V] = {}, dcv[V] = {}, dv[4 * V];
  const int n = h - u;
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < 5; ++g) k[g * V + j] = keep[g * h + u + j];
    cp[j] = c_prev[u + j], dhv[j] = dh[u + j], dcv[j] = dc[u + j];
  }
  lstm_backward_vector<Arch>(k, V, cp, dhv, dcv, dv, V);
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < 4; ++g) d[g * h + u + j] = dv[g * V + j];
    dc[u + j] = dcv[j];
  }
}

// One GRU row's cell gradients over V units: gru_unit_backward (src/shared/cell_grad.hpp) in
// vectors. Gate k of unit u at k[g·ks], its gradient at d[g·ds].
template <class Arch, bool kResetAfter>
RNNCORE_SIMD_INLINE void gru_backward_vector(const float* k, std::int64_t ks, const float* h_prev, const float* dh,
                                             float* dh_direct, float* d, std::int64_t ds) {
  using F = vf<Arch>;
  const F one(1.0f), z = F::load_unaligned(k + ks), n = F::load_unaligned(k + 2 * ks), h = F::load_unaligned(dh);
  const F dan = h * (one - z) * (one - n * n);
  (h * (F::load_unaligned(h_prev) - n) * z * (one - z)).store_unaligned(d + ds);
  dan.store_unaligned(d + 2 * ds);
  if (kResetAfter) {
    const F r = F::load_unaligned(k);
    (dan * F::load_unaligned(k + 3 * ks) * r * (one - r)).store_unaligned(d);
    (dan * r).store_unaligned(d + 3 * ds);
  }
  (h * z).store_unaligned(dh_direct);
}

template <class Arch, bool kResetAfter>
void gru_backward_row(const float* keep, const float* h_prev, const float* dh, float* dh_direct, float* d, std::int32_t h) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  int u = 0;
  for (; u + V <= h; u += V) gru_backward_vector<Arch, kResetAfter>(keep + u, h, h_prev + u, dh + u, dh_direct + u, d + u, h);
  if (u == h) return;
  alignas(64) float k[4 * V] = {}, hp[V] = {}, dhv[V] = {}, dd[V], dv[4 * V];
  const int n = h - u;
  for (int j = 0; j < n; ++j) {
    for (int g = 0; g < 4; ++g) k[g * V + j] = keep[g * h + u + j];
    hp[j] = h_prev[u + j], dhv[j] = dh[u + j];
  }
  gru_backward_vector<Arch, kResetAfter>(k, V, hp, dhv, dd, dv, V);
  for (int j = 0; j < n; ++j) {
    for (int g = kResetAfter ? 0 : 1; g < (kResetAfter ? 4 : 3); ++g) d[g * h + u + j] = dv[g * V + j];
    dh_direct[u + j] = dd[j];
  }
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_TRAIN_IMPL_HPP

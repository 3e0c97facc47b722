// f32-accumulating recurrent kernels written once over xsimd::batch<float, Arch>.
//
// Included by exactly one translation unit per instruction set (simd/f32_<isa>.cpp), each compiled
// with that ISA's flags. Everything here has internal linkage (anonymous namespace), so the copies
// built with different flags can never be merged by the linker.
//
// Micro-kernel: a tile of MR rows × one unit block (G·NV vectors of V units) accumulates
// rows · panel over K in MR·G·NV registers; the epilogue adds the step's input projection and
// applies the cell (gates, state update, output) while the tile is still in registers.
// Weight storage (Weights): f32; f16 converted by F16C (AVX2, AVX-512), AArch64's fcvtl, or by
// integer operations (SSE2, ARMv7 NEON: exact, subnormals included); bf16 with bf16 inputs — exact
// products, two k per vdpbf16ps on AVX512_BF16, else converted to f32 and fused one k at a time.
#ifndef RNNCORE_SIMD_KERNELS_IMPL_HPP
#define RNNCORE_SIMD_KERNELS_IMPL_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

// philox_simd.hpp first: it includes xsimd under pragmas that quiet GCC 12's AVX-512 headers.
#include "simd/philox_simd.hpp"

#include <xsimd/xsimd.hpp>

#include "simd/kernels.hpp"
#include "simd/math.hpp"

#if defined(RNNCORE_SIMD_ISA_AVX512) || defined(RNNCORE_SIMD_ISA_AVX2)
#include <immintrin.h>
#define RNNCORE_SIMD_F16C 1  // f16 ↔ f32 and the bf16 widening by x86 instructions
#else
#define RNNCORE_SIMD_F16C 0  // SSE2, NEON: the portable conversions below
#endif
#if defined(RNNCORE_SIMD_ISA_SSE2)
#include <emmintrin.h>
#elif defined(RNNCORE_SIMD_ISA_NEON)
#include <arm_neon.h>
#endif
#if defined(RNNCORE_SIMD_ISA_AVX512) && defined(__AVX512BF16__)
#define RNNCORE_SIMD_BF16_PAIRS 1  // bf16 products by vdpbf16ps, two k at a time
#else
#define RNNCORE_SIMD_BF16_PAIRS 0
#endif

namespace rnncore {
namespace simd {
namespace {

// Vector registers of an architecture (the 32-register files of AVX-512 and AArch64 allow taller tiles).
template <class Arch>
struct RegisterFile {
  static constexpr int count = 16;
};
#if defined(RNNCORE_SIMD_ISA_AVX512)
template <>
struct RegisterFile<xsimd::avx512bw> {
  static constexpr int count = 32;
};
#endif
#if defined(RNNCORE_SIMD_ISA_NEON) && defined(__aarch64__)
template <>
struct RegisterFile<xsimd::neon64> {
  static constexpr int count = 32;
};
#endif

// Tallest tile for G gate vectors: MR·G accumulators + G weights + a broadcast + one spare.
template <class Arch, int G>
constexpr int max_rows() {
  constexpr int r = (RegisterFile<Arch>::count - G - 2) / G;
  return r > 8 ? 8 : (r < 1 ? 1 : r);
}

// Register tile of the f32 micro-kernels over a panel row of PW vectors: `rows` rows × `vectors`
// vectors per pass, a block taking PW / vectors passes. 32 registers hold a whole block (LSTM: 6
// rows × 4 vectors, 24 accumulators). 16 do not — 2 rows × 4 left each weight load feeding only two
// FMAs — so they hold 12 accumulators, the weights of one k and a broadcast: 6 rows × 2 vectors (the
// LSTM and Elman blocks in two passes, the shape of the classic AVX2 SGEMM kernel), 4 × 3 for the GRU's
// three gates in one pass (beats 6 × 2 + 6 × 1, whose second pass has only 6 FMA chains), 8 × 1.
template <class Arch, int PW>
struct Tile {
  static constexpr bool whole_block = RegisterFile<Arch>::count >= 32;
  static constexpr int vectors = whole_block || PW != 4 ? PW : 2;
  static constexpr int rows = whole_block ? max_rows<Arch, PW>() : PW == 1 ? 8 : PW == 3 ? 4 : 6;
  static_assert(PW % vectors == 0, "passes of equal width");
};

// Gates a step's recurrent panel holds (GRU reset-before: r and z; n comes in phase 2).
constexpr int cell_gates(Cell cell) {
  return cell == Cell::lstm ? 4 : cell == Cell::gru_reset_after ? 3 : cell == Cell::gru_reset_before ? 2 : 1;
}
// Vectors of a block's recurrent panel row: gates × vectors per gate.
constexpr int cell_vectors(Cell cell) { return cell_gates(cell) * vectors_per_gate(cell); }

// Calls f(std::integral_constant<int, m>) for a runtime m in [1, MaxMR].
template <int MaxMR, class F>
inline void with_rows(int m, F&& f) {
  if constexpr (MaxMR >= 1) {
    if (m == MaxMR) {
      f(std::integral_constant<int, MaxMR>{});
      return;
    }
    if constexpr (MaxMR > 1) with_rows<MaxMR - 1>(m, static_cast<F&&>(f));
  }
}

// ---- operands: how a weight storage type reads its weights and the products' inputs ----

template <class Arch, Weights W>
struct Operands;

template <class Arch>
struct Operands<Arch, Weights::f32> {
  using Input = float;   // element of a row the products read
  using Weight = float;  // element of a panel
  static vf<Arch> weight(const Weight* p) { return vf<Arch>::load_aligned(p); }
  static vf<Arch> input(const Input* row, int k) { return vf<Arch>(row[k]); }
};

#if !RNNCORE_SIMD_F16C
// V 16-bit values → V 32-bit lanes, zero-extended (the portable conversions' first step).
template <class Arch>
inline xsimd::batch<std::uint32_t, Arch> widen16(const std::uint16_t* p) {
#if defined(RNNCORE_SIMD_ISA_SSE2)
  return _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128());
#else
  return vmovl_u16(vld1_u16(p));
#endif
}

// IEEE binary16 bits (in the low half of each lane) → f32, exactly (src/shared/half.hpp's
// f16_to_f32): normal numbers by rebiasing the exponent, subnormals as their integer mantissa times
// 2^-24 (no subnormal float arithmetic, which ARMv7's NEON flushes to zero), inf and NaN by
// setting the whole exponent.
template <class Arch>
inline vf<Arch> f16_bits_to_f32(xsimd::batch<std::uint32_t, Arch> x) {
  using U = xsimd::batch<std::uint32_t, Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  const U sign = (x & U(0x8000u)) << 16, exp = x & U(0x7c00u), mag = (x & U(0x7fffu)) << 13;
  const U normal = mag + U(112u << 23);                     // exponent − 15 + 127
  const U special = mag | U(0x7f800000u);                   // inf, NaN (payload kept)
  const vf<Arch> sub = xsimd::to_float(xsimd::bitwise_cast<I>(x & U(0x3ffu))) * vf<Arch>(0x1p-24f);
  U bits = xsimd::select(exp == U(0x7c00u), special, normal);
  bits = xsimd::select(exp == U(0u), xsimd::bitwise_cast<U>(sub), bits);
  return xsimd::bitwise_cast<vf<Arch>>(bits | sign);
}
#endif

template <class Arch>
struct Operands<Arch, Weights::f16> {
  using Input = float;
  using Weight = std::uint16_t;
  static vf<Arch> weight(const Weight* p) {
#if defined(RNNCORE_SIMD_ISA_AVX512)
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(RNNCORE_SIMD_ISA_AVX2)
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
#elif defined(RNNCORE_SIMD_ISA_NEON) && defined(__aarch64__)
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));  // ARMv8's conversion instruction
#else
    return f16_bits_to_f32<Arch>(widen16<Arch>(p));
#endif
  }
  static vf<Arch> input(const Input* row, int k) { return vf<Arch>(row[k]); }
};

template <class Arch>
struct Operands<Arch, Weights::bf16> {
  using Input = std::uint16_t;
  using Weight = std::uint16_t;
  static vf<Arch> weight(const Weight* p) {  // bf16 → f32 is a 16-bit shift
#if defined(RNNCORE_SIMD_ISA_AVX512)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))), 16));
#elif defined(RNNCORE_SIMD_ISA_AVX2)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))), 16));
#else
    return xsimd::bitwise_cast<vf<Arch>>(widen16<Arch>(p) << 16);
#endif
  }
  static vf<Arch> input(const Input* row, int k) {
    const std::uint32_t bits = static_cast<std::uint32_t>(row[k]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return vf<Arch>(f);
  }
};

// acc[m][b·G + g] = Σ_k rows[m][k] · panels[b][k][g] for NB blocks at once (panel: K × G × V,
// aligned). Each lane sums k in increasing order whatever MR, NB and the passes are, so results do
// not depend on the tiling.
// NB > 1 serves single-row tiles: G chains alone would leave the FMA pipes waiting on their latency.
template <class Arch, Weights W, int G, int MR, int NB = 1>
inline void accumulate(const typename Operands<Arch, W>::Input* const* rows, int k,
                       const typename Operands<Arch, W>::Weight* const* panels, vf<Arch> (&acc)[MR][NB * G]) {
  using Op = Operands<Arch, W>;
  constexpr int V = static_cast<int>(vf<Arch>::size);
  for (int m = 0; m < MR; ++m)
    for (int g = 0; g < NB * G; ++g) acc[m][g] = vf<Arch>(0.0f);
#if RNNCORE_SIMD_BF16_PAIRS
  if constexpr (W == Weights::bf16) {  // two k per instruction: panel [K/2][G][V][2], rows padded to even K
    for (int p = 0; p < (k + 1) / 2; ++p) {
      __m512i w[NB * G];
      for (int b = 0; b < NB; ++b)
        for (int g = 0; g < G; ++g)
          w[b * G + g] = _mm512_load_si512(
              reinterpret_cast<const void*>(panels[b] + (static_cast<std::ptrdiff_t>(p) * G + g) * V * 2));
      for (int m = 0; m < MR; ++m) {
        std::uint32_t pair;
        std::memcpy(&pair, rows[m] + 2 * p, sizeof pair);
        const __m512i x = _mm512_set1_epi32(static_cast<int>(pair));
        for (int g = 0; g < NB * G; ++g) acc[m][g] = _mm512_dpbf16_ps(acc[m][g], (__m512bh)x, (__m512bh)w[g]);
      }
    }
    return;
  }
#endif
  // Unrolled by pragma: GCC peels at most 16 iterations by itself, so a 6 × 4 tile's accumulators
  // stayed an array on the stack (AArch64), loaded and stored every k.
  for (int p = 0; p < k; ++p) {
    vf<Arch> w[NB * G];
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) w[b * G + g] = Op::weight(panels[b] + (static_cast<std::ptrdiff_t>(p) * G + g) * V);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const vf<Arch> x = Op::input(rows[m], p);
#pragma GCC unroll 8
      for (int g = 0; g < NB * G; ++g) acc[m][g] = fmadd<Arch>(x, w[g], acc[m][g]);
    }
  }
}

// Panel elements of `vectors` vectors over k rows (bf16 pairs pad K to even).
template <Weights W>
constexpr std::ptrdiff_t panel_elements(int k, int vectors, int V) {
  return static_cast<std::ptrdiff_t>(W == Weights::bf16 && RNNCORE_SIMD_BF16_PAIRS ? (k + 1) / 2 * 2 : k) * vectors * V;
}

// pre[m][b·G + g] = Σ_k rows[m][k] · block_b[k][g] for the G vectors of NB blocks, in passes of NT
// vectors so that each pass's accumulators stay in registers. A block's
// panel holds its passes one after the other (simd/kernels.hpp), each K rows of its own vectors.
template <class Arch, Weights W, int G, int NT, int M, int NB = 1, int G0 = 0>
inline void accumulate_passes(const typename Operands<Arch, W>::Input* const* rows, int k,
                              const typename Operands<Arch, W>::Weight* const* blocks, vf<Arch> (&pre)[M][NB * G]) {
  if constexpr (G0 < G) {
    constexpr int N = G - G0 < NT ? G - G0 : NT;
    constexpr int V = static_cast<int>(vf<Arch>::size);
    const typename Operands<Arch, W>::Weight* part[NB];
    for (int b = 0; b < NB; ++b) part[b] = blocks[b] + panel_elements<W>(k, G0, V);
    vf<Arch> acc[M][NB * N];
    accumulate<Arch, W, N, M, NB>(rows, k, part, acc);
    for (int m = 0; m < M; ++m)
      for (int b = 0; b < NB; ++b)
        for (int g = 0; g < N; ++g) pre[m][b * G + G0 + g] = acc[m][b * N + g];
    accumulate_passes<Arch, W, G, NT, M, NB, G0 + N>(rows, k, blocks, pre);
  }
}

// Rows of tile `t` of `tiles` over `count` rows: as even as possible, so that a batch of 16 on a
// 6-row tile runs 6, 5, 5 (10 FMA chains at worst) rather than 6, 6, 4 (8).
inline int tile_rows(int count, int tiles, int t) { return count / tiles + (t < count % tiles ? 1 : 0); }

// Blocks a single-row tile (batch 1) takes at once, each block `vectors` accumulator chains wide;
// `far`: the step's panels exceed kSingleRowFarBytes (they stream from L3 or memory, not L2).
// Measured on Zen 5 (bench/results/single_row_tiles_amd_epyc_avx512_2026-11-30.md): AVX-512 is
// fastest with 4–6 chains from L2 (one LSTM or Elman block, two GRU blocks: 1.05–1.18× over 8–9 at
// H ≤ 256) and 6–8 beyond (an LSTM at H 1024: 1.03×); 16 registers want up to 8, never more (the
// GRU's three blocks, 9 accumulators, ran 1.3–1.5× slower than two). NEON keeps 8 or more (not
// measured).
template <class Arch>
constexpr int single_row_blocks(int vectors, bool far) {
  if constexpr (vf<Arch>::size == 16) return ((far ? 6 : 4) + vectors - 1) / vectors;
  if constexpr (RegisterFile<Arch>::count < 32) return vectors >= 8 ? 1 : 8 / vectors;
  return (8 + vectors - 1) / vectors;
}
constexpr std::ptrdiff_t kSingleRowFarBytes = std::ptrdiff_t{8} << 20;

// Stores the first n (≤ V) lanes of v to unaligned memory.
template <class Arch>
inline void store_first(float* dst, vf<Arch> v, int n) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  if (n >= V) {
    v.store_unaligned(dst);
    return;
  }
  alignas(64) float tmp[V];
  v.store_aligned(tmp);
  for (int i = 0; i < n; ++i) dst[i] = tmp[i];
}

template <class Arch>
inline void store_zeros(float* dst, int n) {
  store_first<Arch>(dst, vf<Arch>(0.0f), n);
}

// V floats → V bf16 (round to nearest even), aligned store.
template <class Arch>
inline void store_bf16(std::uint16_t* dst, vf<Arch> v) {
#if RNNCORE_SIMD_BF16_PAIRS
  _mm256_store_si256(reinterpret_cast<__m256i*>(dst), (__m256i)_mm512_cvtneps_pbh(v));
#elif defined(RNNCORE_SIMD_ISA_AVX512)
  const __m512i b = _mm512_castps_si512(v);
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)))), 16);
  _mm256_store_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(r));
#elif defined(RNNCORE_SIMD_ISA_AVX2)
  const __m256i b = _mm256_castps_si256(v);
  const __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1)))), 16);
  _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
#else  // round to nearest even on the bits (as to_bf16), then narrow
  using U = xsimd::batch<std::uint32_t, Arch>;
  const U b = xsimd::bitwise_cast<U>(v);
  const U r = (b + U(0x7fffu) + ((b >> 16) & U(1u))) >> 16;
  alignas(64) std::uint32_t lanes[U::size];
  r.store_aligned(lanes);
  for (std::size_t i = 0; i < U::size; ++i) dst[i] = static_cast<std::uint16_t>(lanes[i]);
#endif
}

// n floats → bf16 (the runtime's conversion of inputs and initial states).
template <class Arch>
void to_bf16(const float* src, std::uint16_t* dst, std::int32_t n) {
  for (std::int32_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, &src[i], sizeof b);
    dst[i] = static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
}

// ---- input projection GEMM ----

// Blocks go in passes whose panels fit in L2; each pass takes every row through. Input rows are
// thus read from memory once per pass, not once per block.
constexpr std::ptrdiff_t kPanelPassBytes = 384 * 1024;

template <class Arch, Weights W, int NVEC>
void gemm_vectors(const GemmArgs& a) {
  using Op = Operands<Arch, W>;
  using Input = typename Op::Input;
  using Weight = typename Op::Weight;
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int MR = Tile<Arch, NVEC>::rows;
  const std::ptrdiff_t panel_block = panel_elements<W>(a.k, NVEC, V);
  const int pass = static_cast<int>(std::max<std::ptrdiff_t>(1, kPanelPassBytes / (panel_block * static_cast<std::ptrdiff_t>(sizeof(Weight)))));
  for (int jp = a.block_begin; jp < a.block_end; jp += pass) {
    const int je = jp + pass < a.block_end ? jp + pass : a.block_end;
    for (int r = a.row_begin; r < a.row_end; r += MR) {
      const int mr = a.row_end - r < MR ? a.row_end - r : MR;
      const Input* rows[MR];
      for (int m = 0; m < mr; ++m) {
        if constexpr (std::is_same<Input, float>::value) {
          const int t = (r + m) / a.batch, b = (r + m) % a.batch;
          rows[m] = a.a + t * a.a_st + b * a.a_sb;
        } else {
          rows[m] = a.a16 + (r + m) * a.a16_stride;
        }
      }
      for (int j = jp; j < je; ++j) {
        const Weight* panel = static_cast<const Weight*>(a.panel) + j * panel_block;
        const float* bias = a.bias + static_cast<std::ptrdiff_t>(j) * NVEC * V;
        with_rows<MR>(mr, [&](auto mrc) {
          constexpr int M = decltype(mrc)::value;
          vf<Arch> acc[M][NVEC];
          accumulate_passes<Arch, W, NVEC, Tile<Arch, NVEC>::vectors, M>(rows, a.k, &panel, acc);
          for (int m = 0; m < M; ++m) {
            float* c = a.c + (r + m) * a.c_row_stride + static_cast<std::ptrdiff_t>(j) * NVEC * V;
            for (int g = 0; g < NVEC; ++g) (acc[m][g] + vf<Arch>::load_aligned(bias + g * V)).store_aligned(c + g * V);
          }
        });
      }
    }
  }
}

template <class Arch, Weights W>
void gemm(const GemmArgs& a) {
  switch (a.vectors) {
    case 1: gemm_vectors<Arch, W, 1>(a); break;
    case 2: gemm_vectors<Arch, W, 2>(a); break;
    case 3: gemm_vectors<Arch, W, 3>(a); break;
    case 4: gemm_vectors<Arch, W, 4>(a); break;
    default: break;
  }
}

// ---- recurrent steps ----

// Stores a new state vector, multiplied by its state-dropout mask when there is one: the next step
// and the final state see the dropped state; the output does not. `bf16` (or null) receives the same
// values in bf16 for the next step's products.
template <class Arch>
inline void store_state(const StepArgs& s, float* dst, vf<Arch> v, const float* mask, int row, std::ptrdiff_t u,
                        std::uint16_t* bf16 = nullptr) {
  const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(row) * s.hidden_padded + u;
  if (mask != nullptr) v *= vf<Arch>::load_aligned(mask + row * s.mask_row_stride + u);
  v.store_aligned(dst + at);
  if (bf16 != nullptr) store_bf16<Arch>(bf16 + at, v);
}

// Per-row epilogue of one unit block; `acc` holds the recurrent pre-activations of the row's gates
// (G·NV vectors, gate-major).
template <class Arch, Cell C>
inline void cell_epilogue(const StepArgs& s, int row, int j, const vf<Arch>* acc) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int NV = vectors_per_gate(C);
  const std::ptrdiff_t u = static_cast<std::ptrdiff_t>(j) * NV * V;   // first unit of the block
  const std::ptrdiff_t hrow = static_cast<std::ptrdiff_t>(row) * s.hidden_padded;
  float* y = s.y + row * s.y_row_stride + u;
  if (s.lengths != nullptr && s.t >= s.lengths[row]) {  // past this row's length: state carries over, output is zero
    if (C != Cell::gru_reset_before && s.cell_out == nullptr) {  // (a projection's h is the runtime's)
      for (int n = 0; n < NV; ++n) {
        const vf<Arch> hp = vf<Arch>::load_aligned(s.h_prev + hrow + u + n * V);
        hp.store_aligned(s.h_next + hrow + u + n * V);
        if (s.h16_next != nullptr) store_bf16<Arch>(s.h16_next + hrow + u + n * V, hp);
        store_zeros<Arch>(y + n * V, s.hidden - static_cast<int>(u) - n * V);
      }
    }
    return;
  }
  const int units = s.hidden - static_cast<int>(u);  // valid units from u on
  constexpr int G = cell_gates(C);
  const float* px = s.proj + row * s.proj_row_stride + u * (C == Cell::gru_reset_before ? 3 : G);
  if constexpr (C == Cell::lstm) {
    const vf<Arch> c_prev = vf<Arch>::load_aligned(s.c + hrow + u);
    vf<Arch> pre_i = acc[0] + vf<Arch>::load_aligned(px), pre_f = acc[1] + vf<Arch>::load_aligned(px + V);
    vf<Arch> pre_o = acc[3] + vf<Arch>::load_aligned(px + 3 * V);
    const float* peep = s.peepholes != nullptr ? s.peepholes + u * 3 : nullptr;  // p_i, p_f, p_o of the block
    if (peep != nullptr) {  // i and f see c_{t−1}, o sees c_t
      pre_i = fmadd<Arch>(vf<Arch>::load_aligned(peep), c_prev, pre_i);
      pre_f = fmadd<Arch>(vf<Arch>::load_aligned(peep + V), c_prev, pre_f);
    }
    const vf<Arch> i = sigmoid_f32<Arch>(pre_i), f = sigmoid_f32<Arch>(pre_f);
    const vf<Arch> g = tanh_f32<Arch>(acc[2] + vf<Arch>::load_aligned(px + 2 * V));
    vf<Arch> c = fmadd<Arch>(f, c_prev, i * g);
    if (s.cell_clip > 0.0f) c = clip_f32<Arch>(c, s.cell_clip);
    if (peep != nullptr) pre_o = fmadd<Arch>(vf<Arch>::load_aligned(peep + 2 * V), c, pre_o);
    const vf<Arch> h = sigmoid_f32<Arch>(pre_o) * tanh_f32<Arch>(c);
    store_state(s, s.c, c, s.mask_c, row, u);
    if (s.cell_out != nullptr) {  // the runtime projects it into h and y once every block is done
      h.store_aligned(s.cell_out + hrow + u);
      if (s.cell_out16 != nullptr) store_bf16<Arch>(s.cell_out16 + hrow + u, h);
      return;
    }
    store_state(s, s.h_next, h, s.mask_h, row, u, s.h16_next);
    store_first<Arch>(y, h, units);
  } else if constexpr (C == Cell::gru_reset_after) {
    const vf<Arch> r = sigmoid_f32<Arch>(acc[0] + vf<Arch>::load_aligned(px));
    const vf<Arch> z = sigmoid_f32<Arch>(acc[1] + vf<Arch>::load_aligned(px + V));
    const vf<Arch> n = tanh_f32<Arch>(fmadd<Arch>(r, acc[2] + vf<Arch>::load_aligned(s.bias_rn + u),
                                              vf<Arch>::load_aligned(px + 2 * V)));
    const vf<Arch> hp = vf<Arch>::load_aligned(s.h_prev + hrow + u);
    const vf<Arch> h = fmadd<Arch>(z, hp - n, n);
    store_state(s, s.h_next, h, s.mask_h, row, u, s.h16_next);
    store_first<Arch>(y, h, units);
  } else if constexpr (C == Cell::gru_reset_before) {  // phase 1: r and z; the n gate needs all of r ⊙ h
    const vf<Arch> r = sigmoid_f32<Arch>(acc[0] + vf<Arch>::load_aligned(px));
    const vf<Arch> z = sigmoid_f32<Arch>(acc[1] + vf<Arch>::load_aligned(px + V));
    const vf<Arch> rh = r * vf<Arch>::load_aligned(s.h_prev + hrow + u);
    rh.store_aligned(s.rh + hrow + u);
    if (s.rh16 != nullptr) store_bf16<Arch>(s.rh16 + hrow + u, rh);
    z.store_aligned(s.z + hrow + u);
  } else {  // Elman: NV vectors of units
    for (int n = 0; n < NV; ++n) {
      const vf<Arch> pre = acc[n] + vf<Arch>::load_aligned(px + n * V);
      const vf<Arch> h = C == Cell::rnn_tanh ? tanh_f32<Arch>(pre) : relu_f32<Arch>(pre);
      store_state(s, s.h_next, h, s.mask_h, row, u + n * V, s.h16_next);
      store_first<Arch>(y + n * V, h, units - n * V);
    }
  }
}

// The rows a step's products read: h (f32) or its bf16 copy.
template <class Arch, Weights W>
inline const typename Operands<Arch, W>::Input* state_row(const float* f32_rows, const std::uint16_t* bf16_rows,
                                                          std::ptrdiff_t at) {
  if constexpr (std::is_same<typename Operands<Arch, W>::Input, float>::value) {
    (void)bf16_rows;
    return f32_rows + at;
  } else {
    (void)f32_rows;
    return bf16_rows + at;
  }
}

// The i-th block of a step's range in its visiting order (StepArgs::descending).
inline int block_at(const StepArgs& s, int i) { return s.descending ? s.block_end - 1 - (i - s.block_begin) : i; }

// One row (batch 1): NB unit blocks a tile (single_row_blocks), in the step's block order.
template <class Arch, Weights W, Cell C, int NB>
void single_row_step(const StepArgs& s) {
  using Op = Operands<Arch, W>;
  using Weight = typename Op::Weight;
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int G = cell_vectors(C), NT = Tile<Arch, G>::vectors;
  const std::ptrdiff_t panel_block = panel_elements<W>(s.state_size, G, V);
  const Weight* panel = static_cast<const Weight*>(s.panel);
  const typename Op::Input* row[1] = {state_row<Arch, W>(s.h_prev, s.h16_prev, static_cast<std::ptrdiff_t>(s.row_begin) * s.hidden_padded)};
  const int groups = (s.block_end - s.block_begin) / NB, tail = s.block_begin + groups * NB;
  const auto group = [&](int j) {  // blocks j .. j + NB − 1 in one tile
    const Weight* panels[NB];
    for (int b = 0; b < NB; ++b) panels[b] = panel + (j + b) * panel_block;
    vf<Arch> acc[1][NB * G];
    accumulate_passes<Arch, W, G, NT, 1, NB>(row, s.state_size, panels, acc);
    for (int b = 0; b < NB; ++b) cell_epilogue<Arch, C>(s, s.row_begin, j + b, acc[0] + b * G);
  };
  const auto single = [&](int j) {
    const Weight* panels[1] = {panel + j * panel_block};
    vf<Arch> acc[1][G];
    accumulate_passes<Arch, W, G, NT, 1>(row, s.state_size, panels, acc);
    cell_epilogue<Arch, C>(s, s.row_begin, j, acc[0]);
  };
  if (!s.descending) {
    for (int g = 0; g < groups; ++g) group(s.block_begin + g * NB);
    for (int j = tail; j < s.block_end; ++j) single(j);
  } else {
    for (int j = s.block_end - 1; j >= tail; --j) single(j);
    for (int g = groups - 1; g >= 0; --g) group(s.block_begin + g * NB);
  }
}

// Blocks outer, row tiles inner: a block's panel (H × G × V weights) is read from memory once per
// step and reused by every row tile from cache.
template <class Arch, Weights W, Cell C>
void step(const StepArgs& s) {
  using Op = Operands<Arch, W>;
  using Weight = typename Op::Weight;
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int G = cell_vectors(C);
  constexpr int MR = Tile<Arch, G>::rows;
  const std::ptrdiff_t panel_block = panel_elements<W>(s.state_size, G, V);
  const Weight* panel = static_cast<const Weight*>(s.panel);
  if (s.row_end - s.row_begin == 1) {  // one row (batch 1): several blocks per tile
    constexpr int NT = Tile<Arch, G>::vectors, near = single_row_blocks<Arch>(NT, false), far = single_row_blocks<Arch>(NT, true);
    if (near != far && (s.block_end - s.block_begin) * panel_block * static_cast<std::ptrdiff_t>(sizeof(Weight)) > kSingleRowFarBytes)
      return single_row_step<Arch, W, C, far>(s);
    return single_row_step<Arch, W, C, near>(s);
  }
  const int tiles = (s.row_end - s.row_begin + MR - 1) / MR;
  for (int i = s.block_begin; i < s.block_end; ++i) {
    const int j = block_at(s, i);
    const Weight* block = panel + j * panel_block;
    for (int t = 0, r = s.row_begin, mr = 0; t < tiles; ++t, r += mr) {
      mr = tile_rows(s.row_end - s.row_begin, tiles, t);
      const typename Op::Input* rows[MR];
      for (int m = 0; m < mr; ++m)
        rows[m] = state_row<Arch, W>(s.h_prev, s.h16_prev, static_cast<std::ptrdiff_t>(r + m) * s.hidden_padded);
      with_rows<MR>(mr, [&](auto mrc) {
        constexpr int M = decltype(mrc)::value;
        vf<Arch> acc[M][G];
        accumulate_passes<Arch, W, G, Tile<Arch, G>::vectors, M>(rows, s.state_size, &block, acc);
        for (int m = 0; m < M; ++m) cell_epilogue<Arch, C>(s, r + m, j, acc[m]);
      });
    }
  }
}

// GRU reset-before, phase 2: n = tanh(px_n + R_n (r ⊙ h)), h' = (1 − z) n + z h.
template <class Arch, Weights W>
void gru_reset_before_phase2(const StepArgs& s) {
  using Op = Operands<Arch, W>;
  using Weight = typename Op::Weight;
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int MR = Tile<Arch, 1>::rows;
  const std::ptrdiff_t panel_block = panel_elements<W>(s.hidden, 1, V);
  const int tiles = (s.row_end - s.row_begin + MR - 1) / MR;
  for (int i = s.block_begin; i < s.block_end; ++i) {
    const int j = block_at(s, i);
    for (int t = 0, r = s.row_begin, mr = 0; t < tiles; ++t, r += mr) {
      mr = tile_rows(s.row_end - s.row_begin, tiles, t);
      const typename Op::Input* rows[MR];
      for (int m = 0; m < mr; ++m) rows[m] = state_row<Arch, W>(s.rh, s.rh16, static_cast<std::ptrdiff_t>(r + m) * s.hidden_padded);
      with_rows<MR>(mr, [&](auto mrc) {
        constexpr int M = decltype(mrc)::value;
        vf<Arch> acc[M][1];
        const Weight* panels[1] = {static_cast<const Weight*>(s.panel_n) + j * panel_block};
        accumulate<Arch, W, 1, M>(rows, s.hidden, panels, acc);
        for (int m = 0; m < M; ++m) {
          const int row = r + m;
          const std::ptrdiff_t u = static_cast<std::ptrdiff_t>(j) * V;
          const std::ptrdiff_t hrow = static_cast<std::ptrdiff_t>(row) * s.hidden_padded;
          float* y = s.y + row * s.y_row_stride + u;
          const vf<Arch> hp = vf<Arch>::load_aligned(s.h_prev + hrow + u);
          if (s.lengths != nullptr && s.t >= s.lengths[row]) {
            hp.store_aligned(s.h_next + hrow + u);
            if (s.h16_next != nullptr) store_bf16<Arch>(s.h16_next + hrow + u, hp);
            store_zeros<Arch>(y, s.hidden - j * V);
            continue;
          }
          const float* px = s.proj + row * s.proj_row_stride + u * 3;
          const vf<Arch> n = tanh_f32<Arch>(acc[m][0] + vf<Arch>::load_aligned(px + 2 * V));
          const vf<Arch> h = fmadd<Arch>(vf<Arch>::load_aligned(s.z + hrow + u), hp - n, n);
          store_state(s, s.h_next, h, s.mask_h, row, u, s.h16_next);
          store_first<Arch>(y, h, s.hidden - j * V);
        }
      });
    }
  }
}

template <class Arch>
void math_probe(const float* x, float* e, float* sg, float* th, std::int32_t n) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  for (int i = 0; i + V <= n; i += V) {
    const vf<Arch> v = vf<Arch>::load_unaligned(x + i);
    exp_f32<Arch>(v).store_unaligned(e + i);
    sigmoid_f32<Arch>(v).store_unaligned(sg + i);
    tanh_f32<Arch>(v).store_unaligned(th + i);
  }
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#include "simd/train_impl.hpp"

namespace rnncore {
namespace simd {
namespace {

template <class Arch, Weights W>
constexpr void fill_weight_kernels(F32Kernels* k) {
  const int w = static_cast<int>(W);
  k->gemm[w] = &gemm<Arch, W>;
  k->step[w][static_cast<int>(Cell::lstm)] = &step<Arch, W, Cell::lstm>;
  k->step[w][static_cast<int>(Cell::gru_reset_after)] = &step<Arch, W, Cell::gru_reset_after>;
  k->step[w][static_cast<int>(Cell::gru_reset_before)] = &step<Arch, W, Cell::gru_reset_before>;
  k->step[w][static_cast<int>(Cell::rnn_tanh)] = &step<Arch, W, Cell::rnn_tanh>;
  k->step[w][static_cast<int>(Cell::rnn_relu)] = &step<Arch, W, Cell::rnn_relu>;
  k->gru_reset_before_phase2[w] = &gru_reset_before_phase2<Arch, W>;
}

// True when a kernel-family name carries the LSTM step's register tile, "_<rows>x<vectors>__".
template <class Arch>
constexpr bool names_its_tile(const char* name) {
  using T = Tile<Arch, cell_vectors(Cell::lstm)>;
  static_assert(T::rows < 10 && T::vectors < 10, "one digit each");
  for (int i = 0; name[i] != '\0'; ++i)
    if (name[i] == '_' && name[i + 1] == '0' + T::rows && name[i + 2] == 'x' && name[i + 3] == '0' + T::vectors &&
        name[i + 4] == '_' && name[i + 5] == '_')
      return true;
  return false;
}

template <class Arch>
constexpr F32Kernels make_kernels(const char* name) {
  F32Kernels k{};
  k.name = name;
  k.vector = static_cast<std::int32_t>(vf<Arch>::size);
  k.pass_vectors[0] = 0;
  k.pass_vectors[1] = Tile<Arch, 1>::vectors;
  k.pass_vectors[2] = Tile<Arch, 2>::vectors;
  k.pass_vectors[3] = Tile<Arch, 3>::vectors;
  k.pass_vectors[4] = Tile<Arch, 4>::vectors;
  fill_weight_kernels<Arch, Weights::f32>(&k);
  fill_weight_kernels<Arch, Weights::f16>(&k);
  fill_weight_kernels<Arch, Weights::bf16>(&k);
  k.bf16_pairs = RNNCORE_SIMD_BF16_PAIRS != 0;
  k.to_bf16 = &to_bf16<Arch>;
  k.mask_row = &simd_detail::mask_row_range<Arch>;
  k.matmul = &matmul<Arch>;
  k.activate = &activate<Arch>;
  k.pack_b = &pack_b<Arch>;
  k.lstm_forward = &lstm_forward_row<Arch>;
  k.gru_forward = &gru_forward_row<Arch>;
  k.lstm_backward = &lstm_backward_row<Arch>;
  k.gru_backward[0] = &gru_backward_row<Arch, false>;
  k.gru_backward[1] = &gru_backward_row<Arch, true>;
  k.math = &math_probe<Arch>;
  return k;
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_KERNELS_IMPL_HPP

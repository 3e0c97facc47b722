// f32 recurrent kernels written once over xsimd::batch<float, Arch>.
//
// Included by exactly one translation unit per instruction set (simd/f32_<isa>.cpp), each compiled
// with that ISA's flags. Everything here has internal linkage (anonymous namespace), so the copies
// built with different flags can never be merged by the linker.
//
// Micro-kernel: a tile of MR rows × one unit block (G gate vectors of V units) accumulates
// rows · panel over K in MR·G registers; the epilogue adds the step's input projection and applies
// the cell (gates, state update, output) while the tile is still in registers.
#ifndef RNNCORE_SIMD_KERNELS_IMPL_HPP
#define RNNCORE_SIMD_KERNELS_IMPL_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

// philox_simd.hpp first: it includes xsimd under pragmas that quiet GCC 12's AVX-512 headers.
#include "simd/philox_simd.hpp"

#include <xsimd/xsimd.hpp>

#include "simd/kernels.hpp"
#include "simd/math.hpp"

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

// acc[m][g] = Σ_k rows[m][k] · panel[k][g]  (panel: K × G × V, aligned).
template <class Arch, int G, int MR>
inline void accumulate(const float* const* rows, int k, const float* panel, vf<Arch> (&acc)[MR][G]) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  for (int m = 0; m < MR; ++m)
    for (int g = 0; g < G; ++g) acc[m][g] = vf<Arch>(0.0f);
  for (int p = 0; p < k; ++p) {
    vf<Arch> w[G];
    for (int g = 0; g < G; ++g) w[g] = vf<Arch>::load_aligned(panel + (static_cast<std::ptrdiff_t>(p) * G + g) * V);
    for (int m = 0; m < MR; ++m) {
      const vf<Arch> x(rows[m][p]);
      for (int g = 0; g < G; ++g) acc[m][g] = fmadd<Arch>(x, w[g], acc[m][g]);
    }
  }
}

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

// ---- input projection GEMM ----

// Blocks go in passes whose panels fit in L2; each pass takes every row through. Input rows are
// thus read from memory once per pass, not once per block.
constexpr std::ptrdiff_t kPanelPassBytes = 384 * 1024;

template <class Arch, int NVEC>
void gemm_vectors(const GemmArgs& a) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int MR = max_rows<Arch, NVEC>();
  const std::ptrdiff_t panel_block = static_cast<std::ptrdiff_t>(a.k) * NVEC * V;
  const int pass = static_cast<int>(std::max<std::ptrdiff_t>(1, kPanelPassBytes / (panel_block * 4)));
  for (int jp = a.block_begin; jp < a.block_end; jp += pass) {
    const int je = jp + pass < a.block_end ? jp + pass : a.block_end;
    for (int r = a.row_begin; r < a.row_end; r += MR) {
      const int mr = a.row_end - r < MR ? a.row_end - r : MR;
      const float* rows[MR];
      for (int m = 0; m < mr; ++m) {
        const int t = (r + m) / a.batch, b = (r + m) % a.batch;
        rows[m] = a.a + t * a.a_st + b * a.a_sb;
      }
      for (int j = jp; j < je; ++j) {
        const float* panel = a.panel + j * panel_block;
        const float* bias = a.bias + static_cast<std::ptrdiff_t>(j) * NVEC * V;
        with_rows<MR>(mr, [&](auto mrc) {
          constexpr int M = decltype(mrc)::value;
          vf<Arch> acc[M][NVEC];
          accumulate<Arch, NVEC, M>(rows, a.k, panel, acc);
          for (int m = 0; m < M; ++m) {
            float* c = a.c + (r + m) * a.c_row_stride + static_cast<std::ptrdiff_t>(j) * NVEC * V;
            for (int g = 0; g < NVEC; ++g) (acc[m][g] + vf<Arch>::load_aligned(bias + g * V)).store_aligned(c + g * V);
          }
        });
      }
    }
  }
}

template <class Arch>
void gemm(const GemmArgs& a) {
  switch (a.vectors) {
    case 1: gemm_vectors<Arch, 1>(a); break;
    case 2: gemm_vectors<Arch, 2>(a); break;
    case 3: gemm_vectors<Arch, 3>(a); break;
    case 4: gemm_vectors<Arch, 4>(a); break;
    default: break;
  }
}

// ---- recurrent steps ----

// Stores a new state vector, multiplied by its state-dropout mask when there is one: the next step
// and the final state see the dropped state; the output does not.
template <class Arch>
inline void store_state(const StepArgs& s, float* dst, vf<Arch> v, const float* mask, int row, std::ptrdiff_t u) {
  const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(row) * s.hidden_padded + u;
  if (mask != nullptr) v *= vf<Arch>::load_aligned(mask + row * s.mask_row_stride + u);
  v.store_aligned(dst + at);
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
    if (C != Cell::gru_reset_before) {
      for (int n = 0; n < NV; ++n) {
        vf<Arch>::load_aligned(s.h_prev + hrow + u + n * V).store_aligned(s.h_next + hrow + u + n * V);
        store_zeros<Arch>(y + n * V, s.hidden - static_cast<int>(u) - n * V);
      }
    }
    return;
  }
  const int units = s.hidden - static_cast<int>(u);  // valid units from u on
  constexpr int G = cell_gates(C);
  const float* px = s.proj + row * s.proj_row_stride + u * (C == Cell::gru_reset_before ? 3 : G);
  if constexpr (C == Cell::lstm) {
    const vf<Arch> i = sigmoid_f32<Arch>(acc[0] + vf<Arch>::load_aligned(px));
    const vf<Arch> f = sigmoid_f32<Arch>(acc[1] + vf<Arch>::load_aligned(px + V));
    const vf<Arch> g = tanh_f32<Arch>(acc[2] + vf<Arch>::load_aligned(px + 2 * V));
    const vf<Arch> o = sigmoid_f32<Arch>(acc[3] + vf<Arch>::load_aligned(px + 3 * V));
    const vf<Arch> c = fmadd<Arch>(f, vf<Arch>::load_aligned(s.c + hrow + u), i * g);
    const vf<Arch> h = o * tanh_f32<Arch>(c);
    store_state(s, s.c, c, s.mask_c, row, u);
    store_state(s, s.h_next, h, s.mask_h, row, u);
    store_first<Arch>(y, h, units);
  } else if constexpr (C == Cell::gru_reset_after) {
    const vf<Arch> r = sigmoid_f32<Arch>(acc[0] + vf<Arch>::load_aligned(px));
    const vf<Arch> z = sigmoid_f32<Arch>(acc[1] + vf<Arch>::load_aligned(px + V));
    const vf<Arch> n = tanh_f32<Arch>(fmadd<Arch>(r, acc[2] + vf<Arch>::load_aligned(s.bias_rn + u),
                                              vf<Arch>::load_aligned(px + 2 * V)));
    const vf<Arch> hp = vf<Arch>::load_aligned(s.h_prev + hrow + u);
    const vf<Arch> h = fmadd<Arch>(z, hp - n, n);
    store_state(s, s.h_next, h, s.mask_h, row, u);
    store_first<Arch>(y, h, units);
  } else if constexpr (C == Cell::gru_reset_before) {  // phase 1: r and z; the n gate needs all of r ⊙ h
    const vf<Arch> r = sigmoid_f32<Arch>(acc[0] + vf<Arch>::load_aligned(px));
    const vf<Arch> z = sigmoid_f32<Arch>(acc[1] + vf<Arch>::load_aligned(px + V));
    (r * vf<Arch>::load_aligned(s.h_prev + hrow + u)).store_aligned(s.rh + hrow + u);
    z.store_aligned(s.z + hrow + u);
  } else {  // Elman: NV vectors of units
    for (int n = 0; n < NV; ++n) {
      const vf<Arch> pre = acc[n] + vf<Arch>::load_aligned(px + n * V);
      const vf<Arch> h = C == Cell::rnn_tanh ? tanh_f32<Arch>(pre) : xsimd::max(pre, vf<Arch>(0.0f));
      store_state(s, s.h_next, h, s.mask_h, row, u + n * V);
      store_first<Arch>(y + n * V, h, units - n * V);
    }
  }
}

// Blocks outer, row tiles inner: a block's panel (H × G × V floats) is read from memory once per
// step and reused by every row tile from cache.
template <class Arch, Cell C>
void step(const StepArgs& s) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int G = cell_vectors(C);
  constexpr int MR = max_rows<Arch, G>();
  const std::ptrdiff_t panel_block = static_cast<std::ptrdiff_t>(s.hidden) * G * V;
  for (int j = s.block_begin; j < s.block_end; ++j) {
    for (int r = s.row_begin; r < s.row_end; r += MR) {
      const int mr = s.row_end - r < MR ? s.row_end - r : MR;
      const float* rows[MR];
      for (int m = 0; m < mr; ++m) rows[m] = s.h_prev + static_cast<std::ptrdiff_t>(r + m) * s.hidden_padded;
      with_rows<MR>(mr, [&](auto mrc) {
        constexpr int M = decltype(mrc)::value;
        vf<Arch> acc[M][G];
        accumulate<Arch, G, M>(rows, s.hidden, s.panel + j * panel_block, acc);
        for (int m = 0; m < M; ++m) cell_epilogue<Arch, C>(s, r + m, j, acc[m]);
      });
    }
  }
}

// GRU reset-before, phase 2: n = tanh(px_n + R_n (r ⊙ h)), h' = (1 − z) n + z h.
template <class Arch>
void gru_reset_before_phase2(const StepArgs& s) {
  constexpr int V = static_cast<int>(vf<Arch>::size);
  constexpr int MR = max_rows<Arch, 1>();
  const std::ptrdiff_t panel_block = static_cast<std::ptrdiff_t>(s.hidden) * V;
  for (int j = s.block_begin; j < s.block_end; ++j) {
    for (int r = s.row_begin; r < s.row_end; r += MR) {
      const int mr = s.row_end - r < MR ? s.row_end - r : MR;
      const float* rows[MR];
      for (int m = 0; m < mr; ++m) rows[m] = s.rh + static_cast<std::ptrdiff_t>(r + m) * s.hidden_padded;
      with_rows<MR>(mr, [&](auto mrc) {
        constexpr int M = decltype(mrc)::value;
        vf<Arch> acc[M][1];
        accumulate<Arch, 1, M>(rows, s.hidden, s.panel_n + j * panel_block, acc);
        for (int m = 0; m < M; ++m) {
          const int row = r + m;
          const std::ptrdiff_t u = static_cast<std::ptrdiff_t>(j) * V;
          const std::ptrdiff_t hrow = static_cast<std::ptrdiff_t>(row) * s.hidden_padded;
          float* y = s.y + row * s.y_row_stride + u;
          const vf<Arch> hp = vf<Arch>::load_aligned(s.h_prev + hrow + u);
          if (s.lengths != nullptr && s.t >= s.lengths[row]) {
            hp.store_aligned(s.h_next + hrow + u);
            store_zeros<Arch>(y, s.hidden - j * V);
            continue;
          }
          const float* px = s.proj + row * s.proj_row_stride + u * 3;
          const vf<Arch> n = tanh_f32<Arch>(acc[m][0] + vf<Arch>::load_aligned(px + 2 * V));
          const vf<Arch> h = fmadd<Arch>(vf<Arch>::load_aligned(s.z + hrow + u), hp - n, n);
          store_state(s, s.h_next, h, s.mask_h, row, u);
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

template <class Arch>
constexpr F32Kernels make_kernels(const char* name) {
  return F32Kernels{name,
                    static_cast<std::int32_t>(vf<Arch>::size),
                    &gemm<Arch>,
                    {&step<Arch, Cell::lstm>, &step<Arch, Cell::gru_reset_after>, &step<Arch, Cell::gru_reset_before>,
                     &step<Arch, Cell::rnn_tanh>, &step<Arch, Cell::rnn_relu>},
                    &gru_reset_before_phase2<Arch>,
                    &simd_detail::mask_row_range<Arch>,
                    &math_probe<Arch>};
}

}  // namespace
}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_KERNELS_IMPL_HPP

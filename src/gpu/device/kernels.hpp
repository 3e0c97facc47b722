// rnncore GPU kernels, written once for three compilers: hipcc (AMD), nvcc (NVIDIA, through
// src/gpu/vendor.hpp) and the host C++ compiler (tests/gpu/emulator.hpp runs them on the CPU).
//
// Every kernel is a struct with
//   using Args = ...;                                   its argument block (in device memory; the
//                                                       kernel receives a pointer to it)
//   template <class Exec> RNNCORE_HD static void run(const Exec& ex, const Args& a, int arg, float* smem);
// `Exec` is the only way a kernel body reaches the machine: block and thread indices, __syncthreads
// (ex.sync), the grid barrier of a cooperative launch (ex.grid_sync), warp shuffles (ex.shfl_xor)
// and the warp size (ex.warp_size), loads of data other blocks wrote (ex.load_coherent) and the
// run's per-step state resets (ex.reset_flag: a byte of ForwardArgs::resets). On a
// GPU it is DeviceExec (src/gpu/device/global.hpp), backed by src/gpu/vendor.hpp; in the emulator it runs
// each GPU thread as a fiber with real barriers. The numerics (gates, masks, lengths, wrapper
// chains) and the index arithmetic of every tiling are therefore the same code on the GPU and in
// the host tests. Nothing here knows the vendor; no literal warp size appears.
//
// Layouts (see docs/gpu.md):
//   packed, per (layer, direction): W [G·H][Ip] (Ip = I rounded up to 4, zero padded; absent for a
//     skip layer), R [G·H][Hs] (Hs = H rounded up to 4) — both of the weight storage type (f32, f16
//     or bf16) — and in f32: bias [G·H] = bW + bR (the reset-after GRU's
//     n gate keeps bR_n apart in bias_rn [H], because r multiplies it). Gate blocks in canonical order.
//   workspace: proj [T][B][G·H] (input projections of all steps, biases folded in), h[2] [B][Hs]
//     (double buffer; padding stays 0), c [B][Hs], rh / z [B][Hs] (reset-before GRU), x_cell
//     [T][B][I] (the input after input dropout), inner layers' outputs [T][B][D·H].
#ifndef RNNCORE_SRC_GPU_DEVICE_KERNELS_HPP
#define RNNCORE_SRC_GPU_DEVICE_KERNELS_HPP

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rnncore/philox.h"
#include "src/gpu/vendor.hpp"  // RNNCORE_GPU_INLINE, RNNCORE_GPU_UNROLL
#include "src/shared/half.hpp"

namespace rnncore {
namespace gpu {

/// Cells, numbered as rnncore::simd::Cell (checked in src/gpu/host/plan.hpp).
enum CellId : int { kLstm = 0, kGruResetAfter = 1, kGruResetBefore = 2, kRnnTanh = 3, kRnnRelu = 4 };
/// Wrappers per layer (== rnncore::kMaxWrappers, checked in src/gpu/host/plan.hpp).
constexpr int kWrappers = 4;
/// Threads per block of the element-wise kernels, and the most the persistent kernel is launched
/// with (its launch bound; the host may use fewer, a multiple of the warp size).
constexpr int kBlockThreads = 256;
constexpr int kPersistentThreads = 256;

RNNCORE_HD inline int imin(int a, int b) { return a < b ? a : b; }
// Loops over the (up to) 4 units of a group run to 4 with a guard, `for (j < 4) if (j < n)`, so
// that compilers unroll them and per-unit arrays stay in registers.

/// Copies elements 0..count-1 from global to shared memory, spread over the block's threads, in
/// rounds of up to L elements per thread: a round issues all its loads (`load(e)`) before its first
/// store (`store(e, v)`), so a thread waits for one memory round trip per round instead of one per
/// element. Measured on the H200 (docs/gpu.md, "On the H200"): the f32 persistent kernel's step at
/// B = 16 went from 20.0 to 14.9 us and the f16 matrix-unit step kernel's at B = 64 from 130 to 68
/// us; the persistent kernel on the matrix units did not move. The f32 step kernel (+7 %) and both
/// projection GEMMs (+6 %, +20 % at M = 1280) were slower with it, so they keep their loops.
template <int L, class Load, class Store>
RNNCORE_HD RNNCORE_GPU_INLINE void stage_rounds(int tid, int threads, int count, Load load, Store store) {
  using V = decltype(load(0));
  for (int base = tid; base < count; base += L * threads) {
    V v[L];
    RNNCORE_GPU_UNROLL
    for (int j = 0; j < L; ++j) {
      const int e = base + j * threads;
      v[j] = e < count ? load(e) : V{};
    }
    RNNCORE_GPU_UNROLL
    for (int j = 0; j < L; ++j) {
      const int e = base + j * threads;
      if (e < count) store(e, v[j]);
    }
  }
}

/// Kernel names (host side: launch errors and test logs name the kernel), indexed by CellId.
constexpr const char* kStepNames[] = {"f32_lstm_step_tiled", "f32_gru_step_tiled", "f32_gru_reset_before_step_tiled",
                                      "f32_rnn_tanh_step_tiled", "f32_rnn_relu_step_tiled"};
constexpr const char* kPersistentNames[] = {"f32_lstm_recurrence_persistent", "f32_gru_recurrence_persistent",
                                            "f32_gru_reset_before_recurrence_persistent",
                                            "f32_rnn_tanh_recurrence_persistent", "f32_rnn_relu_recurrence_persistent"};

// ------------------------------------------------------------------------------------ numerics

/// σ(x) = 1 / (1 + e^-x), the formula of the reference backend.
RNNCORE_HD inline float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
RNNCORE_HD inline float act_tanh(float x) { return tanhf(x); }
RNNCORE_HD inline float act_relu(float x) { return x > 0.0f || x != x ? x : 0.0f; }  // NaN stays NaN
/// TF's clip_by_value(v, -clip, clip) of the LSTM cell state, the reference's; clip 0: none.
RNNCORE_HD inline float clip_cell(float v, float clip) {
  if (clip <= 0.0f) return v;
  return v < -clip ? -clip : v > clip ? clip : v;
}

/// Four floats loaded and stored as one 16-byte access (callers guarantee the alignment).
struct alignas(16) F4 {
  float x, y, z, w;
};
RNNCORE_HD inline F4 load4(const float* p) { return *reinterpret_cast<const F4*>(p); }

// ------------------------------------------------------------------------------------ weight storage

/// Storage types of W and R (PlanOptions::weight_dtype): f32, or IEEE binary16 / bfloat16 bits.
/// Products and sums stay f32; only loads convert. The conversions are the library's own
/// (src/shared/half.hpp, host and device): exact bit manipulation, the same results from every
/// compiler, round-to-nearest-even when packing.
struct WeightF16 {
  uint16_t bits;
};
struct WeightBF16 {
  uint16_t bits;
};
enum WeightId : int { kWeightF32 = 0, kWeightF16 = 1, kWeightBF16 = 2 };
RNNCORE_HD constexpr WeightId weight_id_of(float) { return kWeightF32; }
RNNCORE_HD constexpr WeightId weight_id_of(WeightF16) { return kWeightF16; }
RNNCORE_HD constexpr WeightId weight_id_of(WeightBF16) { return kWeightBF16; }

RNNCORE_HD inline float to_float(float w) { return w; }
RNNCORE_HD inline float to_float(WeightBF16 w) { return detail::bf16_to_f32(w.bits); }
RNNCORE_HD inline float to_float(WeightF16 w) { return detail::f16_to_f32(w.bits); }

/// f32 → storage type, round to nearest even (NaN stays NaN, overflow goes to inf).
template <class WT>
RNNCORE_HD inline WT from_float(float f);
template <>
RNNCORE_HD inline float from_float<float>(float f) {
  return f;
}
template <>
RNNCORE_HD inline WeightBF16 from_float<WeightBF16>(float f) {
  return WeightBF16{detail::f32_to_bf16(f)};
}
template <>
RNNCORE_HD inline WeightF16 from_float<WeightF16>(float f) {
  return WeightF16{detail::f32_to_f16(f)};
}

/// Four consecutive weights (16-byte aligned for f32, 8-byte for the 16-bit types) as floats.
RNNCORE_HD inline F4 load4w(const float* p) { return load4(p); }
template <class WT>
RNNCORE_HD inline F4 load4w(const WT* p) {
  struct alignas(8) Four {
    WT v[4];
  };
  const Four q = *reinterpret_cast<const Four*>(p);
  return F4{to_float(q.v[0]), to_float(q.v[1]), to_float(q.v[2]), to_float(q.v[3])};
}

// ------------------------------------------------------------------------------------ matrix units

/// A warp's 16×16×16 matrix multiply-accumulate, D = A·B + C with A [16 rows m][16 k] and B [16 k][16
/// columns n] of f16 or bf16 (MmaFrag<WeightF16> / <WeightBF16>) and C, D in f32: ex.mma_16x16x16(a, b, c).
/// Every lane of the warp takes part; each holds E = 256 / warp elements of A, of B and of C, at the
/// vendor's positions (mma_coord). On a GPU the op is src/gpu/vendor.hpp's rnncore_gpu_mma_* (NVIDIA
/// sm_80+: two mma.sync m16n8k16; AMD CDNA: one MFMA 16x16x16); the emulator (tests/gpu/emulator.hpp)
/// gathers the fragments by its own model of both layouts, so a kernel that places an element
/// wrongly gets a wrong product there too. Kernels use it only where the plan says the device has
/// matrix units (DeviceDescription::mma).
constexpr int kMmaDim = 16;

/// One operand's fragment of a lane: element i is bits 16·(i % 2) of r[i / 2] (the registers'
/// packing on both vendors); E = 256 / warp elements are used (8 on warp 32, 4 on warp 64).
template <class WT>
struct MmaFrag {
  uint32_t r[4];
};
/// The accumulator fragment of a lane: c[i] for i < E.
struct MmaAcc {
  float c[8];
};

/// Which matrix a fragment position belongs to.
enum MmaOperand : int { kMmaA = 0, kMmaB = 1, kMmaC = 2 };

/// Position of element i of `lane`'s fragment of operand `op`: (row, col) of A [m][k], B [k][n] or
/// C [m][n]. Warp 32 is NVIDIA's mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16", f16 /
/// bf16) for n in [0, 8) (elements 0-3 of B and C) and again for n in [8, 16) (elements 4-7), with
/// group g = lane / 4 and t = lane % 4: A (g + 8·(i/2 % 2), 2t + i%2 + 8·(i/4)); B (2t + i%2 +
/// 8·(i/2 % 2), g + 8·(i/4)); C (g + 8·(i/2 % 2), 2t + i%2 + 8·(i/4)). Warp 64 is AMD's
/// v_mfma_f32_16x16x16{f16,bf16_1k} with q = lane / 16: A (lane % 16, 4q + i); B (4q + i, lane % 16);
/// C (4q + i, lane % 16).
RNNCORE_HD inline void mma_coord(int warp, int op, int lane, int i, int* row, int* col) {
  if (warp == 64) {
    const int l16 = lane % 16, k = 4 * (lane / 16) + i;
    *row = op == kMmaA ? l16 : k;
    *col = op == kMmaA ? k : l16;
    return;
  }
  const int g = lane / 4, t = lane % 4, half = i / 4, pair = (i / 2) % 2;
  const int inner = 2 * t + i % 2;  // the element's position within its 8-wide stripe
  if (op == kMmaA) {
    *row = g + 8 * pair;
    *col = inner + 8 * half;
  } else if (op == kMmaB) {
    *row = inner + 8 * pair;
    *col = g + 8 * half;
  } else {
    *row = g + 8 * pair;
    *col = inner + 8 * half;
  }
}

/// This lane's fragment of a 16 × 16 operand held as 16-bit bits in `tile`, element (row, col) at
/// tile[row · row_stride + col · col_stride].
template <class WT, class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE MmaFrag<WT> mma_load(const Exec& ex, int op, const uint16_t* tile, int row_stride,
                                                   int col_stride) {
  const int ws = ex.warp_size(), lane = ex.tx() % ws, e = 256 / ws;
  MmaFrag<WT> f = {{0u, 0u, 0u, 0u}};
  RNNCORE_GPU_UNROLL
  for (int i = 0; i < 8; ++i) {
    if (i < e) {
      int row = 0, col = 0;
      mma_coord(ws, op, lane, i, &row, &col);
      f.r[i / 2] |= static_cast<uint32_t>(tile[row * row_stride + col * col_stride]) << (16 * (i % 2));
    }
  }
  return f;
}

/// TF32 operands (f32 weights under PlanOptions::gpu_half_math, NVIDIA only): a warp's 16×16×8
/// multiply-accumulate ex.mma_16x16x8(a, b, c), A [16 m][8 k] and B [8 k][16 n] as TF32 patterns
/// (detail::f32_to_tf32, round to nearest, ties away), C, D in f32 (MmaAcc). On a GPU it is two
/// mma.sync m16n8k8 .tf32 (columns 0-7, then 8-15; rnncore_gpu_mma_tf32 of src/gpu/vendor.hpp, a trap
/// on AMD, which has no TF32: DeviceDescription::mma_tf32 keeps plans from it there).
struct Tf32 {
  uint32_t bits;
};
/// Operand element i of a lane's MmaFrag<Tf32> is the whole register r[i] (4 of A, 4 of B).
constexpr int kMmaTf32K = 8;

/// Position of element i (0-3) of `lane`'s TF32 fragment of operand `op` (warp 32 only): (row, col)
/// of A [16][8], B [8][16] or C [16][16]. PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32, with
/// g = lane / 4 and t = lane % 4: A a_i at (g + 8·(i % 2), t + 4·(i / 2)); B b_i at (t + 4·i, g),
/// here i % 2 of the instruction for n / 8 = i / 2; C as mma.m16n8k16's (mma_coord, elements 0-7).
RNNCORE_HD inline void mma_coord_tf32(int op, int lane, int i, int* row, int* col) {
  const int g = lane / 4, t = lane % 4;
  if (op == kMmaA) {
    *row = g + 8 * (i % 2);
    *col = t + 4 * (i / 2);
  } else if (op == kMmaB) {
    *row = t + 4 * (i % 2);
    *col = g + 8 * (i / 2);
  } else {
    mma_coord(32, kMmaC, lane, i, row, col);
  }
}

/// This lane's TF32 fragment of a 16 × 8 A or 8 × 16 B held as TF32 patterns in `tile`, element
/// (row, col) at tile[row · row_stride + col · col_stride].
template <class OT, class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE MmaFrag<OT> mma_load(const Exec& ex, int op, const uint32_t* tile, int row_stride,
                                                   int col_stride) {
  const int lane = ex.tx() % ex.warp_size();
  MmaFrag<OT> f = {{0u, 0u, 0u, 0u}};
  RNNCORE_GPU_UNROLL
  for (int i = 0; i < 4; ++i) {
    int row = 0, col = 0;
    mma_coord_tf32(op, lane, i, &row, &col);
    f.r[i] = tile[row * row_stride + col * col_stride];
  }
  return f;
}

/// The matrix-unit operand of weights stored as WT: the operand type, its bits as staged in shared
/// memory, the k of one op, and the conversions of x and of a weight (round to nearest even for
/// f16 / bf16, TF32's ties away for f32 weights).
template <class WT>
struct MmaOperandOf {
  using Type = WT;
  using Bits = uint16_t;
  static constexpr int kK = kMmaDim;
  RNNCORE_HD static Bits of_x(float x) { return from_float<WT>(x).bits; }
  RNNCORE_HD static Bits of_weight(WT w) { return w.bits; }
};
template <>
struct MmaOperandOf<float> {
  using Type = Tf32;
  using Bits = uint32_t;
  static constexpr int kK = kMmaTf32K;
  RNNCORE_HD static Bits of_x(float x) { return detail::f32_to_tf32(x); }
  RNNCORE_HD static Bits of_weight(float w) { return detail::f32_to_tf32(w); }
};

/// The op of a fragment type: 16×16×16 for f16 / bf16, 16×16×8 for TF32.
template <class Exec, class OT>
RNNCORE_HD RNNCORE_GPU_INLINE void mma_op(const Exec& ex, const MmaFrag<OT>& a, const MmaFrag<OT>& b, MmaAcc& c) {
  ex.mma_16x16x16(a, b, c);
}
template <class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void mma_op(const Exec& ex, const MmaFrag<Tf32>& a, const MmaFrag<Tf32>& b, MmaAcc& c) {
  ex.mma_16x16x8(a, b, c);
}

// ------------------------------------------------------------------------------------ masks

/// One dropout mask site of one run, resolved on the host from src/internal/dropout.hpp's Mask
/// (seed, site word, keep threshold, variational / shared), in a form kernels can take by value.
struct MaskSite {
  uint64_t seed;
  uint32_t site;
  uint32_t width;
  rnncore_mask_params params;
  int32_t active;       ///< the run drops something here
  int32_t variational;  ///< t' = 0
  uint32_t time_offset; ///< else t' = t + time_offset (ForwardArgs::time_offset: streaming in chunks)
  int32_t shared;       ///< TF-style variational mask shared by the batch: row 0
};

/// The mask function's row (c1) of batch row b: 0 for a shared mask, else the caller's row id or b.
RNNCORE_HD inline uint32_t mask_row_id(const MaskSite& m, const uint32_t* row_ids, int b) {
  if (m.shared) return 0u;
  return row_ids != nullptr ? row_ids[b] : static_cast<uint32_t>(b);
}

/// Keep bits of units 4q .. 4q+3 at time t (bit j: unit 4q + j kept): one Philox call, exactly
/// rnncore_mask_word4 of include/rnncore/philox.h, so masks equal the CPU's bit for bit.
RNNCORE_HD inline uint32_t mask_bits4(const MaskSite& m, uint32_t step, int t, const uint32_t* row_ids, int b,
                                      uint32_t q) {
  const uint32_t t_prime = m.variational ? 0u : static_cast<uint32_t>(t) + m.time_offset;
  return rnncore_mask_word4(m.seed, step, m.site, t_prime, mask_row_id(m, row_ids, b), q, m.width, &m.params);
}

/// v[j] *= (kept ? 1/keep : 0) for the n ≤ 4 units of group q: the reference's multiply_by_mask.
RNNCORE_HD RNNCORE_GPU_INLINE void apply_mask4(const MaskSite& m, uint32_t step, int t, const uint32_t* row_ids, int b, uint32_t q,
                                   float* v, int n) {
  if (!m.active) return;
  const uint32_t bits = mask_bits4(m, step, t, row_ids, b, q);
  for (int j = 0; j < 4; ++j) if (j < n) v[j] *= ((bits >> j) & 1u) ? m.params.scale : 0.0f;
}

// ------------------------------------------------------------------------------------ arguments

/// One direction of one layer. Element strides; pointers are device memory.
struct DirArgs {
  const float* x;  ///< the cell input rows: x + t·x_st + b·x_sb (x_cell after input dropout)
  int64_t x_st, x_sb;
  const float* x_raw;  ///< the layer's input before any input dropout (residuals, the dropout pre-pass)
  int64_t xr_st, xr_sb;
  float* x_cell;  ///< [T][B][I] destination of the input-dropout pre-pass, or null
  float* y;       ///< this direction's first output column
  int64_t y_st, y_sb;
  const void* w;         ///< [G·H][Ip] of the plan's weight storage type, null for a skip layer
  const void* r;         ///< [G·H][Hs] of the weight storage type
  const float* bias;     ///< [G·H]
  const float* bias_rn;  ///< [H] reset-after GRU, else null
  float* proj;           ///< [T][B][G·H]
  float* h[2];           ///< [B][Hs] each
  float* c;              ///< [B][Hs] (LSTM) or null
  float* rh;             ///< [B][Hs] r ⊙ h (reset-before GRU) or null
  float* zg;             ///< [B][Hs] z (reset-before GRU) or null
  const float* h0;       ///< [B][H] or null (zeros)
  const float* c0;
  float* hy;  ///< [B][H] or null
  float* cy;
  const float* peep;  ///< LSTM peepholes [3][H] (p_i, p_f, p_o), or null
  MaskSite input[kWrappers], output[kWrappers], state_h[kWrappers], state_c[kWrappers];
  int32_t reverse;
  float* keep;  ///< training forward: reserve rows [T][B][LayerArgs::keep_width] (slot-major), else null
  // (last, so that the fields above keep their offsets: the matrix-unit RNN instances on sm_80 are
  // within a register of spilling)
  const void* wp;  ///< LSTM projection W_proj [P][H] of the weight storage type, or null
  float* m;        ///< [B][Hs] the projected LSTM's cell output m (the projection's input), or null
};

/// One layer of one forward run: the argument block of every per-layer kernel.
/// (out and proj_clip fill the alignment holes before `lengths` and `resets`: the other fields keep
/// their offsets, as the matrix-unit RNN instances on sm_80 are within a register of spilling.)
struct LayerArgs {
  int32_t gates, batch, steps, in_size, in_pad, hidden, hidden_stride, dirs;
  int32_t num_wrappers;
  int32_t residual[kWrappers];  ///< wrapper w is a (default, additive) residual wrapper
  int32_t out;                  ///< units of h and y per direction: P with an LSTM projection, else hidden
  const int32_t* lengths;       ///< [B] device copy of seq_lengths, or null (every row runs all steps)
  const uint32_t* row_ids;      ///< [B] device copy of row_ids, or null
  uint32_t step;                ///< run counter mod 2^32 (the mask function's c3)
  float cell_clip;              ///< LSTM cell clip (TF clip_by_value), 0: none
  int32_t keep_width, keep_h;   ///< training: a reserve row's elements, and where its h starts (keep_width, keep_h)
  int32_t lstm_ext;             ///< LSTM peepholes or cell clip: the reserve row also keeps c before its clip and h̃
  float proj_clip;              ///< the projection's clip (TF clip_by_value), 0: none
  const uint8_t* resets;        ///< device copy of ForwardArgs::resets (unidirectional layers), or null
  int64_t reset_st, reset_sb;   ///< its strides: resets[t·reset_st + b·reset_sb]
  DirArgs dir[2];
};

/// Inter-layer dropout on a time-major layer output [T][B][width].
struct InterLayerArgs {
  float* out;
  int32_t steps, batch, width;
  const uint32_t* row_ids;
  uint32_t step;
  MaskSite mask;
};

/// The Embedding before layer 0: rows of the table for the token ids into layer 0's input.
struct EmbedArgs {
  const int32_t* ids;   ///< ForwardArgs::x, token ids in the run's layout: ids[t·id_st + b·id_sb]
  int64_t id_st, id_sb;
  const float* table;   ///< [vocab][width] in the packed buffer
  float* out;           ///< [T][B][width] layer 0's input rows in the workspace
  int32_t steps, batch, vocab, width;
};

/// The last step's outputs of each row for a head with last_step_only: forward columns at the
/// row's length − 1, reverse columns (direction 1) at step 0; zeros for a row of length 0.
struct LastRowsArgs {
  const float* in;  ///< [T][B][width] the last layer's output
  float* out;       ///< [B][width]
  const int32_t* lengths;
  int32_t steps, batch, width, per_dir;  ///< per_dir: O, the columns of one direction
};

/// Activations of a Dense (StackSpec's DenseSpec::activation: none 0, relu 1, sigmoid 2, tanh 3, softmax 4).
constexpr int32_t kDenseSoftmax = 4;

/// One Dense of the chain after the last layer: out = act(in · Wᵀ + b) on `rows` rows. The head
/// (`y` set) writes the caller's y instead: row r is step r / batch of batch row r % batch (every
/// step; in the run's layout) or batch row r (last_step), zero past a row's length.
struct DenseArgs {
  const float* in;  ///< [rows][in_w]
  float* out;       ///< [rows][out_w] (a Dense before the head)
  float* y;         ///< the head's destination, or null
  float* keep;      ///< a training forward's head: its activations [rows][out_w] too (the reserve's head_y), or null
  const float* w;   ///< [out_w][in_w]
  const float* bias;
  const int32_t* lengths;
  int32_t rows, in_w, out_w, act;
  int32_t steps, batch, last_step, batch_major;
};

/// Argument blocks of the ends of a run, in the workspace: the embedding, the last rows, and the
/// Dense chain (the head last).
struct EndsArgs {
  EmbedArgs embed;
  LastRowsArgs last;
  DenseArgs dense[4];  ///< kMaxPreHead + 1
};

/// Packing of one (layer, direction) from its canonical parameters, staged in device memory.
struct PackArgs {
  const float* staging;  ///< the canonical parameters of this (layer, direction)
  int64_t w_at, r_at, bw_at, br_at;  ///< element offsets of W_0, R_0, bW_0, bR_0 in staging (w_at < 0: skip layer)
  void* w;  ///< of the weight storage type
  void* r;
  float* bias;
  float* bias_rn;
  float* peep;         ///< LSTM peepholes [3][H], or null
  int64_t peep_at[3];  ///< element offsets of p_i, p_f, p_o in staging
  void* wp;            ///< LSTM projection [P][H] of the weight storage type, or null
  int64_t wp_at;       ///< element offset of W_proj in staging
  int32_t gates, hidden, in_size, in_pad, hidden_stride, cell;
  int32_t out;         ///< R's row width in the canonical buffer: P with a projection, else hidden
};

// ------------------------------------------------------------------------------------ helpers

/// First element index of this thread in a grid-stride loop over the x dimension, and the stride.
template <class Exec>
RNNCORE_HD inline int64_t grid_first(const Exec& ex) {
  return static_cast<int64_t>(ex.bx()) * ex.bdx() + ex.tx();
}
template <class Exec>
RNNCORE_HD inline int64_t grid_stride(const Exec& ex) {
  return static_cast<int64_t>(ex.gdx()) * ex.bdx();
}

/// Whether batch row b takes part in step t (t < its length).
RNNCORE_HD inline bool row_active(const LayerArgs& a, int t, int b) {
  return t < (a.lengths != nullptr ? a.lengths[b] : a.steps);
}

/// Where ForwardArgs::resets says whether row b's state is replaced by its initial state before step
/// t (docs/design.md §3.5; the caller checks t < the row's length). Kernels read the byte with
/// ex.reset_flag at each place that needs it, so the emulator's mutation tests can leave out each.
RNNCORE_HD inline const uint8_t* reset_byte(const uint8_t* resets, int64_t st, int64_t sb, int t, int b) {
  return resets + t * st + b * sb;
}

/// Copies units u0.. of row b of an initial state (h0 or c0 [B][H]; null: zeros) into v.
RNNCORE_HD RNNCORE_GPU_INLINE void initial4(const float* s0, int H, int b, int u0, float* v, int n) {
  for (int j = 0; j < 4; ++j) if (j < n) v[j] = s0 != nullptr ? s0[static_cast<int64_t>(b) * H + u0 + j] : 0.0f;
}

/// Values a training forward keeps per row and step, in units of H (src/internal/plan_impl.hpp,
/// keep_slots): LSTM i f g o c h; GRU reset-after r z n (R_n h + bR_n) h; reset-before r z n h; RNN h.
/// An LSTM with peepholes or a cell clip keeps the CPU's wider row (keep_width): i f g o c m c_raw,
/// then h and h̃ (both m without a projection).
RNNCORE_HD constexpr int cell_keep_slots(int c) {
  return c == kLstm ? 6 : c == kGruResetAfter ? 5 : c == kGruResetBefore ? 4 : 1;
}

/// A reserve row's elements and where its h starts: the layer's (keep_width, keep_h) for an LSTM,
/// which may keep the wider row; a constant number of slots for the other cells (so their kernels
/// read no more arguments than before).
template <int C>
RNNCORE_HD inline int64_t keep_row_width(const LayerArgs& a) {
  return C == kLstm ? a.keep_width : cell_keep_slots(C) * static_cast<int64_t>(a.hidden);
}
template <int C>
RNNCORE_HD inline int64_t keep_row_h(const LayerArgs& a) {
  return C == kLstm ? a.keep_h : (cell_keep_slots(C) - 1) * static_cast<int64_t>(a.hidden);
}

/// Training forward: writes v[0..n) at element `at` (slot · H, or keep_h) + u0 of row (t, b).
template <int C>
RNNCORE_HD RNNCORE_GPU_INLINE void keep4(const LayerArgs& a, const DirArgs& d, int t, int b, int u0, int64_t at, const float* v, int n) {
  if (d.keep == nullptr) return;
  float* k = d.keep + (static_cast<int64_t>(t) * a.batch + b) * keep_row_width<C>(a) + at + u0;
  for (int j = 0; j < 4; ++j) if (j < n) k[j] = v[j];
}

/// The cell's update for units u0 .. u0+3 (u0 a multiple of 4) of batch row b at step s (time t),
/// from the recurrent dot products rec[4·gate + j] of this phase's gates: gates, state update, length
/// handling, state dropout (wrappers innermost first), the raw cell output into y. Where the row is
/// reset before its next step (ForwardArgs::resets), the state carried on is its initial state
/// instead: the next step reads it from the same buffers, so no kernel needs a reset of its own.
/// The reset-before GRU runs it twice per step: PHASE 1 makes r ⊙ h and z; PHASE 2 (rec = R_n (r ⊙ h)) the rest.
/// PROJ: the kernel may run a projected LSTM (the per-step kernels; the persistent kernel never
/// does, and compiles without that branch: it kept 8–16 bytes of stack on sm_90 at 80 registers).
template <int C, int PHASE, bool PROJ = true, class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void cell_epilogue4(const Exec& ex, const LayerArgs& a, const DirArgs& d, int s, int t, int b, int u0,
                                      const float* rec) {
  const int H = a.hidden;
  const int64_t Hs = a.hidden_stride;
  const int n = imin(4, H - u0);
  const float* hp = d.h[s & 1] + b * Hs;
  float* hn = d.h[(s + 1) & 1] + b * Hs;
  float* yr = d.y + t * d.y_st + b * d.y_sb;
  // A projected LSTM's step ends in f32_lstm_projection_step, which writes h and y (and carries h
  // over past a row's length); the epilogue leaves it m and c.
  const bool projected = PROJ && C == kLstm && d.wp != nullptr;
  if (!row_active(a, t, b)) {  // past the row's length: the state carries over, the output is zero
    if (projected) return;
    if constexpr (PHASE != 1) {
      for (int j = 0; j < 4; ++j) if (j < n) {
        hn[u0 + j] = ex.load_coherent(hp + u0 + j);
        yr[u0 + j] = 0.0f;
      }
    }
    return;
  }
  const int64_t GH = static_cast<int64_t>(a.gates) * H;
  const float* pr = d.proj + (static_cast<int64_t>(t) * a.batch + b) * GH + u0;
  if constexpr (PHASE == 1) {  // reset-before GRU: r ⊙ h feeds every unit's n gate, after a barrier
    float r4[4] = {0.0f, 0.0f, 0.0f, 0.0f}, z4[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // for the reserve
    for (int j = 0; j < 4; ++j) if (j < n) {
      const float r = act_sigmoid(pr[j] + rec[j]);
      z4[j] = act_sigmoid(pr[H + j] + rec[4 + j]);
      r4[j] = r;
      d.zg[b * Hs + u0 + j] = z4[j];
      d.rh[b * Hs + u0 + j] = r * ex.load_coherent(hp + u0 + j);
    }
    keep4<C>(a, d, t, b, u0, 0, r4, n);
    keep4<C>(a, d, t, b, u0, H, z4, n);
  } else {
    float hnew[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int next = d.reverse ? t - 1 : t + 1;  // the step after t in this direction
    const bool restart = a.resets != nullptr && next >= 0 && next < a.steps && row_active(a, next, b) &&
                         ex.reset_flag(reset_byte(a.resets, a.reset_st, a.reset_sb, next, b));
    if constexpr (C == kLstm) {
      float cnew[4] = {0.0f, 0.0f, 0.0f, 0.0f}, craw[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float* cr = d.c + b * Hs + u0;
      float gate[4][4] = {};  // i f g o of each unit
      const float* pp = d.peep;  // peepholes: i, f see c_{t-1}, o sees c_t
      for (int j = 0; j < 4; ++j) if (j < n) {
        float pi = pr[j] + rec[j], pf = pr[H + j] + rec[4 + j], po = pr[3 * H + j] + rec[12 + j];
        if (pp != nullptr) {
          pi += pp[u0 + j] * cr[j];
          pf += pp[H + u0 + j] * cr[j];
        }
        gate[0][j] = act_sigmoid(pi);
        gate[1][j] = act_sigmoid(pf);
        gate[2][j] = act_tanh(pr[2 * H + j] + rec[8 + j]);
        craw[j] = gate[1][j] * cr[j] + gate[0][j] * gate[2][j];
        cnew[j] = clip_cell(craw[j], a.cell_clip);
        if (pp != nullptr) po += pp[2 * H + u0 + j] * cnew[j];
        gate[3][j] = act_sigmoid(po);
        hnew[j] = gate[3][j] * act_tanh(cnew[j]);
      }
      if (d.keep != nullptr) {
        for (int s4 = 0; s4 < 4; ++s4) keep4<C>(a, d, t, b, u0, static_cast<int64_t>(s4) * H, gate[s4], n);
        keep4<C>(a, d, t, b, u0, 4 * static_cast<int64_t>(H), cnew, n);
        if (a.lstm_ext) {  // m, c before the clip, h̃ (= h = m without a projection; else the projection's)
          keep4<C>(a, d, t, b, u0, 5 * static_cast<int64_t>(H), hnew, n);
          keep4<C>(a, d, t, b, u0, 6 * static_cast<int64_t>(H), craw, n);
          if (!projected) keep4<C>(a, d, t, b, u0, a.keep_h + static_cast<int64_t>(H), hnew, n);
        }
      }
      const uint32_t q = static_cast<uint32_t>(u0) / 4u;
      for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(d.state_c[w], a.step, t, a.row_ids, b, q, cnew, n);
      if (restart) initial4(d.c0, H, b, u0, cnew, n);
      for (int j = 0; j < 4; ++j) if (j < n) cr[j] = cnew[j];
      if (projected) {
        for (int j = 0; j < 4; ++j) if (j < n) d.m[b * Hs + u0 + j] = hnew[j];
        return;
      }
    } else if constexpr (C == kGruResetAfter) {
      float gate[4][4] = {};  // r z n (R_n h + bR_n) of each unit
      for (int j = 0; j < 4; ++j) if (j < n) {
        gate[0][j] = act_sigmoid(pr[j] + rec[j]);
        gate[1][j] = act_sigmoid(pr[H + j] + rec[4 + j]);
        gate[3][j] = rec[8 + j] + d.bias_rn[u0 + j];
        gate[2][j] = act_tanh(pr[2 * H + j] + gate[0][j] * gate[3][j]);
        const float z = gate[1][j], nn = gate[2][j];
        hnew[j] = (1.0f - z) * nn + z * ex.load_coherent(hp + u0 + j);
      }
      if (d.keep != nullptr)
        for (int s4 = 0; s4 < 4; ++s4) keep4<C>(a, d, t, b, u0, static_cast<int64_t>(s4) * H, gate[s4], n);
    } else if constexpr (C == kGruResetBefore) {  // PHASE 2: rec is R_n (r ⊙ h)
      float n4[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // for the reserve
      for (int j = 0; j < 4; ++j) if (j < n) {
        const float z = d.zg[b * Hs + u0 + j];
        const float nn = act_tanh(pr[2 * H + j] + rec[j]);
        n4[j] = nn;
        hnew[j] = (1.0f - z) * nn + z * ex.load_coherent(hp + u0 + j);
      }
      keep4<C>(a, d, t, b, u0, 2 * static_cast<int64_t>(H), n4, n);
    } else {
      for (int j = 0; j < 4; ++j) if (j < n) {
        const float pre = pr[j] + rec[j];
        hnew[j] = C == kRnnTanh ? act_tanh(pre) : act_relu(pre);
      }
    }
    // The cell output goes to y as is (output dropout and residuals run after the recurrence); the
    // state that carries on is the dropped one.
    for (int j = 0; j < 4; ++j) if (j < n) yr[u0 + j] = hnew[j];
    keep4<C>(a, d, t, b, u0, keep_row_h<C>(a), hnew, n);
    const uint32_t q = static_cast<uint32_t>(u0) / 4u;
    for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(d.state_h[w], a.step, t, a.row_ids, b, q, hnew, n);
    if (restart) initial4(d.h0, H, b, u0, hnew, n);
    for (int j = 0; j < 4; ++j) if (j < n) hn[u0 + j] = hnew[j];
  }
}

// ------------------------------------------------------------------------------------ kernels

/// Canonical → packed for one (layer, direction): one thread per packed element (grid-stride);
/// W and R are stored as WT.
template <class WT>
struct f32_rnn_pack_weights {
  using Args = PackArgs;
  static const char* name() { return "f32_rnn_pack_weights"; }
  static constexpr int kMaxThreads = kBlockThreads;
  RNNCORE_HD static int64_t elements(const Args& a) {
    const int64_t GH = static_cast<int64_t>(a.gates) * a.hidden;
    return (a.w != nullptr ? GH * a.in_pad : 0) + GH * a.hidden_stride + GH + (a.bias_rn != nullptr ? a.hidden : 0) +
           (a.peep != nullptr ? 3 * static_cast<int64_t>(a.hidden) : 0) +
           (a.wp != nullptr ? static_cast<int64_t>(a.out) * a.hidden : 0);
  }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t H = a.hidden, I = a.in_size, GH = a.gates * H;
    const int64_t n_w = a.w != nullptr ? GH * a.in_pad : 0, n_r = GH * a.hidden_stride, n_b = GH;
    const int64_t total = elements(a);
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      int64_t j = i;
      if (j < n_w) {  // W row (g, u), column k: W_g[u][k], rows of the canonical [H, I] blocks
        const int64_t row = j / a.in_pad, k = j % a.in_pad;
        static_cast<WT*>(a.w)[j] = from_float<WT>(k < I ? a.staging[a.w_at + row * I + k] : 0.0f);
        continue;
      }
      j -= n_w;
      if (j < n_r) {  // R row (g, u), column k < O (h's units; zeros up to Hs, as h's padding)
        const int64_t row = j / a.hidden_stride, k = j % a.hidden_stride, O = a.out;
        static_cast<WT*>(a.r)[j] = from_float<WT>(k < O ? a.staging[a.r_at + row * O + k] : 0.0f);
        continue;
      }
      j -= n_r;
      if (j < n_b) {  // bW + bR, except the reset-after GRU's n gate (r multiplies bR_n)
        const bool fold = !(a.cell == kGruResetAfter && j >= 2 * H);
        a.bias[j] = a.staging[a.bw_at + j] + (fold ? a.staging[a.br_at + j] : 0.0f);
        continue;
      }
      j -= n_b;
      if (a.bias_rn != nullptr) {
        if (j < H) {
          a.bias_rn[j] = a.staging[a.br_at + 2 * H + j];
          continue;
        }
        j -= H;
      }
      if (a.peep != nullptr) {
        if (j < 3 * H) {
          a.peep[j] = a.staging[a.peep_at[j / H] + j % H];  // p_i, p_f, p_o
          continue;
        }
        j -= 3 * H;
      }
      static_cast<WT*>(a.wp)[j] = from_float<WT>(a.staging[a.wp_at + j]);  // W_proj [P][H] as canonical
    }
  }
};

/// Input dropout pre-pass: x_cell[t][b] = x_raw[t][b] times every wrapper's input mask, outermost
/// first (the reference's order). One thread per 4 units (one Philox call per wrapper); grid.z = direction.
struct f32_rnn_input_dropout {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_input_dropout"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int I = a.in_size, groups = (I + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * groups;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / groups;
      const int q = static_cast<int>(i % groups), u0 = 4 * q, n = imin(4, I - u0);
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
      const float* src = d.x_raw + t * d.xr_st + b * d.xr_sb + u0;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int j = 0; j < 4; ++j) if (j < n) v[j] = src[j];
      for (int w = a.num_wrappers - 1; w >= 0; --w)
        apply_mask4(d.input[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), v, n);
      float* dst = d.x_cell + m * I + u0;
      for (int j = 0; j < 4; ++j) if (j < n) dst[j] = v[j];
    }
  }
};

/// One thread's 4 × 4 register block of a shared-memory tile product: acc[i][j] += Σ As[kk][4·ty + i]
/// · Bs[kk][4·tx + j] over kk < kn, kk in increasing order (As [k][bm] and Bs [k][bn], 16-byte aligned rows).
RNNCORE_HD RNNCORE_GPU_INLINE void tile_mac_4x4(const float* As, int bm, const float* Bs, int bn, int kn, int ty, int tx,
                                                float (&acc)[4][4]) {
  for (int kk = 0; kk < kn; ++kk) {
    const F4 av = load4(As + kk * bm + ty * 4), bv = load4(Bs + kk * bn + tx * 4);
    const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += ar[i] * br[j];
  }
}

/// Input projection of every step at once: proj[m][n] = Σ_k x[m][k] · W[n][k] + bias[n] for rows
/// m = t·B + b, columns n < G·H. Shared-memory tiles of kBM × kBN over k chunks of kBK; each of the
/// kThreads threads accumulates a 4 × 4 block in registers; W is stored as WT, converted on the
/// tile load. grid = (N tiles, M tiles (strided), direction).
template <class WT>
struct f32_rnn_proj_gemm_tiled {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_proj_gemm_tiled"; }
  static constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;
  static constexpr int kMaxThreads = kThreads;
  /// NVIDIA: 3 resident blocks per SM (at most 85 registers; it takes 74-80): without a hint ptxas
  /// aimed at 4 (64 registers) and spilled (docs/gpu.md, "Resources and the CI gate").
  static constexpr int kMinBlocks = 3;
  static constexpr int kLoadsA = kBM * kBK / kThreads;  // x elements a thread loads per k chunk
  static_assert(kBM * kBK % kThreads == 0, "every thread loads the same number of x elements");
  /// Row strides of the tiles: a warp stores 16 consecutive k of two rows (columns), so unpadded
  /// rows of 64 floats put them in two banks (16-way); padded by 4 (rows are read as float4), in 16.
  static constexpr int kLdA = kBM + 4, kLdB = kBN + 4;
  RNNCORE_HD static size_t smem_bytes() { return sizeof(float) * kBK * (kLdA + kLdB); }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    float* As = smem;               // [kBK][kLdA]: x tile, k-major so a thread reads 4 rows at once
    float* Bs = smem + kBK * kLdA;  // [kBK][kLdB]: W tile
    const int64_t M = static_cast<int64_t>(a.steps) * a.batch, N = static_cast<int64_t>(a.gates) * a.hidden;
    const int K = a.in_size, tid = ex.tx(), ty = tid / (kBN / 4), tx = tid % (kBN / 4);
    const int64_t n0 = static_cast<int64_t>(ex.bx()) * kBN;
    const int64_t m_tiles = (M + kBM - 1) / kBM;
    for (int64_t mt = ex.by(); mt < m_tiles; mt += ex.gdy()) {
      const int64_t m0 = mt * kBM;
      float acc[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
      // The x rows this thread loads (element e = tid + i·kThreads of a tile), found once per m tile
      // rather than per k chunk (a 64-bit division is a long software sequence on GPUs).
      const float* xrow[kLoadsA];
      RNNCORE_GPU_UNROLL
      for (int i = 0; i < kLoadsA; ++i) {
        const int64_t m = m0 + (tid + i * kThreads) / kBK;
        const int64_t t = m / a.batch, b = m - t * a.batch;
        xrow[i] = m < M ? d.x + t * d.x_st + b * d.x_sb : nullptr;
      }
      for (int k0 = 0; k0 < K; k0 += kBK) {
        // Loads walk k fastest: consecutive threads read consecutive addresses of a row.
        RNNCORE_GPU_UNROLL
        for (int i = 0; i < kLoadsA; ++i) {
          const int e = tid + i * kThreads, r = e / kBK, kk = e % kBK, k = k0 + kk;
          As[kk * kLdA + r] = xrow[i] != nullptr && k < K ? xrow[i][k] : 0.0f;
        }
        for (int e = tid; e < kBN * kBK; e += kThreads) {
          const int c = e / kBK, kk = e % kBK;
          const int64_t n = n0 + c;
          const int k = k0 + kk;
          Bs[kk * kLdB + c] = n < N && k < K ? to_float(static_cast<const WT*>(d.w)[n * a.in_pad + k]) : 0.0f;
        }
        ex.sync();
        tile_mac_4x4(As, kLdA, Bs, kLdB, imin(kBK, K - k0), ty, tx, acc);
        ex.sync();
      }
      for (int i = 0; i < 4; ++i) {
        const int64_t m = m0 + ty * 4 + i;
        if (m >= M) continue;
        for (int j = 0; j < 4; ++j) {
          const int64_t n = n0 + tx * 4 + j;
          if (n < N) d.proj[m * N + n] = acc[i][j] + d.bias[n];
        }
      }
    }
  }
};

/// Names of the matrix-unit projection GEMM per WeightId (f32 weights: the TF32 instance).
constexpr const char* kMmaGemmNames[] = {"tf32_rnn_proj_gemm_mma_64x64", "f16_rnn_proj_gemm_mma_64x64",
                                         "bf16_rnn_proj_gemm_mma_64x64"};

/// The input projection of f32_rnn_proj_gemm_tiled on the matrix units (PlanOptions::gpu_half_math
/// on a device with them): proj[m][n] = Σ_k x̃[m][k] · W̃[n][k] + bias[n] where x̃ is x rounded to the
/// operand type (MmaOperandOf<WT>: WT itself, round to nearest even, for f16 / bf16 weights; TF32,
/// ties away, for f32 weights, which rounds W too: W̃), the products exact and the sums in f32. A
/// block computes a 64 × 64 tile of proj with 4 warps (4 · warp threads), each a 32 × 32 quarter as
/// 2 × 2 MMA tiles, over k chunks of kBK staged in shared memory as operand bits. The TF32 instance
/// (WT = float, "tf32_…") runs on NVIDIA only (kUsesMmaTf32, DeviceDescription::mma_tf32).
/// grid = (N tiles, M tiles (strided), direction).
template <class WT>
struct rnn_proj_gemm_mma_64x64 {
  using Args = LayerArgs;
  using Op = MmaOperandOf<WT>;
  using Bits = typename Op::Bits;
  static const char* name() { return kMmaGemmNames[weight_id_of(WT{})]; }
  static constexpr bool kUsesMma = true;
  static constexpr bool kUsesMmaTf32 = weight_id_of(WT{}) == kWeightF32;
  static constexpr int kBM = 64, kBN = 64, kBK = 32, kWarps = 4;
  /// Row stride of the staged tiles in elements: padded by 16 bytes so that the rows of a
  /// fragment load start in different banks.
  static constexpr int kLd = kBK + 16 / static_cast<int>(sizeof(Bits));
  static constexpr int kMaxThreads = 256;  ///< 4 warps of 64 (AMD); NVIDIA launches 128
  static_assert(kBM == kBN && kBK % 4 == 0, "a thread stages one row of each tile, a quarter or half of its chunk");
  RNNCORE_HD static size_t smem_bytes() { return sizeof(Bits) * kLd * (kBM + kBN); }
  /// Threads of a block on a device of warp size `warp`.
  RNNCORE_HD static int threads(int warp) { return kWarps * warp; }

  /// Stages chunk k0: thread t loads row t % kBM of the x tile (as operand bits; 0 outside M × K)
  /// and of the W tile (0 outside N), the (t / kBM)-th of the bdx / kBM equal k segments of the
  /// chunk. A thread keeps its rows for the whole m tile: their offsets are found once (`xo`, -1
  /// outside M).
  template <class Exec>
  RNNCORE_HD static void stage(const Exec& ex, const Args& a, const DirArgs& d, int64_t xo, int64_t n, int k0, Bits* as,
                               Bits* bs) {
    const int64_t N = static_cast<int64_t>(a.gates) * a.hidden;
    const int K = a.in_size, r = ex.tx() % kBM, len = kBK / (ex.bdx() / kBM), kb = k0 + (ex.tx() / kBM) * len;
    const WT* wr = n < N ? static_cast<const WT*>(d.w) + n * a.in_pad : nullptr;
    for (int j = 0; j < len; ++j) {
      const int k = kb + j;
      as[r * kLd + k - k0] = xo >= 0 && k < K ? Op::of_x(d.x[xo + k]) : Bits{0};
      bs[r * kLd + k - k0] = wr != nullptr && k < K ? Op::of_weight(wr[k]) : Bits{0};
    }
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float* smem) {
    using OT = typename Op::Type;
    const DirArgs& d = a.dir[ex.bz()];
    Bits* as = reinterpret_cast<Bits*>(smem);  // [kBM][kLd]: x rows m, k fastest
    Bits* bs = as + kBM * kLd;                 // [kBN][kLd]: W rows n, k fastest (B = Wᵀ, column-major)
    const int64_t M = static_cast<int64_t>(a.steps) * a.batch, N = static_cast<int64_t>(a.gates) * a.hidden;
    const int ws = ex.warp_size(), warp = ex.tx() / ws, lane = ex.tx() % ws, e = 256 / ws;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // this warp's quarter of the tile
    const int64_t n0 = static_cast<int64_t>(ex.bx()) * kBN;
    const int64_t m_tiles = (M + kBM - 1) / kBM;
    for (int64_t mt = ex.by(); mt < m_tiles; mt += ex.gdy()) {
      const int64_t m0 = mt * kBM;
      // This thread's x row, once per m tile (a 64-bit division is a long software sequence on GPUs).
      const int64_t mx = m0 + ex.tx() % kBM, t = mx / a.batch, b = mx - t * a.batch;
      const int64_t xo = mx < M ? t * d.x_st + b * d.x_sb : -1;
      MmaAcc acc[2][2];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          for (int c = 0; c < 8; ++c) acc[i][j].c[c] = 0.0f;
      for (int k0 = 0; k0 < a.in_size; k0 += kBK) {
        stage(ex, a, d, xo, n0 + ex.tx() % kBN, k0, as, bs);
        ex.sync();
        RNNCORE_GPU_UNROLL
        for (int ks = 0; ks < kBK; ks += Op::kK) {
          MmaFrag<OT> fa[2], fb[2];
          for (int i = 0; i < 2; ++i) fa[i] = mma_load<OT>(ex, kMmaA, as + (wm + 16 * i) * kLd + ks, kLd, 1);
          for (int j = 0; j < 2; ++j) fb[j] = mma_load<OT>(ex, kMmaB, bs + (wn + 16 * j) * kLd + ks, 1, kLd);
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) mma_op(ex, fa[i], fb[j], acc[i][j]);
        }
        ex.sync();  // the tiles are restaged next chunk
      }
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          RNNCORE_GPU_UNROLL
          for (int c = 0; c < 8; ++c) {
            if (c >= e) continue;
            int row = 0, col = 0;
            mma_coord(ws, kMmaC, lane, c, &row, &col);
            const int64_t m = m0 + wm + 16 * i + row, n = n0 + wn + 16 * j + col;
            if (m < M && n < N) d.proj[m * N + n] = acc[i][j].c[c] + d.bias[n];
          }
        }
      }
    }
  }
};

/// Skip-input layer: proj[m][g·H + u] = x[m][u] + bias[g·H + u] (W x replaced by x for every gate).
struct f32_rnn_proj_skip {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_proj_skip"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int64_t N = static_cast<int64_t>(a.gates) * a.hidden;
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * N;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / N, n = i % N, t = m / a.batch, b = m % a.batch;
      d.proj[i] = d.x[t * d.x_st + b * d.x_sb + n % a.hidden] + d.bias[n];
    }
  }
};

/// Initial state: h[0] = h0 (or 0; O units) with zero padding, h[1] = 0, c = c0 (or 0; H units), r ⊙ h = 0.
struct f32_rnn_state_init {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_state_init"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int64_t Hs = a.hidden_stride, total = static_cast<int64_t>(a.batch) * Hs;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t b = i / Hs, u = i % Hs;
      const bool unit = u < a.hidden;
      d.h[0][i] = u < a.out && d.h0 != nullptr ? d.h0[b * a.out + u] : 0.0f;
      d.h[1][i] = 0.0f;
      if (d.c != nullptr) d.c[i] = unit && d.c0 != nullptr ? d.c0[b * a.hidden + u] : 0.0f;
      if (d.rh != nullptr) d.rh[i] = 0.0f;
    }
  }
};

/// Final state: hy = h after the last step (buffer T mod 2; O units), cy = c (H units).
struct f32_rnn_state_final {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_state_final"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int64_t H = a.hidden, O = a.out, Hs = a.hidden_stride, total = static_cast<int64_t>(a.batch) * H;
    const float* h = d.h[a.steps & 1];
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t b = i / H, u = i % H;
      if (d.hy != nullptr && u < O) d.hy[b * O + u] = h[b * Hs + u];
      if (d.cy != nullptr && d.c != nullptr) d.cy[i] = d.c[b * Hs + u];
    }
  }
};

/// Out through the wrappers, innermost first, for every (t, b) within its length: output dropout,
/// and residuals fn(input the wrapper saw, output) = sum, where the input a residual sees carries
/// the input dropout of the wrappers outside it. One thread per 4 units; grid.z = direction.
struct f32_rnn_output_chain {
  using Args = LayerArgs;
  static const char* name() { return "f32_rnn_output_chain"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.out, groups = (H + 3) / 4;  // y's units (P with a projection)
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * groups;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / groups;
      const int q = static_cast<int>(i % groups), u0 = 4 * q, n = imin(4, H - u0);
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
      if (!row_active(a, t, b)) continue;  // outputs past a row's length stay zero
      float* o = d.y + t * d.y_st + b * d.y_sb + u0;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int j = 0; j < 4; ++j) if (j < n) v[j] = o[j];
      for (int w = 0; w < a.num_wrappers; ++w) {
        if (!a.residual[w]) {
          apply_mask4(d.output[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), v, n);
          continue;
        }
        float xl[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const float* xr = d.x_raw + t * d.xr_st + b * d.xr_sb + u0;  // residuals need I == O
        for (int j = 0; j < 4; ++j) if (j < n) xl[j] = xr[j];
        for (int u = a.num_wrappers - 1; u > w; --u)
          apply_mask4(d.input[u], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), xl, n);
        for (int j = 0; j < 4; ++j) if (j < n) v[j] = xl[j] + v[j];
      }
      for (int j = 0; j < 4; ++j) if (j < n) o[j] = v[j];
    }
  }
};

/// The LSTM projection of step s (time t) of every direction, after the step's cell kernels wrote m:
/// h = clip(W_proj m) (TF LSTMCell's num_proj and proj_clip; a sum over the H units in increasing
/// order) goes to y, then through the state dropout (wrappers innermost first) into the next step's
/// h buffer, or the row's initial state where it is reset before its next step, as the cell
/// epilogue does without a projection. Past a row's length h carries over and y is zero. A
/// training forward keeps h and h̃ (before the clip) in the reserve row. One thread per (row, 4 of
/// the P units), no shared memory and no barrier: the launch boundary orders it after the step's
/// cell kernels and before the next step's. grid.z = direction.
template <class WT>
struct f32_lstm_projection_step {
  using Args = LayerArgs;
  static const char* name() { return "f32_lstm_projection_step"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int s, float*) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, O = a.out, groups = (O + 3) / 4;
    const int64_t Hs = a.hidden_stride, total = static_cast<int64_t>(a.batch) * groups;
    const int t = d.reverse ? a.steps - 1 - s : s;
    const WT* wp = static_cast<const WT*>(d.wp);
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int b = static_cast<int>(i / groups), q = static_cast<int>(i % groups), k0 = 4 * q, n = imin(4, O - k0);
      const float* hp = d.h[s & 1] + b * Hs;
      float* hn = d.h[(s + 1) & 1] + b * Hs;
      float* yr = d.y + t * d.y_st + b * d.y_sb;
      if (!row_active(a, t, b)) {
        for (int j = 0; j < 4; ++j) if (j < n) {
          hn[k0 + j] = hp[k0 + j];
          yr[k0 + j] = 0.0f;
        }
        continue;
      }
      const float* m = d.m + b * Hs;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f}, raw[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int j = 0; j < 4; ++j) if (j < n) {
        const WT* row = wp + static_cast<int64_t>(k0 + j) * H;
        float acc = 0.0f;
        for (int u = 0; u < H; ++u) acc += to_float(row[u]) * m[u];
        raw[j] = acc;
        v[j] = ex.term(a.proj_clip > 0.0f) ? clip_cell(acc, a.proj_clip) : acc;
      }
      for (int j = 0; j < 4; ++j) if (j < n) yr[k0 + j] = v[j];
      keep4<kLstm>(a, d, t, b, k0, a.keep_h, v, n);
      keep4<kLstm>(a, d, t, b, k0, a.keep_h + O, raw, n);
      for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(d.state_h[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), v, n);
      const int next = d.reverse ? t - 1 : t + 1;
      if (a.resets != nullptr && next >= 0 && next < a.steps && row_active(a, next, b) &&
          ex.reset_flag(reset_byte(a.resets, a.reset_st, a.reset_sb, next, b)))
        initial4(d.h0, O, b, k0, v, n);
      for (int j = 0; j < 4; ++j) if (j < n) hn[k0 + j] = v[j];
    }
  }
};

/// CudnnLSTM inter-layer dropout on a layer's whole output [T][B][D·O] (direction bit 0).
struct f32_rnn_inter_layer_dropout {
  using Args = InterLayerArgs;
  static const char* name() { return "f32_rnn_inter_layer_dropout"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int W = a.width, groups = (W + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * groups;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / groups;
      const int q = static_cast<int>(i % groups), u0 = 4 * q, n = imin(4, W - u0);
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
      float* o = a.out + m * W + u0;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int j = 0; j < 4; ++j) if (j < n) v[j] = o[j];
      apply_mask4(a.mask, a.step, t, a.row_ids, b, static_cast<uint32_t>(q), v, n);
      for (int j = 0; j < 4; ++j) if (j < n) o[j] = v[j];
    }
  }
};

// ------------------------------------------------------------------------------------ the ends

/// The Embedding: out[t][b][:] = table[ids[t][b]][:]; an id outside 0..vocab − 1 (the CPU backends
/// refuse it before running; the ids are device memory here) gives a row of NaN, never a read
/// outside the table. One thread per element.
struct f32_embedding_gather {
  using Args = EmbedArgs;
  static const char* name() { return "f32_embedding_gather"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t W = a.width, total = static_cast<int64_t>(a.steps) * a.batch * W;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / W, u = i % W, t = m / a.batch, b = m % a.batch;
      const int32_t id = a.ids[t * a.id_st + b * a.id_sb];
      a.out[i] = id >= 0 && id < a.vocab ? a.table[static_cast<int64_t>(id) * W + u] : nanf("");
    }
  }
};

/// The rows a last_step_only head reads (LastRowsArgs). One thread per element.
struct f32_head_last_rows {
  using Args = LastRowsArgs;
  static const char* name() { return "f32_head_last_rows"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t W = a.width, total = static_cast<int64_t>(a.batch) * W;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t b = i / W, c = i % W;
      const int32_t len = a.lengths != nullptr ? a.lengths[b] : a.steps;
      const int64_t t = c < a.per_dir ? len - 1 : 0;
      a.out[i] = len > 0 ? a.in[(t * a.batch + b) * W + c] : 0.0f;
    }
  }
};

/// Where row r of a Dense goes: the head's y row in the run's layout, or out; null for a head's
/// row past its batch row's length (zeros).
RNNCORE_HD inline float* dense_row(const DenseArgs& a, int64_t r, bool* active) {
  if (a.y == nullptr) {
    *active = true;
    return a.out + r * a.out_w;
  }
  const int64_t t = a.last_step ? 0 : r / a.batch, b = a.last_step ? r : r % a.batch;
  const int32_t len = a.lengths != nullptr ? a.lengths[b] : a.steps;
  *active = a.last_step ? len > 0 : t < len;
  return a.y + (a.last_step || !a.batch_major ? r : b * a.steps + t) * a.out_w;
}

/// One Dense: act(in · Wᵀ + b), the sum in increasing k as the reference's; a softmax's rows are
/// finished by f32_dense_softmax. One thread per output element.
struct f32_dense {
  using Args = DenseArgs;
  static const char* name() { return "f32_dense"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t N = a.out_w, K = a.in_w, total = static_cast<int64_t>(a.rows) * N;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t r = i / N, j = i % N;
      bool active = true;
      float* row = dense_row(a, r, &active);
      if (!active) {
        row[j] = 0.0f;
        continue;
      }
      const float* x = a.in + r * K;
      const float* w = a.w + j * K;
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += x[k] * w[k];
      const float v = sum + a.bias[j];
      row[j] = a.act == 1 ? (v > 0.0f ? v : 0.0f) : a.act == 2 ? act_sigmoid(v) : a.act == 3 ? act_tanh(v) : v;
      if (a.keep != nullptr && a.act != kDenseSoftmax) a.keep[i] = row[j];
    }
  }
};

/// The softmax over each active row a f32_dense with act 4 wrote (its maximum subtracted first, as
/// the reference does). One thread per row.
struct f32_dense_softmax {
  using Args = DenseArgs;
  static const char* name() { return "f32_dense_softmax"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int N = a.out_w;
    for (int64_t r = grid_first(ex); r < a.rows; r += grid_stride(ex)) {
      bool active = true;
      float* row = dense_row(a, r, &active);
      if (!active) continue;
      float top = row[0], sum = 0.0f;
      for (int j = 1; j < N; ++j) top = fmaxf(top, row[j]);
      for (int j = 0; j < N; ++j) sum += (row[j] = expf(row[j] - top));
      for (int j = 0; j < N; ++j) row[j] /= sum;
      if (a.keep != nullptr)
        for (int j = 0; j < N; ++j) a.keep[r * N + j] = row[j];
    }
  }
};

/// Tile shape of the per-step recurrent kernel: a block computes kBM batch rows × kBU units (all
/// gates of those units) over k chunks of kBK; a thread owns kTM rows × 4 units × its gates, and
/// kKS thread groups split each chunk's k (their partial sums meet in shared memory).
template <int BM, int BU, int TM, int KS, int BK>
struct StepTile {
  static constexpr int kBM = BM, kBU = BU, kTM = TM, kKS = KS, kBK = BK;
  static constexpr int kRowThreads = BM / TM, kUnitThreads = BU / 4;
  static constexpr int kThreads = kRowThreads * kUnitThreads * KS;
  static_assert(BM % TM == 0 && BU % 4 == 0, "tile shape");
};
/// Small tiles for few rows or units (more blocks), large ones when the grid is full anyway.
using StepTileSmall = StepTile<16, 16, 2, 4, 32>;  // 128 threads
using StepTileLarge = StepTile<32, 32, 4, 2, 32>;  // 128 threads

/// One time step (s) of every direction, fused: recurrent product of a tile of rows × units for
/// gates [G0, G0 + NG) from shared-memory chunks of h and R, then the cell epilogue on the
/// accumulators (biases, gates, state update, lengths, state dropout, output). PHASE 0 is a whole
/// step; the reset-before GRU runs PHASE 1 (r, z from h) and PHASE 2 (n from r ⊙ h) as two launches.
/// grid = (unit tiles, row tiles (strided), direction).
template <int C, int G0, int NG, int PHASE, class Tile, class WT>
struct f32_rnn_step_tiled {
  using Args = LayerArgs;
  static const char* name() { return PHASE == 1 ? "f32_gru_reset_before_phase1_tiled"
                                                : PHASE == 2 ? "f32_gru_reset_before_phase2_tiled"
                                                             : kStepNames[C]; }
  static constexpr int kAcc = Tile::kTM * NG * 4;
  static constexpr int kMaxThreads = Tile::kThreads;
  /// NVIDIA: one resident block per SM is all this kernel needs from registers, so ptxas keeps every
  /// value in registers instead of spilling to reach an occupancy of its own choice (docs/gpu.md).
  static constexpr int kMinBlocks = 1;
  /// Row strides of the staged tiles: a warp's stores go down one column (consecutive k), so
  /// unpadded rows (16 to 128 floats) put all 32 in one or two banks; h's rows padded by 1 float
  /// spread them over all 32 banks, R's by 4 (its rows are read as float4) over 8.
  static constexpr int kLdH = Tile::kBM + 1, kLdR = NG * Tile::kBU + 4;
  RNNCORE_HD static size_t smem_bytes() {
    const size_t tiles = static_cast<size_t>(Tile::kBK) * (kLdH + kLdR);
    const size_t partial = static_cast<size_t>(Tile::kKS - 1) * Tile::kRowThreads * Tile::kUnitThreads * kAcc;
    return sizeof(float) * (tiles > partial ? tiles : partial);
  }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int s, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, B = a.batch, tid = ex.tx();
    const int64_t Hs = a.hidden_stride;
    const int t = d.reverse ? a.steps - 1 - s : s;
    const float* op = PHASE == 2 ? d.rh : d.h[s & 1];
    constexpr int BM = Tile::kBM, BU = Tile::kBU, BK = Tile::kBK, TM = Tile::kTM, KS = Tile::kKS;
    constexpr int RU = Tile::kRowThreads * Tile::kUnitThreads, NC = NG * BU;
    const int ks = tid / RU, rem = tid % RU, rt = rem / Tile::kUnitThreads, ut = rem % Tile::kUnitThreads;
    float* hs = smem;             // [BK][kLdH]: BM rows of h
    float* rs = smem + BK * kLdH;  // [BK][kLdR]: column g·BU + uu is gate G0+g of unit u0 + uu
    const int u0 = ex.bx() * BU;
    const int row_tiles = (B + BM - 1) / BM;
    for (int bt = ex.by(); bt < row_tiles; bt += ex.gdy()) {
      const int b0 = bt * BM;
      float acc[TM][NG][4];
      for (int i = 0; i < TM; ++i)
        for (int g = 0; g < NG; ++g)
          for (int j = 0; j < 4; ++j) acc[i][g][j] = 0.0f;
      for (int64_t k0 = 0; k0 < Hs; k0 += BK) {
        for (int e = tid; e < BM * BK; e += Tile::kThreads) {
          const int r = e / BK, kk = e % BK, b = b0 + r;
          const int64_t k = k0 + kk;
          hs[kk * kLdH + r] = b < B && k < Hs ? op[b * Hs + k] : 0.0f;
        }
        for (int e = tid; e < NC * BK; e += Tile::kThreads) {
          const int c = e / BK, kk = e % BK, g = c / BU, u = u0 + c % BU;
          const int64_t k = k0 + kk;
          rs[kk * kLdR + c] =
              u < H && k < Hs ? to_float(static_cast<const WT*>(d.r)[(static_cast<int64_t>(G0 + g) * H + u) * Hs + k]) : 0.0f;
        }
        ex.sync();
        for (int kk = ks; kk < BK; kk += KS) {
          float hv[TM];
          for (int i = 0; i < TM; ++i) hv[i] = hs[kk * kLdH + rt * TM + i];
          for (int g = 0; g < NG; ++g) {
            const F4 rv = load4(rs + kk * kLdR + g * BU + ut * 4);
            for (int i = 0; i < TM; ++i) {
              acc[i][g][0] += hv[i] * rv.x;
              acc[i][g][1] += hv[i] * rv.y;
              acc[i][g][2] += hv[i] * rv.z;
              acc[i][g][3] += hv[i] * rv.w;
            }
          }
        }
        ex.sync();
      }
      if (KS > 1) {  // groups 1.. hand their partial sums to group 0, which adds them in a fixed order
        if (ks > 0) {
          float* out = smem + (static_cast<int64_t>(ks - 1) * RU + rem) * kAcc;
          for (int i = 0; i < TM; ++i)
            for (int g = 0; g < NG; ++g)
              for (int j = 0; j < 4; ++j) out[(i * NG + g) * 4 + j] = acc[i][g][j];
        }
        ex.sync();
        if (ks == 0)
          for (int p = 1; p < KS; ++p) {
            const float* in = smem + (static_cast<int64_t>(p - 1) * RU + rem) * kAcc;
            for (int i = 0; i < TM; ++i)
              for (int g = 0; g < NG; ++g)
                for (int j = 0; j < 4; ++j) acc[i][g][j] += in[(i * NG + g) * 4 + j];
          }
      }
      if (ks == 0) {
        const int ug = u0 + ut * 4;
        RNNCORE_GPU_UNROLL
        for (int i = 0; i < TM; ++i) {
          const int b = b0 + rt * TM + i;
          if (b < B && ug < H) cell_epilogue4<C, PHASE>(ex, a, d, s, t, b, ug, &acc[i][0][0]);
        }
      }
      ex.sync();  // the partial-sum area is the tile area of the next row tile
    }
  }
};

/// Shape of the per-step kernel that reads h and R where they lie (through L1) instead of staging
/// k chunks in shared memory: a block computes kBM rows × kBU units (all gates of those units); a
/// thread owns kTM rows × 4 units × its gates over one contiguous kKS-th of k, read four k at a time;
/// the kKS partial sums meet in shared memory once per row tile, added in a fixed order.
template <int BM, int BU, int TM, int KS>
struct DirectTile {
  static constexpr int kBM = BM, kBU = BU, kTM = TM, kKS = KS;
  static constexpr int kRowThreads = BM / TM, kUnitThreads = BU / 4;
  static constexpr int kThreads = kRowThreads * kUnitThreads * KS;
  static_assert(BM % TM == 0 && BU % 4 == 0, "tile shape");
};
/// 256 threads: eight warps a block where the staged tiles give four (RNNCORE_GPU_TILE=direct).
using StepTileDirect = DirectTile<16, 16, 2, 8>;

/// Element o of KS partial-sum areas of `per_group` floats each, added in group order (the direct
/// kernels' one meeting of their k groups: a fixed order, so the sums are deterministic).
template <int KS>
RNNCORE_HD RNNCORE_GPU_INLINE float sum_k_groups(const float* smem, int64_t per_group, int o) {
  float v = smem[o];
  for (int p = 1; p < KS; ++p) v += smem[p * per_group + o];
  return v;
}

constexpr const char* kStepDirectNames[] = {"f32_lstm_step_direct", "f32_gru_step_direct", "f32_gru_reset_before_step_direct",
                                            "f32_rnn_tanh_step_direct", "f32_rnn_relu_step_direct"};

/// The per-step kernel of f32_rnn_step_tiled (same grid, gates, phases and epilogue) without the
/// staging: no barrier inside the k loop, four k per load (h and R rows are Hs = H rounded up to 4
/// long, zero padded), rows and units past the end read the last ones (their sums are dropped).
/// Each sum runs its group's k upwards, then the groups in order: deterministic, another order
/// than the staged tiles' (both within the reference's tolerance).
template <int C, int G0, int NG, int PHASE, class Tile, class WT>
struct f32_rnn_step_direct {
  using Args = LayerArgs;
  static const char* name() { return PHASE == 1 ? "f32_gru_reset_before_phase1_direct"
                                                : PHASE == 2 ? "f32_gru_reset_before_phase2_direct"
                                                             : kStepDirectNames[C]; }
  static constexpr int kAcc = Tile::kTM * NG * 4;
  static constexpr int kSlots = Tile::kRowThreads * Tile::kUnitThreads;  // threads of one k group
  static constexpr int kMaxThreads = Tile::kThreads;
  static constexpr int kMinBlocks = 1;
  RNNCORE_HD static size_t smem_bytes() { return sizeof(float) * Tile::kKS * kSlots * kAcc; }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int s, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, B = a.batch, tid = ex.tx();
    const int64_t Hs = a.hidden_stride;
    const int t = d.reverse ? a.steps - 1 - s : s;
    const float* op = PHASE == 2 ? d.rh : d.h[s & 1];
    constexpr int BM = Tile::kBM, TM = Tile::kTM, KS = Tile::kKS;
    const int ks = tid / kSlots, slot = tid % kSlots, rt = slot / Tile::kUnitThreads, ut = slot % Tile::kUnitThreads;
    const int64_t quads = Hs / 4, q0 = quads * ks / KS, q1 = quads * (ks + 1) / KS;
    const int u0 = ex.bx() * Tile::kBU;
    const WT* rrow[NG][4];
    for (int g = 0; g < NG; ++g)
      for (int j = 0; j < 4; ++j)
        rrow[g][j] = static_cast<const WT*>(d.r) + (static_cast<int64_t>(G0 + g) * H + imin(u0 + ut * 4 + j, H - 1)) * Hs;
    const int row_tiles = (B + BM - 1) / BM;
    for (int bt = ex.by(); bt < row_tiles; bt += ex.gdy()) {
      const int b0 = bt * BM;
      const float* hrow[TM];
      for (int i = 0; i < TM; ++i) hrow[i] = op + static_cast<int64_t>(imin(b0 + rt * TM + i, B - 1)) * Hs;
      float acc[TM][NG][4];
      for (int i = 0; i < TM; ++i)
        for (int g = 0; g < NG; ++g)
          for (int j = 0; j < 4; ++j) acc[i][g][j] = 0.0f;
      for (int64_t q = q0; q < q1; ++q) {
        F4 hv[TM];
        for (int i = 0; i < TM; ++i) hv[i] = load4(hrow[i] + 4 * q);
        RNNCORE_GPU_UNROLL
        for (int g = 0; g < NG; ++g)
          RNNCORE_GPU_UNROLL
          for (int j = 0; j < 4; ++j) {
            const F4 w = load4w(rrow[g][j] + 4 * q);
            for (int i = 0; i < TM; ++i) {
              float v = acc[i][g][j];
              v += hv[i].x * w.x;
              v += hv[i].y * w.y;
              v += hv[i].z * w.z;
              v += hv[i].w * w.w;
              acc[i][g][j] = v;
            }
          }
      }
      float* mine = smem + (static_cast<int64_t>(ks) * kSlots + slot) * kAcc;
      for (int i = 0; i < TM; ++i)
        for (int g = 0; g < NG; ++g)
          for (int j = 0; j < 4; ++j) mine[(i * NG + g) * 4 + j] = acc[i][g][j];
      ex.sync();
      for (int o = tid; o < kSlots * kAcc; o += Tile::kThreads)  // into group 0's slots
        smem[o] = sum_k_groups<KS>(smem, kSlots * kAcc, o);
      ex.sync();
      for (int e = tid; e < kSlots * TM; e += Tile::kThreads) {  // one (slot, row) each: 4 units of a row
        const int sl = e / TM, i = e % TM;
        const int b = b0 + (sl / Tile::kUnitThreads) * TM + i, ug = u0 + (sl % Tile::kUnitThreads) * 4;
        if (b < B && ug < H) cell_epilogue4<C, PHASE>(ex, a, d, s, t, b, ug, smem + static_cast<int64_t>(sl) * kAcc + i * NG * 4);
      }
      ex.sync();  // the sums are the next row tile's partial-sum area
    }
  }
};

/// Shape of the per-step kernel whose lanes split k (f32_rnn_step_lanes): a block computes kBM rows ×
/// kBU units (all gates of those units) as kTasks tasks of kWM rows × 4 units each; a task's k is
/// split over kSplit adjacent lanes (32: a warp, or half a wave of 64; 8: a quarter of a warp).
template <int BM, int BU, int WM, int SPLIT>
struct LanesTile {
  static constexpr int kBM = BM, kBU = BU, kWM = WM, kSplit = SPLIT;
  static constexpr int kUnitGroups = BU / 4, kTasks = (BM / WM) * (BU / 4);
  static constexpr int kThreads = kTasks * SPLIT;
  static_assert(BM % WM == 0 && BU % 4 == 0, "tile shape");
  static_assert((SPLIT == 8 || SPLIT == 16 || SPLIT == 32) && kThreads % 64 == 0, "whole warps and waves of lanes");
};
/// RNNCORE_GPU_TILE=lanes: a warp a task, 8 rows × 16 units, 256 threads.
using StepTileLanes = LanesTile<8, 16, 4, 32>;
/// RNNCORE_GPU_TILE=lanes8: eight lanes a task (one 128-byte line of a row a load), 16 × 16, 128 threads.
using StepTileLanes8 = LanesTile<16, 16, 4, 8>;

constexpr const char* kStepLanesNames[2][7] = {
    {"f32_lstm_step_lanes", "f32_gru_step_lanes", "", "f32_rnn_tanh_step_lanes", "f32_rnn_relu_step_lanes",
     "f32_gru_reset_before_phase1_lanes", "f32_gru_reset_before_phase2_lanes"},
    {"f32_lstm_step_lanes8", "f32_gru_step_lanes8", "", "f32_rnn_tanh_step_lanes8", "f32_rnn_relu_step_lanes8",
     "f32_gru_reset_before_phase1_lanes8", "f32_gru_reset_before_phase2_lanes8"}};

/// The per-step kernel of f32_rnn_step_direct (same cells, phases and epilogue) with k split across
/// lanes instead of across warps: lane l of a task's kSplit reads four k at l, l + kSplit, … of each
/// h and R row the task needs, so that the task's load of a row is kSplit·16 contiguous bytes (the
/// direct kernel's lanes read 16 bytes of 4 different rows each). Each lane then holds a partial sum
/// of every output of the task (kWM rows × 4 units × NG gates, padded to kAcc); the lanes fold them
/// in halves (log2 kSplit exchanges, lane l ending with the sums [l·kAcc/kSplit, (l + 1)·kAcc/kSplit)),
/// which meet in shared memory for the epilogue. The folds cost about kAcc exchanges a lane
/// whatever kSplit, against kAcc·H/(4·kSplit) multiply-adds. Deterministic (a fixed order of the
/// lanes' k and of the folds), another order than the other tiles'.
template <int C, int G0, int NG, int PHASE, class Tile, class WT>
struct f32_rnn_step_lanes {
  using Args = LayerArgs;
  static const char* name() { return kStepLanesNames[Tile::kSplit == 32 ? 0 : 1][PHASE > 0 ? 4 + PHASE : C]; }
  /// Sums a task, padded to a power of two of at least 64.
  static constexpr int kAcc = 64;
  static_assert(Tile::kWM * NG * 4 <= kAcc, "a task's sums fit the fold");
  static constexpr int kMaxThreads = Tile::kThreads;
  /// Two blocks an SM on NVIDIA for 256 threads (four for 128): at most 128 registers (without the
  /// hint ptxas took 248 for the LSTM: one block an SM, as the direct kernel's eight warps). The LSTM
  /// on bf16 weights spilled 20 bytes at 128 on sm_90 and gets no hint.
  static constexpr int kMinBlocks = NG == 4 && weight_id_of(WT{}) == kWeightBF16 ? 1 : 512 / Tile::kThreads;
  RNNCORE_HD static size_t smem_bytes() { return sizeof(float) * Tile::kTasks * kAcc; }

  /// Sums v[0, 2N) of every lane become v[0, N): a lane with `mask` set keeps the upper half, the
  /// others the lower, each adding its partner's copy of the half it keeps. The halves are swapped
  /// by bits (swap: all ones or zero), not by `upper ? v[N + i] : v[i]`: hipcc made that a load from
  /// a chosen address, which kept v in scratch (272 bytes a lane on gfx90a and gfx1030).
  template <int N, class Exec>
  RNNCORE_HD RNNCORE_GPU_INLINE static void fold(const Exec& ex, float* v, int lane, int mask) {
    const std::uint32_t swap = (lane & mask) != 0 ? 0xffffffffu : 0u;
    RNNCORE_GPU_UNROLL
    for (int i = 0; i < N; ++i) {
      const std::uint32_t lo = detail::f32_to_bits(v[i]), hi = detail::f32_to_bits(v[N + i]), x = (lo ^ hi) & swap;
      v[i] = detail::bits_to_f32(lo ^ x) + ex.shfl_xor(detail::bits_to_f32(hi ^ x), mask);
    }
  }

  /// One task's sums, folded: lane l of its kSplit (`part`) writes [l·kAcc/kSplit, (l + 1)·kAcc/kSplit) of `out`.
  template <class Exec>
  RNNCORE_HD static void task_sums(const Exec& ex, const Args& a, const DirArgs& d, const float* op, int b0, int ub,
                                   int part, float* out) {
    const int H = a.hidden, B = a.batch;
    const int64_t Hs = a.hidden_stride, quads = Hs / 4;
    constexpr int WM = Tile::kWM, S = Tile::kSplit;
    const float* hrow[WM];
    for (int i = 0; i < WM; ++i) hrow[i] = op + static_cast<int64_t>(imin(b0 + i, B - 1)) * Hs;
    // R's rows: gate g's of unit ub + j at rg[g] + ro[j] (units past H read the last one; their
    // sums are dropped) — a pointer a gate and an offset a unit, not 4·NG pointers (registers).
    const WT* rg[NG];
    for (int g = 0; g < NG; ++g) rg[g] = static_cast<const WT*>(d.r) + (static_cast<int64_t>(G0 + g) * H + ub) * Hs;
    int64_t ro[4];
    for (int j = 0; j < 4; ++j) ro[j] = imin(j, H - 1 - ub) * Hs;
    float v[kAcc];
    RNNCORE_GPU_UNROLL
    for (int n = 0; n < kAcc; ++n) v[n] = 0.0f;
    for (int64_t q = part; q < quads; q += S) {
      F4 hv[WM];
      RNNCORE_GPU_UNROLL
      for (int i = 0; i < WM; ++i) hv[i] = load4(hrow[i] + 4 * q);
      RNNCORE_GPU_UNROLL
      for (int g = 0; g < NG; ++g)
        RNNCORE_GPU_UNROLL
        for (int j = 0; j < 4; ++j) {
          const F4 w = load4w(rg[g] + ro[j] + 4 * q);
          RNNCORE_GPU_UNROLL
          for (int i = 0; i < WM; ++i) {  // sum (i, g, j) at (i·NG + g)·4 + j: a row's sums in cell_epilogue4's order
            float& acc = v[(i * NG + g) * 4 + j];
            acc += hv[i].x * w.x;
            acc += hv[i].y * w.y;
            acc += hv[i].z * w.z;
            acc += hv[i].w * w.w;
          }
        }
    }
    // The folds: the first exchange's mask is S/2 (that bit of the lane picks the half of kAcc/2), …
    fold<32>(ex, v, part, S / 2);
    fold<16>(ex, v, part, S / 4);
    fold<8>(ex, v, part, S / 8);
    if (S >= 16) fold<4>(ex, v, part, S / 16);
    if (S >= 32) fold<2>(ex, v, part, S / 32);
    constexpr int per = kAcc / S;
    RNNCORE_GPU_UNROLL
    for (int i = 0; i < per; ++i) out[part * per + i] = v[i];
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int s, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, B = a.batch, tid = ex.tx();
    const int t = d.reverse ? a.steps - 1 - s : s;
    const float* op = PHASE == 2 ? d.rh : d.h[s & 1];
    constexpr int WM = Tile::kWM, UG = Tile::kUnitGroups, S = Tile::kSplit;
    const int task = tid / S, part = tid % S;  // S divides the warp size: a task's lanes share a warp
    const int u0 = ex.bx() * Tile::kBU;
    const int row_tiles = (B + Tile::kBM - 1) / Tile::kBM;
    for (int bt = ex.by(); bt < row_tiles; bt += ex.gdy()) {
      const int b0 = bt * Tile::kBM;
      task_sums(ex, a, d, op, b0 + (task / UG) * WM, u0 + (task % UG) * 4, part, smem + task * kAcc);
      ex.sync();
      for (int e = tid; e < Tile::kTasks * WM; e += Tile::kThreads) {  // one (task, row) each: 4 units of a row
        const int tk = e / WM, i = e % WM;
        const int b = b0 + (tk / UG) * WM + i, ug = u0 + (tk % UG) * 4;
        if (b < B && ug < H) cell_epilogue4<C, PHASE>(ex, a, d, s, t, b, ug, smem + tk * kAcc + i * NG * 4);
      }
      ex.sync();  // the sums are the next row tile's
    }
  }
};

/// Names of the matrix-unit step kernels, [WeightId][cell] (f32 weights: TF32), then the
/// reset-before GRU's two phases (index 4 + PHASE; that cell always runs in phases).
/// acc += Ã·B̃ over KLEN of k for one 16 × 16 tile on the matrix units, both operands staged as
/// operand bits of WT (MmaOperandOf) with k fastest: `a` the operand rows [16][ld] (m = batch rows),
/// `b` R's rows [16][ld] (n = units; B = Rᵀ). The matrix-unit step kernel and the persistent one
/// share it.
template <class WT, int KLEN, class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void mma_chunk(const Exec& ex, const typename MmaOperandOf<WT>::Bits* a,
                                             const typename MmaOperandOf<WT>::Bits* b, int ld, MmaAcc& acc) {
  using Op = MmaOperandOf<WT>;
  using OT = typename Op::Type;
  RNNCORE_GPU_UNROLL
  for (int ks = 0; ks < KLEN; ks += Op::kK) {
    const MmaFrag<OT> fa = mma_load<OT>(ex, kMmaA, a + ks, ld, 1);
    const MmaFrag<OT> fb = mma_load<OT>(ex, kMmaB, b + ks, 1, ld);
    mma_op(ex, fa, fb, acc);
  }
}

constexpr const char* kMmaStepNames[3][7] = {
    {"tf32_lstm_step_mma_16x16", "tf32_gru_step_mma_16x16", "", "tf32_rnn_tanh_step_mma_16x16",
     "tf32_rnn_relu_step_mma_16x16", "tf32_gru_reset_before_phase1_mma_16x16", "tf32_gru_reset_before_phase2_mma_16x16"},
    {"f16_lstm_step_mma_16x16", "f16_gru_step_mma_16x16", "", "f16_rnn_tanh_step_mma_16x16",
     "f16_rnn_relu_step_mma_16x16", "f16_gru_reset_before_phase1_mma_16x16", "f16_gru_reset_before_phase2_mma_16x16"},
    {"bf16_lstm_step_mma_16x16", "bf16_gru_step_mma_16x16", "", "bf16_rnn_tanh_step_mma_16x16",
     "bf16_rnn_relu_step_mma_16x16", "bf16_gru_reset_before_phase1_mma_16x16", "bf16_gru_reset_before_phase2_mma_16x16"}};

/// f32_rnn_step_tiled's step on the matrix units (PlanOptions::gpu_half_math on a device with them:
/// f16 / bf16 weights, or f32 weights as TF32 where the device takes it; batches of at least
/// kMmaStepMinBatch; src/gpu/host/plan.hpp, use_mma_step): the recurrent product of gates [G0, G0 + NG)
/// is h̃·R̃ᵀ with h̃ = the operand (h, or r ⊙ h in PHASE 2) rounded to the operand type of WT
/// (MmaOperandOf: WT, or TF32 for f32 weights, which rounds R too: R̃), exact products and f32
/// sums, then the same cell epilogue. A block owns 16 units (all NG gates) and runs 16-row tiles of
/// the batch (rows past B are zero); warp g computes gate G0 + g's 16 × 16 tile over k chunks of
/// kBK staged in shared memory as operand bits. The accumulators
/// meet in shared memory, where each (row, 4 units) item gathers its gates for cell_epilogue4.
/// grid = (unit tiles, row tiles (strided), direction); block = NG warps.
template <int C, int G0, int NG, int PHASE, class WT>
struct rnn_step_mma_16x16 {
  using Args = LayerArgs;
  using Op = MmaOperandOf<WT>;
  using Bits = typename Op::Bits;
  static const char* name() { return kMmaStepNames[weight_id_of(WT{})][PHASE ? 4 + PHASE : C]; }
  static constexpr bool kUsesMma = true;
  static constexpr bool kUsesMmaTf32 = weight_id_of(WT{}) == kWeightF32;
  static constexpr int kBK = 32;
  /// Row stride of the staged tiles in elements: padded by 16 bytes so that the rows of a
  /// fragment load start in different banks (as the projection GEMM's).
  static constexpr int kLd = kBK + 16 / static_cast<int>(sizeof(Bits));
  static constexpr int kMaxThreads = NG * 64;  ///< NG warps of 64 (AMD); NVIDIA launches NG · 32
  /// Loads per thread and round of the staging (stage_rounds): a chunk's h rows take 4-16 a thread
  /// on warps of 32, R's rows 16. (16 spilled at the one- and two-gate instances' 56 registers, 8 at
  /// the one-gate instances' 40 on sm_80: ptxas gets no occupancy hint for this kernel.)
  static constexpr int kStageLoads = NG == 1 ? 4 : 8;
  static_assert(NG >= 1 && NG <= 4, "a cell has at most 4 gates");
  /// Staged h̃ [16][kLd] and R [NG·16][kLd], or (after the k loop, in the same bytes) the
  /// accumulators [NG][16 rows][16 units] in f32.
  RNNCORE_HD static size_t smem_bytes() {
    const size_t staged = sizeof(Bits) * kLd * kMmaDim * (1 + NG), acc = sizeof(float) * NG * kMmaDim * kMmaDim;
    return staged > acc ? staged : acc;
  }
  /// Threads of a block on a device of warp size `warp`.
  RNNCORE_HD static int threads(int warp) { return NG * warp; }

  /// Stages chunk k0 of rows b0.. of the operand and of R's rows for units u0.. as operand bits,
  /// k fastest so that consecutive threads read consecutive addresses; zeros outside B, H and Hs.
  template <class Exec>
  RNNCORE_HD static void stage(const Exec& ex, const Args& a, const DirArgs& d, const float* op, int b0, int u0, int k0,
                               Bits* hs, Bits* rs) {
    const int hs_len = a.hidden_stride;
    stage_rounds<kStageLoads>(
        ex.tx(), ex.bdx(), kMmaDim * kBK,
        [&](int e) {
          const int r = e / kBK, kk = e % kBK, b = b0 + r, k = k0 + kk;
          return b < a.batch && k < hs_len ? Op::of_x(op[static_cast<int64_t>(b) * hs_len + k]) : Bits{0};
        },
        [&](int e, Bits v) { hs[(e / kBK) * kLd + e % kBK] = v; });
    const WT* R = static_cast<const WT*>(d.r);
    stage_rounds<kStageLoads>(
        ex.tx(), ex.bdx(), NG * kMmaDim * kBK,
        [&](int e) {
          const int n = e / kBK, kk = e % kBK, g = n / kMmaDim, u = u0 + n % kMmaDim, k = k0 + kk;
          return u < a.hidden && k < hs_len ? Op::of_weight(R[(static_cast<int64_t>(G0 + g) * a.hidden + u) * hs_len + k])
                                            : Bits{0};
        },
        [&](int e, Bits v) { rs[(e / kBK) * kLd + e % kBK] = v; });
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int s, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int t = d.reverse ? a.steps - 1 - s : s;
    const float* op = PHASE == 2 ? d.rh : d.h[s & 1];
    Bits* hs = reinterpret_cast<Bits*>(smem);  // [16][kLd]: operand rows b, k fastest
    Bits* rs = hs + kMmaDim * kLd;             // [NG·16][kLd]: R rows (gate, unit), k fastest (B = Rᵀ)
    float* pre = smem;                                 // [NG][16][16] after the k loop
    const int ws = ex.warp_size(), warp = ex.tx() / ws, lane = ex.tx() % ws, e = 256 / ws;
    const int u0 = ex.bx() * kMmaDim, row_tiles = (a.batch + kMmaDim - 1) / kMmaDim;
    for (int bt = ex.by(); bt < row_tiles; bt += ex.gdy()) {
      const int b0 = bt * kMmaDim;
      MmaAcc acc;
      for (int c = 0; c < 8; ++c) acc.c[c] = 0.0f;
      for (int k0 = 0; k0 < a.hidden_stride; k0 += kBK) {
        stage(ex, a, d, op, b0, u0, k0, hs, rs);
        ex.sync();
        mma_chunk<WT, kBK>(ex, hs, rs + warp * kMmaDim * kLd, kLd, acc);
        ex.sync();  // the tiles are restaged next chunk, and their bytes hold `pre` after the last
      }
      RNNCORE_GPU_UNROLL
      for (int c = 0; c < 8; ++c) {
        if (c >= e) continue;
        int row = 0, col = 0;
        mma_coord(ws, kMmaC, lane, c, &row, &col);
        pre[(warp * kMmaDim + row) * kMmaDim + col] = acc.c[c];
      }
      ex.sync();
      for (int it = ex.tx(); it < kMmaDim * (kMmaDim / 4); it += ex.bdx()) {
        const int row = it / (kMmaDim / 4), q = it % (kMmaDim / 4), b = b0 + row, ug = u0 + 4 * q;
        if (b >= a.batch || ug >= a.hidden) continue;
        float rec[4 * NG];
        for (int g = 0; g < NG; ++g)
          for (int j = 0; j < 4; ++j) rec[4 * g + j] = pre[(g * kMmaDim + row) * kMmaDim + 4 * q + j];
        cell_epilogue4<C, PHASE>(ex, a, d, s, t, b, ug, rec);
      }
      ex.sync();  // `pre` is the staging area of the next row tile
    }
  }
};

/// Persistent recurrence for small batches: one cooperative launch runs all T steps of every
/// direction. Block j of a direction owns units [j·U, j·U + U) (U = arg, a multiple of 4) and keeps
/// all gates' rows of R for them in shared memory across steps; each step it stages h (the state
/// every block wrote before the last grid barrier), forms the dot products (a warp per R row, lanes
/// split k, a shuffle reduction per batch row), runs the cell epilogue for its units and meets the
/// other blocks at a grid barrier. MAXB ≥ B bounds the per-thread accumulators.
/// grid = (blocks per direction, 1, directions); needs every block co-resident (checked at plan time).
/// Shared memory of the persistent kernel: R rows [G·U][Hs] of `weight_bytes` each, the staged
/// operand [B][Hs] and the dot products [G·U][MAXB] in f32.
RNNCORE_HD inline size_t persistent_smem_bytes(int gates, int maxb, int units, int64_t hidden_stride, int batch,
                                               size_t weight_bytes) {
  return weight_bytes * static_cast<size_t>(gates) * units * hidden_stride +
         sizeof(float) * (static_cast<size_t>(batch) * hidden_stride + static_cast<size_t>(gates) * units * maxb);
}

/// Gates of a cell.
RNNCORE_HD constexpr int cell_gates(int c) { return c == kLstm ? 4 : (c == kGruResetAfter || c == kGruResetBefore) ? 3 : 1; }

template <int C, int MAXB, class WT>
struct f32_rnn_recurrence_persistent {
  using Args = LayerArgs;
  static const char* name() { return kPersistentNames[C]; }
  static constexpr int kGates = cell_gates(C);
  static constexpr int kMaxThreads = kPersistentThreads;
  /// NVIDIA: the resident blocks per SM to plan registers for: 3 (at most 85 registers), or 2 (at
  /// most 128) for bucket 2, which spilled at 85 (it takes up to 121), and bucket 64 (91-110).
  /// Without a hint ptxas aimed at 4-6 blocks and spilled; with 1, buckets 4-32 took up to 96
  /// registers instead of 72 (docs/gpu.md, "Resources and the CI gate").
  static constexpr int kMinBlocks = MAXB == 2 || MAXB >= 64 ? 2 : 3;

  /// pre[n][b] = R row n · op[b] for this block's rows n in [n_begin, n_end).
  template <class Exec>
  RNNCORE_HD static void dots(const Exec& ex, const WT* rows, const float* stage, float* pre, int n_begin, int n_end,
                              int batch, int64_t Hs) {
    const int ws = ex.warp_size(), lane = ex.tx() % ws, warps = ex.bdx() / ws;
    const int64_t k4n = Hs / 4;
    for (int n = n_begin + ex.tx() / ws; n < n_end; n += warps) {
      float acc[MAXB];
      RNNCORE_GPU_UNROLL
      for (int b = 0; b < MAXB; ++b) acc[b] = 0.0f;
      for (int64_t k4 = lane; k4 < k4n; k4 += ws) {
        const F4 rv = load4w(rows + n * Hs + 4 * k4);
        RNNCORE_GPU_UNROLL
        for (int b = 0; b < MAXB; ++b) {
          if (b < batch) {
            const F4 hv = load4(stage + b * Hs + 4 * k4);
            acc[b] += rv.x * hv.x + rv.y * hv.y + rv.z * hv.z + rv.w * hv.w;
          }
        }
      }
      RNNCORE_GPU_UNROLL
      for (int b = 0; b < MAXB; ++b) {
        if (b < batch) {  // uniform across the warp: every lane takes part in the shuffles
          float v = acc[b];
          for (int m = ws / 2; m > 0; m /= 2) v += ex.shfl_xor(v, m);
          if (lane == 0) pre[n * MAXB + b] = v;
        }
      }
    }
  }

  /// Stages op [B][Hs] (written by other blocks before the last grid barrier) in shared memory.
  template <class Exec>
  RNNCORE_HD static void stage(const Exec& ex, const float* op, float* st, int batch, int64_t Hs) {
    // (batch · Hs fits in shared memory, so int indices)
    stage_rounds<16>(ex.tx(), ex.bdx(), batch * static_cast<int>(Hs), [&](int i) { return ex.load_coherent(op + i); },
                     [&](int i, float v) { st[i] = v; });
  }

  /// The cell epilogue of this block's units for gates [g0, g0 + ng) of `pre`.
  template <int PHASE, class Exec>
  RNNCORE_HD static void epilogue(const Exec& ex, const Args& a, const DirArgs& d, const float* pre, int s, int t,
                                  int unit0, int units, int g0, int ng) {
    const int groups = units / 4, items = a.batch * groups;
    for (int it = ex.tx(); it < items; it += ex.bdx()) {
      const int b = it / groups, qq = it % groups, u = unit0 + 4 * qq;
      if (u >= a.hidden) continue;
      float rec[4][4];
      for (int g = 0; g < ng; ++g)
        for (int j = 0; j < 4; ++j) rec[g][j] = pre[((g0 + g) * units + 4 * qq + j) * MAXB + b];
      cell_epilogue4<C, PHASE, false>(ex, a, d, s, t, b, u, &rec[0][0]);
    }
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int units, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, B = a.batch, G = kGates;
    const int64_t Hs = a.hidden_stride;
    const int unit0 = ex.bx() * units;
    WT* rows = reinterpret_cast<WT*>(smem);                                       // [G·U][Hs]
    float* st = reinterpret_cast<float*>(rows + static_cast<int64_t>(G) * units * Hs);  // [B][Hs]
    float* pre = st + static_cast<int64_t>(B) * Hs;              // [G·U][MAXB]
    // The slice fits in shared memory, so 32-bit indices (a 64-bit division is a long software
    // sequence on GPUs).
    const int hs = static_cast<int>(Hs), slice = G * units * hs;
    stage_rounds<8>(  // this block's R rows, once for all steps
        ex.tx(), ex.bdx(), slice,
        [&](int i) {
          const int n = i / hs, k = i - n * hs;
          const int g = n / units, u = unit0 + (n - g * units);
          return u < H ? static_cast<const WT*>(d.r)[(static_cast<int64_t>(g) * H + u) * Hs + k] : from_float<WT>(0.0f);
        },
        [&](int i, WT v) { rows[i] = v; });
    for (int s = 0; s < a.steps; ++s) {
      const int t = d.reverse ? a.steps - 1 - s : s;
      stage(ex, d.h[s & 1], st, B, Hs);
      ex.sync();
      if constexpr (C == kGruResetBefore) {
        dots(ex, rows, st, pre, 0, 2 * units, B, Hs);
        ex.sync();
        epilogue<1>(ex, a, d, pre, s, t, unit0, units, 0, 2);
        ex.grid_sync();  // every block's r ⊙ h is written
        stage(ex, d.rh, st, B, Hs);
        ex.sync();
        dots(ex, rows, st, pre, 2 * units, 3 * units, B, Hs);
        ex.sync();
        epilogue<2>(ex, a, d, pre, s, t, unit0, units, 2, 1);
      } else {
        dots(ex, rows, st, pre, 0, G * units, B, Hs);
        ex.sync();
        epilogue<0>(ex, a, d, pre, s, t, unit0, units, 0, G);
      }
      ex.grid_sync();  // every block's h for step s + 1 is written
    }
  }
};

constexpr const char* kPersistentMmaNames[3][5] = {
    {"tf32_lstm_recurrence_persistent_mma", "tf32_gru_recurrence_persistent_mma",
     "tf32_gru_reset_before_recurrence_persistent_mma", "tf32_rnn_tanh_recurrence_persistent_mma",
     "tf32_rnn_relu_recurrence_persistent_mma"},
    {"f16_lstm_recurrence_persistent_mma", "f16_gru_recurrence_persistent_mma",
     "f16_gru_reset_before_recurrence_persistent_mma", "f16_rnn_tanh_recurrence_persistent_mma",
     "f16_rnn_relu_recurrence_persistent_mma"},
    {"bf16_lstm_recurrence_persistent_mma", "bf16_gru_recurrence_persistent_mma",
     "bf16_gru_reset_before_recurrence_persistent_mma", "bf16_rnn_tanh_recurrence_persistent_mma",
     "bf16_rnn_relu_recurrence_persistent_mma"}};

/// The persistent recurrence on the matrix units (PlanOptions::gpu_half_math on a device with them,
/// batches of kMmaStepMinBatch to 16 rows: src/gpu/host/plan.hpp, persistent_mma_units): one
/// cooperative launch for all T steps, as f32_rnn_recurrence_persistent, with the product of
/// rnn_step_mma_16x16. Block j owns units [j·U, j·U + U) (U = arg, a multiple of 16) and keeps all
/// gates' rows of R for them in shared memory across steps as operand bits (f16 / bf16 as stored;
/// TF32 patterns for f32 weights); each step it stages h (written by every block before the last
/// grid barrier, read past L1) as one 16-row operand tile (rows past B zero), its warps compute
/// the G·U/16 tiles of 16 rows × 16 units (mma_chunk over k chunks of kBK), the accumulators meet
/// in shared memory, each (row, 4 units) item runs cell_epilogue4, and the blocks meet at the grid
/// barrier. The reset-before GRU takes a second barrier per step for r ⊙ h, as the f32 kernel.
/// grid = (blocks per direction, 1, directions); every block co-resident (checked at plan time).
/// Shared memory of the persistent kernel on the matrix units: R rows [G·U][ld] and the staged
/// operand [16][ld] as operand bits of `operand_bytes` (2: f16 / bf16; 4: TF32), ld = Hs rounded up
/// to the k chunk of 32 plus 16 bytes, and the accumulators [16][G·U] in f32.
RNNCORE_HD inline size_t persistent_mma_smem_bytes(int gates, int units, int64_t hidden_stride, size_t operand_bytes) {
  const size_t ld = static_cast<size_t>((hidden_stride + 31) / 32 * 32) + 16 / operand_bytes;
  const size_t rows = static_cast<size_t>(gates) * units;
  return operand_bytes * ld * (rows + kMmaDim) + sizeof(float) * kMmaDim * rows;
}

template <int C, class WT>
struct rnn_recurrence_persistent_mma {
  using Args = LayerArgs;
  using Op = MmaOperandOf<WT>;
  using Bits = typename Op::Bits;
  static const char* name() { return kPersistentMmaNames[weight_id_of(WT{})][C]; }
  static constexpr bool kUsesMma = true;
  static constexpr bool kUsesMmaTf32 = weight_id_of(WT{}) == kWeightF32;
  static constexpr int kGates = cell_gates(C);
  static constexpr int kMaxThreads = kPersistentThreads;
  /// NVIDIA: plan registers for 2 resident blocks per SM (at most 128): without a hint ptxas kept
  /// the TF32 reset-before GRU at 48 registers and spilled 4 bytes on sm_80.
  static constexpr int kMinBlocks = 2;
  static constexpr int kBK = 32;  ///< k chunk of mma_chunk (rnn_step_mma_16x16's)
  /// k of the staged rows (Hs rounded up to whole chunks, zeros past Hs) and their stride in
  /// elements, padded by 16 bytes as the step kernel's so that a fragment's rows start in
  /// different banks.
  RNNCORE_HD static int padded_k(int64_t hs) { return static_cast<int>((hs + kBK - 1) / kBK * kBK); }
  RNNCORE_HD static int ld(int64_t hs) { return padded_k(hs) + 16 / static_cast<int>(sizeof(Bits)); }
  RNNCORE_HD static size_t smem_bytes(int units, int64_t hs) {
    return persistent_mma_smem_bytes(kGates, units, hs, sizeof(Bits));
  }

  /// Stages op [B][Hs] (written by other blocks before the last grid barrier) as operand bits.
  template <class Exec>
  RNNCORE_HD static void stage(const Exec& ex, const float* op, Bits* st, int batch, int hs, int k_pad, int l) {
    stage_rounds<16>(
        ex.tx(), ex.bdx(), kMmaDim * k_pad,
        [&](int i) {
          const int r = i / k_pad, k = i - r * k_pad;
          return r < batch && k < hs ? ex.load_coherent(op + r * hs + k) : 0.0f;
        },
        [&](int i, float v) {
          const int r = i / k_pad, k = i - r * k_pad;
          st[r * l + k] = Op::of_x(v);
        });
  }

  /// pre[row][n] = staged operand row · R row n for the n of gates [G0, G0 + NG): warp w computes
  /// the 16 × 16 tiles w, w + warps, ...
  template <int G0, int NG, class Exec>
  RNNCORE_HD static void products(const Exec& ex, const Bits* rows, const Bits* st, float* pre, int units, int k_pad,
                                  int l) {
    const int ws = ex.warp_size(), lane = ex.tx() % ws, e = 256 / ws, n_all = kGates * units;
    const int tiles = NG * units / kMmaDim;
    for (int tile = ex.tx() / ws; tile < tiles; tile += ex.bdx() / ws) {
      const int n0 = G0 * units + tile * kMmaDim;
      MmaAcc acc;
      for (int c = 0; c < 8; ++c) acc.c[c] = 0.0f;
      for (int k0 = 0; k0 < k_pad; k0 += kBK) mma_chunk<WT, kBK>(ex, st + k0, rows + n0 * l + k0, l, acc);
      RNNCORE_GPU_UNROLL
      for (int c = 0; c < 8; ++c) {
        if (c >= e) continue;
        int row = 0, col = 0;
        mma_coord(ws, kMmaC, lane, c, &row, &col);
        pre[row * n_all + n0 + col] = acc.c[c];
      }
    }
  }

  /// The cell epilogue of this block's units for gates [G0, G0 + NG) of `pre`.
  template <int PHASE, int G0, int NG, class Exec>
  RNNCORE_HD static void epilogue(const Exec& ex, const Args& a, const DirArgs& d, const float* pre, int s, int t,
                                  int unit0, int units) {
    const int groups = units / 4, items = a.batch * groups, n_all = kGates * units;
    for (int it = ex.tx(); it < items; it += ex.bdx()) {
      const int b = it / groups, qq = it % groups, u = unit0 + 4 * qq;
      if (u >= a.hidden) continue;
      float rec[4 * NG];
      RNNCORE_GPU_UNROLL
      for (int g = 0; g < NG; ++g)
        for (int j = 0; j < 4; ++j) rec[4 * g + j] = pre[b * n_all + (G0 + g) * units + 4 * qq + j];
      cell_epilogue4<C, PHASE, false>(ex, a, d, s, t, b, u, rec);
    }
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int units, float* smem) {
    const DirArgs& d = a.dir[ex.bz()];
    const int H = a.hidden, B = a.batch, G = kGates, hs = static_cast<int>(a.hidden_stride);
    const int k_pad = padded_k(hs), l = ld(hs), unit0 = ex.bx() * units, n_all = G * units;
    Bits* rows = reinterpret_cast<Bits*>(smem);  // [G·U][l]: R rows (gate, unit), k fastest (B = Rᵀ)
    Bits* st = rows + n_all * l;                 // [16][l]: operand rows b, k fastest
    float* pre = reinterpret_cast<float*>(st + kMmaDim * l);  // [16][G·U]
    const WT* R = static_cast<const WT*>(d.r);
    stage_rounds<8>(  // this block's R rows, once for all steps
        ex.tx(), ex.bdx(), n_all * k_pad,
        [&](int i) {
          const int n = i / k_pad, k = i - n * k_pad, g = n / units, u = unit0 + (n - g * units);
          return u < H && k < hs ? Op::of_weight(R[(static_cast<int64_t>(g) * H + u) * hs + k]) : Bits{0};
        },
        [&](int i, Bits v) {
          const int n = i / k_pad, k = i - n * k_pad;
          rows[n * l + k] = v;
        });
    for (int s = 0; s < a.steps; ++s) {
      const int t = d.reverse ? a.steps - 1 - s : s;
      stage(ex, d.h[s & 1], st, B, hs, k_pad, l);
      ex.sync();  // the staged h and (at s = 0) R's rows are complete
      if constexpr (C == kGruResetBefore) {
        products<0, 2>(ex, rows, st, pre, units, k_pad, l);
        ex.sync();  // the r and z products are complete
        epilogue<1, 0, 2>(ex, a, d, pre, s, t, unit0, units);
        ex.grid_sync();  // every block's r ⊙ h is written (matrix units)
        stage(ex, d.rh, st, B, hs, k_pad, l);
        ex.sync();  // the staged r ⊙ h is complete
        products<2, 1>(ex, rows, st, pre, units, k_pad, l);
        ex.sync();  // the n products are complete
        epilogue<2, 2, 1>(ex, a, d, pre, s, t, unit0, units);
      } else {
        products<0, kGates>(ex, rows, st, pre, units, k_pad, l);
        ex.sync();  // every gate's products are complete
        epilogue<0, 0, kGates>(ex, a, d, pre, s, t, unit0, units);
      }
      ex.grid_sync();  // every block's h for step s + 1 is written (matrix units)
    }
  }
};

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_DEVICE_KERNELS_HPP

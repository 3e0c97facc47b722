// Backward through time on the GPU (docs/design.md §10.1, docs/training.md): the kernels of one (layer,
// direction), written once like src/gpu/device/kernels.hpp's (an `Exec` reaches the machine; the emulator
// in tests/gpu/ runs the same bodies). The calculus per unit is src/shared/cell_grad.hpp's, which
// the CPU backward (src/train.cpp) uses too; dropout masks are regenerated from the mask function
// (mask_bits4), never stored. src/gpu/host/backward.hpp schedules them:
//   gather (x_cell, h_prev of every step), start (dh, dc from dhy, dcy),
//   per step in reverse: cell (gate gradients, the direct part of dh_{t−1}, dc_{t−1}), the
//     products dh_{t−1} += dgatesᵀ-side · R (f32_rnn_grad_gemm), for the reset-before GRU also
//     d(r ⊙ h) and reset_before_r,
//   end (dh0, dc0), the weight gradients as products over every (step, row), the input gradient.
// Determinism: every output element is one thread's sum in a fixed order; no atomics anywhere, so
// results do not depend on the grid, the device or the run.
#ifndef RNNCORE_SRC_GPU_DEVICE_BACKWARD_HPP
#define RNNCORE_SRC_GPU_DEVICE_BACKWARD_HPP

#include "src/gpu/device/kernels.hpp"
#include "src/shared/cell_grad.hpp"

namespace rnncore {
namespace gpu {

/// One direction of one layer of a backward run. Element strides; pointers are device memory.
/// State-sized buffers are [B][O] for h (O = P with an LSTM projection, else H) and [B][H] for c
/// (no padding).
struct GradDirArgs {
  int32_t cell, gates, batch, steps, in_size, in_pad, hidden, hidden_stride, reverse, num_wrappers;
  int32_t out;                  ///< O: units of h, y and their gradients
  float proj_clip;              ///< the LSTM projection's clip, 0: none
  const void* wp;               ///< LSTM projection W_proj [P][H] (packed, the weight storage type), or null
  const void* r;                ///< R [G·H][Hs] (packed, the weight storage type): f32_rnn_grad_persistent's
  float* dwp;                   ///< its gradient (canonical [P][H], added to), or null
  float* dm;                    ///< [B][H] with a projection: the gradient at m of the step (W_projᵀ dh̃)
  int32_t residual[kWrappers];  ///< wrapper w is an (additive) residual wrapper
  const int32_t* lengths;       ///< [B] or null
  const uint32_t* row_ids;      ///< [B] or null
  uint32_t step;                ///< the mask function's c3, as in the forward
  const uint8_t* resets;        ///< the forward's per-step resets (device copy), or null; as LayerArgs'
  int64_t reset_st, reset_sb;
  const float* x;               ///< the layer's input (before input dropout)
  int64_t x_st, x_sb;
  const float* keep;            ///< reserve rows [T][B][keep_width]: as LayerArgs' keep_width, keep_h, lstm_ext
  int32_t keep_width, keep_h, lstm_ext;
  float cell_clip;              ///< LSTM cell clip, 0: none
  const float* peep;            ///< LSTM peepholes [3][H] (p_i, p_f, p_o; packed), or null
  float* dpeep[3];              ///< their gradients (canonical, added to), or null
  const float* h0;              ///< [B][H] or null (zeros)
  const float* c0;
  const float* dy;              ///< gradient of this direction's output columns, or null (zero)
  int64_t dy_st, dy_sb;
  const float* dhy;             ///< [B][H] or null
  const float* dcy;
  float* dx;                    ///< gradient of the layer's input, added to; or null (not wanted)
  int64_t dx_st, dx_sb;
  float* dh0;                   ///< [B][H] or null
  float* dc0;
  float* dh;                    ///< [B][H] dh of the step being processed, then of the one before
  float* dc;                    ///< [B][H] (LSTM)
  float* dgates;                ///< [T][B][(G+1)·H]; a projected LSTM's dh̃ [O] in block G
  float* hprev;                 ///< [T][B][O] the state each step read (zero past a row's length)
  float* xcell;                 ///< [T][B][I] the cell input (then its gradient)
  float* drh;                   ///< [B][H] reset-before GRU: d(r ⊙ h)
  MaskSite input[kWrappers], output[kWrappers], state_h[kWrappers], state_c[kWrappers];
};

/// C[i][j] (+)= Σ_p A[i][p] · B[p][j] for i < m, j < n, p < k in increasing order (B null: 1),
/// with A at a + arg · a_arg (arg: the step), element strides for A and B, B of type BT.
struct GemmArgs {
  const float* a;
  int64_t a_m, a_k, a_arg;
  const void* b;
  int64_t b_k, b_n;
  float* c;
  int64_t ldc, m, n, k;
  int32_t accumulate;
};

RNNCORE_HD inline bool grad_active(const GradDirArgs& a, int t, int b) {
  return t < (a.lengths != nullptr ? a.lengths[b] : a.steps);
}
/// The step before t in the direction's order for row b, or −1 where step t read the initial state
/// (the row's first step, or a reset before t).
template <class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE int grad_previous(const Exec& ex, const GradDirArgs& a, int t, int b) {
  if (a.resets != nullptr && ex.reset_flag(reset_byte(a.resets, a.reset_st, a.reset_sb, t, b))) return -1;
  if (!a.reverse) return t - 1;
  return t + 1 < (a.lengths != nullptr ? a.lengths[b] : a.steps) ? t + 1 : -1;
}
RNNCORE_HD inline int64_t grad_width(const GradDirArgs& a) { return static_cast<int64_t>(a.gates + 1) * a.hidden; }
RNNCORE_HD inline const float* grad_keep(const GradDirArgs& a, int t, int b) {
  return a.keep + (static_cast<int64_t>(t) * a.batch + b) * static_cast<int64_t>(a.keep_width);
}
/// Reset-before GRU, unit u of row b at step t (an active row), after drh = d(r ⊙ h): r's gradient
/// and what reaches dh_{t−1} through r ⊙ h (f32_rnn_grad_reset_before_r, and backward's persistent
/// kernel for its units).
RNNCORE_HD inline void grad_reset_before_r_at(const GradDirArgs& a, int t, int b, int u) {
  const int64_t H = a.hidden, row = static_cast<int64_t>(t) * a.batch + b, at = b * H + u;
  a.dh[at] += detail::gru_reset_before_r(grad_keep(a, t, b)[u], a.hprev[row * H + u], a.drh[at], a.dgates + row * grad_width(a) + u);
}
/// Multiplies v by masks[from], masks[from − 1] … masks[to] (an empty range when from < to).
RNNCORE_HD RNNCORE_GPU_INLINE void masks_down(const GradDirArgs& a, const MaskSite* masks, int from, int to, int t, int b, int q,
                                              float* v, int n) {
  for (int w = from; w >= to; --w) apply_mask4(masks[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), v, n);
}

/// The state (at element `at` of a reserve row) that step t read for units 4q..: the previous step's
/// kept value with every state mask applied, or the initial state ([B][width]).
template <class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void grad_state_before(const Exec& ex, const GradDirArgs& a, int t, int b, int q, int64_t at,
                                                     const MaskSite* masks, const float* initial, int width, float* out, int n) {
  const int tp = grad_previous(ex, a, t, b), u0 = 4 * q;
  if (tp < 0) {
    for (int j = 0; j < 4; ++j) if (j < n) out[j] = initial != nullptr ? initial[static_cast<int64_t>(b) * width + u0 + j] : 0.0f;
    return;
  }
  const float* k = grad_keep(a, tp, b) + at + u0;
  for (int j = 0; j < 4; ++j) if (j < n) out[j] = k[j];
  for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(masks[w], a.step, tp, a.row_ids, b, static_cast<uint32_t>(q), out, n);
}

/// x_cell (the input after input dropout) and h_prev of every (step, row), and zero gate
/// gradients past a row's length (such rows then add nothing to the products over all rows).
/// One thread per 4 units of x or of the H cell units (h_prev has the first O of them).
struct f32_rnn_grad_gather {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_gather"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int I = a.in_size, H = a.hidden, gi = (I + 3) / 4, gh = (H + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * (gi + gh);
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / (gi + gh);
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch), g = static_cast<int>(i % (gi + gh));
      const bool active = grad_active(a, t, b);
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (g < gi) {
        const int u0 = 4 * g, n = imin(4, I - u0);
        const float* xr = a.x + t * a.x_st + b * a.x_sb + u0;
        if (active) {
          for (int j = 0; j < 4; ++j) if (j < n) v[j] = xr[j];
          masks_down(a, a.input, a.num_wrappers - 1, 0, t, b, g, v, n);
        }
        for (int j = 0; j < 4; ++j) if (j < n) a.xcell[m * I + u0 + j] = v[j];
        continue;
      }
      const int q = g - gi, u0 = 4 * q, n = imin(4, H - u0), O = a.out;
      if (u0 < O) {
        const int no = imin(4, O - u0);
        if (active) grad_state_before(ex, a, t, b, q, a.keep_h, a.state_h, a.h0, O, v, no);
        for (int j = 0; j < 4; ++j) if (j < no) a.hprev[m * O + u0 + j] = v[j];
      }
      if (active) continue;
      float* dg = a.dgates + m * grad_width(a);
      for (int s = 0; s <= a.gates; ++s)
        for (int j = 0; j < 4; ++j) if (j < n) dg[static_cast<int64_t>(s) * H + u0 + j] = 0.0f;
    }
  }
};

/// dh = dhy (or 0; O units), dc = dcy (or 0; H units) before the last step.
struct f32_rnn_grad_start {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_start"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t H = a.hidden, O = a.out, total = static_cast<int64_t>(a.batch) * H;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t b = i / H, u = i % H, ih = b * O + u;
      if (u < O) a.dh[ih] = a.dhy != nullptr ? a.dhy[ih] : 0.0f;
      if (a.cell == kLstm) a.dc[i] = a.dcy != nullptr ? a.dcy[i] : 0.0f;
    }
  }
};

/// dh0 = dh, dc0 = dc after the first step (added to what the resets moved there: a run with
/// resets starts dh0 and dc0 at zero).
struct f32_rnn_grad_end {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_end"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t H = a.hidden, O = a.out, total = static_cast<int64_t>(a.batch) * H;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const bool add = a.resets != nullptr;
      const int64_t b = i / H, u = i % H, ih = b * O + u;
      if (a.dh0 != nullptr && u < O) a.dh0[ih] = (add ? a.dh0[ih] : 0.0f) + a.dh[ih];
      if (a.dc0 != nullptr && a.cell == kLstm) a.dc0[i] = (add ? a.dc0[i] : 0.0f) + a.dc[i];
    }
  }
};

/// The gradient reaching the layer's h at (t, b), units 4q.. of O: dh through the state masks, plus
/// dy through the output wrappers (outermost first); a residual wrapper passes dy on to the
/// layer's input gradient too (through the input masks outside it).
RNNCORE_HD RNNCORE_GPU_INLINE void grad_cell_output(const GradDirArgs& a, int t, int b, int q, float* dh_cell, int n) {
  const int u0 = 4 * q;
  for (int j = 0; j < 4; ++j) if (j < n) dh_cell[j] = a.dh[static_cast<int64_t>(b) * a.out + u0 + j];
  for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(a.state_h[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), dh_cell, n);
  if (a.dy == nullptr) return;
  float dout[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const float* dy = a.dy + t * a.dy_st + b * a.dy_sb + u0;
  for (int j = 0; j < 4; ++j) if (j < n) dout[j] = dy[j];
  for (int w = a.num_wrappers - 1; w >= 0; --w) {
    if (!a.residual[w]) {
      apply_mask4(a.output[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), dout, n);
    } else if (a.dx != nullptr) {  // residuals need I == O: the same 4 units of the input
      float dres[4] = {dout[0], dout[1], dout[2], dout[3]};
      masks_down(a, a.input, a.num_wrappers - 1, w + 1, t, b, q, dres, n);
      float* dx = a.dx + t * a.dx_st + b * a.dx_sb + u0;
      for (int j = 0; j < 4; ++j) if (j < n) dx[j] += dres[j];
    }
  }
  for (int j = 0; j < 4; ++j) if (j < n) dh_cell[j] += dout[j];
}

/// Where the step after t read row b's initial state (a reset), what dh (nh units from u0, of O)
/// and dc (nc units, of H) hold is that state's gradient: it goes to dh0 / dc0 and none of it
/// reaches step t.
template <class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void grad_fold_reset(const Exec& ex, const GradDirArgs& a, int t, int b, int u0, int nh, int nc) {
  const int next = a.reverse ? t - 1 : t + 1;
  if (a.resets == nullptr || next < 0 || next >= a.steps || !grad_active(a, next, b) ||
      !ex.reset_flag(reset_byte(a.resets, a.reset_st, a.reset_sb, next, b)))
    return;
  const int64_t ah = static_cast<int64_t>(b) * a.out + u0, ac = static_cast<int64_t>(b) * a.hidden + u0;
  for (int j = 0; j < 4; ++j) if (j < nh) {
    if (a.dh0 != nullptr) a.dh0[ah + j] += a.dh[ah + j];
    a.dh[ah + j] = 0.0f;
  }
  if (a.cell != kLstm) return;
  for (int j = 0; j < 4; ++j) if (j < nc) {
    if (a.dc0 != nullptr) a.dc0[ac + j] += a.dc[ac + j];
    a.dc[ac + j] = 0.0f;
  }
}

/// An LSTM unit group with peepholes, a cell clip or a projection (dh_cell is the gradient at m):
/// the CPU's lstm_ext_cell. A clipped c_t (reserve slot 6 holds it before the clip) passes nothing
/// back; the peepholes add p_o's path to dc_t and p_i's, p_f's to dc_{t−1}. Each term is taken
/// through ex.term, so the emulator's mutation test can leave it out.
template <class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void lstm_ext_unit(const Exec& ex, const GradDirArgs& a, const float* k, int u0, const float* c_prev,
                                                 const float* dh_cell, const float* dc_cell, float* dc, float* dg, int n) {
  const int H = a.hidden;
  for (int j = 0; j < 4; ++j) if (j < n) {
    detail::LstmPeepholes<float> p;
    if (a.peep != nullptr && ex.term(true)) p = {a.peep[u0 + j], a.peep[H + u0 + j], a.peep[2 * H + u0 + j]};
    const bool clipped = ex.term(!detail::clip_passes(k[6 * H + j], a.cell_clip));
    dc[j] = detail::lstm_ext_unit_backward(k[j], k[H + j], k[2 * H + j], k[3 * H + j], act_tanh(k[4 * H + j]), c_prev[j], dh_cell[j],
                                           dc_cell[j], p, clipped, dg + j, static_cast<int64_t>(H));
  }
}

/// Step t of cell C for row b, units 4q.. (of H): the pre-activation gradients into dgates[t][b],
/// dh[b] replaced by the part of dh_{t−1} that bypasses R, dc[b] by dc_{t−1}. A row past its
/// length keeps dh and dc (the state passed that step unchanged). A reset before step t + 1 first
/// moves dh and dc to dh0 / dc0 (grad_fold_reset). With a projection the gradient at m is dm
/// (f32_lstm_grad_projection and the product with W_proj ran first, and handled dh).
template <int C, class Exec>
RNNCORE_HD RNNCORE_GPU_INLINE void grad_cell_group(const Exec& ex, const GradDirArgs& a, int t, int b, int q) {
  const int H = a.hidden, u0 = 4 * q, n = imin(4, H - u0);
  if (!grad_active(a, t, b)) return;
  const bool projected = C == kLstm && a.dm != nullptr;
  grad_fold_reset(ex, a, t, b, u0, projected ? 0 : n, n);
  float dh_cell[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (projected) {
    for (int j = 0; j < 4; ++j) if (j < n) dh_cell[j] = a.dm[static_cast<int64_t>(b) * H + u0 + j];
  } else {
    grad_cell_output(a, t, b, q, dh_cell, n);
  }
  const float* k = grad_keep(a, t, b) + u0;
  const int64_t row = static_cast<int64_t>(t) * a.batch + b;
  float* dg = a.dgates + row * grad_width(a) + u0;
  float* dh = a.dh + static_cast<int64_t>(b) * a.out + u0;
  if constexpr (C == kLstm) {
    float c_prev[4] = {0.0f, 0.0f, 0.0f, 0.0f}, dc_cell[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    grad_state_before(ex, a, t, b, q, 4 * static_cast<int64_t>(H), a.state_c, a.c0, H, c_prev, n);
    float* dc = a.dc + static_cast<int64_t>(b) * H + u0;
    for (int j = 0; j < 4; ++j) if (j < n) dc_cell[j] = dc[j];
    for (int w = 0; w < a.num_wrappers; ++w) apply_mask4(a.state_c[w], a.step, t, a.row_ids, b, static_cast<uint32_t>(q), dc_cell, n);
    if (a.lstm_ext) {
      lstm_ext_unit(ex, a, k, u0, c_prev, dh_cell, dc_cell, dc, dg, n);
    } else {
      for (int j = 0; j < 4; ++j) if (j < n)
        dc[j] = detail::lstm_unit_backward(k[j], k[H + j], k[2 * H + j], k[3 * H + j], act_tanh(k[4 * H + j]), c_prev[j],
                                           dh_cell[j], dc_cell[j], dg + j, static_cast<int64_t>(H));
    }
    if (!projected)
      for (int j = 0; j < 4; ++j) if (j < n) dh[j] = 0.0f;
  } else if constexpr (C == kGruResetAfter || C == kGruResetBefore) {
    const float* hp = a.hprev + row * H + u0;
    for (int j = 0; j < 4; ++j) if (j < n)
      dh[j] = detail::gru_unit_backward(C == kGruResetAfter, k[j], k[H + j], k[2 * H + j], C == kGruResetAfter ? k[3 * H + j] : 0.0f,
                                        hp[j], dh_cell[j], dg + j, static_cast<int64_t>(H));
  } else {
    for (int j = 0; j < 4; ++j) if (j < n) {
      dg[j] = detail::rnn_unit_backward(C == kRnnTanh, k[j], dh_cell[j]);
      dh[j] = 0.0f;
    }
  }
}

/// One step t (arg) of cell C, one thread per (row, 4 units): grad_cell_group.
template <int C>
struct f32_rnn_grad_cell {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_cell"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int t, float*) {
    const int groups = (a.hidden + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.batch) * groups;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex))
      grad_cell_group<C>(ex, a, t, static_cast<int>(i / groups), static_cast<int>(i % groups));
  }
};

constexpr const char* kGradPersistentNames[] = {"f32_lstm_grad_persistent", "f32_gru_grad_persistent",
                                                "f32_gru_reset_before_grad_persistent", "f32_rnn_tanh_grad_persistent",
                                                "f32_rnn_relu_grad_persistent"};

/// Shared memory of f32_rnn_grad_persistent: R's columns of the block's units [G·H][U] of
/// `weight_bytes` each, and the warps' partial sums [warps][MAXB][4] in f32.
RNNCORE_HD inline size_t grad_persistent_smem_bytes(int gates, int hidden, int units, int warps, int maxb, size_t weight_bytes) {
  return weight_bytes * static_cast<size_t>(gates) * hidden * units + sizeof(float) * static_cast<size_t>(warps) * maxb * 4;
}

/// Backward's steps as one cooperative launch per direction (Recurrence::persistent; every cell,
/// an LSTM without a projection), in place of f32_rnn_grad_cell and the per-step products. Block j
/// owns units [j·U, j·U + U) (U = arg, a multiple of 4) and keeps R's columns for them, all G·H
/// rows, in shared memory across steps. Each step, in reverse:
///   1. grad_cell_group for its units: dgates[t] and the part of dh_{t−1} that bypasses R, dc_{t−1};
///   2. a grid barrier: every unit's dgates[t] is written;
///   3. dh_{t−1} += Σ_n dgates[t][b][col n] · R[n][u] for its units u: the product kGemmRecurrent
///      (and, reset-after GRU, kGemmRecurrentN: R's rows 2H.. pair with dgates' block G) computes,
///      restricted to the columns the block's next cell step reads — so one grid barrier a step.
///   The reset-before GRU puts f32_rnn_grad_reset_before_r's work between 2 and 3: d(r ⊙ h) of its
///   units from every unit's dn (R_n's rows), r's gradient and its part of dh, a second grid
///   barrier (every unit's dr is written), then 3 over the r and z rows.
/// The threads split n (thread i takes n ≡ i), each sums its n in increasing order for MAXB rows ×
/// 4 units; the partial sums meet by shuffles within a warp, then in shared memory in warp order:
/// deterministic, another order than the per-step product's. dgates[t] is other blocks' writes:
/// read with ex.load_coherent. grid = (blocks, 1, 1); needs every block co-resident (plan time).
template <int C, int MAXB, class WT>
struct f32_rnn_grad_persistent {
  using Args = GradDirArgs;
  static const char* name() { return kGradPersistentNames[C]; }
  static constexpr int kGates = cell_gates(C);
  static constexpr int kMaxThreads = kPersistentThreads;
  /// NVIDIA: the resident blocks per SM to plan registers for: 1 for MAXB 4 (without a hint ptxas
  /// spilled the reset-before GRU's sm_80 instance at 48 registers); none for MAXB 16 (112-128
  /// registers; 2 spilled the f16 LSTM's on sm_80, 1 let them take up to 161).
  static constexpr int kMinBlocks = MAXB >= 16 ? 0 : 1;

  /// Column of dgates' row that R's row n pairs with.
  RNNCORE_HD static int column(int n, int H) { return C == kGruResetAfter && n >= 2 * H ? n + H : n; }

  /// out[b][unit0 + 4c ..] (+)= Σ_{n0 ≤ n < n1} dgates[t][b][column n] · rows[n][4c ..] for
  /// b < batch (out: [B][ldo]; accumulate or set).
  template <class Exec>
  RNNCORE_HD RNNCORE_GPU_INLINE static void product(const Exec& ex, const Args& a, const WT* rows, float* red, int t, int unit0, int units, int c,
                                 int n0, int n1, float* out, int64_t ldo, bool accumulate) {
    const int ws = ex.warp_size(), lane = ex.tx() % ws, warp = ex.tx() / ws, warps = ex.bdx() / ws;
    const int H = a.hidden, B = a.batch;
    const int64_t gw = grad_width(a);
    const float* dg = a.dgates + static_cast<int64_t>(t) * B * gw;
    float acc[MAXB][4];
    RNNCORE_GPU_UNROLL
    for (int b = 0; b < MAXB; ++b)
      for (int j = 0; j < 4; ++j) acc[b][j] = 0.0f;
    for (int n = n0 + ex.tx(); n < n1; n += ex.bdx()) {
      const F4 r = load4w(rows + n * units + 4 * c);
      const float* col = dg + column(n, H);
      RNNCORE_GPU_UNROLL
      for (int b = 0; b < MAXB; ++b) {
        if (b < B) {
          const float v = ex.load_coherent(col + b * gw);
          acc[b][0] += v * r.x;
          acc[b][1] += v * r.y;
          acc[b][2] += v * r.z;
          acc[b][3] += v * r.w;
        }
      }
    }
    RNNCORE_GPU_UNROLL
    for (int b = 0; b < MAXB; ++b) {
      if (b < B) {  // uniform across the warp: every lane takes part in the shuffles
        for (int j = 0; j < 4; ++j) {
          float v = acc[b][j];
          for (int m = ws / 2; m > 0; m /= 2) v += ex.shfl_xor(v, m);
          if (lane == 0) red[(warp * MAXB + b) * 4 + j] = v;
        }
      }
    }
    ex.sync();
    for (int i = ex.tx(); i < B * 4; i += ex.bdx()) {
      const int b = i / 4, u = unit0 + 4 * c + i % 4;
      float v = 0.0f;
      for (int w = 0; w < warps; ++w) v += red[(w * MAXB + b) * 4 + i % 4];
      if (u < H) {
        float* o = out + static_cast<int64_t>(b) * ldo + u;
        *o = accumulate ? *o + v : v;
      }
    }
    ex.sync();  // `out` of the block's units is whole (the next phase reads it), `red` free again
  }

  /// The reset-before GRU between the products: f32_rnn_grad_reset_before_r for the block's units.
  template <class Exec>
  RNNCORE_HD RNNCORE_GPU_INLINE static void reset_before_r(const Exec& ex, const Args& a, int t, int unit0, int units) {
    const int H = a.hidden;
    for (int i = ex.tx(); i < a.batch * units; i += ex.bdx()) {
      const int b = i / units, u = unit0 + i % units;
      if (u < H && grad_active(a, t, b)) grad_reset_before_r_at(a, t, b, u);
    }
  }

  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int units, float* smem) {
    const int H = a.hidden, N = kGates * H, groups = units / 4, unit0 = ex.bx() * units;
    const int64_t Hs = a.hidden_stride;
    WT* rows = reinterpret_cast<WT*>(smem);                                                          // [G·H][U]
    float* red = reinterpret_cast<float*>(rows + static_cast<int64_t>(N) * units);  // [warps][MAXB][4]
    stage_rounds<8>(  // R's columns of this block's units, once for all steps (N · U fits in shared memory)
        ex.tx(), ex.bdx(), N * units,
        [&](int i) {
          const int n = i / units, u = unit0 + (i - n * units);
          return u < H ? static_cast<const WT*>(a.r)[n * Hs + u] : from_float<WT>(0.0f);
        },
        [&](int i, WT v) { rows[i] = v; });
    // (the first step's grid barrier orders the staging before any product reads `rows`)
    for (int s = a.steps - 1; s >= 0; --s) {
      const int t = a.reverse ? a.steps - 1 - s : s;
      for (int i = ex.tx(); i < a.batch * groups; i += ex.bdx()) {
        const int q = unit0 / 4 + i % groups;
        if (4 * q < H) grad_cell_group<C>(ex, a, t, i / groups, q);
      }
      ex.grid_sync();  // every block's dgates[t] is written
      if constexpr (C == kGruResetBefore) {
        for (int c = 0; c < groups; ++c) product(ex, a, rows, red, t, unit0, units, c, 2 * H, 3 * H, a.drh, H, false);
        reset_before_r(ex, a, t, unit0, units);
        ex.grid_sync();  // every block's dr (dgates[t]'s r block) is written
      }
      const int n1 = C == kGruResetBefore ? 2 * H : N;
      for (int c = 0; c < groups; ++c) product(ex, a, rows, red, t, unit0, units, c, 0, n1, a.dh, a.out, true);
    }
  }
};

/// The LSTM peepholes' gradients after the steps: dp_i += Σ di · c_{t−1}, dp_f += Σ df · c_{t−1},
/// dp_o += Σ do · c_t over every (step, row) within its length, in that order. One thread per
/// (peephole, 4 units): deterministic, no atomics.
struct f32_rnn_grad_peepholes {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_peepholes"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int H = a.hidden, groups = (H + 3) / 4;
    const int64_t rows = static_cast<int64_t>(a.steps) * a.batch, gw = grad_width(a);
    for (int64_t i = grid_first(ex); i < 3 * static_cast<int64_t>(groups); i += grid_stride(ex)) {
      const int which = static_cast<int>(i / groups), q = static_cast<int>(i % groups), u0 = 4 * q, n = imin(4, H - u0);
      const int gate = which == 2 ? 3 : which;  // p_i, p_f, p_o multiply into gates i, f, o
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t m = 0; m < rows; ++m) {
        const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
        if (!grad_active(a, t, b)) continue;
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (which == 2) {  // the new cell state
          for (int j = 0; j < 4; ++j) if (j < n) c[j] = grad_keep(a, t, b)[4 * static_cast<int64_t>(H) + u0 + j];
        } else if (ex.term(true)) {  // the state the step read
          grad_state_before(ex, a, t, b, q, 4 * static_cast<int64_t>(H), a.state_c, a.c0, H, c, n);
        }
        const float* dg = a.dgates + m * gw + static_cast<int64_t>(gate) * H + u0;
        for (int j = 0; j < 4; ++j) if (j < n) sum[j] += dg[j] * c[j];
      }
      for (int j = 0; j < 4; ++j) if (j < n) a.dpeep[which][u0 + j] += sum[j];
    }
  }
};

/// A projected LSTM's step t (arg), before its cell kernel, one thread per (row, 4 of the O units):
/// the gradient at h (dh through the state masks and dy through the output wrappers, after a reset
/// before step t + 1 moved dh to dh0), then through the projection clip (nothing passes where it
/// bound: h̃, kept before the clip, is outside ±proj_clip) into dh̃ = dgates[t][b] block G; dh is
/// zeroed for the recurrent product. dm = dh̃ · W_proj follows as a product (kGemmProjectionBack).
struct f32_lstm_grad_projection {
  using Args = GradDirArgs;
  static const char* name() { return "f32_lstm_grad_projection"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int t, float*) {
    const int O = a.out, groups = (O + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.batch) * groups;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int b = static_cast<int>(i / groups), q = static_cast<int>(i % groups), k0 = 4 * q, n = imin(4, O - k0);
      if (!grad_active(a, t, b)) continue;  // gather zeroed the row's dgates
      grad_fold_reset(ex, a, t, b, k0, n, 0);
      float dh_cell[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      grad_cell_output(a, t, b, q, dh_cell, n);
      const float* raw = grad_keep(a, t, b) + a.keep_h + O + k0;  // h̃
      const int64_t row = static_cast<int64_t>(t) * a.batch + b;
      float* dp = a.dgates + row * grad_width(a) + static_cast<int64_t>(a.gates) * a.hidden + k0;
      float* dh = a.dh + static_cast<int64_t>(b) * O + k0;
      for (int j = 0; j < 4; ++j) if (j < n) {
        const bool cut = ex.term(!detail::clip_passes(raw[j], a.proj_clip));
        dp[j] = cut ? 0.0f : dh_cell[j];
        dh[j] = 0.0f;
      }
    }
  }
};

/// W_proj's gradient after the steps: dW_proj[k][u] += Σ dh̃[k] · m[u] over every (step, row)
/// within its length, in that order (m from the reserve row). One thread per (k, 4 units):
/// deterministic, no atomics.
struct f32_lstm_grad_projection_weights {
  using Args = GradDirArgs;
  static const char* name() { return "f32_lstm_grad_projection_weights"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int H = a.hidden, groups = (H + 3) / 4;
    const int64_t rows = static_cast<int64_t>(a.steps) * a.batch, gw = grad_width(a), GH = static_cast<int64_t>(a.gates) * H;
    for (int64_t i = grid_first(ex); i < static_cast<int64_t>(a.out) * groups; i += grid_stride(ex)) {
      const int k = static_cast<int>(i / groups), q = static_cast<int>(i % groups), u0 = 4 * q, n = imin(4, H - u0);
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t m = 0; m < rows; ++m) {
        const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
        if (!grad_active(a, t, b)) continue;
        const float dp = a.dgates[m * gw + GH + k];
        const float* mv = grad_keep(a, t, b) + 5 * static_cast<int64_t>(H) + u0;
        for (int j = 0; j < 4; ++j) if (j < n) sum[j] += dp * mv[j];
      }
      for (int j = 0; j < 4; ++j) if (j < n) a.dwp[static_cast<int64_t>(k) * H + u0 + j] += sum[j];
    }
  }
};

/// Reset-before GRU, step t (arg), after drh = d(r ⊙ h) (a product with R_n): r's gradient and
/// what reaches dh_{t−1} through r ⊙ h.
struct f32_rnn_grad_reset_before_r {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_reset_before_r"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int t, float*) {
    const int64_t H = a.hidden, total = static_cast<int64_t>(a.batch) * H;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int b = static_cast<int>(i / H), u = static_cast<int>(i % H);
      if (grad_active(a, t, b)) grad_reset_before_r_at(a, t, b, u);
    }
  }
};

/// Reset-before GRU, after the r and z products: h_prev ← r ⊙ h_prev (what R_n multiplied).
struct f32_rnn_grad_reset_hprev {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_reset_hprev"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t H = a.hidden, total = static_cast<int64_t>(a.steps) * a.batch * H;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / H;
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch);
      if (grad_active(a, t, b)) a.hprev[i] *= grad_keep(a, t, b)[i % H];  // rows past a length hold 0 already
    }
  }
};

/// The layer input's gradient: dx += (xcell, now Σ_g W_gᵀ dpre_g, or Σ_g dpre_g for a skip input)
/// through the input masks, for every (step, row) within its length. One thread per 4 inputs.
struct f32_rnn_grad_input {
  using Args = GradDirArgs;
  static const char* name() { return "f32_rnn_grad_input"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int skip_input, float*) {
    const int I = a.in_size, gi = (I + 3) / 4;
    const int64_t total = static_cast<int64_t>(a.steps) * a.batch * gi;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / gi;
      const int t = static_cast<int>(m / a.batch), b = static_cast<int>(m % a.batch), q = static_cast<int>(i % gi);
      const int u0 = 4 * q, n = imin(4, I - u0);
      if (!grad_active(a, t, b)) continue;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (skip_input) {  // every gate added x itself (I == H)
        const float* dg = a.dgates + m * grad_width(a) + u0;
        for (int g = 0; g < a.gates; ++g)
          for (int j = 0; j < 4; ++j) if (j < n) v[j] += dg[static_cast<int64_t>(g) * a.hidden + j];
      } else {
        for (int j = 0; j < 4; ++j) if (j < n) v[j] = a.xcell[m * I + u0 + j];
      }
      masks_down(a, a.input, a.num_wrappers - 1, 0, t, b, q, v, n);
      float* dx = a.dx + t * a.dx_st + b * a.dx_sb + u0;
      for (int j = 0; j < 4; ++j) if (j < n) dx[j] += v[j];
    }
  }
};

/// GemmArgs' product, one thread per element of C (grid-stride), summing p in increasing order:
/// deterministic. For the small products (a step's rows, bias sums); f32_rnn_grad_gemm_tiled does
/// the large ones.
template <class BT>
struct f32_rnn_grad_gemm {
  using Args = GemmArgs;
  static const char* name() { return "f32_rnn_grad_gemm"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& g, int arg, float*) {
    const float* A = g.a + static_cast<int64_t>(arg) * g.a_arg;
    const BT* B = static_cast<const BT*>(g.b);
    const int64_t total = g.m * g.n;
    for (int64_t e = grid_first(ex); e < total; e += grid_stride(ex)) {
      const int64_t i = e / g.n, j = e % g.n;
      const float* ai = A + i * g.a_m;
      float s = 0.0f;
      if (B == nullptr) {
        for (int64_t p = 0; p < g.k; ++p) s += ai[p * g.a_k];
      } else {
        const BT* bj = B + j * g.b_n;
        for (int64_t p = 0; p < g.k; ++p) s += ai[p * g.a_k] * to_float(bj[p * g.b_k]);
      }
      float* c = g.c + i * g.ldc + j;
      *c = g.accumulate ? *c + s : s;
    }
  }
};

/// GemmArgs' product for the per-step products (C has a step's rows: dh += dgates_t · R), split over
/// k as f32_rnn_step_direct splits a step: a block computes kBM rows × kBU columns of C; each of
/// kKS groups of threads sums its contiguous kKS-th of p in increasing order, a thread kTM rows × 4
/// columns with B's rows read four columns a load where they lie; the groups' partial sums meet in
/// shared memory, added in group order. Deterministic, another order than f32_rnn_grad_gemm's.
/// Needs B row-major (b_n = 1) with rows of b_k ≥ n rounded up to 4 elements, b_k a multiple of 4
/// (R and its n-gate rows: b_k = Hs). grid = (column tiles, row tiles (strided)).
template <class BT>
struct f32_rnn_grad_gemm_direct {
  using Args = GemmArgs;
  using Tile = StepTileDirect;
  static const char* name() { return "f32_rnn_grad_gemm_direct"; }
  static constexpr int kSlots = Tile::kRowThreads * Tile::kUnitThreads;  // threads of one k group
  static constexpr int kAcc = Tile::kTM * 4;
  static constexpr int kMaxThreads = Tile::kThreads;
  static constexpr int kMinBlocks = 1;
  RNNCORE_HD static size_t smem_bytes() { return sizeof(float) * Tile::kKS * kSlots * kAcc; }
  /// Whether the product's B has the layout this kernel reads.
  RNNCORE_HD static bool fits(const Args& g) { return g.b != nullptr && g.b_n == 1 && g.b_k % 4 == 0 && (g.n + 3) / 4 * 4 <= g.b_k; }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& g, int arg, float* smem) {
    constexpr int TM = Tile::kTM, KS = Tile::kKS;
    const float* A = g.a + static_cast<int64_t>(arg) * g.a_arg;
    const BT* B = static_cast<const BT*>(g.b);
    const int tid = ex.tx(), ks = tid / kSlots, slot = tid % kSlots;
    const int rt = slot / Tile::kUnitThreads, ut = slot % Tile::kUnitThreads;
    const int64_t p0 = g.k * ks / KS, p1 = g.k * (ks + 1) / KS;
    const int64_t c0 = static_cast<int64_t>(ex.bx()) * Tile::kBU;
    const int64_t j0 = c0 + ut * 4 < g.n ? c0 + ut * 4 : (g.n - 1) / 4 * 4;  // columns past n read the last group
    const int64_t m_tiles = (g.m + Tile::kBM - 1) / Tile::kBM;
    for (int64_t mt = ex.by(); mt < m_tiles; mt += ex.gdy()) {
      const int64_t i0 = mt * Tile::kBM;
      const float* arow[TM];
      for (int i = 0; i < TM; ++i) {
        const int64_t r = i0 + rt * TM + i;
        arow[i] = A + (r < g.m ? r : g.m - 1) * g.a_m;
      }
      float acc[TM][4];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
      for (int64_t p = p0; p < p1; ++p) {
        const F4 w = load4w(B + p * g.b_k + j0);
        for (int i = 0; i < TM; ++i) {
          const float av = arow[i][p * g.a_k];
          acc[i][0] += av * w.x;
          acc[i][1] += av * w.y;
          acc[i][2] += av * w.z;
          acc[i][3] += av * w.w;
        }
      }
      float* mine = smem + (static_cast<int64_t>(ks) * kSlots + slot) * kAcc;
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < 4; ++j) mine[i * 4 + j] = acc[i][j];
      ex.sync();
      for (int o = tid; o < kSlots * kAcc; o += Tile::kThreads) {  // one element of C each
        const float v = sum_k_groups<KS>(smem, kSlots * kAcc, o);
        const int sl = o / kAcc, i = o % kAcc / 4, j = o % 4;
        const int64_t r = i0 + (sl / Tile::kUnitThreads) * TM + i, c = c0 + (sl % Tile::kUnitThreads) * 4 + j;
        if (r < g.m && c < g.n) {
          float* out = g.c + r * g.ldc + c;
          *out = g.accumulate ? *out + v : v;
        }
      }
      ex.sync();  // the partial-sum area of the next row tile
    }
  }
};

/// GemmArgs' product (B not null) in shared-memory tiles of kBM × kBN over k chunks of kBK; each
/// of the kThreads threads accumulates a 4 × 4 block in registers, summing p in increasing order
/// like f32_rnn_grad_gemm. For the large products (weight and input gradients over every step and
/// row). grid = (n tiles, m tiles, strided).
template <class BT>
struct f32_rnn_grad_gemm_tiled {
  using Args = GemmArgs;
  static const char* name() { return "f32_rnn_grad_gemm_tiled"; }
  static constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;
  static constexpr int kMaxThreads = kThreads;
  /// NVIDIA: 3 resident blocks per SM (at most 85 registers), as f32_rnn_proj_gemm_tiled.
  static constexpr int kMinBlocks = 3;
  RNNCORE_HD static size_t smem_bytes() { return sizeof(float) * kBK * (kBM + kBN); }
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& g, int arg, float* smem) {
    float* As = smem;              // [kBK][kBM]
    float* Bs = smem + kBK * kBM;  // [kBK][kBN]
    const float* A = g.a + static_cast<int64_t>(arg) * g.a_arg;
    const BT* B = static_cast<const BT*>(g.b);
    const int tid = ex.tx(), ty = tid / (kBN / 4), tx = tid % (kBN / 4);
    const int64_t n0 = static_cast<int64_t>(ex.bx()) * kBN, m_tiles = (g.m + kBM - 1) / kBM;
    for (int64_t mt = ex.by(); mt < m_tiles; mt += ex.gdy()) {
      const int64_t m0 = mt * kBM;
      float acc[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
      for (int64_t k0 = 0; k0 < g.k; k0 += kBK) {
        for (int e = tid; e < kBM * kBK; e += kThreads) {  // e = kk · kBM + r: rows fastest
          const int kk = e / kBM, r = e % kBM;
          const int64_t i = m0 + r, p = k0 + kk;
          As[e] = i < g.m && p < g.k ? A[i * g.a_m + p * g.a_k] : 0.0f;
        }
        for (int e = tid; e < kBN * kBK; e += kThreads) {  // e = kk · kBN + c: columns fastest
          const int kk = e / kBN, c = e % kBN;
          const int64_t j = n0 + c, p = k0 + kk;
          Bs[e] = j < g.n && p < g.k ? to_float(B[p * g.b_k + j * g.b_n]) : 0.0f;
        }
        ex.sync();
        tile_mac_4x4(As, kBM, Bs, kBN, static_cast<int>(g.k - k0 < kBK ? g.k - k0 : kBK), ty, tx, acc);
        ex.sync();
      }
      for (int i = 0; i < 4; ++i) {
        const int64_t r = m0 + ty * 4 + i;
        if (r >= g.m) continue;
        for (int j = 0; j < 4; ++j) {
          const int64_t c = n0 + tx * 4 + j;
          if (c >= g.n) continue;
          float* out = g.c + r * g.ldc + c;
          *out = g.accumulate ? *out + acc[i][j] : acc[i][j];
        }
      }
    }
  }
};

// ------------------------------------------------------------------------- the ends' gradients

/// The Dense head's backward (src/head_grad.cpp's head_backward): per row the head mapped (every
/// step: r = t·batch + b; last step: batch row r), dz from its activations y and the caller's dy,
/// then the last layer's output gradient do = dz · W at the columns the head read (every step: row
/// r; last step: each direction's last output, forward at length − 1, reverse at 0).
struct HeadGradArgs {
  const float* y;   ///< [rows][out] the head's activations (the reserve's head_y)
  const float* dy;  ///< the caller's gradient of y, in the run's layout (as DenseArgs::y)
  float* dz;        ///< [rows][out]
  const float* w;   ///< [out][in] the head's weights
  float* d_out;     ///< [T][B][in] the last layer's output gradient, zeroed before
  const int32_t* lengths;
  int32_t rows, out, in, per_dir, act;
  int32_t steps, batch, last_step, batch_major;
};

RNNCORE_HD inline bool head_row_active(const HeadGradArgs& a, int64_t r) {
  const int64_t b = a.last_step ? r : r % a.batch;
  const int32_t len = a.lengths != nullptr ? a.lengths[b] : a.steps;
  return a.last_step ? len > 0 : r / a.batch < len;
}

/// dz of each row: none dy; relu dy where y > 0; sigmoid dy·y·(1 − y); tanh dy·(1 − y²); softmax
/// y ⊙ (dy − Σ dy ⊙ y); zeros for a row past its length. One thread per row.
struct f32_head_grad_dz {
  using Args = HeadGradArgs;
  static const char* name() { return "f32_head_grad_dz"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int N = a.out;
    for (int64_t r = grid_first(ex); r < a.rows; r += grid_stride(ex)) {
      float* z = a.dz + r * N;
      if (!head_row_active(a, r)) {
        for (int j = 0; j < N; ++j) z[j] = 0.0f;
        continue;
      }
      const int64_t t = r / a.batch, b = r % a.batch;
      const float* g = a.dy + (a.last_step || !a.batch_major ? r : b * a.steps + t) * N;
      const float* y = a.y + r * N;
      float dot = 0.0f;
      if (a.act == kDenseSoftmax)
        for (int j = 0; j < N; ++j) dot += g[j] * y[j];
      for (int j = 0; j < N; ++j) {
        const float v = y[j];
        z[j] = a.act == 1 ? (v > 0.0f ? g[j] : 0.0f)
             : a.act == 2 ? g[j] * v * (1.0f - v)
             : a.act == 3 ? g[j] * (1.0f - v * v)
             : a.act == kDenseSoftmax ? v * (g[j] - dot) : g[j];
      }
    }
  }
};

/// do = dz · W for each active row, each column's sum over the outputs in increasing order, written
/// where the head read that column. One thread per (row, input column).
struct f32_head_grad_rows {
  using Args = HeadGradArgs;
  static const char* name() { return "f32_head_grad_rows"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t K = a.in, total = static_cast<int64_t>(a.rows) * K;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t r = i / K, c = i % K;
      if (!head_row_active(a, r)) continue;
      const float* z = a.dz + r * a.out;
      float sum = 0.0f;
      for (int j = 0; j < a.out; ++j) sum += z[j] * a.w[j * K + c];
      int64_t at = i;  // every step: the same row of [T·B][in]
      if (a.last_step) {
        const int32_t len = a.lengths != nullptr ? a.lengths[r] : a.steps;
        const int64_t t = c < a.per_dir ? len - 1 : 0;
        at = (t * a.batch + r) * K + c;
      }
      a.d_out[at] = sum;
    }
  }
};

/// The Embedding's gradient: each table row seen gets the sum of layer 0's input gradients at the
/// (t, b) that read it (rows within their lengths, ids inside the table).
struct EmbedGradArgs {
  const int32_t* ids;  ///< as EmbedArgs
  int64_t id_st, id_sb;
  const float* dx;     ///< [T][B][width] the gradient of layer 0's input
  float* dtable;       ///< [vocab][width], added to
  const int32_t* lengths;
  int32_t steps, batch, vocab, width;
};

/// A segmented sum without atomics: the thread of (t, b, u) whose (t, b) is the first in time-major
/// order to read its id owns that table element and adds, in the same order as the reference, the
/// gradient of every (t, b) reading the id; the other threads of that id do nothing. One thread per
/// (t, b, unit).
struct f32_embedding_grad {
  using Args = EmbedGradArgs;
  static const char* name() { return "f32_embedding_grad"; }
  static constexpr int kMaxThreads = kBlockThreads;
  template <class Exec>
  RNNCORE_HD static void run(const Exec& ex, const Args& a, int, float*) {
    const int64_t W = a.width, M = static_cast<int64_t>(a.steps) * a.batch, total = M * W;
    for (int64_t i = grid_first(ex); i < total; i += grid_stride(ex)) {
      const int64_t m = i / W, u = i % W;
      const int32_t id = read_id(a, m);
      if (id < 0) continue;
      bool owner = true;
      for (int64_t e = 0; e < m && owner; ++e) owner = read_id(a, e) != id;
      if (!owner) continue;
      float* out = a.dtable + static_cast<int64_t>(id) * W + u;
      float v = *out;
      for (int64_t e = m; e < M; ++e)
        if (read_id(a, e) == id) v += a.dx[e * W + u];
      *out = v;
    }
  }
  /// The id (t, b) = (m / batch, m % batch) read, or −1 past its row's length or outside the table.
  RNNCORE_HD static int32_t read_id(const Args& a, int64_t m) {
    const int64_t t = m / a.batch, b = m % a.batch;
    if (a.lengths != nullptr && t >= a.lengths[b]) return -1;
    const int32_t id = a.ids[t * a.id_st + b * a.id_sb];
    return id >= 0 && id < a.vocab ? id : -1;
  }
};

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_DEVICE_BACKWARD_HPP

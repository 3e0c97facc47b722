// The SIMD backend's runtime side: packs canonical weights into gate-interleaved panels
// (simd/kernels.hpp) once, and runs one direction as an input-projection GEMM over all steps
// followed by one fused kernel call per step.
#include <algorithm>
#include <cstring>

#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/shared/half.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/spec_internal.hpp"
#include "src/internal/thread_pool.hpp"

namespace rnncore {
namespace detail {

namespace {

// Where a packed panel keeps its weights, and in which element type.
struct PanelFormat {
  simd::Weights weights = simd::Weights::f32;
  bool pairs = false;  // bf16 k-pairs for vdpbf16ps
};

// One pass of a panel: for each panel row k (Per = 2: k-pair), each of its `pass` vectors, each
// lane v, M_g[unit][k], converted by `conv`; lanes from valid[q] on are units past H and rows past K
// are zeros. Two readings of M_g, one function each:
//
// Transposed (pack_pass_transposed): vector q's lanes are adjacent from first[q], its k `kstep`
// apart: read as written, a vector's lanes at a time.
template <int Per, class E, class Convert>
E* pack_pass_transposed(E* out, const float* const* first, const int* valid, int pass, int V, int K,
                        std::int64_t kstep, Convert conv) {
  const int rows = (K + Per - 1) / Per * Per;
  for (int k = 0; k < rows; k += Per)
    for (int q = 0; q < pass; ++q)
      if (k + Per <= K && valid[q] == V) {
        for (int v = 0; v < V; ++v)
          for (int i = 0; i < Per; ++i) *out++ = conv(first[q][(k + i) * kstep + v]);
      } else {
        for (int v = 0; v < V; ++v)
          for (int i = 0; i < Per; ++i) *out++ = conv(v < valid[q] && k + i < K ? first[q][(k + i) * kstep + v] : 0.0f);
      }
  return out;
}

// Rows (pack_pass_rows): every lane is its own row of K floats, lane v of vector q at first[q] + v ·
// K. A k at a time would walk down pass · V rows (up to 64) a row apart: at K = 512 their cache
// lines share two L1 sets, and each read missed. So the rows are read 16 k (one cache line) at a
// time into a tile, the line after next asked for, then written out in panel order.
template <int Per, class E, class Convert>
E* pack_pass_rows(E* out, const float* const* first, const int* valid, int pass, int V, int K, Convert conv) {
  constexpr int kChunk = 16, kMaxPass = 4, kMaxLanes = 16;
  float tile[kMaxPass][kMaxLanes][kChunk];
  const int rows = (K + Per - 1) / Per * Per;
  for (int k0 = 0; k0 < rows; k0 += kChunk) {
    const int have = std::min(kChunk, K - k0), width = std::min(kChunk, rows - k0);
    for (int q = 0; q < pass; ++q)
      for (int v = 0; v < V; ++v) {
        float* t = tile[q][v];
        const float* src = first[q] + static_cast<std::int64_t>(v) * K + k0;
        if (v < valid[q] && have == kChunk) {
          std::memcpy(t, src, sizeof(float) * kChunk);  // a constant size: inlined, not a call
          if (k0 + 3 * kChunk <= K) __builtin_prefetch(src + 2 * kChunk);  // too many rows for the prefetchers
        } else {
          for (int i = 0; i < width; ++i) t[i] = v < valid[q] && i < have ? src[i] : 0.0f;
        }
      }
    for (int k = 0; k < width; k += Per)
      for (int q = 0; q < pass; ++q)
        for (int v = 0; v < V; ++v)
          for (int i = 0; i < Per; ++i) *out++ = conv(tile[q][v][k + i]);
  }
  return out;
}

// Packs the matrices {M_g : g in gates} ([H, K] row-major each) into panel order (simd/kernels.hpp):
// block j, pass of `pass` vectors, column k, vector (gate g, sub-vector n) of the pass, lane
// v → M_g[(j·NV + n)·V + v][k] (zero past H). In k-pairs for vdpbf16ps: within a pass, pair k/2,
// vector, lane, then the two k of the pair (K padded to even). M_g[unit][k] is at unit·K + k, or
// at k·H + unit when `transposed` (a [K, H] matrix's transpose). Written in order, no per-element
// index or type switch (training repacks on every weight update: an LSTM's W and R panels and their
// transposes at H 512, bf16, took ~9 ms a step that way).
template <class E, class Convert>
void pack_panel_as(E* out, const float* const* mats, int gate_count, int H, int K, int V, int NV, int pass, bool pairs,
                   bool transposed, Convert conv) {
  const int bu = V * NV, blocks = static_cast<int>(round_up(H, bu) / bu), vectors = gate_count * NV;
  const float* first[4];  // a pass's vectors: at most 4 (pass_vectors)
  int valid[4];
  for (int j = 0; j < blocks; ++j)
    for (int f = 0; f < vectors; f += pass) {  // `pass` divides `vectors`
      for (int q = 0; q < pass; ++q) {
        const int vec = f + q, unit = j * bu + vec % NV * V;
        valid[q] = std::max(0, std::min(V, H - unit));
        first[q] = mats[vec / NV] + (transposed ? unit : static_cast<std::int64_t>(unit) * K);
      }
      if (transposed)
        out = pairs ? pack_pass_transposed<2>(out, first, valid, pass, V, K, H, conv)
                    : pack_pass_transposed<1>(out, first, valid, pass, V, K, H, conv);
      else
        out = pairs ? pack_pass_rows<2>(out, first, valid, pass, V, K, conv)
                    : pack_pass_rows<1>(out, first, valid, pass, V, K, conv);
    }
}

void pack_panel(void* dst, const float* const* mats, int gate_count, int H, int K, int V, int NV, int pass,
                PanelFormat f, bool transposed = false) {
  switch (f.weights) {
    case simd::Weights::f32:
      return pack_panel_as(static_cast<float*>(dst), mats, gate_count, H, K, V, NV, pass, false, transposed,
                           [](float v) { return v; });
    case simd::Weights::f16:
      return pack_panel_as(static_cast<std::uint16_t*>(dst), mats, gate_count, H, K, V, NV, pass, false, transposed,
                           [](float v) { return f32_to_f16(v); });
    case simd::Weights::bf16:
      return pack_panel_as(static_cast<std::uint16_t*>(dst), mats, gate_count, H, K, V, NV, pass, f.pairs, transposed,
                           [](float v) { return f32_to_bf16(v); });
  }
}

// Gate-vector order (block j, gate g, sub-vector n, lane v) of per-gate vectors {b_g} (+ {b2_g} when given).
void pack_gate_vectors(float* dst, const float* const* b, const float* const* b2, int gate_count, int H, int V, int NV) {
  const int bu = V * NV, blocks = static_cast<int>(round_up(H, bu) / bu);
  for (int j = 0; j < blocks; ++j)
    for (int g = 0; g < gate_count; ++g)
      for (int v = 0; v < bu; ++v) {
        const int unit = j * bu + v;
        float value = 0.0f;
        if (unit < H) value = b[g][unit] + (b2 != nullptr && b2[g] != nullptr ? b2[g][unit] : 0.0f);
        *dst++ = value;
      }
}

template <class T>
T* at(unsigned char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}
template <class T>
const T* at(const unsigned char* base, std::size_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

}  // namespace

void simd_pack_transposed_panel(const PlanImpl& p, const float* m, int rows, int cols, void* dst) {
  const float* mats[1] = {m};
  pack_panel(dst, mats, 1, cols, rows, p.vector, 4, p.simd.kernels()->pass_vectors[4],
             PanelFormat{p.simd.weights, p.simd.bf16_pairs}, true);
}

Status simd_pack(const PlanImpl& p, const void* canonical_void, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const auto* canonical = static_cast<const float*>(canonical_void);
  const int V = p.vector;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    const int H = lp.hidden, G = lp.gates, NV = simd::vectors_per_gate(lp.cell);
    const bool reset_before = lp.cell == simd::Cell::gru_reset_before;
    const PanelFormat f{p.simd.weights, p.simd.bf16_pairs};
    const bool reset_after = lp.cell == simd::Cell::gru_reset_after;
    for (int d = 0; d < lp.dirs; ++d) {
      const DirectionPack& dp = lp.dir[d];
      const float *W[4] = {}, *R[4] = {}, *bW[4] = {}, *bR[4] = {};
      for (int g = 0; g < G; ++g) {
        const std::int64_t w = canonical_offset(st, l, d, ParamKind::input_weight, g);
        W[g] = w < 0 ? nullptr : canonical + w;
        R[g] = canonical + canonical_offset(st, l, d, ParamKind::recurrent_weight, g);
        bW[g] = canonical + canonical_offset(st, l, d, ParamKind::input_bias, g);
        bR[g] = canonical + canonical_offset(st, l, d, ParamKind::recurrent_bias, g);
      }
      const std::int32_t* pass = p.simd.kernels()->pass_vectors;  // by vectors per block
      if (!lp.skip_input) pack_panel(packed + dp.w_panel, W, G, H, lp.input_size, V, NV, pass[G * NV], f);
      if (reset_before) {
        pack_panel(packed + dp.r_panel, R, 2, H, H, V, NV, pass[2 * NV], f);
        pack_panel(packed + dp.r_panel_n, R + 2, 1, H, H, V, NV, pass[NV], f);
      } else {  // K is h's width: P with a projection
        pack_panel(packed + dp.r_panel, R, G, H, lp.out, V, NV, pass[G * NV], f);
      }
      if (dp.peepholes != 0) {  // canonical p_i, p_f, p_o are gates 0, 1, 3
        const float* peep[3];
        for (int q = 0; q < 3; ++q) peep[q] = canonical + canonical_offset(st, l, d, ParamKind::peephole, q == 2 ? 3 : q);
        pack_gate_vectors(at<float>(packed, dp.peepholes), peep, nullptr, 3, H, V, NV);
      }
      if (dp.proj_panel != 0) {  // W_proj [P, H]: a one-gate panel of P units over K = H
        const float* proj[1] = {canonical + canonical_offset(st, l, d, ParamKind::projection, 0)};
        pack_panel(packed + dp.proj_panel, proj, 1, lp.out, H, V, 1, pass[1], f);
        const int Op = static_cast<int>(round_up(lp.out, V));
        std::memset(at<float>(packed, dp.proj_bias), 0, sizeof(float) * static_cast<std::size_t>(Op));
      }
      // Both biases fold into the projection, except the reset-after GRU's bR_n, which r multiplies.
      const float* folded[4] = {bR[0], bR[1], bR[2], bR[3]};
      if (reset_after) {
        folded[2] = nullptr;
        const float* rn[1] = {bR[2]};
        pack_gate_vectors(at<float>(packed, dp.bias_rn), rn, nullptr, 1, H, V, NV);
      }
      pack_gate_vectors(at<float>(packed, dp.bias), bW, folded, G, H, V, NV);
    }
  }
  return Status::ok;
}

namespace {

// dst[0, n) *= the mask row of `m` for (t, b); `row` is scratch of at least m.width floats.
void multiply_mask_row(const PlanImpl& p, const Mask& m, const RunDropout& run, int t, int b, float* dst, int n,
                       float* row) {
  if (!m.active) return;
  mask_row(p.simd.kernels(), m, run, t, b, row);
  for (int u = 0; u < n; ++u) dst[u] *= row[u];
}

// Units [u0, u1) of the combined state-dropout mask (the product over the wrappers) of every row at
// time t; units past H are 0 (padding). `row` is scratch of u1 − u0 floats.
void fill_state_masks(const PlanImpl& p, const Mask* masks, int count, const RunDropout& run, int t, int batch, int H,
                      int Hp, int u0, int u1, float* dst, float* row) {
  for (int b = 0; b < batch; ++b) {
    float* m = dst + static_cast<std::int64_t>(b) * Hp;
    for (int u = u0; u < u1; ++u) m[u] = u < H ? 1.0f : 0.0f;
    const int end = u1 < H ? u1 : H;
    for (int w = 0; w < count; ++w) {
      const Mask& mk = masks[w];
      if (!mk.active || u0 >= end) continue;
      p.simd.kernels()->mask_row(mk.seed, run.step, mk.site, mk.t_prime(t), mk.row(run, b), mk.width, static_cast<std::uint32_t>(u0),
                          static_cast<std::uint32_t>(end), mk.params, row);
      for (int u = u0; u < end; ++u) m[u] *= row[u - u0];
    }
  }
}

// The LSTM projection of one step for blocks [j0, j1) of h (V units each; P = lp.out units in all):
// h = clip(W_proj m) is the output y, and after state dropout the next state; rows past their
// length carry h over and output zeros. Runs once every block's m = o ⊙ tanh(c) is in a.cell_out.
void project_step(const PlanImpl& p, const LayerPlan& lp, const LayerSpec& ls, const DirectionPack& dp,
                  const unsigned char* packed, const simd::StepArgs& a, int batch, int j0, int j1) {
  if (j0 >= j1) return;
  const int V = p.vector, P = lp.out, Hp = a.hidden_padded, u0 = j0 * V, u1 = j1 * V;
  simd::GemmArgs g;
  g.a = a.cell_out;
  g.a16 = a.cell_out16;
  g.a16_stride = Hp;
  g.a_sb = Hp;  // rows r < batch are t = 0, b = r
  g.batch = batch;
  g.k = lp.hidden;
  g.vectors = 1;
  g.panel = packed + dp.proj_panel;
  g.bias = at<float>(packed, dp.proj_bias);
  g.c = a.h_next;
  g.c_row_stride = Hp;
  g.row_end = batch;
  g.block_begin = j0;
  g.block_end = j1;
  p.simd.kernels()->gemm[static_cast<int>(p.simd.weights)](g);
  const float clip = static_cast<float>(ls.proj_clip);
  for (int b = 0; b < batch; ++b) {
    float* h = a.h_next + static_cast<std::int64_t>(b) * Hp;
    const float* h_prev = a.h_prev + static_cast<std::int64_t>(b) * Hp;
    float* y = a.y + b * a.y_row_stride;
    const float* mask = a.mask_h != nullptr ? a.mask_h + b * a.mask_row_stride : nullptr;
    const bool past = a.lengths != nullptr && a.t >= a.lengths[b];
    for (int u = u0; u < u1; ++u) {  // units past P are zero: zero weights, zero mask
      if (past) {
        h[u] = h_prev[u];
        if (u < P) y[u] = 0.0f;
        continue;
      }
      float v = h[u];
      if (clip > 0.0f) v = v < -clip ? -clip : v > clip ? clip : v;  // NaN passes, as on the reference
      if (u < P) y[u] = v;
      h[u] = mask != nullptr ? v * mask[u] : v;
    }
    if (a.h16_next != nullptr) p.simd.kernels()->to_bf16(h + u0, a.h16_next + static_cast<std::int64_t>(b) * Hp + u0, u1 - u0);
  }
}

// One direction of one layer as one team member sees it: the views, this member's share of the
// unit blocks, and the buffers, worked out once (the constructor) and read by each phase below.
struct DirectionRun {
  DirectionRun(const PlanImpl& plan, int layer, int direction, const DirectionIO& dio, const unsigned char* packed_weights,
               unsigned char* workspace, const Team& team, int member_slot);
  const PlanImpl* p;
  const LayerPlan* lp;
  const LayerSpec* ls;
  const DirectionPack* dp;
  const DirectionIO* io;
  const unsigned char* packed;
  unsigned char* ws;
  int dir, slot;
  int H, G, V, Hp, I, B, T, O;  // O: units of h and y (P with a projection, else H)
  int NV, bu;                   // vectors per gate, units per block
  int j0, j1, u0, u1;           // this member's blocks and its units of c and the gates (padded)
  bool projected;               // with a projection, h is shared out separately, in blocks of V of its P units
  int pj0, pj1, hu0, hu1;       // this member's blocks and units of h
  std::int64_t proj_row;
  bool bf16;
  WrapperMasks wm;
  float* proj;
  float* mask_scratch;  // one generated mask row
  float* x_level;       // the input a residual wrapper sees
  float* residual;      // a residual's result
  const float* x_raw;
  // The cell input: x_raw, or its copy with input dropout applied (drop_input).
  const float* x;
  std::int64_t x_st, x_sb;
};

DirectionRun::DirectionRun(const PlanImpl& plan, int layer, int direction, const DirectionIO& dio,
                           const unsigned char* packed_weights, unsigned char* workspace, const Team& team, int member_slot)
    : p(&plan),
      lp(&plan.layers[layer]),
      ls(&plan.stack.layers[layer]),
      dp(&lp->dir[direction]),
      io(&dio),
      packed(packed_weights),
      ws(workspace),
      dir(direction),
      slot(member_slot),
      wm(wrapper_masks(plan, layer, direction, dio.dropout)) {
  DirectionRun& d = *this;
  const PlanImpl& p = plan;
  const DirectionIO& io = dio;
  const LayerPlan& lp = *d.lp;
  d.H = lp.hidden, d.G = lp.gates, d.V = p.vector, d.Hp = lp.hidden_stride, d.I = lp.input_size, d.B = io.batch;
  d.T = io.steps, d.O = lp.out;
  d.NV = simd::vectors_per_gate(lp.cell), d.bu = d.V * d.NV;
  team.share(d.Hp / d.bu, &d.j0, &d.j1);
  d.u0 = d.j0 * d.bu, d.u1 = d.j1 * d.bu;
  d.projected = d.dp->proj_panel != 0;
  d.pj0 = 0, d.pj1 = 0;
  if (d.projected) team.share(static_cast<int>(round_up(d.O, d.V) / d.V), &d.pj0, &d.pj1);
  d.hu0 = d.projected ? d.pj0 * d.V : d.u0, d.hu1 = d.projected ? d.pj1 * d.V : d.u1;
  d.proj_row = static_cast<std::int64_t>(d.G) * d.Hp;
  d.bf16 = p.simd.weights == simd::Weights::bf16;
  d.proj = at<float>(ws, p.ws.proj[dir]);
  float* scratch = at<float>(ws, p.ws.scratch + static_cast<std::size_t>(slot) * p.ws.scratch_stride);
  d.mask_scratch = scratch;
  d.x_level = scratch + p.max_width;
  d.residual = scratch + 2 * p.max_width;
  d.x_raw = static_cast<const float*>(io.x);
  d.x = d.x_raw, d.x_st = io.x_st, d.x_sb = io.x_sb;
}

// 0. Input dropout of every wrapper, into the cell input x_cell (only when something is dropped).
void drop_input(DirectionRun& d, const Team& team) {
  if (!d.wm.any_input) return;
  const PlanImpl& p = *d.p;
  const DirectionIO& io = *d.io;
  const int B = d.B, I = d.I;
  float* xc = at<float>(d.ws, p.ws.x_cell[d.dir]);
  int r0, r1;
  team.share(d.T * B, &r0, &r1);
  for (int r = r0; r < r1; ++r) {
    const int t = r / B, b = r % B;
    float* dst = xc + static_cast<std::int64_t>(r) * I;
    std::memcpy(dst, d.x_raw + t * io.x_st + b * io.x_sb, sizeof(float) * I);
    for (int w = d.wm.count - 1; w >= 0; --w) multiply_mask_row(p, d.wm.input[w], io.dropout, t, b, dst, I, d.mask_scratch);
  }
  d.x = xc;
  d.x_st = static_cast<std::int64_t>(B) * I;
  d.x_sb = I;
  team.sync();
}

// 1. Input projections of steps [t_lo, t_hi) for this member's blocks:
// proj[(t − t_lo)·B + b] = W x_t,b + biases.
void project_inputs(const DirectionRun& d, int t_lo, int t_hi) {
  const PlanImpl& p = *d.p;
  const DirectionPack& dp = *d.dp;
  const int B = d.B, G = d.G, bu = d.bu, H = d.H, I = d.I;
  if (d.lp->skip_input) {
    const float* bias = at<float>(d.packed, dp.bias);
    for (int t = t_lo; t < t_hi; ++t)
      for (int b = 0; b < B; ++b) {
        const float* xr = d.x + t * d.x_st + b * d.x_sb;
        float* row = d.proj + (static_cast<std::int64_t>(t - t_lo) * B + b) * d.proj_row;
        for (int j = d.j0; j < d.j1; ++j)
          for (int g = 0; g < G; ++g)
            for (int v = 0; v < bu; ++v) {
              const int unit = j * bu + v, i = (j * G + g) * bu + v;
              row[i] = unit < H ? xr[unit] + bias[i] : 0.0f;
            }
      }
    return;
  }
  if (d.j0 >= d.j1) return;
  simd::GemmArgs g;
  if (d.bf16) {  // the products' inputs in bf16: this thread's copy of the chunk's rows, K padded to even
    std::uint16_t* x16 = at<std::uint16_t>(d.ws, p.simd.ws.x16 + static_cast<std::size_t>(d.slot) * p.simd.ws.x16_stride);
    const int k_even = (I + 1) / 2 * 2;
    for (int t = t_lo; t < t_hi; ++t)
      for (int b = 0; b < B; ++b) {
        std::uint16_t* dst = x16 + (static_cast<std::int64_t>(t - t_lo) * B + b) * k_even;
        p.simd.kernels()->to_bf16(d.x + t * d.x_st + b * d.x_sb, dst, I);
        if (k_even != I) dst[I] = 0;
      }
    g.a16 = x16;
    g.a16_stride = k_even;
  }
  g.a = d.x + t_lo * d.x_st;
  g.a_st = d.x_st;
  g.a_sb = d.x_sb;
  g.batch = B;
  g.k = I;
  g.vectors = G * d.NV;
  g.panel = d.packed + dp.w_panel;
  g.bias = at<float>(d.packed, dp.bias);
  g.c = d.proj;
  g.c_row_stride = d.proj_row;
  g.row_begin = 0;
  g.row_end = (t_hi - t_lo) * B;
  g.block_begin = d.j0;
  g.block_end = d.j1;
  p.simd.kernels()->gemm[static_cast<int>(p.simd.weights)](g);
}

// 2. Initial state of this member's units (h in f32 and, with bf16 weights, bf16; c), padded with
// zeros. The caller syncs: every member reads all of h next.
void initial_row(const DirectionRun& d, int b, float* h, std::uint16_t* h16, float* c) {
  const DirectionIO& io = *d.io;
  const int Hp = d.Hp, O = d.O, H = d.H;
  float* hb = h + static_cast<std::int64_t>(b) * Hp;
  for (int u = d.hu0; u < d.hu1; ++u)
    hb[u] = u < O && io.h0 != nullptr ? static_cast<const float*>(io.h0)[b * O + u] : 0.0f;
  if (h16 != nullptr && d.hu0 < d.hu1)
    d.p->simd.kernels()->to_bf16(hb + d.hu0, h16 + static_cast<std::int64_t>(b) * Hp + d.hu0, d.hu1 - d.hu0);
  if (c == nullptr) return;
  float* cb = c + static_cast<std::int64_t>(b) * Hp;
  for (int u = d.u0; u < d.u1; ++u)
    cb[u] = u < H && io.c0 != nullptr ? static_cast<const float*>(io.c0)[b * H + u] : 0.0f;
}

void initial_state(const DirectionRun& d, float* h, std::uint16_t* h16, float* c) {
  for (int b = 0; b < d.B; ++b) initial_row(d, b, h, h16, c);
}

// Resets before step t (unidirectional: the step after the one just computed): the rows reset at t
// that are still within their length get this member's units of their initial state back. Runs
// before the step's barrier, on the state the step wrote, so no member reads it early.
void reset_rows(const DirectionRun& d, int t, float* h, std::uint16_t* h16, float* c) {
  const DirectionIO& io = *d.io;
  if (t >= d.T) return;
  for (int b = 0; b < d.B; ++b)
    if (io.resets.at(t, b) && t < (io.lengths != nullptr ? io.lengths[b] : d.T)) initial_row(d, b, h, h16, c);
}

// The step kernel's arguments that stay the same over the steps of this member's blocks.
simd::StepArgs step_args(const DirectionRun& d, float* c, float* mask_h, float* mask_c) {
  const PlanImpl& p = *d.p;
  const DirectionPack& dp = *d.dp;
  const simd::Cell cell = d.lp->cell;
  const bool reset_before = cell == simd::Cell::gru_reset_before;
  simd::StepArgs a;
  a.hidden = d.H;
  a.hidden_padded = d.Hp;
  a.state_size = d.O;
  a.proj_row_stride = d.proj_row;
  a.panel = d.packed + dp.r_panel;
  a.panel_n = reset_before ? d.packed + dp.r_panel_n : nullptr;
  a.rh16 = d.bf16 && reset_before ? at<std::uint16_t>(d.ws, p.simd.ws.rh16[d.dir]) : nullptr;
  a.bias_rn = cell == simd::Cell::gru_reset_after ? at<float>(d.packed, dp.bias_rn) : nullptr;
  a.c = c;
  a.rh = reset_before ? at<float>(d.ws, p.ws.rh[d.dir]) : nullptr;
  a.z = reset_before ? at<float>(d.ws, p.ws.z[d.dir]) : nullptr;
  a.mask_h = mask_h;
  a.mask_c = mask_c;
  a.mask_row_stride = d.Hp;
  a.y_row_stride = d.io->y_sb;
  a.lengths = d.io->lengths;
  a.row_begin = 0;
  a.row_end = d.B;
  a.block_begin = d.j0;
  a.block_end = d.j1;
  a.peepholes = dp.peepholes != 0 ? at<float>(d.packed, dp.peepholes) : nullptr;
  a.cell_clip = static_cast<float>(d.ls->cell_clip);
  a.cell_out = d.projected ? at<float>(d.ws, p.simd.ws.cell_out[d.dir]) : nullptr;
  a.cell_out16 = d.projected && d.bf16 ? at<std::uint16_t>(d.ws, p.simd.ws.cell_out16[d.dir]) : nullptr;
  return a;
}

// 2 and 3. The initial state, then one fused kernel call per step on this member's blocks, the
// input projections a chunk of steps at a time (right before those steps, so they are still in
// cache) and the state-dropout masks per step (once if variational) for its units; then 4, the
// final states of its units.
void run_steps(const DirectionRun& d, const Team& team) {
  const PlanImpl& p = *d.p;
  const DirectionIO& io = *d.io;
  const simd::F32Kernels& k = *p.simd.kernels();
  const int B = d.B, T = d.T, H = d.H, O = d.O, Hp = d.Hp, w = static_cast<int>(p.simd.weights);
  const WrapperMasks& wm = d.wm;
  const int chunk = static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>(T, static_cast<std::int64_t>(p.simd.ws.proj_floats) / (static_cast<std::int64_t>(B) * d.proj_row))));
  float* h = at<float>(d.ws, p.ws.h[d.dir][0]);
  float* h_next = at<float>(d.ws, p.ws.h[d.dir][1]);
  float* c = d.lp->mode == Mode::lstm ? at<float>(d.ws, p.ws.c[d.dir]) : nullptr;
  std::uint16_t* h16 = d.bf16 ? at<std::uint16_t>(d.ws, p.simd.ws.h16[d.dir][0]) : nullptr;
  std::uint16_t* h16_next = d.bf16 ? at<std::uint16_t>(d.ws, p.simd.ws.h16[d.dir][1]) : nullptr;
  initial_state(d, h, h16, c);
  team.sync();

  const simd::Cell cell = d.lp->cell;
  float* mask_h = wm.any_state_h ? at<float>(d.ws, p.simd.ws.mask_h[d.dir]) : nullptr;
  float* mask_c = wm.any_state_c && c != nullptr ? at<float>(d.ws, p.simd.ws.mask_c[d.dir]) : nullptr;
  simd::StepArgs a = step_args(d, c, mask_h, mask_c);
  int t_lo = 0, t_hi = 0;  // the chunk of steps whose projections are in `proj`
  for (int step = 0; step < T; ++step) {
    const int t = io.reverse ? T - 1 - step : step;
    if (t < t_lo || t >= t_hi) {  // next chunk, in processing order (no barrier: own blocks only)
      t_lo = io.reverse ? std::max(0, t + 1 - chunk) : t;
      t_hi = io.reverse ? t + 1 : std::min(T, t + chunk);
      project_inputs(d, t_lo, t_hi);
    }
    if (step == 0 || wm.state_per_step) {
      if (mask_h != nullptr)
        fill_state_masks(p, wm.state_h, wm.count, io.dropout, t, B, O, Hp, d.hu0, d.hu1, mask_h, d.mask_scratch);
      if (mask_c != nullptr)
        fill_state_masks(p, wm.state_c, wm.count, io.dropout, t, B, H, Hp, d.u0, d.u1, mask_c, d.mask_scratch);
    }
    a.t = t;
    a.descending = (step & 1) != 0;
    a.proj = d.proj + static_cast<std::int64_t>(t - t_lo) * B * d.proj_row;
    a.h_prev = h;
    a.h_next = h_next;
    a.h16_prev = h16;
    a.h16_next = h16_next;
    a.y = static_cast<float*>(io.y) + t * io.y_st;
    k.step[w][static_cast<int>(cell)](a);
    if (cell == simd::Cell::gru_reset_before) {
      team.sync();  // the n gate needs all of r ⊙ h
      k.gru_reset_before_phase2[w](a);
    }
    if (d.projected) {
      team.sync();  // the projection needs all of o ⊙ tanh(c)
      project_step(p, *d.lp, *d.ls, *d.dp, d.packed, a, B, d.pj0, d.pj1);
    }
    if (io.resets.r != nullptr) reset_rows(d, t + 1, h_next, h16_next, c);
    team.sync();  // h_next complete before anyone reads it
    std::swap(h, h_next);
    std::swap(h16, h16_next);
  }

  // 4. Final states of this member's units.
  const int u_end = d.u1 < H ? d.u1 : H, hu_end = d.hu1 < O ? d.hu1 : O;
  for (int b = 0; b < B; ++b) {
    if (io.hy != nullptr && d.hu0 < hu_end)
      std::memcpy(static_cast<float*>(io.hy) + b * O + d.hu0, h + b * Hp + d.hu0, sizeof(float) * (hu_end - d.hu0));
    if (io.cy != nullptr && c != nullptr && d.u0 < u_end)
      std::memcpy(static_cast<float*>(io.cy) + b * H + d.u0, c + b * Hp + d.u0, sizeof(float) * (u_end - d.u0));
  }
}

// 5. Out through the wrappers, innermost first: output dropout and residual connections, by rows.
void output_chain(const DirectionRun& d, const Team& team) {
  if (!d.lp->output_chain) return;
  const PlanImpl& p = *d.p;
  const DirectionIO& io = *d.io;
  const WrapperMasks& wm = d.wm;
  const int B = d.B, I = d.I, O = d.O;
  int r0, r1;
  team.share(d.T * B, &r0, &r1);
  for (int r = r0; r < r1; ++r) {
    const int t = r / B, b = r % B;
    if (t >= (io.lengths != nullptr ? io.lengths[b] : d.T)) continue;  // outputs past a row's length stay zero
    float* o = static_cast<float*>(io.y) + t * io.y_st + b * io.y_sb;
    for (int w = 0; w < wm.count; ++w) {
      if (d.ls->wrappers[w].kind == WrapperKind::dropout) {
        multiply_mask_row(p, wm.output[w], io.dropout, t, b, o, O, d.mask_scratch);
        continue;
      }
      std::memcpy(d.x_level, d.x_raw + t * io.x_st + b * io.x_sb, sizeof(float) * I);
      for (int v = wm.count - 1; v > w; --v) multiply_mask_row(p, wm.input[v], io.dropout, t, b, d.x_level, I, d.mask_scratch);
      apply_residual(d.ls->wrappers[w].residual, d.x_level, o, d.residual, O);
      std::memcpy(o, d.residual, sizeof(float) * O);
    }
  }
}

// One direction of one layer, run by a team: each member owns a contiguous range of unit blocks (all
// gates of those units) — its slice of the recurrent weights stays in its cache across steps — and
// the team meets at one barrier per step.
void run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                   unsigned char* ws, const Team& team, int slot) {
  DirectionRun d(p, layer, dir, io, packed, ws, team, slot);
  drop_input(d, team);
  run_steps(d, team);
  output_chain(d, team);
}

struct SimdRun {
  const PlanImpl* p;
  const unsigned char* packed;
  unsigned char* ws;
  const ForwardArgs* args;
  RunDropout run;
  ThreadPool* pool;
  int threads;
};

// The whole forward pass as seen by one thread of the team.
void simd_forward_thread(void* context, int index) {
  const SimdRun& r = *static_cast<const SimdRun*>(context);
  const PlanImpl& p = *r.p;
  Team team;
  team.index = index;
  team.size = r.threads;
  team.barrier = r.threads > 1 ? pool_barrier(r.pool, 0) : nullptr;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    if (lp.dirs == 2 && team.size >= 2) {  // the two directions in parallel, half the team each
      const int half = team.size / 2, group = index < half ? 0 : 1;
      Team sub;
      sub.index = group == 0 ? index : index - half;
      sub.size = group == 0 ? half : team.size - half;
      sub.barrier = pool_barrier(r.pool, 1 + group);
      run_direction(p, l, group, direction_io(p, *r.args, r.ws, l, group, r.run), r.packed, r.ws, sub, index);
    } else {
      for (int d = 0; d < lp.dirs; ++d)
        run_direction(p, l, d, direction_io(p, *r.args, r.ws, l, d, r.run), r.packed, r.ws, team, index);
    }
    team.sync();
    // Inter-layer dropout on this layer's output, by rows.
    const Mask inter = inter_layer_mask(p.stack, r.run, l);
    if (inter.active) {
      const int T = r.args->seq_len, B = r.args->batch, width = static_cast<int>(inter.width);
      float* out = reinterpret_cast<float*>(r.ws + p.ws.layer_out[l & 1]);
      float* mask = at<float>(r.ws, p.ws.scratch + static_cast<std::size_t>(index) * p.ws.scratch_stride);
      int r0, r1;
      team.share(T * B, &r0, &r1);
      for (int row = r0; row < r1; ++row) {
        mask_row(p.simd.kernels(), inter, r.run, row / B, row % B, mask);
        float* o = out + static_cast<std::int64_t>(row) * width;
        for (int u = 0; u < width; ++u) o[u] *= mask[u];
      }
      team.sync();
    }
  }
}

}  // namespace

void simd_layers(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
                 const RunDropout& run) {
  SimdRun r{&p, packed, ws, &args, run, p.options.thread_pool, p.options.threads};
  if (r.threads > 1) {
    pool_barrier(r.pool, 0)->reset(r.threads);
    pool_barrier(r.pool, 1)->reset(r.threads / 2);
    pool_barrier(r.pool, 2)->reset(r.threads - r.threads / 2);
  }
  pool_run(r.pool, r.threads, simd_forward_thread, &r);
}

}  // namespace detail
}  // namespace rnncore

// The schedule of backward through time on the GPU: launches of src/gpu/device/backward.hpp's kernels on
// a Launcher (src/gpu/host/schedule.hpp says what a Launcher provides), after a training forward that
// gpu::forward ran with a reserve. Like schedule.hpp it touches no GPU runtime, so the emulator
// tests (tests/gpu/) run exactly this schedule. The walk is src/train.cpp's: layers from the last
// to the first, in each the directions one after another (a residual wrapper of either direction
// adds to the same input gradient), the steps of each in reverse.
#ifndef RNNCORE_SRC_GPU_HOST_BACKWARD_HPP
#define RNNCORE_SRC_GPU_HOST_BACKWARD_HPP

#include "src/gpu/device/backward.hpp"
#include "src/gpu/host/schedule.hpp"
#include "src/internal/canonical_params.hpp"

namespace rnncore {
namespace gpu {

/// The products of one direction (GemmArgs), by role.
enum GradGemm : int {
  kGemmRecurrent,  ///< per step: dh += dgates[t][:, 0:K0] · R[0:K0] (K0: every gate whose column is its own)
  kGemmRecurrentN, ///< per step, GRU: reset-after dh += d(rec_n) · R_n; reset-before drh = dn · R_n
  kGemmW,          ///< dW += Σ dpreᵀ x_cell
  kGemmBiasW,      ///< dbW += Σ dpre
  kGemmBiasR,      ///< dbR += Σ dpre (its own columns)
  kGemmBiasRN,     ///< reset-after GRU: dbR_n += Σ d(rec_n)
  kGemmR,          ///< dR[0:K0] += Σ dpreᵀ h_prev
  kGemmRN,         ///< GRU: dR_n += Σ d(rec_n or n)ᵀ (h_prev or r ⊙ h_prev)
  kGemmInput,      ///< x_cell ← dpre · W (the input gradient before the input masks)
  kGemmProjectionBack,  ///< per step, a projected LSTM: dm = dh̃ · W_proj
  kGemmCount
};

/// The ends' backward (src/head_grad.cpp on the CPU): per Dense of the chain (pre_head[0..], the
/// head last, at place k) its input gradient from its dz (`dense[k]`; the head's also makes its own
/// dz from dy), and below the head each pre_head Dense's dz from that gradient in place (`act[k]`);
/// the first Dense's input rows again (last_step_only), dW and db as products; the embedding's
/// table gradient.
struct EndsGradArgs {
  HeadGradArgs dense[kMaxPreHead + 1];
  HeadGradArgs act[kMaxPreHead];
  LastRowsArgs last;
  GemmArgs dw[kMaxPreHead + 1], db[kMaxPreHead + 1];
  EmbedGradArgs embed;
};

/// Everything a layer's backward kernels read, copied to the workspace at once.
struct GradLayerBlock {
  GradDirArgs dir[2];
  GemmArgs gemm[2][kGemmCount];
  InterLayerArgs inter;  ///< the inter-layer mask on the gradient of the layer below's output
  EndsGradArgs ends;     ///< layer 0's block only
};
static_assert(sizeof(GradLayerBlock) <= detail::kGpuGradArgBytesPerLayer, "kGpuGradArgBytesPerLayer is too small");
static_assert(std::is_trivially_copyable<GradLayerBlock>::value, "argument blocks are copied to the device as bytes");

namespace grad {

/// [T, B, width] views of caller tensors in the run's layout (element strides).
inline void caller_strides(const ForwardArgs& f, std::int64_t width, std::int64_t* st, std::int64_t* sb) {
  const bool bm = f.layout == Layout::batch_major;
  *st = bm ? width : f.batch * width;
  *sb = bm ? f.seq_len * width : width;
}

/// A product C (+)= A·B in GemmArgs' terms: A at `a` with strides (a_m, a_k), per-arg step a_arg.
inline GemmArgs product(const float* a, std::int64_t a_m, std::int64_t a_k, std::int64_t a_arg, const void* b, std::int64_t b_k,
                        float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate) {
  GemmArgs g;
  std::memset(&g, 0, sizeof g);
  g.a = a;
  g.a_m = a_m;
  g.a_k = a_k;
  g.a_arg = a_arg;
  g.b = b;
  g.b_k = b_k;
  g.b_n = 1;
  g.c = c;
  g.ldc = ldc;
  g.m = m;
  g.n = n;
  g.k = k;
  g.accumulate = accumulate ? 1 : 0;
  return g;
}

/// Where one backward run's tensors are, per layer (inputs, output gradients, input gradients).
struct Views {
  const BackwardArgs* args;
  unsigned char *packed, *ws, *reserve;
  RunArrays arrays;
  int cur;  ///< which of the workspace's dlayer buffers holds the current layer's output gradient
};

/// The kernels' arguments for direction d of layer l.
inline void direction_grad_args(const detail::PlanImpl& p, const Views& v, int l, int d, GradDirArgs* ga) {
  using schedule::at;
  const StackSpec& st = p.stack;
  const detail::LayerPlan& lp = p.layers[l];
  const detail::TrainLayout& tr = p.train;
  const BackwardArgs& a = *v.args;
  const ForwardArgs& f = a.forward;
  const detail::RunDropout run = detail::run_dropout(p, f);
  const std::int64_t O = lp.out, I = lp.input_size, out_w = static_cast<std::int64_t>(lp.dirs) * O;
  const int L = st.num_layers;
  std::memset(ga, 0, sizeof *ga);
  ga->cell = static_cast<std::int32_t>(lp.cell);
  ga->gates = lp.gates;
  ga->batch = f.batch;
  ga->steps = f.seq_len;
  ga->in_size = lp.input_size;
  ga->in_pad = (lp.input_size + 3) / 4 * 4;
  ga->hidden = lp.hidden;
  ga->hidden_stride = lp.hidden_stride;
  ga->out = lp.out;
  ga->proj_clip = static_cast<float>(st.layers[l].proj_clip);
  ga->reverse = d == 1 ? 1 : 0;
  ga->num_wrappers = st.layers[l].num_wrappers;
  ga->lengths = v.arrays.lengths;
  ga->row_ids = v.arrays.row_ids;
  ga->step = run.step;
  ga->resets = v.arrays.resets.r;
  ga->reset_st = v.arrays.resets.st;
  ga->reset_sb = v.arrays.resets.sb;
  for (int w = 0; w < ga->num_wrappers; ++w) {
    ga->residual[w] = st.layers[l].wrappers[w].kind == WrapperKind::residual ? 1 : 0;
    ga->input[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::input));
    ga->output[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::output));
    ga->state_h[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_h));
    ga->state_c[w] = schedule::to_site(detail::wrapper_mask(st, run, l, d, w, detail::MaskKind::state_c));
  }
  const bool embedding = st.embedding.vocab_size > 0, head = st.head.out_features > 0;
  if (l == 0 && embedding) {  // the rows the training forward gathered
    ga->x = at<const float>(v.reserve, tr.embed_x);
    ga->x_st = f.batch * I;
    ga->x_sb = I;
  } else if (l == 0) {
    ga->x = static_cast<const float*>(f.x);
    caller_strides(f, I, &ga->x_st, &ga->x_sb);
  } else {
    ga->x = at<const float>(v.reserve, tr.layer_out[l - 1]);
    ga->x_st = f.batch * I;
    ga->x_sb = I;
  }
  if (l == L - 1 && !head) {
    if (a.dy != nullptr) {
      ga->dy = static_cast<const float*>(a.dy) + d * O;
      caller_strides(f, out_w, &ga->dy_st, &ga->dy_sb);
    }
  } else {
    ga->dy = at<const float>(v.ws, tr.dlayer[v.cur]) + d * O;
    ga->dy_st = f.batch * out_w;
    ga->dy_sb = out_w;
  }
  if (l > 0 || (embedding && a.dweights != nullptr)) {  // layer 0: the embedding's rows' gradient
    ga->dx = at<float>(v.ws, tr.dlayer[v.cur ^ 1]);
    ga->dx_st = f.batch * I;
    ga->dx_sb = I;
  } else if (a.dx != nullptr) {
    ga->dx = static_cast<float*>(a.dx);
    caller_strides(f, I, &ga->dx_st, &ga->dx_sb);
  }
  ga->keep = at<const float>(v.reserve, tr.keep[l][d]);
  ga->keep_width = detail::keep_width(lp);
  ga->keep_h = detail::keep_h(lp);
  ga->lstm_ext = lp.mode == Mode::lstm && lp.extensions ? 1 : 0;
  ga->cell_clip = static_cast<float>(st.layers[l].cell_clip);
  ga->peep = st.layers[l].peepholes ? at<const float>(v.packed, lp.dir[d].peepholes) : nullptr;
  // h slots have O units, c slots H (they differ only with a projection)
  const std::size_t slot = static_cast<std::size_t>(state_offset(st, f.batch, l, d)) * sizeof(float);
  const std::size_t cslot = static_cast<std::size_t>(cell_state_offset(st, f.batch, l, d)) * sizeof(float);
  auto state = [&](const void* base, std::size_t at) {
    return base == nullptr ? nullptr : reinterpret_cast<const float*>(static_cast<const unsigned char*>(base) + at);
  };
  auto state_out = [&](void* base, std::size_t at) {
    return base == nullptr ? nullptr : reinterpret_cast<float*>(static_cast<unsigned char*>(base) + at);
  };
  const bool lstm = lp.mode == Mode::lstm;
  ga->h0 = state(f.h0, slot);
  ga->c0 = lstm ? state(f.c0, cslot) : nullptr;
  ga->dhy = state(a.dhy, slot);
  ga->dcy = lstm ? state(a.dcy, cslot) : nullptr;
  ga->dh0 = state_out(a.dh0, slot);
  ga->dc0 = lstm ? state_out(a.dc0, cslot) : nullptr;
  ga->dh = at<float>(v.ws, tr.dh[0]);
  ga->dc = at<float>(v.ws, tr.dc);
  ga->dgates = at<float>(v.ws, tr.dgates);
  ga->r = v.packed + lp.dir[d].r_panel;
  ga->hprev = at<float>(v.ws, tr.hprev);
  ga->xcell = at<float>(v.ws, tr.xcell);
  ga->drh = at<float>(v.ws, tr.brows);
  if (st.layers[l].proj_size > 0) {  // brows is free in an LSTM (drh is the reset-before GRU's)
    ga->wp = v.packed + lp.dir[d].proj_panel;
    ga->dm = at<float>(v.ws, tr.brows);
  }
}

/// The products of direction d of layer l (unused roles stay zero: m = 0).
inline void direction_products(const detail::PlanImpl& p, const Views& v, int l, int d, const GradDirArgs& ga, GemmArgs* out) {
  const detail::LayerPlan& lp = p.layers[l];
  const detail::DirectionPack& dp = lp.dir[d];
  const std::int64_t H = lp.hidden, O = lp.out, I = lp.input_size, G = lp.gates, gw = (G + 1) * H, Hs = lp.hidden_stride;
  const std::int64_t rows = static_cast<std::int64_t>(ga.steps) * ga.batch, B = ga.batch;
  const bool gru = lp.mode == Mode::gru, reset_after = lp.cell == simd::Cell::gru_reset_after;
  const std::int64_t k0 = (gru ? 2 : G) * H, n_col = reset_after ? 3 * H : 2 * H;
  const void* R = v.packed + dp.r_panel;
  const auto* Rn = static_cast<const unsigned char*>(R);  // row 2H of R, in bytes of the storage type
  const std::size_t wbytes = p.gpu.weights == kWeightF32 ? sizeof(float) : 2;
  Rn += static_cast<std::size_t>(2 * H * Hs) * wbytes;
  std::memset(out, 0, sizeof(GemmArgs) * kGemmCount);
  out[kGemmRecurrent] = product(ga.dgates, gw, 1, B * gw, R, Hs, ga.dh, O, B, O, k0, true);  // R's first O columns
  if (ga.dm != nullptr) out[kGemmProjectionBack] = product(ga.dgates + G * H, gw, 1, B * gw, ga.wp, H, ga.dm, H, B, H, O, false);
  if (gru)
    out[kGemmRecurrentN] = reset_after ? product(ga.dgates + n_col, gw, 1, B * gw, Rn, Hs, ga.dh, H, B, H, H, true)
                                       : product(ga.dgates + n_col, gw, 1, B * gw, Rn, Hs, ga.drh, H, B, H, H, false);
  if (!lp.skip_input && ga.dx != nullptr)
    out[kGemmInput] = product(ga.dgates, gw, 1, 0, v.packed + dp.w_panel, (I + 3) / 4 * 4, ga.xcell, I, rows, I, G * H, false);
  if (v.args->dweights == nullptr) return;
  const detail::CellParams<float> dw = detail::cell_params(p, l, d, static_cast<float*>(v.args->dweights));
  if (dw.W[0] != nullptr) out[kGemmW] = product(ga.dgates, 1, gw, 0, ga.xcell, I, dw.W[0], I, G * H, I, rows, true);
  out[kGemmBiasW] = product(ga.dgates, 1, gw, 0, nullptr, 0, dw.bW[0], 1, G * H, 1, rows, true);
  out[kGemmBiasR] = product(ga.dgates, 1, gw, 0, nullptr, 0, dw.bR[0], 1, reset_after ? 2 * H : G * H, 1, rows, true);
  if (reset_after) out[kGemmBiasRN] = product(ga.dgates + n_col, 1, gw, 0, nullptr, 0, dw.bR[2], 1, H, 1, rows, true);
  out[kGemmR] = product(ga.dgates, 1, gw, 0, ga.hprev, O, dw.R[0], O, k0, O, rows, true);
  if (gru) out[kGemmRN] = product(ga.dgates + n_col, 1, gw, 0, ga.hprev, H, dw.R[2], H, H, H, rows, true);
}

/// The peepholes' and the projection's gradients (canonical p_i, p_f, p_o; W_proj), where backward
/// computes weight gradients.
inline void direction_peephole_grads(const detail::PlanImpl& p, const Views& v, int l, int d, GradDirArgs* ga) {
  if (v.args->dweights == nullptr) return;
  const detail::CellParams<float> dw = detail::cell_params(p, l, d, static_cast<float*>(v.args->dweights));
  if (ga->wp != nullptr) ga->dwp = dw.proj;
  if (ga->peep == nullptr) return;
  ga->dpeep[0] = dw.peep[0];
  ga->dpeep[1] = dw.peep[1];
  ga->dpeep[2] = dw.peep[3];
}

/// Whether product `role` exists in this direction.
inline bool has(const GemmArgs& g) { return g.m > 0; }

/// A product: tiled where C has at least a tile's rows and columns (and B is a matrix), else one
/// thread per element.
template <class BT, class L>
Status gemm(L& ln, const GpuPlan& g, const GemmArgs& host, const GemmArgs* dev, int arg) {
  using K = f32_rnn_grad_gemm_tiled<BT>;
  if (host.b == nullptr || host.m < K::kBM / 2 || host.n < K::kBN / 2)
    return ln.template launch<f32_rnn_grad_gemm<BT>>(elementwise_dims(g, host.m * host.n, 1), host, dev, arg);
  Dims d;
  d.gx = static_cast<std::uint32_t>((host.n + K::kBN - 1) / K::kBN);
  d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((host.m + K::kBM - 1) / K::kBM, 65535));
  d.block = K::kThreads;
  d.smem = K::smem_bytes();
  return ln.template launch<K>(d, host, dev, arg);
}

/// A per-step product (a step's rows of C): f32_rnn_grad_gemm_direct where the forward's tile choice
/// asks for it (direct_products: RNNCORE_GPU_TILE=direct, lanes, lanes8) and B's layout allows it, else gemm.
template <class BT, class L>
Status step_gemm(L& ln, const GpuPlan& g, const GemmArgs& host, const GemmArgs* dev, int arg) {
  using K = f32_rnn_grad_gemm_direct<BT>;
  if (!direct_products(g.tile) || host.m == 0 || host.n == 0 || !K::fits(host)) return gemm<BT>(ln, g, host, dev, arg);
  Dims d;
  d.gx = static_cast<std::uint32_t>((host.n + K::Tile::kBU - 1) / K::Tile::kBU);
  d.gy = static_cast<std::uint32_t>(std::min<std::int64_t>((host.m + K::Tile::kBM - 1) / K::Tile::kBM, 65535));
  d.block = K::Tile::kThreads;
  d.smem = K::smem_bytes();
  return ln.template launch<K>(d, host, dev, arg);
}

template <int C, int MAXB, class WT, class L>
Status persistent_steps(L& ln, const GpuPlan& g, const GradDirArgs& ga, const GradDirArgs* dga, int units) {
  using K = f32_rnn_grad_persistent<C, MAXB, WT>;
  Dims d;
  d.gx = static_cast<std::uint32_t>((ga.hidden + units - 1) / units);
  d.block = static_cast<std::uint32_t>(g.persist_threads);
  d.smem = grad_persistent_smem_bytes(cell_gates(C), ga.hidden, units, g.persist_threads / g.target.warp_size, MAXB, sizeof(WT));
  return ln.template launch_cooperative<K>(d, ga, dga, units);
}

/// Every step of a direction on f32_rnn_grad_persistent where the plan has a slice for it
/// (grad_persistent_units); Status::unsupported where it has none or the runtime refused the
/// cooperative launch (nothing queued): the per-step kernels run instead.
template <int C, class WT, class L>
Status steps_persistent(L& ln, const GpuPlan& g, const GradDirArgs& ga, const GradDirArgs* dga, int layer) {
  const int units = ga.dm != nullptr ? 0 : grad_persistent_units(g, layer, ga.batch);
  if (units <= 0 || ga.steps == 0) return Status::unsupported;
  if (grad_bucket_index(ga.batch) == 0) return persistent_steps<C, kGradBuckets[0], WT>(ln, g, ga, dga, units);
  return persistent_steps<C, kGradBuckets[1], WT>(ln, g, ga, dga, units);
}

/// Every step of a direction, in reverse, on the per-step kernels: the cell, then the products.
template <int C, class WT, class L>
Status steps(L& ln, const GpuPlan& g, const GradDirArgs& ga, const GradDirArgs* dga, const GemmArgs* gm, const GemmArgs* dgm) {
  const std::int64_t BH = static_cast<std::int64_t>(ga.batch) * ga.hidden, groups = ga.batch * ((ga.hidden + 3) / 4);
  for (int s = ga.steps - 1; s >= 0; --s) {
    const int t = ga.reverse ? ga.steps - 1 - s : s;
    if (ga.dm != nullptr) {  // a projected LSTM: dh̃, then dm = dh̃ · W_proj for the cell kernel
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_lstm_grad_projection>(
          elementwise_dims(g, static_cast<std::int64_t>(ga.batch) * ((ga.out + 3) / 4), 1), ga, dga, t));
      RNNCORE_RETURN_IF_ERROR(step_gemm<WT>(ln, g, gm[kGemmProjectionBack], &dgm[kGemmProjectionBack], t));
    }
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_cell<C>>(elementwise_dims(g, groups, 1), ga, dga, t));
    if constexpr (C == kGruResetBefore) {
      RNNCORE_RETURN_IF_ERROR(step_gemm<WT>(ln, g, gm[kGemmRecurrentN], &dgm[kGemmRecurrentN], t));
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_reset_before_r>(elementwise_dims(g, BH, 1), ga, dga, t));
    }
    RNNCORE_RETURN_IF_ERROR(step_gemm<WT>(ln, g, gm[kGemmRecurrent], &dgm[kGemmRecurrent], t));
    if constexpr (C == kGruResetAfter) RNNCORE_RETURN_IF_ERROR(step_gemm<WT>(ln, g, gm[kGemmRecurrentN], &dgm[kGemmRecurrentN], t));
  }
  return Status::ok;
}

/// Direction d of layer `layer`: its launches in stream order.
template <int C, class WT, class L>
Status direction(L& ln, const GpuPlan& g, const GradLayerBlock& host, const GradLayerBlock* dev, int layer, int d, bool skip_input) {
  const GradDirArgs& ga = host.dir[d];
  const GradDirArgs* dga = &dev->dir[d];
  const GemmArgs* gm = host.gemm[d];
  const GemmArgs* dgm = dev->gemm[d];
  const std::int64_t BH = static_cast<std::int64_t>(ga.batch) * ga.hidden;
  const std::int64_t rows = static_cast<std::int64_t>(ga.steps) * ga.batch;
  RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_gather>(
      elementwise_dims(g, rows * ((ga.in_size + 3) / 4 + (ga.hidden + 3) / 4), 1), ga, dga, 0));
  RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_start>(elementwise_dims(g, BH, 1), ga, dga, 0));
  const Status fused = steps_persistent<C, WT>(ln, g, ga, dga, layer);
  if (fused != Status::ok && fused != Status::unsupported) return fused;
  if (fused == Status::unsupported) RNNCORE_RETURN_IF_ERROR((steps<C, WT>(ln, g, ga, dga, gm, dgm)));
  if (ga.dh0 != nullptr || ga.dc0 != nullptr)
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_end>(elementwise_dims(g, BH, 1), ga, dga, 0));
  if (ga.dpeep[0] != nullptr)
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_peepholes>(elementwise_dims(g, 3 * ((ga.hidden + 3) / 4), 1), ga, dga, 0));
  if (ga.dwp != nullptr)
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_lstm_grad_projection_weights>(
        elementwise_dims(g, static_cast<std::int64_t>(ga.out) * ((ga.hidden + 3) / 4), 1), ga, dga, 0));
  for (int role : {kGemmW, kGemmBiasW, kGemmBiasR, kGemmBiasRN, kGemmR})
    if (has(gm[role])) RNNCORE_RETURN_IF_ERROR(gemm<float>(ln, g, gm[role], &dgm[role], 0));
  if (has(gm[kGemmRN])) {
    if constexpr (C == kGruResetBefore)  // R_n multiplied r ⊙ h_prev (r and z are done with h_prev)
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_grad_reset_hprev>(elementwise_dims(g, rows * ga.hidden, 1), ga, dga, 0));
    RNNCORE_RETURN_IF_ERROR(gemm<float>(ln, g, gm[kGemmRN], &dgm[kGemmRN], 0));
  }
  if (ga.dx == nullptr) return Status::ok;
  if (has(gm[kGemmInput])) RNNCORE_RETURN_IF_ERROR(gemm<WT>(ln, g, gm[kGemmInput], &dgm[kGemmInput], 0));
  return ln.template launch<f32_rnn_grad_input>(elementwise_dims(g, rows * ((ga.in_size + 3) / 4), 1), ga, dga, skip_input ? 1 : 0);
}

template <class WT, class L>
Status direction_of(L& ln, const GpuPlan& g, const GradLayerBlock& host, const GradLayerBlock* dev, int layer, int d, simd::Cell cell,
                    bool skip) {
  switch (cell) {
    case simd::Cell::lstm: return direction<kLstm, WT>(ln, g, host, dev, layer, d, skip);
    case simd::Cell::gru_reset_after: return direction<kGruResetAfter, WT>(ln, g, host, dev, layer, d, skip);
    case simd::Cell::gru_reset_before: return direction<kGruResetBefore, WT>(ln, g, host, dev, layer, d, skip);
    case simd::Cell::rnn_tanh: return direction<kRnnTanh, WT>(ln, g, host, dev, layer, d, skip);
    case simd::Cell::rnn_relu: return direction<kRnnRelu, WT>(ln, g, host, dev, layer, d, skip);
  }
  return Status::internal;
}

/// Zeroes what backward adds to or only partly writes: dweights (unless accumulating), dx, dc0, and
/// dh0 in a run with resets (they add to it).
template <class L>
Status zero_outputs(L& ln, const detail::PlanImpl& p, const BackwardArgs& a) {
  const StackSpec& st = p.stack;
  const ForwardArgs& f = a.forward;
  if (a.dweights != nullptr && !a.accumulate)
    RNNCORE_RETURN_IF_ERROR(ln.zero_async(a.dweights, static_cast<std::size_t>(param_count(st)) * sizeof(float)));
  if (f.batch == 0) return Status::ok;
  if (a.dc0 != nullptr)  // non-LSTM blocks stay zero
    RNNCORE_RETURN_IF_ERROR(ln.zero_async(a.dc0, static_cast<std::size_t>(cell_state_elements(st, f.batch)) * sizeof(float)));
  if (a.dh0 != nullptr && f.resets != nullptr)
    RNNCORE_RETURN_IF_ERROR(ln.zero_async(a.dh0, static_cast<std::size_t>(state_elements(st, f.batch)) * sizeof(float)));
  if (a.dx != nullptr)
    RNNCORE_RETURN_IF_ERROR(ln.zero_async(a.dx, sizeof(float) * static_cast<std::size_t>(f.seq_len) * f.batch * st.input_size));
  return Status::ok;
}

/// The Dense chain's arguments, from the head (place K) down: Dense k's dz (the head's in head_dz,
/// a pre_head Dense's in head_da[(k + 1) % 2], made from its output gradient in place), its input
/// gradient (the first Dense's, the last layer's output gradient, to dlayer[0] where
/// direction_grad_args reads it, at the columns it read), and its dW, db over its input rows (the
/// kept activations of the Dense below it, or the last layer's output rows).
inline void dense_chain_grad_args(const detail::PlanImpl& p, const Views& v, EndsGradArgs* e) {
  using schedule::at;
  const StackSpec& st = p.stack;
  const detail::TrainLayout& tr = p.train;
  const BackwardArgs& a = *v.args;
  const ForwardArgs& f = a.forward;
  const std::int64_t first = detail::recurrent_param_count(st);
  auto* dweights = static_cast<float*>(a.dweights);
  const int K = st.num_pre_head;
  HeadGradArgs common;
  std::memset(&common, 0, sizeof common);
  common.lengths = v.arrays.lengths;
  common.rows = static_cast<std::int32_t>(st.head.last_step_only ? f.batch : static_cast<std::int64_t>(f.seq_len) * f.batch);
  common.steps = f.seq_len;
  common.batch = f.batch;
  float* dz = at<float>(v.ws, tr.head_dz);
  for (int k = K; k >= 0; --k) {
    const DenseSpec& ds = k == K ? st.head : st.pre_head[k];
    HeadGradArgs& h = e->dense[k];
    h = common;
    h.dz = dz;
    h.w = at<const float>(v.packed, p.ends + static_cast<std::size_t>(canonical_offset(st, k, 0, ParamKind::dense_weight, 0) - first) * sizeof(float));
    h.out = ds.out_features;
    h.in = static_cast<std::int32_t>(detail::dense_input_size(st, k));
    h.per_dir = h.in;  // (below the head's first Dense: one contiguous row [rows][in])
    if (k == K) {  // the head's dz from dy
      h.y = at<const float>(v.reserve, tr.head_y);
      h.dy = static_cast<const float*>(a.dy);
      h.act = static_cast<std::int32_t>(ds.activation);
      h.batch_major = f.layout == Layout::batch_major ? 1 : 0;
    }
    const float* rows = nullptr;
    if (k == 0) {
      h.d_out = at<float>(v.ws, tr.dlayer[0]);
      h.per_dir = output_size(st.layers[st.num_layers - 1]);
      h.last_step = st.head.last_step_only ? 1 : 0;
      rows = at<const float>(v.reserve, tr.head_in);
      if (st.head.last_step_only) {  // the rows the first Dense read, again (dgates is free until the last layer's cell)
        LastRowsArgs& r = e->last;
        r.in = rows;
        r.out = at<float>(v.ws, tr.dgates);
        r.lengths = v.arrays.lengths;
        r.steps = f.seq_len;
        r.batch = f.batch;
        r.width = h.in;
        r.per_dir = h.per_dir;
        rows = r.out;
      }
    } else {  // the output gradient of pre_head[k − 1], then its dz in place
      float* da = at<float>(v.ws, tr.head_da[k % 2]);
      h.d_out = da;
      rows = at<const float>(v.reserve, tr.pre_head_y[k - 1]);
      HeadGradArgs& z = e->act[k - 1];
      z = common;
      z.y = rows;
      z.dy = da;
      z.dz = da;
      z.out = h.in;
      z.act = static_cast<std::int32_t>(st.pre_head[k - 1].activation);
      dz = da;
    }
    if (dweights != nullptr && a.dy != nullptr) {
      float* dW = dweights + canonical_offset(st, k, 0, ParamKind::dense_weight, 0);
      float* db = dweights + canonical_offset(st, k, 0, ParamKind::dense_bias, 0);
      e->dw[k] = product(h.dz, 1, h.out, 0, rows, h.in, dW, h.in, h.out, h.in, h.rows, true);  // dW += Σ_r dz_r ⊗ a_r
      e->db[k] = product(h.dz, 1, h.out, 0, nullptr, 0, db, 1, h.out, 1, h.rows, true);
    }
  }
}

/// The ends' arguments: the Dense chain's (dense_chain_grad_args) and the embedding's (from the
/// dlayer buffer layer 0's input gradient went to).
inline void ends_grad_args(const detail::PlanImpl& p, const Views& v, EndsGradArgs* e) {
  using schedule::at;
  const StackSpec& st = p.stack;
  const detail::TrainLayout& tr = p.train;
  const BackwardArgs& a = *v.args;
  const ForwardArgs& f = a.forward;
  auto* dweights = static_cast<float*>(a.dweights);
  std::memset(e, 0, sizeof *e);
  if (st.head.out_features > 0) dense_chain_grad_args(p, v, e);
  if (st.embedding.vocab_size > 0 && dweights != nullptr) {
    EmbedGradArgs& m = e->embed;
    m.ids = static_cast<const std::int32_t*>(f.x);
    m.id_st = f.layout == Layout::batch_major ? 1 : f.batch;
    m.id_sb = f.layout == Layout::batch_major ? f.seq_len : 1;
    m.dx = at<const float>(v.ws, tr.dlayer[(st.num_layers - 1) % 2 ^ 1]);  // layer 0's dx (dlayer[cur ^ 1])
    m.dtable = dweights + canonical_offset(st, 0, 0, ParamKind::embedding, 0);
    m.lengths = v.arrays.lengths;
    m.steps = f.seq_len;
    m.batch = f.batch;
    m.vocab = st.embedding.vocab_size;
    m.width = st.input_size;
  }
}

/// The Dense chain's backward, before the last layer's: the head's dz, then from the head down each
/// Dense's input gradient, dW and db, and (below the head) the dz of the Dense before it; the
/// first Dense's input gradient is the last layer's output gradient (zero where it read nothing).
template <class L>
Status head(L& ln, const GpuPlan& g, int num_pre_head, const EndsGradArgs& host, const EndsGradArgs* dev) {
  const HeadGradArgs& h = host.dense[num_pre_head];
  const HeadGradArgs& first = host.dense[0];
  RNNCORE_RETURN_IF_ERROR(ln.zero_async(first.d_out, sizeof(float) * static_cast<std::size_t>(first.steps) * first.batch * first.in));
  if (h.dy == nullptr || h.rows == 0) return Status::ok;
  RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_head_grad_dz>(elementwise_dims(g, h.rows, 1), h, &dev->dense[num_pre_head], 0));
  for (int k = num_pre_head; k >= 0; --k) {
    const HeadGradArgs& d = host.dense[k];
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_head_grad_rows>(elementwise_dims(g, static_cast<std::int64_t>(d.rows) * d.in, 1),
                                                                   d, &dev->dense[k], 0));
    if (has(host.dw[k])) {
      if (k == 0 && d.last_step)
        RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_head_last_rows>(
            elementwise_dims(g, static_cast<std::int64_t>(host.last.batch) * host.last.width, 1), host.last, &dev->last, 0));
      RNNCORE_RETURN_IF_ERROR(gemm<float>(ln, g, host.dw[k], &dev->dw[k], 0));
      RNNCORE_RETURN_IF_ERROR(gemm<float>(ln, g, host.db[k], &dev->db[k], 0));
    }
    if (k > 0)
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_head_grad_dz>(elementwise_dims(g, d.rows, 1), host.act[k - 1], &dev->act[k - 1], 0));
  }
  return Status::ok;
}

}  // namespace grad

/// Backward through time on the GPU (see the file comment), for weights stored as WT.
template <class WT, class L>
Status backward_with(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed_c, unsigned char* ws,
                     const BackwardArgs& a) {
  const ForwardArgs& f = a.forward;
  RNNCORE_ENSURE(a.dx == nullptr || p.stack.embedding.vocab_size == 0, Status::unsupported,
                 "backward: dx given for a stack with an embedding: its input is token ids (the table's gradient is in "
                 "dweights); pass dx = %s", "null");
  RNNCORE_RETURN_IF_ERROR(check_packed(ln, p, g, packed_c));
  RNNCORE_RETURN_IF_ERROR(grad::zero_outputs(ln, p, a));
  if (f.batch == 0) return ln.finish("backward");
  RNNCORE_ENSURE(f.reserve != nullptr, Status::null_pointer, "backward: forward.reserve is null (%s)", "run a training forward first");
  unsigned char header[detail::kReserveHeaderBytes];
  RNNCORE_RETURN_IF_ERROR(ln.copy_to_host_in_order(header, f.reserve, sizeof header));
  RNNCORE_RETURN_IF_ERROR(detail::check_reserve_header(p, f, header));
  grad::Views v{&a, const_cast<unsigned char*>(packed_c), ws, static_cast<unsigned char*>(f.reserve), RunArrays(), 0};
  const detail::RunDropout run = detail::run_dropout(p, f);
  RNNCORE_RETURN_IF_ERROR(
      copy_run_arrays(ln, f, run.on, ws, p.gpu.train_lengths, p.gpu.train_row_ids, p.gpu.train_resets, &v.arrays));
  const int layers = p.stack.num_layers;
  GradLayerBlock host[kMaxLayers];
  std::memset(host, 0, sizeof host);
  for (int l = layers - 1, cur = 0; l >= 0; --l, cur ^= 1) {
    v.cur = cur;
    for (int d = 0; d < p.layers[l].dirs; ++d) {
      grad::direction_grad_args(p, v, l, d, &host[l].dir[d]);
      grad::direction_peephole_grads(p, v, l, d, &host[l].dir[d]);
      grad::direction_products(p, v, l, d, host[l].dir[d], host[l].gemm[d]);
    }
    const detail::Mask inter = l > 0 ? detail::inter_layer_mask(p.stack, run, l - 1) : detail::Mask();
    if (inter.active) {
      InterLayerArgs& ia = host[l].inter;
      ia.out = host[l].dir[0].dx;
      ia.steps = f.seq_len;
      ia.batch = f.batch;
      ia.width = p.layers[l].input_size;
      ia.row_ids = v.arrays.row_ids;
      ia.step = run.step;
      ia.mask = schedule::to_site(inter);
    }
  }
  grad::ends_grad_args(p, v, &host[0].ends);
  if (L::kArgsInDeviceMemory)
    RNNCORE_RETURN_IF_ERROR(ln.copy_to_device_async(ws + p.gpu.train_args, host, sizeof(GradLayerBlock) * static_cast<std::size_t>(layers)));
  const GradLayerBlock* dev = schedule::at<const GradLayerBlock>(ws, p.gpu.train_args);
  if (p.stack.head.out_features > 0) RNNCORE_RETURN_IF_ERROR(grad::head(ln, g, p.stack.num_pre_head, host[0].ends, &dev[0].ends));
  for (int l = layers - 1; l >= 0; --l) {
    const detail::LayerPlan& lp = p.layers[l];
    if (l > 0 || host[0].ends.embed.dtable != nullptr)  // the layer below's output gradient, which this layer's directions add to
      RNNCORE_RETURN_IF_ERROR(ln.zero_async(host[l].dir[0].dx, sizeof(float) * static_cast<std::size_t>(f.seq_len) * f.batch * lp.input_size));
    for (int d = 0; d < lp.dirs; ++d)
      RNNCORE_RETURN_IF_ERROR(grad::direction_of<WT>(ln, g, host[l], &dev[l], l, d, lp.cell, lp.skip_input));
    if (host[l].inter.mask.active) {
      const std::int64_t items = static_cast<std::int64_t>(f.seq_len) * f.batch * ((host[l].inter.width + 3) / 4);
      RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_rnn_inter_layer_dropout>(elementwise_dims(g, items, 1), host[l].inter, &dev[l].inter, 0));
    }
  }
  const EmbedGradArgs& m = host[0].ends.embed;  // the table's rows from layer 0's input gradient
  if (m.dtable != nullptr && f.seq_len > 0)
    RNNCORE_RETURN_IF_ERROR(ln.template launch<f32_embedding_grad>(
        elementwise_dims(g, static_cast<std::int64_t>(m.steps) * m.batch * m.width, 1), m, &dev[0].ends.embed, 0));
  return ln.finish("backward");
}

/// Backward on the GPU (see backward_with), for the plan's weight storage type.
template <class L>
Status backward(L& ln, const detail::PlanImpl& p, const GpuPlan& g, const unsigned char* packed, unsigned char* ws,
                const BackwardArgs& a) {
  return with_weight_type(g, [&](auto wt) { return backward_with<decltype(wt)>(ln, p, g, packed, ws, a); });
}

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_BACKWARD_HPP

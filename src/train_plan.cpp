// Planning for training (PlanOptions::training): the reserve a training forward fills, the
// training-forward and backward buffers of each backend (BackendOps::layout_training), and where a
// training forward's direction reads and writes in the reserve. Built with the training code
// (meson option training); src/train_none.cpp stands in without it.
#include <algorithm>
#include <cstdint>

#include "src/internal/arena.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

namespace {

// The reserve: per (layer, dir) the kept values, then the inner layers' outputs.
void layout_reserve(PlanImpl* p) {
  const StackSpec& st = p->stack;
  const std::uint64_t es = dtype_size(st.dtype), B = p->options.max_batch, T = p->options.max_seq_len;
  TrainLayout& tr = p->train;
  Arena reserve(kReserveHeaderBytes);
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerPlan& lp = p->layers[l];
    for (int d = 0; d < lp.dirs; ++d)
      tr.keep[l][d] = reserve.take(T * B * static_cast<std::uint64_t>(keep_width(lp)), es);
  }
  for (int l = 0; l + 1 < st.num_layers; ++l)
    tr.layer_out[l] = reserve.take(T * B * static_cast<std::uint64_t>(p->layers[l].dirs) * p->layers[l].hidden, es);
  if (st.embedding.vocab_size > 0) tr.embed_x = reserve.take(T * B * static_cast<std::uint64_t>(st.input_size), es);
  if (st.head.out_features > 0) {
    tr.head_in = reserve.take(T * B * static_cast<std::uint64_t>(head_input_size(st)), es);
    const std::uint64_t rows = st.head.last_step_only ? B : T * B;
    tr.head_y = reserve.take(rows * static_cast<std::uint64_t>(st.head.out_features), es);
    for (int k = 0; k < st.num_pre_head; ++k)
      tr.pre_head_y[k] = reserve.take(rows * static_cast<std::uint64_t>(st.pre_head[k].out_features), es);
  }
  tr.reserve_total = reserve.size();
  if (reserve.overflow()) p->ws.total = ~std::size_t{0};
}

// The widest hidden, gate count and input of the stack's layers.
struct TrainWidths {
  std::uint64_t hidden = 0, gates = 0, input = 0;
};
TrainWidths train_widths(const PlanImpl& p) {
  TrainWidths w;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    w.hidden = std::max<std::uint64_t>(w.hidden, p.layers[l].hidden);
    w.gates = std::max<std::uint64_t>(w.gates, p.layers[l].gates);
    w.input = std::max<std::uint64_t>(w.input, p.layers[l].input_size);
  }
  return w;
}

// The host backends' training-forward buffers (the reference cell loop's state and rows).
void take_train_forward_rows(PlanImpl* p, Arena* fw) {
  const std::uint64_t es = dtype_size(p->stack.dtype), B = p->options.max_batch, hidden = train_widths(*p).hidden;
  TrainLayout& tr = p->train;
  for (int d = 0; d < 2; ++d) {
    tr.h[d][0] = fw->take(B * hidden, es);
    tr.h[d][1] = fw->take(B * hidden, es);
    tr.c[d] = fw->take(B * hidden, es);
  }
  tr.rows = fw->take(2 * tr.rows_stride, 1);
}

// Backward's buffers every backend uses.
void take_backward_common(PlanImpl* p, Arena* bw) {
  const std::uint64_t es = dtype_size(p->stack.dtype), B = p->options.max_batch, T = p->options.max_seq_len;
  const TrainWidths w = train_widths(*p);
  TrainLayout& tr = p->train;
  tr.dh[0] = bw->take(B * w.hidden, es);
  tr.dh[1] = bw->take(B * w.hidden, es);
  tr.dc = bw->take(B * w.hidden, es);
  tr.dgates = bw->take(T * B * (w.gates + 1) * w.hidden, es);
  tr.hprev = bw->take(T * B * w.hidden, es);
  tr.xcell = bw->take(T * B * w.input, es);
  tr.dlayer[0] = bw->take(T * B * static_cast<std::uint64_t>(p->max_width), es);
  tr.dlayer[1] = bw->take(T * B * static_cast<std::uint64_t>(p->max_width), es);
  tr.brows = bw->take(static_cast<std::uint64_t>(kScratchRows + 1) * p->max_width + B * w.hidden, es);
  const StackSpec& st = p->stack;
  if (st.head.out_features == 0) return;
  const std::uint64_t rows = st.head.last_step_only ? B : T * B;
  tr.head_dz = bw->take(rows * static_cast<std::uint64_t>(st.head.out_features), es);
  std::uint64_t mid = 0;
  for (int k = 0; k < st.num_pre_head; ++k) mid = std::max<std::uint64_t>(mid, st.pre_head[k].out_features);
  for (int m = 0; m < std::min<int>(st.num_pre_head, 2); ++m) tr.head_da[m] = bw->take(rows * mid, es);
}

// Common start of every training layout: the canonical weights are the packed buffer's (after
// its header), the reserve, the rows' stride.
void begin_training_layout(PlanImpl* p) {
  p->train.canonical = kPackedHeaderBytes;
  layout_reserve(p);
  p->train.rows_stride = static_cast<std::size_t>(
      round_up(static_cast<std::int64_t>(kScratchRows * p->max_width * dtype_size(p->stack.dtype)), kAlignment));
}

void end_training_layout(PlanImpl* p, const Arena& fw, const Arena& bw) {
  p->train.forward_total = fw.size();
  p->train.backward_total = bw.size();
  if (p->ws.total != ~std::size_t{0}) p->ws.total = std::max(p->ws.total, p->train.forward_total);
  if (fw.overflow() || bw.overflow()) p->ws.total = ~std::size_t{0};
}

// Whether the backward's matmul scratch is the wide one (simd::MatmulArgs::wide_scratch; 3 MiB a
// thread instead of 0.5): on AVX-512 (16-float vectors: the kernels that use it), where a weight
// gradient's product has K = T·B over 256 and N (a layer's input, hidden or output width) over 512,
// whose blocks it widens; a layer on bf16 panels from 512 (its bf16 blocks 1,440 deep instead of 480:
// LSTM H 512 backward 3.6 % (B 16) and 1.6 % (B 64) faster; at H 256 B 64 3 % slower; medians of three, Zen 5).
bool wide_backward_pack(const PlanImpl& p) {
  if (p.vector != 16 || static_cast<std::int64_t>(p.options.max_seq_len) * p.options.max_batch <= 256) return false;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const int width = std::max({p.layers[l].input_size, p.layers[l].out, p.layers[l].hidden});
    if (width > 512 || (width == 512 && bf16_batched_products(p.simd, p.layers[l]))) return true;
  }
  return false;
}

}  // namespace

// The reference backend's packed buffer is the canonical one.
void layout_training_reference(PlanImpl* p) {
  begin_training_layout(p);
  Arena fw(0), bw(0);
  take_train_forward_rows(p, &fw);
  take_backward_common(p, &bw);
  end_training_layout(p, fw, bw);
}

// The SIMD backend's packed buffer gets a copy of the canonical weights and their transposes; its
// batched training forward and its products have buffers of their own.
void layout_training_simd(PlanImpl* p) {
  const StackSpec& st = p->stack;
  const std::uint64_t es = dtype_size(st.dtype), B = p->options.max_batch, T = p->options.max_seq_len;
  SimdTrainLayout& s = p->simd.train;
  Arena packed(p->packed_bytes);
  const std::size_t canonical = packed.take(static_cast<std::uint64_t>(param_count(st)), es);
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerPlan& lp = p->layers[l];
    const std::uint64_t gh = static_cast<std::uint64_t>(lp.gates) * lp.hidden;
    for (int d = 0; d < lp.dirs; ++d) {
      // (none where the input products run on bf16 panels: the forward's on W's, dx on Wᵀ's)
      if (!lp.skip_input && !bf16_batched_products(p->simd, lp)) s.w_t[l][d] = packed.take(simd::packed_b_floats(lp.input_size, gh), es);
      if (!trains_from_stored_panels(p->simd, lp)) {  // Rᵀ [O, G·H]; a reset-before GRU's in two (r, z | n)
        const bool two = lp.mode == Mode::gru && lp.gru_variant == GruVariant::reset_before;
        const std::int64_t H = lp.hidden;
        s.r_t[l][d] = packed.take(two ? simd::packed_b_floats(H, 2 * H) + simd::packed_b_floats(H, H)
                                      : simd::packed_b_floats(lp.out, gh), es);
      } else {  // the inference's panels, and Rᵀ's for the backward (bf16 pairs: K even)
        const std::uint64_t k = static_cast<std::uint64_t>(recurrent_k(lp)), kr = p->simd.bf16_pairs ? (k + 1) / 2 * 2 : k;
        s.rt_panel[l][d] = packed.take(static_cast<std::uint64_t>(round_up(lp.out, 4 * p->vector)) * kr, 2);
      }
      if (!lp.skip_input && bf16_batched_products(p->simd, lp))  // Wᵀ's panel for dx: K = G·H, even
        s.wt_panel[l][d] = packed.take(static_cast<std::uint64_t>(round_up(lp.input_size, 4 * p->vector)) * round_up(gh, 2), 2);
      if (lp.out != lp.hidden) s.p_t[l][d] = packed.take(simd::packed_b_floats(lp.hidden, lp.out), es);
    }
  }
  p->packed_bytes = packed.size();
  begin_training_layout(p);
  p->train.canonical = canonical;
  if (packed.overflow()) p->ws.total = ~std::size_t{0};

  const TrainWidths w = train_widths(*p);
  const std::uint64_t threads = static_cast<std::uint64_t>(p->options.threads);
  Arena fw(0), bw(0);
  take_train_forward_rows(p, &fw);
  s.proj = fw.take(T * B * w.gates * w.hidden, es);
  s.rec = fw.take(B * w.gates * w.hidden, es);
  s.state_h = fw.take(B * w.hidden, es);
  s.state_c = fw.take(B * w.hidden, es);
  s.rh = fw.take(B * w.hidden, es);
  s.x_in = fw.take(T * B * w.input, es);
  s.forward_pack = fw.take(threads * simd::kMatmulScratchFloats, es);
  if (threads > 1) s.thread_rows = fw.take(threads * p->train.rows_stride, 1);
  bool stored = false;  // some layer's recurrent products read the stored panels
  for (int l = 0; l < st.num_layers; ++l) stored = stored || trains_from_stored_panels(p->simd, p->layers[l]);
  if (stored) {
    std::uint64_t gate_row = 0, h16 = 0;  // widest G·Hp, and the widest product input
    for (int l = 0; l < st.num_layers; ++l) {
      gate_row = std::max<std::uint64_t>(gate_row, static_cast<std::uint64_t>(p->layers[l].gates) * p->layers[l].hidden_stride);
      h16 = std::max<std::uint64_t>(h16, std::max(p->layers[l].out, p->layers[l].hidden));
    }
    s.h16_stride = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(h16), 32));  // K even, rows aligned
    s.rec_blocks = fw.take(B * gate_row, es);
    s.zero_bias = fw.take(gate_row, es);
    s.h16 = fw.take(B * s.h16_stride, sizeof(std::uint16_t));
    if (p->simd.weights == simd::Weights::bf16) {  // the input projections on the bf16 panels
      std::uint64_t in = 0;
      for (int l = 0; l < st.num_layers; ++l) in = std::max<std::uint64_t>(in, p->layers[l].input_size);
      const std::uint64_t rows = std::max<std::uint64_t>(kInputChunkRows, B);
      s.x16_stride = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(in), 32));
      s.x16 = fw.take(rows * s.x16_stride, sizeof(std::uint16_t));
      s.x_blocks = fw.take(rows * gate_row, es);
    }
  }
  take_backward_common(p, &bw);
  s.backward_pack_wide = wide_backward_pack(*p);
  s.backward_pack = bw.take(threads * (s.backward_pack_wide ? simd::kMatmulWideScratchFloats : simd::kMatmulScratchFloats), es);
  if (threads > 1) s.backward_rows = bw.take(threads * (kScratchRows + 1) * static_cast<std::uint64_t>(p->max_width), es);
  // R [G·H, O] (a GRU's r, z | n), and an LSTM's W_proj [P, H] after it: at most (G + 1)·H rows of
  // H columns (O ≤ H) each.
  s.r_packed = bw.take(simd::packed_b_floats(static_cast<std::int64_t>(w.gates + 1) * w.hidden, w.hidden), es);
  end_training_layout(p, fw, bw);
}

// The GPU's kernels read their own packed W and R; its training forward runs in its ordinary
// workspace; backward adds device copies of seq_lengths and row_ids [B], resets [T·B] and the argument blocks of
// every layer's backward kernels (kGpuGradArgBytesPerLayer each; src/gpu/host/backward.hpp).
void layout_training_gpu(PlanImpl* p) {
  begin_training_layout(p);
  Arena fw(0), bw(0);
  take_backward_common(p, &bw);
#ifndef RNNCORE_NO_GPU_PLAN  // (firmware builds plan no GPU: gpu_select refuses first)
  const std::uint64_t B = p->options.max_batch;
  p->gpu.train_lengths = bw.take(B, sizeof(std::int32_t));
  p->gpu.train_row_ids = bw.take(B, sizeof(std::uint32_t));
  p->gpu.train_resets = bw.take(B * static_cast<std::uint64_t>(p->options.max_seq_len), 1);
  p->gpu.train_args = bw.take(static_cast<std::uint64_t>(p->stack.num_layers) * kGpuGradArgBytesPerLayer, 1);
#endif
  end_training_layout(p, fw, bw);
}

std::size_t reserve_total(const PlanImpl& p) { return p.train.reserve_total; }
std::size_t backward_total(const PlanImpl& p) { return p.train.backward_total; }

DirectionIO reserve_direction_io(const PlanImpl& p, const ForwardArgs& a, unsigned char* ws, int l, int d,
                                 const RunDropout& run, unsigned char* reserve) {
  DirectionIO io = direction_io(p, a, ws, l, d, run);
  const StackSpec& st = p.stack;
  const bool last = l == st.num_layers - 1;
  // (The same time-major strides as the workspace's buffers these stand for.)
  if (l == 0 && st.embedding.vocab_size > 0) io.x = reserve + p.train.embed_x;
  if (l > 0) io.x = reserve + p.train.layer_out[l - 1];
  if (!last || st.head.out_features > 0)
    io.y = reserve + (last ? p.train.head_in : p.train.layer_out[l]) +
           static_cast<std::size_t>(d) * p.layers[l].out * dtype_size(st.dtype);
  io.keep = reserve + p.train.keep[l][d];
  return io;
}

}  // namespace detail
}  // namespace rnncore

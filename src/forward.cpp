// The forward driver: checks a run's arguments and hands the run to the plan's backend (its
// BackendOps). The host backends' forward is here too: the training forward into the reserve, or
// the embedding, the backend's layers (each (layer, direction) with views of its input, output and
// state slots, inter-layer dropout between layers) and the head.
#include <cstring>

#include "src/internal/backend.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {

using detail::DirectionIO;
using detail::impl;
using detail::PlanImpl;

namespace {

// An integer stack's buffer of another layout (`family`: the kernel its header names): with the
// other LSTM weight layout, which PlanOptions::int8_weights (export-c option) matches. Here, not in
// src/int8_layer.cpp, so that a float image does not link the integer backend through it.
Status int8_packed_mismatch(const PlanImpl& p, const char* family) {
  // Panel kernels are named i8_dot_panels_<tile>__<isa> or, on int16 panels, i16_dot_panels_…
  // (not strstr: firmware would link newlib's). 0 row-major, 1 interleaved, 2 int16 panels.
  const int theirs = std::strncmp(family, "i8_dot_panels_", 14) == 0 ? 1 : (std::strncmp(family, "i16_dot_panels_", 15) == 0 ? 2 : 0);
  const int ours = static_cast<int>(p.i8.panel_layout);
  static const char* const kLayout[] = {"row-major", "interleaved", "int16 panel"};
  static const char* const kOption[] = {"row_major", "interleaved", "interleaved_i16"};
  static const char* const kExport[] = {"without --interleave", "--interleave", "--interleave-i16"};
  if (family[0] != '\0' && theirs != ours)
    return detail::fail_status(Status::weights_not_packed,
                               "forward: the packed weights are for %s (%s weights), this plan runs %s (%s): plan with "
                               "int8_weights = %s (rnncore export-c %s), or pack them with this plan",
                               family, kLayout[theirs], p.kernel_name, kLayout[ours], kOption[theirs], kExport[theirs]);
  return detail::fail_status(Status::weights_not_packed,
                             "forward: the packed weights are for another integer stack than this plan's (%s), of "
                             "other shapes: pack them with this plan",
                             p.kernel_name);
}

// Weights packed for another layout: the header names the kernel family they were packed (or
// exported) for, so the message says which plan matches them.
Status packed_mismatch(const PlanImpl& p, const void* packed) {
  static const char* const kIsa[] = {"NONE", "SSE2", "AVX2", "AVX512", "NEON"};
  detail::PackedFamily h;
  std::memcpy(&h, static_cast<const unsigned char*>(packed) + detail::kPackedFamilyOffset, sizeof h);
  char family[sizeof h.kernel_name + 1];
  std::memcpy(family, h.kernel_name, sizeof h.kernel_name);
  family[sizeof h.kernel_name] = '\0';
  if (p.stack.dtype == DType::i8) return int8_packed_mismatch(p, family);
  const bool known_isa = h.isa >= 0 && h.isa < 5;
  if (family[0] != '\0' && std::strcmp(family, p.kernel_name) != 0 && known_isa)
    return detail::fail_status(Status::weights_not_packed,
                               "forward: the packed weights are for %s (ISA %s), this plan runs %s (ISA %s): plan with "
                               "max_isa = RNNCORE_ISA_%s (the family they were packed or exported for), or pack them again",
                               family, to_string(static_cast<Isa>(h.isa)), p.kernel_name, to_string(p.isa), kIsa[h.isa]);
  return detail::fail_status(Status::weights_not_packed,
                             "forward: the packed weights are for another layout of %s (other shapes, weight dtype or "
                             "training): pack them with this plan",
                             p.kernel_name);
}

// `needed`: the workspace bytes this call needs; `y_needed`: false for backward (which reads the reserve).
Status check_args(const PlanImpl& p, const void* packed, const void* workspace, std::size_t workspace_bytes,
                  std::size_t needed, bool y_needed, const ForwardArgs& a) {
  RNNCORE_ENSURE(p.magic == detail::kPlanMagic, Status::invalid_enum, "forward: the plan was not created");
  RNNCORE_ENSURE(packed != nullptr, Status::null_pointer, "forward: packed weights are null");
  if (!p.ops()->device_memory) {  // a GPU plan's buffer is device memory: its forward checks it
    detail::PackedHeader header;
    std::memcpy(&header, packed, sizeof header);
    RNNCORE_ENSURE(header.magic == detail::kPackedMagic, Status::weights_not_packed,
                   "forward: the packed buffer was not filled by pack_weights (nor exported by rnncore export-c)");
    if (header.fingerprint != p.fingerprint) return packed_mismatch(p, packed);
  }
  RNNCORE_ENSURE(workspace != nullptr || needed == 0, Status::null_pointer, "forward: workspace is null");
  RNNCORE_ENSURE(reinterpret_cast<std::uintptr_t>(workspace) % kAlignment == 0, Status::misaligned,
                 "forward: workspace %p is not %zu-byte aligned", workspace, kAlignment);
  RNNCORE_ENSURE(workspace_bytes >= needed, Status::buffer_too_small,
                 "forward: workspace has %zu bytes, the plan needs %zu", workspace_bytes, needed);
  RNNCORE_ENSURE(a.layout == Layout::time_major || a.layout == Layout::batch_major, Status::invalid_enum,
                 "forward: layout = %d is not a layout", static_cast<int>(a.layout));
  RNNCORE_ENSURE(a.run_mode >= RunMode::inference && a.run_mode <= RunMode::monte_carlo, Status::invalid_enum,
                 "forward: run_mode = %d is not a run mode", static_cast<int>(a.run_mode));
  RNNCORE_ENSURE(!a.count_steps, Status::unsupported,
                 "forward: count_steps needs a Model (a Plan is stateless: pass the step yourself)");
  RNNCORE_ENSURE(a.batch >= 0 && a.batch <= p.options.max_batch, a.batch < 0 ? Status::invalid_size : Status::batch_too_large,
                 "forward: batch = %d, plan max_batch = %d", a.batch, p.options.max_batch);
  RNNCORE_ENSURE(a.seq_len >= 0 && a.seq_len <= p.options.max_seq_len,
                 a.seq_len < 0 ? Status::invalid_size : Status::seq_too_long, "forward: seq_len = %d, plan max_seq_len = %d",
                 a.seq_len, p.options.max_seq_len);
  const bool has_rows = a.batch > 0 && a.seq_len > 0;
  RNNCORE_ENSURE(!has_rows || a.x != nullptr, Status::null_pointer, "forward: x is null");
  RNNCORE_ENSURE(!has_rows || !y_needed || a.y != nullptr, Status::null_pointer, "forward: y is null");
  bool any_lstm = false;
  for (int l = 0; l < p.stack.num_layers; ++l) any_lstm = any_lstm || p.layers[l].mode == Mode::lstm;
  RNNCORE_ENSURE(any_lstm || (a.c0 == nullptr && a.cy == nullptr), Status::unsupported,
                 "forward: %s given for a network without LSTM layers; only LSTM has a cell state",
                 a.c0 != nullptr ? "c0" : "cy");
  if (a.reserve != nullptr) {
    RNNCORE_ENSURE(p.options.training, Status::unsupported,
                   "forward: a reserve was given but the plan was not made for training (PlanOptions::training)");
    RNNCORE_ENSURE(reinterpret_cast<std::uintptr_t>(a.reserve) % kAlignment == 0, Status::misaligned,
                   "forward: reserve %p is not %zu-byte aligned", a.reserve, kAlignment);
    RNNCORE_ENSURE(a.reserve_bytes >= reserve_total(p), Status::buffer_too_small,
                   "forward: reserve has %zu bytes, the plan needs %zu (Plan::reserve_bytes)", a.reserve_bytes,
                   reserve_total(p));
  }
  const std::int32_t vocab = p.stack.embedding.vocab_size;
  if (vocab > 0 && has_rows && !p.ops()->device_memory) {  // token ids: each a row of the table (on a GPU: NaN rows)
    const auto* ids = static_cast<const std::int32_t*>(a.x);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(a.seq_len) * a.batch; ++i)
      RNNCORE_ENSURE(ids[i] >= 0 && ids[i] < vocab, Status::invalid_size,
                     "forward: x[%lld] = %d is not a token id of the embedding (0..%d)", static_cast<long long>(i), ids[i],
                     vocab - 1);
  }
  if (a.resets != nullptr) {
    RNNCORE_ENSURE(p.ops()->resets, Status::unsupported,
                   "forward: resets are not run by %s (the float stacks' reference, simd and gpu backends run them)",
                   p.stack.dtype == DType::i8 ? "an integer stack" : "this backend");
    for (int l = 0; l < p.stack.num_layers; ++l)
      RNNCORE_ENSURE(p.layers[l].dirs == 1, Status::unsupported,
                     "forward: resets need a unidirectional network; layer %d is bidirectional", l);
  }
  if (a.seq_lengths != nullptr)
    for (int b = 0; b < a.batch; ++b)
      RNNCORE_ENSURE(a.seq_lengths[b] >= 0 && a.seq_lengths[b] <= a.seq_len, Status::bad_length,
                     "forward: seq_lengths[%d] = %d, must be 0..seq_len (%d)", b, a.seq_lengths[b], a.seq_len);
  return Status::ok;
}

// Multiplies a time-major [T, B, width] tensor by the inter-layer mask m.
template <class T>
void multiply_layer_mask(const PlanImpl& p, const detail::Mask& m, const detail::RunDropout& run, T* out, int steps,
                         int batch, T* mask) {
  const int width = static_cast<int>(m.width);
  for (int t = 0; t < steps; ++t)
    for (int b = 0; b < batch; ++b) {
      T* row = out + (static_cast<std::int64_t>(t) * batch + b) * width;
      detail::mask_row(p.simd.kernels(), m, run, t, b, mask);
      for (int u = 0; u < width; ++u) row[u] *= mask[u];
    }
}

}  // namespace

namespace detail {

RunDropout run_dropout(const PlanImpl& p, const ForwardArgs& a) {
  RunDropout run;
  run.on = a.run_mode != RunMode::inference && p.any_dropout;
  run.seed = a.seed;
  run.step = static_cast<std::uint32_t>(a.step);
  run.row_ids = a.row_ids;
  run.time_offset = a.time_offset;
  return run;
}

void apply_inter_layer_dropout(const PlanImpl& p, const RunDropout& run, int layer, unsigned char* out, int steps, int batch,
                               unsigned char* scratch) {
  const Mask inter = inter_layer_mask(p.stack, run, layer);
  if (!inter.active) return;
  if (p.stack.dtype == DType::f64)
    multiply_layer_mask(p, inter, run, reinterpret_cast<double*>(out), steps, batch, reinterpret_cast<double*>(scratch));
  else
    multiply_layer_mask(p, inter, run, reinterpret_cast<float*>(out), steps, batch, reinterpret_cast<float*>(scratch));
}

}  // namespace detail

namespace detail {

namespace {

using Layers = void (*)(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a,
                        const RunDropout& run);

Status host_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& a, Layers layers) {
  const StackSpec& st = p.stack;
  auto* ws = static_cast<unsigned char*>(workspace);
  const auto* pk = static_cast<const unsigned char*>(packed);
  const RunDropout run = run_dropout(p, a);

  // A non-LSTM layer has no cell state: its cy block is zero.
  if (a.cy != nullptr)
    for (int l = 0; l < st.num_layers; ++l)
      if (p.layers[l].mode != Mode::lstm)
        std::memset(static_cast<unsigned char*>(a.cy) + static_cast<std::size_t>(cell_state_offset(st, a.batch, l, 0)) * dtype_size(st.dtype),
                    0, static_cast<std::size_t>(p.layers[l].dirs) * a.batch * p.layers[l].hidden * dtype_size(st.dtype));

  if (a.reserve != nullptr) return train_forward(p, pk, ws, a, run);
  if (st.embedding.vocab_size > 0) embed_lookup(p, pk, ws, a);
  layers(p, pk, ws, a, run);
  if (st.head.out_features > 0) run_head(p, pk, ws, a);
  return Status::ok;
}

}  // namespace

Status reference_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& a) {
  return host_forward(p, packed, workspace, a, reference_layers);
}

Status simd_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& a) {
  return host_forward(p, packed, workspace, a, simd_layers);
}

}  // namespace detail

Status Plan::forward(const void* packed, void* workspace, std::size_t workspace_bytes, const ForwardArgs& a) const {
  detail::clear_error();
  const PlanImpl& p = impl(*this);
  RNNCORE_RETURN_IF_ERROR(check_args(p, packed, workspace, workspace_bytes, p.ws.total, true, a));
  if (a.batch == 0) return Status::ok;
  return p.ops()->forward(p, packed, workspace, a);
}

Status Plan::backward(const void* packed, void* workspace, std::size_t workspace_bytes, const BackwardArgs& a) const {
  detail::clear_error();
  const PlanImpl& p = impl(*this);
  RNNCORE_ENSURE(p.magic != detail::kPlanMagic || p.options.training, Status::unsupported,
                 "backward: the plan was not made for training (PlanOptions::training)");
  RNNCORE_RETURN_IF_ERROR(check_args(p, packed, workspace, workspace_bytes, backward_total(p), false, a.forward));
  bool any_lstm = false;
  for (int l = 0; l < p.stack.num_layers; ++l) any_lstm = any_lstm || p.layers[l].mode == Mode::lstm;
  RNNCORE_ENSURE(any_lstm || (a.dcy == nullptr && a.dc0 == nullptr), Status::unsupported,
                 "backward: %s given for a network without LSTM layers; only LSTM has a cell state",
                 a.dcy != nullptr ? "dcy" : "dc0");
  RNNCORE_ENSURE(a.forward.reserve == nullptr || a.forward.reserve_bytes >= reserve_total(p), Status::buffer_too_small,
                 "backward: reserve has %zu bytes, the plan needs %zu", a.forward.reserve_bytes, reserve_total(p));
  return p.ops()->backward(p, packed, workspace, a);
}

namespace detail {

DirectionIO direction_io(const PlanImpl& p, const ForwardArgs& a, unsigned char* ws, int l, int d, const RunDropout& run) {
  const StackSpec& st = p.stack;
  const LayerPlan& lp = p.layers[l];
  const std::int64_t T = a.seq_len, B = a.batch, in_w = lp.input_size, H = lp.out, out_w = lp.dirs * H;
  const std::size_t es = dtype_size(st.dtype);
  const bool batch_major = a.layout == Layout::batch_major;
  DirectionIO io;
  io.steps = a.seq_len;
  io.batch = a.batch;
  io.lengths = a.seq_lengths;
  io.dropout = run;
  io.reverse = d == 1;
  io.resets = resets_of(a.resets, a.layout, B, T);
  if (l == 0 && st.embedding.vocab_size > 0) {  // the embedding's rows, time-major in the workspace
    io.x = ws + p.ws.embed_x;
    io.x_st = B * in_w;
    io.x_sb = in_w;
  } else if (l == 0) {  // the caller's input, in its layout
    io.x = a.x;
    io.x_st = batch_major ? in_w : B * in_w;
    io.x_sb = batch_major ? T * in_w : in_w;
  } else {  // inner layers are time-major in the workspace
    io.x = ws + p.ws.layer_out[(l - 1) & 1];
    io.x_st = B * in_w;
    io.x_sb = in_w;
  }
  unsigned char* out;
  if (l == st.num_layers - 1 && st.head.out_features > 0) {  // the head's input
    out = ws + p.ws.head_in;
    io.y_st = B * out_w;
    io.y_sb = out_w;
  } else if (l == st.num_layers - 1) {
    out = static_cast<unsigned char*>(a.y);
    io.y_st = batch_major ? out_w : B * out_w;
    io.y_sb = batch_major ? T * out_w : out_w;
  } else {
    out = ws + p.ws.layer_out[l & 1];
    io.y_st = B * out_w;
    io.y_sb = out_w;
  }
  // h slots have O = lp.out units, c slots H (they differ only with a projection).
  const std::size_t slot = static_cast<std::size_t>(state_offset(st, a.batch, l, d)) * es;
  const std::size_t c_slot = static_cast<std::size_t>(cell_state_offset(st, a.batch, l, d)) * es;
  io.y = out == nullptr ? nullptr : out + static_cast<std::size_t>(d * H) * es;
  io.h0 = a.h0 == nullptr ? nullptr : static_cast<const unsigned char*>(a.h0) + slot;
  io.c0 = a.c0 == nullptr || lp.mode != Mode::lstm ? nullptr : static_cast<const unsigned char*>(a.c0) + c_slot;
  io.hy = a.hy == nullptr ? nullptr : static_cast<unsigned char*>(a.hy) + slot;
  io.cy = a.cy == nullptr || lp.mode != Mode::lstm ? nullptr : static_cast<unsigned char*>(a.cy) + c_slot;
  return io;
}

}  // namespace detail
}  // namespace rnncore

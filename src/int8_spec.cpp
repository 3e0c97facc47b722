// Integer stacks (StackSpec::dtype i8) as a description: their canonical byte layout and their
// validation (src/internal/int8_layer.hpp). The tensors are those of a tflite_int8 file.
#include <cmath>

#include "src/internal/error.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

namespace {

constexpr std::int64_t align4(std::int64_t n) { return (n + 3) & ~std::int64_t{3}; }

bool quant_ok(const QuantParams& q) {
  return std::isfinite(q.scale) && q.scale > 0.0f && q.zero_point >= -128 && q.zero_point <= 127;
}

Status check_quant(const QuantParams& q, const char* what, int layer, int dir) {
  RNNCORE_ENSURE(quant_ok(q), Status::invalid_size,
                 "%s of layers[%d] direction %d: scale %g, zero point %d (a scale is finite and > 0, a zero point "
                 "in -128..127)", what, layer, dir, static_cast<double>(q.scale), q.zero_point);
  return Status::ok;
}

Status check_layer(const StackSpec& st, int l) {
  const LayerSpec& ls = st.layers[l];
  RNNCORE_ENSURE(ls.mode == Mode::lstm, Status::unsupported,
                 "layers[%d].mode = %s: an integer stack (dtype i8) runs LSTM layers only", l, to_string(ls.mode));
  RNNCORE_ENSURE(!has_lstm_extensions(ls), Status::unsupported,
                 "layers[%d]: an integer LSTM has no projection or peepholes, and its cell clip is int8[d].cell_clip", l);
  RNNCORE_ENSURE(ls.num_wrappers == 0, Status::unsupported, "layers[%d]: an integer stack takes no cell wrappers", l);
  for (int d = 0; d < num_directions(ls); ++d) {
    const Int8LstmQuant& q = ls.int8[d];
    for (int g = 0; g < 4 && !q.per_channel; ++g)
      RNNCORE_ENSURE(std::isfinite(q.w_scale[g]) && q.w_scale[g] > 0.0f && std::isfinite(q.r_scale[g]) &&
                         q.r_scale[g] > 0.0f,
                     Status::invalid_size, "layers[%d].int8[%d]: weight scales of gate %d are %g and %g (finite, > 0)", l,
                     d, g, static_cast<double>(q.w_scale[g]), static_cast<double>(q.r_scale[g]));
    RNNCORE_RETURN_IF_ERROR(check_quant(q.state, "int8 state", l, d));
    RNNCORE_RETURN_IF_ERROR(check_quant(q.hidden, "int8 hidden", l, d));
    RNNCORE_ENSURE(std::isfinite(q.cell_clip) && q.cell_clip >= 0.0f, Status::invalid_size,
                   "layers[%d].int8[%d].cell_clip = %g (finite, >= 0; 0: none)", l, d, static_cast<double>(q.cell_clip));
  }
  if (num_directions(ls) == 1) return Status::ok;
  const Int8Merge& m = ls.merge;
  RNNCORE_ENSURE(m.mode >= MergeMode::concat && m.mode <= MergeMode::ave, Status::invalid_enum,
                 "layers[%d].merge.mode = %d is not a merge mode (concat, sum, mul, ave)", l, static_cast<int>(m.mode));
  RNNCORE_RETURN_IF_ERROR(check_quant(ls.int8_output, "int8_output", l, 0));
  if (m.mode == MergeMode::concat) return Status::ok;
  RNNCORE_RETURN_IF_ERROR(check_quant(m.fw, "merge.fw", l, 0));
  RNNCORE_RETURN_IF_ERROR(check_quant(m.bw, "merge.bw", l, 1));
  if (m.mode != MergeMode::ave) return Status::ok;
  RNNCORE_RETURN_IF_ERROR(check_quant(m.sum, "merge.sum", l, 0));
  RNNCORE_RETURN_IF_ERROR(check_quant(m.half, "merge.half", l, 0));
  RNNCORE_ENSURE(m.half_value >= -128 && m.half_value <= 127, Status::invalid_size,
                 "layers[%d].merge.half_value = %d (an int8)", l, m.half_value);
  return Status::ok;
}

}  // namespace

QuantParams int8_layer_output(const LayerSpec& ls) {
  return num_directions(ls) == 2 ? ls.int8_output : ls.int8[0].state;
}

QuantParams int8_layer_input(const StackSpec& st, int layer) {
  return layer == 0 ? st.input_quant : int8_layer_output(st.layers[layer - 1]);
}

Status validate_int8(const StackSpec& st) {
  RNNCORE_ENSURE(st.dropout == 0.0, Status::unsupported, "stack.dropout = %g: an integer stack has no dropout", st.dropout);
  RNNCORE_ENSURE(st.input_mode != InputMode::skip, Status::unsupported, "stack.input_mode skip: an integer stack projects its input");
  RNNCORE_RETURN_IF_ERROR(check_quant(st.input_quant, "stack.input_quant (layer 0's input)", 0, 0));
  RNNCORE_ENSURE(!(st.float_input && st.embedding.vocab_size > 0), Status::unsupported,
                 "stack.float_input with an embedding: the input is token ids");
  RNNCORE_ENSURE(!st.reverse_input || num_directions(st.layers[0]) == 1, Status::unsupported,
                 "stack.reverse_input before a bidirectional layer (Keras go_backwards reads one direction)");
  for (int l = 0; l < st.num_layers; ++l) RNNCORE_RETURN_IF_ERROR(check_layer(st, l));
  for (int k = 0; k < num_dense(st); ++k) {
    const DenseSpec& h = dense_at(st, k);
    const char* name = k == st.num_pre_head ? "stack.head" : "stack.pre_head[k]";
    RNNCORE_ENSURE(h.int8_per_channel || (std::isfinite(h.int8_w_scale) && h.int8_w_scale > 0.0f), Status::invalid_size,
                   "%s.int8_w_scale = %g (finite, > 0; or int8_per_channel; k = %d)", name, static_cast<double>(h.int8_w_scale), k);
    RNNCORE_ENSURE(quant_ok(h.int8_linear), Status::invalid_size, "%s.int8_linear (k = %d): scale %g, zero point %d", name, k,
                   static_cast<double>(h.int8_linear.scale), h.int8_linear.zero_point);
    if (h.activation == Activation::sigmoid || h.activation == Activation::tanh || h.activation == Activation::softmax)
      RNNCORE_ENSURE(quant_ok(h.int8_output), Status::invalid_size, "%s.int8_output (k = %d): scale %g, zero point %d", name,
                     k, static_cast<double>(h.int8_output.scale), h.int8_output.zero_point);
  }
  return Status::ok;
}

Int8CanonicalDir int8_canonical_dir(const StackSpec& st, int layer, int dir) {
  Int8CanonicalDir c;
  std::int64_t at = 0;
  for (int l = 0; l <= layer; ++l) {
    const LayerSpec& ls = st.layers[l];
    const std::int64_t H = ls.hidden_size, I = layer_input_size(st, l);
    for (int d = 0; d < num_directions(ls); ++d) {
      c.w = at;
      c.r = c.w + 4 * H * I;
      c.bias = align4(c.r + 4 * H * H);
      c.scales = ls.int8[d].per_channel ? c.bias + 4 * 4 * H : -1;
      c.end = c.bias + 4 * 4 * H + (ls.int8[d].per_channel ? 8 * 4 * H : 0);
      at = c.end;
      if (l == layer && d == dir) return c;
    }
  }
  return c;
}

Int8CanonicalTail int8_canonical_tail(const StackSpec& st) {
  Int8CanonicalTail t;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  const Int8CanonicalDir d = int8_canonical_dir(st, st.num_layers - 1, num_directions(last) - 1);
  std::int64_t at = d.end;
  if (st.embedding.vocab_size > 0) {
    t.table = at;
    at = align4(at + static_cast<std::int64_t>(st.embedding.vocab_size) * st.input_size);
  }
  for (int k = 0; k < num_dense(st) && k <= kMaxPreHead; ++k) {
    const DenseSpec& h = dense_at(st, k);
    const std::int64_t F = h.out_features, D = dense_input_size(st, k);
    t.dense_w[k] = at;
    t.dense_b[k] = align4(at + F * D);
    t.dense_scales[k] = t.dense_b[k] + 4 * F;
    at = t.dense_scales[k] + 4 * (h.int8_per_channel ? F : 1);
  }
  t.end = at;
  return t;
}

std::int64_t int8_canonical_offset(const StackSpec& st, int layer, int dir, ParamKind kind, int gate) {
  // A Dense's scales: layer −1 − k for Dense k of the chain (the head's −1 without pre_head).
  const bool dense_scales = kind == ParamKind::weight_scale && layer < 0;
  if (kind == ParamKind::embedding || kind == ParamKind::dense_weight || kind == ParamKind::dense_bias || dense_scales) {
    const int k = dense_scales ? -1 - layer : layer;
    if (dir != 0 || gate != 0 || k < 0 || (kind == ParamKind::embedding ? k != 0 : k >= num_dense(st))) return -1;
    const Int8CanonicalTail t = int8_canonical_tail(st);
    switch (kind) {
      case ParamKind::embedding: return t.table;
      case ParamKind::dense_weight: return t.dense_w[k];
      case ParamKind::dense_bias: return t.dense_b[k];
      default: return t.dense_scales[k];
    }
  }
  if (layer < 0 || layer >= st.num_layers) return -1;
  const LayerSpec& ls = st.layers[layer];
  if (dir < 0 || dir >= num_directions(ls) || gate < 0) return -1;
  const Int8CanonicalDir c = int8_canonical_dir(st, layer, dir);
  const std::int64_t H = ls.hidden_size, I = layer_input_size(st, layer);
  switch (kind) {
    case ParamKind::input_weight: return gate < 4 ? c.w + gate * H * I : -1;
    case ParamKind::recurrent_weight: return gate < 4 ? c.r + gate * H * H : -1;
    case ParamKind::input_bias: return gate < 4 ? c.bias + gate * 4 * H : -1;
    case ParamKind::weight_scale: return c.scales >= 0 && gate < 8 ? c.scales + gate * 4 * H : -1;
    default: return -1;
  }
}

}  // namespace detail
}  // namespace rnncore

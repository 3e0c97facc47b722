// Spec validation and the canonical (cuDNN / CudnnLSTM) parameter layout.
#include <cmath>
#include <cstring>

#include "src/internal/error.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {

const char* version_string() { return "0.1.0"; }

int num_gates(Mode mode) {
  switch (mode) {
    case Mode::lstm: return 4;
    case Mode::gru: return 3;
    case Mode::rnn_tanh:
    case Mode::rnn_relu: return 1;
  }
  return 0;
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::lstm: return "lstm";
    case Mode::gru: return "gru";
    case Mode::rnn_tanh: return "rnn_tanh";
    case Mode::rnn_relu: return "rnn_relu";
  }
  return "?";
}

const char* to_string(GruVariant variant) {
  return variant == GruVariant::reset_before ? "reset-before" : "reset-after";
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::auto_select: return "auto";
    case Backend::reference: return "reference";
    case Backend::simd: return "simd";
    case Backend::gpu: return "gpu";
  }
  return "?";
}

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::none: return "none";
    case Isa::sse2: return "sse2";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    case Isa::best: return "best";
  }
  return "?";
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
  }
  return "?";
}

const char* to_string(Activation activation) {
  switch (activation) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    case Activation::softmax: return "softmax";
  }
  return "?";
}

const char* to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::canonical: return "canonical";
    case WeightFormat::pytorch: return "pytorch";
    case WeightFormat::onnx: return "onnx";
    case WeightFormat::keras: return "keras";
    case WeightFormat::tensorflow: return "tensorflow";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i8: return 1;
  }
  return 0;
}

std::int64_t Shape::elements() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

namespace {

// Every layer of a uniform spec (a LayerSpec, not a whole StackSpec: validate(RnnSpec) runs on
// small firmware stacks).
LayerSpec uniform_layer(const RnnSpec& spec) {
  LayerSpec ls;
  ls.mode = spec.mode;
  ls.gru_variant = spec.gru_variant;
  ls.hidden_size = spec.hidden_size;
  ls.direction = spec.direction;
  ls.proj_size = spec.proj_size;
  ls.peepholes = spec.peepholes;
  ls.cell_clip = spec.cell_clip;
  ls.proj_clip = spec.proj_clip;
  return ls;
}

}  // namespace

StackSpec to_stack(const RnnSpec& spec) {
  StackSpec st;
  st.input_size = spec.input_size;
  st.input_mode = spec.input_mode;
  st.dtype = spec.dtype;
  st.dropout = spec.dropout;
  st.num_layers = spec.num_layers;
  for (int l = 0; l < spec.num_layers && l < kMaxLayers; ++l) st.layers[l] = uniform_layer(spec);
  return st;
}

namespace {

bool probability_ok(double keep) { return keep > 0.0 && keep <= 1.0; }  // false for NaN

Status validate_dtype(DType dtype, const char* field) {
  RNNCORE_ENSURE(dtype == DType::f32 || dtype == DType::f64, Status::unsupported,
                 "%s = %s: activations and canonical weights are f32 or f64 (f16/bf16 are weight storage types)", field,
                 to_string(dtype));
  return Status::ok;
}

Status validate_dropout_p(double p, const char* field) {
  RNNCORE_ENSURE(p >= 0.0 && p < 1.0, Status::bad_probability, "%s = %g: a dropout probability is in [0, 1)", field, p);
  return Status::ok;
}

bool clip_ok(double clip) { return clip >= 0.0 && std::isfinite(clip); }  // false for NaN

// proj_size, peepholes, cell_clip, proj_clip of one layer (`what`: "spec" or "layers[l]").
Status validate_lstm_extensions(const LayerSpec& ls, const char* what) {
  RNNCORE_ENSURE(ls.mode == Mode::lstm || !has_lstm_extensions(ls), Status::unsupported,
                 "%s: proj_size, peepholes, cell_clip and proj_clip are LSTM features; mode is %s", what,
                 to_string(ls.mode));
  RNNCORE_ENSURE(ls.proj_size >= 0 && ls.proj_size < ls.hidden_size, Status::invalid_size,
                 "%s.proj_size = %d: 0 (no projection) or 1..hidden_size-1 = %d (a projection is smaller than the "
                 "cell, as PyTorch requires)", what, ls.proj_size, ls.hidden_size - 1);
  RNNCORE_ENSURE(clip_ok(ls.cell_clip), Status::invalid_size,
                 "%s.cell_clip = %g: a clip is a finite value >= 0 (0: no clipping)", what, ls.cell_clip);
  RNNCORE_ENSURE(clip_ok(ls.proj_clip), Status::invalid_size,
                 "%s.proj_clip = %g: a clip is a finite value >= 0 (0: no clipping)", what, ls.proj_clip);
  RNNCORE_ENSURE(ls.proj_clip == 0.0 || ls.proj_size > 0, Status::invalid_size,
                 "%s.proj_clip = %g without a projection (proj_size = 0)", what, ls.proj_clip);
  return Status::ok;
}

Status validate_wrapper(const StackSpec& st, int l, int w) {
  const Wrapper& wr = st.layers[l].wrappers[w];
  RNNCORE_ENSURE(wr.kind == WrapperKind::dropout || wr.kind == WrapperKind::residual, Status::invalid_enum,
                 "layers[%d].wrappers[%d].kind = %d is not a wrapper", l, w, static_cast<int>(wr.kind));
  if (wr.kind == WrapperKind::residual) {
    RNNCORE_ENSURE(layer_input_size(st, l) == output_size(st.layers[l]), Status::width_mismatch,
                   "layers[%d].wrappers[%d]: a residual connection needs the cell's input width (%d) to equal its "
                   "%s (%d)", l, w, layer_input_size(st, l),
                   st.layers[l].proj_size > 0 ? "projection size" : "hidden size", output_size(st.layers[l]));
    return Status::ok;
  }
  const DropoutWrapper& d = wr.dropout;
  const struct {
    const char* name;
    double keep;
  } keeps[3] = {{"input_keep", d.input_keep}, {"output_keep", d.output_keep}, {"state_keep", d.state_keep}};
  for (const auto& k : keeps)
    RNNCORE_ENSURE(probability_ok(k.keep), Status::bad_probability,
                   "layers[%d].wrappers[%d].%s = %g: a keep probability is in (0, 1]", l, w, k.name, k.keep);
  RNNCORE_ENSURE(d.state_filter >= StateFilter::default_filter && d.state_filter <= StateFilter::none,
                 Status::invalid_enum, "layers[%d].wrappers[%d].state_filter = %d is not a state filter", l, w,
                 static_cast<int>(d.state_filter));
  return Status::ok;
}

// The optional Embedding before layer 0 and Dense head after the last layer.
Status validate_ends(const StackSpec& st) {
  const EmbeddingSpec& e = st.embedding;
  RNNCORE_ENSURE(e.vocab_size >= 0 && e.vocab_size <= detail::kMaxVocabSize, Status::invalid_size,
                 "stack.embedding.vocab_size = %d (0: no embedding, else 1..%d)", e.vocab_size, detail::kMaxVocabSize);
  const DenseSpec& h = st.head;
  RNNCORE_ENSURE(h.out_features >= 0 && h.out_features <= detail::kMaxFeatureSize, Status::invalid_size,
                 "stack.head.out_features = %d (0: no head, else 1..%d)", h.out_features, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(h.activation >= Activation::none && h.activation <= Activation::softmax, Status::invalid_enum,
                 "stack.head.activation = %d is not an activation (none, relu, sigmoid, tanh, softmax)",
                 static_cast<int>(h.activation));
  RNNCORE_ENSURE(h.out_features > 0 || (h.activation == Activation::none && !h.last_step_only), Status::invalid_size,
                 "stack.head: %s set but out_features = 0 (no head)",
                 h.last_step_only ? "last_step_only" : "an activation");
  RNNCORE_ENSURE(st.num_pre_head >= 0 && st.num_pre_head <= kMaxPreHead, Status::invalid_size,
                 "stack.num_pre_head = %d (must be 0..%d)", st.num_pre_head, kMaxPreHead);
  RNNCORE_ENSURE(st.num_pre_head == 0 || h.out_features > 0, Status::invalid_size,
                 "stack.num_pre_head = %d without a head (stack.head.out_features = 0)", st.num_pre_head);
  for (int k = 0; k < st.num_pre_head; ++k) {
    const DenseSpec& d = st.pre_head[k];
    RNNCORE_ENSURE(d.out_features >= 1 && d.out_features <= detail::kMaxFeatureSize, Status::invalid_size,
                   "stack.pre_head[%d].out_features = %d (must be 1..%d)", k, d.out_features, detail::kMaxFeatureSize);
    RNNCORE_ENSURE(d.activation >= Activation::none && d.activation <= Activation::softmax, Status::invalid_enum,
                   "stack.pre_head[%d].activation = %d is not an activation (none, relu, sigmoid, tanh, softmax)", k,
                   static_cast<int>(d.activation));
    RNNCORE_ENSURE(!d.last_step_only, Status::invalid_size,
                   "stack.pre_head[%d].last_step_only: the head's last_step_only chooses the chain's rows", k);
    RNNCORE_ENSURE(st.dtype != DType::i8 || d.activation != Activation::softmax, Status::unsupported,
                   "stack.pre_head[%d].activation softmax: an integer stack's softmax is its head's", k);
  }
  return Status::ok;
}

}  // namespace

Status validate(const RnnSpec& spec) {
  detail::clear_error();
  RNNCORE_ENSURE(spec.mode >= Mode::lstm && spec.mode <= Mode::rnn_relu, Status::invalid_enum,
                 "spec.mode = %d is not a cell type", static_cast<int>(spec.mode));
  RNNCORE_ENSURE(spec.gru_variant == GruVariant::reset_after || spec.gru_variant == GruVariant::reset_before,
                 Status::invalid_enum, "spec.gru_variant = %d is not a GRU variant", static_cast<int>(spec.gru_variant));
  RNNCORE_ENSURE(spec.direction == Direction::unidirectional || spec.direction == Direction::bidirectional,
                 Status::invalid_enum, "spec.direction = %d is not a direction", static_cast<int>(spec.direction));
  RNNCORE_ENSURE(spec.input_mode >= InputMode::linear && spec.input_mode <= InputMode::auto_select,
                 Status::invalid_enum, "spec.input_mode = %d is not an input mode", static_cast<int>(spec.input_mode));
  RNNCORE_RETURN_IF_ERROR(validate_dtype(spec.dtype, "spec.dtype"));
  RNNCORE_ENSURE(spec.input_size >= 1 && spec.input_size <= detail::kMaxFeatureSize, Status::invalid_size,
                 "spec.input_size = %d (must be 1..%d)", spec.input_size, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(spec.hidden_size >= 1 && spec.hidden_size <= detail::kMaxFeatureSize, Status::invalid_size,
                 "spec.hidden_size = %d (must be 1..%d)", spec.hidden_size, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(spec.num_layers >= 1 && spec.num_layers <= kMaxLayers, Status::invalid_size,
                 "spec.num_layers = %d (must be 1..%d)", spec.num_layers, kMaxLayers);
  RNNCORE_ENSURE(spec.input_mode != InputMode::skip || spec.input_size == spec.hidden_size,
                 Status::skip_needs_equal_sizes, "input_mode skip with input_size = %d and hidden_size = %d",
                 spec.input_size, spec.hidden_size);
  RNNCORE_RETURN_IF_ERROR(validate_lstm_extensions(uniform_layer(spec), "spec"));
  return validate_dropout_p(spec.dropout, "spec.dropout");
}

Status validate(const StackSpec& st) {
  detail::clear_error();
  const bool int8 = st.dtype == DType::i8;
  if (!int8) RNNCORE_RETURN_IF_ERROR(validate_dtype(st.dtype, "stack.dtype"));
  RNNCORE_ENSURE(st.input_mode >= InputMode::linear && st.input_mode <= InputMode::auto_select, Status::invalid_enum,
                 "stack.input_mode = %d is not an input mode", static_cast<int>(st.input_mode));
  RNNCORE_ENSURE(st.input_size >= 1 && st.input_size <= detail::kMaxFeatureSize, Status::invalid_size,
                 "stack.input_size = %d (must be 1..%d)", st.input_size, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(st.num_layers >= 1 && st.num_layers <= kMaxLayers, Status::invalid_size,
                 "stack.num_layers = %d (must be 1..%d)", st.num_layers, kMaxLayers);
  RNNCORE_RETURN_IF_ERROR(validate_dropout_p(st.dropout, "stack.dropout"));
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    RNNCORE_ENSURE(ls.mode >= Mode::lstm && ls.mode <= Mode::rnn_relu, Status::invalid_enum,
                   "layers[%d].mode = %d is not a cell type", l, static_cast<int>(ls.mode));
    RNNCORE_ENSURE(ls.gru_variant == GruVariant::reset_after || ls.gru_variant == GruVariant::reset_before,
                   Status::invalid_enum, "layers[%d].gru_variant = %d is not a GRU variant", l,
                   static_cast<int>(ls.gru_variant));
    RNNCORE_ENSURE(ls.direction == Direction::unidirectional || ls.direction == Direction::bidirectional,
                   Status::invalid_enum, "layers[%d].direction = %d is not a direction", l, static_cast<int>(ls.direction));
    RNNCORE_ENSURE(ls.hidden_size >= 1 && ls.hidden_size <= detail::kMaxFeatureSize, Status::invalid_size,
                   "layers[%d].hidden_size = %d (must be 1..%d)", l, ls.hidden_size, detail::kMaxFeatureSize);
    RNNCORE_ENSURE(ls.num_wrappers >= 0 && ls.num_wrappers <= kMaxWrappers, Status::invalid_size,
                   "layers[%d].num_wrappers = %d (must be 0..%d)", l, ls.num_wrappers, kMaxWrappers);
    char what[16] = "layers[";  // "layers[<l>]" without printf (firmware builds link none)
    int n = 7;
    if (l >= 10) what[n++] = static_cast<char>('0' + l / 10);
    what[n++] = static_cast<char>('0' + l % 10);
    what[n++] = ']';
    what[n] = '\0';
    RNNCORE_RETURN_IF_ERROR(validate_lstm_extensions(ls, what));
    RNNCORE_ENSURE(int8 || ls.merge.mode == MergeMode::concat, Status::unsupported,
                   "layers[%d].merge: merging directions is an integer stack's (dtype i8); a float layer concatenates them", l);
  }
  RNNCORE_ENSURE(layer_input_size(st, 1 < st.num_layers ? 1 : 0) <= 2 * detail::kMaxFeatureSize, Status::invalid_size,
                 "layer widths too large");
  for (int l = 0; l < st.num_layers; ++l)
    for (int w = 0; w < st.layers[l].num_wrappers; ++w) RNNCORE_RETURN_IF_ERROR(validate_wrapper(st, l, w));
  RNNCORE_ENSURE(st.input_mode != InputMode::skip || st.input_size == st.layers[0].hidden_size,
                 Status::skip_needs_equal_sizes, "input_mode skip with input_size = %d and layers[0].hidden_size = %d",
                 st.input_size, st.layers[0].hidden_size);
  RNNCORE_RETURN_IF_ERROR(validate_ends(st));
  if (int8) return detail::validate_int8(st);
  RNNCORE_ENSURE(!st.float_input && !st.float_output && !st.reverse_input, Status::unsupported,
                 "stack.%s: an integer stack's (dtype i8) option", st.float_input ? "float_input"
                                                                   : st.float_output ? "float_output" : "reverse_input");
  return Status::ok;
}

int stack_output_size(const StackSpec& st) {
  if (st.head.out_features > 0) return st.head.out_features;
  if (st.num_layers < 1 || st.num_layers > kMaxLayers) return 0;
  return layer_output_width(st.layers[st.num_layers - 1]);
}

int layer_output_width(const LayerSpec& ls) {
  const bool merged = num_directions(ls) == 2 && ls.merge.mode != MergeMode::concat;
  return merged ? output_size(ls) : num_directions(ls) * output_size(ls);
}

int num_directions(const RnnSpec& spec) { return spec.direction == Direction::bidirectional ? 2 : 1; }
int num_directions(const LayerSpec& layer) { return layer.direction == Direction::bidirectional ? 2 : 1; }

bool has_lstm_extensions(const LayerSpec& ls) {
  return ls.proj_size != 0 || ls.peepholes || ls.cell_clip != 0.0 || ls.proj_clip != 0.0;
}
int output_size(const LayerSpec& ls) { return ls.proj_size > 0 ? ls.proj_size : ls.hidden_size; }

int layer_input_size(const RnnSpec& spec, int layer) {
  return layer == 0 ? spec.input_size : num_directions(spec) * (spec.proj_size > 0 ? spec.proj_size : spec.hidden_size);
}
int layer_input_size(const StackSpec& st, int layer) {
  if (layer <= 0) return st.input_size;
  return layer_output_width(st.layers[layer - 1]);
}

bool uses_skip_input(const RnnSpec& spec) {
  return spec.input_mode == InputMode::skip ||
         (spec.input_mode == InputMode::auto_select && spec.input_size == spec.hidden_size);
}
bool uses_skip_input(const StackSpec& st) {
  return st.input_mode == InputMode::skip ||
         (st.input_mode == InputMode::auto_select && st.input_size == st.layers[0].hidden_size);
}

namespace {

// Offset of (layer, direction) in a state tensor whose (l, d) block has batch × width(l) elements.
template <class Width>
std::int64_t state_block_offset(const StackSpec& st, int batch, int layer, int direction, Width width) {
  std::int64_t n = 0;
  for (int l = 0; l < layer; ++l) n += static_cast<std::int64_t>(num_directions(st.layers[l])) * batch * width(st.layers[l]);
  return direction == 0 ? n : n + static_cast<std::int64_t>(direction) * batch * width(st.layers[layer]);
}

int cell_width(const LayerSpec& ls) { return ls.hidden_size; }

}  // namespace

std::int64_t state_elements(const StackSpec& st, int batch) {
  return state_block_offset(st, batch, st.num_layers, 0, output_size);
}
std::int64_t state_offset(const StackSpec& st, int batch, int layer, int direction) {
  return state_block_offset(st, batch, layer, direction, output_size);
}
std::int64_t cell_state_elements(const StackSpec& st, int batch) {
  return state_block_offset(st, batch, st.num_layers, 0, cell_width);
}
std::int64_t cell_state_offset(const StackSpec& st, int batch, int layer, int direction) {
  return state_block_offset(st, batch, layer, direction, cell_width);
}

namespace detail {

std::int64_t params_per_direction(const StackSpec& st, int layer) {
  const LayerSpec& ls = st.layers[layer];
  const std::int64_t g = num_gates(ls.mode), h = ls.hidden_size, o = output_size(ls);
  const bool has_w = !(layer == 0 && uses_skip_input(st));
  return g * ((has_w ? h * layer_input_size(st, layer) : 0) + h * o + 2 * h) + extension_params(ls);
}

std::int64_t extension_params(const LayerSpec& ls) {
  const std::int64_t h = ls.hidden_size;
  return (ls.peepholes ? 3 * h : 0) + static_cast<std::int64_t>(ls.proj_size) * h;
}

}  // namespace detail

namespace detail {

std::int64_t recurrent_param_count(const StackSpec& st) {
  std::int64_t total = 0;
  for (int l = 0; l < st.num_layers; ++l) total += num_directions(st.layers[l]) * detail::params_per_direction(st, l);
  return total;
}

// The Dense chain's input width: D·O of the last layer.
std::int64_t head_input_size(const StackSpec& st) { return layer_output_width(st.layers[st.num_layers - 1]); }
int num_dense(const StackSpec& st) { return st.head.out_features > 0 ? st.num_pre_head + 1 : 0; }
const DenseSpec& dense_at(const StackSpec& st, int k) { return k < st.num_pre_head ? st.pre_head[k] : st.head; }
std::int64_t dense_input_size(const StackSpec& st, int k) {
  return k == 0 ? head_input_size(st) : dense_at(st, k - 1).out_features;
}

}  // namespace detail

namespace {

using detail::head_input_size;
using detail::recurrent_param_count;

// Offset of the embedding table (k 0), or of Dense k's W or b in the chain (-1 when the stack has none).
std::int64_t end_offset(const StackSpec& st, ParamKind kind, int k) {
  const std::int64_t table = recurrent_param_count(st);
  if (kind == ParamKind::embedding) return st.embedding.vocab_size > 0 && k == 0 ? table : -1;
  if (k < 0 || k >= detail::num_dense(st)) return -1;
  std::int64_t w = table + static_cast<std::int64_t>(st.embedding.vocab_size) * st.input_size;
  for (int j = 0; j < k; ++j) w += detail::dense_at(st, j).out_features * (detail::dense_input_size(st, j) + 1);
  if (kind == ParamKind::dense_weight) return w;
  return kind == ParamKind::dense_bias ? w + detail::dense_at(st, k).out_features * detail::dense_input_size(st, k) : -1;
}

}  // namespace

std::int64_t param_count(const StackSpec& st) {
  if (st.dtype == DType::i8 && st.num_layers >= 1 && st.num_layers <= kMaxLayers) return detail::int8_canonical_tail(st).end;
  std::int64_t total = detail::recurrent_param_count(st) + static_cast<std::int64_t>(st.embedding.vocab_size) * st.input_size;
  if (st.num_layers >= 1 && st.num_layers <= kMaxLayers && st.num_pre_head >= 0 && st.num_pre_head <= kMaxPreHead)
    for (int k = 0; k < detail::num_dense(st); ++k)
      total += detail::dense_at(st, k).out_features * (detail::dense_input_size(st, k) + 1);
  return total;
}
std::int64_t param_count(const RnnSpec& spec) { return param_count(to_stack(spec)); }

std::int64_t canonical_offset(const StackSpec& st, int layer, int direction, ParamKind kind, int gate) {
  if (st.num_layers < 1 || st.num_layers > kMaxLayers) return -1;
  if (st.dtype == DType::i8) return detail::int8_canonical_offset(st, layer, direction, kind, gate);
  if (kind == ParamKind::embedding || kind == ParamKind::dense_weight || kind == ParamKind::dense_bias)
    return direction == 0 && gate == 0 ? end_offset(st, kind, layer) : -1;
  if (layer < 0 || layer >= st.num_layers) return -1;
  const LayerSpec& ls = st.layers[layer];
  const int dirs = num_directions(ls), g = num_gates(ls.mode);
  if (direction < 0 || direction >= dirs || gate < 0 || gate >= g) return -1;
  std::int64_t off = 0;
  for (int l = 0; l < layer; ++l) off += num_directions(st.layers[l]) * detail::params_per_direction(st, l);
  off += direction * detail::params_per_direction(st, layer);
  const std::int64_t h = ls.hidden_size, o = output_size(ls);
  const bool has_w = !(layer == 0 && uses_skip_input(st));
  const std::int64_t w_block = has_w ? h * layer_input_size(st, layer) : 0;
  const std::int64_t ext = off + g * (w_block + h * o + 2 * h);  // the LSTM extensions follow the biases
  switch (kind) {
    case ParamKind::input_weight: return has_w ? off + gate * w_block : -1;
    case ParamKind::recurrent_weight: return off + g * w_block + gate * h * o;
    case ParamKind::input_bias: return off + g * (w_block + h * o) + gate * h;
    case ParamKind::recurrent_bias: return off + g * (w_block + h * o + h) + gate * h;
    case ParamKind::peephole:  // p_i, p_f, p_o: canonical gates 0, 1, 3
      if (!ls.peepholes || gate == 2) return -1;
      return ext + (gate == 3 ? 2 : gate) * h;
    case ParamKind::projection: return ls.proj_size > 0 && gate == 0 ? ext + (ls.peepholes ? 3 * h : 0) : -1;
    default: return -1;
  }
  return -1;
}
std::int64_t canonical_offset(const RnnSpec& spec, int layer, int direction, ParamKind kind, int gate) {
  return canonical_offset(to_stack(spec), layer, direction, kind, gate);
}

static Shape make_shape(std::int64_t a, std::int64_t b = -1, std::int64_t c = -1) {
  Shape s;
  s.dims[s.ndim++] = a;
  if (b >= 0) s.dims[s.ndim++] = b;
  if (c >= 0) s.dims[s.ndim++] = c;
  return s;
}

Status canonical_weight_shapes(const StackSpec& st, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(st));
  RNNCORE_ENSURE(count != nullptr, Status::null_pointer, "canonical_weight_shapes: count is null");
  RNNCORE_ENSURE(capacity == 0 || shapes != nullptr, Status::null_pointer, "canonical_weight_shapes: shapes is null");
  int n = 0;
  for (int l = 0; l < st.num_layers; ++l) {
    const int g = num_gates(st.layers[l].mode), h = st.layers[l].hidden_size;
    for (int d = 0; d < num_directions(st.layers[l]); ++d) {
      if (!(l == 0 && uses_skip_input(st)))
        for (int k = 0; k < g; ++k, ++n)
          if (n < capacity) shapes[n] = make_shape(h, layer_input_size(st, l));
      for (int k = 0; k < g; ++k, ++n)
        if (n < capacity) shapes[n] = make_shape(h, output_size(st.layers[l]));
      if (st.layers[l].proj_size > 0 && n++ < capacity) shapes[n - 1] = make_shape(st.layers[l].proj_size, h);
    }
  }
  if (st.embedding.vocab_size > 0 && n++ < capacity) shapes[n - 1] = make_shape(st.embedding.vocab_size, st.input_size);
  for (int k = 0; k < detail::num_dense(st); ++k)
    if (n++ < capacity) shapes[n - 1] = make_shape(detail::dense_at(st, k).out_features, detail::dense_input_size(st, k));
  *count = n;
  return Status::ok;
}
Status canonical_weight_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return canonical_weight_shapes(to_stack(spec), shapes, capacity, count);
}

Status canonical_bias_shapes(const StackSpec& st, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(st));
  RNNCORE_ENSURE(count != nullptr, Status::null_pointer, "canonical_bias_shapes: count is null");
  RNNCORE_ENSURE(capacity == 0 || shapes != nullptr, Status::null_pointer, "canonical_bias_shapes: shapes is null");
  int n = 0;
  for (int l = 0; l < st.num_layers; ++l) {  // per direction: bW_k, bR_k, then the peepholes p_i, p_f, p_o
    const int per_dir = 2 * num_gates(st.layers[l].mode) + (st.layers[l].peepholes ? 3 : 0);
    for (int i = 0; i < num_directions(st.layers[l]) * per_dir; ++i, ++n)
      if (n < capacity) shapes[n] = make_shape(st.layers[l].hidden_size);
  }
  for (int k = 0; k < detail::num_dense(st); ++k)
    if (n++ < capacity) shapes[n - 1] = make_shape(detail::dense_at(st, k).out_features);
  *count = n;
  return Status::ok;
}
Status canonical_bias_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return canonical_bias_shapes(to_stack(spec), shapes, capacity, count);
}

Shape state_shape(const RnnSpec& spec, int batch) {
  return make_shape(static_cast<std::int64_t>(spec.num_layers) * num_directions(spec), batch,
                    spec.proj_size > 0 ? spec.proj_size : spec.hidden_size);
}

Status zero_state(const RnnSpec& spec, int batch, void* h, void* c) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(batch >= 0, Status::invalid_size, "zero_state: batch = %d", batch);
  RNNCORE_ENSURE(h != nullptr, Status::null_pointer, "zero_state: h is null");
  const std::size_t bytes = static_cast<std::size_t>(state_shape(spec, batch).elements()) * dtype_size(spec.dtype);
  std::memset(h, 0, bytes);
  if (c != nullptr)
    std::memset(c, 0, static_cast<std::size_t>(cell_state_elements(to_stack(spec), batch)) * dtype_size(spec.dtype));
  return Status::ok;
}

}  // namespace rnncore

// Spec validation and the canonical (cuDNN / CudnnLSTM) parameter layout.
#include <cstring>

#include "src/internal/error.hpp"
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
  }
  return "?";
}

const char* to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::canonical: return "canonical";
    case WeightFormat::pytorch: return "pytorch";
    case WeightFormat::onnx: return "onnx";
    case WeightFormat::keras: return "keras";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16:
    case DType::bf16: return 2;
  }
  return 0;
}

std::int64_t Shape::elements() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

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
  RNNCORE_ENSURE(spec.dtype == DType::f32 || spec.dtype == DType::f64, Status::unsupported,
                 "spec.dtype = %s: activations and canonical weights are f32 or f64 (f16/bf16 are weight storage types)",
                 to_string(spec.dtype));
  RNNCORE_ENSURE(spec.input_size >= 1 && spec.input_size <= detail::kMaxFeatureSize, Status::invalid_size,
                 "spec.input_size = %d (must be 1..%d)", spec.input_size, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(spec.hidden_size >= 1 && spec.hidden_size <= detail::kMaxFeatureSize, Status::invalid_size,
                 "spec.hidden_size = %d (must be 1..%d)", spec.hidden_size, detail::kMaxFeatureSize);
  RNNCORE_ENSURE(spec.num_layers >= 1 && spec.num_layers <= kMaxLayers, Status::invalid_size,
                 "spec.num_layers = %d (must be 1..%d)", spec.num_layers, kMaxLayers);
  RNNCORE_ENSURE(spec.input_mode != InputMode::skip || spec.input_size == spec.hidden_size,
                 Status::skip_needs_equal_sizes, "input_mode skip with input_size = %d and hidden_size = %d",
                 spec.input_size, spec.hidden_size);
  return Status::ok;
}

int num_directions(const RnnSpec& spec) { return spec.direction == Direction::bidirectional ? 2 : 1; }

int layer_input_size(const RnnSpec& spec, int layer) {
  return layer == 0 ? spec.input_size : num_directions(spec) * spec.hidden_size;
}

bool uses_skip_input(const RnnSpec& spec) {
  return spec.input_mode == InputMode::skip ||
         (spec.input_mode == InputMode::auto_select && spec.input_size == spec.hidden_size);
}

namespace detail {

std::int64_t params_per_direction(const RnnSpec& spec, int layer) {
  const std::int64_t g = num_gates(spec.mode), h = spec.hidden_size;
  const bool has_w = !(layer == 0 && uses_skip_input(spec));
  return g * ((has_w ? h * layer_input_size(spec, layer) : 0) + h * h + 2 * h);
}

}  // namespace detail

std::int64_t param_count(const RnnSpec& spec) {
  std::int64_t total = 0;
  for (int l = 0; l < spec.num_layers; ++l) total += num_directions(spec) * detail::params_per_direction(spec, l);
  return total;
}

std::int64_t canonical_offset(const RnnSpec& spec, int layer, int direction, ParamKind kind, int gate) {
  const int dirs = num_directions(spec), g = num_gates(spec.mode);
  if (layer < 0 || layer >= spec.num_layers || direction < 0 || direction >= dirs || gate < 0 || gate >= g) return -1;
  std::int64_t off = 0;
  for (int l = 0; l < layer; ++l) off += dirs * detail::params_per_direction(spec, l);
  off += direction * detail::params_per_direction(spec, layer);
  const std::int64_t h = spec.hidden_size;
  const bool has_w = !(layer == 0 && uses_skip_input(spec));
  const std::int64_t w_block = has_w ? h * layer_input_size(spec, layer) : 0;
  switch (kind) {
    case ParamKind::input_weight: return has_w ? off + gate * w_block : -1;
    case ParamKind::recurrent_weight: return off + g * w_block + gate * h * h;
    case ParamKind::input_bias: return off + g * (w_block + h * h) + gate * h;
    case ParamKind::recurrent_bias: return off + g * (w_block + h * h + h) + gate * h;
  }
  return -1;
}

static Shape make_shape(std::int64_t a, std::int64_t b = -1, std::int64_t c = -1) {
  Shape s;
  s.dims[s.ndim++] = a;
  if (b >= 0) s.dims[s.ndim++] = b;
  if (c >= 0) s.dims[s.ndim++] = c;
  return s;
}

Status canonical_weight_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(count != nullptr, Status::null_pointer, "canonical_weight_shapes: count is null");
  RNNCORE_ENSURE(capacity == 0 || shapes != nullptr, Status::null_pointer, "canonical_weight_shapes: shapes is null");
  int n = 0;
  const int g = num_gates(spec.mode), h = spec.hidden_size;
  for (int l = 0; l < spec.num_layers; ++l)
    for (int d = 0; d < num_directions(spec); ++d) {
      if (!(l == 0 && uses_skip_input(spec)))
        for (int k = 0; k < g; ++k, ++n)
          if (n < capacity) shapes[n] = make_shape(h, layer_input_size(spec, l));
      for (int k = 0; k < g; ++k, ++n)
        if (n < capacity) shapes[n] = make_shape(h, h);
    }
  *count = n;
  return Status::ok;
}

Status canonical_bias_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(count != nullptr, Status::null_pointer, "canonical_bias_shapes: count is null");
  RNNCORE_ENSURE(capacity == 0 || shapes != nullptr, Status::null_pointer, "canonical_bias_shapes: shapes is null");
  const int n = spec.num_layers * num_directions(spec) * 2 * num_gates(spec.mode);
  for (int i = 0; i < n && i < capacity; ++i) shapes[i] = make_shape(spec.hidden_size);
  *count = n;
  return Status::ok;
}

Shape state_shape(const RnnSpec& spec, int batch) {
  return make_shape(static_cast<std::int64_t>(spec.num_layers) * num_directions(spec), batch, spec.hidden_size);
}

Status zero_state(const RnnSpec& spec, int batch, void* h, void* c) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(batch >= 0, Status::invalid_size, "zero_state: batch = %d", batch);
  RNNCORE_ENSURE(h != nullptr, Status::null_pointer, "zero_state: h is null");
  const std::size_t bytes = static_cast<std::size_t>(state_shape(spec, batch).elements()) * dtype_size(spec.dtype);
  std::memset(h, 0, bytes);
  if (c != nullptr) std::memset(c, 0, bytes);
  return Status::ok;
}

}  // namespace rnncore

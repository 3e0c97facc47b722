// Loading and running an integer LSTM model file (src/io/int8_model.hpp, docs/int8.md).
#include "src/io/int8_model.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace rnncore {
namespace io {

namespace {

const char* const kGateNames[q8::kGates] = {"i", "f", "c", "o"};

std::string shape_str(const std::vector<std::int64_t>& s) { return shape_to_string(s.data(), s.size()); }

// Reads metadata values with one-line errors naming the file and key.
// Keys are looked up with `prefix` (a layer's "l<k>." in a file of several layers).
struct Meta {
  const SafeTensors& file;
  std::string* error;
  std::string prefix;

  const std::string* get(const char* key) {
    const std::string* v = file.meta(prefix + key);
    if (v == nullptr)
      *error = file.path + ": metadata '" + prefix + key +
               "' missing (an int8 model as tools/tflite_to_safetensors.py writes it has it)";
    return v;
  }
  bool f32(const char* key, float* out) {
    const std::string* v = get(key);
    if (v == nullptr) return false;
    errno = 0;
    char* end = nullptr;
    const double d = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || errno == ERANGE || !std::isfinite(d)) {
      *error = file.path + ": metadata '" + prefix + key + "' is '" + *v + "', expected a finite number";
      return false;
    }
    *out = static_cast<float>(d);
    return true;
  }
  bool i32(const char* key, long lo, long hi, std::int32_t* out) {
    const std::string* v = get(key);
    if (v == nullptr) return false;
    errno = 0;
    char* end = nullptr;
    const long l = std::strtol(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE || l < lo || l > hi) {
      *error = file.path + ": metadata '" + prefix + key + "' is '" + *v + "', expected an integer in " + std::to_string(lo) +
               ".." + std::to_string(hi);
      return false;
    }
    *out = static_cast<std::int32_t>(l);
    return true;
  }
  bool flag(const char* key, const char* yes, const char* no, bool* out) {
    const std::string* v = get(key);
    if (v == nullptr) return false;
    if (*v != yes && *v != no) {
      *error = file.path + ": metadata '" + prefix + key + "' is '" + *v + "', expected '" + yes + "' or '" + no + "'";
      return false;
    }
    *out = *v == yes;
    return true;
  }
};

// Copies tensor `name` of type `type` and shape `shape` into `out`.
template <class T>
Status tensor(const SafeTensors& file, const std::string& name, ElemType type, const std::vector<std::int64_t>& shape,
              std::vector<T>* out, std::string* error) {
  const TensorEntry* e = file.find(name);
  if (e == nullptr) {
    *error = file.path + ": tensor '" + name + "' missing (expected " + elem_type_name(type) + " " + shape_str(shape) + ")";
    return Status::tensor_missing;
  }
  if (e->type != type) {
    *error = file.path + ": tensor '" + name + "' is " + elem_type_name(e->type) + ", expected " + elem_type_name(type);
    return Status::tensor_dtype;
  }
  if (e->shape != shape) {
    *error = file.path + ": tensor '" + name + "' has shape " + shape_str(e->shape) + ", expected " + shape_str(shape);
    return Status::tensor_shape;
  }
  out->resize(static_cast<std::size_t>(e->end - e->begin) / sizeof(T));
  if (!out->empty()) std::memcpy(out->data(), file.data(*e), out->size() * sizeof(T));
  return Status::ok;
}

}  // namespace

bool is_int8_model(const SafeTensors& file) {
  const std::string* f = file.meta("format");
  return f != nullptr && *f == "tflite_int8";
}

namespace {

// One layer (`prefix` "" in a single-layer file, "l<k>." in a stack): its weights, quantization
// and prepared parameters. The model-level flags are the caller's.
Status load_layer(const SafeTensors& file, const std::string& prefix, Int8Model* out, std::string* error) {
  Meta m{file, error, prefix};
  std::int32_t I = 0, H = 0, out_zp = 0;
  float out_scale = 0.0f;
  q8::Int8LstmQuantization& q = out->q;
  if (!m.i32("I", 1, 65536, &I) || !m.i32("H", 1, 65536, &H) || !m.f32("input_scale", &q.input_scale) ||
      !m.i32("input_zp", -128, 127, &q.input_zp) || !m.f32("output_state_scale", &q.state_scale) ||
      !m.i32("output_state_zp", -128, 127, &q.state_zp) || !m.f32("hidden_scale", &q.hidden_scale) ||
      !m.i32("hidden_zp", -128, 127, &q.hidden_zp) || !m.f32("cell_scale", &q.cell_scale) ||
      !m.f32("cell_clip", &q.cell_clip) || !m.f32("output_scale", &out_scale) ||
      !m.i32("output_zp", -128, 127, &out_zp))
    return Status::format;
  float proj_clip = 0.0f;
  if (file.meta(prefix + "proj_clip") != nullptr && !m.f32("proj_clip", &proj_clip)) return Status::format;
  if (out_scale != q.state_scale || out_zp != q.state_zp) {
    *error = file.path + ": the output's quantization (scale " + *file.meta(prefix + "output_scale") +
             ", zero point " + std::to_string(out_zp) + ") differs from the LSTM's output state (" +
             *file.meta(prefix + "output_state_scale") + ", " + std::to_string(q.state_zp) +
             "): a requantized output is not supported";
    return Status::unsupported;
  }
  out->input_size = I;
  out->hidden_size = H;
  const std::int8_t* w[q8::kGates];
  const std::int8_t* r[q8::kGates];
  const std::int32_t* b[q8::kGates];
  for (int g = 0; g < q8::kGates; ++g) {
    const std::string n = kGateNames[g];
    Status s = tensor(file, prefix + "w_" + n, ElemType::i8, {H, I}, &out->w[g], error);
    if (s == Status::ok) s = tensor(file, prefix + "r_" + n, ElemType::i8, {H, H}, &out->r[g], error);
    if (s == Status::ok) s = tensor(file, prefix + "b_" + n, ElemType::i32, {H}, &out->b[g], error);
    if (s != Status::ok) return s;
    if (!m.f32(("w_" + n + "_scale").c_str(), &q.w_scale[g]) || !m.f32(("r_" + n + "_scale").c_str(), &q.r_scale[g]))
      return Status::format;
    w[g] = out->w[g].data();
    r[g] = out->r[g].data();
    b[g] = out->b[g].data();
  }
  out->bias_storage.assign(q8::int8_lstm_bias_words(H), 0);
  const Status s = q8::int8_lstm_prepare(q, I, H, w, r, b, out->bias_storage.data(), out->bias_storage.size(), &out->params);
  if (s != Status::ok) {
    *error = file.path + (prefix.empty() ? "" : " (layer " + prefix.substr(1, prefix.size() - 2) + ")") + ": " +
             last_error_detail();
    return s;
  }
  return Status::ok;
}

// The model-level flags: return_sequences, float input and output.
Status load_flags(const SafeTensors& file, bool* return_sequences, bool* float_input, bool* float_output,
                  std::string* error) {
  Meta m{file, error, ""};
  const std::string* op = m.get("op");
  if (op == nullptr) return Status::format;
  if (*op != "UNIDIRECTIONAL_SEQUENCE_LSTM") {
    *error = file.path + ": metadata 'op' is '" + *op + "', expected 'UNIDIRECTIONAL_SEQUENCE_LSTM'";
    return Status::unsupported;
  }
  if (!m.flag("return_sequences", "1", "0", return_sequences) || !m.flag("graph_input", "float32", "int8", float_input) ||
      !m.flag("graph_output", "float32", "int8", float_output))
    return Status::format;
  return Status::ok;
}

}  // namespace

int int8_layer_count(const SafeTensors& file) {
  const std::string* v = file.meta("layers");
  return v == nullptr ? 1 : std::atoi(v->c_str());
}

Status load_int8_model(const SafeTensors& file, Int8Model* out, std::string* error) {
  if (int8_layer_count(file) != 1) {
    *error = file.path + ": a stack of " + *file.meta("layers") + " int8 LSTM layers, where one layer is expected";
    return Status::unsupported;
  }
  const Status s = load_flags(file, &out->return_sequences, &out->float_input, &out->float_output, error);
  return s != Status::ok ? s : load_layer(file, "", out, error);
}

Status load_int8_stack(const SafeTensors& file, Int8Stack* out, std::string* error) {
  Meta m{file, error, ""};
  std::int32_t L = 1;
  if (file.meta("layers") != nullptr && !m.i32("layers", 2, 64, &L)) return Status::format;
  Status s = load_flags(file, &out->return_sequences, &out->float_input, &out->float_output, error);
  if (s != Status::ok) return s;
  out->layers.clear();
  for (int k = 0; k < L; ++k) {
    out->layers.emplace_back(new Int8Model);
    Int8Model& layer = *out->layers.back();
    s = load_layer(file, L == 1 ? std::string() : "l" + std::to_string(k) + ".", &layer, error);
    if (s != Status::ok) return s;
    layer.return_sequences = k + 1 < L || out->return_sequences;  // a layer inside the stack feeds every step on
    layer.float_input = k == 0 && out->float_input;
    layer.float_output = k + 1 == L && out->float_output;
    if (k > 0) {
      // Layer k reads layer k-1's int8 output as it is: the same width and quantization.
      const Int8Model& prev = *out->layers[k - 1];
      if (layer.input_size != prev.hidden_size || layer.q.input_scale != prev.q.state_scale ||
          layer.q.input_zp != prev.q.state_zp) {
        *error = file.path + ": layer " + std::to_string(k) + "'s input (" + std::to_string(layer.input_size) +
                 " units, scale " + *file.meta("l" + std::to_string(k) + ".input_scale") + ", zero point " +
                 std::to_string(layer.q.input_zp) + ") is not layer " + std::to_string(k - 1) + "'s output (" +
                 std::to_string(prev.hidden_size) + " units, scale " +
                 *file.meta("l" + std::to_string(k - 1) + ".output_state_scale") + ", zero point " +
                 std::to_string(prev.q.state_zp) + ")";
        return Status::unsupported;
      }
    }
  }
  return Status::ok;
}

std::int8_t quantize_input(const Int8Model& m, float x) {
  // LiteRT's QUANTIZE on the CPU (its default XNNPACK delegate takes the op: f32 -> qs8 convert):
  // x times the float reciprocal of the scale, clamped, rounded half to even, plus the zero point.
  const float recip = 1.0f / m.q.input_scale;
  const float lo = static_cast<float>(-128 - m.q.input_zp), hi = static_cast<float>(127 - m.q.input_zp);
  float v = x * recip;
  if (std::isnan(v)) v = 0.0f;
  v = v < lo ? lo : v > hi ? hi : v;
  return static_cast<std::int8_t>(static_cast<long>(std::nearbyint(v)) + m.q.input_zp);
}

void run_int8_model(const Int8Model& m, int batch, int seq_len, const std::int8_t* x, std::int8_t* y,
                    std::int8_t* hn, std::int16_t* cn) {
  const std::size_t H = static_cast<std::size_t>(m.hidden_size), B = static_cast<std::size_t>(batch);
  std::vector<std::int8_t> h(B * H, static_cast<std::int8_t>(m.q.state_zp));
  std::vector<std::int16_t> c(B * H, 0);
  std::vector<std::int8_t> scratch(q8::int8_lstm_scratch_bytes(m.hidden_size));
  if (m.return_sequences) {
    q8::int8_lstm_sequence(m.params, batch, seq_len, x, y, h.data(), c.data(), scratch.data(), scratch.size());
  } else {
    q8::int8_lstm_sequence(m.params, batch, seq_len, x, nullptr, h.data(), c.data(), scratch.data(), scratch.size());
    if (!h.empty()) std::memcpy(y, h.data(), h.size());  // without projection the output state is the last step's output
  }
  if (hn != nullptr && !h.empty()) std::memcpy(hn, h.data(), h.size());
  if (cn != nullptr && !c.empty()) std::memcpy(cn, c.data(), c.size() * sizeof(std::int16_t));
}

void run_int8_stack(const Int8Stack& s, int batch, int seq_len, const std::int8_t* x, std::int8_t* y) {
  const std::size_t B = static_cast<std::size_t>(batch), T = static_cast<std::size_t>(seq_len);
  std::vector<std::int8_t> in, out;
  const std::int8_t* layer_x = x;
  for (std::size_t k = 0; k < s.layers.size(); ++k) {
    const Int8Model& layer = *s.layers[k];
    if (k + 1 == s.layers.size()) {
      run_int8_model(layer, batch, seq_len, layer_x, y);
    } else {
      out.assign(B * T * static_cast<std::size_t>(layer.hidden_size), 0);
      run_int8_model(layer, batch, seq_len, layer_x, out.data());
      in.swap(out);
      layer_x = in.data();
    }
  }
}

}  // namespace io
}  // namespace rnncore

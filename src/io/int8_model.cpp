// Loading and running an integer LSTM model file (src/io/int8_model.hpp, docs/int8.md).
#include "src/io/int8_model.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "src/internal/spec_internal.hpp"

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
  // A comma-separated list of finite numbers (per-channel weight scales).
  bool f32_list(const char* key, std::vector<float>* out) {
    const std::string* list = get(key);
    if (list == nullptr) return false;
    out->clear();
    for (std::size_t at = 0; at <= list->size();) {
      const std::size_t comma = std::min(list->find(',', at), list->size());
      const std::string item = list->substr(at, comma - at);
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !std::isfinite(v)) {
        *error = file.path + ": metadata '" + prefix + key + "' has '" + item + "', expected a comma-separated list of numbers";
        return false;
      }
      out->push_back(static_cast<float>(v));
      at = comma + 1;
    }
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
// A direction of a bidirectional layer (`direction`) may have an output tensor labelled with
// another quantization than its state (the converter gives the concatenation's inputs its own):
// LiteRT copies the state's bytes to the output all the same.
Status load_layer(const SafeTensors& file, const std::string& prefix, Int8Model* out, std::string* error,
                  bool direction = false) {
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
  if (!direction && (out_scale != q.state_scale || out_zp != q.state_zp)) {
    *error = file.path + ": the output's quantization (scale " + *file.meta(prefix + "output_scale") +
             ", zero point " + std::to_string(out_zp) + ") differs from the LSTM's output state (" +
             *file.meta(prefix + "output_state_scale") + ", " + std::to_string(q.state_zp) +
             "): a requantized output is not supported";
    return Status::unsupported;
  }
  out->input_size = I;
  out->hidden_size = H;
  out->output_scale = q.state_scale;
  out->output_zp = q.state_zp;
  const std::int8_t* w[q8::kGates];
  const std::int8_t* r[q8::kGates];
  const std::int32_t* b[q8::kGates];
  const bool per_channel = file.meta(prefix + "w_i_scales") != nullptr;
  for (int g = 0; g < q8::kGates; ++g) {
    const std::string n = kGateNames[g];
    Status s = tensor(file, prefix + "w_" + n, ElemType::i8, {H, I}, &out->w[g], error);
    if (s == Status::ok) s = tensor(file, prefix + "r_" + n, ElemType::i8, {H, H}, &out->r[g], error);
    if (s == Status::ok) s = tensor(file, prefix + "b_" + n, ElemType::i32, {H}, &out->b[g], error);
    if (s != Status::ok) return s;
    if (per_channel) {  // rnncore quantize --per-channel: one scale per unit (row)
      for (int part = 0; part < 2; ++part) {
        const std::string key = (part == 0 ? "w_" : "r_") + n + "_scales";
        std::vector<float>& list = (part == 0 ? out->w_scales : out->r_scales)[g];
        if (!m.f32_list(key.c_str(), &list)) return Status::format;
        if (list.size() != static_cast<std::size_t>(H)) {
          *error = file.path + ": metadata '" + prefix + key + "' has " + std::to_string(list.size()) + " scales for " +
                   std::to_string(H) + " units";
          return Status::format;
        }
        (part == 0 ? q.w_scales : q.r_scales)[g] = list.data();
      }
    } else if (!m.f32(("w_" + n + "_scale").c_str(), &q.w_scale[g]) ||
               !m.f32(("r_" + n + "_scale").c_str(), &q.r_scale[g])) {
      return Status::format;
    }
    w[g] = out->w[g].data();
    r[g] = out->r[g].data();
    b[g] = out->b[g].data();
  }
  out->bias_storage.assign(q8::int8_lstm_storage_words(q, H), 0);
  const Status s = q8::int8_lstm_prepare(q, I, H, w, r, b, out->bias_storage.data(), out->bias_storage.size(), &out->params);
  if (s != Status::ok) {
    *error = file.path + (prefix.empty() ? "" : " (layer " + prefix.substr(1, prefix.size() - 2) + ")") + ": " +
             last_error_detail();
    return s;
  }
  return Status::ok;
}

// A merging bidirectional layer's ADD / MUL (metadata "merge." keys: the operands' quantization as
// the op reads them, and for ave the ADD's output and the constant 0.5), prepared into *out.
Status load_merge(const SafeTensors& file, const std::string& prefix, Int8Model* out, std::string* error) {
  Meta m{file, error, prefix};
  q8::Int8Quant fw, bw, result{out->output_scale, out->output_zp}, sum = result;
  if (!m.f32("merge.fw_scale", &fw.scale) || !m.i32("merge.fw_zp", -128, 127, &fw.zero_point) ||
      !m.f32("merge.bw_scale", &bw.scale) || !m.i32("merge.bw_zp", -128, 127, &bw.zero_point))
    return Status::format;
  out->merge_fw = fw;
  out->merge_bw = bw;
  Status s = Status::ok;
  if (out->merge == Int8Model::Merge::mul) {
    s = q8::int8_mul_prepare(fw, bw, result, &out->merge_mul);
  } else if (out->merge == Int8Model::Merge::sum) {
    s = q8::int8_add_prepare(fw, bw, result, &out->merge_add);
  } else {
    q8::Int8Quant half;
    std::int32_t half_value = 0;
    if (!m.f32("merge.sum_scale", &sum.scale) || !m.i32("merge.sum_zp", -128, 127, &sum.zero_point) ||
        !m.i32("merge.half", -128, 127, &half_value) || !m.f32("merge.half_scale", &half.scale) ||
        !m.i32("merge.half_zp", -128, 127, &half.zero_point))
      return Status::format;
    out->merge_half = static_cast<std::int8_t>(half_value);
    out->merge_sum = sum;
    out->merge_half_quant = half;
    s = q8::int8_add_prepare(fw, bw, sum, &out->merge_add);
    if (s == Status::ok) s = q8::int8_mul_prepare(sum, half, result, &out->merge_mul);
  }
  if (s != Status::ok) *error = file.path + " (layer '" + prefix + "'): " + last_error_detail();
  return s;
}

// A bidirectional layer (`prefix` "l<k>."; metadata bidirectional = concat, sum, mul or ave): the
// forward direction ("l<k>.fw.") into *out, the backward one ("l<k>.bw.") into out->backward, and
// the layer's own I, H (its output width), input and output quantization (the CONCATENATION's or
// the merge's output).
Status load_bidirectional(const SafeTensors& file, const std::string& prefix, Int8Model* out, std::string* error) {
  Meta m{file, error, prefix};
  const std::string* mode = m.get("bidirectional");
  const char* const modes[] = {"concat", "sum", "mul", "ave"};
  int mode_index = -1;
  for (int i = 0; i < 4; ++i)
    if (*mode == modes[i]) mode_index = i;
  if (mode_index < 0) {
    *error = file.path + ": metadata '" + prefix + "bidirectional' is '" + *mode +
             "'; expected concat, sum, mul or ave (Keras merge_mode)";
    return Status::unsupported;
  }
  std::int32_t I = 0, H = 0, in_zp = 0;
  float in_scale = 0.0f;
  if (!m.i32("I", 1, 65536, &I) || !m.i32("H", 1, 131072, &H) || !m.f32("input_scale", &in_scale) ||
      !m.i32("input_zp", -128, 127, &in_zp) || !m.f32("output_scale", &out->output_scale) ||
      !m.i32("output_zp", -128, 127, &out->output_zp))
    return Status::format;
  const float concat_scale = out->output_scale;
  const std::int32_t concat_zp = out->output_zp;
  Status s = load_layer(file, prefix + "fw.", out, error, true);
  if (s != Status::ok) return s;
  out->backward.reset(new Int8Model);
  s = load_layer(file, prefix + "bw.", out->backward.get(), error, true);
  if (s != Status::ok) return s;
  out->output_scale = concat_scale;
  out->output_zp = concat_zp;
  out->merge = static_cast<Int8Model::Merge>(mode_index);
  if (out->merge != Int8Model::Merge::concat && out->hidden_size != out->backward->hidden_size) {
    *error = file.path + ": bidirectional layer '" + prefix + "' merges by " + *mode + " directions of widths " +
             std::to_string(out->hidden_size) + " and " + std::to_string(out->backward->hidden_size);
    return Status::format;
  }
  if (out->merge != Int8Model::Merge::concat && (s = load_merge(file, prefix, out, error)) != Status::ok) return s;
  if (out->input_size != I || out->backward->input_size != I || out->output_size() != H ||
      out->q.input_scale != in_scale || out->q.input_zp != in_zp) {
    *error = file.path + ": bidirectional layer '" + prefix + "': I " + std::to_string(I) + ", H " + std::to_string(H) +
             " and input quantization do not match its directions (I " + std::to_string(out->input_size) + " and " +
             std::to_string(out->backward->input_size) + ", H " + std::to_string(out->hidden_size) + " + " +
             std::to_string(out->backward->hidden_size) + ")";
    return Status::format;
  }
  return Status::ok;
}

// The model-level flags: return_sequences, float input and output.
// token_ids: where not null, set when the input is token ids (graph_input token_ids); null refuses them.
Status load_flags(const SafeTensors& file, bool* return_sequences, bool* float_input, bool* float_output,
                  bool* reverse_input, std::string* error, bool* token_ids = nullptr) {
  Meta m{file, error, ""};
  const std::string* op = m.get("op");
  if (op == nullptr) return Status::format;
  if (*op != "UNIDIRECTIONAL_SEQUENCE_LSTM") {
    *error = file.path + ": metadata 'op' is '" + *op + "', expected 'UNIDIRECTIONAL_SEQUENCE_LSTM'";
    return Status::unsupported;
  }
  const std::string* in = m.get("graph_input");
  if (in == nullptr) return Status::format;
  if (*in == "token_ids") {  // a Keras Embedding first (load_embedding): the LSTMs take int8 rows
    if (token_ids == nullptr) {
      *error = file.path + ": an int8 model with an Embedding (graph_input token_ids), which runs as a stack "
                           "(rnncore run; docs/int8.md)";
      return Status::unsupported;
    }
    *token_ids = true;
    *float_input = false;
  } else if (!m.flag("graph_input", "float32", "int8", float_input)) {
    *error += " or 'token_ids'";
    return Status::format;
  }
  if (!m.flag("return_sequences", "1", "0", return_sequences) || !m.flag("graph_output", "float32", "int8", float_output))
    return Status::format;
  *reverse_input = false;
  if (file.meta("reverse_input") != nullptr && !m.flag("reverse_input", "1", "0", reverse_input)) return Status::format;
  return Status::ok;
}

// The embedding table and its quantization ("embedding." keys; graph_input token_ids).
Status load_embedding(const SafeTensors& file, Int8Stack* out, std::string* error) {
  Meta m{file, error, "embedding."};
  bool on = false;
  std::int32_t V = 0, E = 0;
  if (!Meta{file, error, ""}.flag("embedding", "1", "0", &on)) return Status::format;
  if (!on) {
    *error = file.path + ": metadata 'graph_input' is 'token_ids' but 'embedding' is '0'";
    return Status::format;
  }
  if (!m.i32("V", 1, 1 << 30, &V) || !m.i32("E", 1, 65536, &E) || !m.f32("scale", &out->embed_scale) ||
      !m.i32("zp", -128, 127, &out->embed_zp))
    return Status::format;
  const std::string* ids = m.get("ids_dtype");
  if (ids == nullptr) return Status::format;
  if (*ids != "int32" && *ids != "int64") {
    *error = file.path + ": metadata 'embedding.ids_dtype' is '" + *ids + "', expected 'int32' or 'int64'";
    return Status::format;
  }
  const Status s = tensor(file, "embedding.table", ElemType::i8, {V, E}, &out->table, error);
  if (s != Status::ok) return s;
  out->has_embedding = true;
  out->vocab = V;
  out->embed_dim = E;
  return Status::ok;
}

// Dense layer j ("fc<j>." keys and tensors).
Status load_dense(const SafeTensors& file, int j, Int8Dense* out, std::string* error) {
  const std::string prefix = "fc" + std::to_string(j) + ".";
  Meta m{file, error, prefix};
  std::int32_t in = 0, n = 0;
  q8::Int8DenseQuantization& q = out->q;
  if (!m.i32("in", 1, 65536, &in) || !m.i32("out", 1, 65536, &n) || !m.f32("input_scale", &q.input_scale) ||
      !m.i32("input_zp", -128, 127, &q.input_zp) || !m.f32("output_scale", &q.output_scale) ||
      !m.i32("output_zp", -128, 127, &q.output_zp))
    return Status::format;
  const std::string* act = m.get("activation");
  if (act == nullptr) return Status::format;
  if (*act != "none" && *act != "relu" && *act != "sigmoid" && *act != "tanh") {
    *error = file.path + ": metadata '" + prefix + "activation' is '" + *act + "', expected none, relu, sigmoid or tanh";
    return Status::format;
  }
  q.relu = *act == "relu";
  out->has_table = *act == "sigmoid" || *act == "tanh";
  if (out->has_table) {
    // The FULLY_CONNECTED writes linear_*; the table maps that to the layer's output_*.
    out->table_output_scale = q.output_scale;
    out->table_output_zp = q.output_zp;
    if (!m.f32("linear_scale", &q.output_scale) || !m.i32("linear_zp", -128, 127, &q.output_zp)) return Status::format;
    const q8::TableActivation f = *act == "sigmoid" ? q8::TableActivation::sigmoid : q8::TableActivation::tanh;
    out->table_function = f;
    if (q8::int8_activation_table(f, q.output_scale, q.output_zp, out->table_output_scale, out->table_output_zp,
                                  out->table) != Status::ok) {
      *error = file.path + " (Dense " + std::to_string(j) + "): " + last_error_detail();
      return Status::invalid_size;
    }
  }
  if (!m.f32_list("w_scales", &out->w_scales)) return Status::format;
  if (out->w_scales.size() != 1 && out->w_scales.size() != static_cast<std::size_t>(n)) {
    *error = file.path + ": metadata '" + prefix + "w_scales' has " + std::to_string(out->w_scales.size()) +
             " scales for " + std::to_string(n) + " outputs (1 or one per output)";
    return Status::format;
  }
  Status s = tensor(file, prefix + "w", ElemType::i8, {n, in}, &out->w, error);
  if (s == Status::ok) s = tensor(file, prefix + "b", ElemType::i32, {n}, &out->b, error);
  if (s != Status::ok) return s;
  out->in_size = in;
  out->out_size = n;
  q.w_scales = out->w_scales.data();
  q.w_scale_count = static_cast<int>(out->w_scales.size());
  out->bias_storage.assign(static_cast<std::size_t>(n), 0);
  out->scale_storage.assign(static_cast<std::size_t>(n), 0.0f);
  s = q8::int8_dense_prepare(q, in, n, out->w.data(), out->b.data(), out->bias_storage.data(),
                             out->scale_storage.data(), &out->params);
  if (s != Status::ok) *error = file.path + " (Dense " + std::to_string(j) + "): " + last_error_detail();
  return s;
}

}  // namespace

int int8_layer_count(const SafeTensors& file) {
  const std::string* v = file.meta("layers");
  return v == nullptr ? 1 : std::atoi(v->c_str());
}

// The softmax on the model's output ("softmax." keys), reading what the op before it writes.
Status load_softmax(const SafeTensors& file, Int8Stack* out, std::string* error) {
  out->has_softmax = false;
  if (file.meta("softmax") == nullptr) return Status::ok;
  Meta m{file, error, "softmax."};
  float in_scale = 0.0f, out_scale = 0.0f;
  std::int32_t in_zp = 0, out_zp = 0;
  if (!Meta{file, error, ""}.flag("softmax", "1", "0", &out->has_softmax) || !m.f32("beta", &out->softmax_beta) ||
      !m.f32("input_scale", &in_scale) || !m.i32("input_zp", -128, 127, &in_zp) || !m.f32("output_scale", &out_scale) ||
      !m.i32("output_zp", -128, 127, &out_zp))
    return Status::format;
  if (!out->has_softmax) return Status::ok;
  const float prev_scale = out->dense.empty() ? out->layers.back()->output_scale : out->dense.back()->output_scale();
  const std::int32_t prev_zp = out->dense.empty() ? out->layers.back()->output_zp : out->dense.back()->output_zp();
  if (in_scale != prev_scale || in_zp != prev_zp) {
    *error = file.path + ": the softmax's input (scale " + *file.meta("softmax.input_scale") + ", zero point " +
             std::to_string(in_zp) + ") is not the output of the layer before it (zero point " + std::to_string(prev_zp) + ")";
    return Status::unsupported;
  }
  out->softmax_input_scale = in_scale;
  out->softmax_input_zp = in_zp;
  out->softmax_output_scale = out_scale;
  out->softmax_output_zp = out_zp;
  if (q8::int8_softmax_prepare(in_scale, out->softmax_beta, out_scale, out_zp, &out->softmax) != Status::ok) {
    *error = file.path + " (softmax): " + last_error_detail();
    return Status::invalid_size;
  }
  return Status::ok;
}

Status load_int8_model(const SafeTensors& file, Int8Model* out, std::string* error) {
  if (int8_layer_count(file) != 1) {
    *error = file.path + ": a stack of " + *file.meta("layers") + " int8 LSTM layers, where one layer is expected";
    return Status::unsupported;
  }
  const Status s =
      load_flags(file, &out->return_sequences, &out->float_input, &out->float_output, &out->reverse_input, error);
  return s != Status::ok ? s : load_layer(file, "", out, error);
}

Status load_int8_stack(const SafeTensors& file, Int8Stack* out, std::string* error) {
  Meta m{file, error, ""};
  // A file with a 'layers' key prefixes every layer ("l<k>."; also a single LSTM with Dense layers).
  std::int32_t L = 1, D = 0;
  const bool prefixed = file.meta("layers") != nullptr;
  if (prefixed && !m.i32("layers", 1, 64, &L)) return Status::format;
  if (file.meta("dense") != nullptr && !m.i32("dense", 1, 16, &D)) return Status::format;
  bool token_ids = false;
  Status s = load_flags(file, &out->return_sequences, &out->float_input, &out->float_output, &out->reverse_input, error,
                        &token_ids);
  if (s != Status::ok) return s;
  out->has_embedding = false;
  if (token_ids && (s = load_embedding(file, out, error)) != Status::ok) return s;
  if (!token_ids && file.meta("embedding") != nullptr && *file.meta("embedding") != "0") {
    *error = file.path + ": metadata 'embedding' is set but 'graph_input' is not 'token_ids'";
    return Status::format;
  }
  out->layers.clear();
  for (int k = 0; k < L; ++k) {
    out->layers.emplace_back(new Int8Model);
    Int8Model& layer = *out->layers.back();
    const std::string prefix = prefixed ? "l" + std::to_string(k) + "." : std::string();
    if (prefixed && file.meta(prefix + "bidirectional") != nullptr)
      s = load_bidirectional(file, prefix, &layer, error);
    else
      s = load_layer(file, prefix, &layer, error);
    if (s != Status::ok) return s;
    // A layer inside the stack feeds every step on; the head reads every step or the last.
    layer.return_sequences = k + 1 < L || out->return_sequences;
    if (layer.backward) layer.backward->return_sequences = layer.return_sequences;
    if (layer.backward && k == 0 && out->reverse_input) {
      *error = file.path + ": reverse_input (go_backwards) before a bidirectional layer is not supported";
      return Status::unsupported;
    }
    layer.float_input = k == 0 && out->float_input;
    if (k == 0 && out->has_embedding &&
        (layer.input_size != out->embed_dim || layer.q.input_scale != out->embed_scale ||
         layer.q.input_zp != out->embed_zp)) {
      // The lookup copies rows: the first layer must read them with the table's quantization.
      *error = file.path + ": the first layer's input (" + std::to_string(layer.input_size) + " units, scale " +
               *file.meta(prefixed ? "l0.input_scale" : "input_scale") + ", zero point " +
               std::to_string(layer.q.input_zp) + ") is not the embedding's rows (" + std::to_string(out->embed_dim) +
               " units, scale " + *file.meta("embedding.scale") + ", zero point " + std::to_string(out->embed_zp) + ")";
      return Status::unsupported;
    }
    layer.float_output = k + 1 == L && out->float_output;
    if (k > 0) {
      // Layer k reads layer k-1's int8 output as it is: the same width and quantization.
      const Int8Model& prev = *out->layers[k - 1];
      if (layer.input_size != prev.output_size() || layer.q.input_scale != prev.output_scale ||
          layer.q.input_zp != prev.output_zp) {
        *error = file.path + ": layer " + std::to_string(k) + "'s input (" + std::to_string(layer.input_size) +
                 " units, scale " + *file.meta("l" + std::to_string(k) + ".input_scale") + ", zero point " +
                 std::to_string(layer.q.input_zp) + ") is not layer " + std::to_string(k - 1) + "'s output (" +
                 std::to_string(prev.output_size()) + " units, scale " +
                 *file.meta("l" + std::to_string(k - 1) + ".output_scale") + ", zero point " +
                 std::to_string(prev.output_zp) + ")";
        return Status::unsupported;
      }
    }
  }
  out->dense.clear();
  for (int j = 0; j < D; ++j) {
    out->dense.emplace_back(new Int8Dense);
    s = load_dense(file, j, out->dense.back().get(), error);
    if (s != Status::ok) return s;
    // Dense j reads what the layer before it writes: the same width and quantization.
    const Int8Dense& d = *out->dense.back();
    const int width = j == 0 ? out->layers.back()->output_size() : out->dense[j - 1]->out_size;
    const float scale = j == 0 ? out->layers.back()->output_scale : out->dense[j - 1]->output_scale();
    const std::int32_t zp = j == 0 ? out->layers.back()->output_zp : out->dense[j - 1]->output_zp();
    if (d.in_size != width || d.q.input_scale != scale || d.q.input_zp != zp) {
      *error = file.path + ": Dense " + std::to_string(j) + "'s input (" + std::to_string(d.in_size) +
               " units, zero point " + std::to_string(d.q.input_zp) + ") is not the output of the layer before it (" +
               std::to_string(width) + " units, zero point " + std::to_string(zp) + ")";
      return Status::unsupported;
    }
  }
  return load_softmax(file, out, error);
}

namespace {

QuantParams qp(float scale, std::int32_t zp) {
  QuantParams q;
  q.scale = scale;
  q.zero_point = zp;
  return q;
}

Int8LstmQuant lstm_quant(const Int8Model& m) {
  Int8LstmQuant q;
  for (int g = 0; g < q8::kGates; ++g) {
    q.w_scale[g] = m.q.w_scale[g];
    q.r_scale[g] = m.q.r_scale[g];
  }
  q.per_channel = q8::int8_lstm_per_channel(m.q);
  q.state = qp(m.q.state_scale, m.q.state_zp);
  q.hidden = qp(m.q.hidden_scale, m.q.hidden_zp);
  q.cell_scale = m.q.cell_scale;
  q.cell_clip = m.q.cell_clip;
  return q;
}

// One direction's tensors into the canonical bytes.
void put_direction(const StackSpec& spec, int l, int d, const Int8Model& m, unsigned char* c) {
  for (int g = 0; g < q8::kGates; ++g) {
    std::memcpy(c + canonical_offset(spec, l, d, ParamKind::input_weight, g), m.w[g].data(), m.w[g].size());
    std::memcpy(c + canonical_offset(spec, l, d, ParamKind::recurrent_weight, g), m.r[g].data(), m.r[g].size());
    std::memcpy(c + canonical_offset(spec, l, d, ParamKind::input_bias, g), m.b[g].data(), 4 * m.b[g].size());
    if (!q8::int8_lstm_per_channel(m.q)) continue;
    std::memcpy(c + canonical_offset(spec, l, d, ParamKind::weight_scale, g), m.w_scales[g].data(), 4 * m.w_scales[g].size());
    std::memcpy(c + canonical_offset(spec, l, d, ParamKind::weight_scale, 4 + g), m.r_scales[g].data(),
                4 * m.r_scales[g].size());
  }
}

// One Dense layer of the file as a DenseSpec of the chain (the softmax, if any, is the head's).
DenseSpec dense_spec(const Int8Dense& d, bool softmax) {
  DenseSpec h;
  h.out_features = d.out_size;
  h.activation = d.has_table ? (d.table_function == q8::TableActivation::sigmoid ? Activation::sigmoid : Activation::tanh)
                 : d.q.relu  ? Activation::relu
                 : softmax   ? Activation::softmax
                             : Activation::none;
  h.int8_per_channel = d.w_scales.size() > 1;
  h.int8_w_scale = d.w_scales.size() == 1 ? d.w_scales[0] : 0.0f;
  h.int8_linear = qp(d.q.output_scale, d.q.output_zp);
  if (d.has_table) h.int8_output = qp(d.table_output_scale, d.table_output_zp);
  return h;
}

// Whether the spec's head is one the file does not have: a Dense layer of weights I (1 on the
// diagonal, scale 1, bias 0: its requantization multiplies by input scale · 1 / input scale = 1
// exactly in float, so it copies its input). For a softmax with no Dense layer before it, or
// after one with an activation (a StackSpec head has one), it carries the softmax; for a model
// that outputs its last step with no Dense layer, it picks that step (head.last_step_only: the
// forward direction's step T−1, a reverse one's step 0).
bool identity_head(const Int8Stack& s) {
  if (s.has_softmax) return s.dense.empty() || s.dense.back()->has_table || s.dense.back()->q.relu;
  return s.dense.empty() && !s.return_sequences;
}

// The file's Dense layers and softmax into the spec's chain (pre_head, head).
Status head_spec(const Int8Stack& s, StackSpec* spec, std::string* error) {
  const bool own = identity_head(s);
  const std::size_t n = s.dense.size() + (own ? 1 : 0);  // Dense layers of the chain
  if (n == 0) return Status::ok;
  if (n > static_cast<std::size_t>(kMaxPreHead) + 1) {
    *error = std::to_string(s.dense.size()) + " Dense layers" + (own ? " and a softmax after an activated one" : "") +
             " after the LSTMs (a StackSpec chain has 1.." + std::to_string(kMaxPreHead + 1) + " Dense layers" +
             (own ? ", one of them the softmax's)" : ")");
    return Status::unsupported;
  }
  spec->num_pre_head = static_cast<int>(n) - 1;
  for (std::size_t k = 0; k + 1 < n; ++k) spec->pre_head[k] = dense_spec(*s.dense[k], false);
  DenseSpec& h = spec->head;
  if (own) {
    h.out_features = s.dense.empty() ? s.layers.back()->output_size() : s.dense.back()->out_size;
    h.activation = s.has_softmax ? Activation::softmax : Activation::none;
    h.int8_w_scale = 1.0f;
    h.int8_linear = s.has_softmax ? qp(s.softmax_input_scale, s.softmax_input_zp)  // load_softmax: the layer before's output
                                  : qp(s.layers.back()->output_scale, s.layers.back()->output_zp);
  } else {
    h = dense_spec(*s.dense.back(), s.has_softmax);
  }
  h.last_step_only = !s.return_sequences;
  if (s.has_softmax) {
    h.int8_output = qp(s.softmax_output_scale, s.softmax_output_zp);
    h.int8_softmax_beta = s.softmax_beta;
  }
  return Status::ok;
}

}  // namespace

Status int8_stack_spec(const Int8Stack& s, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error,
                       bool rows_in) {
  *spec = StackSpec();
  if (s.layers.empty() || s.layers.size() > static_cast<std::size_t>(kMaxLayers)) {
    *error = std::to_string(s.layers.size()) + " layers (1.." + std::to_string(kMaxLayers) + ")";
    return Status::unsupported;
  }
  spec->dtype = DType::i8;
  spec->num_layers = static_cast<int>(s.layers.size());
  const Int8Model& first = *s.layers[0];
  spec->input_size = s.has_embedding ? s.embed_dim : first.input_size;
  spec->input_quant = qp(first.q.input_scale, first.q.input_zp);
  spec->float_input = s.float_input && !rows_in;
  spec->float_output = s.float_output && !rows_in;
  spec->reverse_input = s.reverse_input && !rows_in;  // rows_in: the caller reads the steps in the file's order
  if (s.has_embedding && !rows_in) spec->embedding.vocab_size = s.vocab;
  for (int l = 0; l < spec->num_layers; ++l) {
    const Int8Model& m = *s.layers[l];
    LayerSpec& ls = spec->layers[l];
    ls.mode = Mode::lstm;
    ls.hidden_size = m.hidden_size;
    ls.int8[0] = lstm_quant(m);
    if (!m.backward) continue;
    if (m.backward->hidden_size != m.hidden_size) {
      *error = "layer " + std::to_string(l) + " (bidirectional): directions of widths " + std::to_string(m.hidden_size) +
               " and " + std::to_string(m.backward->hidden_size) + " (a StackSpec layer has one hidden_size)";
      return Status::unsupported;
    }
    ls.direction = Direction::bidirectional;
    ls.int8[1] = lstm_quant(*m.backward);
    ls.int8_output = qp(m.output_scale, m.output_zp);
    ls.merge.mode = static_cast<MergeMode>(static_cast<int>(m.merge));
    ls.merge.fw = qp(m.merge_fw.scale, m.merge_fw.zero_point);
    ls.merge.bw = qp(m.merge_bw.scale, m.merge_bw.zero_point);
    ls.merge.sum = qp(m.merge_sum.scale, m.merge_sum.zero_point);
    ls.merge.half = qp(m.merge_half_quant.scale, m.merge_half_quant.zero_point);
    ls.merge.half_value = m.merge_half;
  }
  Status st = head_spec(s, spec, error);
  if (st != Status::ok) return st;
  if ((st = validate(*spec)) != Status::ok) {
    *error = last_error_detail();
    return st;
  }
  canonical->assign(static_cast<std::size_t>(param_count(*spec)), 0);
  unsigned char* c = canonical->data();
  for (int l = 0; l < spec->num_layers; ++l) {
    put_direction(*spec, l, 0, *s.layers[l], c);
    if (s.layers[l]->backward) put_direction(*spec, l, 1, *s.layers[l]->backward, c);
  }
  if (spec->embedding.vocab_size > 0)
    std::memcpy(c + canonical_offset(*spec, 0, 0, ParamKind::embedding, 0), s.table.data(), s.table.size());
  for (std::size_t k = 0; k < s.dense.size(); ++k) {
    const Int8Dense& d = *s.dense[k];
    const int j = static_cast<int>(k);
    std::memcpy(c + canonical_offset(*spec, j, 0, ParamKind::dense_weight, 0), d.w.data(), d.w.size());
    std::memcpy(c + canonical_offset(*spec, j, 0, ParamKind::dense_bias, 0), d.b.data(), 4 * d.b.size());
    std::memcpy(c + canonical_offset(*spec, -1 - j, 0, ParamKind::weight_scale, 0), d.w_scales.data(), 4 * d.w_scales.size());
  }
  if (identity_head(s)) {  // weights I, scale 1 (bias 0)
    const int k = spec->num_pre_head, F = spec->head.out_features;
    unsigned char* w = c + canonical_offset(*spec, k, 0, ParamKind::dense_weight, 0);
    for (int j = 0; j < F; ++j) w[static_cast<std::size_t>(j) * F + j] = 1;
    const float one = 1.0f;
    std::memcpy(c + canonical_offset(*spec, -1 - k, 0, ParamKind::weight_scale, 0), &one, 4);
  }
  return Status::ok;
}

Status load_int8_spec(const SafeTensors& file, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error) {
  Int8Stack stack;
  Status s = load_int8_stack(file, &stack, error);
  if (s != Status::ok) return s;
  std::string why;
  s = int8_stack_spec(stack, spec, canonical, &why);
  if (s != Status::ok) *error = file.path + ": " + why;
  return s;
}

bool int8_identity_dense(const StackSpec& st, const unsigned char* canonical, int k) {
  const DenseSpec& d = detail::dense_at(st, k);
  const std::int64_t F = d.out_features;
  if (d.int8_per_channel || d.int8_w_scale != 1.0f || F != detail::dense_input_size(st, k)) return false;
  const unsigned char* w = canonical + canonical_offset(st, k, 0, ParamKind::dense_weight, 0);
  const unsigned char* b = canonical + canonical_offset(st, k, 0, ParamKind::dense_bias, 0);
  for (std::int64_t i = 0; i < F * F; ++i)
    if (w[i] != (i % (F + 1) == 0 ? 1 : 0)) return false;
  for (std::int64_t i = 0; i < 4 * F; ++i)
    if (b[i] != 0) return false;
  return true;
}

std::size_t embed_ids(const Int8Stack& s, std::size_t n, const std::int64_t* ids, std::int8_t* x) {
  const std::size_t E = static_cast<std::size_t>(s.embed_dim);
  for (std::size_t k = 0; k < n; ++k) {
    if (ids[k] < 0 || ids[k] >= s.vocab) return k;
    std::memcpy(x + k * E, s.table.data() + static_cast<std::size_t>(ids[k]) * E, E);
  }
  return n;
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

std::size_t int8_state_elements(const Int8Stack& s, int batch) {
  std::size_t n = 0;
  for (const auto& layer : s.layers)
    n += static_cast<std::size_t>(batch) *
         static_cast<std::size_t>(layer->hidden_size + (layer->backward ? layer->backward->hidden_size : 0));
  return n;
}
}  // namespace io
}  // namespace rnncore

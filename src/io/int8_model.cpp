// Loading an integer LSTM model file as a StackSpec (src/io/int8_model.hpp, docs/int8.md).
#include "src/io/int8_model.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "src/internal/int8_activations.hpp"
#include "src/internal/int8_dense.hpp"
#include "src/internal/int8_elementwise.hpp"
#include "src/internal/int8_layer.hpp"
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

}  // namespace

bool is_int8_model(const SafeTensors& file) {
  const std::string* f = file.meta("format");
  return f != nullptr && *f == "tflite_int8";
}

namespace {

q8::Int8Quant q8_quant(const QuantParams& q) { return q8::Int8Quant{q.scale, q.zero_point}; }

// Where the file holds an LSTM direction's tensors ("w_i", "l<k>.w_i", "l<k>.fw.w_i", ...) and its
// per-channel scales (metadata lists), which the canonical bytes take once the spec is whole.
struct DirSource {
  std::string prefix;
  std::vector<float> scales[2 * q8::kGates];  // per channel: W's of gates i, f, g, o, then R's
};

// The file as read: the spec (its sizes and quantization) and where the tensors come from.
struct Int8File {
  StackSpec spec;
  DirSource dirs[kMaxLayers][2];
  bool return_sequences = true;
  std::vector<DenseSpec> dense;                  // the file's Dense layers (fc<j>.)
  std::vector<std::vector<float>> dense_scales;  // their W scales
  std::vector<QuantParams> dense_in;             // their input quantization as the file states it
  bool softmax = false;
  float softmax_beta = 1.0f;
  QuantParams softmax_in, softmax_out;
  QuantParams embed;  // the embedding's rows
  int layers = 0;
  // Width and quantization of what the last LSTM layer writes.
  int out_width = 0;
  QuantParams out_quant;
};

// One direction's (or a one-direction layer's) metadata at `prefix` into *q and *src: its sizes
// and quantization. A direction of a bidirectional layer (`direction`) may have an output tensor
// labelled with another quantization than its state (the converter gives the concatenation's
// inputs their own): LiteRT copies the state's bytes to the output all the same.
Status read_lstm(const SafeTensors& file, const std::string& prefix, bool direction, int* I, int* H, QuantParams* in,
                 Int8LstmQuant* q, DirSource* src, std::string* error) {
  Meta m{file, error, prefix};
  std::int32_t i = 0, h = 0, out_zp = 0;
  float out_scale = 0.0f;
  if (!m.i32("I", 1, 65536, &i) || !m.i32("H", 1, 65536, &h) || !m.f32("input_scale", &in->scale) ||
      !m.i32("input_zp", -128, 127, &in->zero_point) || !m.f32("output_state_scale", &q->state.scale) ||
      !m.i32("output_state_zp", -128, 127, &q->state.zero_point) || !m.f32("hidden_scale", &q->hidden.scale) ||
      !m.i32("hidden_zp", -128, 127, &q->hidden.zero_point) || !m.f32("cell_scale", &q->cell_scale) ||
      !m.f32("cell_clip", &q->cell_clip) || !m.f32("output_scale", &out_scale) || !m.i32("output_zp", -128, 127, &out_zp))
    return Status::format;
  float proj_clip = 0.0f;
  if (file.meta(prefix + "proj_clip") != nullptr && !m.f32("proj_clip", &proj_clip)) return Status::format;
  if (!direction && (out_scale != q->state.scale || out_zp != q->state.zero_point)) {
    *error = file.path + ": the output's quantization (scale " + *file.meta(prefix + "output_scale") +
             ", zero point " + std::to_string(out_zp) + ") differs from the LSTM's output state (" +
             *file.meta(prefix + "output_state_scale") + ", " + std::to_string(q->state.zero_point) +
             "): a requantized output is not supported";
    return Status::unsupported;
  }
  *I = i;
  *H = h;
  src->prefix = prefix;
  q->per_channel = file.meta(prefix + "w_i_scales") != nullptr;
  for (int g = 0; g < q8::kGates; ++g) {
    const std::string n = kGateNames[g];
    if (!q->per_channel) {
      if (!m.f32(("w_" + n + "_scale").c_str(), &q->w_scale[g]) || !m.f32(("r_" + n + "_scale").c_str(), &q->r_scale[g]))
        return Status::format;
      continue;
    }
    for (int part = 0; part < 2; ++part) {  // rnncore quantize --per-channel: one scale per unit (row)
      const std::string key = (part == 0 ? "w_" : "r_") + n + "_scales";
      std::vector<float>& list = src->scales[part * q8::kGates + g];
      if (!m.f32_list(key.c_str(), &list)) return Status::format;
      if (list.size() != static_cast<std::size_t>(h)) {
        *error = file.path + ": metadata '" + prefix + key + "' has " + std::to_string(list.size()) + " scales for " +
                 std::to_string(h) + " units";
        return Status::format;
      }
    }
  }
  return Status::ok;
}

// A merging bidirectional layer's ADD / MUL (metadata "merge." keys: the operands' quantization as
// the op reads them, and for ave the ADD's output and the constant 0.5) into ls.merge.
Status read_merge(const SafeTensors& file, const std::string& prefix, LayerSpec* ls, std::string* error) {
  Meta m{file, error, prefix};
  Int8Merge& g = ls->merge;
  if (!m.f32("merge.fw_scale", &g.fw.scale) || !m.i32("merge.fw_zp", -128, 127, &g.fw.zero_point) ||
      !m.f32("merge.bw_scale", &g.bw.scale) || !m.i32("merge.bw_zp", -128, 127, &g.bw.zero_point))
    return Status::format;
  const q8::Int8Quant fw = q8_quant(g.fw), bw = q8_quant(g.bw), result = q8_quant(ls->int8_output);
  rnncore_int8_add add;
  rnncore_int8_mul mul;
  Status s = Status::ok;  // prepared here only to check them (Plan::create prepares the plan's)
  if (g.mode == MergeMode::mul) {
    s = q8::int8_mul_prepare(fw, bw, result, &mul);
  } else if (g.mode == MergeMode::sum) {
    s = q8::int8_add_prepare(fw, bw, result, &add);
  } else {
    g.sum = ls->int8_output;
    if (!m.f32("merge.sum_scale", &g.sum.scale) || !m.i32("merge.sum_zp", -128, 127, &g.sum.zero_point) ||
        !m.i32("merge.half", -128, 127, &g.half_value) || !m.f32("merge.half_scale", &g.half.scale) ||
        !m.i32("merge.half_zp", -128, 127, &g.half.zero_point))
      return Status::format;
    s = q8::int8_add_prepare(fw, bw, q8_quant(g.sum), &add);
    if (s == Status::ok) s = q8::int8_mul_prepare(q8_quant(g.sum), q8_quant(g.half), result, &mul);
  }
  if (s != Status::ok) *error = file.path + " (layer '" + prefix + "'): " + last_error_detail();
  return s;
}

// A bidirectional layer l (`prefix` "l<k>."; metadata bidirectional = concat, sum, mul or ave): the
// forward direction ("l<k>.fw."), the backward one ("l<k>.bw."), and the layer's own I, H (its
// output width), input and output quantization (the CONCATENATION's or the merge's output).
Status read_bidirectional(const SafeTensors& file, const std::string& prefix, Int8File* f, int l, int* I, QuantParams* in,
                          std::string* error) {
  Meta m{file, error, prefix};
  LayerSpec& ls = f->spec.layers[l];
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
  std::int32_t li = 0, lh = 0;
  QuantParams lin;
  if (!m.i32("I", 1, 65536, &li) || !m.i32("H", 1, 131072, &lh) || !m.f32("input_scale", &lin.scale) ||
      !m.i32("input_zp", -128, 127, &lin.zero_point) || !m.f32("output_scale", &ls.int8_output.scale) ||
      !m.i32("output_zp", -128, 127, &ls.int8_output.zero_point))
    return Status::format;
  int dir_i[2] = {0, 0}, dir_h[2] = {0, 0};
  QuantParams dir_in[2];
  for (int d = 0; d < 2; ++d) {
    const Status s = read_lstm(file, prefix + (d == 0 ? "fw." : "bw."), true, &dir_i[d], &dir_h[d], &dir_in[d], &ls.int8[d],
                               &f->dirs[l][d], error);
    if (s != Status::ok) return s;
  }
  ls.direction = Direction::bidirectional;
  ls.merge.mode = static_cast<MergeMode>(mode_index);
  const bool concat = ls.merge.mode == MergeMode::concat;
  if (!concat && dir_h[0] != dir_h[1]) {
    *error = file.path + ": bidirectional layer '" + prefix + "' merges by " + *mode + " directions of widths " +
             std::to_string(dir_h[0]) + " and " + std::to_string(dir_h[1]);
    return Status::format;
  }
  if (!concat) {
    const Status s = read_merge(file, prefix, &ls, error);
    if (s != Status::ok) return s;
  }
  const int width = concat ? dir_h[0] + dir_h[1] : dir_h[0];
  if (dir_i[0] != li || dir_i[1] != li || width != lh || dir_in[0].scale != lin.scale ||
      dir_in[0].zero_point != lin.zero_point) {
    *error = file.path + ": bidirectional layer '" + prefix + "': I " + std::to_string(li) + ", H " + std::to_string(lh) +
             " and input quantization do not match its directions (I " + std::to_string(dir_i[0]) + " and " +
             std::to_string(dir_i[1]) + ", H " + std::to_string(dir_h[0]) + " + " + std::to_string(dir_h[1]) + ")";
    return Status::format;
  }
  if (dir_h[0] != dir_h[1]) {
    *error = file.path + ": layer " + std::to_string(l) + " (bidirectional): directions of widths " +
             std::to_string(dir_h[0]) + " and " + std::to_string(dir_h[1]) + " (a StackSpec layer has one hidden_size)";
    return Status::unsupported;
  }
  ls.hidden_size = dir_h[0];
  *I = li;
  *in = lin;
  f->out_width = width;
  f->out_quant = ls.int8_output;
  return Status::ok;
}

// The model-level flags: return_sequences, float input and output, reverse_input.
// token_ids: set when the input is token ids (graph_input token_ids).
Status read_flags(const SafeTensors& file, Int8File* f, bool* token_ids, std::string* error) {
  Meta m{file, error, ""};
  const std::string* op = m.get("op");
  if (op == nullptr) return Status::format;
  if (*op != "UNIDIRECTIONAL_SEQUENCE_LSTM") {
    *error = file.path + ": metadata 'op' is '" + *op + "', expected 'UNIDIRECTIONAL_SEQUENCE_LSTM'";
    return Status::unsupported;
  }
  const std::string* in = m.get("graph_input");
  if (in == nullptr) return Status::format;
  StackSpec& st = f->spec;
  *token_ids = *in == "token_ids";  // a Keras Embedding first (read_embedding): the LSTMs take int8 rows
  if (!*token_ids && !m.flag("graph_input", "float32", "int8", &st.float_input)) {
    *error += " or 'token_ids'";
    return Status::format;
  }
  if (!m.flag("return_sequences", "1", "0", &f->return_sequences) ||
      !m.flag("graph_output", "float32", "int8", &st.float_output))
    return Status::format;
  if (file.meta("reverse_input") != nullptr && !m.flag("reverse_input", "1", "0", &st.reverse_input)) return Status::format;
  return Status::ok;
}

// The embedding's size and quantization ("embedding." keys; graph_input token_ids).
Status read_embedding(const SafeTensors& file, Int8File* f, std::string* error) {
  Meta m{file, error, "embedding."};
  bool on = false;
  std::int32_t V = 0, E = 0;
  if (!Meta{file, error, ""}.flag("embedding", "1", "0", &on)) return Status::format;
  if (!on) {
    *error = file.path + ": metadata 'graph_input' is 'token_ids' but 'embedding' is '0'";
    return Status::format;
  }
  if (!m.i32("V", 1, 1 << 30, &V) || !m.i32("E", 1, 65536, &E) || !m.f32("scale", &f->embed.scale) ||
      !m.i32("zp", -128, 127, &f->embed.zero_point))
    return Status::format;
  const std::string* ids = m.get("ids_dtype");
  if (ids == nullptr) return Status::format;
  if (*ids != "int32" && *ids != "int64") {
    *error = file.path + ": metadata 'embedding.ids_dtype' is '" + *ids + "', expected 'int32' or 'int64'";
    return Status::format;
  }
  f->spec.embedding.vocab_size = V;
  f->spec.input_size = E;
  return Status::ok;
}

// Dense layer j's metadata ("fc<j>." keys) as a DenseSpec, its input quantization and W's scales.
Status read_dense(const SafeTensors& file, int j, Int8File* f, std::string* error) {
  const std::string prefix = "fc" + std::to_string(j) + ".";
  Meta m{file, error, prefix};
  std::int32_t in = 0, n = 0;
  QuantParams input, output;
  if (!m.i32("in", 1, 65536, &in) || !m.i32("out", 1, 65536, &n) || !m.f32("input_scale", &input.scale) ||
      !m.i32("input_zp", -128, 127, &input.zero_point) || !m.f32("output_scale", &output.scale) ||
      !m.i32("output_zp", -128, 127, &output.zero_point))
    return Status::format;
  const std::string* act = m.get("activation");
  if (act == nullptr) return Status::format;
  DenseSpec d;
  d.out_features = n;
  d.int8_linear = output;
  if (*act == "none" || *act == "relu") {
    d.activation = *act == "relu" ? Activation::relu : Activation::none;
  } else if (*act == "sigmoid" || *act == "tanh") {
    // The FULLY_CONNECTED writes linear_*; the table maps that to the layer's output_*.
    d.activation = *act == "sigmoid" ? Activation::sigmoid : Activation::tanh;
    d.int8_output = output;
    if (!m.f32("linear_scale", &d.int8_linear.scale) || !m.i32("linear_zp", -128, 127, &d.int8_linear.zero_point))
      return Status::format;
    std::int8_t table[256];
    if (q8::int8_activation_table(*act == "sigmoid" ? q8::TableActivation::sigmoid : q8::TableActivation::tanh,
                                  d.int8_linear.scale, d.int8_linear.zero_point, output.scale, output.zero_point,
                                  table) != Status::ok) {
      *error = file.path + " (Dense " + std::to_string(j) + "): " + last_error_detail();
      return Status::invalid_size;
    }
  } else {
    *error = file.path + ": metadata '" + prefix + "activation' is '" + *act + "', expected none, relu, sigmoid or tanh";
    return Status::format;
  }
  std::vector<float> scales;
  if (!m.f32_list("w_scales", &scales)) return Status::format;
  if (scales.size() != 1 && scales.size() != static_cast<std::size_t>(n)) {
    *error = file.path + ": metadata '" + prefix + "w_scales' has " + std::to_string(scales.size()) + " scales for " +
             std::to_string(n) + " outputs (1 or one per output)";
    return Status::format;
  }
  d.int8_per_channel = scales.size() > 1;
  d.int8_w_scale = scales.size() == 1 ? scales[0] : 0.0f;
  // Dense j reads what the layer before it writes: the same width and quantization.
  const int width = j == 0 ? f->out_width : f->dense[j - 1].out_features;
  const DenseSpec* prev = j == 0 ? nullptr : &f->dense[j - 1];
  const QuantParams before = prev == nullptr ? f->out_quant
                             : prev->activation == Activation::sigmoid || prev->activation == Activation::tanh
                                 ? prev->int8_output
                                 : prev->int8_linear;
  if (in != width || input.scale != before.scale || input.zero_point != before.zero_point) {
    *error = file.path + ": Dense " + std::to_string(j) + "'s input (" + std::to_string(in) + " units, zero point " +
             std::to_string(input.zero_point) + ") is not the output of the layer before it (" + std::to_string(width) +
             " units, zero point " + std::to_string(before.zero_point) + ")";
    return Status::unsupported;
  }
  f->dense.push_back(d);
  f->dense_scales.push_back(scales);
  f->dense_in.push_back(input);
  return Status::ok;
}

// The softmax on the model's output ("softmax." keys), reading what the op before it writes.
Status read_softmax(const SafeTensors& file, Int8File* f, std::string* error) {
  f->softmax = false;
  if (file.meta("softmax") == nullptr) return Status::ok;
  Meta m{file, error, "softmax."};
  QuantParams& in = f->softmax_in;
  QuantParams& out = f->softmax_out;
  if (!Meta{file, error, ""}.flag("softmax", "1", "0", &f->softmax) || !m.f32("beta", &f->softmax_beta) ||
      !m.f32("input_scale", &in.scale) || !m.i32("input_zp", -128, 127, &in.zero_point) ||
      !m.f32("output_scale", &out.scale) || !m.i32("output_zp", -128, 127, &out.zero_point))
    return Status::format;
  if (!f->softmax) return Status::ok;
  const DenseSpec* last = f->dense.empty() ? nullptr : &f->dense.back();
  const QuantParams prev = last == nullptr ? f->out_quant
                           : last->activation == Activation::sigmoid || last->activation == Activation::tanh
                               ? last->int8_output
                               : last->int8_linear;
  if (in.scale != prev.scale || in.zero_point != prev.zero_point) {
    *error = file.path + ": the softmax's input (scale " + *file.meta("softmax.input_scale") + ", zero point " +
             std::to_string(in.zero_point) + ") is not the output of the layer before it (zero point " +
             std::to_string(prev.zero_point) + ")";
    return Status::unsupported;
  }
  rnncore_int8_softmax softmax;  // prepared here only to check it (pack_weights prepares the plan's)
  if (q8::int8_softmax_prepare(in.scale, f->softmax_beta, out.scale, out.zero_point, &softmax) != Status::ok) {
    *error = file.path + " (softmax): " + last_error_detail();
    return Status::invalid_size;
  }
  return Status::ok;
}

// Layer l (`prefix` "" in a single-layer file, "l<k>." in a stack) into the spec, checking that
// it reads what the layer before it (or the embedding) writes.
Status read_layer(const SafeTensors& file, const std::string& prefix, int l, Int8File* f, std::string* error) {
  StackSpec& st = f->spec;
  LayerSpec& ls = st.layers[l];
  ls.mode = Mode::lstm;
  int I = 0;
  QuantParams in;
  Status s = Status::ok;
  if (!prefix.empty() && file.meta(prefix + "bidirectional") != nullptr) {
    s = read_bidirectional(file, prefix, f, l, &I, &in, error);
  } else {
    s = read_lstm(file, prefix, false, &I, &ls.hidden_size, &in, &ls.int8[0], &f->dirs[l][0], error);
    f->out_width = ls.hidden_size;
    f->out_quant = ls.int8[0].state;
  }
  if (s != Status::ok) return s;
  if (l == 0 && num_directions(ls) == 2 && st.reverse_input) {
    *error = file.path + ": reverse_input (go_backwards) before a bidirectional layer is not supported";
    return Status::unsupported;
  }
  if (l == 0) {
    if (st.embedding.vocab_size > 0 &&
        (I != st.input_size || in.scale != f->embed.scale || in.zero_point != f->embed.zero_point)) {
      // The lookup copies rows: the first layer must read them with the table's quantization.
      *error = file.path + ": the first layer's input (" + std::to_string(I) + " units, scale " +
               *file.meta(prefix + "input_scale") + ", zero point " + std::to_string(in.zero_point) +
               ") is not the embedding's rows (" + std::to_string(st.input_size) + " units, scale " +
               *file.meta("embedding.scale") + ", zero point " + std::to_string(f->embed.zero_point) + ")";
      return Status::unsupported;
    }
    st.input_size = I;
    st.input_quant = in;
    return Status::ok;
  }
  // Layer l reads layer l-1's int8 output as it is: the same width and quantization.
  const QuantParams prev = detail::int8_layer_output(st.layers[l - 1]);
  const LayerSpec& pl = st.layers[l - 1];
  const int width = pl.hidden_size * (num_directions(pl) == 2 && pl.merge.mode == MergeMode::concat ? 2 : 1);
  if (I != width || in.scale != prev.scale || in.zero_point != prev.zero_point) {
    *error = file.path + ": layer " + std::to_string(l) + "'s input (" + std::to_string(I) + " units, scale " +
             *file.meta("l" + std::to_string(l) + ".input_scale") + ", zero point " + std::to_string(in.zero_point) +
             ") is not layer " + std::to_string(l - 1) + "'s output (" + std::to_string(width) + " units, scale " +
             *file.meta("l" + std::to_string(l - 1) + ".output_scale") + ", zero point " +
             std::to_string(prev.zero_point) + ")";
    return Status::unsupported;
  }
  return Status::ok;
}

// Whether the spec's head is one the file does not have: a Dense layer of weights I (1 on the
// diagonal, scale 1, bias 0: its requantization multiplies by input scale · 1 / input scale = 1
// exactly in float, so it copies its input). For a softmax with no Dense layer before it, or
// after one with an activation (a StackSpec head has one), it carries the softmax; for a model
// that outputs its last step with no Dense layer, it picks that step (head.last_step_only: the
// forward direction's step T−1, a reverse one's step 0).
bool identity_head(const Int8File& f) {
  if (f.softmax) return f.dense.empty() || f.dense.back().activation != Activation::none;
  return f.dense.empty() && !f.return_sequences;
}

// The file's Dense layers and softmax into the spec's chain (pre_head, head).
Status head_spec(Int8File* f, std::string* error) {
  StackSpec& st = f->spec;
  const bool own = identity_head(*f);
  const std::size_t n = f->dense.size() + (own ? 1 : 0);  // Dense layers of the chain
  if (n == 0) return Status::ok;
  if (n > static_cast<std::size_t>(kMaxPreHead) + 1) {
    *error = std::to_string(f->dense.size()) + " Dense layers" + (own ? " and a softmax after an activated one" : "") +
             " after the LSTMs (a StackSpec chain has 1.." + std::to_string(kMaxPreHead + 1) + " Dense layers" +
             (own ? ", one of them the softmax's)" : ")");
    return Status::unsupported;
  }
  st.num_pre_head = static_cast<int>(n) - 1;
  for (std::size_t k = 0; k + 1 < n; ++k) st.pre_head[k] = f->dense[k];
  DenseSpec& h = st.head;
  if (own) {
    h = DenseSpec();
    h.out_features = f->dense.empty() ? f->out_width : f->dense.back().out_features;
    h.activation = f->softmax ? Activation::softmax : Activation::none;
    h.int8_w_scale = 1.0f;
    h.int8_linear = f->softmax ? f->softmax_in : f->out_quant;  // read_softmax: the layer before's output
  } else {
    h = f->dense.back();
    if (f->softmax) h.activation = Activation::softmax;
  }
  h.last_step_only = !f->return_sequences;
  if (f->softmax) {
    h.int8_output = f->softmax_out;
    h.int8_softmax_beta = f->softmax_beta;
  }
  return Status::ok;
}

// The description: flags, embedding, layers, Dense layers, softmax, into f->spec.
Status read_description(const SafeTensors& file, Int8File* f, std::string* error) {
  Meta m{file, error, ""};
  // A file with a 'layers' key prefixes every layer ("l<k>."; also a single LSTM with Dense layers).
  std::int32_t L = 1, D = 0;
  const bool prefixed = file.meta("layers") != nullptr;
  if (prefixed && !m.i32("layers", 1, 64, &L)) return Status::format;
  if (file.meta("dense") != nullptr && !m.i32("dense", 1, 16, &D)) return Status::format;
  bool token_ids = false;
  Status s = read_flags(file, f, &token_ids, error);
  if (s != Status::ok) return s;
  if (token_ids && (s = read_embedding(file, f, error)) != Status::ok) return s;
  if (!token_ids && file.meta("embedding") != nullptr && *file.meta("embedding") != "0") {
    *error = file.path + ": metadata 'embedding' is set but 'graph_input' is not 'token_ids'";
    return Status::format;
  }
  StackSpec& st = f->spec;
  st.dtype = DType::i8;
  if (L > kMaxLayers) {
    *error = file.path + ": " + std::to_string(L) + " layers (1.." + std::to_string(kMaxLayers) + ")";
    return Status::unsupported;
  }
  st.num_layers = L;
  for (int k = 0; k < L; ++k)
    if ((s = read_layer(file, prefixed ? "l" + std::to_string(k) + "." : std::string(), k, f, error)) != Status::ok) return s;
  for (int j = 0; j < D; ++j)
    if ((s = read_dense(file, j, f, error)) != Status::ok) return s;
  if ((s = read_softmax(file, f, error)) != Status::ok) return s;
  std::string why;
  if ((s = head_spec(f, &why)) != Status::ok) {
    *error = file.path + ": " + why;
    return s;
  }
  if ((s = validate(st)) != Status::ok) *error = file.path + ": " + last_error_detail();
  return s;
}

// Copies tensor `name` of type `type` and shape `shape` to `at`.
Status copy_tensor(const SafeTensors& file, const std::string& name, ElemType type, const std::vector<std::int64_t>& shape,
                   unsigned char* at, std::string* error) {
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
  if (e->end > e->begin) std::memcpy(at, file.data(*e), static_cast<std::size_t>(e->end - e->begin));
  return Status::ok;
}

// Direction (l, d)'s tensors and per-channel scales into the canonical bytes, then prepared (to a
// scratch copy: pack_weights prepares the plan's) to check its quantization.
Status put_direction(const SafeTensors& file, const Int8File& f, int l, int d, unsigned char* c, std::string* error) {
  const StackSpec& st = f.spec;
  const DirSource& src = f.dirs[l][d];
  const std::int64_t H = st.layers[l].hidden_size, I = layer_input_size(st, l);
  for (int g = 0; g < q8::kGates; ++g) {
    const std::string n = kGateNames[g];
    Status s = copy_tensor(file, src.prefix + "w_" + n, ElemType::i8, {H, I},
                           c + canonical_offset(st, l, d, ParamKind::input_weight, g), error);
    if (s == Status::ok)
      s = copy_tensor(file, src.prefix + "r_" + n, ElemType::i8, {H, H},
                      c + canonical_offset(st, l, d, ParamKind::recurrent_weight, g), error);
    if (s == Status::ok)
      s = copy_tensor(file, src.prefix + "b_" + n, ElemType::i32, {H}, c + canonical_offset(st, l, d, ParamKind::input_bias, g),
                      error);
    if (s != Status::ok) return s;
    if (!st.layers[l].int8[d].per_channel) continue;
    for (int part = 0; part < 2; ++part)
      std::memcpy(c + canonical_offset(st, l, d, ParamKind::weight_scale, part * q8::kGates + g),
                  src.scales[part * q8::kGates + g].data(), 4 * static_cast<std::size_t>(H));
  }
  const q8::Int8LstmQuantization q = detail::int8_lstm_quantization(st, l, d, c);
  const std::int8_t* w[q8::kGates];
  const std::int8_t* r[q8::kGates];
  const std::int32_t* b[q8::kGates];
  for (int g = 0; g < q8::kGates; ++g) {
    w[g] = reinterpret_cast<const std::int8_t*>(c + canonical_offset(st, l, d, ParamKind::input_weight, g));
    r[g] = reinterpret_cast<const std::int8_t*>(c + canonical_offset(st, l, d, ParamKind::recurrent_weight, g));
    b[g] = reinterpret_cast<const std::int32_t*>(c + canonical_offset(st, l, d, ParamKind::input_bias, g));
  }
  std::vector<std::int32_t> storage(q8::int8_lstm_storage_words(q, static_cast<int>(H)));
  q8::Int8LstmParams params;
  const Status s = q8::int8_lstm_prepare(q, static_cast<int>(I), static_cast<int>(H), w, r, b, storage.data(),
                                         storage.size(), &params);
  if (s != Status::ok) {
    const std::string& p = src.prefix;
    *error = file.path + (p.empty() ? "" : " (layer " + p.substr(1, p.size() - 2) + ")") + ": " + last_error_detail();
  }
  return s;
}

// The file's Dense layer j into the canonical bytes (Dense j of the chain), prepared to check it.
Status put_dense(const SafeTensors& file, const Int8File& f, int j, unsigned char* c, std::string* error) {
  const StackSpec& st = f.spec;
  const std::string prefix = "fc" + std::to_string(j) + ".";
  const DenseSpec& d = f.dense[j];
  const std::int64_t n = d.out_features, in = detail::dense_input_size(st, j);
  unsigned char* w = c + canonical_offset(st, j, 0, ParamKind::dense_weight, 0);
  unsigned char* b = c + canonical_offset(st, j, 0, ParamKind::dense_bias, 0);
  Status s = copy_tensor(file, prefix + "w", ElemType::i8, {n, in}, w, error);
  if (s == Status::ok) s = copy_tensor(file, prefix + "b", ElemType::i32, {n}, b, error);
  if (s != Status::ok) return s;
  const std::vector<float>& scales = f.dense_scales[j];
  std::memcpy(c + canonical_offset(st, -1 - j, 0, ParamKind::weight_scale, 0), scales.data(), 4 * scales.size());
  q8::Int8DenseQuantization q;
  q.input_scale = f.dense_in[j].scale;
  q.input_zp = f.dense_in[j].zero_point;
  q.output_scale = d.int8_linear.scale;
  q.output_zp = d.int8_linear.zero_point;
  q.relu = d.activation == Activation::relu;
  q.w_scales = scales.data();
  q.w_scale_count = static_cast<int>(scales.size());
  std::vector<std::int32_t> bias(static_cast<std::size_t>(n));
  std::vector<float> scale(static_cast<std::size_t>(n));
  q8::Int8DenseParams params;
  s = q8::int8_dense_prepare(q, static_cast<int>(in), static_cast<int>(n), reinterpret_cast<const std::int8_t*>(w),
                             reinterpret_cast<const std::int32_t*>(b), bias.data(), scale.data(), &params);
  if (s != Status::ok) *error = file.path + " (Dense " + std::to_string(j) + "): " + last_error_detail();
  return s;
}

}  // namespace

Status load_int8_spec(const SafeTensors& file, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error) {
  std::unique_ptr<Int8File> f(new Int8File);  // large: off the stack
  Status s = read_description(file, f.get(), error);
  if (s != Status::ok) return s;
  const StackSpec& st = f->spec;
  canonical->assign(static_cast<std::size_t>(param_count(st)), 0);
  unsigned char* c = canonical->data();
  for (int l = 0; l < st.num_layers; ++l)
    for (int d = 0; d < num_directions(st.layers[l]); ++d)
      if ((s = put_direction(file, *f, l, d, c, error)) != Status::ok) return s;
  if (st.embedding.vocab_size > 0 &&
      (s = copy_tensor(file, "embedding.table", ElemType::i8, {st.embedding.vocab_size, st.input_size},
                       c + canonical_offset(st, 0, 0, ParamKind::embedding, 0), error)) != Status::ok)
    return s;
  for (int j = 0; j < static_cast<int>(f->dense.size()); ++j)
    if ((s = put_dense(file, *f, j, c, error)) != Status::ok) return s;
  if (identity_head(*f)) {  // weights I, scale 1 (bias 0)
    const int k = st.num_pre_head, F = st.head.out_features;
    unsigned char* w = c + canonical_offset(st, k, 0, ParamKind::dense_weight, 0);
    for (int j = 0; j < F; ++j) w[static_cast<std::size_t>(j) * F + j] = 1;
    const float one = 1.0f;
    std::memcpy(c + canonical_offset(st, -1 - k, 0, ParamKind::weight_scale, 0), &one, 4);
  }
  *spec = st;
  return Status::ok;
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

Int8Direction int8_direction(const StackSpec& st, const unsigned char* canonical, int l, int d) {
  Int8Direction m;
  m.input_size = layer_input_size(st, l);
  m.hidden_size = st.layers[l].hidden_size;
  m.q = detail::int8_lstm_quantization(st, l, d, canonical);
  for (int g = 0; g < q8::kGates; ++g) {
    m.w[g] = reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::input_weight, g));
    m.r[g] = reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::recurrent_weight, g));
    m.b[g] = reinterpret_cast<const std::int32_t*>(canonical + canonical_offset(st, l, d, ParamKind::input_bias, g));
  }
  return m;
}

}  // namespace io
}  // namespace rnncore

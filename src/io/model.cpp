// Inference of a model's spec from a safetensors file, and import into the canonical layout.
#include "rnncore/io/model.hpp"

#include "rnncore/io/int8_file.hpp"
#include "src/io/int8_model.hpp"

#include "rnncore/io/stack_config.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace rnncore {
namespace io {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  return io::shape_to_string(shape.data(), shape.size());
}

// Context for one file: lookups that report errors naming the file and tensor.
class Inspector {
 public:
  Inspector(const io::SafeTensors& file, std::string* error) : f_(file), error_(error) {}

  const io::TensorEntry* find(const std::string& name) const { return f_.find(name); }

  // Looks up a tensor that must exist with `rank` positive dimensions.
  bool need(const std::string& name, std::size_t rank, const char* expected, const io::TensorEntry** out) {
    const io::TensorEntry* e = f_.find(name);
    if (e == nullptr) return fail("tensor '" + name + "' is missing (expected shape " + expected + ")");
    bool ok = e->shape.size() == rank;
    for (std::int64_t d : e->shape) ok = ok && d > 0;
    if (!ok) return bad_shape(*e, expected);
    *out = e;
    return true;
  }

  bool bad_shape(const io::TensorEntry& e, const std::string& expected) {
    return fail("tensor '" + e.name + "': expected shape " + expected + ", found " + shape_string(e.shape));
  }

  bool fail(const std::string& what) {
    *error_ = f_.path + ": " + what;
    return false;
  }

 private:
  const io::SafeTensors& f_;
  std::string* error_;
};

// Tensor names (after the prefix) that identify a format: the recurrent weight of layer 0.
struct Anchor {
  WeightFormat format;
  const char* names[4];
};
constexpr Anchor kAnchors[] = {
    {WeightFormat::pytorch, {"weight_hh_l0", nullptr, nullptr, nullptr}},
    {WeightFormat::keras, {"recurrent_kernel", "recurrent_kernel_l0", nullptr, nullptr}},
    {WeightFormat::canonical, {"R0_l0", nullptr, nullptr, nullptr}},
    {WeightFormat::onnx, {"R", "R_l0", nullptr, nullptr}},
    {WeightFormat::tensorflow, {"cell_0/kernel", "cell_0/gates/kernel", "cell_0/fw/kernel", "cell_0/fw/gates/kernel"}},
};

// A prefix must end at a separator so that "xR" is not taken for "R" with prefix "x".
bool clean_prefix(const std::string& prefix) {
  return prefix.empty() || prefix.back() == '.' || prefix.back() == '/' || prefix.back() == '_';
}

// Prefixes under which tensors of `format` live.
std::set<std::string> prefixes_for(const io::SafeTensors& f, WeightFormat format) {
  std::set<std::string> out;
  for (const Anchor& a : kAnchors) {
    if (a.format != format) continue;
    for (const io::TensorEntry& e : f.tensors)
      for (const char* n : a.names)
        if (n != nullptr && ends_with(e.name, n)) {
          const std::string p = e.name.substr(0, e.name.size() - std::string(n).size());
          if (clean_prefix(p)) out.insert(p);
        }
  }
  return out;
}

int count_layers(const Inspector& in, const std::string& prefix, const char* pattern) {
  int l = 0;
  char name[128];
  for (;; ++l) {
    std::snprintf(name, sizeof name, pattern, l);
    if (in.find(prefix + name) == nullptr) return l;
  }
}

// Sizes read off the tensors.
struct Inferred {
  int gates = 0, hidden = 0, input = 0, layers = 0, dirs = 1;
  bool skip = false;
  std::string anchor;  // tensor the gate count came from (for messages)
  std::vector<std::int64_t> anchor_shape;
  const io::TensorEntry* keras_bias = nullptr;
  bool tf_reset_after = false;  // a TF GRU with CudnnCompatibleGRUCell's candidate projections
  int proj = 0;                 // LSTM projection size (PyTorch weight_hr_l0, TF projection/kernel, canonical Wproj_l0)
  bool peepholes = false;       // LSTM peepholes (TF w_*_diag, ONNX P, canonical Pi_l0)
};

// TF1 cell tensors (tensorflow format): `cell_{l}[/fw|/bw]/kernel` (LSTM, RNN) or `.../gates/kernel`
// (GRU). `mode_gates`: the gate count of the mode given (0: none), which a TF LSTM/RNN kernel
// [I + H, G·H] needs to tell G from H.
bool infer_tensorflow(Inspector& in, const std::string& p, int mode_gates, Inferred* r) {
  const bool bi = in.find(p + "cell_0/fw/kernel") != nullptr || in.find(p + "cell_0/fw/gates/kernel") != nullptr;
  const std::string d0 = p + (bi ? "cell_0/fw/" : "cell_0/");
  // LSTMCell(use_peepholes=True): w_i_diag, w_f_diag, w_o_diag [H]; LSTMCell(num_proj=P): projection/kernel [H, P].
  for (const char* diag : {"w_i_diag", "w_f_diag", "w_o_diag"}) r->peepholes = r->peepholes || in.find(d0 + diag) != nullptr;
  const io::TensorEntry* proj = nullptr;
  if (in.find(d0 + "projection/kernel") != nullptr && !in.need(d0 + "projection/kernel", 2, "[H, P]", &proj)) return false;
  if ((r->peepholes || proj != nullptr) && mode_gates == 0) mode_gates = 4;  // only an LSTMCell has these
  const io::TensorEntry* k = nullptr;
  const bool gru = in.find(d0 + "gates/kernel") != nullptr;
  if (gru) {
    const char* ks = "[I + H, 2*H]";
    if (!in.need(d0 + "gates/kernel", 2, ks, &k)) return false;
    if (k->shape[1] % 2 != 0 || k->shape[0] <= k->shape[1] / 2) return in.bad_shape(*k, ks);
    r->gates = 3;
    r->hidden = static_cast<int>(k->shape[1] / 2);
    r->tf_reset_after = in.find(d0 + "candidate/input_projection/kernel") != nullptr;
  } else {
    const char* ks = "[I + H, G*H] with G = 4 (LSTM) or 1 (RNN)";
    if (!in.need(d0 + "kernel", 2, ks, &k)) return false;
    if (mode_gates == 0)
      return in.fail("tensor '" + k->name + "' " + shape_string(k->shape) +
                     ": a TF kernel [I + H, G*H] does not tell an LSTM (G = 4) from an Elman RNN (G = 1); pass --mode "
                     "(files written by tools/tf_to_safetensors.py carry it in their metadata), or --config for a stack of "
                     "different cells");
    if (mode_gates == 3) return in.fail("mode gru, but the file has no TF GRU tensor '" + d0 + "gates/kernel'");
    const std::int64_t h_rows = proj != nullptr ? proj->shape[1] : k->shape[1] / mode_gates;  // O: P or H
    if (k->shape[1] % mode_gates != 0 || k->shape[0] <= h_rows) return in.bad_shape(*k, ks);
    r->gates = mode_gates;
    r->hidden = static_cast<int>(k->shape[1] / mode_gates);
  }
  if (proj != nullptr) {
    if (proj->shape[0] != r->hidden || k->shape[0] <= proj->shape[1])
      return in.bad_shape(*proj, "[" + std::to_string(r->hidden) + ", P] with P < the kernel's rows");
    r->proj = static_cast<int>(proj->shape[1]);
  }
  r->input = static_cast<int>(k->shape[0]) - (r->proj > 0 ? r->proj : r->hidden);
  r->anchor = k->name;
  r->anchor_shape = k->shape;
  r->dirs = bi ? 2 : 1;
  r->layers = count_layers(in, p, bi ? (gru ? "cell_%d/fw/gates/kernel" : "cell_%d/fw/kernel")
                                     : (gru ? "cell_%d/gates/kernel" : "cell_%d/kernel"));
  return true;
}

bool infer_sizes(Inspector& in, WeightFormat format, const std::string& p, int mode_gates, Inferred* r) {
  const io::TensorEntry *R = nullptr, *W = nullptr;
  auto gates_from = [&](std::int64_t gh, std::int64_t h, const io::TensorEntry& e, const char* expected) {
    if (h <= 0 || gh % h != 0 || (gh / h != 1 && gh / h != 3 && gh / h != 4)) return in.bad_shape(e, expected);
    r->gates = static_cast<int>(gh / h);
    r->hidden = static_cast<int>(h);
    r->anchor = e.name;
    r->anchor_shape = e.shape;
    return true;
  };
  switch (format) {
    case WeightFormat::pytorch: {
      const char* rs = "[G*H, H] with G = 1, 3 or 4";
      if (!in.need(p + "weight_hh_l0", 2, rs, &R)) return false;
      const io::TensorEntry* hr = nullptr;  // nn.LSTM(proj_size=P): weight_hr_l0 [P, H], weight_hh_l0 [4H, P]
      if (in.find(p + "weight_hr_l0") != nullptr) {
        if (!in.need(p + "weight_hr_l0", 2, "[P, H]", &hr)) return false;
        if (R->shape[1] != hr->shape[0])
          return in.bad_shape(*R, "[4*H, " + std::to_string(hr->shape[0]) + "] (P from weight_hr_l0)");
        r->proj = static_cast<int>(hr->shape[0]);
      }
      if (!gates_from(R->shape[0], hr != nullptr ? hr->shape[1] : R->shape[1], *R, rs)) return false;
      if (!in.need(p + "weight_ih_l0", 2, "[G*H, I]", &W)) return false;
      if (W->shape[0] != R->shape[0]) return in.bad_shape(*W, "[" + std::to_string(R->shape[0]) + ", I]");
      r->input = static_cast<int>(W->shape[1]);
      r->layers = count_layers(in, p, "weight_hh_l%d");
      r->dirs = in.find(p + "weight_hh_l0_reverse") != nullptr ? 2 : 1;
      return true;
    }
    case WeightFormat::onnx: {
      const bool multi = in.find(p + "R") == nullptr;
      const std::string rn = p + (multi ? "R_l0" : "R"), wn = p + (multi ? "W_l0" : "W");
      const char* rs = "[D, G*H, H] with D = 1 or 2 and G = 1, 3 or 4";
      if (!in.need(rn, 3, rs, &R)) return false;
      if (R->shape[0] > 2) return in.bad_shape(*R, rs);
      if (!gates_from(R->shape[1], R->shape[2], *R, rs)) return false;
      if (!in.need(wn, 3, "[D, G*H, I]", &W)) return false;
      if (W->shape[0] != R->shape[0] || W->shape[1] != R->shape[1])
        return in.bad_shape(*W, "[" + std::to_string(R->shape[0]) + ", " + std::to_string(R->shape[1]) + ", I]");
      r->input = static_cast<int>(W->shape[2]);
      r->dirs = static_cast<int>(R->shape[0]);
      r->peepholes = in.find(p + (multi ? "P_l0" : "P")) != nullptr;
      r->layers = multi ? count_layers(in, p, "R_l%d") : 1;
      return true;
    }
    case WeightFormat::keras: {
      const bool multi = in.find(p + "recurrent_kernel") == nullptr;
      const std::string rn = p + (multi ? "recurrent_kernel_l0" : "recurrent_kernel");
      const char* rs = "[H, G*H] with G = 1, 3 or 4";
      if (!in.need(rn, 2, rs, &R)) return false;
      if (!gates_from(R->shape[1], R->shape[0], *R, rs)) return false;
      if (!in.need(p + (multi ? "kernel_l0" : "kernel"), 2, "[I, G*H]", &W)) return false;
      if (W->shape[1] != R->shape[1]) return in.bad_shape(*W, "[I, " + std::to_string(R->shape[1]) + "]");
      r->input = static_cast<int>(W->shape[0]);
      r->layers = multi ? count_layers(in, p, "recurrent_kernel_l%d") : 1;
      r->dirs = multi && in.find(p + "recurrent_kernel_l0_reverse") != nullptr ? 2 : 1;
      r->keras_bias = in.find(p + (multi ? "bias_l0" : "bias"));
      return true;
    }
    case WeightFormat::canonical: {
      if (!in.need(p + "R0_l0", 2, "[H, H]", &R)) return false;
      const io::TensorEntry* wp = nullptr;  // a projection: Wproj_l0 [P, H], R [H, P]
      if (in.find(p + "Wproj_l0") != nullptr && !in.need(p + "Wproj_l0", 2, "[P, H]", &wp)) return false;
      if (wp != nullptr) r->proj = static_cast<int>(wp->shape[0]);
      if (R->shape[1] != (wp != nullptr ? wp->shape[0] : R->shape[0]) || (wp != nullptr && wp->shape[1] != R->shape[0]))
        return in.bad_shape(*R, wp != nullptr ? "[H, P] (P, H from Wproj_l0)" : "[H, H]");
      r->peepholes = in.find(p + "Pi_l0") != nullptr;
      r->gates = count_layers(in, p, "R%d_l0");  // counts gates here
      if (r->gates != 1 && r->gates != 3 && r->gates != 4)
        return in.fail("found " + std::to_string(r->gates) + " recurrent matrices R0_l0..R" +
                       std::to_string(r->gates - 1) + "_l0; a cell has 1, 3 or 4 gates");
      r->hidden = static_cast<int>(R->shape[0]);
      r->anchor = R->name;
      r->anchor_shape = R->shape;
      W = in.find(p + "W0_l0");
      r->skip = W == nullptr;
      if (W != nullptr) {
        if (W->shape.size() != 2 || W->shape[0] != R->shape[0] || W->shape[1] <= 0)
          return in.bad_shape(*W, "[" + std::to_string(R->shape[0]) + ", I]");
        r->input = static_cast<int>(W->shape[1]);
      } else {
        r->input = r->hidden;  // skip input: layer 0 has no W, I == H
      }
      r->layers = count_layers(in, p, "R0_l%d");
      r->dirs = in.find(p + "R0_l0_reverse") != nullptr ? 2 : 1;
      return true;
    }
    case WeightFormat::tensorflow: return infer_tensorflow(in, p, mode_gates, r);
  }
  return false;
}

// TF's LSTMCell adds `forget_bias` to the f gate at run time; import left bR = 0 (the TF bias is one
// folded bias), so bR_f of every LSTM layer and direction takes it: one value for every layer, or one
// per layer (`per_layer`, as the converter writes for a stack whose cells add different ones).
void add_forget_bias(const StackSpec& st, const std::vector<double>& per_layer, std::vector<unsigned char>* canonical) {
  for (int l = 0; l < st.num_layers; ++l) {
    if (st.layers[l].mode != Mode::lstm) continue;
    const double forget_bias = per_layer.size() == 1 ? per_layer[0] : per_layer[l];
    for (int d = 0; d < num_directions(st.layers[l]); ++d) {
      const std::int64_t at = canonical_offset(st, l, d, ParamKind::recurrent_bias, 1);
      for (int u = 0; u < st.layers[l].hidden_size; ++u) {
        if (st.dtype == DType::f64)
          reinterpret_cast<double*>(canonical->data())[at + u] += forget_bias;
        else
          reinterpret_cast<float*>(canonical->data())[at + u] += static_cast<float>(forget_bias);
      }
    }
  }
}

// Names (with shapes) of the file's tensors that import did not read.
// Names of the recurrent layers' tensors in a format.
std::set<std::string> recurrent_tensor_names(const StackSpec& stack, WeightFormat format, const std::string& prefix) {
  std::set<std::string> used;
  const int n = format_tensor_count(stack, format);
  for (int i = 0; i < n; ++i) {
    TensorInfo t;
    if (format_tensor_info(stack, format, i, prefix.c_str(), &t) == Status::ok) used.insert(t.name);
  }
  return used;
}

// The file's tensors that the model does not run: neither its layers' nor its head's or embedding's.
std::vector<std::string> unused_tensors(const io::SafeTensors& f, const StackSpec& stack, WeightFormat format,
                                        const std::string& prefix, const std::vector<std::string>& ends) {
  const std::set<std::string> used = recurrent_tensor_names(stack, format, prefix);
  const std::set<std::string> run(ends.begin(), ends.end());  // "name [dims]"
  std::vector<std::string> out;
  for (const io::TensorEntry& e : f.tensors) {
    const std::string entry = e.name + " " + shape_string(e.shape);
    if (used.count(e.name) == 0 && run.count(entry) == 0) out.push_back(entry);
  }
  return out;
}

}  // namespace

bool parse_mode(const std::string& s, Mode* out) {
  const std::string l = lower(s);
  for (Mode m : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    if (l == to_string(m)) {
      *out = m;
      return true;
    }
  return false;
}

bool parse_gru_variant(const std::string& s, GruVariant* out) {
  const std::string l = lower(s);
  if (l == "reset-after" || l == "reset_after") *out = GruVariant::reset_after;
  else if (l == "reset-before" || l == "reset_before") *out = GruVariant::reset_before;
  else return false;
  return true;
}

bool parse_format(const std::string& s, WeightFormat* out) {
  for (WeightFormat f : {WeightFormat::canonical, WeightFormat::pytorch, WeightFormat::onnx, WeightFormat::keras,
                         WeightFormat::tensorflow})
    if (lower(s) == to_string(f)) {
      *out = f;
      return true;
    }
  return false;
}

bool parse_input_mode(const std::string& s, InputMode* out) {
  const std::string l = lower(s);
  if (l == "linear" || l == "linear_input") *out = InputMode::linear;
  else if (l == "skip" || l == "skip_input") *out = InputMode::skip;
  else if (l == "auto" || l == "auto_select") *out = InputMode::auto_select;
  else return false;
  return true;
}

bool float_dtype(io::ElemType type, DType* out) {
  switch (type) {
    case io::ElemType::f32: *out = DType::f32; return true;
    case io::ElemType::f64: *out = DType::f64; return true;
    case io::ElemType::f16: *out = DType::f16; return true;
    case io::ElemType::bf16: *out = DType::bf16; return true;
    default: return false;
  }
}

bool uniform_states(const StackSpec& st) {
  for (int l = 1; l < st.num_layers; ++l)
    if (st.layers[l].hidden_size != st.layers[0].hidden_size || st.layers[l].direction != st.layers[0].direction ||
        st.layers[l].proj_size != st.layers[0].proj_size)
      return false;
  return true;
}

namespace {

// TF LSTMCell's cell_clip and proj_clip (not weights: tools/tf_to_safetensors.py writes them as metadata):
// one number for every layer, or a comma-separated list of one per layer (0: none), as the converter
// writes for a stack whose layers clip differently.
struct FileClips {
  std::vector<double> values[2];  // cell_clip, proj_clip: none, one value (every layer) or one per layer
  double at(int key, int layer) const {
    const std::vector<double>& v = values[key];
    return v.empty() ? 0.0 : v.size() == 1 ? v[0] : layer < static_cast<int>(v.size()) ? v[layer] : 0.0;
  }
};

bool read_clips(const io::SafeTensors& file, FileClips* clips, std::string* error) {
  const char* keys[2] = {"cell_clip", "proj_clip"};
  for (int k = 0; k < 2; ++k) {
    const std::string* v = file.meta(keys[k]);
    if (v == nullptr || v->empty()) continue;
    const char* at = v->c_str();
    for (;;) {
      char* end = nullptr;
      const double value = std::strtod(at, &end);
      if (end == at || (*end != '\0' && *end != ',') || !std::isfinite(value) || value < 0) {
        *error = file.path + ": metadata " + keys[k] + " '" + *v +
                 "' is not a finite number >= 0 (or a comma-separated list of one per layer)";
        return false;
      }
      clips->values[k].push_back(value);
      if (*end == '\0') break;
      at = end + 1;
    }
  }
  return true;
}

// The LSTM extensions whose tensors the file holds for layer l: the projection size and the peepholes
// (TF cell_l[/fw]/projection/kernel [H, P], w_*_diag; PyTorch weight_hr_l{l} [P, H]; canonical
// Wproj_l{l} [P, H], P*_l{l}; ONNX P_l{l} (or P for one layer)).
void file_layer_extensions(const Inspector& in, WeightFormat format, const std::string& p, int l, int* proj,
                           bool* peepholes) {
  const std::string n = std::to_string(l);
  const io::TensorEntry* e = nullptr;
  *proj = 0;
  *peepholes = false;
  switch (format) {
    case WeightFormat::tensorflow:
      for (const char* d : {"/", "/fw/"}) {
        const std::string cell = p + "cell_" + n + d;
        if (e == nullptr && (e = in.find(cell + "projection/kernel")) != nullptr && e->shape.size() == 2)
          *proj = static_cast<int>(e->shape[1]);
        for (const char* diag : {"w_i_diag", "w_f_diag", "w_o_diag"})  // any: import names a missing one
          *peepholes = *peepholes || in.find(cell + diag) != nullptr;
      }
      break;
    case WeightFormat::pytorch:
      if ((e = in.find(p + "weight_hr_l" + n)) != nullptr && e->shape.size() == 2) *proj = static_cast<int>(e->shape[0]);
      break;
    case WeightFormat::canonical:
      if ((e = in.find(p + "Wproj_l" + n)) != nullptr && e->shape.size() == 2) *proj = static_cast<int>(e->shape[0]);
      for (const char* diag : {"Pi_l", "Pf_l", "Po_l"}) *peepholes = *peepholes || in.find(p + diag + n) != nullptr;
      break;
    case WeightFormat::onnx:
      *peepholes = in.find(p + "P_l" + n) != nullptr || (l == 0 && in.find(p + "P") != nullptr);
      break;
    case WeightFormat::keras: break;
  }
}

// Puts the file's LSTM extensions into the stack's LSTM layers. From a --config (`keep_given`), a layer
// keeps what the configuration says and takes the file's projection, peepholes and clips where it says
// nothing (0 / false); else every layer takes exactly what the file holds for it.
bool apply_file_extensions(const Inspector& in, WeightFormat format, const std::string& p, const FileClips& clips,
                           bool keep_given, StackSpec* st, std::string* error, const std::string& path) {
  for (int k = 0; k < 2; ++k)
    if (clips.values[k].size() > 1 && static_cast<int>(clips.values[k].size()) != st->num_layers) {
      *error = path + ": metadata " + (k == 0 ? "cell_clip" : "proj_clip") + " lists " +
               std::to_string(clips.values[k].size()) + " values for a model of " + std::to_string(st->num_layers) +
               " layer(s)";
      return false;
    }
  for (int l = 0; l < st->num_layers; ++l) {
    LayerSpec& ls = st->layers[l];
    int proj = 0;
    bool peep = false;
    file_layer_extensions(in, format, p, l, &proj, &peep);
    const double cell_clip = clips.at(0, l), proj_clip = clips.at(1, l);
    const bool listed = clips.values[0].size() > 1 || clips.values[1].size() > 1;
    if (ls.mode != Mode::lstm) {
      // One value is every LSTM layer's (a configuration may mix cells); a list names each layer.
      if ((cell_clip > 0 || proj_clip > 0) && (listed || !keep_given)) {
        *error = path + ": metadata gives layer " + std::to_string(l) + " (" + to_string(ls.mode) +
                 ") a clip; only LSTM layers clip";
        return false;
      }
      continue;
    }
    if (!keep_given || ls.proj_size == 0) ls.proj_size = proj;
    if (!keep_given || !ls.peepholes) ls.peepholes = peep;
    if (!keep_given || ls.cell_clip == 0) ls.cell_clip = cell_clip;
    if ((!keep_given || ls.proj_clip == 0) && (ls.proj_size > 0 || listed || !keep_given)) ls.proj_clip = proj_clip;
  }
  return true;
}

// The forget bias (flag, else metadata 'forget_bias': one value, or a comma-separated list of one per
// layer) of TF LSTM cells, added after import.
Status apply_forget_bias(const io::SafeTensors& file, const ModelHints& hints, LoadedModel* out, std::string* error) {
  std::string fb = hints.forget_bias;
  if (fb.empty() && file.meta("forget_bias") != nullptr) fb = *file.meta("forget_bias");
  if (fb.empty()) return Status::ok;
  if (out->format != WeightFormat::tensorflow) {
    *error = file.path + ": a forget bias belongs to TF LSTM cells (format tensorflow), not to the " +
             to_string(out->format) + " format";
    return Status::invalid_enum;
  }
  std::vector<double> values;
  for (std::size_t at = 0;;) {
    const std::size_t comma = fb.find(',', at);
    const std::string item = fb.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || !std::isfinite(value)) {
      *error = file.path + ": forget bias '" + fb + "' is not a finite number (or a comma-separated list of one per layer)";
      return Status::invalid_enum;
    }
    values.push_back(value);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (values.size() > 1 && static_cast<int>(values.size()) != out->stack.num_layers) {
    *error = file.path + ": forget bias '" + fb + "' lists " + std::to_string(values.size()) +
             " values for a model of " + std::to_string(out->stack.num_layers) + " layer(s)";
    return Status::invalid_enum;
  }
  add_forget_bias(out->stack, values, &out->canonical);
  return Status::ok;
}

// The format (flag, metadata, or the anchor tensors present) and the prefix of the recurrent weights.
Status find_format_and_prefix(const io::SafeTensors& file, const ModelHints& hints, Inspector& in, LoadedModel* out) {
  auto fail = [&](Status s, const std::string& what) {
    in.fail(what);
    return s;
  };
  // Format: flag, metadata, or the anchor tensors present.
  std::string fmt = hints.format;
  if (fmt.empty() && file.meta("format") != nullptr) fmt = *file.meta("format");
  if (!fmt.empty()) {
    if (fmt == "tflite_int8")
      return fail(Status::unsupported,
                  "an int8 LSTM model (format tflite_int8, from tools/tflite_to_safetensors.py) runs with "
                  "'rnncore run --weights M --input X --output Y' only; this command takes float models (docs/int8.md)");
    if (!parse_format(fmt, &out->format))
      return fail(Status::invalid_enum,
                  "unknown weight format '" + fmt + "' (pytorch, onnx, keras, tensorflow or canonical)");
  } else {
    bool found = false;
    for (const Anchor& a : kAnchors)
      if (!found && !prefixes_for(file, a.format).empty()) {
        out->format = a.format;
        found = true;
      }
    if (!found)
      return fail(Status::tensor_missing,
                  "no recurrent weights found: expected a tensor named like 'weight_hh_l0' (pytorch), 'R' (onnx), "
                  "'recurrent_kernel' (keras), 'cell_0/kernel' (tensorflow) or 'R0_l0' (canonical)");
  }

  // Prefix: flag, or the one prefix under which the format's anchor appears.
  if (hints.prefix_given) {
    out->prefix = hints.prefix;
    const std::set<std::string> prefixes = prefixes_for(file, out->format);
    if (prefixes.count(out->prefix) == 0 && !prefixes.empty()) {
      std::string list, hint;
      for (const std::string& p : prefixes) {
        list += (list.empty() ? "'" : ", '") + p + "'";
        if (p.size() == out->prefix.size() + 1 && p.compare(0, out->prefix.size(), out->prefix) == 0)
          hint = "; did you mean --prefix " + p + " (a prefix ends with its separator)?";
      }
      return fail(Status::tensor_missing, std::string("no ") + to_string(out->format) + " recurrent weights under prefix '" +
                                              out->prefix + "'; the file has them under " + list + hint);
    }
  } else {
    const std::set<std::string> prefixes = prefixes_for(file, out->format);
    if (prefixes.empty()) {
      std::string names;
      for (const Anchor& a : kAnchors)
        if (a.format == out->format)
          for (const char* n : a.names)
            if (n != nullptr) names += (names.empty() ? "'" : " or '") + std::string(n) + "'";
      return fail(Status::tensor_missing, std::string("no ") + to_string(out->format) +
                                              " recurrent weights found (expected a tensor named " + names + ")");
    }
    if (prefixes.size() > 1) {
      std::string list;
      for (const std::string& p : prefixes) list += (list.empty() ? "'" : ", '") + p + "'";
      return fail(Status::tensor_unexpected, "several recurrent models in the file (prefixes " + list + "); pass --prefix");
    }
    out->prefix = *prefixes.begin();
  }
  return Status::ok;
}

// The cell of a file read without a configuration: the mode (flag, metadata, else the gate count;
// an Elman RNN needs to be told its activation) and a GRU's variant.
Status infer_cell(const io::SafeTensors& file, const ModelHints& hints, const std::string& mode, const Inferred& inf,
                  Inspector& in, LoadedModel* out) {
  auto fail = [&](Status s, const std::string& what) {
    in.fail(what);
    return s;
  };
  RnnSpec& spec = out->spec;
  if (!mode.empty()) {
    if (!parse_mode(mode, &spec.mode))
      return fail(Status::invalid_enum, "unknown mode '" + mode + "' (lstm, gru, rnn_tanh or rnn_relu)");
    if (num_gates(spec.mode) != inf.gates)
      return fail(Status::tensor_shape, std::string("mode ") + to_string(spec.mode) + " has " +
                                            std::to_string(num_gates(spec.mode)) + " gates but tensor '" + inf.anchor +
                                            "' " + shape_string(inf.anchor_shape) + " holds " +
                                            std::to_string(inf.gates) + " (hidden size " + std::to_string(inf.hidden) + ")");
  } else if (inf.gates == 4) {
    spec.mode = Mode::lstm;
  } else if (inf.gates == 3) {
    spec.mode = Mode::gru;
  } else {
    return fail(Status::invalid_enum, "tensor '" + inf.anchor + "' " + shape_string(inf.anchor_shape) +
                                          " has one gate: an Elman RNN; pass --mode rnn_tanh or --mode rnn_relu");
  }

  // GRU variant: flag, metadata, Keras bias shape, else the format's own default.
  if (spec.mode == Mode::gru) {
    std::string v = hints.gru;
    if (v.empty() && file.meta("gru") != nullptr) v = *file.meta("gru");
    if (v.empty() && file.meta("linear_before_reset") != nullptr)
      v = *file.meta("linear_before_reset") == "0" ? "reset-before" : "reset-after";
    if (v.empty() && out->format == WeightFormat::tensorflow) v = inf.tf_reset_after ? "reset-after" : "reset-before";
    if (v.empty() && out->format == WeightFormat::keras && inf.keras_bias != nullptr)
      v = inf.keras_bias->shape.size() == 2 ? "reset-after" : "reset-before";
    if (v.empty()) {
      v = out->format == WeightFormat::onnx ? "reset-before" : "reset-after";
      // PyTorch has only the reset-after GRU: nothing was chosen, so nothing to note.
      const char* why = out->format == WeightFormat::onnx    ? " (ONNX's default linear_before_reset=0)"
                        : out->format == WeightFormat::keras ? " (Keras' default reset_after=True; the file has no bias to tell)"
                                                             : " (cuDNN's)";
      if (out->format != WeightFormat::pytorch)
        out->notes.push_back("GRU variant not given; using " + v + why + "; pass --gru to choose");
    }
    if (!parse_gru_variant(v, &spec.gru_variant))
      return fail(Status::invalid_enum, "unknown GRU variant '" + v + "' (reset-after or reset-before)");
  }
  return Status::ok;
}

// Imports every tensor of the file into out->canonical; integer tensors are passed with an invalid
// dtype so that a needed one is reported.
Status import_file(const io::SafeTensors& file, Inspector& in, LoadedModel* out) {
  auto fail = [&](Status s, const std::string& what) {
    in.fail(what);
    return s;
  };
  std::vector<TensorView> views(file.tensors.size());
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const io::TensorEntry& e = file.tensors[i];
    TensorView& v = views[i];
    v.name = e.name.c_str();
    if (!float_dtype(e.type, &v.dtype)) v.dtype = static_cast<DType>(-1);
    // Parameters have rank ≤ 3; a deeper tensor keeps its first four dims and fails the shape check if needed.
    v.shape.ndim = static_cast<std::int32_t>(e.shape.size() < 4 ? e.shape.size() : 4);
    for (int d = 0; d < v.shape.ndim; ++d) v.shape.dims[d] = e.shape[d];
    v.data = file.data(e);
  }
  out->canonical.assign(static_cast<std::size_t>(param_count(out->stack)) * dtype_size(out->stack.dtype), 0);
  const Status s =
      import_weights(out->stack, out->format, views.data(), views.size(), out->prefix.c_str(), out->canonical.data());
  if (s != Status::ok) return fail(s, last_error_detail());
  return Status::ok;
}

// The start of the note saying that a head runs (drop_ends takes it back).
constexpr const char* kLinearNote = "the Linear head '";
constexpr const char* kDenseNote = "the Dense head '";

// A Dense head or an Embedding among the tensors the recurrent layers do not use.
struct EndTensor {
  const io::TensorEntry* weight = nullptr;
  const io::TensorEntry* bias = nullptr;
};

bool parse_activation(const std::string& s, Activation* out) {
  for (Activation a : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh, Activation::softmax})
    if (lower(s) == to_string(a)) {
      *out = a;
      return true;
    }
  if (lower(s) == "linear") *out = Activation::none;  // Keras' name for none
  return lower(s) == "linear";
}

// The file's head and embedding candidates of a PyTorch (Linear `X.weight` [out, in] and `X.bias`;
// Embedding `X.weight` [vocab, I], X naming "embed") or Keras file (Dense `X kernel` [in, out] and
// `X bias`; Embedding `X embeddings` [vocab, I]).
void find_ends(const io::SafeTensors& file, const LoadedModel& m, std::vector<EndTensor>* heads,
               std::vector<EndTensor>* embeds) {
  const bool keras = m.format == WeightFormat::keras;
  const std::set<std::string> used = recurrent_tensor_names(m.stack, m.format, m.prefix);
  const std::int64_t in_w = stack_output_size(m.stack), I = m.stack.input_size;
  const std::string w_suffix = keras ? "kernel" : ".weight", b_suffix = keras ? "bias" : ".bias";
  for (const io::TensorEntry& e : file.tensors) {
    DType type;
    if (used.count(e.name) != 0 || e.shape.size() != 2 || !float_dtype(e.type, &type)) continue;
    const bool embed_name = lower(e.name).find("embed") != std::string::npos;
    if (embed_name && e.shape[1] == I && (ends_with(e.name, keras ? "embeddings" : ".weight"))) {
      embeds->push_back({&e, nullptr});
    } else if (!embed_name && ends_with(e.name, w_suffix) && !ends_with(e.name, "recurrent_kernel") &&
               e.shape[keras ? 0 : 1] == in_w) {
      const std::string base = e.name.substr(0, e.name.size() - w_suffix.size());
      heads->push_back({&e, file.find(base + b_suffix)});
    }
  }
}

// Copies a tensor's elements (converted to the stack's dtype) into the canonical buffer at `offset`,
// transposing a 2-D tensor when asked (Keras kernels are [in, out]).
bool copy_end(const io::SafeTensors& file, const io::TensorEntry& e, bool transpose, std::int64_t offset, LoadedModel* out) {
  io::Array a;
  std::vector<double> v;
  if (file.array(e.name, &a) != RNNCORE_OK || io::to_f64(a, &v) != RNNCORE_OK) return false;
  const std::int64_t rows = e.shape[0], cols = e.shape.size() == 2 ? e.shape[1] : 1;
  const bool f64 = out->stack.dtype == DType::f64;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double x = v[static_cast<std::size_t>(r * cols + c)];
      const std::int64_t i = offset + (transpose ? c * rows + r : r * cols + c);
      if (f64) reinterpret_cast<double*>(out->canonical.data())[i] = x;
      else reinterpret_cast<float*>(out->canonical.data())[i] = static_cast<float>(x);
    }
  return true;
}

// A PyTorch Linear / Keras Dense head after the recurrent layers and an Embedding before them, when
// the file holds one of each: the stack then runs them. Their activation and whether the head maps
// the last step only come from the hints or metadata ('head_activation', 'head_last_step').
Status attach_ends(const io::SafeTensors& file, const ModelHints& hints, Inspector& in, LoadedModel* out) {
  if (out->format != WeightFormat::pytorch && out->format != WeightFormat::keras) return Status::ok;
  const bool keras = out->format == WeightFormat::keras;
  std::vector<EndTensor> heads, embeds;
  find_ends(file, *out, &heads, &embeds);
  StackSpec& st = out->stack;
  auto names = [](const std::vector<EndTensor>& list) {
    std::string s;
    for (const EndTensor& t : list) s += (s.empty() ? "'" : ", '") + t.weight->name + "'";
    return s;
  };
  if (heads.size() > 1)
    out->notes.push_back("several Dense/Linear heads fit the last layer (" + names(heads) +
                         "); rnncore runs one head, so none of them runs");
  if (embeds.size() > 1)
    out->notes.push_back("several embeddings fit layer 0 (" + names(embeds) + "); none of them runs");
  if (heads.size() == 1) {
    const io::TensorEntry& w = *heads[0].weight;
    const std::int64_t features = w.shape[keras ? 1 : 0];
    if (heads[0].bias != nullptr && !(heads[0].bias->shape.size() == 1 && heads[0].bias->shape[0] == features))
      return (in.bad_shape(*heads[0].bias, "[" + std::to_string(features) + "] (the bias of head '" + w.name + "')"),
              Status::tensor_shape);
    std::string act = hints.head_activation;
    if (act.empty() && file.meta("head_activation") != nullptr) act = *file.meta("head_activation");
    std::string last = hints.head_last_step;
    if (last.empty() && file.meta("head_last_step") != nullptr) last = *file.meta("head_last_step");
    st.head.out_features = static_cast<std::int32_t>(features);
    if (!act.empty() && !parse_activation(act, &st.head.activation))
      return (in.fail("unknown head activation '" + act + "' (none, relu, sigmoid, tanh or softmax)"), Status::invalid_enum);
    if (!last.empty() && last != "0" && last != "1" && last != "true" && last != "false")
      return (in.fail("head_last_step '" + last + "' is not 0, 1, true or false"), Status::invalid_enum);
    st.head.last_step_only = last == "1" || last == "true";
    out->notes.push_back(std::string(keras ? kDenseNote : kLinearNote) + w.name + "' " +
                         shape_string(w.shape) + " runs after the last layer" +
                         (act.empty() ? " with no activation (the weights cannot tell; metadata 'head_activation' sets one)"
                                      : std::string(" with activation ") + to_string(st.head.activation)) +
                         (st.head.last_step_only ? ", on each row's last step" : ", on every step"));
  }
  if (embeds.size() == 1) st.embedding.vocab_size = static_cast<std::int32_t>(embeds[0].weight->shape[0]);
  if (validate(st) != Status::ok) return (in.fail(last_error_detail()), validate(st));
  out->canonical.resize(static_cast<std::size_t>(param_count(st)) * dtype_size(st.dtype), 0);
  if (embeds.size() == 1) {
    if (!copy_end(file, *embeds[0].weight, false, canonical_offset(st, 0, 0, ParamKind::embedding, 0), out))
      return (in.fail(last_error_detail()), Status::tensor_dtype);
    out->ends.push_back(embeds[0].weight->name + " " + shape_string(embeds[0].weight->shape));
  }
  if (heads.size() == 1) {
    if (!copy_end(file, *heads[0].weight, keras, canonical_offset(st, 0, 0, ParamKind::dense_weight, 0), out) ||
        (heads[0].bias != nullptr &&
         !copy_end(file, *heads[0].bias, false, canonical_offset(st, 0, 0, ParamKind::dense_bias, 0), out)))
      return (in.fail(last_error_detail()), Status::tensor_dtype);
    out->ends.push_back(heads[0].weight->name + " " + shape_string(heads[0].weight->shape));
    if (heads[0].bias != nullptr) out->ends.push_back(heads[0].bias->name + " " + shape_string(heads[0].bias->shape));
  }
  return Status::ok;
}

}  // namespace

namespace {

// An integer LSTM model file (format tflite_int8): the stack as a StackSpec of dtype i8 and the
// file's tensors as its canonical bytes (io::load_int8_spec). Hints for float files do not apply.
Status load_int8_weights(const io::SafeTensors& file, const ModelHints& hints, const StackSpec* config,
                         LoadedModel* out, std::string* error) {
  const bool hinted = !hints.prefix.empty() || !hints.mode.empty() || !hints.gru.empty() || !hints.input_mode.empty() ||
                      !hints.forget_bias.empty() || !hints.head_activation.empty() || !hints.head_last_step.empty() ||
                      (!hints.format.empty() && hints.format != "tflite_int8") || hints.dtype != DType::f32;
  if (config != nullptr || hinted) {
    *error = file.path + ": an int8 LSTM model (format tflite_int8) states its layers, quantization and head itself: "
                         "--config, --format, --prefix, --mode, --gru, --input-mode, --forget-bias, --head-* and --dtype "
                         "do not apply";
    return Status::unsupported;
  }
  const Status s = load_int8_spec(file, &out->stack, &out->canonical, error);
  if (s != Status::ok) return s;
  out->format = WeightFormat::canonical;
  out->prefix.clear();
  out->spec = RnnSpec();
  out->spec.input_size = out->stack.input_size;
  out->spec.hidden_size = out->stack.layers[0].hidden_size;
  out->spec.num_layers = out->stack.num_layers;
  out->spec.direction = out->stack.layers[0].direction;
  out->notes.push_back("int8 LSTM model (tflite_int8, LiteRT's 8x8_16 integer LSTM): x " +
                       std::string(out->stack.embedding.vocab_size > 0 ? "int32 token ids"
                                   : out->stack.float_input               ? "float32 (quantized as LiteRT's QUANTIZE)"
                                                                          : "int8") +
                       ", y " + (out->stack.float_output ? "float32 (dequantized)" : "int8") +
                       ", h int8 and c int16 states");
  return Status::ok;
}

}  // namespace

Status load_weights(const std::string& path, const ModelHints& hints, const StackSpec* config, LoadedModel* out,
                    std::string* error) {
  io::SafeTensors file;
  const rnncore_status rs = io::read_safetensors(path.c_str(), &file);
  if (rs != RNNCORE_OK) {
    *error = rnncore_last_error_detail();
    if (error->empty()) *error = path + ": " + rnncore_status_message(rs);
    return static_cast<Status>(rs);
  }
  if (is_int8_model(file)) return load_int8_weights(file, hints, config, out, error);
  Inspector in(file, error);
  auto fail = [&](Status s, const std::string& what) {
    in.fail(what);
    return s;
  };

  // A file may carry its own stack (metadata 'config', docs/config.md: tools/tf_to_safetensors.py writes it
  // for a TF or Keras stack whose layers differ in cell, size or direction); --config replaces it.
  StackSpec file_config;
  if (config == nullptr && file.meta("config") != nullptr) {
    if (!hints.mode.empty() || !hints.gru.empty())
      return fail(Status::invalid_enum, "the file carries its stack of layers (metadata 'config'), which says each "
                                        "layer's cell: --mode and --gru do not apply");
    const std::string& text = *file.meta("config");
    const Status cs = parse_stack_config(text.data(), text.size(), path + " (metadata 'config')", &file_config, error);
    if (cs != Status::ok) return cs;
    config = &file_config;
  }

  if (const Status st = find_format_and_prefix(file, hints, in, out); st != Status::ok) return st;

  // The mode, where given, before the sizes: a TF LSTM/RNN kernel needs it to tell G from H.
  std::string mode = hints.mode;
  if (mode.empty() && file.meta("mode") != nullptr) mode = *file.meta("mode");
  Mode given_mode = Mode::lstm;
  int mode_gates = 0;
  if (config != nullptr) mode_gates = num_gates(config->layers[0].mode);
  else if (!mode.empty() && parse_mode(mode, &given_mode)) mode_gates = num_gates(given_mode);

  Inferred inf;
  if (!infer_sizes(in, out->format, out->prefix, mode_gates, &inf)) return Status::tensor_shape;

  RnnSpec& spec = out->spec;
  spec.dtype = hints.dtype;
  spec.input_size = inf.input;
  spec.hidden_size = inf.hidden;
  spec.num_layers = inf.layers;
  spec.direction = inf.dirs == 2 ? Direction::bidirectional : Direction::unidirectional;
  spec.input_mode = inf.skip ? InputMode::skip : InputMode::linear;
  spec.proj_size = inf.proj;
  spec.peepholes = inf.peepholes;
  FileClips clips;
  if (!read_clips(file, &clips, error)) return Status::invalid_enum;
  spec.cell_clip = clips.at(0, 0);  // layer 0's: the stack below takes every layer's own
  spec.proj_clip = clips.at(1, 0);

  if (config != nullptr) {
    // The stack comes from the configuration; the weights only tell the input size.
    out->stack = *config;
    out->stack.dtype = hints.dtype;
    if (out->stack.input_size == 0) out->stack.input_size = inf.input;
    if (out->stack.input_size != inf.input)
      return fail(Status::tensor_shape, "the configuration's input_size is " + std::to_string(out->stack.input_size) +
                                            " but tensor '" + inf.anchor + "' belongs to a model with input size " +
                                            std::to_string(inf.input));
    if (inf.skip) out->stack.input_mode = InputMode::skip;
    spec.mode = out->stack.layers[0].mode;
    spec.gru_variant = out->stack.layers[0].gru_variant;
    // The file's projections, peepholes and clips, where the configuration's layers do not say them.
    if (!apply_file_extensions(in, out->format, out->prefix, clips, true, &out->stack, error, file.path))
      return Status::invalid_enum;
    const Status vs = validate(out->stack);
    if (vs != Status::ok) return fail(vs, std::string("configuration: ") + last_error_detail());
  } else {
    if (const Status st = infer_cell(file, hints, mode, inf, in, out); st != Status::ok) return st;
    if (!hints.input_mode.empty()) {
      InputMode im;
      if (!parse_input_mode(hints.input_mode, &im))
        return fail(Status::invalid_enum, "unknown input mode '" + hints.input_mode + "' (linear, skip or auto_select)");
      if ((im == InputMode::skip) != inf.skip && !(im == InputMode::auto_select && inf.skip == (inf.input == inf.hidden)))
        return fail(Status::tensor_shape, std::string("input mode ") + hints.input_mode + " does not match the file: layer 0 " +
                                              (inf.skip ? "has no" : "has") + " input weights");
    }
    if (spec.mode != Mode::lstm) spec.cell_clip = spec.proj_clip = 0;  // checked per layer below
    if (validate(spec) != Status::ok) return fail(validate(spec), last_error_detail());
    out->stack = to_stack(spec);
    // Each layer's own projection, peepholes and clips (a TF stack may clip, project or peep differently per layer).
    if (!apply_file_extensions(in, out->format, out->prefix, clips, false, &out->stack, error, file.path))
      return Status::invalid_enum;
    const Status vs = validate(out->stack);
    if (vs != Status::ok) return fail(vs, last_error_detail());
  }

  if (const Status st = import_file(file, in, out); st != Status::ok) return st;
  if (const Status st = attach_ends(file, hints, in, out); st != Status::ok) return st;
  out->ignored = unused_tensors(file, out->stack, out->format, out->prefix, out->ends);
  return apply_forget_bias(file, hints, out, error);
}

void drop_ends(LoadedModel* m) {
  StackSpec& st = m->stack;
  if (st.head.out_features == 0 && st.embedding.vocab_size == 0) return;
  const std::int64_t table = canonical_offset(st, 0, 0, ParamKind::embedding, 0);
  const std::int64_t first = table >= 0 ? table : canonical_offset(st, 0, 0, ParamKind::dense_weight, 0);
  m->canonical.resize(static_cast<std::size_t>(first) * dtype_size(st.dtype));
  st.head = DenseSpec();
  st.num_pre_head = 0;
  st.embedding = EmbeddingSpec();
  m->ignored.insert(m->ignored.begin(), m->ends.begin(), m->ends.end());
  m->ends.clear();
  std::vector<std::string> notes;
  for (const std::string& n : m->notes)
    if (n.rfind(kLinearNote, 0) != 0 && n.rfind(kDenseNote, 0) != 0) notes.push_back(n);
  m->notes = notes;
}

Status load_model(const std::string& path, const LoadOptions& options, Model* out, LoadedModel* info,
                  std::string* error) {
  LoadedModel local;
  LoadedModel& loaded = info != nullptr ? *info : local;
  const Status s = load_weights(path, options.hints, options.config, &loaded, error);
  if (s != Status::ok) return s;
  const Status c = Model::create(loaded.stack, options.plan, loaded.canonical.data(), out);
  if (c != Status::ok) *error = path + ": " + last_error_detail();
  return c;
}

}  // namespace io
}  // namespace rnncore

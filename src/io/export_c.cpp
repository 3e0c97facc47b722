// `rnncore export-c`: a safetensors model → a C header with const arrays (see export_c.hpp).
//
// The header is deterministic (same model and options → same bytes on every machine), so a test
// can compare a committed header with a fresh export. Floats are written with 9 significant
// digits, which round-trips every binary32 value exactly.
#include "rnncore/io/export_c.hpp"
#include "rnncore/io/hints.hpp"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rnncore/rnncore.h"
#include "rnncore/int8.h"
#include "rnncore/rnncore.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/model.hpp"
#include "rnncore/io/safetensors.hpp"
#include "src/internal/int8_kernels.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"
#include "src/io/int8_model.hpp"

namespace rnncore {
namespace io {

namespace {

// printf onto the header's text.
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void appendf(std::string* out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const std::size_t at = out->size();
    out->resize(at + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(&(*out)[at], static_cast<std::size_t>(n) + 1, format, again);
    out->resize(at + static_cast<std::size_t>(n));
  }
  va_end(again);
}

// A failure: one line in *error.
Status fail(std::string* error, const std::string& line, Status s = Status::format) {
  *error = line;
  return s;
}

// An option that does not fit the model (a command line's usage error).
Status option_fail(ExportCReport* report, std::string* error, const std::string& line) {
  report->option_error = true;
  *error = line;
  return Status::unsupported;
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "models/lstm_small.h" → "lstm_small"; anything that is not [A-Za-z0-9_] becomes '_'.
std::string identifier_from(const std::string& path) {
  std::string stem = base_name(path);
  const std::size_t dot = stem.find('.');
  if (dot != std::string::npos) stem = stem.substr(0, dot);
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (stem.empty() || std::isdigit(static_cast<unsigned char>(stem[0]))) stem = "model_" + stem;
  return stem;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A C float literal that reads back as exactly `v` (finite values only).
std::string float_literal(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

const char* mode_enum(Mode m) {
  switch (m) {
    case Mode::lstm: return "RNNCORE_MODE_LSTM";
    case Mode::gru: return "RNNCORE_MODE_GRU";
    case Mode::rnn_tanh: return "RNNCORE_MODE_RNN_TANH";
    case Mode::rnn_relu: return "RNNCORE_MODE_RNN_RELU";
  }
  return "?";
}

const char* input_mode_enum(InputMode m) {
  switch (m) {
    case InputMode::linear: return "RNNCORE_INPUT_LINEAR";
    case InputMode::skip: return "RNNCORE_INPUT_SKIP";
    case InputMode::auto_select: return "RNNCORE_INPUT_AUTO_SELECT";
  }
  return "?";
}

// C literals: a float that reads back as exactly `v` (float_literal), an integer as is.
std::string c_literal(float v) { return float_literal(v); }
std::string c_literal(std::int32_t v) { return std::to_string(v); }

// An initializer's values, `per_line` a line, each line indented by `indent`; `marks` (sorted
// offset → label) become comment lines where a block starts.
template <class T>
void write_values(std::string* out, const T* v, std::size_t n, const std::vector<std::pair<std::size_t, std::string>>& marks,
                  std::size_t per_line, const char* indent) {
  std::size_t next_mark = 0, column = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (next_mark < marks.size() && marks[next_mark].first == i) {
      if (column != 0) out->push_back('\n');
      appendf(out, "%s/* %s */\n", indent, marks[next_mark].second.c_str());
      ++next_mark;
      column = 0;
    }
    appendf(out, "%s%s,", column == 0 ? indent : " ", c_literal(v[i]).c_str());
    if (++column == per_line || i + 1 == n) {
      out->push_back('\n');
      column = 0;
    }
  }
}

// One array as a C definition (see write_values).
template <class T>
void write_array(std::string* out, const std::string& decl, const T* v, std::size_t n,
                 const std::vector<std::pair<std::size_t, std::string>>& marks = {}, std::size_t per_line = 8) {
  appendf(out, "%s[%zu] = {\n", decl.c_str(), n);
  write_values(out, v, n, marks, per_line, "  ");
  appendf(out, "};\n");
}

// Labels of the canonical blocks ("layer 1 reverse: R_f [32, 32]"), by element offset.
std::vector<std::pair<std::size_t, std::string>> canonical_marks(const RnnSpec& spec) {
  static const char* const kLstm[4] = {"i", "f", "g", "o"};
  static const char* const kGru[3] = {"r", "z", "n"};
  static const char* const kKind[4] = {"W", "R", "bW", "bR"};
  std::vector<std::pair<std::size_t, std::string>> marks;
  const int G = num_gates(spec.mode);
  for (int l = 0; l < spec.num_layers; ++l)
    for (int d = 0; d < num_directions(spec); ++d)
      for (int k = 0; k < 4; ++k)
        for (int g = 0; g < G; ++g) {
          const std::int64_t at = canonical_offset(spec, l, d, static_cast<ParamKind>(k), g);
          if (at < 0) continue;  // e.g. no W in a skip-input layer
          const int H = spec.hidden_size, cols = k == 0 ? layer_input_size(spec, l) : output_size(to_stack(spec).layers[l]);
          const std::string gate = spec.mode == Mode::lstm ? kLstm[g] : spec.mode == Mode::gru ? kGru[g] : "";
          std::string label = "layer " + std::to_string(l) + (d ? " reverse" : "") + ": " + kKind[k] +
                              (gate.empty() ? "" : "_" + gate) + " [" + std::to_string(H) +
                              (k < 2 ? ", " + std::to_string(cols) : "") + "]";
          marks.emplace_back(static_cast<std::size_t>(at), label);
        }
  // LSTM extensions, after each direction's biases: peepholes p_i, p_f, p_o, then W_proj [P, H].
  for (int l = 0; l < spec.num_layers; ++l)
    for (int d = 0; d < num_directions(spec); ++d) {
      const std::string where = "layer " + std::to_string(l) + (d ? " reverse" : "") + ": ";
      const std::string H = std::to_string(spec.hidden_size);
      for (int g : {0, 1, 3}) {
        const std::int64_t at = canonical_offset(spec, l, d, ParamKind::peephole, g);
        if (at >= 0) marks.emplace_back(static_cast<std::size_t>(at), where + "p_" + kLstm[g] + " [" + H + "]");
      }
      const std::int64_t at = canonical_offset(spec, l, d, ParamKind::projection, 0);
      if (at >= 0)
        marks.emplace_back(static_cast<std::size_t>(at), where + "W_proj [" + std::to_string(spec.proj_size) + ", " + H + "]");
    }
  std::sort(marks.begin(), marks.end());
  return marks;
}

// The spec initializer's lines for the LSTM extensions (none for a plain cell, so such headers keep
// their bytes). Clips print with 17 significant digits: the double reads back exactly.
std::string extension_fields(const RnnSpec& spec) {
  std::string f;
  char buf[64];
  if (spec.proj_size > 0) f += "    .proj_size = " + std::to_string(spec.proj_size) + ",\n";
  if (spec.peepholes) f += "    .peepholes = 1,\n";
  for (const auto& clip : {std::make_pair("cell_clip", spec.cell_clip), std::make_pair("proj_clip", spec.proj_clip)}) {
    if (clip.second == 0.0) continue;
    std::snprintf(buf, sizeof buf, "    .%s = %.17g,\n", clip.first, clip.second);
    f += buf;
  }
  return f;
}

bool read_sample(const std::string& path, std::int64_t width, const char* what, std::vector<std::int64_t>* shape,
                 std::vector<float>* out, std::string* err) {
  Array a;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  if (a.shape.size() != 3 || a.shape[2] != width) {
    *err = path + ": expected shape [T, B, " + std::to_string(width) + "] (" + what + ", time-major), found " +
           shape_to_string(a.shape.data(), a.shape.size());
    return false;
  }
  if (to_f32(a, out) != RNNCORE_OK) {
    *err = path + ": expected a floating-point array, found " + elem_type_name(a.type);
    return false;
  }
  *shape = a.shape;
  return true;
}

// A sample of a head on the last step: [B, width], floats.
bool read_rows_sample(const std::string& path, std::int64_t width, std::vector<std::int64_t>* shape, std::vector<float>* out,
                      std::string* err) {
  Array a;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) return (*err = rnncore_last_error_detail(), false);
  if (a.shape.size() != 2 || a.shape[1] != width)
    return (*err = path + ": expected shape [B, " + std::to_string(width) + "] (the head's output on each row's last step), found " +
                   shape_to_string(a.shape.data(), a.shape.size()),
            false);
  if (to_f32(a, out) != RNNCORE_OK) return (*err = path + ": expected a floating-point array, found " + elem_type_name(a.type), false);
  *shape = a.shape;
  return true;
}

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// An int8 sample: [B, T, width] (batch-major, as the integer LSTM runs), int8.
bool read_int8_sample(const std::string& path, std::int64_t width, const char* what, std::vector<std::int64_t>* shape,
                      std::vector<std::int8_t>* out, std::string* err) {
  Array a;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  const std::string expected = "int8 [B, T, " + std::to_string(width) + "] (" + what + ", batch-major)";
  if (a.type != ElemType::i8 || a.shape.size() != 3 || a.shape[2] != width) {
    *err = path + ": expected " + expected + ", found " + elem_type_name(a.type) + " " +
           shape_to_string(a.shape.data(), a.shape.size());
    return false;
  }
  out->assign(reinterpret_cast<const std::int8_t*>(a.bytes.data()),
              reinterpret_cast<const std::int8_t*>(a.bytes.data()) + a.bytes.size());
  *shape = a.shape;
  return true;
}

// The LSTM weights' layout the options ask for (--interleave, --interleave-i16).
q8::Int8WeightLayout export_layout(const ExportCOptions& o) {
  if (!o.interleave) return q8::Int8WeightLayout::row_major;
  return o.interleave_i16 ? q8::Int8WeightLayout::interleaved4_i16 : q8::Int8WeightLayout::interleaved4;
}

// ---- An integer LSTM model (format tflite_int8, docs/int8.md) ----
// The int8 weights and int32 biases as they are, the biases folded by the library's own
// pack_weights (so firmware can keep them in flash: rnncore_int8_lstm_prepare_folded), the
// quantization, the sizes, and a sample, all from the file as one integer StackSpec. A single LSTM
// keeps unprefixed names; a stack or a Dense head names layer k NAME_l<k>_... and Dense j NAME_fc<j>_...

// The model, what pack_weights prepared from it, and the sample its header embeds.
struct Int8Export {
  StackSpec st;  ///< the file as one integer stack (load_int8_spec)
  std::vector<unsigned char> canonical;
  /// A plan of row-major weights and portable kernels, and its packed buffer: the prepared
  /// parameters the header writes (folded biases, multipliers, tables, softmax, merges).
  Plan plan;
  std::vector<unsigned char> packed_storage;
  const unsigned char* packed = nullptr;
  int dense = 0;            ///< the file's Dense layers: the chain less a head it does not have
  bool softmax = false;     ///< a softmax on the output
  bool sequences = true;    ///< the output is every step's (else the last step's)
  bool single = false;      ///< one LSTM alone: unprefixed names
  std::vector<std::int64_t> in_shape;
  std::vector<std::int8_t> sample_in, sample_out;
  std::vector<std::int32_t> sample_ids;

  const unsigned char* at(int l, int d, ParamKind kind, int g) const {
    return canonical.data() + canonical_offset(st, l, d, kind, g);
  }
  /// Width of the model's output: the last Dense layer's, else the last LSTM's.
  int output_size() const {
    return st.head.out_features > 0 ? st.head.out_features : static_cast<int>(detail::head_input_size(st));
  }
  /// Width of layer l's output (both directions of a concatenating bidirectional layer).
  int layer_output(int l) const {
    const LayerSpec& ls = st.layers[l];
    return ls.hidden_size * (bidirectional(l) && ls.merge.mode == MergeMode::concat ? 2 : 1);
  }
  bool bidirectional(int l) const { return num_directions(st.layers[l]) == 2; }
};

// One LSTM direction (l, d) of the model (its sizes, quantization, weights and biases) and what
// pack_weights prepared from it (the folded biases, the cell's log2).
struct Int8Dir : Int8Direction {
  q8::Int8LstmParams params;  ///< pointers into the packed buffer
  /// Prepare's storage: the folded biases, per channel the units' multipliers after them.
  const std::int32_t* storage() const { return params.x_bias[0]; }
  std::size_t storage_words() const { return q8::int8_lstm_storage_words(q, hidden_size); }
};

Int8Dir int8_dir(const Int8Export& e, int l, int d) {
  Int8Dir m;
  static_cast<Int8Direction&>(m) = int8_direction(e.st, e.canonical.data(), l, d);
  m.params = detail::int8_packed_lstm(detail::impl(e.plan), e.packed, l, d);
  return m;
}

// One LSTM layer's part of an int8 header: its sizes, quantization, weights, biases (raw and
// folded) and per-gate pointer tables, with C names `n` (e.g. "m" or "m_l1") and macros `N`.
void write_int8_lstm(std::string* out, const Int8Dir& m, const std::string& n, const std::string& N,
                     q8::Int8WeightLayout layout) {
  const bool interleave = layout != q8::Int8WeightLayout::row_major;
  q8::Int8LstmParams sizes;  // only what the scratch size depends on
  sizes.input_size = m.input_size;
  sizes.hidden_size = m.hidden_size;
  sizes.layout = layout;
  appendf(out,
               "/** int32 words of %s_folded_bias%s, and bytes of a run's scratch%s. */\n"
               "#define %s_BIAS_WORDS %zu\n#define %s_SCRATCH_BYTES %zu\n"
               "/** A run starts from LiteRT's initial state: every h = %s_STATE_ZERO_POINT, every c = 0. */\n"
               "#define %s_STATE_ZERO_POINT %d\n",
               n.c_str(), q8::int8_lstm_per_channel(m.q) ? " (and the units' multipliers)" : "",
               interleave ? " (with interleaved weights\n"
                            " * also x and h widened to int16: RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H))"
                          : "",
               N.c_str(), m.storage_words(), N.c_str(), q8::int8_lstm_scratch_bytes(sizes),
               N.c_str(), N.c_str(), static_cast<int>(m.q.state_zp));
}

// The alignment interleaved weights need, defined once per header (and once per program: a header
// exported earlier, or the user, may have defined it). int8_t arrays get 1-byte alignment from the
// language; declaring them as int32_t words or a union would change what the C API takes, so the
// compiler is asked: GNU attribute, C11 _Alignas or MSVC's __declspec, else no silent fallback.
void write_align_macro(std::string* out) {
  appendf(out,
               "/* Interleaved weights must be 4-byte aligned (the Cortex-M kernel reads them with LDM, which\n"
               " * faults on other addresses; prepare refuses them with RNNCORE_ERR_MISALIGNED). An int8_t array\n"
               " * may lie anywhere, so this asks the compiler; elsewhere define RNNCORE_INT8_ALIGN4 yourself (a\n"
               " * declaration specifier that aligns the array to 4 bytes): there is no silent fallback. */\n"
               "#ifndef RNNCORE_INT8_ALIGN4\n"
               "#if defined(__GNUC__) || defined(__clang__) || defined(__ARMCC_VERSION)\n"
               "#define RNNCORE_INT8_ALIGN4 __attribute__((aligned(4)))\n"
               "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
               "#define RNNCORE_INT8_ALIGN4 _Alignas(4)\n"
               "#elif defined(_MSC_VER)\n"
               "#define RNNCORE_INT8_ALIGN4 __declspec(align(4))\n"
               "#else\n"
               "#error \"define RNNCORE_INT8_ALIGN4 to align an array to 4 bytes with this compiler\"\n"
               "#endif\n"
               "#endif\n"
               "/* The weights below are in revision %d of the interleaved layout; a library with another\n"
               " * (or none) would read them wrongly. */\n"
               "#if !defined(RNNCORE_INT8_INTERLEAVED4_REVISION) || RNNCORE_INT8_INTERLEAVED4_REVISION != %d\n"
               "#error \"interleaved weights of another layout revision than rnncore/int8.h's: export the model again\"\n"
               "#endif\n\n",
               RNNCORE_INT8_INTERLEAVED4_REVISION, RNNCORE_INT8_INTERLEAVED4_REVISION);
}

const char* const kGate[q8::kGates] = {"i", "f", "g", "o"};

// Labels "gate i" .. "gate o" at each gate's first element.
std::vector<std::pair<std::size_t, std::string>> gate_marks(std::size_t per_gate) {
  std::vector<std::pair<std::size_t, std::string>> marks;
  for (int g = 0; g < q8::kGates; ++g) marks.emplace_back(g * per_gate, std::string("gate ") + kGate[g]);
  return marks;
}

// An LSTM's input (rows H, k = I) or recurrent (k = H) weights as one array `name`, gates one after
// the other: row-major as the model has them, or each gate interleaved (interleave4) and the array
// 4-byte aligned. Returns the elements of one gate.
std::size_t write_int8_weights(std::string* out, const std::int8_t* const (&per_gate)[q8::kGates], int rows, int k,
                               const std::string& name, bool recurrent, q8::Int8WeightLayout layout) {
  const bool interleave = layout != q8::Int8WeightLayout::row_major;
  const char* what = recurrent ? "Recurrent weights R_g [H, H]" : "Input weights W_g [H, I]";
  if (!interleave) {
    appendf(out, recurrent ? "/** %s. */\n" : "/** %s (row-major), gates i, f, g, o. */\n", what);
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(k);
    std::vector<std::int8_t> all;
    for (int g = 0; g < q8::kGates; ++g) all.insert(all.end(), per_gate[g], per_gate[g] + n);
    write_array(out, "static const int8_t " + name, all.data(), 4 * n, gate_marks(n), 16);
    return n;
  }
  if (layout == q8::Int8WeightLayout::interleaved4_i16) {
    const std::size_t n = q8::interleaved4_i16_bytes(rows, k);
    appendf(out,
            "/** %s, gates i, f, g, o, each as int16 panels (rnncore_int8_interleave4_i16):\n"
            " * panels of 4 rows, each line (32 bytes) 4 columns of those 4 rows as little-endian int16\n"
            " * (docs/int8.md); rows and columns padded with zeros to multiples of 4:\n"
            " * RNNCORE_INT8_INTERLEAVED4_I16_BYTES(%d, %d) = %zu\n"
            " * bytes a gate. */\n",
            what, rows, k, n);
    std::vector<std::int8_t> all(4 * n);
    for (int g = 0; g < q8::kGates; ++g) q8::interleave4_i16(per_gate[g], rows, k, all.data() + g * n);
    write_array(out, "static RNNCORE_INT8_ALIGN4 const int8_t " + name, all.data(), all.size(), gate_marks(n), 16);
    return n;
  }
  const std::size_t n = q8::interleaved4_bytes(rows, k);
  appendf(out,
               "/** %s, gates i, f, g, o, each interleaved (rnncore_int8_interleave4):\n"
               " * panels of 4 rows, each line (16 bytes) 4 columns of those 4 rows, rows paired in int16\n"
               " * halves (docs/int8.md); rows and columns padded with zeros to multiples of 4:\n"
               " * RNNCORE_INT8_INTERLEAVED4_BYTES(%d, %d) = %zu\n"
               " * bytes a gate. */\n",
               what, rows, k, n);
  std::vector<std::int8_t> all(4 * n);
  for (int g = 0; g < q8::kGates; ++g) q8::interleave4(per_gate[g], rows, k, all.data() + g * n);  // interleavable() checked
  write_array(out, "static RNNCORE_INT8_ALIGN4 const int8_t " + name, all.data(), all.size(), gate_marks(n), 16);
  return n;
}

void write_int8_lstm_arrays(std::string* out, const Int8Dir& m, const std::string& n, bool float_input,
                            q8::Int8WeightLayout layout) {
  const bool interleave = layout != q8::Int8WeightLayout::row_major;
  const std::int64_t H = m.hidden_size;
  const q8::Int8LstmQuantization& q = m.q;
  const bool per_channel = q8::int8_lstm_per_channel(q);
  if (per_channel) {  // rnncore quantize --per-channel: the units' scales, which prepare reads
    const auto concat_scales = [H](const float* const* per_gate) {
      std::vector<float> all;
      for (int g = 0; g < q8::kGates; ++g) all.insert(all.end(), per_gate[g], per_gate[g] + H);
      return all;
    };
    appendf(out, "/** Per-channel weight scales [H] of gates i, f, g, o: input weights, then recurrent. */\n");
    const std::vector<float> ws = concat_scales(q.w_scales), rs = concat_scales(q.r_scales);
    write_array(out, "static const float " + n + "_w_scales", ws.data(), ws.size());
    write_array(out, "static const float " + n + "_r_scales", rs.data(), rs.size());
  }
  std::string extra_fields;
  if (per_channel) {
    const std::string hs = std::to_string(H);
    extra_fields = "    .w_scales = {" + n + "_w_scales, " + n + "_w_scales + " + hs + ", " + n + "_w_scales + 2 * " + hs +
                   ", " + n + "_w_scales + 3 * " + hs + "},\n    .r_scales = {" + n + "_r_scales, " + n + "_r_scales + " +
                   hs + ", " + n + "_r_scales + 2 * " + hs + ", " + n + "_r_scales + 3 * " + hs + "},\n";
  }
  if (interleave)
    extra_fields += layout == q8::Int8WeightLayout::interleaved4_i16 ? "    .weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16,\n"
                                                                     : "    .weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4,\n";
  appendf(out,
               "/** The quantization (real = scale * (q - zero point)); the model's input %s int8 with the input\n"
               " * scale and zero point, its output is h (the state's). */\n"
               "static const rnncore_int8_lstm_quantization %s_quantization = {\n"
               "    .input_scale = %s,\n    .input_zp = %d,\n"
               "    .w_scale = {%s, %s, %s, %s},\n    .r_scale = {%s, %s, %s, %s},\n"
               "    .state_scale = %s,\n    .state_zp = %d,\n    .hidden_scale = %s,\n    .hidden_zp = %d,\n"
               "    .cell_scale = %s,\n    .cell_clip = %s,\n%s};\n\n",
               float_input ? "was float, quantized by the graph to" : "is", n.c_str(),
               float_literal(q.input_scale).c_str(), static_cast<int>(q.input_zp), float_literal(q.w_scale[0]).c_str(),
               float_literal(q.w_scale[1]).c_str(), float_literal(q.w_scale[2]).c_str(),
               float_literal(q.w_scale[3]).c_str(), float_literal(q.r_scale[0]).c_str(),
               float_literal(q.r_scale[1]).c_str(), float_literal(q.r_scale[2]).c_str(),
               float_literal(q.r_scale[3]).c_str(), float_literal(q.state_scale).c_str(), static_cast<int>(q.state_zp),
               float_literal(q.hidden_scale).c_str(), static_cast<int>(q.hidden_zp), float_literal(q.cell_scale).c_str(),
               float_literal(q.cell_clip).c_str(), extra_fields.c_str());
  // One array each for W, R and the biases, gates i, f, g, o one after the other.
  std::vector<std::int32_t> bias;
  for (int g = 0; g < q8::kGates; ++g) bias.insert(bias.end(), m.b[g], m.b[g] + H);
  const std::size_t hi = write_int8_weights(out, m.w, m.hidden_size, m.input_size, n + "_w", false, layout);
  const std::size_t hh = write_int8_weights(out, m.r, m.hidden_size, m.hidden_size, n + "_r", true, layout);
  appendf(out, "/** Biases b_g [H] (scale w_scale[g] * input_scale). */\n");
  write_array(out, "static const int32_t " + n + "_bias", bias.data(), 4 * static_cast<std::size_t>(H),
              gate_marks(static_cast<std::size_t>(H)));
  appendf(out,
               "/** The biases folded with the zero points (rnncore_int8_lstm_prepare_folded checks them):\n"
               " * input parts of gates i, f, g, o, then their recurrent parts. */\n");
  std::vector<std::pair<std::size_t, std::string>> folded_marks;
  for (int g = 0; g < 2 * q8::kGates; ++g)
    folded_marks.emplace_back(g * static_cast<std::size_t>(H),
                              std::string(g < q8::kGates ? "input part, gate " : "recurrent part, gate ") + kGate[g % 4]);
  if (per_channel) {  // then each unit's (multiplier, shift), as prepare derives them
    for (int g = 0; g < 2 * q8::kGates; ++g)
      folded_marks.emplace_back(8 * static_cast<std::size_t>(H) + 2 * g * static_cast<std::size_t>(H),
                                std::string(g < q8::kGates ? "input multipliers, gate " : "recurrent multipliers, gate ") +
                                    kGate[g % 4]);
  }
  write_array(out, "static const int32_t " + n + "_folded_bias", m.storage(), m.storage_words(),
              folded_marks);
  appendf(out,
               "/** Per-gate pointers, as rnncore_int8_lstm_prepare takes them%s. */\n"
               "static const int8_t* const %s_w_gates[4] = {%s_w, %s_w + %zu, %s_w + %zu, %s_w + %zu};\n"
               "static const int8_t* const %s_r_gates[4] = {%s_r, %s_r + %zu, %s_r + %zu, %s_r + %zu};\n"
               "static const int32_t* const %s_bias_gates[4] = {%s_bias, %s_bias + %lld, %s_bias + %lld, %s_bias + %lld};\n",
               interleave ? (layout == q8::Int8WeightLayout::interleaved4_i16 ? " (gates INTERLEAVED4_I16_BYTES apart)"
                                                                               : " (gates INTERLEAVED4_BYTES apart)")
                          : "", n.c_str(), n.c_str(), n.c_str(), hi, n.c_str(),
               2 * hi, n.c_str(), 3 * hi, n.c_str(), n.c_str(), n.c_str(), hh, n.c_str(), 2 * hh, n.c_str(), 3 * hh,
               n.c_str(), n.c_str(), n.c_str(), static_cast<long long>(H), n.c_str(), 2 * static_cast<long long>(H), n.c_str(), 3 * static_cast<long long>(H));
}

// A Dense layer's part: sizes, weights, bias, weight scales and the quantization.
void write_int8_dense(std::string* out, const Int8Export& e, int k, const std::string& n, const std::string& N) {
  const StackSpec& st = e.st;
  const DenseSpec& d = detail::dense_at(st, k);
  const int in_size = static_cast<int>(detail::dense_input_size(st, k)), out_size = d.out_features;
  // What it reads: the last LSTM's output, or the Dense layer before it's (after its table).
  const DenseSpec* prev = k > 0 ? &detail::dense_at(st, k - 1) : nullptr;
  const bool prev_table = prev != nullptr && (prev->activation == Activation::sigmoid || prev->activation == Activation::tanh);
  const QuantParams in = prev == nullptr ? detail::int8_layer_output(st.layers[st.num_layers - 1])
                         : prev_table    ? prev->int8_output
                                         : prev->int8_linear;
  const std::size_t scales = d.int8_per_channel ? static_cast<std::size_t>(out_size) : 1;
  const float* w_scales =
      d.int8_per_channel ? reinterpret_cast<const float*>(e.at(-1 - k, 0, ParamKind::weight_scale, 0)) : &d.int8_w_scale;
  appendf(out,
               "\n/* Dense layer %s (%s; rnncore_int8_dense_prepare with %s_OUT_SIZE int32\n"
               " * and float words of storage). */\n#define %s_IN_SIZE %d\n#define %s_OUT_SIZE %d\n",
               n.c_str(), e.sequences ? "on every step: its rows are the B·T steps" : "on the last step", N.c_str(),
               N.c_str(), in_size, N.c_str(), out_size);
  write_array(out, "static const int8_t " + n + "_w", reinterpret_cast<const std::int8_t*>(e.at(k, 0, ParamKind::dense_weight, 0)),
              static_cast<std::size_t>(in_size) * out_size, {}, 16);
  write_array(out, "static const int32_t " + n + "_bias", reinterpret_cast<const std::int32_t*>(e.at(k, 0, ParamKind::dense_bias, 0)),
              static_cast<std::size_t>(out_size));
  write_array(out, "static const float " + n + "_w_scales", w_scales, scales);
  appendf(out,
               "static const rnncore_int8_dense_quantization %s_quantization = {\n"
               "    .input_scale = %s,\n    .input_zp = %d,\n    .w_scales = %s_w_scales,\n    .w_scale_count = %zu,\n"
               "    .output_scale = %s,\n    .output_zp = %d,\n    .relu = %d,\n};\n",
               n.c_str(), float_literal(in.scale).c_str(), static_cast<int>(in.zero_point), n.c_str(), scales,
               float_literal(d.int8_linear.scale).c_str(), static_cast<int>(d.int8_linear.zero_point),
               d.activation == Activation::relu ? 1 : 0);
  if (d.activation != Activation::sigmoid && d.activation != Activation::tanh) {
    appendf(out, "#define %s_ACTIVATION 0\n", N.c_str());
    return;
  }
  const bool sigmoid = d.activation == Activation::sigmoid;
  appendf(out,
               "/** Then a %s (TFLite %s): y = %s_table[x + 128] over the Dense output (rnncore_int8_lookup);\n"
               " * the Dense output's quantization is the one above, the table's output below. */\n"
               "#define %s_ACTIVATION %s\n#define %s_TABLE_OUTPUT_SCALE %s\n#define %s_TABLE_OUTPUT_ZERO_POINT %d\n",
               sigmoid ? "sigmoid" : "tanh", sigmoid ? "LOGISTIC" : "TANH", n.c_str(), N.c_str(),
               sigmoid ? "RNNCORE_INT8_SIGMOID" : "RNNCORE_INT8_TANH", N.c_str(),
               float_literal(d.int8_output.scale).c_str(), N.c_str(), static_cast<int>(d.int8_output.zero_point));
  write_array(out, "static const int8_t " + n + "_table",
              reinterpret_cast<const std::int8_t*>(e.packed + detail::impl(e.plan).i8.dense[k].lut), 256, {}, 16);
}

// The softmax on the model's output: a prepared rnncore_int8_softmax as a constant (its table of
// expf values made here, so firmware needs no expf).
void write_int8_softmax(std::string* out, const Int8Export& e, const std::string& n, const std::string& N) {
  const DenseSpec& h = e.st.head;
  rnncore_int8_softmax softmax;  // as pack_weights prepared it
  std::memcpy(&softmax, e.packed + detail::impl(e.plan).i8.dense[e.st.num_pre_head].softmax, sizeof softmax);
  appendf(out,
               "\n/* The softmax on the output (TFLite SOFTMAX, beta %s): rnncore_int8_softmax_run(&%s_softmax, B,\n"
               " * %s_OUTPUT_SIZE, x, y) over the last Dense layer's output (rows: B, or B·T when the model\n"
               " * returns every step). */\n"
               "#define %s_SOFTMAX_BETA %s\n#define %s_SOFTMAX_INPUT_SCALE %s\n#define %s_SOFTMAX_INPUT_ZERO_POINT %d\n"
               "static const rnncore_int8_softmax %s_softmax = {\n  {\n",
               float_literal(h.int8_softmax_beta).c_str(), n.c_str(), N.c_str(), N.c_str(),
               float_literal(h.int8_softmax_beta).c_str(), N.c_str(), float_literal(h.int8_linear.scale).c_str(), N.c_str(),
               static_cast<int>(h.int8_linear.zero_point), n.c_str());
  for (int i = 0; i < 256; ++i)
    appendf(out, "%s%s%s", i % 8 == 0 ? "    " : " ", float_literal(softmax.table[i]).c_str(),
                 i == 255 ? "\n" : i % 8 == 7 ? ",\n" : ",");
  appendf(out, "  },\n  %s,\n  %d,\n};\n", float_literal(softmax.output_scale).c_str(),
               static_cast<int>(softmax.output_zp));
}

// A bidirectional layer's merge_mode, as MergeMode numbers them (the header's NAME_L<k>_MERGE).
const char* const kMergeNames[] = {"concat", "sum", "mul", "ave"};

// What firmware does with a bidirectional layer's two outputs per step (a comment of the header).
std::string merge_usage(MergeMode mode, const std::string& n, const std::string& N) {
  switch (mode) {
    case MergeMode::concat:
      return "The layer's output per step is\n * [forward h, backward h]: " + N + "_HIDDEN_SIZE bytes.";
    case MergeMode::sum:
      return "The layer's output is\n * rnncore_int8_add_run(&" + n + "_merge_add, n, forward, backward, y) of the two outputs.";
    case MergeMode::mul:
      return "The layer's output is\n * rnncore_int8_mul_run(&" + n + "_merge_mul, n, forward, backward, y) of the two outputs.";
    case MergeMode::ave:
      return "The layer's output is\n * rnncore_int8_add_run(&" + n + "_merge_add, n, forward, backward, y), then\n"
             " * rnncore_int8_mul_constant_run(&" + n + "_merge_mul, n, y, " + N + "_MERGE_HALF, y).";
  }
  return "";
}

// A bidirectional layer's merge (N_MERGE: 0 concat, 1 sum, 2 mul, 3 ave) and its prepared ops.
void write_int8_merge(std::string* out, const Int8Export& e, int l, const std::string& n, const std::string& N) {
  const MergeMode m = e.st.layers[l].merge.mode;
  appendf(out, "/** 0: concat, 1: sum, 2: mul, 3: ave (Keras merge_mode). */\n#define %s_MERGE %d\n", N.c_str(),
               static_cast<int>(m));
  if (m == MergeMode::sum || m == MergeMode::ave) {
    const rnncore_int8_add& a = detail::impl(e.plan).i8.merge_add[l];
    appendf(out, "static const rnncore_int8_add %s_merge_add = {%ld, %ld, %ld, %ld, %ld};\n", n.c_str(),
                 static_cast<long>(a.a_multiplier), static_cast<long>(a.b_multiplier), static_cast<long>(a.bias),
                 static_cast<long>(a.output_zp), static_cast<long>(a.shift));
  }
  if (m == MergeMode::mul || m == MergeMode::ave) {
    const rnncore_int8_mul& p = detail::impl(e.plan).i8.merge_mul[l];
    appendf(out, "static const rnncore_int8_mul %s_merge_mul = {%ld, %ld, %ld, %s};\n", n.c_str(),
                 static_cast<long>(p.a_zp), static_cast<long>(p.b_zp), static_cast<long>(p.output_zp),
                 float_literal(p.scale).c_str());
  }
  if (m == MergeMode::ave)
    appendf(out, "#define %s_MERGE_HALF %d\n", N.c_str(), static_cast<int>(e.st.layers[l].merge.half_value));
}

// The embedding of a model that starts with a Keras Embedding: its table and quantization, so that
// firmware turns token ids into the first layer's int8 input by copying rows.
void write_int8_embedding(std::string* out, const Int8Export& e, const std::string& n, const std::string& N) {
  const StackSpec& st = e.st;
  const int vocab = st.embedding.vocab_size, dim = st.input_size;
  appendf(out,
               "\n/* The embedding (Keras Embedding; TFLite GATHER): the model's input is token ids [B, T], each in\n"
               " * [0, %s_EMBEDDING_VOCAB). The first layer's input row for id k is the %s_EMBEDDING_DIM bytes at\n"
               " * %s_embedding_table + k * %s_EMBEDDING_DIM, copied as they are (already int8 with the first\n"
               " * layer's input quantization). LiteRT fails on an id outside the vocabulary: refuse it too. */\n"
               "#define %s_EMBEDDING 1\n#define %s_EMBEDDING_VOCAB %d\n#define %s_EMBEDDING_DIM %d\n"
               "#define %s_EMBEDDING_SCALE %s\n#define %s_EMBEDDING_ZERO_POINT %d\n",
               N.c_str(), N.c_str(), n.c_str(), N.c_str(), N.c_str(), N.c_str(), vocab, N.c_str(), dim,
               N.c_str(), float_literal(st.input_quant.scale).c_str(), N.c_str(), static_cast<int>(st.input_quant.zero_point));
  write_array(out, "static const int8_t " + n + "_embedding_table",
              reinterpret_cast<const std::int8_t*>(e.at(0, 0, ParamKind::embedding, 0)),
              static_cast<std::size_t>(vocab) * dim, {}, 16);
}

// A sample of token ids [B, T] (int32 or int64 .npy) for an embedding model: the ids as int32 and
// their rows, the first layer's int8 input [B, T, E].
bool read_ids_sample(const std::string& path, const Int8Export& e, std::vector<std::int64_t>* shape,
                     std::vector<std::int32_t>* ids, std::vector<std::int8_t>* rows, std::string* err) {
  Array a;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  if ((a.type != ElemType::i32 && a.type != ElemType::i64) || a.shape.size() != 2) {
    *err = path + ": expected token ids, int32 or int64 [B, T] (the model starts with an Embedding), found " +
           elem_type_name(a.type) + " " + shape_to_string(a.shape.data(), a.shape.size());
    return false;
  }
  const std::size_t count = static_cast<std::size_t>(a.shape[0] * a.shape[1]);
  std::vector<std::int64_t> wide(count);
  for (std::size_t k = 0; k < count; ++k) {
    if (a.type == ElemType::i32) {
      std::int32_t v;
      std::memcpy(&v, a.bytes.data() + 4 * k, 4);
      wide[k] = v;
    } else {
      std::memcpy(&wide[k], a.bytes.data() + 8 * k, 8);
    }
  }
  const std::int64_t vocab = e.st.embedding.vocab_size;
  const std::size_t E = static_cast<std::size_t>(e.st.input_size);
  const unsigned char* table = e.at(0, 0, ParamKind::embedding, 0);
  rows->assign(count * E, 0);
  for (std::size_t k = 0; k < count; ++k) {
    if (wide[k] < 0 || wide[k] >= vocab) {
      *err = path + ": token id " + std::to_string(wide[k]) + " at position " + std::to_string(k) +
             " is outside the embedding's vocabulary [0, " + std::to_string(vocab) + ")";
      return false;
    }
    std::memcpy(rows->data() + k * E, table + static_cast<std::size_t>(wide[k]) * E, E);
  }
  ids->assign(wide.begin(), wide.end());
  *shape = {a.shape[0], a.shape[1], e.st.input_size};
  return true;
}

// Whether every weight of an LSTM can be interleaved (interleavable4), checked before the header is
// opened; else *why says which.
bool interleavable(const Int8Dir& m, const std::string& layer, std::string* why) {
  const int H = static_cast<int>(m.hidden_size), I = static_cast<int>(m.input_size);
  for (int part = 0; part < 2; ++part) {
    const int k = part == 0 ? I : H;
    for (int g = 0; g < q8::kGates; ++g) {
      int row = 0, column = 0;
      if (!q8::interleavable4((part == 0 ? m.w : m.r)[g], H, k, &row, &column)) {
        *why = layer + (part == 0 ? "input" : "recurrent") + " weight (" + std::to_string(row) + ", " +
               std::to_string(column) + ") of gate " + kGate[g] +
               " is -128 beside a negative weight in the row before; the interleaved layout stores weights "
               "-127..127 there (quantize symmetrically, as TFLite does, or export without --interleave)";
        return false;
      }
    }
  }
  return true;
}

// Bytes of an LSTM's int8 weights W and R in the header (interleaved: rows and columns padded).
long long int8_weight_bytes(const Int8Dir& m, q8::Int8WeightLayout layout) {
  const int I = m.input_size, H = m.hidden_size;
  if (layout == q8::Int8WeightLayout::row_major) return 4LL * H * (I + H);
  if (layout == q8::Int8WeightLayout::interleaved4_i16)
    return static_cast<long long>(4 * (q8::interleaved4_i16_bytes(H, I) + q8::interleaved4_i16_bytes(H, H)));
  return static_cast<long long>(4 * (q8::interleaved4_bytes(H, I) + q8::interleaved4_bytes(H, H)));
}

// The expected output of the sample: int8 [B, T, O] ([B, O] for a last-step model, stored as [B, 1, O]).
Status read_int8_expected(const ExportCOptions& o, Int8Export* e, std::string* error) {
  const std::int64_t O = e->output_size();
  const bool sequences = e->sequences;
  Array a;
  if (read_npy(o.sample_output.c_str(), &a) != RNNCORE_OK) return fail(error, rnncore_last_error_detail(), Status::io);
  if (!sequences && a.shape.size() == 2) a.shape.insert(a.shape.begin() + 1, 1);
  const std::vector<std::int64_t>& in = e->in_shape;
  if (a.type != ElemType::i8 || a.shape.size() != 3 || in.empty() || a.shape[0] != in[0] || a.shape[2] != O ||
      a.shape[1] != (sequences ? in[1] : 1))
    return fail(error, o.sample_output + ": expected int8 " +
                           (sequences ? "[B, T, " + std::to_string(O) + "]" : "[B, " + std::to_string(O) + "]") +
                           " (B and T of the sample input), found " + elem_type_name(a.type) + " " +
                           shape_to_string(a.shape.data(), a.shape.size()));
  e->sample_out.assign(reinterpret_cast<const std::int8_t*>(a.bytes.data()),
                       reinterpret_cast<const std::int8_t*>(a.bytes.data()) + a.bytes.size());
  return Status::ok;
}

// Loads the model and the sample, and checks the options against the model.
Status load_int8_export(const ExportCOptions& o, const SafeTensors& file, Int8Export* e, ExportCReport* report,
                        std::string* error) {
  const ModelHints& h = o.hints;
  const std::pair<const char*, bool> hints[] = {{"--format", !h.format.empty()}, {"--prefix", h.prefix_given},
                                                {"--mode", !h.mode.empty()},     {"--gru", !h.gru.empty()},
                                                {"--forget-bias", !h.forget_bias.empty()},
                                                {"--input-mode", !h.input_mode.empty()}};
  for (const auto& hint : hints)
    if (hint.second)
      return option_fail(report, error, std::string(hint.first) + " does not apply to " + o.weights +
                                            ", an int8 LSTM model (format tflite_int8)");
  Status s = load_int8_spec(file, &e->st, &e->canonical, error);
  if (s != Status::ok) return s;
  const StackSpec& st = e->st;
  const int chain = detail::num_dense(st);
  e->dense = chain - (chain > 0 && int8_identity_dense(st, e->canonical.data(), chain - 1) ? 1 : 0);
  e->softmax = st.head.activation == Activation::softmax;
  e->sequences = st.head.out_features == 0 || !st.head.last_step_only;
  bool bidirectional = false;
  for (int l = 0; l < st.num_layers; ++l) bidirectional |= e->bidirectional(l);
  e->single = st.num_layers == 1 && e->dense == 0 && !e->softmax && !bidirectional;
  // What prepare computes for the header, as pack_weights does it for a plan of row-major weights.
  PlanOptions po;
  po.max_isa = Isa::none;
  po.int8_weights = Int8Weights::row_major;
  s = Plan::create(st, po, &e->plan);
  const std::size_t bytes = s == Status::ok ? e->plan.packed_weight_bytes() : 0;
  e->packed_storage.assign(bytes + kAlignment, 0);
  unsigned char* at = e->packed_storage.data();
  at += (kAlignment - reinterpret_cast<std::uintptr_t>(at) % kAlignment) % kAlignment;
  if (s == Status::ok) s = e->plan.pack_weights(e->canonical.data(), at, bytes);
  if (s != Status::ok) return fail(error, o.weights + ": " + last_error_detail(), s);
  e->packed = at;
  std::string err;
  if (!o.sample_input.empty() &&
      !(st.embedding.vocab_size > 0 ? read_ids_sample(o.sample_input, *e, &e->in_shape, &e->sample_ids, &e->sample_in, &err)
                                    : read_int8_sample(o.sample_input, st.input_size, "input", &e->in_shape,
                                                       &e->sample_in, &err)))
    return fail(error, err);
  if (!o.sample_output.empty() && (s = read_int8_expected(o, e, error)) != Status::ok) return s;
  if (o.max_batch > 0 || o.max_seq_len > 0)
    return option_fail(report, error,
                       "--max-batch and --max-seq-len do not apply to an int8 model: its buffers do "
                       "not depend on them (NAME_SCRATCH_BYTES, and the state per row)");
  if (o.interleave && !o.interleave_i16) {  // every int8 weight has an int16 panel form
    for (int l = 0; l < st.num_layers; ++l) {
      const std::string where = o.weights + ": layer " + std::to_string(l) + ", ";
      if (!interleavable(int8_dir(*e, l, 0), where, &err) ||
          (e->bidirectional(l) && !interleavable(int8_dir(*e, l, 1), where + "backward, ", &err)))
        return fail(error, err, Status::unsupported);
    }
  }
  return Status::ok;
}

// Bytes of the LSTM weights in the header, and the layers' cell scales and widths as the header's
// comment and the summary give them.
struct Int8Facts {
  long long weight_bytes = 0;
  std::string cells, sizes;
};

Int8Facts int8_facts(const Int8Export& e, q8::Int8WeightLayout interleave) {
  Int8Facts f;
  for (int l = 0; l < e.st.num_layers; ++l) {
    const std::string H = std::to_string(e.st.layers[l].hidden_size);
    for (int d = 0; d < num_directions(e.st.layers[l]); ++d) {
      const Int8Dir m = int8_dir(e, l, d);
      f.weight_bytes += int8_weight_bytes(m, interleave);
      f.cells += (d > 0 ? "/2^" : f.cells.empty() ? "2^" : ", 2^") + std::to_string(m.params.cell_log2);
    }
    f.sizes += (f.sizes.empty() ? "" : ", ") + (e.bidirectional(l) ? "bidirectional " + H + "+" + H : H);
  }
  return f;
}

// One LSTM alone: the header's comment, sizes and the layer with unprefixed names.
void write_int8_single(std::string* out, const ExportCOptions& o, const Int8Export& e, const std::string& name,
                      const Int8Facts& f, const std::string& usage, const std::string& reverse) {
  const std::string NAME = upper(name), guard = "RNNCORE_EXPORT_" + NAME + "_H";
  const StackSpec& st = e.st;
  const Int8Dir first = int8_dir(e, 0, 0);
  const long long I = first.input_size, O = e.output_size();
  appendf(out,
          "/* %s: an integer LSTM compiled into the program, for rnncore's int8 C API (rnncore/int8.h).\n"
          " * Generated by `rnncore export-c` (rnncore %s) from %s; do not edit, export again.\n"
          " * LiteRT's integer LSTM (8x8_16): input %lld, hidden %lld, %s; int8 weights (%lld bytes%s), int16\n"
          " * cell state with scale %s. Semantics: docs/int8.md.\n"
          " *\n%s"
          " * Include it in one C file: the arrays are static. */\n"
          "#ifndef %s\n#define %s\n\n#include <rnncore/int8.h>\n\n",
          base_name(o.output).c_str(), version_string(), base_name(o.weights).c_str(), I, O,
          e.sequences ? "returns every step" : "returns the last step", f.weight_bytes,
          o.interleave ? (o.interleave_i16 ? ", int16 panels" : ", interleaved") : "", f.cells.c_str(), usage.c_str(), guard.c_str(), guard.c_str());
  if (o.interleave) write_align_macro(out);
  appendf(out,
          "#define %s_INPUT_SIZE %lld\n#define %s_HIDDEN_SIZE %lld\n"
          "/** 1: the model's output is every step's h [B, T, H]; 0: the last step's only [B, H]. */\n"
          "#define %s_RETURN_SEQUENCES %d\n",
          NAME.c_str(), I, NAME.c_str(), O, NAME.c_str(), e.sequences ? 1 : 0);
  if (st.embedding.vocab_size > 0) write_int8_embedding(out, e, name, NAME);
  write_int8_lstm(out, first, name, NAME, export_layout(o));
  appendf(out, "%s\n", reverse.c_str());
  write_int8_lstm_arrays(out, first, name, st.float_input, export_layout(o));
}

// Layer k of a stack: one LSTM, or a Keras Bidirectional's two (each direction an LSTM of its
// own; the layer's output per step is the forward h bytes, then the backward h bytes, as they are
// (concat: the concatenation copies), or their int8 ADD / MUL (sum, mul, ave)).
void write_int8_stack_layer(std::string* out, const Int8Export& e, int k, const std::string& name,
                            q8::Int8WeightLayout interleave) {
  const StackSpec& st = e.st;
  const Int8Dir layer = int8_dir(e, k, 0);
  const std::string n = name + "_l" + std::to_string(k), N = upper(name) + "_L" + std::to_string(k);
  if (!e.bidirectional(k)) {
    appendf(out, "\n/* LSTM layer %d */\n#define %s_BIDIRECTIONAL 0\n#define %s_INPUT_SIZE %d\n#define %s_HIDDEN_SIZE %d\n", k,
            N.c_str(), N.c_str(), layer.input_size, N.c_str(), layer.hidden_size);
    write_int8_lstm(out, layer, n, N, interleave);
    appendf(out, "\n");
    write_int8_lstm_arrays(out, layer, n, k == 0 && st.float_input, interleave);
    return;
  }
  appendf(out,
          "\n/* LSTM layer %d: Keras Bidirectional (merge_mode %s). %s_fw_... runs on the steps in order;\n"
          " * %s_bw_... on the steps last to first (e.g. one step per call, t = T-1 .. 0, writing step t's\n"
          " * output in place). %s */\n"
          "#define %s_BIDIRECTIONAL 1\n#define %s_INPUT_SIZE %d\n#define %s_HIDDEN_SIZE %d\n",
          k, kMergeNames[static_cast<int>(st.layers[k].merge.mode)], n.c_str(), n.c_str(),
          merge_usage(st.layers[k].merge.mode, n, N).c_str(), N.c_str(), N.c_str(), layer.input_size, N.c_str(),
          e.layer_output(k));
  write_int8_merge(out, e, k, n, N);
  for (int d = 0; d < 2; ++d) {
    const Int8Dir m = d == 0 ? layer : int8_dir(e, k, 1);
    const std::string dir = d == 0 ? "_fw" : "_bw", DIR = d == 0 ? "_FW" : "_BW";
    appendf(out, "#define %s%s_HIDDEN_SIZE %d\n", N.c_str(), DIR.c_str(), m.hidden_size);
    write_int8_lstm(out, m, n + dir, N + DIR, interleave);
    appendf(out, "\n");
    write_int8_lstm_arrays(out, m, n + dir, k == 0 && st.float_input, interleave);
  }
}

// A stack (or a Dense head, a softmax, a bidirectional layer): the header's comment, sizes and
// every layer under its prefix.
void write_int8_stack(std::string* out, const ExportCOptions& o, const Int8Export& e, const std::string& name,
                      const Int8Facts& f, const std::string& usage, const std::string& reverse) {
  const std::string NAME = upper(name), guard = "RNNCORE_EXPORT_" + NAME + "_H";
  const StackSpec& st = e.st;
  const long long I = st.input_size, O = e.output_size();
  const std::size_t L = static_cast<std::size_t>(st.num_layers), D = static_cast<std::size_t>(e.dense);
  appendf(out,
          "/* %s: integer LSTM layers%s compiled into the program, for rnncore's int8 C API (rnncore/int8.h).\n"
          " * Generated by `rnncore export-c` (rnncore %s) from %s; do not edit, export again.\n"
          " * LiteRT's integer LSTM (8x8_16): input %lld, %zu LSTM layer(s) (H %s), %zu Dense layer(s), output %lld,\n"
          " * %s; int8 LSTM weights (%lld bytes%s), cell scales %s. Layer k is %s_l<k>_..., Dense layer j\n"
          " * %s_fc<j>_...; each layer reads the one before it, from LiteRT's initial state. docs/int8.md.\n"
          " *\n%s"
          " * Include it in one C file: the arrays are static. */\n"
          "#ifndef %s\n#define %s\n\n#include <rnncore/int8.h>\n\n",
          base_name(o.output).c_str(), D == 0 ? "" : " and Dense layers", version_string(),
          base_name(o.weights).c_str(), I, L, f.sizes.c_str(), D, O,
          e.sequences ? "returns every step" : "returns the last step", f.weight_bytes,
          o.interleave ? (o.interleave_i16 ? ", int16 panels" : ", interleaved") : "", f.cells.c_str(), name.c_str(), name.c_str(), usage.c_str(), guard.c_str(),
          guard.c_str());
  if (o.interleave) write_align_macro(out);
  appendf(out,
          "#define %s_INPUT_SIZE %lld\n#define %s_OUTPUT_SIZE %lld\n#define %s_LAYERS %zu\n#define %s_DENSE %zu\n"
          "/** 1: a softmax on the output (%s_softmax, after the Dense layers). */\n#define %s_SOFTMAX %d\n"
          "/** 1: the model's output is every step's [B, T, OUTPUT_SIZE]; 0: the last step's only. */\n"
          "#define %s_RETURN_SEQUENCES %d\n%s",
          NAME.c_str(), I, NAME.c_str(), O, NAME.c_str(), L, NAME.c_str(), D, name.c_str(),
          NAME.c_str(), e.softmax ? 1 : 0, NAME.c_str(), e.sequences ? 1 : 0, reverse.c_str());
  if (st.embedding.vocab_size > 0) write_int8_embedding(out, e, name, NAME);
  for (int k = 0; k < st.num_layers; ++k) write_int8_stack_layer(out, e, k, name, export_layout(o));
  for (int j = 0; j < e.dense; ++j)
    write_int8_dense(out, e, j, name + "_fc" + std::to_string(j), NAME + "_FC" + std::to_string(j));
  if (e.softmax) write_int8_softmax(out, e, name, NAME);
}

// The sample (input, token ids, expected output) and the header's end.
void write_int8_sample(std::string* out, const Int8Export& e, const std::string& name) {
  const std::string NAME = upper(name);
  const bool seq = e.sequences, single = e.single;
  if (!e.sample_in.empty()) {
    appendf(out,
            "\n/* A sample: input x [B, T, I] (batch-major)%s. */\n#define %s_SAMPLE_BATCH %lld\n"
            "#define %s_SAMPLE_STEPS %lld\n",
            e.sample_out.empty() ? ""
            : seq ? (single ? " and the expected output [B, T, H]" : " and the expected output [B, T, OUTPUT_SIZE]")
                  : (single ? " and the expected output [B, H] (the last step)"
                            : " and the expected output [B, OUTPUT_SIZE] (the last step)"),
            NAME.c_str(), static_cast<long long>(e.in_shape[0]), NAME.c_str(), static_cast<long long>(e.in_shape[1]));
    if (!e.sample_ids.empty()) {
      appendf(out, "/** The sample's token ids [B, T]; %s_sample_input holds their rows. */\n", name.c_str());
      write_array(out, "static const int32_t " + name + "_sample_ids", e.sample_ids.data(), e.sample_ids.size(), {}, 16);
    }
    write_array(out, "static const int8_t " + name + "_sample_input", e.sample_in.data(), e.sample_in.size(), {}, 16);
    if (!e.sample_out.empty())
      write_array(out, "static const int8_t " + name + "_sample_output", e.sample_out.data(), e.sample_out.size(), {}, 16);
  }
}

// RNNCORE_PACKED_ALIGN (once per program) and the little-endian check of NAME_packed.
void write_packed_align(std::string* out, const std::string& name) {
  appendf(out,
          "/* The packed weights must be RNNCORE_ALIGNMENT-aligned: this asks the compiler; elsewhere define\n"
          " * RNNCORE_PACKED_ALIGN yourself (a declaration specifier aligning to 64 bytes). */\n"
          "#ifndef RNNCORE_PACKED_ALIGN\n"
          "#if defined(__GNUC__) || defined(__clang__) || defined(__ARMCC_VERSION)\n"
          "#define RNNCORE_PACKED_ALIGN __attribute__((aligned(RNNCORE_ALIGNMENT)))\n"
          "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
          "#define RNNCORE_PACKED_ALIGN _Alignas(RNNCORE_ALIGNMENT)\n"
          "#elif defined(_MSC_VER)\n"
          "#define RNNCORE_PACKED_ALIGN __declspec(align(64))\n"
          "#else\n"
          "#error \"define RNNCORE_PACKED_ALIGN to align an object to RNNCORE_ALIGNMENT bytes with this compiler\"\n"
          "#endif\n"
          "#endif\n"
          "#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__\n"
          "#error \"%s_packed holds little-endian header words: export-c writes for little-endian targets\"\n"
          "#endif\n\n",
          name.c_str());
}

// "{scale, zero_point}" of a quantization.
std::string quant_init(const QuantParams& q) {
  return "{" + float_literal(q.scale) + ", " + std::to_string(q.zero_point) + "}";
}

std::string floats_init(const float* v, int n) {
  std::string r = "{";
  for (int i = 0; i < n; ++i) r += (i > 0 ? ", " : "") + float_literal(v[i]);
  return r + "}";
}

// The integer stack as a rnncore_stack_spec initializer (int8 rows or token ids in, int8 out).
void write_int8_stack_spec(std::string* out, const std::string& name, const StackSpec& st) {
  static const char* const kActivations[] = {"RNNCORE_ACTIVATION_NONE", "RNNCORE_ACTIVATION_RELU", "RNNCORE_ACTIVATION_SIGMOID",
                                             "RNNCORE_ACTIVATION_TANH", "RNNCORE_ACTIVATION_SOFTMAX"};
  static const char* const kMerges[] = {"RNNCORE_MERGE_CONCAT", "RNNCORE_MERGE_SUM", "RNNCORE_MERGE_MUL", "RNNCORE_MERGE_AVE"};
  std::string layers;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    layers += "        {\n            .mode = " + std::string(mode_enum(ls.mode)) +
              ",\n            .hidden_size = " + std::to_string(ls.hidden_size) + ",\n            .direction = " +
              (num_directions(ls) == 2 ? "RNNCORE_BIDIRECTIONAL" : "RNNCORE_UNIDIRECTIONAL") + ",\n            .int8 = {\n";
    for (int d = 0; d < num_directions(ls); ++d) {
      const Int8LstmQuant& q = ls.int8[d];
      layers += "                {\n                    .w_scale = " + floats_init(q.w_scale, 4) +
                ",\n                    .r_scale = " + floats_init(q.r_scale, 4) + ",\n                    .per_channel = " +
                std::to_string(q.per_channel ? 1 : 0) + ",\n                    .state = " + quant_init(q.state) +
                ",\n                    .hidden = " + quant_init(q.hidden) + ",\n                    .cell_scale = " +
                float_literal(q.cell_scale) + ",\n                    .cell_clip = " + float_literal(q.cell_clip) +
                ",\n                },\n";
    }
    const Int8Merge& m = ls.merge;
    layers += "            },\n            .merge = {" + std::string(kMerges[static_cast<int>(m.mode)]) + ", " + quant_init(m.fw) +
              ", " + quant_init(m.bw) + ", " + quant_init(m.sum) + ", " + quant_init(m.half) + ", " +
              std::to_string(m.half_value) + "},\n            .int8_output = " + quant_init(ls.int8_output) + ",\n        },\n";
  }
  std::string chain;  // the Dense layers before the head
  for (int k = 0; k < st.num_pre_head; ++k) {
    const DenseSpec& d = st.pre_head[k];
    chain += "        {\n            .out_features = " + std::to_string(d.out_features) + ",\n            .activation = " +
             kActivations[static_cast<int>(d.activation)] + ",\n            .int8_per_channel = " +
             std::to_string(d.int8_per_channel ? 1 : 0) + ",\n            .int8_w_scale = " + float_literal(d.int8_w_scale) +
             ",\n            .int8_linear = " + quant_init(d.int8_linear) + ",\n            .int8_output = " +
             quant_init(d.int8_output) + ",\n        },\n";
  }
  if (st.num_pre_head > 0)
    chain = "    .num_pre_head = " + std::to_string(st.num_pre_head) + ",\n    .pre_head = {\n" + chain + "    },\n";
  const DenseSpec& h = st.head;
  appendf(out,
          "/** The whole network as one integer stack (C99 designated initializers: fields not named are 0,\n"
          " * as after rnncore_stack_init); x int8 [B, T, %s_INPUT_SIZE]%s, y int8, either layout:\n"
          " * rnncore_plan_create_stack(&%s_stack, ...), then rnncore_forward on &%s_packed. */\n"
          "static const rnncore_stack_spec %s_stack = {\n"
          "    .input_size = %d,\n    .dtype = RNNCORE_I8,\n    .num_layers = %d,\n    .layers = {\n%s    },\n"
          "    .embedding_vocab_size = %d,\n    .head_out_features = %d,\n    .head_activation = %s,\n"
          "    .head_last_step_only = %d,\n    .input_quant = %s,\n    .head_int8_per_channel = %d,\n"
          "    .head_int8_w_scale = %s,\n    .head_int8_linear = %s,\n    .head_int8_output = %s,\n"
          "    .head_int8_softmax_beta = %s,\n%s%s};\n\n",
          upper(name).c_str(), st.embedding.vocab_size > 0 ? " (int32 token ids [B, T] with the Embedding)" : "",
          name.c_str(), name.c_str(), name.c_str(), st.input_size, st.num_layers, layers.c_str(), st.embedding.vocab_size,
          h.out_features, kActivations[static_cast<int>(h.activation)], h.last_step_only ? 1 : 0,
          quant_init(st.input_quant).c_str(), h.int8_per_channel ? 1 : 0, float_literal(h.int8_w_scale).c_str(),
          quant_init(h.int8_linear).c_str(), quant_init(h.int8_output).c_str(), float_literal(h.int8_softmax_beta).c_str(),
          chain.c_str(), st.reverse_input ? "    .reverse_input = 1,\n" : "");
}

// NAME_plan (--plan): `plan`, the stack as this library plans it, as a const rnncore_plan (a plan
// holds no pointer of its own: PlanImpl). Its bytes are this build's (pointer width, max_layers,
// training, the kernel registry's order), so the header holds it only for a program whose
// rnncore.h agrees on the first three, and it must link a library of the same build.
void write_const_plan(std::string* out, const std::string& name, const Plan& plan, const PlanOptions& po) {
  // The plan's bytes with its padding zeroed (a copy of the spec carries whatever its padding held),
  // so that the header is the same on every run.
  std::vector<unsigned char> storage(Plan::kStorageBytes, 0);
  detail::PlanImpl clean = detail::impl(plan);
#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
  __builtin_clear_padding(&clean);
#endif
#endif
  std::memcpy(storage.data(), &clean, sizeof clean);
  const unsigned char* bytes = storage.data();
  std::size_t n = Plan::kStorageBytes;
  while (n > 1 && bytes[n - 1] == 0) --n;  // C zero-fills the rest of the initializer
  const std::string NAME = upper(name);
  appendf(out,
          "/** %s_stack planned by the library that wrote this header (max_batch %d, max_seq_len %d, the\n"
          " * portable kernels %s, the layout of %s_packed), as a const value: rnncore_forward(&%s_plan,\n"
          " * %s_packed, ...) needs no rnncore_plan_create_stack and no RAM for the plan. Its bytes are that\n"
          " * library's build's: %s_HAS_PLAN is 1 only where rnncore.h has the same plan size, layer limit,\n"
          " * training and pointer width, and the program must link a library of that build. */\n"
          "#if RNNCORE_PLAN_BYTES == %zu && RNNCORE_MAX_LAYERS == %d && RNNCORE_TRAINING == %d && UINTPTR_MAX == %s\n"
          "#define %s_HAS_PLAN 1\n"
          "static const rnncore_plan %s_plan = {{\n",
          name.c_str(), po.max_batch, po.max_seq_len, plan.kernel_name(), name.c_str(), name.c_str(), name.c_str(),
          NAME.c_str(), Plan::kStorageBytes, RNNCORE_MAX_LAYERS, RNNCORE_TRAINING,
          sizeof(void*) == 8 ? "0xFFFFFFFFFFFFFFFFu" : "0xFFFFFFFFu", NAME.c_str(), name.c_str());
  write_values(out, bytes, n, {}, 16, "  ");
  appendf(out, "}};\n#else\n#define %s_HAS_PLAN 0\n#endif\n", NAME.c_str());
}

// NAME_stack and NAME_packed: the weights packed by the library's own pack_weights for the family
// of --interleave (interleaved panels, the Cortex-M DSP kernel's) or row-major (every other
// kernel), for the one-call C API with no pack step (a go_backwards model's with reverse_input).
Status write_int8_plan_arrays(std::string* out, const ExportCOptions& o, const Int8Export& e, std::string* summary,
                              std::string* error) {
  StackSpec st = e.st;
  st.float_input = false;
  st.float_output = false;
  PlanOptions po;
  po.max_isa = Isa::none;
  po.max_batch = e.in_shape.empty() ? 1 : static_cast<std::int32_t>(e.in_shape[0]);
  po.max_seq_len = e.in_shape.empty() ? 1 : static_cast<std::int32_t>(e.in_shape[1]);
  po.int8_weights = o.interleave ? (o.interleave_i16 ? Int8Weights::interleaved_i16 : Int8Weights::interleaved)
                                 : Int8Weights::row_major;
  po.int8_token_table = o.token_table;
  Plan plan;
  Status s = Plan::create(st, po, &plan);
  const std::size_t bytes = s == Status::ok ? plan.packed_weight_bytes() : 0;
  std::vector<unsigned char> buffer(bytes + kAlignment);
  unsigned char* at = buffer.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(buffer.data()) % kAlignment) % kAlignment;
  if (s == Status::ok) s = plan.pack_weights(e.canonical.data(), at, bytes);
  if (s != Status::ok) {
    if (o.token_table) return fail(error, std::string("--token-table: ") + last_error_detail(), s);
    return fail(error, o.weights + ": packing the integer stack: " + last_error_detail(), s);
  }
  const std::string NAME = upper(o.name),
                    family = o.interleave ? (o.interleave_i16 ? "int16 panels" : "interleaved") : "row-major";
  appendf(out,
          "\n/* ---- The one-call C API (rnncore/rnncore.h): the stack and its weights packed, in flash ---- */\n"
          "#include \"rnncore/rnncore.h\"\n\n");
  write_int8_stack_spec(out, o.name, st);
  write_packed_align(out, o.name);
  if (o.token_table)
    appendf(out,
            "/** Layer 0's input weights and the Embedding's table are packed as token tables ([vocab][4H] int16:\n"
            " * each token's input parts of the gates): plan with int8_token_table = 1. */\n"
            "#define %s_TOKEN_TABLE 1\n",
            NAME.c_str());
  appendf(out,
          "/** The packed LSTM weights' layout: %s (RNNCORE_INT8_WEIGHTS_PACKED_%s; %s). A plan of\n"
          " * the other layout refuses %s_packed, saying which rnncore_plan_options.int8_weights matches. */\n"
          "#define %s_KERNEL_FAMILY \"%s\"\n"
          "/** sizeof %s_packed; %s_WORKSPACE_BYTES: rnncore_plan_workspace_bytes of a plan for max_batch\n"
          " * %d, max_seq_len %d (one thread): all the RAM a run takes besides x, y and the plan. */\n"
          "#define %s_PACKED_BYTES %zu\n#define %s_WORKSPACE_BYTES %zu\n",
          family.c_str(), o.interleave ? (o.interleave_i16 ? "INTERLEAVED_I16" : "INTERLEAVED") : "ROW_MAJOR",
          o.interleave ? "the Cortex-M DSP kernel's; elsewhere the portable panel kernel runs it"
                       : "every row kernel's; on a Cortex-M with the DSP extension plan RNNCORE_INT8_WEIGHTS_PACKED_ROW_MAJOR",
          o.name.c_str(), NAME.c_str(), plan.kernel_name(), o.name.c_str(), NAME.c_str(), po.max_batch, po.max_seq_len,
          NAME.c_str(), bytes, NAME.c_str(), plan.workspace_bytes());
  appendf(out,
          "/** The weights packed for %s_KERNEL_FAMILY by pack_weights (its header, then each LSTM direction's\n"
          " * prepared parameters as 32-bit words and offsets, W, R, the folded biases, then the ends), read\n"
          " * in place by rnncore_forward: no rnncore_plan_pack_weights and no RAM for weights. */\n",
          NAME.c_str());
  write_array(out, "static RNNCORE_PACKED_ALIGN const uint8_t " + o.name + "_packed", at, bytes, {}, 16);
  if (o.plan) write_const_plan(out, o.name, plan, po);
  *summary = "; " + o.name + "_packed (" + family + (o.token_table ? ", token tables" : "") + ") " + std::to_string(bytes) + " bytes, workspace " +
             std::to_string(plan.workspace_bytes()) + " bytes";
  return Status::ok;
}

Status export_int8(const ExportCOptions& o, const SafeTensors& file, std::string* out, ExportCReport* report,
                   std::string* error) {
  Int8Export e;
  const Status s = load_int8_export(o, file, &e, report, error);
  if (s != Status::ok) return s;
  const StackSpec& st = e.st;
  const std::string& name = o.name;
  const std::string NAME = upper(name);
  const Int8Facts f = int8_facts(e, export_layout(o));
  const std::string reverse =
      st.reverse_input ? "/** The model reverses the time axis first (Keras go_backwards): run its steps last to first. */\n"
                         "#define " + NAME + "_REVERSE_INPUT 1\n"
                       : std::string();
  const std::string usage =
      st.embedding.vocab_size == 0 ? std::string()
                        : " * The model starts with an Embedding: its input is token ids [B, T]; copy each id's row of\n"
                          " * " + name + "_embedding_table (" + NAME + "_EMBEDDING_DIM bytes) into the first layer's input\n"
                          " * [B, T, " + NAME + "_INPUT_SIZE], refusing ids outside [0, " + NAME + "_EMBEDDING_VOCAB).\n *\n";
  out->clear();
  if (e.single)
    write_int8_single(out, o, e, name, f, usage, reverse);
  else
    write_int8_stack(out, o, e, name, f, usage, reverse);
  write_int8_sample(out, e, name);
  std::string packed_summary;
  const Status ps = write_int8_plan_arrays(out, o, e, &packed_summary, error);
  if (ps != Status::ok) return ps;
  appendf(out, "\n#endif /* RNNCORE_EXPORT_%s_H */\n", NAME.c_str());
  std::size_t folded = 0;
  bool per_channel = false;
  for (int l = 0; l < st.num_layers; ++l) {  // the forward directions'
    const Int8Dir m = int8_dir(e, l, 0);
    folded += 4 * m.storage_words();
    per_channel |= q8::int8_lstm_per_channel(m.q);
  }
  char b[512];
  std::snprintf(b, sizeof b, "int8 LSTM I=%lld H=%lld%s, weights %lld bytes%s, folded biases%s %zu bytes%s",
                static_cast<long long>(st.input_size), static_cast<long long>(e.output_size()),
                e.single ? "" : (", " + std::to_string(st.num_layers) + " LSTM and " + std::to_string(e.dense) +
                                 " Dense layer(s)").c_str(),
                f.weight_bytes, o.interleave ? (o.interleave_i16 ? ", int16 panels" : ", interleaved") : "", per_channel ? " and per-channel multipliers" : "",
                folded, e.sample_in.empty() ? "" : ", sample");
  report->summary = b + packed_summary;
  return Status::ok;
}

// ---- A float model ----

// The model, its sample and its plans' sizes.
struct FloatExport {
  LoadedModel model;
  std::vector<float> weights;
  std::vector<std::int64_t> in_shape, out_shape;
  std::vector<float> sample_in, sample_out;
  long long max_batch = 1, max_seq_len = 1;
  std::size_t packed = 0, workspace = 0, step_workspace = 0;
  std::string family;                 // the kernel family the weights are packed for (Plan::kernel_name)
  std::uint32_t packed_header[16] = {};  // the packed buffer's header, as 32-bit words (this machine's order)
  std::vector<float> packed_floats;   // the rest of the packed buffer: the reference family's canonical weights
};

// Loads the model (every layer layer 0's cell: the header holds one rnncore_spec) and the sample.
Status load_float_export(const ExportCOptions& o, FloatExport* e, ExportCReport* report, std::string* error) {
  Status s = load_weights(o.weights, o.hints, nullptr, &e->model, error);
  if (s != Status::ok) return s;
  const StackSpec& st = e->model.stack;
  if (st.embedding.vocab_size > 0 && !o.sample_input.empty())
    return option_fail(report, error,
                       "--sample-input: " + o.weights + " starts with an Embedding; a float header's sample of token ids is "
                       "not written yet (export it without a sample)");
  if (o.interleave)
    return option_fail(report, error,
                       "--interleave applies to int8 LSTM models (format tflite_int8) only; " + o.weights + " is a float model");
  if (o.token_table)
    return option_fail(report, error,
                       "--token-table applies to int8 LSTM models (format tflite_int8) only; " + o.weights + " is a float model");
  if (const std::string refused = inapplicable_hint(o.hints, e->model.stack); !refused.empty())
    return option_fail(report, error, refused + " (" + o.weights + ")");
  report->notes = e->model.notes;
  const RnnSpec& spec = e->model.spec;
  // The header holds one rnncore_spec: every layer must be layer 0's cell (a file whose layers clip
  // differently, or a --config stack, needs a StackSpec the C header cannot carry yet).
  const StackSpec uniform = to_stack(spec);
  for (int l = 0; l < e->model.stack.num_layers; ++l) {
    const LayerSpec &a = e->model.stack.layers[l], &b = uniform.layers[l];
    if (a.hidden_size != b.hidden_size || a.proj_size != b.proj_size || a.peepholes != b.peepholes ||
        a.cell_clip != b.cell_clip || a.proj_clip != b.proj_clip)
      return fail(error,
                  o.weights + ": layer " + std::to_string(l) +
                      " differs from layer 0 (size, projection, peepholes or clips); export-c writes one rnncore_spec for "
                      "every layer",
                  Status::unsupported);
  }
  const std::int64_t D = num_directions(spec), O = spec.proj_size > 0 ? spec.proj_size : spec.hidden_size;
  e->weights.resize(e->model.canonical.size() / sizeof(float));
  std::copy(e->model.canonical.begin(), e->model.canonical.end(), reinterpret_cast<unsigned char*>(e->weights.data()));
  if (!all_finite(e->weights)) return fail(error, o.weights + ": the weights hold an infinity or NaN");
  std::string err;
  if (!o.sample_input.empty() && !read_sample(o.sample_input, spec.input_size, "input", &e->in_shape, &e->sample_in, &err))
    return fail(error, err);
  const std::int64_t width = st.head.out_features > 0 ? st.head.out_features : D * O;
  if (!o.sample_output.empty() && st.head.last_step_only) {  // a head on the last step: [B, F]
    if (!read_rows_sample(o.sample_output, width, &e->out_shape, &e->sample_out, &err)) return fail(error, err);
    if (!e->in_shape.empty() && e->out_shape[0] != e->in_shape[1])
      return fail(error, o.sample_output + ": expected " + std::to_string(e->in_shape[1]) + " rows (B of the sample input), found " +
                             std::to_string(e->out_shape[0]));
  } else if (!o.sample_output.empty()) {
    if (!read_sample(o.sample_output, width, "output", &e->out_shape, &e->sample_out, &err)) return fail(error, err);
    const std::vector<std::int64_t>& in = e->in_shape;
    if (e->out_shape[0] != in[0] || e->out_shape[1] != in[1])
      return fail(error, o.sample_output + ": expected shape " +
                             shape_to_string(std::vector<std::int64_t>{in[0], in[1], width}.data(), 3) +
                             " (T and B of the sample input), found " + shape_to_string(e->out_shape.data(), 3));
  }
  if (!all_finite(e->sample_in) || !all_finite(e->sample_out)) return fail(error, "the sample holds an infinity or NaN");
  return Status::ok;
}

// The sizes firmware must reserve: plans on the portable scalar path (no SIMD kernels), the one a
// Cortex-M build runs. A build with SIMD kernels asks rnncore_plan_*_bytes at start-up.
Status plan_float_export(const ExportCOptions& o, FloatExport* e, ExportCReport* report, std::string* error) {
  const std::vector<std::int64_t>& in = e->in_shape;
  e->max_batch = o.max_batch > 0 ? o.max_batch : in.empty() ? 1 : std::max<std::int64_t>(in[1], 1);
  e->max_seq_len = o.max_seq_len > 0 ? o.max_seq_len : in.empty() ? 1 : std::max<std::int64_t>(in[0], 1);
  if (!in.empty() && (in[1] > e->max_batch || in[0] > e->max_seq_len))
    return option_fail(report, error, "the sample [T=" + std::to_string(in[0]) + ", B=" + std::to_string(in[1]) +
                                          "] exceeds --max-seq-len / --max-batch");
  PlanOptions opt;
  opt.max_batch = static_cast<std::int32_t>(e->max_batch);
  opt.max_seq_len = static_cast<std::int32_t>(e->max_seq_len);
  opt.max_isa = Isa::none;
  Plan whole, step;
  const StackSpec& st = e->model.stack;  // with its ends; else the uniform spec (as ever)
  const bool ends = st.embedding.vocab_size > 0 || st.head.out_features > 0;
  Status s = ends ? Plan::create(st, opt, &whole) : Plan::create(e->model.spec, opt, &whole);
  if (s == Status::ok) {
    opt.max_seq_len = 1;
    s = ends ? Plan::create(st, opt, &step) : Plan::create(e->model.spec, opt, &step);
  }
  if (s != Status::ok) return fail(error, o.weights + ": " + last_error_detail(), s);
  e->packed = whole.packed_weight_bytes();
  e->workspace = whole.workspace_bytes();
  e->step_workspace = step.workspace_bytes();
  e->family = whole.kernel_name();
  // The header's packed array is pack_weights' own output: the header words, then (the reference
  // family's layout) the canonical floats, zero-padded to a multiple of RNNCORE_ALIGNMENT.
  const std::size_t header_bytes = sizeof e->packed_header, floats = e->weights.size();
  if (whole.backend() != Backend::reference || step.packed_weight_bytes() != e->packed ||
      e->packed != round_up(header_bytes + floats * sizeof(float), kAlignment))
    return fail(error, o.weights + ": export-c writes the reference family's packed layout; the plan has another (" +
                           e->family + ", " + std::to_string(e->packed) + " bytes)",
                Status::unsupported);
  std::vector<unsigned char> buffer(e->packed + kAlignment);
  unsigned char* at = buffer.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(buffer.data()) % kAlignment) % kAlignment;
  s = whole.pack_weights(e->weights.data(), at, e->packed);
  if (s != Status::ok) return fail(error, o.weights + ": " + last_error_detail(), s);
  std::memcpy(e->packed_header, at, header_bytes);
  e->packed_floats.resize((e->packed - header_bytes) / sizeof(float));
  std::memcpy(e->packed_floats.data(), at + header_bytes, e->packed - header_bytes);
  if (std::memcmp(e->packed_floats.data(), e->weights.data(), floats * sizeof(float)) != 0)
    return fail(error, o.weights + ": the packed weights of " + e->family + " are not the canonical ones", Status::unsupported);
  return Status::ok;
}

// The header's comment and size macros.
void write_float_sizes(std::string* out, const ExportCOptions& o, const FloatExport& e) {
  const RnnSpec& spec = e.model.spec;
  const std::string& name = o.name;
  const std::string NAME = upper(name), guard = "RNNCORE_EXPORT_" + NAME + "_H";
  const long long L = spec.num_layers, D = num_directions(spec), H = spec.hidden_size, I = spec.input_size;
  const long long O = spec.proj_size > 0 ? spec.proj_size : H;  // units of h and of the output per direction
  appendf(out,
          "/* %s: a recurrent network compiled into the program, for rnncore's C API.\n"
          " * Generated by `rnncore export-c` (rnncore %s) from %s; do not edit, export again.\n"
          " * %s%s, %lld layer(s), %s, input %lld, hidden %lld (%s weights, prefix '%s').\n"
          " *\n"
          " * Include it in one C file: the arrays are static. */\n"
          "#ifndef %s\n#define %s\n\n#include <rnncore/rnncore.h>\n\n",
          base_name(o.output).c_str(), version_string(), base_name(o.weights).c_str(), to_string(spec.mode),
          spec.mode == Mode::gru ? (std::string(" ") + to_string(spec.gru_variant)).c_str() : "", L,
          D == 2 ? "bidirectional" : "unidirectional", I, H, to_string(e.model.format), e.model.prefix.c_str(),
          guard.c_str(), guard.c_str());
  appendf(out,
          "#define %s_INPUT_SIZE %lld\n#define %s_HIDDEN_SIZE %lld\n#define %s_NUM_LAYERS %lld\n"
          "#define %s_NUM_DIRECTIONS %lld\n"
          "/** Floats of one output row (D*H) and of one batch row of the state h or c (L*D*H); with a\n"
          " * projection P replaces H in both, and c has CELL_STATE_SIZE. */\n"
          "#define %s_OUTPUT_SIZE %lld\n#define %s_STATE_SIZE %lld\n"
          "#define %s_PARAM_COUNT %zu\n\n",
          NAME.c_str(), I, NAME.c_str(), H, NAME.c_str(), L, NAME.c_str(), D, NAME.c_str(),
          static_cast<long long>(stack_output_size(e.model.stack)), NAME.c_str(), L * D * O, NAME.c_str(), e.weights.size());
  const StackSpec& st = e.model.stack;
  if (st.head.out_features > 0)
    appendf(out,
            "/** A Dense head after the last layer (%s): OUTPUT_SIZE is its features; y is %s. */\n"
            "#define %s_HEAD_OUT_FEATURES %d\n#define %s_HEAD_LAST_STEP_ONLY %d\n\n",
            to_string(st.head.activation), st.head.last_step_only ? "[B, F] (each row's last step)" : "[T, B, F]", NAME.c_str(),
            st.head.out_features, NAME.c_str(), st.head.last_step_only ? 1 : 0);
  if (st.embedding.vocab_size > 0)
    appendf(out, "/** An Embedding before layer 0: x is int32 token ids [T, B], each below the vocabulary. */\n"
                 "#define %s_EMBEDDING_VOCAB %d\n\n", NAME.c_str(), st.embedding.vocab_size);
  if (O != H)
    appendf(out,
            "/** With the projection, h has %s_PROJ_SIZE units and c keeps the hidden size: floats of one\n"
            " * batch row of c (L*D*H). */\n#define %s_PROJ_SIZE %lld\n#define %s_CELL_STATE_SIZE %lld\n\n",
            NAME.c_str(), NAME.c_str(), O, NAME.c_str(), L * D * H);
  // A bidirectional network cannot stream: its reverse direction starts at the sequence's last step,
  // so a step-at-a-time plan would run every step as a sequence of its own. No step size for it.
  const bool streams = D == 1;
  appendf(out,
          "/* The kernel family the weights below are packed for: the portable scalar path, which every build\n"
          " * without SIMD kernels runs (e.g. Cortex-M), and a host's plans with max_isa = RNNCORE_ISA_NONE.\n"
          " * A plan of another family (rnncore_plan_kernel_name) refuses %s_packed. */\n"
          "#define %s_KERNEL_FAMILY \"%s\"\n#define %s_MAX_ISA RNNCORE_ISA_NONE\n",
          name.c_str(), NAME.c_str(), e.family.c_str(), NAME.c_str());
  appendf(out,
          "/* Exact sizes for that family: a plan for max_batch %lld and max_seq_len %lld%s\n"
          " * PACKED_BYTES is sizeof %s_packed (flash); the workspace is all the RAM a run takes besides\n"
          " * the state (RNNCORE_ALIGNMENT-aligned). */\n"
          "#define %s_MAX_BATCH %lld\n#define %s_MAX_SEQ_LEN %lld\n#define %s_PACKED_BYTES %zu\n"
          "#define %s_WORKSPACE_BYTES %zu\n",
          e.max_batch, e.max_seq_len,
          streams ? ",\n * and a streaming plan (max_seq_len 1) that runs on the same packed weights."
                  : "\n * (no streaming plan: the network is bidirectional).",
          name.c_str(), NAME.c_str(), e.max_batch, NAME.c_str(), e.max_seq_len, NAME.c_str(), e.packed, NAME.c_str(),
          e.workspace);
  if (streams)
    appendf(out, "#define %s_STEP_WORKSPACE_BYTES %zu\n", NAME.c_str(), e.step_workspace);
  else
    appendf(out,
            "/* No %s_STEP_WORKSPACE_BYTES: the network is bidirectional and cannot stream (its reverse\n"
            " * direction starts at the last step, so the sequence cannot be fed a step at a time); run\n"
            " * whole sequences of up to %s_MAX_SEQ_LEN steps with %s_WORKSPACE_BYTES. */\n",
            NAME.c_str(), NAME.c_str(), NAME.c_str());
  appendf(out, "\n");
}

// The packed weights as one const object: pack_weights' header words, then the floats. Little-endian
// words: the header holds 64-bit fields, so a big-endian target is refused at compile time.
void write_packed(std::string* out, const std::string& name, const FloatExport& e) {
  const std::string NAME = upper(name);
  write_packed_align(out, name);
  appendf(out,
          "/** The weights packed for %s (%s_KERNEL_FAMILY), read in place by rnncore_forward:\n"
          " * no rnncore_plan_pack_weights and no RAM for weights (pass &%s_packed as `packed`). First\n"
          " * pack_weights' header (magic, layout fingerprint, kernel family, ISA), then this family's layout:\n"
          " * the canonical weights (cuDNN order: per layer and direction W_k, R_k, bW_k, bR_k%s),\n"
          " * zero-padded to PACKED_BYTES. A plan of another family (e.g. a host's SIMD kernels) packs\n"
          " * %s_CANONICAL_WEIGHTS into a buffer of its own. */\n"
          "static RNNCORE_PACKED_ALIGN const struct {\n  uint32_t header[%zu];\n  float weights[%zu];\n} %s_packed = {\n"
          "  {\n",
          e.family.c_str(), NAME.c_str(), name.c_str(),
          e.model.spec.proj_size > 0 || e.model.spec.peepholes ? ", then the peepholes and W_proj" : "", NAME.c_str(),
          sizeof e.packed_header / sizeof e.packed_header[0], e.packed_floats.size(), name.c_str());
  for (std::size_t i = 0; i < sizeof e.packed_header / sizeof e.packed_header[0]; ++i)
    appendf(out, "%s0x%08lx,%s", i % 8 == 0 ? "    " : " ", static_cast<unsigned long>(e.packed_header[i]),
            i % 8 == 7 ? "\n" : "");
  appendf(out, "  },\n");
  std::vector<std::pair<std::size_t, std::string>> marks = canonical_marks(e.model.spec);
  if (e.packed_floats.size() > e.weights.size()) marks.emplace_back(e.weights.size(), "padding to RNNCORE_ALIGNMENT");
  appendf(out, "  {\n");
  write_values(out, e.packed_floats.data(), e.packed_floats.size(), marks, 8, "    ");
  appendf(out,
          "  },\n};\n/** The canonical weights (%s_PARAM_COUNT floats): for rnncore_plan_pack_weights of another family. */\n"
          "#define %s_CANONICAL_WEIGHTS (%s_packed.weights)\n\n",
          NAME.c_str(), NAME.c_str(), name.c_str());
}

// A network with an Embedding or a Dense head: a rnncore_stack_spec (rnncore_plan_create_stack),
// every layer layer 0's cell, and the ends.
void write_stack_spec(std::string* out, const std::string& name, const FloatExport& e) {
  const RnnSpec& spec = e.model.spec;
  const StackSpec& st = e.model.stack;
  std::string layer = "        {\n            .mode = " + std::string(mode_enum(spec.mode)) + ",\n            .gru_variant = " +
                      (spec.gru_variant == GruVariant::reset_before ? "RNNCORE_GRU_RESET_BEFORE" : "RNNCORE_GRU_RESET_AFTER") +
                      ",\n            .hidden_size = " + std::to_string(spec.hidden_size) + ",\n            .direction = " +
                      (num_directions(spec) == 2 ? "RNNCORE_BIDIRECTIONAL" : "RNNCORE_UNIDIRECTIONAL") + ",\n";
  const std::string ext = extension_fields(spec);  // "    .field = v,\n" lines
  for (std::size_t at = 0; at < ext.size();) {
    const std::size_t end = ext.find('\n', at);
    layer += "        " + ext.substr(at, end - at + 1);
    at = end + 1;
  }
  layer += "        },\n";
  std::string layers;
  for (int l = 0; l < st.num_layers; ++l) layers += layer;
  static const char* const kActivations[] = {"RNNCORE_ACTIVATION_NONE", "RNNCORE_ACTIVATION_RELU", "RNNCORE_ACTIVATION_SIGMOID",
                                             "RNNCORE_ACTIVATION_TANH", "RNNCORE_ACTIVATION_SOFTMAX"};
  appendf(out,
          "/** The network with its ends (C99 designated initializers: fields not named are 0, as after\n"
          " * rnncore_stack_init): plan it with rnncore_plan_create_stack(&%s_stack, ...). */\n"
          "static const rnncore_stack_spec %s_stack = {\n"
          "    .input_size = %lld,\n    .input_mode = %s,\n    .dtype = RNNCORE_F32,\n    .num_layers = %d,\n"
          "    .layers = {\n%s    },\n"
          "    .embedding_vocab_size = %d,\n    .head_out_features = %d,\n    .head_activation = %s,\n"
          "    .head_last_step_only = %d,\n};\n\n",
          name.c_str(), name.c_str(), static_cast<long long>(spec.input_size), input_mode_enum(spec.input_mode), st.num_layers,
          layers.c_str(), st.embedding.vocab_size, st.head.out_features, kActivations[static_cast<int>(st.head.activation)],
          st.head.last_step_only ? 1 : 0);
}

// The spec, the weights and the sample.
void write_float_arrays(std::string* out, const ExportCOptions& o, const FloatExport& e) {
  const RnnSpec& spec = e.model.spec;
  const std::string& name = o.name;
  const std::string NAME = upper(name);
  const StackSpec& st = e.model.stack;
  if (st.embedding.vocab_size > 0 || st.head.out_features > 0) {
    write_stack_spec(out, name, e);
  } else {
  appendf(out,
          "/** The network (C99 designated initializers: fields not named are 0, as after rnncore_spec_init). */\n"
          "static const rnncore_spec %s_spec = {\n"
          "    .mode = %s,\n    .gru_variant = %s,\n    .input_size = %lld,\n    .hidden_size = %lld,\n"
          "    .num_layers = %lld,\n    .direction = %s,\n    .input_mode = %s,\n    .dtype = RNNCORE_F32,\n%s};\n\n",
          name.c_str(), mode_enum(spec.mode),
          spec.gru_variant == GruVariant::reset_before ? "RNNCORE_GRU_RESET_BEFORE" : "RNNCORE_GRU_RESET_AFTER",
          static_cast<long long>(spec.input_size), static_cast<long long>(spec.hidden_size),
          static_cast<long long>(spec.num_layers), num_directions(spec) == 2 ? "RNNCORE_BIDIRECTIONAL" : "RNNCORE_UNIDIRECTIONAL",
          input_mode_enum(spec.input_mode), extension_fields(spec).c_str());
  }
  write_packed(out, name, e);
  if (!e.sample_in.empty()) {
    appendf(out, "\n/* A sample: input [T, B, I] (time-major)%s. */\n#define %s_SAMPLE_STEPS %lld\n#define %s_SAMPLE_BATCH %lld\n",
            e.sample_out.empty() ? "" : st.head.out_features == 0 ? " and the expected output [T, B, D*H]"
            : st.head.last_step_only ? " and the expected output [B, F]" : " and the expected output [T, B, F]", NAME.c_str(),
            static_cast<long long>(e.in_shape[0]), NAME.c_str(), static_cast<long long>(e.in_shape[1]));
    write_array(out, "static const float " + name + "_sample_input", e.sample_in.data(), e.sample_in.size());
    if (!e.sample_out.empty())
      write_array(out, "static const float " + name + "_sample_output", e.sample_out.data(), e.sample_out.size());
  }
  appendf(out, "\n#endif /* RNNCORE_EXPORT_%s_H */\n", NAME.c_str());
}

Status export_float(const ExportCOptions& o, std::string* out, ExportCReport* report, std::string* error) {
  FloatExport e;
  Status s = load_float_export(o, &e, report, error);
  if (s == Status::ok) s = plan_float_export(o, &e, report, error);
  if (s != Status::ok) return s;
  out->clear();
  write_float_sizes(out, o, e);
  write_float_arrays(out, o, e);
  const std::string streaming = num_directions(e.model.spec) == 1 ? "streaming workspace " + std::to_string(e.step_workspace)
                                                                   : std::string("bidirectional: no streaming");
  char b[512];
  std::snprintf(b, sizeof b, "%s_packed for %s: %zu bytes (%zu weights)%s; workspace %zu bytes (%s)", o.name.c_str(),
                e.family.c_str(), e.packed, e.weights.size(), e.sample_in.empty() ? "" : ", sample", e.workspace,
                streaming.c_str());
  report->summary = b;
  return Status::ok;
}

}  // namespace

std::string c_identifier_from(const std::string& path) { return identifier_from(path); }

Status export_c(const ExportCOptions& options, std::string* header, ExportCReport* report, std::string* error) {
  *report = ExportCReport();
  if (!is_identifier(options.name))
    return option_fail(report, error, "--name must be a C identifier, got '" + options.name + "'");
  // An integer LSTM (format tflite_int8) has its own header: int8 arrays for rnncore/int8.h.
  SafeTensors file;
  if (read_safetensors(options.weights.c_str(), &file) == RNNCORE_OK && is_int8_model(file))
    return export_int8(options, file, header, report, error);
  return export_float(options, header, report, error);
}

}  // namespace io
}  // namespace rnncore

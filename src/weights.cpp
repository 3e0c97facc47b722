// Weight import and export: PyTorch, ONNX, Keras, TensorFlow (TF1 cells) and canonical layouts (docs/design.md §4,
// docs/weights.md).
//
// Every format is a list of tensors; each tensor element maps to one canonical element (or, for
// Keras' single folded bias, to the sum of two). Import and export walk the same map, so the two are
// inverse by construction.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "src/internal/error.hpp"
#include "src/shared/half.hpp"

namespace rnncore {
namespace {

// What a format tensor holds.
enum class Role {
  input_weight,      // [G·H, K] per direction (PyTorch), [D, G·H, K] (ONNX), [K, G·H] (Keras), [H, K] (canonical, one gate)
  recurrent_weight,  // same shapes with K = H
  input_bias,        // [G·H] (PyTorch), [H] (canonical, one gate)
  recurrent_bias,
  bias_pair,         // ONNX B [D, 2·G·H]; Keras reset-after GRU bias [2, G·H]: input half, then recurrent half
  bias_folded,       // Keras single bias [G·H]: bW + bR on export; bW (and bR = 0) on import
  stacked_kernel,    // TF1 cell kernel [K + O, n·H]: input rows (Wᵀ), then recurrent rows (Rᵀ)
  peephole,          // LSTM peepholes: [H] per gate (canonical, TF w_*_diag), ONNX P [D, 3·H] (i, o, f)
  projection,        // LSTM projection: [P, H] (canonical, PyTorch weight_hr), TF projection/kernel [H, P]
};

// One tensor of a format.
struct FormatTensor {
  char name[96] = {0};
  char alias[96] = {0};  // accepted on import too (may be empty)
  Shape shape;
  bool optional = false;
  Role role = Role::input_weight;
  int layer = 0;
  int dir = 0;               // -1: all directions along dim 0 (ONNX)
  int gate = -1;             // ≥ 0: canonical per-gate tensor; -1: all gates stacked in format order
  bool transposed = false;   // Keras: [K, G·H]
  const int* gate_map = nullptr;  // format gate index → canonical gate index
};

// Format gate order → canonical (LSTM i,f,g,o; GRU r,z,n).
constexpr int kIdentity[4] = {0, 1, 2, 3};
constexpr int kOnnxLstm[4] = {0, 3, 1, 2};  // ONNX i, o, f, c
constexpr int kZrh[3] = {1, 0, 2};          // ONNX / Keras GRU z, r, h
constexpr int kTfLstm[4] = {0, 2, 1, 3};    // TF1 LSTM i, j (candidate), f, o
constexpr int kTfGates[2] = {0, 1};         // TF1 GRU gates/: r, u (u is z: h' = u·h + (1 − u)·c)
constexpr int kTfCandidate[1] = {2};        // TF1 GRU candidate/: n
constexpr int kOnnxPeephole[3] = {0, 3, 1};  // ONNX P: i, o, f
constexpr int kPeepholeGates[3] = {0, 1, 3};  // canonical peephole order: i, f, o

// One tensor of a TF1 cell, relative to its scope `cell_{l}[/fw|/bw]/`.
struct TfPart {
  const char* name;
  Role role;
  int rows;  // 0: [n·H] (a bias), 1: [K + H, n·H], 2: [K, n·H], 3: [H, n·H]
  int gates;
  const int* gate_map;
};
constexpr TfPart kTfLstmParts[2] = {{"kernel", Role::stacked_kernel, 1, 4, kTfLstm},
                                    {"bias", Role::bias_folded, 0, 4, kTfLstm}};
constexpr TfPart kTfRnnParts[2] = {{"kernel", Role::stacked_kernel, 1, 1, kIdentity},
                                   {"bias", Role::bias_folded, 0, 1, kIdentity}};
// GRUCell (reset-before): the candidate's one bias is bW_n + bR_n, both outside r.
constexpr TfPart kTfGruParts[4] = {{"gates/kernel", Role::stacked_kernel, 1, 2, kTfGates},
                                   {"gates/bias", Role::bias_folded, 0, 2, kTfGates},
                                   {"candidate/kernel", Role::stacked_kernel, 1, 1, kTfCandidate},
                                   {"candidate/bias", Role::bias_folded, 0, 1, kTfCandidate}};
// CudnnCompatibleGRUCell (reset-after): the candidate keeps input and hidden projections apart.
constexpr TfPart kTfCudnnGruParts[6] = {
    {"gates/kernel", Role::stacked_kernel, 1, 2, kTfGates},
    {"gates/bias", Role::bias_folded, 0, 2, kTfGates},
    {"candidate/input_projection/kernel", Role::input_weight, 2, 1, kTfCandidate},
    {"candidate/input_projection/bias", Role::input_bias, 0, 1, kTfCandidate},
    {"candidate/hidden_projection/kernel", Role::recurrent_weight, 3, 1, kTfCandidate},
    {"candidate/hidden_projection/bias", Role::recurrent_bias, 0, 1, kTfCandidate}};

// The tensors of one direction of a TF1 cell; *n receives their count.
const TfPart* tf_parts(const LayerSpec& ls, int* n) {
  if (ls.mode != Mode::gru) {
    *n = 2;
    return ls.mode == Mode::lstm ? kTfLstmParts : kTfRnnParts;
  }
  const bool before = ls.gru_variant == GruVariant::reset_before;
  *n = before ? 4 : 6;
  return before ? kTfGruParts : kTfCudnnGruParts;
}

Shape shape_of(std::int64_t a, std::int64_t b = -1, std::int64_t c = -1) {
  Shape s;
  s.dims[s.ndim++] = a;
  if (b >= 0) s.dims[s.ndim++] = b;
  if (c >= 0) s.dims[s.ndim++] = c;
  return s;
}

bool skip_layer(const StackSpec& st, int layer) { return layer == 0 && uses_skip_input(st); }

// Tensors of one direction's LSTM extensions in per-direction formats: 3 peephole vectors, 1 projection.
int extension_tensors(const LayerSpec& ls) { return (ls.peepholes ? 3 : 0) + (ls.proj_size > 0 ? 1 : 0); }

// Extension tensor j (0..extension_tensors−1) of a direction: a peephole (gate i, f, o) or the projection.
void describe_extension(const LayerSpec& ls, int j, FormatTensor* t) {
  if (ls.peepholes && j < 3) {
    t->role = Role::peephole;
    t->gate = kPeepholeGates[j];
    t->shape = shape_of(ls.hidden_size);
    return;
  }
  t->role = Role::projection;
  t->gate = 0;
  t->shape = shape_of(ls.proj_size, ls.hidden_size);
}

// Tensors of one layer in a format.
int layer_tensor_count(const StackSpec& st, WeightFormat format, int l) {
  const int D = num_directions(st.layers[l]), G = num_gates(st.layers[l].mode);
  switch (format) {
    case WeightFormat::canonical: return D * (4 * G - (skip_layer(st, l) ? G : 0) + extension_tensors(st.layers[l]));
    case WeightFormat::pytorch: return D * (4 + extension_tensors(st.layers[l]));
    case WeightFormat::onnx: return st.layers[l].peepholes ? 4 : 3;
    case WeightFormat::keras: return D * 3;
    case WeightFormat::tensorflow: {
      int n = 0;
      tf_parts(st.layers[l], &n);
      return D * (n + extension_tensors(st.layers[l]));
    }
  }
  return 0;
}

// Number of tensors of a format; the stack is valid.
int tensor_count(const StackSpec& st, WeightFormat format) {
  int n = 0;
  for (int l = 0; l < st.num_layers; ++l) n += layer_tensor_count(st, format, l);
  return n;
}

Status describe(const StackSpec& st, WeightFormat format, int index, FormatTensor* t) {
  *t = FormatTensor{};
  t->gate = -1;
  t->gate_map = kIdentity;
  if (format != WeightFormat::canonical && uses_skip_input(st))
    return detail::fail_status(Status::unsupported,
                               "%s weights cannot express input_mode skip (layer 0 has no input weights); use the canonical format",
                               to_string(format));
  // Find the layer and the index i of the tensor within it.
  int l = 0, i = index;
  while (l < st.num_layers && i >= layer_tensor_count(st, format, l)) i -= layer_tensor_count(st, format, l++);
  if (l >= st.num_layers) return detail::fail_status(Status::invalid_enum, "tensor index %d out of range", index);
  const LayerSpec& ls = st.layers[l];
  const int L = st.num_layers, D = num_directions(ls), G = num_gates(ls.mode), H = ls.hidden_size, O = output_size(ls);
  const int K = layer_input_size(st, l);
  const std::int64_t GH = static_cast<std::int64_t>(G) * H;
  t->layer = l;
  switch (format) {
    case WeightFormat::canonical: {
      const int base = 4 * G - (skip_layer(st, l) ? G : 0), per_dir = base + extension_tensors(ls);
      const int d = i / per_dir, j = i % per_dir;
      t->dir = d;
      if (j >= base) {  // Pi, Pf, Po [H]; Wproj [P, H]
        describe_extension(ls, j - base, t);
        static const char* const kPeep[4] = {"Pi", "Pf", "", "Po"};
        std::snprintf(t->name, sizeof t->name, "%s_l%d%s", t->role == Role::projection ? "Wproj" : kPeep[t->gate], l,
                      d ? "_reverse" : "");
        return Status::ok;
      }
      const int part = j / G + (skip_layer(st, l) ? 1 : 0), g = j % G;  // skip layers start at R
      static const char* const kPart[4] = {"W", "R", "bW", "bR"};
      std::snprintf(t->name, sizeof t->name, "%s%d_l%d%s", kPart[part], g, l, d ? "_reverse" : "");
      t->role = part == 0 ? Role::input_weight : part == 1 ? Role::recurrent_weight
              : part == 2 ? Role::input_bias : Role::recurrent_bias;
      t->shape = part == 0 ? shape_of(H, K) : part == 1 ? shape_of(H, O) : shape_of(H);
      t->gate = g;
      return Status::ok;
    }
    case WeightFormat::pytorch: {  // weight_hr_l{l}: nn.LSTM(proj_size=P), [P, H]
      const int per_dir = 4 + extension_tensors(ls), d = i / per_dir, part = i % per_dir;
      static const char* const kPart[5] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"};
      std::snprintf(t->name, sizeof t->name, "%s_l%d%s", kPart[part], l, d ? "_reverse" : "");
      t->dir = d;
      if (part == 4) {
        describe_extension(ls, 0, t);
        return Status::ok;
      }
      t->shape = part < 2 ? shape_of(GH, part == 0 ? K : O) : shape_of(GH);
      t->role = part == 0 ? Role::input_weight : part == 1 ? Role::recurrent_weight
              : part == 2 ? Role::input_bias : Role::recurrent_bias;
      t->optional = part >= 2;  // nn.LSTM(bias=False)
      t->dir = d;
      return Status::ok;
    }
    case WeightFormat::onnx: {  // P [D, 3·H]: peepholes i, o, f (optional: absent means zeros)
      const int part = i;
      static const char* const kPart[4] = {"W", "R", "B", "P"};
      if (L == 1) {
        std::snprintf(t->name, sizeof t->name, "%s", kPart[part]);
        std::snprintf(t->alias, sizeof t->alias, "%s_l0", kPart[part]);
      } else {
        std::snprintf(t->name, sizeof t->name, "%s_l%d", kPart[part], l);
      }
      t->shape = part == 0 ? shape_of(D, GH, K) : part == 1 ? shape_of(D, GH, H) : part == 2 ? shape_of(D, 2 * GH)
                                                                                                : shape_of(D, 3 * H);
      t->role = part == 0 ? Role::input_weight : part == 1 ? Role::recurrent_weight
              : part == 2 ? Role::bias_pair : Role::peephole;
      t->optional = part >= 2;  // ONNX: B (P) absent means zero biases (peepholes)
      t->dir = -1;
      t->gate_map = part == 3 ? kOnnxPeephole : ls.mode == Mode::lstm ? kOnnxLstm : ls.mode == Mode::gru ? kZrh : kIdentity;
      return Status::ok;
    }
    case WeightFormat::keras: {
      const int d = i / 3, part = i % 3;
      static const char* const kPart[3] = {"kernel", "recurrent_kernel", "bias"};
      if (L == 1 && D == 1) {
        std::snprintf(t->name, sizeof t->name, "%s", kPart[part]);
        std::snprintf(t->alias, sizeof t->alias, "%s_l0", kPart[part]);
      } else {
        std::snprintf(t->name, sizeof t->name, "%s_l%d%s", kPart[part], l, d ? "_reverse" : "");
      }
      const bool pair = ls.mode == Mode::gru && ls.gru_variant == GruVariant::reset_after;
      t->shape = part == 0 ? shape_of(K, GH) : part == 1 ? shape_of(H, GH) : pair ? shape_of(2, GH) : shape_of(GH);
      t->role = part == 0 ? Role::input_weight : part == 1 ? Role::recurrent_weight
              : pair ? Role::bias_pair : Role::bias_folded;
      t->optional = part == 2;  // use_bias=False
      t->transposed = part < 2;
      t->dir = d;
      t->gate_map = ls.mode == Mode::gru ? kZrh : kIdentity;
      return Status::ok;
    }
    case WeightFormat::tensorflow: {
      int n = 0;
      const TfPart* parts = tf_parts(ls, &n);
      const int per_dir = n + extension_tensors(ls), d = i / per_dir, j = i % per_dir;
      const char* scope = D == 1 ? "" : d ? "/bw" : "/fw";
      t->dir = d;
      if (j >= n) {  // LSTMCell use_peepholes: w_i_diag, w_f_diag, w_o_diag [H]; num_proj: projection/kernel [H, P]
        describe_extension(ls, j - n, t);
        static const char* const kTfPeep[4] = {"w_i_diag", "w_f_diag", "", "w_o_diag"};
        std::snprintf(t->name, sizeof t->name, "cell_%d%s/%s", l, scope,
                      t->role == Role::projection ? "projection/kernel" : kTfPeep[t->gate]);
        if (t->role == Role::projection) t->shape = shape_of(H, ls.proj_size);
        t->transposed = t->role == Role::projection;
        return Status::ok;
      }
      const TfPart& p = parts[j];
      std::snprintf(t->name, sizeof t->name, "cell_%d%s/%s", l, scope, p.name);
      const std::int64_t cols = static_cast<std::int64_t>(p.gates) * H;
      t->shape = p.rows == 0 ? shape_of(cols) : shape_of(p.rows == 1 ? K + O : p.rows == 2 ? K : H, cols);
      t->role = p.role;
      t->transposed = p.rows != 0;
      t->dir = d;
      t->gate_map = p.gate_map;
      return Status::ok;
    }
  }
  return detail::fail_status(Status::invalid_enum, "tensor index %d out of range", index);
}

// Canonical offsets of tensor element e: `primary`, and `secondary` (≥ 0) for a folded bias.
struct ElementTarget {
  std::int64_t primary;
  std::int64_t secondary;
};

ElementTarget target_of(const StackSpec& spec, const FormatTensor& t, std::int64_t e) {
  const LayerSpec& ls = spec.layers[t.layer];
  const std::int64_t H = ls.hidden_size, O = output_size(ls), G = num_gates(ls.mode), GH = G * H;
  int dir = t.dir;
  if (dir < 0) {  // ONNX: leading direction dimension
    const std::int64_t per_dir = t.shape.elements() / t.shape.dims[0];
    dir = static_cast<int>(e / per_dir);
    e %= per_dir;
  }
  auto offset = [&](ParamKind kind, std::int64_t gate_in_format, std::int64_t inner) {
    const int g = t.gate >= 0 ? t.gate : t.gate_map[gate_in_format];
    return canonical_offset(spec, t.layer, dir, kind, g) + inner;
  };
  switch (t.role) {
    case Role::input_weight:
    case Role::recurrent_weight: {
      const ParamKind kind = t.role == Role::input_weight ? ParamKind::input_weight : ParamKind::recurrent_weight;
      const std::int64_t K = t.role == Role::input_weight ? layer_input_size(spec, t.layer) : O;
      if (t.gate >= 0) return {offset(kind, 0, e), -1};  // canonical [H, K]
      std::int64_t row, k;
      if (t.transposed) {  // Keras [K, G·H], TF [K, n·H]
        const std::int64_t cols = t.shape.dims[1];
        k = e / cols;
        row = e % cols;
      } else {  // [G·H, K]
        row = e / K;
        k = e % K;
      }
      return {offset(kind, row / H, (row % H) * K + k), -1};
    }
    case Role::input_bias:
    case Role::recurrent_bias: {
      const ParamKind kind = t.role == Role::input_bias ? ParamKind::input_bias : ParamKind::recurrent_bias;
      if (t.gate >= 0) return {offset(kind, 0, e), -1};
      return {offset(kind, e / H, e % H), -1};
    }
    case Role::bias_pair: {
      const ParamKind kind = e / GH == 0 ? ParamKind::input_bias : ParamKind::recurrent_bias;
      const std::int64_t col = e % GH;
      return {offset(kind, col / H, col % H), -1};
    }
    case Role::bias_folded:
      return {offset(ParamKind::input_bias, e / H, e % H), offset(ParamKind::recurrent_bias, e / H, e % H)};
    case Role::stacked_kernel: {
      const std::int64_t K = layer_input_size(spec, t.layer), cols = t.shape.dims[1];
      const std::int64_t row = e / cols, col = e % cols;
      if (row < K) return {offset(ParamKind::input_weight, col / H, (col % H) * K + row), -1};
      return {offset(ParamKind::recurrent_weight, col / H, (col % H) * O + (row - K)), -1};
    }
    case Role::peephole:  // one gate [H], or ONNX's [3·H] of one direction
      return {offset(ParamKind::peephole, e / H, e % H), -1};
    case Role::projection:  // [P, H], or TF's transpose [H, P]
      return {offset(ParamKind::projection, 0, t.transposed ? (e % O) * H + e / O : e), -1};
  }
  return {-1, -1};
}

// How many elements from e on land on consecutive canonical offsets (the whole tensor where it is
// one canonical gate, a row of a [G·H, K] weight, a gate's H biases), so that import and export
// find a target once a run rather than once an element (an H 512 LSTM's 2 M: ~30 ms each way at
// one target_of an element). 1 where the format's layout is transposed against the canonical one.
// Within one direction of an ONNX tensor; a folded bias (two targets) takes one at a time.
std::int64_t contiguous_run(const StackSpec& spec, const FormatTensor& t, std::int64_t e) {
  std::int64_t n = t.shape.elements();
  if (t.dir < 0) {  // ONNX: leading direction dimension
    n /= t.shape.dims[0];
    e %= n;
  }
  const LayerSpec& ls = spec.layers[t.layer];
  const std::int64_t H = ls.hidden_size, GH = num_gates(ls.mode) * H;
  switch (t.role) {
    case Role::input_weight:
    case Role::recurrent_weight: {
      if (t.gate >= 0) return n - e;
      if (t.transposed) return 1;
      const std::int64_t K = t.role == Role::input_weight ? layer_input_size(spec, t.layer) : output_size(ls);
      return K - e % K;
    }
    case Role::input_bias:
    case Role::recurrent_bias: return t.gate >= 0 ? n - e : H - e % H;
    case Role::bias_pair: return H - e % GH % H;
    case Role::peephole: return H - e % H;
    case Role::projection: return t.transposed ? 1 : n - e;
    case Role::bias_folded:
    case Role::stacked_kernel: return 1;
  }
  return 1;
}

double load_element(const TensorView& v, std::int64_t e) {
  const unsigned char* p = static_cast<const unsigned char*>(v.data);
  switch (v.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p + e * 4, 4);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, p + e * 8, 8);
      return d;
    }
    case DType::f16:
    case DType::bf16: {
      std::uint16_t h;
      std::memcpy(&h, p + e * 2, 2);
      return v.dtype == DType::f16 ? detail::f16_to_f32(h) : detail::bf16_to_f32(h);
    }
    case DType::i8: return static_cast<double>(static_cast<std::int8_t>(p[e]));
  }
  return 0.0;
}

void store(void* canonical, DType dtype, std::int64_t at, double value) {
  if (dtype == DType::f64)
    static_cast<double*>(canonical)[at] = value;
  else
    static_cast<float*>(canonical)[at] = static_cast<float>(value);
}

double fetch(const void* canonical, DType dtype, std::int64_t at) {
  return dtype == DType::f64 ? static_cast<const double*>(canonical)[at] : static_cast<const float*>(canonical)[at];
}

void format_shape(const Shape& s, char* out, std::size_t size) {
  int n = std::snprintf(out, size, "[");
  for (int i = 0; i < s.ndim && n > 0 && static_cast<std::size_t>(n) < size; ++i)
    n += std::snprintf(out + n, size - n, i ? ", %lld" : "%lld", static_cast<long long>(s.dims[i]));
  if (n > 0 && static_cast<std::size_t>(n) < size) std::snprintf(out + n, size - n, "]");
}

bool same_shape(const Shape& a, const Shape& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.dims[i] != b.dims[i]) return false;
  return true;
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// True if `name` (after the prefix) is spelled like a parameter of `format`.
bool looks_like_parameter(WeightFormat format, const char* name) {
  switch (format) {
    case WeightFormat::pytorch: return starts_with(name, "weight_") || starts_with(name, "bias_");
    case WeightFormat::onnx:
      return (std::strlen(name) == 1 && std::strchr("WRBP", name[0]) != nullptr) ||
             ((name[0] == 'W' || name[0] == 'R' || name[0] == 'B' || name[0] == 'P') && name[1] == '_');
    case WeightFormat::keras: return starts_with(name, "kernel") || starts_with(name, "recurrent_kernel") || starts_with(name, "bias");
    case WeightFormat::canonical:
      return (name[0] == 'W' || name[0] == 'R' || name[0] == 'P' || starts_with(name, "bW") || starts_with(name, "bR")) &&
             std::strstr(name, "_l") != nullptr;
    case WeightFormat::tensorflow: return starts_with(name, "cell_");
  }
  return false;
}

Status check_format(const StackSpec& spec, WeightFormat format) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(format >= WeightFormat::canonical && format <= WeightFormat::tensorflow, Status::invalid_enum,
                 "weight format %d is not a format", static_cast<int>(format));
  RNNCORE_ENSURE(spec.dtype != DType::i8, Status::unsupported,
                 "an integer stack (dtype i8) has no weight formats: its canonical bytes are a tflite_int8 file's "
                 "tensors (param_count, canonical_offset; io::load_model)");
  for (int l = 0; l < spec.num_layers; ++l) {  // LSTM extensions the format's layer cannot hold
    const LayerSpec& ls = spec.layers[l];
    RNNCORE_ENSURE(!(ls.peepholes && (format == WeightFormat::pytorch || format == WeightFormat::keras)),
                   Status::unsupported, "layers[%d]: the %s format has no LSTM peepholes (canonical, onnx and tensorflow do)",
                   l, to_string(format));
    RNNCORE_ENSURE(!(ls.proj_size > 0 && (format == WeightFormat::onnx || format == WeightFormat::keras)),
                   Status::unsupported,
                   "layers[%d]: the %s format has no LSTM projection (canonical, pytorch and tensorflow do)", l,
                   to_string(format));
  }
  return Status::ok;
}

}  // namespace

int format_tensor_count(const StackSpec& spec, WeightFormat format) {
  if (check_format(spec, format) != Status::ok) return 0;
  return tensor_count(spec, format);
}

Status format_tensor_info(const StackSpec& spec, WeightFormat format, int index, const char* prefix, TensorInfo* info) {
  RNNCORE_RETURN_IF_ERROR(check_format(spec, format));
  RNNCORE_ENSURE(info != nullptr, Status::null_pointer, "format_tensor_info: info is null");
  RNNCORE_ENSURE(index >= 0 && index < tensor_count(spec, format), Status::invalid_size,
                 "format_tensor_info: index %d, the %s format has %d tensors", index, to_string(format),
                 tensor_count(spec, format));
  FormatTensor t;
  RNNCORE_RETURN_IF_ERROR(describe(spec, format, index, &t));
  const int n = std::snprintf(info->name, sizeof info->name, "%s%s", prefix != nullptr ? prefix : "", t.name);
  RNNCORE_ENSURE(n > 0 && static_cast<std::size_t>(n) < sizeof info->name, Status::invalid_size,
                 "format_tensor_info: prefix '%s' makes the name longer than %zu characters", prefix,
                 sizeof info->name - 1);
  info->shape = t.shape;
  info->optional = t.optional;
  return Status::ok;
}

Status import_weights(const StackSpec& spec, WeightFormat format, const TensorView* tensors, std::size_t count,
                      const char* prefix, void* canonical) {
  detail::clear_error();
  RNNCORE_RETURN_IF_ERROR(check_format(spec, format));
  RNNCORE_ENSURE(canonical != nullptr, Status::null_pointer, "import_weights: canonical is null");
  RNNCORE_ENSURE(count == 0 || tensors != nullptr, Status::null_pointer, "import_weights: tensors is null");
  if (prefix == nullptr) prefix = "";
  const std::size_t plen = std::strlen(prefix);
  const int n = tensor_count(spec, format);

  // Every tensor under the prefix is accounted for: a parameter of this spec, or not a parameter name.
  for (std::size_t i = 0; i < count; ++i) {
    const TensorView& v = tensors[i];
    RNNCORE_ENSURE(v.name != nullptr, Status::null_pointer, "import_weights: tensors[%zu].name is null", i);
    if (!starts_with(v.name, prefix)) continue;
    for (std::size_t j = 0; j < i; ++j)
      RNNCORE_ENSURE(std::strcmp(tensors[j].name, v.name) != 0, Status::tensor_unexpected,
                     "tensor '%s' appears twice", v.name);
    if (!looks_like_parameter(format, v.name + plen)) continue;
    bool known = false;
    for (int k = 0; k < n && !known; ++k) {
      FormatTensor t;
      RNNCORE_RETURN_IF_ERROR(describe(spec, format, k, &t));
      known = std::strcmp(v.name + plen, t.name) == 0 || (t.alias[0] != '\0' && std::strcmp(v.name + plen, t.alias) == 0);
    }
    RNNCORE_ENSURE(known, Status::tensor_unexpected,
                   "tensor '%s' is not a %s parameter of this model (%s, %d layer(s), %s, input %d, hidden %d)", v.name,
                   to_string(format), to_string(spec.layers[0].mode), spec.num_layers,
                   spec.layers[0].direction == Direction::bidirectional ? "bidirectional" : "unidirectional",
                   spec.input_size, spec.layers[0].hidden_size);
  }

  // Absent optional tensors (biases) read as zeros.
  std::memset(canonical, 0, static_cast<std::size_t>(param_count(spec)) * dtype_size(spec.dtype));
  for (int k = 0; k < n; ++k) {
    FormatTensor t;
    RNNCORE_RETURN_IF_ERROR(describe(spec, format, k, &t));
    const TensorView* found = nullptr;
    for (std::size_t i = 0; i < count && found == nullptr; ++i) {
      const char* name = tensors[i].name;
      if (!starts_with(name, prefix)) continue;
      if (std::strcmp(name + plen, t.name) == 0 || (t.alias[0] != '\0' && std::strcmp(name + plen, t.alias) == 0))
        found = &tensors[i];
    }
    char want[64];
    format_shape(t.shape, want, sizeof want);
    if (found == nullptr) {
      RNNCORE_ENSURE(t.optional, Status::tensor_missing, "tensor '%s%s' %s is missing", prefix, t.name, want);
      continue;
    }
    RNNCORE_ENSURE(found->dtype >= DType::f32 && found->dtype <= DType::bf16, Status::tensor_dtype,
                   "tensor '%s' has an unsupported element type; expected f32, f64, f16 or bf16", found->name);
    if (!same_shape(found->shape, t.shape)) {
      char got[64];
      format_shape(found->shape, got, sizeof got);
      return detail::fail_status(Status::tensor_shape, "tensor '%s': expected shape %s, found %s", found->name, want, got);
    }
    RNNCORE_ENSURE(found->data != nullptr || t.shape.elements() == 0, Status::null_pointer,
                   "tensor '%s' has no data", found->name);
    const std::int64_t elems = t.shape.elements(), es = spec.dtype == DType::f64 ? 8 : 4;  // as store() writes
    for (std::int64_t e = 0; e < elems;) {
      const ElementTarget at = target_of(spec, t, e);
      const std::int64_t run = at.secondary >= 0 ? 1 : std::min(elems - e, contiguous_run(spec, t, e));
      if (found->dtype == (es == 8 ? DType::f64 : DType::f32))
        std::memcpy(static_cast<unsigned char*>(canonical) + at.primary * es,
                    static_cast<const unsigned char*>(found->data) + e * es, static_cast<std::size_t>(run * es));
      else
        for (std::int64_t i = 0; i < run; ++i) store(canonical, spec.dtype, at.primary + i, load_element(*found, e + i));
      if (at.secondary >= 0) store(canonical, spec.dtype, at.secondary, 0.0);
      e += run;
    }
  }
  return Status::ok;
}

namespace {

// Tensor `index` of a format from a canonical buffer. `gradient`: the buffer holds gradients, and a
// folded bias (Keras LSTM: import puts it into bW, bR = 0) takes bW's gradient alone.
Status export_format_tensor(const StackSpec& spec, WeightFormat format, int index, const void* canonical, void* out,
                            bool gradient) {
  detail::clear_error();
  RNNCORE_RETURN_IF_ERROR(check_format(spec, format));
  RNNCORE_ENSURE(canonical != nullptr && out != nullptr, Status::null_pointer, "export_tensor: %s is null",
                 canonical == nullptr ? "canonical" : "out");
  RNNCORE_ENSURE(index >= 0 && index < tensor_count(spec, format), Status::invalid_size,
                 "export_tensor: index %d, the %s format has %d tensors", index, to_string(format),
                 tensor_count(spec, format));
  FormatTensor t;
  RNNCORE_RETURN_IF_ERROR(describe(spec, format, index, &t));
  const std::int64_t elems = t.shape.elements(), es = spec.dtype == DType::f64 ? 8 : 4;  // as store() writes
  for (std::int64_t e = 0; e < elems;) {
    const ElementTarget at = target_of(spec, t, e);
    if (at.secondary >= 0) {  // a folded bias: bW + bR (a gradient: bW's alone)
      double v = fetch(canonical, spec.dtype, at.primary);
      if (!gradient) v += fetch(canonical, spec.dtype, at.secondary);
      store(out, spec.dtype, e++, v);
      continue;
    }
    const std::int64_t run = std::min(elems - e, contiguous_run(spec, t, e));
    std::memcpy(static_cast<unsigned char*>(out) + e * es, static_cast<const unsigned char*>(canonical) + at.primary * es,
                static_cast<std::size_t>(run * es));
    e += run;
  }
  return Status::ok;
}

}  // namespace

Status export_tensor(const StackSpec& spec, WeightFormat format, int index, const void* canonical, void* out) {
  return export_format_tensor(spec, format, index, canonical, out, false);
}

Status export_gradient_tensor(const StackSpec& spec, WeightFormat format, int index, const void* canonical_grad, void* out) {
  return export_format_tensor(spec, format, index, canonical_grad, out, true);
}

int format_tensor_count(const RnnSpec& spec, WeightFormat format) {
  return validate(spec) == Status::ok ? format_tensor_count(to_stack(spec), format) : 0;
}
Status format_tensor_info(const RnnSpec& spec, WeightFormat format, int index, const char* prefix, TensorInfo* info) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return format_tensor_info(to_stack(spec), format, index, prefix, info);
}
Status import_weights(const RnnSpec& spec, WeightFormat format, const TensorView* tensors, std::size_t count,
                      const char* prefix, void* canonical) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return import_weights(to_stack(spec), format, tensors, count, prefix, canonical);
}
Status export_tensor(const RnnSpec& spec, WeightFormat format, int index, const void* canonical, void* out) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return export_tensor(to_stack(spec), format, index, canonical, out);
}

}  // namespace rnncore

// Post-training quantization of a float LSTM (include/rnncore/io/quantize.hpp) to the integer
// LSTM file of docs/int8.md, with the scales chosen as TFLite's converter chooses them for a Keras
// LSTM (docs/int8.md, "Quantizing a float LSTM").
#include "rnncore/io/quantize.hpp"
#include "rnncore/io/hints.hpp"
#include "rnncore/io/int8_file.hpp"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rnncore/io/model.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "rnncore/io/stack_config.hpp"
#include "rnncore/rnncore.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace io {

namespace {

using Clock = std::chrono::steady_clock;

const char* const kGateNames[q8::kGates] = {"i", "f", "c", "o"};  // TFLite's names; canonical i, f, g, o

std::string basename_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A float32 as a string that strtod (then a cast to float) reads back exactly: the value's own
// double, 17 significant digits.
std::string f32s(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", static_cast<double>(static_cast<float>(v)));
  return b;
}

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// Asymmetric int8 quantization of a calibrated range as TFLite's MLIR quantizer makes it
// (getNudgedScaleAndZeroPoint): the range widened to include 0, scale = range / 255, the zero point
// from whichever end gives the smaller error, rounded half away from zero and kept in −128..127.
// An empty range (all zeros) gets scale 1 and zero point −128, as the quantizer gives it.
struct Asymmetric {
  double scale = 1.0;
  int zero_point = -128;
};
Asymmetric asymmetric_int8(double rmin, double rmax) {
  rmin = std::min(rmin, 0.0);
  rmax = std::max(rmax, 0.0);
  const double qmin = -128.0, qmax = 127.0;
  Asymmetric a;
  if (rmax - rmin < std::numeric_limits<double>::epsilon()) return a;
  // The range's width in float32, as the converter forms it from its float32 statistics (with the
  // width in double the scale can differ in its last bit: seen on Keras models).
  a.scale = static_cast<double>(static_cast<float>(static_cast<float>(rmax) - static_cast<float>(rmin))) / (qmax - qmin);
  const double from_min = qmin - rmin / a.scale, err_min = std::fabs(qmin) + std::fabs(rmin / a.scale);
  const double from_max = qmax - rmax / a.scale, err_max = std::fabs(qmax) + std::fabs(rmax / a.scale);
  const double zp = err_min < err_max ? from_min : from_max;
  a.zero_point = zp < qmin ? -128 : zp > qmax ? 127 : static_cast<int>(std::round(zp));
  return a;
}

// A Dense head quantized (quantize_head).
struct QuantizedHead {
  std::int64_t in = 0, out = 0;
  Activation act = Activation::none;
  bool last_step = false;  // on each row's last step (return_sequences 0)
  Asymmetric input, linear, output;
  std::vector<std::int8_t> w;
  std::vector<double> w_scales;  // one, or one per output
  std::vector<std::int32_t> b;
};

// An Embedding before layer 0 (PyTorch nn.Embedding, Keras Embedding): the float table [V, E],
// and as quantized (quantize_embedding).
struct FloatEmbedding {
  std::int64_t V = 0, E = 0;
  std::vector<float> table;
};
struct QuantizedEmbedding {
  std::int64_t V = 0, E = 0;
  Asymmetric q;
  std::vector<std::int8_t> table;
};

// The float model's inputs of one data set, time-major [T, B, I] whatever the file's layout.
struct Data {
  std::string path;
  std::int64_t T = 0, B = 0;
  std::vector<float> x;  // [T, B, I]
  std::vector<std::int32_t> ids;  // [T, B]: the token ids x holds the rows of (a model with an Embedding)
};

// Reads a calibration or evaluation .npy: float, [T, B, I] (or [B, T, I] with --batch-first), not
// empty, finite. Returns "" or the error line.
std::string read_data(const std::string& path, std::int64_t I, bool batch_first, Data* out) {
  Array a;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) {
    const std::string d = rnncore_last_error_detail();
    return d.empty() ? path + ": cannot be read as .npy" : d;
  }
  const std::string expected = batch_first ? "[B, T, " + std::to_string(I) + "] (batch-first)"
                                           : "[T, B, " + std::to_string(I) + "] (time-major; --batch-first for [B, T, I])";
  std::vector<float> v;
  if (to_f32(a, &v) != RNNCORE_OK)
    return path + ": expected float32 input " + expected + ", found " + elem_type_name(a.type) + " " +
           shape_to_string(a.shape.data(), a.shape.size());
  if (a.shape.size() != 3 || a.shape[2] != I)
    return path + ": expected shape " + expected + ", found " + shape_to_string(a.shape.data(), a.shape.size());
  const std::int64_t T = batch_first ? a.shape[1] : a.shape[0], B = batch_first ? a.shape[0] : a.shape[1];
  if (T == 0 || B == 0)
    return path + ": no data (shape " + shape_to_string(a.shape.data(), a.shape.size()) + "): calibration needs at least one step of one row";
  if (T > (1 << 28) || B > (1 << 24)) return path + ": sequence or batch too large";
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k])) return path + ": element " + std::to_string(k) + " is " + num(v[k]) + "; calibration data must be finite";
  out->path = path;
  out->T = T;
  out->B = B;
  if (!batch_first) {
    out->x = std::move(v);
  } else {
    out->x.resize(v.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t)
        std::memcpy(&out->x[static_cast<std::size_t>((t * B + b) * I)], &v[static_cast<std::size_t>((b * T + t) * I)],
                    static_cast<std::size_t>(I) * sizeof(float));
  }
  return "";
}

// What the float run saw: the stack's input, and each layer's h (every step's output) and |c|.
// Reads token ids [T, B] (or [B, T] with --batch-first) for a model with an Embedding: each id's
// float row of the table into out->x [T, B, E], as the float model's layer 0 reads it.
std::string read_ids(const std::string& path, const FloatEmbedding& e, bool batch_first, Data* out) {
  Array a;
  std::vector<std::int32_t> ids;
  if (read_npy(path.c_str(), &a) != RNNCORE_OK) {
    const std::string d = rnncore_last_error_detail();
    return d.empty() ? path + ": cannot be read as .npy" : d;
  }
  const std::string expected = batch_first ? "[B, T] (batch-first)" : "[T, B] (time-major; --batch-first for [B, T])";
  if (a.shape.size() != 2 || to_i32(a, &ids) != RNNCORE_OK)
    return path + ": the model starts with an Embedding: expected integer token ids " + expected + ", found " +
           elem_type_name(a.type) + " " + shape_to_string(a.shape.data(), a.shape.size());
  const std::int64_t T = batch_first ? a.shape[1] : a.shape[0], B = batch_first ? a.shape[0] : a.shape[1];
  if (T == 0 || B == 0) return path + ": no data: calibration needs at least one step of one row";
  if (T > (1 << 28) || B > (1 << 24)) return path + ": sequence or batch too large";
  out->path = path;
  out->T = T;
  out->B = B;
  out->x.resize(static_cast<std::size_t>(T * B * e.E));
  out->ids.resize(static_cast<std::size_t>(T * B));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int32_t id = ids[static_cast<std::size_t>(batch_first ? b * T + t : t * B + b)];
      if (id < 0 || id >= e.V)
        return path + ": token id " + std::to_string(id) + " is outside the embedding's vocabulary [0, " + std::to_string(e.V) + ")";
      out->ids[static_cast<std::size_t>(t * B + b)] = id;
      std::copy(e.table.begin() + id * e.E, e.table.begin() + (id + 1) * e.E, out->x.begin() + (t * B + b) * e.E);
    }
  return "";
}

struct LayerRanges {
  double h_min = INFINITY, h_max = -INFINITY, c_abs = 0;
};
struct Ranges {
  double x_min = INFINITY, x_max = -INFINITY;
  std::vector<LayerRanges> layer;     ///< each layer's (a bidirectional one's forward direction)
  std::vector<LayerRanges> backward;  ///< a bidirectional layer's backward direction (else unused)
  /// |c| only at the last step of each group of rows run together (--cell-range batch-end, as
  /// TFLite's calibration logs the LSTM's variable cell state once per invoke); else every step.
  bool cell_at_batch_end = false;
};

// Progress of a float run over a data set (steps of all groups), to the report callback every 2 s.
struct Progress {
  const char* what;
  long long done, total;
  Clock::time_point start, last;
  const std::function<void(const std::string&)>* report;
  void step() {
    ++done;
    const auto now = Clock::now();
    if (now - last < std::chrono::seconds(2) || !*report) return;
    last = now;
    char b[160];
    std::snprintf(b, sizeof b, "%s: step %lld/%lld, %.1f s", what, done, total,
                  std::chrono::duration<double>(now - start).count());
    (*report)(b);
  }
};

// The callbacks of a quantization (QuantizeOptions::note and ::progress).
struct Log {
  std::function<void(const std::string&)> note, progress;
  void say(const std::string& line) const {
    if (note) note(line);
  }
};

// Widens `r` by one step: x [B, I] and the state after it, h and c [Σ_l B·H_l] (state_offset);
// `last`: the group's last step.
void widen(const StackSpec& stack, std::int64_t B, const float* x, const float* h, const float* c, bool last, Ranges* r) {
  const bool cell = last || !r->cell_at_batch_end;
  for (std::int64_t k = 0; k < B * stack.input_size; ++k) {
    r->x_min = std::min(r->x_min, static_cast<double>(x[k]));
    r->x_max = std::max(r->x_max, static_cast<double>(x[k]));
  }
  for (int l = 0; l < stack.num_layers; ++l) {
    LayerRanges& lr = r->layer[static_cast<std::size_t>(l)];
    const std::int64_t at = state_offset(stack, static_cast<int>(B), l, 0), n = B * stack.layers[l].hidden_size;
    for (std::int64_t k = at; k < at + n; ++k) {
      lr.h_min = std::min(lr.h_min, static_cast<double>(h[k]));
      lr.h_max = std::max(lr.h_max, static_cast<double>(h[k]));
      if (cell) lr.c_abs = std::max(lr.c_abs, std::fabs(static_cast<double>(c[k])));
    }
  }
}

// Runs the float model a step at a time over x [T, B, I] (time-major), carrying every layer's h and
// c [Σ_l B·H_l] in and out (the public API's streaming), so that every step's state is seen; writes
// the last layer's y [T, B, H] (row stride `y_rows` rows, from row `y_row`) and widens `r` (if not
// null) by each step's x, h and c.
Status run_float(Model& net, const StackSpec& stack, const float* x, std::int64_t T, std::int64_t B, float* h, float* c,
                 float* y, std::int64_t y_rows, std::int64_t y_row, Ranges* r, Progress* progress) {
  const std::int64_t H = stack.layers[stack.num_layers - 1].hidden_size;
  const std::size_t BH = static_cast<std::size_t>(B * H), BI = static_cast<std::size_t>(B * stack.input_size);
  std::vector<float> yt(BH);
  ForwardArgs fa;
  fa.batch = static_cast<std::int32_t>(B);
  fa.seq_len = 1;
  fa.layout = Layout::time_major;
  fa.h0 = fa.hy = h;
  fa.c0 = fa.cy = c;
  fa.y = yt.data();
  for (std::int64_t t = 0; t < T; ++t) {
    fa.x = x + static_cast<std::size_t>(t) * BI;
    const Status s = net.forward(fa);
    if (s != Status::ok) return s;
    std::memcpy(y + static_cast<std::size_t>((t * y_rows + y_row) * H), yt.data(), BH * sizeof(float));
    if (r != nullptr) widen(stack, B, x + static_cast<std::size_t>(t) * BI, h, c, t + 1 == T, r);
    progress->step();
  }
  return Status::ok;
}

// The float model on a data set: every row from a zero state, or (group > 0) the rows in groups of
// `group` run one after another, each group starting from the previous group's final state (what
// TFLite's converter does with a representative dataset of `group`-row batches: it does not reset
// the LSTM's variable tensors between them). y [T, B, H] (the last layer's).
Status run_float_data(Model& net, const StackSpec& stack, const Data& d, std::int64_t group, std::vector<float>* y,
                      Ranges* r, const char* what, const Log& log) {
  const std::int64_t I = stack.input_size, H = stack.layers[stack.num_layers - 1].hidden_size;
  y->assign(static_cast<std::size_t>(d.T * d.B * H), 0.0f);
  const auto now = Clock::now();
  Progress progress{what, 0, group > 0 ? d.T * (d.B / group) : d.T, now, now, &log.progress};
  const std::int64_t rows = group > 0 ? group : d.B;
  std::vector<float> h(static_cast<std::size_t>(state_offset(stack, static_cast<int>(rows), stack.num_layers, 0)), 0.0f),
      c(h.size(), 0.0f);
  if (group <= 0) return run_float(net, stack, d.x.data(), d.T, d.B, h.data(), c.data(), y->data(), d.B, 0, r, &progress);
  std::vector<float> xg(static_cast<std::size_t>(d.T * group * I));
  for (std::int64_t g0 = 0; g0 < d.B; g0 += group) {
    for (std::int64_t t = 0; t < d.T; ++t)
      std::memcpy(&xg[static_cast<std::size_t>(t * group * I)], &d.x[static_cast<std::size_t>((t * d.B + g0) * I)],
                  static_cast<std::size_t>(group * I) * sizeof(float));
    const Status s = run_float(net, stack, xg.data(), d.T, group, h.data(), c.data(), y->data(), d.B, g0, r, &progress);
    if (s != Status::ok) return s;
  }
  return Status::ok;
}

bool has_bidirectional(const StackSpec& stack) {
  for (int l = 0; l < stack.num_layers; ++l)
    if (stack.layers[l].direction != Direction::unidirectional) return true;
  return false;
}

// One direction of layer l as a one-layer unidirectional LSTM (the layer's width and clip) and its
// canonical weights, copied from the stack's.
void direction_as_layer(const StackSpec& stack, const float* canon, int l, int dir, StackSpec* one,
                        std::vector<float>* weights) {
  *one = StackSpec{};
  one->input_size = layer_input_size(stack, l);
  one->num_layers = 1;
  one->layers[0] = stack.layers[l];
  one->layers[0].direction = Direction::unidirectional;
  weights->assign(static_cast<std::size_t>(param_count(*one)), 0.0f);
  const std::int64_t H = one->layers[0].hidden_size, I = one->input_size;
  for (ParamKind k : {ParamKind::input_weight, ParamKind::recurrent_weight, ParamKind::input_bias, ParamKind::recurrent_bias})
    for (int g = 0; g < q8::kGates; ++g) {
      const std::int64_t n = k == ParamKind::input_weight ? H * I : k == ParamKind::recurrent_weight ? H * H : H;
      std::memcpy(weights->data() + canonical_offset(*one, 0, 0, k, g), canon + canonical_offset(stack, l, dir, k, g),
                  static_cast<std::size_t>(n) * sizeof(float));
    }
}

// x [T, B, W] with its steps in reverse order.
std::vector<float> reversed_steps(const std::vector<float>& x, std::int64_t T) {
  std::vector<float> r(x.size());
  const std::size_t step = x.size() / static_cast<std::size_t>(T);
  for (std::int64_t t = 0; t < T; ++t)
    std::memcpy(&r[static_cast<std::size_t>(T - 1 - t) * step], &x[static_cast<std::size_t>(t) * step], step * sizeof(float));
  return r;
}

// One direction of layer l of a stack on the layer's input `in` [T, B, I_l] (the backward one on it
// reversed in time, its output reversed back): y [T, B, H_l] into columns dir·H_l of `out`
// [T, B, D·H_l], and (r not null) the direction's ranges into *lr.
Status run_float_direction(const StackSpec& stack, const float* canon, int l, int dir, const Data& in, std::int64_t group,
                     bool cell_at_batch_end, Data* out, LayerRanges* lr, const char* what, const Log& log) {
  StackSpec one;
  std::vector<float> w, y;
  direction_as_layer(stack, canon, l, dir, &one, &w);
  PlanOptions opt;
  opt.max_batch = static_cast<std::int32_t>(in.B);
  opt.max_seq_len = 1;
  Model net;
  Status s = Model::create(one, opt, w.data(), &net);
  if (s != Status::ok) return s;
  Data x = in;
  if (dir == 1) x.x = reversed_steps(in.x, in.T);
  Ranges r;
  r.layer.resize(1);
  r.cell_at_batch_end = cell_at_batch_end;
  if ((s = run_float_data(net, one, x, group, &y, lr != nullptr ? &r : nullptr, what, log)) != Status::ok) return s;
  if (dir == 1) y = reversed_steps(y, in.T);
  if (lr != nullptr) *lr = r.layer[0];
  const std::int64_t H = one.layers[0].hidden_size, W = H * num_directions(stack.layers[l]);
  for (std::int64_t row = 0; row < in.T * in.B; ++row)
    std::memcpy(&out->x[static_cast<std::size_t>(row * W + dir * H)], &y[static_cast<std::size_t>(row * H)],
                static_cast<std::size_t>(H) * sizeof(float));
  return Status::ok;
}

// The float stack layer by layer (a stack with a bidirectional layer, whose backward direction
// cannot stream forward in time): each layer's directions over the whole of the previous layer's
// output (run_float_direction: a step at a time, groups as run_float_data), then the next layer on their
// concatenation [forward h, backward h]. y: the last layer's [T, B, W]; r (if not null): x's range
// and every direction's.
Status run_float_by_layer(const StackSpec& stack, const float* canon, const Data& d, std::int64_t group,
                          std::vector<float>* y, Ranges* r, const char* what, const Log& log) {
  if (r != nullptr) {
    for (float v : d.x) {
      r->x_min = std::min(r->x_min, static_cast<double>(v));
      r->x_max = std::max(r->x_max, static_cast<double>(v));
    }
    r->backward.resize(r->layer.size());
  }
  Data in = d;
  for (int l = 0; l < stack.num_layers; ++l) {
    const int D = num_directions(stack.layers[l]);
    Data out = in;
    out.x.assign(static_cast<std::size_t>(in.T * in.B * D * stack.layers[l].hidden_size), 0.0f);
    for (int dir = 0; dir < D; ++dir) {
      LayerRanges* lr = r == nullptr ? nullptr : dir == 0 ? &r->layer[static_cast<std::size_t>(l)] : &r->backward[static_cast<std::size_t>(l)];
      const Status s = run_float_direction(stack, canon, l, dir, in, group, r != nullptr && r->cell_at_batch_end, &out, lr, what, log);
      if (s != Status::ok) return s;
    }
    in = std::move(out);
  }
  *y = std::move(in.x);
  return Status::ok;
}

// The float model on a data set (run_float_data; a stack with a bidirectional layer layer by layer).
Status run_float_model(Model& net, const StackSpec& stack, const float* canon, const Data& d, std::int64_t group,
                       std::vector<float>* y, Ranges* r, const char* what, const Log& log) {
  return has_bidirectional(stack) ? run_float_by_layer(stack, canon, d, group, y, r, what, log)
                                  : run_float_data(net, stack, d, group, y, r, what, log);
}

// Runs the int8 model as `rnncore run` does: its StackSpec as io::load_weights reads the written
// file, on a Model that quantizes the float32 input as TFLite's QUANTIZE op (or looks the token ids
// up in the int8 table); dequantizes y as its DEQUANTIZE op (float32(q − z) · s) and compares with
// the float y [T, B, H]. With a head (`head` not null) y is the head's: [steps, B, out] with steps
// T, or 1 on the last step. Errors: the plan's, one line in *error.
Status measure(const LoadedModel& q, const Data& d, const std::vector<float>& y_float, const QuantizedHead* head,
               const Log& log, QuantizeAccuracy* out, std::string* error) {
  StackSpec spec = q.stack;
  spec.float_output = false;  // int8 y, dequantized below as the DEQUANTIZE op the file names (graph_output float32)
  const LayerSpec& top = spec.layers[spec.num_layers - 1];
  const bool ids = spec.embedding.vocab_size > 0;
  const std::int64_t T = d.T, B = d.B, I = ids ? 1 : spec.input_size, H = stack_output_size(spec);
  const std::int64_t steps = spec.head.out_features > 0 && spec.head.last_step_only ? 1 : T;
  const QuantParams yqp = num_directions(top) == 2 ? top.int8_output : top.int8[0].state;  // the last layer's output
  const double out_scale = head != nullptr ? head->output.scale : yqp.scale;
  const int out_zp = head != nullptr ? head->output.zero_point : yqp.zero_point;
  std::vector<std::int8_t> yq(static_cast<std::size_t>(B * steps * H));
  // Rows in chunks (each row starts from the initial state either way), for progress on stderr;
  // each chunk's x batch-major, as LiteRT's op takes it.
  const std::int64_t chunk = std::min<std::int64_t>(8, std::max<std::int64_t>(B, 1));
  PlanOptions opt;
  opt.max_batch = static_cast<std::int32_t>(chunk);
  opt.max_seq_len = static_cast<std::int32_t>(std::max<std::int64_t>(T, 1));
  Model model;
  if (const Status s = Model::create(spec, opt, q.canonical.data(), &model); s != Status::ok) {
    *error = d.path + ": the int8 model: " + last_error_detail();
    return s;
  }
  std::vector<float> x(ids ? 0 : static_cast<std::size_t>(chunk * T * I));
  std::vector<std::int32_t> tokens(ids ? static_cast<std::size_t>(chunk * T) : 0);
  const auto start = Clock::now();
  auto last_report = start;
  for (std::int64_t b0 = 0; b0 < B && T > 0; b0 += chunk) {
    const std::int64_t rows = std::min(chunk, B - b0);
    for (std::int64_t b = 0; b < rows; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        const std::size_t from = static_cast<std::size_t>(t * B + b0 + b), to = static_cast<std::size_t>(b * T + t);
        if (ids) tokens[to] = d.ids[from];
        else std::copy_n(d.x.begin() + static_cast<std::ptrdiff_t>(from * I), I, x.begin() + static_cast<std::ptrdiff_t>(to * I));
      }
    ForwardArgs a;
    a.batch = static_cast<std::int32_t>(rows);
    a.seq_len = static_cast<std::int32_t>(T);
    a.layout = Layout::batch_major;
    a.x = ids ? static_cast<const void*>(tokens.data()) : static_cast<const void*>(x.data());
    a.y = yq.data() + static_cast<std::size_t>(b0 * steps * H);
    model.forward(a);  // the arguments are the plan's: it cannot fail
    const auto now = Clock::now();
    if (now - last_report >= std::chrono::seconds(2) && log.progress) {
      last_report = now;
      char b[512];
      std::snprintf(b, sizeof b, "int8 run on %s: rows %lld/%lld, %.1f s", d.path.c_str(), static_cast<long long>(b0 + rows),
                    static_cast<long long>(B), std::chrono::duration<double>(now - start).count());
      log.progress(b);
    }
  }
  QuantizeAccuracy& a = *out;
  a = QuantizeAccuracy();
  a.data = d.path;
  a.T = steps;
  a.B = B;
  a.H = H;
  double lo = INFINITY, hi = -INFINITY, sig = 0, err = 0;
  for (std::int64_t t = 0; t < steps; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < H; ++j) {
        const double f = y_float[static_cast<std::size_t>((t * B + b) * H + j)];
        const float q = static_cast<float>(yq[static_cast<std::size_t>((b * steps + t) * H + j)] - out_zp) * static_cast<float>(out_scale);
        const double e = static_cast<double>(q) - f;
        a.max_abs = std::max(a.max_abs, std::fabs(e));
        err += e * e;
        sig += f * f;
        lo = std::min(lo, f);
        hi = std::max(hi, f);
      }
  a.values = y_float.size();
  a.rms = std::sqrt(err / static_cast<double>(a.values));
  a.range = hi - lo;
  a.snr_db = err > 0 ? 10.0 * std::log10(sig / err) : INFINITY;
  return Status::ok;
}

// Why the integer LSTM (and so the int8 model file) cannot hold this float stack; "" if it can.
std::string refusal(const StackSpec& stack) {
  for (int l = 0; l < stack.num_layers; ++l) {
    const LayerSpec& ls = stack.layers[l];
    const std::string at = stack.num_layers > 1 ? " (layer " + std::to_string(l) + ")" : std::string();
    if (ls.mode != Mode::lstm)
      return (ls.mode == Mode::gru ? std::string("a GRU") : std::string("an Elman RNN (") + to_string(ls.mode) + ")") + at;
    if (ls.proj_size > 0) return "an LSTM with a projection (proj_size " + std::to_string(ls.proj_size) + ")" + at;
    if (ls.peepholes) return "an LSTM with peepholes" + at;
    for (int k = 0; k < ls.num_wrappers; ++k)
      if (ls.wrappers[k].kind == WrapperKind::residual) return "a residual wrapper" + at;
  }
  if (uses_skip_input(stack)) return "an LSTM in skip input mode (no input weights)";
  return "";
}

// One layer's quantization (docs/int8.md, "Quantizing a float LSTM") and its int8 tensors.
struct QuantizedLayer {
  std::int64_t I = 0, H = 0;
  Asymmetric input, output;  // x (above layer 0: the previous layer's output, as the converter shares it) and h
  int cell_log2 = -15;
  double cell_clip = 0.0;
  std::vector<std::int8_t> w[q8::kGates], r[q8::kGates];
  std::vector<std::int32_t> b[q8::kGates];
  double w_scale[q8::kGates] = {}, r_scale[q8::kGates] = {}, b_scale[q8::kGates] = {};
  /// --per-channel: each row's scales ([H] per gate; empty per tensor); w_scale, r_scale and
  /// b_scale then hold their largest (for the summary line).
  std::vector<double> w_scales[q8::kGates], r_scales[q8::kGates], b_scales[q8::kGates];
  /// A bidirectional layer's backward direction (this one is the forward direction); its output
  /// has this one's quantization (the concatenation copies both directions' bytes).
  std::unique_ptr<QuantizedLayer> backward;
  /// The layer's output width: H, or both directions' H.
  std::int64_t width() const { return H + (backward ? backward->H : 0); }
};

// Symmetric per tensor, narrow range: scale max|W|/127 (1 for an all-zero tensor), values
// round(W / scale) (half away from zero) in −127..127. Returns the scale.
double quantize_weights(const float* w, std::size_t n, std::vector<std::int8_t>* out) {
  double m = 0;
  for (std::size_t k = 0; k < n; ++k) m = std::max(m, std::fabs(static_cast<double>(w[k])));
  const double scale = m > 0 ? m / 127.0 : 1.0;
  out->resize(n);
  for (std::size_t k = 0; k < n; ++k)
    (*out)[k] = static_cast<std::int8_t>(std::min(std::max(std::round(w[k] / scale), -127.0), 127.0));
  return scale;
}

// The cell state's scale 2^k: k = ceil(log2 max|c|) − 15 as the converter takes it, kept in
// −15..−9 with a note (`where`: "" or " (layer l)"). Finer than 2^-15 the converter's
// choice breaks the model: tanh of the cell would need 15 + k < 0 integer bits, which LiteRT's
// integer LSTM (and so this one, bit for bit) does not compute -- it takes the input gate in its
// place (docs/int8.md). Coarser than 2^-9 the integer LSTM refuses the scale.
int cell_scale_log2(double c_abs, const std::string& where, const Log& log) {
  if (c_abs <= 0) return -15;  // max|c| = 0: any scale holds it
  const int wanted = static_cast<int>(std::ceil(std::log2(c_abs))) - 15;
  const int k = std::min(std::max(wanted, -15), -9);
  char b[400];
  if (k < wanted) {
    std::snprintf(b, sizeof b,
                  "max|c| = %.6g%s would take the cell scale 2^%d; the integer LSTM takes 2^-30 .. 2^-9, so it is 2^%d "
                  "(cell states beyond 64 saturate)",
                  c_abs, where.c_str(), wanted, k);
    log.say(b);
  } else if (k > wanted) {
    std::snprintf(b, sizeof b,
                  "max|c| = %.6g%s would take the cell scale 2^%d (TFLite's converter's choice); finer than 2^-15 the "
                  "integer LSTM computes no tanh of the cell (LiteRT takes the input gate in its place), so it is 2^-15",
                  c_abs, where.c_str(), wanted);
    log.say(b);
  }
  return k;
}

// Per output channel: each of the `rows` rows of `cols` values quantized as a tensor of its own
// (quantize_weights); the rows' scales into *scales. Returns the largest.
double quantize_rows(const float* w, std::int64_t rows, std::int64_t cols, std::vector<std::int8_t>* out,
                     std::vector<double>* scales) {
  out->resize(static_cast<std::size_t>(rows * cols));
  scales->resize(static_cast<std::size_t>(rows));
  std::vector<std::int8_t> row;
  double largest = 0;
  for (std::int64_t j = 0; j < rows; ++j) {
    const double s = quantize_weights(w + j * cols, static_cast<std::size_t>(cols), &row);
    std::copy(row.begin(), row.end(), out->begin() + j * cols);
    (*scales)[static_cast<std::size_t>(j)] = s;
    largest = std::max(largest, s);
  }
  return largest;
}

// Direction `dir` of layer l: its weights and biases, output (h) quantization `output`, the cell
// scale from max|c| `c_abs` (`where`: "" or " (layer l)" for the notes).
QuantizedLayer quantize_direction(const StackSpec& stack, int l, int dir, const float* canon, const Asymmetric& input,
                                  const Asymmetric& output, double c_abs, const std::string& where, double cell_clip,
                                  bool per_channel, const Log& log) {
  QuantizedLayer q;
  q.I = layer_input_size(stack, l);
  q.H = stack.layers[l].hidden_size;
  q.input = input;
  q.output = output;
  q.cell_log2 = cell_scale_log2(c_abs, where, log);
  q.cell_clip = cell_clip;
  for (int g = 0; g < q8::kGates; ++g) {  // canonical gates i, f, g, o = TFLite's i, f, c, o
    const std::int64_t ow = canonical_offset(stack, l, dir, ParamKind::input_weight, g),
                       orr = canonical_offset(stack, l, dir, ParamKind::recurrent_weight, g),
                       obw = canonical_offset(stack, l, dir, ParamKind::input_bias, g),
                       obr = canonical_offset(stack, l, dir, ParamKind::recurrent_bias, g);
    if (per_channel) {
      q.w_scale[g] = quantize_rows(canon + ow, q.H, q.I, &q.w[g], &q.w_scales[g]);
      q.r_scale[g] = quantize_rows(canon + orr, q.H, q.H, &q.r[g], &q.r_scales[g]);
    } else {
      q.w_scale[g] = quantize_weights(canon + ow, static_cast<std::size_t>(q.H * q.I), &q.w[g]);
      q.r_scale[g] = quantize_weights(canon + orr, static_cast<std::size_t>(q.H * q.H), &q.r[g]);
    }
    // The bias (bW + bR: the model's two biases act as one) in int32 at scale s_W · s_x (per
    // channel the row's s_W), the product of the two float32 scales (as the converter forms it;
    // the double product can differ in the last bit).
    const auto bias_scale = [&input](double ws) {
      return static_cast<double>(static_cast<float>(ws)) * static_cast<double>(static_cast<float>(input.scale));
    };
    q.b_scale[g] = bias_scale(q.w_scale[g]);
    q.b[g].resize(static_cast<std::size_t>(q.H));
    if (per_channel) q.b_scales[g].resize(static_cast<std::size_t>(q.H));
    for (std::int64_t j = 0; j < q.H; ++j) {
      const double b = static_cast<double>(canon[obw + j]) + static_cast<double>(canon[obr + j]);
      const double bs = per_channel ? bias_scale(q.w_scales[g][static_cast<std::size_t>(j)]) : q.b_scale[g];
      if (per_channel) q.b_scales[g][static_cast<std::size_t>(j)] = bs;
      q.b[g][static_cast<std::size_t>(j)] =
          static_cast<std::int32_t>(std::min(std::max(std::round(b / bs), -2147483648.0), 2147483647.0));
    }
  }
  return q;
}

// Layer l's quantization: h asymmetric int8 over its calibrated range (the initial h = 0 is in the
// range too). A bidirectional layer's two directions share one: LiteRT's CONCATENATION copies both
// directions' int8 outputs without requantizing, so it is the union of their ranges.
QuantizedLayer quantize_layer(const StackSpec& stack, int l, const float* canon, const Asymmetric& input, const Ranges& r,
                              double cell_clip, bool per_channel, const Log& log) {
  const LayerRanges& f = r.layer[static_cast<std::size_t>(l)];
  const std::string where = stack.num_layers > 1 ? " (layer " + std::to_string(l) : std::string();
  if (num_directions(stack.layers[l]) == 1)
    return quantize_direction(stack, l, 0, canon, input, asymmetric_int8(f.h_min, f.h_max), f.c_abs,
                              where.empty() ? where : where + ")", cell_clip, per_channel, log);
  const LayerRanges& b = r.backward[static_cast<std::size_t>(l)];
  const Asymmetric output = asymmetric_int8(std::min(f.h_min, b.h_min), std::max(f.h_max, b.h_max));
  const std::string in = where.empty() ? " (" : where + ", ";
  QuantizedLayer q = quantize_direction(stack, l, 0, canon, input, output, f.c_abs, in + "forward)", cell_clip, per_channel, log);
  q.backward.reset(new QuantizedLayer(
      quantize_direction(stack, l, 1, canon, input, output, b.c_abs, in + "backward)", cell_clip, per_channel, log)));
  return q;
}

using Metadata = std::vector<std::pair<std::string, std::string>>;

// One layer's tensors and keys under `prefix` ("" in a one-layer file, "l<k>." in a stack), as
// tools/tflite_to_safetensors.py writes them (docs/int8.md, "The model file").
void add_layer(const QuantizedLayer& q, const LayerRanges& lr, const std::string& prefix,
               std::vector<TensorToWrite>* tensors, Metadata* meta) {
  for (const char* kind : {"b", "r", "w"})
    for (int g : {2, 1, 0, 3}) {  // names sorted as the converter writes them: c, f, i, o
      const std::string name = prefix + kind + "_" + kGateNames[g];
      tensors->push_back(kind[0] == 'b'   ? TensorToWrite{name, ElemType::i32, {q.H}, q.b[g].data()}
                         : kind[0] == 'r' ? TensorToWrite{name, ElemType::i8, {q.H, q.H}, q.r[g].data()}
                                          : TensorToWrite{name, ElemType::i8, {q.H, q.I}, q.w[g].data()});
    }
  const Metadata keys = {
      {"I", std::to_string(q.I)},
      {"H", std::to_string(q.H)},
      {"input_scale", f32s(q.input.scale)},
      {"input_zp", std::to_string(q.input.zero_point)},
      {"output_scale", f32s(q.output.scale)},
      {"output_zp", std::to_string(q.output.zero_point)},
      {"output_state_scale", f32s(q.output.scale)},
      {"output_state_zp", std::to_string(q.output.zero_point)},
      {"hidden_scale", f32s(q.output.scale)},  // without projection the converter gives the hidden intermediate h's quantization
      {"hidden_zp", std::to_string(q.output.zero_point)},
      {"cell_scale", f32s(std::ldexp(1.0, q.cell_log2))},
      {"cell_clip", f32s(q.cell_clip)},
      {"proj_clip", f32s(0.0)},
      {"calibration_h_min", num(lr.h_min)},
      {"calibration_h_max", num(lr.h_max)},
      {"calibration_c_absmax", num(lr.c_abs)},
  };
  for (const auto& kv : keys) meta->push_back({prefix + kv.first, kv.second});
  const auto list = [](const std::vector<double>& v) {  // 9 digits: each float32 reads back exactly
    std::string s;
    char b[24];
    for (double x : v) {
      std::snprintf(b, sizeof b, "%s%.9g", s.empty() ? "" : ",", static_cast<double>(static_cast<float>(x)));
      s += b;
    }
    return s;
  };
  for (int g = 0; g < q8::kGates; ++g) {
    const std::string n = kGateNames[g];
    if (q.w_scales[g].empty()) {
      meta->push_back({prefix + "w_" + n + "_scale", f32s(q.w_scale[g])});
      meta->push_back({prefix + "r_" + n + "_scale", f32s(q.r_scale[g])});
      meta->push_back({prefix + "b_" + n + "_scale", f32s(q.b_scale[g])});
    } else {  // per channel: a scale per unit, as the loader reads them (docs/int8.md)
      meta->push_back({prefix + "w_" + n + "_scales", list(q.w_scales[g])});
      meta->push_back({prefix + "r_" + n + "_scales", list(q.r_scales[g])});
      meta->push_back({prefix + "b_" + n + "_scales", list(q.b_scales[g])});
    }
  }
}

// A layer's (or direction's) quantization, two lines (`label`: "" or "layer l: ").
void describe_direction(const std::string& label, const QuantizedLayer& q, std::vector<std::string>* lines) {
  char b[400];
  std::snprintf(b, sizeof b, "%squantization: input scale %.6g zp %d; h scale %.6g zp %d; cell scale 2^%d; cell clip %s",
                label.c_str(), q.input.scale, q.input.zero_point, q.output.scale, q.output.zero_point, q.cell_log2,
                q.cell_clip > 0 ? num(q.cell_clip).c_str() : "none");
  lines->push_back(b);
  std::snprintf(b, sizeof b, "%s%sweight scales (i f c o): W %.6g %.6g %.6g %.6g; R %.6g %.6g %.6g %.6g", label.c_str(),
                q.w_scales[0].empty() ? "" : "largest per-channel ", q.w_scale[0], q.w_scale[1], q.w_scale[2], q.w_scale[3],
                q.r_scale[0], q.r_scale[1], q.r_scale[2], q.r_scale[3]);
  lines->push_back(b);
}

// Layer l's quantization, a bidirectional layer's a line pair per direction.
void describe_layer(int L, int l, const QuantizedLayer& q, std::vector<std::string>* lines) {
  const std::string label = L > 1 ? "layer " + std::to_string(l) : std::string();
  if (!q.backward) {
    describe_direction(label.empty() ? label : label + ": ", q, lines);
    return;
  }
  describe_direction(label.empty() ? "forward: " : label + " forward: ", q, lines);
  describe_direction(label.empty() ? "backward: " : label + " backward: ", *q.backward, lines);
}

// A bidirectional layer's keys and tensors under `prefix` ("l<k>."), as
// tools/tflite_to_safetensors.py writes a Keras Bidirectional (concat): each direction's under
// "fw." and "bw.", then the layer's (I; H, the concatenation's width; the input's and the
// concatenation's quantization, which is both directions' output state's).
void add_bidirectional(const QuantizedLayer& q, const LayerRanges& f, const LayerRanges& b, const std::string& prefix,
                       std::vector<TensorToWrite>* tensors, Metadata* meta) {
  add_layer(q, f, prefix + "fw.", tensors, meta);
  add_layer(*q.backward, b, prefix + "bw.", tensors, meta);
  const Metadata keys = {
      {"bidirectional", "concat"},
      {"I", std::to_string(q.I)},
      {"H", std::to_string(q.width())},
      {"input_scale", f32s(q.input.scale)},
      {"input_zp", std::to_string(q.input.zero_point)},
      {"output_scale", f32s(q.output.scale)},
      {"output_zp", std::to_string(q.output.zero_point)},
  };
  for (const auto& kv : keys) meta->push_back({prefix + kv.first, kv.second});
}

// The int8 model file: top-level keys, then each layer's (docs/int8.md, "The model file"; a stack
// as the converter writes one: metadata layers = L and every layer's keys and tensors under "l<k>.";
// so is a single bidirectional layer, which the loader reads only under a prefix).
// The table as TFLite's GATHER takes it: int8 with the quantization of its output, which is layer
// 0's input: asymmetric over the table's range, each value as the QUANTIZE op (quantize_input)
// would quantize it, so that a row looked up is the row quantized.
QuantizedEmbedding quantize_embedding(const FloatEmbedding& e) {
  QuantizedEmbedding q;
  q.V = e.V;
  q.E = e.E;
  double lo = 0, hi = 0;
  for (float v : e.table) {
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  q.q = asymmetric_int8(lo, hi);
  const float recip = 1.0f / static_cast<float>(q.q.scale);
  const float qlo = static_cast<float>(-128 - q.q.zero_point), qhi = static_cast<float>(127 - q.q.zero_point);
  q.table.resize(e.table.size());
  for (std::size_t k = 0; k < e.table.size(); ++k) {
    const float v = std::min(std::max(e.table[k] * recip, qlo), qhi);
    q.table[k] = static_cast<std::int8_t>(static_cast<long>(std::nearbyint(v)) + q.q.zero_point);
  }
  return q;
}

// A float Dense head after the layers (PyTorch Linear, Keras Dense), as the loader found it.
struct FloatHead {
  DenseSpec spec;
  std::int64_t in = 0;          // D·O of the last layer
  int O = 0, dirs = 1;
  std::vector<float> W, b;      // [out, in], [out]
};

// The head's float output rows over y [T, B, D·O] (time-major, every row from a zero state, full
// length): every step [T, B, out], or each row's last outputs [B, out] (forward at T−1, reverse
// at 0). `linear`: before the activation; else after it.
std::vector<float> run_float_head(const FloatHead& h, const std::vector<float>& y, std::int64_t T, std::int64_t B, bool linear) {
  const std::int64_t out = h.spec.out_features, rows = h.spec.last_step_only ? B : T * B;
  std::vector<float> z(static_cast<std::size_t>(rows * out)), x(static_cast<std::size_t>(h.in));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int d = 0; d < h.dirs; ++d) {
      const std::int64_t t = h.spec.last_step_only ? (d == 0 ? T - 1 : 0) : r / B, b = h.spec.last_step_only ? r : r % B;
      std::memcpy(&x[static_cast<std::size_t>(d * h.O)], &y[static_cast<std::size_t>((t * B + b) * h.in + d * h.O)],
                  sizeof(float) * static_cast<std::size_t>(h.O));
    }
    float* zr = &z[static_cast<std::size_t>(r * out)];
    for (std::int64_t j = 0; j < out; ++j) {
      double sum = h.b[static_cast<std::size_t>(j)];
      for (std::int64_t k = 0; k < h.in; ++k) sum += static_cast<double>(h.W[static_cast<std::size_t>(j * h.in + k)]) * x[static_cast<std::size_t>(k)];
      zr[j] = static_cast<float>(sum);
    }
    if (linear) continue;
    const Activation a = h.spec.activation;
    for (std::int64_t j = 0; j < out; ++j)
      zr[j] = a == Activation::relu ? std::max(zr[j], 0.0f)
              : a == Activation::sigmoid ? 1.0f / (1.0f + std::exp(-zr[j]))
              : a == Activation::tanh ? std::tanh(zr[j]) : zr[j];
    if (a != Activation::softmax) continue;
    const float top = *std::max_element(zr, zr + out);
    float sum = 0;
    for (std::int64_t j = 0; j < out; ++j) sum += (zr[j] = std::exp(zr[j] - top));
    for (std::int64_t j = 0; j < out; ++j) zr[j] /= sum;
  }
  return z;
}

// The head as TFLite's FULLY_CONNECTED (docs/int8.md, "rnncore quantize"): the input is the last
// layer's int8 output as it is; weights symmetric per tensor (or per output with --per-channel);
// bias int32 at input scale × weight scale; the affine output asymmetric from the calibration's
// range (relu: of its non-negative part). A sigmoid then maps to scale 1/256, zero point −128, a
// tanh to 1/128, 0, and a softmax (a separate op after a Dense with no activation) to 1/256, −128.

QuantizedHead quantize_head(const FloatHead& h, const Asymmetric& input, const std::vector<float>& z, bool per_channel) {
  QuantizedHead q;
  q.in = h.in;
  q.out = h.spec.out_features;
  q.act = h.spec.activation;
  q.last_step = h.spec.last_step_only;
  q.input = input;
  double lo = 0, hi = 0;
  for (float v : z) {
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  q.linear = asymmetric_int8(q.act == Activation::relu ? 0.0 : lo, hi);
  q.output = q.linear;
  if (q.act == Activation::sigmoid || q.act == Activation::softmax) q.output = Asymmetric{1.0 / 256.0, -128};
  if (q.act == Activation::tanh) q.output = Asymmetric{1.0 / 128.0, 0};
  if (per_channel) {
    quantize_rows(h.W.data(), q.out, q.in, &q.w, &q.w_scales);
  } else {
    q.w_scales.assign(1, quantize_weights(h.W.data(), h.W.size(), &q.w));
  }
  q.b.resize(static_cast<std::size_t>(q.out));
  for (std::int64_t j = 0; j < q.out; ++j) {
    // The converter's bias scale is float32(input scale × weight scale).
    const double ws = q.w_scales[q.w_scales.size() == 1 ? 0 : static_cast<std::size_t>(j)];
    const double bs = static_cast<double>(static_cast<float>(static_cast<float>(q.input.scale) * static_cast<float>(ws)));
    const double v = std::round(static_cast<double>(h.b[static_cast<std::size_t>(j)]) / bs);
    q.b[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(std::min(std::max(v, -2147483647.0), 2147483647.0));
  }
  return q;
}

// The head's keys and tensors: Dense 0 ("fc0.") and, for a softmax, "softmax.".
void add_head(const QuantizedHead& q, std::vector<TensorToWrite>* tensors, Metadata* meta) {
  std::string scales;
  for (double v : q.w_scales) scales += (scales.empty() ? "" : ",") + f32s(v);
  const bool table = q.act == Activation::sigmoid || q.act == Activation::tanh;
  const Asymmetric& fc_out = q.act == Activation::softmax ? q.linear : q.output;
  const char* act = q.act == Activation::relu ? "relu" : q.act == Activation::sigmoid ? "sigmoid"
                    : q.act == Activation::tanh ? "tanh" : "none";
  meta->push_back({"dense", "1"});
  meta->push_back({"fc0.in", std::to_string(q.in)});
  meta->push_back({"fc0.out", std::to_string(q.out)});
  meta->push_back({"fc0.input_scale", f32s(q.input.scale)});
  meta->push_back({"fc0.input_zp", std::to_string(q.input.zero_point)});
  meta->push_back({"fc0.output_scale", f32s(fc_out.scale)});
  meta->push_back({"fc0.output_zp", std::to_string(fc_out.zero_point)});
  meta->push_back({"fc0.activation", act});
  meta->push_back({"fc0.w_scales", scales});
  if (table) {
    meta->push_back({"fc0.linear_scale", f32s(q.linear.scale)});
    meta->push_back({"fc0.linear_zp", std::to_string(q.linear.zero_point)});
  }
  tensors->push_back({"fc0.w", ElemType::i8, {q.out, q.in}, q.w.data()});
  tensors->push_back({"fc0.b", ElemType::i32, {q.out}, q.b.data()});
  if (q.act != Activation::softmax) return;
  meta->push_back({"softmax", "1"});
  meta->push_back({"softmax.beta", "1"});
  meta->push_back({"softmax.input_scale", f32s(q.linear.scale)});
  meta->push_back({"softmax.input_zp", std::to_string(q.linear.zero_point)});
  meta->push_back({"softmax.output_scale", f32s(q.output.scale)});
  meta->push_back({"softmax.output_zp", std::to_string(q.output.zero_point)});
}

Status write_model(const QuantizeOptions& o, const LoadedModel& model, const Data& cal, const Ranges& r,
                   const std::vector<QuantizedLayer>& layers, const QuantizedHead* head, const QuantizedEmbedding* embedding) {
  const int L = static_cast<int>(layers.size());
  bool prefixed = L > 1 || head != nullptr;  // (a Dense layer's file prefixes its layers)
  for (const QuantizedLayer& q : layers) prefixed = prefixed || q.backward != nullptr;
  Metadata meta = {
      {"format", "tflite_int8"},
      {"op", "UNIDIRECTIONAL_SEQUENCE_LSTM"},
      {"return_sequences", head != nullptr && head->last_step ? "0" : "1"},
      {"graph_input", embedding != nullptr ? "token_ids" : "float32"},
      {"graph_output", "float32"},
      {"source", "rnncore quantize"},
      {"rnncore_version", version_string()},
      {"float_model", basename_of(o.weights)},
      {"float_format", to_string(model.format)},
      {"calibration", basename_of(o.calibration)},
      {"calibration_shape", "[T=" + std::to_string(cal.T) + ", B=" + std::to_string(cal.B) + ", I=" +
                                std::to_string(layers.front().I) + "]"},
      {"calibration_carry_state", std::to_string(o.carry_state)},
      {"calibration_cell_range", o.cell_range},
      {"calibration_x_min", num(r.x_min)},
      {"calibration_x_max", num(r.x_max)},
  };
  if (prefixed) {  // the stack's input and output, as the first and the last layer's
    meta.push_back({"layers", std::to_string(L)});
    meta.push_back({"I", std::to_string(layers.front().I)});
    meta.push_back({"H", std::to_string(layers.back().width())});
    meta.push_back({"input_scale", f32s(layers.front().input.scale)});
    meta.push_back({"input_zp", std::to_string(layers.front().input.zero_point)});
    meta.push_back({"output_scale", f32s(layers.back().output.scale)});
    meta.push_back({"output_zp", std::to_string(layers.back().output.zero_point)});
  }
  std::vector<TensorToWrite> tensors;
  for (int l = 0; l < L; ++l) {
    const std::size_t k = static_cast<std::size_t>(l);
    const std::string prefix = prefixed ? "l" + std::to_string(l) + "." : std::string();
    if (layers[k].backward)
      add_bidirectional(layers[k], r.layer[k], r.backward[k], prefix, &tensors, &meta);
    else
      add_layer(layers[k], r.layer[k], prefix, &tensors, &meta);
  }
  if (head != nullptr) add_head(*head, &tensors, &meta);
  if (embedding != nullptr) {  // (the keys of a Keras Embedding's file: docs/int8.md, "The model file")
    meta.push_back({"embedding", "1"});
    meta.push_back({"embedding.V", std::to_string(embedding->V)});
    meta.push_back({"embedding.E", std::to_string(embedding->E)});
    meta.push_back({"embedding.scale", f32s(embedding->q.scale)});
    meta.push_back({"embedding.zp", std::to_string(embedding->q.zero_point)});
    meta.push_back({"embedding.ids_dtype", "int32"});
    tensors.push_back({"embedding.table", ElemType::i8, {embedding->V, embedding->E}, embedding->table.data()});
  }
  return write_safetensors(o.output.c_str(), tensors, meta) == RNNCORE_OK ? Status::ok : Status::io;
}

// "input 16, hidden 32" or "input 16, hidden 32, 24" (every layer's), and the cell clips.
std::string describe_stack(const StackSpec& stack) {
  std::string d = "input " + std::to_string(stack.input_size) + ", hidden ";
  for (int l = 0; l < stack.num_layers; ++l) d += (l ? ", " : "") + std::to_string(stack.layers[l].hidden_size);
  for (int l = 0; l < stack.num_layers; ++l)
    if (stack.layers[l].cell_clip > 0)
      d += ", cell_clip " + num(stack.layers[l].cell_clip) + (stack.num_layers > 1 ? " (layer " + std::to_string(l) + ")" : "");
  return d;
}

// "one unidirectional layer", "2 bidirectional layers", "3 layers (bidirectional, unidirectional, ...)".
std::string describe_layers(const StackSpec& stack) {
  const int L = stack.num_layers;
  std::string kinds;
  bool mixed = false;
  for (int l = 0; l < L; ++l) {
    kinds += std::string(l ? ", " : "") + (num_directions(stack.layers[l]) == 2 ? "bidirectional" : "unidirectional");
    mixed = mixed || stack.layers[l].direction != stack.layers[0].direction;
  }
  const std::string kind = num_directions(stack.layers[0]) == 2 ? "bidirectional" : "unidirectional";
  if (L == 1) return "one " + kind + " layer";
  return mixed ? std::to_string(L) + " layers (" + kinds + ")" : std::to_string(L) + " " + kind + " layers";
}

// What the calibration saw of each layer: ", h in [..], max|c| .." or "; layer l: ..." each, a
// bidirectional layer's per direction.
std::string describe_ranges(const StackSpec& stack, const Ranges& r) {
  const int L = stack.num_layers;
  std::string seen;
  for (int l = 0; l < L; ++l)
    for (int dir = 0; dir < num_directions(stack.layers[l]); ++dir) {
      const LayerRanges& lr = (dir == 0 ? r.layer : r.backward)[static_cast<std::size_t>(l)];
      std::string label = L > 1 ? "layer " + std::to_string(l) : std::string();
      if (num_directions(stack.layers[l]) == 2) label += std::string(label.empty() ? "" : " ") + (dir ? "backward" : "forward");
      char b[160];
      std::snprintf(b, sizeof b, "%sh in [%.6g, %.6g], max|c| %.6g", label.empty() ? ", " : ("; " + label + ": ").c_str(),
                    lr.h_min, lr.h_max, lr.c_abs);
      seen += b;
    }
  return seen;
}

// The float model to quantize: loaded as `rnncore run` loads it, an LSTM stack the integer LSTM
// can hold, with finite weights.
Status load_float_model(const QuantizeOptions& o, const Log& log, LoadedModel* model, FloatHead* head,
                        FloatEmbedding* embedding, QuantizeReport* report, std::string* error) {
  ModelHints hints = o.hints;
  hints.dtype = DType::f32;
  {
    SafeTensors file;
    if (read_safetensors(o.weights.c_str(), &file) == RNNCORE_OK && is_int8_model(file)) {
      *error = o.weights + ": already an int8 LSTM model (format tflite_int8); rnncore quantize takes a float model";
      return Status::unsupported;
    }
  }
  StackSpec config;
  Status s;
  if (!o.config.empty() && (s = read_stack_config(o.config, &config, error)) != Status::ok) return s;
  if ((s = load_weights(o.weights, hints, o.config.empty() ? nullptr : &config, model, error)) != Status::ok) return s;
  const StackSpec& st = model->stack;
  if (st.head.out_features > 0) {  // quantized after the layers (quantize_head); an Embedding is not yet
    const float* canon = reinterpret_cast<const float*>(model->canonical.data());
    const LayerSpec& last = st.layers[st.num_layers - 1];
    head->spec = st.head;
    head->O = output_size(last);
    head->dirs = num_directions(last);
    head->in = static_cast<std::int64_t>(head->dirs) * head->O;
    const std::int64_t w = canonical_offset(st, 0, 0, ParamKind::dense_weight, 0), b = canonical_offset(st, 0, 0, ParamKind::dense_bias, 0);
    head->W.assign(canon + w, canon + w + st.head.out_features * head->in);
    head->b.assign(canon + b, canon + b + st.head.out_features);
  }
  if (st.embedding.vocab_size > 0) {  // quantized before the layers (quantize_embedding)
    const float* canon = reinterpret_cast<const float*>(model->canonical.data());
    const std::int64_t at = canonical_offset(st, 0, 0, ParamKind::embedding, 0);
    embedding->V = st.embedding.vocab_size;
    embedding->E = st.input_size;
    embedding->table.assign(canon + at, canon + at + embedding->V * embedding->E);
  }
  drop_ends(model);  // the recurrent layers as they were; the ends are quantized from *head, *embedding
  for (const std::string& note : model->notes) log.say(note);
  if (const std::string refused = inapplicable_hint(o.hints, model->stack); !refused.empty()) {
    report->option_error = true;
    *error = refused + " (" + o.weights + ")";
    return Status::unsupported;
  }
  const std::string refuse = refusal(model->stack);
  if (!refuse.empty()) {
    *error = o.weights + ": " + refuse + "; rnncore quantize takes LSTM layers (unidirectional or bidirectional) "
             "without projection or peepholes (what the int8 LSTM runs; docs/int8.md)";
    return Status::unsupported;
  }
  const float* canon = reinterpret_cast<const float*>(model->canonical.data());
  for (std::size_t k = 0; k < model->canonical.size() / sizeof(float); ++k)
    if (!std::isfinite(canon[k])) {
      *error = o.weights + ": a weight is " + num(canon[k]) + "; a model to quantize must be finite";
      return Status::invalid_size;
    }
  return Status::ok;
}

// The float model as it runs (`net`), and as it calibrates (`cal`: with the clip of
// set_cell_clip, which the int8 model takes too; else `net` itself), on up to `rows` rows a step
// at a time.
struct FloatModels {
  StackSpec stack, clipped;
  Model net, reclipped_net;
  bool reclipped = false;
  Model& cal() { return reclipped ? reclipped_net : net; }
};

Status make_float_models(const QuantizeOptions& o, const LoadedModel& model, std::int64_t rows, FloatModels* f,
                         std::string* error) {
  f->stack = f->clipped = model.stack;
  PlanOptions opt;
  opt.max_batch = static_cast<std::int32_t>(rows);
  opt.max_seq_len = 1;
  Status s = Model::create(f->stack, opt, model.canonical.data(), &f->net);
  if (o.set_cell_clip)
    for (int l = 0; l < f->stack.num_layers; ++l) {
      f->reclipped = f->reclipped || f->clipped.layers[l].cell_clip != o.cell_clip;
      f->clipped.layers[l].cell_clip = o.cell_clip;
    }
  if (s == Status::ok && f->reclipped) s = Model::create(f->clipped, opt, model.canonical.data(), &f->reclipped_net);
  if (s != Status::ok) *error = o.weights + ": " + last_error_detail();
  return s;
}

// Reads the file back as io::load_model loads it (its StackSpec and canonical bytes): a scale the
// integer LSTM refuses is found here, not at the first run (the file is then removed).
Status read_back(const QuantizeOptions& o, LoadedModel* qm, std::string* error) {
  const Status s = load_weights(o.output, ModelHints(), nullptr, qm, error);
  if (s != Status::ok) {
    std::remove(o.output.c_str());
    *error += " (the quantization chosen from the calibration is not one the integer LSTM runs; " + o.output + " removed)";
  }
  return s;
}

}  // namespace

Status quantize(const QuantizeOptions& o, QuantizeReport* report, std::string* error) {
  *report = QuantizeReport();
  const Log log{o.note, o.progress};
  LoadedModel model;
  FloatHead float_head;
  FloatEmbedding float_embedding;
  Status s = load_float_model(o, log, &model, &float_head, &float_embedding, report, error);
  if (s != Status::ok) return s;
  const StackSpec& stack = model.stack;
  const int L = stack.num_layers;
  const std::int64_t I = stack.input_size, H = stack.layers[L - 1].hidden_size * num_directions(stack.layers[L - 1]);
  const float* canon = reinterpret_cast<const float*>(model.canonical.data());
  Data cal, ev;
  std::string err;
  const bool ids = float_embedding.V > 0;  // token ids, read as the table's float rows
  auto read = [&](const std::string& path, Data* d) {
    return ids ? read_ids(path, float_embedding, o.batch_first, d) : read_data(path, I, o.batch_first, d);
  };
  if (!(err = read(o.calibration, &cal)).empty() || (!o.eval.empty() && !(err = read(o.eval, &ev)).empty())) {
    *error = err;
    return Status::format;
  }
  const std::int64_t group = o.carry_state;
  if (group > 0 && cal.B % group != 0) {
    report->option_error = true;
    *error = "--carry-state " + std::to_string(group) + " does not divide the calibration's " + std::to_string(cal.B) + " rows";
    return Status::invalid_size;
  }
  FloatModels f;  // a group has fewer rows
  if ((s = make_float_models(o, model, std::max(cal.B, ev.B), &f, error)) != Status::ok) return s;
  report->model = "LSTM, " + describe_layers(stack) + ", " + describe_stack(stack) + " (" + to_string(model.format) +
                  " weights, prefix '" + model.prefix + "')";

  // Calibration: the float model's ranges.
  const auto t0 = Clock::now();
  Ranges r;
  r.layer.resize(static_cast<std::size_t>(L));
  r.backward.resize(static_cast<std::size_t>(L));
  r.cell_at_batch_end = o.cell_range == "batch-end";
  std::vector<float> y_cal, y_ev;
  if ((s = run_float_model(f.cal(), f.clipped, canon, cal, group, &y_cal, &r, "calibration", log)) != Status::ok) {
    *error = last_error_detail();
    return s;
  }
  char b[512];
  std::snprintf(b, sizeof b, "%s, T=%lld B=%lld (%lld steps of a row)%s, %.3f s: x in [%.6g, %.6g]", o.calibration.c_str(),
                static_cast<long long>(cal.T), static_cast<long long>(cal.B), static_cast<long long>(cal.T * cal.B),
                group > 0 ? (", groups of " + std::to_string(group) + " rows carrying the state").c_str() : "",
                std::chrono::duration<double>(Clock::now() - t0).count(), r.x_min, r.x_max);
  report->calibration = b + describe_ranges(stack, r);
  // The accuracy compares runs from a zero state, as the int8 model runs.
  if ((group > 0 || f.reclipped) &&
      (s = run_float_model(f.net, stack, canon, cal, 0, &y_cal, nullptr, "calibration", log)) != Status::ok) {
    *error = last_error_detail();
    return s;
  }

  // An Embedding's table: its quantization is layer 0's input's.
  const QuantizedEmbedding embedding = ids ? quantize_embedding(float_embedding) : QuantizedEmbedding();
  // The quantization (docs/int8.md, "Quantizing a float LSTM"): layer l > 0 reads layer l−1's int8
  // output as it is, so its input takes that output's quantization.
  std::vector<QuantizedLayer> layers;
  for (int l = 0; l < L; ++l)
    layers.push_back(quantize_layer(stack, l, canon, l > 0 ? layers.back().output : ids ? embedding.q : asymmetric_int8(r.x_min, r.x_max), r,
                                    f.clipped.layers[l].cell_clip, o.per_channel, log));
  // The head: its input is the last layer's int8 output; its range from the float head on the
  // float layers' output (from a zero state, as the accuracy is measured).
  const bool has_head = float_head.spec.out_features > 0;
  QuantizedHead head;
  if (has_head) {
    head = quantize_head(float_head, layers.back().output, run_float_head(float_head, y_cal, cal.T, cal.B, true), o.per_channel);
    y_cal = run_float_head(float_head, y_cal, cal.T, cal.B, false);
  }
  if (write_model(o, model, cal, r, layers, has_head ? &head : nullptr, ids ? &embedding : nullptr) != Status::ok) {
    *error = rnncore_last_error_detail();
    return Status::io;
  }
  LoadedModel qm;
  if ((s = read_back(o, &qm, error)) != Status::ok) return s;
  for (int l = 0; l < L; ++l) describe_layer(L, l, layers[static_cast<std::size_t>(l)], &report->quantization);
  report->written = "wrote " + o.output + ": int8 LSTM" +
                    (L > 1 || has_bidirectional(stack) ? ", " + describe_layers(stack) : std::string()) +
                    " (format tflite_int8), " +
                    (ids ? "an Embedding " + std::to_string(float_embedding.V) + " x " + std::to_string(I) + ", token ids [B, T]"
                         : "float32 input [B, T, " + std::to_string(I) + "]") +
                    " (batch-major), int8 output " +
                    (!has_head ? "[B, T, " + std::to_string(H) + "]"
                               : std::string(float_head.spec.last_step_only ? "[B, " : "[B, T, ") +
                                     std::to_string(head.out) + "] (a Dense head, " + to_string(head.act) + ")");
  if ((s = measure(qm, cal, y_cal, has_head ? &head : nullptr, log, &report->calibration_accuracy, error)) != Status::ok)
    return s;
  if (!o.eval.empty()) {
    if ((s = run_float_model(f.net, stack, canon, ev, 0, &y_ev, nullptr, "evaluation", log)) != Status::ok) {
      *error = last_error_detail();
      return s;
    }
    report->has_eval = true;
    if (has_head) y_ev = run_float_head(float_head, y_ev, ev.T, ev.B, false);
    if ((s = measure(qm, ev, y_ev, has_head ? &head : nullptr, log, &report->eval_accuracy, error)) != Status::ok)
      return s;
  }
  return Status::ok;
}

}  // namespace io
}  // namespace rnncore

// Integer LSTM model files on a host (include/rnncore/io/int8_file.hpp): the public face of the
// io library's integer model (src/io/int8_model.hpp) and a random stack to time its kernels.
#include "rnncore/io/int8_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "src/internal/int8_kernels.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/int8_lstm.hpp"
#include "src/internal/spec_internal.hpp"
#include "src/io/int8_model.hpp"

namespace rnncore {
namespace io {

using detail::dense_at;
using detail::dense_input_size;
using detail::head_input_size;
using detail::num_dense;

namespace {

// The step kernels' name: "GATE / CELL", or "scalar step" where the step runs its scalar code.
std::string step_name(const q8::StepKernels* step) {
  return step != nullptr ? std::string(step->gate_name) + " / " + step->cell_name : std::string("scalar step");
}

}  // namespace

std::vector<std::string> int8_describe(const StackSpec& st, const unsigned char* canonical) {
  static const char* const merge_names[] = {"", " sum", " mul", " ave"};  // MergeMode; concat: no word
  std::string cells, sizes;
  bool per_channel = false, bidirectional = false;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    for (int d = 0; d < num_directions(ls); ++d) {
      cells += std::string(d > 0 ? "/2^" : cells.empty() ? "2^" : ", 2^") +
               std::to_string(std::lround(std::log2(static_cast<double>(ls.int8[d].cell_scale))));
      per_channel |= ls.int8[d].per_channel;
    }
    const std::string H = std::to_string(ls.hidden_size);
    bidirectional |= num_directions(ls) == 2;
    sizes += (sizes.empty() ? "" : ", ") +
             (num_directions(ls) == 2 ? "bidirectional " + H + "+" + H + merge_names[static_cast<int>(ls.merge.mode)] : H);
  }
  const bool sequences = st.head.out_features == 0 || !st.head.last_step_only;
  const int L = st.num_layers;
  std::vector<std::string> lines;
  char b[512];
  std::snprintf(b, sizeof b, "model: int8 LSTM (tflite_int8, LiteRT's 8x8_16 integer LSTM%s), I=%d H=%lld%s, %s; cell scale %s",
                per_channel ? "; per-channel weight scales, rnncore's extension" : "", st.input_size,
                static_cast<long long>(head_input_size(st)),  // the LSTM's width, not the head's
                (L > 1 || bidirectional ? ", " + std::to_string(L) + (L > 1 ? " layers (H " : " layer (H ") + sizes + ")"
                                        : std::string()).c_str(),
                sequences ? "returns sequences" : "returns the last step", cells.c_str());
  lines.push_back(b);
  for (int k = 0; k < num_dense(st); ++k) {
    if (int8_identity_dense(st, canonical, k)) continue;
    const DenseSpec& d = dense_at(st, k);
    const bool table = d.activation == Activation::sigmoid || d.activation == Activation::tanh;
    std::snprintf(b, sizeof b, "then Dense %lld -> %d%s%s (int8, XNNPACK's requantization%s)",
                  static_cast<long long>(dense_input_size(st, k)), d.out_features, sequences ? " on every step" : "",
                  d.activation == Activation::relu ? ", relu" : !table ? "" : d.activation == Activation::sigmoid ? ", sigmoid" : ", tanh",
                  table ? "; the activation as TFLite's int8 table" : "");
    lines.push_back(b);
  }
  if (st.head.activation == Activation::softmax) {
    std::snprintf(b, sizeof b, "then softmax over %d%s (int8, beta %g, TFLite's table of exp)", st.head.out_features,
                  sequences ? " on every step" : "", static_cast<double>(st.head.int8_softmax_beta));
    lines.push_back(b);
  }
  return lines;
}

std::vector<std::int64_t> int8_state_shape(const StackSpec& st, std::int64_t batch) {
  bool uniform = true;
  std::int64_t n = 0;  // LSTM ops: layers × directions
  for (int l = 0; l < st.num_layers; ++l) {
    uniform = uniform && st.layers[l].hidden_size == st.layers[0].hidden_size;
    n += num_directions(st.layers[l]);
  }
  const std::int64_t H = st.layers[0].hidden_size;
  if (n == 1) return {batch, H};
  if (uniform) return {n, batch, H};
  return {state_elements(st, static_cast<int>(batch))};
}

std::string int8_describe_embedding(int vocab, int dim, const QuantParams& rows) {
  char b[160];
  std::snprintf(b, sizeof b, "an embedding %d x %d (int8 rows, scale %g, zero point %d)", vocab, dim,
                static_cast<double>(rows.scale), static_cast<int>(rows.zero_point));
  return b;
}

std::string int8_model_origin(const SafeTensors& file) {
  const std::string* source = file.meta("source");
  if (source != nullptr && *source == "rnncore quantize") {
    const std::string* from = file.meta("float_model");
    return "written by rnncore quantize" + (from != nullptr ? " from " + *from : std::string());
  }
  return "converted by tools/tflite_to_safetensors.py" + (source != nullptr ? " from " + *source : std::string());
}

Int8KernelNames int8_best_kernels(Isa cap) {
  const q8::StepKernels* step = q8::int8_best_step_kernels(cap);
  return {q8::int8_best_dot_kernel(cap).name,
          step != nullptr ? std::string(step->gate_name) + " / " + step->cell_name : std::string("scalar")};
}

// ---- Int8Runner ----

struct Int8Runner::Impl {
  // The file's stack with int8 rows in and out (the caller quantizes or embeds the input and reads
  // the steps in the file's order): its StackSpec less the embedding, reverse_input and the float
  // ends, and its canonical bytes less the table.
  StackSpec spec;
  std::vector<unsigned char> canonical;
  // What the caller does before: the file's steps reversed, its input quantization, its embedding.
  bool reverse_input = false;
  QuantParams input_quant;
  int vocab = 0;
  std::vector<std::int8_t> table;  // [vocab, input_size]
  Model model;  // made by plan() / run() for its batch and length (remade when they grow)
  int max_batch = 0, max_seq = 0, threads = 1;
};

Int8Runner::Int8Runner() = default;
Int8Runner::~Int8Runner() = default;
Int8Runner::Int8Runner(Int8Runner&&) noexcept = default;
Int8Runner& Int8Runner::operator=(Int8Runner&&) noexcept = default;

Status Int8Runner::load(const SafeTensors& file, Int8Runner* out, std::string* error) {
  std::unique_ptr<Impl> impl(new Impl);
  const Status s = load_int8_spec(file, &impl->spec, &impl->canonical, error);
  if (s != Status::ok) return s;
  StackSpec& st = impl->spec;
  impl->reverse_input = st.reverse_input;
  impl->input_quant = st.input_quant;
  if (st.embedding.vocab_size > 0) {  // the table out of the canonical bytes: the layers' part, then the Dense layers'
    const std::size_t at = static_cast<std::size_t>(canonical_offset(st, 0, 0, ParamKind::embedding, 0));
    const std::size_t n = static_cast<std::size_t>(st.embedding.vocab_size) * static_cast<std::size_t>(st.input_size);
    const std::size_t end = num_dense(st) > 0 ? static_cast<std::size_t>(canonical_offset(st, 0, 0, ParamKind::dense_weight, 0))
                                              : impl->canonical.size();
    impl->vocab = st.embedding.vocab_size;
    impl->table.assign(impl->canonical.begin() + static_cast<std::ptrdiff_t>(at),
                       impl->canonical.begin() + static_cast<std::ptrdiff_t>(at + n));
    impl->canonical.erase(impl->canonical.begin() + static_cast<std::ptrdiff_t>(at),
                          impl->canonical.begin() + static_cast<std::ptrdiff_t>(end));
    st.embedding.vocab_size = 0;
  }
  st.reverse_input = st.float_input = st.float_output = false;
  out->impl_ = std::move(impl);
  return Status::ok;
}

int Int8Runner::input_size() const { return impl_->spec.input_size; }
int Int8Runner::output_size() const {
  const StackSpec& st = impl_->spec;
  return st.head.out_features > 0 ? st.head.out_features : static_cast<int>(head_input_size(st));
}
bool Int8Runner::return_sequences() const {
  const DenseSpec& h = impl_->spec.head;
  return h.out_features == 0 || !h.last_step_only;
}
bool Int8Runner::reverse_input() const { return impl_->reverse_input; }
bool Int8Runner::has_embedding() const { return impl_->vocab > 0; }
int Int8Runner::vocab() const { return impl_->vocab; }

std::size_t Int8Runner::state_elements(int batch) const {
  return static_cast<std::size_t>(rnncore::state_elements(impl_->spec, batch));
}

std::vector<std::int64_t> Int8Runner::state_shape(std::int64_t batch) const { return int8_state_shape(impl_->spec, batch); }

std::int8_t Int8Runner::quantize_input(float x) const {
  return detail::int8_quantize(x, 1.0f / impl_->input_quant.scale, impl_->input_quant.zero_point);
}

std::size_t Int8Runner::embed_ids(std::size_t n, const std::int64_t* ids, std::int8_t* x) const {
  const std::size_t E = static_cast<std::size_t>(impl_->spec.input_size);
  for (std::size_t k = 0; k < n; ++k) {
    if (ids[k] < 0 || ids[k] >= impl_->vocab) return k;
    std::memcpy(x + k * E, impl_->table.data() + static_cast<std::size_t>(ids[k]) * E, E);
  }
  return n;
}

void Int8Runner::run(int batch, int seq_len, const std::int8_t* x, std::int8_t* y, const std::int8_t* h0,
                     const std::int16_t* c0, std::int8_t* hn, std::int16_t* cn) const {
  Impl& m = *impl_;
  if (batch <= 0 || seq_len <= 0) return;
  if (batch > m.max_batch || seq_len > m.max_seq) {
    std::string unused;  // a plan of the file's own spec, larger: fails only without memory
    if (const_cast<Int8Runner*>(this)->plan(batch, seq_len, m.threads, &unused) != Status::ok) return;
  }
  ForwardArgs a;
  a.batch = batch;
  a.seq_len = seq_len;
  a.layout = Layout::batch_major;
  a.x = x;
  a.h0 = h0;
  a.c0 = c0;
  a.hy = hn;
  a.cy = cn;
  a.y = y;
  m.model.forward(a);  // the arguments are the plan's: it cannot fail
}

Status Int8Runner::plan(int batch, int seq_len, int threads, std::string* error) {
  Impl& m = *impl_;
  m.threads = threads;
  PlanOptions opt;
  opt.max_batch = batch;
  opt.max_seq_len = seq_len;
  opt.threads = threads;
  const Status s = Model::create(m.spec, opt, m.canonical.data(), &m.model);
  if (s != Status::ok) {
    *error = last_error_detail();
    return s;
  }
  m.max_batch = batch;
  m.max_seq = seq_len;
  return Status::ok;
}

std::vector<std::string> Int8Runner::describe() const { return int8_describe(impl_->spec, impl_->canonical.data()); }

std::string Int8Runner::describe_embedding() const {
  return int8_describe_embedding(impl_->vocab, impl_->spec.input_size, impl_->input_quant);
}

std::string Int8Runner::kernel_names() const {
  if (impl_->max_batch > 0) return int8_plan_kernels(impl_->model.plan());
  PlanOptions opt;  // not planned yet: the kernels a plan of one row would run
  opt.max_batch = 1;
  opt.max_seq_len = 1;
  Plan plan;
  return Plan::create(impl_->spec, opt, &plan) == Status::ok ? int8_plan_kernels(plan) : std::string("?");
}

// ---- The stack rnncore bench --dtype int8 times ----

namespace {

// The quantization of a Keras LSTM converted with a cell clip (scales of 1/128 for the int8
// tensors, the weights' range [−1, 1] in 127 steps, the cell at 2^-11 with a clip of 10).
Int8LstmQuant keras_like_quantization() {
  Int8LstmQuant q;
  for (int g = 0; g < q8::kGates; ++g) q.w_scale[g] = q.r_scale[g] = 1.0f / 127;
  q.state.scale = q.hidden.scale = 1.0f / 128;
  q.state.zero_point = q.hidden.zero_point = -2;
  q.cell_scale = 1.0f / 2048;
  q.cell_clip = 10.0f;
  return q;
}

}  // namespace

Status int8_bench_stack(int input, int hidden, int layers, StackSpec* spec, std::vector<unsigned char>* canonical,
                        std::string* error) {
  StackSpec& sp = *spec;
  sp = StackSpec();
  sp.dtype = DType::i8;
  sp.input_size = input;
  sp.input_quant.scale = 1.0f / 128;
  sp.input_quant.zero_point = 3;
  sp.num_layers = layers;
  for (int l = 0; l < layers && l < kMaxLayers; ++l) {
    sp.layers[l].hidden_size = hidden;
    sp.layers[l].int8[0] = keras_like_quantization();
  }
  const Status st = validate(sp);
  if (st != Status::ok) {
    *error = std::string("int8 LSTM: ") + last_error_detail();
    return st;
  }
  std::uint64_t state = 12345;
  auto next_byte = [&state]() {  // small LCG: benchmark data only needs to be non-degenerate
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int8_t>(static_cast<int>((state >> 33) % 255) - 127);
  };
  canonical->assign(static_cast<std::size_t>(param_count(sp)), 0);
  unsigned char* c = canonical->data();
  for (int l = 0; l < layers; ++l) {
    const std::size_t H = static_cast<std::size_t>(hidden), in = static_cast<std::size_t>(l == 0 ? input : hidden);
    auto* w = reinterpret_cast<std::int8_t*>(c + canonical_offset(sp, l, 0, ParamKind::input_weight, 0));
    auto* r = reinterpret_cast<std::int8_t*>(c + canonical_offset(sp, l, 0, ParamKind::recurrent_weight, 0));
    for (std::size_t i = 0; i < 4 * H * in; ++i) w[i] = next_byte();
    for (std::size_t i = 0; i < 4 * H * H; ++i) r[i] = next_byte();
    for (std::size_t i = 0; i < 4 * H; ++i) {
      const std::int32_t b = 64 * next_byte();
      std::memcpy(c + canonical_offset(sp, l, 0, ParamKind::input_bias, 0) + 4 * i, &b, 4);
    }
  }
  return Status::ok;
}

std::string int8_plan_kernels(const Plan& plan) {
  // The plan's dot kernel under max_isa; the step's under the same cap, none for the portable kernels.
  const q8::StepKernels* step = plan.isa() == Isa::none ? nullptr : q8::int8_best_step_kernels(plan.options().max_isa);
  return std::string(plan.kernel_name()) + " + " + step_name(step);
}

}  // namespace io
}  // namespace rnncore

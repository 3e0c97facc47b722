// The rnncore command: run a PyTorch / ONNX / Keras / canonical model on .npy input, benchmark
// shapes, and report what this machine and build can do (DESIGN §8).
//
// Exit status: 0 success; 2 usage error; 1 any other error, with one line on stderr naming the
// file, the tensor and the expected vs found shape or type.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rnncore/gpu.hpp"
#include "rnncore/rnncore.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "tools/cli_args.hpp"
#include "tools/export_c.hpp"
#include "tools/fma_peak/fma_peak.hpp"
#include "rnncore/io/model.hpp"
#include "rnncore/io/stack_config.hpp"

using namespace rnncore;
using namespace rnncore::tools;
using namespace rnncore::io;

namespace {

constexpr int kUsageError = 2;
constexpr int kError = 1;

const char* const kUsage =
    "usage: rnncore <command> [options]\n"
    "\n"
    "commands:\n"
    "  run    run a recurrent model from a safetensors file on .npy input\n"
    "  bench  time a forward pass of random weights (median of repeats)\n"
    "  info   version, backends, CPU features and chosen kernels\n"
    "  export-c  write a model as a C header for firmware (weights, spec, buffer sizes)\n"
    "  grad   gradients of a model's weights, input and initial states (backward through time)\n"
    "  help   this text, or 'rnncore help <command>'\n";

const char* const kRunUsage =
    "usage: rnncore run --weights M.safetensors --input X.npy --output Y.npy [options]\n"
    "\n"
    "model (inferred from tensor names, shapes and safetensors metadata unless given):\n"
    "  --format pytorch|onnx|keras|canonical   weight layout (default: detected)\n"
    "  --prefix NAME.                          tensor-name prefix (default: detected)\n"
    "  --mode lstm|gru|rnn_tanh|rnn_relu       cell (default: metadata 'mode', else the gate count)\n"
    "  --gru reset-after|reset-before          GRU variant (default: metadata, else the format's own)\n"
    "  --input-mode linear|skip|auto_select    check layer 0's input mode (canonical files)\n"
    "  --dtype f32|f64                         compute type (default f32; f64 runs the reference)\n"
    "  --config STACK.json                     a stack of layers with wrappers (docs/dropout.md); the\n"
    "                                          weights must match it\n"
    "inputs and outputs (.npy; float32 outputs in rnncore's layouts):\n"
    "  --batch-first                           X is [B, T, I] and Y is [B, T, D*H] (default time-major)\n"
    "  --seq-lengths L.npy                     [B] integer lengths, 0..T, any order\n"
    "  --h0 F.npy  --c0 F.npy                  initial states [L*D, B, H] (default zeros)\n"
    "  --hn F.npy  --cn F.npy                  write final states [L*D, B, H] (a stack whose layers\n"
    "                                          differ: the per-layer [B, H_l] blocks, flattened)\n"
    "dropout (docs/dropout.md):\n"
    "  --train                                 a training run: dropout on (default: inference, none)\n"
    "  --mc-dropout                            Monte-Carlo dropout in an inference run\n"
    "  --seed S  --step N                      the run's seed and step counter (default 0 and 0)\n"
    "  --dropout P                             inter-layer dropout probability (CudnnLSTM's dropout)\n"
    "  --row-ids R.npy                         [B] row ids for the masks (default: the batch index)\n"
    "execution:\n"
    "  --backend auto|reference|simd|gpu      (default auto)\n"
    "  --threads N                             worker threads (default 1)\n"
    "  --repeat N                              time N further runs and report the median (default 0)\n"
    "checking:\n"
    "  --expect Y.npy [--expect-hn F.npy] [--expect-cn F.npy]\n"
    "                                          print the largest deviation from stored outputs\n"
    "  --tolerance R                           with --expect: exit 1 if the relative error exceeds R\n";

const char* const kBenchUsage =
    "usage: rnncore bench --mode lstm|gru|rnn_tanh|rnn_relu --seq T --batch B --input I --hidden H [options]\n"
    "\n"
    "  --layers L          (default 1)\n"
    "  --bidirectional\n"
    "  --gru reset-after|reset-before\n"
    "  --threads N         (default 1)\n"
    "  --reps R            timed repetitions after one warm-up (default 20)\n"
    "  --dtype f32|f64|bf16|f16  computation type, or bf16 / f16 weight storage with f32\n"
    "                      accumulation (default f32)\n"
    "  --backend auto|reference|simd|gpu  (gpu: device buffers; each run timed on the\n"
    "                      host until the device has finished it)\n"
    "  --dropout P         also time the network with dropout P on every site (wrapper input, output and\n"
    "                      state, inter-layer), alternating, and print the overhead\n"
    "  --backward          also time a training step (training forward filling the reserve + backward\n"
    "                      for dx, dh0, dc0 and the weights) against the inference forward, alternating,\n"
    "                      and print both and their ratio; with --dropout P the training step is also\n"
    "                      timed with dropout P on every site (CPU backends only); each timed run\n"
    "                      follows an untimed one of the same kind\n"
    "  --peak              also measure this core's FMA peak and print the fraction of it reached\n"
    "prints: median_ms=... gflops=... (2 flops per multiply-add of the matrix products);\n"
    "  with --backward (median_ms is then the inference forward's):\n"
    "  training_step_ms=... forward_ms=... backward_ms=... gflops=... (3x the forward's) ratio=...\n";

const char* const kInfoUsage = "usage: rnncore info\n";

const char* const kGradUsage =
    "usage: rnncore grad --weights M.safetensors --input X.npy --dy DY.npy --grads G.safetensors [options]\n"
    "\n"
    "Backward through time (docs/training.md): the gradients of  sum(y*dy) + sum(hn*dhn) + sum(cn*dcn).\n"
    "G.safetensors holds one float32 tensor per weight tensor of M, with the same name and shape.\n"
    "\n"
    "gradients in (.npy, float):\n"
    "  --dy DY.npy                             [T, B, D*H] (or [B, T, D*H] with --batch-first)\n"
    "  --dhn F.npy  --dcn F.npy                of the final states [L*D, B, H] (default zeros)\n"
    "gradients out (float32 .npy):\n"
    "  --dx DX.npy                             of the input, in its layout\n"
    "  --dh0 F.npy  --dc0 F.npy                of the initial states [L*D, B, H]\n"
    "  --output Y.npy                          also write the training forward's output\n"
    "model, inputs, dropout and execution: every option of 'rnncore run' (rnncore help run):\n"
    "  --format --prefix --mode --gru --input-mode --dtype --config --batch-first --seq-lengths\n"
    "  --h0 --c0 --train --seed --step --dropout --row-ids --backend --threads\n"
    "  With --train, dropout acts with the masks of 'rnncore run --train' with the same seed and step.\n";

int usage_error(const char* command_usage, const std::string& what) {
  std::fprintf(stderr, "rnncore: %s\n\n%s", what.c_str(), command_usage);
  return kUsageError;
}

int error(const std::string& line) {
  std::fprintf(stderr, "rnncore: error: %s\n", line.c_str());
  return kError;
}

std::string library_error(Status s) {
  const std::string d = last_error_detail();
  return d.empty() ? status_message(s) : d;
}

std::string shape_string(const std::vector<std::int64_t>& shape) { return io::shape_to_string(shape.data(), shape.size()); }

std::string dims_string(std::initializer_list<std::string> dims) {
  std::string s = "[";
  for (const std::string& d : dims) s += (s.size() > 1 ? ", " : "") + d;
  return s + "]";
}

// Device copies of one forward run's tensors (a GPU plan takes device memory, the .npy files are
// host memory): upload() allocates device buffers, fills x / h0 / c0 from the host tensors of
// `host` and returns the same arguments with device pointers; download() waits for the device and
// copies y / hy / cy back to the host pointers. seq_lengths and row_ids stay host arrays (the GPU
// backend reads them from the host).
class GpuForwardBuffers {
 public:
  GpuForwardBuffers() = default;
  GpuForwardBuffers(const GpuForwardBuffers&) = delete;
  GpuForwardBuffers& operator=(const GpuForwardBuffers&) = delete;
  ~GpuForwardBuffers() {
    for (void* p : ptr_) gpu_free(device_, p);
  }

  Status upload(int device, const ForwardArgs& host, std::size_t x_bytes, std::size_t y_bytes, std::size_t state_bytes,
                ForwardArgs* on_device) {
    device_ = device;
    *on_device = host;
    const void* in[kSlots] = {host.x, nullptr, host.h0, host.c0, nullptr, nullptr};
    const void* used[kSlots] = {host.x, host.y, host.h0, host.c0, host.hy, host.cy};
    const std::size_t bytes[kSlots] = {x_bytes, y_bytes, state_bytes, state_bytes, state_bytes, state_bytes};
    for (int i = 0; i < kSlots; ++i) {
      bytes_[i] = bytes[i];
      if (used[i] == nullptr) continue;
      Status s = gpu_alloc(device, bytes[i], &ptr_[i]);
      if (s == Status::ok && in[i] != nullptr) s = gpu_copy(ptr_[i], in[i], bytes[i], GpuCopy::host_to_device);
      if (s != Status::ok) return s;
    }
    on_device->x = ptr_[0];
    on_device->y = ptr_[1];
    on_device->h0 = ptr_[2];
    on_device->c0 = ptr_[3];
    on_device->hy = ptr_[4];
    on_device->cy = ptr_[5];
    return Status::ok;
  }

  Status download(const ForwardArgs& host, void* stream) {
    Status s = gpu_synchronize(stream);
    void* out[kSlots] = {nullptr, host.y, nullptr, nullptr, host.hy, host.cy};
    for (int i = 0; i < kSlots && s == Status::ok; ++i)
      if (out[i] != nullptr && ptr_[i] != nullptr) s = gpu_copy(out[i], ptr_[i], bytes_[i], GpuCopy::device_to_host);
    return s;
  }

 private:
  static constexpr int kSlots = 6;  // x, y, h0, c0, hy, cy
  int device_ = 0;
  void* ptr_[kSlots] = {};
  std::size_t bytes_[kSlots] = {};
};

bool parse_backend(const std::string& s, Backend* out) {
  for (Backend b : {Backend::auto_select, Backend::reference, Backend::simd, Backend::gpu})
    if (s == to_string(b)) {
      *out = b;
      return true;
    }
  return false;
}

// Reads a .npy of floats as `dtype` (f32 or f64) into bytes, checking its shape against `expected`
// (-1 = any); `what` describes the expected shape for the error line.
bool read_float_npy(const std::string& path, DType dtype, const std::vector<std::int64_t>& expected,
                    const std::string& what, std::vector<std::int64_t>* shape, std::vector<unsigned char>* out,
                    std::string* err) {
  io::Array a;
  const rnncore_status s = io::read_npy(path.c_str(), &a);
  if (s != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    if (err->empty()) *err = path + ": " + rnncore_status_message(s);
    return false;
  }
  bool ok = a.shape.size() == expected.size();
  for (std::size_t i = 0; ok && i < expected.size(); ++i) ok = expected[i] < 0 || expected[i] == a.shape[i];
  if (!ok) {
    *err = path + ": expected shape " + what + ", found " + shape_string(a.shape);
    return false;
  }
  rnncore_status cs;
  if (dtype == DType::f64) {
    std::vector<double> v;
    cs = io::to_f64(a, &v);
    out->resize(v.size() * 8);
    if (!v.empty()) std::memcpy(out->data(), v.data(), out->size());
  } else {
    std::vector<float> v;
    cs = io::to_f32(a, &v);
    out->resize(v.size() * 4);
    if (!v.empty()) std::memcpy(out->data(), v.data(), out->size());
  }
  if (cs != RNNCORE_OK) {
    *err = path + ": expected a floating-point array, found " + io::elem_type_name(a.type);
    return false;
  }
  *shape = a.shape;
  return true;
}

// Writes `count` elements of `dtype` as float32 .npy.
bool write_f32_npy(const std::string& path, DType dtype, const void* data, const std::vector<std::int64_t>& shape,
                   std::string* err) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[i] = dtype == DType::f64 ? static_cast<float>(static_cast<const double*>(data)[i]) : static_cast<const float*>(data)[i];
  if (io::write_npy(path.c_str(), io::ElemType::f32, shape.data(), static_cast<int>(shape.size()), v.data()) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  return true;
}

double element(const std::vector<unsigned char>& buf, DType dtype, std::size_t i) {
  if (dtype == DType::f64) {
    double d;
    std::memcpy(&d, buf.data() + i * 8, 8);
    return d;
  }
  float f;
  std::memcpy(&f, buf.data() + i * 4, 4);
  return f;
}

// Compares an output with a stored expectation; prints one line; returns the relative error (or -1 on error).
double compare(const char* label, const std::vector<unsigned char>& got, DType dtype,
               const std::vector<std::int64_t>& shape, const std::string& path, std::string* err) {
  std::vector<std::int64_t> found;
  std::vector<unsigned char> want;
  if (!read_float_npy(path, DType::f64, shape, shape_string(shape), &found, &want, err)) return -1;
  double max_abs = 0, max_ref = 0;
  const std::size_t n = want.size() / 8;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = element(want, DType::f64, i), g = element(got, dtype, i);
    max_abs = std::max(max_abs, std::isnan(g - w) ? INFINITY : std::fabs(g - w));
    max_ref = std::max(max_ref, std::fabs(w));
  }
  const double rel = max_abs / std::max(max_ref, 1e-30);
  std::printf("%s: max_abs_diff=%.3g max_rel_err=%.3g (vs %s)\n", label, max_abs, rel, path.c_str());
  return rel;
}

// What run and grad share: the model, the run's inputs and its dropout parameters, read and
// checked from the command line.
struct RunSetup {
  LoadedModel model;
  std::vector<unsigned char> x, h0, c0;
  std::vector<std::int64_t> xshape, state_dims;
  std::string state_what;
  std::vector<std::int32_t> lengths;
  std::vector<std::uint32_t> row_ids;
  std::int64_t T = 0, B = 0, out_width = 0;
  bool any_lstm = false, batch_first = false;
  RunMode run_mode = RunMode::inference;
  unsigned long long seed = 0, step = 0;
  PlanOptions opt;

  const StackSpec& stack() const { return model.stack; }
  std::vector<std::int64_t> yshape() const {
    return batch_first ? std::vector<std::int64_t>{B, T, out_width} : std::vector<std::int64_t>{T, B, out_width};
  }
  // Forward arguments over the inputs (outputs left null).
  ForwardArgs forward_args() const {
    ForwardArgs fa;
    fa.batch = static_cast<std::int32_t>(B);
    fa.seq_len = static_cast<std::int32_t>(T);
    fa.layout = batch_first ? Layout::batch_major : Layout::time_major;
    fa.x = x.data();
    fa.seq_lengths = lengths.empty() ? nullptr : lengths.data();
    fa.h0 = h0.empty() ? nullptr : h0.data();
    fa.c0 = c0.empty() ? nullptr : c0.data();
    fa.run_mode = run_mode;
    fa.seed = seed;
    fa.step = step;
    fa.row_ids = row_ids.empty() ? nullptr : row_ids.data();
    return fa;
  }
};

// Reads the model and inputs that run and grad share; returns 0, or the exit status after
// printing the error (`usage`: the command's usage text).
int prepare_run(const Args& args, const char* usage, RunSetup* rs) {
  std::string err;
  long long threads = 1;
  if (!args.get_int("threads", 1, 1024, 1, &threads, &err)) return usage_error(usage, err);
  ModelHints hints;
  hints.format = args.get("format");
  hints.prefix = args.get("prefix");
  hints.prefix_given = args.has("prefix");
  hints.mode = args.get("mode");
  hints.gru = args.get("gru");
  hints.input_mode = args.get("input-mode");
  const std::string dtype_name = args.get("dtype", "f32");
  if (dtype_name != "f32" && dtype_name != "f64") return usage_error(usage, "--dtype must be f32 or f64");
  hints.dtype = dtype_name == "f64" ? DType::f64 : DType::f32;
  Backend backend = Backend::auto_select;
  if (!parse_backend(args.get("backend", "auto"), &backend))
    return usage_error(usage, "--backend must be auto, reference, simd or gpu");
  WeightFormat fmt_check;
  if (!hints.format.empty() && !parse_format(hints.format, &fmt_check))
    return usage_error(usage, "--format must be pytorch, onnx, keras or canonical");
  Mode mode_check;
  if (!hints.mode.empty() && !parse_mode(hints.mode, &mode_check))
    return usage_error(usage, "--mode must be lstm, gru, rnn_tanh or rnn_relu");
  GruVariant gru_check;
  if (!hints.gru.empty() && !parse_gru_variant(hints.gru, &gru_check))
    return usage_error(usage, "--gru must be reset-after or reset-before");
  unsigned long long& seed = rs->seed;
  unsigned long long& step = rs->step;
  double dropout = 0.0;
  if (!args.get_u64("seed", 0, &seed, &err) || !args.get_u64("step", 0, &step, &err) ||
      !args.get_double("dropout", 0.0, 1.0, 0.0, &dropout, &err))
    return usage_error(usage, err);
  if (dropout >= 1.0) return usage_error(usage, "option '--dropout' needs a probability in [0, 1), got 1");
  if (args.has("train") && args.has("mc-dropout")) return usage_error(usage, "--train and --mc-dropout exclude each other");
  const RunMode run_mode = rs->run_mode = args.has("train") ? RunMode::training : args.has("mc-dropout") ? RunMode::monte_carlo : RunMode::inference;
  if (run_mode == RunMode::inference && (args.has("seed") || args.has("step") || args.has("dropout") || args.has("row-ids")))
    std::fprintf(stderr, "rnncore: note: dropout acts in --train (or --mc-dropout) runs only; this run is deterministic\n");
  if (args.has("config") && (args.has("mode") || args.has("gru")))
    return usage_error(usage, "--mode and --gru come from the --config file's layers");

  StackSpec config;
  if (args.has("config") && read_stack_config(args.get("config"), &config, &err) != Status::ok) return error(err);
  LoadedModel& model = rs->model;
  if (load_weights(args.get("weights"), hints, args.has("config") ? &config : nullptr, &model, &err) != Status::ok)
    return error(err);
  for (const std::string& note : model.notes) std::fprintf(stderr, "rnncore: note: %s\n", note.c_str());
  if (!model.ignored.empty()) {
    std::string list;
    for (const std::string& t : model.ignored) list += (list.empty() ? "" : ", ") + t;
    std::fprintf(stderr, "rnncore: note: %zu tensor%s of the file %s not part of the recurrent model and %s ignored: %s\n",
                 model.ignored.size(), model.ignored.size() == 1 ? "" : "s", model.ignored.size() == 1 ? "is" : "are",
                 model.ignored.size() == 1 ? "is" : "are", list.c_str());
  }
  StackSpec& stack = model.stack;
  if (args.has("dropout")) stack.dropout = dropout;
  const DType dt = stack.dtype;
  const LayerSpec& last = stack.layers[stack.num_layers - 1];
  const std::int64_t L = stack.num_layers, I = stack.input_size, out_width = num_directions(last) * last.hidden_size;
  bool any_lstm = false;
  for (int l = 0; l < stack.num_layers; ++l) any_lstm = any_lstm || stack.layers[l].mode == Mode::lstm;
  rs->any_lstm = any_lstm;
  rs->out_width = out_width;
  const bool uniform = uniform_states(stack);
  const std::int64_t D = num_directions(stack.layers[0]), H = stack.layers[0].hidden_size;
  const bool batch_first = rs->batch_first = args.has("batch-first");

  // Input: [T, B, I] or [B, T, I].
  std::vector<std::int64_t> xshape;
  std::vector<unsigned char>& x = rs->x;
  const std::string I_s = std::to_string(I);
  if (!read_float_npy(args.get("input"), dt, {-1, -1, I},
                      batch_first ? dims_string({"B", "T", I_s}) + " (batch-first)" : dims_string({"T", "B", I_s}) + " (time-major)",
                      &xshape, &x, &err))
    return error(err);
  const std::int64_t T = rs->T = batch_first ? xshape[1] : xshape[0], B = rs->B = batch_first ? xshape[0] : xshape[1];
  rs->xshape = xshape;
  if (T > (1 << 28) || B > (1 << 24)) return error(args.get("input") + ": sequence or batch too large");
  const std::string B_s = std::to_string(B), T_s = std::to_string(T), LD_s = std::to_string(L * D), H_s = std::to_string(H);

  std::vector<std::int32_t>& lengths = rs->lengths;
  if (args.has("seq-lengths")) {
    const std::string path = args.get("seq-lengths");
    io::Array a;
    if (io::read_npy(path.c_str(), &a) != RNNCORE_OK) return error(rnncore_last_error_detail());
    if (a.shape.size() != 1 || a.shape[0] != B)
      return error(path + ": expected shape " + dims_string({B_s}) + ", found " + shape_string(a.shape));
    if (io::to_i32(a, &lengths) != RNNCORE_OK)
      return error(path + ": expected integer lengths, found " + io::elem_type_name(a.type));
    for (std::int64_t b = 0; b < B; ++b)
      if (lengths[b] < 0 || lengths[b] > T)
        return error(path + ": length " + std::to_string(lengths[b]) + " of row " + std::to_string(b) +
                     " is outside 0.." + T_s);
  }
  const std::vector<std::int64_t> state_dims = rs->state_dims =
      uniform ? std::vector<std::int64_t>{L * D, B, H} : std::vector<std::int64_t>{state_elements(stack, static_cast<int>(B))};
  const std::string state_what = rs->state_what = uniform ? dims_string({LD_s, B_s, H_s}) + " ([layers*directions, batch, hidden])"
                                         : dims_string({std::to_string(state_dims[0])}) + " (per-layer [B, H_l] blocks, flattened)";
  std::vector<std::uint32_t>& row_ids = rs->row_ids;
  if (args.has("row-ids")) {
    const std::string path = args.get("row-ids");
    io::Array a;
    std::vector<std::int32_t> ids;
    if (io::read_npy(path.c_str(), &a) != RNNCORE_OK) return error(rnncore_last_error_detail());
    if (a.shape.size() != 1 || a.shape[0] != B)
      return error(path + ": expected shape " + dims_string({B_s}) + ", found " + shape_string(a.shape));
    if (a.type == io::ElemType::f32 || a.type == io::ElemType::f64 || a.type == io::ElemType::f16 || a.type == io::ElemType::bf16 ||
        io::to_i32(a, &ids) != RNNCORE_OK)
      return error(path + ": expected integer row ids in 0..2^31-1, found " + io::elem_type_name(a.type) + " values");
    for (std::int32_t id : ids) {
      if (id < 0) return error(path + ": row id " + std::to_string(id) + " is negative");
      row_ids.push_back(static_cast<std::uint32_t>(id));
    }
  }
  std::vector<unsigned char>& h0 = rs->h0;
  std::vector<unsigned char>& c0 = rs->c0;
  std::vector<std::int64_t> ignored;
  if (args.has("h0") && !read_float_npy(args.get("h0"), dt, state_dims, state_what, &ignored, &h0, &err)) return error(err);
  if (args.has("c0") || args.has("cn") || args.has("expect-cn")) {
    if (!any_lstm)
      return error(std::string("--c0/--cn/--expect-cn: a ") + to_string(stack.layers[0].mode) + " network has no cell state");
  }
  if (args.has("c0") && !read_float_npy(args.get("c0"), dt, state_dims, state_what, &ignored, &c0, &err)) return error(err);

  PlanOptions& opt = rs->opt;
  opt.max_batch = static_cast<std::int32_t>(std::max<std::int64_t>(B, 1));
  opt.max_seq_len = static_cast<std::int32_t>(std::max<std::int64_t>(T, 1));
  opt.backend = backend;
  opt.threads = static_cast<std::int32_t>(threads);
  return 0;
}

int cmd_run(int argc, char** argv) {
  Args args;
  std::string err;
  const std::vector<OptionSpec> known = {
      {"weights", true},  {"input", true},     {"output", true},      {"format", true},     {"prefix", true},
      {"mode", true},     {"gru", true},       {"input-mode", true},  {"dtype", true},      {"batch-first", false},
      {"seq-lengths", true}, {"h0", true},     {"c0", true},          {"hn", true},         {"cn", true},
      {"backend", true},  {"threads", true},   {"repeat", true},      {"expect", true},     {"expect-hn", true},
      {"expect-cn", true}, {"tolerance", true}, {"help", false}, {"config", true},   {"train", false},
      {"mc-dropout", false}, {"seed", true},   {"step", true},      {"dropout", true},    {"row-ids", true}};
  if (!args.parse(argc, argv, 2, known, &err)) return usage_error(kRunUsage, err);
  if (args.has("help")) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  for (const char* required : {"weights", "input", "output"})
    if (!args.has(required)) return usage_error(kRunUsage, std::string("missing --") + required);
  long long repeat = 0;
  double tolerance = -1;
  if (!args.get_int("repeat", 0, 1000000, 0, &repeat, &err) || !args.get_double("tolerance", 0, 1e300, -1, &tolerance, &err))
    return usage_error(kRunUsage, err);
  RunSetup rs;
  if (const int rc = prepare_run(args, kRunUsage, &rs)) return rc;
  const LoadedModel& model = rs.model;
  const StackSpec& stack = rs.stack();
  const DType dt = stack.dtype;
  const std::size_t es = dtype_size(dt);
  const std::int64_t L = stack.num_layers, I = stack.input_size, out_width = rs.out_width, T = rs.T, B = rs.B;
  const std::int64_t D = num_directions(stack.layers[0]), H = stack.layers[0].hidden_size;
  const bool any_lstm = rs.any_lstm;
  const RunMode run_mode = rs.run_mode;
  const unsigned long long seed = rs.seed, step = rs.step;
  const std::vector<std::int64_t>& state_dims = rs.state_dims;
  const PlanOptions& opt = rs.opt;
  const std::vector<std::int64_t> yshape = rs.yshape();
  Model net;
  Status s = Model::create(stack, opt, model.canonical.data(), &net);
  if (s != Status::ok) return error(args.get("weights") + ": " + library_error(s));

  std::vector<unsigned char> y(static_cast<std::size_t>(T * B * out_width) * es),
      hy(static_cast<std::size_t>(state_elements(stack, static_cast<int>(B))) * es), cy(any_lstm ? hy.size() : 0);
  ForwardArgs fa = rs.forward_args();
  fa.y = y.data();
  fa.hy = hy.data();
  fa.cy = cy.empty() ? nullptr : cy.data();
  // A GPU plan runs on device copies of the tensors (lengths and row ids stay on the host), and
  // forward() only queues the work: each run waits for it.
  const bool on_gpu = net.plan().backend() == Backend::gpu;
  GpuForwardBuffers device;
  ForwardArgs run_args = fa;
  if (on_gpu && (s = device.upload(opt.gpu_device, fa, rs.x.size(), y.size(), hy.size(), &run_args)) != Status::ok)
    return error(library_error(s));
  auto forward = [&]() {
    const Status f = net.forward(run_args);
    return f == Status::ok && on_gpu ? gpu_synchronize(nullptr) : f;
  };
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  s = forward();
  double first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  if (s != Status::ok) return error(library_error(s));
  std::vector<double> times;
  for (long long r = 0; r < repeat; ++r) {
    const auto t1 = clock::now();
    forward();
    times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t1).count());
  }
  if (on_gpu && (s = device.download(fa, nullptr)) != Status::ok) return error(library_error(s));
  std::sort(times.begin(), times.end());
  const double ms = times.empty() ? first_ms : times[times.size() / 2];

  if (!write_f32_npy(args.get("output"), dt, y.data(), yshape, &err)) return error(err);
  if (args.has("hn") && !write_f32_npy(args.get("hn"), dt, hy.data(), state_dims, &err)) return error(err);
  if (args.has("cn") && !write_f32_npy(args.get("cn"), dt, cy.data(), state_dims, &err)) return error(err);

  if (!args.has("config")) {
    const RnnSpec& spec = model.spec;
    std::printf("model: %s%s, %lld layer(s), %s, input %lld, hidden %lld (%s weights, prefix '%s')\n", to_string(spec.mode),
                spec.mode == Mode::gru ? (std::string(" ") + to_string(spec.gru_variant)).c_str() : "",
                static_cast<long long>(L), D == 2 ? "bidirectional" : "unidirectional", static_cast<long long>(I),
                static_cast<long long>(H), to_string(model.format), model.prefix.c_str());
  } else {
    std::string layers;
    for (int l = 0; l < stack.num_layers; ++l) {
      const LayerSpec& ls = stack.layers[l];
      layers += (l ? ", " : "") + std::string(to_string(ls.mode)) + " " + std::to_string(ls.hidden_size) +
                (ls.direction == Direction::bidirectional ? " bi" : "");
      for (int w = 0; w < ls.num_wrappers; ++w)
        layers += ls.wrappers[w].kind == WrapperKind::dropout ? " +dropout" : " +residual";
    }
    std::printf("model: stack of %lld layer(s) [%s], input %lld, inter-layer dropout %g (%s weights, prefix '%s')\n",
                static_cast<long long>(L), layers.c_str(), static_cast<long long>(I), stack.dropout, to_string(model.format),
                model.prefix.c_str());
  }
  if (run_mode != RunMode::inference)
    std::printf("dropout: %s run, seed %llu, step %llu%s\n", run_mode == RunMode::training ? "training" : "monte-carlo",
                seed, step, rs.row_ids.empty() ? "" : ", row ids given");
  std::printf("run: T=%lld B=%lld, backend %s (%s), %.3f ms per run, %.2f us per step%s\n", static_cast<long long>(T),
              static_cast<long long>(B), to_string(net.plan().backend()), net.plan().kernel_name(), ms,
              T > 0 ? 1000.0 * ms / static_cast<double>(T) : 0.0,
              times.empty() ? " (single run; --repeat N for a median)" : (" (median of " + std::to_string(times.size()) + ")").c_str());

  double worst = 0;
  struct Check {
    const char* flag;
    const char* label;
    const std::vector<unsigned char>* got;
    const std::vector<std::int64_t>* shape;
  };
  for (const Check& c : {Check{"expect", "y", &y, &yshape}, Check{"expect-hn", "hn", &hy, &state_dims},
                         Check{"expect-cn", "cn", &cy, &state_dims}}) {
    if (!args.has(c.flag)) continue;
    const double rel = compare(c.label, *c.got, dt, *c.shape, args.get(c.flag), &err);
    if (rel < 0) return error(err);
    worst = std::max(worst, rel);
  }
  if (tolerance >= 0 && worst > tolerance) return error("relative error " + std::to_string(worst) + " exceeds --tolerance");
  return 0;
}

// One tensor's gradients as float32.
std::vector<float> to_f32(const std::vector<unsigned char>& data, DType dtype, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(element(data, dtype, i));
  return v;
}

// An aligned buffer for the library (host memory; the tool may allocate).
struct Aligned {
  explicit Aligned(std::size_t n) : bytes(n), p(std::aligned_alloc(kAlignment, (n + kAlignment - 1) / kAlignment * kAlignment + kAlignment)) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  std::size_t bytes;
  void* p;
};

// Writes the weight gradients under the names M's tensors have: one float32 tensor per weight tensor of M.
bool write_weight_grads(const std::string& weights_path, const std::string& out_path, const LoadedModel& model,
                        const void* dweights, std::string* err) {
  io::SafeTensors m;
  if (io::read_safetensors(weights_path.c_str(), &m) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  const StackSpec& st = model.stack;
  const int n = format_tensor_count(st, model.format);
  std::vector<std::vector<float>> data;
  std::vector<io::TensorToWrite> tensors;
  data.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    TensorInfo info;
    if (format_tensor_info(st, model.format, i, model.prefix.c_str(), &info) != Status::ok) {
      *err = last_error_detail();
      return false;
    }
    std::string name = info.name;
    if (m.find(name) == nullptr) name += "_l0";  // a single-layer model may use the _l0 alias
    if (m.find(name) == nullptr) continue;       // an absent optional tensor (bias=False): no gradient either
    const std::size_t count = static_cast<std::size_t>(info.shape.elements());
    std::vector<unsigned char> grad(count * dtype_size(st.dtype));
    if (export_gradient_tensor(st, model.format, i, dweights, grad.data()) != Status::ok) {
      *err = last_error_detail();
      return false;
    }
    data.push_back(to_f32(grad, st.dtype, count));
    io::TensorToWrite t;
    t.name = name;
    t.shape = m.find(name)->shape;
    t.data = data.back().data();
    tensors.push_back(t);
  }
  const std::vector<std::pair<std::string, std::string>> meta = {
      {"format", to_string(model.format)}, {"content", "gradients"}, {"source", std::string("rnncore ") + version_string()}};
  if (io::write_safetensors(out_path.c_str(), tensors, meta) != RNNCORE_OK) {
    *err = rnncore_last_error_detail();
    return false;
  }
  return true;
}

int cmd_grad(int argc, char** argv) {
  Args args;
  std::string err;
  const std::vector<OptionSpec> known = {
      {"weights", true},  {"input", true},   {"dy", true},          {"grads", true},   {"dhn", true},
      {"dcn", true},      {"dx", true},      {"dh0", true},         {"dc0", true},     {"output", true},
      {"format", true},   {"prefix", true},  {"mode", true},        {"gru", true},     {"input-mode", true},
      {"dtype", true},    {"batch-first", false}, {"seq-lengths", true}, {"h0", true},  {"c0", true},
      {"backend", true},  {"threads", true}, {"help", false},       {"config", true},  {"train", false},
      {"seed", true},     {"step", true},    {"dropout", true},     {"row-ids", true}};
  if (!args.parse(argc, argv, 2, known, &err)) return usage_error(kGradUsage, err);
  if (args.has("help")) {
    std::fputs(kGradUsage, stdout);
    return 0;
  }
  for (const char* required : {"weights", "input", "dy", "grads"})
    if (!args.has(required)) return usage_error(kGradUsage, std::string("missing --") + required);
  RunSetup rs;
  if (const int rc = prepare_run(args, kGradUsage, &rs)) return rc;
  const StackSpec& stack = rs.stack();
  const DType dt = stack.dtype;
  const std::size_t es = dtype_size(dt);
  if (!rs.any_lstm && (args.has("dcn") || args.has("dc0")))
    return error(std::string("--dcn/--dc0: a ") + to_string(stack.layers[0].mode) + " network has no cell state");

  std::vector<std::int64_t> ignored;
  std::vector<unsigned char> dy, dhn, dcn;
  const std::vector<std::int64_t> yshape = rs.yshape();
  if (!read_float_npy(args.get("dy"), dt, yshape, shape_string(yshape) + (rs.batch_first ? " (batch-first)" : " (time-major)"),
                      &ignored, &dy, &err))
    return error(err);
  if (args.has("dhn") && !read_float_npy(args.get("dhn"), dt, rs.state_dims, rs.state_what, &ignored, &dhn, &err))
    return error(err);
  if (args.has("dcn") && !read_float_npy(args.get("dcn"), dt, rs.state_dims, rs.state_what, &ignored, &dcn, &err))
    return error(err);

  PlanOptions opt = rs.opt;
  opt.training = true;
  ThreadPool* pool = nullptr;
  if (opt.threads > 1 && ThreadPool::create(opt.threads, &pool) != Status::ok) return error(last_error_detail());
  opt.thread_pool = pool;
  struct PoolGuard {
    ThreadPool* p;
    ~PoolGuard() { ThreadPool::destroy(p); }
  } guard{pool};
  Plan plan;
  Status s = Plan::create(stack, opt, &plan);
  if (s != Status::ok) return error(args.get("weights") + ": " + library_error(s));
  Aligned packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  if ((s = plan.pack_weights(rs.model.canonical.data(), packed.p, packed.bytes)) != Status::ok) return error(library_error(s));

  const std::size_t states = static_cast<std::size_t>(state_elements(stack, static_cast<int>(rs.B)));
  std::vector<unsigned char> y(static_cast<std::size_t>(rs.T * rs.B * rs.out_width) * es), dx(rs.x.size()),
      dh0(states * es), dc0(rs.any_lstm ? states * es : 0), dweights(rs.model.canonical.size());
  ForwardArgs fa = rs.forward_args();
  fa.y = y.data();
  fa.reserve = reserve.p;
  fa.reserve_bytes = reserve.bytes;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if ((s = plan.forward(packed.p, ws.p, ws.bytes, fa)) != Status::ok) return error(library_error(s));
  const auto t1 = clock::now();
  BackwardArgs ba;
  ba.forward = fa;
  ba.dy = dy.data();
  ba.dhy = dhn.empty() ? nullptr : dhn.data();
  ba.dcy = dcn.empty() ? nullptr : dcn.data();
  ba.dx = dx.data();
  ba.dh0 = dh0.data();
  ba.dc0 = dc0.empty() ? nullptr : dc0.data();
  ba.dweights = dweights.data();
  if ((s = plan.backward(packed.p, bws.p, bws.bytes, ba)) != Status::ok) return error(library_error(s));
  const auto t2 = clock::now();

  if (!write_weight_grads(args.get("weights"), args.get("grads"), rs.model, dweights.data(), &err)) return error(err);
  if (args.has("dx") && !write_f32_npy(args.get("dx"), dt, dx.data(), rs.xshape, &err)) return error(err);
  if (args.has("dh0") && !write_f32_npy(args.get("dh0"), dt, dh0.data(), rs.state_dims, &err)) return error(err);
  if (args.has("dc0") && !write_f32_npy(args.get("dc0"), dt, dc0.data(), rs.state_dims, &err)) return error(err);
  if (args.has("output") && !write_f32_npy(args.get("output"), dt, y.data(), yshape, &err)) return error(err);
  std::printf("grad: T=%lld B=%lld, backend %s (%s), %s run; forward %.3f ms, backward %.3f ms; reserve %zu bytes\n",
              static_cast<long long>(rs.T), static_cast<long long>(rs.B), to_string(plan.backend()), plan.kernel_name(),
              rs.run_mode == RunMode::training ? "training (dropout on)" : "deterministic",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count(), plan.reserve_bytes());
  return 0;
}

int cmd_bench(int argc, char** argv) {
  Args args;
  std::string err;
  const std::vector<OptionSpec> known = {{"mode", true},   {"seq", true},     {"batch", true}, {"input", true},
                                         {"hidden", true}, {"layers", true},  {"bidirectional", false},
                                         {"gru", true},    {"threads", true}, {"reps", true},  {"dtype", true},
                                         {"backend", true}, {"help", false}, {"dropout", true}, {"peak", false},
                                         {"backward", false}};
  if (!args.parse(argc, argv, 2, known, &err)) return usage_error(kBenchUsage, err);
  if (args.has("help")) {
    std::fputs(kBenchUsage, stdout);
    return 0;
  }
  RnnSpec spec;
  if (!parse_mode(args.get("mode", "lstm"), &spec.mode)) return usage_error(kBenchUsage, "--mode must be lstm, gru, rnn_tanh or rnn_relu");
  if (args.has("gru") && !parse_gru_variant(args.get("gru"), &spec.gru_variant))
    return usage_error(kBenchUsage, "--gru must be reset-after or reset-before");
  long long T, B, I, H, L, threads, reps;
  if (!args.get_int("seq", 1, 1 << 20, 100, &T, &err) || !args.get_int("batch", 1, 1 << 16, 1, &B, &err) ||
      !args.get_int("input", 1, 1 << 16, 512, &I, &err) || !args.get_int("hidden", 1, 1 << 16, 512, &H, &err) ||
      !args.get_int("layers", 1, kMaxLayers, 1, &L, &err) || !args.get_int("threads", 1, 1024, 1, &threads, &err) ||
      !args.get_int("reps", 1, 1000000, 20, &reps, &err))
    return usage_error(kBenchUsage, err);
  const std::string dtype_name = args.get("dtype", "f32");
  if (dtype_name != "f32" && dtype_name != "f64" && dtype_name != "bf16" && dtype_name != "f16")
    return usage_error(kBenchUsage, "--dtype must be f32, f64, bf16 or f16");
  spec.dtype = dtype_name == "f64" ? DType::f64 : DType::f32;  // bf16 / f16: weight storage, f32 computation
  spec.input_size = static_cast<int>(I);
  spec.hidden_size = static_cast<int>(H);
  spec.num_layers = static_cast<int>(L);
  spec.direction = args.has("bidirectional") ? Direction::bidirectional : Direction::unidirectional;
  PlanOptions opt;
  opt.max_batch = static_cast<int>(B);
  opt.max_seq_len = static_cast<int>(T);
  opt.threads = static_cast<int>(threads);
  opt.weight_dtype = dtype_name == "bf16" ? DType::bf16 : dtype_name == "f16" ? DType::f16 : DType::f32;
  if (!parse_backend(args.get("backend", "auto"), &opt.backend)) return usage_error(kBenchUsage, "--backend must be auto, reference, simd or gpu");
  const bool backward = args.has("backward");
  if (backward && opt.backend == Backend::gpu)
    return usage_error(kBenchUsage, "--backward: training runs on the CPU backends only (auto, reference or simd)");


  double dropout = 0.0;
  if (!args.get_double("dropout", 0.0, 1.0, 0.0, &dropout, &err)) return usage_error(kBenchUsage, err);
  if (args.has("dropout") && !(dropout > 0.0 && dropout < 1.0))
    return usage_error(kBenchUsage, "option '--dropout' needs a probability in (0, 1)");

  const std::int64_t n = param_count(spec);
  if (validate(spec) != Status::ok) return error(last_error_detail());
  std::vector<unsigned char> w(static_cast<std::size_t>(n) * dtype_size(spec.dtype));
  std::uint64_t r = 12345;
  auto next = [&r]() {  // small LCG: benchmark data only needs to be non-degenerate
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(r >> 11) * 0x1.0p-53 - 0.5;
  };
  const std::size_t es = dtype_size(spec.dtype);
  auto fill = [&](std::vector<unsigned char>& v, double scale) {
    for (std::size_t i = 0; i < v.size() / es; ++i) {
      if (spec.dtype == DType::f64) reinterpret_cast<double*>(v.data())[i] = scale * next();
      else reinterpret_cast<float*>(v.data())[i] = static_cast<float>(scale * next());
    }
  };
  fill(w, 0.2);

  // The network, and with --dropout the same network with dropout on every site: a wrapper dropping
  // input, output and state with keep 1 − p, and inter-layer dropout p. Both run as training runs,
  // alternating, so that the ratio is measured under the same conditions.
  StackSpec stacks[2] = {to_stack(spec), to_stack(spec)};
  for (int l = 0; l < stacks[1].num_layers; ++l) {
    Wrapper& wr = stacks[1].layers[l].wrappers[stacks[1].layers[l].num_wrappers++];
    wr.dropout.input_keep = wr.dropout.output_keep = wr.dropout.state_keep = 1.0 - dropout;
  }
  stacks[1].dropout = dropout;
  // --backward: one pool for the inference model and the training plans (two pools would compete
  // for the cores with their spinning workers).
  ThreadPool* pool = nullptr;
  if (backward && opt.threads > 1 && ThreadPool::create(opt.threads, &pool) != Status::ok) return error(last_error_detail());
  struct PoolGuard {
    ThreadPool* p;
    ~PoolGuard() { ThreadPool::destroy(p); }
  } pool_guard{pool};
  if (pool != nullptr) opt.thread_pool = pool;
  // Forward only: the network and, with --dropout, the network with dropout (both timed).
  // --backward: the inference forward of the network (one Model), timed against training steps.
  const int nets = args.has("dropout") && !backward ? 2 : 1;
  Model net[2];
  for (int k = 0; k < nets; ++k) {
    const Status s = Model::create(stacks[k], opt, w.data(), &net[k]);
    if (s != Status::ok) return error(library_error(s));
  }
  const std::int64_t D = num_directions(spec);
  std::vector<unsigned char> x(static_cast<std::size_t>(T * B * I) * es), y(static_cast<std::size_t>(T * B * D * H) * es);
  fill(x, 2.0);
  ForwardArgs fa;
  fa.batch = static_cast<int>(B);
  fa.seq_len = static_cast<int>(T);
  fa.x = x.data();
  fa.y = y.data();
  fa.run_mode = backward ? RunMode::inference : RunMode::training;
  fa.seed = 1;
  // A GPU plan runs on device copies of x and y and is timed with events on its stream.
  const bool on_gpu = net[0].plan().backend() == Backend::gpu;
  if (backward && on_gpu)
    return error("--backward: the inference plan chose the GPU backend, training runs on the CPU: use --backend simd");

  // --backward: training plans (the network, and with --dropout the network with dropout on every
  // site), each with its packed weights, forward and backward workspaces and reserve; one training
  // step = a training forward that fills the reserve + backward for dx, dh0, dc0 and the weights.
  struct TrainNet {
    Plan plan;
    void* buf[4] = {nullptr, nullptr, nullptr, nullptr};  // packed, workspace, backward workspace, reserve
    std::size_t bytes[4] = {0, 0, 0, 0};
    ~TrainNet() {
      for (void* p : buf) std::free(p);
    }
  };
  const int train_nets = backward ? (args.has("dropout") ? 2 : 1) : 0;
  TrainNet train[2];
  const std::size_t states = static_cast<std::size_t>(L * D * B * H) * es;
  std::vector<unsigned char> dy(backward ? y.size() : 0), dhy(backward ? states : 0), dcy(backward ? states : 0),
      dx(backward ? x.size() : 0), dh0(backward ? states : 0), dc0(backward ? states : 0),
      dweights(backward ? w.size() : 0);
  if (backward) {
    fill(dy, 2.0);
    fill(dhy, 2.0);
    fill(dcy, 2.0);
  }
  for (int k = 0; k < train_nets; ++k) {
    PlanOptions topt = opt;
    topt.training = true;
    TrainNet& tn = train[k];
    Status s = Plan::create(stacks[k], topt, &tn.plan);
    if (s != Status::ok) return error(library_error(s));
    const std::size_t sizes[4] = {tn.plan.packed_weight_bytes(), tn.plan.workspace_bytes(),
                                  tn.plan.backward_workspace_bytes(), tn.plan.reserve_bytes()};
    for (int b = 0; b < 4; ++b) {
      tn.bytes[b] = sizes[b];
      tn.buf[b] = std::aligned_alloc(kAlignment, (sizes[b] + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
      if (tn.buf[b] == nullptr) return error("out of memory");
    }
    if ((s = tn.plan.pack_weights(w.data(), tn.buf[0], tn.bytes[0])) != Status::ok) return error(library_error(s));
  }
  auto training_step = [&](int k, std::uint64_t step, double* fwd_ms, double* bwd_ms) {
    using clk = std::chrono::steady_clock;
    TrainNet& tn = train[k];
    ForwardArgs ta = fa;
    ta.run_mode = RunMode::training;
    ta.step = step;
    ta.reserve = tn.buf[3];
    ta.reserve_bytes = tn.bytes[3];
    const auto t0 = clk::now();
    Status s = tn.plan.forward(tn.buf[0], tn.buf[1], tn.bytes[1], ta);
    const auto t1 = clk::now();
    if (s != Status::ok) return s;
    BackwardArgs ba;
    ba.forward = ta;
    ba.dy = dy.data();
    ba.dhy = dhy.data();
    ba.dcy = spec.mode == Mode::lstm ? dcy.data() : nullptr;
    ba.dx = dx.data();
    ba.dh0 = dh0.data();
    ba.dc0 = spec.mode == Mode::lstm ? dc0.data() : nullptr;
    ba.dweights = dweights.data();
    s = tn.plan.backward(tn.buf[0], tn.buf[2], tn.bytes[2], ba);
    const auto t2 = clk::now();
    *fwd_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    *bwd_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    return s;
  };

  GpuForwardBuffers device;
  if (on_gpu) {
    ForwardArgs host = fa;
    const Status s = device.upload(opt.gpu_device, host, x.size(), y.size(), 0, &fa);
    if (s != Status::ok) return error(library_error(s));
  }
  using clock = std::chrono::steady_clock;
  std::vector<double> ms[2], step_ms[2], fwd_ms[2], bwd_ms[2];
  const auto start = clock::now();
  bool progress = false;  // on stderr, once a repetition is slow enough to make waiting noticeable
  for (long long i = -1; i < reps; ++i) {  // i = −1: warm-up
    for (int k = 0; k < nets; ++k) {
      fa.step = static_cast<std::uint64_t>(i + 1);
      // --backward: an untimed run first, so that the timed one finds the weights in cache and the
      // pool's workers awake after the (long) training step, as in back-to-back inference.
      if (backward && i >= 0 && net[k].forward(fa) != Status::ok) return error(last_error_detail());
      // A GPU run is queued: it is timed on the host from the call to the end of synchronize
      // (the queue is empty before, since the previous run was waited for).
      const auto t0 = clock::now();
      Status s = net[k].forward(fa);
      if (s == Status::ok && on_gpu) s = gpu_synchronize(fa.stream);
      const double elapsed = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (s != Status::ok) return error(library_error(s));
      if (i >= 0) ms[k].push_back(elapsed);
      progress = progress || elapsed > 500.0;
    }
    for (int k = 0; k < train_nets; ++k) {  // --backward: alternating with the inference forward
      double f = 0, b = 0;
      Status s = i >= 0 ? training_step(k, static_cast<std::uint64_t>(i + 1), &f, &b) : Status::ok;  // untimed, likewise
      if (s == Status::ok) s = training_step(k, static_cast<std::uint64_t>(i + 1), &f, &b);
      if (s != Status::ok) return error(library_error(s));
      if (i >= 0) {
        step_ms[k].push_back(f + b);
        fwd_ms[k].push_back(f);
        bwd_ms[k].push_back(b);
      }
      progress = progress || f + b > 500.0;
    }
    if (progress)
      std::fprintf(stderr, "rnncore bench: %s %lld/%lld, %.1f s\n", i < 0 ? "warm-up" : "repetition", i < 0 ? 0 : i + 1, reps,
                   std::chrono::duration<double>(clock::now() - start).count());
  }
  auto median_of = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int k = 0; k < nets; ++k) std::sort(ms[k].begin(), ms[k].end());
  const double median = ms[0][ms[0].size() / 2];
  double flops = 0;  // 2 · G·H · (I_l + H) per step, row, layer and direction
  for (int l = 0; l < L; ++l)
    flops += 2.0 * num_gates(spec.mode) * H * (layer_input_size(spec, l) + H) * T * B * D;
  std::printf("%s %s T=%lld B=%lld I=%lld H=%lld L=%lld %s threads=%lld backend=%s kernel=%s reps=%lld\n",
              to_string(spec.mode), dtype_name.c_str(), T, B, I, H, L, D == 2 ? "bidirectional" : "unidirectional",
              threads, to_string(net[0].plan().backend()), net[0].plan().kernel_name(), reps);
  const double gflops = flops / (median * 1e6);
  if (args.has("peak")) {
    // The peak of the instruction set the kernels use (RNNCORE_MAX_ISA may cap it below the widest).
    bench::FmaPeak peaks[2];
    const int measured = bench::measure_fma_peaks(3, 0.05, peaks);
    double peak = measured > 0 ? peaks[0].gflops : 0.0;
    for (int p = 0; p < measured; ++p)
      if (std::strcmp(peaks[p].isa, to_string(net[0].plan().isa())) == 0) peak = peaks[p].gflops;
    std::printf("median_ms=%.4f gflops=%.2f peak_gflops=%.1f (one core) fraction_of_peak=%.3f%s%s\n", median, gflops, peak,
                peak > 0 ? gflops / (peak * static_cast<double>(threads)) : 0.0, threads > 1 ? " (of threads x one core)" : "",
                backward ? " (inference forward)" : "");
  } else {
    std::printf("median_ms=%.4f gflops=%.2f%s\n", median, gflops, backward ? " (inference forward)" : "");
  }
  if (nets == 2) {
    const double with = ms[1][ms[1].size() / 2];
    std::printf("dropout p=%g on every site (input, output, state, inter-layer): median_ms=%.4f overhead=%+.1f%%\n",
                dropout, with, 100.0 * (with / median - 1.0));
  }
  if (backward) {
    // A training step does the forward's matrix products and two more of the same size: R_gᵀ·dgates and
    // W_gᵀ·dgates (dh, dx), and the outer products dgates·h_prevᵀ and dgates·xᵀ (dR, dW): 3x the flops.
    double train_step = 0;
    for (int k = 0; k < train_nets; ++k) {
      const double st = median_of(step_ms[k]), fw = median_of(fwd_ms[k]), bw = median_of(bwd_ms[k]);
      if (k == 0) {
        train_step = st;
        std::printf("training_step_ms=%.4f forward_ms=%.4f backward_ms=%.4f gflops=%.2f ratio=%.2f "
                    "(training step / inference forward; training kernel=%s reserve_bytes=%zu)\n",
                    st, fw, bw, 3.0 * flops / (st * 1e6), st / median, train[k].plan.kernel_name(),
                    train[k].plan.reserve_bytes());
      } else {
        std::printf("dropout p=%g on every site (input, output, state, inter-layer): training_step_ms=%.4f "
                    "forward_ms=%.4f backward_ms=%.4f ratio=%.2f overhead=%+.1f%% (vs the training step without dropout)\n",
                    dropout, st, fw, bw, st / median, 100.0 * (st / train_step - 1.0));
      }
    }
  }
  return 0;
}

int cmd_info(int argc, char** argv) {
  Args args;
  std::string err;
  if (!args.parse(argc, argv, 2, {{"help", false}}, &err)) return usage_error(kInfoUsage, err);
  std::printf("rnncore %s\n", version_string());
  Isa isas[8];
  const int n = available_isas(isas, 8);
  std::printf("cpu simd: ");
  for (int i = 0; i < n; ++i) std::printf("%s%s", i ? " " : "", to_string(isas[i]));
  std::printf("%s\n", n == 0 ? "(none usable)" : "");
  std::printf("backends: reference (f32, f64)%s\n", n > 0 ? ", simd (f32)" : "");
  RnnSpec probe;
  probe.input_size = probe.hidden_size = 8;
  for (DType w : {DType::bf16, DType::f16}) {
    PlanOptions o;
    o.weight_dtype = w;
    Plan p;
    if (Plan::create(probe, o, &p) == Status::ok)
      std::printf("%s weights: %s kernels (%s)\n", to_string(w), p.kernel_name(),
                  w == DType::bf16 ? (p.isa() == Isa::avx512 ? "vdpbf16ps" : "converted to f32") : "F16C");
    else
      std::printf("%s weights: not available here\n", to_string(w));
  }
  ThreadPool* pool = nullptr;
  std::printf("threads: %s\n", ThreadPool::create(1, &pool) == Status::ok ? "available (PlanOptions::threads, --threads N)"
                                                                          : "not in this build");
  ThreadPool::destroy(pool);
  char gpu[256];
  const std::string gpu_kind = gpu_backend_kind();
  if (gpu_kind == "none") {
    std::printf("gpu: not built (configure with -Dgpu=cuda or -Dgpu=hip)\n");
  } else if (gpu_describe(0, gpu, sizeof gpu) == Status::ok) {
    RnnSpec g;
    g.input_size = g.hidden_size = 8;
    PlanOptions o;
    o.backend = Backend::gpu;
    Plan gp;
    const bool planned = Plan::create(g, o, &gp) == Status::ok;
    std::printf("gpu: %s build, device 0: %s; kernels %s\n", gpu_kind.c_str(), gpu, planned ? gp.kernel_name() : last_error_detail());
  } else {
    std::printf("gpu: %s build, no usable device (%s)\n", gpu_kind.c_str(), last_error_detail());
  }
  RnnSpec spec;
  spec.input_size = spec.hidden_size = 8;
  Plan plan;
  if (Plan::create(spec, PlanOptions{}, &plan) == Status::ok) std::printf("f32 kernels: %s\n", plan.kernel_name());
  spec.dtype = DType::f64;
  if (Plan::create(spec, PlanOptions{}, &plan) == Status::ok) std::printf("f64 kernels: %s\n", plan.kernel_name());
  std::printf("env RNNCORE_MAX_ISA caps the instruction set (none, sse2, avx2, avx512, neon)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error(kUsage, "missing command");
  const std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc, argv);
  if (cmd == "bench") return cmd_bench(argc, argv);
  if (cmd == "info") return cmd_info(argc, argv);
  if (cmd == "export-c") return cmd_export_c(argc, argv);
  if (cmd == "grad") return cmd_grad(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    const std::string topic = argc > 2 ? argv[2] : "";
    std::fputs(topic == "run"        ? kRunUsage
               : topic == "bench"    ? kBenchUsage
               : topic == "info"     ? kInfoUsage
               : topic == "export-c" ? kExportCUsage
               : topic == "grad"     ? kGradUsage
                                     : kUsage,
               stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("rnncore %s\n", version_string());
    return 0;
  }
  return usage_error(kUsage, "unknown command '" + cmd + "'");
}

// The rnncore command: run a PyTorch / ONNX / Keras / canonical model on .npy input, benchmark
// shapes, and report what this machine and build can do (docs/design.md §8).
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
#include <utility>
#include <vector>

#include "rnncore/gpu.hpp"
#include "rnncore/rnncore.hpp"
#include "rnncore/io/hints.hpp"
#include "rnncore/io/int8_file.hpp"
#include "rnncore/io/model.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "rnncore/io/stack_config.hpp"
#include "cli.hpp"
#include "export_c.hpp"
#include "fma_peak/fma_peak.hpp"
#include "quantize.hpp"

using namespace rnncore;
using namespace rnncore::tools;
using namespace rnncore::io;

namespace {

const char* const kUsage =
    "usage: rnncore <command> [options]\n"
    "\n"
    "commands:\n"
    "  run       run a recurrent model from a safetensors file on .npy input\n"
    "  bench     time a forward pass of random weights (median of repeats)\n"
    "  info      version, backends, CPU features and chosen kernels\n"
    "  export-c  write a model as a C header for firmware (weights, spec, buffer sizes)\n"
    "  grad      gradients of a model's weights, input and initial states (backward through time)\n"
    "  quantize  quantize a float LSTM to an int8 model with calibration data; reports the accuracy lost\n"
    "  help      this text, or 'rnncore help <command>' (the same as 'rnncore <command> --help')\n";

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

// Compares an output with a stored expectation (floating point; an int8 model's: integers too);
// prints one line; returns the relative error (or -1 on error).
double compare(const char* label, const std::vector<unsigned char>& got, DType dtype,
               const std::vector<std::int64_t>& shape, const std::string& path, std::string* err) {
  std::vector<std::int64_t> found;
  std::vector<unsigned char> want;
  io::Array a;
  std::vector<std::int32_t> ints;
  if (io::read_npy(path.c_str(), &a) == RNNCORE_OK && a.shape == shape &&
      (a.type == io::ElemType::i8 || a.type == io::ElemType::i16 || a.type == io::ElemType::i32) &&
      io::to_i32(a, &ints) == RNNCORE_OK) {
    want.resize(ints.size() * 8);
    for (std::size_t i = 0; i < ints.size(); ++i) {
      const double v = ints[i];
      std::memcpy(want.data() + 8 * i, &v, 8);
    }
  } else if (!read_float_npy(path, DType::f64, shape, shape_string(shape), &found, &want, err)) {
    return -1;
  }
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

// The options of run and grad (grad: no --mc-dropout, no checking; its own gradient files).
struct RunOptions {
  io::ModelHints hints;  // prefix_given: set by model_hints() after parsing
  std::string weights, input, output, dtype = "f32", config, seq_lengths, resets, h0, c0, hn, cn, row_ids, backend = "auto";
  std::string expect, expect_hn, expect_cn, output_variance;
  std::string dy, grads, dhn, dcn, dx, dh0, dc0;
  bool batch_first = false, train = false, mc_dropout = false, oversubscribe = false;
  unsigned long long seed = 0, step = 0;
  double dropout = 0.0, tolerance = -1.0;
  long long threads = 1, repeat = 0, mc_samples = 1;
};

// Adds the options run and grad share to `app` (`grad`: the grad command's set).
void add_run_options(CLI::App& app, RunOptions& o, bool grad) {
  add_model_hint_options(app, o.hints);
  const char* model = "model (inferred from tensor names, shapes and safetensors metadata unless given)";
  app.add_option("--dtype", o.dtype, "compute type (f64 runs the reference backend)")
      ->check(one_of({"f32", "f64"}))
      ->type_name("f32|f64")
      ->group(model);
  CLI::Option* config =
      app.add_option("--config", o.config,
                     "a stack of layers with wrappers; the weights must match it\n(the JSON schema: docs/config.md); an "
                     "LSTM projection, peepholes\nand clips its layers do not give come from the weights file;\nit replaces a stack the file "
                     "carries (metadata 'config')")
          ->type_name("STACK.json")
          ->group(model);
  config->excludes(app.get_option("--mode"))->excludes(app.get_option("--gru"));

  const char* io = "inputs and outputs (.npy; float32 outputs in rnncore's layouts)";
  app.add_option("--weights", o.weights, "the model (tensor names and shapes say what it is)")
      ->required()
      ->type_name("M.safetensors")
      ->group(io);
  app.add_option("--input", o.input, "the input x [T, B, I] (time-major) or [B, T, I]\n(--batch-first)")
      ->required()
      ->type_name("X.npy")
      ->group(io);
  if (grad) {
    app.add_option("--dy", o.dy, "gradient of the output, shaped like y: [T, B, D*H]\n(or [B, T, D*H] with --batch-first; a head's: [T, B, F],\nor [B, F] on the last step)")
        ->required()
        ->type_name("DY.npy")
        ->group(io);
    app.add_option("--grads", o.grads,
                   "write the weight gradients: one float32 tensor per weight\ntensor of M, same name and shape")
        ->required()
        ->type_name("G.safetensors")
        ->group(io);
    app.add_option("--output", o.output, "also write the training forward's output y")->type_name("Y.npy")->group(io);
  } else {
    app.add_option("--output", o.output, "write the output y [T, B, D*H] (or [B, T, D*H] with\n--batch-first)")
        ->required()
        ->type_name("Y.npy")
        ->group(io);
  }
  app.add_flag("--batch-first", o.batch_first, "x is [B, T, I] and y is [B, T, D*H] (default: time-major)")->group(io);
  app.add_option("--seq-lengths", o.seq_lengths, "[B] integer lengths, 0..T, any order")->type_name("L.npy")->group(io);
  app.add_option("--resets", o.resets,
                 "[T, B] (or [B, T] with --batch-first) integer or bool: where\n"
                 "nonzero, row b's state in every layer is its initial state\n"
                 "(h0, c0 or zeros) again before step t (unidirectional models)")
      ->type_name("R.npy")
      ->group(io);
  app.add_option("--h0", o.h0, "initial hidden state [L*D, B, H] (default zeros)")->type_name("F.npy")->group(io);
  app.add_option("--c0", o.c0, "initial cell state [L*D, B, H] (LSTM; default zeros)")->type_name("F.npy")->group(io);
  if (grad) {
    app.add_option("--dhn", o.dhn, "gradient of the final hidden state [L*D, B, H] (default zeros)")
        ->type_name("F.npy")
        ->group(io);
    app.add_option("--dcn", o.dcn, "gradient of the final cell state [L*D, B, H] (default zeros)")
        ->type_name("F.npy")
        ->group(io);
    app.add_option("--dx", o.dx, "write the gradient of the input, in its layout (computed only when asked for)")->type_name("DX.npy")->group(io);
    app.add_option("--dh0", o.dh0, "write the gradient of h0 [L*D, B, H]")->type_name("F.npy")->group(io);
    app.add_option("--dc0", o.dc0, "write the gradient of c0 [L*D, B, H]")->type_name("F.npy")->group(io);
  } else {
    app.add_option("--hn", o.hn,
                   "write the final hidden state [L*D, B, H] (a stack whose\n"
                   "layers differ: the per-layer [B, H_l] blocks, flattened)")
        ->type_name("F.npy")
        ->group(io);
    app.add_option("--cn", o.cn, "write the final cell state, as --hn")->type_name("F.npy")->group(io);
  }

  const char* dropout = "dropout (docs/dropout.md)";
  CLI::Option* train =
      app.add_flag("--train", o.train, "a training run: dropout on (default: an inference run,\nno dropout)")->group(dropout);
  CLI::Option* mc = nullptr;
  if (!grad)
    mc = app.add_flag("--mc-dropout", o.mc_dropout, "Monte-Carlo dropout in an inference run")->excludes(train)->group(dropout);
  app.add_option("--seed", o.seed, "the run's seed")->check(unsigned_64())->type_name("S")->group(dropout);
  app.add_option("--step", o.step, "the run's step counter")->check(unsigned_64())->type_name("N")->group(dropout);
  app.add_option("--dropout", o.dropout, "inter-layer dropout probability, in [0, 1)\n(CudnnLSTM's dropout)")
      ->check(real_range(0.0, 1.0, false, true))
      ->type_name("P")
      ->group(dropout);
  app.add_option("--row-ids", o.row_ids, "[B] row ids for the masks (default: the batch index)")
      ->type_name("R.npy")
      ->group(dropout);

  const char* exec = "execution";
  app.add_option("--backend", o.backend,
                 "auto: simd where it runs the model, else reference")
      ->check(one_of({"auto", "reference", "simd", "gpu"}))
      ->type_name("auto|reference|simd|gpu")
      ->group(exec);
  add_thread_options(app, o.threads, o.oversubscribe, exec);
  if (!grad) {
    app.add_option("--repeat", o.repeat, "time N further runs and report the median (0..1000000)")
        ->check(int_range(0, 1000000))
        ->type_name("N")
        ->group(exec);
    const char* check = "checking";
    app.add_option("--expect", o.expect, "print the largest deviation of y from a stored output")
        ->type_name("Y.npy")
        ->group(check);
    app.add_option("--expect-hn", o.expect_hn, "likewise for hn")->type_name("F.npy")->group(check);
    app.add_option("--expect-cn", o.expect_cn, "likewise for cn")->type_name("F.npy")->group(check);
    app.add_option("--tolerance", o.tolerance, "with --expect*: exit 1 if the relative error exceeds R")
        ->check(real_range(0.0, 1e300))
        ->type_name("R")
        ->default_str("none")
        ->group(check);
    CLI::Option* samples =
        app.add_option("--mc-samples", o.mc_samples,
                       "with --mc-dropout: run N dropout samples in one call, sample k\n"
                       "with step --step + k, and write their per-element mean to\n"
                       "--output (--expect compares the mean) (1..1000000;\n"
                       "docs/dropout.md, Monte-Carlo dropout)")
            ->check(int_range(1, 1000000))
            ->type_name("N")
            ->needs(mc)
            ->group(dropout);
    for (const char* other : {"--hn", "--cn", "--expect-hn", "--expect-cn", "--repeat"}) samples->excludes(other);
    app.add_option("--output-variance", o.output_variance,
                   "with --mc-samples: write the per-element variance of the\n"
                   "samples, (1/N) * sum (y_k - mean)^2 (population, 0 for N = 1)")
        ->type_name("V.npy")
        ->needs(samples)
        ->group(dropout);
  }
}

// What run and grad share: the model, the run's inputs and its dropout parameters, read and
// checked from the command line.
struct RunSetup {
  LoadedModel model;
  std::vector<unsigned char> x, h0, c0;
  std::vector<std::int64_t> xshape, state_dims, cell_dims;  // h: O = proj_size or H units; c: H
  std::string state_what, cell_what;
  std::vector<std::int32_t> lengths;
  std::vector<std::uint8_t> resets;
  std::vector<std::uint32_t> row_ids;
  std::int64_t T = 0, B = 0, out_width = 0;
  bool any_lstm = false, batch_first = false;
  RunMode run_mode = RunMode::inference;
  unsigned long long seed = 0, step = 0;
  PlanOptions opt;

  const StackSpec& stack() const { return model.stack; }
  std::vector<std::int64_t> yshape() const {
    if (model.stack.head.last_step_only) return {B, out_width};  // a head on each row's last step
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
    fa.resets = resets.empty() ? nullptr : resets.data();
    fa.h0 = h0.empty() ? nullptr : h0.data();
    fa.c0 = c0.empty() ? nullptr : c0.data();
    fa.run_mode = run_mode;
    fa.seed = seed;
    fa.step = step;
    fa.row_ids = row_ids.empty() ? nullptr : row_ids.data();
    return fa;
  }
};

// Token ids [T, B] (or [B, T]) of a model that starts with an Embedding, int32 bytes in *x, each
// inside the vocabulary.
bool read_token_ids(const std::string& path, std::int32_t vocab, bool batch_first, std::vector<std::int64_t>* shape,
                    std::vector<unsigned char>* x, std::string* err) {
  io::Array a;
  std::vector<std::int32_t> ids;
  if (io::read_npy(path.c_str(), &a) != RNNCORE_OK) return (*err = rnncore_last_error_detail(), false);
  if (a.shape.size() != 2)
    return (*err = path + ": the model starts with an Embedding: expected token ids " +
                   (batch_first ? "[B, T] (batch-first)" : "[T, B] (time-major)") + ", found " + shape_string(a.shape),
            false);
  if (io::to_i32(a, &ids) != RNNCORE_OK)
    return (*err = path + ": expected integer token ids, found " + io::elem_type_name(a.type), false);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return (*err = path + ": token id " + std::to_string(ids[i]) + " at element " + std::to_string(i) +
                     " is outside the embedding's vocabulary [0, " + std::to_string(vocab) + ")",
              false);
  *shape = a.shape;
  x->resize(ids.size() * sizeof(std::int32_t));
  if (!ids.empty()) std::memcpy(x->data(), ids.data(), x->size());
  return true;
}

// Reads the model and inputs that run and grad share; returns 0, or the exit status after
// printing the error.
int prepare_run(const CLI::App& app, const RunOptions& o, RunSetup* rs) {
  std::string err;
  const long long threads = o.threads;
  const std::string command = app.get_name().substr(8);  // "rnncore run"
  if (const int rc = check_threads(command, threads, o.oversubscribe); rc >= 0) return rc;
  {
    // `rnncore run` takes an int8 model through run_int8; grad takes float models only.
    SafeTensors file;
    if (read_safetensors(o.weights.c_str(), &file) == RNNCORE_OK && is_int8_model(file))
      return error(o.weights + ": an int8 LSTM model (format tflite_int8, " + int8_model_origin(file) +
                   ") runs with 'rnncore run --weights M --input X --output Y' only; rnncore " + command +
                   " takes float models (docs/int8.md)");
  }
  ModelHints hints = model_hints(app, o.hints);
  hints.dtype = o.dtype == "f64" ? DType::f64 : DType::f32;
  Backend backend = Backend::auto_select;
  parse_backend(o.backend, &backend);  // checked by the option
  rs->seed = o.seed;
  rs->step = o.step;
  const double dropout = o.dropout;
  const RunMode run_mode = rs->run_mode = o.train ? RunMode::training : o.mc_dropout ? RunMode::monte_carlo : RunMode::inference;
  if (run_mode == RunMode::inference &&
      (given(app, "--seed") || given(app, "--step") || given(app, "--dropout") || given(app, "--row-ids")))
    std::fprintf(stderr, "rnncore: note: dropout acts in --train (or --mc-dropout) runs only; this run is deterministic\n");

  StackSpec config;
  if (!o.config.empty() && read_stack_config(o.config, &config, &err) != Status::ok) return error(err);
  LoadedModel& model = rs->model;
  if (load_weights(o.weights, hints, !o.config.empty() ? &config : nullptr, &model, &err) != Status::ok)
    return error(err);
  if (const std::string refused = inapplicable_hint(hints, model.stack); !refused.empty())
    return usage_error(command, refused + " (" + o.weights + ")");
  for (const std::string& note : model.notes) std::fprintf(stderr, "rnncore: note: %s\n", note.c_str());
  if (!model.ignored.empty()) {
    std::string list;
    for (const std::string& t : model.ignored) list += (list.empty() ? "" : ", ") + t;
    std::fprintf(stderr, "rnncore: note: %zu tensor%s of the file %s not part of the recurrent model and %s ignored: %s\n",
                 model.ignored.size(), model.ignored.size() == 1 ? "" : "s", model.ignored.size() == 1 ? "is" : "are",
                 model.ignored.size() == 1 ? "is" : "are", list.c_str());
  }
  StackSpec& stack = model.stack;
  if (given(app, "--dropout")) stack.dropout = dropout;
  const DType dt = stack.dtype;
  const std::int64_t L = stack.num_layers, I = stack.input_size, out_width = stack_output_size(stack);
  bool any_lstm = false;
  for (int l = 0; l < stack.num_layers; ++l) any_lstm = any_lstm || stack.layers[l].mode == Mode::lstm;
  rs->any_lstm = any_lstm;
  rs->out_width = out_width;
  const bool uniform = uniform_states(stack);
  const std::int64_t D = num_directions(stack.layers[0]), H = stack.layers[0].hidden_size;
  const bool batch_first = rs->batch_first = o.batch_first;

  // Input: [T, B, I] or [B, T, I]; after an Embedding, token ids [T, B] or [B, T].
  std::vector<std::int64_t> xshape;
  std::vector<unsigned char>& x = rs->x;
  const std::string I_s = std::to_string(I);
  if (stack.embedding.vocab_size > 0) {
    if (!read_token_ids(o.input, stack.embedding.vocab_size, batch_first, &xshape, &x, &err)) return error(err);
  } else if (!read_float_npy(o.input, dt, {-1, -1, I},
                             batch_first ? dims_string({"B", "T", I_s}) + " (batch-first)"
                                         : dims_string({"T", "B", I_s}) + " (time-major)",
                             &xshape, &x, &err)) {
    return error(err);
  }
  const std::int64_t T = rs->T = batch_first ? xshape[1] : xshape[0], B = rs->B = batch_first ? xshape[0] : xshape[1];
  rs->xshape = xshape;
  if (T > (1 << 28) || B > (1 << 24)) return error(o.input + ": sequence or batch too large");
  const std::string B_s = std::to_string(B), T_s = std::to_string(T), LD_s = std::to_string(L * D), H_s = std::to_string(H);

  std::vector<std::int32_t>& lengths = rs->lengths;
  if (!o.seq_lengths.empty()) {
    const std::string path = o.seq_lengths;
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
  if (!o.resets.empty()) {
    const std::string path = o.resets;
    io::Array a;
    std::vector<std::int32_t> values;
    if (io::read_npy(path.c_str(), &a) != RNNCORE_OK) return error(rnncore_last_error_detail());
    const std::vector<std::int64_t> want = batch_first ? std::vector<std::int64_t>{B, T} : std::vector<std::int64_t>{T, B};
    if (a.shape != want)
      return error(path + ": expected resets of shape " + (batch_first ? dims_string({B_s, T_s}) + " (batch-first)" : dims_string({T_s, B_s})) +
                   ", found " + shape_string(a.shape));
    if (io::to_i32(a, &values) != RNNCORE_OK)
      return error(path + ": expected integer or bool resets, found " + io::elem_type_name(a.type));
    rs->resets.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) rs->resets[i] = values[i] != 0 ? 1 : 0;
  }
  const std::int64_t O = output_size(stack.layers[0]);  // h units: the projection size, or H
  const std::vector<std::int64_t> state_dims = rs->state_dims =
      uniform ? std::vector<std::int64_t>{L * D, B, O} : std::vector<std::int64_t>{state_elements(stack, static_cast<int>(B))};
  const std::string state_what = rs->state_what =
      uniform ? dims_string({LD_s, B_s, std::to_string(O)}) + (O == H ? " ([layers*directions, batch, hidden])"
                                                                       : " ([layers*directions, batch, proj_size])")
              : dims_string({std::to_string(state_dims[0])}) + " (per-layer [B, H_l] blocks, flattened)";
  const std::vector<std::int64_t> cell_dims = rs->cell_dims =
      uniform ? std::vector<std::int64_t>{L * D, B, H} : std::vector<std::int64_t>{cell_state_elements(stack, static_cast<int>(B))};
  rs->cell_what = uniform ? dims_string({LD_s, B_s, H_s}) + " ([layers*directions, batch, hidden])"
                          : dims_string({std::to_string(cell_dims[0])}) + " (per-layer [B, H_l] blocks, flattened)";
  std::vector<std::uint32_t>& row_ids = rs->row_ids;
  if (!o.row_ids.empty()) {
    const std::string path = o.row_ids;
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
  if (!o.h0.empty() && !read_float_npy(o.h0, dt, state_dims, state_what, &ignored, &h0, &err)) return error(err);
  if (!o.c0.empty() || !o.cn.empty() || !o.expect_cn.empty()) {
    if (!any_lstm)
      return error(std::string("--c0/--cn/--expect-cn: a ") + to_string(stack.layers[0].mode) + " network has no cell state");
  }
  if (!o.c0.empty() && !read_float_npy(o.c0, dt, cell_dims, rs->cell_what, &ignored, &c0, &err)) return error(err);

  PlanOptions& opt = rs->opt;
  opt.max_batch = static_cast<std::int32_t>(std::max<std::int64_t>(B, 1));
  opt.max_seq_len = static_cast<std::int32_t>(std::max<std::int64_t>(T, 1));
  opt.backend = backend;
  opt.threads = static_cast<std::int32_t>(threads);
  return 0;
}

// Whether a dropout run of `st` draws any mask: inter-layer dropout between layers, or a dropout
// wrapper with a keep below 1 on a part it drops.
bool has_dropout(const StackSpec& st) {
  if (st.dropout > 0.0 && st.num_layers > 1) return true;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    for (int w = 0; w < ls.num_wrappers; ++w) {
      if (ls.wrappers[w].kind != WrapperKind::dropout) continue;
      const DropoutWrapper& d = ls.wrappers[w].dropout;
      const bool state = d.state_keep < 1.0 && d.state_filter != StateFilter::none &&
                         !(d.state_filter == StateFilter::c_only && ls.mode != Mode::lstm);
      if (d.input_keep < 1.0 || d.output_keep < 1.0 || state) return true;
    }
  }
  return false;
}

// The app of `rnncore run`.
void define_run(CLI::App& app, RunOptions& o) {
  setup_app(app);
  app.description("Runs a recurrent model from a safetensors file on .npy input; prints the model, the time per run\n"
                  "and, with --expect*, the largest deviation from stored outputs.\n"
                  "An int8 LSTM model (format tflite_int8, written from a quantized .tflite by\n"
                  "tools/tflite_to_safetensors.py or by rnncore quantize; docs/int8.md) takes --weights, --input, --output, --hn,\n"
                  "--cn (and --h0, --c0, --threads, --repeat, --expect*, --tolerance) only: x int8 [B, T, I] (batch-major), or float32 quantized as TFLite's QUANTIZE op does;\n"
                  "y int8 [B, T, H], or [B, H] for a model that returns the last step; hn int8 and cn int16\n"
                  "(every LSTM op's final output and cell states: [B, H] for one, [L*D, B, H] for a stack of\n"
                  "one width, else the per-layer [B, H_l] blocks flattened, forward before backward); bit\n"
                  "for bit LiteRT's. --h0 (int8) and --c0 (int16), in the same shape, set the initial states\n"
                  "(default: LiteRT's, h = the output zero point, c = 0), so a sequence runs in chunks. Stacks, go_backwards, Keras Bidirectional (merge_mode concat, sum, mul, ave)\n"
                  "and Dense heads (relu, sigmoid, tanh, softmax; on the last step or every step) run too. A\n"
                  "model that starts with a Keras Embedding takes token ids, int32 or int64 [B, T], each in\n"
                  "[0, V).");
  add_run_options(app, o, false);
}

// Token ids a ([B, T], int32 or int64) as int32 into *x (4 bytes each), each in [0, vocab); an error
// naming the first id outside the vocabulary, or "".
std::string int8_token_ids(const Array& a, std::int32_t vocab, std::vector<unsigned char>* x) {
  const std::size_t n = static_cast<std::size_t>(a.shape[0] * a.shape[1]), T = static_cast<std::size_t>(a.shape[1]);
  x->assign(4 * n, 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::int64_t id;
    if (a.type == ElemType::i32) {
      std::int32_t v;
      std::memcpy(&v, a.bytes.data() + 4 * k, 4);
      id = v;
    } else {
      std::memcpy(&id, a.bytes.data() + 8 * k, 8);
    }
    if (id < 0 || id >= vocab)
      return "token id " + std::to_string(id) + " at [" + std::to_string(k / T) + ", " + std::to_string(k % T) +
             "] is outside the embedding's vocabulary [0, " + std::to_string(vocab) + ") (LiteRT's GATHER fails on it too)";
    const std::int32_t v = static_cast<std::int32_t>(id);
    std::memcpy(x->data() + 4 * k, &v, 4);
  }
  return "";
}

// Reads an int8 model's initial state (--h0 int8, --c0 int16) of the shape --hn and --cn write;
// returns "" or the error line.
std::string read_int8_state(const std::string& path, ElemType type, const std::vector<std::int64_t>& shape, Array* out) {
  if (read_npy(path.c_str(), out) != RNNCORE_OK) return rnncore_last_error_detail();
  if (out->type != type || out->shape != shape)
    return path + ": expected " + elem_type_name(type) + " " + shape_string(shape) + " (the model's " +
           (type == ElemType::i8 ? "output" : "cell") + " states, as --hn / --cn write them), found " +
           elem_type_name(out->type) + " " + shape_string(out->shape);
  return "";
}

// An int8 model's input (--input): int8 [B, T, I], float32 (the stack quantizes it as TFLite's
// QUANTIZE op does: float_input), or token ids [B, T] for a model that starts with an Embedding
// (int32 in *x), batch-major. Returns "" or the error line; *a is the array as read.
std::string read_int8_input(const RunOptions& o, StackSpec* st, Array* a, std::vector<unsigned char>* x) {
  const std::int64_t I = st->input_size;
  const bool embedding = st->embedding.vocab_size > 0;
  const std::string expected = dims_string({"B", "T", std::to_string(I)}) + " (batch-major, as the TFLite op)";
  if (read_npy(o.input.c_str(), a) != RNNCORE_OK) return rnncore_last_error_detail();
  const bool ids = a->type == ElemType::i32 || a->type == ElemType::i64;
  if (embedding && !ids)
    return o.input + ": " + o.weights + " starts with an Embedding: expected token ids, int32 or int64 [B, T], found " +
           elem_type_name(a->type) + " " + shape_string(a->shape);
  if (!embedding && ids)
    return o.input + ": token ids (" + elem_type_name(a->type) + ") for " + o.weights +
           ", which has no Embedding: expected int8 or float32 input " + expected;
  if (!ids && a->type != ElemType::i8 && a->type != ElemType::f32)
    return o.input + ": expected int8 or float32 input " + expected + " for the int8 model " + o.weights + ", found " +
           elem_type_name(a->type) + " " + shape_string(a->shape);
  if (ids ? a->shape.size() != 2 : a->shape.size() != 3 || a->shape[2] != I)
    return o.input + ": expected shape " + (ids ? std::string("[B, T] (token ids)") : expected) + ", found " +
           shape_string(a->shape);
  const std::int64_t B = a->shape[0], T = a->shape[1];
  if (T > (1 << 28) || B > (1 << 24)) return o.input + ": sequence or batch too large";
  st->float_input = a->type == ElemType::f32;
  if (ids) {
    if (const std::string e = int8_token_ids(*a, st->embedding.vocab_size, x); !e.empty()) return o.input + ": " + e;
  } else {
    *x = a->bytes;
  }
  return "";
}

// The runs of `rnncore run` (float and int8): `forward` once, then `repeat` more times, each timed.
struct RunTimes {
  double first_ms = 0;
  std::vector<double> times;  // the repeats' (and Monte-Carlo samples'), in milliseconds
  // The time per run: the median of the repeats, else the single run's.
  double ms() {
    std::sort(times.begin(), times.end());
    return times.empty() ? first_ms : times[times.size() / 2];
  }
};

template <class Forward>
Status time_runs(Forward&& forward, long long repeat, RunTimes* rt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const Status s = forward();
  rt->first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  if (s != Status::ok) return s;
  for (long long r = 0; r < repeat; ++r) {
    const auto t1 = clock::now();
    forward();
    rt->times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t1).count());
  }
  return Status::ok;
}

// --expect, --expect-hn and --expect-cn: each output's deviation from its stored expectation on a
// line; with --tolerance (>= 0) an error naming the output whose relative error exceeds it.
int check_expected(const RunOptions& o, double tolerance, DType dt, const std::vector<unsigned char>& y,
                   const std::vector<std::int64_t>& yshape, const std::vector<unsigned char>& hy,
                   const std::vector<std::int64_t>& state_dims, const std::vector<unsigned char>& cy,
                   const std::vector<std::int64_t>& cell_dims) {
  std::string err;
  double worst = 0;
  const char* worst_label = "y";
  struct Check {
    const std::string* path;
    const char* label;
    const std::vector<unsigned char>* got;
    const std::vector<std::int64_t>* shape;
  };
  for (const Check& c : {Check{&o.expect, "y", &y, &yshape}, Check{&o.expect_hn, "hn", &hy, &state_dims},
                         Check{&o.expect_cn, "cn", &cy, &cell_dims}}) {
    if (c.path->empty()) continue;
    const double rel = compare(c.label, *c.got, dt, *c.shape, *c.path, &err);
    if (rel < 0) return error(err);
    if (rel > worst || std::isnan(rel)) worst = rel, worst_label = c.label;
  }
  if (tolerance >= 0 && !(worst <= tolerance)) {
    char line[160];
    std::snprintf(line, sizeof line, "%s: relative error %.3g exceeds --tolerance %.3g", worst_label, worst, tolerance);
    return error(line);
  }
  return 0;
}

// `rnncore run` on an integer LSTM model (metadata format=tflite_int8, from
// tools/tflite_to_safetensors.py or rnncore quantize; docs/int8.md): int8 [B, T, I] input, or
// float32 quantized as TFLite's QUANTIZE op does; int8 output [B, T, H], or [B, H] for a last-step model.
int run_int8(const CLI::App& app, const RunOptions& o) {
  for (const CLI::Option* opt : app.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() > 0 && name != "--weights" && name != "--input" && name != "--output" && name != "--hn" &&
        name != "--cn" && name != "--h0" && name != "--c0" && name != "--threads" && name != "--oversubscribe" &&
        name != "--repeat" && name != "--expect" && name != "--expect-hn" && name != "--expect-cn" && name != "--tolerance")
      return usage_error("run", name + " does not apply to " + o.weights +
                                    ", an int8 LSTM model (format tflite_int8): it runs with --weights, --input, "
                                    "--output, --h0, --c0, --hn, --cn, --threads, --repeat, --expect* and --tolerance "
                                    "only (docs/int8.md)");
  }
  if (const int rc = check_threads("run", o.threads, o.oversubscribe); rc >= 0) return rc;
  std::string err;
  LoadedModel model;  // the loader of every model: the file's StackSpec of dtype i8 and its canonical bytes
  if (load_weights(o.weights, ModelHints(), nullptr, &model, &err) != Status::ok) return error(err);
  StackSpec& st = model.stack;
  st.float_output = false;  // the command writes the int8 output
  Array a;
  std::vector<unsigned char> x;
  if (!(err = read_int8_input(o, &st, &a, &x)).empty()) return error(err);
  const std::int64_t B = a.shape[0], T = a.shape[1], W = stack_output_size(st);
  const bool sequences = st.head.out_features == 0 || !st.head.last_step_only;
  const std::vector<std::int64_t> yshape = sequences ? std::vector<std::int64_t>{B, T, W} : std::vector<std::int64_t>{B, W};
  std::vector<std::int8_t> y(static_cast<std::size_t>(sequences ? B * T * W : B * W));
  PlanOptions opt;
  opt.max_batch = static_cast<std::int32_t>(std::max<std::int64_t>(B, 1));
  opt.max_seq_len = static_cast<std::int32_t>(std::max<std::int64_t>(T, 1));
  opt.threads = static_cast<std::int32_t>(o.threads);
  Model net;
  if (Model::create(st, opt, model.canonical.data(), &net) != Status::ok)
    return error(o.weights + ": " + last_error_detail());
  std::vector<std::int8_t> hn(static_cast<std::size_t>(state_elements(st, static_cast<int>(B))));
  std::vector<std::int16_t> cn(hn.size());
  const std::vector<std::int64_t> sshape = int8_state_shape(st, B);
  Array h0, c0;
  if (!o.h0.empty() && !(err = read_int8_state(o.h0, ElemType::i8, sshape, &h0)).empty()) return error(err);
  if (!o.c0.empty() && !(err = read_int8_state(o.c0, ElemType::i16, sshape, &c0)).empty()) return error(err);
  ForwardArgs fa;
  fa.batch = static_cast<std::int32_t>(B);
  fa.seq_len = static_cast<std::int32_t>(T);
  fa.layout = Layout::batch_major;
  fa.x = x.data();
  fa.h0 = o.h0.empty() ? nullptr : h0.bytes.data();
  fa.c0 = o.c0.empty() ? nullptr : c0.bytes.data();
  fa.y = y.data();
  fa.hy = hn.data();
  fa.cy = cn.data();
  RunTimes rt;
  if (B > 0 && T > 0 && time_runs([&]() { return net.forward(fa); }, o.repeat, &rt) != Status::ok)
    return error(o.weights + ": " + last_error_detail());
  const double ms = rt.ms();
  if (write_npy(o.output.c_str(), ElemType::i8, yshape.data(), static_cast<int>(yshape.size()), y.data()) != RNNCORE_OK)
    return error(rnncore_last_error_detail());
  const int srank = static_cast<int>(sshape.size());
  if (!o.hn.empty() && write_npy(o.hn.c_str(), ElemType::i8, sshape.data(), srank, hn.data()) != RNNCORE_OK)
    return error(rnncore_last_error_detail());
  if (!o.cn.empty() && write_npy(o.cn.c_str(), ElemType::i16, sshape.data(), srank, cn.data()) != RNNCORE_OK)
    return error(rnncore_last_error_detail());
  for (const std::string& line : int8_describe(st, model.canonical.data())) std::printf("%s\n", line.c_str());
  if (st.embedding.vocab_size > 0)
    std::printf("input: token ids (%s) through %s\n", elem_type_name(a.type),
                int8_describe_embedding(st.embedding.vocab_size, st.input_size, st.input_quant).c_str());
  std::printf("input: %s%s%s; output: int8 %s\n", a.type == ElemType::f32 ? "float32" : "int8",
              a.type == ElemType::f32 ? " (quantized as TFLite's QUANTIZE op)" : "",
              st.reverse_input ? ", steps read last to first (go_backwards)" : "", shape_string(yshape).c_str());
  std::printf("run: T=%lld B=%lld, int8 kernels %s, %.3f ms%s\n", static_cast<long long>(T), static_cast<long long>(B),
              int8_plan_kernels(net.plan()).c_str(), ms,
              rt.times.empty() ? "" : (" per run (median of " + std::to_string(rt.times.size()) + ")").c_str());
  // --expect*: the float path's check, on the int8 / int16 values.
  const auto as_f64 = [](const auto& v) {
    std::vector<unsigned char> out(v.size() * 8);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double d = v[i];
      std::memcpy(out.data() + 8 * i, &d, 8);
    }
    return out;
  };
  return check_expected(o, given(app, "--tolerance") ? o.tolerance : -1.0, DType::f64, as_f64(y), yshape, as_f64(hn),
                        sshape, as_f64(cn), sshape);
}

// The "model:" line of a run: the cell, layers and sizes read off the weights (with the LSTM
// extensions, per layer where they differ), or the --config stack layer by layer.
void print_model(const RunOptions& o, const LoadedModel& model, const StackSpec& stack) {
  const std::int64_t L = stack.num_layers, I = stack.input_size;
  const std::int64_t D = num_directions(stack.layers[0]), H = stack.layers[0].hidden_size;
  // A stack from --config, or the one a file carries (metadata 'config': layers that differ), is printed per layer.
  bool uniform = o.config.empty();
  for (int l = 1; l < stack.num_layers; ++l)
    uniform = uniform && stack.layers[l].mode == stack.layers[0].mode &&
              stack.layers[l].hidden_size == stack.layers[0].hidden_size &&
              stack.layers[l].direction == stack.layers[0].direction &&
              stack.layers[l].gru_variant == stack.layers[0].gru_variant;
  if (uniform) {
    const RnnSpec& spec = model.spec;
    // LSTM extensions, when present: one value, or one per layer (a/b/c) where the layers differ.
    std::string ext;
    auto per_layer = [&](const char* name, auto get, bool flag) {
      std::string values;
      bool any = false, same = true;
      char v[32];
      for (int l = 0; l < stack.num_layers; ++l) {
        const double x = get(stack.layers[l]);
        any = any || x > 0;
        same = same && x == get(stack.layers[0]);
        std::snprintf(v, sizeof v, "%g", x);
        values += (l ? "/" : "") + std::string(v);
      }
      if (!any) return;
      if (same) values = values.substr(0, values.find('/'));
      ext += std::string(", ") + name + (flag && same ? "" : " " + values);
    };
    per_layer("proj_size", [](const LayerSpec& ls) { return static_cast<double>(ls.proj_size); }, false);
    per_layer("peepholes", [](const LayerSpec& ls) { return ls.peepholes ? 1.0 : 0.0; }, true);
    per_layer("cell_clip", [](const LayerSpec& ls) { return ls.cell_clip; }, false);
    per_layer("proj_clip", [](const LayerSpec& ls) { return ls.proj_clip; }, false);
    std::printf("model: %s%s, %lld layer(s), %s, input %lld, hidden %lld%s (%s weights, prefix '%s')\n", to_string(spec.mode),
                spec.mode == Mode::gru ? (std::string(" ") + to_string(spec.gru_variant)).c_str() : "",
                static_cast<long long>(L), D == 2 ? "bidirectional" : "unidirectional", static_cast<long long>(I),
                static_cast<long long>(H), ext.c_str(), to_string(model.format), model.prefix.c_str());
  } else {
    std::string layers;
    for (int l = 0; l < stack.num_layers; ++l) {
      const LayerSpec& ls = stack.layers[l];
      layers += (l ? ", " : "") + std::string(to_string(ls.mode)) + " " + std::to_string(ls.hidden_size) +
                (ls.direction == Direction::bidirectional ? " bi" : "");
      char ext[96];  // LSTM extensions (from the configuration, or the file where the configuration says nothing)
      std::snprintf(ext, sizeof ext, "%s%s", ls.proj_size > 0 ? (" proj " + std::to_string(ls.proj_size)).c_str() : "",
                    ls.peepholes ? " peepholes" : "");
      layers += ext;
      for (const auto& c : {std::make_pair(" cell_clip %g", ls.cell_clip), std::make_pair(" proj_clip %g", ls.proj_clip)})
        if (c.second > 0) {
          std::snprintf(ext, sizeof ext, c.first, c.second);
          layers += ext;
        }
      for (int w = 0; w < ls.num_wrappers; ++w)
        layers += ls.wrappers[w].kind == WrapperKind::dropout ? " +dropout" : " +residual";
    }
    std::printf("model: stack of %lld layer(s) [%s], input %lld, inter-layer dropout %g (%s weights, prefix '%s')\n",
                static_cast<long long>(L), layers.c_str(), static_cast<long long>(I), stack.dropout, to_string(model.format),
                model.prefix.c_str());
  }
}

int cmd_run(int argc, char** argv) {
  CLI::App app{"", "rnncore run"};
  RunOptions o;
  define_run(app, o);
  if (const int rc = parse_command(app, "run", argc, argv); rc >= 0) return rc;
  {
    // An integer LSTM model runs through its own path (its metadata says format=tflite_int8).
    SafeTensors file;
    if (read_safetensors(o.weights.c_str(), &file) == RNNCORE_OK && is_int8_model(file)) return run_int8(app, o);
  }
  std::string err;
  const long long repeat = o.repeat;
  const double tolerance = given(app, "--tolerance") ? o.tolerance : -1.0;
  RunSetup rs;
  if (const int rc = prepare_run(app, o, &rs)) return rc;
  const LoadedModel& model = rs.model;
  const StackSpec& stack = rs.stack();
  const DType dt = stack.dtype;
  const std::size_t es = dtype_size(dt);
  const std::int64_t out_width = rs.out_width, T = rs.T, B = rs.B;
  const bool any_lstm = rs.any_lstm;
  const RunMode run_mode = rs.run_mode;
  const unsigned long long seed = rs.seed, step = rs.step;
  const std::vector<std::int64_t>& state_dims = rs.state_dims;
  const PlanOptions& opt = rs.opt;
  const std::vector<std::int64_t> yshape = rs.yshape();
  Model net;
  Status s = Model::create(stack, opt, model.canonical.data(), &net);
  if (s != Status::ok) return error(o.weights + ": " + library_error(s));

  std::vector<unsigned char> y(static_cast<std::size_t>(T * B * out_width) * es),
      hy(static_cast<std::size_t>(state_elements(stack, static_cast<int>(B))) * es),
      cy(any_lstm ? static_cast<std::size_t>(cell_state_elements(stack, static_cast<int>(B))) * es : 0);
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
  // --mc-samples N: sample k runs with step + k, which gives it masks of its own (the step is a word
  // of the mask function's counter, docs/dropout.md), and its y is folded into a per-element
  // running mean and sum of squared deviations (Welford, in f64) in one buffer made before the
  // first sample: the samples reuse the model's buffers and allocate nothing.
  const bool mc = given(app, "--mc-samples");
  const long long samples = mc ? o.mc_samples : 1;
  const std::size_t y_count = y.size() / es;
  std::vector<double> acc(mc ? 2 * y_count : 0);  // [mean, m2] per element
  auto fold = [&](long long k) {
    const double inv = 1.0 / static_cast<double>(k + 1);
    for (std::size_t i = 0; i < y_count; ++i) {
      const double v = element(y, dt, i), d = v - acc[2 * i];
      acc[2 * i] += d * inv;
      acc[2 * i + 1] += d * (v - acc[2 * i]);
    }
  };
  if (mc && !has_dropout(stack))
    std::fprintf(stderr,
                 "rnncore: note: no dropout acts in this model (no inter-layer dropout, no dropout wrapper with a "
                 "keep below 1): the %lld samples are identical and their variance is 0\n",
                 samples);
  using clock = std::chrono::steady_clock;
  RunTimes rt;
  if ((s = time_runs(forward, repeat, &rt)) != Status::ok) return error(library_error(s));
  std::vector<double>& times = rt.times;
  if (on_gpu && (s = device.download(fa, nullptr)) != Status::ok) return error(library_error(s));
  if (mc) {
    times.reserve(static_cast<std::size_t>(samples));
    fold(0);
    for (long long k = 1; k < samples; ++k) {
      run_args.step = step + static_cast<unsigned long long>(k);
      const auto t1 = clock::now();
      if ((s = forward()) != Status::ok) return error(library_error(s));
      times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t1).count());
      if (on_gpu && (s = device.download(fa, nullptr)) != Status::ok) return error(library_error(s));
      fold(k);
    }
    // y holds the mean from here on (for --output and --expect); the variance is m2 / N.
    std::vector<double> variance(y_count);
    for (std::size_t i = 0; i < y_count; ++i) {
      if (dt == DType::f64) reinterpret_cast<double*>(y.data())[i] = acc[2 * i];
      else reinterpret_cast<float*>(y.data())[i] = static_cast<float>(acc[2 * i]);
      variance[i] = acc[2 * i + 1] / static_cast<double>(samples);
    }
    if (!o.output_variance.empty() && !write_f32_npy(o.output_variance, DType::f64, variance.data(), yshape, &err))
      return error(err);
  }
  const double ms = rt.ms();

  if (!write_f32_npy(o.output, dt, y.data(), yshape, &err)) return error(err);
  if (!o.hn.empty() && !write_f32_npy(o.hn, dt, hy.data(), state_dims, &err)) return error(err);
  if (!o.cn.empty() && !write_f32_npy(o.cn, dt, cy.data(), rs.cell_dims, &err)) return error(err);

  print_model(o, model, stack);
  if (mc)
    std::printf("dropout: monte-carlo, %lld sample(s) with steps %llu..%llu, seed %llu%s; y is their mean\n", samples,
                step, step + static_cast<unsigned long long>(samples - 1), seed, rs.row_ids.empty() ? "" : ", row ids given");
  else if (run_mode != RunMode::inference)
    std::printf("dropout: %s run, seed %llu, step %llu%s\n", run_mode == RunMode::training ? "training" : "monte-carlo",
                seed, step, rs.row_ids.empty() ? "" : ", row ids given");
  std::printf("run: T=%lld B=%lld, backend %s (%s), %.3f ms per run, %.2f us per step%s\n", static_cast<long long>(T),
              static_cast<long long>(B), to_string(net.plan().backend()), net.plan().kernel_name(), ms,
              T > 0 ? 1000.0 * ms / static_cast<double>(T) : 0.0,
              times.empty() ? " (single run; --repeat N for a median)" : (" (median of " + std::to_string(times.size()) + ")").c_str());

  return check_expected(o, tolerance, dt, y, yshape, hy, state_dims, cy, rs.cell_dims);
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
  data.reserve(static_cast<std::size_t>(n) + model.ends.size());
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
  // The embedding's and the head's tensors ("name [dims]" in model.ends: the table, W, then b when
  // the file has it), in the file's layout (a Keras kernel is Wᵀ).
  const ParamKind kinds[3] = {ParamKind::embedding, ParamKind::dense_weight, ParamKind::dense_bias};
  std::size_t next = st.embedding.vocab_size > 0 ? 0 : 1;
  for (const std::string& entry : model.ends) {
    const std::string name = entry.substr(0, entry.rfind(" ["));
    const io::TensorEntry* e = m.find(name);
    if (e == nullptr || next > 2) continue;
    const ParamKind kind = kinds[next++];
    const std::int64_t rows = e->shape[0], cols = e->shape.size() == 2 ? e->shape[1] : 1;
    const bool transpose = kind == ParamKind::dense_weight && model.format == WeightFormat::keras;
    const std::int64_t offset = canonical_offset(st, 0, 0, kind, 0);
    std::vector<float> g(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = offset + (transpose ? c * rows + r : r * cols + c);
        g[static_cast<std::size_t>(r * cols + c)] =
            st.dtype == DType::f64 ? static_cast<float>(static_cast<const double*>(dweights)[i]) : static_cast<const float*>(dweights)[i];
      }
    data.push_back(std::move(g));
    io::TensorToWrite t;
    t.name = name;
    t.shape = e->shape;
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

// The app of `rnncore grad`.
void define_grad(CLI::App& app, RunOptions& o) {
  setup_app(app);
  app.description(
      "Backward through time (docs/training.md): the gradients of  sum(y*dy) + sum(hn*dhn) + sum(cn*dcn)\n"
      "with respect to the weights (a Linear/Dense head's and an Embedding's too), the input and the initial\n"
      "states (y: the head's output when the model has one). With --train, dropout acts with the\n"
      "masks of 'rnncore run --train' with the same seed and step.");
  add_run_options(app, o, true);
}

int cmd_grad(int argc, char** argv) {
  CLI::App app{"", "rnncore grad"};
  RunOptions o;
  define_grad(app, o);
  if (const int rc = parse_command(app, "grad", argc, argv); rc >= 0) return rc;
  std::string err;
  RunSetup rs;
  if (const int rc = prepare_run(app, o, &rs)) return rc;
  const StackSpec& stack = rs.stack();
  const DType dt = stack.dtype;
  const std::size_t es = dtype_size(dt);
  const bool ids = stack.embedding.vocab_size > 0;
  if (ids && !o.dx.empty())
    return error("--dx: " + o.weights + " starts with an Embedding: its input is token ids, which have no gradient "
                 "(the table's is written with the weights' by --grads)");
  if (!rs.any_lstm && (!o.dcn.empty() || !o.dc0.empty()))
    return error(std::string("--dcn/--dc0: a ") + to_string(stack.layers[0].mode) + " network has no cell state");

  std::vector<std::int64_t> ignored;
  std::vector<unsigned char> dy, dhn, dcn;
  const std::vector<std::int64_t> yshape = rs.yshape();
  if (!read_float_npy(o.dy, dt, yshape, shape_string(yshape) + (rs.batch_first ? " (batch-first)" : " (time-major)"),
                      &ignored, &dy, &err))
    return error(err);
  if (!o.dhn.empty() && !read_float_npy(o.dhn, dt, rs.state_dims, rs.state_what, &ignored, &dhn, &err))
    return error(err);
  if (!o.dcn.empty() && !read_float_npy(o.dcn, dt, rs.cell_dims, rs.cell_what, &ignored, &dcn, &err))
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
  if (s != Status::ok) return error(o.weights + ": " + library_error(s));
  if (plan.backend() == Backend::gpu)  // its buffers would be device memory; this command's are the host's
    return error("grad: --backend gpu is not served here (it reads and writes .npy files on the host); GPU training "
                 "is the library's (Plan or Model with Backend::gpu), and 'rnncore bench --backward --backend gpu' times it");
  Aligned packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  if ((s = plan.pack_weights(rs.model.canonical.data(), packed.p, packed.bytes)) != Status::ok) return error(library_error(s));

  const std::size_t states = static_cast<std::size_t>(state_elements(stack, static_cast<int>(rs.B)));
  const std::size_t cells = static_cast<std::size_t>(cell_state_elements(stack, static_cast<int>(rs.B)));  // H (h: P)
  std::vector<unsigned char> y(static_cast<std::size_t>(rs.T * rs.B * rs.out_width) * es), dx(o.dx.empty() ? 0 : rs.x.size()),
      dh0(states * es), dc0(rs.any_lstm ? cells * es : 0), dweights(rs.model.canonical.size());
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
  ba.dx = ids || o.dx.empty() ? nullptr : dx.data();  // not asked for: the first layer's input product is skipped
  ba.dh0 = dh0.data();
  ba.dc0 = dc0.empty() ? nullptr : dc0.data();
  ba.dweights = dweights.data();
  if ((s = plan.backward(packed.p, bws.p, bws.bytes, ba)) != Status::ok) return error(library_error(s));
  const auto t2 = clock::now();

  if (!write_weight_grads(o.weights, o.grads, rs.model, dweights.data(), &err)) return error(err);
  if (!o.dx.empty() && !write_f32_npy(o.dx, dt, dx.data(), rs.xshape, &err)) return error(err);
  if (!o.dh0.empty() && !write_f32_npy(o.dh0, dt, dh0.data(), rs.state_dims, &err)) return error(err);
  if (!o.dc0.empty() && !write_f32_npy(o.dc0, dt, dc0.data(), rs.cell_dims, &err)) return error(err);
  if (!o.output.empty() && !write_f32_npy(o.output, dt, y.data(), yshape, &err)) return error(err);
  std::printf("grad: T=%lld B=%lld, backend %s (%s), %s run; forward %.3f ms, backward %.3f ms; reserve %zu bytes\n",
              static_cast<long long>(rs.T), static_cast<long long>(rs.B), to_string(plan.backend()), plan.kernel_name(),
              rs.run_mode == RunMode::training ? "training (dropout on)" : "deterministic",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count(), plan.reserve_bytes());
  return 0;
}

struct BenchOptions {
  std::string mode = "lstm", gru, dtype = "f32", backend = "auto";
  long long seq = 100, batch = 1, input = 512, hidden = 512, layers = 1, threads = 1, reps = 20, proj = 0;
  bool bidirectional = false, backward = false, no_dx = false, peak = false, oversubscribe = false, peepholes = false;
  bool gpu_half_math = false;
  double dropout = 0.0;
  bool dropout_given = false;  ///< --dropout was given (set after parsing)
  double resets = 0.0;         ///< --resets: the fraction of (step, row) pairs reset (0: not timed)
};

// The app of `rnncore bench`.
void define_bench(CLI::App& app, BenchOptions& o) {
  setup_app(app);
  app.description("Times a forward pass of random weights: one warm-up, then the median of --reps runs.");
  const char* shape = "shape";
  app.add_option("--mode", o.mode, "cell")
      ->check(one_of({"lstm", "gru", "rnn_tanh", "rnn_relu"}))
      ->type_name("lstm|gru|rnn_tanh|rnn_relu")
      ->group(shape);
  app.add_option("--gru", o.gru, "GRU variant (default: reset-after)")
      ->check(one_of({"reset-after", "reset-before"}))
      ->type_name("reset-after|reset-before")
      ->group(shape);
  app.add_option("--seq", o.seq, "sequence length (1..2^20)")->check(int_range(1, 1 << 20))->type_name("T")->group(shape);
  app.add_option("--batch", o.batch, "batch (1..65536)")->check(int_range(1, 1 << 16))->type_name("B")->group(shape);
  app.add_option("--input", o.input, "input size (1..65536)")->check(int_range(1, 1 << 16))->type_name("I")->group(shape);
  app.add_option("--hidden", o.hidden, "hidden size (1..65536)")->check(int_range(1, 1 << 16))->type_name("H")->group(shape);
  app.add_option("--layers", o.layers, "layers (1.." + std::to_string(kMaxLayers) + ")")
      ->check(int_range(1, kMaxLayers))
      ->type_name("L")
      ->group(shape);
  app.add_flag("--bidirectional", o.bidirectional, "both directions")->group(shape);
  app.add_option("--proj", o.proj, "LSTM projection size (1..H-1; default none)")
      ->check(int_range(1, 1 << 16))
      ->type_name("P")
      ->group(shape);
  app.add_flag("--peepholes", o.peepholes, "LSTM peepholes")->group(shape);
  app.add_option("--dtype", o.dtype,
                 "computation type, or bf16 / f16 weight storage with f32 accumulation;\n"
                 "int8: the integer LSTM (LiteRT's 8x8_16: int8 weights and\n"
                 "activations, int16 cell; --mode lstm, unidirectional, batch-major;\n"
                 "prints gops=, 2 integer operations per multiply-add)")
      ->check(one_of({"f32", "f64", "bf16", "f16", "int8"}))
      ->type_name("f32|f64|bf16|f16|int8")
      ->group(shape);
  const char* exec = "execution";
  app.add_option("--backend", o.backend,
                 "gpu: device buffers; each run is timed on the host until\nthe device has finished it")
      ->check(one_of({"auto", "reference", "simd", "gpu"}))
      ->type_name("auto|reference|simd|gpu")
      ->group(exec);
  add_thread_options(app, o.threads, o.oversubscribe, exec);
  app.add_flag("--gpu-half-math", o.gpu_half_math,
               "GPU backend: let the matrix units take x and h rounded to the\n"
               "weight type (--dtype f16 / bf16), or to TF32 (--dtype f32, NVIDIA;\n"
               "docs/gpu.md)")
      ->group(exec);
  app.add_option("--reps", o.reps, "timed repetitions after one warm-up (1..1000000)")
      ->check(int_range(1, 1000000))
      ->type_name("R")
      ->group(exec);
  const char* extra = "also measure";
  app.add_option("--dropout", o.dropout,
                 "also time the network with dropout P, in (0, 1), on every\n"
                 "site (wrapper input, output and state, inter-layer),\n"
                 "alternating, and print the overhead")
      ->check(real_range(0.0, 1.0, true, true))
      ->type_name("P")
      ->default_str("none")
      ->group(extra);
  app.add_option("--resets", o.resets,
                 "also time the forward (and with --backward the training\n"
                 "step) with per-step state resets at a fraction P, in (0, 1],\n"
                 "of the (step, row) pairs, alternating, and print the overhead")
      ->check(real_range(0.0, 1.0, true, false))
      ->type_name("P")
      ->default_str("none")
      ->group(extra);
  CLI::Option* backward = app.add_flag("--backward", o.backward,
               "also time a training step (training forward filling the\n"
               "reserve + backward for dx, dh0, dc0 and the weights) against\n"
               "the inference forward, alternating, and print both and their\n"
               "ratio; with --dropout P the training step is also timed with\n"
               "dropout P on every site; each timed run follows an untimed\n"
               "one of the same kind (GPU: device buffers, each half timed\n"
               "to the end of a synchronize)")
      ->group(extra);
  app.add_flag("--no-dx", o.no_dx,
               "with --backward: a training step whose input needs no\n"
               "gradient (dx not asked for: the first layer's input product\n"
               "is skipped, as rnncore.torch does for such an input)")
      ->needs(backward)
      ->group(extra);
  app.add_flag("--peak", o.peak,
               "also measure this core's FMA peak (of the kernels'\n"
               "instruction set) and print the fraction of it reached")
      ->group(extra);
  app.footer(
      "prints: median_ms=... gflops=... (2 flops per multiply-add of the matrix products);\n"
      "  with --backward (median_ms is then the inference forward's):\n"
      "  training_step_ms=... forward_ms=... backward_ms=... gflops=... (3x the forward's; --no-dx: less\n"
      "  the first layer's input product) ratio=...;\n"
      "  --backend gpu: gpu_graph: ... (the last forward and graph replay, RNNCORE_GPU_GRAPHS=on)");
}

// `rnncore bench --dtype int8` times a stack of unidirectional integer LSTMs (io::int8_bench_stack)
// on a Model as any stack, inference only: the options beyond those are usage errors. Returns -1
// to go on, else the exit status.
int check_bench_int8(const CLI::App& app, const BenchOptions& o) {
  const char* const refused[] = {"--gru", "--bidirectional", "--proj", "--peepholes", "--gpu-half-math",
                                 "--dropout", "--resets", "--backward", "--no-dx", "--peak"};
  for (const char* option : refused)
    if (given(app, option)) return usage_error("bench", std::string(option) + " is not available with --dtype int8");
  if (o.mode != "lstm") return usage_error("bench", "--dtype int8 runs the integer LSTM: --mode lstm only");
  if (o.backend == "gpu") return usage_error("bench", "--dtype int8 runs on the CPU (--backend auto, simd or reference)");
  return -1;
}

// The network `rnncore bench` times (its options, checked) and the options of its plans; returns
// -1 to go on, else the exit status.
int bench_spec(const BenchOptions& o, RnnSpec* spec, PlanOptions* opt) {
  parse_mode(o.mode, &spec->mode);  // the names were checked by the options
  if (!o.gru.empty()) parse_gru_variant(o.gru, &spec->gru_variant);
  spec->dtype = o.dtype == "f64" ? DType::f64 : DType::f32;  // bf16 / f16: weight storage, f32 computation
  spec->input_size = static_cast<int>(o.input);
  spec->hidden_size = static_cast<int>(o.hidden);
  spec->num_layers = static_cast<int>(o.layers);
  spec->direction = o.bidirectional ? Direction::bidirectional : Direction::unidirectional;
  spec->proj_size = static_cast<int>(o.proj);
  spec->peepholes = o.peepholes;
  opt->max_batch = static_cast<int>(o.batch);
  opt->max_seq_len = static_cast<int>(o.seq);
  opt->threads = static_cast<int>(o.threads);
  opt->weight_dtype = o.dtype == "bf16" ? DType::bf16 : o.dtype == "f16" ? DType::f16 : DType::f32;
  parse_backend(o.backend, &opt->backend);
  if (o.gpu_half_math && opt->backend != Backend::gpu) return usage_error("bench", "--gpu-half-math needs --backend gpu");
  opt->gpu_half_math = o.gpu_half_math;
  if (validate(*spec) != Status::ok) return error(last_error_detail());
  return -1;
}

// --backward: a training plan (the network, or the network with dropout on every site) with its
// packed weights, forward and backward workspaces and reserve; on the GPU the buffers are device
// memory.
struct TrainNet {
  Plan plan;
  void* buf[4] = {nullptr, nullptr, nullptr, nullptr};  // packed, workspace, backward workspace, reserve
  std::size_t bytes[4] = {0, 0, 0, 0};
  int device = -1;  // >= 0: buf are device memory of that GPU
  TrainNet() = default;
  TrainNet(const TrainNet&) = delete;
  TrainNet& operator=(const TrainNet&) = delete;
  ~TrainNet() {
    for (void* p : buf) device >= 0 ? gpu_free(device, p) : std::free(p);
  }
};

// A device copy of a host tensor (GPU --backward).
struct DeviceTensor {
  int device = 0;
  void* p = nullptr;
  DeviceTensor() = default;
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { gpu_free(device, p); }
};

// The benchmark: the network on random weights and input (an integer stack for --dtype int8:
// io::int8_bench_stack), and what it times. Forward only:
// the network and, with --dropout, the network with dropout (both timed, as training runs,
// alternating, so that the ratio is measured under the same conditions). --backward: the
// inference forward of the network, timed against training steps (a training forward that fills
// the reserve + backward for dx, dh0, dc0 and the weights).
struct Bench {
  const BenchOptions& o;
  RnnSpec spec;
  PlanOptions opt;
  std::size_t es = 4;
  std::uint64_t rng = 12345;
  std::vector<unsigned char> w, x, y;
  StackSpec stacks[2];
  struct PoolOwner {  // declared before the models and plans that use the pool: destroyed after them
    ThreadPool* p = nullptr;
    ~PoolOwner() { ThreadPool::destroy(p); }
  } pool;
  int nets = 1, train_nets = 0;
  Model net[2];
  TrainNet train[2];
  ForwardArgs fa;
  bool on_gpu = false;
  GpuForwardBuffers device;
  std::vector<unsigned char> dy, dhy, dcy, dx, dh0, dc0, dweights;
  DeviceTensor grads[7];  // dy, dhy, dcy, dx, dh0, dc0, dweights on the GPU
  void* grad_ptr[7] = {};
  std::vector<double> ms[2], step_ms[2], fwd_ms[2], bwd_ms[2];
  std::vector<std::uint8_t> resets;                  // --resets: [T, B], a fraction o.resets of them set
  std::vector<double> reset_ms, reset_step_ms;       // network 0 with them: forward, training step

  explicit Bench(const BenchOptions& options) : o(options) {}
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // Random values in [−scale/2, scale/2) (a small LCG: benchmark data only needs to be non-degenerate).
  void fill(std::vector<unsigned char>& v, double scale) {
    for (std::size_t i = 0; i < v.size() / es; ++i) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const double r = static_cast<double>(rng >> 11) * 0x1.0p-53 - 0.5;
      if (es == 1) reinterpret_cast<std::int8_t*>(v.data())[i] = static_cast<std::int8_t>(std::lround(254 * r));  // int8
      else if (spec.dtype == DType::f64) reinterpret_cast<double*>(v.data())[i] = scale * r;
      else reinterpret_cast<float*>(v.data())[i] = static_cast<float>(scale * r);
    }
  }

  // The weights, the networks (--dropout: a wrapper dropping input, output and state with keep
  // 1 − p on every layer, and inter-layer dropout p), x, y and the forward's arguments. Returns ""
  // or the error line.
  std::string setup() {
    if (o.dtype == "int8") {  // the integer stack of this shape and its quantized random weights
      std::string err;
      if (int8_bench_stack(spec.input_size, spec.hidden_size, spec.num_layers, &stacks[0], &w, &err) != Status::ok) return err;
    }
    es = dtype_size(o.dtype == "int8" ? DType::i8 : spec.dtype);
    if (o.dtype != "int8") {
      w.resize(static_cast<std::size_t>(param_count(spec)) * es);
      fill(w, 0.2);
      stacks[0] = to_stack(spec);
    }
    stacks[1] = stacks[0];
    for (int l = 0; l < stacks[1].num_layers; ++l) {
      Wrapper& wr = stacks[1].layers[l].wrappers[stacks[1].layers[l].num_wrappers++];
      wr.dropout.input_keep = wr.dropout.output_keep = wr.dropout.state_keep = 1.0 - o.dropout;
    }
    stacks[1].dropout = o.dropout;
    const bool with_dropout = o.dropout_given;
    // --backward: one pool for the inference model and the training plans (two pools would compete
    // for the cores with their spinning workers).
    if (o.backward && opt.threads > 1 && ThreadPool::create(opt.threads, &pool.p) != Status::ok) return last_error_detail();
    if (pool.p != nullptr) opt.thread_pool = pool.p;
    nets = with_dropout && !o.backward ? 2 : 1;
    train_nets = o.backward ? (with_dropout ? 2 : 1) : 0;
    for (int k = 0; k < nets; ++k) {
      const Status s = Model::create(stacks[k], opt, w.data(), &net[k]);
      if (s != Status::ok) return library_error(s);
    }
    const std::int64_t D = num_directions(spec);
    x.resize(static_cast<std::size_t>(o.seq * o.batch * o.input) * es);
    y.resize(static_cast<std::size_t>(o.seq * o.batch * D * o.hidden) * es);
    fill(x, 2.0);
    fa.batch = static_cast<int>(o.batch);
    fa.seq_len = static_cast<int>(o.seq);
    fa.x = x.data();
    fa.y = y.data();
    fa.run_mode = o.backward ? RunMode::inference : RunMode::training;
    if (es == 1) {  // int8: inference in LiteRT's layout, the one its models run in
      fa.layout = Layout::batch_major;
      fa.run_mode = RunMode::inference;
    }
    fa.seed = 1;
    if (o.resets > 0.0) {
      resets.resize(static_cast<std::size_t>(o.seq * o.batch));
      for (std::uint8_t& r : resets) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        r = static_cast<double>(rng >> 11) * 0x1.0p-53 < o.resets ? 1 : 0;
      }
    }
    // A GPU plan runs on device copies of x and y and is timed with events on its stream.
    on_gpu = net[0].plan().backend() == Backend::gpu;
    return std::string();
  }

  // --backward: the training plans and the gradient tensors as backward sees them (host vectors,
  // or their device copies on the GPU). Returns "" or the error line.
  std::string setup_training() {
    const std::size_t states = static_cast<std::size_t>(o.layers * num_directions(spec) * o.batch * o.hidden) * es;
    dy.resize(y.size());
    dhy.resize(states);
    dcy.resize(states);
    dx.resize(x.size());
    dh0.resize(states);
    dc0.resize(states);
    dweights.resize(w.size());
    fill(dy, 2.0);
    fill(dhy, 2.0);
    fill(dcy, 2.0);
    for (int k = 0; k < train_nets; ++k) {
      PlanOptions topt = opt;
      topt.training = true;
      TrainNet& tn = train[k];
      Status s = Plan::create(stacks[k], topt, &tn.plan);
      if (s != Status::ok) return library_error(s);
      const std::size_t sizes[4] = {tn.plan.packed_weight_bytes(), tn.plan.workspace_bytes(),
                                    tn.plan.backward_workspace_bytes(), tn.plan.reserve_bytes()};
      tn.device = on_gpu ? opt.gpu_device : -1;
      for (int b = 0; b < 4; ++b) {
        tn.bytes[b] = sizes[b];
        if (on_gpu) {
          if ((s = gpu_alloc(opt.gpu_device, sizes[b], &tn.buf[b])) != Status::ok) return library_error(s);
          continue;
        }
        tn.buf[b] = std::aligned_alloc(kAlignment, (sizes[b] + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
        if (tn.buf[b] == nullptr) return "out of memory";
      }
      if ((s = tn.plan.pack_weights(w.data(), tn.buf[0], tn.bytes[0])) != Status::ok) return library_error(s);
    }
    std::vector<unsigned char>* grad_host[7] = {&dy, &dhy, &dcy, &dx, &dh0, &dc0, &dweights};
    for (int i = 0; i < 7; ++i) {
      grad_ptr[i] = grad_host[i]->data();
      if (!on_gpu || grad_host[i]->empty()) continue;
      grads[i].device = opt.gpu_device;
      Status s = gpu_alloc(opt.gpu_device, grad_host[i]->size(), &grads[i].p);
      if (s == Status::ok) s = gpu_copy(grads[i].p, grad_host[i]->data(), grad_host[i]->size(), GpuCopy::host_to_device);
      if (s != Status::ok) return library_error(s);
      grad_ptr[i] = grads[i].p;
    }
    return std::string();
  }

  // One training step, its two halves timed on the host (on the GPU: from the call to the end of
  // a synchronize).
  Status training_step(int k, std::uint64_t step, double* fwd, double* bwd, const std::uint8_t* with_resets = nullptr) {
    using clk = std::chrono::steady_clock;
    TrainNet& tn = train[k];
    ForwardArgs ta = fa;
    ta.resets = with_resets;
    ta.run_mode = RunMode::training;
    ta.step = step;
    ta.reserve = tn.buf[3];
    ta.reserve_bytes = tn.bytes[3];
    const auto t0 = clk::now();
    Status s = tn.plan.forward(tn.buf[0], tn.buf[1], tn.bytes[1], ta);
    if (s == Status::ok && on_gpu) s = gpu_synchronize(ta.stream);
    const auto t1 = clk::now();
    if (s != Status::ok) return s;
    BackwardArgs ba;
    ba.forward = ta;
    ba.dy = grad_ptr[0];
    ba.dhy = grad_ptr[1];
    ba.dcy = spec.mode == Mode::lstm ? grad_ptr[2] : nullptr;
    ba.dx = o.no_dx ? nullptr : grad_ptr[3];
    ba.dh0 = grad_ptr[4];
    ba.dc0 = spec.mode == Mode::lstm ? grad_ptr[5] : nullptr;
    ba.dweights = grad_ptr[6];
    s = tn.plan.backward(tn.buf[0], tn.buf[2], tn.bytes[2], ba);
    if (s == Status::ok && on_gpu) s = gpu_synchronize(ta.stream);
    const auto t2 = clk::now();
    *fwd = std::chrono::duration<double, std::milli>(t1 - t0).count();
    *bwd = std::chrono::duration<double, std::milli>(t2 - t1).count();
    return s;
  }

  // One repetition (i = −1: the warm-up, untimed): each network's forward, then (--backward) each
  // training step. Returns "" or the error line; *slow: a run took over 0.5 s.
  std::string repetition(long long i, bool* slow) {
    using clock = std::chrono::steady_clock;
    for (int k = 0; k < nets; ++k) {
      fa.step = static_cast<std::uint64_t>(i + 1);
      // --backward: an untimed run first, so that the timed one finds the weights in cache and the
      // pool's workers awake after the (long) training step, as in back-to-back inference.
      if (o.backward && i >= 0) {
        Status u = net[k].forward(fa);
        // (on the GPU it must have finished before the clock starts: the device kit's first run
        // timed this untimed forward too, 2x the inference forward's time)
        if (u == Status::ok && on_gpu) u = gpu_synchronize(fa.stream);
        if (u != Status::ok) return library_error(u);
      }
      // A GPU run is queued: it is timed on the host from the call to the end of synchronize
      // (the queue is empty before, since the previous run was waited for).
      const auto t0 = clock::now();
      Status s = net[k].forward(fa);
      if (s == Status::ok && on_gpu) s = gpu_synchronize(fa.stream);
      const double elapsed = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (s != Status::ok) return library_error(s);
      if (i >= 0) ms[k].push_back(elapsed);
      *slow = *slow || elapsed > 500.0;
    }
    for (int k = 0; k < train_nets; ++k) {  // --backward: alternating with the inference forward
      double f = 0, b = 0;
      Status s = i >= 0 ? training_step(k, static_cast<std::uint64_t>(i + 1), &f, &b) : Status::ok;  // untimed, likewise
      if (s == Status::ok) s = training_step(k, static_cast<std::uint64_t>(i + 1), &f, &b);
      if (s != Status::ok) return library_error(s);
      if (i >= 0) {
        step_ms[k].push_back(f + b);
        fwd_ms[k].push_back(f);
        bwd_ms[k].push_back(b);
      }
      *slow = *slow || f + b > 500.0;
    }
    return resets.empty() ? std::string() : repetition_with_resets(i);
  }

  // --resets: network 0 with them, timed as above (each timed run after an untimed one).
  std::string repetition_with_resets(long long i) {
    using clock = std::chrono::steady_clock;
    ForwardArgs ra = fa;
    ra.step = static_cast<std::uint64_t>(i + 1);
    ra.resets = resets.data();
    Status s = net[0].forward(ra);
    if (s == Status::ok && on_gpu) s = gpu_synchronize(ra.stream);
    const auto t0 = clock::now();
    if (s == Status::ok) s = net[0].forward(ra);
    if (s == Status::ok && on_gpu) s = gpu_synchronize(ra.stream);
    const double elapsed = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (s != Status::ok) return library_error(s);
    if (i >= 0) reset_ms.push_back(elapsed);
    if (train_nets == 0) return std::string();
    double f = 0, b = 0;
    s = training_step(0, static_cast<std::uint64_t>(i + 1), &f, &b, resets.data());
    if (s == Status::ok) s = training_step(0, static_cast<std::uint64_t>(i + 1), &f, &b, resets.data());
    if (s != Status::ok) return library_error(s);
    if (i >= 0) reset_step_ms.push_back(f + b);
    return std::string();
  }

  // The warm-up and --reps repetitions; progress on stderr once a repetition is slow enough to
  // make waiting noticeable. Returns "" or the error line.
  std::string time() {
    if (on_gpu) {
      ForwardArgs host = fa;
      const Status s = device.upload(opt.gpu_device, host, x.size(), y.size(), 0, &fa);
      if (s != Status::ok) return library_error(s);
    }
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    bool progress = false;
    for (long long i = -1; i < o.reps; ++i) {  // i = −1: warm-up
      const std::string err = repetition(i, &progress);
      if (!err.empty()) return err;
      if (progress)
        std::fprintf(stderr, "rnncore bench: %s %lld/%lld, %.1f s\n", i < 0 ? "warm-up" : "repetition", i < 0 ? 0 : i + 1,
                     o.reps, std::chrono::duration<double>(clock::now() - start).count());
    }
    return std::string();
  }

  // Operations of one forward: 2 · G·H · (I_l + O) per step, row, layer and direction (O: P with
  // a projection, else H), + 2 · P·H.
  double flops() const {
    const double H = static_cast<double>(o.hidden), O = o.proj > 0 ? static_cast<double>(o.proj) : H;
    double f = 0;
    for (int l = 0; l < o.layers; ++l)
      f += 2.0 * (num_gates(spec.mode) * H * (layer_input_size(spec, l) + O) + (o.proj > 0 ? O * H : 0.0)) *
           static_cast<double>(o.seq) * static_cast<double>(o.batch) * num_directions(spec);
    return f;
  }
  // A training step's: 3x the forward's, less the first layer's input product without dx (--no-dx).
  double training_flops() const {
    const double input_product = 2.0 * num_gates(spec.mode) * static_cast<double>(o.hidden) *
                                 layer_input_size(spec, 0) * static_cast<double>(o.seq) *
                                 static_cast<double>(o.batch) * num_directions(spec);
    return 3.0 * flops() - (o.no_dx ? input_product : 0.0);
  }

  void report_forward(double median) const;
  void report_training(double median);
  void report_resets(double median);
};

// --resets: network 0's forward (and training step) with the resets against without them.
void Bench::report_resets(double median) {
  std::sort(reset_ms.begin(), reset_ms.end());
  const double with = reset_ms[reset_ms.size() / 2];
  std::size_t set = 0;
  for (std::uint8_t r : resets) set += r;
  std::printf("resets at %zu of %zu (step, row) pairs: median_ms=%.4f overhead=%+.1f%%", set, resets.size(), with,
              100.0 * (with / median - 1.0));
  if (!reset_step_ms.empty()) {
    std::vector<double> plain = step_ms[0];
    std::sort(plain.begin(), plain.end());
    std::sort(reset_step_ms.begin(), reset_step_ms.end());
    const double st = reset_step_ms[reset_step_ms.size() / 2], st0 = plain[plain.size() / 2];
    std::printf(" training_step_ms=%.4f overhead=%+.1f%%", st, 100.0 * (st / st0 - 1.0));
  }
  std::printf("\n");
}

// The shape and kernel line, and the forward's median (with --peak, against the FMA peak).
void Bench::report_forward(double median) const {
  const long long threads = o.threads;
  // An integer stack: its dot and step kernels, and integer operations (gops) rather than flops.
  const bool integer = stacks[0].dtype == DType::i8;
  const std::string kernels = integer ? int8_plan_kernels(net[0].plan()) : std::string(net[0].plan().kernel_name());
  std::string ext;
  if (o.proj > 0) ext += " P=" + std::to_string(o.proj);
  if (o.peepholes) ext += " peepholes";
  std::printf("%s %s T=%lld B=%lld I=%lld H=%lld%s L=%lld %s threads=%lld backend=%s kernel=%s reps=%lld\n",
              to_string(spec.mode), o.dtype.c_str(), o.seq, o.batch, o.input, o.hidden, ext.c_str(), o.layers,
              num_directions(spec) == 2 ? "bidirectional" : "unidirectional", threads, to_string(net[0].plan().backend()),
              kernels.c_str(), o.reps);
  const double gflops = flops() / (median * 1e6);
  const char* what = o.backward ? " (inference forward)" : "";
  bench::FmaPeak peaks[2];
  const int measured = o.peak ? bench::measure_fma_peaks(3, 0.05, peaks) : 0;
  if (o.peak && measured == 0) {  // the loops are x86 only
    std::printf("median_ms=%.4f gflops=%.2f peak_gflops=n/a (the FMA peak loop is x86 AVX2 / AVX-512 only)%s\n", median,
                gflops, what);
  } else if (o.peak) {
    // The peak of the instruction set the kernels use (RNNCORE_MAX_ISA may cap it below the widest).
    // Otherwise (an sse2 or reference plan) the widest measured, which the line names.
    const bench::FmaPeak* peak = &peaks[0];
    for (int p = 0; p < measured; ++p)
      if (std::strcmp(peaks[p].isa, to_string(net[0].plan().isa())) == 0) peak = &peaks[p];
    std::printf("median_ms=%.4f gflops=%.2f peak_gflops=%.1f (%s, one core) fraction_of_peak=%.3f%s%s\n", median, gflops,
                peak->gflops, peak->isa, peak->gflops > 0 ? gflops / (peak->gflops * static_cast<double>(threads)) : 0.0,
                threads > 1 ? " (of threads x one core)" : "", what);
  } else {
    std::printf("median_ms=%.4f %s=%.2f%s\n", median, integer ? "gops" : "gflops", gflops, what);
  }
  if (net[0].plan().backend() == Backend::gpu) {  // whether the runs replayed a graph (docs/gpu.md, "Graphs")
    char graph[160];
    gpu_graph_report(graph, sizeof graph);
    std::printf("gpu_graph: %s\n", graph);
  }
  if (nets == 2) {
    const double with = ms[1][ms[1].size() / 2];
    std::printf("dropout p=%g on every site (input, output, state, inter-layer): median_ms=%.4f overhead=%+.1f%%\n",
                o.dropout, with, 100.0 * (with / median - 1.0));
  }
}

// --backward: the training steps against the inference forward. A training step does the forward's
// matrix products and two more of the same size: R_gᵀ·dgates and W_gᵀ·dgates (dh, dx), and the
// outer products dgates·h_prevᵀ and dgates·xᵀ (dR, dW): 3x the flops.
void Bench::report_training(double median) {
  auto median_of = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double train_step = 0;
  for (int k = 0; k < train_nets; ++k) {
    const double st = median_of(step_ms[k]), fw = median_of(fwd_ms[k]), bw = median_of(bwd_ms[k]);
    if (k == 0) {
      train_step = st;
      std::printf("training_step_ms=%.4f forward_ms=%.4f backward_ms=%.4f gflops=%.2f ratio=%.2f "
                  "(training step%s / inference forward; training kernel=%s reserve_bytes=%zu)\n",
                  st, fw, bw, training_flops() / (st * 1e6), st / median, o.no_dx ? " without dx" : "",
                  train[k].plan.kernel_name(), train[k].plan.reserve_bytes());
    } else {
      std::printf("dropout p=%g on every site (input, output, state, inter-layer): training_step_ms=%.4f "
                  "forward_ms=%.4f backward_ms=%.4f ratio=%.2f overhead=%+.1f%% (vs the training step without dropout)\n",
                  o.dropout, st, fw, bw, st / median, 100.0 * (st / train_step - 1.0));
    }
  }
}

int cmd_bench(int argc, char** argv) {
  CLI::App app{"", "rnncore bench"};
  BenchOptions o;
  define_bench(app, o);
  if (const int rc = parse_command(app, "bench", argc, argv); rc >= 0) return rc;
  if (const int rc = check_threads("bench", o.threads, o.oversubscribe); rc >= 0) return rc;
  if (o.dtype == "int8")
    if (const int rc = check_bench_int8(app, o); rc >= 0) return rc;
  o.dropout_given = given(app, "--dropout");
  Bench b(o);
  if (const int rc = bench_spec(o, &b.spec, &b.opt); rc >= 0) return rc;
  std::string err = b.setup();
  if (err.empty() && o.backward) err = b.setup_training();
  if (err.empty()) err = b.time();
  if (!err.empty()) return error(err);
  for (int k = 0; k < b.nets; ++k) std::sort(b.ms[k].begin(), b.ms[k].end());
  const double median = b.ms[0][b.ms[0].size() / 2];
  b.report_forward(median);
  if (o.backward) b.report_training(median);
  if (!b.resets.empty()) b.report_resets(median);
  return 0;
}

// The app of `rnncore info`.
void define_info(CLI::App& app) {
  setup_app(app);
  app.description("Prints the version, the backends, the CPU's instruction sets and the kernels plans choose.");
}

int cmd_info(int argc, char** argv) {
  CLI::App app{"", "rnncore info"};
  define_info(app);
  if (const int rc = parse_command(app, "info", argc, argv); rc >= 0) return rc;
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
                  w == DType::bf16 ? (p.isa() == Isa::avx512 ? "vdpbf16ps" : "converted to f32")
                  : p.isa() == Isa::avx2 || p.isa() == Isa::avx512 ? "F16C"
#if defined(__aarch64__)
                  : p.isa() == Isa::neon ? "fcvtl"
#endif
                                                                     : "converted by integer operations");
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
  const Int8KernelNames int8 = int8_best_kernels();
  std::printf("int8 LSTM kernels: %s, rest of the step: %s\n", int8.dot.c_str(), int8.step.c_str());
  std::printf("LSTM projection, peepholes, cell/projection clip: reference and simd backends and gpu\n");
  std::printf("env RNNCORE_MAX_ISA caps the instruction set (none, sse2, avx2, avx512, neon)\n");
  return 0;
}

// Prints the help of `rnncore <topic>`, or the list of commands; false for an unknown topic.
bool print_help(const std::string& topic) {
  CLI::App app{"", "rnncore " + topic};
  RunOptions run;
  BenchOptions bench;
  ExportCOptions export_c;
  QuantizeOptions quantize;
  if (topic == "run") define_run(app, run);
  else if (topic == "grad") define_grad(app, run);
  else if (topic == "bench") define_bench(app, bench);
  else if (topic == "info") define_info(app);
  else if (topic == "export-c") define_export_c(app, export_c);
  else if (topic == "quantize") define_quantize(app, quantize);
  else if (topic.empty()) {
    std::fputs(kUsage, stdout);
    return true;
  } else {
    return false;
  }
  std::fputs(app.help().c_str(), stdout);
  return true;
}

int top_level_error(const std::string& what) {
  std::fprintf(stderr, "rnncore: %s\nrun 'rnncore help' for the commands\n", what.c_str());
  return kUsageError;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return top_level_error("missing command");
  const std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc, argv);
  if (cmd == "bench") return cmd_bench(argc, argv);
  if (cmd == "info") return cmd_info(argc, argv);
  if (cmd == "export-c") return cmd_export_c(argc, argv);
  if (cmd == "grad") return cmd_grad(argc, argv);
  if (cmd == "quantize") return cmd_quantize(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    const std::string topic = argc > 2 ? argv[2] : "";
    if (!print_help(topic)) return top_level_error("no command '" + topic + "' to show help for");
    return 0;
  }
  if (cmd == "--version") {
    std::printf("rnncore %s\n", version_string());
    return 0;
  }
  return top_level_error("unknown command '" + cmd + "'");
}

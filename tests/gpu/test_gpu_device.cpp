// The GPU backend on a device (-Dgpu=cuda or -Dgpu=hip): the public API with Backend::gpu, device
// buffers and Model, against the f64 reference backend — 1e-5 relative error, and in dropout runs
// the same zeros (the masks equal the CPU's bit for bit). Both recurrence kernels and both tiles
// are forced in turn (RNNCORE_GPU_RECURRENCE / RNNCORE_GPU_TILE are read at plan time).
//
// Without a usable device the program prints why and exits 77, which Meson reports as SKIP.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rnncore/gpu.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"
#include "tests/gpu/gpu_cases.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

/// Device memory for the test's tensors.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) REQUIRE(gpu_alloc(0, bytes, &ptr_) == Status::ok);
  }
  ~DeviceBuffer() { gpu_free(0, ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  void upload(const std::vector<T>& v) {
    REQUIRE(gpu_copy(ptr_, v.data(), v.size() * sizeof(T), GpuCopy::host_to_device) == Status::ok);
  }
  template <class T>
  void download(std::vector<T>* v) const {
    REQUIRE(gpu_copy(v->data(), ptr_, v->size() * sizeof(T), GpuCopy::device_to_host) == Status::ok);
  }

 private:
  void* ptr_ = nullptr;
};

/// Sets the plan-time kernel choices of the GPU backend for the scope of one run.
struct KernelChoice {
  const char* recurrence;
  const char* tile;
};

std::string describe(const KernelChoice& k) { return std::string("recurrence=") + k.recurrence + " tile=" + k.tile; }

/// A forward on the device through Model (device allocation, packing from host weights), with the
/// host tensors of `host` copied to and from device buffers around it.
Status run_device(const StackSpec& st, PlanOptions opt, const std::vector<float>& canonical, const ForwardArgs& host,
                  Outputs<float>* out, const KernelChoice& k, gpu::GpuPlan* planned = nullptr) {
  setenv("RNNCORE_GPU_RECURRENCE", k.recurrence, 1);
  setenv("RNNCORE_GPU_TILE", k.tile, 1);
  opt.backend = Backend::gpu;
  Model model;
  const Status s = Model::create(st, opt, canonical.data(), &model);
  if (s != Status::ok) return s;
  if (planned != nullptr) *planned = detail::impl(model.plan()).gpu;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  bool lstm = false;
  for (int l = 0; l < st.num_layers; ++l) lstm = lstm || st.layers[l].mode == Mode::lstm;
  // (token ids are 4-byte elements too, one per (t, b); a head's y is [T, B, F] or [B, F])
  const std::size_t x_n = static_cast<std::size_t>(host.seq_len) * host.batch * (st.embedding.vocab_size > 0 ? 1 : st.input_size);
  const std::size_t y_n = static_cast<std::size_t>(st.head.last_step_only ? 1 : host.seq_len) * host.batch *
                          (st.head.out_features > 0 ? st.head.out_features : num_directions(last) * output_size(last));
  const std::size_t s_n = static_cast<std::size_t>(state_elements(st, host.batch));
  out->y.assign(y_n, -7.0f);
  out->hy.assign(s_n, -7.0f);
  out->cy.assign(lstm ? s_n : 0, -7.0f);
  DeviceBuffer x(x_n * 4), y(y_n * 4), h0(s_n * 4), c0(s_n * 4), hy(s_n * 4), cy(s_n * 4);
  x.upload(std::vector<float>(static_cast<const float*>(host.x), static_cast<const float*>(host.x) + x_n));
  y.upload(out->y);
  hy.upload(out->hy);
  if (lstm) cy.upload(out->cy);
  ForwardArgs a = host;
  a.x = x.get();
  a.y = y.get();
  a.hy = hy.get();
  a.cy = lstm ? cy.get() : nullptr;
  if (host.h0 != nullptr) {
    h0.upload(std::vector<float>(static_cast<const float*>(host.h0), static_cast<const float*>(host.h0) + s_n));
    a.h0 = h0.get();
  }
  if (host.c0 != nullptr) {
    c0.upload(std::vector<float>(static_cast<const float*>(host.c0), static_cast<const float*>(host.c0) + s_n));
    a.c0 = c0.get();
  }
  const Status f = model.forward(a);
  if (f != Status::ok) return f;
  REQUIRE(gpu_synchronize(nullptr) == Status::ok);
  y.download(&out->y);
  hy.download(&out->hy);
  if (lstm) cy.download(&out->cy);
  return Status::ok;
}

void check_on_device(const Case& c, const KernelChoice& k, std::uint64_t data_seed, gpu::GpuPlan* planned = nullptr) {
  compare_case(c, data_seed,
               [&](const StackSpec& st, const PlanOptions& opt, const std::vector<float>& w, const ForwardArgs& a,
                   Outputs<float>* out) { return run_device(st, opt, w, a, out, k, planned); },
               describe(k));
}

// (persistent: in a training case also backward's persistent kernel, f32_<cell>_grad_persistent)
const KernelChoice kChoices[] = {{"persistent", "auto"}, {"tiled", "small"}, {"tiled", "large"}, {"tiled", "direct"},
                                 {"tiled", "lanes"},      {"tiled", "lanes8"}};
constexpr int kChoiceCount = static_cast<int>(sizeof kChoices / sizeof kChoices[0]);

/// One recurrent cell (and GRU variant) of the every-cell cases.
struct StepCell {
  Mode mode;
  GruVariant variant;
};

/// A host vector's copy in device memory.
template <class T>
struct DeviceCopy : DeviceBuffer {
  explicit DeviceCopy(const std::vector<T>& v) : DeviceBuffer(v.size() * sizeof(T)) {
    if (!v.empty()) upload(v);
  }
};

/// A training forward and backward on the device through a training Model (its reserve and
/// backward workspace in device memory), host tensors copied around it.
Status train_device(const Case& c, const TrainData& d, TrainResults<float>* r, const KernelChoice& k) {
  setenv("RNNCORE_GPU_RECURRENCE", k.recurrence, 1);
  setenv("RNNCORE_GPU_TILE", k.tile, 1);
  PlanOptions opt;
  opt.max_batch = c.B + 1;
  opt.max_seq_len = c.T + 1;
  opt.backend = Backend::gpu;
  opt.training = true;
  opt.weight_dtype = c.weights;
  Model model;
  RNNCORE_RETURN_IF_ERROR(Model::create(c.stack, opt, d.w.data(), &model));
  ForwardArgs a;
  bind(c, d.x, d.h0, d.c0, d, r, &a);
  BackwardArgs b;
  bind_backward(c, d.dy, d.dhy, d.dcy, r, &b);
  DeviceCopy<float> x(d.x), h0(d.h0), c0(d.c0), dy(d.dy), dhy(d.dhy), dcy(d.dcy), y(r->y), hy(r->hy), cy(r->cy), dx(r->dx),
      dh0(r->dh0), dc0(r->dc0), dw(r->dw);
  DeviceCopy<std::int32_t> ids(d.ids);  // token ids: a stack with an embedding
  a.x = c.stack.embedding.vocab_size > 0 ? ids.get() : x.get();
  a.h0 = a.h0 != nullptr ? h0.get() : nullptr;
  a.c0 = a.c0 != nullptr ? c0.get() : nullptr;
  a.y = y.get();
  a.hy = hy.get();
  a.cy = a.cy != nullptr ? cy.get() : nullptr;
  RNNCORE_RETURN_IF_ERROR(model.forward(a));
  b.forward = a;
  b.dy = dy.get();
  b.dhy = dhy.get();
  b.dcy = b.dcy != nullptr ? dcy.get() : nullptr;
  b.dx = b.dx != nullptr ? dx.get() : nullptr;
  b.dh0 = dh0.get();
  b.dc0 = b.dc0 != nullptr ? dc0.get() : nullptr;
  b.dweights = dw.get();
  RNNCORE_RETURN_IF_ERROR(model.backward(b));
  REQUIRE(gpu_synchronize(nullptr) == Status::ok);
  y.download(&r->y);
  hy.download(&r->hy);
  if (!r->cy.empty()) cy.download(&r->cy);
  dx.download(&r->dx);
  dh0.download(&r->dh0);
  if (!r->dc0.empty()) dc0.download(&r->dc0);
  dw.download(&r->dw);
  return Status::ok;
}

void check_training_on_device(const Case& c, const KernelChoice& k, std::uint64_t seed) {
  check_training(c, seed, [&](const Case& cc, const TrainData& d, TrainResults<float>* r) { return train_device(cc, d, r, k); },
                 describe(k));
}

}  // namespace

TEST_CASE("GPU forward matches the reference: CudnnLSTM-style random cases, every kernel choice") {
  Rng rng(2024);
  for (int i = 0; i < 60; ++i) {
    const Case c = random_case(rng);
    check_on_device(c, kChoices[i % kChoiceCount], 500 + i);
  }
}

TEST_CASE("GPU forward: dropout wrappers, residuals, inter-layer dropout, row ids") {
  Rng rng(77);
  int n = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    for (int v = 0; v < 4; ++v) {
      const Case c = wrapper_case(mode, v, rng);
      for (const KernelChoice& k : kChoices) check_on_device(c, k, 3000 + n++);
    }
}

TEST_CASE("GPU forward with f16 and bf16 weight storage (weights representable in the type)") {
  Rng rng(4242);
  int n = 0;
  for (DType wt : {DType::f16, DType::bf16})
    for (int i = 0; i < 12; ++i) {
      Case c = random_case(rng);
      c.weights = wt;
      check_on_device(c, kChoices[n % kChoiceCount], 6000 + n);
      ++n;
    }
}

TEST_CASE("GPU forward with gpu_half_math: the input projection and the per-step recurrence on tensor / matrix cores") {
  // Where the device has matrix units (sm_80+, gfx90a / gfx94x) the plan takes the MMA GEMM, and the
  // hardware's fragment layouts must then agree with src/gpu/device/kernels.hpp's mma_coord (the emulator
  // checks the kernels against its own model of them; only this test checks the hardware).
  Rng rng(4343);  // the emulator test runs the same cases
  for (int i = 0; i < 16; ++i) {
    Case c = random_case(rng);
    c.weights = i % 2 ? DType::bf16 : DType::f16;
    c.half_math = true;
    c.tolerance = half_math_tolerance(c.weights);
    check_on_device(c, kChoices[i % kChoiceCount], 6500 + static_cast<std::uint64_t>(i));
  }
  // The per-step recurrence on the matrix units (B >= 8; the per-step kernel forced where the
  // persistent one would run the batch): every cell, one and three row tiles, partial unit tiles.
  int n = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    for (int B : {8, 33}) {
      Case c;
      c.stack.input_size = 11;
      c.stack.num_layers = 1;
      c.stack.layers[0] = layer(mode, n % 2 ? 37 : 20, n % 3 != 1, {}, n % 4 < 2 ? GruVariant::reset_before : GruVariant::reset_after);
      c.T = 3;
      c.B = B;
      c.lengths = n % 2 == 0;
      c.initial = true;
      c.weights = n % 3 == 2 ? DType::bf16 : DType::f16;
      c.half_math = true;
      c.tolerance = half_math_tolerance(c.weights);
      check_on_device(c, kChoices[1 + n % (kChoiceCount - 1)], 6600 + static_cast<std::uint64_t>(n));
      ++n;
    }
  // f32 weights: TF32 projections and steps on NVIDIA sm_80+ (the hardware's m16n8k8 .tf32 layout
  // against mma_coord_tf32), f32 elsewhere (the f32 tolerance holds within TF32's); the emulator
  // test runs the same random cases on the H100 profile, and the steps as its every-cell TF32 case.
  Rng tf32_rng(4444);
  for (int i = 0; i < 3; ++i) {
    Case c = random_case(tf32_rng);
    c.weights = DType::f32;
    c.half_math = true;
    c.tolerance = half_math_tolerance(DType::f32);
    check_on_device(c, kChoices[i % kChoiceCount], 6600 + static_cast<std::uint64_t>(i));
  }
  for (Mode mode : {Mode::lstm, Mode::gru}) {  // B = 33, the per-step kernel forced: the TF32 step
    Case c;
    c.stack.input_size = 11;
    c.stack.num_layers = 1;
    c.stack.layers[0] = layer(mode, 37, true, {}, mode == Mode::gru ? GruVariant::reset_before : GruVariant::reset_after);
    c.T = 3;
    c.B = 33;
    c.lengths = true;
    c.initial = true;
    c.weights = DType::f32;
    c.half_math = true;
    c.tolerance = half_math_tolerance(DType::f32);
    check_on_device(c, kChoices[1], 6700 + static_cast<std::uint64_t>(mode == Mode::gru));
  }
  RnnSpec spec;
  spec.input_size = spec.hidden_size = 256;
  PlanOptions opt;
  opt.backend = Backend::gpu;
  opt.weight_dtype = DType::f16;
  opt.gpu_half_math = true;
  Plan plan;
  REQUIRE(Plan::create(to_stack(spec), opt, &plan) == Status::ok);
  MESSAGE("gpu_half_math plan: " << plan.kernel_name());
}

TEST_CASE("GPU forward with gpu_half_math at batch 8 and 16: the persistent kernel on the matrix units, every cell") {
  // The emulator's case of rnn_recurrence_persistent_mma on the hardware: every cell at B = 8 and
  // 16 (one 16-row tile, with and without padding rows), H = 20 and 37 (a partial block of 16
  // units), both directions, lengths and initial states, both layouts; f16 and bf16 weights, and f32
  // ones (TF32 where the device takes it, NVIDIA sm_80+). The kernel ran where the plan gives the
  // layer a slice (GpuPlan::persist_mma_units; the run's batch is in 8..16 and the recurrence is not
  // forced per-step): that must be so for 16-bit weights on a device with matrix units. A refused
  // cooperative launch would fall back to the per-step kernels unseen here (same results).
  int ran = 0;
  int i = 0;
  bool device_mma = false;
  for (const StepCell& cell : {StepCell{Mode::lstm, GruVariant::reset_after}, StepCell{Mode::gru, GruVariant::reset_after},
                               StepCell{Mode::gru, GruVariant::reset_before}, StepCell{Mode::rnn_tanh, GruVariant::reset_after},
                               StepCell{Mode::rnn_relu, GruVariant::reset_after}})
    for (int B : {8, 16})
      for (DType weights : {DType::f16, DType::bf16, DType::f32}) {
        Case c;
        c.stack.input_size = 11;
        c.stack.num_layers = 1;
        c.stack.layers[0] = layer(cell.mode, i % 2 ? 37 : 20, i % 3 != 1, {}, cell.variant);
        c.T = 3;
        c.B = B;
        c.lengths = i % 2 == 0;
        c.initial = i % 4 < 2;
        c.batch_major = i % 4 == 1;
        c.weights = weights;
        c.half_math = true;
        c.tolerance = half_math_tolerance(weights);
        gpu::GpuPlan planned;
        check_on_device(c, kChoices[0], 6800 + static_cast<std::uint64_t>(i), &planned);
        const bool mma = planned.persist_mma_units[0] > 0 && planned.recurrence != gpu::Recurrence::tiled;
        device_mma = device_mma || planned.target.mma != 0;
        if (weights != DType::f32 && planned.target.mma != 0) CHECK_MESSAGE(planned.persist_mma_units[0] == 16, "case " << i);
        if (weights == DType::f32) CHECK(planned.persist_mma_units[0] == (planned.mma_step != 0 ? 16 : 0));
        ran += mma;
        ++i;
      }
  MESSAGE("rnn_recurrence_persistent_mma planned in " << ran << " of " << i << " cases");
  if (device_mma) CHECK(ran >= 20);  // every f16 and bf16 case
  if (!device_mma) MESSAGE("this device has no matrix units: every case ran the f32 kernels");
}

TEST_CASE("GPU forward with an Embedding and a Dense head: every step and last step, each activation, Dense chains") {
  // The emulator's cases of the ends (ends_case) on the hardware.
  Rng rng(3501);
  for (int i = 0; i < 10; ++i) {
    const Case c = ends_case(i, rng);
    check_on_device(c, kChoices[i % kChoiceCount], 6900 + static_cast<std::uint64_t>(i));
  }
}

TEST_CASE("GPU forward: benchmark-sized shapes (several blocks, tiles and slices)") {
  // Shapes of bench/gpu: enough rows and units that every kernel runs many blocks.
  for (Mode mode : {Mode::lstm, Mode::gru}) {
    for (int B : {1, 8, 64}) {
      Case c;
      RnnSpec spec;
      spec.mode = mode;
      spec.input_size = spec.hidden_size = 256;
      c.stack = to_stack(spec);
      c.T = 12;
      c.B = B;
      c.lengths = true;
      c.initial = true;
      for (const KernelChoice& k : kChoices) check_on_device(c, k, 7000 + B);
      c.weights = DType::bf16;
      check_on_device(c, kChoices[0], 7100 + B);
    }
  }
}

TEST_CASE("GPU training (Model): forward with a reserve and backward match the reference, every kernel choice") {
  Rng rng(2611);
  g_training_worst = 0;
  for (int i = 0; i < 24; ++i) check_training_on_device(random_case(rng), kChoices[i % kChoiceCount], 8000 + i);
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    for (int v = 0; v < 4; ++v) {
      Case c = wrapper_case(mode, v, rng);
      c.run_mode = RunMode::training;
      check_training_on_device(c, kChoices[v % 3], 8100 + v);
    }
  MESSAGE("largest relative error: " << g_training_worst);
}

TEST_CASE("GPU training with an Embedding and a Dense head: every step and last step, each activation") {
  // The emulator's training cases of the ends (ends_case: 0 to 2 Dense layers before the head) on the hardware.
  Rng rng(3801);
  for (int i = 0; i < 10; ++i) {
    Case c = ends_case(i, rng);
    if (i == 9) c.stack.head = DenseSpec();  // the embedding alone
    check_training_on_device(c, kChoices[i % kChoiceCount], 9500 + static_cast<std::uint64_t>(i));
  }
}

TEST_CASE("GPU per-step resets (ForwardArgs::resets): forward and training match the reference, every kernel choice") {
  Rng rng(3405);
  const auto reset_case = [&]() {
    Case c = random_case(rng);
    for (int l = 0; l < c.stack.num_layers; ++l) c.stack.layers[l].direction = Direction::unidirectional;  // (as on the CPU)
    c.resets = true;
    return c;
  };
  for (int i = 0; i < 15; ++i) check_on_device(reset_case(), kChoices[i % kChoiceCount], 9000 + i);
  g_training_worst = 0;
  for (int i = 0; i < 9; ++i) check_training_on_device(reset_case(), kChoices[i % kChoiceCount], 9100 + i);
  MESSAGE("largest relative error (training): " << g_training_worst);
}

TEST_CASE("GPU LSTM peepholes and a cell clip: forward and training match the reference, every kernel choice") {
  Rng rng(3406);
  g_training_worst = 0;
  for (int i = 0; i < 9; ++i) {
    Case c;
    c.stack.input_size = 7;
    c.stack.num_layers = 1 + i % 2;
    for (int l = 0; l < c.stack.num_layers; ++l) {
      c.stack.layers[l] = layer(Mode::lstm, 10 + 3 * l, (i + l) % 3 == 1, {});
      c.stack.layers[l].peepholes = i % 3 != 1;
      c.stack.layers[l].cell_clip = i % 3 != 0 ? 0.3 : 0.0;
    }
    c.T = 6;
    c.B = 2 + i % 5;
    c.lengths = i % 2 == 0;
    c.initial = true;
    c.resets = c.stack.layers[0].direction == Direction::unidirectional && c.stack.layers[c.stack.num_layers - 1].direction ==
                                                                                  Direction::unidirectional;
    check_on_device(c, kChoices[i % kChoiceCount], 9200 + i);
    check_training_on_device(c, kChoices[i % kChoiceCount], 9300 + i);
  }
  MESSAGE("largest relative error (training): " << g_training_worst);
}

TEST_CASE("GPU graph replay (RNNCORE_GPU_GRAPHS=on): replays equal direct launches bit for bit over changing inputs") {
  // Two Models of one network on the per-step kernels, without and with graphs; the same device
  // tensors every call, with new contents (x, h0, c0, lengths): from the second call on the graph
  // is captured, then replayed, and y, hy, cy equal the direct launches' bit for bit. Then
  // training runs with new dropout steps: equal results whether the vendor replays them (arguments
  // read from device memory) or launches directly (arguments baked by value: a new step is a new
  // signature).
  StackSpec st;
  st.input_size = 12;
  st.num_layers = 2;
  st.dropout = 0.25;
  st.layers[0] = layer(Mode::lstm, 40, false, {dropout_wrapper(0.8, 0.75, 0.7)});
  st.layers[1] = layer(Mode::gru, 24, true, {});
  const int T = 7, B = 5;
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  opt.backend = Backend::gpu;
  Rng rng(3434);
  const auto w = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.3);
  setenv("RNNCORE_GPU_RECURRENCE", "tiled", 1);
  setenv("RNNCORE_GPU_TILE", "auto", 1);
  Model models[2];
  for (int k = 0; k < 2; ++k) {
    setenv("RNNCORE_GPU_GRAPHS", k == 0 ? "off" : "on", 1);
    REQUIRE(Model::create(st, opt, w.data(), &models[k]) == Status::ok);
  }
  unsetenv("RNNCORE_GPU_GRAPHS");
  const std::size_t xn = static_cast<std::size_t>(T) * B * st.input_size, yn = static_cast<std::size_t>(T) * B * 48;
  const std::size_t sn = static_cast<std::size_t>(state_elements(st, B));
  DeviceBuffer x(xn * 4), h0(sn * 4), c0(sn * 4), y[2] = {DeviceBuffer(yn * 4), DeviceBuffer(yn * 4)},
                                               hy[2] = {DeviceBuffer(sn * 4), DeviceBuffer(sn * 4)}, cy[2] = {DeviceBuffer(sn * 4), DeviceBuffer(sn * 4)};
  std::vector<std::string> reports;
  for (int call = 0; call < 8; ++call) {
    const bool training = call >= 5;
    x.upload(random_vector<float>(rng, xn, 1.0));
    h0.upload(random_vector<float>(rng, sn, 0.5));
    c0.upload(random_vector<float>(rng, sn, 0.5));
    std::vector<std::int32_t> lengths(B);
    for (auto& l : lengths) l = rng.range(0, T);
    Outputs<float> out[2];
    for (int k = 0; k < 2; ++k) {
      ForwardArgs a;
      a.batch = B;
      a.seq_len = T;
      a.x = x.get();
      a.h0 = h0.get();
      a.c0 = c0.get();
      a.seq_lengths = lengths.data();
      a.run_mode = training ? RunMode::training : RunMode::inference;
      a.seed = 77;
      a.step = static_cast<std::uint64_t>(call);
      a.y = y[k].get();
      a.hy = hy[k].get();
      a.cy = cy[k].get();
      REQUIRE(models[k].forward(a) == Status::ok);
      if (k == 1) {
        char line[160];
        gpu_graph_report(line, sizeof line);
        reports.push_back(line);
      }
      REQUIRE(gpu_synchronize(nullptr) == Status::ok);
      out[k].y.resize(yn);
      out[k].hy.resize(sn);
      out[k].cy.resize(sn);
      y[k].download(&out[k].y);
      hy[k].download(&out[k].hy);
      cy[k].download(&out[k].cy);
    }
    INFO("call " << call << ": " << reports.back());
    CHECK(out[0].y == out[1].y);
    CHECK(out[0].hy == out[1].hy);
    CHECK(out[0].cy == out[1].cy);
  }
  for (const std::string& r : reports) MESSAGE(r);
  CHECK(reports[0].rfind("direct: a first run", 0) == 0);
  CHECK(reports[1].rfind("captured", 0) == 0);
  for (int call = 2; call < 5; ++call) CHECK(reports[static_cast<std::size_t>(call)].rfind("replayed", 0) == 0);
}

TEST_CASE("GPU plans refuse what the kernels cannot run, with reasons") {
  RnnSpec spec;
  spec.input_size = spec.hidden_size = 4;
  PlanOptions opt;
  opt.backend = Backend::gpu;
  Plan plan;
  spec.dtype = DType::f64;
  CHECK(Plan::create(spec, opt, &plan) == Status::unsupported);
  spec.dtype = DType::f32;
  opt.gpu_device = 1 << 20;
  CHECK(Plan::create(spec, opt, &plan) == Status::invalid_size);
  opt.gpu_device = 0;
  StackSpec st = to_stack(spec);
  Wrapper w = residual_wrapper();
  w.residual.f32 = [](const float* in, const float* o, float* r, std::int32_t n, void*) {
    for (int i = 0; i < n; ++i) r[i] = in[i] * o[i];
  };
  st.layers[0].wrappers[st.layers[0].num_wrappers++] = w;
  CHECK(Plan::create(st, opt, &plan) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("custom residual") != std::string::npos);
}

int main(int argc, char** argv) {
  char line[512];
  const Status s = gpu_describe(0, line, sizeof line);
  if (s != Status::ok) {
    std::printf("SKIP: no GPU to run the device tests on (%s build): %s\n", gpu_backend_kind(), last_error_detail());
    std::printf("      (the kernels are still checked on the host by the gpu_emulator test)\n");
    return 77;
  }
  std::printf("GPU: %s\n", line);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}

// Streaming: a sequence fed one step (or one chunk) per call, each call's final state (hy, cy)
// passed as the next call's initial state (h0, c0), must give what one whole-sequence call gives.
// On one backend the two are bitwise equal, and that is what this test asserts (memcmp, no
// tolerance): every output element goes through the same floating-point operations in the same
// order however the steps are grouped into calls — per step and row, the reference computes each
// gate from x_t, h_{t-1} and the weights alone, and the SIMD backend's input projection and step
// kernel compute each row on its own with a fixed summation order. Any difference is a bug (state
// lost or mis-carried between calls, a projection that depends on the call's length, or a kernel
// tail that rounds differently), not rounding noise.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

struct Case {
  const char* name;
  Mode mode;
  GruVariant variant;
};

const Case kCases[] = {
    {"lstm", Mode::lstm, GruVariant::reset_after},
    {"gru reset-after", Mode::gru, GruVariant::reset_after},
    {"gru reset-before", Mode::gru, GruVariant::reset_before},
    {"rnn_tanh", Mode::rnn_tanh, GruVariant::reset_after},
    {"rnn_relu", Mode::rnn_relu, GruVariant::reset_after},
};

// The CPU paths of this build and machine: the reference, and every SIMD instruction set.
std::vector<PlanOptions> cpu_paths() {
  std::vector<PlanOptions> paths(1);
  paths[0].backend = Backend::reference;
  for (Isa isa : isas_here()) {
    PlanOptions o;
    o.backend = Backend::simd;
    o.max_isa = isa;
    paths.push_back(o);
  }
  return paths;
}

std::string path_name(const PlanOptions& o) {
  return o.backend == Backend::reference ? "reference" : std::string("simd ") + to_string(o.max_isa);
}

// A network with its weights packed once, run by a plan for the whole sequence and a plan for one
// step at a time (the same packed weights serve both: packing does not depend on the limits).
template <class T>
struct Streamed {
  Streamed(const StackSpec& stack, PlanOptions options, int batch, int steps, std::uint64_t seed)
      : stack(stack), batch(batch), steps(steps) {
    options.max_batch = batch;
    options.max_seq_len = steps;
    REQUIRE(Plan::create(stack, options, &whole) == Status::ok);
    options.max_seq_len = 1;
    REQUIRE(Plan::create(stack, options, &step) == Status::ok);
    REQUIRE(whole.packed_weight_bytes() == step.packed_weight_bytes());
    Rng rng(seed);
    canonical = random_vector<T>(rng, static_cast<std::size_t>(param_count(stack)), 0.5);
    x = random_vector<T>(rng, static_cast<std::size_t>(steps) * batch * stack.input_size, 1.0);
    for (int l = 0; l < stack.num_layers; ++l) state += static_cast<std::size_t>(num_directions(stack.layers[l])) * batch * stack.layers[l].hidden_size;
    h0 = random_vector<T>(rng, state, 0.8);
    c0 = random_vector<T>(rng, state, 0.8);
    packed.reset(new AlignedBuffer(whole.packed_weight_bytes()));
    workspace.reset(new AlignedBuffer(whole.workspace_bytes()));
    REQUIRE(step.workspace_bytes() <= whole.workspace_bytes());
    REQUIRE(whole.pack_weights(canonical.data(), packed->ptr, packed->size) == Status::ok);
    out_width = stack.layers[stack.num_layers - 1].hidden_size * num_directions(stack.layers[stack.num_layers - 1]);
  }

  bool lstm() const {
    for (int l = 0; l < stack.num_layers; ++l)
      if (stack.layers[l].mode == Mode::lstm) return true;
    return false;
  }

  // One call over steps [t0, t0 + len), reading state from h_in/c_in and writing it to h_out/c_out
  // (which may be the same buffers).
  void call(const Plan& plan, int t0, int len, const T* h_in, const T* c_in, T* h_out, T* c_out, T* y,
            const ForwardArgs& base) {
    ForwardArgs a = base;
    a.batch = batch;
    a.seq_len = len;
    a.x = x.data() + static_cast<std::size_t>(t0) * batch * stack.input_size;
    a.time_offset = base.time_offset + static_cast<std::uint32_t>(t0);  // per-step masks continue the sequence
    a.h0 = h_in;
    a.c0 = lstm() ? c_in : nullptr;
    a.y = y;
    a.hy = h_out;
    a.cy = lstm() ? c_out : nullptr;
    const Status s = plan.forward(packed->ptr, workspace->ptr, workspace->size, a);
    REQUIRE_MESSAGE(s == Status::ok, last_error_detail());
  }

  StackSpec stack;
  int batch, steps, out_width = 0;
  std::size_t state = 0;
  Plan whole, step;
  std::vector<T> canonical, x, h0, c0;
  std::unique_ptr<AlignedBuffer> packed, workspace;
};

template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs the whole sequence once, then in chunks of `chunk` steps (1: streaming step by step),
// carrying the state; checks every chunk's outputs and the final state bit for bit.
// `in_place`: each call reads and writes the same state buffers (hy == h0, cy == c0).
template <class T>
void check_streaming(Streamed<T>& net, int chunk, bool in_place, const ForwardArgs& base = ForwardArgs{}) {
  const std::size_t row = static_cast<std::size_t>(net.batch) * net.out_width;
  std::vector<T> y_whole(net.steps * row), h_whole(net.state), c_whole(net.state);
  net.call(net.whole, 0, net.steps, net.h0.data(), net.c0.data(), h_whole.data(), c_whole.data(), y_whole.data(), base);

  const Plan& plan = chunk == 1 ? net.step : net.whole;
  std::vector<T> h[2] = {net.h0, std::vector<T>(net.state)}, c[2] = {net.c0, std::vector<T>(net.state)};
  std::vector<T> y(chunk * row);
  int cur = 0;
  for (int t0 = 0; t0 < net.steps; t0 += chunk) {
    const int len = std::min(chunk, net.steps - t0);
    const int next = in_place ? cur : 1 - cur;
    net.call(plan, t0, len, h[cur].data(), c[cur].data(), h[next].data(), c[next].data(), y.data(), base);
    for (int t = 0; t < len; ++t) {
      INFO("step ", t0 + t);
      CHECK(same_bits(y.data() + t * row, y_whole.data() + (t0 + t) * row, row));
    }
    cur = next;
  }
  CHECK_MESSAGE(same_bits(h[cur].data(), h_whole.data(), net.state), "final h");
  if (net.lstm()) CHECK_MESSAGE(same_bits(c[cur].data(), c_whole.data(), net.state), "final c");
}

}  // namespace

TEST_CASE("streaming one step per call equals the whole sequence, bit for bit, on every CPU path") {
  for (const PlanOptions& path : cpu_paths())
    for (const Case& k : kCases)
      for (int layers : {1, 2}) {
        RnnSpec spec;
        spec.mode = k.mode;
        spec.gru_variant = k.variant;
        spec.input_size = 5;  // odd sizes: vector tails in every SIMD kernel
        spec.hidden_size = 7;
        spec.num_layers = layers;
        INFO(path_name(path), ", ", k.name, ", ", layers, " layer(s)");
        Streamed<float> net(to_stack(spec), path, 3, 9, 17 + layers);
        {
          INFO("one step per call, state in separate buffers");
          check_streaming(net, 1, false);
        }
        {
          INFO("one step per call, state carried in place (hy == h0, cy == c0)");
          check_streaming(net, 1, true);
        }
        {
          INFO("chunks of 4 steps (4, 4, 1)");
          check_streaming(net, 4, false);
        }
      }
}

TEST_CASE("streaming in f64 (reference) equals the whole sequence, bit for bit") {
  for (const Case& k : kCases) {
    RnnSpec spec;
    spec.mode = k.mode;
    spec.gru_variant = k.variant;
    spec.input_size = 4;
    spec.hidden_size = 6;
    spec.num_layers = 2;
    spec.dtype = DType::f64;
    PlanOptions reference;
    reference.backend = Backend::reference;
    INFO(k.name);
    Streamed<double> net(to_stack(spec), reference, 2, 6, 5);
    check_streaming(net, 1, false);
  }
}

TEST_CASE("streaming with variational dropout: one mask per run, so every call with the run's seed and step draws it") {
  // A training run's variational masks depend on (seed, step, site, row, unit) but not on t, so a
  // stream of calls that all pass the run's seed and step sees the whole run's masks.
  RnnSpec spec;
  spec.input_size = 6;
  spec.hidden_size = 6;
  spec.num_layers = 2;
  StackSpec stack = to_stack(spec);
  for (int l = 0; l < stack.num_layers; ++l) {
    LayerSpec& layer = stack.layers[l];
    layer.num_wrappers = 1;
    layer.wrappers[0].kind = WrapperKind::dropout;
    layer.wrappers[0].dropout.input_keep = 0.7;
    layer.wrappers[0].dropout.output_keep = 0.8;
    layer.wrappers[0].dropout.state_keep = 0.9;
    layer.wrappers[0].dropout.variational = true;
  }
  ForwardArgs run;
  run.run_mode = RunMode::training;
  run.seed = 0x1234abcd5678ull;
  run.step = 42;
  for (const PlanOptions& path : cpu_paths()) {
    INFO(path_name(path));
    Streamed<float> net(stack, path, 3, 8, 99);
    check_streaming(net, 1, false, run);
  }
}

TEST_CASE("streaming with per-step dropout: time_offset continues the sequence's masks") {
  // Per-step masks depend on the time index; each chunk passes the index of its first step, so a
  // stream of calls draws exactly the whole run's masks (input, output, state and inter-layer).
  RnnSpec spec;
  spec.input_size = 5;
  spec.hidden_size = 7;
  spec.num_layers = 2;
  spec.dropout = 0.3;
  for (Mode mode : {Mode::lstm, Mode::gru}) {
    spec.mode = mode;
    StackSpec stack = to_stack(spec);
    for (int l = 0; l < stack.num_layers; ++l) {
      LayerSpec& layer = stack.layers[l];
      layer.num_wrappers = 1;
      layer.wrappers[0].kind = WrapperKind::dropout;
      layer.wrappers[0].dropout.input_keep = 0.7;
      layer.wrappers[0].dropout.output_keep = 0.8;
      layer.wrappers[0].dropout.state_keep = 0.9;
      layer.wrappers[0].dropout.state_filter = StateFilter::h_and_c;
    }
    ForwardArgs run;
    run.run_mode = RunMode::training;
    run.seed = 77;
    run.step = 3;
    for (const PlanOptions& path : cpu_paths()) {
      INFO(path_name(path) << " " << to_string(mode));
      Streamed<float> net(stack, path, 3, 9, 123);
      check_streaming(net, 1, false, run);
      check_streaming(net, 4, true, run);
    }
  }
}

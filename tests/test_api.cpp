// The C++ API's contract: spec validation, canonical shapes and offsets (CudnnLSTM's queries),
// plan sizes, and one test per kind of bad input to forward(), each with its status and message.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

RnnSpec lstm_spec(int I = 5, int H = 7, int L = 2, Direction d = Direction::bidirectional) {
  RnnSpec s;
  s.mode = Mode::lstm;
  s.input_size = I;
  s.hidden_size = H;
  s.num_layers = L;
  s.direction = d;
  return s;
}

bool detail_has(const char* fragment) { return std::strstr(last_error_detail(), fragment) != nullptr; }

// A planned, packed network with buffers, for the forward() error tests.
struct Harness {
  explicit Harness(RnnSpec s, int max_batch = 4, int max_seq = 6, Backend backend = Backend::auto_select) : spec(s) {
    PlanOptions o;
    o.max_batch = max_batch;
    o.max_seq_len = max_seq;
    o.backend = backend;
    REQUIRE(Plan::create(spec, o, &plan) == Status::ok);
    packed = std::make_unique<AlignedBuffer>(plan.packed_weight_bytes());
    ws = std::make_unique<AlignedBuffer>(plan.workspace_bytes());
    Rng rng(3);
    weights = random_vector<float>(rng, param_count(spec), 0.3);
    REQUIRE(plan.pack_weights(weights.data(), packed->ptr, packed->size) == Status::ok);
    const std::size_t D = num_directions(spec), H = spec.hidden_size;
    x = random_vector<float>(rng, static_cast<std::size_t>(max_seq) * max_batch * spec.input_size, 1.0);
    y.assign(static_cast<std::size_t>(max_seq) * max_batch * D * H, 0.f);
    h.assign(spec.num_layers * D * max_batch * H, 0.f);
    c = h;
    args.batch = max_batch;
    args.seq_len = max_seq;
    args.x = x.data();
    args.y = y.data();
  }
  Status run() { return plan.forward(packed->ptr, ws->ptr, ws->size, args); }

  RnnSpec spec;
  Plan plan;
  std::unique_ptr<AlignedBuffer> packed, ws;
  std::vector<float> weights, x, y, h, c;
  ForwardArgs args;
};

}  // namespace

TEST_CASE("validate names the offending field") {
  RnnSpec s = lstm_spec();
  CHECK(validate(s) == Status::ok);
  s.hidden_size = 0;
  CHECK(validate(s) == Status::invalid_size);
  CHECK(detail_has("hidden_size = 0"));
  s = lstm_spec();
  s.num_layers = kMaxLayers + 1;
  CHECK(validate(s) == Status::invalid_size);
  CHECK(detail_has("num_layers"));
  s = lstm_spec();
  s.mode = static_cast<Mode>(9);
  CHECK(validate(s) == Status::invalid_enum);
  s = lstm_spec();
  s.input_mode = InputMode::skip;
  CHECK(validate(s) == Status::skip_needs_equal_sizes);
  CHECK(detail_has("input_size = 5 and hidden_size = 7"));
  s.input_size = 7;
  CHECK(validate(s) == Status::ok);
  s = lstm_spec();
  s.dtype = DType::bf16;
  CHECK(validate(s) == Status::unsupported);
  CHECK(std::string(status_message(Status::bad_length)).find("length") != std::string::npos);
}

TEST_CASE("canonical layout: CudnnLSTM shapes, counts and offsets") {
  const RnnSpec s = lstm_spec(5, 7, 2, Direction::bidirectional);
  // Per layer and direction: 4·(7·I_l + 7·7 + 2·7); I_0 = 5, I_1 = 14.
  CHECK(param_count(s) == 2 * 4 * (7 * 5 + 49 + 14) + 2 * 4 * (7 * 14 + 49 + 14));
  Shape shapes[64];
  int n = 0;
  REQUIRE(canonical_weight_shapes(s, shapes, 64, &n) == Status::ok);
  CHECK(n == 2 * 2 * 8);
  CHECK(shapes[0].ndim == 2);
  CHECK(shapes[0].dims[0] == 7);
  CHECK(shapes[0].dims[1] == 5);
  CHECK(shapes[4].dims[1] == 7);   // R_0 of layer 0 forward
  CHECK(shapes[16].dims[1] == 14); // W_0 of layer 1 forward
  REQUIRE(canonical_bias_shapes(s, shapes, 64, &n) == Status::ok);
  CHECK(n == 2 * 2 * 8);
  CHECK(shapes[0].dims[0] == 7);
  REQUIRE(canonical_weight_shapes(s, nullptr, 0, &n) == Status::ok);  // count only
  CHECK(n == 32);

  // Offsets tile [0, param_count) in the order W_k, R_k, bW_k, bR_k per (layer, direction).
  std::int64_t expect = 0;
  for (int l = 0; l < 2; ++l)
    for (int d = 0; d < 2; ++d)
      for (ParamKind k : {ParamKind::input_weight, ParamKind::recurrent_weight, ParamKind::input_bias, ParamKind::recurrent_bias})
        for (int g = 0; g < 4; ++g) {
          CHECK(canonical_offset(s, l, d, k, g) == expect);
          const std::int64_t I = l == 0 ? 5 : 14;
          expect += k == ParamKind::input_weight ? 7 * I : k == ParamKind::recurrent_weight ? 49 : 7;
        }
  CHECK(expect == param_count(s));
  CHECK(canonical_offset(s, 2, 0, ParamKind::input_weight, 0) == -1);
  CHECK(canonical_offset(s, 0, 2, ParamKind::input_weight, 0) == -1);
  CHECK(canonical_offset(s, 0, 0, ParamKind::input_weight, 4) == -1);

  const Shape st = state_shape(s, 3);
  CHECK(st.ndim == 3);
  CHECK(st.dims[0] == 4);
  CHECK(st.dims[1] == 3);
  CHECK(st.dims[2] == 7);
}

TEST_CASE("skip input: layer 0 has no input weights; auto_select picks skip when I == H") {
  RnnSpec s = lstm_spec(7, 7, 2, Direction::unidirectional);
  s.input_mode = InputMode::skip;
  CHECK(uses_skip_input(s));
  CHECK(canonical_offset(s, 0, 0, ParamKind::input_weight, 0) == -1);
  CHECK(canonical_offset(s, 0, 0, ParamKind::recurrent_weight, 0) == 0);
  CHECK(param_count(s) == 4 * (49 + 14) + 4 * (49 + 49 + 14));
  int n = 0;
  REQUIRE(canonical_weight_shapes(s, nullptr, 0, &n) == Status::ok);
  CHECK(n == 4 + 8);
  s.input_mode = InputMode::auto_select;
  CHECK(uses_skip_input(s));
  s.input_size = 6;
  CHECK_FALSE(uses_skip_input(s));

  // Skip semantics: the layer-0 projection is x itself. A skip network equals a linear one whose
  // W_k are identity matrices.
  RnnSpec skip = lstm_spec(3, 3, 1, Direction::unidirectional);
  skip.input_mode = InputMode::skip;
  skip.dtype = DType::f64;
  RnnSpec linear = skip;
  linear.input_mode = InputMode::linear;
  Rng rng(11);
  const auto ws = random_vector<double>(rng, param_count(skip), 0.5);
  std::vector<double> wl(param_count(linear), 0.0);
  for (int g = 0; g < 4; ++g) {
    for (int i = 0; i < 3; ++i) wl[canonical_offset(linear, 0, 0, ParamKind::input_weight, g) + i * 3 + i] = 1.0;
    for (ParamKind k : {ParamKind::recurrent_weight, ParamKind::input_bias, ParamKind::recurrent_bias}) {
      const int n_el = k == ParamKind::recurrent_weight ? 9 : 3;
      for (int e = 0; e < n_el; ++e)
        wl[canonical_offset(linear, 0, 0, k, g) + e] = ws[canonical_offset(skip, 0, 0, k, g) + e];
    }
  }
  const auto x = random_vector<double>(rng, 4 * 2 * 3, 1.0);
  ForwardArgs a;
  a.batch = 2;
  a.seq_len = 4;
  a.x = x.data();
  PlanOptions o;
  o.max_batch = 2;
  o.max_seq_len = 4;
  Outputs<double> out_skip, out_linear;
  REQUIRE(run_forward(skip, o, ws, a, &out_skip) == Status::ok);
  REQUIRE(run_forward(linear, o, wl, a, &out_linear) == Status::ok);
  CHECK(rel_error(out_skip.y.data(), out_linear.y.data(), out_linear.y.size()) < 1e-14);
  // And the f32 SIMD skip path agrees.
  RnnSpec skip32 = skip;
  skip32.dtype = DType::f32;
  const std::vector<float> ws32(ws.begin(), ws.end()), x32(x.begin(), x.end());
  a.x = x32.data();
  Outputs<float> out32;
  REQUIRE(run_forward(skip32, o, ws32, a, &out32) == Status::ok);
  CHECK(rel_error(out32.y.data(), out_skip.y.data(), out_skip.y.size()) < 1e-5);
}

TEST_CASE("plan: backend choice and errors") {
  Plan plan;
  PlanOptions o;
  o.max_batch = 0;
  CHECK(Plan::create(lstm_spec(), o, &plan) == Status::invalid_size);
  CHECK(detail_has("max_batch = 0"));
  o = PlanOptions{};
  o.backend = Backend::gpu;
  CHECK(Plan::create(lstm_spec(), o, &plan) == Status::backend_unavailable);
  o.backend = Backend::reference;
  REQUIRE(Plan::create(lstm_spec(), o, &plan) == Status::ok);
  CHECK(plan.backend() == Backend::reference);
  CHECK(std::string(plan.kernel_name()) == "f32_rnn__reference");
  RnnSpec s64 = lstm_spec();
  s64.dtype = DType::f64;
  o.backend = Backend::auto_select;
  REQUIRE(Plan::create(s64, o, &plan) == Status::ok);
  CHECK(plan.backend() == Backend::reference);  // f64 runs the reference
  o.backend = Backend::simd;
  CHECK(Plan::create(s64, o, &plan) == Status::backend_unavailable);
  o.backend = Backend::simd;
  o.max_isa = Isa::none;
  CHECK(Plan::create(lstm_spec(), o, &plan) == Status::backend_unavailable);
  o.max_batch = 1 << 24;
  o.max_seq_len = 1 << 28;
  o.max_isa = Isa::best;
  o.backend = Backend::reference;
  CHECK(Plan::create(lstm_spec(512, 1024), o, &plan) == Status::invalid_size);  // 2^46-byte guard
  CHECK(Plan::create(lstm_spec(), o, nullptr) == Status::null_pointer);
}

TEST_CASE("forward rejects every kind of bad argument with a clear message") {
  Harness t(lstm_spec(5, 7, 2, Direction::bidirectional));
  REQUIRE(t.run() == Status::ok);

  t.args.batch = 5;
  CHECK(t.run() == Status::batch_too_large);
  CHECK(detail_has("batch = 5, plan max_batch = 4"));
  t.args.batch = -1;
  CHECK(t.run() == Status::invalid_size);
  t.args.batch = 4;
  t.args.seq_len = 7;
  CHECK(t.run() == Status::seq_too_long);
  t.args.seq_len = 6;

  std::int32_t lengths[4] = {6, 7, 0, 1};
  t.args.seq_lengths = lengths;
  CHECK(t.run() == Status::bad_length);
  CHECK(detail_has("seq_lengths[1] = 7"));
  lengths[1] = -1;
  CHECK(t.run() == Status::bad_length);
  lengths[1] = 3;
  CHECK(t.run() == Status::ok);
  t.args.seq_lengths = nullptr;

  t.args.x = nullptr;
  CHECK(t.run() == Status::null_pointer);
  CHECK(detail_has("x is null"));
  t.args.x = t.x.data();
  t.args.y = nullptr;
  CHECK(t.run() == Status::null_pointer);
  t.args.y = t.y.data();
  t.args.layout = static_cast<Layout>(3);
  CHECK(t.run() == Status::invalid_enum);
  t.args.layout = Layout::time_major;

  CHECK(t.plan.forward(t.packed->ptr, t.ws->ptr, t.ws->size - 1, t.args) == Status::buffer_too_small);
  CHECK(detail_has("workspace has"));
  CHECK(t.plan.forward(t.packed->ptr, t.ws->ptr + 4, t.ws->size, t.args) == Status::misaligned);
  CHECK(t.plan.forward(nullptr, t.ws->ptr, t.ws->size, t.args) == Status::null_pointer);

  // Packed weights of another plan, or never packed.
  Harness other(lstm_spec(5, 8, 2, Direction::bidirectional));
  CHECK(t.plan.forward(other.packed->ptr, t.ws->ptr, t.ws->size, t.args) == Status::weights_not_packed);
  std::memset(t.packed->ptr, 0, t.packed->size);
  CHECK(t.run() == Status::weights_not_packed);
  CHECK(t.plan.pack_weights(t.weights.data(), t.packed->ptr, t.packed->size - 1) == Status::buffer_too_small);
  CHECK(t.plan.pack_weights(t.weights.data(), t.packed->ptr + 8, t.packed->size) == Status::misaligned);
  CHECK(t.plan.pack_weights(nullptr, t.packed->ptr, t.packed->size) == Status::null_pointer);

  Plan never_created;
  CHECK(never_created.forward(t.packed->ptr, t.ws->ptr, t.ws->size, t.args) == Status::invalid_enum);

  RnnSpec g = lstm_spec();
  g.mode = Mode::gru;
  Harness gru(g);
  gru.args.c0 = gru.c.data();
  CHECK(gru.run() == Status::unsupported);
  CHECK(detail_has("only LSTM has a cell state"));
}

TEST_CASE("zero-length rows keep their initial state; a zero-step run returns the initial state") {
  for (Backend backend : cpu_backends()) {
    Harness t(lstm_spec(5, 7, 2, Direction::bidirectional), 4, 6, backend);
    Rng rng(5);
    const auto h0 = random_vector<float>(rng, t.h.size(), 1.0), c0 = random_vector<float>(rng, t.h.size(), 1.0);
    std::int32_t lengths[4] = {0, 6, 0, 2};
    t.args.seq_lengths = lengths;
    t.args.h0 = h0.data();
    t.args.c0 = c0.data();
    t.args.hy = t.h.data();
    t.args.cy = t.c.data();
    REQUIRE(t.run() == Status::ok);
    const int H = 7;
    for (int slot = 0; slot < 4; ++slot)
      for (int b : {0, 2})
        for (int u = 0; u < H; ++u) {
          const std::size_t i = (static_cast<std::size_t>(slot) * 4 + b) * H + u;
          CHECK(t.h[i] == h0[i]);
          CHECK(t.c[i] == c0[i]);
        }
    for (int tt = 0; tt < 6; ++tt)
      for (int u = 0; u < 2 * H; ++u) CHECK(t.y[(tt * 4 + 0) * 2 * H + u] == 0.0f);

    t.args.seq_len = 0;
    t.args.seq_lengths = nullptr;
    std::fill(t.h.begin(), t.h.end(), -1.f);
    REQUIRE(t.run() == Status::ok);
    CHECK(t.h == h0);
    t.args.batch = 0;
    CHECK(t.run() == Status::ok);
  }
}

TEST_CASE("Model owns its buffers and moves") {
  RnnSpec s = lstm_spec(3, 4, 1, Direction::unidirectional);
  Rng rng(1);
  const auto w = random_vector<float>(rng, param_count(s), 0.5);
  const auto x = random_vector<float>(rng, 2 * 3 * 3, 1.0);
  std::vector<float> y(2 * 3 * 4), y2(y.size());
  PlanOptions o;
  o.max_batch = 3;
  o.max_seq_len = 2;
  Model m;
  ForwardArgs a;
  a.batch = 3;
  a.seq_len = 2;
  a.x = x.data();
  a.y = y.data();
  CHECK(m.forward(a) == Status::weights_not_packed);
  REQUIRE(Model::create(s, o, w.data(), &m) == Status::ok);
  REQUIRE(m.forward(a) == Status::ok);
  Model moved(std::move(m));
  a.y = y2.data();
  REQUIRE(moved.forward(a) == Status::ok);
  CHECK(y == y2);
  CHECK(m.forward(a) == Status::weights_not_packed);
  CHECK(Model::create(s, o, nullptr, &m) == Status::null_pointer);
}

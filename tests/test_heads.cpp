// The ends of a stack: an Embedding before layer 0 and a Dense head after the last layer, on every
// CPU backend and instruction set, against the stack without them and the head computed here in f64.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

#define CHECK_OK(expr) CHECK((expr) == Status::ok)

namespace {

// A 2-layer stack: an LSTM then a GRU (bidirectional when asked), I = 5.
StackSpec base_stack(bool bidirectional, DType dtype) {
  StackSpec st;
  st.input_size = 5;
  st.dtype = dtype;
  st.num_layers = 2;
  st.layers[0].mode = Mode::lstm;
  st.layers[0].hidden_size = 7;
  st.layers[1].mode = Mode::gru;
  st.layers[1].hidden_size = 6;
  st.layers[1].direction = bidirectional ? Direction::bidirectional : Direction::unidirectional;
  return st;
}

double activate(Activation a, double v) {
  switch (a) {
    case Activation::relu: return v > 0 ? v : 0;
    case Activation::sigmoid: return 1 / (1 + std::exp(-v));
    case Activation::tanh: return std::tanh(v);
    default: return v;
  }
}

// y of the head in f64 from the stack's output o (layout of args, [T, B, in] or [B, T, in]).
template <class T>
std::vector<double> head_by_hand(const StackSpec& st, const std::vector<T>& canonical, const std::vector<T>& o,
                                 const ForwardArgs& a) {
  const int out = st.head.out_features, Tn = a.seq_len, B = a.batch;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  const int O = output_size(last), dirs = num_directions(last), in = dirs * O;
  const bool bm = a.layout == Layout::batch_major;
  auto orow = [&](int t, int b) { return o.data() + static_cast<std::size_t>(bm ? b * Tn + t : t * B + b) * in; };
  auto len = [&](int b) { return a.seq_lengths != nullptr ? a.seq_lengths[b] : Tn; };
  // One Dense (place c in the chain pre_head[0..], head) of width n on x [m].
  auto dense = [&](int c, const DenseSpec& d, const std::vector<double>& x, std::vector<double>& y) {
    const int n = d.out_features, m = static_cast<int>(x.size());
    const T* W = canonical.data() + canonical_offset(st, c, 0, ParamKind::dense_weight, 0);
    const T* bias = canonical.data() + canonical_offset(st, c, 0, ParamKind::dense_bias, 0);
    y.assign(static_cast<std::size_t>(n), 0.0);
    for (int j = 0; j < n; ++j) {
      double s = bias[j];
      for (int k = 0; k < m; ++k) s += static_cast<double>(W[j * m + k]) * x[k];
      y[j] = activate(d.activation, s);
    }
    if (d.activation != Activation::softmax) return;
    double top = y[0], sum = 0;
    for (int j = 1; j < n; ++j) top = std::max(top, y[j]);
    for (int j = 0; j < n; ++j) sum += (y[j] = std::exp(y[j] - top));
    for (int j = 0; j < n; ++j) y[j] /= sum;
  };
  auto map = [&](const std::vector<double>& x, double* y) {
    std::vector<double> cur = x, next;
    for (int c = 0; c < st.num_pre_head; ++c, cur.swap(next)) dense(c, st.pre_head[c], cur, next);
    dense(st.num_pre_head, st.head, cur, next);
    std::copy(next.begin(), next.end(), y);
  };
  std::vector<double> x(in), y;
  if (st.head.last_step_only) {
    y.assign(static_cast<std::size_t>(B) * out, 0.0);
    for (int b = 0; b < B; ++b) {
      if (len(b) == 0) continue;
      for (int d = 0; d < dirs; ++d)
        for (int u = 0; u < O; ++u) x[d * O + u] = orow(d == 0 ? len(b) - 1 : 0, b)[d * O + u];
      map(x, y.data() + static_cast<std::size_t>(b) * out);
    }
    return y;
  }
  y.assign(static_cast<std::size_t>(Tn) * B * out, 0.0);
  for (int t = 0; t < Tn; ++t)
    for (int b = 0; b < B; ++b) {
      if (t >= len(b)) continue;
      for (int k = 0; k < in; ++k) x[k] = orow(t, b)[k];
      map(x, y.data() + static_cast<std::size_t>(bm ? b * Tn + t : t * B + b) * out);
    }
  return y;
}

template <class T>
void check_head(DType dtype, double tolerance) {
  const std::int32_t lengths[4] = {4, 0, 2, 3};
  for (Backend backend : cpu_backends()) {
    if (dtype == DType::f64 && backend == Backend::simd) continue;
    for (bool bidi : {false, true})
      for (bool last_step : {false, true})
        for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh, Activation::softmax})
          for (Layout layout : {Layout::time_major, Layout::batch_major})
            for (bool with_lengths : {false, true}) {
              CAPTURE(static_cast<int>(backend));
              CAPTURE(bidi);
              CAPTURE(last_step);
              CAPTURE(to_string(act));
              CAPTURE(static_cast<int>(layout));
              CAPTURE(with_lengths);
              StackSpec plain = base_stack(bidi, dtype), st = plain;
              st.head.out_features = 3;
              st.head.activation = act;
              st.head.last_step_only = last_step;
              REQUIRE(validate(st) == Status::ok);
              CHECK(param_count(st) == param_count(plain) + 3 * (stack_output_size(plain) + 1));
              CHECK(canonical_offset(st, 0, 0, ParamKind::dense_weight, 0) == param_count(plain));
              Rng rng(42);
              const std::vector<T> canonical = random_vector<T>(rng, static_cast<std::size_t>(param_count(st)), 0.5);
              const std::vector<T> prefix(canonical.begin(), canonical.begin() + param_count(plain));
              const std::vector<T> x = random_vector<T>(rng, 4 * 4 * 5, 1.0);
              PlanOptions opt;
              opt.backend = backend;
              opt.max_batch = 4;
              opt.max_seq_len = 4;
              ForwardArgs a;
              a.batch = 4;
              a.seq_len = 4;
              a.layout = layout;
              a.x = x.data();
              a.seq_lengths = with_lengths ? lengths : nullptr;
              Outputs<T> with, without;
              REQUIRE(run_forward(st, opt, canonical, a, &with) == Status::ok);
              REQUIRE(run_forward(plain, opt, prefix, a, &without) == Status::ok);
              CHECK(with.hy == without.hy);  // the head leaves the states alone
              CHECK(with.cy == without.cy);
              const std::vector<double> want = head_by_hand(st, canonical, without.y, a);
              REQUIRE(with.y.size() == want.size());
              CHECK(rel_error(with.y.data(), want.data(), want.size()) <= tolerance);
              if (with_lengths && !last_step)  // zero past a row's length
                CHECK(with.y[layout == Layout::batch_major ? (1 * 4 + 0) * 3 : (0 * 4 + 1) * 3] == T(0));
            }
  }
}

}  // namespace

TEST_CASE("heads: a Dense head equals the stack's output mapped by hand, every activation and step mode") {
  check_head<float>(DType::f32, 2e-6);
  check_head<double>(DType::f64, 1e-13);
}

TEST_CASE("heads: a head on every SIMD instruction set equals the reference") {
  StackSpec st = base_stack(true, DType::f32);
  st.head.out_features = 9;
  st.head.activation = Activation::softmax;
  Rng rng(7);
  const std::vector<float> canonical = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.5);
  const std::vector<float> x = random_vector<float>(rng, 6 * 3 * 5, 1.0);
  ForwardArgs a;
  a.batch = 3;
  a.seq_len = 6;
  a.x = x.data();
  PlanOptions opt;
  opt.max_batch = 3;
  opt.max_seq_len = 6;
  opt.backend = Backend::reference;
  Outputs<float> ref;
  REQUIRE(run_forward(st, opt, canonical, a, &ref) == Status::ok);
  for (Isa isa : isas_here()) {
    CAPTURE(to_string(isa));
    opt.backend = Backend::simd;
    opt.max_isa = isa;
    Outputs<float> got;
    REQUIRE(run_forward(st, opt, canonical, a, &got) == Status::ok);
    CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) <= 1e-5);
  }
}

TEST_CASE("heads: an Embedding feeds layer 0 the table's rows, bit for bit as the looked-up input") {
  for (Backend backend : cpu_backends())
    for (Layout layout : {Layout::time_major, Layout::batch_major}) {
      CAPTURE(static_cast<int>(backend));
      StackSpec plain = base_stack(false, DType::f32), st = plain;
      st.embedding.vocab_size = 11;
      st.head.out_features = 2;  // both ends at once
      plain.head = st.head;
      REQUIRE(validate(st) == Status::ok);
      CHECK(canonical_offset(st, 0, 0, ParamKind::embedding, 0) ==
            canonical_offset(plain, 0, 0, ParamKind::dense_weight, 0));
      Rng rng(3);
      const std::vector<float> canonical = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.5);
      // The plain stack's canonical buffer: the same layers and head, no table.
      std::vector<float> plain_canonical(canonical.begin(), canonical.begin() + canonical_offset(st, 0, 0, ParamKind::embedding, 0));
      const float* table = canonical.data() + canonical_offset(st, 0, 0, ParamKind::embedding, 0);
      plain_canonical.insert(plain_canonical.end(), canonical.begin() + canonical_offset(st, 0, 0, ParamKind::dense_weight, 0),
                             canonical.end());
      const int T = 5, B = 3, I = 5;
      std::vector<std::int32_t> ids(T * B);
      for (auto& id : ids) id = rng.range(0, 10);
      std::vector<float> x(static_cast<std::size_t>(T * B * I));
      for (int i = 0; i < T * B; ++i) std::memcpy(&x[static_cast<std::size_t>(i * I)], table + ids[i] * I, sizeof(float) * I);
      PlanOptions opt;
      opt.backend = backend;
      opt.max_batch = B;
      opt.max_seq_len = T;
      ForwardArgs a;
      a.batch = B;
      a.seq_len = T;
      a.layout = layout;
      Outputs<float> with, without;
      a.x = ids.data();
      REQUIRE(run_forward(st, opt, canonical, a, &with) == Status::ok);
      a.x = x.data();
      REQUIRE(run_forward(plain, opt, plain_canonical, a, &without) == Status::ok);
      CHECK(with.y == without.y);
      CHECK(with.hy == without.hy);
      // An id outside the table is refused with a detail.
      ids[4] = 11;
      a.x = ids.data();
      CHECK(run_forward(st, opt, canonical, a, &with) == Status::invalid_size);
      CHECK(std::string(last_error_detail()).find("x[4] = 11 is not a token id of the embedding (0..10)") != std::string::npos);
    }
}

TEST_CASE("heads: bad ends are refused with a detail line; the GPU refuses them for now") {
  StackSpec st = base_stack(false, DType::f32);
  st.head.out_features = -1;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("stack.head.out_features = -1") != std::string::npos);
  st.head.out_features = 0;
  st.head.activation = Activation::softmax;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("stack.head: an activation set but out_features = 0") != std::string::npos);
  st.head.activation = static_cast<Activation>(9);
  st.head.out_features = 2;
  CHECK(validate(st) == Status::invalid_enum);
  st.head.activation = Activation::none;
  st.head.out_features = 0;
  st.head.last_step_only = true;
  CHECK(validate(st) == Status::invalid_size);
  st.head.last_step_only = false;
  st.embedding.vocab_size = -2;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("stack.embedding.vocab_size = -2") != std::string::npos);
  st.embedding.vocab_size = 4;
  Plan plan;
  PlanOptions opt;
  opt.training = true;  // training plans them (tests/test_head_grad.cpp; the GPU's: tests/gpu/test_gpu_train.cpp)
  CHECK(Plan::create(st, opt, &plan) == Status::ok);
  // Shapes: the table and W after every layer's weights, b after the biases.
  st.head.out_features = 3;
  Shape shapes[32];
  int n = 0, m = 0;
  REQUIRE(canonical_weight_shapes(st, shapes, 32, &n) == Status::ok);
  CHECK(shapes[n - 2].dims[0] == 4);
  CHECK(shapes[n - 2].dims[1] == 5);
  CHECK(shapes[n - 1].dims[0] == 3);
  CHECK(shapes[n - 1].dims[1] == 6);
  REQUIRE(canonical_bias_shapes(st, shapes, 32, &m) == Status::ok);
  CHECK(shapes[m - 1].ndim == 1);
  CHECK(shapes[m - 1].dims[0] == 3);
}

TEST_CASE("heads: the head's output is bit-identical for every thread count") {
  if (isas_here().empty()) return;  // the SIMD backend's threads are what is checked
  StackSpec st = base_stack(true, DType::f32);
  st.head.out_features = 5;
  st.head.activation = Activation::tanh;
  Rng rng(11);
  const std::vector<float> canonical = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.5);
  const std::vector<float> x = random_vector<float>(rng, 7 * 4 * 5, 1.0);
  ForwardArgs a;
  a.batch = 4;
  a.seq_len = 7;
  a.x = x.data();
  PlanOptions opt;
  opt.backend = Backend::simd;
  opt.max_batch = 4;
  opt.max_seq_len = 7;
  Outputs<float> one;
  REQUIRE(run_forward(st, opt, canonical, a, &one) == Status::ok);
  ThreadPool* pool = nullptr;
  if (ThreadPool::create(3, &pool) != Status::ok) return;  // a build without threads
  opt.threads = 3;
  opt.thread_pool = pool;
  Outputs<float> three;
  CHECK(run_forward(st, opt, canonical, a, &three) == Status::ok);
  CHECK(three.y == one.y);
  ThreadPool::destroy(pool);
}

TEST_CASE("heads: Dense layers before the head (an MLP head) equal the chain mapped by hand; refusals") {
  const std::int32_t lengths[3] = {4, 0, 2};
  for (Backend backend : cpu_backends())
    for (bool bidi : {false, true})
      for (bool last_step : {false, true})
        for (Layout layout : {Layout::time_major, Layout::batch_major}) {
          CAPTURE(static_cast<int>(backend));
          CAPTURE(bidi);
          CAPTURE(last_step);
          CAPTURE(static_cast<int>(layout));
          StackSpec plain = base_stack(bidi, DType::f32), st = plain;
          st.num_pre_head = 2;
          st.pre_head[0].out_features = 8;
          st.pre_head[0].activation = Activation::relu;
          st.pre_head[1].out_features = 4;
          st.pre_head[1].activation = Activation::tanh;
          st.head.out_features = 3;
          st.head.activation = Activation::softmax;
          st.head.last_step_only = last_step;
          REQUIRE(validate(st) == Status::ok);
          const std::int64_t in = stack_output_size(plain);
          CHECK(param_count(st) == param_count(plain) + 8 * (in + 1) + 4 * (8 + 1) + 3 * (4 + 1));
          CHECK(canonical_offset(st, 0, 0, ParamKind::dense_weight, 0) == param_count(plain));
          CHECK(canonical_offset(st, 1, 0, ParamKind::dense_weight, 0) == param_count(plain) + 8 * (in + 1));
          CHECK(canonical_offset(st, 2, 0, ParamKind::dense_bias, 0) == param_count(st) - 3);
          CHECK(canonical_offset(st, 3, 0, ParamKind::dense_weight, 0) == -1);
          Rng rng(7);
          const std::vector<float> canonical = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.5);
          const std::vector<float> prefix(canonical.begin(), canonical.begin() + param_count(plain));
          const std::vector<float> x = random_vector<float>(rng, 4 * 3 * 5, 1.0);
          PlanOptions opt;
          opt.backend = backend;
          opt.max_batch = 3;
          opt.max_seq_len = 4;
          ForwardArgs a;
          a.batch = 3;
          a.seq_len = 4;
          a.layout = layout;
          a.x = x.data();
          a.seq_lengths = lengths;
          Outputs<float> with, without;
          REQUIRE(run_forward(st, opt, canonical, a, &with) == Status::ok);
          REQUIRE(run_forward(plain, opt, prefix, a, &without) == Status::ok);
          const std::vector<double> want = head_by_hand(st, canonical, without.y, a);
          REQUIRE(with.y.size() == want.size());
          CHECK(rel_error(with.y.data(), want.data(), want.size()) <= 1e-5);
        }
  StackSpec st = base_stack(false, DType::f32);
  st.num_pre_head = 1;
  st.pre_head[0].out_features = 4;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("stack.num_pre_head = 1 without a head") != std::string::npos);
  st.head.out_features = 2;
  st.num_pre_head = kMaxPreHead + 1;
  CHECK(validate(st) == Status::invalid_size);
  st.num_pre_head = 1;
  st.pre_head[0].out_features = 0;
  CHECK(validate(st) == Status::invalid_size);
  CHECK(std::string(last_error_detail()).find("stack.pre_head[0].out_features = 0") != std::string::npos);
  st.pre_head[0].out_features = 4;
  st.pre_head[0].last_step_only = true;
  CHECK(validate(st) == Status::invalid_size);
  st.pre_head[0].last_step_only = false;
  REQUIRE(validate(st) == Status::ok);
  Plan plan;
  PlanOptions opt;
  opt.training = true;  // the CPU backends train a chain (tests/test_head_grad.cpp)
  CHECK(Plan::create(st, opt, &plan) == Status::ok);
  st.dtype = DType::i8;  // integer chains: tests/test_int8_plan.cpp runs LiteRT's through Model
  st.pre_head[0].activation = Activation::softmax;
  CHECK(validate(st) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("stack.pre_head[0].activation softmax") != std::string::npos);
}

// Training through the ends of a stack: the Dense head's dW, db, those of the Dense layers before it
// (StackSpec::pre_head) and the Embedding's table gradient beside the layers' (src/head_grad.cpp).
// Against PyTorch autograd (tests/golden/head_grad, made by make_head_grad_golden.py) on the
// reference and SIMD backends; against central differences of the f64 reference forward for every
// activation, both step modes, lengths and layouts, chains of 1 to 3 Dense layers; bit-identical for
// 1 and 2 threads; errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "golden_files.hpp"
#include "rnncore/rnncore.hpp"
#include "test_util.hpp"

using namespace rnncore;
using rnncore_test::AlignedBuffer;
using rnncore_test::Rng;

namespace {

// One training run: the stack, its weights, input (floats, or token ids with an embedding) and dy.
template <class T>
struct Run {
  StackSpec stack;
  int batch = 3, steps = 4;
  Layout layout = Layout::time_major;
  std::vector<std::int32_t> lengths;  // empty: all steps
  std::vector<T> w, x, dy;
  std::vector<std::int32_t> ids;
};

template <class T>
struct Result {
  std::vector<T> y, dw;
};

template <class T>
Result<T> train_step(const Run<T>& r, Backend backend, ThreadPool* pool = nullptr) {
  StackSpec st = r.stack;
  st.dtype = sizeof(T) == 8 ? DType::f64 : DType::f32;
  PlanOptions opt;
  opt.max_batch = r.batch;
  opt.max_seq_len = r.steps;
  opt.backend = backend;
  opt.training = true;
  opt.threads = pool != nullptr ? 2 : 1;
  opt.thread_pool = pool;
  Plan plan;
  REQUIRE_MESSAGE(Plan::create(st, opt, &plan) == Status::ok, last_error_detail());
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  REQUIRE(plan.pack_weights(r.w.data(), packed.ptr, packed.size) == Status::ok);
  const std::size_t rows = st.head.last_step_only ? r.batch : static_cast<std::size_t>(r.batch) * r.steps;
  Result<T> g;
  g.y.assign(rows * stack_output_size(st), T(-7));
  g.dw.assign(r.w.size(), T(-7));
  ForwardArgs fa;
  fa.batch = r.batch;
  fa.seq_len = r.steps;
  fa.layout = r.layout;
  fa.x = st.embedding.vocab_size > 0 ? static_cast<const void*>(r.ids.data()) : r.x.data();
  fa.seq_lengths = r.lengths.empty() ? nullptr : r.lengths.data();
  fa.run_mode = RunMode::training;
  fa.y = g.y.data();
  fa.reserve = reserve.ptr;
  fa.reserve_bytes = reserve.size;
  REQUIRE_MESSAGE(plan.forward(packed.ptr, ws.ptr, ws.size, fa) == Status::ok, last_error_detail());
  BackwardArgs ba;
  ba.forward = fa;
  ba.dy = r.dy.data();
  ba.dweights = g.dw.data();
  REQUIRE_MESSAGE(plan.backward(packed.ptr, bws.ptr, bws.size, ba) == Status::ok, last_error_detail());
  return g;
}

// Σ y·dy of an inference forward on the f64 reference.
double loss(const Run<double>& r) {
  Result<double> g;
  StackSpec st = r.stack;
  st.dtype = DType::f64;
  PlanOptions opt;
  opt.max_batch = r.batch;
  opt.max_seq_len = r.steps;
  opt.backend = Backend::reference;
  Plan plan;
  REQUIRE(Plan::create(st, opt, &plan) == Status::ok);
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
  REQUIRE(plan.pack_weights(r.w.data(), packed.ptr, packed.size) == Status::ok);
  std::vector<double> y(r.dy.size());
  ForwardArgs fa;
  fa.batch = r.batch;
  fa.seq_len = r.steps;
  fa.layout = r.layout;
  fa.x = st.embedding.vocab_size > 0 ? static_cast<const void*>(r.ids.data()) : r.x.data();
  fa.seq_lengths = r.lengths.empty() ? nullptr : r.lengths.data();
  fa.y = y.data();
  REQUIRE(plan.forward(packed.ptr, ws.ptr, ws.size, fa) == Status::ok);
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r.dy[i];
  return s;
}

// The Dense chains before the head the tests train: chain c has c layers, every activation among them.
DenseSpec dense(int out_features, Activation act) {
  DenseSpec d;
  d.out_features = out_features;
  d.activation = act;
  return d;
}
void set_chain(int c, StackSpec* st) {
  const DenseSpec chains[4][3] = {{},
                                  {dense(6, Activation::tanh)},
                                  {dense(4, Activation::none), dense(5, Activation::relu)},
                                  {dense(5, Activation::relu), dense(4, Activation::softmax), dense(3, Activation::sigmoid)}};
  st->num_pre_head = c;
  for (int k = 0; k < c; ++k) st->pre_head[k] = chains[c][k];
}

// Embedding (when asked) → LSTM → bidirectional GRU → Dense chain (`chain` layers) → Dense head.
Run<double> make_run(Activation act, bool last_step, bool embedding, bool lengths, Layout layout, int chain = 0) {
  Run<double> r;
  StackSpec& st = r.stack;
  st.input_size = 3;
  st.num_layers = 2;
  st.layers[0].mode = Mode::lstm;
  st.layers[0].hidden_size = 4;
  st.layers[1].mode = Mode::gru;
  st.layers[1].hidden_size = 3;
  st.layers[1].direction = Direction::bidirectional;
  if (embedding) st.embedding.vocab_size = 5;
  st.head.out_features = 4;
  st.head.activation = act;
  st.head.last_step_only = last_step;
  set_chain(chain, &st);
  r.layout = layout;
  if (lengths) r.lengths = {4, 0, 2};
  Rng rng(11);
  r.w = rnncore_test::random_vector<double>(rng, static_cast<std::size_t>(param_count(st)), 0.6);
  r.x = rnncore_test::random_vector<double>(rng, static_cast<std::size_t>(r.steps) * r.batch * st.input_size, 1.0);
  for (int i = 0; i < r.steps * r.batch; ++i) r.ids.push_back((i * 3) % 4);  // id 4 never seen
  const std::size_t rows = last_step ? r.batch : static_cast<std::size_t>(r.batch) * r.steps;
  r.dy = rnncore_test::random_vector<double>(rng, rows * st.head.out_features, 1.0);
  return r;
}

template <class T>
Run<T> as(const Run<double>& r) {
  Run<T> o;
  o.stack = r.stack;
  o.batch = r.batch;
  o.steps = r.steps;
  o.layout = r.layout;
  o.lengths = r.lengths;
  o.ids = r.ids;
  o.w.assign(r.w.begin(), r.w.end());
  o.x.assign(r.x.begin(), r.x.end());
  o.dy.assign(r.dy.begin(), r.dy.end());
  return o;
}

}  // namespace

TEST_CASE("head grad: every weight gradient equals central differences of the f64 forward (every activation, step mode, lengths, layouts)") {
  for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh, Activation::softmax})
    for (bool last_step : {false, true})
      for (bool embedding : {false, true})
        for (bool lengths : {false, true}) {
          const Layout layout = lengths && embedding ? Layout::batch_major : Layout::time_major;
          CAPTURE(to_string(act));
          CAPTURE(last_step);
          CAPTURE(embedding);
          CAPTURE(lengths);
          Run<double> r = make_run(act, last_step, embedding, lengths, layout);
          const Result<double> g = train_step(r, Backend::reference);
          double top = 0, worst = 0;
          const std::int64_t first_end = canonical_offset(r.stack, 0, 0, embedding ? ParamKind::embedding : ParamKind::dense_weight, 0);
          for (std::size_t i = 0; i < r.w.size(); ++i) {
            if (i % 3 != 0 && static_cast<std::int64_t>(i) < first_end) continue;  // every end's element, a third of the layers'
            const double v = r.w[i], h = 1e-6;
            r.w[i] = v + h;
            const double lp = loss(r);
            r.w[i] = v - h;
            const double lm = loss(r);
            r.w[i] = v;
            const double fd = (lp - lm) / (2 * h);
            top = std::max(top, std::fabs(fd));
            worst = std::max(worst, std::fabs(fd - g.dw[i]));
          }
          CHECK(top > 0);
          CHECK(worst <= 1e-7 * top);
          if (embedding) {  // the row of id 4, never seen, gets nothing
            const std::int64_t row4 = canonical_offset(r.stack, 0, 0, ParamKind::embedding, 0) + 4 * r.stack.input_size;
            for (int i = 0; i < r.stack.input_size; ++i) CHECK(g.dw[static_cast<std::size_t>(row4 + i)] == 0.0);
          }
        }
}

TEST_CASE("head grad: Dense layers before the head — every gradient equals central differences of the f64 forward") {
  // Chains of 1, 2, 3 Dense layers (every activation among them, softmax mid-chain), head none,
  // relu, softmax; every step and last step, with and without lengths (a zero-length row) in turn.
  for (int chain = 1; chain <= 3; ++chain)
    for (Activation act : {Activation::none, Activation::relu, Activation::softmax})
      for (bool last_step : {false, true}) {
        const bool lengths = (chain + static_cast<int>(act) + (last_step ? 1 : 0)) % 2 == 1;
        CAPTURE(chain);
        CAPTURE(to_string(act));
        CAPTURE(last_step);
        CAPTURE(lengths);
        Run<double> r = make_run(act, last_step, chain == 2, lengths, lengths ? Layout::batch_major : Layout::time_major, chain);
        const Result<double> g = train_step(r, Backend::reference);
        const std::int64_t first_dense = canonical_offset(r.stack, 0, 0, ParamKind::dense_weight, 0);
        double top = 0, worst = 0, top_chain = 0;
        for (std::size_t i = 0; i < r.w.size(); ++i) {
          if (i % 5 != 0 && static_cast<std::int64_t>(i) < first_dense) continue;  // every Dense's element, a fifth of the rest
          const double v = r.w[i], h = 1e-6;
          r.w[i] = v + h;
          const double lp = loss(r);
          r.w[i] = v - h;
          const double lm = loss(r);
          r.w[i] = v;
          const double fd = (lp - lm) / (2 * h);
          top = std::max(top, std::fabs(fd));
          worst = std::max(worst, std::fabs(fd - g.dw[i]));
          if (static_cast<std::int64_t>(i) >= first_dense &&
              static_cast<std::int64_t>(i) < canonical_offset(r.stack, chain, 0, ParamKind::dense_weight, 0))
            top_chain = std::max(top_chain, std::fabs(g.dw[i]));
        }
        CHECK(top > 0);
        CHECK(top_chain > 0);  // the chain's own gradients are not all zero
        CHECK(worst <= 1e-7 * top);
      }
}

// Every CPU backend's f32 training step on r against the f64 reference's (weight gradients within
// 1e-4 of the largest), and bit-identical for 1 and 2 threads.
static void check_f32_against_f64(const Run<double>& r) {
  const Result<double> want = train_step(r, Backend::reference);
  double top = 0;
  for (double v : want.dw) top = std::max(top, std::fabs(v));
  for (Backend backend : rnncore_test::cpu_backends()) {
    CAPTURE(static_cast<int>(backend));
    const Run<float> f = as<float>(r);
    ThreadPool* pool = nullptr;
    REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
    const Result<float> one = train_step(f, backend), two = train_step(f, backend, pool);
    ThreadPool::destroy(pool);
    CHECK(one.y == two.y);
    CHECK(one.dw == two.dw);
    double worst = 0;
    for (std::size_t i = 0; i < want.dw.size(); ++i) worst = std::max(worst, std::fabs(one.dw[i] - want.dw[i]));
    CHECK(worst <= 1e-4 * top);
  }
}

TEST_CASE("head grad: Dense layers before the head — f32 reference and SIMD agree with f64; bit-identical for 1 and 2 threads") {
  for (int chain : {1, 3})
    for (bool last_step : {false, true}) {
      CAPTURE(chain);
      CAPTURE(last_step);
      const Run<double> r = make_run(Activation::softmax, last_step, false, true, Layout::time_major, chain);
      check_f32_against_f64(r);
    }
}

TEST_CASE("head grad: f32 reference and SIMD agree with f64; bit-identical for 1 and 2 threads") {
  for (Activation act : {Activation::none, Activation::softmax, Activation::tanh})
    for (bool last_step : {false, true}) {
      CAPTURE(to_string(act));
      CAPTURE(last_step);
      const Run<double> r = make_run(act, last_step, true, true, Layout::time_major);
      check_f32_against_f64(r);
    }
}

TEST_CASE("head grad: PyTorch autograd through Embedding → LSTM → Linear, LSTM → Linear (last step) and LSTM → Linear → ReLU → Linear") {
  const std::vector<std::string> cases = rnncore_test::list_cases(rnncore_test::golden_dir("head_grad"));
  REQUIRE(cases.size() == 4);
  for (const std::string& path : cases) {
    CAPTURE(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    const bool last_step = rnncore_test::meta(f, "head_last_step") == "1";
    const std::string act = rnncore_test::meta(f, "head_activation");
    // The Linear layers in chain order: fc, or fc1 (then a ReLU: StackSpec::pre_head[0]) and fc2.
    const bool mlp = f.find("fc1.weight") != nullptr;
    const std::vector<std::string> linears = mlp ? std::vector<std::string>{"fc1", "fc2"} : std::vector<std::string>{"fc"};
    if (mlp) REQUIRE(rnncore_test::meta(f, "pre_head_activation") == "relu");
    const bool embedding = f.find("embedding.weight") != nullptr;
    const bool bidi = f.find("lstm.weight_ih_l0_reverse") != nullptr;
    const io::TensorEntry* input = f.find("input");
    REQUIRE(input != nullptr);
    Run<double> r;
    StackSpec& st = r.stack;
    st.num_layers = 1;
    st.layers[0].mode = Mode::lstm;
    st.layers[0].direction = bidi ? Direction::bidirectional : Direction::unidirectional;
    const std::vector<double> w_ih = rnncore_test::floats<double>(f, "lstm.weight_ih_l0");
    st.layers[0].hidden_size = static_cast<int>(f.find("lstm.weight_hh_l0")->shape[1]);
    st.input_size = static_cast<int>(w_ih.size() / (4 * st.layers[0].hidden_size));
    r.steps = static_cast<int>(input->shape[0]);
    r.batch = static_cast<int>(input->shape[1]);
    StackSpec plain = st;
    plain.dtype = DType::f64;
    // The LSTM's tensors through the PyTorch importer, the ends straight into their canonical places.
    std::vector<std::vector<double>> held;
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    const int n = format_tensor_count(plain, WeightFormat::pytorch);
    for (int i = 0; i < n; ++i) {
      TensorInfo info;
      REQUIRE(format_tensor_info(plain, WeightFormat::pytorch, i, "lstm.", &info) == Status::ok);
      names.push_back(info.name);
      shapes.push_back(info.shape);
      held.push_back(rnncore_test::floats<double>(f, info.name));
    }
    std::vector<TensorView> views(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      TensorView& v = views[static_cast<std::size_t>(i)];
      v.name = names[static_cast<std::size_t>(i)].c_str();
      v.dtype = DType::f64;
      v.shape = shapes[static_cast<std::size_t>(i)];
      v.data = held[static_cast<std::size_t>(i)].data();
    }
    std::vector<double> recurrent(static_cast<std::size_t>(param_count(plain)));
    REQUIRE_MESSAGE(import_weights(plain, WeightFormat::pytorch, views.data(), views.size(), "lstm.", recurrent.data()) ==
                        Status::ok,
                    last_error_detail());
    st.head.out_features = static_cast<int>(f.find(linears.back() + ".bias")->shape[0]);
    st.head.activation = act == "softmax" ? Activation::softmax : act == "tanh" ? Activation::tanh : Activation::none;
    if (mlp) {
      st.num_pre_head = 1;
      st.pre_head[0] = dense(static_cast<int>(f.find("fc1.bias")->shape[0]), Activation::relu);
    }
    st.head.last_step_only = last_step;
    std::vector<double> table;
    if (embedding) {
      table = rnncore_test::floats<double>(f, "embedding.weight");
      st.embedding.vocab_size = static_cast<int>(f.find("embedding.weight")->shape[0]);
      st.input_size = static_cast<int>(f.find("embedding.weight")->shape[1]);
      rnncore::io::Array a;
      REQUIRE(f.array("input", &a) == RNNCORE_OK);
      REQUIRE(rnncore::io::to_i32(a, &r.ids) == RNNCORE_OK);
    } else {
      r.x = rnncore_test::floats<double>(f, "input");
    }
    REQUIRE(validate(st) == Status::ok);
    r.w = recurrent;
    r.w.insert(r.w.end(), table.begin(), table.end());
    for (const std::string& fc : linears)
      for (const char* part : {".weight", ".bias"}) {
        const std::vector<double> t = rnncore_test::floats<double>(f, fc + part);
        r.w.insert(r.w.end(), t.begin(), t.end());
      }
    REQUIRE(static_cast<std::int64_t>(r.w.size()) == param_count(st));
    r.dy = rnncore_test::floats<double>(f, "dy");
    const std::vector<double> y_want = rnncore_test::floats<double>(f, "expected.y");

    // Every gradient, by name: the LSTM's through export_gradient_tensor, the ends' in place.
    auto check = [&](const std::vector<double>& y, const std::vector<double>& dw, double tol) {
      CHECK(rnncore_test::rel_error(y.data(), y_want.data(), y.size()) <= tol);
      auto compare = [&](const std::string& name, const double* got) {
        CAPTURE(name);
        const std::vector<double> want = rnncore_test::floats<double>(f, "grad." + name);
        double top = 0, worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
          top = std::max(top, std::fabs(want[i]));
          worst = std::max(worst, std::fabs(got[i] - want[i]));
        }
        CHECK(top > 0);
        CHECK(worst <= tol * top);
      };
      for (int i = 0; i < n; ++i) {
        std::vector<double> g(held[static_cast<std::size_t>(i)].size());
        REQUIRE(export_gradient_tensor(plain, WeightFormat::pytorch, i, dw.data(), g.data()) == Status::ok);
        compare(names[static_cast<std::size_t>(i)], g.data());
      }
      if (embedding) compare("embedding.weight", dw.data() + canonical_offset(st, 0, 0, ParamKind::embedding, 0));
      for (int k = 0; k < static_cast<int>(linears.size()); ++k) {
        compare(linears[static_cast<std::size_t>(k)] + ".weight", dw.data() + canonical_offset(st, k, 0, ParamKind::dense_weight, 0));
        compare(linears[static_cast<std::size_t>(k)] + ".bias", dw.data() + canonical_offset(st, k, 0, ParamKind::dense_bias, 0));
      }
    };
    const Result<double> g64 = train_step(r, Backend::reference);
    check(g64.y, g64.dw, 1e-12);
    for (Backend backend : rnncore_test::cpu_backends()) {
      CAPTURE(static_cast<int>(backend));
      const Result<float> g32 = train_step(as<float>(r), backend);
      check(std::vector<double>(g32.y.begin(), g32.y.end()), std::vector<double>(g32.dw.begin(), g32.dw.end()), 2e-5);
    }
  }
}

TEST_CASE("head grad: dx with an embedding is refused with a detail; no dy gives zero gradients") {
  Run<float> r = as<float>(make_run(Activation::none, false, true, false, Layout::time_major));
  StackSpec st = r.stack;
  PlanOptions opt;
  opt.max_batch = r.batch;
  opt.max_seq_len = r.steps;
  opt.training = true;
  Plan plan;
  REQUIRE(Plan::create(st, opt, &plan) == Status::ok);
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  REQUIRE(plan.pack_weights(r.w.data(), packed.ptr, packed.size) == Status::ok);
  std::vector<float> y(static_cast<std::size_t>(r.batch) * r.steps * st.head.out_features), dx(64), dw(r.w.size(), 5.0f);
  ForwardArgs fa;
  fa.batch = r.batch;
  fa.seq_len = r.steps;
  fa.x = r.ids.data();
  fa.y = y.data();
  fa.reserve = reserve.ptr;
  fa.reserve_bytes = reserve.size;
  REQUIRE(plan.forward(packed.ptr, ws.ptr, ws.size, fa) == Status::ok);
  BackwardArgs ba;
  ba.forward = fa;
  ba.dy = r.dy.data();
  ba.dx = dx.data();
  ba.dweights = dw.data();
  CHECK(plan.backward(packed.ptr, bws.ptr, bws.size, ba) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("dx given for a stack with an embedding") != std::string::npos);
  ba.dx = nullptr;
  ba.dy = nullptr;
  REQUIRE(plan.backward(packed.ptr, bws.ptr, bws.size, ba) == Status::ok);
  for (float v : dw) CHECK(v == 0.0f);
}

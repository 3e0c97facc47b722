// Threaded runs: bit-identical to single-threaded runs for every thread count (each output unit is
// computed by exactly one thread, in the same order), with dropout and lengths; no allocation while
// running; and the pool's contract.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

StackSpec mixed_stack() {
  StackSpec st;
  st.input_size = 11;
  st.num_layers = 3;
  st.dropout = 0.2;
  const Mode modes[3] = {Mode::lstm, Mode::gru, Mode::rnn_tanh};
  const int hidden[3] = {40, 33, 80};
  for (int l = 0; l < 3; ++l) {
    LayerSpec& ls = st.layers[l];
    ls.mode = modes[l];
    ls.hidden_size = hidden[l];
    ls.direction = l == 0 ? Direction::bidirectional : Direction::unidirectional;
    ls.gru_variant = GruVariant::reset_before;
    ls.wrappers[ls.num_wrappers++] = dropout_wrapper(0.9, 0.8, 0.7, l == 1, false, StateFilter::h_and_c);
  }
  return st;
}

}  // namespace

TEST_CASE("threaded runs are bit-identical to single-threaded runs") {
  const StackSpec st = mixed_stack();
  const int T = 7, B = 5;
  Rng rng(31);
  const auto w = random_vector<float>(rng, param_count(st), 0.3);
  const auto x = random_vector<float>(rng, T * B * 11, 1.0);
  const auto h0 = random_vector<float>(rng, state_elements(st, B), 0.5);
  const std::int32_t lengths[B] = {7, 0, 3, 6, 1};
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.x = x.data();
  a.h0 = h0.data();
  a.c0 = h0.data();
  a.seq_lengths = lengths;
  a.run_mode = RunMode::training;
  a.seed = 99;
  a.step = 5;
  PlanOptions o;
  o.max_batch = B;
  o.max_seq_len = T;
  Outputs<float> one;
  REQUIRE(run_forward(st, o, w, a, &one) == Status::ok);
  for (int threads : {2, 3, 4}) {
    INFO("threads " << threads);
    ThreadPool* pool = nullptr;
    REQUIRE(ThreadPool::create(threads, &pool) == Status::ok);
    CHECK(pool->size() == threads);
    o.threads = threads;
    o.thread_pool = pool;
    for (int rep = 0; rep < 3; ++rep) {
      Outputs<float> many;
      REQUIRE(run_forward(st, o, w, a, &many) == Status::ok);
      CHECK(std::memcmp(one.y.data(), many.y.data(), sizeof(float) * one.y.size()) == 0);
      CHECK(std::memcmp(one.hy.data(), many.hy.data(), sizeof(float) * one.hy.size()) == 0);
      CHECK(std::memcmp(one.cy.data(), many.cy.data(), sizeof(float) * one.cy.size()) == 0);
    }
    ThreadPool::destroy(pool);
  }
}

TEST_CASE("threaded runs match the f64 reference on random uniform networks") {
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
  Rng rng(77);
  for (int i = 0; i < 24; ++i) {
    RnnSpec s;
    s.mode = static_cast<Mode>(rng.range(0, 3));
    s.gru_variant = rng.range(0, 1) ? GruVariant::reset_before : GruVariant::reset_after;
    s.input_size = rng.range(1, 70);
    s.hidden_size = rng.range(1, 70);
    s.num_layers = rng.range(1, 3);
    s.direction = rng.range(0, 1) ? Direction::bidirectional : Direction::unidirectional;
    const int T = rng.range(1, 8), B = rng.range(1, 9);
    const auto w = random_vector<float>(rng, param_count(s), 0.4);
    const auto x = random_vector<float>(rng, static_cast<std::size_t>(T) * B * s.input_size, 1.0);
    RnnSpec s64 = s;
    s64.dtype = DType::f64;
    const std::vector<double> w64(w.begin(), w.end()), x64(x.begin(), x.end());
    ForwardArgs a;
    a.batch = B;
    a.seq_len = T;
    PlanOptions o;
    o.max_batch = B;
    o.max_seq_len = T;
    Outputs<double> ref;
    a.x = x64.data();
    REQUIRE(run_forward(s64, o, w64, a, &ref) == Status::ok);
    o.threads = 2;
    o.thread_pool = pool;
    Outputs<float> got;
    a.x = x.data();
    REQUIRE(run_forward(s, o, w, a, &got) == Status::ok);
    CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) < 1e-5);
    CHECK(rel_error(got.hy.data(), ref.hy.data(), ref.hy.size()) < 1e-5);
  }
  ThreadPool::destroy(pool);
}

TEST_CASE("thread options are checked; a Model makes and frees its own pool") {
  RnnSpec s;
  s.input_size = s.hidden_size = 8;
  Plan plan;
  PlanOptions o;
  o.threads = 2;
  CHECK(Plan::create(s, o, &plan) == Status::null_pointer);
  CHECK(std::string(last_error_detail()).find("needs options.thread_pool") != std::string::npos);
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
  o.thread_pool = pool;
  o.threads = 3;
  CHECK(Plan::create(s, o, &plan) == Status::invalid_size);
  o.threads = 0;
  CHECK(Plan::create(s, o, &plan) == Status::invalid_size);
  ThreadPool::destroy(pool);
  CHECK(ThreadPool::create(0, &pool) == Status::invalid_size);
  CHECK(ThreadPool::create(2, nullptr) == Status::null_pointer);

  const std::vector<float> w(param_count(s), 0.1f), x(3 * 8, 1.0f);
  std::vector<float> y(3 * 8);
  o = PlanOptions{};
  o.threads = 2;
  o.max_seq_len = 3;
  for (int i = 0; i < 3; ++i) {  // create, run, destroy repeatedly: threads are joined each time
    Model m;
    REQUIRE(Model::create(s, o, w.data(), &m) == Status::ok);
    ForwardArgs a;
    a.batch = 1;
    a.seq_len = 3;
    a.x = x.data();
    a.y = y.data();
    REQUIRE(m.forward(a) == Status::ok);
  }
}

// Proof that the run path never allocates: every allocation function is replaced by a counting
// wrapper around glibc's own, and forward() runs for every mode, backend and option with the
// counter checked. (Skipped under AddressSanitizer, which owns the allocator.)
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "rnncore/int8.h"
#include "tests/test_util.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define RNNCORE_TEST_COUNTS_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define RNNCORE_TEST_COUNTS_ALLOCATIONS 0
#endif
#endif
#if !defined(RNNCORE_TEST_COUNTS_ALLOCATIONS) && defined(__GLIBC__)
#define RNNCORE_TEST_COUNTS_ALLOCATIONS 1
#endif
#if !defined(RNNCORE_TEST_COUNTS_ALLOCATIONS)
#define RNNCORE_TEST_COUNTS_ALLOCATIONS 0
#endif

namespace {
std::atomic<long> g_allocations{0};
}

#if RNNCORE_TEST_COUNTS_ALLOCATIONS
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) {
  ++g_allocations;
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t m) {
  ++g_allocations;
  return __libc_calloc(n, m);
}
void* realloc(void* p, std::size_t n) {
  ++g_allocations;
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
  ++g_allocations;
  return __libc_memalign(a, n);
}
void* memalign(std::size_t a, std::size_t n) {
  ++g_allocations;
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, std::size_t a, std::size_t n) {
  ++g_allocations;
  *p = __libc_memalign(a, n);
  return *p != nullptr ? 0 : 12;
}
void free(void* p) { __libc_free(p); }
}
#endif

using namespace rnncore;
using namespace rnncore_test;

TEST_CASE("forward makes no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  // The counter works: a plain allocation is seen.
  const long before_probe = g_allocations.load();
  void* volatile probe = std::malloc(16);
  std::free(probe);
  REQUIRE(g_allocations.load() > before_probe);

  int runs = 0;
  const std::vector<Backend> backends = cpu_backends();
  for (Backend backend : backends)
    for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
      for (GruVariant v : {GruVariant::reset_after, GruVariant::reset_before}) {
        if (mode != Mode::gru && v == GruVariant::reset_before) continue;
        RnnSpec s;
        s.mode = mode;
        s.gru_variant = v;
        s.input_size = 9;
        s.hidden_size = 17;
        s.num_layers = 3;
        s.direction = Direction::bidirectional;
        PlanOptions o;
        o.max_batch = 5;
        o.max_seq_len = 6;
        o.backend = backend;
        Plan plan;
        REQUIRE(Plan::create(s, o, &plan) == Status::ok);
        AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
        Rng rng(4);
        const auto w = random_vector<float>(rng, param_count(s), 0.3);
        const auto x = random_vector<float>(rng, 6 * 5 * 9, 1.0);
        const auto h0 = random_vector<float>(rng, 6 * 5 * 17, 1.0);
        std::vector<float> y(6 * 5 * 34), hy(6 * 5 * 17), cy(hy.size());
        const std::int32_t lengths[5] = {6, 0, 3, 1, 6};
        REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
        ForwardArgs a;
        a.batch = 5;
        a.seq_len = 6;
        a.x = x.data();
        a.y = y.data();
        a.h0 = h0.data();
        a.hy = hy.data();
        a.seq_lengths = lengths;
        if (mode == Mode::lstm) {
          a.c0 = h0.data();
          a.cy = cy.data();
        }
        const long before = g_allocations.load();
        const Status st = plan.forward(packed.ptr, ws.ptr, ws.size, a);
        a.layout = Layout::batch_major;
        const Status st2 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
        a.seq_len = 7;  // an error path must not allocate either
        const Status st3 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
        const long after = g_allocations.load();
        CHECK(st == Status::ok);
        CHECK(st2 == Status::ok);
        CHECK(st3 == Status::seq_too_long);
        CHECK(after == before);
        ++runs;
      }
  CHECK(runs == 5 * static_cast<int>(backends.size()));
}

TEST_CASE("an Embedding and a Dense head (every step, last step, softmax, Dense layers before it) make no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  int runs = 0;
  for (Backend backend : cpu_backends())
    for (bool last_step : {false, true})
    for (int pre_head : {0, 2}) {
      StackSpec st;
      st.num_pre_head = pre_head;
      st.pre_head[0] = DenseSpec{7, Activation::relu, false, false, 0.0f, {}, {}, 1.0f};
      st.pre_head[1] = DenseSpec{3, Activation::tanh, false, false, 0.0f, {}, {}, 1.0f};
      st.input_size = 6;
      st.num_layers = 2;
      st.layers[0].hidden_size = 8;
      st.layers[1].mode = Mode::gru;
      st.layers[1].hidden_size = 5;
      st.layers[1].direction = Direction::bidirectional;
      st.embedding.vocab_size = 13;
      st.head.out_features = 4;
      st.head.activation = Activation::softmax;
      st.head.last_step_only = last_step;
      PlanOptions o;
      o.max_batch = 3;
      o.max_seq_len = 5;
      o.backend = backend;
      Plan plan;
      REQUIRE(Plan::create(st, o, &plan) == Status::ok);
      AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
      Rng rng(5);
      const auto w = random_vector<float>(rng, static_cast<std::size_t>(param_count(st)), 0.3);
      std::vector<std::int32_t> ids(15);
      for (auto& id : ids) id = rng.range(0, 12);
      std::vector<float> y(5 * 3 * 4);
      const std::int32_t lengths[3] = {5, 0, 2};
      REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
      ForwardArgs a;
      a.batch = 3;
      a.seq_len = 5;
      a.x = ids.data();
      a.y = y.data();
      a.seq_lengths = lengths;
      const long before = g_allocations.load();
      const Status s1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      a.layout = Layout::batch_major;
      const Status s2 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      ids[7] = 13;  // a refused token id must not allocate either
      const Status s3 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      const long after = g_allocations.load();
      CHECK(s1 == Status::ok);
      CHECK(s2 == Status::ok);
      CHECK(s3 == Status::invalid_size);
      CHECK(after == before);
      ++runs;
    }
  CHECK(runs == 4 * static_cast<int>(cpu_backends().size()));
}

// An integer stack (dtype i8): an int8 Embedding, a bidirectional LSTM (merged by ave: the int8
// ADD and MUL), an LSTM, a Dense with a tanh table and a Dense head with a softmax, on one thread
// and on three. With bidi false layer 0 runs one direction: the step-major walk (each step through
// both layers).
StackSpec int8_stack(bool bidi) {
  StackSpec st;
  st.dtype = DType::i8;
  st.input_size = 4;
  st.input_quant = {0.05f, 3};
  st.num_layers = 2;
  st.embedding.vocab_size = 10;
  for (int l = 0; l < 2; ++l) {
    LayerSpec& ls = st.layers[l];
    ls.hidden_size = l == 0 ? 8 : 6;
    ls.direction = l == 0 && bidi ? Direction::bidirectional : Direction::unidirectional;
    for (Int8LstmQuant& q : ls.int8) {
      for (int g = 0; g < 4; ++g) q.w_scale[g] = q.r_scale[g] = 0.01f;
      q.state = {1.0f / 128, -1};
      q.hidden = q.state;
      q.cell_scale = 1.0f / 2048;
      q.cell_clip = 10.0f;
    }
  }
  if (!bidi) {
    st.layers[0].int8_output = st.layers[0].int8[0].state;
  } else {
    Int8Merge& m = st.layers[0].merge;
    m.mode = MergeMode::ave;
    m.fw = m.bw = st.layers[0].int8[0].state;
    m.sum = {1.0f / 64, 0};
    m.half = {1.0f / 256, -128};
    m.half_value = 0;
    st.layers[0].int8_output = {1.0f / 128, 0};
  }
  st.num_pre_head = 1;
  st.pre_head[0].out_features = 5;
  st.pre_head[0].activation = Activation::tanh;
  st.pre_head[0].int8_w_scale = 0.01f;
  st.pre_head[0].int8_linear = {0.1f, 0};
  st.pre_head[0].int8_output = {1.0f / 128, 0};
  st.head.out_features = 3;
  st.head.activation = Activation::softmax;
  st.head.last_step_only = true;
  st.head.int8_w_scale = 0.01f;
  st.head.int8_linear = {0.1f, 0};
  st.head.int8_output = {1.0f / 256, -128};
  return st;
}

TEST_CASE("an integer stack (int8 Embedding, LSTMs, merge, two Dense, softmax) makes no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  for (bool bidi : {true, false}) {
    CAPTURE(bidi);
    const StackSpec st = int8_stack(bidi);
    Rng rng(9);
    std::vector<std::int8_t> canonical(static_cast<std::size_t>(param_count(st)));
    for (auto& v : canonical) v = static_cast<std::int8_t>(rng.range(-20, 20));
    // The biases and the Dense layers' are int32 and their scales floats: zero them, then set the scales.
    for (int l = 0; l < 2; ++l)
      for (int d = 0; d < num_directions(st.layers[l]); ++d)
        std::memset(&canonical[static_cast<std::size_t>(canonical_offset(st, l, d, ParamKind::input_bias, 0))], 0,
                    16 * static_cast<std::size_t>(st.layers[l].hidden_size));
    const float dense_scale = 0.01f;
    for (int k = 0; k < 2; ++k) {  // pre_head[0], the head
      std::memset(&canonical[static_cast<std::size_t>(canonical_offset(st, k, 0, ParamKind::dense_bias, 0))], 0,
                  4 * static_cast<std::size_t>(k == 0 ? 5 : 3));
      std::memcpy(&canonical[static_cast<std::size_t>(canonical_offset(st, -1 - k, 0, ParamKind::weight_scale, 0))], &dense_scale, 4);
    }
    int runs = 0;
    for (int threads : {1, 3}) {
      ThreadPool* pool = nullptr;
      if (threads > 1) REQUIRE(ThreadPool::create(threads, &pool) == Status::ok);
      PlanOptions o;
      o.max_batch = 3;
      o.max_seq_len = 5;
      o.threads = threads;
      o.thread_pool = pool;
      Plan plan;
      REQUIRE_MESSAGE(Plan::create(st, o, &plan) == Status::ok, last_error_detail());
      AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
      REQUIRE_MESSAGE(plan.pack_weights(canonical.data(), packed.ptr, packed.size) == Status::ok, last_error_detail());
      std::vector<std::int32_t> ids(15);
      for (auto& id : ids) id = rng.range(0, 9);
      std::vector<std::int8_t> y(3 * 3), hy(static_cast<std::size_t>(state_elements(st, 3)));
      std::vector<std::int16_t> cy(hy.size());
      ForwardArgs a;
      a.batch = 3;
      a.seq_len = 5;
      a.x = ids.data();
      a.y = y.data();
      a.hy = hy.data();
      a.cy = cy.data();
      const long before = g_allocations.load();
      const Status s1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      a.layout = Layout::batch_major;
      a.h0 = hy.data();
      a.c0 = cy.data();
      const Status s2 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      const long after = g_allocations.load();
      CHECK(s1 == Status::ok);
      CHECK(s2 == Status::ok);
      CHECK(after == before);
      ThreadPool::destroy(pool);
      ++runs;
    }
    CHECK(runs == 2);
  }
}

TEST_CASE("dropout runs make no heap allocation either") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  StackSpec st;
  st.input_size = 8;
  st.num_layers = 2;
  st.dropout = 0.3;
  for (int l = 0; l < 2; ++l) {
    st.layers[l].mode = l == 0 ? Mode::lstm : Mode::gru;
    st.layers[l].hidden_size = 8;
    st.layers[l].direction = Direction::bidirectional;
    st.layers[l].wrappers[st.layers[l].num_wrappers++] = dropout_wrapper(0.8, 0.7, 0.6, l == 1, l == 1);
  }
  st.layers[1].hidden_size = 16;
  st.layers[1].direction = Direction::unidirectional;
  st.layers[1].wrappers[st.layers[1].num_wrappers++] = residual_wrapper();
  // Layer 0 has every LSTM extension: 12 cells projected to 8 units, peepholes, both clips.
  st.layers[0].hidden_size = 12;
  st.layers[0].proj_size = 8;
  st.layers[0].peepholes = true;
  st.layers[0].cell_clip = 0.5;
  st.layers[0].proj_clip = 0.3;
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
  const int variants = cpu_backends().size() == 2 ? 3 : 1;
  for (int variant = 0; variant < variants; ++variant) {  // reference, SIMD, SIMD on two threads
    PlanOptions o;
    o.max_batch = 3;
    o.max_seq_len = 5;
    o.backend = variant == 0 ? Backend::reference : Backend::simd;
    o.threads = variant == 2 ? 2 : 1;
    o.thread_pool = pool;
    Plan plan;
    REQUIRE(Plan::create(st, o, &plan) == Status::ok);
    AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
    Rng rng(8);
    const auto w = random_vector<float>(rng, param_count(st), 0.3);
    const auto x = random_vector<float>(rng, 5 * 3 * 8, 1.0);
    std::vector<float> y(5 * 3 * 16), hy(state_elements(st, 3)), cy(cell_state_elements(st, 3));
    const std::int32_t lengths[3] = {5, 0, 2};
    const std::uint32_t ids[3] = {7, 8, 9};
    REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
    ForwardArgs a;
    a.batch = 3;
    a.seq_len = 5;
    a.x = x.data();
    a.y = y.data();
    a.hy = hy.data();
    a.cy = cy.data();
    a.seq_lengths = lengths;
    a.row_ids = ids;
    a.run_mode = RunMode::training;
    a.seed = 3;
    const long before = g_allocations.load();
    const Status st1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
    a.run_mode = RunMode::monte_carlo;
    const Status st2 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
    const long after = g_allocations.load();
    CHECK(st1 == Status::ok);
    CHECK(st2 == Status::ok);
    CHECK(after == before);
  }
  ThreadPool::destroy(pool);
}

TEST_CASE("training forward and backward make no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  StackSpec st;
  st.input_size = 6;
  st.num_layers = 3;
  st.dropout = 0.3;
  const Mode modes[3] = {Mode::lstm, Mode::gru, Mode::rnn_relu};
  for (int l = 0; l < 3; ++l) {
    st.layers[l].mode = modes[l];
    st.layers[l].gru_variant = GruVariant::reset_before;
    st.layers[l].hidden_size = 8;
    st.layers[l].direction = l == 0 ? Direction::bidirectional : Direction::unidirectional;
    st.layers[l].wrappers[st.layers[l].num_wrappers++] = dropout_wrapper(0.8, 0.7, 0.6, l == 1, l == 1, StateFilter::h_and_c);
  }
  st.layers[2].wrappers[st.layers[2].num_wrappers++] = residual_wrapper();
  st.layers[0].proj_size = 5;  // the LSTM has every extension
  st.layers[0].peepholes = true;
  st.layers[0].cell_clip = 0.5;
  st.layers[0].proj_clip = 0.3;
  for (Backend backend : cpu_backends())
  for (DType wd : {DType::f32, DType::f16, DType::bf16}) {  // SIMD: f16 / bf16 weight storage too, where it runs
    if (wd != DType::f32 && backend != Backend::simd) continue;
    CAPTURE(to_string(wd));
    PlanOptions o;
    o.max_batch = 3;
    o.max_seq_len = 5;
    o.backend = backend;
    o.training = true;
    o.weight_dtype = wd;
    Plan plan;
    const Status made = Plan::create(st, o, &plan);
    if (wd != DType::f32 && made == Status::unsupported) continue;  // no AVX2 (tests/test_train.cpp asserts the detail)
    REQUIRE(made == Status::ok);
    AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
        reserve(plan.reserve_bytes());
    Rng rng(9);
    const auto w = random_vector<float>(rng, param_count(st), 0.3);
    const auto x = random_vector<float>(rng, 5 * 3 * 6, 1.0);
    const auto dy = random_vector<float>(rng, 5 * 3 * 8, 1.0);
    const auto dhy = random_vector<float>(rng, state_elements(st, 3), 1.0);
    const auto dcy = random_vector<float>(rng, cell_state_elements(st, 3), 1.0);
    std::vector<float> y(5 * 3 * 8), hy(state_elements(st, 3)), cy(dcy.size()), dx(x.size()), dh0(hy.size()),
        dc0(dcy.size()), dw(w.size());
    const std::int32_t lengths[3] = {5, 0, 2};
    REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
    ForwardArgs a;
    a.batch = 3;
    a.seq_len = 5;
    a.x = x.data();
    a.y = y.data();
    a.hy = hy.data();
    a.cy = cy.data();
    a.seq_lengths = lengths;
    a.run_mode = RunMode::training;
    a.seed = 3;
    a.reserve = reserve.ptr;
    a.reserve_bytes = reserve.size;
    BackwardArgs b;
    b.forward = a;
    b.dy = dy.data();
    b.dhy = dhy.data();
    b.dcy = dcy.data();
    b.dx = dx.data();
    b.dh0 = dh0.data();
    b.dc0 = dc0.data();
    b.dweights = dw.data();
    const long before = g_allocations.load();
    const Status s1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
    const Status s2 = plan.backward(packed.ptr, bws.ptr, bws.size, b);
    b.accumulate = true;
    const Status s3 = plan.backward(packed.ptr, bws.ptr, bws.size, b);
    b.forward.step = 9;  // an error path must not allocate either
    const Status s4 = plan.backward(packed.ptr, bws.ptr, bws.size, b);
    const long after = g_allocations.load();
    CHECK(s1 == Status::ok);
    CHECK(s2 == Status::ok);
    CHECK(s3 == Status::ok);
    CHECK(s4 == Status::invalid_size);
    CHECK(after == before);
  }
}

TEST_CASE("runs with per-step state resets make no heap allocation (inference, training forward and backward)") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  StackSpec st;
  st.input_size = 6;
  st.num_layers = 3;
  st.dropout = 0.3;
  const Mode modes[3] = {Mode::lstm, Mode::gru, Mode::rnn_tanh};
  for (int l = 0; l < 3; ++l) {
    st.layers[l].mode = modes[l];
    st.layers[l].hidden_size = 8;
    st.layers[l].wrappers[st.layers[l].num_wrappers++] = dropout_wrapper(0.8, 0.7, 0.6, l == 1, l == 1, StateFilter::h_and_c);
  }
  const std::uint8_t resets[5 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1};
  for (Backend backend : cpu_backends())
    for (bool training : {false, true}) {
      PlanOptions o;
      o.max_batch = 3;
      o.max_seq_len = 5;
      o.backend = backend;
      o.training = training;
      Plan plan;
      REQUIRE(Plan::create(st, o, &plan) == Status::ok);
      AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()),
          bws(training ? plan.backward_workspace_bytes() : 64), reserve(training ? plan.reserve_bytes() : 64);
      Rng rng(9);
      const auto w = random_vector<float>(rng, param_count(st), 0.3);
      const auto x = random_vector<float>(rng, 5 * 3 * 6, 1.0);
      const auto dy = random_vector<float>(rng, 5 * 3 * 8, 1.0);
      const auto h0 = random_vector<float>(rng, state_elements(st, 3), 1.0);
      std::vector<float> y(5 * 3 * 8), hy(h0.size()), cy(h0.size()), dx(x.size()), dh0(h0.size()), dc0(h0.size()),
          dw(w.size());
      const std::int32_t lengths[3] = {5, 0, 3};
      REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
      ForwardArgs a;
      a.batch = 3;
      a.seq_len = 5;
      a.x = x.data();
      a.y = y.data();
      a.h0 = h0.data();
      a.c0 = h0.data();
      a.hy = hy.data();
      a.cy = cy.data();
      a.seq_lengths = lengths;
      a.resets = resets;
      a.run_mode = RunMode::training;
      a.seed = 3;
      if (training) {
        a.reserve = reserve.ptr;
        a.reserve_bytes = reserve.size;
      }
      BackwardArgs b;
      b.forward = a;
      b.dy = dy.data();
      b.dx = dx.data();
      b.dh0 = dh0.data();
      b.dc0 = dc0.data();
      b.dweights = dw.data();
      const long before = g_allocations.load();
      const Status s1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      const Status s2 = training ? plan.backward(packed.ptr, bws.ptr, bws.size, b) : Status::ok;
      const long after = g_allocations.load();
      CHECK(s1 == Status::ok);
      CHECK(s2 == Status::ok);
      CHECK(after == before);
    }
}

TEST_CASE("the int8 LSTM, Dense layer, table activation and softmax (C API) make no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  const int I = 19, H = 37, O = 5, B = 3, T = 7;
  Rng rng(8);
  std::vector<std::int8_t> w(4 * H * I), r(4 * H * H), fw(O * H), x(B * T * I), y(B * T * H), h(B * H), fy(B * O);
  std::vector<std::int16_t> c(B * H, 0);
  for (auto& v : w) v = static_cast<std::int8_t>(rng.range(-127, 127));
  for (auto& v : r) v = static_cast<std::int8_t>(rng.range(-127, 127));
  for (auto& v : fw) v = static_cast<std::int8_t>(rng.range(-127, 127));
  for (auto& v : x) v = static_cast<std::int8_t>(rng.range(-128, 127));
  rnncore_int8_lstm_quantization q{};
  q.input_scale = 0.02f;
  q.input_zp = -3;
  for (int g = 0; g < 4; ++g) q.w_scale[g] = q.r_scale[g] = 0.004f;
  q.state_scale = q.hidden_scale = 1.0f / 128;
  q.state_zp = q.hidden_zp = 2;
  q.cell_scale = 1.0f / 2048;
  const std::int8_t* wg[4] = {&w[0], &w[H * I], &w[2 * H * I], &w[3 * H * I]};
  const std::int8_t* rg[4] = {&r[0], &r[H * H], &r[2 * H * H], &r[3 * H * H]};
  std::vector<std::int32_t> folded(rnncore_int8_lstm_bias_words(H)), fbias(O);
  std::vector<float> fscale(O);
  std::vector<std::int8_t> scratch(rnncore_int8_lstm_scratch_bytes(H));
  rnncore_int8_lstm lstm;
  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wg, rg, nullptr, folded.data(), folded.size(), &lstm) == RNNCORE_OK);
  // The same weights interleaved (int32 words: 4-byte aligned), which run on x and h widened in scratch.
  const std::size_t wb = RNNCORE_INT8_INTERLEAVED4_BYTES(H, I), rb = RNNCORE_INT8_INTERLEAVED4_BYTES(H, H);
  std::vector<std::int32_t> w_words(wb), r_words(rb);  // wb words: the 4 · wb bytes of 4 gates
  auto* wi = reinterpret_cast<std::int8_t*>(w_words.data());
  auto* ri = reinterpret_cast<std::int8_t*>(r_words.data());
  for (int g = 0; g < 4; ++g) {
    REQUIRE(rnncore_int8_interleave4(wg[g], H, I, wi + g * wb) == RNNCORE_OK);
    REQUIRE(rnncore_int8_interleave4(rg[g], H, H, ri + g * rb) == RNNCORE_OK);
  }
  const std::int8_t* wig[4] = {wi, wi + wb, wi + 2 * wb, wi + 3 * wb};
  const std::int8_t* rig[4] = {ri, ri + rb, ri + 2 * rb, ri + 3 * rb};
  rnncore_int8_lstm_quantization qi = q;
  qi.weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4;
  rnncore_int8_lstm panels;
  REQUIRE(rnncore_int8_lstm_prepare(&qi, I, H, wig, rig, nullptr, folded.data(), folded.size(), &panels) == RNNCORE_OK);
  std::vector<std::int8_t> panel_scratch(rnncore_int8_lstm_run_scratch_bytes(&panels)), yi(y.size()), hi(h.size());
  std::vector<std::int16_t> ci(c.size(), 0);
  const float ws = 0.01f;
  rnncore_int8_dense_quantization dq{};
  dq.input_scale = q.state_scale;
  dq.input_zp = q.state_zp;
  dq.w_scales = &ws;
  dq.w_scale_count = 1;
  dq.output_scale = 0.05f;
  dq.relu = 1;
  rnncore_int8_dense dense;
  REQUIRE(rnncore_int8_dense_prepare(&dq, H, O, fw.data(), nullptr, fbias.data(), fscale.data(), &dense) == RNNCORE_OK);
  std::int8_t table[256];
  REQUIRE(rnncore_int8_activation_table(RNNCORE_INT8_TANH, 0.05f, 0, 1.0f / 128, 0, table) == RNNCORE_OK);
  static rnncore_int8_softmax softmax;
  REQUIRE(rnncore_int8_softmax_prepare(0.05f, 1.0f, 1.0f / 256, -128, &softmax) == RNNCORE_OK);

  const long before = g_allocations.load();
  const rnncore_status s1 = rnncore_int8_lstm_run(&lstm, B, T, x.data(), y.data(), h.data(), c.data(), scratch.data(),
                                                  scratch.size());
  const rnncore_status s2 = rnncore_int8_dense_run(&dense, B, h.data(), fy.data());
  const rnncore_status s4 = rnncore_int8_lookup(table, static_cast<std::int32_t>(fy.size()), fy.data(), fy.data());
  const rnncore_status s5 = rnncore_int8_softmax_run(&softmax, B, O, fy.data(), fy.data());
  // an error path must not allocate either
  const rnncore_status s3 = rnncore_int8_lstm_run(&lstm, B, T, x.data(), y.data(), h.data(), c.data(), scratch.data(), 1);
  const rnncore_status s6 = rnncore_int8_lstm_run(&panels, B, T, x.data(), yi.data(), hi.data(), ci.data(),
                                                  panel_scratch.data(), panel_scratch.size());
  const rnncore_status s7 = rnncore_int8_lstm_run(&panels, B, T, x.data(), yi.data(), hi.data(), ci.data(),
                                                  panel_scratch.data(), scratch.size());  // too small: refused
  const long after = g_allocations.load();
  CHECK(s1 == RNNCORE_OK);
  CHECK(s2 == RNNCORE_OK);
  CHECK(s3 == RNNCORE_ERR_BUFFER_TOO_SMALL);
  CHECK(s4 == RNNCORE_OK);
  CHECK(s5 == RNNCORE_OK);
  CHECK(s6 == RNNCORE_OK);
  CHECK(s7 == RNNCORE_ERR_BUFFER_TOO_SMALL);
  CHECK(yi == y);  // the interleaved run computed the same steps
  CHECK(after == before);
}

TEST_CASE("training through an Embedding and a Dense head (every step, last step, softmax, Dense layers before it) makes no heap allocation") {
  if (!RNNCORE_TEST_COUNTS_ALLOCATIONS) {
    MESSAGE("allocation counting is off in this build (sanitizer or non-glibc): skipped");
    return;
  }
  for (bool last_step : {false, true})
    for (int pre_head : {0, 2})
    for (Backend backend : cpu_backends()) {
      StackSpec st;
      st.input_size = 6;
      st.num_layers = 2;
      st.layers[0].mode = Mode::lstm;
      st.layers[0].hidden_size = 8;
      st.layers[1].mode = Mode::gru;
      st.layers[1].hidden_size = 5;
      st.layers[1].direction = Direction::bidirectional;
      st.embedding.vocab_size = 13;
      st.head = DenseSpec();
      st.head.out_features = 4;
      st.head.activation = Activation::softmax;
      st.head.last_step_only = last_step;
      st.num_pre_head = pre_head;
      st.pre_head[0].out_features = 7;
      st.pre_head[0].activation = Activation::relu;
      st.pre_head[1].out_features = 3;
      st.pre_head[1].activation = Activation::tanh;
      PlanOptions o;
      o.max_batch = 3;
      o.max_seq_len = 5;
      o.backend = backend;
      o.training = true;
      Plan plan;
      REQUIRE(Plan::create(st, o, &plan) == Status::ok);
      AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
          reserve(plan.reserve_bytes());
      Rng rng(9);
      const auto w = random_vector<float>(rng, param_count(st), 0.3);
      const auto dy = random_vector<float>(rng, 5 * 3 * 4, 1.0);
      std::vector<std::int32_t> ids(5 * 3);
      for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i * 5 % 13);
      std::vector<float> y(5 * 3 * 4), dw(w.size());
      const std::int32_t lengths[3] = {5, 0, 2};
      REQUIRE(plan.pack_weights(w.data(), packed.ptr, packed.size) == Status::ok);
      ForwardArgs a;
      a.batch = 3;
      a.seq_len = 5;
      a.x = ids.data();
      a.y = y.data();
      a.seq_lengths = lengths;
      a.run_mode = RunMode::training;
      a.reserve = reserve.ptr;
      a.reserve_bytes = reserve.size;
      BackwardArgs b;
      b.forward = a;
      b.dy = dy.data();
      b.dweights = dw.data();
      const long before = g_allocations.load();
      const Status s1 = plan.forward(packed.ptr, ws.ptr, ws.size, a);
      const Status s2 = plan.backward(packed.ptr, bws.ptr, bws.size, b);
      b.dx = dw.data();  // an error path (token ids have no gradient) must not allocate either
      const Status s3 = plan.backward(packed.ptr, bws.ptr, bws.size, b);
      const long after = g_allocations.load();
      CHECK(s1 == Status::ok);
      CHECK(s2 == Status::ok);
      CHECK(s3 == Status::unsupported);
      CHECK(after == before);
    }
}

// bf16 and f16 weight storage against the f64 reference, on every instruction set (SSE2 and NEON
// convert with integer operations, AVX2 and AVX-512 with F16C; checkkernels checks the conversions).
// Tolerances (relative error, ∞-norm) come from measurement: f16 weights ~5e-4, bf16 weights and
// inputs ~5e-3 on 50-step, 2-layer runs; the checks allow 4× that. The converted bf16 path (AVX2)
// and the vdpbf16ps path (AVX-512 BF16) round the same inputs, so they agree closely too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

struct Run {
  Isa isa;
  DType weights;
  Outputs<float> out;
};

}  // namespace

TEST_CASE("bf16 and f16 weights stay within their stated error of the f64 reference") {
  Rng rng(2024);
  ThreadPool* pool = nullptr;
  REQUIRE(ThreadPool::create(2, &pool) == Status::ok);
  int checked = 0;
  for (int i = 0; i < 16; ++i) {
    StackSpec st;
    st.input_size = rng.range(1, 70);
    st.num_layers = rng.range(1, 2);
    st.dropout = i % 3 == 0 ? 0.2 : 0.0;
    for (int l = 0; l < st.num_layers; ++l) {
      LayerSpec& ls = st.layers[l];
      ls.mode = static_cast<Mode>(rng.range(0, 3));
      ls.gru_variant = rng.range(0, 1) ? GruVariant::reset_before : GruVariant::reset_after;
      ls.hidden_size = rng.range(1, 90);
      ls.direction = rng.range(0, 1) ? Direction::bidirectional : Direction::unidirectional;
      if (i % 2 == 0) ls.wrappers[ls.num_wrappers++] = dropout_wrapper(0.9, 0.8, 0.7);
    }
    const int T = rng.range(1, 30), B = rng.range(1, 9);
    // PyTorch's initialisation, U(±1/√H): the error of rounded weights is only bounded for networks
    // that do not amplify perturbations (large recurrent gains make any RNN chaotic).
    int widest = 1;
    for (int l = 0; l < st.num_layers; ++l) widest = std::max(widest, st.layers[l].hidden_size);
    const auto w = random_vector<float>(rng, param_count(st), 1.0 / std::sqrt(static_cast<double>(widest)));
    const auto x = random_vector<float>(rng, static_cast<std::size_t>(T) * B * st.input_size, 1.0);
    std::vector<std::int32_t> lengths(B);
    for (auto& l : lengths) l = rng.range(0, T);
    StackSpec st64 = st;
    st64.dtype = DType::f64;
    const std::vector<double> w64(w.begin(), w.end()), x64(x.begin(), x.end());
    ForwardArgs a;
    a.batch = B;
    a.seq_len = T;
    a.seq_lengths = lengths.data();
    a.run_mode = RunMode::training;
    a.seed = 5;
    PlanOptions o;
    o.max_batch = B;
    o.max_seq_len = T;
    o.backend = Backend::reference;
    Outputs<double> ref;
    a.x = x64.data();
    REQUIRE(run_forward(st64, o, w64, a, &ref) == Status::ok);
    a.x = x.data();
    o.backend = Backend::simd;
    std::vector<Run> bf16_runs;
    for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon})
      for (DType wd : {DType::f16, DType::bf16}) {
        o.max_isa = isa;
        o.weight_dtype = wd;
        o.threads = i % 2 == 0 ? 2 : 1;
        o.thread_pool = pool;
        Plan probe;
        if (Plan::create(st, o, &probe) != Status::ok || probe.isa() != isa) continue;  // not on this machine
        INFO("case " << i << " isa " << std::string(to_string(isa)) << " weights " << std::string(to_string(wd)));
        Run r{isa, wd, {}};
        REQUIRE(run_forward(st, o, w, a, &r.out) == Status::ok);
        const double tol = wd == DType::f16 ? 2e-3 : 2e-2;
        CHECK(rel_error(r.out.y.data(), ref.y.data(), ref.y.size()) < tol);
        CHECK(rel_error(r.out.hy.data(), ref.hy.data(), ref.hy.size()) < tol);
        for (std::size_t e = 0; e < ref.y.size(); ++e)  // the same masks: dropped exactly where the reference drops
          if (ref.y[e] == 0.0 && st.layers[st.num_layers - 1].mode != Mode::rnn_relu) REQUIRE(r.out.y[e] == 0.0f);
        ++checked;
        if (wd == DType::bf16 && isa != Isa::sse2) bf16_runs.push_back(r);  // SSE2's math has no FMA: checked against f64 only
      }
    for (std::size_t k = 1; k < bf16_runs.size(); ++k)
      CHECK(rel_error(bf16_runs[k].out.y.data(), bf16_runs[0].out.y.data(), bf16_runs[0].out.y.size()) < 1e-4);
  }
  MESSAGE("low-precision runs checked: " << checked);
  ThreadPool::destroy(pool);
}

TEST_CASE("low-precision weights need the SIMD backend (any instruction set)") {
  RnnSpec s;
  s.input_size = s.hidden_size = 8;
  Plan plan;
  PlanOptions o;
  o.weight_dtype = DType::bf16;
  o.backend = Backend::reference;
  CHECK(Plan::create(s, o, &plan) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("weight_dtype bf16 needs the SIMD backend") != std::string::npos);
  o.backend = Backend::simd;
  o.max_isa = Isa::sse2;  // SSE2 and NEON read them by integer conversions; a non-x86 machine has no SSE2
  const Status sse2 = Plan::create(s, o, &plan);
  CHECK((sse2 == Status::ok || sse2 == Status::backend_unavailable));
  s.dtype = DType::f64;
  o.backend = Backend::auto_select;
  o.max_isa = Isa::best;
  CHECK(Plan::create(s, o, &plan) == Status::unsupported);
}

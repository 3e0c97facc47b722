// Every SIMD path against the scalar reference (the specification), on random shapes and options.
// The reference runs in f64; each instruction set available here is forced in turn with max_isa.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

struct Case {
  RnnSpec spec;
  int T, B;
  bool lengths, initial, batch_major;
};

Case random_case(Rng& rng) {
  static const Mode kModes[] = {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu};
  static const int kSizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 48, 64, 65};
  Case c;
  c.spec.mode = kModes[rng.range(0, 3)];
  c.spec.gru_variant = rng.range(0, 1) ? GruVariant::reset_before : GruVariant::reset_after;
  c.spec.input_size = kSizes[rng.range(0, 14)];
  c.spec.hidden_size = kSizes[rng.range(0, 14)];
  c.spec.num_layers = rng.range(1, 3);
  c.spec.direction = rng.range(0, 1) ? Direction::bidirectional : Direction::unidirectional;
  c.spec.input_mode = rng.range(0, 3) == 0 ? InputMode::auto_select : InputMode::linear;
  c.T = rng.range(1, 9);
  c.B = rng.range(1, 13);
  c.lengths = rng.range(0, 1);
  c.initial = rng.range(0, 1);
  c.batch_major = rng.range(0, 1);
  return c;
}

// f64 reference result of a case with the f32-rounded inputs.
void check_case(const Case& c, std::uint64_t seed, Isa isa) {
  Rng rng(seed);
  RnnSpec s32 = c.spec;
  s32.dtype = DType::f32;
  RnnSpec s64 = c.spec;
  s64.dtype = DType::f64;
  const std::size_t D = num_directions(s32), H = s32.hidden_size, I = s32.input_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(H));
  const auto w32 = random_vector<float>(rng, param_count(s32), scale);
  const auto x32 = random_vector<float>(rng, static_cast<std::size_t>(c.T) * c.B * I, 1.0);
  const auto h32 = random_vector<float>(rng, s32.num_layers * D * c.B * H, 0.5);
  const auto c32 = random_vector<float>(rng, s32.num_layers * D * c.B * H, 0.5);
  std::vector<std::int32_t> lengths(c.B);
  for (auto& l : lengths) l = rng.range(0, c.T);
  const std::vector<double> w64(w32.begin(), w32.end()), x64(x32.begin(), x32.end()), h64(h32.begin(), h32.end()),
      c64(c32.begin(), c32.end());

  ForwardArgs a;
  a.batch = c.B;
  a.seq_len = c.T;
  a.layout = c.batch_major ? Layout::batch_major : Layout::time_major;
  a.seq_lengths = c.lengths ? lengths.data() : nullptr;
  PlanOptions opt;
  opt.max_batch = c.B + 2;
  opt.max_seq_len = c.T + 1;

  Outputs<double> ref;
  opt.backend = Backend::reference;
  a.x = x64.data();
  a.h0 = c.initial ? h64.data() : nullptr;
  a.c0 = c.initial && s64.mode == Mode::lstm ? c64.data() : nullptr;
  REQUIRE(run_forward(s64, opt, w64, a, &ref) == Status::ok);

  Outputs<float> got;
  opt.backend = Backend::simd;
  opt.max_isa = isa;
  a.x = x32.data();
  a.h0 = c.initial ? h32.data() : nullptr;
  a.c0 = c.initial && s32.mode == Mode::lstm ? c32.data() : nullptr;
  REQUIRE(run_forward(s32, opt, w32, a, &got) == Status::ok);

  char what[200];
  std::snprintf(what, sizeof what, "%s %s I=%d H=%d L=%d %s T=%d B=%d len=%d h0=%d bm=%d skip=%d isa=%s",
                to_string(s32.mode), to_string(s32.gru_variant), s32.input_size, s32.hidden_size, s32.num_layers,
                D == 2 ? "bi" : "uni", c.T, c.B, c.lengths, c.initial, c.batch_major, uses_skip_input(s32),
                to_string(isa));
  INFO(what);
  // f32 accumulation over at most ~200 terms of size ≤ 1: 1e-5 leaves a wide margin.
  CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) < 1e-5);
  CHECK(rel_error(got.hy.data(), ref.hy.data(), ref.hy.size()) < 1e-5);
  if (s32.mode == Mode::lstm) CHECK(rel_error(got.cy.data(), ref.cy.data(), ref.cy.size()) < 1e-5);
}

}  // namespace

TEST_CASE("every SIMD path matches the f64 reference on random shapes") {
  const auto isas = isas_here();
  MESSAGE("instruction sets tested: " << isas.size());
  if (isas.empty()) {
    // No SIMD path here (a build without SIMD kernels, a CPU without their instruction sets, or
    // RNNCORE_MAX_ISA=none): then the SIMD backend must refuse, not run something else.
    RnnSpec spec;
    spec.input_size = spec.hidden_size = 4;
    PlanOptions opt;
    opt.backend = Backend::simd;
    Plan plan;
    CHECK(Plan::create(spec, opt, &plan) == Status::backend_unavailable);
    MESSAGE("no SIMD path to compare here; the SIMD backend refuses: " << std::string(last_error_detail()));
    return;
  }
  for (Isa isa : isas) {
    Rng rng(1234);
    for (int i = 0; i < 60; ++i) check_case(random_case(rng), 1000 + i, isa);
  }
}

TEST_CASE("the f32 reference matches the f64 reference") {
  Rng rng(99);
  for (int i = 0; i < 20; ++i) {
    Case c = random_case(rng);
    RnnSpec s32 = c.spec, s64 = c.spec;
    s64.dtype = DType::f64;
    Rng data(7 + i);
    const auto w32 = random_vector<float>(data, param_count(s32), 0.3);
    const auto x32 = random_vector<float>(data, static_cast<std::size_t>(c.T) * c.B * s32.input_size, 1.0);
    const std::vector<double> w64(w32.begin(), w32.end()), x64(x32.begin(), x32.end());
    ForwardArgs a;
    a.batch = c.B;
    a.seq_len = c.T;
    PlanOptions opt;
    opt.max_batch = c.B;
    opt.max_seq_len = c.T;
    opt.backend = Backend::reference;
    Outputs<double> ref;
    Outputs<float> got;
    a.x = x64.data();
    REQUIRE(run_forward(s64, opt, w64, a, &ref) == Status::ok);
    a.x = x32.data();
    REQUIRE(run_forward(s32, opt, w32, a, &got) == Status::ok);
    CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) < 1e-5);
  }
}

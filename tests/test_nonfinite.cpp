// NaN and infinities in inputs, initial states and weights: every CPU path gives NaN exactly where
// the reference backend (the specification) does, and the same saturated values for ±Inf and huge
// finite inputs. Bad sensor data must never come out as believable numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Site { x, h0, c0, weight };

struct Poison {
  Site site;
  float value;
  const char* name;
};

struct Run {
  std::vector<float> y, hy, cy;
};

Run run(const RnnSpec& spec, PlanOptions opt, const std::vector<float>& w, const std::vector<float>& x,
        const std::vector<float>& h0, const std::vector<float>& c0, int T, int B) {
  Model model;
  REQUIRE(Model::create(spec, opt, w.data(), &model) == Status::ok);
  const int out = num_directions(spec) * (spec.proj_size > 0 ? spec.proj_size : spec.hidden_size);
  Run r;
  r.y.assign(static_cast<std::size_t>(T) * B * out, -7.0f);
  r.hy.assign(h0.size(), -7.0f);
  r.cy.assign(c0.size(), -7.0f);
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.x = x.data();
  a.h0 = h0.data();
  a.c0 = spec.mode == Mode::lstm ? c0.data() : nullptr;
  a.y = r.y.data();
  a.hy = r.hy.data();
  a.cy = spec.mode == Mode::lstm ? r.cy.data() : nullptr;
  REQUIRE(model.forward(a) == Status::ok);
  if (spec.mode != Mode::lstm) r.cy.clear();
  return r;
}

// Same NaN positions, same infinities, finite values within 1e-4 of the largest finite reference value.
void check_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  INFO(std::string(what));
  REQUIRE(got.size() == want.size());
  double scale = 1.0;
  for (float v : want)
    if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  std::size_t nan_mismatch = 0, inf_mismatch = 0, far = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) ++nan_mismatch;
    else if (std::isinf(want[i]) || std::isinf(got[i])) inf_mismatch += got[i] != want[i];
    else if (!std::isnan(want[i]) && std::fabs(static_cast<double>(got[i]) - want[i]) > 1e-4 * scale) ++far;
  }
  CHECK(nan_mismatch == 0);
  CHECK(inf_mismatch == 0);
  CHECK(far == 0);
}

// check_same on every output of a run.
void check_run(const Run& got, const Run& want, const char* what) {
  check_same(got.y, want.y, what);
  check_same(got.hy, want.hy, what);
  check_same(got.cy, want.cy, what);
}

}  // namespace

TEST_CASE("NaN and Inf propagate on every CPU path exactly as on the reference") {
  const Poison poisons[] = {
      {Site::x, kNaN, "NaN in x"},          {Site::h0, kNaN, "NaN in h0"},    {Site::c0, kNaN, "NaN in c0"},
      {Site::weight, kNaN, "NaN weight"},   {Site::x, kInf, "+Inf in x"},     {Site::x, -kInf, "-Inf in x"},
      {Site::x, 1e30f, "1e30 in x"},        {Site::x, -1e30f, "-1e30 in x"},  {Site::h0, kInf, "+Inf in h0"},
      {Site::weight, -kInf, "-Inf weight"},
  };
  const std::vector<Isa> isas = isas_here();
  if (isas.empty()) {  // the reference is what the SIMD paths are compared with: nothing to compare
    MESSAGE("no SIMD instruction set here (a build without kernels, or RNNCORE_MAX_ISA=none): not checked");
    return;
  }
  const int T = 5, B = 3;
  int nan_cases = 0;
  for (Mode mode : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu}) {
    for (GruVariant variant : {GruVariant::reset_after, GruVariant::reset_before}) {
      if (mode != Mode::gru && variant == GruVariant::reset_before) continue;
      RnnSpec spec;
      spec.mode = mode;
      spec.gru_variant = variant;
      spec.input_size = 5;
      spec.hidden_size = 9;
      spec.num_layers = 2;
      spec.direction = Direction::bidirectional;
      Rng rng(17 + static_cast<int>(mode) * 3 + static_cast<int>(variant));
      const std::size_t states = static_cast<std::size_t>(2 * 2 * B * spec.hidden_size);
      const auto w0 = random_vector<float>(rng, param_count(spec), 0.4);
      const auto x0 = random_vector<float>(rng, static_cast<std::size_t>(T) * B * spec.input_size, 1.0);
      const auto h00 = random_vector<float>(rng, states, 0.5);
      const auto c00 = random_vector<float>(rng, states, 0.5);
      for (const Poison& p : poisons) {
        if (p.site == Site::c0 && mode != Mode::lstm) continue;
        std::vector<float> w = w0, x = x0, h0 = h00, c0 = c00;
        switch (p.site) {
          case Site::x: x[(1 * B + 1) * spec.input_size + 2] = p.value; break;  // t=1, row 1, feature 2
          case Site::h0: h0[1 * B * spec.hidden_size + 2 * spec.hidden_size + 3] = p.value; break;
          case Site::c0: c0[2 * B * spec.hidden_size + 0 * spec.hidden_size + 4] = p.value; break;
          case Site::weight: w[w.size() / 3] = p.value; break;
        }
        PlanOptions opt;
        opt.max_batch = B;
        opt.max_seq_len = T;
        opt.backend = Backend::reference;
        const Run want = run(spec, opt, w, x, h0, c0, T, B);
        std::size_t nans = 0;
        for (float v : want.y) nans += std::isnan(v);
        nan_cases += nans > 0;
        if (std::isnan(p.value)) CHECK(nans > 0);  // the case tests something
        for (Isa isa : isas) {
          for (bool training : {false, true}) {
            char what[160];
            std::snprintf(what, sizeof what, "%s %s, %s, isa %s%s", to_string(mode), to_string(variant), p.name,
                          to_string(isa), training ? ", training forward" : "");
            opt.backend = Backend::simd;
            opt.max_isa = isa;
            opt.training = training;
            check_run(run(spec, opt, w, x, h0, c0, T, B), want, what);
          }
        }
      }
    }
  }
  CHECK(nan_cases >= 5 * 4);
}

TEST_CASE("NaN and Inf through LSTM peepholes, clips and a projection as on the reference") {
  // Clips keep NaN (TF's clip_by_value does) and bound infinities; the projection mixes a NaN into
  // every unit of h.
  const std::vector<Isa> isas = isas_here();
  if (isas.empty()) {  // the reference is what the SIMD paths are compared with: nothing to compare
    MESSAGE("no SIMD instruction set here (a build without kernels, or RNNCORE_MAX_ISA=none): not checked");
    return;
  }
  const int T = 4, B = 3;
  RnnSpec spec;
  spec.input_size = 5;
  spec.hidden_size = 9;
  spec.proj_size = 4;
  spec.peepholes = true;
  spec.cell_clip = 0.5;
  spec.proj_clip = 0.3;
  spec.num_layers = 2;
  spec.direction = Direction::bidirectional;
  Rng rng(151);
  const auto w0 = random_vector<float>(rng, param_count(spec), 0.4);
  const auto x0 = random_vector<float>(rng, static_cast<std::size_t>(T) * B * spec.input_size, 1.0);
  const auto h00 = random_vector<float>(rng, static_cast<std::size_t>(state_elements(to_stack(spec), B)), 0.5);
  const auto c00 = random_vector<float>(rng, static_cast<std::size_t>(cell_state_elements(to_stack(spec), B)), 0.5);
  const Poison poisons[] = {{Site::x, kNaN, "NaN in x"},   {Site::h0, kNaN, "NaN in h0"},  {Site::c0, kNaN, "NaN in c0"},
                            {Site::weight, kNaN, "NaN weight"}, {Site::x, kInf, "+Inf in x"}, {Site::c0, -kInf, "-Inf in c0"},
                            {Site::x, 1e30f, "1e30 in x"}};
  for (const Poison& p : poisons) {
    std::vector<float> w = w0, x = x0, h0 = h00, c0 = c00;
    switch (p.site) {
      case Site::x: x[(1 * B + 1) * spec.input_size + 2] = p.value; break;
      case Site::h0: h0[B * spec.proj_size + 1] = p.value; break;
      case Site::c0: c0[2 * B * spec.hidden_size + 4] = p.value; break;
      case Site::weight: w[w.size() / 3] = p.value; break;
    }
    PlanOptions opt;
    opt.max_batch = B;
    opt.max_seq_len = T;
    opt.backend = Backend::reference;
    const Run want = run(spec, opt, w, x, h0, c0, T, B);
    std::size_t nans = 0;
    for (float v : want.y) nans += std::isnan(v);
    if (std::isnan(p.value)) CHECK(nans > 0);
    for (Isa isa : isas) {
      char what[120];
      std::snprintf(what, sizeof what, "extended LSTM, %s, isa %s", p.name, to_string(isa));
      opt.backend = Backend::simd;
      opt.max_isa = isa;
      check_run(run(spec, opt, w, x, h0, c0, T, B), want, what);
    }
  }
}

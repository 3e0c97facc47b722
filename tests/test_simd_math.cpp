// Accuracy of the kernels' vector math (simd/math.hpp) against double precision, on every
// instruction set of the machine, and bit-identity between the FMA paths.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <cstdlib>
#include <vector>

#include "simd/kernels.hpp"
#include "src/internal/plan_impl.hpp"
#include "test_util.hpp"

using namespace rnncore;

namespace {

// Relative error, with the denominator floored where the function underflows.
double rel(double got, double want, double floor) { return std::fabs(got - want) / std::max(std::fabs(want), floor); }

}  // namespace

TEST_CASE("exp, sigmoid and tanh are accurate on every instruction set") {
  std::vector<float> x;
  for (double v = -100.0; v <= 100.0; v += 0.0013) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, 0.6249999f, 0.625f, 0.6250001f, 87.0f, 88.0f, -87.0f}) x.push_back(v);
  while (x.size() % 16 != 0) x.push_back(0.5f);
  const int n = static_cast<int>(x.size());
  std::vector<std::vector<float>> tanh_by_isa;
  for (Isa isa : rnncore_test::isas_here()) {  // under RNNCORE_MAX_ISA only those it leaves
    Isa chosen;
    const simd::F32Kernels* kt = detail::select_f32_kernels(isa, &chosen);
    REQUIRE(kt != nullptr);
    REQUIRE(chosen == isa);
    INFO("isa " << std::string(to_string(chosen)));
    std::vector<float> e(n), s(n), t(n);
    kt->math(x.data(), e.data(), s.data(), t.data(), n);
    double worst_exp = 0, worst_sig = 0, worst_tanh = 0;
    for (int i = 0; i < n; ++i) {
      const double v = x[i];
      if (v >= -87.0 && v <= 88.0) worst_exp = std::max(worst_exp, rel(e[i], std::exp(v), 1e-300));
      // Below float's normal range (x < −87) the clamped exp leaves σ at ~6e−39 instead of ~0:
      // relative error is measured against values ≥ 1e−30.
      worst_sig = std::max(worst_sig, rel(s[i], 1.0 / (1.0 + std::exp(-v)), 1e-30));
      worst_tanh = std::max(worst_tanh, rel(t[i], std::tanh(v), 1e-37));
      REQUIRE((std::isfinite(e[i]) || (x[i] > 88.0f && e[i] == INFINITY)));  // overflow to +Inf, as std::exp
      REQUIRE(s[i] >= 0.0f);
      REQUIRE(s[i] <= 1.0f);
      REQUIRE(std::fabs(t[i]) <= 1.0f);
      REQUIRE(std::signbit(t[i]) == std::signbit(x[i]));
    }
    MESSAGE(std::string(to_string(chosen)) << ": max relative error exp " << worst_exp << ", sigmoid " << worst_sig << ", tanh " << worst_tanh);
    CHECK(worst_exp < 4e-7);   // a few ulp of float
    CHECK(worst_sig < 4e-7);
    CHECK(worst_tanh < 4e-7);
    if (chosen != Isa::sse2) tanh_by_isa.push_back(t);
  }
  for (std::size_t i = 1; i < tanh_by_isa.size(); ++i)
    CHECK(std::memcmp(tanh_by_isa[0].data(), tanh_by_isa[i].data(), sizeof(float) * n) == 0);
}

TEST_CASE("NaN stays NaN and infinities saturate on every instruction set") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {nan, -nan, inf, -inf, 1e30f, -1e30f, 0.5f, nan};
  while (x.size() % 16 != 0) x.push_back(x[x.size() % 8]);
  const int n = static_cast<int>(x.size());
  for (Isa isa : rnncore_test::isas_here()) {
    Isa chosen;
    const simd::F32Kernels* kt = detail::select_f32_kernels(isa, &chosen);
    REQUIRE(kt != nullptr);
    INFO("isa " << std::string(to_string(chosen)));
    std::vector<float> e(n), s(n), t(n), r(x);
    kt->math(x.data(), e.data(), s.data(), t.data(), n);
    kt->activate(simd::Activation::relu, r.data(), n);
    for (int i = 0; i < n; ++i) {
      INFO("x = " << x[i]);
      if (std::isnan(x[i])) {
        CHECK(std::isnan(e[i]));
        CHECK(std::isnan(s[i]));
        CHECK(std::isnan(t[i]));
        CHECK(std::isnan(r[i]));
      } else if (std::fabs(x[i]) > 1e29f) {
        CHECK(s[i] == doctest::Approx(x[i] > 0 ? 1.0 : 0.0));
        CHECK(t[i] == (x[i] > 0 ? 1.0f : -1.0f));
        CHECK(r[i] == (x[i] > 0 ? x[i] : 0.0f));
      }
    }
  }
}

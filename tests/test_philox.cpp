// Tests of include/rnncore/philox.h: Philox4x32-10 known answers, the mask function against the
// independent Python reference (tests/golden/masks.py -> tests/golden/masks/masks_fixture.inc),
// keep-rate statistics and the independence of masks across their coordinates.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "rnncore/philox.h"

namespace {

struct FixtureElement {
  std::uint64_t seed, step;
  std::uint32_t site, t_prime, row, unit, width;
  double keep;
  std::uint32_t word;
  int kept;
};
struct FixtureThreshold {
  double keep;
  std::uint32_t threshold;
  int always_keep;
};
struct FixturePhilox {
  std::uint32_t ctr[4], key[2], out[4];
};

#define RNNCORE_FIXTURE_ELEMENT(seed, step, site, tp, row, unit, width, keep, word, kept) \
  FixtureElement{seed, step, site, tp, row, unit, width, keep, word, kept},
#define RNNCORE_FIXTURE_THRESHOLD(keep, thr, always)
#define RNNCORE_FIXTURE_PHILOX(c0, c1, c2, c3, k0, k1, o0, o1, o2, o3)
const FixtureElement kElements[] = {
#include "tests/golden/masks/masks_fixture.inc"
};
#undef RNNCORE_FIXTURE_ELEMENT
#undef RNNCORE_FIXTURE_THRESHOLD
#undef RNNCORE_FIXTURE_PHILOX

#define RNNCORE_FIXTURE_ELEMENT(seed, step, site, tp, row, unit, width, keep, word, kept)
#define RNNCORE_FIXTURE_THRESHOLD(keep, thr, always) FixtureThreshold{keep, thr, always},
#define RNNCORE_FIXTURE_PHILOX(c0, c1, c2, c3, k0, k1, o0, o1, o2, o3)
const FixtureThreshold kThresholds[] = {
#include "tests/golden/masks/masks_fixture.inc"
};
#undef RNNCORE_FIXTURE_ELEMENT
#undef RNNCORE_FIXTURE_THRESHOLD
#undef RNNCORE_FIXTURE_PHILOX

#define RNNCORE_FIXTURE_ELEMENT(seed, step, site, tp, row, unit, width, keep, word, kept)
#define RNNCORE_FIXTURE_THRESHOLD(keep, thr, always)
#define RNNCORE_FIXTURE_PHILOX(c0, c1, c2, c3, k0, k1, o0, o1, o2, o3) \
  FixturePhilox{{c0, c1, c2, c3}, {k0, k1}, {o0, o1, o2, o3}},
const FixturePhilox kPhilox[] = {
#include "tests/golden/masks/masks_fixture.inc"
};
#undef RNNCORE_FIXTURE_ELEMENT
#undef RNNCORE_FIXTURE_THRESHOLD
#undef RNNCORE_FIXTURE_PHILOX

rnncore_mask_params params_of(double keep) {
  rnncore_mask_params p;
  CHECK(rnncore_mask_params_init(&p, keep) == 1);
  return p;
}

/// A whole mask row as 0/1 bits (scalar API).
std::vector<int> mask_bits(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t t_prime,
                           std::uint32_t row, std::uint32_t width, double keep) {
  const rnncore_mask_params p = params_of(keep);
  std::vector<int> bits(width);
  for (std::uint32_t u = 0; u < width; ++u) bits[u] = rnncore_mask_keep(seed, step, site, t_prime, row, u, width, &p);
  return bits;
}

int count_differences(const std::vector<int>& a, const std::vector<int>& b) {
  int n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST_CASE("philox4x32_10 known answers") {
  struct Kat {
    std::uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
       {0x00000000u, 0x00000000u},
       {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    std::uint32_t out[4];
    rnncore_philox4x32_10(k.ctr, k.key, out);
    for (int w = 0; w < 4; ++w) CHECK(out[w] == k.out[w]);
    // out may alias ctr.
    std::uint32_t inplace[4] = {k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]};
    rnncore_philox4x32_10(inplace, k.key, inplace);
    CHECK(std::memcmp(inplace, k.out, sizeof inplace) == 0);
  }
}

TEST_CASE("philox4x32_10 matches the Python reference on random counters and keys") {
  CHECK(sizeof kPhilox / sizeof kPhilox[0] >= 32);
  for (const FixturePhilox& f : kPhilox) {
    std::uint32_t out[4];
    rnncore_philox4x32_10(f.ctr, f.key, out);
    CHECK(std::memcmp(out, f.out, sizeof out) == 0);
  }
}

TEST_CASE("site encoding") {
  CHECK(rnncore_mask_site(0, 0, 0, RNNCORE_SITE_WRAPPER_INPUT, 0) == 1u);
  CHECK(rnncore_mask_site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT, 0) == 2u);
  CHECK(rnncore_mask_site(1, 0, 0, RNNCORE_SITE_STATE_H, 0) == 0x10003u);
  CHECK(rnncore_mask_site(0, 1, 0, RNNCORE_SITE_STATE_C, 0) == 0x8004u);
  CHECK(rnncore_mask_site(2, 0, 0, RNNCORE_SITE_INTER_LAYER, 0) == 0x20005u);
  CHECK(rnncore_mask_site(3, 1, 2, RNNCORE_SITE_STATE_H, 1) == ((3u << 16) | (1u << 15) | (2u << 8) | 3u | 0x80u));
  CHECK(rnncore_mask_site(15, 1, 5, RNNCORE_SITE_INTER_LAYER, 7) == 0xF8585u);  // any nonzero flag
  CHECK(RNNCORE_SITE_VARIATIONAL == 0x80);
}

TEST_CASE("keep thresholds and mask parameters") {
  CHECK(rnncore_keep_threshold(0.5) == 0x80000000u);
  CHECK(rnncore_keep_threshold(0.3) == 1288490188u);  // floor(1288490188.8): floor, not round
  CHECK(rnncore_keep_threshold(0.1) == 429496729u);
  CHECK(rnncore_keep_threshold(0.8) == 3435973836u);
  CHECK(rnncore_keep_threshold(0.999) == 4290672328u);
  CHECK(rnncore_keep_threshold(std::nextafter(1.0, 0.0)) == 0xFFFFFFFFu);
  CHECK(rnncore_keep_threshold(0x1p-33) == 0u);
  // Computed from the double as given: the float 0.3f is a different probability.
  CHECK(rnncore_keep_threshold(static_cast<double>(0.3f)) == 1288490240u);
  // Inter-layer dropout: keep = 1 - p in double.
  CHECK(rnncore_keep_from_dropout(0.7) == 1.0 - 0.7);
  CHECK(rnncore_keep_threshold(rnncore_keep_from_dropout(0.7)) == 1288490188u);

  for (const FixtureThreshold& t : kThresholds) {
    CAPTURE(t.keep);
    rnncore_mask_params p;
    CHECK(rnncore_mask_params_init(&p, t.keep) == 1);
    CHECK(p.threshold == t.threshold);
    CHECK(p.always_keep == t.always_keep);
    CHECK(p.scale == static_cast<float>(1.0 / t.keep));
    CHECK(rnncore_keep_threshold(t.keep) == t.threshold);
  }

  rnncore_mask_params p;
  CHECK(rnncore_mask_params_init(&p, 1.0) == 1);
  CHECK(p.always_keep == 1);
  CHECK(p.scale == 1.0f);
  for (double bad : {0.0, -0.25, 1.0000001, 2.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    CHECK(rnncore_keep_valid(bad) == 0);
    CHECK(rnncore_mask_params_init(&p, bad) == 0);
    CHECK(p.threshold == 0u);
    CHECK(p.always_keep == 0);
    CHECK(p.scale == 0.0f);
  }
}

TEST_CASE("mask elements match the Python reference fixture") {
  const std::size_t n = sizeof kElements / sizeof kElements[0];
  CHECK(n >= 300);
  int kept = 0;
  for (const FixtureElement& e : kElements) {
    CAPTURE(e.seed);
    CAPTURE(e.step);
    CAPTURE(e.site);
    CAPTURE(e.t_prime);
    CAPTURE(e.row);
    CAPTURE(e.unit);
    CAPTURE(e.width);
    CAPTURE(e.keep);
    const rnncore_mask_params p = params_of(e.keep);
    CHECK(rnncore_mask_word(e.seed, e.step, e.site, e.t_prime, e.row, e.unit, e.width) == e.word);
    CHECK(rnncore_mask_keep(e.seed, e.step, e.site, e.t_prime, e.row, e.unit, e.width, &p) == e.kept);
    const std::uint32_t bits = rnncore_mask_word4(e.seed, e.step, e.site, e.t_prime, e.row, e.unit / 4, e.width, &p);
    CHECK(static_cast<int>((bits >> (e.unit % 4)) & 1u) == e.kept);
    CHECK(rnncore_mask_value(e.seed, e.step, e.site, e.t_prime, e.row, e.unit, e.width, &p) ==
          (e.kept ? p.scale : 0.0f));
    if (e.word != 0xFFFFFFFFu) {  // the comparison is strict: u == threshold is dropped
      rnncore_mask_params at = p;
      at.always_keep = 0;
      at.threshold = e.word;
      CHECK(rnncore_mask_keep(e.seed, e.step, e.site, e.t_prime, e.row, e.unit, e.width, &at) == 0);
      at.threshold = e.word + 1u;
      CHECK(rnncore_mask_keep(e.seed, e.step, e.site, e.t_prime, e.row, e.unit, e.width, &at) == 1);
    }
    std::vector<float> row(e.width, -1.0f);
    rnncore_mask_row(e.seed, e.step, e.site, e.t_prime, e.row, e.width, &p, row.data());
    CHECK(row[e.unit] == (e.kept ? p.scale : 0.0f));
    kept += e.kept;
  }
  // The fixture exercises both outcomes.
  CHECK(kept > 50);
  CHECK(kept < static_cast<int>(n) - 50);
}

TEST_CASE("mask counter layout") {
  const std::uint64_t seed = 0x0123456789ABCDEFull;
  const std::uint32_t key[2] = {0x89ABCDEFu, 0x01234567u};
  const std::uint32_t site = rnncore_mask_site(1, 1, 0, RNNCORE_SITE_STATE_H, 0);
  const std::uint64_t step = 0x500000007ull;  // c3 = step mod 2^32 = 7
  for (std::uint32_t width : {1u, 3u, 4u, 5u, 17u, 33u, 100u}) {
    for (std::uint32_t t : {0u, 1u, 2u, 0x40000000u, 0xFFFFFFFFu}) {
      for (std::uint32_t unit = 0; unit < width; ++unit) {
        const std::uint32_t groups = (width + 3) / 4;
        const std::uint32_t ctr[4] = {static_cast<std::uint32_t>(std::uint64_t{t} * groups + unit / 4), 9u, site, 7u};
        std::uint32_t out[4];
        rnncore_philox4x32_10(ctr, key, out);
        CHECK(rnncore_mask_word(seed, step, site, t, 9u, unit, width) == out[unit % 4]);
      }
    }
  }
  CHECK(rnncore_mask_groups(0) == 0u);
  CHECK(rnncore_mask_groups(1) == 1u);
  CHECK(rnncore_mask_groups(4) == 1u);
  CHECK(rnncore_mask_groups(5) == 2u);
  CHECK(rnncore_mask_groups(0xFFFFFFFFu) == 0x40000000u);
  // keep == 1 keeps everything, whatever the word.
  rnncore_mask_params all = params_of(1.0);
  for (std::uint32_t unit = 0; unit < 64; ++unit) CHECK(rnncore_mask_keep(seed, 1, site, 0, 0, unit, 64, &all) == 1);
  CHECK(rnncore_mask_word4(seed, 1, site, 0, 0, 3, 64, &all) == 0xFu);
}

// Keep rate over n elements: the count is Binomial(n, k') with k' = threshold / 2^32 (|k' - keep| < 2^-32);
// the rate's standard deviation is sqrt(k'(1 - k') / n). A correct generator exceeds 6 sigma with
// probability ~2e-9 per check; the run is deterministic, so this is a one-time sanity bound.
TEST_CASE("keep rate statistics") {
  const std::uint32_t width = 97;  // a ragged last group
  const std::uint32_t rows = 64, steps = 176;  // 97 * 64 * 176 = 1,092,608 elements
  for (double keep : {0.1, 0.3, 0.5, 0.8, 0.999}) {
    CAPTURE(keep);
    const rnncore_mask_params p = params_of(keep);
    const std::uint32_t site = rnncore_mask_site(0, 0, 0, RNNCORE_SITE_STATE_H, 0);
    const double k = p.threshold / 4294967296.0;
    std::uint64_t n = 0, kept = 0, n_word[4] = {0, 0, 0, 0}, kept_word[4] = {0, 0, 0, 0};
    std::uint64_t pairs = 0, both = 0;
    for (std::uint32_t t = 0; t < steps; ++t) {
      for (std::uint32_t r = 0; r < rows; ++r) {
        int prev = -1;
        for (std::uint32_t u = 0; u < width; ++u) {
          const int b = rnncore_mask_keep(0xC0FFEE0000000011ull, 3, site, t, r, u, width, &p);
          ++n;
          kept += static_cast<std::uint64_t>(b);
          ++n_word[u % 4];
          kept_word[u % 4] += static_cast<std::uint64_t>(b);
          if (prev >= 0) {
            ++pairs;
            both += static_cast<std::uint64_t>(prev & b);
          }
          prev = b;
        }
      }
    }
    CHECK(n >= 1000000u);
    const double rate = static_cast<double>(kept) / static_cast<double>(n);
    const double sigma = std::sqrt(k * (1.0 - k) / static_cast<double>(n));
    CHECK(std::fabs(rate - k) <= 6.0 * sigma);
    CHECK(std::fabs(k - keep) < 0x1p-32);
    for (int w = 0; w < 4; ++w) {  // each Philox output word on its own
      const double rw = static_cast<double>(kept_word[w]) / static_cast<double>(n_word[w]);
      CHECK(std::fabs(rw - k) <= 6.0 * std::sqrt(k * (1.0 - k) / static_cast<double>(n_word[w])));
    }
    // Neighbouring units are independent: P(both kept) = k^2. The pair indicators are not all
    // independent (overlapping pairs), their variance is at most 3x the independent one.
    const double rb = static_cast<double>(both) / static_cast<double>(pairs);
    CHECK(std::fabs(rb - k * k) <= 6.0 * std::sqrt(3.0 * k * k * (1.0 - k * k) / static_cast<double>(pairs)));
  }
}

TEST_CASE("variational masks are constant across time, per-step masks are not") {
  const std::uint64_t seed = 1234567;
  const std::uint32_t width = 64;
  const double keep = 0.5;
  const std::uint32_t per_step_site = rnncore_mask_site(0, 0, 0, RNNCORE_SITE_STATE_H, 0);
  const std::uint32_t variational_site = rnncore_mask_site(0, 0, 0, RNNCORE_SITE_STATE_H, 1);
  std::vector<std::vector<int>> per_step, variational;
  for (std::uint32_t t = 0; t < 12; ++t) {
    per_step.push_back(mask_bits(seed, 5, per_step_site, /*t'=*/t, 0, width, keep));
    variational.push_back(mask_bits(seed, 5, variational_site, /*t'=*/0, 0, width, keep));
  }
  for (std::uint32_t a = 0; a < 12; ++a) {
    CHECK(variational[a] == variational[0]);
    for (std::uint32_t b = a + 1; b < 12; ++b) CHECK(count_differences(per_step[a], per_step[b]) > 8);
  }
  // The variational bit of the site separates the variational mask from the per-step mask at t = 0.
  CHECK(count_differences(variational[0], per_step[0]) > 8);
  // Consecutive time steps of a row use disjoint counters: the last group of step t is not the first of t + 1.
  CHECK(rnncore_mask_word(seed, 5, per_step_site, 0, 0, 63, 64) !=
        rnncore_mask_word(seed, 5, per_step_site, 1, 0, 3, 64));
}

TEST_CASE("masks differ across steps, sites, rows and seeds") {
  const std::uint32_t width = 128;
  const double keep = 0.5;
  const std::uint32_t site = rnncore_mask_site(1, 0, 0, RNNCORE_SITE_WRAPPER_INPUT, 0);
  const std::vector<int> base = mask_bits(42, 7, site, 3, 2, width, keep);
  // Any one coordinate changed: about half the bits flip (Binomial(128, 1/2): > 32 with overwhelming odds).
  CHECK(count_differences(base, mask_bits(42, 8, site, 3, 2, width, keep)) > 32);                   // step
  CHECK(count_differences(base, mask_bits(43, 7, site, 3, 2, width, keep)) > 32);                   // seed low
  CHECK(count_differences(base, mask_bits(42 + (1ull << 32), 7, site, 3, 2, width, keep)) > 32);    // seed high
  CHECK(count_differences(base, mask_bits(42, 7, site, 3, 3, width, keep)) > 32);                   // row
  CHECK(count_differences(base, mask_bits(42, 7, site, 4, 2, width, keep)) > 32);                   // t'
  for (std::uint32_t other : {rnncore_mask_site(1, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT, 0),
                              rnncore_mask_site(1, 0, 0, RNNCORE_SITE_STATE_H, 0),
                              rnncore_mask_site(1, 0, 0, RNNCORE_SITE_STATE_C, 0),
                              rnncore_mask_site(1, 0, 0, RNNCORE_SITE_INTER_LAYER, 0),
                              rnncore_mask_site(1, 0, 0, RNNCORE_SITE_WRAPPER_INPUT, 1),
                              rnncore_mask_site(0, 0, 0, RNNCORE_SITE_WRAPPER_INPUT, 0),
                              rnncore_mask_site(1, 1, 0, RNNCORE_SITE_WRAPPER_INPUT, 0),
                              rnncore_mask_site(1, 0, 1, RNNCORE_SITE_WRAPPER_INPUT, 0)}) {
    CAPTURE(other);
    CHECK(count_differences(base, mask_bits(42, 7, other, 3, 2, width, keep)) > 32);
  }
  // The step enters as step mod 2^32: steps 2^32 apart share their masks (documented wrap).
  CHECK(mask_bits(42, 7 + (1ull << 32), site, 3, 2, width, keep) == base);
  // t' * ceil(width / 4) wraps mod 2^32 as well.
  CHECK(mask_bits(42, 7, site, 3u + (0xFFFFFFFFu / 32u + 1u), 2, width, keep) == base);  // 32 groups * 2^27 = 2^32
}

// Tests of simd/philox_simd.hpp: for every ISA compiled in (tests/philox_simd_<isa>.cpp) that the
// running CPU supports, vector Philox and vector mask rows are bit-identical to the scalar code of
// include/rnncore/philox.h, with both multiply policies (ISA widening multiply, xsimd-only).
//
// This unit is built with baseline flags: it alone calls xsimd::available_architectures().
// The throughput case is skipped by default; run it with
//   test_philox_simd --no-skip --test-case='*throughput*'
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "rnncore/philox.h"
#include "tests/philox_simd_test.hpp"

namespace {

struct Candidate {
  const char* isa;
  const rnncore_test_simd_entry* entry;
  bool cpu_has;
};

std::vector<Candidate> candidates() {
  const auto cpu = xsimd::available_architectures();
  return {
      {"sse2", rnncore_test_simd_sse2(), cpu.sse2 != 0},
      {"avx2+fma", rnncore_test_simd_avx2(), cpu.avx2 != 0 && cpu.fma3_avx2 != 0},
      {"avx512f/dq/bw/vl", rnncore_test_simd_avx512(),
       // xsimd 8.1 does not report VL; every CPU with AVX512BW has it.
       cpu.avx512f != 0 && cpu.avx512dq != 0 && cpu.avx512bw != 0},
      {"neon", rnncore_test_simd_neon(), cpu.neon != 0},
  };
}

/// The entries this build has and this CPU runs.
std::vector<const rnncore_test_simd_entry*> runnable() {
  std::vector<const rnncore_test_simd_entry*> r;
  for (const Candidate& c : candidates())
    if (c.entry != nullptr && c.cpu_has) r.push_back(c.entry);
  return r;
}

rnncore_mask_params params_of(double keep) {
  rnncore_mask_params p;
  CHECK(rnncore_mask_params_init(&p, keep) == 1);
  return p;
}

std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct RowCase {
  std::uint64_t seed, step;
  std::uint32_t site, t_prime, row;
  double keep;
};

const RowCase kRowCases[] = {
    {0, 0, 1, 0, 0, 0.5},
    {42, 7, 0x10003u, 3, 2, 0.1},
    {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0x28383u /* layer 2, reverse, variational h */, 0, 0, 0.3},
    {(1ull << 32) + 5, (1ull << 32) + 1, 0x20005u, 9, 255, 0.999},
    {0x123456789ABCDEF0ull, 123456789012ull, 0x8104u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0.8},
    {7, 3, 0x182u, 0xFFFFFFFFu, 1, 0.5},  // t' * groups + q wraps inside the row
    {99, 1, 0x10001u, 1000, 17, 1.0},     // always keep
    {5, 2, 0x30004u, 12, 4, 1.0 - 0.7},   // inter-layer keep = 1 - p
};

/// Runs one SIMD row into an unaligned slot between sentinels; checks it against the scalar row.
void check_row(const rnncore_test_simd_entry& e, rnncore_test_mask_row_fn fn, const RowCase& c, std::uint32_t width) {
  const rnncore_mask_params p = params_of(c.keep);
  const std::size_t pad = 67;
  std::vector<float> want(width), got(width + 2 * pad + 1, -7.0f);
  rnncore_mask_row(c.seed, c.step, c.site, c.t_prime, c.row, width, &p, want.data());
  float* out = got.data() + pad + 1;  // deliberately not 16-byte aligned
  fn(c.seed, c.step, c.site, c.t_prime, c.row, width, &p, out);
  const std::string isa = e.name;
  CAPTURE(isa);
  CAPTURE(width);
  CAPTURE(c.seed);
  CAPTURE(c.site);
  CAPTURE(c.t_prime);
  CAPTURE(c.keep);
  CHECK(std::memcmp(out, want.data(), width * sizeof(float)) == 0);
  bool sentinels = true;
  for (std::size_t i = 0; i < pad + 1; ++i) sentinels = sentinels && got[i] == -7.0f;
  for (std::size_t i = pad + 1 + width; i < got.size(); ++i) sentinels = sentinels && got[i] == -7.0f;
  CHECK(sentinels);
  // Spot-check the element function too (scale or exact 0).
  for (std::uint32_t u = 0; u < width; u += 1 + width / 8) {
    const float v = rnncore_mask_value(c.seed, c.step, c.site, c.t_prime, c.row, u, width, &p);
    CHECK(std::memcmp(&out[u], &v, sizeof v) == 0);
  }
}

}  // namespace

TEST_CASE("simd: per-ISA units are present") {
  int present = 0;
  for (const Candidate& c : candidates()) {
    const std::string line = std::string(c.isa) + ": " +
                             (c.entry ? "compiled in as xsimd::" + std::string(c.entry->name) + ", " +
                                            std::to_string(c.entry->lanes) + " lanes"
                                      : std::string("not compiled in")) +
                             ", " +
                             (c.cpu_has ? "CPU has it" : "CPU lacks it") +
                             (c.entry ? (c.entry->native_mul ? ", native mulhilo" : ", portable mulhilo") : "");
    MESSAGE(line);
    if (c.entry != nullptr) {
      ++present;
      CHECK(c.entry->lanes >= 4);
      CHECK((c.entry->mask_row != nullptr && c.entry->mask_row_portable != nullptr));
      CHECK((c.entry->philox != nullptr && c.entry->philox_portable != nullptr));
    }
  }
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(present > 0);
  CHECK(!runnable().empty());
#endif
}

TEST_CASE("simd: philox4x32_10 on batches equals the scalar function") {
  for (const rnncore_test_simd_entry* e : runnable()) {
    const std::string isa = e->name;
    CAPTURE(isa);
    const std::size_t n = e->lanes * 32;
    std::vector<std::uint32_t> ctr(4 * n), out(4 * n), out_p(4 * n);
    std::uint64_t s = 0xABCDEF;
    for (std::size_t i = 0; i < 4 * n; ++i) ctr[i] = static_cast<std::uint32_t>(splitmix64(s));
    for (std::size_t j = 0; j < 8; ++j)  // extremes
      for (std::size_t w = 0; w < 4; ++w) ctr[w * n + j] = (j & 1) ? 0xFFFFFFFFu : (j & 2) ? 0x80000000u : 0u;
    const std::uint32_t keys[][2] = {{0u, 0u}, {0xFFFFFFFFu, 0xFFFFFFFFu}, {0xA4093822u, 0x299F31D0u}};
    for (const auto& k : keys) {
      e->philox(ctr.data(), k[0], k[1], out.data(), n);
      e->philox_portable(ctr.data(), k[0], k[1], out_p.data(), n);
      int mismatches = 0, mismatches_p = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const std::uint32_t c[4] = {ctr[j], ctr[n + j], ctr[2 * n + j], ctr[3 * n + j]};
        std::uint32_t want[4];
        rnncore_philox4x32_10(c, k, want);
        for (std::size_t w = 0; w < 4; ++w) {
          mismatches += out[w * n + j] != want[w];
          mismatches_p += out_p[w * n + j] != want[w];
        }
      }
      CHECK(mismatches == 0);
      CHECK(mismatches_p == 0);
    }
  }
}

TEST_CASE("simd: mask rows are bit-identical to the scalar rows") {
  for (const rnncore_test_simd_entry* e : runnable()) {
    const std::string isa = e->name;
    CAPTURE(isa);
    CHECK(e->vectorised() == 1);  // the vector path, not the scalar fallback, is under test
    for (const RowCase& c : kRowCases) {
      for (std::uint32_t width = 1; width <= 70; ++width) {
        check_row(*e, e->mask_row, c, width);
        check_row(*e, e->mask_row_portable, c, width);
      }
      for (std::uint32_t width : {127u, 128u, 129u, 255u, 1000u, 4099u}) {
        check_row(*e, e->mask_row, c, width);
        check_row(*e, e->mask_row_portable, c, width);
      }
    }
    // width 0 writes nothing.
    float sentinel = -7.0f;
    const rnncore_mask_params p = params_of(0.5);
    e->mask_row(1, 2, 3, 4, 5, 0, &p, &sentinel);
    CHECK(sentinel == -7.0f);
  }
}

TEST_CASE("simd: the threshold boundary (u == threshold is dropped, u == threshold - 1 kept)") {
  // Random words hit a threshold exactly with probability 2^-32, so set the threshold to a word.
  const std::uint64_t seed = 0x5EED0000000000A1ull, step = 77;
  const std::uint32_t site = rnncore_mask_site(0, 1, 0, RNNCORE_SITE_STATE_C, 0), t_prime = 5, row = 3;
  for (const rnncore_test_simd_entry* e : runnable()) {
    const std::string isa = e->name;
    CAPTURE(isa);
    for (std::uint32_t width : {1u, 7u, 64u, 101u}) {
      for (std::uint32_t unit = 0; unit < width; unit += 1 + width / 5) {
        const std::uint32_t word = rnncore_mask_word(seed, step, site, t_prime, row, unit, width);
        if (word == 0xFFFFFFFFu) continue;
        for (std::uint32_t thr : {word, word + 1u}) {
          rnncore_mask_params p = params_of(0.5);
          p.threshold = thr;
          std::vector<float> want(width), got(width), got_p(width);
          rnncore_mask_row(seed, step, site, t_prime, row, width, &p, want.data());
          e->mask_row(seed, step, site, t_prime, row, width, &p, got.data());
          e->mask_row_portable(seed, step, site, t_prime, row, width, &p, got_p.data());
          CHECK(want[unit] == (thr == word ? 0.0f : p.scale));
          CHECK(got == want);
          CHECK(got_p == want);
        }
      }
    }
  }
}

TEST_CASE("simd: mask generator throughput" * doctest::skip()) {
  const std::uint32_t width = 1024, rows = 4096;  // 4 Mi mask values per pass
  const rnncore_mask_params p = params_of(0.8);
  std::vector<float> out(width);
  volatile float sink = 0.0f;
  auto measure = [&](auto&& fill) {
    double best = 1e300;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (std::uint32_t r = 0; r < rows; ++r) {
        fill(r, out.data());
        sink = sink + out[r % width];
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s < best) best = s;
    }
    return static_cast<double>(width) * rows / best;  // masks per second (best of 5)
  };
  const double scalar =
      measure([&](std::uint32_t r, float* o) { rnncore_mask_row(42, 7, 0x10003u, 5, r, width, &p, o); });
  std::printf("throughput (width %u, %u rows, keep 0.8, best of 5):\n", width, rows);
  std::printf("  %-26s %8.1f M masks/s\n", "scalar rnncore_mask_row", scalar * 1e-6);
  for (const rnncore_test_simd_entry* e : runnable()) {
    const double nat = measure([&](std::uint32_t r, float* o) { e->mask_row(42, 7, 0x10003u, 5, r, width, &p, o); });
    const double por =
        measure([&](std::uint32_t r, float* o) { e->mask_row_portable(42, 7, 0x10003u, 5, r, width, &p, o); });
    std::printf("  %-10s native mulhilo   %8.1f M masks/s  (%5.2fx scalar)\n", e->name, nat * 1e-6, nat / scalar);
    std::printf("  %-10s portable mulhilo %8.1f M masks/s  (%5.2fx scalar)\n", e->name, por * 1e-6, por / scalar);
  }
  CHECK(scalar > 0.0);
}

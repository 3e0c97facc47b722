// Test glue between the per-ISA translation units (tests/philox_simd_<isa>.cpp, each compiled with
// its ISA's flags) and tests/test_philox_simd.cpp (baseline flags, dispatches on the running CPU).
//
// Each per-ISA unit defines exactly one function, rnncore_test_simd_<isa>(), that returns the
// unit's entry table, or nullptr when the unit was compiled without its ISA (so every unit can be
// built and linked on any platform). Only plain C types cross the boundary.
#ifndef RNNCORE_TESTS_PHILOX_SIMD_TEST_HPP
#define RNNCORE_TESTS_PHILOX_SIMD_TEST_HPP

#include <stddef.h>
#include <stdint.h>

#include "rnncore/philox.h"

extern "C" {

/// Signature of simd_detail::mask_row<Arch, Mul> behind a plain function pointer.
typedef void (*rnncore_test_mask_row_fn)(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                         uint32_t row, uint32_t width, const rnncore_mask_params* params,
                                         float* out);
/// Philox4x32-10 of n counters (word-major: ctr[w * n + j] is word w of counter j), shared key;
/// n must be a multiple of the entry's lanes.
typedef void (*rnncore_test_philox_fn)(const uint32_t* ctr, uint32_t k0, uint32_t k1, uint32_t* out, size_t n);

/// What one per-ISA unit exports.
struct rnncore_test_simd_entry {
  const char* name;                           ///< xsimd arch name: "sse2", "avx2", "avx512bw", "neon", "neon64"
  unsigned lanes;                             ///< uint32 lanes per batch
  int native_mul;                             ///< 1 if mul_native uses an ISA widening multiply
  int (*vectorised)(void);                    ///< 1 if mask_row runs vectorised (not the scalar fallback)
  rnncore_test_mask_row_fn mask_row;          ///< mask_row<Arch, mul_native>
  rnncore_test_mask_row_fn mask_row_portable; ///< mask_row<Arch, mul_portable>
  rnncore_test_philox_fn philox;              ///< philox4x32_10<Arch, mul_native>
  rnncore_test_philox_fn philox_portable;     ///< philox4x32_10<Arch, mul_portable>
};

const rnncore_test_simd_entry* rnncore_test_simd_sse2(void);
const rnncore_test_simd_entry* rnncore_test_simd_avx2(void);
const rnncore_test_simd_entry* rnncore_test_simd_avx512(void);
const rnncore_test_simd_entry* rnncore_test_simd_neon(void);

}  // extern "C"

// RNNCORE_TEST_SIMD_DEFINE_ENTRY(getter, Arch): in a per-ISA unit that included simd/philox_simd.hpp,
// defines the getter returning the table for Arch. The helpers have internal linkage.
#define RNNCORE_TEST_SIMD_DEFINE_ENTRY(getter, ArchType)                                                    \
  namespace {                                                                                              \
  template <class Mul>                                                                                     \
  void test_mask_row(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime, uint32_t row,          \
                     uint32_t width, const rnncore_mask_params* params, float* out) {                      \
    rnncore::simd_detail::mask_row<ArchType, Mul>(seed, step, site, t_prime, row, width, *params, out);    \
  }                                                                                                        \
  template <class Mul>                                                                                     \
  void test_philox(const uint32_t* ctr, uint32_t k0, uint32_t k1, uint32_t* out, size_t n) {               \
    using B = rnncore::simd_detail::u32_batch<ArchType>;                                                   \
    for (size_t j = 0; j + B::size <= n; j += B::size) {                                                   \
      B x[4];                                                                                              \
      for (size_t w = 0; w < 4; ++w) x[w] = B::load_unaligned(ctr + w * n + j);                           \
      rnncore::simd_detail::philox4x32_10<ArchType, Mul>(x, k0, k1);                                       \
      for (size_t w = 0; w < 4; ++w) x[w].store_unaligned(out + w * n + j);                                \
    }                                                                                                      \
  }                                                                                                        \
  int test_vectorised(void) { return rnncore::simd_detail::mask_row_is_vectorised<ArchType>() ? 1 : 0; }  \
  const rnncore_test_simd_entry kEntry = {                                                                 \
      ArchType::name(),                                                                                    \
      static_cast<unsigned>(rnncore::simd_detail::lanes<ArchType>()),                                      \
      rnncore::simd_detail::has_native_mulhilo<ArchType>() ? 1 : 0,                                        \
      &test_vectorised,                                                                                    \
      &test_mask_row<rnncore::simd_detail::mul_native>,                                                    \
      &test_mask_row<rnncore::simd_detail::mul_portable>,                                                  \
      &test_philox<rnncore::simd_detail::mul_native>,                                                      \
      &test_philox<rnncore::simd_detail::mul_portable>};                                                   \
  }                                                                                                        \
  extern "C" const rnncore_test_simd_entry* getter(void) { return &kEntry; }

#define RNNCORE_TEST_SIMD_DEFINE_EMPTY(getter) \
  extern "C" const rnncore_test_simd_entry* getter(void) { return nullptr; }

#endif  // RNNCORE_TESTS_PHILOX_SIMD_TEST_HPP

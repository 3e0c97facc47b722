// AVX2 instance of simd/philox_simd.hpp for tests/test_philox_simd.cpp.
// Build flags: -mavx2 -mfma (x86 only; elsewhere this unit exports an empty entry).
#include "tests/philox_simd_test.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include "simd/philox_simd.hpp"
RNNCORE_TEST_SIMD_DEFINE_ENTRY(rnncore_test_simd_avx2, xsimd::fma3<xsimd::avx2>)
#else
RNNCORE_TEST_SIMD_DEFINE_EMPTY(rnncore_test_simd_avx2)
#endif

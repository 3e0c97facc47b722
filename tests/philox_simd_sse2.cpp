// SSE2 instance of simd/philox_simd.hpp for tests/test_philox_simd.cpp.
// Build flags: -msse2 (x86 only; elsewhere this unit exports an empty entry).
#include "tests/philox_simd_test.hpp"

#if defined(__SSE2__) || defined(_M_X64)
#include "simd/philox_simd.hpp"
RNNCORE_TEST_SIMD_DEFINE_ENTRY(rnncore_test_simd_sse2, xsimd::sse2)
#else
RNNCORE_TEST_SIMD_DEFINE_EMPTY(rnncore_test_simd_sse2)
#endif

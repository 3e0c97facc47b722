// AVX-512 (F, BW, DQ, VL) instance of simd/philox_simd.hpp for tests/test_philox_simd.cpp.
// Build flags: the library's avx512 set, -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma
// (x86 only; elsewhere this unit exports an empty entry).
#include "tests/philox_simd_test.hpp"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
#include "simd/philox_simd.hpp"
RNNCORE_TEST_SIMD_DEFINE_ENTRY(rnncore_test_simd_avx512, xsimd::avx512bw)
#else
RNNCORE_TEST_SIMD_DEFINE_EMPTY(rnncore_test_simd_avx512)
#endif

// NEON instance of simd/philox_simd.hpp for tests/test_philox_simd.cpp: neon64 on AArch64
// (no flags needed), neon on 32-bit ARM (-mfpu=neon-vfpv4 -mfloat-abi=hard); elsewhere this unit
// exports an empty entry.
#include "tests/philox_simd_test.hpp"

#if defined(__aarch64__) || defined(_M_ARM64)
#include "simd/philox_simd.hpp"
RNNCORE_TEST_SIMD_DEFINE_ENTRY(rnncore_test_simd_neon, xsimd::neon64)
#elif defined(__ARM_NEON)
#include "simd/philox_simd.hpp"
RNNCORE_TEST_SIMD_DEFINE_ENTRY(rnncore_test_simd_neon, xsimd::neon)
#else
RNNCORE_TEST_SIMD_DEFINE_EMPTY(rnncore_test_simd_neon)
#endif

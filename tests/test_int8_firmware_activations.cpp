// The default firmware build's computed int8 sigmoid and tanh (src/internal/int8_fixed_point.hpp
// compiled as the firmware profile compiles it: RNNCORE_NO_HEAP, so the reciprocal comes from the
// division and its 16 KiB table where the target divides, exp from the two 4 KiB tables and the
// 8 KiB one of odd multiples of 2^-14, which tanh of a cell with 0 integer bits reads) against
// the literal transcription of gemmlowp's functions (tests/int8_fixed_point_reference.hpp), on
// every int16 input and every integer-bit count the step uses, on the host: the firmware's
// arithmetic without an emulator (on armhf under qemu-user, the DSP extension's inline assembly
// too). The Cortex-M builds are checked on the emulated core by int8_kernels_qemu
// (tests/cross/int8_kernels_baremetal.cpp).
#ifndef RNNCORE_NO_HEAP
#define RNNCORE_NO_HEAP 1
#endif
#include <doctest/doctest.h>

#include <cstdint>

#include "src/internal/int8_fixed_point.hpp"
#include "tests/int8_fixed_point_reference.hpp"

namespace q8 = rnncore::q8;

// (32-bit ARM without a hardware divide, armhf under qemu-user, takes the Newton–Raphson
// iterations instead of the reciprocal table, as its firmware builds would.)

namespace {
template <int IB>
long tanh_differences() {
  long d = 0;
  for (std::int32_t v = -32768; v <= 32767; ++v) {
    const auto x = static_cast<std::int16_t>(v);
    if (q8::tanh_fixed<IB>(v) != q8::reference::tanh_q(x, IB)) {
      if (++d <= 3) FAIL_CHECK("tanh_fixed<" << IB << ">(" << v << ") = " << q8::tanh_fixed<IB>(v) << ", reference "
                                             << q8::reference::tanh_q(x, IB));
    }
  }
  return d;
}
}  // namespace

TEST_CASE("int8 firmware activations: sigmoid and tanh (0..6 integer bits) equal the reference on all 65536 inputs") {
  long sigmoid = 0;
  for (std::int32_t v = -32768; v <= 32767; ++v) {
    const auto x = static_cast<std::int16_t>(v);
    if (q8::sigmoid_fixed(v) != q8::reference::sigmoid_q3_12(x)) {
      if (++sigmoid <= 3) FAIL_CHECK("sigmoid_fixed(" << v << ") = " << q8::sigmoid_fixed(v) << ", reference " << q8::reference::sigmoid_q3_12(x));
    }
  }
  CHECK(sigmoid == 0);
  CHECK(tanh_differences<0>() == 0);
  CHECK(tanh_differences<1>() == 0);
  CHECK(tanh_differences<2>() == 0);
  CHECK(tanh_differences<3>() == 0);
  CHECK(tanh_differences<4>() == 0);
  CHECK(tanh_differences<5>() == 0);
  CHECK(tanh_differences<6>() == 0);
}

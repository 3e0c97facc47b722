// The int8 matrix-vector kernels of a bare-metal build (on Cortex-M4/M7: i8_dot_rows_dsp_4x16 and
// i8_dot_panels_dsp_4x16)
// against the scalar kernel, on the emulated core: the check of tests/test_int8_lstm.cpp ("int8
// dot kernels: ..."), which runs on the hosts and under qemu-user, repeated for the firmware
// build's own code (Thumb-2 at -Os, another register allocation around the kernel's assembly).
// Random shapes: rows 1..kUnitBlock + 1, K 1..300 (every K once, then at random), weights and vector at every
// alignment, the int8 extremes, biases near the int32 limits so that sums wrap. Prints PASS and
// exits 0, or the first mismatch and FAIL. Runs from static memory (no heap, no printf).
#include <cstdint>

extern "C" {  // the examples' C console and board
#include "examples/firmware/board.h"
#include "examples/firmware/console.h"
}
#include "src/internal/int8_kernels.hpp"
#include "src/internal/int8_lstm.hpp"
#include "tests/int8_fixed_point_reference.hpp"

namespace {

using rnncore::q8::DotRowsKernel;

std::uint32_t g_rng = 0x13579BDFu;
std::uint32_t next_u32() {  // xorshift32
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}
int pick(int lo, int hi) { return lo + static_cast<int>(next_u32() % static_cast<std::uint32_t>(hi - lo + 1)); }

constexpr int kMaxRows = rnncore::q8::kUnitBlock + 1, kMaxK = 300;
std::int8_t g_w[kMaxRows * kMaxK + 8], g_v[kMaxK + 8];
std::int32_t g_bias[kMaxRows], g_want[kMaxRows], g_got[kMaxRows + 1];

// The first of rows 0..rows whose sum in g_got is not g_want's (row `rows`: a write past the
// end, over the guard 0x5A5A5A5A), or -1.
int first_wrong_row(int rows) {
  for (int j = 0; j <= rows; ++j)
    if (j < rows ? g_got[j] != g_want[j] : g_got[j] != 0x5A5A5A5A) return j;
  return -1;
}

// "FAIL: <kernel> rows R K K row J"; the caller may add to the line and ends it.
void put_failure(const char* kernel, int rows, int K, int row) {
  put("FAIL: ");
  put(kernel);
  put(" rows ");
  put_uint(static_cast<unsigned long>(rows));
  put(" K ");
  put_uint(static_cast<unsigned long>(K));
  put(" row ");
  put_uint(static_cast<unsigned long>(row));
}

int run() {
  int n_kernels = 0;
  const DotRowsKernel* kernels = rnncore::q8::int8_dot_kernels(&n_kernels);
  put("int8 dot kernels:");
  for (int i = 0; i < n_kernels; ++i) {
    put(" ");
    put(kernels[i].name);
  }
  end_line();
  long compared = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int rows = pick(1, kMaxRows), K = trial < kMaxK ? trial + 1 : pick(1, kMaxK);
    const int wo = pick(0, 3), vo = pick(0, 3);
    const int mode = trial % 4;  // 0: random, 1: all -128, 2: -128 / 127 mixed, 3: small weights
    for (std::int8_t& x : g_w) {
      x = static_cast<std::int8_t>(mode == 1 ? -128 : mode == 2 ? (pick(0, 1) ? 127 : -128) : mode == 3 ? pick(-2, 2) : pick(-128, 127));
    }
    for (std::int8_t& x : g_v) x = static_cast<std::int8_t>(mode == 1 ? -128 : mode == 2 ? (pick(0, 1) ? 127 : -128) : pick(-128, 127));
    for (std::int32_t& b : g_bias) {
      const int kind = pick(0, 2);  // near INT32_MAX, near INT32_MIN, anywhere
      b = kind == 0 ? INT32_MAX - pick(0, 1 << 20) : kind == 1 ? INT32_MIN + pick(0, 1 << 20) : static_cast<std::int32_t>(next_u32());
    }
    rnncore::q8::i8_dot_rows_scalar(g_w + wo, rows, K, g_v + vo, g_bias, g_want);
    for (int i = 1; i < n_kernels; ++i) {
      for (std::int32_t& x : g_got) x = 0x5A5A5A5A;
      kernels[i].fn(g_w + wo, rows, K, g_v + vo, g_bias, g_got);
      if (const int j = first_wrong_row(rows); j >= 0) {
        put_failure(kernels[i].name, rows, K, j);
        put(" w+");
        put_uint(static_cast<unsigned long>(wo));
        put(" v+");
        put_uint(static_cast<unsigned long>(vo));
        end_line();
        return 1;
      }
      ++compared;
    }
  }
  put("compared ");
  put_uint(static_cast<unsigned long>(compared));
  put(" calls with the scalar kernel's; PASS");
  end_line();
  return 0;
}

// The interleaved layout's kernels (on Cortex-M4/M7: i8_dot_panels_dsp_4x16, a whole function in
// assembly) against the row-major scalar kernel, on the same random shapes and values.
alignas(4) std::int8_t g_packed[rnncore::q8::interleaved4_bytes(kMaxRows, kMaxK)];
alignas(4) std::int16_t g_pairs[kMaxK + 4];

int run_panels() {
  int n_kernels = 0;
  const rnncore::q8::DotPanelsKernel* kernels = rnncore::q8::int8_panel_kernels(&n_kernels);
  put("int8 interleaved kernels:");
  for (int i = 0; i < n_kernels; ++i) {
    put(" ");
    put(kernels[i].name);
  }
  end_line();
  long compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int rows = pick(1, kMaxRows), K = trial < kMaxK ? trial + 1 : pick(1, kMaxK);
    for (int i = 0; i < rows * K; ++i) {  // an odd row's −128 beside a negative weight has no interleaved form
      const int x = trial % 3 == 1 ? -128 : pick(-128, 127);
      g_w[i] = static_cast<std::int8_t>(x == -128 && (i / K) % 2 == 1 ? -127 : x);
    }
    for (int i = 0; i < K; ++i) g_v[i] = static_cast<std::int8_t>(trial % 3 == 1 ? -128 : pick(-128, 127));
    for (int j = 0; j < rows; ++j) g_bias[j] = trial % 2 ? INT32_MAX - pick(0, 1 << 20) : static_cast<std::int32_t>(next_u32());
    rnncore::q8::i8_dot_rows_scalar(g_w, rows, K, g_v, g_bias, g_want);
    if (!rnncore::q8::interleave4(g_w, rows, K, g_packed)) {
      put("interleave4 refused weights in -127..127 in odd rows; FAIL");
      end_line();
      return 1;
    }
    rnncore::q8::widen_pairs(g_v, K, g_pairs);
    for (int i = 0; i < n_kernels; ++i) {
      for (std::int32_t& x : g_got) x = 0x5A5A5A5A;
      const rnncore::q8::PanelProduct product{g_packed, g_pairs, g_bias, g_got, rows, rnncore::q8::interleaved4_words(K)};
      kernels[i].fn(&product, 1);
      if (const int j = first_wrong_row(rows); j >= 0) {
        put_failure(kernels[i].name, rows, K, j);
        end_line();
        return 1;
      }
      ++compared;
    }
  }
  put("compared ");
  put_uint(static_cast<unsigned long>(compared));
  put(" interleaved calls with the row-major scalar kernel's; PASS");
  end_line();
  return 0;
}

// The fixed-point sigmoid and tanh of src/int8_lstm.cpp (on Cortex-M: SMLABB, SSAT, the exp
// table, -O2) against the transcription of gemmlowp's arithmetic, on every int16 input and every
// integer_bits of tanh: the check of tests/test_int8_lstm.cpp on the firmware build's own code.
int run_activations() {
  namespace q8 = rnncore::q8;
  for (int v = -32768; v <= 32767; ++v) {
    const std::int16_t x = static_cast<std::int16_t>(v);
    int bad_ib = -2;  // -1: the sigmoid; 0..6: tanh with that many integer bits
    if (q8::sigmoid_q3_12(x) != q8::reference::sigmoid_q3_12(x)) bad_ib = -1;
    for (int ib = 0; ib <= 6 && bad_ib == -2; ++ib) {
      if (q8::tanh_q(x, ib) != q8::reference::tanh_q(x, ib)) bad_ib = ib;
    }
    if (bad_ib != -2) {
      put(bad_ib == -1 ? "FAIL: sigmoid_q3_12 differs from the reference at x = " : "FAIL: tanh_q differs from the reference at x = ");
      put(v < 0 ? "-" : "");
      put_uint(static_cast<unsigned long>(v < 0 ? -v : v));
      if (bad_ib >= 0) {
        put(", integer bits ");
        put_uint(static_cast<unsigned long>(bad_ib));
      }
      end_line();
      return 1;
    }
  }
  put("int8 activations: sigmoid and tanh (integer bits 0..6) equal the reference on all 65536 inputs; PASS");
  end_line();
  return 0;
}

}  // namespace

extern "C" int main(void) { return run() != 0 || run_panels() != 0 ? 1 : run_activations(); }

// The int8 matrix-vector kernels of a bare-metal build (on Cortex-M4/M7: i8_dot_4x16__dsp and
// i8_dot_panels_4x16__dsp)
// against the scalar kernel, on the emulated core: the check of tests/checkkernels.cpp ("int8
// dot kernels: ..."), which runs on the hosts and under qemu-user, repeated for the firmware
// build's own code (Thumb-2 at -Os, another register allocation around the kernel's assembly).
// Random shapes: rows 1..kUnitBlock + 1, K 1..300 (every K once, then at random), weights and vector at every
// alignment, the int8 extremes, biases near the int32 limits so that sums wrap. Then the build's
// sigmoid and tanh on every int16 input, and its whole step (the assembly loops of the Thumb-2
// builds, their tables) against a transcription of TFLite's step (run_steps). Prints PASS and
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
    rnncore::q8::i8_dot_1x1__scalar(g_w + wo, rows, K, g_v + vo, g_bias, g_want);
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

// The interleaved layout's kernels (on Cortex-M4/M7: i8_dot_panels_4x16__dsp, a whole function in
// assembly) against the row-major scalar kernel, on the same random shapes and values.
alignas(4) std::int8_t g_packed[rnncore::q8::interleaved4_i16_bytes(kMaxRows, kMaxK)];
alignas(4) std::int16_t g_pairs[kMaxK + 4];

int run_panels() {
  // The interleaved layout's kernels (an odd row's −128 beside a negative weight has no interleaved
  // form: −127 there), then the int16 panel layout's (i16_dot_panels_4x16__dsp), every weight −128..127.
  for (int i16 = 0; i16 < 2; ++i16) {
    int n_kernels = 0;
    const rnncore::q8::DotPanelsKernel* kernels =
        i16 ? rnncore::q8::int16_panel_kernels(&n_kernels) : rnncore::q8::int8_panel_kernels(&n_kernels);
    put(i16 ? "int16 panel kernels:" : "int8 interleaved kernels:");
    for (int i = 0; i < n_kernels; ++i) {
      put(" ");
      put(kernels[i].name);
    }
    end_line();
    long compared = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const int rows = pick(1, kMaxRows), K = trial < kMaxK ? trial + 1 : pick(1, kMaxK);
      for (int i = 0; i < rows * K; ++i) {
        const int x = trial % 3 == 1 ? -128 : pick(-128, 127);
        g_w[i] = static_cast<std::int8_t>(!i16 && x == -128 && (i / K) % 2 == 1 ? -127 : x);
      }
      for (int i = 0; i < K; ++i) g_v[i] = static_cast<std::int8_t>(trial % 3 == 1 ? -128 : pick(-128, 127));
      for (int j = 0; j < rows; ++j) g_bias[j] = trial % 2 ? INT32_MAX - pick(0, 1 << 20) : static_cast<std::int32_t>(next_u32());
      rnncore::q8::i8_dot_1x1__scalar(g_w, rows, K, g_v, g_bias, g_want);
      if (i16) {
        rnncore::q8::interleave4_i16(g_w, rows, K, g_packed);
      } else if (!rnncore::q8::interleave4(g_w, rows, K, g_packed)) {
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
    put(i16 ? " int16 panel calls with the row-major scalar kernel's; PASS" : " interleaved calls with the row-major scalar kernel's; PASS");
    end_line();
  }
  return 0;
}

// The fixed-point sigmoid and tanh of src/internal/int8_fixed_point.hpp (on Cortex-M: SMLABB, SSAT, the exp
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

// The step of the firmware build (int8_lstm_step: on Cortex-M its assembly loops, the build's
// activations and tables) against a transcription of TFLite's integer LSTM step written here from
// the reference arithmetic, on random models: H odd and even (tails of the two-unit loops, blocks
// of kUnitBlock and a last short one), every cell scale 2^-16 .. 2^-9 (tanh with IB < 0 .. 6),
// with and without a clip, multipliers that shift right and left; row-major and interleaved
// weights from the same state, three steps each.
constexpr int kStepMaxH = 40, kStepMaxI = 24, kSteps = 3;
namespace q8 = rnncore::q8;
alignas(4) std::int8_t g_sw[q8::kGates][kStepMaxH * kStepMaxI], g_sr[q8::kGates][kStepMaxH * kStepMaxH];
alignas(4) std::int8_t g_swi[q8::kGates][q8::interleaved4_bytes(kStepMaxH, kStepMaxI)];
alignas(4) std::int8_t g_sri[q8::kGates][q8::interleaved4_bytes(kStepMaxH, kStepMaxH)];
alignas(4) std::int8_t g_swi16[q8::kGates][q8::interleaved4_i16_bytes(kStepMaxH, kStepMaxI)];
alignas(4) std::int8_t g_sri16[q8::kGates][q8::interleaved4_i16_bytes(kStepMaxH, kStepMaxH)];
std::int32_t g_sbias[q8::kGates][kStepMaxH], g_storage[3][8 * kStepMaxH];
alignas(4) std::int8_t g_scratch[kStepMaxH + 3 + 4 * (kStepMaxH + kStepMaxI + 8)];
std::int8_t g_x[kSteps][kStepMaxI], g_h0[kStepMaxH], g_h[kStepMaxH], g_ref_h[kStepMaxH];
std::int16_t g_c0[kStepMaxH], g_c[kStepMaxH];

// One step of TFLite's 8x8_16 LSTM (per tensor), from p's multipliers and folded biases.
void reference_step(const q8::Int8LstmParams& p, const std::int8_t* x, std::int8_t* h, std::int16_t* c) {
  namespace ref = q8::reference;
  const int H = p.hidden_size, I = p.input_size;
  std::int16_t gate[q8::kGates][kStepMaxH];
  for (int g = 0; g < q8::kGates; ++g) {
    for (int j = 0; j < H; ++j) {
      std::uint32_t ax = static_cast<std::uint32_t>(p.x_bias[g][j]), ah = static_cast<std::uint32_t>(p.h_bias[g][j]);
      for (int k = 0; k < I; ++k) ax += static_cast<std::uint32_t>(g_sw[g][j * I + k] * x[k]);
      for (int k = 0; k < H; ++k) ah += static_cast<std::uint32_t>(g_sr[g][j * H + k] * h[k]);
      const std::int16_t zx = ref::sat16(ref::multiply_by_quantized_multiplier(static_cast<std::int32_t>(ax), p.x_mult[g]));
      const std::int16_t z =
          ref::sat16(zx + ref::multiply_by_quantized_multiplier(static_cast<std::int32_t>(ah), p.h_mult[g]));
      gate[g][j] = g == 2 ? ref::tanh_q(z, 3) : ref::sigmoid_q3_12(z);
    }
  }
  const int ib = 15 + p.cell_log2;
  for (int j = 0; j < H; ++j) {
    const std::int16_t fc = ref::wrap16(ref::rounding_divide_by_pot<std::int32_t>(gate[1][j] * c[j], 15));
    const std::int16_t ig = ref::wrap16(ref::rounding_divide_by_pot<std::int32_t>(gate[0][j] * gate[2][j], 30 + p.cell_log2));
    std::int32_t cn = ref::sat16(fc + ig);
    if (p.cell_clip > 0) cn = cn > p.cell_clip ? p.cell_clip : (cn < -p.cell_clip ? -p.cell_clip : cn);
    c[j] = static_cast<std::int16_t>(cn);
    // LiteRT leaves i in place of tanh(c) for a cell finer than 2^-15 (src/internal/int8_step_loops.hpp, update_cells)
    const std::int16_t t = ib >= 0 ? ref::tanh_q(c[j], ib) : gate[0][j];
    const std::int32_t hq = ref::multiply_by_quantized_multiplier(gate[3][j] * t, p.hidden_mult) + p.hidden_zp;
    g_ref_h[j] = static_cast<std::int8_t>(hq < -128 ? -128 : (hq > 127 ? 127 : hq));
  }
  for (int j = 0; j < H; ++j) h[j] = g_ref_h[j];
}

int run_steps() {
  constexpr int kShapes[][2] = {{37, 5}, {32, 16}, {6, 3}, {10, 24}, {34, 7}, {5, 1}, {40, 24}, {1, 2}};
  int compared = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const int H = kShapes[trial % 8][0], I = kShapes[trial % 8][1];
    q8::Int8LstmQuantization q;
    q.input_scale = 1.0f / static_cast<float>(pick(20, 200));
    q.input_zp = pick(-20, 20);
    for (int g = 0; g < q8::kGates; ++g) {
      // effective scales w · x / 2^-12 mostly below 1 (shifts right), one gate in six above (left)
      q.w_scale[g] = (trial + g) % 6 == 0 ? 0.2f : 1.0f / static_cast<float>(pick(100, 3000));
      q.r_scale[g] = 1.0f / static_cast<float>(pick(100, 3000));
    }
    q.state_scale = q.hidden_scale = 1.0f / static_cast<float>(pick(100, 160));
    q.state_zp = q.hidden_zp = pick(-10, 10);
    const int cell_log2 = -16 + trial % 8;  // 2^-16 .. 2^-9
    q.cell_scale = 1.0f / static_cast<float>(1 << -cell_log2);
    q.cell_clip = trial % 3 == 0 ? 0.0f : static_cast<float>(pick(1000, 32767)) * q.cell_scale;
    const std::int32_t* bias[q8::kGates];
    const std::int8_t *w[q8::kGates], *r[q8::kGates], *wi[q8::kGates], *ri[q8::kGates], *w16[q8::kGates], *r16[q8::kGates];
    for (int g = 0; g < q8::kGates; ++g) {
      for (int i = 0; i < H * I; ++i) g_sw[g][i] = static_cast<std::int8_t>(pick(-127, 127));
      for (int i = 0; i < H * H; ++i) g_sr[g][i] = static_cast<std::int8_t>(pick(-127, 127));
      for (int j = 0; j < H; ++j) g_sbias[g][j] = pick(-40000, 40000);
      if (!q8::interleave4(g_sw[g], H, I, g_swi[g]) || !q8::interleave4(g_sr[g], H, H, g_sri[g])) {
        put("FAIL: interleave4 refused weights in -127..127");
        end_line();
        return 1;
      }
      q8::interleave4_i16(g_sw[g], H, I, g_swi16[g]);
      q8::interleave4_i16(g_sr[g], H, H, g_sri16[g]);
      w16[g] = g_swi16[g];
      r16[g] = g_sri16[g];
      bias[g] = g_sbias[g];
      w[g] = g_sw[g];
      r[g] = g_sr[g];
      wi[g] = g_swi[g];
      ri[g] = g_sri[g];
    }
    for (int t = 0; t < kSteps; ++t)
      for (int k = 0; k < I; ++k) g_x[t][k] = static_cast<std::int8_t>(pick(-128, 127));
    const int c_bound = q.cell_clip > 0.0f ? static_cast<int>(q.cell_clip / q.cell_scale) : 32767;
    for (int j = 0; j < H; ++j) {
      g_h0[j] = static_cast<std::int8_t>(pick(-128, 127));
      g_c0[j] = static_cast<std::int16_t>(pick(-c_bound, c_bound));
    }
    for (int layout = 0; layout < 3; ++layout) {
      q8::Int8LstmParams p;
      q.weight_layout = static_cast<q8::Int8WeightLayout>(layout);  // row-major, interleaved, int16 panels
      if (q8::int8_lstm_prepare(q, I, H, layout == 0 ? w : (layout == 1 ? wi : w16), layout == 0 ? r : (layout == 1 ? ri : r16), bias, g_storage[layout],
                                8 * kStepMaxH, &p) != rnncore::Status::ok) {
        put("FAIL: int8_lstm_prepare refused a step model");
        end_line();
        return 1;
      }
      q8::Int8LstmParams ref_params = p;  // the same multipliers and biases
      for (int j = 0; j < H; ++j) {
        g_h[j] = g_h0[j];
        g_c[j] = g_c0[j];
      }
      std::int8_t ref_h[kStepMaxH];
      std::int16_t ref_c[kStepMaxH];
      for (int j = 0; j < H; ++j) {
        ref_h[j] = g_h0[j];
        ref_c[j] = g_c0[j];
      }
      for (int t = 0; t < kSteps; ++t) {
        q8::int8_lstm_step(p, 1, g_x[t], g_h, g_c, g_scratch);
        reference_step(ref_params, g_x[t], ref_h, ref_c);
        for (int j = 0; j < H; ++j) {
          if (g_h[j] != ref_h[j] || g_c[j] != ref_c[j]) {
            put("FAIL: int8_lstm_step differs from the reference: H ");
            put_uint(static_cast<unsigned long>(H));
            put(" I ");
            put_uint(static_cast<unsigned long>(I));
            put(layout == 0 ? " row-major" : (layout == 1 ? " interleaved" : " int16 panels"));
            put(" cell 2^-");
            put_uint(static_cast<unsigned long>(-cell_log2));
            put(q.cell_clip > 0.0f ? " clipped" : " unclipped");
            put(" step ");
            put_uint(static_cast<unsigned long>(t));
            put(" unit ");
            put_uint(static_cast<unsigned long>(j));
            end_line();
            return 1;
          }
        }
        ++compared;
      }
    }
  }
  put("int8 steps: ");
  put_uint(static_cast<unsigned long>(compared));
  put(" steps (row-major, interleaved and int16 panels, cell scales 2^-16 .. 2^-9) equal the reference; PASS");
  end_line();
  return 0;
}

}  // namespace

extern "C" int main(void) {
  return run() != 0 || run_panels() != 0 || run_activations() != 0 ? 1 : run_steps();
}

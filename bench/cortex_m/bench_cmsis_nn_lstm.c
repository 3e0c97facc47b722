/* Cortex-M instruction-count bench, CMSIS-NN column (bench/cortex_m_int8_counts.sh with CMSIS_NN
 * set): ARM CMSIS-NN's integer LSTM, arm_lstm_unidirectional_s8 (int8 input, output and weights,
 * int16 cell state and gates: the function TFLite Micro's CMSIS-NN kernel calls for an int8
 * UNIDIRECTIONAL_SEQUENCE_LSTM), one layer, I = H, B = 1, on the same weights, inputs and
 * quantization as bench_lstm.cpp's int8 LSTM (the same xorshift32 draws in the same order, the same
 * scales and zero points). CMSIS-NN itself is not part of this repository: the script compiles it
 * from the directory CMSIS_NN names and links it in.
 *
 * BENCH_CHECK 0: runs BENCH_REPS passes of BENCH_T steps (the step count and repetitions live in
 * volatile variables so that every image has the same code; the script's double difference over T
 * and passes cancels start-up, set-up and each call's fixed cost) and prints one line of memory
 * figures. BENCH_CHECK 1: also runs rnncore's int8 LSTM (the C API, rnncore/int8.h) on the same
 * model and input, and prints how many outputs (every step's h) and cell states (at the end of
 * each pass) differ.
 *
 * The parameters follow TFLite Micro's CMSIS-NN LSTM kernel: per gate the input and recurrent
 * effective scales (weight scale times input or output-state scale, over the gates' Q3.12 scale
 * 2^-12), "kernel sums" (the bias plus -z_x times each input-weight row's sum; -z_h times each
 * recurrent row's sum) from arm_vector_sum_s8, forget-to-cell 2^-15, input-to-cell
 * 2^-30 / s_c, output 2^-30 / s_h, the cell clip in cell units, the cell scale's power of two.
 * Built with -DBENCH_H=.. -DBENCH_T=.. -DBENCH_REPS=.. [-DBENCH_CHECK=1]. C99. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "examples/firmware/board.h"
#include "examples/firmware/console.h"
#if BENCH_CHECK
#include "rnncore/int8.h"
#endif

#ifndef BENCH_H
#define BENCH_H 32
#endif
#ifndef BENCH_T
#define BENCH_T 4
#endif
#ifndef BENCH_REPS
#define BENCH_REPS 1
#endif
#ifndef BENCH_CHECK
#define BENCH_CHECK 0
#endif
#define BENCH_MAX_T 16 /* the largest T the script uses: buffers are sized for it */

enum { H = BENCH_H, I = BENCH_H, kGates = 4 }; /* gates in TFLite's order: input, forget, cell, output */

static volatile int g_steps = BENCH_T;
static volatile int g_reps = BENCH_REPS;

/* bench_lstm.cpp's generator, seed and draw order: the same weights, biases and inputs. */
static uint32_t g_rng = 2463534242u;
static uint32_t next_u32(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}

static void report(const char* key, unsigned long value) {
  put(" ");
  put(key);
  put("=");
  put_uint(value);
}

/* TFLite's QuantizeMultiplier: scale = q * 2^shift, q in [0.5, 1) as a Q31 multiplier. */
static void quantize_multiplier(double scale, int32_t* multiplier, int32_t* shift) {
  int e = 0;
  if (scale == 0.0) {
    *multiplier = 0;
    *shift = 0;
    return;
  }
  const double q = frexp(scale, &e);
  int64_t m = (int64_t)round(q * 2147483648.0);
  if (m == ((int64_t)1 << 31)) {
    m /= 2;
    ++e;
  }
  if (e < -31) {
    e = 0;
    m = 0;
  }
  *multiplier = (int32_t)m;
  *shift = e;
}

static int8_t g_w[kGates][H * I], g_r[kGates][H * H]; /* flash on a real part (const arrays) */
static int32_t g_b[kGates][H];
static int32_t g_x_sum[kGates][H], g_h_sum[kGates][H]; /* kernel sums (effective biases; RAM) */
static int8_t g_x[BENCH_MAX_T * I];
static int8_t g_y[BENCH_MAX_T * H]; /* the op's output: every step's h, read back as the next step's */
static int8_t g_h[H];               /* output state, carried from call to call */
static int16_t g_c[H];              /* cell state */
static int16_t g_temp1[H], g_temp2[H]; /* scratch: gate outputs, B * H int16 each */
static cmsis_nn_lstm_params g_params;
static cmsis_nn_lstm_context g_ctx;

#if BENCH_CHECK
static int8_t g_ref_y[BENCH_MAX_T * H], g_ref_h[H], g_ref_scratch[H];
static int16_t g_ref_c[H];
static int32_t g_ref_bias[8 * H];
static rnncore_int8_lstm g_ref;
#endif

static int fail(const char* what) {
  put("FAIL: ");
  put(what);
  end_line();
  return 1;
}

static int run(void) {
  int g;
  size_t k;
  for (g = 0; g < kGates; ++g) {
    for (k = 0; k < sizeof g_w[g]; ++k) g_w[g][k] = (int8_t)next_u32();
    for (k = 0; k < sizeof g_r[g]; ++k) g_r[g][k] = (int8_t)next_u32();
    for (k = 0; k < H; ++k) g_b[g][k] = (int32_t)(next_u32() % 20001) - 10000;
  }
  for (k = 0; k < sizeof g_x; ++k) g_x[k] = (int8_t)next_u32();

  /* bench_lstm.cpp's quantization */
  const float input_scale = 1.0f / 64, w_scale = 1.0f / 512, r_scale = 1.0f / 512;
  const float state_scale = 1.0f / 128, cell_scale = 1.0f / 2048, cell_clip = 10.0f;
  const int32_t input_zp = 3, state_zp = -5;
  const float gate_scale = 1.0f / 4096; /* Q3.12 */
  int cell_power = 0;
  (void)frexp(cell_scale, &cell_power);
  cell_power -= 1; /* 2^-11 = 0.5 * 2^-10 */

  cmsis_nn_lstm_gate* gates[kGates] = {&g_params.input_gate, &g_params.forget_gate, &g_params.cell_gate,
                                       &g_params.output_gate};
  for (g = 0; g < kGates; ++g) {
    cmsis_nn_lstm_gate* gate = gates[g];
    arm_vector_sum_s8(g_x_sum[g], I, H, g_w[g], -input_zp, 0, g_b[g]);
    arm_vector_sum_s8(g_h_sum[g], H, H, g_r[g], -state_zp, 0, NULL);
    quantize_multiplier((double)(w_scale * input_scale / gate_scale), &gate->input_multiplier, &gate->input_shift);
    quantize_multiplier((double)(r_scale * state_scale / gate_scale), &gate->hidden_multiplier, &gate->hidden_shift);
    gate->input_weights = g_w[g];
    gate->input_effective_bias = g_x_sum[g];
    gate->hidden_weights = g_r[g];
    gate->hidden_effective_bias = g_h_sum[g];
    gate->bias = g_b[g];
    gate->activation_type = g == 2 ? ARM_TANH : ARM_SIGMOID;
  }
  g_params.time_major = 0; /* batch-major [B, T, I], as a Keras conversion and rnncore's bench */
  g_params.batch_size = 1;
  g_params.time_steps = g_steps;
  g_params.input_size = I;
  g_params.hidden_size = H;
  g_params.input_offset = -input_zp;
  quantize_multiplier((double)(1.0f / 32768), &g_params.forget_to_cell_multiplier, &g_params.forget_to_cell_shift);
  quantize_multiplier((double)(1.0f / 32768 / 32768 / cell_scale), &g_params.input_to_cell_multiplier,
                      &g_params.input_to_cell_shift);
  {
    float clip = cell_clip / cell_scale;
    clip = clip > 32767.0f ? 32767.0f : clip < -32768.0f ? -32768.0f : clip;
    g_params.cell_clip = (int16_t)clip;
  }
  g_params.cell_scale_power = cell_power;
  quantize_multiplier((double)(1.0f / 32768 / 32768 / state_scale), &g_params.output_multiplier,
                      &g_params.output_shift);
  g_params.output_offset = state_zp;
  g_ctx.temp1 = g_temp1;
  g_ctx.temp2 = g_temp2;
  g_ctx.cell_state = g_c;
  g_ctx.hidden_state = g_h;

#if BENCH_CHECK
  {
    rnncore_int8_lstm_quantization q;
    const int8_t* w[kGates] = {g_w[0], g_w[1], g_w[2], g_w[3]};
    const int8_t* r[kGates] = {g_r[0], g_r[1], g_r[2], g_r[3]};
    const int32_t* b[kGates] = {g_b[0], g_b[1], g_b[2], g_b[3]};
    memset(&q, 0, sizeof q);
    q.input_scale = input_scale;
    q.input_zp = input_zp;
    for (g = 0; g < kGates; ++g) {
      q.w_scale[g] = w_scale;
      q.r_scale[g] = r_scale;
    }
    q.state_scale = q.hidden_scale = state_scale;
    q.state_zp = q.hidden_zp = state_zp;
    q.cell_scale = cell_scale;
    q.cell_clip = cell_clip;
    rnncore_status s = rnncore_int8_lstm_prepare(&q, I, H, w, r, b, g_ref_bias, 8 * H, &g_ref);
    if (s != RNNCORE_OK) return put_failure("rnncore_int8_lstm_prepare", s);
  }
  unsigned long diff_y = 0, diff_c = 0, n_y = 0, max_y = 0, max_c = 0;
#endif

  board_stack_mark();
  const int steps = g_steps, reps = g_reps;
  int rep, j;
  for (rep = 0; rep < reps; ++rep) {
    if (arm_lstm_unidirectional_s8(g_x, g_y, &g_params, &g_ctx) != ARM_CMSIS_NN_SUCCESS) {
      return fail("arm_lstm_unidirectional_s8");
    }
#if BENCH_CHECK
    rnncore_status s =
        rnncore_int8_lstm_run(&g_ref, 1, steps, g_x, g_ref_y, g_ref_h, g_ref_c, g_ref_scratch, sizeof g_ref_scratch);
    if (s != RNNCORE_OK) return put_failure("rnncore_int8_lstm_run", s);
    for (j = 0; j < steps * H; ++j) {
      const unsigned long d = (unsigned long)(g_y[j] > g_ref_y[j] ? g_y[j] - g_ref_y[j] : g_ref_y[j] - g_y[j]);
      diff_y += d != 0;
      max_y = d > max_y ? d : max_y;
      ++n_y;
    }
    for (j = 0; j < H; ++j) {
      const unsigned long d = (unsigned long)(g_c[j] > g_ref_c[j] ? g_c[j] - g_ref_c[j] : g_ref_c[j] - g_c[j]);
      diff_c += d != 0;
      max_c = d > max_c ? d : max_c;
    }
#endif
  }
  const unsigned long stack = board_stack_high_water();
  uint32_t sum = 0; /* bench_lstm.cpp's checksum of the final state */
  for (j = 0; j < H; ++j) sum = sum * 31u + (uint8_t)g_h[j] + (uint16_t)g_c[j];
  put("BENCH cmsis-nn");
  report("H", H);
  report("T", (unsigned long)steps);
  report("R", (unsigned long)reps);
  end_line();
  put("MEM");
  report("weight_bytes", sizeof g_w + sizeof g_r);
  report("bias_bytes", sizeof g_b);
  report("kernel_sum_bytes", sizeof g_x_sum + sizeof g_h_sum);
  report("state_bytes", sizeof g_h + sizeof g_c);
  report("scratch_bytes", sizeof g_temp1 + sizeof g_temp2);
  end_line();
  put("MEM"); /* the console's lines hold 160 characters */
  report("output_step_bytes", H);
  report("params_bytes", sizeof g_params + sizeof g_ctx);
  report("stack_bytes", stack);
  report("checksum", sum);
  end_line();
#if BENCH_CHECK
  put("CHECK");
  report("outputs", n_y);
  report("diff_y", diff_y);
  report("max_abs_y", max_y);
  report("cells", (unsigned long)reps * H);
  report("diff_c", diff_c);
  report("max_abs_c", max_c);
  end_line();
#endif
  return 0;
}

int main(void) { return run(); }

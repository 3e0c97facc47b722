/* An int8 header of `rnncore export-c` for two stacked Keras Bidirectional(LSTM) layers with
 * merge_mode "ave" returning every step (tests/golden/tflite_int8/stacks/bidi_ave_stack2_*, made by
 * LiteRT), compiled as C99 and run through the C API (rnncore/int8.h) as firmware would: per layer
 * the forward LSTM over the steps in order, the backward LSTM over each row's steps reversed (its
 * output reversed back), then per element the layer's ADD of the two outputs and the MUL by its
 * constant 0.5 (rnncore_int8_add_run, rnncore_int8_mul_constant_run). Every output must equal
 * LiteRT's (the header's sample). Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "merge_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "merge_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "merge_model.h"
#endif

#define B MERGE_MODEL_SAMPLE_BATCH
#define T MERGE_MODEL_SAMPLE_STEPS
#define MAX_H 16
#define MAX_I 16

typedef char two_ave_layers[(MERGE_MODEL_LAYERS == 2 && MERGE_MODEL_L0_MERGE == 3 && MERGE_MODEL_L1_MERGE == 3 &&
                             MERGE_MODEL_RETURN_SEQUENCES && MERGE_MODEL_DENSE == 0 && MERGE_MODEL_L0_INPUT_SIZE <= MAX_I &&
                             MERGE_MODEL_L0_HIDDEN_SIZE <= MAX_H && MERGE_MODEL_L1_HIDDEN_SIZE <= MAX_H &&
                             MERGE_MODEL_L1_INPUT_SIZE <= MAX_I)
                                ? 1 : -1];

static int8_t y0[B * T * MAX_H], y[B * T * MAX_H];
static int8_t xr[B * T * MAX_I], fw_out[B * T * MAX_H], bw_out[B * T * MAX_H], bw_back[B * T * MAX_H];
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
static int8_t h[B * MAX_H];
static int8_t scratch[MAX2(MAX2(MERGE_MODEL_L0_FW_SCRATCH_BYTES, MERGE_MODEL_L0_BW_SCRATCH_BYTES),
                           MAX2(MERGE_MODEL_L1_FW_SCRATCH_BYTES, MERGE_MODEL_L1_BW_SCRATCH_BYTES))];
static int16_t c[B * MAX_H];

/* x [B, T, n] with each row's steps reversed into out. */
static void reverse_steps(const int8_t* x, int n, int8_t* out) {
  int b, t;
  for (b = 0; b < B; ++b)
    for (t = 0; t < T; ++t) memcpy(out + (b * T + T - 1 - t) * n, x + (b * T + t) * n, (size_t)n);
}

/* One direction over x [B, T, in] from LiteRT's initial state. */
static int run_direction(const rnncore_int8_lstm* lstm, int h_size, int zp, const int8_t* x, int8_t* out) {
  memset(h, zp, sizeof h);
  memset(c, 0, sizeof c);
  (void)h_size;
  return check("run", rnncore_int8_lstm_run(lstm, B, T, x, out, h, c, scratch, sizeof scratch));
}

/* One ave layer: x [B, T, in] to out [B, T, H]. */
static int run_layer(const rnncore_int8_lstm* fw, const rnncore_int8_lstm* bw, int in, int hs, int zf, int zb,
                     const rnncore_int8_add* add, const rnncore_int8_mul* mul, int8_t half, const int8_t* x, int8_t* out) {
  const size_t n = (size_t)B * T * (size_t)hs;
  reverse_steps(x, in, xr);
  if (run_direction(fw, hs, zf, x, fw_out) || run_direction(bw, hs, zb, xr, bw_out)) return 1;
  reverse_steps(bw_out, hs, bw_back);
  return check("add", rnncore_int8_add_run(add, n, fw_out, bw_back, out)) ||
         check("mul", rnncore_int8_mul_constant_run(mul, n, out, half, out));
}

int main(void) {
  rnncore_int8_lstm f0, b0, f1, b1;
  size_t i, differ = 0;
  if (check("prepare", rnncore_int8_lstm_prepare_folded(&merge_model_l0_fw_quantization, MERGE_MODEL_L0_INPUT_SIZE,
                                                        MERGE_MODEL_L0_FW_HIDDEN_SIZE, merge_model_l0_fw_w_gates,
                                                        merge_model_l0_fw_r_gates, merge_model_l0_fw_bias_gates,
                                                        merge_model_l0_fw_folded_bias, MERGE_MODEL_L0_FW_BIAS_WORDS, &f0)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&merge_model_l0_bw_quantization, MERGE_MODEL_L0_INPUT_SIZE,
                                                        MERGE_MODEL_L0_BW_HIDDEN_SIZE, merge_model_l0_bw_w_gates,
                                                        merge_model_l0_bw_r_gates, merge_model_l0_bw_bias_gates,
                                                        merge_model_l0_bw_folded_bias, MERGE_MODEL_L0_BW_BIAS_WORDS, &b0)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&merge_model_l1_fw_quantization, MERGE_MODEL_L1_INPUT_SIZE,
                                                        MERGE_MODEL_L1_FW_HIDDEN_SIZE, merge_model_l1_fw_w_gates,
                                                        merge_model_l1_fw_r_gates, merge_model_l1_fw_bias_gates,
                                                        merge_model_l1_fw_folded_bias, MERGE_MODEL_L1_FW_BIAS_WORDS, &f1)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&merge_model_l1_bw_quantization, MERGE_MODEL_L1_INPUT_SIZE,
                                                        MERGE_MODEL_L1_BW_HIDDEN_SIZE, merge_model_l1_bw_w_gates,
                                                        merge_model_l1_bw_r_gates, merge_model_l1_bw_bias_gates,
                                                        merge_model_l1_bw_folded_bias, MERGE_MODEL_L1_BW_BIAS_WORDS, &b1)) ||
      wrong_layout("layer 0 forward", &f0) || wrong_layout("layer 0 backward", &b0) ||
      wrong_layout("layer 1 forward", &f1) || wrong_layout("layer 1 backward", &b1))
    return 1;
  if (run_layer(&f0, &b0, MERGE_MODEL_L0_INPUT_SIZE, MERGE_MODEL_L0_HIDDEN_SIZE, MERGE_MODEL_L0_FW_STATE_ZERO_POINT,
                MERGE_MODEL_L0_BW_STATE_ZERO_POINT, &merge_model_l0_merge_add, &merge_model_l0_merge_mul,
                MERGE_MODEL_L0_MERGE_HALF, merge_model_sample_input, y0) ||
      run_layer(&f1, &b1, MERGE_MODEL_L1_INPUT_SIZE, MERGE_MODEL_L1_HIDDEN_SIZE, MERGE_MODEL_L1_FW_STATE_ZERO_POINT,
                MERGE_MODEL_L1_BW_STATE_ZERO_POINT, &merge_model_l1_merge_add, &merge_model_l1_merge_mul,
                MERGE_MODEL_L1_MERGE_HALF, y0, y))
    return 1;
  for (i = 0; i < (size_t)B * T * MERGE_MODEL_OUTPUT_SIZE; ++i) differ += y[i] != merge_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ,
         (size_t)B * T * MERGE_MODEL_OUTPUT_SIZE);
  return (differ != 0) | run_packed(&merge_model_stack, merge_model_packed, sizeof merge_model_packed, merge_model_sample_input, B, T, merge_model_sample_output,
                                     sizeof merge_model_sample_output);
}

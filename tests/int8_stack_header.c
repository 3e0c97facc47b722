/* An int8 header of `rnncore export-c` for a stack with a Dense head (two LSTM layers, one Dense
 * layer: tests/golden/tflite_int8/stacks/dense_stack2_*, made by LiteRT), compiled as C99 and
 * run through the C API (rnncore/int8.h) as firmware would: each LSTM layer prepared from its
 * folded biases, run on the previous layer's every step, the last layer's last step through
 * the Dense layer. Every output must equal LiteRT's (the header's sample). Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "stack_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "stack_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "stack_model.h"
#endif

#define B STACK_MODEL_SAMPLE_BATCH
#define T STACK_MODEL_SAMPLE_STEPS

typedef char two_lstm_one_dense[(STACK_MODEL_LAYERS == 2 && STACK_MODEL_DENSE == 1 && !STACK_MODEL_RETURN_SEQUENCES) ? 1 : -1];

static int8_t y0[B * T * STACK_MODEL_L0_HIDDEN_SIZE];
static int8_t h0[B * STACK_MODEL_L0_HIDDEN_SIZE], h1[B * STACK_MODEL_L1_HIDDEN_SIZE];
static int16_t c0[B * STACK_MODEL_L0_HIDDEN_SIZE], c1[B * STACK_MODEL_L1_HIDDEN_SIZE];
static int8_t scratch[STACK_MODEL_L0_SCRATCH_BYTES > STACK_MODEL_L1_SCRATCH_BYTES ? STACK_MODEL_L0_SCRATCH_BYTES
                                                                                   : STACK_MODEL_L1_SCRATCH_BYTES];
static int8_t y[B * STACK_MODEL_OUTPUT_SIZE];
static int32_t fc_bias[STACK_MODEL_FC0_OUT_SIZE];
static float fc_scale[STACK_MODEL_FC0_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0, l1;
  rnncore_int8_dense fc0;
  size_t i, differ = 0;
  if (check("prepare layer 0", rnncore_int8_lstm_prepare_folded(
                                   &stack_model_l0_quantization, STACK_MODEL_L0_INPUT_SIZE, STACK_MODEL_L0_HIDDEN_SIZE,
                                   stack_model_l0_w_gates, stack_model_l0_r_gates, stack_model_l0_bias_gates,
                                   stack_model_l0_folded_bias, STACK_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare layer 1", rnncore_int8_lstm_prepare_folded(
                                   &stack_model_l1_quantization, STACK_MODEL_L1_INPUT_SIZE, STACK_MODEL_L1_HIDDEN_SIZE,
                                   stack_model_l1_w_gates, stack_model_l1_r_gates, stack_model_l1_bias_gates,
                                   stack_model_l1_folded_bias, STACK_MODEL_L1_BIAS_WORDS, &l1)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&stack_model_fc0_quantization, STACK_MODEL_FC0_IN_SIZE,
                                                          STACK_MODEL_FC0_OUT_SIZE, stack_model_fc0_w,
                                                          stack_model_fc0_bias, fc_bias, fc_scale, &fc0)) ||
      wrong_layout("layer 0", &l0) || wrong_layout("layer 1", &l1))
    return 1;
  memset(h0, STACK_MODEL_L0_STATE_ZERO_POINT, sizeof h0);
  memset(h1, STACK_MODEL_L1_STATE_ZERO_POINT, sizeof h1);
  if (check("run layer 0", rnncore_int8_lstm_run(&l0, B, T, stack_model_sample_input, y0, h0, c0, scratch,
                                                 sizeof scratch)) ||
      check("run layer 1", rnncore_int8_lstm_run(&l1, B, T, y0, NULL, h1, c1, scratch, sizeof scratch)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B, h1, y)))  /* h1: layer 1's last step */
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != stack_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&stack_model_stack, stack_model_packed, sizeof stack_model_packed, stack_model_sample_input, B, T, stack_model_sample_output,
                                     sizeof stack_model_sample_output);
}

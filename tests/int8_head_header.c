/* An int8 header of `rnncore export-c` for a classifier (one LSTM layer, Dense 8 with a sigmoid,
 * Dense 3, softmax: tests/golden/tflite_int8/stacks/dense_head_*, made by LiteRT), compiled as
 * C99 and run through the C API (rnncore/int8.h) as firmware would: the LSTM from its folded
 * biases, its last step through Dense 0, the exported sigmoid table, Dense 1 and the exported
 * softmax, in place where the API allows. Every output must equal LiteRT's (the header's sample).
 * Also: the exported tables equal the ones the C API builds. Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "head_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "head_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "head_model.h"
#endif

#define B HEAD_MODEL_SAMPLE_BATCH
#define T HEAD_MODEL_SAMPLE_STEPS

typedef char one_lstm_two_dense_softmax[(HEAD_MODEL_LAYERS == 1 && HEAD_MODEL_DENSE == 2 && HEAD_MODEL_SOFTMAX &&
                                         HEAD_MODEL_FC0_ACTIVATION == RNNCORE_INT8_SIGMOID && HEAD_MODEL_FC1_ACTIVATION == 0)
                                            ? 1 : -1];

static int8_t h[B * HEAD_MODEL_L0_HIDDEN_SIZE];
static int16_t c[B * HEAD_MODEL_L0_HIDDEN_SIZE];
static int8_t scratch[HEAD_MODEL_L0_SCRATCH_BYTES];
static int8_t hidden[B * HEAD_MODEL_FC0_OUT_SIZE];
static int8_t y[B * HEAD_MODEL_OUTPUT_SIZE];
static int32_t fc0_bias[HEAD_MODEL_FC0_OUT_SIZE], fc1_bias[HEAD_MODEL_FC1_OUT_SIZE];
static float fc0_scale[HEAD_MODEL_FC0_OUT_SIZE], fc1_scale[HEAD_MODEL_FC1_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0;
  rnncore_int8_dense fc0, fc1;
  static rnncore_int8_softmax softmax;
  int8_t table[256];
  size_t i, differ = 0;
  if (check("prepare the LSTM", rnncore_int8_lstm_prepare_folded(
                                    &head_model_l0_quantization, HEAD_MODEL_L0_INPUT_SIZE, HEAD_MODEL_L0_HIDDEN_SIZE,
                                    head_model_l0_w_gates, head_model_l0_r_gates, head_model_l0_bias_gates,
                                    head_model_l0_folded_bias, HEAD_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&head_model_fc0_quantization, HEAD_MODEL_FC0_IN_SIZE,
                                                          HEAD_MODEL_FC0_OUT_SIZE, head_model_fc0_w, head_model_fc0_bias,
                                                          fc0_bias, fc0_scale, &fc0)) ||
      check("prepare Dense 1", rnncore_int8_dense_prepare(&head_model_fc1_quantization, HEAD_MODEL_FC1_IN_SIZE,
                                                          HEAD_MODEL_FC1_OUT_SIZE, head_model_fc1_w, head_model_fc1_bias,
                                                          fc1_bias, fc1_scale, &fc1)) ||
      wrong_layout("the LSTM", &l0))
    return 1;
  memset(h, HEAD_MODEL_L0_STATE_ZERO_POINT, sizeof h);
  if (check("run the LSTM", rnncore_int8_lstm_run(&l0, B, T, head_model_sample_input, NULL, h, c, scratch, sizeof scratch)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B, h, hidden)) ||
      check("sigmoid", rnncore_int8_lookup(head_model_fc0_table, (int32_t)sizeof hidden, hidden, hidden)) ||
      check("run Dense 1", rnncore_int8_dense_run(&fc1, B, hidden, y)) ||
      check("softmax", rnncore_int8_softmax_run(&head_model_softmax, B, HEAD_MODEL_OUTPUT_SIZE, y, y)))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != head_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);

  /* The exported tables are the C API's own. */
  if (check("sigmoid table", rnncore_int8_activation_table(RNNCORE_INT8_SIGMOID, head_model_fc0_quantization.output_scale,
                                                           head_model_fc0_quantization.output_zp,
                                                           HEAD_MODEL_FC0_TABLE_OUTPUT_SCALE,
                                                           HEAD_MODEL_FC0_TABLE_OUTPUT_ZERO_POINT, table)) ||
      check("softmax table", rnncore_int8_softmax_prepare(HEAD_MODEL_SOFTMAX_INPUT_SCALE, HEAD_MODEL_SOFTMAX_BETA,
                                                          head_model_softmax.output_scale, head_model_softmax.output_zp,
                                                          &softmax)))
    return 1;
  if (memcmp(table, head_model_fc0_table, sizeof table) != 0 || memcmp(&softmax, &head_model_softmax, sizeof softmax) != 0) {
    printf("FAIL: an exported table differs from the C API's\n");
    return 1;
  }
  /* Refusals: a bad activation, a null table, a softmax row of no elements. */
  if (rnncore_int8_activation_table((rnncore_int8_activation)7, 1.0f, 0, 1.0f, 0, table) != RNNCORE_ERR_INVALID_ENUM ||
      rnncore_int8_lookup(NULL, 1, y, y) != RNNCORE_ERR_NULL_POINTER ||
      rnncore_int8_softmax_run(&softmax, 1, 0, y, y) != RNNCORE_ERR_INVALID_SIZE) {
    printf("FAIL: a refusal\n");
    return 1;
  }
  /* The one-call arrays: the Dense chain (pre_head) and the head in NAME_stack, run from NAME_packed. */
  return (differ != 0) | run_packed(&head_model_stack, head_model_packed, sizeof head_model_packed, head_model_sample_input, B, T, head_model_sample_output,
                                     sizeof head_model_sample_output);
}

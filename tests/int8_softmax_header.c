/* An int8 header of `rnncore export-c` for a Keras Softmax layer after an activated Dense layer (one
 * LSTM on the last step, Dense 5 with RELU, Softmax: tests/golden/tflite_int8/stacks/
 * dense_relu_softmax_*, made by LiteRT), compiled as C99. Through the C API (rnncore/int8.h) as
 * firmware would: the LSTM from its folded biases, its last step through Dense 0 (relu fused) and
 * the exported softmax; and through the one-call arrays (NAME_stack: the Dense as pre_head, the
 * softmax's head of weights I at scale 1). Every output must equal LiteRT's. Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "softmax_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "softmax_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "softmax_model.h"
#endif

#define B SOFTMAX_MODEL_SAMPLE_BATCH
#define T SOFTMAX_MODEL_SAMPLE_STEPS

typedef char one_lstm_relu_dense_softmax[(SOFTMAX_MODEL_LAYERS == 1 && SOFTMAX_MODEL_DENSE == 1 && SOFTMAX_MODEL_SOFTMAX &&
                                          !SOFTMAX_MODEL_RETURN_SEQUENCES) ? 1 : -1];

static int8_t h[B * SOFTMAX_MODEL_L0_HIDDEN_SIZE];
static int16_t c[B * SOFTMAX_MODEL_L0_HIDDEN_SIZE];
static int8_t scratch[SOFTMAX_MODEL_L0_SCRATCH_BYTES];
static int8_t y[B * SOFTMAX_MODEL_OUTPUT_SIZE];
static int32_t fc0_bias[SOFTMAX_MODEL_FC0_OUT_SIZE];
static float fc0_scale[SOFTMAX_MODEL_FC0_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0;
  rnncore_int8_dense fc0;
  size_t i, differ = 0;
  if (check("prepare the LSTM", rnncore_int8_lstm_prepare_folded(
                                    &softmax_model_l0_quantization, SOFTMAX_MODEL_L0_INPUT_SIZE,
                                    SOFTMAX_MODEL_L0_HIDDEN_SIZE, softmax_model_l0_w_gates, softmax_model_l0_r_gates,
                                    softmax_model_l0_bias_gates, softmax_model_l0_folded_bias,
                                    SOFTMAX_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&softmax_model_fc0_quantization, SOFTMAX_MODEL_FC0_IN_SIZE,
                                                          SOFTMAX_MODEL_FC0_OUT_SIZE, softmax_model_fc0_w,
                                                          softmax_model_fc0_bias, fc0_bias, fc0_scale, &fc0)) ||
      wrong_layout("the LSTM", &l0))
    return 1;
  memset(h, SOFTMAX_MODEL_L0_STATE_ZERO_POINT, sizeof h);
  if (check("run the LSTM", rnncore_int8_lstm_run(&l0, B, T, softmax_model_sample_input, NULL, h, c, scratch, sizeof scratch)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B, h, y)) ||
      check("softmax", rnncore_int8_softmax_run(&softmax_model_softmax, B, SOFTMAX_MODEL_OUTPUT_SIZE, y, y)))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != softmax_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&softmax_model_stack, softmax_model_packed, sizeof softmax_model_packed,
                                     softmax_model_sample_input, B, T, softmax_model_sample_output,
                                     sizeof softmax_model_sample_output);
}

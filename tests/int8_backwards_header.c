/* An int8 header of `rnncore export-c` for a Keras go_backwards stack (two LSTM layers, the first
 * with go_backwards, the last step out: tests/golden/tflite_int8/stacks/backwards_stack2_*, made
 * by LiteRT), compiled as C99 and run as firmware would: through the C API (rnncore/int8.h), each
 * row's steps reversed before layer 0 (NAME_REVERSE_INPUT), layer 1 on layer 0's every step, its
 * last output state the model's output; and through the one-call arrays (NAME_stack with
 * reverse_input, NAME_packed) on x as it is. Every output must equal LiteRT's. Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "backwards_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "backwards_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "backwards_model.h"
#endif

#define B BACKWARDS_MODEL_SAMPLE_BATCH
#define T BACKWARDS_MODEL_SAMPLE_STEPS
#define I BACKWARDS_MODEL_INPUT_SIZE

typedef char two_lstm_reversed_last_step[(BACKWARDS_MODEL_LAYERS == 2 && BACKWARDS_MODEL_DENSE == 0 &&
                                          !BACKWARDS_MODEL_RETURN_SEQUENCES && BACKWARDS_MODEL_REVERSE_INPUT == 1) ? 1 : -1];

static int8_t xr[B * T * I];
static int8_t y0[B * T * BACKWARDS_MODEL_L0_HIDDEN_SIZE];
static int8_t h0[B * BACKWARDS_MODEL_L0_HIDDEN_SIZE], h1[B * BACKWARDS_MODEL_L1_HIDDEN_SIZE];
static int16_t c0[B * BACKWARDS_MODEL_L0_HIDDEN_SIZE], c1[B * BACKWARDS_MODEL_L1_HIDDEN_SIZE];
static int8_t scratch[BACKWARDS_MODEL_L0_SCRATCH_BYTES > BACKWARDS_MODEL_L1_SCRATCH_BYTES ? BACKWARDS_MODEL_L0_SCRATCH_BYTES
                                                                                           : BACKWARDS_MODEL_L1_SCRATCH_BYTES];

int main(void) {
  rnncore_int8_lstm l0, l1;
  size_t i, differ = 0;
  int b, t;
  if (check("prepare layer 0", rnncore_int8_lstm_prepare_folded(
                                   &backwards_model_l0_quantization, BACKWARDS_MODEL_L0_INPUT_SIZE,
                                   BACKWARDS_MODEL_L0_HIDDEN_SIZE, backwards_model_l0_w_gates, backwards_model_l0_r_gates,
                                   backwards_model_l0_bias_gates, backwards_model_l0_folded_bias,
                                   BACKWARDS_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare layer 1", rnncore_int8_lstm_prepare_folded(
                                   &backwards_model_l1_quantization, BACKWARDS_MODEL_L1_INPUT_SIZE,
                                   BACKWARDS_MODEL_L1_HIDDEN_SIZE, backwards_model_l1_w_gates, backwards_model_l1_r_gates,
                                   backwards_model_l1_bias_gates, backwards_model_l1_folded_bias,
                                   BACKWARDS_MODEL_L1_BIAS_WORDS, &l1)) ||
      wrong_layout("layer 0", &l0) || wrong_layout("layer 1", &l1))
    return 1;
  for (b = 0; b < B; ++b)  /* each row's steps last to first */
    for (t = 0; t < T; ++t) memcpy(xr + (b * T + t) * I, backwards_model_sample_input + (b * T + T - 1 - t) * I, I);
  memset(h0, BACKWARDS_MODEL_L0_STATE_ZERO_POINT, sizeof h0);
  memset(h1, BACKWARDS_MODEL_L1_STATE_ZERO_POINT, sizeof h1);
  if (check("run layer 0", rnncore_int8_lstm_run(&l0, B, T, xr, y0, h0, c0, scratch, sizeof scratch)) ||
      check("run layer 1", rnncore_int8_lstm_run(&l1, B, T, y0, NULL, h1, c1, scratch, sizeof scratch)))
    return 1;
  for (i = 0; i < sizeof h1; ++i) differ += h1[i] != backwards_model_sample_output[i];  /* h1: the last step */
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof h1);
  return (differ != 0) | run_packed(&backwards_model_stack, backwards_model_packed, sizeof backwards_model_packed,
                                    backwards_model_sample_input, B, T, backwards_model_sample_output,
                                    sizeof backwards_model_sample_output);
}

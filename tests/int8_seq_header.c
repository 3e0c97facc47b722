/* An int8 header of `rnncore export-c` for a model whose head runs on every step (one LSTM
 * returning every step, Dense 4 with RELU, Dense 3, softmax:
 * tests/golden/tflite_int8/stacks/dense_seq_*, made by LiteRT), compiled as C99 and run through
 * the C API (rnncore/int8.h) as firmware would: the LSTM's every step, then each Dense layer and
 * the softmax on its B·T rows. Every output must equal LiteRT's (the header's sample). Exit 0 on
 * PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "seq_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "seq_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "seq_model.h"
#endif

#define B SEQ_MODEL_SAMPLE_BATCH
#define T SEQ_MODEL_SAMPLE_STEPS

typedef char one_lstm_two_dense_softmax_every_step[(SEQ_MODEL_LAYERS == 1 && SEQ_MODEL_DENSE == 2 && SEQ_MODEL_SOFTMAX &&
                                                    SEQ_MODEL_RETURN_SEQUENCES)
                                                       ? 1 : -1];

static int8_t steps[B * T * SEQ_MODEL_L0_HIDDEN_SIZE];
static int8_t h[B * SEQ_MODEL_L0_HIDDEN_SIZE];
static int16_t c[B * SEQ_MODEL_L0_HIDDEN_SIZE];
static int8_t scratch[SEQ_MODEL_L0_SCRATCH_BYTES];
static int8_t hidden[B * T * SEQ_MODEL_FC0_OUT_SIZE];
static int8_t y[B * T * SEQ_MODEL_OUTPUT_SIZE];
static int32_t fc0_bias[SEQ_MODEL_FC0_OUT_SIZE], fc1_bias[SEQ_MODEL_FC1_OUT_SIZE];
static float fc0_scale[SEQ_MODEL_FC0_OUT_SIZE], fc1_scale[SEQ_MODEL_FC1_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0;
  rnncore_int8_dense fc0, fc1;
  size_t i, differ = 0;
  if (check("prepare the LSTM", rnncore_int8_lstm_prepare_folded(
                                    &seq_model_l0_quantization, SEQ_MODEL_L0_INPUT_SIZE, SEQ_MODEL_L0_HIDDEN_SIZE,
                                    seq_model_l0_w_gates, seq_model_l0_r_gates, seq_model_l0_bias_gates,
                                    seq_model_l0_folded_bias, SEQ_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&seq_model_fc0_quantization, SEQ_MODEL_FC0_IN_SIZE,
                                                          SEQ_MODEL_FC0_OUT_SIZE, seq_model_fc0_w, seq_model_fc0_bias,
                                                          fc0_bias, fc0_scale, &fc0)) ||
      check("prepare Dense 1", rnncore_int8_dense_prepare(&seq_model_fc1_quantization, SEQ_MODEL_FC1_IN_SIZE,
                                                          SEQ_MODEL_FC1_OUT_SIZE, seq_model_fc1_w, seq_model_fc1_bias,
                                                          fc1_bias, fc1_scale, &fc1)) ||
      wrong_layout("the LSTM", &l0))
    return 1;
  memset(h, SEQ_MODEL_L0_STATE_ZERO_POINT, sizeof h);
  if (check("run the LSTM", rnncore_int8_lstm_run(&l0, B, T, seq_model_sample_input, steps, h, c, scratch, sizeof scratch)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B * T, steps, hidden)) ||
      check("run Dense 1", rnncore_int8_dense_run(&fc1, B * T, hidden, y)) ||
      check("softmax", rnncore_int8_softmax_run(&seq_model_softmax, B * T, SEQ_MODEL_OUTPUT_SIZE, y, y)))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != seq_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  /* The one-call arrays: the Dense chain (pre_head) and the head in NAME_stack, run from NAME_packed. */
  return (differ != 0) | run_packed(&seq_model_stack, seq_model_packed, sizeof seq_model_packed, seq_model_sample_input, B, T, seq_model_sample_output,
                                     sizeof seq_model_sample_output);
}

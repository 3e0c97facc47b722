/* An int8 header of `rnncore export-c` for a float PyTorch model quantized by `rnncore quantize`
 * (token ids -> nn.Embedding(7, 4) -> nn.LSTM(4, 5) -> nn.Linear(5, 3) -> tanh on every step:
 * tests/data/quantize/embed_lstm_linear_tanh*, made by tests/golden/make_head_grad_golden.py; the
 * quantized file, its sample output from `rnncore run` and the header made at build time), compiled
 * as C99 and run through the C API (rnncore/int8.h) as firmware would: each token id's row of the
 * exported table into the LSTM's input, the LSTM on every step, the Dense layer on B*T rows and the
 * exported tanh table. The rows must equal the header's sample input and every output `rnncore
 * run`'s (the header's sample). Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "ends_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "ends_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "ends_model.h"
#endif

#define B ENDS_MODEL_SAMPLE_BATCH
#define T ENDS_MODEL_SAMPLE_STEPS
#define E ENDS_MODEL_EMBEDDING_DIM

typedef char embedding_lstm_dense_tanh[(ENDS_MODEL_EMBEDDING && E == ENDS_MODEL_INPUT_SIZE && ENDS_MODEL_LAYERS == 1 &&
                                        ENDS_MODEL_DENSE == 1 && !ENDS_MODEL_SOFTMAX && ENDS_MODEL_RETURN_SEQUENCES &&
                                        ENDS_MODEL_FC0_ACTIVATION == RNNCORE_INT8_TANH)
                                           ? 1 : -1];

static int8_t x[B * T * E];
static int8_t seq[B * T * ENDS_MODEL_L0_HIDDEN_SIZE];
static int8_t h0[B * ENDS_MODEL_L0_HIDDEN_SIZE];
static int16_t c0[B * ENDS_MODEL_L0_HIDDEN_SIZE];
static int8_t scratch0[ENDS_MODEL_L0_SCRATCH_BYTES];
static int8_t y[B * T * ENDS_MODEL_OUTPUT_SIZE];
static int32_t fc0_bias[ENDS_MODEL_FC0_OUT_SIZE];
static float fc0_scale[ENDS_MODEL_FC0_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0;
  rnncore_int8_dense fc0;
  size_t i, differ = 0;
  for (i = 0; i < (size_t)(B * T); ++i) {
    const int32_t id = ends_model_sample_ids[i];
    if (id < 0 || id >= ENDS_MODEL_EMBEDDING_VOCAB) {
      printf("FAIL: token id %ld outside the vocabulary\n", (long)id);
      return 1;
    }
    memcpy(x + i * E, ends_model_embedding_table + (size_t)id * E, E);
  }
  if (memcmp(x, ends_model_sample_input, sizeof x) != 0) {
    printf("FAIL: the looked-up rows differ from the header's sample input\n");
    return 1;
  }
  if (check("prepare the LSTM", rnncore_int8_lstm_prepare_folded(
                                    &ends_model_l0_quantization, ENDS_MODEL_L0_INPUT_SIZE, ENDS_MODEL_L0_HIDDEN_SIZE,
                                    ends_model_l0_w_gates, ends_model_l0_r_gates, ends_model_l0_bias_gates,
                                    ends_model_l0_folded_bias, ENDS_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&ends_model_fc0_quantization, ENDS_MODEL_FC0_IN_SIZE,
                                                          ENDS_MODEL_FC0_OUT_SIZE, ends_model_fc0_w, ends_model_fc0_bias,
                                                          fc0_bias, fc0_scale, &fc0)) ||
      wrong_layout("the LSTM", &l0))
    return 1;
  memset(h0, ENDS_MODEL_L0_STATE_ZERO_POINT, sizeof h0);
  if (check("run the LSTM", rnncore_int8_lstm_run(&l0, B, T, x, seq, h0, c0, scratch0, sizeof scratch0)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B * T, seq, y)) ||
      check("tanh", rnncore_int8_lookup(ends_model_fc0_table, (int32_t)sizeof y, y, y)))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != ends_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from rnncore run's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&ends_model_stack, ends_model_packed, sizeof ends_model_packed, ends_model_sample_ids, B, T, ends_model_sample_output,
                                     sizeof ends_model_sample_output);
}

/* An int8 header of `rnncore export-c` for a model that starts with a Keras Embedding (token ids ->
 * Embedding(60, 6) -> LSTM 10 on every step -> LSTM 8 -> Dense 3 -> softmax:
 * tests/golden/tflite_int8/stacks/embed_stack2_*, made by LiteRT), compiled as C99 and run through
 * the C API (rnncore/int8.h) as firmware would: each token id's row of the exported table copied
 * into the first layer's input, then the layers, the Dense layer and the exported softmax. The rows
 * must equal the header's sample input and every output LiteRT's (the header's sample). Exit 0 on
 * PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_HEADER)
#include RNNCORE_TEST_HEADER /* the same model, with its own export-c options (tests/meson.build) */
#elif defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "embed_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "embed_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "embed_model.h"
#endif

#define B EMBED_MODEL_SAMPLE_BATCH
#define T EMBED_MODEL_SAMPLE_STEPS
#define E EMBED_MODEL_EMBEDDING_DIM

typedef char embedding_two_lstm_dense_softmax[(EMBED_MODEL_EMBEDDING && E == EMBED_MODEL_INPUT_SIZE &&
                                               EMBED_MODEL_LAYERS == 2 && EMBED_MODEL_DENSE == 1 && EMBED_MODEL_SOFTMAX &&
                                               !EMBED_MODEL_RETURN_SEQUENCES)
                                                  ? 1 : -1];

static int8_t x[B * T * E];
static int8_t seq[B * T * EMBED_MODEL_L0_HIDDEN_SIZE];
static int8_t h0[B * EMBED_MODEL_L0_HIDDEN_SIZE], h1[B * EMBED_MODEL_L1_HIDDEN_SIZE];
static int16_t c0[B * EMBED_MODEL_L0_HIDDEN_SIZE], c1[B * EMBED_MODEL_L1_HIDDEN_SIZE];
static int8_t scratch0[EMBED_MODEL_L0_SCRATCH_BYTES], scratch1[EMBED_MODEL_L1_SCRATCH_BYTES];
static int8_t y[B * EMBED_MODEL_OUTPUT_SIZE];
static int32_t fc0_bias[EMBED_MODEL_FC0_OUT_SIZE];
static float fc0_scale[EMBED_MODEL_FC0_OUT_SIZE];

int main(void) {
  rnncore_int8_lstm l0, l1;
  rnncore_int8_dense fc0;
  size_t i, differ = 0;
  /* The lookup: a row copy per id, refusing ids outside the vocabulary (LiteRT's GATHER fails). */
  for (i = 0; i < (size_t)(B * T); ++i) {
    const int32_t id = embed_model_sample_ids[i];
    if (id < 0 || id >= EMBED_MODEL_EMBEDDING_VOCAB) {
      printf("FAIL: token id %ld outside the vocabulary\n", (long)id);
      return 1;
    }
    memcpy(x + i * E, embed_model_embedding_table + (size_t)id * E, E);
  }
  if (memcmp(x, embed_model_sample_input, sizeof x) != 0) {
    printf("FAIL: the looked-up rows differ from the header's sample input\n");
    return 1;
  }
  if (check("prepare LSTM 0", rnncore_int8_lstm_prepare_folded(
                                  &embed_model_l0_quantization, EMBED_MODEL_L0_INPUT_SIZE, EMBED_MODEL_L0_HIDDEN_SIZE,
                                  embed_model_l0_w_gates, embed_model_l0_r_gates, embed_model_l0_bias_gates,
                                  embed_model_l0_folded_bias, EMBED_MODEL_L0_BIAS_WORDS, &l0)) ||
      check("prepare LSTM 1", rnncore_int8_lstm_prepare_folded(
                                  &embed_model_l1_quantization, EMBED_MODEL_L1_INPUT_SIZE, EMBED_MODEL_L1_HIDDEN_SIZE,
                                  embed_model_l1_w_gates, embed_model_l1_r_gates, embed_model_l1_bias_gates,
                                  embed_model_l1_folded_bias, EMBED_MODEL_L1_BIAS_WORDS, &l1)) ||
      check("prepare Dense 0", rnncore_int8_dense_prepare(&embed_model_fc0_quantization, EMBED_MODEL_FC0_IN_SIZE,
                                                          EMBED_MODEL_FC0_OUT_SIZE, embed_model_fc0_w, embed_model_fc0_bias,
                                                          fc0_bias, fc0_scale, &fc0)) ||
      wrong_layout("LSTM 0", &l0) || wrong_layout("LSTM 1", &l1))
    return 1;
  memset(h0, EMBED_MODEL_L0_STATE_ZERO_POINT, sizeof h0);
  memset(h1, EMBED_MODEL_L1_STATE_ZERO_POINT, sizeof h1);
  if (check("run LSTM 0", rnncore_int8_lstm_run(&l0, B, T, x, seq, h0, c0, scratch0, sizeof scratch0)) ||
      check("run LSTM 1", rnncore_int8_lstm_run(&l1, B, T, seq, NULL, h1, c1, scratch1, sizeof scratch1)) ||
      check("run Dense 0", rnncore_int8_dense_run(&fc0, B, h1, y)) ||
      check("softmax", rnncore_int8_softmax_run(&embed_model_softmax, B, EMBED_MODEL_OUTPUT_SIZE, y, y)))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != embed_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&embed_model_stack, embed_model_packed, sizeof embed_model_packed, embed_model_sample_ids, B, T, embed_model_sample_output,
                                     sizeof embed_model_sample_output);
}

/* An int8 header of `rnncore export-c` for a model with per-channel weight scales (rnncore's
 * extension: `rnncore quantize --per-channel` of the committed PyTorch LSTM
 * tests/data/quantize/lstm_I8_H24, made at build time, tests/meson.build), compiled as C99 and run
 * through the C API (rnncore/int8.h) as firmware would: prepared from its folded table (biases and
 * the units' multipliers), run on the sample. LiteRT has no per-channel integer LSTM, so the
 * sample's output is `rnncore run`'s: this proves the exported header and the C API give what the
 * command line gives. Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "channel_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "channel_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "channel_model.h"
#endif

#define B CHANNEL_MODEL_SAMPLE_BATCH
#define T CHANNEL_MODEL_SAMPLE_STEPS
#define H CHANNEL_MODEL_HIDDEN_SIZE

static int8_t y[B * T * H], h[B * H], scratch[CHANNEL_MODEL_SCRATCH_BYTES];
static int16_t c[B * H];

int main(void) {
  rnncore_int8_lstm lstm;
  size_t i, differ = 0;
  rnncore_status s;
  if (channel_model_quantization.w_scales[0] == NULL || CHANNEL_MODEL_BIAS_WORDS != 24 * H) {
    printf("FAIL: the header is not a per-channel model's\n");
    return 1;
  }
  s = rnncore_int8_lstm_prepare_folded(&channel_model_quantization, CHANNEL_MODEL_INPUT_SIZE, H, channel_model_w_gates,
                                       channel_model_r_gates, channel_model_bias_gates, channel_model_folded_bias,
                                       CHANNEL_MODEL_BIAS_WORDS, &lstm);
  if (s != RNNCORE_OK) {
    printf("FAIL: prepare: %s\n", rnncore_last_error_detail());
    return 1;
  }
  if (wrong_layout("the LSTM", &lstm)) return 1;
  memset(h, CHANNEL_MODEL_STATE_ZERO_POINT, sizeof h);
  s = rnncore_int8_lstm_run(&lstm, B, T, channel_model_sample_input, y, h, c, scratch, sizeof scratch);
  if (s != RNNCORE_OK) {
    printf("FAIL: run: %s\n", rnncore_last_error_detail());
    return 1;
  }
  for (i = 0; i < sizeof y; ++i) differ += y[i] != channel_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from rnncore run's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&channel_model_stack, channel_model_packed, sizeof channel_model_packed, channel_model_sample_input, B, T, channel_model_sample_output,
                                     sizeof channel_model_sample_output);
}

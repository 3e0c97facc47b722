/* An int8 header of `rnncore export-c` for two stacked Keras Bidirectional(LSTM) layers returning
 * every step (tests/golden/tflite_int8/stacks/bidi_stack2_*_seq_bibi, made by LiteRT), compiled
 * as C99 and run through the C API (rnncore/int8.h) as firmware would: per layer the forward LSTM
 * over the steps in order, the backward LSTM one step per call from the last step to the first
 * (each row's state carried, each step's output written at its own time), and per step the
 * forward h bytes then the backward h bytes as the layer's output. Every output must equal
 * LiteRT's (the header's sample). Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#define RNNCORE_TEST_ONE_CALL
#include "int8_header_layout.h"
#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#include "bidi_model_i16.h" /* the same model, `rnncore export-c --interleave-i16` */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#include "bidi_model_interleaved.h" /* the same model, `rnncore export-c --interleave` */
#else
#include "bidi_model.h"
#endif

#define B BIDI_MODEL_SAMPLE_BATCH
#define T BIDI_MODEL_SAMPLE_STEPS
#define MAX_H 16

typedef char two_bidirectional_layers[(BIDI_MODEL_LAYERS == 2 && BIDI_MODEL_L0_BIDIRECTIONAL && BIDI_MODEL_L1_BIDIRECTIONAL &&
                                       BIDI_MODEL_RETURN_SEQUENCES && BIDI_MODEL_DENSE == 0 &&
                                       BIDI_MODEL_L0_FW_HIDDEN_SIZE <= MAX_H && BIDI_MODEL_L0_BW_HIDDEN_SIZE <= MAX_H &&
                                       BIDI_MODEL_L1_FW_HIDDEN_SIZE <= MAX_H && BIDI_MODEL_L1_BW_HIDDEN_SIZE <= MAX_H)
                                          ? 1 : -1];

static int8_t y0[B * T * BIDI_MODEL_L0_HIDDEN_SIZE];
static int8_t y[B * T * BIDI_MODEL_OUTPUT_SIZE];
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
static int8_t steps[B * T * MAX_H], h[B * MAX_H];
static int8_t scratch[MAX2(MAX2(BIDI_MODEL_L0_FW_SCRATCH_BYTES, BIDI_MODEL_L0_BW_SCRATCH_BYTES),
                           MAX2(BIDI_MODEL_L1_FW_SCRATCH_BYTES, BIDI_MODEL_L1_BW_SCRATCH_BYTES))];
static int16_t c[B * MAX_H];

/* One bidirectional layer: x [B, T, in] to out [B, T, hf + hb]. */
static int run_layer(const rnncore_int8_lstm* fw, const rnncore_int8_lstm* bw, int in, int hf, int hb, int zf, int zb,
                     const int8_t* x, int8_t* out) {
  int b, t;
  const int width = hf + hb;
  memset(h, zf, sizeof h);
  memset(c, 0, sizeof c);
  if (check("forward", rnncore_int8_lstm_run(fw, B, T, x, steps, h, c, scratch, sizeof scratch))) return 1;
  for (b = 0; b < B; ++b)
    for (t = 0; t < T; ++t) memcpy(out + (b * T + t) * width, steps + (b * T + t) * hf, (size_t)hf);
  memset(h, zb, sizeof h);
  memset(c, 0, sizeof c);
  for (b = 0; b < B; ++b)
    for (t = T - 1; t >= 0; --t) {
      if (check("backward step", rnncore_int8_lstm_run(bw, 1, 1, x + (b * T + t) * in, steps, h + b * hb, c + b * hb,
                                                       scratch, sizeof scratch)))
        return 1;
      memcpy(out + (b * T + t) * width + hf, steps, (size_t)hb);
    }
  return 0;
}

int main(void) {
  rnncore_int8_lstm f0, b0, f1, b1;
  size_t i, differ = 0;
  if (check("prepare", rnncore_int8_lstm_prepare_folded(&bidi_model_l0_fw_quantization, BIDI_MODEL_L0_INPUT_SIZE,
                                                        BIDI_MODEL_L0_FW_HIDDEN_SIZE, bidi_model_l0_fw_w_gates,
                                                        bidi_model_l0_fw_r_gates, bidi_model_l0_fw_bias_gates,
                                                        bidi_model_l0_fw_folded_bias, BIDI_MODEL_L0_FW_BIAS_WORDS, &f0)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&bidi_model_l0_bw_quantization, BIDI_MODEL_L0_INPUT_SIZE,
                                                        BIDI_MODEL_L0_BW_HIDDEN_SIZE, bidi_model_l0_bw_w_gates,
                                                        bidi_model_l0_bw_r_gates, bidi_model_l0_bw_bias_gates,
                                                        bidi_model_l0_bw_folded_bias, BIDI_MODEL_L0_BW_BIAS_WORDS, &b0)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&bidi_model_l1_fw_quantization, BIDI_MODEL_L1_INPUT_SIZE,
                                                        BIDI_MODEL_L1_FW_HIDDEN_SIZE, bidi_model_l1_fw_w_gates,
                                                        bidi_model_l1_fw_r_gates, bidi_model_l1_fw_bias_gates,
                                                        bidi_model_l1_fw_folded_bias, BIDI_MODEL_L1_FW_BIAS_WORDS, &f1)) ||
      check("prepare", rnncore_int8_lstm_prepare_folded(&bidi_model_l1_bw_quantization, BIDI_MODEL_L1_INPUT_SIZE,
                                                        BIDI_MODEL_L1_BW_HIDDEN_SIZE, bidi_model_l1_bw_w_gates,
                                                        bidi_model_l1_bw_r_gates, bidi_model_l1_bw_bias_gates,
                                                        bidi_model_l1_bw_folded_bias, BIDI_MODEL_L1_BW_BIAS_WORDS, &b1)) ||
      wrong_layout("layer 0 forward", &f0) || wrong_layout("layer 0 backward", &b0) ||
      wrong_layout("layer 1 forward", &f1) || wrong_layout("layer 1 backward", &b1))
    return 1;
  if (run_layer(&f0, &b0, BIDI_MODEL_L0_INPUT_SIZE, BIDI_MODEL_L0_FW_HIDDEN_SIZE, BIDI_MODEL_L0_BW_HIDDEN_SIZE,
                BIDI_MODEL_L0_FW_STATE_ZERO_POINT, BIDI_MODEL_L0_BW_STATE_ZERO_POINT, bidi_model_sample_input, y0) ||
      run_layer(&f1, &b1, BIDI_MODEL_L1_INPUT_SIZE, BIDI_MODEL_L1_FW_HIDDEN_SIZE, BIDI_MODEL_L1_BW_HIDDEN_SIZE,
                BIDI_MODEL_L1_FW_STATE_ZERO_POINT, BIDI_MODEL_L1_BW_STATE_ZERO_POINT, y0, y))
    return 1;
  for (i = 0; i < sizeof y; ++i) differ += y[i] != bidi_model_sample_output[i];
  printf("%s: %zu of %zu outputs differ from LiteRT's\n", differ == 0 ? "PASS" : "FAIL", differ, sizeof y);
  return (differ != 0) | run_packed(&bidi_model_stack, bidi_model_packed, sizeof bidi_model_packed, bidi_model_sample_input, B, T, bidi_model_sample_output,
                                     sizeof bidi_model_sample_output);
}

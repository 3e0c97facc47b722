/* The firmware of the training-to-firmware pipeline (pipeline.py): the int8 LSTM that
 * rnncore.quantize made of the model trained in PyTorch, exported by rnncore.export_c
 * (MODEL_HEADER: weights and folded biases in flash, interleaved for the Cortex-M4 kernel; its sample
 * the test sequences, int8, and the host's int8 outputs), run through the int8 C API
 * (rnncore/int8.h) one step per call from static memory, then the float head (HEAD_HEADER: the
 * nn.Linear's weights, the labels and the host's predictions) on the dequantized last step.
 *
 * Prints one RESULT line: how many of the int8 outputs differ from the host's (every step of every
 * sequence), how many predictions are right, and how many differ from the host's. Exits 0 when
 * none differs. C99; built and run under qemu-system-arm by pipeline.py. */
#include <stdint.h>
#include <string.h>

#include "rnncore/int8.h"
#include "board.h"
#include "console.h"
#include MODEL_HEADER
#include HEAD_HEADER

#define T PIPELINE_SAMPLE_STEPS
#define ROWS PIPELINE_SAMPLE_BATCH
#define I PIPELINE_INPUT_SIZE
#define H PIPELINE_HIDDEN_SIZE

typedef char head_reads_the_lstm[(HEAD_IN == H && PIPELINE_RETURN_SEQUENCES) ? 1 : -1];

static rnncore_int8_lstm g_lstm;
static int8_t g_h[H];
static int16_t g_c[H];
static int8_t g_y[H];
static int8_t g_scratch[PIPELINE_SCRATCH_BYTES] __attribute__((aligned(4)));

/* The float head on the int8 h: b + sum over k in order of w[:, k] * (h[k] - z) * s. */
static int classify(const int8_t* h) {
  float logits[HEAD_CLASSES];
  int j, k, best = 0;
  for (j = 0; j < HEAD_CLASSES; ++j) logits[j] = head_b[j];
  for (k = 0; k < H; ++k) {
    const float v = (float)((int32_t)h[k] - HEAD_H_ZERO_POINT) * HEAD_H_SCALE;
    for (j = 0; j < HEAD_CLASSES; ++j) logits[j] = logits[j] + head_w[j * H + k] * v;
  }
  for (j = 1; j < HEAD_CLASSES; ++j)
    if (logits[j] > logits[best]) best = j;
  return best;
}

int main(void) {
  unsigned long differ = 0, correct = 0, pred_differ = 0;
  int b, t, k;
  rnncore_status s = rnncore_int8_lstm_prepare_folded(&pipeline_quantization, I, H, pipeline_w_gates, pipeline_r_gates,
                                                      pipeline_bias_gates, pipeline_folded_bias, PIPELINE_BIAS_WORDS,
                                                      &g_lstm);
  if (s != RNNCORE_OK) return put_failure("prepare", s);
  put("pipeline firmware: int8 LSTM ");
  put_uint(I);
  put(" -> ");
  put_uint(H);
  put(", kernel ");
  put(rnncore_int8_lstm_kernel_name(&g_lstm));
  put("; ");
  put_uint(ROWS);
  put(" sequences of ");
  put_uint(T);
  put(" steps");
  end_line();
  for (b = 0; b < ROWS; ++b) {
    const int8_t* x = pipeline_sample_input + (size_t)b * T * I;
    const int8_t* expected = pipeline_sample_output + (size_t)b * T * H;
    int pred;
    memset(g_h, PIPELINE_STATE_ZERO_POINT, sizeof g_h); /* LiteRT's start: h at its zero point, c = 0 */
    memset(g_c, 0, sizeof g_c);
    for (t = 0; t < T; ++t) {
      s = rnncore_int8_lstm_run(&g_lstm, 1, 1, x + t * I, g_y, g_h, g_c, g_scratch, sizeof g_scratch);
      if (s != RNNCORE_OK) return put_failure("run", s);
      for (k = 0; k < H; ++k) differ += g_y[k] != expected[t * H + k];
    }
    pred = classify(g_h);
    correct += pred == test_labels[b];
    pred_differ += pred != host_predictions[b];
  }
  put("RESULT differ=");
  put_uint(differ);
  put(" of ");
  put_uint((unsigned long)ROWS * T * H);
  put(" correct=");
  put_uint(correct);
  put(" predictions_differ=");
  put_uint(pred_differ);
  end_line();
  return differ != 0 || pred_differ != 0;
}

/* One of the four public LSTM models (bench/mcu_models/README.md), whole, on a Cortex-M under
 * qemu-system-arm: the int8 header of `rnncore export-c --interleave` (weights, folded biases,
 * the Dense head and its tables in flash) run through the int8 C API (rnncore/int8.h) by one
 * call, model_run(): the Embedding as a pointer to the token's row of the table (no copy), each
 * LSTM one step per call with its state carried, the Dense head (on every step or on the last),
 * the sigmoid table. RAM: the states, the scratch, the Dense layer's folded bias and scales, and
 * for the bidirectional model layer 0's output over the sequence.
 *
 * Built per model by bench/mcu_models/run.sh: -DMODEL=name -DMODEL_UC=NAME
 * -DMODEL_HEADER='"name.h"' -DMODEL_EMBEDDING=0|1 [-DMODEL_HEAD_TABLE=1: the head's sigmoid or tanh
 * table] [-DMODEL_STATE_HEADER='"weather_extra.h"'].
 * MODEL_COUNT_REPS=N (the count images): N inferences of the sample and nothing else checked, so
 * that two images (N = 1, 2) differ by one inference. Otherwise the checks of model_checks.h
 * (shared with mcu_model_plan.c): every sequence of the sample (one call each) equal to LiteRT's,
 * bit for bit; a unidirectional model also streamed (one step per call from here, the state
 * carried between calls) and compared on every step; with MODEL_STATE_HEADER a run from a
 * non-zero initial state. Prints PASS and the memory, exits 0; or FAIL, exits 1. C99. */
#include <stdint.h>
#include <string.h>

#include "rnncore/int8.h"
#include "board.h"
#include "console.h"
#include MODEL_HEADER
#ifdef MODEL_STATE_HEADER
#include MODEL_STATE_HEADER
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(MODEL, _##x)    /* the header's arrays: name_x */
#define U(x) CAT(MODEL_UC, _##x) /* its macros: NAME_X */
#define STR_(x) #x
#define STR(x) STR_(x)

#define T U(SAMPLE_STEPS)
#define OUT U(OUTPUT_SIZE)
#define IN0 U(L0_INPUT_SIZE)
#define IS_BIDI U(L0_BIDIRECTIONAL)

typedef char one_dense_head[(U(DENSE) == 1 && !U(SOFTMAX)) ? 1 : -1];

#define ROWS U(SAMPLE_BATCH) /* the sample's sequences */
#if MODEL_EMBEDDING
#define SEQ_IN T /* input elements of one sequence */
typedef int32_t model_input;
#define ROW(in, t) (M(embedding_table) + (size_t)(in)[t] * IN0) /* the token's row, in flash */
#define SAMPLE M(sample_ids)
#else
#define SEQ_IN (T * IN0)
typedef int8_t model_input;
#define ROW(in, t) ((in) + (size_t)(t) * IN0)
#define SAMPLE M(sample_input)
#endif

#define PREPARE(dst, p, P, L)                                                                                         \
  rnncore_int8_lstm_prepare_folded(&M(p##_quantization), U(L##_INPUT_SIZE), U(P##_HIDDEN_SIZE), M(p##_w_gates),     \
                                   M(p##_r_gates), M(p##_bias_gates), M(p##_folded_bias), U(P##_BIAS_WORDS), dst)

static rnncore_int8_dense g_fc;
static int32_t g_fc_bias[OUT];
static float g_fc_scale[OUT];
static int8_t g_y[U(RETURN_SEQUENCES) ? T * OUT : OUT]; /* one sequence's output */

/* The head on one row of the last LSTM's output: the Dense layer, and its sigmoid or tanh table. */
static rnncore_status head_run(const int8_t* h, int8_t* y) {
  rnncore_status s = rnncore_int8_dense_run(&g_fc, 1, h, y);
#if MODEL_HEAD_TABLE
  if (s == RNNCORE_OK) s = rnncore_int8_lookup(M(fc0_table), OUT, y, y);
#endif
  return s;
}

#if !IS_BIDI
/* ---- one LSTM layer: Embedding or input -> LSTM -> Dense (every step or the last) ---- */
typedef char one_layer[U(LAYERS) == 1 ? 1 : -1];
#define H U(L0_HIDDEN_SIZE)
static rnncore_int8_lstm g_lstm;
static int8_t g_h[H];
static int16_t g_c[H];
static int8_t g_scratch[U(L0_SCRATCH_BYTES)] __attribute__((aligned(4)));

static rnncore_status model_prepare(void) { return PREPARE(&g_lstm, l0, L0, L0); }

/* The state LiteRT starts from (h = the output state's zero point, c = 0), or h0, c0. */
static void model_reset(const int8_t* h0, const int16_t* c0) {
  if (h0) memcpy(g_h, h0, sizeof g_h); else memset(g_h, U(L0_STATE_ZERO_POINT), sizeof g_h);
  if (c0) memcpy(g_c, c0, sizeof g_c); else memset(g_c, 0, sizeof g_c);
}

/* One step of the input row x (E or I int8): the state moves on; with every step's output, y_t
 * (OUT int8) is the Dense head's output for this step. */
static rnncore_status model_step(const int8_t* x, int8_t* y_t) {
  rnncore_status s = rnncore_int8_lstm_run(&g_lstm, 1, 1, x, NULL, g_h, g_c, g_scratch, sizeof g_scratch);
  if (s == RNNCORE_OK && U(RETURN_SEQUENCES)) s = head_run(g_h, y_t);
  return s;
}

/* The whole model on one sequence of T inputs, from the given state (NULL: LiteRT's). */
static rnncore_status model_run(const model_input* in, int8_t* y, const int8_t* h0, const int16_t* c0) {
  rnncore_status s = RNNCORE_OK;
  int t;
  model_reset(h0, c0);
  for (t = 0; t < T && s == RNNCORE_OK; ++t) s = model_step(ROW(in, t), y + (U(RETURN_SEQUENCES) ? t * OUT : 0));
  if (s == RNNCORE_OK && !U(RETURN_SEQUENCES)) s = head_run(g_h, y);
  return s;
}
#else
/* ---- Embedding -> Bidirectional LSTM (every step) -> Bidirectional LSTM (last) -> Dense ---- */
typedef char two_bidirectional_layers[(U(LAYERS) == 2 && U(L1_BIDIRECTIONAL) && !U(RETURN_SEQUENCES) &&
                                       U(L0_FW_HIDDEN_SIZE) == U(L0_BW_HIDDEN_SIZE) &&
                                       U(L1_FW_HIDDEN_SIZE) == U(L0_FW_HIDDEN_SIZE) &&
                                       U(L1_BW_HIDDEN_SIZE) == U(L0_FW_HIDDEN_SIZE)) ? 1 : -1];
#define H U(L0_FW_HIDDEN_SIZE)
#define W0 U(L0_HIDDEN_SIZE) /* layer 0's output per step: forward h, backward h */
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
static rnncore_int8_lstm g_lstm[4]; /* layer 0 forward, backward, layer 1 forward, backward */
static int8_t g_seq[T * W0];        /* layer 0's output over the sequence (layer 1 reads it both ways) */
static int8_t g_h[H], g_last[U(L1_HIDDEN_SIZE)];
static int16_t g_c[H];
static int8_t g_scratch[MAX2(MAX2(U(L0_FW_SCRATCH_BYTES), U(L0_BW_SCRATCH_BYTES)),
                             MAX2(U(L1_FW_SCRATCH_BYTES), U(L1_BW_SCRATCH_BYTES)))] __attribute__((aligned(4)));
static const int8_t k_zp[4] = {U(L0_FW_STATE_ZERO_POINT), U(L0_BW_STATE_ZERO_POINT), U(L1_FW_STATE_ZERO_POINT),
                               U(L1_BW_STATE_ZERO_POINT)};

static rnncore_status model_prepare(void) {
  rnncore_status s = PREPARE(&g_lstm[0], l0_fw, L0_FW, L0);
  if (s == RNNCORE_OK) s = PREPARE(&g_lstm[1], l0_bw, L0_BW, L0);
  if (s == RNNCORE_OK) s = PREPARE(&g_lstm[2], l1_fw, L1_FW, L1);
  if (s == RNNCORE_OK) s = PREPARE(&g_lstm[3], l1_bw, L1_BW, L1);
  return s;
}

/* One direction d over the sequence: step t reads x(t) (stride in bytes); writes h at out + t * W0
 * (layer 0) or, with out NULL, leaves the final h in `last` (layer 1). */
static rnncore_status direction(int d, const model_input* in, const int8_t* seq, int8_t* out, int8_t* last) {
  rnncore_status s = RNNCORE_OK;
  int k;
  memset(g_h, k_zp[d], sizeof g_h);
  memset(g_c, 0, sizeof g_c);
  for (k = 0; k < T && s == RNNCORE_OK; ++k) {
    const int t = d & 1 ? T - 1 - k : k;
    const int8_t* x = seq ? seq + t * W0 : ROW(in, t);
    s = rnncore_int8_lstm_run(&g_lstm[d], 1, 1, x, out ? out + t * W0 : NULL, g_h, g_c, g_scratch, sizeof g_scratch);
  }
  if (last) memcpy(last, g_h, H);
  return s;
}

static rnncore_status model_run(const model_input* in, int8_t* y, const int8_t* h0, const int16_t* c0) {
  rnncore_status s;
  (void)h0, (void)c0;
  s = direction(0, in, NULL, g_seq, NULL);
  if (s == RNNCORE_OK) s = direction(1, in, NULL, g_seq + H, NULL);
  if (s == RNNCORE_OK) s = direction(2, NULL, g_seq, NULL, g_last);
  if (s == RNNCORE_OK) s = direction(3, NULL, g_seq, NULL, g_last + H);
  if (s == RNNCORE_OK) s = head_run(g_last, y);
  return s;
}
#endif

static rnncore_status head_prepare(void) {
  return rnncore_int8_dense_prepare(&M(fc0_quantization), U(FC0_IN_SIZE), OUT, M(fc0_w), M(fc0_bias), g_fc_bias,
                                    g_fc_scale, &g_fc);
}

/* The hooks of model_checks.h: the whole sequence into g_y; one step of it, streamed. */
static rnncore_status model_sequence(const model_input* in, const int8_t* h0, const int16_t* c0) {
  return model_run(in, g_y, h0, c0);
}
#if !IS_BIDI
static rnncore_status model_stream(const model_input* in, int t, int8_t* y_t) {
  rnncore_status s;
  if (t == 0) model_reset(NULL, NULL);
  s = model_step(ROW(in, t), y_t);
  if (s == RNNCORE_OK && !U(RETURN_SEQUENCES) && t == T - 1) s = head_run(g_h, y_t);
  return s;
}
#endif

#include "model_checks.h"

int main(void) {
  unsigned long stack;
  rnncore_status s = model_prepare();
  int e;
  if (s == RNNCORE_OK) s = head_prepare();
  if (s != RNNCORE_OK) return put_failure("prepare", s);
  if ((e = model_first_runs(&stack)) != 0) return e;
  put("MODEL " STR(MODEL));
  put(" kernel ");
#if IS_BIDI
  put(rnncore_int8_lstm_kernel_name(&g_lstm[0]));
#else
  put(rnncore_int8_lstm_kernel_name(&g_lstm));
#endif
  end_line();
  return model_checks(stack);
}

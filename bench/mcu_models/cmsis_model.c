/* The CMSIS-NN column of bench/mcu_models/count.sh: one of the four models (the same int8 weights,
 * biases and quantization, from the row-major header `rnncore export-c` writes without
 * --interleave) composed of ARM CMSIS-NN's kernels as TFLite Micro's CMSIS-NN kernels call them
 * for the converter's graph:
 *   GATHER                          the token ids' rows copied into the [T, E] input tensor
 *   UNIDIRECTIONAL_SEQUENCE_LSTM    arm_lstm_unidirectional_s8 over the whole sequence, writing
 *                                   every step's h into its [T, H] output tensor
 *   REVERSE_V2 (Bidirectional)      the input reversed into a tensor for the backward LSTM, and
 *                                   its output reversed back (every step)
 *   STRIDED_SLICE, CONCATENATION    the last step copied out; the two directions concatenated
 *   FULLY_CONNECTED                 arm_fully_connected_s8 (per-tensor, on the DSP no kernel sums)
 *   LOGISTIC                        the int8 table (one value; TFLM computes it, a cost left out)
 * What TFLM's Prepare does once (kernel sums of the LSTM, multipliers) is done once here too, before
 * the counted inferences. TFLM's interpreter (op dispatch, tensor bookkeeping) is not counted, so
 * this column is a lower bound of TFLite Micro's cost. The copies are memcpy (TFLM's reference
 * REVERSE_V2 and CONCATENATION loop per element: cheaper here than there).
 *
 * -DMODEL=name -DMODEL_UC=NAME -DMODEL_HEADER='"name.h"' -DMODEL_EMBEDDING=0|1,
 * MODEL_COUNT_REPS=N: N inferences; without it one inference and the count of outputs that differ
 * from LiteRT's (CMSIS-NN's FULLY_CONNECTED requantizes with an integer multiplier where LiteRT's
 * default CPU path uses a float one, and its LSTM is not bit-exact with LiteRT's: a few may
 * differ by one). C99. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "rnncore/int8.h"
#include "board.h"
#include "console.h"
#include MODEL_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(MODEL, _##x)
#define U(x) CAT(MODEL_UC, _##x)
#define STR_(x) #x
#define STR(x) STR_(x)

#define T U(SAMPLE_STEPS)
#define OUT U(OUTPUT_SIZE)
#define IN0 U(L0_INPUT_SIZE)
#define IS_BIDI U(L0_BIDIRECTIONAL)
#define RS U(RETURN_SEQUENCES)

#if MODEL_EMBEDDING
#define SAMPLE M(sample_ids)
#else
#define SAMPLE M(sample_input)
#endif

/* TFLite's QuantizeMultiplier: scale = q * 2^shift, q in [0.5, 1) as a Q31 multiplier. */
static void quantize_multiplier(double scale, int32_t* multiplier, int32_t* shift) {
  int e = 0;
  const double q = frexp(scale, &e);
  int64_t m = (int64_t)round(q * 2147483648.0);
  if (m == ((int64_t)1 << 31)) m /= 2, ++e;
  if (e < -31) e = 0, m = 0;
  *multiplier = (int32_t)m;
  *shift = e;
}

/* One LSTM op as TFLM's CMSIS-NN kernel sets it up: its parameters, kernel sums, state, scratch. */
typedef struct {
  cmsis_nn_lstm_params params;
  cmsis_nn_lstm_context ctx;
} lstm_op;

#if IS_BIDI
#define HMAX U(L0_FW_HIDDEN_SIZE)
#define NOPS 4
#else
#define HMAX U(L0_HIDDEN_SIZE)
#define NOPS 1
#endif
static lstm_op g_op[NOPS];
static int32_t g_sums[NOPS][8][HMAX]; /* kernel sums: per gate input and recurrent */
static int8_t g_h[NOPS][HMAX];        /* variable tensors */
static int16_t g_c[NOPS][HMAX];
static int16_t g_temp1[HMAX], g_temp2[HMAX];

static void lstm_setup(lstm_op* op, int n, const rnncore_int8_lstm_quantization* q, int32_t in, int32_t h,
                       const int8_t* const* w, const int8_t* const* r, const int32_t* const* b) {
  const float gate_scale = 1.0f / 4096; /* Q3.12 */
  cmsis_nn_lstm_gate* gates[4] = {&op->params.input_gate, &op->params.forget_gate, &op->params.cell_gate,
                                  &op->params.output_gate};
  int g, cell_power = 0;
  for (g = 0; g < 4; ++g) {
    cmsis_nn_lstm_gate* gate = gates[g];
    arm_vector_sum_s8(g_sums[n][2 * g], in, h, w[g], -q->input_zp, 0, b[g]);
    arm_vector_sum_s8(g_sums[n][2 * g + 1], h, h, r[g], -q->state_zp, 0, NULL);
    quantize_multiplier((double)(q->w_scale[g] * q->input_scale / gate_scale), &gate->input_multiplier,
                        &gate->input_shift);
    quantize_multiplier((double)(q->r_scale[g] * q->state_scale / gate_scale), &gate->hidden_multiplier,
                        &gate->hidden_shift);
    gate->input_weights = w[g];
    gate->input_effective_bias = g_sums[n][2 * g];
    gate->hidden_weights = r[g];
    gate->hidden_effective_bias = g_sums[n][2 * g + 1];
    gate->bias = b[g];
    gate->activation_type = g == 2 ? ARM_TANH : ARM_SIGMOID;
  }
  (void)frexp(q->cell_scale, &cell_power);
  op->params.time_major = 0;
  op->params.batch_size = 1;
  op->params.time_steps = T;
  op->params.input_size = in;
  op->params.hidden_size = h;
  op->params.input_offset = -q->input_zp;
  quantize_multiplier(1.0 / 32768, &op->params.forget_to_cell_multiplier, &op->params.forget_to_cell_shift);
  quantize_multiplier(1.0 / 32768 / 32768 / q->cell_scale, &op->params.input_to_cell_multiplier,
                      &op->params.input_to_cell_shift);
  {
    float clip = q->cell_clip / q->cell_scale;
    clip = clip > 32767.0f ? 32767.0f : clip;
    op->params.cell_clip = q->cell_clip > 0 ? (int16_t)clip : 32767;
  }
  op->params.cell_scale_power = cell_power - 1;
  quantize_multiplier(1.0 / 32768 / 32768 / q->hidden_scale, &op->params.output_multiplier,
                      &op->params.output_shift);
  op->params.output_offset = q->hidden_zp;
  op->ctx.temp1 = g_temp1;
  op->ctx.temp2 = g_temp2;
  op->ctx.cell_state = g_c[n];
  op->ctx.hidden_state = g_h[n];
}

/* Variable tensors at the start of an inference: a fresh interpreter's (h = zero point, c = 0). */
static void lstm_reset(int n, int zp) {
  memset(g_h[n], zp, sizeof g_h[n]);
  memset(g_c[n], 0, sizeof g_c[n]);
}

#define SETUP(n, p, P, L)                                                                                    \
  lstm_setup(&g_op[n], n, &M(p##_quantization), U(L##_INPUT_SIZE), U(P##_HIDDEN_SIZE), M(p##_w_gates), \
             M(p##_r_gates), M(p##_bias_gates))

static cmsis_nn_fc_params g_fc;
static cmsis_nn_per_tensor_quant_params g_fcq;
static int8_t g_y[RS ? T * OUT : OUT];

static void fc_setup(void) {
  const rnncore_int8_dense_quantization* q = &M(fc0_quantization);
  g_fc.input_offset = -q->input_zp;
  g_fc.filter_offset = 0;
  g_fc.output_offset = q->output_zp;
  g_fc.activation.min = -128;
  g_fc.activation.max = 127;
  quantize_multiplier((double)q->input_scale * q->w_scales[0] / q->output_scale, &g_fcq.multiplier, &g_fcq.shift);
}

static int fc_run(int rows, const int8_t* x, int8_t* y) {
  cmsis_nn_context ctx = {NULL, 0};
  cmsis_nn_dims in = {rows, 1, 1, U(FC0_IN_SIZE)}, filter = {U(FC0_IN_SIZE), 1, 1, OUT}, bias = {1, 1, 1, OUT},
                out = {rows, 1, 1, OUT};
  return arm_fully_connected_s8(&ctx, &g_fc, &g_fcq, &in, x, &filter, M(fc0_w), &bias, M(fc0_bias), &out, y) !=
         ARM_CMSIS_NN_SUCCESS;
}

#if MODEL_EMBEDDING
static int8_t g_x[T * IN0]; /* GATHER's output tensor */
static const int8_t* input_tensor(const int32_t* ids) {
  int t;
  for (t = 0; t < T; ++t) memcpy(g_x + t * IN0, M(embedding_table) + (size_t)ids[t] * IN0, IN0);
  return g_x;
}
#else
static const int8_t* input_tensor(const int8_t* x) { return x; }
#endif

#if !IS_BIDI
static int8_t g_seq[T * HMAX]; /* the LSTM op's output tensor */
static int setup(void) {
  SETUP(0, l0, L0, L0);
  return 0;
}
static int model_run(const void* in, int8_t* y) {
  const int8_t* x = input_tensor(in);
  lstm_reset(0, U(L0_STATE_ZERO_POINT));
  if (arm_lstm_unidirectional_s8(x, g_seq, &g_op[0].params, &g_op[0].ctx) != ARM_CMSIS_NN_SUCCESS) return 1;
  /* every step: FULLY_CONNECTED on [T, H]; last step: STRIDED_SLICE then FULLY_CONNECTED */
  if (RS) return fc_run(T, g_seq, y);
  {
    int8_t last[HMAX];
    memcpy(last, g_seq + (T - 1) * HMAX, HMAX);
    return fc_run(1, last, y);
  }
}
#else
#define H HMAX
static void reverse(const int8_t* x, int8_t* y, int width) { /* REVERSE_V2 over the steps */
  int t;
  for (t = 0; t < T; ++t) memcpy(y + t * width, x + (T - 1 - t) * width, (size_t)width);
}

static int8_t g_rev_in[T * (IN0 > 2 * H ? IN0 : 2 * H)]; /* REVERSE_V2 of a layer's input */
static int8_t g_fw[T * H], g_bw[T * H], g_bw_rev[T * H];  /* the ops' output tensors */
static int8_t g_seq0[T * 2 * H];                          /* layer 0's CONCATENATION */
static int setup(void) {
  SETUP(0, l0_fw, L0_FW, L0);
  SETUP(1, l0_bw, L0_BW, L0);
  SETUP(2, l1_fw, L1_FW, L1);
  SETUP(3, l1_bw, L1_BW, L1);
  return 0;
}
static int bidi_layer(int n, const int8_t* x, int width, int zf, int zb) {
  lstm_reset(n, zf);
  lstm_reset(n + 1, zb);
  reverse(x, g_rev_in, width);
  return arm_lstm_unidirectional_s8(x, g_fw, &g_op[n].params, &g_op[n].ctx) != ARM_CMSIS_NN_SUCCESS ||
         arm_lstm_unidirectional_s8(g_rev_in, g_bw, &g_op[n + 1].params, &g_op[n + 1].ctx) != ARM_CMSIS_NN_SUCCESS;
}
static int model_run(const void* in, int8_t* y) {
  int8_t last[2 * H];
  int t;
  const int8_t* x = input_tensor(in);
  g_op[0].params.input_size = g_op[1].params.input_size = IN0;
  if (bidi_layer(0, x, IN0, U(L0_FW_STATE_ZERO_POINT), U(L0_BW_STATE_ZERO_POINT))) return 1;
  reverse(g_bw, g_bw_rev, H);
  for (t = 0; t < T; ++t) { /* CONCATENATION */
    memcpy(g_seq0 + t * 2 * H, g_fw + t * H, H);
    memcpy(g_seq0 + t * 2 * H + H, g_bw_rev + t * H, H);
  }
  if (bidi_layer(2, g_seq0, 2 * H, U(L1_FW_STATE_ZERO_POINT), U(L1_BW_STATE_ZERO_POINT))) return 1;
  memcpy(last, g_fw + (T - 1) * H, H); /* STRIDED_SLICE of both last steps, CONCATENATION */
  memcpy(last + H, g_bw + (T - 1) * H, H);
  return fc_run(1, last, y);
}
#endif

#ifndef MODEL_COUNT_REPS
#define MODEL_COUNT_REPS 0
#endif
static volatile int g_reps = MODEL_COUNT_REPS;

int main(void) {
  extern char __data_start[], __bss_end[], __data_end[], __data_load[];
  unsigned long stack, d = 0;
  size_t i;
  int r;
  setup();
  fc_setup();
  board_stack_mark();
  for (r = 0; r < (MODEL_COUNT_REPS ? g_reps : 1); ++r) {
    if (model_run(SAMPLE, g_y)) {
      put("FAIL: CMSIS-NN");
      end_line();
      return 1;
    }
#if MODEL_HEAD_TABLE
    rnncore_int8_lookup(M(fc0_table), (int32_t)sizeof g_y, g_y, g_y);
#endif
  }
  stack = board_stack_high_water();
  for (i = 0; i < sizeof g_y; ++i) d += g_y[i] != M(sample_output)[i];
  put("MODEL " STR(MODEL) " cmsis-nn: ");
  put_uint(d);
  put(" of ");
  put_uint(sizeof g_y);
  put(" outputs differ from LiteRT's");
  end_line();
  put("MEM flash=");
  put_uint((unsigned long)((uintptr_t)__data_load + (uintptr_t)(__data_end - __data_start)));
  put(" ram_static=");
  put_uint((unsigned long)(__bss_end - __data_start));
  put(" stack_peak=");
  put_uint(stack);
  end_line();
  return 0;
}

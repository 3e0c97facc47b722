/* One of the four public LSTM models (bench/mcu_models/README.md), whole, in one call through the
 * one-network C API (rnncore/rnncore.h) on a Cortex-M under qemu-system-arm: the model is one
 * rnncore_stack_spec of dtype RNNCORE_I8 (Embedding -> LSTM x n, bidirectional with the Keras
 * merge -> Dense and its activation), and both the spec (NAME_stack) and the weights packed for the
 * DSP kernel (NAME_packed: interleaved, biases folded) are const objects in flash that the export-c
 * header (MODEL_HEADER, `rnncore export-c --interleave`, the same header as mcu_model.c's) holds;
 * a header of `--interleave-i16` (int16 panels) is planned with int8_weights for that layout, and
 * one of `--token-table` (MODEL_TOKEN_TABLE=1: layer 0's input parts per token in place of W) with
 * int8_token_table.
 * The plan is made once after rnncore_link_int8() (or, with MODEL_PLAN_HEADER, is a const value in
 * flash that a first image planned); there is no pack step, and every inference is one
 * rnncore_forward on NAME_packed in place.
 *
 * RAM: the plan (a value of RNNCORE_PLAN_BYTES: 12 544 bytes, 2 496 in a library built with
 * -Dmax_layers=2 and without training; none with MODEL_PLAN_HEADER) and the workspace, sized at
 * build time by WORKSPACE_BYTES (run.sh reads it from a first run with -DMODEL_SIZES_ONLY, which
 * prints the plan's sizes and its bytes): one step's buffers for a stack of one-direction layers,
 * layer 0's output of every step for the bidirectional model.
 *
 * Checks: mcu_model.c's (model_checks.h): every sequence of the sample equal to LiteRT's bit for
 * bit; a unidirectional model also streamed one step per call (the state in the caller's h and c,
 * carried through h0 / hy and c0 / cy); with MODEL_STATE_HEADER a run from a non-zero initial state.
 * The image's static RAM besides the workspace is the harness's: the console's line buffer (run.sh
 * builds it with 16 bytes) and one sequence's output, which the streamed state shares.
 * MODEL_COUNT_REPS=N: N inferences and nothing else checked (count.sh). Prints PASS and the memory,
 * exits 0; or FAIL, exits 1. C99. */
#include <stdint.h>
#include <string.h>

#include "rnncore/rnncore.h"
#include "board.h"
#include "console.h"
#include MODEL_HEADER
#ifdef MODEL_STATE_HEADER
#include MODEL_STATE_HEADER
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(MODEL, _##x)    /* the headers' arrays: name_x */
#define U(x) CAT(MODEL_UC, _##x) /* the export-c header's macros: NAME_X */
#define STR_(x) #x
#define STR(x) STR_(x)

#define T U(SAMPLE_STEPS)
#define OUT U(OUTPUT_SIZE)
#define ROWS U(SAMPLE_BATCH)
#define IS_BIDI U(L0_BIDIRECTIONAL)
#if IS_BIDI
#define L0_QUANTIZATION M(l0_fw_quantization)
#else
#define L0_QUANTIZATION M(l0_quantization)
#endif
#if MODEL_EMBEDDING
#define SEQ_IN T /* input elements of one sequence: token ids */
typedef int32_t model_input;
#define SAMPLE M(sample_ids)
#define STEP_IN 1
#else
#define SEQ_IN (T * U(L0_INPUT_SIZE))
typedef int8_t model_input;
#define SAMPLE M(sample_input)
#define STEP_IN U(L0_INPUT_SIZE)
#endif

#ifndef WORKSPACE_BYTES
#define WORKSPACE_BYTES 65536
#endif
#ifndef MODEL_TOKEN_TABLE
#define MODEL_TOKEN_TABLE 0
#endif

#ifdef MODEL_PLAN_HEADER
/* The plan as a const value in flash (no RAM): the bytes a first image of this build planned and
 * printed (MODEL_SIZES_ONLY; run.sh writes them into MODEL_PLAN_HEADER as MODEL_PLAN_INIT). A plan
 * holds no pointer of its own, so the value runs in any image linked with the same library build. */
#include MODEL_PLAN_HEADER
static const rnncore_plan g_plan = {{MODEL_PLAN_INIT}};
#else
static rnncore_plan g_plan;
#endif
static uint8_t g_ws[WORKSPACE_BYTES] __attribute__((aligned(64)));
#if IS_BIDI
static int8_t g_y[U(RETURN_SEQUENCES) ? T * OUT : OUT]; /* one sequence's output */
#else
/* One sequence's output, and the streamed state: the streaming check (a step's output in its own
 * y_t) runs after the whole-sequence ones and before the one from a state, so the two share bytes. */
#define H U(L0_HIDDEN_SIZE)
static union {
  int8_t y[U(RETURN_SEQUENCES) ? T * OUT : OUT];
  struct {
    int16_t c[H];
    int8_t h[H];
  } state;
} g_io;
#define g_y g_io.y
#define g_h g_io.state.h
#define g_c g_io.state.c
#endif

#ifdef MODEL_SIZES_ONLY
/* The plan's bytes up to its last non-zero one, as hex, 32 a line: "PLAN 43 4f ..." (run.sh's
 * MODEL_PLAN_INIT; the console's lines are short). */
static void put_plan_bytes(void) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char* b = g_plan.opaque;
  size_t n = sizeof g_plan.opaque, i;
  char byte[4] = {' ', 0, 0, 0};
  while (n > 1 && b[n - 1] == 0) --n;
  for (i = 0; i < n; ++i) {
    if (i % 32 == 0) put("PLAN");
    byte[1] = hex[b[i] >> 4];
    byte[2] = hex[b[i] & 15];
    put(byte);
    if (i % 32 == 31 || i + 1 == n) end_line();
  }
}
#endif

static rnncore_status model_prepare(void) {
  rnncore_link_int8(); /* the firmware profile links the integer backend on this call */
#ifdef MODEL_PLAN_HEADER
  return rnncore_plan_packed_weight_bytes(&g_plan) == sizeof M(packed) ? RNNCORE_OK : RNNCORE_ERR_BUFFER_TOO_SMALL;
#else
  rnncore_plan_options o;
  rnncore_status s;
  rnncore_plan_options_init(&o);
  /* A header of `export-c --interleave-i16` holds int16 panels, which a plan takes only when asked. */
  if (L0_QUANTIZATION.weight_layout == RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16) {
    o.int8_weights = RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED_I16;
  }
#if MODEL_TOKEN_TABLE
  o.int8_token_table = 1; /* a header of `export-c --token-table` (NAME_TOKEN_TABLE): layer 0's input parts per token */
#endif
  o.max_batch = 1;
  o.max_seq_len = T;
  s = rnncore_plan_create_stack(&M(stack), &o, &g_plan);
  if (s != RNNCORE_OK) return s;
#ifdef MODEL_SIZES_ONLY
  put("SIZES packed=");
  put_uint((unsigned long)rnncore_plan_packed_weight_bytes(&g_plan));
  put(" workspace=");
  put_uint((unsigned long)rnncore_plan_workspace_bytes(&g_plan));
  end_line();
  put_plan_bytes();
#endif
  /* The header's packed weights are this plan's layout (a plan of another one refuses them in forward). */
  return rnncore_plan_packed_weight_bytes(&g_plan) == sizeof M(packed) ? RNNCORE_OK : RNNCORE_ERR_BUFFER_TOO_SMALL;
#endif
}

/* The whole model on `steps` inputs in one call, from h0 / c0 (NULL: LiteRT's initial state),
 * the final state to hy / cy (or NULL). */
static rnncore_status model_run(const model_input* in, int steps, int8_t* y, const void* h0, const void* c0, void* hy,
                                void* cy) {
  rnncore_forward_args a;
  rnncore_forward_args_init(&a);
  a.batch = 1;
  a.seq_len = steps;
  a.x = in;
  a.y = y;
  a.h0 = h0;
  a.c0 = c0;
  a.hy = hy;
  a.cy = cy;
  return rnncore_forward(&g_plan, M(packed), g_ws, sizeof g_ws, &a);
}

/* The hooks of model_checks.h: the whole sequence into g_y; one step of it, streamed (the state
 * passed back in as h0 / c0). */
static rnncore_status model_sequence(const model_input* in, const int8_t* h0, const int16_t* c0) {
  return model_run(in, T, g_y, h0, c0, NULL, NULL);
}
#if !IS_BIDI
static rnncore_status model_stream(const model_input* in, int t, int8_t* y_t) {
  return model_run(in + t * STEP_IN, 1, y_t, t ? g_h : NULL, t ? g_c : NULL, g_h, g_c);
}
#endif

#include "model_checks.h"

int main(void) {
  unsigned long stack;
  rnncore_status s = model_prepare();
  int e;
  if (s != RNNCORE_OK) return put_failure("plan", s);
#ifdef MODEL_SIZES_ONLY
  return 0;
#endif
  if ((e = model_first_runs(&stack)) != 0) return e;
  put("MODEL " STR(MODEL) " one call, kernel ");
  put(rnncore_plan_kernel_name(&g_plan));
  report("packed", (unsigned long)rnncore_plan_packed_weight_bytes(&g_plan));
  report("workspace", (unsigned long)rnncore_plan_workspace_bytes(&g_plan));
#ifdef MODEL_PLAN_HEADER
  report("plan_in_flash", (unsigned long)sizeof g_plan);
#else
  report("plan", (unsigned long)sizeof g_plan);
#endif
  end_line();
  return model_checks(stack);
}

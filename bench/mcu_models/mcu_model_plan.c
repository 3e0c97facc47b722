/* One of the four public LSTM models (bench/mcu_models/README.md), whole, in one call through the
 * one-network C API (rnncore/rnncore.h) on a Cortex-M under qemu-system-arm: the model is one
 * rnncore_stack_spec of dtype RNNCORE_I8 (Embedding -> LSTM x n, bidirectional with the Keras
 * merge -> Dense and its activation), and both the spec (NAME_stack) and the weights packed for the
 * DSP kernel (NAME_packed: interleaved, biases folded) are const objects in flash that the export-c
 * header (MODEL_HEADER, `rnncore export-c --interleave`, the same header as mcu_model.c's) holds.
 * The plan is made once after rnncore_link_int8(); there is no pack step, and every inference is
 * one rnncore_forward on NAME_packed in place.
 *
 * RAM: the plan (a value of RNNCORE_PLAN_BYTES: 12 544 bytes, 2 688 in a library built with
 * -Dmax_layers=2) and the workspace, sized at build time by WORKSPACE_BYTES (run.sh reads it from a
 * first run with -DMODEL_SIZES_ONLY, which prints the plan's sizes): one step's buffers for a stack
 * of one-direction layers, layer 0's output of every step for the bidirectional model.
 *
 * Checks, as mcu_model.c: every sequence of the sample equal to LiteRT's bit for bit; a
 * unidirectional model also streamed one step per call (the state in the caller's h and c, carried
 * through h0 / hy and c0 / cy); with MODEL_STATE_HEADER a run from a non-zero initial state.
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

static rnncore_plan g_plan;
static uint8_t g_ws[WORKSPACE_BYTES] __attribute__((aligned(64)));
static int8_t g_y[U(RETURN_SEQUENCES) ? T * OUT : OUT]; /* one sequence's output */
#if !IS_BIDI
#define H U(L0_HIDDEN_SIZE)
static int8_t g_h[H]; /* the streamed state */
static int16_t g_c[H];
#endif

static rnncore_status model_prepare(void) {
  rnncore_plan_options o;
  rnncore_status s;
  rnncore_link_int8(); /* the firmware profile links the integer backend on this call */
  rnncore_plan_options_init(&o);
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
#endif
  /* The header's packed weights are this plan's layout (a plan of another one refuses them in forward). */
  return rnncore_plan_packed_weight_bytes(&g_plan) == sizeof M(packed) ? RNNCORE_OK : RNNCORE_ERR_BUFFER_TOO_SMALL;
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

static void report(const char* key, unsigned long value) {
  put(" ");
  put(key);
  put("=");
  put_uint(value);
}

static unsigned long differ(const int8_t* a, const int8_t* b, size_t n) {
  unsigned long d = 0;
  size_t i;
  for (i = 0; i < n; ++i) d += a[i] != b[i];
  return d;
}

#ifndef MODEL_COUNT_REPS
#define MODEL_COUNT_REPS 0
#endif
static volatile int g_reps = MODEL_COUNT_REPS;

int main(void) {
  extern char __data_start[], __bss_end[], __data_end[], __data_load[];
  unsigned long bad = 0, stack;
  rnncore_status s = model_prepare();
  int r;
  if (s != RNNCORE_OK) return put_failure("plan", s);
#ifdef MODEL_SIZES_ONLY
  return 0;
#endif
  board_stack_mark();
  for (r = 0; r < (MODEL_COUNT_REPS ? g_reps : 1); ++r) {
    s = model_run(SAMPLE, T, g_y, NULL, NULL, NULL, NULL); /* the sample's first sequence */
    if (s != RNNCORE_OK) return put_failure("forward", s);
  }
  stack = board_stack_high_water();
  put("MODEL " STR(MODEL) " one call, kernel ");
  put(rnncore_plan_kernel_name(&g_plan));
  report("packed", (unsigned long)rnncore_plan_packed_weight_bytes(&g_plan));
  report("workspace", (unsigned long)rnncore_plan_workspace_bytes(&g_plan));
  report("plan", (unsigned long)sizeof g_plan);
  end_line();
  put("MEM");
  report("flash", (unsigned long)((uintptr_t)__data_load + (uintptr_t)(__data_end - __data_start)));
  report("ram_static", (unsigned long)(__bss_end - __data_start));
  report("stack_peak", stack);
  end_line();
  if (MODEL_COUNT_REPS) return 0;
  { /* every sequence of the sample, one call each */
    unsigned long d = 0;
    int b;
    for (b = 0; b < ROWS; ++b) {
      s = model_run(SAMPLE + b * SEQ_IN, T, g_y, NULL, NULL, NULL, NULL);
      if (s != RNNCORE_OK) return put_failure("forward", s);
      d += differ(g_y, M(sample_output) + b * sizeof g_y, sizeof g_y);
    }
    bad += d;
    put("whole model, one rnncore_forward per sequence: ");
    put_uint(d);
    put(" of ");
    put_uint(ROWS * sizeof g_y);
    put(" outputs differ from LiteRT's; sequences: ");
    put_uint(ROWS);
    end_line();
  }
#if !IS_BIDI
  { /* streamed: one step per call, the state carried in g_h / g_c between calls */
    int8_t y_t[OUT];
    unsigned long d = 0;
    int b, t;
    for (b = 0; b < ROWS; ++b) {
      const model_input* in = SAMPLE + b * SEQ_IN;
      const int8_t* expected = M(sample_output) + b * sizeof g_y;
      for (t = 0; t < T; ++t) {
        s = model_run(in + t * STEP_IN, 1, y_t, t ? g_h : NULL, t ? g_c : NULL, g_h, g_c);
        if (s != RNNCORE_OK) return put_failure("forward, one step", s);
        if (U(RETURN_SEQUENCES)) d += differ(y_t, expected + t * OUT, OUT);
      }
      if (!U(RETURN_SEQUENCES)) d += differ(y_t, expected, OUT); /* the head on the last step */
    }
    bad += d;
    put("streamed, one step per call: ");
    put_uint(d);
    put(" outputs differ from LiteRT's");
    end_line();
  }
#endif
#ifdef MODEL_STATE_HEADER
  s = model_run(SAMPLE, T, g_y, M(state_h0), M(state_c0), NULL, NULL);
  if (s != RNNCORE_OK) return put_failure("forward from a state", s);
  bad += differ(g_y, M(state_expected_y), sizeof g_y);
  put("from a non-zero initial state: ");
  put_uint(differ(g_y, M(state_expected_y), sizeof g_y));
  put(" outputs differ from LiteRT's");
  end_line();
#endif
  put(bad == 0 ? "PASS" : "FAIL");
  report("flash", (unsigned long)((uintptr_t)__data_load + (uintptr_t)(__data_end - __data_start)));
  report("ram_static", (unsigned long)(__bss_end - __data_start));
  report("stack_peak", stack);
  end_line();
  return bad != 0;
}

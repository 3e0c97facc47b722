/* The checks that mcu_model.c (the int8.h path) and mcu_model_plan.c (one rnncore_forward) both run
 * on a model's sample, and their report: included by each after it has defined
 *   M(x), U(X), STR(x)  the export-c header's names; T, OUT, ROWS, SEQ_IN, SAMPLE, model_input, g_y
 *   model_sequence(in, h0, c0)  the whole model on one sequence into g_y, from h0 / c0 (NULL:
 *                               LiteRT's initial state)
 *   model_stream(in, t, y_t)    (unidirectional models) step t of the sequence `in`, one call, the
 *                               state carried from step t − 1 (t = 0: LiteRT's initial state); y_t
 *                               the step's output, or at the last step the head's on it
 * MODEL_COUNT_REPS=N: N inferences of the sample's first sequence and nothing else checked (the
 * count images). Otherwise every sequence must equal LiteRT's bit for bit; a unidirectional model
 * is also streamed and compared on every step; with MODEL_STATE_HEADER a run from a non-zero
 * initial state is compared with LiteRT's from the same state. C99. */
#ifndef RNNCORE_BENCH_MCU_MODELS_MODEL_CHECKS_H
#define RNNCORE_BENCH_MCU_MODELS_MODEL_CHECKS_H

#ifndef MODEL_COUNT_REPS
#define MODEL_COUNT_REPS 0
#endif
static volatile int g_reps = MODEL_COUNT_REPS;

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

/* The image's flash, its static RAM and the stack peak of the first inference. */
static void report_memory(unsigned long stack) {
  extern char __data_start[], __bss_end[], __data_end[], __data_load[];
  report("flash", (unsigned long)((uintptr_t)__data_load + (uintptr_t)(__data_end - __data_start)));
  report("ram_static", (unsigned long)(__bss_end - __data_start));
  report("stack_peak", stack);
  end_line();
}

/* The first inference (MODEL_COUNT_REPS of them for the count images), its stack peak to *stack. */
static int model_first_runs(unsigned long* stack) {
  rnncore_status s = RNNCORE_OK;
  int r;
  board_stack_mark();
  for (r = 0; r < (MODEL_COUNT_REPS ? g_reps : 1) && s == RNNCORE_OK; ++r) s = model_sequence(SAMPLE, NULL, NULL);
  *stack = board_stack_high_water();
  return s == RNNCORE_OK ? 0 : put_failure("model_sequence", s);
}

/* Every check after the first inference, then the PASS or FAIL line: main's exit status. */
static int model_checks(unsigned long stack) {
  unsigned long bad = 0, d = 0;
  rnncore_status s;
  int b;
  put("MEM");
  report_memory(stack);
  if (MODEL_COUNT_REPS) return 0;
  for (b = 0; b < ROWS; ++b) { /* every sequence of the sample, one call each */
    s = model_sequence(SAMPLE + b * SEQ_IN, NULL, NULL);
    if (s != RNNCORE_OK) return put_failure("model_sequence", s);
    d += differ(g_y, M(sample_output) + b * sizeof g_y, sizeof g_y);
  }
  bad += d;
  put("whole model, one call per sequence: ");
  put_uint(d);
  put(" of ");
  put_uint(ROWS * sizeof g_y);
  put(" outputs differ from LiteRT's; sequences: ");
  put_uint(ROWS);
  end_line();
#if !IS_BIDI
  d = 0;
  for (b = 0; b < ROWS; ++b) { /* streamed: one step per call, the state carried between calls */
    const model_input* in = SAMPLE + b * SEQ_IN;
    const int8_t* expected = M(sample_output) + b * sizeof g_y;
    int8_t y_t[OUT];
    int t;
    for (t = 0; t < T; ++t) {
      s = model_stream(in, t, y_t);
      if (s != RNNCORE_OK) return put_failure("model_stream", s);
      if (U(RETURN_SEQUENCES)) d += differ(y_t, expected + t * OUT, OUT);
    }
    if (!U(RETURN_SEQUENCES)) d += differ(y_t, expected, OUT); /* the head on the last step */
  }
  bad += d;
  put("streamed, one step per call: ");
  put_uint(d);
  put(" outputs differ from LiteRT's");
  end_line();
#endif
#ifdef MODEL_STATE_HEADER
  s = model_sequence(SAMPLE, M(state_h0), M(state_c0));
  if (s != RNNCORE_OK) return put_failure("model_sequence from a state", s);
  d = differ(g_y, M(state_expected_y), sizeof g_y);
  bad += d;
  put("from a non-zero initial state: ");
  put_uint(d);
  put(" outputs differ from LiteRT's");
  end_line();
#endif
  put(bad == 0 ? "PASS" : "FAIL");
  report_memory(stack);
  return bad != 0;
}

#endif /* RNNCORE_BENCH_MCU_MODELS_MODEL_CHECKS_H */

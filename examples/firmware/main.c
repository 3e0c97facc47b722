/* The firmware example: a 2-layer PyTorch LSTM (input 16, hidden 32) with its weights compiled in,
 * run on a sample from static memory only (no heap, no file system) the way firmware with a sensor
 * runs it: one time step per call, the state carried from call to call (each call's hy/cy become
 * the next call's h0/c0), every step's output compared with PyTorch's whole-sequence output. One
 * plan of one step (max_seq_len 1) serves the whole sequence, so the RAM rnncore uses is the plan,
 * a workspace of one step and the state: none of it grows with the sequence. (A step per call
 * gives the same bits as the whole sequence in one call: tests/test_streaming.cpp.)
 * Prints PASS or FAIL and exits with 0 or 1.
 *
 * The weights stay in flash, packed by `rnncore export-c` for the portable scalar kernels
 * (lstm_small_packed): forward reads them in place. The model header comes from `rnncore export-c`
 * (generated/lstm_small_model.h; host builds export it afresh). Builds for the host (board_host.c)
 * and for Cortex-M (mps2/: start-up code, linker script, semihosting console); see docs/porting.md. */
#include <stddef.h>
#include <string.h>

#include <rnncore/rnncore.h>

#include "board.h"
#include "console.h"
#include "lstm_small_model.h"

#define STEPS LSTM_SMALL_SAMPLE_STEPS
#define BATCH LSTM_SMALL_SAMPLE_BATCH
#define INPUT LSTM_SMALL_INPUT_SIZE
#define OUTPUT LSTM_SMALL_OUTPUT_SIZE
#define STATE (LSTM_SMALL_STATE_SIZE * BATCH) /* floats of h (or c) for the whole batch: [L*D, B, H] */

/* PyTorch computed the expected output in float32 with other exp/tanh implementations: allow
 * float32-level differences, relative to the output's largest magnitude. */
#define PYTORCH_TOLERANCE 1e-5f

/* Compile-time checks: the sample fits the exported plan limits. */
typedef char sample_fits_plan[BATCH <= LSTM_SMALL_MAX_BATCH ? 1 : -1];

/* All RAM the library uses besides the state: the plan and one step's workspace, sized by the
 * exported plan sizes and checked against the library's own size queries at start-up. The weights
 * are in flash. */
static unsigned char workspace[LSTM_SMALL_STEP_WORKSPACE_BYTES] __attribute__((aligned(RNNCORE_ALIGNMENT)));
static rnncore_plan plan; /* max_seq_len 1 */
static float y_step[BATCH * OUTPUT];
static float h_state[STATE], c_state[STATE]; /* each call's h0/c0 and hy/cy: the same buffers (docs/porting.md) */

static float max_abs(const float* v, size_t n) {
  float m = 0;
  size_t i;
  for (i = 0; i < n; ++i) m = v[i] > m ? v[i] : -v[i] > m ? -v[i] : m;
  return m;
}

int main(void) {
  rnncore_plan_options options;
  rnncore_forward_args args;
  rnncore_status status;
  size_t workspace_bytes, i;
  unsigned long stack_setup;
  float max_diff = 0, max_expected;
  int t;
  put("rnncore ");
  put(rnncore_version());
  put(" firmware example: LSTM, ");
  put_uint(LSTM_SMALL_NUM_LAYERS);
  put(" layers, input ");
  put_uint(LSTM_SMALL_INPUT_SIZE);
  put(", hidden ");
  put_uint(LSTM_SMALL_HIDDEN_SIZE);
  put("; sample T=");
  put_uint(STEPS);
  put(" B=");
  put_uint(BATCH);
  end_line();
  /* One step per call, for the kernel family the weights were packed for (the portable scalar path). */
  rnncore_plan_options_init(&options);
  options.max_batch = LSTM_SMALL_MAX_BATCH;
  options.max_seq_len = 1;
  options.max_isa = LSTM_SMALL_MAX_ISA;
  status = rnncore_plan_create(&lstm_small_spec, &options, &plan);
  if (status != RNNCORE_OK) return put_failure("plan", status);
  /* The workspace was sized at compile time; the library's size query is the authority. */
  workspace_bytes = rnncore_plan_workspace_bytes(&plan);
  put("memory: flash packed weights ");
  put_uint(sizeof lstm_small_packed);
  put(" bytes; RAM plan ");
  put_uint(sizeof plan);
  put(", workspace ");
  put_uint(sizeof workspace);
  put(" (the plan's ");
  put_uint(workspace_bytes);
  put("), state ");
  put_uint(sizeof h_state + sizeof c_state);
  put(" bytes; kernels ");
  put(rnncore_plan_kernel_name(&plan));
  end_line();
  if (workspace_bytes > sizeof workspace || rnncore_plan_packed_weight_bytes(&plan) != sizeof lstm_small_packed ||
      (size_t)&lstm_small_packed % RNNCORE_ALIGNMENT != 0) {
    put("FAIL: the buffers differ from what the plan needs, or are misaligned (export the header again)");
    end_line();
    return 1;
  }
  stack_setup = board_stack_high_water(); /* planning */
  board_stack_mark();                     /* from here: running */
  /* The sample, one step per call from a zero state, each step's output against PyTorch's. */
  memset(h_state, 0, sizeof h_state);
  memset(c_state, 0, sizeof c_state);
  for (t = 0; t < STEPS; ++t) {
    const float* expected = lstm_small_sample_output + (size_t)t * BATCH * OUTPUT;
    rnncore_forward_args_init(&args);
    args.batch = BATCH;
    args.seq_len = 1;
    args.x = lstm_small_sample_input + (size_t)t * BATCH * INPUT;
    args.h0 = h_state;
    args.c0 = c_state;
    args.y = y_step;
    args.hy = h_state;
    args.cy = c_state;
    status = rnncore_forward(&plan, &lstm_small_packed, workspace, workspace_bytes, &args);
    if (status != RNNCORE_OK) return put_failure("forward (one step)", status);
    for (i = 0; i < BATCH * OUTPUT; ++i) {
      const float d = y_step[i] - expected[i];
      max_diff = d > max_diff ? d : -d > max_diff ? -d : max_diff;
    }
  }
  max_expected = max_abs(lstm_small_sample_output, STEPS * BATCH * OUTPUT);
  put("streamed, 1 step per call: max_abs_diff=");
  put_sci(max_diff, 3);
  put(" vs PyTorch (limit ");
  put_sci(PYTORCH_TOLERANCE * max_expected, 3);
  put(")");
  end_line();
  if (stack_setup > 0) {
    put("stack (deepest, from its top, incl. main's frame): planning ");
    put_uint(stack_setup);
    put(" bytes, running ");
    put_uint(board_stack_high_water());
    put(" bytes");
    end_line();
  }
  if (max_diff <= PYTORCH_TOLERANCE * max_expected) {
    put("PASS");
    end_line();
    return 0;
  }
  put("FAIL");
  end_line();
  return 1;
}

/* The firmware example: a 2-layer PyTorch LSTM (input 16, hidden 32) with its weights compiled in,
 * run on a sample from static memory only (no heap, no file system), in two ways:
 *   1. the whole sequence in one call, compared with PyTorch's output;
 *   2. streamed one time step per call, the state carried from call to call (each call's hy/cy
 *      become the next call's h0/c0), compared step by step with run 1: the outputs must be
 *      bitwise equal, since both runs do the same floating-point operations in the same order.
 * Prints PASS or FAIL and exits with 0 or 1.
 *
 * The weights stay in flash, packed by `rnncore export-c` for the portable scalar kernels
 * (lstm_small_packed): forward reads them in place, so RAM holds only the workspace, the state
 * and the outputs. The model header comes from `rnncore export-c` (generated/lstm_small_model.h;
 * host builds export it afresh). Builds for the host (board_host.c) and for Cortex-M (mps2/: start-up code,
 * linker script, semihosting console); see docs/porting.md. */
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
typedef char sample_fits_plan[(STEPS <= LSTM_SMALL_MAX_SEQ_LEN && BATCH <= LSTM_SMALL_MAX_BATCH) ? 1 : -1];

/* All RAM the library uses besides the state: the workspace, sized by the exported plan sizes and
 * checked against the library's own size queries at start-up. The weights are in flash. */
static unsigned char workspace[LSTM_SMALL_WORKSPACE_BYTES] __attribute__((aligned(RNNCORE_ALIGNMENT)));
static rnncore_plan whole_plan; /* max_seq_len STEPS */
static rnncore_plan step_plan;  /* max_seq_len 1: the streaming plan, same packed weights */

static float y_whole[STEPS * BATCH * OUTPUT];
static float h_whole[STATE], c_whole[STATE];
static float y_step[BATCH * OUTPUT];
static float h_state[2][STATE], c_state[2][STATE]; /* ping-pong: call t reads [t % 2], writes the other */



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
  size_t workspace_bytes, step_workspace_bytes, i;
  unsigned long stack_setup;
  float max_diff = 0, max_expected;
  int t, steps_equal = 0, state_equal;

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

  /* Plan both runs for the kernel family the weights were packed for (the portable scalar path). */
  rnncore_plan_options_init(&options);
  options.max_batch = LSTM_SMALL_MAX_BATCH;
  options.max_seq_len = LSTM_SMALL_MAX_SEQ_LEN;
  options.max_isa = LSTM_SMALL_MAX_ISA;
  status = rnncore_plan_create(&lstm_small_spec, &options, &whole_plan);
  if (status != RNNCORE_OK) return put_failure("plan", status);
  options.max_seq_len = 1;
  status = rnncore_plan_create(&lstm_small_spec, &options, &step_plan);
  if (status != RNNCORE_OK) return put_failure("streaming plan", status);

  /* The workspace was sized at compile time; the library's size queries are the authority. */
  workspace_bytes = rnncore_plan_workspace_bytes(&whole_plan);
  step_workspace_bytes = rnncore_plan_workspace_bytes(&step_plan);
  put("memory: flash packed weights ");
  put_uint(sizeof lstm_small_packed);
  put(" bytes; RAM workspace ");
  put_uint(sizeof workspace);
  put(" (the plan's ");
  put_uint(workspace_bytes);
  put(", streaming ");
  put_uint(step_workspace_bytes);
  put("), state ");
  put_uint(sizeof h_whole + sizeof c_whole);
  put(" bytes; kernels ");
  put(rnncore_plan_kernel_name(&whole_plan));
  end_line();
  if (workspace_bytes > sizeof workspace || step_workspace_bytes > workspace_bytes ||
      rnncore_plan_packed_weight_bytes(&whole_plan) != sizeof lstm_small_packed ||
      rnncore_plan_packed_weight_bytes(&step_plan) != sizeof lstm_small_packed ||
      (size_t)&lstm_small_packed % RNNCORE_ALIGNMENT != 0) {
    put("FAIL: the buffers differ from what the plans need, or are misaligned (export the header again)");
    end_line();
    return 1;
  }
  stack_setup = board_stack_high_water(); /* planning */
  board_stack_mark();                     /* from here: running */

  /* 1. The whole sequence in one call, from a zero state. */
  rnncore_forward_args_init(&args);
  args.batch = BATCH;
  args.seq_len = STEPS;
  args.x = lstm_small_sample_input;
  args.y = y_whole;
  args.hy = h_whole;
  args.cy = c_whole;
  status = rnncore_forward(&whole_plan, &lstm_small_packed, workspace, workspace_bytes, &args);
  if (status != RNNCORE_OK) return put_failure("forward (whole sequence)", status);
  for (i = 0; i < STEPS * BATCH * OUTPUT; ++i) {
    const float d = y_whole[i] - lstm_small_sample_output[i];
    max_diff = d > max_diff ? d : -d > max_diff ? -d : max_diff;
  }
  max_expected = max_abs(lstm_small_sample_output, STEPS * BATCH * OUTPUT);
  put("whole sequence: max_abs_diff=");
  put_sci(max_diff, 3);
  put(" vs PyTorch (limit ");
  put_sci(PYTORCH_TOLERANCE * max_expected, 3);
  put(")");
  end_line();

  /* 2. Streaming: one step per call with the step plan, carrying h and c. Step 0 starts from the
   *    same zero state as run 1 (h0 = c0 = NULL there). */
  memset(h_state, 0, sizeof h_state);
  memset(c_state, 0, sizeof c_state);
  for (t = 0; t < STEPS; ++t) {
    const int from = t % 2, to = 1 - from;
    rnncore_forward_args_init(&args);
    args.batch = BATCH;
    args.seq_len = 1;
    args.x = lstm_small_sample_input + (size_t)t * BATCH * INPUT;
    args.h0 = h_state[from];
    args.c0 = c_state[from];
    args.y = y_step;
    args.hy = h_state[to];
    args.cy = c_state[to];
    status = rnncore_forward(&step_plan, &lstm_small_packed, workspace, step_workspace_bytes, &args);
    if (status != RNNCORE_OK) return put_failure("forward (one step)", status);
    steps_equal += memcmp(y_step, y_whole + (size_t)t * BATCH * OUTPUT, sizeof y_step) == 0;
  }
  state_equal = memcmp(h_state[STEPS % 2], h_whole, sizeof h_whole) == 0 &&
                memcmp(c_state[STEPS % 2], c_whole, sizeof c_whole) == 0;
  put("streaming, 1 step per call: ");
  put_uint((unsigned long)steps_equal);
  put("/");
  put_uint(STEPS);
  put(" steps bitwise equal to the whole-sequence run; final h, c ");
  put(state_equal ? "equal" : "DIFFERENT");
  end_line();

  if (stack_setup > 0) {
    put("stack (deepest, from its top, incl. main's frame): planning ");
    put_uint(stack_setup);
    put(" bytes, running ");
    put_uint(board_stack_high_water());
    put(" bytes");
    end_line();
  }

  if (max_diff <= PYTORCH_TOLERANCE * max_expected && steps_equal == STEPS && state_equal) {
    put("PASS");
    end_line();
    return 0;
  }
  put("FAIL");
  end_line();
  return 1;
}

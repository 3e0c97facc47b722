/* The int8 firmware example: a Keras LSTM (input 16, hidden 32) quantized to full integer by the
 * TFLite converter, its int8 weights compiled in (flash), run on a sample from static memory only
 * (no heap, no file system), in two ways:
 *   1. the whole sequence of every row in one call, compared with LiteRT's output bit for bit;
 *   2. streamed one time step per call, each row's state carried from call to call, compared
 *      step by step with run 1: bitwise equal.
 * The biases are folded ahead of time by `rnncore export-c` and stay in flash (prepare_folded
 * checks them); RAM holds only the state, the scratch and the prepared parameters. The weights are
 * exported interleaved (`--interleave`), the layout the Cortex-M4/M7 DSP kernel reads; a run's
 * scratch then also holds x and h widened to int16 (LSTM_INT8_SCRATCH_BYTES).
 * Prints PASS or FAIL and exits with 0 or 1.
 *
 * The model header comes from `rnncore export-c` (generated/lstm_int8_model.h; host builds export
 * it afresh). Builds for the host (board_host.c) and for Cortex-M (mps2/); see README.md. */
#include <stddef.h>
#include <string.h>

#include <rnncore/int8.h>

#include "board.h"
#include "console.h"
#include "lstm_int8_model.h"

#define STEPS LSTM_INT8_SAMPLE_STEPS
#define BATCH LSTM_INT8_SAMPLE_BATCH
#define INPUT LSTM_INT8_INPUT_SIZE
#define HIDDEN LSTM_INT8_HIDDEN_SIZE

typedef char sample_is_sequences[LSTM_INT8_RETURN_SEQUENCES ? 1 : -1];

/* All RAM the model needs besides the stack: the state of every row and the scratch of a run (the
 * new h, and x and h widened for the interleaved kernel). */
static rnncore_int8_lstm lstm;
static int8_t h_whole[BATCH * HIDDEN];
static int16_t c_whole[BATCH * HIDDEN];
static int8_t y_whole[BATCH * STEPS * HIDDEN];
static int8_t h_step[HIDDEN], y_step[HIDDEN];
static int16_t c_step[HIDDEN];
static int8_t scratch[LSTM_INT8_SCRATCH_BYTES];

static void reset_state(int8_t* h, int16_t* c, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    h[i] = LSTM_INT8_STATE_ZERO_POINT;
    c[i] = 0;
  }
}

int main(void) {
  rnncore_status status;
  unsigned long stack_setup;
  size_t i, mismatches = 0;
  int b, t, steps_equal = 0, states_equal = 1;

  put("rnncore ");
  put(rnncore_version());
  put(" int8 firmware example: LSTM (LiteRT 8x8_16), input ");
  put_uint(INPUT);
  put(", hidden ");
  put_uint(HIDDEN);
  put("; sample T=");
  put_uint(STEPS);
  put(" B=");
  put_uint(BATCH);
  end_line();

  status = rnncore_int8_lstm_prepare_folded(&lstm_int8_quantization, INPUT, HIDDEN, lstm_int8_w_gates,
                                            lstm_int8_r_gates, lstm_int8_bias_gates,
                                            lstm_int8_folded_bias, LSTM_INT8_BIAS_WORDS, &lstm);
  if (status != RNNCORE_OK) return put_failure("prepare", status);
  if (rnncore_int8_lstm_run_scratch_bytes(&lstm) > sizeof scratch) {
    put("FAIL: the scratch is smaller than the library needs (export the header again)");
    end_line();
    return 1;
  }
  put("memory: flash weights ");
  put_uint(sizeof lstm_int8_w + sizeof lstm_int8_r);
  put(" + biases ");
  put_uint(sizeof lstm_int8_bias + sizeof lstm_int8_folded_bias);
  put(" bytes; RAM per row: state ");
  put_uint(HIDDEN * (sizeof(int8_t) + sizeof(int16_t)));
  put(", scratch ");
  put_uint(sizeof scratch);
  put(", parameters ");
  put_uint(sizeof lstm);
  put(" bytes; kernel ");
  put(rnncore_int8_lstm_kernel_name(&lstm));
  end_line();
  stack_setup = board_stack_high_water();
  board_stack_mark();

  /* 1. Every row's whole sequence in one call, from LiteRT's initial state. */
  reset_state(h_whole, c_whole, BATCH * HIDDEN);
  status = rnncore_int8_lstm_run(&lstm, BATCH, STEPS, lstm_int8_sample_input, y_whole, h_whole, c_whole,
                                 scratch, sizeof scratch);
  if (status != RNNCORE_OK) return put_failure("run (whole sequence)", status);
  for (i = 0; i < sizeof y_whole; ++i) mismatches += y_whole[i] != lstm_int8_sample_output[i];
  put("whole sequence: ");
  put_uint((unsigned long)mismatches);
  put(" of ");
  put_uint((unsigned long)sizeof y_whole);
  put(" outputs differ from LiteRT's");
  end_line();

  /* 2. Streaming: one step per call, a row at a time, its state carried. */
  for (b = 0; b < BATCH; ++b) {
    reset_state(h_step, c_step, HIDDEN);
    for (t = 0; t < STEPS; ++t) {
      const size_t at = (size_t)b * STEPS + (size_t)t;
      status = rnncore_int8_lstm_run(&lstm, 1, 1, lstm_int8_sample_input + at * INPUT, y_step, h_step, c_step,
                                     scratch, sizeof scratch);
      if (status != RNNCORE_OK) return put_failure("run (one step)", status);
      steps_equal += memcmp(y_step, y_whole + at * HIDDEN, sizeof y_step) == 0;
    }
    states_equal &= memcmp(h_step, h_whole + (size_t)b * HIDDEN, sizeof h_step) == 0 &&
                    memcmp(c_step, c_whole + (size_t)b * HIDDEN, sizeof c_step) == 0;
  }
  put("streaming, 1 step per call: ");
  put_uint((unsigned long)steps_equal);
  put("/");
  put_uint(BATCH * STEPS);
  put(" steps bitwise equal to the whole-sequence run; final h, c ");
  put(states_equal ? "equal" : "DIFFERENT");
  end_line();

  if (stack_setup > 0) {
    put("stack (deepest, from its top, incl. main's frame): preparing ");
    put_uint(stack_setup);
    put(" bytes, running ");
    put_uint(board_stack_high_water());
    put(" bytes");
    end_line();
  }

  if (mismatches == 0 && steps_equal == BATCH * STEPS && states_equal) {
    put("PASS");
    end_line();
    return 0;
  }
  put("FAIL");
  end_line();
  return 1;
}

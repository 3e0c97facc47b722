/* The weather model (bench/mcu_models/README.md) in float32 on a Cortex-M's FPU under
 * qemu-system-arm: the Keras LSTM(32) exported by `rnncore export-c` from weather_f32.safetensors
 * (its weights packed for the scalar kernels, read in place from flash) run through the float C API (rnncore/rnncore.h) on 24 steps of 19 features,
 * then the Keras Dense(1) on every step (a dot product here), from weather_extra.h. Every output
 * must be within 1e-5 of TensorFlow's float output of the Keras model (weather_f32_y). Prints
 * PASS with the largest difference and the memory, exits 0; or FAIL, exits 1. C99. Built by
 * bench/mcu_models/run.sh. */
#include <stdint.h>

#include "rnncore/rnncore.h"
#include "board.h"
#include "console.h"
#include "weather_extra.h"
#include "weather_f32.h"

#define T 24
#define H WEATHER_F32_HIDDEN_SIZE
#define TOLERANCE 1e-5f

typedef char one_row_of_24_steps[(WEATHER_F32_MAX_SEQ_LEN == T && WEATHER_F32_MAX_BATCH == 1 &&
                                  sizeof weather_f32_y == T * sizeof(float))
                                     ? 1 : -1];

static unsigned char workspace[WEATHER_F32_WORKSPACE_BYTES] __attribute__((aligned(RNNCORE_ALIGNMENT)));
/* The plan (RNNCORE_PLAN_BYTES: 11 904 bytes in this firmware build, 2 496 with -Dmax_layers=2) is static: with planning's own 11 KiB of stack it would
 * overflow the 16 KiB stack of the linker script. */
static rnncore_plan plan;
static float g_seq[T * H], g_y[T];

int main(void) {
  extern char __data_start[], __bss_end[], __data_end[], __data_load[];
  rnncore_plan_options options;
  rnncore_forward_args args;
  rnncore_status s;
  unsigned long stack;
  float max_diff = 0;
  int t, k;
  rnncore_plan_options_init(&options);
  options.max_batch = 1;
  options.max_seq_len = T;
  options.max_isa = WEATHER_F32_MAX_ISA; /* the family weather_f32_packed was packed for */
  s = rnncore_plan_create(&weather_f32_spec, &options, &plan);
  if (s != RNNCORE_OK) return put_failure("plan", s);
  if (rnncore_plan_workspace_bytes(&plan) > sizeof workspace) {
    put("FAIL: the workspace is smaller than the plan needs");
    end_line();
    return 1;
  }
  board_stack_mark();
  rnncore_forward_args_init(&args);
  args.batch = 1;
  args.seq_len = T;
  args.x = weather_f32_input; /* [1, T, I] is [T, 1, I] */
  args.y = g_seq;
  s = rnncore_forward(&plan, &weather_f32_packed, workspace, sizeof workspace, &args);
  if (s != RNNCORE_OK) return put_failure("forward", s);
  for (t = 0; t < T; ++t) { /* Keras Dense(1) on every step, in float */
    float acc = 0;
    for (k = 0; k < H; ++k) acc += weather_dense_w[k] * g_seq[t * H + k];
    g_y[t] = acc + weather_dense_b[0];
  }
  stack = board_stack_high_water();
  for (t = 0; t < T; ++t) {
    const float d = g_y[t] - weather_f32_y[t];
    max_diff = d > max_diff ? d : -d > max_diff ? -d : max_diff;
  }
  put("MODEL weather f32 kernel ");
  put(rnncore_plan_kernel_name(&plan));
  end_line();
  put("whole model, f32: max_abs_diff=");
  put_sci(max_diff, 3);
  put(" vs TensorFlow (limit 1e-5)");
  end_line();
  put(max_diff <= TOLERANCE ? "PASS" : "FAIL");
  put(" flash=");
  put_uint((unsigned long)((uintptr_t)__data_load + (uintptr_t)(__data_end - __data_start)));
  put(" ram_static=");
  put_uint((unsigned long)(__bss_end - __data_start));
  put(" stack_peak=");
  put_uint(stack);
  end_line();
  return max_diff > TOLERANCE;
}

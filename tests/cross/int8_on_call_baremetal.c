/* The firmware profile's opt-in to the integer backend (rnncore_link_int8, docs/porting.md), on
 * the emulated core. Built twice: without RNNCORE_TEST_LINK_INT8, planning an integer stack must
 * fail with RNNCORE_ERR_BACKEND_UNAVAILABLE and a detail that names rnncore_link_int8 (and
 * .ci/stage_cross.sh checks that this image's map holds no object of the integer core); with it,
 * the same stack plans. A float stack plans in both. Prints PASS and exits 0, or FAIL. */
#include <string.h>

#include "examples/firmware/board.h"
#include "examples/firmware/console.h"
#include "rnncore/rnncore.h"

static rnncore_plan plan;
static rnncore_stack_spec st; /* static, as the spec is large for a 16 KiB stack */

/* A one-layer integer LSTM, I = 3, H = 4, per-tensor scales. */
static void int8_stack(rnncore_stack_spec* s) {
  rnncore_quant q = {0.05f, 0};
  int g;
  rnncore_stack_init(s);
  s->input_size = 3;
  s->dtype = RNNCORE_I8;
  s->num_layers = 1;
  s->input_quant = q;
  s->layers[0].hidden_size = 4;
  for (g = 0; g < 4; ++g) {
    s->layers[0].int8[0].w_scale[g] = 0.01f;
    s->layers[0].int8[0].r_scale[g] = 0.01f;
  }
  s->layers[0].int8[0].state.scale = 1.0f / 128;
  s->layers[0].int8[0].hidden = s->layers[0].int8[0].state;
  s->layers[0].int8[0].cell_scale = 1.0f / 2048;
}

int main(void) {
  rnncore_plan_options options;
  rnncore_status status;
  rnncore_plan_options_init(&options);
#ifdef RNNCORE_TEST_LINK_INT8
  rnncore_link_int8(); /* the one line a firmware that plans an integer stack adds */
#endif
  int8_stack(&st);
  status = rnncore_plan_create_stack(&st, &options, &plan);
#ifdef RNNCORE_TEST_LINK_INT8
  if (status != RNNCORE_OK) return put_failure("integer stack, rnncore_link_int8 called", status);
  put("integer stack planned: ");
  put(rnncore_plan_kernel_name(&plan));
  end_line();
#else
  if (status != RNNCORE_ERR_BACKEND_UNAVAILABLE || strstr(rnncore_last_error_detail(), "rnncore_link_int8()") == NULL) {
    put("FAIL: an integer stack without rnncore_link_int8: status ");
    put_uint((unsigned long)status);
    put(", detail: ");
    put(rnncore_last_error_detail());
    end_line();
    return 1;
  }
  put("integer stack refused: ");
  put(rnncore_last_error_detail());
  end_line();
#endif
  st.dtype = RNNCORE_F32; /* the same shapes as a float stack */
  status = rnncore_plan_create_stack(&st, &options, &plan);
  if (status != RNNCORE_OK) return put_failure("float stack", status);
  put("PASS");
  end_line();
  return 0;
}

/* The firmware profile's opt-in to the integer backend (rnncore_link_int8, docs/porting.md), on
 * the emulated core. Built twice: without RNNCORE_TEST_LINK_INT8, planning an integer stack must
 * fail with RNNCORE_ERR_BACKEND_UNAVAILABLE and a detail that names rnncore_link_int8 (and
 * .ci/stage_cross.sh checks that this image's map holds no object of the integer core); with it,
 * the same stack plans. A float stack plans in both. Prints PASS and exits 0, or FAIL. */
#include <string.h>

#include "examples/firmware/board.h"
#include "examples/firmware/console.h"
#include "rnncore/rnncore.h"
#ifdef RNNCORE_TEST_LINK_INT8
#include "rnncore/int8.h"
#endif

static rnncore_plan plan;
static rnncore_stack_spec st; /* static, as the spec is large for a 16 KiB stack */

enum { I = 3, H = 6, T = 5 }; /* H = 6: a panel of 4 rows half padded */

/* A one-layer integer LSTM, I = 3, H = 6, per-tensor scales. */
static void int8_stack(rnncore_stack_spec* s) {
  rnncore_quant q = {0.05f, 0};
  int g;
  rnncore_stack_init(s);
  s->input_size = I;
  s->dtype = RNNCORE_I8;
  s->num_layers = 1;
  s->input_quant = q;
  s->layers[0].hidden_size = H;
  for (g = 0; g < 4; ++g) {
    s->layers[0].int8[0].w_scale[g] = 0.01f;
    s->layers[0].int8[0].r_scale[g] = 0.01f;
  }
  s->layers[0].int8[0].state.scale = 1.0f / 128;
  s->layers[0].int8[0].hidden = s->layers[0].int8[0].state;
  s->layers[0].int8[0].cell_scale = 1.0f / 2048;
}

#ifdef RNNCORE_TEST_LINK_INT8
/* The canonical bytes: W [4][H][I], R [4][H][H] int8 in -127..127, then int32 biases [4][H]. */
static int32_t canonical_words[(4 * H * I + 4 * H * H) / 4 + 4 * H + 8];
static int32_t packed_words[1024] __attribute__((aligned(64)));
static int32_t workspace_words[512] __attribute__((aligned(64))); /* the plan's alignment */
static int8_t x[T * I], y_plan[T * H], y_layer[T * H], scratch[256], h[H];
static int16_t c[H];
static int32_t bias_storage[8 * H];

/* Plans, packs and runs the stack `st` on T steps of x; runs the same weights through
 * rnncore_int8_lstm_run (row-major); 0 if both give the same bytes. */
static int run_and_compare(void) {
  int8_t* can = (int8_t*)canonical_words;
  const int8_t* w[4];
  const int8_t* r[4];
  const int32_t* b[4];
  rnncore_int8_lstm_quantization q;
  rnncore_int8_lstm layer;
  rnncore_forward_args a;
  rnncore_status status;
  int i, g;
  const char* kernel = rnncore_plan_kernel_name(&plan);
  const int64_t w_at = rnncore_stack_canonical_offset(&st, 0, 0, RNNCORE_PARAM_INPUT_WEIGHT, 0);
  const int64_t r_at = rnncore_stack_canonical_offset(&st, 0, 0, RNNCORE_PARAM_RECURRENT_WEIGHT, 0);
  const int64_t b_at = rnncore_stack_canonical_offset(&st, 0, 0, RNNCORE_PARAM_INPUT_BIAS, 0);
  if (rnncore_stack_param_count(&st) > (int64_t)sizeof canonical_words || w_at != 0 || r_at != 4 * H * I ||
      b_at != 4 * H * I + 4 * H * H) {
    put("FAIL: the canonical layout is not W, R, biases");
    end_line();
    return 1;
  }
  for (i = 0; i < 4 * H * I + 4 * H * H; ++i) can[i] = (int8_t)((i * 37 + 11) % 255 - 127);
  for (i = 0; i < 4 * H; ++i) ((int32_t*)(void*)(can + b_at))[i] = i * 53 - 600;
  for (i = 0; i < T * I; ++i) x[i] = (int8_t)((i * 29 + 5) % 256 - 128);
#if defined(__ARM_FEATURE_DSP)
  if (strcmp(kernel, "i8_dot_panels_4x16__dsp") != 0) {
    put("FAIL: the plan's kernel is ");
    put(kernel);
    put(", not the interleaved i8_dot_panels_4x16__dsp");
    end_line();
    return 1;
  }
#endif
  if (rnncore_plan_packed_weight_bytes(&plan) > sizeof packed_words ||
      rnncore_plan_workspace_bytes(&plan) > sizeof workspace_words)
    return put_failure("plan sizes beyond the test's buffers", RNNCORE_ERR_BUFFER_TOO_SMALL);
  status = rnncore_plan_pack_weights(&plan, can, packed_words, sizeof packed_words);
  if (status != RNNCORE_OK) return put_failure("pack_weights", status);
  rnncore_forward_args_init(&a);
  a.batch = 1;
  a.seq_len = T;
  a.x = x;
  a.y = y_plan;
  status = rnncore_forward(&plan, packed_words, workspace_words, sizeof workspace_words, &a);
  if (status != RNNCORE_OK) return put_failure("forward", status);

  memset(&q, 0, sizeof q);
  q.input_scale = st.input_quant.scale;
  q.input_zp = st.input_quant.zero_point;
  for (g = 0; g < 4; ++g) {
    q.w_scale[g] = st.layers[0].int8[0].w_scale[g];
    q.r_scale[g] = st.layers[0].int8[0].r_scale[g];
    w[g] = can + g * H * I;
    r[g] = can + r_at + g * H * H;
    b[g] = (const int32_t*)(const void*)(can + b_at) + g * H;
  }
  q.state_scale = q.hidden_scale = st.layers[0].int8[0].state.scale;
  q.state_zp = q.hidden_zp = st.layers[0].int8[0].state.zero_point;
  q.cell_scale = st.layers[0].int8[0].cell_scale;
  q.weight_layout = RNNCORE_INT8_WEIGHTS_ROW_MAJOR;
  status = rnncore_int8_lstm_prepare(&q, I, H, w, r, b, bias_storage, 8 * H, &layer);
  if (status != RNNCORE_OK) return put_failure("rnncore_int8_lstm_prepare", status);
  memset(h, q.state_zp, sizeof h);
  memset(c, 0, sizeof c);
  status = rnncore_int8_lstm_run(&layer, 1, T, x, y_layer, h, c, scratch, sizeof scratch);
  if (status != RNNCORE_OK) return put_failure("rnncore_int8_lstm_run", status);
  for (i = 0; i < T * H; ++i)
    if (y_plan[i] != y_layer[i]) {
      put("FAIL: the plan's output ");
      put_uint((unsigned long)i);
      put(" differs from the int8.h layer's");
      end_line();
      return 1;
    }
  put("integer stack run on ");
  put(kernel);
  put(": equal to the int8.h layer's");
  end_line();
  return 0;
}
#endif

int main(void) {
  rnncore_plan_options options;
  rnncore_status status;
  rnncore_plan_options_init(&options);
  options.max_batch = 1;
  options.max_seq_len = T;
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
  if (run_and_compare() != 0) return 1;
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

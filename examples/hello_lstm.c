/* The user guide's C example (docs/guide.md): the same LSTM from C, with a static arena as firmware would use. */
#include <stdio.h>

#include <rnncore/rnncore.h>

static unsigned char arena[32 * 1024] __attribute__((aligned(RNNCORE_ALIGNMENT)));

int main(void) {
  rnncore_spec spec;
  rnncore_plan_options opt;
  rnncore_plan plan;
  rnncore_forward_args args;
  float canonical[16 * 3 + 16 * 4 + 2 * 16] = {0};
  float x[5 * 2 * 3], y[5 * 2 * 4], h[2 * 4];
  size_t packed_bytes, ws_bytes, ws_at;
  int i;

  rnncore_spec_init(&spec);
  spec.mode = RNNCORE_MODE_LSTM;
  spec.input_size = 3;
  spec.hidden_size = 4;
  rnncore_plan_options_init(&opt);
  opt.max_batch = 2;
  opt.max_seq_len = 5;
  if (rnncore_plan_create(&spec, &opt, &plan) != RNNCORE_OK) {
    printf("plan: %s\n", rnncore_last_error_detail());
    return 1;
  }
  packed_bytes = rnncore_plan_packed_weight_bytes(&plan);
  ws_bytes = rnncore_plan_workspace_bytes(&plan);
  ws_at = (packed_bytes + RNNCORE_ALIGNMENT - 1) / RNNCORE_ALIGNMENT * RNNCORE_ALIGNMENT;
  if (ws_at + ws_bytes > sizeof arena) {
    printf("arena too small: need %zu bytes\n", ws_at + ws_bytes);
    return 1;
  }
  /* Canonical weights: W_i..W_o [4][4x3], then R_i..R_o [4][4x4], then the biases. */
  for (i = 0; i < 16 * 3; ++i) canonical[i] = 0.1f;
  for (i = 0; i < 16 * 4; ++i) canonical[16 * 3 + i] = -0.05f;
  rnncore_plan_pack_weights(&plan, canonical, arena, packed_bytes);

  for (i = 0; i < 5 * 2 * 3; ++i) x[i] = 1.0f;
  rnncore_forward_args_init(&args);
  args.batch = 2;
  args.seq_len = 5;
  args.x = x;
  args.y = y;
  args.hy = h;
  if (rnncore_forward(&plan, arena, arena + ws_at, ws_bytes, &args) != RNNCORE_OK) {
    printf("forward: %s\n", rnncore_last_error_detail());
    return 1;
  }
  printf("ok: h[0] = %.6f (%s)\n", h[0], rnncore_plan_kernel_name(&plan));
  return 0;
}

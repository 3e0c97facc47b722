/* A float header of `rnncore export-c` for a PyTorch LSTM followed by a Linear head
 * (tests/golden/pytorch_head/<case>, included as head_float_model.h: a 2-layer LSTM with the head on
 * every step, or a bidirectional LSTM with a softmax head on each row's last step), compiled as C99
 * and run through the C API as firmware would: the stack spec planned for the header's kernel
 * family, the packed weights used in place, the sizes checked against the plan's, and the output
 * against PyTorch's (the header's sample) within float32 differences. Exit 0 on PASS. */
#include <stdio.h>
#include <string.h>

#include <rnncore/rnncore.h>

#include HEAD_FLOAT_MODEL_H /* head_float_model_<case>.h, made at build time */

#define B HEAD_FLOAT_MODEL_SAMPLE_BATCH
#define T HEAD_FLOAT_MODEL_SAMPLE_STEPS
#define ROWS (HEAD_FLOAT_MODEL_HEAD_LAST_STEP_ONLY ? B : T * B)

static unsigned char workspace[HEAD_FLOAT_MODEL_WORKSPACE_BYTES] __attribute__((aligned(RNNCORE_ALIGNMENT)));
static float y[ROWS * HEAD_FLOAT_MODEL_OUTPUT_SIZE];

int main(void) {
  rnncore_plan plan;
  rnncore_plan_options options;
  rnncore_forward_args args;
  rnncore_status status;
  float max_diff = 0, max_expected = 0;
  size_t i;
  rnncore_plan_options_init(&options);
  options.max_batch = HEAD_FLOAT_MODEL_MAX_BATCH;
  options.max_seq_len = HEAD_FLOAT_MODEL_MAX_SEQ_LEN;
  options.max_isa = HEAD_FLOAT_MODEL_MAX_ISA;
  status = rnncore_plan_create_stack(&head_float_model_stack, &options, &plan);
  if (status != RNNCORE_OK) {
    printf("FAIL: plan: %s\n", rnncore_last_error_detail());
    return 1;
  }
  if (rnncore_plan_packed_weight_bytes(&plan) != sizeof head_float_model_packed ||
      rnncore_plan_workspace_bytes(&plan) != sizeof workspace || strcmp(rnncore_plan_kernel_name(&plan), HEAD_FLOAT_MODEL_KERNEL_FAMILY) != 0) {
    printf("FAIL: the header's sizes or family differ from the plan's\n");
    return 1;
  }
  rnncore_forward_args_init(&args);
  args.batch = B;
  args.seq_len = T;
  args.x = head_float_model_sample_input;
  args.y = y;
  status = rnncore_forward(&plan, &head_float_model_packed, workspace, sizeof workspace, &args);
  if (status != RNNCORE_OK) {
    printf("FAIL: forward: %s\n", rnncore_last_error_detail());
    return 1;
  }
  for (i = 0; i < sizeof y / sizeof y[0]; ++i) {
    const float d = y[i] - head_float_model_sample_output[i], e = head_float_model_sample_output[i];
    max_diff = d > max_diff ? d : -d > max_diff ? -d : max_diff;
    max_expected = e > max_expected ? e : -e > max_expected ? -e : max_expected;
  }
  /* PyTorch computed in float64: float32-level differences, relative to the largest output. */
  printf("%s: max_abs_diff %.3g vs PyTorch (limit %.3g)\n", max_diff <= 1e-5f * max_expected ? "PASS" : "FAIL", max_diff,
         1e-5f * max_expected);
  return max_diff > 1e-5f * max_expected;
}

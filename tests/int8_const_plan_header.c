/* The const plan of `rnncore export-c --plan` (NAME_plan: NAME_stack planned by the tool's library,
 * written as a const rnncore_plan) against a plan this program makes at run time with the same
 * options: both run NAME_packed on the header's sample in one rnncore_forward, and their outputs
 * must equal each other and LiteRT's bit for bit, their sizes and kernel the same. The tool is
 * another process (its kernels at other addresses, ASLR), so this also shows that a plan value holds
 * no pointer of its own. Built per model with -DMODEL=name -DMODEL_UC=NAME -DMODEL_EMBEDDING=0|1
 * (tests/meson.build). C99. Exit 0 on PASS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnncore/rnncore.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#include STR(MODEL_HEADER)

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(MODEL, _##x)
#define U(x) CAT(MODEL_UC, _##x)

#if MODEL_EMBEDDING
#define SAMPLE M(sample_ids)
#else
#define SAMPLE M(sample_input)
#endif

/* One forward of `plan` on the header's packed weights and sample into y; 0 or 1 after a FAIL line. */
static int run(const char* what, const rnncore_plan* plan, int8_t* y) {
  rnncore_forward_args a;
  const size_t ws_bytes = rnncore_plan_workspace_bytes(plan);
  void* ws = malloc(ws_bytes + RNNCORE_ALIGNMENT);
  rnncore_status s;
  unsigned char* at = (unsigned char*)ws + (RNNCORE_ALIGNMENT - (uintptr_t)ws % RNNCORE_ALIGNMENT) % RNNCORE_ALIGNMENT;
  rnncore_forward_args_init(&a);
  a.batch = U(SAMPLE_BATCH);
  a.seq_len = U(SAMPLE_STEPS);
  a.layout = RNNCORE_BATCH_MAJOR;
  a.x = SAMPLE;
  a.y = y;
  s = rnncore_forward(plan, M(packed), at, ws_bytes, &a);
  free(ws);
  if (s != RNNCORE_OK) printf("FAIL: %s: rnncore_forward: %s\n", what, rnncore_last_error_detail());
  return s != RNNCORE_OK;
}

int main(void) {
#if !U(HAS_PLAN)
  printf("FAIL: the header's plan is not for this build (RNNCORE_PLAN_BYTES %d)\n", (int)RNNCORE_PLAN_BYTES);
  return 1;
#else
  static int8_t y_const[sizeof M(sample_output)], y_run[sizeof M(sample_output)];
  rnncore_plan_options o;
  rnncore_plan made;
  size_t i, differ = 0, differ_run = 0;
  rnncore_plan_options_init(&o);
  o.max_batch = U(SAMPLE_BATCH);
  o.max_seq_len = U(SAMPLE_STEPS);
  o.max_isa = RNNCORE_ISA_NONE; /* the header's plan: the portable kernels */
  o.int8_weights = RNNCORE_INT8_WEIGHTS_PACKED_ROW_MAJOR;
  if (rnncore_plan_create_stack(&M(stack), &o, &made) != RNNCORE_OK) {
    printf("FAIL: rnncore_plan_create_stack: %s\n", rnncore_last_error_detail());
    return 1;
  }
  if (rnncore_plan_packed_weight_bytes(&M(plan)) != sizeof M(packed) ||
      rnncore_plan_workspace_bytes(&M(plan)) != rnncore_plan_workspace_bytes(&made) ||
      strcmp(rnncore_plan_kernel_name(&M(plan)), rnncore_plan_kernel_name(&made)) != 0) {
    printf("FAIL: the const plan (%zu packed, %zu workspace, %s) is not the made one (%zu, %zu, %s)\n",
           rnncore_plan_packed_weight_bytes(&M(plan)), rnncore_plan_workspace_bytes(&M(plan)),
           rnncore_plan_kernel_name(&M(plan)), rnncore_plan_packed_weight_bytes(&made),
           rnncore_plan_workspace_bytes(&made), rnncore_plan_kernel_name(&made));
    return 1;
  }
  if (run("the const plan", &M(plan), y_const) || run("the made plan", &made, y_run)) return 1;
  for (i = 0; i < sizeof y_const; ++i) {
    differ += y_const[i] != M(sample_output)[i];
    differ_run += y_const[i] != y_run[i];
  }
  printf("%s: const plan: %zu of %zu outputs differ from LiteRT's, %zu from the made plan's\n",
         differ == 0 && differ_run == 0 ? "PASS" : "FAIL", differ, sizeof y_const, differ_run);
  return differ != 0 || differ_run != 0;
#endif
}

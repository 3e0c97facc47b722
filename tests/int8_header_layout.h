/* The header-chain tests (tests/int8_*_header.c) run each model's header three times (tests/meson.build):
 * as `rnncore export-c` writes it by default (row-major weights), with -DRNNCORE_TEST_INTERLEAVED
 * as `rnncore export-c --interleave` writes it, and with -DRNNCORE_TEST_INTERLEAVED_I16 as
 * `--interleave-i16` writes it (int16 panels), with the same expected output. So that the second
 * cannot pass on row-major weights, each prepared LSTM must run its layout's kernel family.
 * run_packed runs the header's one-call arrays (NAME_stack, NAME_packed) through rnncore.h with no
 * pack step, planned for the header's layout, against the same expected output; with
 * -DRNNCORE_TEST_TOKEN_TABLE (a header of `--token-table`) planned with int8_token_table. */
#ifndef RNNCORE_TESTS_INT8_HEADER_LAYOUT_H
#define RNNCORE_TESTS_INT8_HEADER_LAYOUT_H

#include <stdio.h>
#include <string.h>

#include <stdint.h>
#include <stdlib.h>

#include <rnncore/int8.h>
#ifdef RNNCORE_TEST_ONE_CALL
#include <rnncore/rnncore.h>
#endif

#if defined(RNNCORE_TEST_INTERLEAVED_I16)
#define RNNCORE_TEST_PANELS 2 /* i16_dot_panels_<tile>__<isa> */
#elif defined(RNNCORE_TEST_INTERLEAVED)
#define RNNCORE_TEST_PANELS 1 /* i8_dot_panels_<tile>__<isa> */
#else
#define RNNCORE_TEST_PANELS 0 /* i8_dot_<tile>__<isa> */
#endif

/* 1 (after a FAIL line) when `lstm` does not run a kernel of the header's weight layout. */
static int wrong_layout(const char* what, const rnncore_int8_lstm* lstm) {
  static const char* const expected[3] = {"i8_dot_<tile>__<isa>", "i8_dot_panels_*", "i16_dot_panels_*"};
  const char* kernel = rnncore_int8_lstm_kernel_name(lstm);
  const int family = strncmp(kernel, "i16_dot_panels_", strlen("i16_dot_panels_")) == 0 ? 2
                     : strncmp(kernel, "i8_dot_panels_", strlen("i8_dot_panels_")) == 0 ? 1
                     : strncmp(kernel, "i8_dot_", strlen("i8_dot_")) == 0              ? 0
                                                                                      : -1;
  if (family == RNNCORE_TEST_PANELS) return 0;
  printf("FAIL: %s runs the kernel '%s', not one of %s\n", what, kernel, expected[RNNCORE_TEST_PANELS]);
  return 1;
}

/* 1 (after a FAIL line with the library's detail) unless s is RNNCORE_OK. */
static inline int check(const char* what, rnncore_status s) {
  if (s != RNNCORE_OK) printf("FAIL: %s: %s\n", what, rnncore_last_error_detail());
  return s != RNNCORE_OK;
}

#ifdef RNNCORE_TEST_ONE_CALL /* the header has NAME_stack and NAME_packed */
/* 1 (after a FAIL line) unless the stack planned for the header's layout runs on `packed` (the
 * header's const array, sizeof `packed_bytes`) in one rnncore_forward, batch-major x [B, T, ...]
 * (token ids with an embedding), giving y equal to `expected` [n]. */
static int run_packed(const rnncore_stack_spec* stack, const void* packed, size_t packed_bytes, const void* x,
                      int32_t batch, int32_t steps, const int8_t* expected, size_t n) {
  rnncore_plan_options o;
  rnncore_plan plan;
  rnncore_forward_args a;
  unsigned char *ws_block, *ws;
  int8_t* y;
  size_t i, differ = 0, ws_bytes;
  rnncore_status s;
  rnncore_plan_options_init(&o);
  o.max_batch = batch;
  o.max_seq_len = steps;
  o.int8_weights = RNNCORE_TEST_PANELS == 2   ? RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED_I16
                   : RNNCORE_TEST_PANELS == 1 ? RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED
                                              : RNNCORE_INT8_WEIGHTS_PACKED_ROW_MAJOR;
#ifdef RNNCORE_TEST_TOKEN_TABLE
  o.int8_token_table = 1; /* a header of export-c --token-table */
#endif
  if ((s = rnncore_plan_create_stack(stack, &o, &plan)) != RNNCORE_OK) {
    printf("FAIL: rnncore_plan_create_stack: %s\n", rnncore_last_error_detail());
    return 1;
  }
  if (rnncore_plan_packed_weight_bytes(&plan) != packed_bytes) {
    printf("FAIL: the plan packs %zu bytes, the header's array has %zu\n", rnncore_plan_packed_weight_bytes(&plan),
           packed_bytes);
    return 1;
  }
  ws_bytes = rnncore_plan_workspace_bytes(&plan);
  ws_block = (unsigned char*)malloc(ws_bytes + RNNCORE_ALIGNMENT);
  y = (int8_t*)malloc(n);
  if (ws_block == NULL || y == NULL) return 1;
  ws = ws_block + (RNNCORE_ALIGNMENT - (uintptr_t)ws_block % RNNCORE_ALIGNMENT) % RNNCORE_ALIGNMENT;
  rnncore_forward_args_init(&a);
  a.batch = batch;
  a.seq_len = steps;
  a.layout = RNNCORE_BATCH_MAJOR;
  a.x = x;
  a.y = y;
  s = rnncore_forward(&plan, packed, ws, ws_bytes, &a);
  if (s != RNNCORE_OK) printf("FAIL: rnncore_forward on the packed array: %s\n", rnncore_last_error_detail());
  for (i = 0; s == RNNCORE_OK && i < n; ++i) differ += y[i] != expected[i];
  if (s == RNNCORE_OK)
    printf("%s: one call on the const packed array (%s): %zu of %zu outputs differ\n", differ == 0 ? "PASS" : "FAIL",
           rnncore_plan_kernel_name(&plan), differ, n);
  free(ws_block);
  free(y);
  return s != RNNCORE_OK || differ != 0;
}
#endif

#endif /* RNNCORE_TESTS_INT8_HEADER_LAYOUT_H */

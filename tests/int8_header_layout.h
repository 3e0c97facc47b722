/* The header-chain tests (tests/int8_*_header.c) run each model's header twice (tests/meson.build):
 * as `rnncore export-c` writes it by default (row-major weights), and with -DRNNCORE_TEST_INTERLEAVED
 * as `rnncore export-c --interleave` writes it, with the same expected output. So that the second
 * cannot pass on row-major weights, each prepared LSTM must run its layout's kernel family. */
#ifndef RNNCORE_TESTS_INT8_HEADER_LAYOUT_H
#define RNNCORE_TESTS_INT8_HEADER_LAYOUT_H

#include <stdio.h>
#include <string.h>

#include <rnncore/int8.h>

#ifdef RNNCORE_TEST_INTERLEAVED
#define RNNCORE_TEST_PANELS 1 /* i8_dot_panels_<tile>__<isa> */
#else
#define RNNCORE_TEST_PANELS 0 /* i8_dot_<tile>__<isa> */
#endif

/* 1 (after a FAIL line) when `lstm` does not run a kernel of the header's weight layout. */
static int wrong_layout(const char* what, const rnncore_int8_lstm* lstm) {
  const char* kernel = rnncore_int8_lstm_kernel_name(lstm);
  const int panels = strncmp(kernel, "i8_dot_panels_", strlen("i8_dot_panels_")) == 0;
  if (strncmp(kernel, "i8_dot_", strlen("i8_dot_")) == 0 && panels == RNNCORE_TEST_PANELS) return 0;
  printf("FAIL: %s runs the kernel '%s', not one of %s\n", what, kernel,
         RNNCORE_TEST_PANELS ? "i8_dot_panels_*" : "i8_dot_<tile>__<isa>");
  return 1;
}

#endif /* RNNCORE_TESTS_INT8_HEADER_LAYOUT_H */

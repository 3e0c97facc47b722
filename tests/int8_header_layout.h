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
#define RNNCORE_TEST_KERNELS "i8_dot_panels_"
#else
#define RNNCORE_TEST_KERNELS "i8_dot_rows_"
#endif

/* 1 (after a FAIL line) when `lstm` does not run a kernel of the header's weight layout. */
static int wrong_layout(const char* what, const rnncore_int8_lstm* lstm) {
  const char* kernel = rnncore_int8_lstm_kernel_name(lstm);
  if (strncmp(kernel, RNNCORE_TEST_KERNELS, strlen(RNNCORE_TEST_KERNELS)) == 0) return 0;
  printf("FAIL: %s runs the kernel '%s', not one of " RNNCORE_TEST_KERNELS "*\n", what, kernel);
  return 1;
}

#endif /* RNNCORE_TESTS_INT8_HEADER_LAYOUT_H */

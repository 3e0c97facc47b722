/* The examples' console (console.h): a line buffer written through board_write. */
#include "console.h"

#include <stddef.h>

#include "board.h"

/* The line buffer's bytes (a longer line goes out in parts): 160 unless the build says less
 * (bench/mcu_models/run.sh: 16, the buffer being the images' RAM that a board without a console
 * does not have). */
#ifndef CONSOLE_LINE_BYTES
#define CONSOLE_LINE_BYTES 160
#endif
static char line[CONSOLE_LINE_BYTES];
static size_t line_len;

static void write_line(void) {
  line[line_len] = '\0';
  board_write(line);
  line_len = 0;
}

/* (not inlined: at -O3 each caller's copy of the loop made the console 470 bytes larger) */
__attribute__((noinline)) void put(const char* s) {
  for (; *s != '\0'; ++s) {
    if (line_len + 2 >= sizeof line) write_line(); /* (2: end_line's newline and the terminator) */
    line[line_len++] = *s;
  }
}

void put_uint_w(unsigned long v, int width) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (; width > n; --width) put(" ");
  while (n > 0) {
    const char d[2] = {digits[--n], '\0'};
    put(d);
  }
}

void put_uint(unsigned long v) { put_uint_w(v, 0); }

void put_sci(float v, int digits) {
  unsigned long scale = 1, mantissa;
  int exponent = 0, i;
  if (v != v) {
    put("nan");
    return;
  }
  if (v < 0) {
    put("-");
    v = -v;
  }
  for (i = 1; i < digits; ++i) scale *= 10;
  if (v == 0) {
    mantissa = 0;
  } else {
    while (v >= 10.0f) {
      v /= 10.0f;
      ++exponent;
    }
    while (v < 1.0f) {
      v *= 10.0f;
      --exponent;
    }
    mantissa = (unsigned long)(v * (float)scale + 0.5f);
    if (mantissa >= 10 * scale) { /* rounding carried into a new digit */
      mantissa /= 10;
      ++exponent;
    }
  }
  put_uint(mantissa / scale);
  if (digits > 1) {
    put(".");
    for (scale /= 10; scale > 0; scale /= 10) put_uint(mantissa / scale % 10);
  }
  put(exponent < 0 ? "e-" : "e+");
  if (exponent < 0) exponent = -exponent;
  if (exponent < 10) put("0");
  put_uint((unsigned long)exponent);
}

void end_line(void) {
  line[line_len++] = '\n';
  write_line();
}

int put_failure(const char* what, rnncore_status status) {
  put("FAIL: ");
  put(what);
  put(": ");
  put(rnncore_status_message(status));
  put(" (");
  put(rnncore_last_error_detail());
  put(")");
  end_line();
  return 1;
}

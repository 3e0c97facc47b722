/* A line-buffered text console over board_write, without printf (newlib's float printing would pull
 * in the heap). Shared by the firmware and training examples. */
#ifndef RNNCORE_EXAMPLE_CONSOLE_H
#define RNNCORE_EXAMPLE_CONSOLE_H

#include "rnncore/rnncore.h"

/** Appends text to the current line (written out in parts when longer than the buffer). */
void put(const char* s);
/** Appends v in decimal, right-aligned in `width` characters (0: no padding). */
void put_uint_w(unsigned long v, int width);
/** Appends v in decimal. */
void put_uint(unsigned long v);
/** Appends v in scientific notation with `digits` (1..6) significant digits, e.g. 4.47e-08. */
void put_sci(float v, int digits);
/** Ends the line and writes it to the console. */
void end_line(void);
/** Writes "FAIL: what: <status message> (<detail>)" and returns 1 (the program's exit status). */
int put_failure(const char* what, rnncore_status status);

#endif /* RNNCORE_EXAMPLE_CONSOLE_H */

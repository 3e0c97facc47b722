/* The firmware example's console on a host: stdio. */
#include <stdio.h>
#include <stdlib.h>

#include "board.h"

void board_write(const char* text) { fputs(text, stdout); }

void board_exit(int status) {
  fflush(stdout);
  exit(status);
}

/* A hosted OS grows the stack on demand: nothing to measure. */
void board_stack_mark(void) {}
unsigned long board_stack_high_water(void) { return 0; }

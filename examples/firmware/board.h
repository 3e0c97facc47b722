/* What the firmware example needs from its board: a text console and a way to stop.
 * board_host.c implements it with stdio; mps2/semihosting.c with Arm semihosting (the debugger or
 * the emulator prints and exits). On your board, route board_write to a UART. */
#ifndef RNNCORE_EXAMPLE_BOARD_H
#define RNNCORE_EXAMPLE_BOARD_H

/** Writes a NUL-terminated string to the console. */
void board_write(const char* text);

/** Ends the program with `status` (0 success); on a board without a host, halts. */
void board_exit(int status) __attribute__((noreturn));

/** Starts a stack measurement: marks the stack below the caller's frame as unused. */
void board_stack_mark(void);

/** The deepest the stack has been since the last board_stack_mark(), in bytes from its top, or 0
 * where the board cannot tell. */
unsigned long board_stack_high_water(void);

#endif /* RNNCORE_EXAMPLE_BOARD_H */

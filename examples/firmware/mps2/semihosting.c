/* The firmware example's console on the MPS2 images: Arm semihosting. A `bkpt 0xAB` with an
 * operation in r0 and its argument in r1 asks the attached debugger, or QEMU with -semihosting,
 * to do the operation for the target. Without a debugger the breakpoint faults: on a real board
 * route board_write to a UART instead. */
#include "../board.h"

enum {
  kSysWrite0 = 0x04,                    /* write a NUL-terminated string to the console */
  kSysExit = 0x18,                      /* stop; r1 = reason code */
  kStoppedApplicationExit = 0x20026,    /* reason: normal exit (QEMU exits with status 0) */
  kStoppedRunTimeErrorUnknown = 0x20023 /* reason: an error (QEMU exits with status 1) */
};

static int semihosting_call(int operation, const void* argument) {
  register int r0 __asm__("r0") = operation;
  register const void* r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void board_write(const char* text) { semihosting_call(kSysWrite0, text); }

void board_exit(int status) {
  /* The 32-bit SYS_EXIT passes the reason itself in r1, not a pointer. */
  semihosting_call(kSysExit, (const void*)(status == 0 ? kStoppedApplicationExit : kStoppedRunTimeErrorUnknown));
  for (;;) {
  }
}

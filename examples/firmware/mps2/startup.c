/* Start-up code of the MPS2 Cortex-M images: the vector table, and a reset handler that turns on
 * the FPU, initialises .data and .bss, runs constructors and calls main(); also the stack
 * high-water measurement of board.h. The symbols come from mps2.ld. Nothing here is specific to
 * rnncore: a board's own start-up code does the same. */
#include <stdint.h>

#include "../board.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);

int main(void);
void reset_handler(void) __attribute__((noreturn));

/* Unused stack is painted with this word; the high-water mark is where the paint ends. */
#define STACK_PAINT 0x5AC0FFEEu

/* Not inlined: its own frame must lie above the words it paints. */
__attribute__((noinline)) void board_stack_mark(void) {
  uint32_t* sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (uint32_t* word = __stack_bottom; word < sp - 16; ++word) *word = STACK_PAINT;
}

unsigned long board_stack_high_water(void) {
  const uint32_t* word = __stack_bottom;
  while (word < __stack_top && *word == STACK_PAINT) ++word;
  return (unsigned long)((const char*)__stack_top - (const char*)word);
}

/* A fault or an interrupt nobody enabled: report it instead of hanging. */
static void unexpected_exception(void) {
  board_write("FAIL: unexpected exception (fault)\n");
  board_exit(1);
}

typedef void (*vector)(void);

/* The first 16 entries of the Armv7-M vector table: initial stack pointer, then the handlers of
 * the system exceptions. This build enables no interrupts, so no device vectors follow. */
__attribute__((section(".vectors"), used)) static const vector vectors[16] = {
    (vector)__stack_top,   /* initial main stack pointer */
    reset_handler,
    unexpected_exception,  /* NMI */
    unexpected_exception,  /* HardFault */
    unexpected_exception,  /* MemManage */
    unexpected_exception,  /* BusFault */
    unexpected_exception,  /* UsageFault */
    0, 0, 0, 0,            /* reserved */
    unexpected_exception,  /* SVCall */
    unexpected_exception,  /* DebugMonitor */
    0,                     /* reserved */
    unexpected_exception,  /* PendSV */
    unexpected_exception,  /* SysTick */
};

void reset_handler(void) {
  /* CPACR: full access to coprocessors 10 and 11 (the FPU), before any floating-point instruction. */
  *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");

  const uint32_t* from = __data_load;
  for (uint32_t* to = __data_start; to < __data_end;) *to++ = *from++;
  for (uint32_t* to = __bss_start; to < __bss_end;) *to++ = 0;
  for (void (**init)(void) = __init_array_start; init < __init_array_end; ++init) (*init)();
  board_stack_mark();

  board_exit(main());
}

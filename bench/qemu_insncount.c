/* A QEMU TCG plugin that counts guest instructions: one inline add of the block's instruction
 * count per executed translation block, written to out=FILE at exit. For qemu-user and
 * qemu-system alike (plugin API v1: QEMU 6.0-8.x; Debian's qemu ships no plugin header, so the
 * few declarations used are written here). Built by bench/arm_instruction_counts.sh and
 * bench/cortex_m_int8_counts.sh:  gcc -O2 -shared -fPIC -o libinsncount.so qemu_insncount.c
 *
 * With a second argument mix=FILE (bench/mcu_models/count.sh; Thumb-2 guests) it also writes the
 * instruction mix: the executed instructions by class (single loads, single stores, multiple
 * loads and stores with their registers, branches, divisions, other) from each instruction's
 * disassembly, classified once per translation and added per executed block as the count is.
 * With blocks=FILE as well (after mix=FILE) it writes each translated block's guest address and
 * the instructions it executed, "ADDR COUNT" a line in hex and decimal (a block translated again
 * has a line per translation), which bench/mcu_models/functions.py sums per function of the ELF. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef uint64_t qemu_plugin_id_t;  /* the subset of QEMU's qemu-plugin.h (API v1) used here */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb*));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb*, int /* QEMU_PLUGIN_INLINE_ADD_U64 */, void*, uint64_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb*);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb*, size_t);
char* qemu_plugin_insn_disas(const struct qemu_plugin_insn*);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void*), void*);
static uint64_t insns;
static char out[4096], mix_out[4096], blocks_out[4096];
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb*);
struct block {  /* blocks=FILE: one per translation, kept in a list */
  uint64_t addr, insns;
  struct block* next;
};
static struct block* blocks;

/* The classes of the mix; multi_regs counts the registers of LDM/STM/PUSH/POP/VLDM/VSTM/VPUSH/VPOP. */
enum { LOAD, STORE, MULTI, MULTI_REGS, POP_PC, BRANCH, DIV, VDIV, CLASSES };
static const char* const class_names[CLASSES] = {"load", "store", "multi", "multi_regs", "pop_pc", "branch", "div", "vdiv"};
static uint64_t mix[CLASSES];

static int starts(const char* s, const char* p) { return strncmp(s, p, strlen(p)) == 0; }

static void classify(const char* d, uint64_t n[CLASSES]) {
  char m[16];
  size_t k = 0;
  while (*d == ' ' || *d == '\t') ++d;
  while (d[k] && d[k] != ' ' && d[k] != '\t' && k + 1 < sizeof m) m[k] = d[k], ++k;
  m[k] = 0;
  if (starts(m, "ldm") || starts(m, "stm") || starts(m, "push") || starts(m, "pop") || starts(m, "vldm") ||
      starts(m, "vstm") || starts(m, "vpush") || starts(m, "vpop")) {
    const char* r = strchr(d, '{');
    uint64_t regs = 1;
    for (; r && *r && *r != '}'; ++r) regs += *r == ',';
    ++n[MULTI];
    n[MULTI_REGS] += regs;
    if (strstr(d, "pc}")) ++n[POP_PC];
  } else if (starts(m, "ldr") || starts(m, "vldr") || starts(m, "ldrex")) {
    ++n[LOAD];
    if (strstr(d, "pc,") == d + k + 1 || strstr(d, " pc,")) ++n[BRANCH];
  } else if (starts(m, "str") || starts(m, "vstr")) {
    ++n[STORE];
  } else if (m[0] == 'b' && (m[1] == 0 || m[1] == '.' || starts(m, "bl") || starts(m, "bx") ||
                             strlen(m) <= 4 + (strchr(m, '.') ? 2 : 0))) {
    /* b, b<cond>, bl, blx, bx (bic, bfi, bfc, bkpt are not branches) */
    if (!starts(m, "bic") && !starts(m, "bfi") && !starts(m, "bfc") && !starts(m, "bkpt")) ++n[BRANCH];
  } else if (starts(m, "cbz") || starts(m, "cbnz") || starts(m, "tbb") || starts(m, "tbh")) {
    ++n[BRANCH];
  } else if (starts(m, "sdiv") || starts(m, "udiv")) {
    ++n[DIV];
  } else if (starts(m, "vdiv") || starts(m, "vsqrt")) {
    ++n[VDIV];
  }
}

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  size_t n_insns = qemu_plugin_tb_n_insns(tb), i;
  int c;
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &insns, n_insns);
  if (blocks_out[0]) {
    struct block* b = calloc(1, sizeof *b);
    if (b) {
      b->addr = qemu_plugin_tb_vaddr(tb), b->next = blocks, blocks = b;
      qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &b->insns, n_insns);
    }
  }
  if (!mix_out[0]) return;
  uint64_t n[CLASSES] = {0};
  for (i = 0; i < n_insns; ++i) {
    char* d = qemu_plugin_insn_disas(qemu_plugin_tb_get_insn(tb, i));
    if (d) classify(d, n), free(d);
  }
  for (c = 0; c < CLASSES; ++c)
    if (n[c]) qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &mix[c], n[c]);
}
static void on_exit_(qemu_plugin_id_t id, void* p) {
  int c;
  (void)id, (void)p;
  FILE* f = fopen(out, "w");
  if (f) fprintf(f, "%llu\n", (unsigned long long)insns), fclose(f);
  if (mix_out[0] && (f = fopen(mix_out, "w"))) {
    fprintf(f, "insns=%llu", (unsigned long long)insns);
    for (c = 0; c < CLASSES; ++c) fprintf(f, " %s=%llu", class_names[c], (unsigned long long)mix[c]);
    fprintf(f, "\n");
    fclose(f);
  }
  if (blocks_out[0] && (f = fopen(blocks_out, "w"))) {
    const struct block* b;
    for (b = blocks; b; b = b->next)
      if (b->insns) fprintf(f, "%llx %llu\n", (unsigned long long)b->addr, (unsigned long long)b->insns);
    fclose(f);
  }
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const void* info, int argc, char** argv) {
  (void)info;
  if (argc < 1 || argc > 3 || strncmp(argv[0], "out=", 4) != 0) return 1;
  snprintf(out, sizeof out, "%s", argv[0] + 4);
  if (argc >= 2) {
    if (strncmp(argv[1], "mix=", 4) != 0) return 1;
    snprintf(mix_out, sizeof mix_out, "%s", argv[1] + 4);
  }
  if (argc == 3) {
    if (strncmp(argv[2], "blocks=", 7) != 0) return 1;
    snprintf(blocks_out, sizeof blocks_out, "%s", argv[2] + 7);
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
  qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
  return 0;
}

/* A QEMU TCG plugin that counts guest instructions: one inline add of the block's instruction
 * count per executed translation block, written to out=FILE at exit. For qemu-user and
 * qemu-system alike (plugin API v1: QEMU 6.0-8.x; Debian's qemu ships no plugin header, so the
 * few declarations used are written here). Built by bench/arm_instruction_counts.sh and
 * bench/cortex_m_int8_counts.sh:  gcc -O2 -shared -fPIC -o libinsncount.so qemu_insncount.c */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef uint64_t qemu_plugin_id_t;  /* the subset of QEMU's qemu-plugin.h (API v1) used here */
struct qemu_plugin_tb;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb*));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb*, int /* QEMU_PLUGIN_INLINE_ADD_U64 */, void*, uint64_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb*);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void*), void*);
static uint64_t insns;
static char out[4096];
static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &insns, qemu_plugin_tb_n_insns(tb));
}
static void on_exit_(qemu_plugin_id_t id, void* p) {
  (void)id, (void)p;
  FILE* f = fopen(out, "w");
  if (f) fprintf(f, "%llu\n", (unsigned long long)insns), fclose(f);
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const void* info, int argc, char** argv) {
  (void)info;
  if (argc != 1 || strncmp(argv[0], "out=", 4) != 0) return 1;
  snprintf(out, sizeof out, "%s", argv[0] + 4);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
  qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
  return 0;
}

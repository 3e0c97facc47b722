// The integer LSTM's matrix-vector kernel for ARM's 32-bit DSP extension (ARMv7E-M: Cortex-M4,
// M7, M33 with DSP; also ARMv6 / ARMv7-A in A32 and T32): dual 16-bit multiply-accumulates,
// SMLAD, on int8 values widened two at a time by SXTB16. See src/internal/int8_kernels.hpp.
// Built where the compiler defines __ARM_FEATURE_SIMD32 as well as __ARM_FEATURE_DSP: ARMv5TE
// has the DSP multiplies but not SXTB16 / SMLAD (<arm_acle.h> declares them under SIMD32).
//
// One 32-bit word holds four int8 values b0 b1 b2 b3 (little-endian). SXTB16(x) sign-extends
// bytes 0 and 2 into the two int16 halves, SXTB16(ROR(x, 8)) bytes 1 and 3, so
//   SMLAD(SXTB16(w), SXTB16(v), SMLAD(SXTB16(ROR(w,8)), SXTB16(ROR(v,8)), acc))
//     = acc + w0·v0 + w2·v2 + w1·v1 + w3·v3,
// four multiply-accumulates in 2 SMLADs and (for the weights) 3 more instructions: a load and two
// SXTB16 (the rotate is part of SXTB16's encoding). The vector's word is widened once and used for
// 4 rows, and the loop takes 16 columns per iteration: (4·3 + 16·5 + 2) / 64 = 1.47 instructions
// per multiply-accumulate (rows4_groups).
//
// Exactness (equal to i8_dot_1x1__scalar's wrapping int32 sums): SMLAD computes
// Ra + Rn.lo·Rm.lo + Rn.hi·Rm.hi exactly (as a wider integer) and writes its low 32 bits to Rd;
// on signed overflow it only sets the sticky Q flag, which nothing here reads (ARM ARM, SMLAD).
// So each SMLAD is acc + p1 + p2 modulo 2^32. The scalar kernel adds the same products (each an
// exact int8·int8 value, |p| <= 2^14, and SXTB16 widens exactly) to the same bias modulo 2^32.
// Addition modulo 2^32 is associative and commutative (it is the ring Z/2^32), so any grouping
// and order of the same terms gives the same residue, which both kernels then read as the same
// two's-complement int32. Hence out[j] is bit-identical, including sums that wrap (a bias near
// the int32 limits).
#include "src/internal/int8_kernels.hpp"

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)

#include <arm_acle.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rnncore {
namespace q8 {
namespace {

// Four int8 at any alignment: ARMv6 and later load unaligned words with LDR (ARMv7-M faults only
// with CCR.UNALIGN_TRP set, which no toolchain default sets; GCC itself emits such LDRs for
// memcpy under its default -munaligned-access). The assembly below relies on the same.
inline std::uint32_t load4(const std::int8_t* p) {
  std::uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// The int16 pairs (b0, b2) and (b1, b3) of a word of four int8.
inline int16x2_t even_pairs(std::uint32_t x) { return __sxtb16(static_cast<int8x4_t>(x)); }
// SXTB16 with its own ROR #8, one instruction: ACLE has no rotate operand for __sxtb16, and GCC 12
// keeps __sxtb16(__ror(x, 8)) as two (a MOV with ROR, then SXTB16).
inline int16x2_t odd_pairs(std::uint32_t x) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}

// acc + the dot product of four int8 weights with the widened vector word (ve, vo).
inline std::int32_t mac4(std::int32_t acc, std::uint32_t w, int16x2_t ve, int16x2_t vo) {
  return __smlad(odd_pairs(w), vo, __smlad(even_pairs(w), ve, acc));
}

// The last k % 4 columns, one product at a time; wrapping as the scalar kernel does.
inline std::int32_t tail(std::int32_t acc, const std::int8_t* w, const std::int8_t* v, int n) {
  std::uint32_t a = static_cast<std::uint32_t>(acc);
  for (int k = 0; k < n; ++k) a += static_cast<std::uint32_t>(static_cast<std::int32_t>(w[k]) * v[k]);
  return static_cast<std::int32_t>(a);
}

// The hot loop in assembly, so that the instruction count is what the design says on every
// compiler and optimization level (GCC 12 spills the sums of the same loop in C at -Os and -O2:
// 4 sums, 4 row pointers, the vector pointer, a count and 4 temporaries exceed the 13 free
// registers). Rows 1 and 3 are read at a register offset K from rows 0 and 2, which saves two
// pointers: 13 registers in all. One word of 4 columns: the vector's word (load, two SXTB16), then
// per row a weight word (load, two SXTB16) and two SMLADs: 3 + 4 · 5 = 23 instructions for 16
// multiply-accumulates. The column loop runs 4 words per iteration plus SUBS and BNE: 94
// instructions for 64 MACs, 1.47 per MAC.
#if defined(__OPTIMIZE__)
#define RNNCORE_DSP_ROW(ACC, LOAD)          \
  LOAD "\n\t"                              \
  "sxtb16 %[u], %[t]\n\t"                   \
  "sxtb16 %[t], %[t], ror #8\n\t"           \
  "smlad " ACC ", %[u], %[ve], " ACC "\n\t" \
  "smlad " ACC ", %[t], %[vo], " ACC "\n\t"
#define RNNCORE_DSP_WORD                                \
  "ldr %[vo], [%[vp]], #4\n\t"                         \
  "sxtb16 %[ve], %[vo]\n\t"                            \
  "sxtb16 %[vo], %[vo], ror #8\n\t"                    \
  RNNCORE_DSP_ROW("%[a1]", "ldr %[t], [%[w0], %[K]]")   \
  RNNCORE_DSP_ROW("%[a0]", "ldr %[t], [%[w0]], #4")     \
  RNNCORE_DSP_ROW("%[a3]", "ldr %[t], [%[w2], %[K]]")   \
  RNNCORE_DSP_ROW("%[a2]", "ldr %[t], [%[w2]], #4")
// The loop over groups of 4 rows in assembly too: in C its set-up per group (reloading the
// counts, pointers and biases it spilled) cost about 60 instructions, a third of the kernel at
// K = 32. Every register holds the column loop, so the group loop keeps its state in memory
// (stack operands) and the sums live in r0..r3 for LDM / STM: about 20 instructions a group.
struct GroupWalk {
  const std::int32_t* bias;  // the next group's 4 biases
  std::int32_t* out;         // and outputs
  const std::int8_t* v;
  int k16, kw;               // 16-column iterations and single words left (K & ~3 columns in all)
  std::int32_t skip;         // from a group's row 0 after its columns to the next group's: 4K - (K & ~3)
  int groups;                // groups left, >= 1
};

// groups >= 1 groups of 4 rows, columns [0, K & ~3): out[j] = bias[j] + the rows' products.
// The walk is this function's local, so that its fields are addressed from sp (no register).
void rows4_groups(const std::int8_t* w, std::int32_t K, GroupWalk g) {
  register std::int32_t a0 __asm__("r0");
  register std::int32_t a1 __asm__("r1");
  register std::int32_t a2 __asm__("r2");
  register std::int32_t a3 __asm__("r3");
  const std::int8_t* w0 = w;
  const std::int8_t* w2 = w + 2 * K;
  const std::int8_t* vp;
  std::uint32_t ve, vo, t, u;
  int n;
  __asm__(
      "0:\n\t"
      "ldr %[t], %[bias]\n\t"
      "ldmia %[t]!, {r0, r1, r2, r3}\n\t"
      "str %[t], %[bias]\n\t"
      "ldr %[vp], %[v]\n\t"
      "ldr %[n], %[k16]\n\t"
      "cmp %[n], #0\n\t"
      "beq 2f\n\t"
      "1:\n\t" RNNCORE_DSP_WORD RNNCORE_DSP_WORD RNNCORE_DSP_WORD RNNCORE_DSP_WORD
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      "2:\n\t"
      "ldr %[n], %[kw]\n\t"
      "cmp %[n], #0\n\t"
      "beq 4f\n\t"
      "3:\n\t" RNNCORE_DSP_WORD
      "subs %[n], %[n], #1\n\t"
      "bne 3b\n\t"
      "4:\n\t"
      "ldr %[t], %[out]\n\t"
      "stmia %[t]!, {r0, r1, r2, r3}\n\t"
      "str %[t], %[out]\n\t"
      "ldr %[t], %[skip]\n\t"
      "add %[w0], %[w0], %[t]\n\t"
      "add %[w2], %[w2], %[t]\n\t"
      "ldr %[t], %[groups]\n\t"
      "subs %[t], %[t], #1\n\t"
      "str %[t], %[groups]\n\t"
      "bne 0b\n\t"
      // the temporaries and sums write-only here (the asm sets them first): a "+" operand counts
      // twice against GCC's limit of 30
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [w0] "+r"(w0), [w2] "+r"(w2),
        [vp] "=&r"(vp), [n] "=&r"(n), [ve] "=&r"(ve), [vo] "=&r"(vo), [t] "=&r"(t), [u] "=&r"(u),
        [bias] "+m"(g.bias), [out] "+m"(g.out), [groups] "+m"(g.groups)
      : [K] "r"(K), [v] "m"(g.v), [k16] "m"(g.k16), [kw] "m"(g.kw), [skip] "m"(g.skip)
      : "cc", "memory");
}
#undef RNNCORE_DSP_WORD
#undef RNNCORE_DSP_ROW
#else
// Unoptimized builds keep a frame pointer (r7), which leaves 12 registers: the same in C.
struct GroupWalk {
  const std::int32_t* bias;
  std::int32_t* out;
  const std::int8_t* v;
  int k16, kw;
  std::int32_t skip;
  int groups;
};
void rows4_groups(const std::int8_t* w, std::int32_t K, GroupWalk g) {
  const int words = 4 * g.k16 + g.kw;
  for (; g.groups > 0; --g.groups, g.bias += 4, g.out += 4, w += 4 * K) {
    std::int32_t a0 = g.bias[0], a1 = g.bias[1], a2 = g.bias[2], a3 = g.bias[3];
    for (int i = 0; i < words; ++i) {
      const std::uint32_t x = load4(g.v + 4 * i);
      const int16x2_t ve = even_pairs(x), vo = odd_pairs(x);
      a0 = mac4(a0, load4(w + 4 * i), ve, vo);
      a1 = mac4(a1, load4(w + K + 4 * i), ve, vo);
      a2 = mac4(a2, load4(w + 2 * K + 4 * i), ve, vo);
      a3 = mac4(a3, load4(w + 3 * K + 4 * i), ve, vo);
    }
    g.out[0] = a0, g.out[1] = a1, g.out[2] = a2, g.out[3] = a3;
  }
}
#endif

}  // namespace

void i8_dot_4x16__dsp(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                         const std::int32_t* bias, std::int32_t* out) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  // Unsigned: k_size > 0, and the signed divisions would cost sign fix-ups on every call.
  const unsigned uk = static_cast<unsigned>(k_size);
  const int k4 = static_cast<int>(uk & ~3u), rem = static_cast<int>(uk & 3u);
  const int groups = static_cast<int>(static_cast<unsigned>(rows) >> 2);
  // 4 rows per group: each word of v is widened once for four rows.
  if (groups > 0) {
    GroupWalk walk{bias, out, v, static_cast<int>(uk >> 4), static_cast<int>((uk >> 2) & 3u),
                   static_cast<std::int32_t>(4 * uk - static_cast<unsigned>(k4)), groups};
    rows4_groups(w, static_cast<std::int32_t>(k_size), walk);
    if (rem != 0) {  // the last k % 4 columns of those rows; an LSTM's K is most often a multiple of 4
      for (int j = 0; j < 4 * groups; ++j) out[j] = tail(out[j], w + static_cast<std::size_t>(j) * K + k4, v + k4, rem);
    }
  }
  // The last rows % 4 rows, one at a time.
  for (int j = 4 * groups; j < rows; ++j) {
    const std::int8_t* w0 = w + static_cast<std::size_t>(j) * K;
    std::int32_t a0 = bias[j];
    for (int k = 0; k < k4; k += 4) {
      const std::uint32_t x = load4(v + k);
      a0 = mac4(a0, load4(w0), even_pairs(x), odd_pairs(x));
      w0 += 4;
    }
    out[j] = tail(a0, w0, v + k4, rem);
  }
}

int widen_pairs_dsp(const std::int8_t* v, int n, std::int16_t* out) {
  const int whole = static_cast<int>(static_cast<unsigned>(n) & ~3u);
  const std::int8_t* const whole_end = v + whole;
#if defined(__thumb2__)
  // Eight values a pass in Thumb-2 (STRD of any two registers): 10 instructions where the loop
  // below takes 18 (out is 4-byte aligned, as STRD needs on ARMv7-M).
  if (whole >= 8) {
    const std::int8_t* const end = v + (whole & ~7);
    std::uint32_t a, b, c, d;
    __asm__ volatile(
        "1:\n\t"
        "ldr %[a], [%[v]], #4\n\t"
        "ldr %[c], [%[v]], #4\n\t"
        "sxtb16 %[b], %[a], ror #8\n\t"
        "sxtb16 %[a], %[a]\n\t"
        "sxtb16 %[d], %[c], ror #8\n\t"
        "sxtb16 %[c], %[c]\n\t"
        "strd %[a], %[b], [%[out]], #16\n\t"
        "strd %[c], %[d], [%[out], #-8]\n\t"
        "cmp %[v], %[end]\n\t"
        "bne 1b"
        : [v] "+r"(v), [out] "+r"(out), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d)
        : [end] "r"(end)
        : "cc", "memory");
  }
#endif
  // One word store per pair (an 8-byte memcpy of both went through the stack at -Os).
  for (; v != whole_end; v += 4, out += 4) {
    const std::uint32_t x = load4(v);
    const int16x2_t even = even_pairs(x), odd = odd_pairs(x);
    std::memcpy(out, &even, 4);
    std::memcpy(out + 2, &odd, 4);
  }
  return whole;
}

// The interleaved layout (src/internal/int8_kernels.hpp, interleave4) pairs rows A and B (and C
// and D) of a panel in each int16 half of a word: half = 256 · w(B, c) + w(A, c) exactly. With the
// vector widened by SXTB16 (the pair x_c, x_c+2 in one word), for a word of rows A, B at columns
// c, c + 2:
//   SMLAD(word, x)          adds 256 · (w(B,c)·x_c + w(B,c+2)·x_c+2) + (w(A,c)·x_c + w(A,c+2)·x_c+2)
//   SMLAD(SXTB16(word), x)  adds                                        w(A,c)·x_c + w(A,c+2)·x_c+2
// Two sums per row pair, both started at A's bias: `a` ends at bias(A) + S_A, `r` at bias(A) +
// S_A + 256 · S_B (mod 2^32), so S_B = (r − a) >> 8 (arithmetic). Four multiply-accumulates cost
// one SXTB16 and two SMLADs instead of two and two.
//
// Exactness. Each SMLAD adds two exact products modulo 2^32 (as above), so a and r are the stated
// residues. r − a = 256 · S_B modulo 2^32, and |S_B| <= 127 · 128 · 512 < 2^23 for at most 512
// columns (an odd row's weights are −127..127, x is −128..127), so 256 · S_B lies strictly inside
// int32 and r − a, read as int32, is 256 · S_B itself; the arithmetic shift gives S_B exactly, and
// bias(B) + S_B is then added modulo 2^32 as the scalar kernel adds it. Calls with more columns are
// split into pieces of 512, each adding onto the sums of the last (rnncore_i8_dot_panels_dsp_other).
//
// Per 4 columns of 4 rows: one LDM of the 4 weight words, one of the vector's 2 words, 4 SXTB16 and
// 8 SMLAD, 14 instructions for 16 multiply-accumulates; the loop takes 64 columns, 16 such groups, and adds CMP and BNE: 226 for 256, 0.883 per
// MAC (a pass of 16 columns, as first written, paid the CMP and BNE four times as often: 2.5 %
// more instructions on a 512-column product, 1.8 million of the text model's 167). SXTB16 writes over a weight word once its raw SMLAD is done,
// so the 14 registers are: r0 / r2 the sums a of A / C, r1 / r3 the sums r of pairs AB / CD,
// r4..r7 the weight words, r8 / r9 the vector's pairs, r10 the biases (free in the column loop),
// r11 the weights (panels are contiguous: the pointer runs on from one panel into the next), r12
// the vector, lr the vector's end (the loop ends where the vector does, so no count is reloaded
// per panel). A product's other values live on the stack.
//
// Around the loop, per panel of 4 rows: 6 instructions to start (the sums, the vector and a jump
// into the loop) and 11 to end (the odd rows' sums, the store, the panel test). The
// jump enters the 16-group loop body at the group that leaves ceil(K / 64) full passes, so that K
// need not be a multiple of 64 and no pass count is tested (each group is 14 four-byte
// instructions in A32 and T32, 56 bytes: the assembler checks). One call takes a list of products
// (a gate's x and h), so that its cost is paid once for them; a product that is not whole panels
// of at most 512 columns (6 instructions tell) goes to rnncore_i8_dot_panels_dsp_other, in C.
// Written in unified syntax valid in A32 and T32 alike.
extern "C" void rnncore_i8_dot_panels_dsp_other(const PanelProduct* product);

// Column groups a call sums at most: 512 columns, the bound of the exactness argument above (the
// assembly's test and rnncore_i8_dot_panels_dsp_other's pieces).
#define RNNCORE_PANEL_MAX_GROUPS 128
#define RNNCORE_STR2(x) #x
#define RNNCORE_STR(x) RNNCORE_STR2(x)

// Rows A, B (sums r0, r1) or C, D (r2, r3) of weight word W against the vector pair X.
#define RNNCORE_PANEL_PAIR(W, X, A, R) \
  "smlad " R ", " W ", " X ", " R "\n\t" \
  "sxtb16 " W ", " W "\n\t"            \
  "smlad " A ", " W ", " X ", " A "\n\t"
#define RNNCORE_PANEL_GROUP                                                                  \
  "ldmia r11!, {r4, r5, r6, r7}\n\t"                                                         \
  "ldmia r12!, {r8, r9}\n\t" RNNCORE_PANEL_PAIR("r4", "r8", "r0", "r1")                       \
      RNNCORE_PANEL_PAIR("r5", "r8", "r2", "r3") RNNCORE_PANEL_PAIR("r6", "r9", "r0", "r1") \
          RNNCORE_PANEL_PAIR("r7", "r9", "r2", "r3")
#if defined(__thumb__)
#define RNNCORE_THUMB_FUNC ".thumb_func\n\t"
#define RNNCORE_THUMB_BIT "orr r8, r8, #1\n\t"  // a T32 target address for LDR PC
#else
#define RNNCORE_THUMB_FUNC
#define RNNCORE_THUMB_BIT
#endif
// What the two panel kernels (this one and rnncore_i16_dot_panels_dsp_4x16 below) share, around
// their different loop entries and panel sums. The entry: the list's end, then per product
// (label 5) its six words, and to label 7 (the product in C) unless its rows are whole panels, at
// least one.
#define RNNCORE_PANELS_ENTRY(NAME)                                  \
  ".pushsection .text." NAME ", \"ax\", %progbits\n\t"             \
  ".balign 4\n\t"                                                   \
  ".global " NAME "\n\t"                                            \
  ".type " NAME ", %function\n\t"                                   \
  RNNCORE_THUMB_FUNC                                                \
  NAME ":\n\t"                                                      \
  "cmp r1, #0\n\t"                                                  \
  "it le\n\t" /* (no instruction in A32) */                         \
  "bxle lr\n\t"                                                     \
  "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                 \
  "sub sp, sp, #28\n\t"                                             \
  "add r1, r1, r1, lsl #1\n\t" /* the list's end: 24 bytes a product */ \
  "add r1, r0, r1, lsl #3\n\t"                                      \
  "str r1, [sp, #24]\n\t"                                           \
  "5:\n\t" /* a product: w, v, bias, out, rows, k_words */          \
  "ldmia r0!, {r4, r5, r6, r7, r8, r9}\n\t"                         \
  "tst r8, #3\n\t"                                                  \
  "bne 7f\n\t"                                                      \
  "cmp r8, #0\n\t"                                                  \
  "beq 7f\n\t"
// A product's registers: the weights, the biases, the biases' end, the vector's end (4 int16 a
// column word), and in r9 the groups the first pass skips, (−k_words) mod 16.
#define RNNCORE_PANELS_SETUP        \
  "mov r11, r4\n\t"                \
  "mov r10, r6\n\t"                \
  "add r6, r6, r8, lsl #2\n\t"     \
  "add lr, r5, r9, lsl #3\n\t"     \
  "rsb r9, r9, #0\n\t"             \
  "and r9, r9, #15\n\t"
// The end of a panel (its four sums in r0..r3 stored), of a product, of the list; label 7 hands a
// product to OTHER (in C) and carries on with the next.
#define RNNCORE_PANELS_EXIT(NAME, OTHER)            \
  "ldr r4, [sp, #12]\n\t"                          \
  "stmia r4!, {r0, r1, r2, r3}\n\t"                \
  "str r4, [sp, #12]\n\t"                          \
  "ldr r4, [sp, #8]\n\t"                           \
  "cmp r10, r4\n\t"                                \
  "bne 0b\n\t"                                     \
  "6:\n\t"                                         \
  "ldr r0, [sp, #0]\n\t"                           \
  "ldr r1, [sp, #24]\n\t"                          \
  "cmp r0, r1\n\t"                                 \
  "bne 5b\n\t"                                     \
  "add sp, sp, #28\n\t"                            \
  "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n\t" \
  "7:\n\t" /* any other product, in C */           \
  "str r0, [sp, #0]\n\t"                           \
  "sub r0, r0, #24\n\t"                            \
  "bl " OTHER "\n\t"                               \
  "b 6b\n\t"                                       \
  ".size " NAME ", .-" NAME "\n\t"                  \
  ".popsection\n\t"
// The stack frame (64 bytes with the saved registers: sp stays 8-byte aligned for the call): [sp,
// #0] the next product, #4 the vector, #8 the end of the biases, #12 the outputs, #16 the loop
// entry (stored by one STM), #24 the end of the list. lr holds the vector's end for all the
// product's panels: a pass ends with the vector pointer there or short of it.
__asm__(
    RNNCORE_PANELS_ENTRY("rnncore_i8_dot_panels_dsp_4x16")
    "cmp r9, #" RNNCORE_STR(RNNCORE_PANEL_MAX_GROUPS) "\n\t"  // at most 512 columns (k_words >= 1)
    "bhi 7f\n\t"
    RNNCORE_PANELS_SETUP  // groups skipped: 56 bytes each
    "adr r8, .Lrnncore_p4_group0\n\t"
    "add r8, r8, r9, lsl #6\n\t"
    "sub r8, r8, r9, lsl #3\n\t"
    RNNCORE_THUMB_BIT
    "stmia sp, {r0, r5, r6, r7, r8}\n\t"
    "0:\n\t"
    "ldr r0, [r10, #0]\n\t"  // both sums of a pair start at its even row's bias
    "ldr r2, [r10, #8]\n\t"
    "mov r1, r0\n\t"
    "mov r3, r2\n\t"
    "ldr r12, [sp, #4]\n\t"
    "ldr pc, [sp, #16]\n\t"
    ".Lrnncore_p4_group0:\n\t" RNNCORE_PANEL_GROUP
    ".Lrnncore_p4_group1:\n\t" RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP
    RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP
    RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP
    RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP RNNCORE_PANEL_GROUP
    ".if .Lrnncore_p4_group1 - .Lrnncore_p4_group0 - 56\n\t"
    ".error \"rnncore_i8_dot_panels_dsp_4x16: a group is not 56 bytes\"\n\t"
    ".endif\n\t"
    "cmp r12, lr\n\t"
    "bne .Lrnncore_p4_group0\n\t"
    "ldmia r10!, {r4, r5, r6, r7}\n\t"  // the odd rows: bias + (r − a) / 256
    "sub r1, r1, r0\n\t"
    "add r1, r5, r1, asr #8\n\t"
    "sub r3, r3, r2\n\t"
    "add r3, r7, r3, asr #8\n\t"
    RNNCORE_PANELS_EXIT("rnncore_i8_dot_panels_dsp_4x16", "rnncore_i8_dot_panels_dsp_other"));
#undef RNNCORE_PANEL_GROUP
#undef RNNCORE_PANEL_PAIR
#undef RNNCORE_STR
#undef RNNCORE_STR2

constexpr int kMaxGroups = RNNCORE_PANEL_MAX_GROUPS;
#undef RNNCORE_PANEL_MAX_GROUPS

// A product the assembly does not take whole: more columns than that in pieces of 512, each piece
// adding onto the sums of the last (each piece whole panels, which the assembly takes), and a
// last panel of 1..3 rows (H not a multiple of 4) by the scalar kernel.
extern "C" void rnncore_i8_dot_panels_dsp_other(const PanelProduct* product) {
  const PanelProduct& p = *product;
  const int panels = static_cast<int>(static_cast<unsigned>(p.rows) >> 2);
  const std::size_t panel_bytes = 16 * static_cast<std::size_t>(p.k_words);
  if (panels > 0 && p.k_words <= kMaxGroups) {
    const PanelProduct whole{p.w, p.v, p.bias, p.out, 4 * panels, p.k_words};
    rnncore_i8_dot_panels_dsp_4x16(&whole, 1);
  } else {
    for (int q = 0; q < panels; ++q) {
      for (int k0 = 0; k0 < p.k_words; k0 += kMaxGroups) {
        const PanelProduct piece{p.w + static_cast<std::size_t>(q) * panel_bytes + 16 * static_cast<std::size_t>(k0),
                                 p.v + 4 * k0, k0 == 0 ? p.bias + 4 * q : p.out + 4 * q, p.out + 4 * q, 4,
                                 p.k_words - k0 < kMaxGroups ? p.k_words - k0 : kMaxGroups};
        rnncore_i8_dot_panels_dsp_4x16(&piece, 1);
      }
    }
  }
  const int done = 4 * panels;
  if (done < p.rows) {
    const PanelProduct last{p.w + static_cast<std::size_t>(panels) * panel_bytes, p.v, p.bias + done, p.out + done,
                            p.rows - done, p.k_words};
    i8_dot_panels_1x1__scalar(&last, 1);
  }
}

// The int16 panel layout (src/internal/int8_kernels.hpp, interleave4_i16): the weights widened at
// pack time, each word a row's pair at columns (c, c + 2) or (c + 1, c + 3), the halves of the
// widened vector's words. One SMLAD per word adds that row's two products, exactly, modulo 2^32
// (as above), so the sums are the scalar kernel's at any K: no column bound, no odd-row
// correction, the four sums start at the four biases.
//
// Per 4 columns of 4 rows: one LDM of the vector's 2 words, two LDMs of 4 weight words and 8
// SMLAD, 11 instructions for 16 multiply-accumulates (0.6875 per MAC; with the loop's CMP and BNE
// every 64 columns, 178 for 256, 0.695); the interleaved int8 layout's kernel takes 14, at half the
// weight bytes. The registers and the stack frame are those of rnncore_i8_dot_panels_dsp_4x16
// (r0..r3 the sums of rows A..D, r4..r7 weight words, r8 / r9 the vector's words, r10 the biases,
// r11 the weights, r12 the vector, lr its end); the jump enters the 16-group loop at the group that
// leaves ceil(K / 64) full passes, 44 bytes a group (the assembler checks). Around the loop, per
// panel: 3 instructions to start, 6 to end. Rows not a multiple of 4 go to
// rnncore_i16_dot_panels_dsp_other, in C.
extern "C" void rnncore_i16_dot_panels_dsp_other(const PanelProduct* product);

#define RNNCORE_P16_HALF(X)              \
  "ldmia r11!, {r4, r5, r6, r7}\n\t"     \
  "smlad r0, r4, " X ", r0\n\t"          \
  "smlad r1, r5, " X ", r1\n\t"          \
  "smlad r2, r6, " X ", r2\n\t"          \
  "smlad r3, r7, " X ", r3\n\t"
#define RNNCORE_P16_GROUP "ldmia r12!, {r8, r9}\n\t" RNNCORE_P16_HALF("r8") RNNCORE_P16_HALF("r9")
// The frame as rnncore_i8_dot_panels_dsp_4x16's: [sp, #0] the next product, #4 the vector, #8 the
// end of the biases, #12 the outputs, #16 the loop entry, #24 the end of the list.
__asm__(
    RNNCORE_PANELS_ENTRY("rnncore_i16_dot_panels_dsp_4x16")  // (k_words >= 1)
    RNNCORE_PANELS_SETUP  // groups skipped: 44 bytes each
    "adr r8, .Lrnncore_p16_group0\n\t"
    "add r8, r8, r9, lsl #5\n\t"
    "add r8, r8, r9, lsl #3\n\t"
    "add r8, r8, r9, lsl #2\n\t"
    RNNCORE_THUMB_BIT
    "stmia sp, {r0, r5, r6, r7, r8}\n\t"
    "0:\n\t"
    "ldmia r10!, {r0, r1, r2, r3}\n\t"  // the sums start at the panel's biases
    "ldr r12, [sp, #4]\n\t"
    "ldr pc, [sp, #16]\n\t"
    ".Lrnncore_p16_group0:\n\t" RNNCORE_P16_GROUP
    ".Lrnncore_p16_group1:\n\t" RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP
    RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP
    RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP
    RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP RNNCORE_P16_GROUP
    ".if .Lrnncore_p16_group1 - .Lrnncore_p16_group0 - 44\n\t"
    ".error \"rnncore_i16_dot_panels_dsp_4x16: a group is not 44 bytes\"\n\t"
    ".endif\n\t"
    "cmp r12, lr\n\t"
    "bne .Lrnncore_p16_group0\n\t"
    RNNCORE_PANELS_EXIT("rnncore_i16_dot_panels_dsp_4x16", "rnncore_i16_dot_panels_dsp_other"));
#undef RNNCORE_PANELS_EXIT
#undef RNNCORE_PANELS_SETUP
#undef RNNCORE_PANELS_ENTRY
#undef RNNCORE_THUMB_BIT
#undef RNNCORE_THUMB_FUNC
#undef RNNCORE_P16_GROUP
#undef RNNCORE_P16_HALF

// A product of rows not a multiple of 4 (or none): its whole panels by the assembly, the last 1..3
// rows by the scalar kernel.
extern "C" void rnncore_i16_dot_panels_dsp_other(const PanelProduct* product) {
  const PanelProduct& p = *product;
  const int panels = static_cast<int>(static_cast<unsigned>(p.rows) >> 2);
  const std::size_t panel_bytes = 32 * static_cast<std::size_t>(p.k_words);
  if (panels > 0) {
    const PanelProduct whole{p.w, p.v, p.bias, p.out, 4 * panels, p.k_words};
    rnncore_i16_dot_panels_dsp_4x16(&whole, 1);
  }
  const int done = 4 * panels;
  if (done < p.rows) {
    const PanelProduct last{p.w + static_cast<std::size_t>(panels) * panel_bytes, p.v, p.bias + done, p.out + done,
                            p.rows - done, p.k_words};
    i16_dot_panels_1x1__scalar(&last, 1);
  }
}

}  // namespace q8
}  // namespace rnncore

#endif  // __ARM_FEATURE_DSP && __ARM_FEATURE_SIMD32

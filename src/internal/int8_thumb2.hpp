// The integer LSTM's step loops in Thumb-2 assembly (Cortex-M4/M7, 32-bit ARMv7-A with the DSP
// extension), units in pairs: a gate's activations, the cell state, the output state, each equal
// bit for bit to its C loop (src/internal/int8_step_loops.hpp). Header only and inline, so that the
// Cortex-M step (src/int8_lstm_step.cpp) inlines them as before; the kernel registry's entries
// i32_gate_act_2__thumb2, i16_cell_update_2__thumb2 and i16_output_2__thumb2 (src/int8_thumb2.cpp)
// run the same functions behind the registry's interfaces, so that tests/checkkernels.cpp checks
// them (under qemu-arm in the armhf cross build). Built where RNNCORE_Q8_THUMB2_LOOPS is defined
// (src/internal/int8_kernels.hpp): optimized builds only, as their 13 registers are more than GCC
// leaves an asm statement at -O0.
#ifndef RNNCORE_SRC_INTERNAL_INT8_THUMB2_HPP
#define RNNCORE_SRC_INTERNAL_INT8_THUMB2_HPP

#include <cstdint>

#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_tables.hpp"

#if defined(RNNCORE_Q8_THUMB2_LOOPS)
namespace rnncore {
namespace q8 {
namespace {
namespace thumb2 {

// output_units<true> on Thumb-2, two pairs of units a pass: their o and tanh(c) loaded in pairs and
// one loop test, 9.5 instructions a unit instead of 12 (the same arithmetic as StepMultiplier::apply). tanh_c
// is act[0] of a block (4-byte aligned), o its act[3], 6 · kUnitBlock bytes on; `pairs` >= 1.
RNNCORE_Q8_INLINE void output_pairs(int pairs, const StepMultiplier& m, std::int32_t zp, const std::int16_t* tanh_c,
                                   std::int8_t* out) {
  const std::int16_t* const end = tanh_c + 2 * pairs;
  const std::int32_t shift = m.right - 1;
  std::int32_t o, t, x;
  std::int32_t k = pairs & 1;  // first an odd count's flag (two pairs a pass), then a temporary
#define RNNCORE_Q8_OUTPUT_PAIR                      \
  "ldr %[o], [%[tanh_c], %[o_row]]\n\t"            \
  "ldr %[t], [%[tanh_c]], #4\n\t"                  \
  "smulbb %[x], %[o], %[t]\n\t"                    \
  "smultt %[o], %[o], %[t]\n\t"                    \
  "add %[k], %[x], %[x], asr #31\n\t"              \
  "smmlar %[x], %[x], %[q], %[k]\n\t"              \
  "asr %[x], %[x], %[shift]\n\t"                   \
  "add %[x], %[x], #1\n\t"                         \
  "add %[x], %[zp], %[x], asr #1\n\t"              \
  "ssat %[x], #8, %[x]\n\t"                        \
  "strb %[x], [%[out]], #2\n\t"                    \
  "add %[k], %[o], %[o], asr #31\n\t"              \
  "smmlar %[o], %[o], %[q], %[k]\n\t"              \
  "asr %[o], %[o], %[shift]\n\t"                   \
  "add %[o], %[o], #1\n\t"                         \
  "add %[o], %[zp], %[o], asr #1\n\t"              \
  "ssat %[o], #8, %[o]\n\t"                        \
  "strb %[o], [%[out], #-1]\n\t"
  __asm__ volatile(
      "cmp %[k], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_OUTPUT_PAIR
      "2:\n\t"
      RNNCORE_Q8_OUTPUT_PAIR
      "cmp %[tanh_c], %[end]\n\t"
      "bne 1b"
      : [tanh_c] "+r"(tanh_c), [out] "+r"(out), [o] "=&r"(o), [t] "=&r"(t), [x] "=&r"(x), [k] "+r"(k)
      : [end] "r"(end), [q] "r"(m.doubled), [shift] "r"(shift), [zp] "r"(zp), [o_row] "i"(6 * kUnitBlock)
      : "cc", "memory");
#undef RNNCORE_Q8_OUTPUT_PAIR
}

#if defined(RNNCORE_Q8_CENTRED_TABLES)
// update_cells' C loop (src/internal/int8_step_loops.hpp) on Thumb-2 where tanh of the cell is a table centre (CellTanh::kPrescale >= 0),
// two pairs of units a pass: 18.5 instructions a unit instead of 27. The same values, by three facts:
// - gf and gi are sigmoids, never negative, so [gf · c < 0] = [c < 0] and [gi · gg < 0] = [gg < 0]
//   wherever the product is not 0 (and a product of 0 rounds to 0 with either): the rounding
//   constant 2^(k−1) − [·< 0] is formed from the factor and added by SMLABB / SMLATB;
// - |f · c| <= 32767 · 2^15 and |i · g| < 2^30, so both rounded products are int16 values
//   already (the wrap to int16 changes nothing) and their sum is saturated by SSAT;
// - min(v, high) = sat16(sat16(v + K) − K) with K = 32767 − high, and max(v, low) =
//   sat16(sat16(v − L) + L) with L = 32768 + low (K, L in 0 .. 32767): QADD16 / QSUB16 on the low
//   halves. The high halves keep v's sign bits, which the clamp does not change (high >= 1,
//   low <= −1), so the register is the clamped int16 sign-extended, as the prescale's SSAT needs.
// act: the block's gates (i, f, g in rows 0..2, 2 · kUnitBlock bytes apart; tanh(c) goes into row 0), 4-byte
// aligned; cells: the pairs' cell states (int16, any alignment); `pairs` >= 1.
template <int IB, int kPrescale>
RNNCORE_Q8_INLINE void cell_update_pairs(int pairs, std::int16_t* act, std::int16_t* cells, std::int32_t clip_high,
                                        std::int32_t clip_low, const std::int16_t* centre) {
  static_assert(IB >= 0 && IB <= 6 && kPrescale >= 0 && kPrescale <= 3, "cell_update_pairs: IB 0..6");
  std::int16_t* const end = act + 2 * pairs;
  const std::int32_t fc_round = 1 << 14, ig_round = 1 << (14 + IB);
  const std::int32_t high_gap = kI16Max - clip_high, low_gap = 32768 + clip_low;
  std::int32_t gi, gf, v, f, k;
#define RNNCORE_Q8_CELL_UNIT(half, g_row, i_row)                            \
  "ldrsh %[v], [%[cells]]\n\t"                                             \
  "add %[k], %[fc_round], %[v], asr #31\n\t"                               \
  "smla" half "b %[f], %[gf], %[v], %[k]\n\t"                               \
  "ldrsh %[v], [%[act], %[" g_row "]]\n\t"                                  \
  "add %[k], %[ig_round], %[v], asr #31\n\t"                               \
  "smla" half "b %[k], %[gi], %[v], %[k]\n\t"                               \
  "asr %[f], %[f], #15\n\t"                                                \
  "add %[f], %[f], %[k], asr %[ig_shift]\n\t"                              \
  "ssat %[f], #16, %[f]\n\t"                                               \
  "qadd16 %[f], %[f], %[high_gap]\n\t"                                     \
  "qsub16 %[f], %[f], %[high_gap]\n\t"                                     \
  "qsub16 %[f], %[f], %[low_gap]\n\t"                                      \
  "qadd16 %[f], %[f], %[low_gap]\n\t"                                      \
  "strh %[f], [%[cells]], #2\n\t"                                          \
  "ssat %[f], #16, %[f], lsl %[prescale]\n\t"                              \
  "ldrh %[f], [%[centre], %[f], lsl #1]\n\t"                               \
  "strh %[f], [%[act], %[" i_row "]]\n\t"
  // act advances as i's pair is loaded, so the rows' offsets are 4 bytes short
#define RNNCORE_Q8_CELL_PAIR                   \
  "ldr %[gi], [%[act]], #4\n\t"               \
  "ldr %[gf], [%[act], %[f_row]]\n\t"         \
  RNNCORE_Q8_CELL_UNIT("b", "g_row0", "i_row0") \
  RNNCORE_Q8_CELL_UNIT("t", "g_row1", "i_row1")
  k = pairs & 1;  // first an odd count's flag (two pairs a pass, an odd count entering at the second)
  __asm__ volatile(
      "cmp %[k], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_CELL_PAIR
      "2:\n\t"
      RNNCORE_Q8_CELL_PAIR
      "cmp %[act], %[end]\n\t"
      "bne 1b"
      : [act] "+r"(act), [cells] "+r"(cells), [gi] "=&r"(gi), [gf] "=&r"(gf), [v] "=&r"(v), [f] "=&r"(f), [k] "+r"(k)
      : [end] "r"(end), [fc_round] "r"(fc_round), [ig_round] "r"(ig_round), [high_gap] "r"(high_gap),
        [low_gap] "r"(low_gap), [centre] "r"(centre), [ig_shift] "i"(15 + IB), [prescale] "i"(kPrescale),
        [f_row] "i"(2 * kUnitBlock - 4), [g_row0] "i"(4 * kUnitBlock - 4), [g_row1] "i"(4 * kUnitBlock - 2),
        [i_row0] "i"(-4), [i_row1] "i"(-2)
      : "cc", "memory");
#undef RNNCORE_Q8_CELL_PAIR
#undef RNNCORE_Q8_CELL_UNIT
}

// gate_units (src/internal/int8_step_loops.hpp) for per-tensor multipliers that both shift right, units in pairs, on Thumb-2 with a
// table centre: the same instructions as GCC's loop for a unit (StepMultiplier::apply, the two
// saturations, the lookup), with the sums loaded in pairs (LDRD), the two activations stored as one
// word and one loop test for two pairs (an odd count enters at the second): 14.5 instructions a
// unit instead of 17. ax and ah are the two rows of
// the step's StepSums (ah = ax + kUnitBlock), act 4-byte aligned; `pairs` >= 1.
RNNCORE_Q8_INLINE void gate_act_pairs(int pairs, const std::int32_t* ax, std::int16_t* act, QuantizedMultiplier mx,
                                     QuantizedMultiplier mh, const std::int16_t* centre) {
  std::int16_t* const end = act + 2 * pairs;
  // StepMultiplier's `doubled` and right − 1 (the shifts are negative: both shift right)
  const std::int32_t x_doubled = static_cast<std::int32_t>(static_cast<std::uint32_t>(mx.multiplier) << 1);
  const std::int32_t h_doubled = static_cast<std::int32_t>(static_cast<std::uint32_t>(mh.multiplier) << 1);
  const std::int32_t x_shift = -mx.shift - 1, h_shift = -mh.shift - 1;
  std::int32_t x0, x1, h0, h1;
  std::int32_t t = pairs & 1;  // first an odd count's flag (the loop takes two pairs a pass), then a temporary
#define RNNCORE_Q8_GATE_UNIT(x, h)                    \
  "add %[t], %[" x "], %[" x "], asr #31\n\t"          \
  "smmlar %[" x "], %[" x "], %[xq], %[t]\n\t"         \
  "asr %[" x "], %[" x "], %[xs]\n\t"                  \
  "add %[" x "], %[" x "], #1\n\t"                     \
  "ssat %[" x "], #16, %[" x "], asr #1\n\t"           \
  "add %[t], %[" h "], %[" h "], asr #31\n\t"          \
  "smmlar %[" h "], %[" h "], %[hq], %[t]\n\t"         \
  "asr %[" h "], %[" h "], %[hs]\n\t"                  \
  "add %[" h "], %[" h "], #1\n\t"                     \
  "add %[" x "], %[" x "], %[" h "], asr #1\n\t"       \
  "ssat %[" x "], #16, %[" x "]\n\t"                   \
  "ldrh %[" x "], [%[centre], %[" x "], lsl #1]\n\t"
#define RNNCORE_Q8_GATE_PAIR                         \
  "ldrd %[h0], %[h1], [%[ax], %[h_offset]]\n\t"      \
  "ldrd %[x0], %[x1], [%[ax]], #8\n\t"               \
  RNNCORE_Q8_GATE_UNIT("x0", "h0")                    \
  RNNCORE_Q8_GATE_UNIT("x1", "h1")                    \
  "pkhbt %[x0], %[x0], %[x1], lsl #16\n\t"           \
  "str %[x0], [%[act]], #4\n\t"
  __asm__ volatile(
      "cmp %[t], #0\n\t"
      "bne 2f\n\t"
      "1:\n\t"
      RNNCORE_Q8_GATE_PAIR
      "2:\n\t"
      RNNCORE_Q8_GATE_PAIR
      "cmp %[act], %[end]\n\t"
      "bne 1b"
      : [ax] "+r"(ax), [act] "+r"(act), [x0] "=&r"(x0), [x1] "=&r"(x1), [h0] "=&r"(h0), [h1] "=&r"(h1), [t] "+r"(t)
      : [end] "r"(end), [xq] "r"(x_doubled), [xs] "r"(x_shift), [hq] "r"(h_doubled), [hs] "r"(h_shift),
        [centre] "r"(centre), [h_offset] "i"(4 * kUnitBlock)
      : "cc", "memory");
#undef RNNCORE_Q8_GATE_PAIR
#undef RNNCORE_Q8_GATE_UNIT
}
#endif  // RNNCORE_Q8_CENTRED_TABLES

}  // namespace thumb2
}  // namespace
}  // namespace q8
}  // namespace rnncore
#endif  // RNNCORE_Q8_THUMB2_LOOPS

#endif  // RNNCORE_SRC_INTERNAL_INT8_THUMB2_HPP

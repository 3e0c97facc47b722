// The integer LSTM's step (src/internal/int8_lstm.hpp; semantics in docs/int8.md): LiteRT's
// 8x8_16 LSTM, bit for bit, a block of kUnitBlock units at a time: the matrix-vector products
// (a registered kernel, src/internal/kernels.hpp), then the gates, the cell and the output state.
// Its C loops are the specification (the scalar reference, i32_gate_act_1x1__scalar and
// i16_cell_update_1x1__scalar below); the step kernels of hosts (simd/i8_step_<isa>.cpp) and, on
// Cortex-M, the Thumb-2 loops here take whole groups of units and must equal them bit for bit
// (tests/checkkernels.cpp; tests/cross/ on the emulated core). The arithmetic is the fixed-point
// library's (src/internal/int8_fixed_point.hpp); the activation tables are src/int8_tables.cpp's.
#include <cstdint>
#include <cstring>

#include "src/internal/error.hpp"
#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_tables.hpp"

namespace rnncore {
namespace q8 {

std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m) {
  // the step's arithmetic wherever it applies, so that the tests of this function cover it
  return m.multiplier >= (std::int32_t{1} << 30) ? StepMultiplier(m)(x) : rescale(x, m);
}

std::int16_t sigmoid_q3_12(std::int16_t x) { return sigmoid_fixed(x); }

std::int16_t tanh_q(std::int16_t x, int integer_bits) {
  switch (integer_bits) {
    case 0: return tanh_fixed<0>(x);
    case 1: return tanh_fixed<1>(x);
    case 2: return tanh_fixed<2>(x);
    case 3: return tanh_fixed<3>(x);
    case 4: return tanh_fixed<4>(x);
    case 5: return tanh_fixed<5>(x);
    case 6: return tanh_fixed<6>(x);
    default: return 0;
  }
}

namespace {


// The step's loops in Thumb-2 assembly, units in pairs (i32_gate_act_2__thumb2, i16_cell_update_2__thumb2,
// i16_output_2__thumb2): optimized builds only, as their 13 registers are more than GCC leaves an
// asm statement at -O0.
#if defined(RNNCORE_Q8_ACLE) && defined(__thumb2__) && defined(__OPTIMIZE__)
#define RNNCORE_Q8_THUMB2_LOOPS 1
#endif

// Hides a pointer's value from the optimizer: GCC would otherwise fold a table's constant centre
// back into every lookup (one more add per activation on ARM).
template <class T>
RNNCORE_Q8_INLINE T* opaque_pointer(T* p) {
#if defined(__GNUC__)
  __asm__("" : "+r"(p));
#endif
  return p;
}

// A gate's activation of an int16 value z: one load from the centre of a table over every int16
// argument where the build has those (hosts; firmware with int8_activation_tables=signed), else
// sigmoid_fixed or tanh_fixed<3>. Made once per loop, so that the centre stays in a register.
template <bool kTanh>
struct GateActivation {
#if defined(RNNCORE_Q8_CENTRED_TABLES)
  const std::int16_t* centre = opaque_pointer(gate_table_centre<kTanh>());
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t z) const { return centre[z]; }
#else
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t z) const { return kTanh ? tanh_fixed<3>(z) : sigmoid_fixed(z); }
#endif
};

// tanh of a cell state with IB integer bits (0..6), as GateActivation: on hosts its table's centre;
// with the firmware's signed tables and IB >= 3, tanh(Q3.12) at c · 2^(IB − 3) saturated (the same
// real argument, as tanh_fixed reads it); else tanh_fixed<IB>.
// kPrescale: where a centre is read, the left shift of c before it (saturated to int16); else −1.
template <int IB>
struct CellTanh {
#if !defined(RNNCORE_NO_HEAP)
  static constexpr int kPrescale = 0;
  const std::int16_t* centre = opaque_pointer(cell_tanh_table(IB) + 32768);
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const { return centre[c]; }
#elif defined(RNNCORE_Q8_SIGNED_TABLES)
  static constexpr int kPrescale = IB >= 3 ? IB - 3 : (IB == kCellTanhBits ? 0 : -1);
  const std::int16_t* centre = opaque_pointer(cell_table_centre());
  static const std::int16_t* cell_table_centre() {
#if defined(RNNCORE_Q8_CELL_TANH_BITS)
    if constexpr (IB == kCellTanhBits) return kCellTanh.v + 32768;
#endif
    return gate_table_centre<true>();
  }
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const {
    if constexpr (kPrescale >= 0) {
      return centre[kPrescale > 0 ? sat16(c * (1 << kPrescale)) : c];
    } else {
      return tanh_fixed<IB>(c);
    }
  }
#else
  static constexpr int kPrescale = -1;
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const { return tanh_fixed<IB>(c); }
#endif
};
}  // namespace

namespace {

// The new output state of n units from o and tanh(c): o · tanh(c) requantized to int8. A loop of
// its own after the cell loop, out of line: one copy for every cell scale, a loop per direction
// of the multiplier's shift instead of a test per unit, and registers left to the cell loop.
template <bool kRightShift>
RNNCORE_Q8_INLINE void output_units(const StepMultiplier& m, std::int32_t zp, int n, const std::int16_t* o,
                                    const std::int16_t* tanh_c, std::int8_t* out) {
  for (int u = 0; u < n; ++u) {
    const std::int32_t hq = m.apply<kRightShift>(static_cast<std::int32_t>(o[u]) * tanh_c[u]) + zp;
#if defined(RNNCORE_Q8_ACLE)
    out[u] = static_cast<std::int8_t>(__ssat(hq, 8));
#else
    out[u] = static_cast<std::int8_t>(hq < -128 ? -128 : (hq > 127 ? 127 : hq));
#endif
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS)
// output_units<true> on Thumb-2, two pairs of units a pass: their o and tanh(c) loaded in pairs and
// one loop test, 9.5 instructions a unit instead of 12 (the same arithmetic as StepMultiplier::apply). tanh_c
// is act[0] of a block (4-byte aligned), o its act[3], 6 · kUnitBlock bytes on; `pairs` >= 1.
RNNCORE_Q8_INLINE void i16_output_2__thumb2(int pairs, const StepMultiplier& m, std::int32_t zp, const std::int16_t* tanh_c,
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
#endif

RNNCORE_Q8_NOINLINE void update_outputs(const Int8LstmParams& p, int n, const std::int16_t* o, const std::int16_t* tanh_c,
                                        std::int8_t* out) {
  const StepMultiplier m(p.hidden_mult);
  if (m.right > 0) {  // an output scale of 2^-30 or coarser: every model seen
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    const int paired = n & ~1;
    if (paired > 0) i16_output_2__thumb2(paired / 2, m, p.hidden_zp, tanh_c, out);
    if (paired < n) output_units<true>(m, p.hidden_zp, 1, o + paired, tanh_c + paired, out + paired);
#else
    output_units<true>(m, p.hidden_zp, n, o, tanh_c, out);
#endif
  } else {
    output_units<false>(m, p.hidden_zp, n, o, tanh_c, out);
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
// update_cells' loop on Thumb-2 where tanh of the cell is a table centre (CellTanh::kPrescale >= 0),
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
RNNCORE_Q8_INLINE void i16_cell_update_2__thumb2(int pairs, std::int16_t* act, std::int16_t* cells, std::int32_t clip_high,
                                         std::int32_t clip_low, const std::int16_t* centre) {
  static_assert(IB >= 0 && IB <= 6 && kPrescale >= 0 && kPrescale <= 3, "i16_cell_update_2__thumb2: IB 0..6");
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
#endif

// The cell and the new output state of units [j, j + n) from their gate activations. IB: the cell
// state's integer bits, 15 + cell_log2, as a template argument so that the firmware's computed
// tanh is inlined with constant shifts (the host reads its table); −1 stands for every finer scale.
// tanh(c) goes into act[0] (i's slot, read first) for update_outputs.
template <int IB>
void update_cells(const Int8LstmParams& p, std::size_t j, int n, std::int16_t (*act)[kUnitBlock], std::int16_t* c,
                  std::int8_t* h_next) {
  const CellTanh<IB >= 0 ? IB : 0> cell_tanh;
  std::int16_t* const cells = c + j;
  // The clip as two bounds, the int16 range without one (the sum is saturated to it already), so
  // that the loop does not test for it.
  const std::int32_t clip_high = p.cell_clip > 0 ? p.cell_clip : kI16Max;
  const std::int32_t clip_low = p.cell_clip > 0 ? -p.cell_clip : kI16Min;
  int first = 0;  // units a step kernel finished, output state included
  int u = 0;      // units whose cell is done
#if !defined(RNNCORE_NO_HEAP)
  if (p.cell_update != nullptr) {  // the rest (fewer than its lanes) in C below
    const CellUpdate cu{IB >= 0 ? cell_tanh.centre : nullptr, p.cell_log2, p.cell_clip, p.hidden_mult, p.hidden_zp};
    first = u = p.cell_update(n, cu, BlockGates{act[0], act[1], act[2], act[3]}, cells, h_next + j);
    if (first == n) return;
  } else  // (the Thumb-2 loop, where the build has it)
#endif
  {
#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
    if constexpr (IB >= 0 && decltype(cell_tanh)::kPrescale >= 0) {
      u = n & ~1;
      if (u > 0) {
        i16_cell_update_2__thumb2<IB, decltype(cell_tanh)::kPrescale>(u / 2, act[0], cells, clip_high, clip_low, cell_tanh.centre);
      }
    }
#endif
  }
  for (; u < n; ++u) {
    const std::int16_t gi = act[0][u], gf = act[1][u], gg = act[2][u];
    std::int16_t& cell = cells[u];
    const std::int32_t fc = round_shift<15>(static_cast<std::int32_t>(gf) * cell);
    // Q0.15 · Q0.15 → cell scale 2^cell_log2: a shift by 30 + cell_log2 (|gi · gg| < 2^30)
    std::int32_t ig;
    if constexpr (IB >= 0) {
      ig = round_shift<15 + IB>(static_cast<std::int32_t>(gi) * gg);
    } else {
      ig = rounding_divide_by_pot(static_cast<std::int32_t>(gi) * gg, 30 + p.cell_log2);
    }
    std::int32_t clipped = sat16(wrap16(fc) + wrap16(ig));  // each product is stored as int16 first
    clipped = clipped > clip_high ? clip_high : clipped;
    const std::int16_t cn = static_cast<std::int16_t>(clipped < clip_low ? clip_low : clipped);
    cell = cn;
    // A cell scale finer than 2^-15 (the converter picks one when the calibrated |c| stays below
    // 1/2) gives tanh −1 .. −15 integer bits; LiteRT's ApplyTanh (portable_tensor_utils.cc)
    // dispatches only 0..6 and otherwise returns without writing its output, which is the input
    // gate's scratch buffer: LiteRT then multiplies o by the input gate i instead of tanh(c).
    // Reproduced here, bit for bit (tested on Keras models converted with cell scale 2^-16): i is
    // left in act[0].
    if constexpr (IB >= 0) act[0][u] = cell_tanh(cn);
  }
  update_outputs(p, n - first, act[3] + first, act[0] + first, h_next + j + first);
}

// update_cells for the parameters' cell scale.
RNNCORE_Q8_INLINE void update_cells_any(const Int8LstmParams& p, std::size_t j, int n, std::int16_t (*act)[kUnitBlock],
                                        std::int16_t* c, std::int8_t* h_next) {
  switch (15 + p.cell_log2) {  // derive_scales admits cell_log2 <= −9
    case 0: update_cells<0>(p, j, n, act, c, h_next); break;
    case 1: update_cells<1>(p, j, n, act, c, h_next); break;
    case 2: update_cells<2>(p, j, n, act, c, h_next); break;
    case 3: update_cells<3>(p, j, n, act, c, h_next); break;
    case 4: update_cells<4>(p, j, n, act, c, h_next); break;
    case 5: update_cells<5>(p, j, n, act, c, h_next); break;
    case 6: update_cells<6>(p, j, n, act, c, h_next); break;
    default: update_cells<-1>(p, j, n, act, c, h_next); break;
  }
}

// A gate's activations of n units from their int32 sums (`activation` of an int16 value: a
// GateActivation, the sigmoid or the cell gate's tanh); x_mult(u) and h_mult(u) give unit u's
// multipliers (the same for all units per tensor, where the compiler hoists them). kRightShifts:
// every multiplier shifts right (StepMultiplier::apply).
template <bool kRightShifts, class XMult, class HMult, class Activation>
RNNCORE_Q8_INLINE void gate_units(int n, const std::int32_t* ax, const std::int32_t* ah, std::int16_t* act,
                                  XMult x_mult, HMult h_mult, const Activation& activation) {
  for (int u = 0; u < n; ++u) {
    // Each product is rescaled to Q3.12 on its own and saturated; then the two are summed and
    // saturated again (TFLite accumulates the recurrent part onto the saturated input part).
    const std::int32_t zx = sat16(x_mult(u).template apply<kRightShifts>(ax[u]));
    const std::int32_t z = sat16(h_mult(u).template apply<kRightShifts>(ah[u]) + zx);
    act[u] = activation(z);
  }
}

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
// gate_units for per-tensor multipliers that both shift right, units in pairs, on Thumb-2 with a
// table centre: the same instructions as GCC's loop for a unit (StepMultiplier::apply, the two
// saturations, the lookup), with the sums loaded in pairs (LDRD), the two activations stored as one
// word and one loop test for two pairs (an odd count enters at the second): 14.5 instructions a
// unit instead of 17. ax and ah are the two rows of
// StepSums (ah = ax + kUnitBlock), act 4-byte aligned; `pairs` >= 1.
RNNCORE_Q8_INLINE void i32_gate_act_2__thumb2(int pairs, const std::int32_t* ax, std::int16_t* act, QuantizedMultiplier mx,
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
#endif

// A gate per tensor: one pair of multipliers, and the loop without the left-shift case where (as
// for most models: effective scales below 1) both shift right.
template <bool kTanh>
RNNCORE_Q8_INLINE void gate_units_per_tensor(int n, const std::int32_t* ax, const std::int32_t* ah, std::int16_t* act,
                                             const StepMultiplier& mx, const StepMultiplier& mh) {
  const auto x_mult = [&mx](int) -> const StepMultiplier& { return mx; };
  const auto h_mult = [&mh](int) -> const StepMultiplier& { return mh; };
  const GateActivation<kTanh> activation;
  if (mx.right > 0 && mh.right > 0) {
    gate_units<true>(n, ax, ah, act, x_mult, h_mult, activation);
  } else {
    gate_units<false>(n, ax, ah, act, x_mult, h_mult, activation);
  }
}

// A block's int32 sums of one gate, the input part then the recurrent part (i32_gate_act_2__thumb2
// reads both from one pointer).
struct StepSums {
  std::int32_t x[kUnitBlock];
  std::int32_t h[kUnitBlock];
};

// A step's operands for one batch row: x and h, and with interleaved weights the same widened
// (widen_pairs; null otherwise).
struct StepOperands {
  const std::int8_t* x;
  const std::int8_t* h;
  const std::int16_t* x_pairs;
  const std::int16_t* h_pairs;
};

// Units [j0, j0 + n) of one batch row (n <= kUnitBlock): the four gates from x and the previous
// output state h, then the cell (c, in place) and the new output state (into h_next; h itself
// is still read by the blocks after this one). kPerChannel: the multipliers are per unit;
// kInterleaved: the weights are interleaved (the panel kernel, on x and h widened).

template <bool kPerChannel, bool kInterleaved>
RNNCORE_Q8_INLINE void step_block(const Int8LstmParams& p, int j0, int n, const StepOperands& in, std::int16_t* c,
                                  std::int8_t* h_next) {
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t j = static_cast<std::size_t>(j0);
  const int x_words = interleaved4_words(p.input_size), h_words = interleaved4_words(p.hidden_size);
  StepSums sums;
  std::int32_t* const ax = sums.x;
  std::int32_t* const ah = sums.h;
  alignas(4) std::int16_t act[kGates][kUnitBlock];
  // Interleaved weights: a gate's two products (x and h), set up once a block but for the weights
  // and biases. j0 is a multiple of kUnitBlock, so of 4: the block starts at a panel.
  PanelProduct products[2] = {{nullptr, in.x_pairs, nullptr, ax, n, x_words}, {nullptr, in.h_pairs, nullptr, ah, n, h_words}};
  const std::size_t x_panels = kInterleaved ? interleaved4_offset(j0, 0, x_words) : j * I;
  const std::size_t h_panels = kInterleaved ? interleaved4_offset(j0, 0, h_words) : j * H;
#if defined(RNNCORE_Q8_CENTRED_TABLES)
  [[maybe_unused]] const std::int16_t* const sigmoid_centre = GateActivation<false>().centre;
  [[maybe_unused]] const std::int16_t* const tanh_centre = GateActivation<true>().centre;
#endif
  for (int g = 0; g < kGates; ++g) {
    // int32 accumulators as in TFLite (the kernels wrap, as TFLite's do, without overflow UB).
    if constexpr (!kInterleaved) {
      p.dot(p.w[g] + x_panels, n, p.input_size, in.x, p.x_bias[g] + j, ax);
      p.dot(p.r[g] + h_panels, n, p.hidden_size, in.h, p.h_bias[g] + j, ah);
    } else {
      products[0].w = p.w[g] + x_panels;
      products[0].bias = p.x_bias[g] + j;
      products[1].w = p.r[g] + h_panels;
      products[1].bias = p.h_bias[g] + j;
      p.dot_panels(products, 2);
    }
    int done = 0;  // units a step kernel or the assembly loop took; the rest go to the C loops below
#if !defined(RNNCORE_NO_HEAP)
    if (p.gate_activations != nullptr) {
      GateScaling s{p.x_mult[g], p.h_mult[g]};
      if constexpr (kPerChannel) {
        s.x_rows = p.x_mult_rows[g] + 2 * j;
        s.h_rows = p.h_mult_rows[g] + 2 * j;
      }
      done = p.gate_activations(n, ax, ah, s, g == 2 ? tanh_centre : sigmoid_centre, act[g]);
    } else  // (the Thumb-2 loop, where the build has it)
#endif
    {
#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
      // the usual case: per tensor, both multipliers shift right; an odd block's last unit goes below
      if (!kPerChannel && p.x_mult[g].shift < 0 && p.h_mult[g].shift < 0 && n >= 2) {
        done = n & ~1;
        i32_gate_act_2__thumb2(done / 2, ax, act[g], p.x_mult[g], p.h_mult[g], g == 2 ? tanh_centre : sigmoid_centre);
      }
#endif
    }
    if (done == n) continue;
    if constexpr (!kPerChannel) {
      const StepMultiplier mx(p.x_mult[g]), mh(p.h_mult[g]);
      g == 2 ? gate_units_per_tensor<true>(n - done, ax + done, ah + done, act[g] + done, mx, mh)
             : gate_units_per_tensor<false>(n - done, ax + done, ah + done, act[g] + done, mx, mh);
    } else {  // each unit's own multipliers
      const std::int32_t* const xm = p.x_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const std::int32_t* const hm = p.h_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const auto x_mult = [xm](int u) { return StepMultiplier({xm[2 * u], xm[2 * u + 1]}); };
      const auto h_mult = [hm](int u) { return StepMultiplier({hm[2 * u], hm[2 * u + 1]}); };
      g == 2 ? gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<true>())
             : gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<false>());
    }
  }
  update_cells_any(p, j, n, act, c, h_next);
}

}  // namespace

#if !defined(RNNCORE_NO_HEAP)
int i32_gate_act_1x1__scalar(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act) {
  const auto lookup = [centre](std::int32_t z) { return centre[z]; };
  const StepMultiplier mx(s.x), mh(s.h);
  const auto x_mult = [&s, &mx](int u) { return s.x_rows ? StepMultiplier({s.x_rows[2 * u], s.x_rows[2 * u + 1]}) : mx; };
  const auto h_mult = [&s, &mh](int u) { return s.h_rows ? StepMultiplier({s.h_rows[2 * u], s.h_rows[2 * u + 1]}) : mh; };
  gate_units<false>(n, ax, ah, act, x_mult, h_mult, lookup);
  return n;
}

int i16_cell_update_1x1__scalar(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  Int8LstmParams p;  // what update_cells reads, and no step kernel
  p.cell_log2 = cu.cell_log2;
  p.cell_clip = cu.cell_clip;
  p.hidden_mult = cu.hidden_mult;
  p.hidden_zp = cu.hidden_zp;
  alignas(4) std::int16_t act[kGates][kUnitBlock];  // as step_block's (the Thumb-2 loops load pairs)
  for (int j0 = 0; j0 < n; j0 += kUnitBlock) {
    const int m = n - j0 < kUnitBlock ? n - j0 : kUnitBlock;
    for (int u = 0; u < m; ++u) {
      act[0][u] = gates.i[j0 + u];
      act[1][u] = gates.f[j0 + u];
      act[2][u] = gates.g[j0 + u];
      act[3][u] = gates.o[j0 + u];
    }
    update_cells_any(p, static_cast<std::size_t>(j0), m, act, c, h_next);
  }
  return n;
}
#endif

void int8_lstm_step(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                    std::int16_t* c, std::int8_t* scratch) {
  const int H = p.hidden_size;
  const std::size_t Hs = static_cast<std::size_t>(H), Is = static_cast<std::size_t>(p.input_size);
  // Interleaved weights: x and h widened once per step, after the new state, 4-byte aligned.
  std::int16_t* x_pairs = nullptr;
  std::int16_t* h_pairs = nullptr;
  if (p.layout == Int8WeightLayout::interleaved4) {
    const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(scratch + Hs) + 3u) & ~std::uintptr_t{3};
    x_pairs = reinterpret_cast<std::int16_t*>(at);
    h_pairs = x_pairs + 4 * interleaved4_words(p.input_size);
  }
  for (int b = 0; b < batch; ++b) {
    const std::size_t bs = static_cast<std::size_t>(b);
    std::int8_t* hb = h + bs * Hs;
    const StepOperands in{x + bs * Is, hb, x_pairs, h_pairs};
    if (x_pairs != nullptr) {
      widen_pairs(in.x, p.input_size, x_pairs);
      widen_pairs(hb, H, h_pairs);
    }
    for (int j0 = 0; j0 < H; j0 += kUnitBlock) {
      const int n = H - j0 < kUnitBlock ? H - j0 : kUnitBlock;
      std::int16_t* const cb = c + bs * Hs;
      const bool per_channel = p.x_mult_rows[0] != nullptr;
      if (x_pairs == nullptr) {
        per_channel ? step_block<true, false>(p, j0, n, in, cb, scratch) : step_block<false, false>(p, j0, n, in, cb, scratch);
      } else {
        per_channel ? step_block<true, true>(p, j0, n, in, cb, scratch) : step_block<false, true>(p, j0, n, in, cb, scratch);
      }
    }
    std::memcpy(hb, scratch, Hs);
  }
}

Status int8_lstm_sequence(const Int8LstmParams& p, int batch, int seq_len, const std::int8_t* x,
                          std::int8_t* y, std::int8_t* h, std::int16_t* c, std::int8_t* scratch,
                          std::size_t scratch_bytes) {
  detail::clear_error();
  RNNCORE_ENSURE(x != nullptr && h != nullptr && c != nullptr && scratch != nullptr, Status::null_pointer,
                 "int8_lstm_sequence: x, h, c and scratch must not be null");
  RNNCORE_ENSURE(p.hidden_size > 0 && p.input_size > 0 && p.w[0] != nullptr, Status::weights_not_packed,
                 "int8_lstm_sequence: the parameters were not prepared (int8_lstm_prepare)");
  RNNCORE_ENSURE(batch >= 0 && seq_len >= 0, Status::invalid_size,
                 "int8_lstm_sequence: batch %d and seq_len %d must be >= 0", batch, seq_len);
  RNNCORE_ENSURE(scratch_bytes >= int8_lstm_scratch_bytes(p), Status::buffer_too_small,
                 "int8_lstm_sequence: scratch has %zu bytes, needs %zu", scratch_bytes, int8_lstm_scratch_bytes(p));
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t T = static_cast<std::size_t>(seq_len);
  for (int b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < T; ++t) {
      int8_lstm_step(p, 1, x + (b * T + t) * I, h + b * H, c + b * H, scratch);
      if (y != nullptr) {
        for (std::size_t j = 0; j < H; ++j) y[(b * T + t) * H + j] = h[b * H + j];
      }
    }
  }
  return Status::ok;
}

}  // namespace q8
}  // namespace rnncore

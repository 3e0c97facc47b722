// The integer LSTM's step in plain C, a unit at a time after the matrix-vector products: a gate's
// activations from its int32 sums, the cell state, the output state (docs/int8.md). These loops
// are the specification of every step kernel: src/int8_reference.cpp registers them as the scalar
// kernels (i32_gate_act_1x1__scalar, i16_cell_update_1x1__scalar, i16_output_1x1__scalar) that
// tests/checkkernels.cpp compares every other kernel with, and the step (src/int8_lstm_step.cpp)
// runs them on the units no kernel took. Header only, in an unnamed namespace like the fixed-point
// library below it, so that the Cortex-M step compiles them as before (its instructions unchanged):
// one definition, two users.
#ifndef RNNCORE_SRC_INTERNAL_INT8_STEP_LOOPS_HPP
#define RNNCORE_SRC_INTERNAL_INT8_STEP_LOOPS_HPP

#include <cstdint>

#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_tables.hpp"
#include "src/internal/int8_thumb2.hpp"

namespace rnncore {
namespace q8 {
namespace {

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
  RNNCORE_Q8_INLINE std::int32_t operator()(std::int32_t z) const { return kTanh ? tanh_fixed<3>(z) : sigmoid_fixed(z); }
#endif
};

// tanh of a cell state with IB integer bits (0..6), as GateActivation: on hosts its table's centre;
// with the firmware's signed tables and IB >= 3, tanh(Q3.12) at c · 2^(IB − 3) saturated (the same
// real argument, as tanh_fixed reads it); else tanh_fixed<IB>, except where the build's cell table
// has fewer integer bits (int8_cell_tanh_bits=N < IB < 3): that table at c · 2^(IB − N) for every c
// the shift keeps inside int16 (the same real argument, the same value: the exponential of a
// finer grid at the same point; tests/cross/int8_kernels_baremetal.cpp's steps compare both
// sides with the reference), tanh_fixed<IB> for the others (|c| ≥ 2^(N − IB + 15)).
// kPrescale: where a centre is read for every c, the left shift of c before it (saturated to
// int16); else −1. kWiden: IB − N where the cell table serves part of the range; else 0.
template <int IB>
struct CellTanh {
#if !defined(RNNCORE_NO_HEAP)
  static constexpr int kPrescale = 0;
  const std::int16_t* centre = opaque_pointer(cell_tanh_table(IB) + 32768);
  RNNCORE_Q8_INLINE std::int16_t operator()(std::int32_t c) const { return centre[c]; }
#elif defined(RNNCORE_Q8_SIGNED_TABLES)
  static constexpr int kPrescale = IB >= 3 ? IB - 3 : (IB == kCellTanhBits ? 0 : -1);
  static constexpr int kWiden = kCellTanhBits >= 0 && IB > kCellTanhBits && IB < 3 ? IB - kCellTanhBits : 0;
  const std::int16_t* centre = opaque_pointer(cell_table_centre());
  static const std::int16_t* cell_table_centre() {
#if defined(RNNCORE_Q8_CELL_TANH_BITS)
    if constexpr (IB == kCellTanhBits || kWiden > 0) return kCellTanh.v + 32768;
#endif
    return gate_table_centre<true>();
  }
  RNNCORE_Q8_INLINE std::int32_t operator()(std::int32_t c) const {
    if constexpr (kPrescale >= 0) {
      return centre[kPrescale > 0 ? sat16(c * (1 << kPrescale)) : c];
    } else if constexpr (kWiden > 0) {
      constexpr std::int32_t kHalfRange = std::int32_t{1} << (15 - kWiden);  // |c| below it: inside the table
      if (static_cast<std::uint32_t>(c + kHalfRange) < static_cast<std::uint32_t>(2 * kHalfRange)) {
        return centre[c * (1 << kWiden)];
      }
      return tanh_fixed<IB>(c);
    } else {
      return tanh_fixed<IB>(c);
    }
  }
#else
  static constexpr int kPrescale = -1;
  RNNCORE_Q8_INLINE std::int32_t operator()(std::int32_t c) const { return tanh_fixed<IB>(c); }
#endif
};

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

// The new output state of n units from o and tanh(c): o · tanh(c) requantized to int8 (m: the
// output multiplier; kRightShift: it shifts right, StepMultiplier::apply).
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

// Where the step hands units to a kernel before its C loops: kKernels (the step: a host's step
// kernel in params, else the Thumb-2 loops where the build has them; the C loops do the rest) or
// not (the reference: the C loops alone, the kernels' branches compiled out). The step and the
// reference instantiate the same functions, so the loops have one definition; the C cell loop is
// written in update_cells itself, as GCC lays the Cortex-M step out one instruction a unit longer
// when it is an inlined function of its own.

// The new output state of n units (output_units: a loop of its own after the cell loop, out of
// line: one copy for every cell scale, a loop per direction of the multiplier's shift instead of a
// test per unit, and registers left to the cell loop).
template <bool kKernels>
RNNCORE_Q8_NOINLINE void update_outputs(const Int8LstmParams& p, int n, const std::int16_t* o, const std::int16_t* tanh_c,
                                        std::int8_t* out) {
  const StepMultiplier m(p.hidden_mult);
  if (m.right > 0) {  // an output scale of 2^-30 or coarser: every model seen
#if defined(RNNCORE_Q8_THUMB2_LOOPS)
    if constexpr (kKernels) {
      const int paired = n & ~1;
      if (paired > 0) thumb2::output_pairs(paired / 2, m, p.hidden_zp, tanh_c, out);
      if (paired < n) output_units<true>(m, p.hidden_zp, 1, o + paired, tanh_c + paired, out + paired);
    } else {
      output_units<true>(m, p.hidden_zp, n, o, tanh_c, out);
    }
#else
    output_units<true>(m, p.hidden_zp, n, o, tanh_c, out);
#endif
  } else {
    output_units<false>(m, p.hidden_zp, n, o, tanh_c, out);
  }
}

// The cell and the new output state of units [j, j + n) from their gate activations (act rows i,
// f, g, o; c: the row's cell states, h_next its new output states). IB: the cell state's integer
// bits, 15 + cell_log2, as a template argument so that the firmware's computed tanh is inlined
// with constant shifts (the host reads its table); −1 stands for every finer scale.
// tanh(c) goes into act[0] (i's slot, read first) for update_outputs.
template <int IB, bool kKernels>
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
  if constexpr (kKernels) {
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
          thumb2::cell_update_pairs<IB, decltype(cell_tanh)::kPrescale>(u / 2, act[0], cells, clip_high, clip_low,
                                                                        cell_tanh.centre);
        }
      }
#endif
    }
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
  update_outputs<kKernels>(p, n - first, act[3] + first, act[0] + first, h_next + j + first);
}

// update_cells for the parameters' cell scale.
template <bool kKernels>
RNNCORE_Q8_INLINE void update_cells_any(const Int8LstmParams& p, std::size_t j, int n, std::int16_t (*act)[kUnitBlock],
                                        std::int16_t* c, std::int8_t* h_next) {
  switch (15 + p.cell_log2) {  // derive_scales admits cell_log2 <= −9
    case 0: update_cells<0, kKernels>(p, j, n, act, c, h_next); break;
    case 1: update_cells<1, kKernels>(p, j, n, act, c, h_next); break;
    case 2: update_cells<2, kKernels>(p, j, n, act, c, h_next); break;
    case 3: update_cells<3, kKernels>(p, j, n, act, c, h_next); break;
    case 4: update_cells<4, kKernels>(p, j, n, act, c, h_next); break;
    case 5: update_cells<5, kKernels>(p, j, n, act, c, h_next); break;
    case 6: update_cells<6, kKernels>(p, j, n, act, c, h_next); break;
    default: update_cells<-1, kKernels>(p, j, n, act, c, h_next); break;
  }
}

}  // namespace
}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_STEP_LOOPS_HPP

// The step's Thumb-2 loops (src/internal/int8_thumb2.hpp) as kernels of the registry
// (src/internal/int8_kernels.hpp): i32_gate_act_2__thumb2, i16_cell_update_2__thumb2 and
// i16_output_2__thumb2, the same inline functions the step runs, behind the interfaces of the
// gate, cell and output kernels, so that tests/checkkernels.cpp compares them with the reference
// (under qemu-arm in the armhf cross build). The loops read a block as the step holds it (the sums
// of x and h one row apart, the gates as rows of one array, 4-byte aligned): each kernel copies its
// arguments into such a block, kUnitBlock units at a time. Hosts with Thumb-2 only (the registry's
// step kernels read the hosts' tables); the step itself inlines the loops, so no step calls these.
#include <cstdint>

#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_step_loops.hpp"
#include "src/internal/int8_tables.hpp"
#include "src/internal/int8_thumb2.hpp"

#if defined(RNNCORE_Q8_THUMB2_LOOPS) && !defined(RNNCORE_NO_HEAP)
namespace rnncore {
namespace q8 {
namespace {

// The gates of units [j0, j0 + m) of a block, as the step holds them (rows i, f, g, o).
struct Block {
  alignas(8) std::int16_t act[kGates][kUnitBlock];
  void load(const BlockGates& gates, int j0, int m) {
    for (int u = 0; u < m; ++u) {
      act[0][u] = gates.i[j0 + u];
      act[1][u] = gates.f[j0 + u];
      act[2][u] = gates.g[j0 + u];
      act[3][u] = gates.o[j0 + u];
    }
  }
};

// i16_cell_update_2__thumb2 for a cell state with IB integer bits: the cell loop, then the output
// loop where its multiplier shifts right (as the step's update_outputs), else output_units.
template <int IB>
int cell_update_pairs_of(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  constexpr int kPrescale = CellTanh<IB>::kPrescale;  // 0 on hosts: the table of IB integer bits
  const std::int32_t clip_high = cu.cell_clip > 0 ? cu.cell_clip : kI16Max;
  const std::int32_t clip_low = cu.cell_clip > 0 ? -cu.cell_clip : kI16Min;
  const StepMultiplier m(cu.hidden_mult);
  const int paired = n & ~1;
  Block b;
  for (int j0 = 0; j0 < paired; j0 += kUnitBlock) {
    const int units = paired - j0 < kUnitBlock ? paired - j0 : kUnitBlock;  // even: kUnitBlock is
    b.load(gates, j0, units);
    thumb2::cell_update_pairs<IB, kPrescale>(units / 2, b.act[0], c + j0, clip_high, clip_low, cu.tanh_centre);
    if (m.right > 0) {
      thumb2::output_pairs(units / 2, m, cu.hidden_zp, b.act[0], h_next + j0);
    } else {
      output_units<false>(m, cu.hidden_zp, units, b.act[3], b.act[0], h_next + j0);
    }
  }
  return paired;
}

}  // namespace

int i32_gate_act_2__thumb2(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                           const std::int16_t* centre, std::int16_t* act) {
  // the step's condition for the loop: per tensor, both multipliers shifting right
  if (s.x_rows != nullptr || s.h_rows != nullptr || s.x.shift >= 0 || s.h.shift >= 0) return 0;
  const int paired = n & ~1;
  alignas(8) std::int32_t sums[2][kUnitBlock];  // the step's StepSums: x, then h one row on
  alignas(4) std::int16_t out[kUnitBlock];
  for (int j0 = 0; j0 < paired; j0 += kUnitBlock) {
    const int units = paired - j0 < kUnitBlock ? paired - j0 : kUnitBlock;
    for (int u = 0; u < units; ++u) {
      sums[0][u] = ax[j0 + u];
      sums[1][u] = ah[j0 + u];
    }
    thumb2::gate_act_pairs(units / 2, sums[0], out, s.x, s.h, centre);
    for (int u = 0; u < units; ++u) act[j0 + u] = out[u];
  }
  return paired;
}

int i16_cell_update_2__thumb2(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  if (cu.tanh_centre == nullptr) return 0;  // no tanh table below a cell scale of 2^-15
  switch (15 + cu.cell_log2) {
    case 0: return cell_update_pairs_of<0>(n, cu, gates, c, h_next);
    case 1: return cell_update_pairs_of<1>(n, cu, gates, c, h_next);
    case 2: return cell_update_pairs_of<2>(n, cu, gates, c, h_next);
    case 3: return cell_update_pairs_of<3>(n, cu, gates, c, h_next);
    case 4: return cell_update_pairs_of<4>(n, cu, gates, c, h_next);
    case 5: return cell_update_pairs_of<5>(n, cu, gates, c, h_next);
    case 6: return cell_update_pairs_of<6>(n, cu, gates, c, h_next);
    default: return 0;
  }
}

int i16_output_2__thumb2(int n, const QuantizedMultiplier& m, std::int32_t zp, const std::int16_t* o,
                         const std::int16_t* tanh_c, std::int8_t* out) {
  const StepMultiplier sm(m);
  if (sm.right <= 0) return 0;  // the loop shifts right only
  const int paired = n & ~1;
  Block b;  // the loop reads tanh(c) from row 0 and o from row 3
  for (int j0 = 0; j0 < paired; j0 += kUnitBlock) {
    const int units = paired - j0 < kUnitBlock ? paired - j0 : kUnitBlock;
    for (int u = 0; u < units; ++u) {
      b.act[0][u] = tanh_c[j0 + u];
      b.act[3][u] = o[j0 + u];
    }
    thumb2::output_pairs(units / 2, sm, zp, b.act[0], out + j0);
  }
  return paired;
}

}  // namespace q8
}  // namespace rnncore
#endif

// The integer LSTM's reference (dav1d's rule: the reference is the spec): the scalar kernel of
// every op of the kernel registry (src/internal/kernels.hpp), which tests/checkkernels.cpp
// compares every other kernel with, bit for bit. The products: a row block of int8 weights times
// a vector, row-major or interleaved. The rest of a step (hosts): a gate's activations from its
// sums, the cell state, the output state; these are the step's own C loops
// (src/internal/int8_step_loops.hpp, a header so that the Cortex-M step compiles them as its own),
// instantiated here without their kernels' branches (kKernels false: no step kernel, no Thumb-2
// loop), over any n. src/kernels.cpp registers them first in each op's list; the semantics are
// docs/int8.md's.
#include <cstddef>
#include <cstdint>

#include "src/internal/int8_kernels.hpp"
#if !defined(RNNCORE_NO_HEAP)
#include "src/internal/int8_step_loops.hpp"
#endif

namespace rnncore {
namespace q8 {

void i8_dot_1x1__scalar(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                        const std::int32_t* bias, std::int32_t* out) {
  for (int j = 0; j < rows; ++j) {
    const std::int8_t* row = w + static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size);
    // Unsigned, so that a sum beyond int32 (reachable only with a bias near the limits) wraps as
    // TFLite's int32 accumulator does, without undefined behaviour.
    std::uint32_t acc = static_cast<std::uint32_t>(bias[j]);
    for (int k = 0; k < k_size; ++k) {
      acc += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(v[k]));
    }
    out[j] = static_cast<std::int32_t>(acc);
  }
}

void i8_dot_panels_1x1__scalar(const PanelProduct* products, int count) {
  for (int i = 0; i < count; ++i) {
    const PanelProduct& p = products[i];
    for (int j = 0; j < p.rows; ++j) {
      std::uint32_t acc = static_cast<std::uint32_t>(p.bias[j]);  // wraps as i8_dot_1x1__scalar
      for (int k = 0; k < 4 * p.k_words; ++k) {
        acc += static_cast<std::uint32_t>(interleaved4_weight(p.w, j, k, p.k_words) *
                                          static_cast<std::int32_t>(p.v[widened_index(k)]));
      }
      p.out[j] = static_cast<std::int32_t>(acc);
    }
  }
}

void i16_dot_panels_1x1__scalar(const PanelProduct* products, int count) {
  for (int i = 0; i < count; ++i) {
    const PanelProduct& p = products[i];
    for (int j = 0; j < p.rows; ++j) {
      std::uint32_t acc = static_cast<std::uint32_t>(p.bias[j]);  // wraps as i8_dot_1x1__scalar
      for (int k = 0; k < 4 * p.k_words; ++k) {
        acc += static_cast<std::uint32_t>(interleaved4_i16_weight(p.w, j, k, p.k_words) *
                                          static_cast<std::int32_t>(p.v[widened_index(k)]));
      }
      p.out[j] = static_cast<std::int32_t>(acc);
    }
  }
}

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

int i16_output_1x1__scalar(int n, const QuantizedMultiplier& m, std::int32_t zp, const std::int16_t* o,
                           const std::int16_t* tanh_c, std::int8_t* out) {
  const StepMultiplier sm(m);
  sm.right > 0 ? output_units<true>(sm, zp, n, o, tanh_c, out) : output_units<false>(sm, zp, n, o, tanh_c, out);
  return n;
}

int i16_cell_update_1x1__scalar(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  Int8LstmParams p;  // what update_cells reads
  p.cell_log2 = cu.cell_log2;
  p.cell_clip = cu.cell_clip;
  p.hidden_mult = cu.hidden_mult;
  p.hidden_zp = cu.hidden_zp;
  std::int16_t act[kGates][kUnitBlock];  // a block's gates as the step holds them
  for (int j0 = 0; j0 < n; j0 += kUnitBlock) {
    const int m = n - j0 < kUnitBlock ? n - j0 : kUnitBlock;
    for (int u = 0; u < m; ++u) {
      act[0][u] = gates.i[j0 + u];
      act[1][u] = gates.f[j0 + u];
      act[2][u] = gates.g[j0 + u];
      act[3][u] = gates.o[j0 + u];
    }
    update_cells_any</*kKernels=*/false>(p, static_cast<std::size_t>(j0), m, act, c, h_next);
  }
  return n;
}
#endif

}  // namespace q8
}  // namespace rnncore

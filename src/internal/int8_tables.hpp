// The integer LSTM's run-time activation tables (host builds; src/int8_tables.cpp): the sigmoid and
// tanh of every int16 argument, filled once from the fixed-point library, so that an activation
// is one load. The firmware profile has no heap for them: it computes the activations, or reads
// the compile-time tables of src/internal/int8_fixed_point.hpp.
#ifndef RNNCORE_SRC_INTERNAL_INT8_TABLES_HPP
#define RNNCORE_SRC_INTERNAL_INT8_TABLES_HPP

#include <cstdint>

#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace q8 {

/// Fills the tables a layer with this cell scale uses now, so that its first step does not
/// (nothing in the firmware profile).
void fill_tables(int cell_log2);

#if !defined(RNNCORE_NO_HEAP)
#define RNNCORE_Q8_CENTRED_TABLES 1

/// The table of tanh with `bits` integer bits (0..6), or null (a finer cell scale: no tanh).
const std::int16_t* cell_tanh_table(int bits);

namespace {
// The centre of a gate's table (entry 0 of int16 argument 0): see GateActivation.
template <bool kTanh>
inline const std::int16_t* gate_table_centre() {
  return int8_gate_table_centre(kTanh);
}
}  // namespace
#endif

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_TABLES_HPP

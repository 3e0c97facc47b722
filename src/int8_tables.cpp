// The integer LSTM's run-time activation tables (src/internal/int8_tables.hpp).
#include "src/internal/int8_tables.hpp"

#if !defined(RNNCORE_NO_HEAP)
#include "src/internal/int8_fixed_point.hpp"

namespace rnncore {
namespace q8 {
namespace {

// Host builds look the activations up instead of computing them: the sigmoid and the cell
// gate's tanh (3 integer bits) map int16 to int16, so two tables of 65,536 entries, filled once by
// the functions above, give the same bits for about one load each (the computed activation is some
// 30 dependent multiplies; the step's rest cost 100 ns a unit on x86 with it). 256 KiB of static
// storage, filled on the first prepare (a guarded static: no heap, thread-safe). The firmware
// profile (RNNCORE_NO_HEAP) computes them: the tables would not fit its RAM.
struct GateTables {
  std::int16_t sigmoid[65536];
  std::int16_t tanh3[65536];
  std::int16_t gather_pad[2];  // the step kernels' 32-bit gathers read one int16 past the last entry
  GateTables() {
    for (std::int32_t v = -32768; v <= 32767; ++v) {
      sigmoid[v + 32768] = sigmoid_fixed(static_cast<std::int16_t>(v));
      tanh3[v + 32768] = tanh_fixed<3>(static_cast<std::int16_t>(v));
    }
  }
};

const GateTables& gate_tables() {
  static const GateTables tables;
  return tables;
}


// tanh of a cell state with IB integer bits, the same way: a table per IB, filled at the prepare of
// the first layer whose cell scale gives that IB (most models use one or two of the seven).
template <int IB>
const std::int16_t* cell_tanh_table_for() {
  struct Table {
    std::int16_t v[65536];
    std::int16_t gather_pad[2];  // as GateTables'
    Table() {
      for (std::int32_t x = -32768; x <= 32767; ++x) v[x + 32768] = tanh_fixed<IB>(static_cast<std::int16_t>(x));
    }
  };
  static const Table table;
  return table.v;
}

}  // namespace

const std::int16_t* cell_tanh_table(int bits) {
  switch (bits) {
    case 0: return cell_tanh_table_for<0>();
    case 1: return cell_tanh_table_for<1>();
    case 2: return cell_tanh_table_for<2>();
    case 3: return gate_tables().tanh3;
    case 4: return cell_tanh_table_for<4>();
    case 5: return cell_tanh_table_for<5>();
    case 6: return cell_tanh_table_for<6>();
    default: return nullptr;
  }
}

void fill_tables(int cell_log2) {
  (void)gate_tables();
  (void)cell_tanh_table(15 + cell_log2);
}

const std::int16_t* int8_gate_table_centre(bool tanh) {
  const GateTables& t = gate_tables();
  return (tanh ? t.tanh3 : t.sigmoid) + 32768;
}

const std::int16_t* int8_cell_tanh_centre(int integer_bits) {
  const std::int16_t* t = cell_tanh_table(integer_bits);
  return t != nullptr ? t + 32768 : nullptr;
}

}  // namespace q8
}  // namespace rnncore
#else
namespace rnncore {
namespace q8 {

void fill_tables(int) {}

}  // namespace q8
}  // namespace rnncore
#endif

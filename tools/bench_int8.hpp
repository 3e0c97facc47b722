// `rnncore bench --dtype int8`: times the integer LSTM (src/internal/int8_lstm.hpp, docs/int8.md)
// at a shape, on random int8 weights with the quantization of a Keras conversion with a cell clip.
#ifndef RNNCORE_TOOLS_BENCH_INT8_HPP
#define RNNCORE_TOOLS_BENCH_INT8_HPP

namespace rnncore {
namespace tools {

/// The shape and execution of an int8 benchmark (the options `rnncore bench` checked).
struct Int8BenchShape {
  long long seq = 0, batch = 0, input = 0, hidden = 0, layers = 0, reps = 0;
  bool reference = false;  ///< --backend reference: the scalar kernels and the step's scalar code
};

/// Times the forward of an int8 LSTM stack (layer l > 0 takes the H outputs of layer l − 1): one
/// warm-up, then the median of `reps` runs, each from a zero state. Prints the shape, the kernels
/// and "median_ms=... gops=..." (2 operations per multiply-add of the matrix products).
/// @return the exit status: 0, or 1 with one line on stderr
int bench_int8(const Int8BenchShape& shape);

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_BENCH_INT8_HPP

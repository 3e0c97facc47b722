// `rnncore quantize`: post-training quantization of a float LSTM (unidirectional or bidirectional
// layers, as `rnncore run` loads them) to the integer LSTM file that `rnncore run` runs (format tflite_int8,
// docs/int8.md): calibrates ranges on a .npy, chooses the scales as TFLite's converter does for a
// Keras LSTM, writes the file and reports the accuracy lost against the float model.
#ifndef RNNCORE_TOOLS_QUANTIZE_HPP
#define RNNCORE_TOOLS_QUANTIZE_HPP

#include <string>

#include "tools/cli.hpp"

namespace rnncore {
namespace tools {

/// The options of `rnncore quantize`.
struct QuantizeOptions {
  io::ModelHints hints;  ///< prefix_given: set by model_hints() after parsing
  std::string weights, calibration, output, eval;
  std::string config;  ///< --config: the stack (docs/config.md), for layers the weights alone do not say (widths)
  bool batch_first = false;
  long long carry_state = 0;  ///< 0: every calibration row starts from a zero state; N: groups of N carry it
  double cell_clip = 0.0;     ///< --cell-clip (used only where given)
  std::string cell_range = "every-step";  ///< --cell-range: max|c| over every-step or batch-end (the converter's)
  bool per_channel = false;  ///< --per-channel: a weight scale per unit (row) instead of per gate
};

/// The app of `rnncore quantize` (its options, bound to `o`, and help text).
void define_quantize(CLI::App& app, QuantizeOptions& o);

/// Runs `rnncore quantize`.
/// @param[in] argc, argv  the whole command line (argv[1] is "quantize")
/// @return the exit status: 0 success, 2 usage error, 1 any other error (one line on stderr)
int cmd_quantize(int argc, char** argv);

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_QUANTIZE_HPP

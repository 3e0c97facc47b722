// `rnncore quantize`: the command line of io::quantize (include/rnncore/io/quantize.hpp), which
// quantizes a float LSTM to the integer LSTM file that `rnncore run` runs and reports the accuracy
// lost against the float model.
#ifndef RNNCORE_TOOLS_QUANTIZE_HPP
#define RNNCORE_TOOLS_QUANTIZE_HPP

#include "rnncore/io/quantize.hpp"

#include "cli.hpp"

namespace rnncore {
namespace tools {

/// The app of `rnncore quantize` (its options, bound to `o`, and help text).
void define_quantize(CLI::App& app, io::QuantizeOptions& o);

/// Runs `rnncore quantize`.
/// @param[in] argc, argv  the whole command line (argv[1] is "quantize")
/// @return the exit status: 0 success, 2 usage error, 1 any other error (one line on stderr)
int cmd_quantize(int argc, char** argv);

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_QUANTIZE_HPP

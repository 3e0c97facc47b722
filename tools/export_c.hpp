// `rnncore export-c`: turns a safetensors model into a C header for firmware that compiles its
// model in (no file system, no loader, no heap): the canonical weights as a const array, the
// rnncore_spec, the exact buffer sizes of its plans, and optionally a sample input with the
// expected output as test vectors.
#ifndef RNNCORE_TOOLS_EXPORT_C_HPP
#define RNNCORE_TOOLS_EXPORT_C_HPP

#include <string>

#include "tools/cli.hpp"

namespace rnncore {
namespace tools {

/// The options of `rnncore export-c`.
struct ExportCOptions {
  io::ModelHints hints;  ///< prefix_given: set by model_hints() after parsing
  std::string weights, output, name, sample_input, sample_output;
  long long max_batch = 0, max_seq_len = 0;  // 0: the sample's, else 1
  bool interleave = false;  ///< int8 models: LSTM weights in the interleaved layout (Cortex-M's fast kernel)
};

/// The app of `rnncore export-c` (its options, bound to `o`, and help text).
void define_export_c(CLI::App& app, ExportCOptions& o);

/// Runs `rnncore export-c`.
/// @param[in] argc, argv  the whole command line (argv[1] is "export-c")
/// @return the exit status: 0 success, 2 usage error, 1 any other error (one line on stderr)
int cmd_export_c(int argc, char** argv);

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_EXPORT_C_HPP

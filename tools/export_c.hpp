// `rnncore export-c`: the command line of io::export_c (include/rnncore/io/export_c.hpp), which
// turns a safetensors model into a C header for firmware that compiles its model in.
#ifndef RNNCORE_TOOLS_EXPORT_C_HPP
#define RNNCORE_TOOLS_EXPORT_C_HPP

#include "rnncore/io/export_c.hpp"

#include "cli.hpp"

namespace rnncore {
namespace tools {

/// The app of `rnncore export-c` (its options, bound to `o`, and help text).
void define_export_c(CLI::App& app, io::ExportCOptions& o);

/// Runs `rnncore export-c`.
/// @param[in] argc, argv  the whole command line (argv[1] is "export-c")
/// @return the exit status: 0 success, 2 usage error, 1 any other error (one line on stderr)
int cmd_export_c(int argc, char** argv);

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_EXPORT_C_HPP

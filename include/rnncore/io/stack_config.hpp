// Stack configurations as JSON (`rnncore run --config STACK.json`, schema in docs/config.md):
//
//   {"input_size": 16, "dropout": 0.2, "input_mode": "linear",
//    "layers": [{"mode": "lstm", "hidden_size": 32, "direction": "bidirectional", "gru": "reset-after",
//                "wrappers": [{"type": "dropout", "input_keep": 0.9, "output_keep": 0.8, "state_keep": 0.7,
//                              "variational": true, "per_sequence": false, "state_filter": "default", "seed": 7},
//                             {"type": "residual"}]}]}
//
// Wrappers are listed innermost first. Unknown keys are errors (a typo must not silently change
// the model); every error names the file, line and column.
#ifndef RNNCORE_IO_STACK_CONFIG_HPP
#define RNNCORE_IO_STACK_CONFIG_HPP

#include <string>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace io {

/// Parses a stack configuration. input_size may be absent (0 in the result; the weights tell).
/// @param[in] text,size the JSON  @param[in] name file name for messages  @param[out] out the stack
/// @param[out] error one line on failure
Status parse_stack_config(const char* text, std::size_t size, const std::string& name, StackSpec* out,
                          std::string* error);

/// Reads and parses a stack configuration file.
Status read_stack_config(const std::string& path, StackSpec* out, std::string* error);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_STACK_CONFIG_HPP

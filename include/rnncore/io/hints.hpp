// rnncore — whether the model hints a user gave (io::ModelHints: what a command line pins with
// --format, --mode, --gru, ...) apply to the model they loaded. The loader takes every hint it can
// use; a hint that says nothing about the model (a GRU variant for an LSTM) is refused here rather
// than ignored, so that a user who thinks it acted learns that it did not.
#ifndef RNNCORE_IO_HINTS_HPP
#define RNNCORE_IO_HINTS_HPP

#include <string>

#include "rnncore/rnncore.hpp"
#include "rnncore/io/model.hpp"

namespace rnncore {
namespace io {

/// Why a hint does not apply to the loaded stack, one line naming the option ("--gru reset-before
/// does not apply to a model without GRU layers ..."), or "" when every given hint applies. (A
/// forget bias on a model that is not TensorFlow's is refused by the loader itself.)
std::string inapplicable_hint(const ModelHints& hints, const StackSpec& stack);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_HINTS_HPP

// Model hints against the model loaded (include/rnncore/io/hints.hpp).
#include "rnncore/io/hints.hpp"

namespace rnncore {
namespace io {

std::string inapplicable_hint(const ModelHints& hints, const StackSpec& stack) {
  if (hints.gru.empty()) return std::string();
  for (int l = 0; l < stack.num_layers; ++l)
    if (stack.layers[l].mode == Mode::gru) return std::string();
  return "--gru " + hints.gru + " does not apply to a model without GRU layers (layer 0 is " +
         to_string(stack.layers[0].mode) + "): it says where a GRU applies its reset gate";
}

}  // namespace io
}  // namespace rnncore

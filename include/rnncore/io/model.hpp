// Loading a recurrent model from a safetensors file: the format, prefix, layers, directions, sizes
// and mode are inferred from tensor names, shapes and metadata (docs/design.md §8), then the weights are
// imported into the canonical layout. `rnncore run` loads models with exactly this code.
//
//   rnncore::Model model;
//   rnncore::io::LoadOptions opt;
//   opt.plan.max_batch = 8; opt.plan.max_seq_len = 100;
//   std::string err;
//   if (rnncore::io::load_model("lstm.safetensors", opt, &model, nullptr, &err) != rnncore::Status::ok) ...
//   model.forward(args);
#ifndef RNNCORE_IO_MODEL_HPP
#define RNNCORE_IO_MODEL_HPP

#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "rnncore/io/safetensors.hpp"

namespace rnncore {
namespace io {

/// What the user pinned on the command line; empty strings mean "infer".
struct ModelHints {
  std::string format;      ///< pytorch | onnx | keras | tensorflow | canonical
  std::string prefix;      ///< tensor-name prefix, e.g. "lstm."
  bool prefix_given = false;
  std::string mode;        ///< lstm | gru | rnn_tanh | rnn_relu
  std::string gru;         ///< reset-after | reset-before
  std::string input_mode;  ///< linear | skip | auto_select (canonical format only)
  /// TF LSTMCell's forget_bias, added to the f gate's bias (tensorflow format only; empty: metadata
  /// 'forget_bias', else 0 as in CudnnCompatibleLSTMCell). A decimal number.
  std::string forget_bias;
  /// A Dense/Linear head's activation: none, relu, sigmoid, tanh or softmax (empty: metadata
  /// 'head_activation', else none).
  std::string head_activation;
  /// "1" or "true": the head maps each row's last step only (Keras return_sequences=False); "0" or
  /// "false": every step (empty: metadata 'head_last_step', else every step).
  std::string head_last_step;
  DType dtype = DType::f32;
};

/// A loaded model.
struct LoadedModel {
  RnnSpec spec;            ///< the uniform spec read off the weights (layer 0's cell for a stack)
  StackSpec stack;         ///< what runs: to_stack(spec), or the --config stack
  WeightFormat format = WeightFormat::pytorch;
  std::string prefix;
  std::vector<unsigned char> canonical;  ///< param_count(stack) elements of the dtype
  std::vector<std::string> notes;         ///< defaults that were chosen (printed to stderr)
  /// Tensors of the file that the model does not run (another prefix's model, a second head), each
  /// as "name [dims]"; a caller should say so rather than drop them silently.
  std::vector<std::string> ignored;
  /// Tensors of the head and embedding the stack runs (PyTorch Linear / Keras Dense after the last
  /// layer, an Embedding before layer 0: stack.head, stack.embedding), each as "name [dims]".
  std::vector<std::string> ends;
};

/// What load_model needs besides the file.
struct LoadOptions {
  ModelHints hints;                   ///< empty fields: inferred from the file
  const StackSpec* config = nullptr;  ///< layers and wrappers from a stack configuration, or null
  PlanOptions plan;                   ///< max batch and length, backend, threads, training
};

/// Loads a model file and returns a ready Model (planned, allocated, packed) in *out.
/// @param[out] info what was inferred, the notes and the ignored tensors (may be null)
/// @param[out] error one line on failure (file, tensor, expected vs found)
Status load_model(const std::string& path, const LoadOptions& options, Model* out, LoadedModel* info,
                  std::string* error);

/// Loads `path`; on failure returns the status and puts one line naming the file, tensor and
/// expected vs found shape into *error. With `config` (a stack from --config), the layers come from
/// it and the weights must match it; its input_size may be 0 (taken from the weights).
Status load_weights(const std::string& path, const ModelHints& hints, const StackSpec* config, LoadedModel* out,
                  std::string* error);

/// Takes the head and embedding out of a loaded model, for callers that run its recurrent layers
/// only: stack.head and stack.embedding cleared, the canonical weights cut to the layers', the
/// tensors of `ends` moved to `ignored` (and the note that the head runs withdrawn).
void drop_ends(LoadedModel* model);

/// True when every layer has the same cell size and direction, so states are [L·D, B, H].
bool uniform_states(const StackSpec& stack);

/// Parses a mode / GRU variant / format / input mode name; false if unknown.
bool parse_mode(const std::string& s, Mode* out);
bool parse_gru_variant(const std::string& s, GruVariant* out);
bool parse_format(const std::string& s, WeightFormat* out);
bool parse_input_mode(const std::string& s, InputMode* out);

/// Converts a safetensors element type to an rnncore dtype; false for integer types.
bool float_dtype(io::ElemType type, DType* out);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_MODEL_HPP

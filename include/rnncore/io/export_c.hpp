// rnncore — a model file as a C header for firmware that compiles its model in (no file system, no
// loader, no heap): a float model's canonical weights as a const array, its rnncore_spec and the
// exact buffer sizes of its plans; an int8 LSTM model's weights, quantization and folded biases for
// rnncore/int8.h; optionally a sample input with its expected output as test vectors.
// `rnncore export-c` is this function and a file write. The header is deterministic: the same
// model and options give the same bytes on every machine.
//
//   rnncore::io::ExportCOptions o;
//   o.weights = "lstm.safetensors"; o.output = "lstm.h"; o.name = "lstm";
//   std::string header, err;
//   rnncore::io::ExportCReport report;
//   if (rnncore::io::export_c(o, &header, &report, &err) != rnncore::Status::ok) ...
#ifndef RNNCORE_IO_EXPORT_C_HPP
#define RNNCORE_IO_EXPORT_C_HPP

#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "rnncore/io/model.hpp"

namespace rnncore {
namespace io {

/// What to export and how.
struct ExportCOptions {
  ModelHints hints;     ///< how to read a float model (empty fields: inferred; an int8 model takes none)
  std::string weights;  ///< the model file (safetensors)
  std::string output;   ///< the header's path: its base name is the header's first comment
  std::string name;     ///< the C identifier its names start with (NAME_weights, NAME_SPEC_..., NAME_spec)
  std::string sample_input;   ///< a sample to embed ("": none): float [T, B, I]; int8 models int8 [B, T, I] or token ids
  std::string sample_output;  ///< its expected output ("": none; needs sample_input)
  long long max_batch = 0, max_seq_len = 0;  ///< float models: plan sizes for these (0: the sample's, else 1)
  bool interleave = false;  ///< int8 models: LSTM weights in the interleaved layout (Cortex-M's fast kernel)
  bool interleave_i16 = false;  ///< with interleave: the int16 panel layout instead (twice the weight bytes; fewer instructions)
  /// int8 models with the one-call arrays: also NAME_plan, NAME_stack planned by this library (for the sample's
  /// B and T, the portable kernels) as a const rnncore_plan: valid in programs linked with a library of this build
  bool plan = false;
  /// int8 models with an Embedding: NAME_packed with layer 0's token tables (PlanOptions::int8_token_table)
  bool token_table = false;
};

/// What export_c did.
struct ExportCReport {
  /// One line: what the header holds and the sizes (e.g. "lstm_weights[1600]; packed 6400 + workspace 704 bytes ...").
  std::string summary;
  std::vector<std::string> notes;  ///< defaults the loader chose (a command line prints them)
  /// On failure: an option does not fit the model (a command line's usage error).
  bool option_error = false;
};

/// Writes the header's text into *header. On failure returns the status and puts one line in
/// *error (the file, the tensor or option, expected vs found).
Status export_c(const ExportCOptions& options, std::string* header, ExportCReport* report, std::string* error);

/// A C identifier from a path: "models/lstm-small.h" → "lstm_small" (characters outside
/// [A-Za-z0-9_] become '_'; "model_" first where it would start with a digit).
std::string c_identifier_from(const std::string& path);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_EXPORT_C_HPP

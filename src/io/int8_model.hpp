// An integer LSTM model file (safetensors with metadata format=tflite_int8, written by
// tools/tflite_to_safetensors.py from a quantized .tflite model): loading it into the scalar
// reference (src/internal/int8_lstm.hpp) and running it as LiteRT runs the model. Host-side code of
// the io library (it allocates and reads files); `rnncore run` uses it. Contents of the file and the
// semantics: docs/int8.md.
#ifndef RNNCORE_SRC_IO_INT8_MODEL_HPP
#define RNNCORE_SRC_IO_INT8_MODEL_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "rnncore/io/safetensors.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace io {

/// Whether the file is an integer LSTM model (metadata format = tflite_int8).
bool is_int8_model(const SafeTensors& file);

/// A loaded integer LSTM: weights, quantization and the prepared parameters (which point into
/// this object's vectors: it is not copyable).
struct Int8Model {
  int input_size = 0, hidden_size = 0;
  bool return_sequences = true;  ///< false: the model outputs the last step only ([B, H])
  bool float_input = false;      ///< the .tflite model took float input through a QUANTIZE op
  bool float_output = false;     ///< ... and gave float output through a DEQUANTIZE op
  q8::Int8LstmQuantization q;
  std::vector<std::int8_t> w[q8::kGates], r[q8::kGates];
  std::vector<std::int32_t> b[q8::kGates];
  std::vector<std::int32_t> bias_storage;
  q8::Int8LstmParams params;

  Int8Model() = default;
  Int8Model(const Int8Model&) = delete;
  Int8Model& operator=(const Int8Model&) = delete;
};

/// Reads the weights and quantization from `file` and prepares them. On failure returns the status
/// and puts one line naming the file and the tensor or metadata key (expected vs found) in *error.
Status load_int8_model(const SafeTensors& file, Int8Model* out, std::string* error);

/// Quantizes float input as LiteRT's QUANTIZE op does on the CPU, where its default XNNPACK
/// delegate runs it: q = clamp(x · (1/scale), −128 − zp, 127 − zp) rounded half to even, + zp,
/// in float with the reciprocal rounded to float (docs/int8.md; NaN gives zp).
std::int8_t quantize_input(const Int8Model& m, float x);

/// Runs the model on x [B, T, I] (batch-major, as the TFLite op) from the states LiteRT starts
/// with (h = the output state's zero point, c = 0); writes y [B, T, H], or [B, H] (the last step)
/// for a model without return_sequences; and, where not null, the final states hn [B, H] (int8, the
/// op's output state) and cn [B, H] (int16, its cell state), LiteRT's variable tensors after the run.
void run_int8_model(const Int8Model& m, int batch, int seq_len, const std::int8_t* x, std::int8_t* y,
                    std::int8_t* hn = nullptr, std::int16_t* cn = nullptr);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_SRC_IO_INT8_MODEL_HPP

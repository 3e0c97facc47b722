// An integer LSTM model file (safetensors with metadata format=tflite_int8, written by
// tools/tflite_to_safetensors.py from a quantized .tflite model, or by rnncore quantize) read as a
// StackSpec of dtype i8 and its canonical bytes, which a Model runs (io::load_model, io::Int8Runner)
// and export-c writes out. Host-side code of the io library (it allocates and reads files).
// Contents of the file and the semantics: docs/int8.md.
#ifndef RNNCORE_SRC_IO_INT8_MODEL_HPP
#define RNNCORE_SRC_IO_INT8_MODEL_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "rnncore/io/int8_file.hpp"
#include "rnncore/io/safetensors.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace io {

/// An int8 model file as a StackSpec of dtype i8 and its canonical bytes (param_count of it). The
/// file's Dense layers are the chain (pre_head, head); a softmax with no Dense layer before it, or
/// after an activated one, and a last-step output with no Dense layer become a head the file does
/// not have: a Dense layer of weights I at scale 1 (an exact copy) with the softmax, or with
/// head.last_step_only. Each LSTM direction and Dense layer is prepared once to check its
/// quantization. Errors: one line naming the file and the tensor, metadata key or layer (expected
/// vs found); what a StackSpec does not hold (more Dense layers than a chain has, bidirectional
/// directions of different widths) is unsupported.
Status load_int8_spec(const SafeTensors& file, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error);

/// Whether Dense k of an integer stack's chain is a head the file does not have (load_int8_spec):
/// weights I at scale 1, bias 0 -- a copy of its input.
bool int8_identity_dense(const StackSpec& st, const unsigned char* canonical, int k);

/// One LSTM direction (l, d) of an integer stack, read in place from its canonical bytes: its
/// sizes, its quantization as prepare takes it (per channel: the scales in the bytes), and W, R
/// (row-major) and b per gate -- what the single-layer C API (rnncore/int8.h) takes.
struct Int8Direction {
  int input_size = 0, hidden_size = 0;
  q8::Int8LstmQuantization q;
  const std::int8_t* w[q8::kGates] = {};
  const std::int8_t* r[q8::kGates] = {};
  const std::int32_t* b[q8::kGates] = {};
};
Int8Direction int8_direction(const StackSpec& st, const unsigned char* canonical, int l, int d);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_SRC_IO_INT8_MODEL_HPP

// An integer LSTM model file (safetensors with metadata format=tflite_int8, written by
// tools/tflite_to_safetensors.py from a quantized .tflite model): loading it (each layer prepared
// for the scalar reference, src/internal/int8_lstm.hpp, which the int8.h tests and export-c read)
// and turning it into a StackSpec of dtype i8 and its canonical bytes, which a Model runs
// (int8_stack_spec: io::load_model and io::Int8Runner). Host-side code of the io library (it
// allocates and reads files). Contents of the file and the semantics: docs/int8.md.
#ifndef RNNCORE_SRC_IO_INT8_MODEL_HPP
#define RNNCORE_SRC_IO_INT8_MODEL_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnncore/io/int8_file.hpp"
#include "rnncore/io/safetensors.hpp"
#include "src/internal/int8_dense.hpp"
#include "src/internal/int8_activations.hpp"
#include "src/internal/int8_elementwise.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace io {

/// A loaded integer LSTM: weights, quantization and the prepared parameters (which point into
/// this object's vectors: it is not copyable).
struct Int8Model {
  int input_size = 0, hidden_size = 0;
  bool return_sequences = true;  ///< false: the model outputs the last step only ([B, H])
  bool float_input = false;      ///< the .tflite model took float input through a QUANTIZE op
  bool float_output = false;     ///< ... and gave float output through a DEQUANTIZE op
  bool reverse_input = false;    ///< the model reverses the time axis first (Keras go_backwards)
  q8::Int8LstmQuantization q;
  std::vector<std::int8_t> w[q8::kGates], r[q8::kGates];
  std::vector<std::int32_t> b[q8::kGates];
  /// Per-channel weight scales ([H] per gate; empty per tensor), which q points into.
  std::vector<float> w_scales[q8::kGates], r_scales[q8::kGates];
  std::vector<std::int32_t> bias_storage;  ///< prepare's storage: folded biases (and per channel the multipliers)
  q8::Int8LstmParams params;
  /// A bidirectional layer (Keras Bidirectional; metadata l<k>.bidirectional): the backward
  /// direction, which reads the layer's input with the time axis reversed; this object is then the
  /// forward direction. Null for a one-direction layer.
  std::unique_ptr<Int8Model> backward;
  /// How a bidirectional layer joins its directions (Keras merge_mode; the metadata's value):
  /// concat copies [forward, backward]; sum is an int8 ADD, mul an int8 MUL, ave an ADD and then a
  /// MUL by the quantized constant 0.5 (src/internal/int8_elementwise.hpp).
  enum class Merge { concat, sum, mul, ave };
  Merge merge = Merge::concat;
  q8::Int8AddParams merge_add{};  ///< sum, ave: forward + backward
  q8::Int8MulParams merge_mul{};  ///< mul: forward · backward; ave: the sum · merge_half
  std::int8_t merge_half = 0;   ///< ave: the MUL's constant operand (0.5 in its quantization)
  /// The merge's quantization as the file states it (operands; ave: the sum and the constant).
  q8::Int8Quant merge_fw{}, merge_bw{}, merge_sum{}, merge_half_quant{};
  /// The layer's int8 output as the next layer reads it: the output state's quantization, or for
  /// a bidirectional layer the CONCATENATION's or the merge's (metadata l<k>.output_scale/zp):
  /// LiteRT's integer LSTM copies its output state to its output without requantizing, and the
  /// concatenation copies.
  float output_scale = 0.0f;
  std::int32_t output_zp = 0;
  /// Width of the layer's output: H, or H of both directions for a concatenating bidirectional layer.
  int output_size() const { return hidden_size + (backward && merge == Merge::concat ? backward->hidden_size : 0); }

  Int8Model() = default;
  Int8Model(const Int8Model&) = delete;
  Int8Model& operator=(const Int8Model&) = delete;
};

/// A Dense layer after the LSTMs (TFLite FULLY_CONNECTED on the last step): weights and
/// quantization as the file states them, and the prepared parameters (pointing into this object).
struct Int8Dense {
  int in_size = 0, out_size = 0;
  std::vector<std::int8_t> w;        ///< [out, in]
  std::vector<std::int32_t> b;       ///< [out]
  std::vector<float> w_scales;       ///< [out] or [1]
  q8::Int8DenseQuantization q;
  std::vector<std::int32_t> bias_storage;
  std::vector<float> scale_storage;
  q8::Int8DenseParams params;
  /// A sigmoid or tanh after the layer (metadata activation sigmoid / tanh): its table maps the
  /// FULLY_CONNECTED's output (q.output_*: metadata linear_scale / linear_zp) to the layer's.
  bool has_table = false;
  q8::TableActivation table_function = q8::TableActivation::sigmoid;
  std::int8_t table[256] = {};
  float table_output_scale = 0.0f;
  std::int32_t table_output_zp = 0;
  /// The quantization of what the layer writes (after its table activation, if any).
  float output_scale() const { return has_table ? table_output_scale : q.output_scale; }
  std::int32_t output_zp() const { return has_table ? table_output_zp : q.output_zp; }

  Int8Dense() = default;
  Int8Dense(const Int8Dense&) = delete;
  Int8Dense& operator=(const Int8Dense&) = delete;
};

/// A stack of integer LSTM layers (a file with metadata layers = L, each layer's tensors and keys
/// prefixed "l<k>."; a single-layer file is a stack of one): layer k reads layer k-1's int8
/// output, every step of it. The model-level flags are the stack's; each layer's say how it runs
/// inside the stack (only the last may return the last step alone).
struct Int8Stack {
  std::vector<std::unique_ptr<Int8Model>> layers;
  std::vector<std::unique_ptr<Int8Dense>> dense;  ///< Dense layers on the last step (metadata dense, fc<j>.)
  bool return_sequences = true, float_input = false, float_output = false;
  bool reverse_input = false;  ///< the steps are read last to first (Keras go_backwards; metadata reverse_input)
  /// A softmax on the output (the last Dense layer's, else the last step; metadata softmax=1).
  bool has_softmax = false;
  float softmax_beta = 1.0f;
  float softmax_input_scale = 0.0f;
  std::int32_t softmax_input_zp = 0;
  float softmax_output_scale = 0.0f;
  std::int32_t softmax_output_zp = 0;
  q8::Int8SoftmaxParams softmax;
  /// A Keras Embedding first (metadata embedding=1, graph_input=token_ids; "embedding." keys): the
  /// model's input is token ids [B, T], each replaced by its row of `table` -- LiteRT's GATHER, a
  /// copy: the rows are already the first layer's int8 input (embed_scale / embed_zp are its).
  bool has_embedding = false;
  int vocab = 0, embed_dim = 0;
  std::vector<std::int8_t> table;  ///< [vocab, embed_dim]
  float embed_scale = 0.0f;
  std::int32_t embed_zp = 0;
  /// Width of the model's output: the last Dense layer's, else the last LSTM's.
  int output_size() const { return dense.empty() ? layers.back()->output_size() : dense.back()->out_size; }
  /// Whether some layer is bidirectional.
  bool bidirectional() const {
    for (const auto& l : layers)
      if (l->backward) return true;
    return false;
  }
};

/// The stack as a StackSpec of dtype i8 and its canonical bytes (param_count of it), for Plan and
/// Model. A softmax with no Dense layer before it, or after an activated one, and a last-step
/// output with no Dense layer become a head the file does not have: a Dense layer of weights I at
/// scale 1 (an exact copy) with the softmax, or with head.last_step_only. Refuses (unsupported, one
/// line in *error naming the layer) what a StackSpec does not hold: more Dense layers than a chain
/// has, and bidirectional layers whose directions differ in width. `rows_in`: the caller gives
/// int8 rows (the embedding's, or its input already quantized, steps in the file's order) and
/// takes int8 output: the spec then has no embedding, no reverse_input and no float input or output.
Status int8_stack_spec(const Int8Stack& s, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error,
                       bool rows_in = false);

/// An int8 model file as a StackSpec of dtype i8 and its canonical bytes (what io::load_model,
/// io::Int8Runner and export-c read). Errors: one line naming the file and the tensor, metadata key
/// or layer.
Status load_int8_spec(const SafeTensors& file, StackSpec* spec, std::vector<unsigned char>* canonical, std::string* error);

/// Whether Dense k of an integer stack's chain is a head the file does not have (int8_stack_spec):
/// weights I at scale 1, bias 0 -- a copy of its input.
bool int8_identity_dense(const StackSpec& st, const unsigned char* canonical, int k);

/// Layers of an int8 model file: its metadata 'layers', 1 when absent.
int int8_layer_count(const SafeTensors& file);

/// Reads the weights and quantization of a single-layer file and prepares them. On failure
/// returns the status and puts one line naming the file and the tensor or metadata key (expected
/// vs found) in *error; a stack of several layers is refused (unsupported: load_int8_stack).
Status load_int8_model(const SafeTensors& file, Int8Model* out, std::string* error);

/// Reads every layer of a file (single-layer or stack), checking that each layer's input is the
/// previous layer's output (width, scale and zero point). Errors as load_int8_model.
Status load_int8_stack(const SafeTensors& file, Int8Stack* out, std::string* error);

/// Looks up n token ids in the stack's embedding table (Int8Stack::has_embedding), writing n rows
/// of embed_dim int8 values to x. Returns n, or the position of the first id outside [0, vocab)
/// (LiteRT's GATHER fails on it too; x is then partly written).
std::size_t embed_ids(const Int8Stack& s, std::size_t n, const std::int64_t* ids, std::int8_t* x);

/// Quantizes float input as LiteRT's QUANTIZE op does on the CPU, where its default XNNPACK
/// delegate runs it: q = clamp(x · (1/scale), −128 − zp, 127 − zp) rounded half to even, + zp,
/// in float with the reciprocal rounded to float (docs/int8.md; NaN gives zp).
std::int8_t quantize_input(const Int8Model& m, float x);

/// Elements of a stack's states for `batch` rows: Σ B·H over its layers and directions.
std::size_t int8_state_elements(const Int8Stack& s, int batch);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_SRC_IO_INT8_MODEL_HPP

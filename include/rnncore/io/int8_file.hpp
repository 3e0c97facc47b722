// rnncore — integer LSTM model files on a host (format tflite_int8, docs/int8.md): whether a file
// is one and where it came from, loading it and running it as LiteRT runs the model, the integer
// kernels this process runs, and a random stack to time them. Host-side (it allocates); the
// firmware path is the C API rnncore/int8.h.
//
//   rnncore::io::SafeTensors file;
//   rnncore::io::read_safetensors("q.safetensors", &file);
//   rnncore::io::Int8Runner model;
//   std::string err;
//   if (rnncore::io::Int8Runner::load(file, &model, &err) != rnncore::Status::ok) ...
//   model.run(B, T, x, y);  // x int8 [B, T, I], y int8 [B, T, H] (or [B, H])
#ifndef RNNCORE_IO_INT8_FILE_HPP
#define RNNCORE_IO_INT8_FILE_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "rnncore/io/safetensors.hpp"

namespace rnncore {
namespace io {

/// Whether the file is an integer LSTM model (metadata format = tflite_int8).
bool is_int8_model(const SafeTensors& file);

/// Where an integer LSTM model file came from, for messages, from its metadata 'source':
/// "written by rnncore quantize from F" (F: metadata 'float_model'), else "converted by
/// tools/tflite_to_safetensors.py from S" (S: the .tflite file's name).
std::string int8_model_origin(const SafeTensors& file);

/// The integer LSTM kernels of this process within `cap` and RNNCORE_MAX_ISA: the matrix-vector
/// kernel (e.g. "i8_dot_4x16__avx2") and the step kernels ("gate / cell", or "scalar").
struct Int8KernelNames {
  std::string dot, step;
};
Int8KernelNames int8_best_kernels(Isa cap = Isa::best);

/// An integer LSTM model file loaded and prepared to run (a stack of LSTM layers, each one- or
/// bidirectional, optionally an Embedding first and Dense layers and a softmax last): the file as an
/// int8 StackSpec (int8 rows in: the caller quantizes or embeds the input and reads the steps in the
/// model's order) run by a Model, bit for bit what `rnncore run` writes. Movable, not copyable.
class Int8Runner {
 public:
  Int8Runner();
  ~Int8Runner();
  Int8Runner(Int8Runner&&) noexcept;
  Int8Runner& operator=(Int8Runner&&) noexcept;

  /// Reads every layer of the file and makes its StackSpec. On failure returns the status and puts
  /// one line naming the file and the tensor, metadata key or layer (expected vs found) in *error;
  /// a shape no StackSpec holds (bidirectional directions of different widths) is unsupported.
  static Status load(const SafeTensors& file, Int8Runner* out, std::string* error);

  int input_size() const;    ///< I of the first layer (the embedding's width with an Embedding)
  int output_size() const;   ///< width of the model's output per step (or of the last step)
  bool return_sequences() const;  ///< false: the output is the last step's only, [B, out]
  bool reverse_input() const;     ///< the steps are read last to first (Keras go_backwards)
  bool has_embedding() const;     ///< the input is token ids [B, T] (embed_ids)
  int vocab() const;              ///< with an Embedding: the ids it takes are 0 .. vocab − 1

  /// Elements of the states for `batch` rows (Σ B·H over the layers and directions), and the
  /// shape they are written in: [B, H] for one LSTM, [L·D, B, H] for LSTMs of one width, else
  /// the elements flattened.
  std::size_t state_elements(int batch) const;
  std::vector<std::int64_t> state_shape(std::int64_t batch) const;

  /// Float input quantized as LiteRT's QUANTIZE op does on the CPU (docs/int8.md).
  std::int8_t quantize_input(float x) const;
  /// Looks up n token ids in the embedding, writing n rows of input_size() values to x. Returns n,
  /// or the position of the first id outside [0, vocab).
  std::size_t embed_ids(std::size_t n, const std::int64_t* ids, std::int8_t* x) const;

  /// Plans the model's Model for `batch` rows, `seq_len` steps and `threads` threads (run() plans
  /// itself for larger calls, on the threads last given). Errors: the plan's, one line in *error.
  Status plan(int batch, int seq_len, int threads, std::string* error);

  /// Runs the model on x int8 [B, T, I] (batch-major; steps in the file's order: reverse them
  /// first where reverse_input()), y int8 [B, T, out] or [B, out]. States (each may be null): h
  /// int8 and c int16, state_elements(batch) each; null h0 / c0 start as LiteRT's do.
  void run(int batch, int seq_len, const std::int8_t* x, std::int8_t* y, const std::int8_t* h0 = nullptr,
           const std::int16_t* c0 = nullptr, std::int8_t* hn = nullptr, std::int16_t* cn = nullptr) const;

  /// What the model is, one line each: "model: int8 LSTM (...)", then "then Dense ..." and
  /// "then softmax ..." lines where it has them.
  std::vector<std::string> describe() const;
  /// The embedding, for a line about the input: "an embedding V x E (int8 rows, scale S, zero point Z)".
  std::string describe_embedding() const;
  /// The kernels the model's LSTM layers run: "i8_dot_4x16__avx2 + i32_gate_act_8__avx2 /
  /// i16_cell_update_8__avx2", with "scalar step" where the step has no SIMD kernels.
  std::string kernel_names() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A stack of `layers` integer LSTMs (input `input`, hidden `hidden`; layer l > 0 takes the H
/// outputs of layer l − 1) on deterministic random weights with the quantization of a Keras
/// conversion with a cell clip, to time (`rnncore bench --dtype int8` runs it on a Model as it runs
/// a float stack): the StackSpec of dtype i8 and its canonical bytes. Errors: validate's, one line
/// in *error.
Status int8_bench_stack(int input, int hidden, int layers, StackSpec* spec, std::vector<unsigned char>* canonical,
                        std::string* error);

/// What an integer stack (dtype i8) is, one line each, as `rnncore run` prints it: "model: int8
/// LSTM (...) I=.. H=.., ...; cell scale 2^..", then "then Dense ..." lines (a Dense of weights I
/// at scale 1 that io::load_model adds for a softmax or a last step is no line) and "then softmax
/// ...". `canonical`: the stack's canonical bytes.
std::vector<std::string> int8_describe(const StackSpec& stack, const unsigned char* canonical);
/// The shape an integer stack's states are written in for `batch` rows (`rnncore run --hn`, the
/// Python states): [B, H] for one LSTM, [L·D, B, H] for LSTMs of one width, else the
/// state_elements flattened (layer by layer, a bidirectional layer's forward direction first).
std::vector<std::int64_t> int8_state_shape(const StackSpec& stack, std::int64_t batch);
/// The embedding, for a line about the input: "an embedding V x E (int8 rows, scale S, zero point Z)".
std::string int8_describe_embedding(int vocab, int dim, const QuantParams& rows);

/// The kernels a plan of an integer stack runs: "DOT + GATE / CELL" (e.g. "i8_dot_4x16__avx2 +
/// i32_gate_act_8__avx2 / i16_cell_update_8__avx2"), or "DOT + scalar step" where the step runs
/// its scalar code (the portable kernels: Isa::none).
std::string int8_plan_kernels(const Plan& plan);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_INT8_FILE_HPP

// rnncore — fused recurrent layers (LSTM, GRU, Elman RNN) with cuDNN / CudnnLSTM semantics.
//
// The C++ API. Usage in four steps, none of which throws:
//   1. describe the network (RnnSpec) and check it (validate);
//   2. plan it for a maximum batch and length (Plan::create): the plan reports the exact bytes of
//      the packed-weight buffer and the workspace;
//   3. import weights into the canonical layout (import_weights) and pack them once (Plan::pack_weights);
//   4. run (Plan::forward) any number of times in caller-owned memory: no allocation, no exceptions.
// Training (PlanOptions::training): forward with a reserve space, then Plan::backward for the
// gradients of inputs, initial states and weights (docs/training.md).
// Model bundles steps 2–4 for hosts that may allocate once.
// Semantics, layouts and formats: docs/ and the design contract (docs/design.md §2–4, §7).
#ifndef RNNCORE_RNNCORE_HPP
#define RNNCORE_RNNCORE_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/config.h"
#include "rnncore/status.h"

namespace rnncore {

/// Library version; bumped with any change to semantics or the mask function.
constexpr int kVersionMajor = 0;
constexpr int kVersionMinor = 1;
constexpr int kVersionPatch = 0;
/// Human-readable version string, e.g. "0.1.0".
const char* version_string();

/// Alignment in bytes that packed-weight and workspace buffers must have.
constexpr std::size_t kAlignment = 64;
/// Largest number of layers a plan holds (stacks are described inline, without allocation): 16, or
/// the build's meson option max_layers (RNNCORE_MAX_LAYERS, rnncore/config.h).
constexpr int kMaxLayers = RNNCORE_MAX_LAYERS;

/// Status codes; identical values to the C enum rnncore_status.
enum class Status : std::int32_t {
  ok = RNNCORE_OK,
  null_pointer = RNNCORE_ERR_NULL_POINTER,
  invalid_enum = RNNCORE_ERR_INVALID_ENUM,
  invalid_size = RNNCORE_ERR_INVALID_SIZE,
  skip_needs_equal_sizes = RNNCORE_ERR_SKIP_NEEDS_EQUAL_SIZES,
  unsupported = RNNCORE_ERR_UNSUPPORTED,
  batch_too_large = RNNCORE_ERR_BATCH_TOO_LARGE,
  seq_too_long = RNNCORE_ERR_SEQ_TOO_LONG,
  bad_length = RNNCORE_ERR_BAD_LENGTH,
  buffer_too_small = RNNCORE_ERR_BUFFER_TOO_SMALL,
  misaligned = RNNCORE_ERR_MISALIGNED,
  weights_not_packed = RNNCORE_ERR_WEIGHTS_NOT_PACKED,
  tensor_missing = RNNCORE_ERR_TENSOR_MISSING,
  tensor_shape = RNNCORE_ERR_TENSOR_SHAPE,
  tensor_dtype = RNNCORE_ERR_TENSOR_DTYPE,
  tensor_unexpected = RNNCORE_ERR_TENSOR_UNEXPECTED,
  bad_probability = RNNCORE_ERR_BAD_PROBABILITY,
  width_mismatch = RNNCORE_ERR_WIDTH_MISMATCH,
  backend_unavailable = RNNCORE_ERR_BACKEND_UNAVAILABLE,
  io = RNNCORE_ERR_IO,
  format = RNNCORE_ERR_FORMAT,
  out_of_memory = RNNCORE_ERR_OUT_OF_MEMORY,
  internal = RNNCORE_ERR_INTERNAL,
  device = RNNCORE_ERR_DEVICE,
};

/// Stable message of a status code.
inline const char* status_message(Status s) { return rnncore_status_message(static_cast<rnncore_status>(s)); }
/// Detail of the most recent failure on this thread (names the argument, tensor or shape).
inline const char* last_error_detail() { return rnncore_last_error_detail(); }

/// Cell type (docs/design.md §2).
enum class Mode : std::int32_t { lstm = 0, gru = 1, rnn_tanh = 2, rnn_relu = 3 };
/// Where a GRU applies its reset gate: after the recurrent product (cuDNN, PyTorch) or before (TF GRUCell, ONNX default).
enum class GruVariant : std::int32_t { reset_after = 0, reset_before = 1 };
/// Unidirectional, or bidirectional with the forward direction first in outputs and states.
enum class Direction : std::int32_t { unidirectional = 0, bidirectional = 1 };
/// Layer-0 input handling: a linear projection, the input itself (needs input_size == hidden_size), or skip when sizes match.
enum class InputMode : std::int32_t { linear = 0, skip = 1, auto_select = 2 };
/// Element types. Activations and canonical weights are f32 or f64; f16 / bf16 are weight storage types;
/// i8 is an integer stack (StackSpec::dtype, docs/int8.md): int8 activations and weights, LiteRT's
/// 8x8_16 integer LSTM.
enum class DType : std::int32_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i8 = 4 };
/// Time-major [T, B, ·] or batch-major [B, T, ·] inputs and outputs.
enum class Layout : std::int32_t { time_major = 0, batch_major = 1 };
/// Which implementation runs a plan.
enum class Backend : std::int32_t { auto_select = 0, reference = 1, simd = 2, gpu = 3 };
/// Instruction sets of the SIMD backend, lowest first (a cap on it forces lower paths).
enum class Isa : std::int32_t { none = 0, sse2 = 1, avx2 = 2, avx512 = 3, neon = 4, best = 100 };

/// Instruction sets of the SIMD backend that this build has and this CPU runs, lowest first.
/// @param[out] out up to `capacity` entries  @return the number written
int available_isas(Isa* out, int capacity);

/// Number of gates of a cell type: 4 (LSTM), 3 (GRU), 1 (Elman RNN).
int num_gates(Mode mode);
/// Name of an enum value as used on the command line ("lstm", "reset-after", "avx2", ...).
const char* to_string(Mode mode);
const char* to_string(GruVariant variant);
const char* to_string(Backend backend);
const char* to_string(Isa isa);
const char* to_string(DType dtype);

/// A uniform stack of recurrent layers: TensorFlow's CudnnLSTM / CudnnGRU / CudnnRNN{Tanh,Relu}.
struct RnnSpec {
  Mode mode = Mode::lstm;
  GruVariant gru_variant = GruVariant::reset_after;  ///< used when mode == gru
  std::int32_t input_size = 0;                       ///< I: features of the layer-0 input
  std::int32_t hidden_size = 0;                      ///< H: units per direction
  std::int32_t num_layers = 1;                       ///< L: 1..kMaxLayers
  Direction direction = Direction::unidirectional;
  InputMode input_mode = InputMode::linear;
  DType dtype = DType::f32;  ///< activations and canonical weights: f32 or f64
  double dropout = 0.0;      ///< CudnnLSTM inter-layer dropout p in [0, 1): every layer's output but the last, in dropout runs
  /// LSTM only (TF LSTMCell, PyTorch nn.LSTM; docs/weights.md "LSTM extensions"). Inference and training on the CPU backends; the GPU backend runs peepholes and the cell clip in inference and refuses the rest.
  std::int32_t proj_size = 0;  ///< P: h = W_proj (o ⊙ tanh(c)) has P units (0: no projection; else 1..H−1)
  bool peepholes = false;      ///< i, f see p_i ⊙ c_{t−1}, p_f ⊙ c_{t−1}; o sees p_o ⊙ c_t (TF use_peepholes)
  double cell_clip = 0.0;      ///< c clipped to [−clip, clip] after its update (0: none; TF cell_clip)
  double proj_clip = 0.0;      ///< the projection clipped to [−clip, clip] (0: none; needs proj_size; TF proj_clip)
};

/// Which parts of the outgoing state a DropoutWrapper's state dropout touches
/// (TF's dropout_state_filter_visitor).
enum class StateFilter : std::int32_t {
  default_filter = 0,  ///< every part but the LSTM c (TF's default): h
  h_and_c = 1,
  c_only = 2,
  none = 3,
};

/// tf.nn.rnn_cell.DropoutWrapper: dropout on the cell's input, output and outgoing state. Kept values
/// are scaled by 1/keep; masks come from the mask function (docs/dropout.md).
struct DropoutWrapper {
  double input_keep = 1.0;   ///< keep probability of the cell input, in (0, 1]
  double output_keep = 1.0;  ///< keep probability of the cell output, in (0, 1]
  double state_keep = 1.0;   ///< keep probability of the outgoing state, in (0, 1]
  bool variational = false;  ///< one mask per run, the same at every time step (Gal & Ghahramani)
  bool per_sequence = false;  ///< variational: each row its own mask (Keras); default: TF's mask shared by the batch
  StateFilter state_filter = StateFilter::default_filter;
  bool has_seed = false;      ///< use `seed` instead of the run's seed
  std::uint64_t seed = 0;
};

/// A custom residual function, result = fn(input, cell_output), called per row with `width` elements.
/// Null function pointers mean element-wise addition (TF's default).
struct ResidualFn {
  void (*f32)(const float* input, const float* output, float* result, std::int32_t width, void* user_data) = nullptr;
  void (*f64)(const double* input, const double* output, double* result, std::int32_t width, void* user_data) = nullptr;
  void* user_data = nullptr;
};

/// Cell wrappers (TF's DropoutWrapper and ResidualWrapper).
enum class WrapperKind : std::int32_t { dropout = 0, residual = 1 };
struct Wrapper {
  WrapperKind kind = WrapperKind::dropout;
  DropoutWrapper dropout;  ///< kind == dropout
  ResidualFn residual;     ///< kind == residual (needs the cell's input width == hidden size)
};
/// Largest number of wrappers around one cell.
constexpr int kMaxWrappers = 4;

/// An int8 tensor's quantization: real value = scale · (q − zero_point).
struct QuantParams {
  float scale = 0.0f;
  std::int32_t zero_point = 0;
};

/// One direction of an integer LSTM layer (StackSpec::dtype i8; TFLite's 8x8_16 integer LSTM, gate
/// order i, f, g, o). Its input's quantization is the previous layer's output (layer 0: the
/// stack's input_quant); its output is its state h.
struct Int8LstmQuant {
  float w_scale[4] = {};   ///< symmetric per-tensor scales of the input weights W_g
  float r_scale[4] = {};   ///< and of the recurrent weights R_g
  /// Per output channel instead: [H] scales per gate in the canonical weights (ParamKind::weight_scale).
  bool per_channel = false;
  QuantParams state;       ///< the int8 output state h (the layer's output)
  QuantParams hidden;      ///< o ⊙ tanh(c) (TFLite's effective hidden scale; = state without projection)
  float cell_scale = 0.0f; ///< the int16 cell state: a power of two, 2^-30 .. 2^-9
  float cell_clip = 0.0f;  ///< real clip of the cell state (0: none)
};

/// How an int8 bidirectional layer joins its directions (Keras Bidirectional merge_mode).
enum class MergeMode : std::int32_t { concat = 0, sum = 1, mul = 2, ave = 3 };

/// The int8 merge of a bidirectional layer: the operands' quantization as the ADD / MUL reads them,
/// the result's (LayerSpec::int8_output) and, for ave, the sum's and the constant 0.5's.
struct Int8Merge {
  MergeMode mode = MergeMode::concat;
  QuantParams fw, bw;         ///< sum, mul, ave
  QuantParams sum;            ///< ave: the ADD's output
  QuantParams half;           ///< ave: the constant's quantization
  std::int32_t half_value = 0;  ///< ave: the constant 0.5 quantized
};

/// One layer of a stack: a cell (per direction) with its wrappers, innermost first.
struct LayerSpec {
  Mode mode = Mode::lstm;
  GruVariant gru_variant = GruVariant::reset_after;
  std::int32_t hidden_size = 0;
  Direction direction = Direction::unidirectional;
  /// LSTM extensions, as in RnnSpec: projection size P (0: none), peepholes, cell and projection clips (0: none).
  std::int32_t proj_size = 0;
  bool peepholes = false;
  double cell_clip = 0.0;
  double proj_clip = 0.0;
  std::int32_t num_wrappers = 0;
  Wrapper wrappers[kMaxWrappers];  ///< wrappers[0] wraps the cell, wrappers[1] wraps that, ...
  /// Integer stacks (StackSpec::dtype i8; an LSTM without extensions or wrappers): each direction's
  /// quantization, the merge of a bidirectional layer, and the quantization of the layer's output
  /// (one direction: its state's; concat: both states' bytes as they are, read with this).
  Int8LstmQuant int8[2];
  Int8Merge merge;
  QuantParams int8_output;
};

/// An Embedding before layer 0 (PyTorch nn.Embedding, Keras Embedding): the stack's input x is then
/// integer token ids (int32, [T, B] or [B, T]) and layer 0 reads row id of the table
/// [vocab_size, input_size]. An id outside 0..vocab_size−1 is refused by forward (on the GPU, where
/// the ids are device memory, it gives a row of NaN instead).
struct EmbeddingSpec {
  std::int32_t vocab_size = 0;  ///< rows of the table; 0: no embedding
};

/// Dense layers a stack may have before its head (StackSpec::pre_head).
constexpr int kMaxPreHead = 3;

/// What a Dense head applies after its affine map (softmax: over the out_features of one row).
enum class Activation : std::int32_t { none = 0, relu = 1, sigmoid = 2, tanh = 3, softmax = 4 };

/// A Dense head after the last layer (PyTorch nn.Linear, Keras Dense): y = act(W o + b) with W
/// [out_features, D·O] and b [out_features], o the last layer's output row.
struct DenseSpec {
  std::int32_t out_features = 0;  ///< 0: no head
  Activation activation = Activation::none;
  /// false: the head maps every step's output, y is [T, B, out_features] (or [B, T, ·]), zero past a
  /// row's length. true (Keras return_sequences=False): y is [B, out_features] of each row's last
  /// output — the forward direction's at step len−1, a reverse direction's at step 0, each direction's
  /// last in its own order (a row of length 0 gives zeros).
  bool last_step_only = false;
  /// Integer stacks: the head is TFLite's FULLY_CONNECTED (relu fused) and, for sigmoid / tanh /
  /// softmax, LiteRT's LOGISTIC / TANH / SOFTMAX after it.
  bool int8_per_channel = false;  ///< W's scales: [out_features] (ParamKind::weight_scale), else one
  float int8_w_scale = 0.0f;      ///< per tensor: W's symmetric scale
  QuantParams int8_linear;        ///< the product's output (the activation's input)
  QuantParams int8_output;        ///< sigmoid, tanh, softmax: the activation's output
  float int8_softmax_beta = 1.0f;
};

/// A stack of layers, each with its own cell, size, direction and wrappers (GNMT-style stacks);
/// a CudnnLSTM (RnnSpec) is the uniform case. Layer l > 0 reads layer l−1's output.
/// Optionally an Embedding feeds layer 0 and a Dense head maps the last layer's output
/// (CPU backends, inference and training; the GPU backend refuses them for now).
struct StackSpec {
  std::int32_t input_size = 0;                ///< features of the stack's input (the embedding's width with one)
  InputMode input_mode = InputMode::linear;   ///< layer 0's input mode
  DType dtype = DType::f32;
  double dropout = 0.0;                       ///< inter-layer dropout p in [0, 1)
  std::int32_t num_layers = 0;
  LayerSpec layers[kMaxLayers];
  EmbeddingSpec embedding;                    ///< before layer 0 (vocab_size 0: none)
  DenseSpec head;                             ///< after the last layer (out_features 0: none)
  /// Dense layers between the last layer and the head (an MLP head: Linear → ReLU → Linear):
  /// pre_head[0] maps the last layer's output, pre_head[k] maps pre_head[k−1]'s, the head maps the
  /// last one's. They need a head; the head's last_step_only chooses the rows for the whole chain
  /// (theirs stays false). Integer stacks: each is a FULLY_CONNECTED with its own int8_* fields (the
  /// softmax only on the head). Float stacks train them on every backend (their dW, db in dweights
  /// at their canonical offsets).
  std::int32_t num_pre_head = 0;              ///< 0..kMaxPreHead
  DenseSpec pre_head[kMaxPreHead];
  /// Integer stacks: layer 0's int8 input (the embedding's rows with one); x is int8, or f32
  /// quantized as LiteRT's QUANTIZE does (float_input); y is int8, or f32 dequantized (float_output).
  QuantParams input_quant;
  bool float_input = false;
  bool float_output = false;
  /// Integer stacks: the stack reads x's steps last to first (Keras go_backwards on its first
  /// layer): y's step k (and a last-step head's input) is the step that read x[T−1−k].
  bool reverse_input = false;
};

/// The uniform stack equal to a CudnnLSTM-style spec.
StackSpec to_stack(const RnnSpec& spec);

/// Checks a spec; on failure last_error_detail() names the field.
/// @param[in] spec the network description
Status validate(const RnnSpec& spec);
/// 1 or 2.
int num_directions(const RnnSpec& spec);
/// Input width of layer `layer`: input_size for layer 0, directions × hidden_size above.
int layer_input_size(const RnnSpec& spec, int layer);
/// True when layer 0 runs in skip mode (input_mode skip, or auto_select with input_size == hidden_size).
bool uses_skip_input(const RnnSpec& spec);
/// True when an LSTM layer uses a projection, peepholes or a clip (the reference backend runs these).
bool has_lstm_extensions(const LayerSpec& layer);
/// Units of a layer's output and of its h state per direction: proj_size when it projects, else hidden_size.
int output_size(const LayerSpec& layer);
/// Bytes of one element of a dtype.
std::size_t dtype_size(DType dtype);

/// A tensor shape of up to four dimensions.
struct Shape {
  std::int32_t ndim = 0;
  std::int64_t dims[4] = {0, 0, 0, 0};
  std::int64_t elements() const;
};

/// Stack versions of the queries above (the RnnSpec ones are these applied to to_stack(spec)).
Status validate(const StackSpec& stack);
/// Width of one row of y: the head's out_features, else D·O of the last layer.
int stack_output_size(const StackSpec& stack);
const char* to_string(Activation activation);
int num_directions(const LayerSpec& layer);
/// Width of a layer's output row: D·O, or H for an integer bidirectional layer that merges its directions.
int layer_output_width(const LayerSpec& layer);
int layer_input_size(const StackSpec& stack, int layer);
bool uses_skip_input(const StackSpec& stack);

/// Elements of an h state tensor for `batch` rows: Σ over layers and directions of batch × O_l, where
/// O_l = output_size (H_l, or P_l with a projection). For a uniform stack this is [L·D, B, O]; it is
/// also the c tensor's size unless some layer projects (then see cell_state_elements).
std::int64_t state_elements(const StackSpec& stack, int batch);
/// Element offset of the [batch, O_l] block of (layer, direction) in an h state tensor.
std::int64_t state_offset(const StackSpec& stack, int batch, int layer, int direction);
/// Elements of a c state tensor: Σ over layers and directions of batch × H_l ([L·D, B, H] when uniform).
std::int64_t cell_state_elements(const StackSpec& stack, int batch);
/// Element offset of the [batch, H_l] block of (layer, direction) in a c state tensor.
std::int64_t cell_state_offset(const StackSpec& stack, int batch, int layer, int direction);

/// Kinds of canonical parameter (docs/design.md §4.1): W_k [H, I_l], R_k [H, O] (O = output_size: H, or P with a
/// projection), bW_k [H], bR_k [H]; LSTM extensions: peephole p_k [H] for gates i, f, o (canonical gate
/// 0, 1, 3) and the projection W_proj [P, H] (gate 0).
enum class ParamKind : std::int32_t {
  input_weight = 0,
  recurrent_weight = 1,
  input_bias = 2,
  recurrent_bias = 3,
  peephole = 4,
  projection = 5,
  /// Embedding and head (direction and gate 0), after every layer's parameters, in this order:
  /// the table E [vocab_size, input_size] (layer 0), then per Dense of the chain pre_head[0..], head
  /// its W [out_features, in] and b [out_features]; for dense_weight / dense_bias `layer` is the
  /// Dense's place in that chain (0..num_pre_head, the head last: layer 0 without pre_head).
  embedding = 6,
  dense_weight = 7,
  dense_bias = 8,
  /// Integer stacks' per-channel scales (f32): of a layer's W_g (gate g) and R_g (gate 4 + g), [H]
  /// each; of Dense k's W in the chain (layer −1 − k, direction and gate 0: the head's is −1 without
  /// pre_head), [out_features] (or [1] per tensor).
  weight_scale = 9
};

/// Number of scalars of the canonical parameter buffer (CudnnLSTM's opaque parameter count).
std::int64_t param_count(const RnnSpec& spec);
/// Element offset of one canonical parameter block in the canonical buffer, or -1 if the block does
/// not exist (W of layer 0 in skip mode).
/// @param[in] layer 0..L-1  @param[in] direction 0 (forward) or 1 (reverse)  @param[in] gate 0..G-1 in canonical gate order
std::int64_t canonical_offset(const RnnSpec& spec, int layer, int direction, ParamKind kind, int gate);
/// CudnnLSTM's canonical_weight_shapes: per layer, per direction, W_k for each gate then R_k for each
/// gate, then W_proj [P, H] when the layer projects (W omitted for a skip layer); after every layer
/// the embedding table [vocab_size, I] and each Dense's W [out_features, in] (pre_head, then the head) when the stack has them. Writes at most `capacity` shapes; `*count` receives the total.
Status canonical_weight_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count);
/// CudnnLSTM's canonical_bias_shapes: per layer, per direction, bW_k for each gate then bR_k, then the
/// peepholes p_i, p_f, p_o [H] when the layer has them; then each Dense's b [out_features] (pre_head, then the head).
Status canonical_bias_shapes(const RnnSpec& spec, Shape* shapes, int capacity, int* count);
/// CudnnLSTM's state_shape: [L·D, batch, O] for h (O = proj_size or H); c is [L·D, batch, H].
Shape state_shape(const RnnSpec& spec, int batch);
/// Integer stacks (dtype i8): bytes, and byte offsets. Per (layer, direction): W_g int8 [H, I] for
/// g = i, f, g, o, R_g int8 [H, H], then (4-byte aligned) the biases int32 [H] (ParamKind::input_bias;
/// no recurrent bias), then with per-channel scales W_g's and R_g's f32 [H] (weight_scale, gates 0..7);
/// after every layer the embedding table int8 [vocab_size, I], then per Dense of the chain
/// (pre_head[0..], the head last) its W int8 [out_features, in], b int32 [out_features] and W scales
/// f32 ([out_features], or [1] per tensor), each 4-byte aligned: the tensors of a tflite_int8 file
/// (docs/int8.md).
std::int64_t param_count(const StackSpec& stack);
std::int64_t canonical_offset(const StackSpec& stack, int layer, int direction, ParamKind kind, int gate);
Status canonical_weight_shapes(const StackSpec& stack, Shape* shapes, int capacity, int* count);
Status canonical_bias_shapes(const StackSpec& stack, Shape* shapes, int capacity, int* count);
/// Fills the initial state of `batch` rows with zeros (h, and c when non-null). Elements of spec.dtype.
Status zero_state(const RnnSpec& spec, int batch, void* h, void* c);

/// Weight layouts rnncore imports and exports (docs/design.md §4.2, docs/weights.md). `tensorflow`: TF1 cells
/// (LSTMCell, LSTMBlockCell, CudnnCompatibleLSTMCell, GRUCell, CudnnCompatibleGRUCell, BasicRNNCell)
/// with scopes renamed by tools/tf_to_safetensors.py (`cell_{l}[/fw|/bw]/kernel` ...); an LSTMCell's
/// `forget_bias` is not a weight: add it to bR of the f gate after import (io::load_weights does).
enum class WeightFormat : std::int32_t { canonical = 0, pytorch = 1, onnx = 2, keras = 3, tensorflow = 4 };
const char* to_string(WeightFormat format);

/// A named tensor in caller memory (row-major, densely packed).
struct TensorView {
  const char* name = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
};

/// Name and shape of one tensor of a format.
struct TensorInfo {
  char name[96] = {0};
  Shape shape;
  bool optional = false;  ///< may be absent on import (PyTorch biases when bias=False): read as zeros
};

int format_tensor_count(const StackSpec& stack, WeightFormat format);
Status format_tensor_info(const StackSpec& stack, WeightFormat format, int index, const char* prefix, TensorInfo* info);
Status import_weights(const StackSpec& stack, WeightFormat format, const TensorView* tensors, std::size_t count,
                      const char* prefix, void* canonical);
Status export_tensor(const StackSpec& stack, WeightFormat format, int index, const void* canonical, void* out);
/// Writes the gradient of tensor `index` of a format from canonical weight gradients (as backward
/// fills them): the chain rule through import_weights. Equal to export_tensor except for a bias a
/// format folds (Keras LSTM and reset-before GRU: one bias, imported as bW with bR = 0), whose
/// gradient is bW's alone.
Status export_gradient_tensor(const StackSpec& stack, WeightFormat format, int index, const void* canonical_grad, void* out);

/// Number of tensors the exporter writes for a spec in a format.
int format_tensor_count(const RnnSpec& spec, WeightFormat format);
/// Name (with prefix) and shape of tensor `index` of a format.
/// @param[in] prefix prepended to every name (may be null) @param[out] info the tensor's name and shape
Status format_tensor_info(const RnnSpec& spec, WeightFormat format, int index, const char* prefix, TensorInfo* info);
/// Converts named tensors of a format into the canonical buffer (param_count(spec) elements of spec.dtype).
/// Tensors whose name does not start with `prefix` are ignored; a tensor under the prefix that looks like
/// a parameter of the format but does not belong to the spec is an error. Source tensors may be f32,
/// f64, f16 or bf16.
/// @param[in] tensors,count the named tensors  @param[in] prefix name prefix (may be null)
/// @param[out] canonical param_count(spec) elements of spec.dtype
Status import_weights(const RnnSpec& spec, WeightFormat format, const TensorView* tensors, std::size_t count,
                      const char* prefix, void* canonical);
/// Writes tensor `index` of a format (shape from format_tensor_info) from the canonical buffer.
/// @param[out] out elements of spec.dtype, densely packed
Status export_tensor(const RnnSpec& spec, WeightFormat format, int index, const void* canonical, void* out);

/// Worker threads made once, before any run: forward() hands work to them and creates no thread.
/// The calling thread takes part as thread 0. Idle workers sleep after a short spin.
class ThreadPool {
 public:
  /// Starts `threads` − 1 workers. Fails with Status::unsupported in builds without threads.
  /// @param[in] threads total threads including the caller (1..256)  @param[out] out the pool
  static Status create(int threads, ThreadPool** out);
  /// Joins the workers and frees the pool (null is fine). No run may be in flight.
  static void destroy(ThreadPool* pool);
  /// Total threads, the caller included.
  int size() const;

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  struct Impl;
  Impl* impl() const { return impl_; }

 private:
  ThreadPool() = default;
  ~ThreadPool() = default;
  Impl* impl_ = nullptr;
};

/// The layout of an integer stack's LSTM weights in the packed buffer (its kernel family).
enum class Int8Weights : std::int32_t {
  auto_select = 0,  ///< the chosen dot kernel's: interleaved on a Cortex-M with the DSP extension, else row-major
  row_major = 1,    ///< [H, K] rows, as TFLite stores them (the row kernels of every build)
  interleaved = 2,  ///< panels of 4 rows (interleave4; the DSP panel kernel, elsewhere the portable one)
  /// The same panels with the weights pre-widened to int16 (interleave4_i16): twice the weight
  /// bytes, for the Cortex-M DSP kernel that multiplies them unpacked (i16_dot_panels_4x16__dsp,
  /// about a fifth fewer instructions a multiply-accumulate); elsewhere the portable one. Never
  /// chosen by auto_select.
  interleaved_i16 = 3,
};

/// How to plan a network.
struct PlanOptions {
  std::int32_t max_batch = 1;    ///< largest batch forward() will see
  std::int32_t max_seq_len = 1;  ///< largest sequence length forward() will see
  Backend backend = Backend::auto_select;
  Isa max_isa = Isa::best;  ///< cap for the SIMD backend (forces lower paths); also env RNNCORE_MAX_ISA
  /// Storage of the packed weights (SIMD backend, every instruction set): f32; bf16 — weights and
  /// the matrix products' inputs in bf16, f32 accumulation (vdpbf16ps where the CPU has
  /// AVX512_BF16); f16 — weights in f16 (F16C on AVX2 / AVX-512, fcvtl on AArch64, exact integer
  /// conversion on SSE2 and ARMv7 NEON), f32 inputs. See docs/performance.md for the accuracy.
  DType weight_dtype = DType::f32;
  std::int32_t threads = 1;  ///< CPU threads a run uses (1: no threading at all)
  ThreadPool* thread_pool = nullptr;  ///< needed when threads > 1 (Model makes its own); at least `threads` big
  int gpu_device = 0;        ///< GPU backend: the device ordinal
  /// GPU backend with f16 / bf16 weight_dtype: allow half-precision inputs to the matrix products,
  /// so that the input projection, and the per-step recurrence at batches of 8 or more, run on
  /// tensor cores / matrix cores where the device has them — x and h are rounded to the weight type
  /// (round to nearest even; f16 overflows beyond ±65504), the products and f32 sums are as before.
  /// With f32 weight_dtype on NVIDIA sm_80+: the same products in TF32 — x, h, W and R rounded to
  /// 10 mantissa bits (ties away), so results differ from f32 by ~1e-3 relative; AMD keeps f32.
  /// Off: every product takes f32 inputs (docs/gpu.md, "Tensor cores"). On the H200 these
  /// matrix-unit kernels are still slower than the f32 ones at every batch measured (docs/gpu.md,
  /// "On the H200"): leave it off there for speed until they are rewritten.
  bool gpu_half_math = false;
  /// Plan for training: the plan then reports reserve_bytes() and backward_workspace_bytes(), the
  /// packed buffer also holds the canonical weights on the CPU backends (backward reads them; the
  /// GPU's reads its packed W and R), and forward() with a reserve keeps what backward needs. All
  /// backends; on the GPU the reserve and backward workspace are device memory, and a custom residual
  /// function and LSTM projections, peepholes and clips are refused.
  bool training = false;
  /// Integer stacks: the LSTM weights' layout, so that a host packs (or rnncore export-c writes,
  /// `--interleave`) for a target's family; a plan refuses a buffer packed for the other one.
  Int8Weights int8_weights = Int8Weights::auto_select;
  /// Integer stacks whose layer 0 reads an Embedding: pack, for each token, layer 0's input parts of
  /// the gates (bias and W·e, rescaled to Q3.12 and saturated, as the step computes them) as a table
  /// [vocab][4H] int16 in place of W and the Embedding's table, so that a step multiplies only R: the
  /// same bits (docs/int8.md, "Token tables"; `rnncore export-c --token-table`). Per-tensor scales
  /// only; refused without an Embedding. A buffer packed with it runs only on a plan with it.
  bool int8_token_table = false;
};

/// Whether a run applies dropout. Inference runs are deterministic.
enum class RunMode : std::int32_t {
  inference = 0,    ///< no dropout
  training = 1,     ///< dropout on (inter-layer and wrappers)
  monte_carlo = 2,  ///< dropout on in an inference run (MC dropout), asked for explicitly
};

/// Inputs and outputs of one forward run. Tensors are dense, of the spec's dtype. For a stack whose
/// layers differ in size, state tensors are the per-(layer, direction) [B, H_l] blocks in order
/// (state_offset).
struct ForwardArgs {
  std::int32_t batch = 0;    ///< B ≤ plan max_batch
  std::int32_t seq_len = 0;  ///< T ≤ plan max_seq_len
  Layout layout = Layout::time_major;
  const void* x = nullptr;                  ///< [T, B, I] (or [B, T, I]); with an embedding int32 token ids [T, B] (or [B, T])
  const std::int32_t* seq_lengths = nullptr;  ///< [B] in 0..T, any order; null: all T
  /// Per-step state resets, [T, B] (or [B, T] batch-major), or null (none). Where resets[t, b] != 0,
  /// row b's state in every layer is replaced by its initial state (h0 / c0, or zeros) before step t
  /// (recurrent RL policies: a new episode starts inside the sequence). Ignored past a row's length.
  /// Unidirectional networks only; backward gives the initial state the gradient of every reset.
  const std::uint8_t* resets = nullptr;
  const void* h0 = nullptr;                 ///< [L·D, B, H] (P with a projection) or null (zeros)
  const void* c0 = nullptr;                 ///< [L·D, B, H] or null (zeros); LSTM only
  void* y = nullptr;                        ///< [T, B, D·H] (D·P with a projection; or batch-major); zero past a row's length;
                                            ///< with a head [T, B, F], or [B, F] when it maps the last step (stack_output_size)
  void* hy = nullptr;                       ///< [L·D, B, H] (P with a projection) final h, or null (may be h0 itself: streaming in place)
  void* cy = nullptr;                       ///< [L·D, B, H] final c (LSTM), or null (may be c0 itself)
  RunMode run_mode = RunMode::inference;
  std::uint64_t seed = 0;                   ///< run seed: masks of inter-layer dropout and of wrappers without a seed
  std::uint64_t step = 0;                   ///< run counter (the mask function's c3 = step mod 2^32)
  bool count_steps = false;                 ///< Model only: use the model's counter as `step`, then advance it
  const std::uint32_t* row_ids = nullptr;   ///< [B] the mask function's row per batch row (default: the index)
  /// Time index of this call's first step in the mask function (streaming a sequence in chunks,
  /// carrying the state: chunk k starts at the steps run before it, and its masks then equal those of
  /// one whole-sequence run; the reverse direction of a bidirectional layer needs the whole sequence).
  std::uint32_t time_offset = 0;
  void* stream = nullptr;                   ///< GPU backend: hipStream_t / cudaStream_t to run on (null: the default stream)
  /// Training plans: where the forward keeps gate activations, cell states and inner-layer outputs
  /// for backward (never masks: backward regenerates them). Null: an ordinary forward.
  void* reserve = nullptr;
  std::size_t reserve_bytes = 0;            ///< at least Plan::reserve_bytes()
};

/// Inputs and outputs of one backward run (backward through time). The gradients are those of the
/// scalar Σ y·dy + Σ hy·dhy + Σ cy·dcy. Tensors are dense, of the spec's dtype, in the layouts of
/// ForwardArgs; any gradient input may be null (zero), any output null (not wanted).
struct BackwardArgs {
  /// The arguments of the training forward that filled `forward.reserve`: the same batch, length,
  /// layout, x, seq_lengths, resets, h0, c0, run mode, seed, step, row ids and time offset (y, hy, cy unused).
  ForwardArgs forward;
  const void* dy = nullptr;   ///< [T, B, D·H] (or [B, T, D·H]) gradient of the output
  const void* dhy = nullptr;  ///< [L·D, B, H] gradient of the final h
  const void* dcy = nullptr;  ///< [L·D, B, H] gradient of the final c (LSTM)
  void* dx = nullptr;         ///< [T, B, I] (or [B, T, I]) gradient of the input; overwritten; null: not computed
                              ///< (the first layer's input product is skipped)
  void* dh0 = nullptr;        ///< [L·D, B, H] gradient of the initial h; overwritten
  void* dc0 = nullptr;        ///< [L·D, B, H] gradient of the initial c (LSTM); overwritten
  void* dweights = nullptr;   ///< param_count elements: weight gradients in the canonical layout; null: not
                              ///< computed (frozen weights: the weight products are skipped)
  bool accumulate = false;    ///< add to dweights (cuDNN's addGrad) instead of overwriting it
};

/// A planned network: sizes, chosen kernels and buffer offsets. Trivially copyable; owns nothing.
class Plan {
 public:
  /// Plans `spec` for at most `options.max_batch` rows and `options.max_seq_len` steps.
  /// @param[out] out the plan (invalid after a failure: forward() then refuses it)
  static Status create(const RnnSpec& spec, const PlanOptions& options, Plan* out);
  /// Plans a stack of layers (wrappers, differing sizes and cells).
  static Status create(const StackSpec& stack, const PlanOptions& options, Plan* out);

  /// The planned network (a uniform RnnSpec appears as its stack).
  const StackSpec& stack() const;
  const PlanOptions& options() const;
  /// The backend and instruction set chosen at plan time.
  Backend backend() const;
  Isa isa() const;
  /// Name of the kernel family in use, e.g. "f32_rnn_6x4__avx512" (dtype, op, register tile, ISA) or "f64_rnn__reference".
  const char* kernel_name() const;

  /// Exact bytes of the packed-weight buffer (aligned to kAlignment).
  std::size_t packed_weight_bytes() const;
  /// Exact bytes of the workspace forward() needs at max_batch × max_seq_len (aligned to kAlignment).
  std::size_t workspace_bytes() const;

  /// Training plans: exact bytes of the reserve a training forward fills (gate activations, cell
  /// states and inner-layer outputs for max_batch × max_seq_len; no dropout masks). 0 otherwise.
  std::size_t reserve_bytes() const;
  /// Training plans: exact bytes of the workspace backward() needs. 0 otherwise.
  std::size_t backward_workspace_bytes() const;

  /// Packs canonical weights (param_count(spec) elements of spec.dtype) for this plan's backend.
  /// @param[in] canonical the canonical buffer  @param[out] packed buffer of packed_weight_bytes()
  Status pack_weights(const void* canonical, void* packed, std::size_t packed_bytes) const;
  /// Runs the network. Makes no allocation; thread-compatible (one workspace per concurrent call).
  Status forward(const void* packed, void* workspace, std::size_t workspace_bytes, const ForwardArgs& args) const;
  /// Backward through time after a training forward (args.forward.reserve). Deterministic: a fixed
  /// summation order, the same bits for any thread count. Makes no allocation.
  /// @param[in] workspace at least backward_workspace_bytes(), kAlignment-aligned
  Status backward(const void* packed, void* workspace, std::size_t workspace_bytes, const BackwardArgs& args) const;

  /// RNNCORE_PLAN_BYTES (rnncore/config.h): 12 544 bytes on 32-bit targets, 16 KiB on 64-bit ones, at
  /// 16 layers; less in a build of fewer (meson option max_layers) or without training (option training).
  static constexpr std::size_t kStorageBytes = RNNCORE_PLAN_BYTES;

 private:
  alignas(8) unsigned char storage_[kStorageBytes] = {};
};

/// Convenience owner for hosts: plans, allocates the packed weights and workspace once, packs.
class Model {
 public:
  Model() = default;
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& other) noexcept;
  Model& operator=(Model&& other) noexcept;

  /// Plans, allocates and packs. `canonical` holds param_count(spec) elements of spec.dtype.
  static Status create(const RnnSpec& spec, const PlanOptions& options, const void* canonical, Model* out);
  static Status create(const StackSpec& stack, const PlanOptions& options, const void* canonical, Model* out);
  /// Forward in the owned buffers (no allocation). With args.count_steps, a dropout run uses the
  /// model's step counter and advances it. A training model (options.training) fills its own
  /// reserve when args.reserve is null, for the next backward().
  Status forward(const ForwardArgs& args);
  /// Training models: backward after forward(), in the owned buffers. args.forward is the forward's
  /// arguments; a null reserve means the model's own, and count_steps the step that forward used.
  Status backward(const BackwardArgs& args);
  /// Re-packs new canonical weights (after an optimiser step) into the owned buffer.
  Status update_weights(const void* canonical);
  const Plan& plan() const { return plan_; }
  /// The next step a counted dropout run will use.
  std::uint64_t step() const { return step_; }

 private:
  void release();
  ForwardArgs resolve(const ForwardArgs& args, std::uint64_t counted_step) const;
  Plan plan_;
  void* packed_ = nullptr;
  void* workspace_ = nullptr;
  void* reserve_ = nullptr;             // training models
  void* backward_workspace_ = nullptr;  // training models
  ThreadPool* pool_ = nullptr;  // made by create when options.threads > 1 and none was given
  std::uint64_t step_ = 0;
  std::uint64_t last_step_ = 0;  // the step the last counted forward used
};

}  // namespace rnncore

#endif  // RNNCORE_RNNCORE_HPP

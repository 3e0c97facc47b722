// The integer LSTM (int8 weights and activations, int16 cell state): the scalar reference of
// LiteRT / TFLite's "8x8_16" integer LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM with int8 input and
// int16 cell state), bit for bit. Semantics, scales and what is still missing: docs/int8.md.
//
// Its public face is the C API (include/rnncore/int8.h, src/int8_c_api.cpp); the model files
// load through the io library (src/io/int8_model.hpp). The planner and the float stacks do not
// know it (docs/int8.md, "What is left"). Everything here is plain C++: no allocation, no
// exceptions; memory is the caller's.
#ifndef RNNCORE_SRC_INTERNAL_INT8_LSTM_HPP
#define RNNCORE_SRC_INTERNAL_INT8_LSTM_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/rnncore.hpp"
#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {

/// TFLite's QuantizeMultiplier (frexp, round half away from zero, 2^31 carried into the shift).
/// Refuses (Status::invalid_size, detail naming `what`) a scale that is not finite and positive,
/// one below 2^-32 (every product would round to 0) and one of 2^30 or more (the multiplier's
/// shift would overflow the 32-bit product).
Status quantize_multiplier(double scale, const char* what, QuantizedMultiplier* out);

/// round(x · m) as TFLite's MultiplyByQuantizedMultiplier computes it: a saturating rounding
/// doubling high multiply, then a rounding (half away from zero) right shift.
std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m);

/// Logistic of a Q3.12 value, in Q0.15 (gemmlowp's fixed-point logistic on int16, as TFLite's
/// integer LSTM gates use it).
std::int16_t sigmoid_q3_12(std::int16_t x);

/// tanh of a value with `integer_bits` (0..6) integer bits, i.e. Q(ib).(15 − ib), in Q0.15
/// (gemmlowp's fixed-point tanh on int16). Returns 0 for integer_bits outside 0..6.
std::int16_t tanh_q(std::int16_t x, int integer_bits);

/// Gate index order everywhere below: i, f, g, o (TFLite's input, forget, cell, output).
constexpr int kGates = 4;

/// How an integer LSTM's weights w[g] and r[g] lie in memory.
enum class Int8WeightLayout : std::int32_t {
  row_major = 0,     ///< [H, K] row-major, as TFLite stores them
  /// Panels of 4 rows, each word of 4 columns of the 4 rows together (interleave4; rows and K
  /// padded to multiples of 4; 4-byte aligned): the layout of the Cortex-M DSP kernel
  /// i8_dot_panels_4x16__dsp (docs/int8.md, "Interleaved weights"). `rnncore export-c --interleave`
  /// writes it; a run's scratch then also holds x and h widened to int16.
  interleaved4 = 1,
  /// The same panels with the weights pre-widened to int16 (interleave4_i16; twice the bytes): the
  /// layout of the Cortex-M DSP kernel i16_dot_panels_4x16__dsp, which multiplies them as they are.
  /// `rnncore export-c --interleave=i16` writes it; scratch as interleaved4's.
  interleaved4_i16 = 2,
};
/// Whether a layout is one of the panel layouts (the step widens x and h for them).
constexpr bool int8_panel_layout(Int8WeightLayout l) {
  return l == Int8WeightLayout::interleaved4 || l == Int8WeightLayout::interleaved4_i16;
}

/// The quantization of one integer LSTM layer, as a quantized model states it (real value =
/// scale · (q − zero_point)). TFLite tensors: input, input-to-gate and recurrent-to-gate weights,
/// output state (variable tensor 18, also the op's output without projection), cell state
/// (variable tensor 19) and the intermediate "effective hidden scale" tensor (intermediate 4).
struct Int8LstmQuantization {
  float input_scale = 0.0f;     ///< int8 input x
  std::int32_t input_zp = 0;
  float w_scale[kGates] = {};   ///< input weights [H, I] per gate (symmetric, per tensor)
  float r_scale[kGates] = {};   ///< recurrent weights [H, H] per gate (symmetric, per tensor)
  /// Per output channel instead (rnncore's own extension; TFLite's integer LSTM is per tensor):
  /// [H] scales for each gate's input and recurrent weights, all eight or none. Where given,
  /// w_scale and r_scale are not read; each unit's rows get their own fixed-point multipliers.
  const float* w_scales[kGates] = {};
  const float* r_scales[kGates] = {};
  float state_scale = 0.0f;     ///< int8 output state h (= the output y without projection)
  std::int32_t state_zp = 0;
  float hidden_scale = 0.0f;    ///< o ⊙ tanh(c) before projection; without projection = state
  std::int32_t hidden_zp = 0;
  float cell_scale = 0.0f;      ///< int16 cell state: a power of two, 2^-30 .. 2^-9
  float cell_clip = 0.0f;       ///< real clip of the cell state; 0: none
  Int8WeightLayout weight_layout = Int8WeightLayout::row_major;  ///< of the weights prepare is given
};

/// What prepare derives from a quantization and the weights; holds pointers into the caller's
/// weights and effective-bias storage (which must outlive it).
struct Int8LstmParams {
  int input_size = 0, hidden_size = 0;
  QuantizedMultiplier x_mult[kGates];  ///< w_scale · input_scale / 2^-12
  QuantizedMultiplier h_mult[kGates];  ///< r_scale · state_scale / 2^-12
  QuantizedMultiplier hidden_mult;     ///< 2^-15 · 2^-15 / hidden_scale
  int cell_log2 = 0;                   ///< log2(cell_scale), −30 .. −9
  std::int16_t cell_clip = 0;          ///< quantized clip (0: none)
  /// A token table's layer (PlanOptions::int8_token_table: layer 0 after an Embedding): w[0] is the
  /// table [vocab][4H] int16, each token's input parts of gates i, f, g, o already rescaled to Q3.12
  /// and saturated, as the step would compute them from the token's embedded row
  /// (sat16(MBQM(bx + W·e, x_mult))); a step's x is then the token's row of it (4H int16, passed as
  /// bytes), w[1..3] and x_bias are not read, and x_mult gives each part back
  /// (int8_token_table_multiplier). (In cell_clip's padding: the C API's storage keeps its size.)
  bool token_gates = false;
  std::int32_t hidden_zp = 0;
  Int8WeightLayout layout = Int8WeightLayout::row_major;
  const std::int8_t* w[kGates] = {};   ///< [H, I] in `layout`
  const std::int8_t* r[kGates] = {};   ///< [H, H] in `layout`
  const std::int32_t* x_bias[kGates] = {};  ///< bias − input_zp · row sums of w  [H]
  const std::int32_t* h_bias[kGates] = {};  ///< −state_zp · row sums of r        [H]
  /// Per-channel models: (multiplier, shift) of each unit's rows [2H], replacing x_mult / h_mult;
  /// null per tensor.
  const std::int32_t* x_mult_rows[kGates] = {};
  const std::int32_t* h_mult_rows[kGates] = {};
  DotRowsFn dot = nullptr;  ///< the matrix-vector kernel (prepare picks the fastest; tests set others)
  DotPanelsFn dot_panels = nullptr;  ///< the same for the interleaved layout
  /// The step kernels for the rest of a step (int8_best_step_kernels); null: the step's inline loops.
  GateActivationsFn gate_activations = nullptr;
  CellUpdateFn cell_update = nullptr;
};

/// The input parts' multiplier of a token table's layer: 1/4 (2^30, shift −1), given 4 times the
/// tabled part, so that it gives the part back exactly (4t · 1/4 is an integer: the high multiply
/// and the rounding shift round nothing) and the gates' code adds it to the recurrent part
/// unchanged, bit for bit — on the loops for two right-shifting multipliers (the Thumb-2 pairs).
constexpr QuantizedMultiplier int8_token_table_multiplier() { return QuantizedMultiplier{1 << 30, -1}; }
/// What the gates are given for a tabled part t: 4t (int8_token_table_multiplier).
constexpr std::int32_t int8_token_table_sum(std::int16_t t) { return 4 * static_cast<std::int32_t>(t); }

/// int32 words of effective-bias storage prepare needs: 8 · hidden_size.
inline std::size_t int8_lstm_bias_words(int hidden_size) { return 8 * static_cast<std::size_t>(hidden_size); }
/// Whether a quantization states per-channel weight scales (Int8LstmQuantization::w_scales).
inline bool int8_lstm_per_channel(const Int8LstmQuantization& q) { return q.w_scales[0] != nullptr; }
/// int32 words of storage prepare needs for this quantization: the effective biases (8 · H), and
/// per channel the rows' multipliers after them (16 · H more: input parts of gates i, f, g, o,
/// then recurrent parts, a (multiplier, shift) pair per unit).
inline std::size_t int8_lstm_storage_words(const Int8LstmQuantization& q, int hidden_size) {
  return (int8_lstm_per_channel(q) ? 24 : 8) * static_cast<std::size_t>(hidden_size);
}
/// Bytes of scratch a step of row-major weights needs: hidden_size (the new output state, until
/// every unit has read the old one). The gates are computed in blocks of kUnitBlock units on the stack.
inline std::size_t int8_lstm_scratch_bytes(int hidden_size) { return static_cast<std::size_t>(hidden_size); }
/// Bytes of scratch a step of these parameters needs: with interleaved weights x and h widened to
/// int16 (2 bytes per column, columns padded to multiples of 4), 4-byte aligned within it, and no
/// more (the blocks read h only widened: the new state is written into h itself).
inline std::size_t int8_lstm_scratch_bytes(const Int8LstmParams& p) {
  if (!int8_panel_layout(p.layout)) return int8_lstm_scratch_bytes(p.hidden_size);
  const int pairs = 4 * (interleaved4_words(p.input_size) + interleaved4_words(p.hidden_size));  // int16 each
  return 3 + 2 * static_cast<std::size_t>(pairs);
}

/// Units a step computes together: the kernels run on blocks of this many rows of each gate. 32;
/// firmware builds without the activation tables take 16 (meson defines RNNCORE_Q8_UNIT_BLOCK),
/// which keeps 256 bytes of stack (the block's sums and gates) for about 3 % more instructions a
/// step at H = 32. Code that includes this header beside the library must see the same value.
#if defined(RNNCORE_Q8_UNIT_BLOCK)
constexpr int kUnitBlock = RNNCORE_Q8_UNIT_BLOCK;
#else
constexpr int kUnitBlock = 32;
#endif
static_assert(kUnitBlock % 4 == 0 && kUnitBlock >= 4 && kUnitBlock <= 64,
              "kUnitBlock: whole panels of 4 rows, and the assembly loops' row offsets");

/// Checks the quantization and derives the fixed-point multipliers, the cell shift and clip, and
/// the effective biases (into `bias_storage`, int8_lstm_storage_words(q, H) words: per channel the
/// rows' multipliers follow the biases). `bias[g]` may be
/// null (no bias). Errors: null_pointer, invalid_size (sizes outside 1..65536; zero, negative or
/// non-finite scales; multipliers out of range; a zero point outside int8; an effective bias
/// beyond int32), unsupported (a cell scale that is not a
/// power of two in 2^-30 .. 2^-9), buffer_too_small. Below 2^-15 a step uses the input gate in
/// place of tanh(c), as LiteRT does (docs/int8.md).
Status int8_lstm_prepare(const Int8LstmQuantization& q, int input_size, int hidden_size,
                         const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                         const std::int32_t* const bias[kGates], std::int32_t* bias_storage,
                         std::size_t bias_storage_words, Int8LstmParams* out);

/// As int8_lstm_prepare, with the effective biases already folded (by an earlier prepare, or by
/// `rnncore export-c` into flash: int8_lstm_storage_words(q, H) words, the input parts of gates
/// i, f, g, o, then their recurrent parts; per channel then the rows' multipliers). Nothing is written: each folded value is recomputed from the
/// weights, biases and zero points and must be equal (else invalid_size), so a stale table is
/// refused instead of giving wrong outputs. Keeps the biases out of RAM on a microcontroller.
Status int8_lstm_prepare_folded(const Int8LstmQuantization& q, int input_size, int hidden_size,
                                const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                                const std::int32_t* const bias[kGates], const std::int32_t* folded_biases,
                                std::size_t folded_words, Int8LstmParams* out);

/// One time step for `batch` rows: x [batch, I], h [batch, H] (read, then overwritten with the
/// new output state, which is also the step's output), c [batch, H] (read and overwritten).
/// `scratch`: int8_lstm_scratch_bytes(p) bytes. No checks: prepare validated the params.
void int8_lstm_step(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                    std::int16_t* c, std::int8_t* scratch);

#if !defined(RNNCORE_NO_HEAP)
/// Host builds: the centre (entry of argument 0) of the gates' activation table, the sigmoid or
/// (tanh) tanh with 3 integer bits, and of tanh of a cell state with `integer_bits` (0..6; else
/// null) integer bits: what the step kernels are given.
const std::int16_t* int8_gate_table_centre(bool tanh);
const std::int16_t* int8_cell_tanh_centre(int integer_bits);
#endif

/// A whole sequence, batch-major like the TFLite op (time_major false): x [batch, T, I],
/// y [batch, T, H] (or null), h [batch, H] and c [batch, H] carry the state in and out. Not for a
/// token table's layer (Status::unsupported): it links the step without the token-table copies.
Status int8_lstm_sequence(const Int8LstmParams& p, int batch, int seq_len, const std::int8_t* x,
                          std::int8_t* y, std::int8_t* h, std::int16_t* c, std::int8_t* scratch,
                          std::size_t scratch_bytes);

}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_LSTM_HPP

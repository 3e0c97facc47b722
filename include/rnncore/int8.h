/* rnncore — the integer LSTM's C API (C99): int8 weights and activations, int16 cell state, the
 * arithmetic of LiteRT / TFLite's integer LSTM ("8x8_16"), bit for bit. Semantics, every scale,
 * and how a quantized model gets here: docs/int8.md.
 *
 *   rnncore_int8_lstm_quantization   what the quantized model states (scales, zero points)
 *   rnncore_int8_lstm_prepare        checks it, derives the fixed-point multipliers and folds the
 *                                    effective biases into caller memory (or _prepare_folded: the
 *                                    biases folded ahead of time, e.g. by `rnncore export-c`, in flash)
 *   rnncore_int8_lstm_run            runs steps; the state (h int8, c int16) is the caller's
 *   rnncore_int8_dense_*             a Dense layer on the LSTM's last step (Keras Dense head)
 *   rnncore_int8_activation_table, rnncore_int8_lookup   a sigmoid or tanh after a Dense layer
 *   rnncore_int8_softmax_*           a softmax on the model's output
 *   rnncore_int8_add_*, rnncore_int8_mul_*   a Keras Bidirectional's merge_mode sum, mul, ave
 *
 * Nothing allocates; the weights are read where they lie (flash) and never copied. A prepared
 * rnncore_int8_lstm is a fixed-size value that points into the weights and biases it was given.
 */
#ifndef RNNCORE_INT8_H
#define RNNCORE_INT8_H

#include <stddef.h>
#include <stdint.h>

#include "rnncore/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Gates of the integer LSTM, in TFLite's order: input, forget, cell (g), output. */
#define RNNCORE_INT8_LSTM_GATES 4
/** Bytes of a rnncore_int8_lstm value (224 on 32-bit targets, 320 on 64-bit ones). */
#define RNNCORE_INT8_LSTM_BYTES (128 + 24 * sizeof(void*))

/** The quantization of one integer LSTM layer (real value = scale · (q − zero point)), as the
 * TFLite converter writes it for a Keras LSTM; docs/int8.md, "What a quantized model states". */
typedef struct rnncore_int8_lstm_quantization {
  float input_scale;  /**< int8 input x */
  int32_t input_zp;
  float w_scale[RNNCORE_INT8_LSTM_GATES]; /**< input weights [H, I] per gate (symmetric) */
  float r_scale[RNNCORE_INT8_LSTM_GATES]; /**< recurrent weights [H, H] per gate (symmetric) */
  float state_scale;  /**< int8 output state h (= the output y) */
  int32_t state_zp;
  float hidden_scale; /**< o ⊙ tanh(c) before it becomes h; equal to the state's without projection */
  int32_t hidden_zp;
  float cell_scale;   /**< int16 cell state: a power of two, 2^-30 .. 2^-9 */
  float cell_clip;    /**< real clip of the cell state; 0: none */
  /** Per output channel instead of w_scale / r_scale (rnncore's extension: TFLite's integer LSTM
   * is per tensor; `rnncore quantize --per-channel` writes such models): [H] scales of each gate's
   * input and recurrent weights, all eight or all NULL (per tensor; zero-initialise the struct). */
  const float* w_scales[RNNCORE_INT8_LSTM_GATES];
  const float* r_scales[RNNCORE_INT8_LSTM_GATES];
  /** How w and r lie in memory: RNNCORE_INT8_WEIGHTS_ROW_MAJOR (0, TFLite's layout),
   * RNNCORE_INT8_WEIGHTS_INTERLEAVED4 (rnncore_int8_interleave4; `rnncore export-c --interleave`) or
   * RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16 (rnncore_int8_interleave4_i16; `--interleave=i16`). */
  int32_t weight_layout;
} rnncore_int8_lstm_quantization;

/** Weights [H, K] per gate, row-major (TFLite's layout; the default). */
#define RNNCORE_INT8_WEIGHTS_ROW_MAJOR 0
/** Weights per gate in panels of 4 rows, 4 columns of the 4 rows in 16 bytes with two rows paired in
 * each int16 half (rows and K padded with zeros to multiples of 4), 4-byte aligned: on Cortex-M4/M7
 * the kernel reads them with one load and multiplies two rows' weights with one SMLAD, about 0.9
 * instructions per multiply-accumulate in its loop instead of 1.5; elsewhere a portable kernel reads
 * them. A run's scratch then also holds x and h widened to int16 (rnncore_int8_lstm_run_scratch_bytes).
 * The layout changed on 2026-11-25: interleave weights written before again. docs/int8.md,
 * "Interleaved weights". */
#define RNNCORE_INT8_WEIGHTS_INTERLEAVED4 1
/** Revision of the interleaved layout's bytes: 2 since 2026-11-25 (rows paired in int16 halves; 1,
 * before, had no such macro). Headers from `rnncore export-c --interleave` check it at compile time. */
#define RNNCORE_INT8_INTERLEAVED4_REVISION 2
/** Bytes of a [rows, k] int8 matrix in the interleaved layout: 4·ceil(rows/4) · 4·ceil(k/4). */
#define RNNCORE_INT8_INTERLEAVED4_BYTES(rows, k) ((size_t)(((rows) + 3) / 4 * 4) * (size_t)(((k) + 3) / 4 * 4))
/** Scratch bytes of a run with interleaved weights (input size I, hidden size H), for static buffers:
 * 3 + 2·(4·ceil(I/4) + 4·ceil(H/4)) (x and h widened; the new state goes straight into h). */
#define RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H) \
  ((size_t)3 + 2 * ((size_t)(((I) + 3) / 4 * 4) + (size_t)(((H) + 3) / 4 * 4)))
/** Writes the row-major int8 matrix w [rows, k] into out (RNNCORE_INT8_INTERLEAVED4_BYTES(rows, k)
 * bytes) in the interleaved layout, the padding zero; e.g. at start-up into RAM, for weights that
 * arrive row-major (`rnncore export-c --interleave` writes them so at build time, for flash).
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (rows or k outside 1..65536);
 *         RNNCORE_ERR_UNSUPPORTED (a weight of -128 in an odd row beside a negative weight of the row
 *         before, which the paired halves cannot hold; symmetric quantizers give -127..127). */
rnncore_status rnncore_int8_interleave4(const int8_t* w, int32_t rows, int32_t k, int8_t* out);

/** Weights per gate pre-widened to int16 in panels of 4 rows: per 4 columns c..c+3 of the 4 rows,
 * 8 words (rows A..D at columns c and c+2, then at c+1 and c+3, the first column in each word's low
 * half; rows and K padded with zeros to multiples of 4), 4-byte aligned: twice the bytes of
 * RNNCORE_INT8_WEIGHTS_INTERLEAVED4, for a Cortex-M4/M7 kernel that multiplies them as they are
 * (one SMLAD a word, no unpacking): about 0.69 instructions per multiply-accumulate in its loop
 * instead of 0.88. Scratch as the interleaved layout's. docs/int8.md, "Interleaved weights". */
#define RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16 2
/** Bytes of a [rows, k] int8 matrix in the int16 panel layout: 2 · RNNCORE_INT8_INTERLEAVED4_BYTES. */
#define RNNCORE_INT8_INTERLEAVED4_I16_BYTES(rows, k) (2 * RNNCORE_INT8_INTERLEAVED4_BYTES(rows, k))
/** Writes the row-major int8 matrix w [rows, k] into out (RNNCORE_INT8_INTERLEAVED4_I16_BYTES(rows,
 * k) bytes) in the int16 panel layout, the padding zero (every int8 weight has this form).
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (rows or k outside 1..65536). */
rnncore_status rnncore_int8_interleave4_i16(const int8_t* w, int32_t rows, int32_t k, int8_t* out);

/** A prepared integer LSTM: a plain value of fixed size that points into the caller's weights
 * and (folded) biases. */
typedef union rnncore_int8_lstm {
  unsigned char opaque[RNNCORE_INT8_LSTM_BYTES];
  uint64_t align_u64_;
  void* align_ptr_;
} rnncore_int8_lstm;

/** int32 words of folded-bias storage for hidden_size H: 8·H (the input parts of gates i, f, g, o,
 * then their recurrent parts). 0 for H outside 1..65536. */
size_t rnncore_int8_lstm_bias_words(int32_t hidden_size);
/** int32 words of storage rnncore_int8_lstm_prepare needs for this quantization: the folded biases
 * (8·H), and with per-channel scales each unit's fixed-point multipliers after them (24·H in all).
 * 0 for q NULL or H outside 1..65536. */
size_t rnncore_int8_lstm_storage_words(const rnncore_int8_lstm_quantization* q, int32_t hidden_size);
/** Bytes of scratch a run of row-major weights needs for hidden_size H: H (any alignment). 0 for H
 * outside 1..65536. Interleaved weights need more: rnncore_int8_lstm_run_scratch_bytes. */
size_t rnncore_int8_lstm_scratch_bytes(int32_t hidden_size);
/** Bytes of scratch a run of this prepared LSTM needs (any alignment): H for row-major weights,
 * RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H) for interleaved ones; 0 if not prepared. */
size_t rnncore_int8_lstm_run_scratch_bytes(const rnncore_int8_lstm* lstm);

/** Checks the quantization, derives the fixed-point multipliers and folds the effective biases
 * (bias − zero points × weight row sums) into bias_storage (bias_storage_words ≥
 * rnncore_int8_lstm_storage_words(q, H); per tensor that is rnncore_int8_lstm_bias_words(H)),
 * which must outlive `lstm`, as must the weights (and nothing else: per-channel scales are read
 * here only).
 * @param w     input weights per gate, int8 [H, I] in q->weight_layout (row-major by default), gates i, f, g, o
 * @param r     recurrent weights per gate, int8 [H, H], the same layout
 * @param bias  int32 [H] per gate (scale w_scale·input_scale), or NULL (no biases); an entry may be NULL
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (sizes outside
 *         1..65536, zero, negative or non-finite scales, fixed-point multipliers out of range, zero
 *         points outside int8, an effective bias beyond int32); RNNCORE_ERR_UNSUPPORTED (a cell
 *         scale that is not a power of two in 2^-30 .. 2^-9); RNNCORE_ERR_BUFFER_TOO_SMALL;
 *         RNNCORE_ERR_INVALID_ENUM (weight_layout); RNNCORE_ERR_MISALIGNED (interleaved weights not
 *         4-byte aligned). */
rnncore_status rnncore_int8_lstm_prepare(const rnncore_int8_lstm_quantization* q, int32_t input_size,
                                         int32_t hidden_size, const int8_t* const w[RNNCORE_INT8_LSTM_GATES],
                                         const int8_t* const r[RNNCORE_INT8_LSTM_GATES],
                                         const int32_t* const bias[RNNCORE_INT8_LSTM_GATES], int32_t* bias_storage,
                                         size_t bias_storage_words, rnncore_int8_lstm* lstm);

/** As rnncore_int8_lstm_prepare, with the biases (and per channel the multipliers) folded ahead of
 * time (`rnncore export-c` writes them as NAME_folded_bias; or the storage of an earlier prepare):
 * nothing is written, so they may stay in flash. Each folded value is recomputed and must be equal: a table that does not
 * belong to these weights, biases and zero points is refused (RNNCORE_ERR_INVALID_SIZE). */
rnncore_status rnncore_int8_lstm_prepare_folded(const rnncore_int8_lstm_quantization* q, int32_t input_size,
                                                int32_t hidden_size, const int8_t* const w[RNNCORE_INT8_LSTM_GATES],
                                                const int8_t* const r[RNNCORE_INT8_LSTM_GATES],
                                                const int32_t* const bias[RNNCORE_INT8_LSTM_GATES],
                                                const int32_t* folded_bias, size_t folded_words,
                                                rnncore_int8_lstm* lstm);

/** Runs seq_len steps for `batch` rows, batch-major like the TFLite op: x int8 [batch, seq_len, I];
 * y int8 [batch, seq_len, H] or NULL; h int8 [batch, H] and c int16 [batch, H] carry the state in
 * and out (a fresh state, as LiteRT starts: h = state_zp, c = 0). Streaming a sequence in pieces
 * gives the same bits as one call. scratch: rnncore_int8_lstm_run_scratch_bytes(lstm) bytes.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_WEIGHTS_NOT_PACKED (not prepared);
 *         RNNCORE_ERR_INVALID_SIZE (negative batch or seq_len); RNNCORE_ERR_BUFFER_TOO_SMALL. */
rnncore_status rnncore_int8_lstm_run(const rnncore_int8_lstm* lstm, int32_t batch, int32_t seq_len, const int8_t* x,
                                     int8_t* y, int8_t* h, int16_t* c, int8_t* scratch, size_t scratch_bytes);

/** The matrix-vector kernel a prepared LSTM runs (e.g. "i8_dot_1x1__scalar"); "" if not prepared. */
const char* rnncore_int8_lstm_kernel_name(const rnncore_int8_lstm* lstm);

/** A Dense layer after the LSTM (TFLite FULLY_CONNECTED on the last step, a Keras Dense), run
 * as LiteRT's default CPU path (XNNPACK) runs it: acc = b + Σ w·(x − input_zp) in int32, times
 * the float32 scale input_scale · w_scale / output_scale, clamped (RELU: nothing below
 * output_zp), rounded half to even, + output_zp. docs/int8.md, "Dense layers after the LSTM". */
typedef struct rnncore_int8_dense_quantization {
  float input_scale;      /**< int8 input (the LSTM's output state) */
  int32_t input_zp;
  const float* w_scales;  /**< weight scales: one per output, or one for all (w_scale_count 1) */
  int32_t w_scale_count;
  float output_scale;     /**< int8 output */
  int32_t output_zp;
  int32_t relu;           /**< nonzero: the fused RELU */
} rnncore_int8_dense_quantization;

/** Bytes of a rnncore_int8_dense value. */
#define RNNCORE_INT8_DENSE_BYTES (32 + 8 * sizeof(void*))

/** A prepared Dense layer: points into the caller's weights and storage. */
typedef union rnncore_int8_dense {
  unsigned char opaque[RNNCORE_INT8_DENSE_BYTES];
  uint64_t align_u64_;
  void* align_ptr_;
} rnncore_int8_dense;

/** Checks the quantization and fills bias_storage (int32 [out_size]: the bias folded with the
 * input zero point) and scale_storage (float [out_size]), which must outlive `dense`, as must w
 * (int8 [out_size, in_size], row-major). bias (int32 [out_size]) may be NULL.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (sizes outside 1..65536,
 *         scales not finite and positive, zero points outside int8, a folded bias beyond int32). */
rnncore_status rnncore_int8_dense_prepare(const rnncore_int8_dense_quantization* q, int32_t in_size,
                                          int32_t out_size, const int8_t* w, const int32_t* bias,
                                          int32_t* bias_storage, float* scale_storage, rnncore_int8_dense* dense);

/** y int8 [batch, out_size] from x int8 [batch, in_size].
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_WEIGHTS_NOT_PACKED (not prepared);
 *         RNNCORE_ERR_INVALID_SIZE (negative batch). */
rnncore_status rnncore_int8_dense_run(const rnncore_int8_dense* dense, int32_t batch, const int8_t* x, int8_t* y);

/** The function of a table activation after a Dense layer. */
typedef enum rnncore_int8_activation {
  RNNCORE_INT8_SIGMOID = 1, /**< TFLite LOGISTIC (a Keras Dense with activation="sigmoid") */
  RNNCORE_INT8_TANH = 2     /**< TFLite TANH (activation="tanh") */
} rnncore_int8_activation;

/** The int8 table of a sigmoid or tanh as TFLite builds it: table[v + 128] is the output for the
 * int8 input v (dequantized in float32, the function in float32, times the reciprocal of the
 * output scale, rounded half away from zero, + output_zp, clamped). `rnncore export-c` writes the
 * table into the header, so firmware needs no expf. docs/int8.md, "Classifier heads".
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_ENUM (f);
 *         RNNCORE_ERR_INVALID_SIZE (scales not finite and positive, zero points outside int8). */
rnncore_status rnncore_int8_activation_table(rnncore_int8_activation f, float input_scale, int32_t input_zp,
                                             float output_scale, int32_t output_zp, int8_t table[256]);

/** y[i] = table[x[i] + 128] for i < n; y may be x.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (negative n). */
rnncore_status rnncore_int8_lookup(const int8_t table[256], int32_t n, const int8_t* x, int8_t* y);

/** A softmax over the last axis as LiteRT runs TFLite's int8 SOFTMAX (a Keras Dense with
 * activation="softmax"): table[255 − v] = expf(−input_scale · beta · v) for the distance v of an
 * input from its row's maximum, the row's sum of table values in float32, each output
 * table · 1/(sum · output_scale) + 0.5 truncated, + output_zp, clamped to int8. Plain data, so that
 * `rnncore export-c` writes a prepared softmax as a const value (flash). */
typedef struct rnncore_int8_softmax {
  float table[256];
  float output_scale;
  int32_t output_zp;
} rnncore_int8_softmax;

/** Fills a softmax's table.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (scales or beta not finite
 *         and positive, output_zp outside int8). */
rnncore_status rnncore_int8_softmax_prepare(float input_scale, float beta, float output_scale, int32_t output_zp,
                                            rnncore_int8_softmax* softmax);

/** y [rows, n] = the softmax of x [rows, n] along n; y may be x.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (negative rows, n < 1). */
rnncore_status rnncore_int8_softmax_run(const rnncore_int8_softmax* softmax, int32_t rows, int32_t n, const int8_t* x,
                                        int8_t* y);

/** An element-wise int8 ADD as LiteRT's XNNPACK delegate computes it on x86 (a Keras
 * Bidirectional with merge_mode "sum", and the first op of "ave"): integer multipliers of each
 * operand's scale over the output's, y = clamp(((bias + a·a_multiplier + b·b_multiplier) >> shift)
 * + output_zp). Plain data, so that `rnncore export-c` writes a prepared one as a const value. */
typedef struct rnncore_int8_add {
  int32_t a_multiplier, b_multiplier, bias, output_zp, shift;
} rnncore_int8_add;

/** An element-wise int8 MUL as LiteRT's XNNPACK delegate computes it on x86 (merge_mode "mul", and
 * ave's multiplication by 0.5): (a − a_zp)(b − b_zp) · scale in float32, clamped, rounded to nearest
 * even, + output_zp. Plain data, as rnncore_int8_add. */
typedef struct rnncore_int8_mul {
  int32_t a_zp, b_zp, output_zp;
  float scale; /**< (a_scale · b_scale) / output_scale in float32 */
} rnncore_int8_mul;

/** Prepares an ADD of a (a_scale, a_zp) and b into y (output_scale, output_zp).
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER; RNNCORE_ERR_INVALID_SIZE (scales not finite and
 *         positive, zero points outside int8); RNNCORE_ERR_UNSUPPORTED (an operand's scale over the
 *         output's outside [2^-10, 2^8), where XNNPACK does not take the op). */
rnncore_status rnncore_int8_add_prepare(float a_scale, int32_t a_zp, float b_scale, int32_t b_zp, float output_scale,
                                        int32_t output_zp, rnncore_int8_add* add);

/** y[i] = a[i] + b[i] for i < n; y may be a or b.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER. */
rnncore_status rnncore_int8_add_run(const rnncore_int8_add* add, size_t n, const int8_t* a, const int8_t* b, int8_t* y);

/** Prepares a MUL, as rnncore_int8_add_prepare (RNNCORE_ERR_UNSUPPORTED: the product's scale over
 * the output's outside [2^-16, 2^8)). */
rnncore_status rnncore_int8_mul_prepare(float a_scale, int32_t a_zp, float b_scale, int32_t b_zp, float output_scale,
                                        int32_t output_zp, rnncore_int8_mul* mul);

/** y[i] = a[i] · b[i] for i < n; y may be a or b.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER. */
rnncore_status rnncore_int8_mul_run(const rnncore_int8_mul* mul, size_t n, const int8_t* a, const int8_t* b, int8_t* y);

/** y[i] = a[i] · b for i < n and one constant operand b (merge_mode ave's 0.5); y may be a.
 * @return RNNCORE_OK; RNNCORE_ERR_NULL_POINTER. */
rnncore_status rnncore_int8_mul_constant_run(const rnncore_int8_mul* mul, size_t n, const int8_t* a, int8_t b, int8_t* y);

#ifdef __cplusplus
}
#endif

#endif /* RNNCORE_INT8_H */

/* rnncore — the C API, for firmware and applications written in C (C99).
 *
 * The same capabilities as the C++ API (rnncore/rnncore.hpp), with plain structs and enums:
 *   rnncore_spec        describes the network      rnncore_validate, rnncore_param_count, ...
 *   rnncore_plan        a planned network          rnncore_plan_create: exact buffer sizes
 *   canonical weights   rnncore_import_weights     from PyTorch / ONNX / Keras / canonical tensors
 *   run                 rnncore_plan_pack_weights once, then rnncore_forward in caller memory
 * A rnncore_plan is a fixed-size value: it can live in .bss or on the stack and owns nothing.
 * No call allocates except rnncore_model_create (the convenience owner).
 */
#ifndef RNNCORE_RNNCORE_H
#define RNNCORE_RNNCORE_H

#include <stddef.h>
#include <stdint.h>

#include "rnncore/status.h"
#include "rnncore/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Alignment in bytes required of packed-weight and workspace buffers. */
#define RNNCORE_ALIGNMENT 64
/** Largest number of wrappers around one cell. */
#define RNNCORE_MAX_WRAPPERS 4
/** Dense layers a stack may have before its head. */
#define RNNCORE_MAX_PRE_HEAD 3
/* RNNCORE_MAX_LAYERS (largest number of layers of a plan) and RNNCORE_PLAN_BYTES (bytes of a
 * rnncore_plan value): rnncore/config.h. */

typedef enum rnncore_mode { RNNCORE_MODE_LSTM = 0, RNNCORE_MODE_GRU = 1, RNNCORE_MODE_RNN_TANH = 2, RNNCORE_MODE_RNN_RELU = 3 } rnncore_mode;
typedef enum rnncore_gru_variant { RNNCORE_GRU_RESET_AFTER = 0, RNNCORE_GRU_RESET_BEFORE = 1 } rnncore_gru_variant;
typedef enum rnncore_direction { RNNCORE_UNIDIRECTIONAL = 0, RNNCORE_BIDIRECTIONAL = 1 } rnncore_direction;
typedef enum rnncore_input_mode { RNNCORE_INPUT_LINEAR = 0, RNNCORE_INPUT_SKIP = 1, RNNCORE_INPUT_AUTO_SELECT = 2 } rnncore_input_mode;
typedef enum rnncore_dtype { RNNCORE_F32 = 0, RNNCORE_F64 = 1, RNNCORE_F16 = 2, RNNCORE_BF16 = 3, RNNCORE_I8 = 4 } rnncore_dtype;
typedef enum rnncore_layout { RNNCORE_TIME_MAJOR = 0, RNNCORE_BATCH_MAJOR = 1 } rnncore_layout;
typedef enum rnncore_backend { RNNCORE_BACKEND_AUTO = 0, RNNCORE_BACKEND_REFERENCE = 1, RNNCORE_BACKEND_SIMD = 2, RNNCORE_BACKEND_GPU = 3 } rnncore_backend;
typedef enum rnncore_isa { RNNCORE_ISA_NONE = 0, RNNCORE_ISA_SSE2 = 1, RNNCORE_ISA_AVX2 = 2, RNNCORE_ISA_AVX512 = 3, RNNCORE_ISA_NEON = 4, RNNCORE_ISA_BEST = 100 } rnncore_isa;
typedef enum rnncore_weight_format { RNNCORE_FORMAT_CANONICAL = 0, RNNCORE_FORMAT_PYTORCH = 1, RNNCORE_FORMAT_ONNX = 2, RNNCORE_FORMAT_KERAS = 3, RNNCORE_FORMAT_TENSORFLOW = 4 } rnncore_weight_format;
typedef enum rnncore_state_filter { RNNCORE_STATE_FILTER_DEFAULT = 0, RNNCORE_STATE_FILTER_H_AND_C = 1, RNNCORE_STATE_FILTER_C_ONLY = 2, RNNCORE_STATE_FILTER_NONE = 3 } rnncore_state_filter;
typedef enum rnncore_wrapper_kind { RNNCORE_WRAPPER_DROPOUT = 0, RNNCORE_WRAPPER_RESIDUAL = 1 } rnncore_wrapper_kind;
typedef enum rnncore_run_mode { RNNCORE_RUN_INFERENCE = 0, RNNCORE_RUN_TRAINING = 1, RNNCORE_RUN_MONTE_CARLO = 2 } rnncore_run_mode;
typedef enum rnncore_param_kind { RNNCORE_PARAM_INPUT_WEIGHT = 0, RNNCORE_PARAM_RECURRENT_WEIGHT = 1, RNNCORE_PARAM_INPUT_BIAS = 2, RNNCORE_PARAM_RECURRENT_BIAS = 3, RNNCORE_PARAM_PEEPHOLE = 4, RNNCORE_PARAM_PROJECTION = 5, RNNCORE_PARAM_EMBEDDING = 6, RNNCORE_PARAM_DENSE_WEIGHT = 7, RNNCORE_PARAM_DENSE_BIAS = 8, RNNCORE_PARAM_WEIGHT_SCALE = 9 } rnncore_param_kind;
/** What a Dense head applies after its affine map (softmax: over one row's features). */
typedef enum rnncore_activation { RNNCORE_ACTIVATION_NONE = 0, RNNCORE_ACTIVATION_RELU = 1, RNNCORE_ACTIVATION_SIGMOID = 2, RNNCORE_ACTIVATION_TANH = 3, RNNCORE_ACTIVATION_SOFTMAX = 4 } rnncore_activation;

/** A uniform stack of recurrent layers (CudnnLSTM and its GRU / RNN siblings). Enum fields hold the enums above. */
typedef struct rnncore_spec {
  int32_t mode;        /**< rnncore_mode */
  int32_t gru_variant; /**< rnncore_gru_variant (GRU only) */
  int32_t input_size;  /**< I */
  int32_t hidden_size; /**< H */
  int32_t num_layers;  /**< L, 1..RNNCORE_MAX_LAYERS */
  int32_t direction;   /**< rnncore_direction */
  int32_t input_mode;  /**< rnncore_input_mode */
  int32_t dtype;       /**< RNNCORE_F32 or RNNCORE_F64 */
  double dropout;      /**< inter-layer dropout p in [0, 1) (dropout runs only) */
  /* LSTM extensions (rnncore::RnnSpec; reference backend only). Zero: off. */
  int32_t proj_size;   /**< P: h = W_proj (o * tanh(c)), 0 or 1..H-1 */
  int32_t peepholes;   /**< nonzero: TF LSTMCell use_peepholes */
  double cell_clip;    /**< c clipped to [-clip, clip]; 0: none */
  double proj_clip;    /**< projection clipped to [-clip, clip]; 0: none */
} rnncore_spec;

/** TF's DropoutWrapper (see rnncore::DropoutWrapper and docs/dropout.md). */
typedef struct rnncore_dropout_wrapper {
  double input_keep;    /**< keep probability of the cell input, (0, 1] */
  double output_keep;   /**< keep probability of the cell output, (0, 1] */
  double state_keep;    /**< keep probability of the outgoing state, (0, 1] */
  int32_t variational;  /**< nonzero: one mask per run */
  int32_t per_sequence; /**< variational: a mask per row instead of one shared by the batch */
  int32_t state_filter; /**< rnncore_state_filter */
  int32_t has_seed;     /**< nonzero: use `seed` instead of the run's seed */
  uint64_t seed;
} rnncore_dropout_wrapper;

/** A custom residual function: result = fn(input, output) for one row of `width` elements. */
typedef void (*rnncore_residual_f32)(const float* input, const float* output, float* result, int32_t width, void* user_data);
typedef void (*rnncore_residual_f64)(const double* input, const double* output, double* result, int32_t width,
                                     void* user_data);

/** A cell wrapper: dropout, or residual (NULL functions: element-wise add). */
typedef struct rnncore_wrapper {
  int32_t kind; /**< rnncore_wrapper_kind */
  rnncore_dropout_wrapper dropout;
  rnncore_residual_f32 residual_f32;
  rnncore_residual_f64 residual_f64;
  void* user_data;
} rnncore_wrapper;

/** An int8 tensor's quantization: real = scale * (q - zero_point). */
typedef struct rnncore_quant {
  float scale;
  int32_t zero_point;
} rnncore_quant;

/** One direction of an integer LSTM layer (stack dtype RNNCORE_I8; see rnncore::Int8LstmQuant). */
typedef struct rnncore_int8_layer_quant {
  float w_scale[4];      /**< per-tensor scales of W_i, W_f, W_g, W_o */
  float r_scale[4];      /**< and of R_i .. R_o */
  int32_t per_channel;   /**< nonzero: [H] scales per gate in the canonical bytes (RNNCORE_PARAM_WEIGHT_SCALE) */
  rnncore_quant state;   /**< the int8 output state h */
  rnncore_quant hidden;  /**< o * tanh(c) */
  float cell_scale;      /**< a power of two, 2^-30 .. 2^-9 */
  float cell_clip;       /**< 0: none */
} rnncore_int8_layer_quant;

typedef enum rnncore_merge_mode { RNNCORE_MERGE_CONCAT = 0, RNNCORE_MERGE_SUM = 1, RNNCORE_MERGE_MUL = 2, RNNCORE_MERGE_AVE = 3 } rnncore_merge_mode;

/** The int8 merge of a bidirectional layer (Keras merge_mode; see rnncore::Int8Merge). */
typedef struct rnncore_int8_merge {
  int32_t mode;  /**< rnncore_merge_mode */
  rnncore_quant fw, bw, sum, half;
  int32_t half_value;
} rnncore_int8_merge;

/** One layer of a stack; wrappers innermost first. */
typedef struct rnncore_layer_spec {
  int32_t mode;        /**< rnncore_mode */
  int32_t gru_variant; /**< rnncore_gru_variant */
  int32_t hidden_size;
  int32_t direction;   /**< rnncore_direction */
  int32_t num_wrappers;
  rnncore_wrapper wrappers[RNNCORE_MAX_WRAPPERS];
  int32_t proj_size;   /**< LSTM projection size P (0: none) */
  int32_t peepholes;   /**< nonzero: LSTM peepholes */
  double cell_clip;    /**< 0: none */
  double proj_clip;    /**< 0: none */
  /** Integer stacks (dtype RNNCORE_I8): each direction's quantization, a bidirectional layer's
   *  merge and its output's quantization (docs/int8.md, "The C++ API"). */
  rnncore_int8_layer_quant int8[2];
  rnncore_int8_merge merge;
  rnncore_quant int8_output;
} rnncore_layer_spec;

/** A Dense layer of the chain before the head (see rnncore::DenseSpec; the head's
 *  last_step_only chooses the rows). The int8_* fields: integer stacks, as the head's. */
typedef struct rnncore_dense_spec {
  int32_t out_features;
  int32_t activation; /**< rnncore_activation (softmax: float stacks only) */
  int32_t int8_per_channel;
  float int8_w_scale;
  rnncore_quant int8_linear;
  rnncore_quant int8_output;
} rnncore_dense_spec;

/** A stack of layers with their own cells, sizes, directions and wrappers. */
typedef struct rnncore_stack_spec {
  int32_t input_size;
  int32_t input_mode; /**< rnncore_input_mode of layer 0 */
  int32_t dtype;      /**< RNNCORE_F32 or RNNCORE_F64 */
  double dropout;     /**< inter-layer dropout p in [0, 1) */
  int32_t num_layers;
  rnncore_layer_spec layers[RNNCORE_MAX_LAYERS];
  /** Optional ends (zero: none; CPU backends, inference and training). An Embedding before layer 0: x is then int32
   *  token ids [T, B] (or [B, T]) and layer 0 reads rows of the table [vocab_size, input_size]. */
  int32_t embedding_vocab_size;
  /** A Dense head after the last layer: y = act(W o + b), W [head_out_features, D*O]; y is
   *  [T, B, head_out_features] (zero past a row's length), or [B, head_out_features] of each row's
   *  last output with head_last_step_only nonzero (Keras return_sequences=False). */
  int32_t head_out_features;
  int32_t head_activation;      /**< rnncore_activation */
  int32_t head_last_step_only;
  /** Integer stacks (dtype RNNCORE_I8): layer 0's input quantization; x int8, or float32
   *  quantized (float_input); y int8, or float32 dequantized (float_output); the head's W scale
   *  (or per-channel scales in the canonical bytes), its product's and its activation's output
   *  quantization, the softmax's beta (rnncore_stack_init sets 1). */
  rnncore_quant input_quant;
  int32_t float_input;
  int32_t float_output;
  int32_t head_int8_per_channel;
  float head_int8_w_scale;
  rnncore_quant head_int8_linear;
  rnncore_quant head_int8_output;
  float head_int8_softmax_beta;
  /** Dense layers between the last layer and the head (an MLP head, or a LiteRT
   *  model's FULLY_CONNECTED chain): pre_head[0] reads the last layer's output, the head reads
   *  pre_head[num_pre_head - 1]'s; num_pre_head 0..RNNCORE_MAX_PRE_HEAD. Weights: docs/weights.md.
   *  Float stacks train them on every backend. */
  int32_t num_pre_head;
  rnncore_dense_spec pre_head[RNNCORE_MAX_PRE_HEAD];
  /** Integer stacks: nonzero when the stack reads x's steps last to first (Keras go_backwards on
   *  its first layer): y's step k (and a last-step head's input) is the step that read x[T-1-k]. */
  int32_t reverse_input;
} rnncore_stack_spec;

/** A tensor shape of up to four dimensions. */
typedef struct rnncore_shape {
  int32_t ndim;
  int64_t dims[4];
} rnncore_shape;

/** A named tensor in caller memory (row-major, dense). */
typedef struct rnncore_tensor_view {
  const char* name;
  int32_t dtype; /**< rnncore_dtype of the data */
  rnncore_shape shape;
  const void* data;
} rnncore_tensor_view;

/** Name and shape of one tensor of a weight format. */
typedef struct rnncore_tensor_info {
  char name[96];
  rnncore_shape shape;
  int32_t optional; /**< may be absent on import (read as zeros) */
} rnncore_tensor_info;

/** Planning options. */
typedef struct rnncore_plan_options {
  int32_t max_batch;   /**< largest batch of a run */
  int32_t max_seq_len; /**< largest sequence length of a run */
  int32_t backend;     /**< rnncore_backend */
  int32_t max_isa;     /**< rnncore_isa cap for the SIMD backend */
  int32_t threads;     /**< CPU worker threads (1: none) */
  int32_t gpu_device;  /**< GPU backend: device ordinal */
  int32_t training;    /**< nonzero: plan for training (reserve and backward workspace) */
  int32_t weight_dtype;  /**< rnncore_dtype the packed weights are stored in: RNNCORE_F32 (0, the default), or
                              RNNCORE_F16 / RNNCORE_BF16 with f32 arithmetic (f32 specs; SIMD or GPU backend) */
  int32_t gpu_half_math; /**< nonzero: the GPU backend may round x and h to the 16-bit weight type for the
                              matrix units, or with F32 weight_dtype x, h and the weights to TF32 (NVIDIA
                              sm_80+; AMD keeps f32) (docs/gpu.md, "Tensor cores"; on the H200 still slower
                              than f32: "On the H200") */
  int32_t int8_weights;  /**< integer stacks: rnncore_int8_weights, the packed LSTM weights' layout (0: the kernel's) */
  int32_t int8_token_table; /**< nonzero: integer stacks with an Embedding get layer 0's input parts per token as a
                                 table in place of W (rnncore::PlanOptions::int8_token_table; export-c --token-table) */
} rnncore_plan_options;

/** The packed LSTM weights' layout of an integer stack (rnncore::Int8Weights): a host packing for a
 *  Cortex-M DSP target plans RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED (export-c --interleave). */
typedef enum rnncore_int8_weights {
  RNNCORE_INT8_WEIGHTS_PACKED_AUTO = 0,         /**< the dot kernel's family (interleaved on a Cortex-M DSP core) */
  RNNCORE_INT8_WEIGHTS_PACKED_ROW_MAJOR = 1,
  RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED = 2,
  RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED_I16 = 3, /**< int16 panels, 2x the weight bytes (export-c --interleave-i16) */
} rnncore_int8_weights;

/** A planned network; a plain value of fixed size (place it anywhere, copy it freely). */
typedef union rnncore_plan {
  unsigned char opaque[RNNCORE_PLAN_BYTES];
  uint64_t align_u64_;
  double align_f64_;
} rnncore_plan;

/** Inputs and outputs of one run (tensors of the spec's dtype; see rnncore::ForwardArgs). */
typedef struct rnncore_forward_args {
  int32_t batch;               /**< B ≤ max_batch */
  int32_t seq_len;             /**< T ≤ max_seq_len */
  int32_t layout;              /**< rnncore_layout */
  const void* x;               /**< [T, B, I] or [B, T, I]; with an embedding int32 token ids [T, B] or [B, T] */
  const int32_t* seq_lengths;  /**< [B] or NULL */
  const void* h0;              /**< [L·D, B, H] or NULL */
  const void* c0;              /**< [L·D, B, H] or NULL (LSTM) */
  void* y;                     /**< [T, B, D·H] or [B, T, D·H]; with a head [T, B, F] (or [B, F] on the last step) */
  void* hy;                    /**< [L·D, B, H] or NULL; may equal h0 (streaming in place) */
  void* cy;                    /**< [L·D, B, H] or NULL (LSTM); may equal c0 */
  int32_t run_mode;            /**< rnncore_run_mode: dropout acts in training and Monte-Carlo runs */
  uint64_t seed;               /**< the run's seed */
  uint64_t step;               /**< the run counter (mask function c3 = step mod 2^32) */
  int32_t count_steps;         /**< models only: use and advance the model's step counter */
  const uint32_t* row_ids;     /**< [B] mask row ids, or NULL (the batch index) */
  uint32_t time_offset;        /**< mask time index of the first step (streaming in chunks) */
  void* stream;                /**< GPU backend: the stream, or NULL */
  void* reserve;               /**< training plans: filled for backward (rnncore_plan_reserve_bytes), or NULL */
  size_t reserve_bytes;
  const uint8_t* resets;       /**< [T, B] or [B, T]: nonzero restores row b's initial state before step t; or NULL */
} rnncore_forward_args;

/** Inputs and outputs of one backward run: gradients of sum(y*dy) + sum(hy*dhy) + sum(cy*dcy)
 *  (see rnncore::BackwardArgs). Gradient inputs may be NULL (zero), outputs NULL (not wanted). */
typedef struct rnncore_backward_args {
  rnncore_forward_args forward; /**< the arguments of the training forward that filled forward.reserve */
  const void* dy;               /**< [T, B, D·H] (or [B, T, D·H]) */
  const void* dhy;              /**< [L·D, B, H] */
  const void* dcy;              /**< [L·D, B, H] (LSTM) */
  void* dx;                     /**< [T, B, I] (or [B, T, I]); overwritten; NULL: not computed (the first layer's input product is skipped) */
  void* dh0;                    /**< [L·D, B, H]; overwritten */
  void* dc0;                    /**< [L·D, B, H] (LSTM); overwritten */
  void* dweights;               /**< canonical layout, rnncore_param_count elements; NULL: not computed (weight products skipped) */
  int32_t accumulate;           /**< nonzero: add to dweights instead of overwriting it */
} rnncore_backward_args;

/** Library version, e.g. "0.1.0". */
const char* rnncore_version(void);

/** Fills a spec with defaults (LSTM, reset-after, 1 layer, unidirectional, linear input, f32; sizes 0). */
void rnncore_spec_init(rnncore_spec* spec);
/** Checks a spec. @param[in] spec */
rnncore_status rnncore_validate(const rnncore_spec* spec);
/** Gates of a mode: 4, 3 or 1 (0 for an invalid mode). */
int rnncore_num_gates(int32_t mode);
/** Canonical parameter count (0 for an invalid spec). */
int64_t rnncore_param_count(const rnncore_spec* spec);
/** Element offset of a canonical parameter block, or -1 if it does not exist. */
int64_t rnncore_canonical_offset(const rnncore_spec* spec, int layer, int direction, int32_t kind, int gate);
/** CudnnLSTM canonical_weight_shapes. @param[out] shapes up to capacity shapes @param[out] count total */
rnncore_status rnncore_canonical_weight_shapes(const rnncore_spec* spec, rnncore_shape* shapes, int capacity, int* count);
/** CudnnLSTM canonical_bias_shapes. */
rnncore_status rnncore_canonical_bias_shapes(const rnncore_spec* spec, rnncore_shape* shapes, int capacity, int* count);
/** State shape [L·D, batch, H]. */
rnncore_shape rnncore_state_shape(const rnncore_spec* spec, int batch);
/** Zero initial state. @param[out] h @param[out] c may be NULL */
rnncore_status rnncore_zero_state(const rnncore_spec* spec, int batch, void* h, void* c);

/** Number of tensors of a weight format for a spec. */
int rnncore_format_tensor_count(const rnncore_spec* spec, int32_t format);
/** Name (with prefix) and shape of tensor `index` of a format. @param[out] info */
rnncore_status rnncore_format_tensor_info(const rnncore_spec* spec, int32_t format, int index, const char* prefix,
                                          rnncore_tensor_info* info);
/** Named tensors of a format → canonical buffer (rnncore_param_count elements of spec dtype). */
rnncore_status rnncore_import_weights(const rnncore_spec* spec, int32_t format, const rnncore_tensor_view* tensors,
                                      size_t count, const char* prefix, void* canonical);
/** Canonical buffer → tensor `index` of a format. @param[out] out */
rnncore_status rnncore_export_tensor(const rnncore_spec* spec, int32_t format, int index, const void* canonical, void* out);

/** Fills a stack with defaults: no layers, linear input, f32, no inter-layer dropout. */
void rnncore_stack_init(rnncore_stack_spec* stack);
/** A dropout wrapper that keeps everything (keeps 1, per-step masks, default filter, run seed). */
void rnncore_dropout_wrapper_init(rnncore_dropout_wrapper* wrapper);
/** Checks a stack. */
rnncore_status rnncore_stack_validate(const rnncore_stack_spec* stack);
/** Canonical parameter count of a stack (0 if invalid). */
int64_t rnncore_stack_param_count(const rnncore_stack_spec* stack);
/** Offset of a canonical block (elements; bytes for an integer stack), or -1 (rnncore::canonical_offset). */
int64_t rnncore_stack_canonical_offset(const rnncore_stack_spec* stack, int layer, int direction, int32_t kind, int gate);
/** Elements of a state tensor of a stack for `batch` rows; and the offset of (layer, direction)'s [batch, H_l] block. */
int64_t rnncore_stack_state_elements(const rnncore_stack_spec* stack, int batch);
int64_t rnncore_stack_state_offset(const rnncore_stack_spec* stack, int batch, int layer, int direction);
/** c state tensors: like the two above with H_l units per block (h blocks have P_l with a projection). */
int64_t rnncore_stack_cell_state_elements(const rnncore_stack_spec* stack, int batch);
int64_t rnncore_stack_cell_state_offset(const rnncore_stack_spec* stack, int batch, int layer, int direction);
/** Named tensors of a format → a stack's canonical buffer. */
rnncore_status rnncore_stack_import_weights(const rnncore_stack_spec* stack, int32_t format,
                                            const rnncore_tensor_view* tensors, size_t count, const char* prefix,
                                            void* canonical);
/** Links the integer backend into a firmware image (profile=firmware): an image that plans an
 *  integer stack (dtype i8) calls it once, anywhere; one that does not call it links no integer code,
 *  and planning an integer stack there fails with RNNCORE_ERR_BACKEND_UNAVAILABLE. Host builds always
 *  link the integer backend; there the call does nothing (docs/porting.md). */
void rnncore_link_int8(void);
/** Plans a stack. @param[out] plan */
rnncore_status rnncore_plan_create_stack(const rnncore_stack_spec* stack, const rnncore_plan_options* options,
                                         rnncore_plan* plan);

/** Default options: max_batch 1, max_seq_len 1, auto backend, best ISA, 1 thread. */
void rnncore_plan_options_init(rnncore_plan_options* options);
/** Plans a network. @param[out] plan */
rnncore_status rnncore_plan_create(const rnncore_spec* spec, const rnncore_plan_options* options, rnncore_plan* plan);
/** Exact bytes of the packed-weight buffer. */
size_t rnncore_plan_packed_weight_bytes(const rnncore_plan* plan);
/** Exact bytes of the workspace. */
size_t rnncore_plan_workspace_bytes(const rnncore_plan* plan);
/** Backend chosen at plan time (rnncore_backend). */
int32_t rnncore_plan_backend(const rnncore_plan* plan);
/** Kernel family in use, e.g. "f32_rnn_6x4__avx512" (dtype, op, register tile, ISA). */
const char* rnncore_plan_kernel_name(const rnncore_plan* plan);
/** Packs canonical weights into a RNNCORE_ALIGNMENT-aligned buffer of packed_weight_bytes. */
rnncore_status rnncore_plan_pack_weights(const rnncore_plan* plan, const void* canonical, void* packed, size_t packed_bytes);
/** Zeroed arguments (time-major). */
void rnncore_forward_args_init(rnncore_forward_args* args);
/** Runs the network in caller memory; no allocation. */
rnncore_status rnncore_forward(const rnncore_plan* plan, const void* packed, void* workspace, size_t workspace_bytes,
                               const rnncore_forward_args* args);

/** Training plans: exact bytes of the reserve a training forward fills (0 otherwise). */
size_t rnncore_plan_reserve_bytes(const rnncore_plan* plan);
/** Training plans: exact bytes of the backward workspace (0 otherwise). */
size_t rnncore_plan_backward_workspace_bytes(const rnncore_plan* plan);
/** Zeroed backward arguments. */
void rnncore_backward_args_init(rnncore_backward_args* args);
/** Backward through time after a training forward; no allocation, deterministic.
 *  @param[in] workspace RNNCORE_ALIGNMENT-aligned, rnncore_plan_backward_workspace_bytes */
rnncore_status rnncore_backward(const rnncore_plan* plan, const void* packed, void* workspace, size_t workspace_bytes,
                                const rnncore_backward_args* args);
/** Gradient of tensor `index` of a format from canonical weight gradients (rnncore::export_gradient_tensor). */
rnncore_status rnncore_export_gradient_tensor(const rnncore_spec* spec, int32_t format, int index,
                                              const void* canonical_grad, void* out);

/** Convenience owner (allocates once). */
typedef struct rnncore_model rnncore_model;
/** Plans, allocates and packs. @param[out] model NULL on failure */
rnncore_status rnncore_model_create(const rnncore_spec* spec, const rnncore_plan_options* options, const void* canonical,
                                    rnncore_model** model);
/** Plans a stack, allocates and packs. */
rnncore_status rnncore_model_create_stack(const rnncore_stack_spec* stack, const rnncore_plan_options* options,
                                          const void* canonical, rnncore_model** model);
/** Runs in the model's buffers. */
rnncore_status rnncore_model_forward(rnncore_model* model, const rnncore_forward_args* args);
/** Training models: backward after rnncore_model_forward in the model's buffers (a NULL
 *  forward.reserve: the model's own; count_steps: the step that forward used). */
rnncore_status rnncore_model_backward(rnncore_model* model, const rnncore_backward_args* args);
/** Re-packs new canonical weights (after an optimiser step). */
rnncore_status rnncore_model_update_weights(rnncore_model* model, const void* canonical);
/** The model's plan. */
const rnncore_plan* rnncore_model_plan(const rnncore_model* model);
/** Frees a model (NULL is fine). */
void rnncore_model_destroy(rnncore_model* model);

#ifdef __cplusplus
}
#endif

#endif /* RNNCORE_RNNCORE_H */

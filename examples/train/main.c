/* On-device learning: a one-layer LSTM with a dense readout, trained from scratch to predict the
 * next value of noisy sine waves, in static memory only (no heap, no file system, no printf).
 *
 * Each sequence is s_t = A sin(w t + phi) + noise with its own amplitude A, frequency w and phase
 * phi; at every step the network sees s_t and predicts s_{t+1}, so it has to infer the wave's
 * frequency and phase from the values seen so far. The loss is the mean squared error over all
 * steps and rows. One training step:
 *   1. a training forward of the LSTM (rnncore_forward with a reserve) over a fresh batch;
 *   2. the readout y_t = v . h_t + b and its loss, written in C below, and dL/dh_t;
 *   3. rnncore_backward: the gradients of the LSTM's canonical weights;
 *   4. Adam (in C below) on the LSTM and readout parameters;
 *   5. rnncore_plan_pack_weights: the updated canonical weights packed for the next forward.
 * Every REPORT_EVERY steps it prints the mean training loss and the loss on a fixed evaluation
 * set. It prints PASS and exits 0 only when the final evaluation loss is below PASS_RATIO of the
 * initial one; FAIL and 1 otherwise. Deterministic: fixed seeds and its own RNG.
 *
 * All buffers of the library and of the training (packed weights, forward and backward
 * workspaces, reserve, parameters, gradients, Adam's moments, activations) are carved from one
 * static arena at start-up, sized from the plan's queries; the arena's size is a compile-time
 * constant checked against them.
 *
 * Builds for the host (../firmware/board_host.c) and for Cortex-M (../firmware/mps2/: start-up
 * code, linker script, semihosting console). See README.md. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rnncore/rnncore.h>

#include "board.h"
#include "console.h"

/* ---- the task and the network ---- */
#define INPUT 1          /* one value per step */
#define HIDDEN 12        /* LSTM units */
#define BATCH 8          /* sequences per training step */
#define SEQ_LEN 16       /* steps per sequence */
#define TRAIN_STEPS 300  /* optimizer updates */
#define REPORT_EVERY 25  /* print the losses every this many updates */
#define EVAL_BATCHES 4   /* the evaluation set: EVAL_BATCHES x BATCH sequences */
#define NOISE 0.05f      /* standard deviation of the noise on every value */
#define PASS_RATIO 0.3f  /* PASS: final evaluation loss < PASS_RATIO * initial */

/* ---- Adam ---- */
#define LEARNING_RATE 0.01f
#define BETA1 0.9f
#define BETA2 0.999f
#define EPSILON 1e-8f
#define CLIP_NORM 1.0f   /* the gradient's global L2 norm is scaled down to at most this */

#define ROWS (SEQ_LEN * BATCH) /* (step, row) pairs of a batch */
#define READOUT (HIDDEN + 1)  /* readout weights v[HIDDEN] and bias b */

/* The arena: every buffer below comes from it (carve()). Its size is fixed at compile time for
 * the plan of this file's constants (118 400 bytes are used with rnncore 0.1.0); start-up checks
 * it against the plan's own queries and prints what is used. */
#define ARENA_BYTES (120 * 1024)
static unsigned char arena[ARENA_BYTES] __attribute__((aligned(RNNCORE_ALIGNMENT)));
static size_t arena_used;
static rnncore_plan plan; /* RNNCORE_PLAN_BYTES: a plain value, in .bss */

/* One batch of sequences: x [SEQ_LEN, BATCH, INPUT] (time-major) and the targets [SEQ_LEN, BATCH]. */
typedef struct batch_data {
  float x[ROWS * INPUT];
  float target[ROWS];
} batch_data;
static batch_data train_batch, eval_set[EVAL_BATCHES];

/* 0 <= v < 100 as a percentage with one decimal, e.g. 3.2%. */
static void put_percent(float v) {
  const unsigned long tenths = (unsigned long)(v * 1000.0f + 0.5f);
  put_uint(tenths / 10);
  put(".");
  put_uint(tenths % 10);
  put("%");
}



/* ---- the static arena ---- */

/* The next `bytes` of the arena, RNNCORE_ALIGNMENT-aligned (what every rnncore buffer needs), or
 * NULL when the arena is too small (then only arena_used keeps counting, for the message). */
static void* carve(size_t bytes) {
  const size_t at = (arena_used + RNNCORE_ALIGNMENT - 1) / RNNCORE_ALIGNMENT * RNNCORE_ALIGNMENT;
  arena_used = at + bytes;
  return arena_used <= sizeof arena ? arena + at : NULL;
}

/* ---- a tiny deterministic RNG (xorshift32) ---- */

static uint32_t rng_state;

static uint32_t rng_next(void) {
  uint32_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return rng_state = x;
}

/* Uniform in [lo, hi). */
static float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)(rng_next() >> 8) * (1.0f / 16777216.0f);
}

/* Mean 0, standard deviation 1, roughly normal: the sum of three uniforms on [-1, 1). */
static float rng_noise(void) {
  return rng_uniform(-1.0f, 1.0f) + rng_uniform(-1.0f, 1.0f) + rng_uniform(-1.0f, 1.0f);
}

/* BATCH noisy sine waves of SEQ_LEN + 1 values; x holds values 0..SEQ_LEN-1, target 1..SEQ_LEN. */
static void make_batch(batch_data* d) {
  int b, t;
  for (b = 0; b < BATCH; ++b) {
    const float amplitude = rng_uniform(0.5f, 1.0f);
    const float omega = rng_uniform(0.15f, 0.6f); /* radians per step: periods of 10 to 42 steps */
    const float phase = rng_uniform(0.0f, 6.2831853f);
    for (t = 0; t <= SEQ_LEN; ++t) {
      const float s = amplitude * sinf(omega * (float)t + phase) + NOISE * rng_noise();
      if (t < SEQ_LEN) d->x[(t * BATCH + b) * INPUT] = s;
      if (t > 0) d->target[(t - 1) * BATCH + b] = s;
    }
  }
}

/* ---- the model: LSTM (rnncore) + dense readout (here) ---- */

/* The arena's parts; sizes from the plan's queries. */
static size_t packed_bytes, workspace_bytes, backward_bytes, reserve_bytes;
static unsigned char *packed, *workspace, *backward_workspace, *reserve;
static size_t lstm_params; /* rnncore_param_count: canonical LSTM weights */
static size_t num_params;  /* lstm_params + READOUT */
/* theta = [canonical LSTM weights | readout v, b]; grad, adam_m, adam_v alike. */
static float *theta, *grad, *adam_m, *adam_v;
static float *hidden_out, *d_hidden; /* y and dL/dy of the LSTM: [SEQ_LEN, BATCH, HIDDEN] */

/* The readout on the LSTM's outputs: predictions and the mean squared error. With `train`, also
 * dL/dh into d_hidden and the readout's gradient into grad[lstm_params..]. */
static float readout(const batch_data* d, int train) {
  const float* v = theta + lstm_params;
  float* dv = grad + lstm_params;
  float loss = 0.0f;
  int r, u;
  if (train) memset(dv, 0, READOUT * sizeof(float));
  for (r = 0; r < ROWS; ++r) {
    const float* h = hidden_out + (size_t)r * HIDDEN;
    float prediction = v[HIDDEN], error, de;
    for (u = 0; u < HIDDEN; ++u) prediction += v[u] * h[u];
    error = prediction - d->target[r];
    loss += error * error;
    if (!train) continue;
    de = 2.0f * error / (float)ROWS; /* dL/dprediction */
    for (u = 0; u < HIDDEN; ++u) {
      d_hidden[(size_t)r * HIDDEN + u] = de * v[u];
      dv[u] += de * h[u];
    }
    dv[HIDDEN] += de;
  }
  return loss / (float)ROWS;
}

/* Loss of the current weights on the evaluation set: inference forwards (no reserve) and the
 * readout. */
static rnncore_status evaluate(float* loss) {
  rnncore_forward_args args;
  rnncore_status status;
  int k;
  *loss = 0.0f;
  for (k = 0; k < EVAL_BATCHES; ++k) {
    rnncore_forward_args_init(&args);
    args.batch = BATCH;
    args.seq_len = SEQ_LEN;
    args.x = eval_set[k].x;
    args.y = hidden_out;
    status = rnncore_forward(&plan, packed, workspace, workspace_bytes, &args);
    if (status != RNNCORE_OK) return status;
    *loss += readout(&eval_set[k], 0) / (float)EVAL_BATCHES;
  }
  return RNNCORE_OK;
}

/* One training step on a batch: forward with reserve, readout, backward, Adam, re-pack. */
static rnncore_status train_step(const batch_data* d, float* loss) {
  static float beta1_power = 1.0f, beta2_power = 1.0f; /* BETA1^t, BETA2^t for Adam's bias correction */
  rnncore_forward_args args;
  rnncore_backward_args back;
  rnncore_status status;
  float norm2 = 0.0f, scale = 1.0f, step_size;
  size_t i;

  /* 1. Training forward: fills the reserve with what backward needs. */
  rnncore_forward_args_init(&args);
  args.batch = BATCH;
  args.seq_len = SEQ_LEN;
  args.x = d->x;
  args.y = hidden_out;
  args.reserve = reserve;
  args.reserve_bytes = reserve_bytes;
  status = rnncore_forward(&plan, packed, workspace, workspace_bytes, &args);
  if (status != RNNCORE_OK) return status;

  /* 2. Readout, loss, dL/dh and the readout's gradient. */
  *loss = readout(d, 1);

  /* 3. Backward through time: dL/dW of the LSTM's canonical weights, into grad[0..lstm_params). */
  rnncore_backward_args_init(&back);
  back.forward = args;
  back.dy = d_hidden;
  back.dweights = grad;
  status = rnncore_backward(&plan, packed, backward_workspace, backward_bytes, &back);
  if (status != RNNCORE_OK) return status;

  /* 4. Adam, on the gradient clipped to a global norm of CLIP_NORM. */
  for (i = 0; i < num_params; ++i) norm2 += grad[i] * grad[i];
  if (norm2 > CLIP_NORM * CLIP_NORM) scale = CLIP_NORM / sqrtf(norm2);
  beta1_power *= BETA1;
  beta2_power *= BETA2;
  step_size = LEARNING_RATE * sqrtf(1.0f - beta2_power) / (1.0f - beta1_power);
  for (i = 0; i < num_params; ++i) {
    const float g = grad[i] * scale;
    adam_m[i] = BETA1 * adam_m[i] + (1.0f - BETA1) * g;
    adam_v[i] = BETA2 * adam_v[i] + (1.0f - BETA2) * g * g;
    theta[i] -= step_size * adam_m[i] / (sqrtf(adam_v[i]) + EPSILON);
  }

  /* 5. The next forward reads the packed weights: pack the updated canonical ones. */
  return rnncore_plan_pack_weights(&plan, theta, packed, packed_bytes);
}

/* Loss of predicting s_{t+1} = s_t (the last value seen): what a model that learnt nothing about
 * the waves' shapes would reach; printed for comparison. */
static float persistence_loss(void) {
  float loss = 0.0f;
  int k, r;
  for (k = 0; k < EVAL_BATCHES; ++k)
    for (r = 0; r < ROWS; ++r) {
      const float error = eval_set[k].x[r * INPUT] - eval_set[k].target[r];
      loss += error * error;
    }
  return loss / (float)(EVAL_BATCHES * ROWS);
}

static void report(int step, float train_loss, float eval_loss, float initial) {
  put("step ");
  put_uint_w((unsigned long)step, 4);
  put("  train loss ");
  if (step > 0) put_sci(train_loss, 4);
  else put("    -    ");
  put("  eval loss ");
  put_sci(eval_loss, 4);
  put("  (");
  put_percent(eval_loss / initial);
  put(" of initial)");
  end_line();
}

int main(void) {
  rnncore_spec spec;
  rnncore_plan_options options;
  rnncore_status status;
  const float init_range = 1.0f / sqrtf((float)HIDDEN); /* PyTorch's uniform(-1/sqrt(H), 1/sqrt(H)) */
  float initial_loss, eval_loss, train_loss = 0.0f, loss;
  unsigned long stack_setup;
  int64_t forget_bias;
  size_t i;
  int step, gate;

  put("rnncore ");
  put(rnncore_version());
  put(" on-device training: LSTM input ");
  put_uint(INPUT);
  put(", hidden ");
  put_uint(HIDDEN);
  put(" + dense readout; batch ");
  put_uint(BATCH);
  put(" x ");
  put_uint(SEQ_LEN);
  put(" steps of noisy sine waves; Adam, ");
  put_uint(TRAIN_STEPS);
  put(" updates");
  end_line();

  /* Plan for training on the portable scalar reference (the path every Cortex-M build has, so
   * the host runs the same code and buffer sizes). */
  rnncore_spec_init(&spec);
  spec.mode = RNNCORE_MODE_LSTM;
  spec.input_size = INPUT;
  spec.hidden_size = HIDDEN;
  rnncore_plan_options_init(&options);
  options.max_batch = BATCH;
  options.max_seq_len = SEQ_LEN;
  options.backend = RNNCORE_BACKEND_REFERENCE;
  options.max_isa = RNNCORE_ISA_NONE;
  options.training = 1;
  status = rnncore_plan_create(&spec, &options, &plan);
#if !RNNCORE_TRAINING
  /* A library built without training (meson option training=false, the firmware profile's
   * default) refuses the training plan with a status and a line that says how to build it; the
   * example then stops there, having shown that refusal (PASS: nothing else to check). */
  if (status == RNNCORE_ERR_UNSUPPORTED) {
    put("refused: ");
    put(rnncore_last_error_detail());
    end_line();
    put("PASS (not trained: build the library with -Dtraining=true to train)");
    end_line();
    return 0;
  }
#endif
  if (status != RNNCORE_OK) return put_failure("plan", status);

  /* Every buffer from the arena, sized by the plan's queries. */
  packed_bytes = rnncore_plan_packed_weight_bytes(&plan);
  workspace_bytes = rnncore_plan_workspace_bytes(&plan);
  backward_bytes = rnncore_plan_backward_workspace_bytes(&plan);
  reserve_bytes = rnncore_plan_reserve_bytes(&plan);
  lstm_params = (size_t)rnncore_param_count(&spec);
  num_params = lstm_params + READOUT;
  packed = (unsigned char*)carve(packed_bytes);
  workspace = (unsigned char*)carve(workspace_bytes);
  backward_workspace = (unsigned char*)carve(backward_bytes);
  reserve = (unsigned char*)carve(reserve_bytes);
  theta = (float*)carve(num_params * sizeof(float));
  grad = (float*)carve(num_params * sizeof(float));
  adam_m = (float*)carve(num_params * sizeof(float));
  adam_v = (float*)carve(num_params * sizeof(float));
  hidden_out = (float*)carve((size_t)ROWS * HIDDEN * sizeof(float));
  d_hidden = (float*)carve((size_t)ROWS * HIDDEN * sizeof(float));
  put("memory: arena ");
  put_uint((unsigned long)arena_used);
  put(" of ");
  put_uint((unsigned long)sizeof arena);
  put(" bytes: packed weights ");
  put_uint((unsigned long)packed_bytes);
  put(", workspace ");
  put_uint((unsigned long)workspace_bytes);
  put(", backward workspace ");
  put_uint((unsigned long)backward_bytes);
  put(", reserve ");
  put_uint((unsigned long)reserve_bytes);
  end_line();
  put("        ");
  put_uint((unsigned long)num_params);
  put(" parameters (LSTM ");
  put_uint((unsigned long)lstm_params);
  put(" + readout ");
  put_uint(READOUT);
  put(") x 4 (weights, gradients, Adam m, v); activations and their gradients 2 x ");
  put_uint((unsigned long)(ROWS * HIDDEN * sizeof(float)));
  end_line();
  if (arena_used > sizeof arena) {
    put("FAIL: the arena is smaller than the plan needs: raise ARENA_BYTES");
    end_line();
    return 1;
  }

  /* Initial weights: uniform(-1/sqrt(H), 1/sqrt(H)) for everything (as PyTorch's LSTM and
   * Linear), but 1 for the forget gate's input bias (gate 1 in the canonical i, f, g, o order),
   * so that the cell keeps its state from the start. */
  rng_state = 20240601u;
  for (i = 0; i < num_params; ++i) theta[i] = rng_uniform(-init_range, init_range);
  forget_bias = rnncore_canonical_offset(&spec, 0, 0, RNNCORE_PARAM_INPUT_BIAS, 1);
  if (forget_bias < 0) return put_failure("canonical_offset", RNNCORE_ERR_INTERNAL);
  for (gate = 0; gate < HIDDEN; ++gate) theta[forget_bias + gate] = 1.0f;
  memset(adam_m, 0, num_params * sizeof(float));
  memset(adam_v, 0, num_params * sizeof(float));
  status = rnncore_plan_pack_weights(&plan, theta, packed, packed_bytes);
  if (status != RNNCORE_OK) return put_failure("pack", status);

  /* A fixed evaluation set (its own seed), and the training stream. */
  rng_state = 7u;
  for (i = 0; i < EVAL_BATCHES; ++i) make_batch(&eval_set[i]);
  rng_state = 12345u;

  stack_setup = board_stack_high_water(); /* planning and packing */
  board_stack_mark();                     /* from here: training */

  status = evaluate(&initial_loss);
  if (status != RNNCORE_OK) return put_failure("forward (evaluation)", status);
  put("evaluation set: ");
  put_uint(EVAL_BATCHES * BATCH);
  put(" sequences; predicting the last value seen (s_t) scores ");
  put_sci(persistence_loss(), 4);
  end_line();
  report(0, 0.0f, initial_loss, initial_loss);

  eval_loss = initial_loss;
  for (step = 1; step <= TRAIN_STEPS; ++step) {
    make_batch(&train_batch);
    status = train_step(&train_batch, &loss);
    if (status != RNNCORE_OK) return put_failure("training step", status);
    train_loss += loss;
    if (step % REPORT_EVERY == 0 || step == TRAIN_STEPS) {
      const int steps_in_report = step % REPORT_EVERY == 0 ? REPORT_EVERY : step % REPORT_EVERY;
      status = evaluate(&eval_loss);
      if (status != RNNCORE_OK) return put_failure("forward (evaluation)", status);
      report(step, train_loss / (float)steps_in_report, eval_loss, initial_loss);
      train_loss = 0.0f;
    }
  }

  if (stack_setup > 0) {
    put("stack (deepest, from its top, incl. main's frame): planning and packing ");
    put_uint(stack_setup);
    put(" bytes, training ");
    put_uint(board_stack_high_water());
    put(" bytes");
    end_line();
  }

  put("final evaluation loss ");
  put_sci(eval_loss, 4);
  put(" = ");
  put_percent(eval_loss / initial_loss);
  put(" of the initial ");
  put_sci(initial_loss, 4);
  put(" (pass: below ");
  put_percent(PASS_RATIO);
  put(")");
  end_line();
  if (eval_loss < PASS_RATIO * initial_loss) {
    put("PASS");
    end_line();
    return 0;
  }
  put("FAIL");
  end_line();
  return 1;
}

/* The C API from C99: plan in a static arena, import PyTorch-layout weights, run, compare with
 * the same network run through the C++ reference (checked by value here against a closed form). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rnncore/int8.h"
#include "rnncore/philox.h"
#include "rnncore/rnncore.h"

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* Static arena, as firmware would have it; sizes are checked against the plan at start-up. */
static unsigned char arena[64 * 1024] __attribute__((aligned(RNNCORE_ALIGNMENT)));

int main(void) {
  rnncore_spec spec;
  rnncore_plan_options opt;
  rnncore_plan plan;
  rnncore_spec_init(&spec);
  spec.mode = RNNCORE_MODE_RNN_TANH;
  spec.input_size = 1;
  spec.hidden_size = 1;
  EXPECT(rnncore_validate(&spec) == RNNCORE_OK);
  EXPECT(rnncore_param_count(&spec) == 4);
  EXPECT(rnncore_num_gates(RNNCORE_MODE_LSTM) == 4);
  /* The plan's size follows the build's layer limit and training (rnncore/config.h: 12 800 bytes at
   * 16 layers on a 32-bit target, 16 KiB on a 64-bit one; less without training); a spec of more
   * layers than the limit is refused. */
  EXPECT(sizeof(rnncore_plan) == RNNCORE_PLAN_BYTES);
  if (RNNCORE_TRAINING)
    EXPECT(RNNCORE_PLAN_BYTES == (sizeof(void*) <= 4 ? 1280 + 720 * RNNCORE_MAX_LAYERS : 2048 + 896 * RNNCORE_MAX_LAYERS));
  else
    EXPECT(RNNCORE_PLAN_BYTES == (sizeof(void*) <= 4 ? 1152 + 672 * RNNCORE_MAX_LAYERS : 1792 + 832 * RNNCORE_MAX_LAYERS));
  spec.num_layers = RNNCORE_MAX_LAYERS + 1;
  EXPECT(rnncore_validate(&spec) == RNNCORE_ERR_INVALID_SIZE);
  spec.num_layers = RNNCORE_MAX_LAYERS;
  EXPECT(rnncore_validate(&spec) == RNNCORE_OK);
  spec.num_layers = 1;

  rnncore_plan_options_init(&opt);
  opt.max_batch = 1;
  opt.max_seq_len = 3;
  EXPECT(rnncore_plan_create(&spec, &opt, &plan) == RNNCORE_OK);
  {
    const size_t packed_bytes = rnncore_plan_packed_weight_bytes(&plan);
    const size_t ws_bytes = rnncore_plan_workspace_bytes(&plan);
    const size_t ws_offset = (packed_bytes + RNNCORE_ALIGNMENT - 1) / RNNCORE_ALIGNMENT * RNNCORE_ALIGNMENT;
    void* packed = arena;
    void* ws = arena + ws_offset;
    /* h_t = tanh(w x_t + b_ih + r h_{t-1} + b_hh) with w = 0.5, r = -0.25, biases 0.1 and 0.2 */
    const float w_ih[1] = {0.5f}, w_hh[1] = {-0.25f}, b_ih[1] = {0.1f}, b_hh[1] = {0.2f};
    rnncore_tensor_view t[4];
    float canonical[4];
    const float x[3] = {1.0f, -2.0f, 0.5f};
    float y[3], hy[1];
    double h = 0.0;
    int i;
    rnncore_forward_args args;
    EXPECT(ws_offset + ws_bytes <= sizeof arena);
    memset(t, 0, sizeof t);
    t[0].name = "weight_ih_l0"; t[0].data = w_ih;
    t[1].name = "weight_hh_l0"; t[1].data = w_hh;
    t[2].name = "bias_ih_l0"; t[2].data = b_ih;
    t[3].name = "bias_hh_l0"; t[3].data = b_hh;
    for (i = 0; i < 4; ++i) {
      t[i].dtype = RNNCORE_F32;
      t[i].shape.ndim = i < 2 ? 2 : 1;
      t[i].shape.dims[0] = 1;
      t[i].shape.dims[1] = 1;
    }
    EXPECT(rnncore_import_weights(&spec, RNNCORE_FORMAT_PYTORCH, t, 4, "", canonical) == RNNCORE_OK);
    EXPECT(rnncore_plan_pack_weights(&plan, canonical, packed, packed_bytes) == RNNCORE_OK);
    rnncore_forward_args_init(&args);
    args.batch = 1;
    args.seq_len = 3;
    args.x = x;
    args.y = y;
    args.hy = hy;
    EXPECT(rnncore_forward(&plan, packed, ws, ws_bytes, &args) == RNNCORE_OK);
    for (i = 0; i < 3; ++i) {
      h = tanh(0.5 * x[i] + 0.1 + -0.25 * h + 0.2);
      EXPECT(fabs(y[i] - h) < 1e-6);
    }
    EXPECT(fabs(hy[0] - h) < 1e-6);

    /* A reset before step 2: that step starts again from h0 (NULL: zero). */
    {
      const uint8_t resets[3] = {0, 0, 1};
      args.resets = resets;
      EXPECT(rnncore_forward(&plan, packed, ws, ws_bytes, &args) == RNNCORE_OK);
      h = tanh(0.5 * x[2] + 0.1 + 0.2);
      EXPECT(fabs(y[2] - h) < 1e-6);
      EXPECT(fabs(hy[0] - h) < 1e-6);
      args.resets = NULL;
    }

    /* Errors come back as codes with a detail line. */
    args.seq_len = 4;
    EXPECT(rnncore_forward(&plan, packed, ws, ws_bytes, &args) == RNNCORE_ERR_SEQ_TOO_LONG);
    EXPECT(strstr(rnncore_last_error_detail(), "max_seq_len = 3") != NULL);
    EXPECT(strcmp(rnncore_status_message(RNNCORE_ERR_SEQ_TOO_LONG), "seq_len exceeds the plan's max_seq_len") == 0);
    EXPECT(rnncore_forward(&plan, packed, ws, ws_bytes, NULL) == RNNCORE_ERR_NULL_POINTER);
  }
  {
    rnncore_shape shapes[8];
    int count = 0;
    rnncore_shape st;
    rnncore_tensor_info info;
    spec.mode = RNNCORE_MODE_GRU;
    spec.input_size = 3;
    spec.hidden_size = 2;
    spec.direction = RNNCORE_BIDIRECTIONAL;
    EXPECT(rnncore_canonical_weight_shapes(&spec, shapes, 8, &count) == RNNCORE_OK);
    EXPECT(count == 12);
    EXPECT(shapes[0].dims[0] == 2 && shapes[0].dims[1] == 3);
    st = rnncore_state_shape(&spec, 4);
    EXPECT(st.ndim == 3 && st.dims[0] == 2 && st.dims[1] == 4 && st.dims[2] == 2);
    EXPECT(rnncore_format_tensor_count(&spec, RNNCORE_FORMAT_ONNX) == 3);
    EXPECT(rnncore_format_tensor_info(&spec, RNNCORE_FORMAT_ONNX, 0, "gru.", &info) == RNNCORE_OK);
    EXPECT(strcmp(info.name, "gru.W") == 0 && info.shape.dims[0] == 2 && info.shape.dims[1] == 6);
    EXPECT(rnncore_canonical_offset(&spec, 0, 1, RNNCORE_PARAM_INPUT_WEIGHT, 0) == 3 * (6 + 4 + 4));
    spec.hidden_size = 0;
    EXPECT(rnncore_validate(&spec) == RNNCORE_ERR_INVALID_SIZE);
    EXPECT(rnncore_param_count(&spec) == 0);
  }
  {
    rnncore_model* model = NULL;
    float canonical[4] = {1.0f, 0.0f, 0.0f, 0.0f};
    const float x[2] = {0.25f, 0.5f};
    float y[2];
    rnncore_forward_args args;
    spec.mode = RNNCORE_MODE_RNN_RELU;
    spec.input_size = spec.hidden_size = 1;
    spec.direction = RNNCORE_UNIDIRECTIONAL;
    opt.max_seq_len = 2;
    EXPECT(rnncore_model_create(&spec, &opt, canonical, &model) == RNNCORE_OK);
    rnncore_forward_args_init(&args);
    args.batch = 1;
    args.seq_len = 2;
    args.x = x;
    args.y = y;
    EXPECT(rnncore_model_forward(model, &args) == RNNCORE_OK);
    EXPECT(y[0] == 0.25f && y[1] == 0.5f); /* relu(w x) with w = 1, r = 0 */
    EXPECT(rnncore_plan_backend(rnncore_model_plan(model)) != RNNCORE_BACKEND_AUTO);
    rnncore_model_destroy(model);
    rnncore_model_destroy(NULL);
  }
  {
    /* A stack from C: one GRU layer in a dropout wrapper; a training run's output equals the
     * inference output times the mask, recomputed here with philox.h. */
    static rnncore_stack_spec stack;
    rnncore_plan_options o;
    rnncore_model* model = NULL;
    enum { T = 3, B = 2, I = 3, H = 5 };
    float canonical[3 * (H * I + H * H + 2 * H)];
    float x[T * B * I], y_train[T * B * H], y_inf[T * B * H];
    rnncore_forward_args args;
    rnncore_mask_params mp;
    int i, t, b, u;
    rnncore_stack_init(&stack);
    stack.input_size = I;
    stack.num_layers = 1;
    stack.layers[0].mode = RNNCORE_MODE_GRU;
    stack.layers[0].hidden_size = H;
    stack.layers[0].num_wrappers = 1;
    stack.layers[0].wrappers[0].kind = RNNCORE_WRAPPER_DROPOUT;
    stack.layers[0].wrappers[0].dropout.output_keep = 0.5;
    EXPECT(rnncore_stack_validate(&stack) == RNNCORE_OK);
    EXPECT(rnncore_stack_param_count(&stack) == (int64_t)(sizeof canonical / sizeof canonical[0]));
    EXPECT(rnncore_stack_state_elements(&stack, B) == B * H);
    for (i = 0; i < (int)(sizeof canonical / sizeof canonical[0]); ++i) canonical[i] = (float)((i * 37) % 11 - 5) * 0.05f;
    for (i = 0; i < T * B * I; ++i) x[i] = (float)(i % 7) * 0.3f - 1.0f;
    rnncore_plan_options_init(&o);
    o.max_batch = B;
    o.max_seq_len = T;
    EXPECT(rnncore_model_create_stack(&stack, &o, canonical, &model) == RNNCORE_OK);
    rnncore_forward_args_init(&args);
    args.batch = B;
    args.seq_len = T;
    args.x = x;
    args.y = y_inf;
    EXPECT(rnncore_model_forward(model, &args) == RNNCORE_OK);
    args.y = y_train;
    args.run_mode = RNNCORE_RUN_TRAINING;
    args.seed = 42;
    args.step = 9;
    EXPECT(rnncore_model_forward(model, &args) == RNNCORE_OK);
    rnncore_mask_params_init(&mp, 0.5);
    for (t = 0; t < T; ++t)
      for (b = 0; b < B; ++b)
        for (u = 0; u < H; ++u) {
          const uint32_t site = rnncore_mask_site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT, 0);
          const float m = rnncore_mask_keep(42, 9, site, (uint32_t)t, (uint32_t)b, (uint32_t)u, H, &mp) ? mp.scale : 0.0f;
          EXPECT(y_train[(t * B + b) * H + u] == y_inf[(t * B + b) * H + u] * m);
        }
    stack.layers[0].wrappers[0].dropout.output_keep = 0.0;
    EXPECT(rnncore_stack_validate(&stack) == RNNCORE_ERR_BAD_PROBABILITY);
    rnncore_model_destroy(model);
  }
  { /* Embedding -> Elman RNN -> Dense head with a softmax on each row's last step, from C. */
    rnncore_stack_spec stack;
    rnncore_plan_options o;
    rnncore_model* model = NULL;
    rnncore_forward_args args;
    enum { T = 3, B = 3, I = 2, H = 3, V = 4, F = 2 };
    float canonical[(H * I + H * H + 2 * H) + V * I + F * (H + 1)];
    int32_t ids[T * B] = {0, 1, 2, 3, 2, 1, 0, 0, 3};
    const int32_t lengths[B] = {3, 0, 2};
    float y[B * F];
    int i;
    rnncore_stack_init(&stack);
    stack.input_size = I;
    stack.num_layers = 1;
    stack.layers[0].mode = RNNCORE_MODE_RNN_TANH;
    stack.layers[0].hidden_size = H;
    stack.embedding_vocab_size = V;
    stack.head_out_features = F;
    stack.head_activation = RNNCORE_ACTIVATION_SOFTMAX;
    stack.head_last_step_only = 1;
    EXPECT(rnncore_stack_validate(&stack) == RNNCORE_OK);
    EXPECT(rnncore_stack_param_count(&stack) == (int64_t)(sizeof canonical / sizeof canonical[0]));
    for (i = 0; i < (int)(sizeof canonical / sizeof canonical[0]); ++i) canonical[i] = (float)((i * 29) % 13 - 6) * 0.1f;
    rnncore_plan_options_init(&o);
    o.max_batch = B;
    o.max_seq_len = T;
    EXPECT(rnncore_model_create_stack(&stack, &o, canonical, &model) == RNNCORE_OK);
    rnncore_forward_args_init(&args);
    args.batch = B;
    args.seq_len = T;
    args.x = ids;
    args.y = y;
    args.seq_lengths = lengths;
    EXPECT(rnncore_model_forward(model, &args) == RNNCORE_OK);
    EXPECT(fabsf(y[0] + y[1] - 1.0f) < 1e-6f && y[0] > 0.0f && y[1] > 0.0f);
    EXPECT(y[2] == 0.0f && y[3] == 0.0f); /* a row of length 0 */
    EXPECT(fabsf(y[4] + y[5] - 1.0f) < 1e-6f);
    { /* The same through an identity Dense before the head. */
      enum { N = (H * I + H * H + 2 * H) + V * I };
      float chained[N + H * (H + 1) + F * (H + 1)], y2[B * F];
      rnncore_model* m2 = NULL;
      memset(chained, 0, sizeof chained);
      memcpy(chained, canonical, sizeof(float) * N);
      for (i = 0; i < H; ++i) chained[N + i * H + i] = 1.0f;
      memcpy(chained + N + H * (H + 1), canonical + N, sizeof(float) * F * (H + 1));
      stack.num_pre_head = 1;
      stack.pre_head[0].out_features = H;
      EXPECT(rnncore_stack_param_count(&stack) == (int64_t)(sizeof chained / sizeof chained[0]));
      EXPECT(rnncore_model_create_stack(&stack, &o, chained, &m2) == RNNCORE_OK);
      args.y = y2;
      EXPECT(rnncore_model_forward(m2, &args) == RNNCORE_OK);
      for (i = 0; i < B * F; ++i) EXPECT(fabsf(y2[i] - y[i]) < 1e-6f);
      args.y = y;
      rnncore_model_destroy(m2);
      stack.num_pre_head = 0;
    }
    ids[5] = V; /* not a row of the table */
    EXPECT(rnncore_model_forward(model, &args) == RNNCORE_ERR_INVALID_SIZE);
    stack.head_activation = 7;
    EXPECT(rnncore_stack_validate(&stack) == RNNCORE_ERR_INVALID_ENUM);
    rnncore_model_destroy(model);
  }
  { /* Training from C: backward through time of an f64 Elman RNN against central differences. */
    enum { T = 4, B = 2, I = 2, H = 3 };
    static unsigned char train_arena[256 * 1024] __attribute__((aligned(RNNCORE_ALIGNMENT)));
    rnncore_spec s;
    rnncore_plan_options o;
    rnncore_plan p;
    rnncore_forward_args fa;
    rnncore_backward_args ba;
    double w[3 * (I + H + 2)], x[T * B * I], y[T * B * H], dy[T * B * H], dw[3 * (I + H + 2)], dx[T * B * I];
    const int32_t lengths[B] = {4, 2};
    size_t packed_bytes, ws_bytes, bws_bytes, reserve_bytes;
    unsigned char *packed, *ws, *bws, *reserve;
    int i, n;
    rnncore_spec_init(&s);
    s.mode = RNNCORE_MODE_RNN_TANH;
    s.input_size = I;
    s.hidden_size = H;
    s.dtype = RNNCORE_F64;
    n = (int)rnncore_param_count(&s);
    EXPECT(n == H * (I + H + 2));
    for (i = 0; i < n; ++i) w[i] = 0.3 * sin(1.7 * i + 0.2);
    for (i = 0; i < T * B * I; ++i) x[i] = cos(0.9 * i);
    for (i = 0; i < T * B * H; ++i) dy[i] = sin(0.7 * i + 1.0);
    rnncore_plan_options_init(&o);
    o.max_batch = B;
    o.max_seq_len = T;
    o.backend = RNNCORE_BACKEND_REFERENCE;
    o.training = 1;
    EXPECT(rnncore_plan_create(&s, &o, &p) == RNNCORE_OK);
    packed_bytes = rnncore_plan_packed_weight_bytes(&p);
    ws_bytes = rnncore_plan_workspace_bytes(&p);
    bws_bytes = rnncore_plan_backward_workspace_bytes(&p);
    reserve_bytes = rnncore_plan_reserve_bytes(&p);
    EXPECT(reserve_bytes > 0 && bws_bytes > 0);
    EXPECT(packed_bytes + ws_bytes + bws_bytes + reserve_bytes <= sizeof train_arena);
    packed = train_arena;
    ws = packed + packed_bytes;
    bws = ws + ws_bytes;
    reserve = bws + bws_bytes;
    EXPECT(rnncore_plan_pack_weights(&p, w, packed, packed_bytes) == RNNCORE_OK);
    rnncore_forward_args_init(&fa);
    fa.batch = B;
    fa.seq_len = T;
    fa.x = x;
    fa.seq_lengths = lengths;
    fa.y = y;
    fa.reserve = reserve;
    fa.reserve_bytes = reserve_bytes;
    EXPECT(rnncore_forward(&p, packed, ws, ws_bytes, &fa) == RNNCORE_OK);
    rnncore_backward_args_init(&ba);
    ba.forward = fa;
    ba.dy = dy;
    ba.dx = dx;
    ba.dweights = dw;
    EXPECT(rnncore_backward(&p, packed, bws, bws_bytes, &ba) == RNNCORE_OK);
    for (i = 0; i < n; ++i) { /* d(sum y*dy)/dw_i by central differences through an ordinary forward */
      double loss[2];
      int side, k;
      for (side = 0; side < 2; ++side) {
        rnncore_forward_args plain = fa;
        const double keep = w[i];
        w[i] = keep + (side ? -1e-6 : 1e-6);
        EXPECT(rnncore_plan_pack_weights(&p, w, packed, packed_bytes) == RNNCORE_OK);
        w[i] = keep;
        plain.reserve = NULL;
        plain.reserve_bytes = 0;
        EXPECT(rnncore_forward(&p, packed, ws, ws_bytes, &plain) == RNNCORE_OK);
        loss[side] = 0;
        for (k = 0; k < T * B * H; ++k) loss[side] += y[k] * dy[k];
      }
      EXPECT(fabs((loss[0] - loss[1]) / 2e-6 - dw[i]) < 1e-7);
    }
    fa.reserve = NULL; /* backward without the reserve of a training forward */
    ba.forward = fa;
    EXPECT(rnncore_backward(&p, packed, bws, bws_bytes, &ba) == RNNCORE_ERR_NULL_POINTER);
    EXPECT(strstr(rnncore_last_error_detail(), "reserve") != NULL);
  }
  { /* Training an LSTM with every TF LSTMCell option from C (f64; both clips bind): central differences again. */
    enum { T = 4, B = 2, I = 2, H = 3, P = 2, N = 128 };
    static unsigned char train_arena[256 * 1024] __attribute__((aligned(RNNCORE_ALIGNMENT)));
    rnncore_spec s;
    rnncore_plan_options o;
    rnncore_plan p;
    rnncore_forward_args fa;
    rnncore_backward_args ba;
    double w[N], x[T * B * I], y[T * B * P], dy[T * B * P], dw[N];
    const int32_t lengths[B] = {3, 4};
    size_t packed_bytes, ws_bytes, bws_bytes, reserve_bytes;
    unsigned char *packed, *ws, *bws, *reserve;
    int i, n;
    rnncore_spec_init(&s);
    s.mode = RNNCORE_MODE_LSTM;
    s.input_size = I;
    s.hidden_size = H;
    s.proj_size = P;
    s.peepholes = 1;
    s.cell_clip = 0.3;
    s.proj_clip = 0.05;
    s.dtype = RNNCORE_F64;
    n = (int)rnncore_param_count(&s);
    EXPECT(n == 4 * H * (I + P) + 8 * H + 3 * H + P * H && n <= N);
    for (i = 0; i < n; ++i) w[i] = 0.5 * sin(1.3 * i + 0.4);
    for (i = 0; i < T * B * I; ++i) x[i] = 1.5 * cos(0.8 * i);
    for (i = 0; i < T * B * P; ++i) dy[i] = sin(0.6 * i + 0.5);
    rnncore_plan_options_init(&o);
    o.max_batch = B;
    o.max_seq_len = T;
    o.backend = RNNCORE_BACKEND_REFERENCE;
    o.training = 1;
    EXPECT(rnncore_plan_create(&s, &o, &p) == RNNCORE_OK);
    packed_bytes = rnncore_plan_packed_weight_bytes(&p);
    ws_bytes = rnncore_plan_workspace_bytes(&p);
    bws_bytes = rnncore_plan_backward_workspace_bytes(&p);
    reserve_bytes = rnncore_plan_reserve_bytes(&p);
    EXPECT(packed_bytes + ws_bytes + bws_bytes + reserve_bytes <= sizeof train_arena);
    packed = train_arena;
    ws = packed + packed_bytes;
    bws = ws + ws_bytes;
    reserve = bws + bws_bytes;
    EXPECT(rnncore_plan_pack_weights(&p, w, packed, packed_bytes) == RNNCORE_OK);
    rnncore_forward_args_init(&fa);
    fa.batch = B;
    fa.seq_len = T;
    fa.x = x;
    fa.seq_lengths = lengths;
    fa.y = y;
    fa.reserve = reserve;
    fa.reserve_bytes = reserve_bytes;
    EXPECT(rnncore_forward(&p, packed, ws, ws_bytes, &fa) == RNNCORE_OK);
    rnncore_backward_args_init(&ba);
    ba.forward = fa;
    ba.dy = dy;
    ba.dweights = dw;
    EXPECT(rnncore_backward(&p, packed, bws, bws_bytes, &ba) == RNNCORE_OK);
    for (i = 0; i < n; ++i) {
      double loss[2];
      int side, k;
      for (side = 0; side < 2; ++side) {
        rnncore_forward_args plain = fa;
        const double keep = w[i];
        w[i] = keep + (side ? -1e-6 : 1e-6);
        EXPECT(rnncore_plan_pack_weights(&p, w, packed, packed_bytes) == RNNCORE_OK);
        w[i] = keep;
        plain.reserve = NULL;
        plain.reserve_bytes = 0;
        EXPECT(rnncore_forward(&p, packed, ws, ws_bytes, &plain) == RNNCORE_OK);
        loss[side] = 0;
        for (k = 0; k < T * B * P; ++k) loss[side] += y[k] * dy[k];
      }
      EXPECT(fabs((loss[0] - loss[1]) / 2e-6 - dw[i]) < 1e-7);
    }
  }
  {
    /* 16-bit weight storage from C: bf16 packs about half the bytes of f32 (biases stay f32) where the
     * SIMD backend has it (AVX2 / AVX-512), and is refused by name elsewhere; an unknown storage type
     * is refused. */
    rnncore_spec s;
    rnncore_plan_options o;
    rnncore_plan p32, p16;
    rnncore_spec_init(&s);
    s.mode = RNNCORE_MODE_LSTM;
    s.input_size = 16;
    s.hidden_size = 32;
    rnncore_plan_options_init(&o);
    EXPECT(o.weight_dtype == RNNCORE_F32 && o.gpu_half_math == 0);
    o.backend = RNNCORE_BACKEND_SIMD;
    if (rnncore_plan_create(&s, &o, &p32) == RNNCORE_OK) {
      rnncore_status st;
      o.weight_dtype = RNNCORE_BF16;
      st = rnncore_plan_create(&s, &o, &p16);
      EXPECT(st == RNNCORE_OK || st == RNNCORE_ERR_UNSUPPORTED);
      if (st == RNNCORE_OK)
        EXPECT(20 * rnncore_plan_packed_weight_bytes(&p16) <= 11 * rnncore_plan_packed_weight_bytes(&p32));
      else
        EXPECT(strstr(rnncore_last_error_detail(), "weight_dtype bf16") != NULL);
    }
    o.weight_dtype = RNNCORE_F64;
    EXPECT(rnncore_plan_create(&s, &o, &p16) == RNNCORE_ERR_INVALID_ENUM);
    EXPECT(strstr(rnncore_last_error_detail(), "weight_dtype") != NULL);
  }
  {
    /* An integer stack from C (dtype RNNCORE_I8), planned in the static arena: one int8 LSTM through
     * a plan equals, bit for bit, the same layer through rnncore/int8.h's own prepare and run; the
     * GPU backend refuses it with a detail. */
    enum { QI = 5, QH = 7, QT = 6, QB = 2 };
    static rnncore_stack_spec q8s;
    static int32_t canon_words[1024];
    unsigned char* canon = (unsigned char*)canon_words;
    static int8_t qx[QB * QT * QI], qy[QB * QT * QH], qy2[QB * QT * QH], qh[QB * QH], qh2[QB * QH];
    static int16_t qc[QB * QH], qc2[QB * QH];
    static int32_t folded[8 * QH];
    static int8_t scratch[QH];
    rnncore_plan_options o;
    rnncore_plan p;
    rnncore_forward_args a;
    rnncore_int8_lstm_quantization q;
    rnncore_int8_lstm lstm;
    const int8_t* w[4];
    const int8_t* r[4];
    const int32_t* b[4];
    uint32_t lcg = 7;
    int64_t n, i;
    int g;
    rnncore_stack_init(&q8s);
    q8s.dtype = RNNCORE_I8;
    q8s.input_size = QI;
    q8s.input_quant.scale = 1.0f / 128;
    q8s.input_quant.zero_point = 3;
    q8s.num_layers = 1;
    q8s.layers[0].mode = RNNCORE_MODE_LSTM;
    q8s.layers[0].hidden_size = QH;
    for (g = 0; g < 4; ++g) q8s.layers[0].int8[0].w_scale[g] = q8s.layers[0].int8[0].r_scale[g] = 1.0f / 127;
    q8s.layers[0].int8[0].state.scale = q8s.layers[0].int8[0].hidden.scale = 1.0f / 128;
    q8s.layers[0].int8[0].state.zero_point = q8s.layers[0].int8[0].hidden.zero_point = -2;
    q8s.layers[0].int8[0].cell_scale = 1.0f / 2048;
    q8s.layers[0].int8[0].cell_clip = 10.0f;
    EXPECT(rnncore_stack_validate(&q8s) == RNNCORE_OK);
    n = rnncore_stack_param_count(&q8s);
    EXPECT(n > 0 && n <= (int64_t)sizeof canon_words);
    for (i = 0; i < n; ++i) canon[i] = (unsigned char)((lcg = lcg * 1103515245u + 12345u) >> 24) % 61;
    for (g = 0; g < 4; ++g) {
      int32_t* bias = (int32_t*)(canon + rnncore_stack_canonical_offset(&q8s, 0, 0, RNNCORE_PARAM_INPUT_BIAS, g));
      for (i = 0; i < QH; ++i) bias[i] = (int32_t)(i * 37) - 100;
      w[g] = (const int8_t*)(canon + rnncore_stack_canonical_offset(&q8s, 0, 0, RNNCORE_PARAM_INPUT_WEIGHT, g));
      r[g] = (const int8_t*)(canon + rnncore_stack_canonical_offset(&q8s, 0, 0, RNNCORE_PARAM_RECURRENT_WEIGHT, g));
      b[g] = bias;
    }
    for (i = 0; i < QB * QT * QI; ++i) qx[i] = (int8_t)(((lcg = lcg * 1103515245u + 12345u) >> 24) - 128);
    rnncore_plan_options_init(&o);
    o.max_batch = QB;
    o.max_seq_len = QT;
    EXPECT(rnncore_plan_create_stack(&q8s, &o, &p) == RNNCORE_OK);
    EXPECT(rnncore_plan_packed_weight_bytes(&p) + rnncore_plan_workspace_bytes(&p) <= sizeof arena);
    EXPECT(rnncore_plan_pack_weights(&p, canon, arena, rnncore_plan_packed_weight_bytes(&p)) == RNNCORE_OK);
    rnncore_forward_args_init(&a);
    a.batch = QB;
    a.seq_len = QT;
    a.layout = RNNCORE_BATCH_MAJOR;
    a.x = qx;
    a.y = qy;
    a.hy = qh;
    a.cy = qc;
    EXPECT(rnncore_forward(&p, arena, arena + rnncore_plan_packed_weight_bytes(&p), rnncore_plan_workspace_bytes(&p), &a) ==
           RNNCORE_OK);
    memset(&q, 0, sizeof q);
    q.input_scale = 1.0f / 128;
    q.input_zp = 3;
    for (g = 0; g < 4; ++g) q.w_scale[g] = q.r_scale[g] = 1.0f / 127;
    q.state_scale = q.hidden_scale = 1.0f / 128;
    q.state_zp = q.hidden_zp = -2;
    q.cell_scale = 1.0f / 2048;
    q.cell_clip = 10.0f;
    EXPECT(rnncore_int8_lstm_prepare(&q, QI, QH, w, r, b, folded, 8 * QH, &lstm) == RNNCORE_OK);
    memset(qh2, -2, sizeof qh2);
    memset(qc2, 0, sizeof qc2);
    EXPECT(rnncore_int8_lstm_run(&lstm, QB, QT, qx, qy2, qh2, qc2, scratch, sizeof scratch) == RNNCORE_OK);
    EXPECT(memcmp(qy, qy2, sizeof qy) == 0);
    EXPECT(memcmp(qh, qh2, sizeof qh) == 0);
    EXPECT(memcmp(qc, qc2, sizeof qc) == 0);
    o.backend = RNNCORE_BACKEND_GPU;
    EXPECT(rnncore_plan_create_stack(&q8s, &o, &p) == RNNCORE_ERR_UNSUPPORTED);
    EXPECT(strstr(rnncore_last_error_detail(), "integer stack") != NULL);
  }
  printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}

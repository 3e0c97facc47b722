// The C API: thin conversions onto the C++ API.
#include <cstdlib>
#include <cstring>
#include <new>

#include "rnncore/rnncore.h"
#include "src/internal/error.hpp"

namespace rnncore {
namespace {

static_assert(sizeof(rnncore_plan) == sizeof(Plan), "rnncore_plan and rnncore::Plan differ in size");
static_assert(alignof(rnncore_plan) >= alignof(Plan), "rnncore_plan is less aligned than rnncore::Plan");
static_assert(RNNCORE_PLAN_BYTES == Plan::kStorageBytes, "RNNCORE_PLAN_BYTES is out of date");
static_assert(RNNCORE_ALIGNMENT == kAlignment, "RNNCORE_ALIGNMENT is out of date");
static_assert(RNNCORE_MAX_LAYERS == kMaxLayers, "RNNCORE_MAX_LAYERS is out of date");
static_assert(RNNCORE_MAX_PRE_HEAD == kMaxPreHead, "RNNCORE_MAX_PRE_HEAD is out of date");
static_assert(sizeof(rnncore_shape) == sizeof(Shape), "rnncore_shape and rnncore::Shape differ");
static_assert(sizeof(rnncore_tensor_info) == sizeof(TensorInfo), "rnncore_tensor_info and rnncore::TensorInfo differ");

RnnSpec to_cpp(const rnncore_spec& s) {
  RnnSpec r;
  r.mode = static_cast<Mode>(s.mode);
  r.gru_variant = static_cast<GruVariant>(s.gru_variant);
  r.input_size = s.input_size;
  r.hidden_size = s.hidden_size;
  r.num_layers = s.num_layers;
  r.direction = static_cast<Direction>(s.direction);
  r.input_mode = static_cast<InputMode>(s.input_mode);
  r.dtype = static_cast<DType>(s.dtype);
  r.dropout = s.dropout;
  r.proj_size = s.proj_size;
  r.peepholes = s.peepholes != 0;
  r.cell_clip = s.cell_clip;
  r.proj_clip = s.proj_clip;
  return r;
}

QuantParams to_cpp(const rnncore_quant& q) {
  QuantParams r;
  r.scale = q.scale;
  r.zero_point = q.zero_point;
  return r;
}

Int8LstmQuant to_cpp(const rnncore_int8_layer_quant& q) {
  Int8LstmQuant r;
  for (int g = 0; g < 4; ++g) {
    r.w_scale[g] = q.w_scale[g];
    r.r_scale[g] = q.r_scale[g];
  }
  r.per_channel = q.per_channel != 0;
  r.state = to_cpp(q.state);
  r.hidden = to_cpp(q.hidden);
  r.cell_scale = q.cell_scale;
  r.cell_clip = q.cell_clip;
  return r;
}

Int8Merge to_cpp(const rnncore_int8_merge& m) {
  Int8Merge r;
  r.mode = static_cast<MergeMode>(m.mode);
  r.fw = to_cpp(m.fw);
  r.bw = to_cpp(m.bw);
  r.sum = to_cpp(m.sum);
  r.half = to_cpp(m.half);
  r.half_value = m.half_value;
  return r;
}

StackSpec to_cpp(const rnncore_stack_spec& s) {
  StackSpec r;
  r.input_size = s.input_size;
  r.input_mode = static_cast<InputMode>(s.input_mode);
  r.dtype = static_cast<DType>(s.dtype);
  r.dropout = s.dropout;
  r.num_layers = s.num_layers;
  for (int l = 0; l < kMaxLayers; ++l) {
    const rnncore_layer_spec& a = s.layers[l];
    LayerSpec& b = r.layers[l];
    b.mode = static_cast<Mode>(a.mode);
    b.gru_variant = static_cast<GruVariant>(a.gru_variant);
    b.hidden_size = a.hidden_size;
    b.direction = static_cast<Direction>(a.direction);
    b.num_wrappers = a.num_wrappers;
    b.proj_size = a.proj_size;
    b.peepholes = a.peepholes != 0;
    b.cell_clip = a.cell_clip;
    b.proj_clip = a.proj_clip;
    b.int8[0] = to_cpp(a.int8[0]);
    b.int8[1] = to_cpp(a.int8[1]);
    b.merge = to_cpp(a.merge);
    b.int8_output = to_cpp(a.int8_output);
    for (int w = 0; w < kMaxWrappers; ++w) {
      const rnncore_wrapper& x = a.wrappers[w];
      Wrapper& y = b.wrappers[w];
      y.kind = static_cast<WrapperKind>(x.kind);
      y.dropout.input_keep = x.dropout.input_keep;
      y.dropout.output_keep = x.dropout.output_keep;
      y.dropout.state_keep = x.dropout.state_keep;
      y.dropout.variational = x.dropout.variational != 0;
      y.dropout.per_sequence = x.dropout.per_sequence != 0;
      y.dropout.state_filter = static_cast<StateFilter>(x.dropout.state_filter);
      y.dropout.has_seed = x.dropout.has_seed != 0;
      y.dropout.seed = x.dropout.seed;
      y.residual.f32 = x.residual_f32;
      y.residual.f64 = x.residual_f64;
      y.residual.user_data = x.user_data;
    }
  }
  r.embedding.vocab_size = s.embedding_vocab_size;
  r.head.out_features = s.head_out_features;
  r.head.activation = static_cast<Activation>(s.head_activation);
  r.head.last_step_only = s.head_last_step_only != 0;
  r.input_quant = to_cpp(s.input_quant);
  r.float_input = s.float_input != 0;
  r.float_output = s.float_output != 0;
  r.reverse_input = s.reverse_input != 0;
  r.head.int8_per_channel = s.head_int8_per_channel != 0;
  r.head.int8_w_scale = s.head_int8_w_scale;
  r.head.int8_linear = to_cpp(s.head_int8_linear);
  r.head.int8_output = to_cpp(s.head_int8_output);
  r.head.int8_softmax_beta = s.head_int8_softmax_beta;
  r.num_pre_head = s.num_pre_head;
  for (int k = 0; k < kMaxPreHead; ++k) {
    const rnncore_dense_spec& c = s.pre_head[k];
    DenseSpec& d = r.pre_head[k];
    d.out_features = c.out_features;
    d.activation = static_cast<Activation>(c.activation);
    d.int8_per_channel = c.int8_per_channel != 0;
    d.int8_w_scale = c.int8_w_scale;
    d.int8_linear = to_cpp(c.int8_linear);
    d.int8_output = to_cpp(c.int8_output);
  }
  return r;
}

PlanOptions to_cpp(const rnncore_plan_options& o) {
  PlanOptions r;
  r.max_batch = o.max_batch;
  r.max_seq_len = o.max_seq_len;
  r.backend = static_cast<Backend>(o.backend);
  r.max_isa = static_cast<Isa>(o.max_isa);
  r.threads = o.threads;
  r.gpu_device = o.gpu_device;
  r.training = o.training != 0;
  r.weight_dtype = static_cast<DType>(o.weight_dtype);  // the same numbers (Plan::create checks the value)
  r.int8_weights = static_cast<Int8Weights>(o.int8_weights);  // the same numbers (checked as weight_dtype)
  r.gpu_half_math = o.gpu_half_math != 0;
  r.int8_token_table = o.int8_token_table != 0;
  return r;
}

ForwardArgs to_cpp(const rnncore_forward_args& a) {
  ForwardArgs r;
  r.batch = a.batch;
  r.seq_len = a.seq_len;
  r.layout = static_cast<Layout>(a.layout);
  r.x = a.x;
  r.seq_lengths = a.seq_lengths;
  r.resets = a.resets;
  r.h0 = a.h0;
  r.c0 = a.c0;
  r.y = a.y;
  r.hy = a.hy;
  r.cy = a.cy;
  r.run_mode = static_cast<RunMode>(a.run_mode);
  r.seed = a.seed;
  r.step = a.step;
  r.count_steps = a.count_steps != 0;
  r.row_ids = a.row_ids;
  r.time_offset = a.time_offset;
  r.stream = a.stream;
  r.reserve = a.reserve;
  r.reserve_bytes = a.reserve_bytes;
  return r;
}

BackwardArgs to_cpp(const rnncore_backward_args& a) {
  BackwardArgs r;
  r.forward = to_cpp(a.forward);
  r.dy = a.dy;
  r.dhy = a.dhy;
  r.dcy = a.dcy;
  r.dx = a.dx;
  r.dh0 = a.dh0;
  r.dc0 = a.dc0;
  r.dweights = a.dweights;
  r.accumulate = a.accumulate != 0;
  return r;
}

Shape to_cpp(const rnncore_shape& s) {
  Shape r;
  r.ndim = s.ndim;
  for (int i = 0; i < 4; ++i) r.dims[i] = s.dims[i];
  return r;
}

rnncore_shape to_c(const Shape& s) {
  rnncore_shape r;
  r.ndim = s.ndim;
  for (int i = 0; i < 4; ++i) r.dims[i] = s.dims[i];
  return r;
}

rnncore_status c(Status s) { return static_cast<rnncore_status>(s); }

// C tensor views → C++ ones, in a bounded stack array: weight files have few tensors per model.
constexpr std::size_t kMaxImportTensors = 256;
rnncore_status to_views(const rnncore_tensor_view* tensors, std::size_t count, TensorView* views, const char* function) {
  if (count > kMaxImportTensors)
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "%s: %zu tensors, at most %zu", function, count, kMaxImportTensors);
  for (std::size_t i = 0; i < count; ++i) {
    views[i].name = tensors[i].name;
    views[i].dtype = static_cast<DType>(tensors[i].dtype);
    views[i].shape = to_cpp(tensors[i].shape);
    views[i].data = tensors[i].data;
  }
  return RNNCORE_OK;
}

const Plan& as_plan(const rnncore_plan* p) { return *reinterpret_cast<const Plan*>(p); }

#define RNNCORE_C_REQUIRE(ptr)                                                                    \
  do {                                                                                             \
    if ((ptr) == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "%s: %s is null", __func__, #ptr); \
  } while (0)

}  // namespace
}  // namespace rnncore

using namespace rnncore;

struct rnncore_model {
  Model model;
};

namespace {

// The convenience owner for both spec kinds (none without a heap).
rnncore_status create_model(const rnncore::StackSpec& stack, const rnncore_plan_options* options, const void* canonical,
                            rnncore_model** model) {
  RNNCORE_C_REQUIRE(options);
  RNNCORE_C_REQUIRE(model);
  *model = nullptr;
#if defined(RNNCORE_NO_HEAP)
  (void)stack;
  (void)canonical;
  return detail::fail(RNNCORE_ERR_UNSUPPORTED,
                      "rnncore_model_create: this build has no heap (firmware profile); use rnncore_plan_create with caller memory");
#else
  void* mem = std::malloc(sizeof(rnncore_model));
  if (mem == nullptr) return detail::fail(RNNCORE_ERR_OUT_OF_MEMORY, "rnncore_model_create: out of memory");
  auto* m = new (mem) rnncore_model();
  const Status s = Model::create(stack, to_cpp(*options), canonical, &m->model);
  if (s != Status::ok) {
    m->~rnncore_model();
    std::free(m);
    return c(s);
  }
  *model = m;
  return RNNCORE_OK;
#endif
}

}  // namespace

extern "C" {

const char* rnncore_version(void) { return version_string(); }

void rnncore_spec_init(rnncore_spec* spec) {
  if (spec == nullptr) return;
  std::memset(spec, 0, sizeof *spec);
  spec->num_layers = 1;
}

rnncore_status rnncore_validate(const rnncore_spec* spec) {
  RNNCORE_C_REQUIRE(spec);
  return c(validate(to_cpp(*spec)));
}

int rnncore_num_gates(int32_t mode) { return mode >= 0 && mode <= 3 ? num_gates(static_cast<Mode>(mode)) : 0; }

int64_t rnncore_param_count(const rnncore_spec* spec) {
  if (spec == nullptr || validate(to_cpp(*spec)) != Status::ok) return 0;
  return param_count(to_cpp(*spec));
}

int64_t rnncore_canonical_offset(const rnncore_spec* spec, int layer, int direction, int32_t kind, int gate) {
  if (spec == nullptr || kind < 0 || kind > 5 || validate(to_cpp(*spec)) != Status::ok) return -1;
  return canonical_offset(to_cpp(*spec), layer, direction, static_cast<ParamKind>(kind), gate);
}

rnncore_status rnncore_canonical_weight_shapes(const rnncore_spec* spec, rnncore_shape* shapes, int capacity, int* count) {
  RNNCORE_C_REQUIRE(spec);
  return c(canonical_weight_shapes(to_cpp(*spec), reinterpret_cast<Shape*>(shapes), capacity, count));
}

rnncore_status rnncore_canonical_bias_shapes(const rnncore_spec* spec, rnncore_shape* shapes, int capacity, int* count) {
  RNNCORE_C_REQUIRE(spec);
  return c(canonical_bias_shapes(to_cpp(*spec), reinterpret_cast<Shape*>(shapes), capacity, count));
}

rnncore_shape rnncore_state_shape(const rnncore_spec* spec, int batch) {
  if (spec == nullptr) return rnncore_shape{};
  return to_c(state_shape(to_cpp(*spec), batch));
}

rnncore_status rnncore_zero_state(const rnncore_spec* spec, int batch, void* h, void* cstate) {
  RNNCORE_C_REQUIRE(spec);
  return c(zero_state(to_cpp(*spec), batch, h, cstate));
}

int rnncore_format_tensor_count(const rnncore_spec* spec, int32_t format) {
  if (spec == nullptr) return 0;
  return format_tensor_count(to_cpp(*spec), static_cast<WeightFormat>(format));
}

rnncore_status rnncore_format_tensor_info(const rnncore_spec* spec, int32_t format, int index, const char* prefix,
                                          rnncore_tensor_info* info) {
  RNNCORE_C_REQUIRE(spec);
  return c(format_tensor_info(to_cpp(*spec), static_cast<WeightFormat>(format), index, prefix,
                              reinterpret_cast<TensorInfo*>(info)));
}

rnncore_status rnncore_import_weights(const rnncore_spec* spec, int32_t format, const rnncore_tensor_view* tensors,
                                      size_t count, const char* prefix, void* canonical) {
  RNNCORE_C_REQUIRE(spec);
  if (count > 0) RNNCORE_C_REQUIRE(tensors);
  TensorView views[kMaxImportTensors];
  const rnncore_status converted = to_views(tensors, count, views, "rnncore_import_weights");
  if (converted != RNNCORE_OK) return converted;
  return c(import_weights(to_cpp(*spec), static_cast<WeightFormat>(format), views, count, prefix, canonical));
}

rnncore_status rnncore_export_tensor(const rnncore_spec* spec, int32_t format, int index, const void* canonical, void* out) {
  RNNCORE_C_REQUIRE(spec);
  return c(export_tensor(to_cpp(*spec), static_cast<WeightFormat>(format), index, canonical, out));
}

void rnncore_stack_init(rnncore_stack_spec* stack) {
  if (stack == nullptr) return;
  std::memset(stack, 0, sizeof *stack);
  for (rnncore_layer_spec& l : stack->layers)
    for (rnncore_wrapper& w : l.wrappers) rnncore_dropout_wrapper_init(&w.dropout);
  stack->head_int8_softmax_beta = 1.0f;
}

void rnncore_dropout_wrapper_init(rnncore_dropout_wrapper* wrapper) {
  if (wrapper == nullptr) return;
  std::memset(wrapper, 0, sizeof *wrapper);
  wrapper->input_keep = wrapper->output_keep = wrapper->state_keep = 1.0;
}

rnncore_status rnncore_stack_validate(const rnncore_stack_spec* stack) {
  RNNCORE_C_REQUIRE(stack);
  return c(validate(to_cpp(*stack)));
}

int64_t rnncore_stack_param_count(const rnncore_stack_spec* stack) {
  if (stack == nullptr || validate(to_cpp(*stack)) != Status::ok) return 0;
  return param_count(to_cpp(*stack));
}

int64_t rnncore_stack_canonical_offset(const rnncore_stack_spec* stack, int layer, int direction, int32_t kind, int gate) {
  if (stack == nullptr || kind < 0 || kind > 9 || validate(to_cpp(*stack)) != Status::ok) return -1;
  return canonical_offset(to_cpp(*stack), layer, direction, static_cast<ParamKind>(kind), gate);
}

int64_t rnncore_stack_state_elements(const rnncore_stack_spec* stack, int batch) {
  if (stack == nullptr || validate(to_cpp(*stack)) != Status::ok) return 0;
  return state_elements(to_cpp(*stack), batch);
}

int64_t rnncore_stack_state_offset(const rnncore_stack_spec* stack, int batch, int layer, int direction) {
  if (stack == nullptr || validate(to_cpp(*stack)) != Status::ok || layer < 0 || layer >= stack->num_layers) return -1;
  return state_offset(to_cpp(*stack), batch, layer, direction);
}

int64_t rnncore_stack_cell_state_elements(const rnncore_stack_spec* stack, int batch) {
  if (stack == nullptr || validate(to_cpp(*stack)) != Status::ok) return 0;
  return cell_state_elements(to_cpp(*stack), batch);
}

int64_t rnncore_stack_cell_state_offset(const rnncore_stack_spec* stack, int batch, int layer, int direction) {
  if (stack == nullptr || validate(to_cpp(*stack)) != Status::ok || layer < 0 || layer >= stack->num_layers) return -1;
  return cell_state_offset(to_cpp(*stack), batch, layer, direction);
}

rnncore_status rnncore_stack_import_weights(const rnncore_stack_spec* stack, int32_t format,
                                            const rnncore_tensor_view* tensors, size_t count, const char* prefix,
                                            void* canonical) {
  RNNCORE_C_REQUIRE(stack);
  if (count > 0) RNNCORE_C_REQUIRE(tensors);
  TensorView views[kMaxImportTensors];
  const rnncore_status converted = to_views(tensors, count, views, "rnncore_stack_import_weights");
  if (converted != RNNCORE_OK) return converted;
  return c(import_weights(to_cpp(*stack), static_cast<WeightFormat>(format), views, count, prefix, canonical));
}

rnncore_status rnncore_plan_create_stack(const rnncore_stack_spec* stack, const rnncore_plan_options* options,
                                         rnncore_plan* plan) {
  RNNCORE_C_REQUIRE(stack);
  RNNCORE_C_REQUIRE(options);
  RNNCORE_C_REQUIRE(plan);
  return c(Plan::create(to_cpp(*stack), to_cpp(*options), reinterpret_cast<Plan*>(plan)));
}

rnncore_status rnncore_model_create_stack(const rnncore_stack_spec* stack, const rnncore_plan_options* options,
                                          const void* canonical, rnncore_model** model) {
  RNNCORE_C_REQUIRE(stack);
  return create_model(to_cpp(*stack), options, canonical, model);
}

void rnncore_plan_options_init(rnncore_plan_options* options) {
  if (options == nullptr) return;
  options->threads = 1;
  options->gpu_device = 0;
  options->max_batch = 1;
  options->max_seq_len = 1;
  options->backend = RNNCORE_BACKEND_AUTO;
  options->max_isa = RNNCORE_ISA_BEST;
  options->training = 0;
  options->weight_dtype = RNNCORE_F32;
  options->gpu_half_math = 0;
  options->int8_weights = RNNCORE_INT8_WEIGHTS_PACKED_AUTO;
  options->int8_token_table = 0;
}

rnncore_status rnncore_plan_create(const rnncore_spec* spec, const rnncore_plan_options* options, rnncore_plan* plan) {
  RNNCORE_C_REQUIRE(spec);
  RNNCORE_C_REQUIRE(options);
  RNNCORE_C_REQUIRE(plan);
  return c(Plan::create(to_cpp(*spec), to_cpp(*options), reinterpret_cast<Plan*>(plan)));
}

size_t rnncore_plan_packed_weight_bytes(const rnncore_plan* plan) { return plan ? as_plan(plan).packed_weight_bytes() : 0; }
size_t rnncore_plan_workspace_bytes(const rnncore_plan* plan) { return plan ? as_plan(plan).workspace_bytes() : 0; }
int32_t rnncore_plan_backend(const rnncore_plan* plan) { return plan ? static_cast<int32_t>(as_plan(plan).backend()) : 0; }
const char* rnncore_plan_kernel_name(const rnncore_plan* plan) { return plan ? as_plan(plan).kernel_name() : ""; }

rnncore_status rnncore_plan_pack_weights(const rnncore_plan* plan, const void* canonical, void* packed, size_t packed_bytes) {
  RNNCORE_C_REQUIRE(plan);
  return c(as_plan(plan).pack_weights(canonical, packed, packed_bytes));
}

void rnncore_forward_args_init(rnncore_forward_args* args) {
  if (args != nullptr) std::memset(args, 0, sizeof *args);
}

rnncore_status rnncore_forward(const rnncore_plan* plan, const void* packed, void* workspace, size_t workspace_bytes,
                               const rnncore_forward_args* args) {
  RNNCORE_C_REQUIRE(plan);
  RNNCORE_C_REQUIRE(args);
  return c(as_plan(plan).forward(packed, workspace, workspace_bytes, to_cpp(*args)));
}

size_t rnncore_plan_reserve_bytes(const rnncore_plan* plan) { return plan ? as_plan(plan).reserve_bytes() : 0; }
size_t rnncore_plan_backward_workspace_bytes(const rnncore_plan* plan) {
  return plan ? as_plan(plan).backward_workspace_bytes() : 0;
}

void rnncore_backward_args_init(rnncore_backward_args* args) {
  if (args != nullptr) std::memset(args, 0, sizeof *args);
}

rnncore_status rnncore_backward(const rnncore_plan* plan, const void* packed, void* workspace, size_t workspace_bytes,
                                const rnncore_backward_args* args) {
  RNNCORE_C_REQUIRE(plan);
  RNNCORE_C_REQUIRE(args);
  return c(as_plan(plan).backward(packed, workspace, workspace_bytes, to_cpp(*args)));
}

rnncore_status rnncore_export_gradient_tensor(const rnncore_spec* spec, int32_t format, int index,
                                              const void* canonical_grad, void* out) {
  RNNCORE_C_REQUIRE(spec);
  const RnnSpec cpp = to_cpp(*spec);
  if (validate(cpp) != Status::ok) return c(validate(cpp));
  return c(export_gradient_tensor(to_stack(cpp), static_cast<WeightFormat>(format), index, canonical_grad, out));
}

rnncore_status rnncore_model_create(const rnncore_spec* spec, const rnncore_plan_options* options, const void* canonical,
                                    rnncore_model** model) {
  RNNCORE_C_REQUIRE(spec);
  if (validate(to_cpp(*spec)) != Status::ok) return c(validate(to_cpp(*spec)));
  return create_model(to_stack(to_cpp(*spec)), options, canonical, model);
}

rnncore_status rnncore_model_forward(rnncore_model* model, const rnncore_forward_args* args) {
  RNNCORE_C_REQUIRE(model);
  RNNCORE_C_REQUIRE(args);
  return c(model->model.forward(to_cpp(*args)));
}

rnncore_status rnncore_model_backward(rnncore_model* model, const rnncore_backward_args* args) {
  RNNCORE_C_REQUIRE(model);
  RNNCORE_C_REQUIRE(args);
  return c(model->model.backward(to_cpp(*args)));
}

rnncore_status rnncore_model_update_weights(rnncore_model* model, const void* canonical) {
  RNNCORE_C_REQUIRE(model);
  return c(model->model.update_weights(canonical));
}

const rnncore_plan* rnncore_model_plan(const rnncore_model* model) {
  return model ? reinterpret_cast<const rnncore_plan*>(&model->model.plan()) : nullptr;
}

void rnncore_model_destroy(rnncore_model* model) {
  if (model == nullptr) return;
  model->~rnncore_model();
#if !defined(RNNCORE_NO_HEAP)  // without a heap rnncore_model_create never returns a model
  std::free(model);
#endif
}

}  // extern "C"

// Planning: backend choice, exact buffer sizes and offsets; weight packing entry point.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>

#include "src/internal/arena.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

static_assert(sizeof(PlanImpl) <= Plan::kStorageBytes, "Plan::kStorageBytes too small for PlanImpl");
static_assert(alignof(PlanImpl) <= 8, "PlanImpl needs more alignment than Plan provides");
static_assert(std::is_trivially_copyable<PlanImpl>::value, "plans are copied bytewise");

namespace {

std::uint64_t fnv1a(std::uint64_t h, std::int64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<std::uint64_t>(v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

// Identifies the packed buffer's layout: the stack's shapes, the backend and how it stores the
// weights (the SIMD panels' vector width and type, the GPU's weight storage type, an integer
// stack's row-major or interleaved LSTM weights), training, and the buffer's size (which the GPU
// layout's padding and storage type determine).
std::uint64_t packed_fingerprint(const PlanImpl& p) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int64_t v : {std::int64_t(p.stack.input_size), std::int64_t(p.stack.num_layers), std::int64_t(p.stack.dtype),
                         std::int64_t(p.backend), std::int64_t(p.vector), std::int64_t(p.simd.weights), std::int64_t(p.simd.bf16_pairs),
                         std::int64_t(p.options.training), std::int64_t(p.options.weight_dtype),
                         static_cast<std::int64_t>(p.packed_bytes), std::int64_t(p.stack.embedding.vocab_size),
                         std::int64_t(p.stack.head.out_features)})
    h = fnv1a(h, v);
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    for (std::int64_t v : {std::int64_t(lp.mode), std::int64_t(lp.gru_variant), std::int64_t(lp.hidden),
                           std::int64_t(lp.dirs), std::int64_t(lp.skip_input), std::int64_t(lp.out),
                           std::int64_t(p.stack.layers[l].peepholes), std::int64_t(lp.hidden_stride)})
      h = fnv1a(h, v);
  }
  for (int k = 0; k < p.stack.num_pre_head; ++k) h = fnv1a(h, p.stack.pre_head[k].out_features);
  if (p.stack.dtype == DType::i8) h = fnv1a(h, static_cast<std::int64_t>(p.i8.panel_layout));  // 0 row-major, 1, 2 panels
  // (others' fingerprints unchanged; 4: the token-table layer without its folded input biases, since
  // 2026-11-29 — 3 marked the layout that kept them)
  if (p.stack.dtype == DType::i8 && p.options.int8_token_table) h = fnv1a(h, 4);
  return h;
}

namespace {

// out = a + b, truncated to fit. Not snprintf: firmware builds link no printf (newlib-nano's needs malloc).
template <std::size_t N>
void copy_name(char (&out)[N], const char* a, const char* b) {
  std::size_t n = 0;
  for (const char* part : {a, b})
    for (; *part != '\0' && n + 1 < N; ++part) out[n++] = *part;
  out[n] = '\0';
}

Status choose_backend(const StackSpec& stack, const PlanOptions& options, const GpuPlanner& gpu, PlanImpl* p) {
  Backend want = options.backend;
  RNNCORE_ENSURE(want >= Backend::auto_select && want <= Backend::gpu, Status::invalid_enum,
                 "options.backend = %d is not a backend", static_cast<int>(want));
  if (stack.dtype == DType::i8) {  // the integer backend: the reference one is its portable kernels
    RNNCORE_ENSURE(want != Backend::gpu, Status::unsupported,
                   "backend gpu: an integer stack (dtype i8) runs on the CPU (use backend simd, reference or auto)");
    RNNCORE_ENSURE(options.weight_dtype == DType::f32, Status::unsupported,
                   "weight_dtype %s: an integer stack's weights are int8 (leave weight_dtype f32)",
                   to_string(options.weight_dtype));
#ifdef RNNCORE_INT8_ON_CALL
    RNNCORE_ENSURE(&kInt8Backend != nullptr, Status::backend_unavailable,
                   "an integer stack (dtype i8) needs the integer backend, which this firmware image does not link: "
                   "call rnncore_link_int8() once (rnncore.h)");
#endif
    p->table = BackendTable::int8;
    p->backend = want == Backend::reference ? Backend::reference : Backend::simd;
    p->isa = want == Backend::reference ? Isa::none : options.max_isa;  // its layout's cap for the kernels
    return Status::ok;
  }
  if (want == Backend::gpu) {
    p->table = BackendTable::gpu;
    p->backend = Backend::gpu;
    return gpu.select(options, p, gpu.context);
  }
  if (want == Backend::simd || want == Backend::auto_select) {
    Isa isa = Isa::none;
    const simd::F32Kernels* k = stack.dtype == DType::f32 ? select_f32_kernels(options.max_isa, &isa) : nullptr;
    const int w = static_cast<int>(options.weight_dtype == DType::bf16 ? simd::Weights::bf16
                                   : options.weight_dtype == DType::f16 ? simd::Weights::f16 : simd::Weights::f32);
    // vdpbf16ps kernels need AVX512_BF16: without it, bf16 weights run on the AVX2 kernels.
    if (k != nullptr && w == static_cast<int>(simd::Weights::bf16) && k->bf16_pairs && !cpu_has_avx512_bf16())
      k = select_f32_kernels(Isa::avx2, &isa);
    if (k != nullptr && k->gemm[w] == nullptr) {
      RNNCORE_ENSURE(want == Backend::auto_select || w == 0, Status::unsupported,
                     "weight_dtype %s needs the SIMD backend; this machine or build has %s",
                     to_string(options.weight_dtype), to_string(isa));
      k = nullptr;
    }
    if (k != nullptr) {
      p->table = BackendTable::simd;
      p->simd.weights = static_cast<simd::Weights>(w);
      p->simd.bf16_pairs = w == static_cast<int>(simd::Weights::bf16) && k->bf16_pairs;
      p->backend = Backend::simd;
      p->isa = isa;
      p->simd.table = f32_table_index(k);
      p->vector = k->vector;
      copy_name(p->kernel_name, k->name, "");
      return Status::ok;
    }
    RNNCORE_ENSURE(want == Backend::auto_select, Status::backend_unavailable,
                   stack.dtype != DType::f32 ? "backend simd computes f32; the dtype is %s (use the reference backend)"
                                             : "backend simd: no SIMD kernels for this machine or build (%s)",
                   stack.dtype != DType::f32 ? to_string(stack.dtype) : to_string(options.max_isa));
  }
  RNNCORE_ENSURE(options.weight_dtype == DType::f32, Status::unsupported,
                 "weight_dtype %s needs the SIMD backend (the reference backend stores weights in "
                 "the computation's dtype)", to_string(options.weight_dtype));
  p->table = BackendTable::reference;
  p->backend = Backend::reference;
  p->isa = Isa::none;
  p->vector = 1;
  copy_name(p->kernel_name, to_string(stack.dtype), "_rnn__reference");
  return Status::ok;
}

}  // namespace

void take_direction_buffers(Arena* ws, const DirectionBuffers& sizes, int d, WorkspaceLayout* w) {
  w->proj[d] = ws->take(sizes.proj, 4);
  w->h[d][0] = ws->take(sizes.state, 4);
  w->h[d][1] = ws->take(sizes.state, 4);
  if (sizes.lstm) w->c[d] = ws->take(sizes.state, 4);
  if (sizes.reset_before) {
    w->rh[d] = ws->take(sizes.state, 4);
    w->z[d] = ws->take(sizes.state, 4);
  }
  if (sizes.x_cell > 0) w->x_cell[d] = ws->take(sizes.x_cell, 4);
}

namespace {

// Regions shared by the host backends: inner-layer outputs, the ends' buffers and `slots` sets of
// scratch rows.
void layout_common(PlanImpl* p, Arena* ws, std::uint64_t es, std::uint64_t slots) {
  const StackSpec& st = p->stack;
  const std::uint64_t B = p->options.max_batch, T = p->options.max_seq_len;
  std::uint64_t inner_out = 0;
  for (int l = 0; l + 1 < st.num_layers; ++l)
    inner_out = std::max<std::uint64_t>(inner_out, static_cast<std::uint64_t>(p->layers[l].dirs) * p->layers[l].out);
  WorkspaceLayout& w = p->ws;
  if (st.num_layers > 1) w.layer_out[0] = ws->take(T * B * inner_out, es);
  if (st.num_layers > 2) w.layer_out[1] = ws->take(T * B * inner_out, es);
  if (st.embedding.vocab_size > 0) w.embed_x = ws->take(T * B * static_cast<std::uint64_t>(st.input_size), es);
  if (st.head.out_features > 0) {
    const std::uint64_t in = static_cast<std::uint64_t>(head_input_size(st)), out = st.head.out_features;
    const std::uint64_t rows = st.head.last_step_only ? B : T * B;
    w.head_in = ws->take(T * B * in, es);
    if (st.head.last_step_only) w.head_rows = ws->take(B * in, es);
    w.head_out = ws->take(rows * out, es);
    std::uint64_t mid = 0;  // the chain's activations between its Dense layers
    for (int k = 0; k < st.num_pre_head; ++k) mid = std::max<std::uint64_t>(mid, st.pre_head[k].out_features);
    for (int m = 0; m < std::min<int>(st.num_pre_head, 2); ++m) w.head_mid[m] = ws->take(rows * mid, es);
  }
  w.scratch_stride = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(kScratchRows * p->max_width * es), kAlignment));
  w.scratch = ws->take(slots * w.scratch_stride, 1);
}

}  // namespace

Status layout_reference(PlanImpl* p, const GpuPlanner&) {
  const StackSpec& st = p->stack;
  const std::uint64_t es = dtype_size(st.dtype), B = p->options.max_batch;
  Arena packed(kPackedHeaderBytes);
  packed.take(static_cast<std::uint64_t>(param_count(st)), es);  // the canonical buffer
  p->ends = kPackedHeaderBytes + static_cast<std::size_t>(recurrent_param_count(st)) * es;
  p->packed_bytes = packed.size();

  std::uint64_t state = 0;
  bool lstm = false;
  for (int l = 0; l < st.num_layers; ++l) {
    p->layers[l].hidden_stride = p->layers[l].hidden;
    state = std::max<std::uint64_t>(state, p->layers[l].hidden);
    lstm = lstm || p->layers[l].mode == Mode::lstm;
  }
  Arena ws(0);
  WorkspaceLayout& w = p->ws;
  for (int d = 0; d < 2; ++d) {
    w.h[d][0] = ws.take(B * state, es);
    w.h[d][1] = ws.take(B * state, es);
    if (lstm) w.c[d] = ws.take(B * state, es);
  }
  layout_common(p, &ws, es, 2);  // scratch rows per direction (one thread)
  w.total = ws.size();
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
  return Status::ok;
}

Status layout_simd(PlanImpl* p, const GpuPlanner&) {
  const StackSpec& st = p->stack;
  const std::uint64_t V = static_cast<std::uint64_t>(p->vector), B = p->options.max_batch, T = p->options.max_seq_len;
  Arena packed(kPackedHeaderBytes);
  std::uint64_t proj = 0, state = 0, x_cell = 0, x16_row = 0;
  bool lstm = false, reset_before = false, state_masks = false, projection = false;
  const bool lowp = p->simd.weights != simd::Weights::f32, bf16 = p->simd.weights == simd::Weights::bf16;
  const std::uint64_t wes = lowp ? 2 : 4;  // bytes of a packed weight
  // Panel rows per k: vdpbf16ps panels hold k-pairs, so K is padded to even.
  auto krows = [&](std::uint64_t k) { return p->simd.bf16_pairs ? (k + 1) / 2 * 2 : k; };
  for (int l = 0; l < st.num_layers; ++l) {
    LayerPlan& lp = p->layers[l];
    const std::uint64_t bu = V * simd::vectors_per_gate(lp.cell);  // units per block
    const std::uint64_t H = lp.hidden, G = lp.gates, Hp = (H + bu - 1) / bu * bu;
    const bool rb = lp.cell == simd::Cell::gru_reset_before;
    const LayerSpec& ls = st.layers[l];
    // h has O units (P with a projection, which is smaller than H): rows keep the stride Hp.
    const std::uint64_t O = lp.out, Op = (O + V - 1) / V * V;
    lp.hidden_stride = static_cast<std::int32_t>(Hp);
    for (int d = 0; d < lp.dirs; ++d) {
      DirectionPack& dp = lp.dir[d];
      if (!lp.skip_input) dp.w_panel = packed.take(Hp * krows(lp.input_size) * G, wes);
      if (rb) {
        dp.r_panel = packed.take(Hp * krows(H) * 2, wes);
        dp.r_panel_n = packed.take(Hp * krows(H), wes);
      } else {
        dp.r_panel = packed.take(Hp * krows(O) * G, wes);
      }
      dp.bias = packed.take(Hp * G, 4);
      if (lp.cell == simd::Cell::gru_reset_after) dp.bias_rn = packed.take(Hp, 4);
      if (ls.peepholes) dp.peepholes = packed.take(Hp * 3, 4);
      if (ls.proj_size > 0) {
        dp.proj_panel = packed.take(Op * krows(H), wes);
        dp.proj_bias = packed.take(Op, 4);
      }
    }
    projection = projection || ls.proj_size > 0;
    // The projections are computed a chunk of steps at a time, sized to stay in cache (~2 MB) and
    // used right away; a whole sequence when it fits.
    const std::uint64_t per_step = B * G * Hp;
    const std::uint64_t chunk = std::min<std::uint64_t>(T, std::max<std::uint64_t>(1, (2u << 20) / (per_step * 4)));
    proj = std::max(proj, chunk * per_step);
    if (bf16 && !lp.skip_input) x16_row = std::max<std::uint64_t>(x16_row, (lp.input_size + 1) / 2 * 2);
    state = std::max(state, B * Hp);
    if (lp.input_dropout) x_cell = std::max<std::uint64_t>(x_cell, T * B * static_cast<std::uint64_t>(lp.input_size));
    lstm = lstm || lp.mode == Mode::lstm;
    reset_before = reset_before || rb;
    state_masks = state_masks || lp.state_dropout;
  }
  // The embedding table and the head in canonical order, and the head's Wᵀ for f32_matmul.
  const std::uint64_t tail = static_cast<std::uint64_t>(param_count(st) - recurrent_param_count(st));
  if (tail > 0) p->ends = packed.take(tail, 4);
  if (st.head.out_features > 0)
    p->simd.head_wt = packed.take(simd::packed_b_floats(dense_input_size(st, st.num_pre_head), st.head.out_features), 4);
  p->packed_bytes = packed.size();

  Arena ws(0);
  WorkspaceLayout& w = p->ws;
  SimdWorkspace& sw = p->simd.ws;
  sw.proj_floats = proj;
  DirectionBuffers sizes;
  sizes.proj = proj;
  sizes.state = state;
  sizes.x_cell = x_cell;
  sizes.lstm = lstm;
  sizes.reset_before = reset_before;
  for (int d = 0; d < 2; ++d) {
    take_direction_buffers(&ws, sizes, d, &w);
    if (state_masks) {
      sw.mask_h[d] = ws.take(state, 4);
      if (lstm) sw.mask_c[d] = ws.take(state, 4);
    }
    if (projection) sw.cell_out[d] = ws.take(state, 4);
    if (bf16) {
      sw.h16[d][0] = ws.take(state, 2);
      sw.h16[d][1] = ws.take(state, 2);
      if (reset_before) sw.rh16[d] = ws.take(state, 2);
      if (projection) sw.cell_out16[d] = ws.take(state, 2);
    }
  }
  if (x16_row > 0) {  // a chunk's input rows in bf16, per thread
    std::uint64_t rows = 0;
    for (int l = 0; l < st.num_layers; ++l) rows = std::max<std::uint64_t>(rows, proj / (p->layers[l].gates * p->layers[l].hidden_stride));
    sw.x16_stride = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(rows * x16_row * 2), kAlignment));
    sw.x16 = ws.take(static_cast<std::uint64_t>(std::max<std::int32_t>(1, p->options.threads)) * sw.x16_stride, 1);
  }
  layout_common(p, &ws, 4, static_cast<std::uint64_t>(std::max<std::int32_t>(1, p->options.threads)));  // per thread
  w.total = ws.size();
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
  return Status::ok;
}

namespace {


Status layout_gpu(PlanImpl* p, const GpuPlanner& gpu) { return gpu.layout(p, gpu.context); }

Status pack_reference(const PlanImpl& p, const void* canonical, void* packed) {
  return reference_pack(p, canonical, begin_host_pack(p, packed));
}

Status pack_simd(const PlanImpl& p, const void* canonical, void* packed) {
  unsigned char* bytes = begin_host_pack(p, packed);
  if (p.options.training) simd_pack_training(p, static_cast<const float*>(canonical), bytes);
  simd_pack_ends(p, canonical, bytes);
  return simd_pack(p, canonical, bytes);
}

}  // namespace

unsigned char* begin_host_pack(const PlanImpl& p, void* packed) {
  auto* bytes = static_cast<unsigned char*>(packed);
  std::memset(bytes, 0, p.packed_bytes);
  const PackedHeader header{kPackedMagic, p.fingerprint};
  std::memcpy(bytes, &header, sizeof header);
  // The kernel family after the header, so that a plan of another family can say which one the
  // buffer (or an exported header's packed array) was made for.
  PackedFamily family{};
  std::memcpy(family.kernel_name, p.kernel_name, sizeof family.kernel_name);
  family.isa = static_cast<std::int32_t>(p.isa);
  std::memcpy(bytes + kPackedFamilyOffset, &family, sizeof family);
  return bytes;
}

// The backends' tables.
const BackendOps kReferenceBackend = {
    Backend::reference, /*device_memory=*/false, /*thread_pool=*/false, /*resets=*/true,
    layout_reference, layout_training_reference, pack_reference, reference_forward, train_backward,
    reference_train_direction, reference_head_product,
};
const BackendOps kSimdBackend = {
    Backend::simd, /*device_memory=*/false, /*thread_pool=*/true, /*resets=*/true,
    layout_simd, layout_training_simd, pack_simd, simd_forward, train_backward,
    simd_train_direction, simd_head_product,
};
const BackendOps kGpuBackend = {
    Backend::gpu, /*device_memory=*/true, /*thread_pool=*/false, /*resets=*/true,
    layout_gpu, layout_training_gpu, gpu_pack, gpu_forward, gpu_backward,
    nullptr, nullptr,
};

// The only place that maps a plan's table to its operations (choose_backend below sets it).
const BackendOps* PlanImpl::ops() const {
  switch (table) {
    case BackendTable::reference: return &kReferenceBackend;
    case BackendTable::simd: return &kSimdBackend;
    case BackendTable::gpu: return &kGpuBackend;
    case BackendTable::int8: return &kInt8Backend;  // (null in an image that did not call rnncore_link_int8)
    case BackendTable::none: break;
  }
  return nullptr;
}

namespace {

simd::Cell cell_of(const LayerSpec& ls) {
  switch (ls.mode) {
    case Mode::lstm: return simd::Cell::lstm;
    case Mode::gru: return ls.gru_variant == GruVariant::reset_after ? simd::Cell::gru_reset_after : simd::Cell::gru_reset_before;
    case Mode::rnn_tanh: return simd::Cell::rnn_tanh;
    case Mode::rnn_relu: return simd::Cell::rnn_relu;
  }
  return simd::Cell::lstm;
}

// Backward cannot differentiate a custom residual function.
Status check_training(const StackSpec& st, const PlanOptions& options) {
  if (!options.training) return Status::ok;
  RNNCORE_ENSURE(RNNCORE_TRAINING, Status::unsupported,
                 "Plan::create: options.training, but the library was built without training (meson option "
                 "training=false): configure it with -Dtraining=true");
  RNNCORE_ENSURE(st.dtype != DType::i8, Status::unsupported,
                 "training an integer stack (dtype i8) is not supported: train the float stack, then quantize it");
  for (int l = 0; l < st.num_layers; ++l)
    for (int w = 0; w < st.layers[l].num_wrappers; ++w) {
      const Wrapper& wr = st.layers[l].wrappers[w];
      RNNCORE_ENSURE(wr.kind != WrapperKind::residual || (wr.residual.f32 == nullptr && wr.residual.f64 == nullptr),
                     Status::unsupported,
                     "layers[%d].wrappers[%d]: backward cannot differentiate a custom residual function; training "
                     "needs the default (add) residual", l, w);
    }
  return Status::ok;
}

// Custom residual functions must exist for the dtype that runs.
Status check_residual_functions(const StackSpec& st) {
  for (int l = 0; l < st.num_layers; ++l)
    for (int w = 0; w < st.layers[l].num_wrappers; ++w) {
      const Wrapper& wr = st.layers[l].wrappers[w];
      if (wr.kind != WrapperKind::residual || (wr.residual.f32 == nullptr && wr.residual.f64 == nullptr)) continue;
      const bool have = st.dtype == DType::f64 ? wr.residual.f64 != nullptr : wr.residual.f32 != nullptr;
      RNNCORE_ENSURE(have, Status::unsupported, "layers[%d].wrappers[%d]: the custom residual function has no %s variant", l, w,
                     to_string(st.dtype));
    }
  return Status::ok;
}

}  // namespace

GpuPlanner build_gpu_planner() {
  GpuPlanner g;
  g.select = [](const PlanOptions& options, PlanImpl* p, const void*) { return gpu_select(options, p); };
  g.layout = [](PlanImpl* p, const void*) { return gpu_layout(p); };
  return g;
}

Status create_plan(const StackSpec& stack, const PlanOptions& options, const GpuPlanner& gpu, Plan* out) {
  RNNCORE_RETURN_IF_ERROR(validate(stack));
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "Plan::create: out is null");
  RNNCORE_ENSURE(options.max_batch >= 1 && options.max_batch <= (1 << 24), Status::invalid_size,
                 "options.max_batch = %d (must be 1..%d)", options.max_batch, 1 << 24);
  RNNCORE_ENSURE(options.max_seq_len >= 1 && options.max_seq_len <= (1 << 28), Status::invalid_size,
                 "options.max_seq_len = %d (must be 1..%d)", options.max_seq_len, 1 << 28);
  const bool isa_ok = (options.max_isa >= Isa::none && options.max_isa <= Isa::neon) || options.max_isa == Isa::best;
  RNNCORE_ENSURE(isa_ok, Status::invalid_enum, "options.max_isa = %d is not an instruction set",
                 static_cast<int>(options.max_isa));
  const DType wd = options.weight_dtype;
  RNNCORE_ENSURE(wd == DType::f32 || wd == DType::f16 || wd == DType::bf16, Status::invalid_enum,
                 "options.weight_dtype = %d: weights are stored as f32, f16 or bf16", static_cast<int>(wd));
  RNNCORE_RETURN_IF_ERROR(check_residual_functions(stack));
  RNNCORE_RETURN_IF_ERROR(check_training(stack, options));
  RNNCORE_ENSURE(options.threads >= 1 && options.threads <= 256, Status::invalid_size, "options.threads = %d (1..256)",
                 options.threads);
  RNNCORE_ENSURE(options.threads == 1 || options.thread_pool != nullptr, Status::null_pointer,
                 "options.threads = %d needs options.thread_pool (ThreadPool::create; a Model makes its own)", options.threads);
  RNNCORE_ENSURE(options.threads == 1 || options.thread_pool->size() >= options.threads, Status::invalid_size,
                 "options.threads = %d but the thread pool has %d threads", options.threads,
                 options.threads == 1 ? 1 : options.thread_pool->size());

  // PlanImpl is large (it holds the stack); build it in place rather than on the stack.
  // (Plan is its storage: impl() reads the PlanImpl at the Plan's address.)
  unsigned char* storage = reinterpret_cast<unsigned char*>(out);
  std::memset(storage, 0, Plan::kStorageBytes);
  PlanImpl* p = new (storage) PlanImpl();
  p->stack = stack;
  p->options = options;
  p->any_dropout = stack_has_dropout(stack);
  for (int l = 0; l < stack.num_layers; ++l) {
    LayerPlan& lp = p->layers[l];
    const LayerSpec& ls = stack.layers[l];
    lp.mode = ls.mode;
    lp.gru_variant = ls.gru_variant;
    lp.cell = cell_of(ls);
    lp.input_size = layer_input_size(stack, l);
    lp.hidden = ls.hidden_size;
    lp.out = output_size(ls);
    lp.extensions = has_lstm_extensions(ls);
    lp.gates = num_gates(ls.mode);
    lp.dirs = num_directions(ls);
    lp.skip_input = l == 0 && uses_skip_input(stack);
    layer_dropout_flags(stack, l, &lp);
  }
  const Status s = choose_backend(stack, options, gpu, p);
  if (s != Status::ok) {
    p->magic = 0;
    return s;
  }
  for (int l = 0; l < stack.num_layers; ++l) {
    const std::int32_t hp = static_cast<std::int32_t>(
        round_up(p->layers[l].hidden, p->vector * simd::vectors_per_gate(p->layers[l].cell)));
    p->max_width = std::max({p->max_width, p->layers[l].input_size, p->layers[l].dirs * p->layers[l].hidden, hp});
  }
  const Status ls = p->ops()->layout(p, gpu);
  if (ls != Status::ok) {
    p->magic = 0;
    return ls;
  }
  if (options.training) p->ops()->layout_training(p);
  if (p->ws.total == ~std::size_t{0}) {
    p->magic = 0;
    return fail_status(Status::invalid_size, "buffers for max_batch = %d and max_seq_len = %d would exceed 2^46 bytes",
                               options.max_batch, options.max_seq_len);
  }
  p->fingerprint = packed_fingerprint(*p);
  p->magic = kPlanMagic;
  return Status::ok;
}

const PlanImpl& impl(const Plan& plan) {
  // Plan's storage holds a PlanImpl placed by Plan::create (or zero bytes: magic 0).
  return *std::launder(reinterpret_cast<const PlanImpl*>(&plan));
}

}  // namespace detail

using detail::impl;
using detail::PlanImpl;

Status Plan::create(const RnnSpec& spec, const PlanOptions& options, Plan* out) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return create(to_stack(spec), options, out);
}

Status Plan::create(const StackSpec& stack, const PlanOptions& options, Plan* out) {
  return detail::create_plan(stack, options, detail::build_gpu_planner(), out);
}

const StackSpec& Plan::stack() const { return impl(*this).stack; }
const PlanOptions& Plan::options() const { return impl(*this).options; }
Backend Plan::backend() const { return impl(*this).backend; }
Isa Plan::isa() const { return impl(*this).isa; }
const char* Plan::kernel_name() const { return impl(*this).kernel_name; }
std::size_t Plan::packed_weight_bytes() const { return impl(*this).packed_bytes; }
std::size_t Plan::workspace_bytes() const { return impl(*this).ws.total; }
std::size_t Plan::reserve_bytes() const { return reserve_total(impl(*this)); }
std::size_t Plan::backward_workspace_bytes() const { return backward_total(impl(*this)); }

Status Plan::pack_weights(const void* canonical, void* packed, std::size_t packed_bytes) const {
  detail::clear_error();
  const PlanImpl& p = impl(*this);
  RNNCORE_ENSURE(p.magic == detail::kPlanMagic, Status::invalid_enum, "pack_weights: the plan was not created");
  RNNCORE_ENSURE(canonical != nullptr && packed != nullptr, Status::null_pointer, "pack_weights: %s is null",
                 canonical == nullptr ? "canonical" : "packed");
  RNNCORE_ENSURE(reinterpret_cast<std::uintptr_t>(packed) % kAlignment == 0, Status::misaligned,
                 "pack_weights: packed buffer %p is not %zu-byte aligned", packed, kAlignment);
  RNNCORE_ENSURE(packed_bytes >= p.packed_bytes, Status::buffer_too_small,
                 "pack_weights: packed buffer has %zu bytes, the plan needs %zu", packed_bytes, p.packed_bytes);
  return p.ops()->pack(p, canonical, packed);
}

}  // namespace rnncore

// Planning: backend choice, exact buffer sizes and offsets; weight packing entry point.
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>

#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

static_assert(sizeof(PlanImpl) <= Plan::kStorageBytes, "Plan::kStorageBytes too small for PlanImpl");
static_assert(alignof(PlanImpl) <= 8, "PlanImpl needs more alignment than Plan provides");
static_assert(std::is_trivially_copyable<PlanImpl>::value, "plans are copied bytewise");

namespace {

// Largest buffer a plan may request; keeps every offset computation far from overflow.
constexpr std::uint64_t kMaxBufferBytes = std::uint64_t{1} << 46;

// Appends regions to a buffer, each aligned to kAlignment; tracks overflow.
class Arena {
 public:
  explicit Arena(std::size_t start) : size_(start) {}
  std::size_t take(std::uint64_t count, std::uint64_t elem_bytes) {
    if (count != 0 && elem_bytes > kMaxBufferBytes / count) overflow_ = true;
    const std::uint64_t bytes = overflow_ ? 0 : count * elem_bytes;
    const std::size_t at = size_;
    size_ = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(size_ + bytes), kAlignment));
    if (size_ > kMaxBufferBytes) overflow_ = true;
    return at;
  }
  std::size_t size() const { return size_; }
  bool overflow() const { return overflow_; }

 private:
  std::size_t size_;
  bool overflow_ = false;
};

std::uint64_t fnv1a(std::uint64_t h, std::int64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<std::uint64_t>(v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t packed_fingerprint(const PlanImpl& p) {
  const RnnSpec& s = p.spec;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int64_t v : {std::int64_t(s.mode), std::int64_t(s.gru_variant), std::int64_t(s.input_size),
                         std::int64_t(s.hidden_size), std::int64_t(s.num_layers), std::int64_t(s.direction),
                         std::int64_t(uses_skip_input(s)), std::int64_t(s.dtype), std::int64_t(p.backend),
                         std::int64_t(p.vector)})
    h = fnv1a(h, v);
  return h;
}

Status choose_backend(const RnnSpec& spec, const PlanOptions& options, PlanImpl* p) {
  Backend want = options.backend;
  RNNCORE_ENSURE(want >= Backend::auto_select && want <= Backend::gpu, Status::invalid_enum,
                 "options.backend = %d is not a backend", static_cast<int>(want));
  if (want == Backend::gpu)
    return fail_status(Status::backend_unavailable, "backend gpu: this build has no GPU support (configure with -Dgpu=cuda or -Dgpu=hip)");
  if (want == Backend::simd || want == Backend::auto_select) {
    Isa isa = Isa::none;
    const simd::F32Kernels* k = spec.dtype == DType::f32 ? select_f32_kernels(options.max_isa, &isa) : nullptr;
    if (k != nullptr) {
      p->backend = Backend::simd;
      p->isa = isa;
      p->kernels = k;
      p->vector = k->vector;
      std::snprintf(p->kernel_name, sizeof p->kernel_name, "%s", k->name);
      return Status::ok;
    }
    RNNCORE_ENSURE(want == Backend::auto_select, Status::backend_unavailable,
                   spec.dtype != DType::f32 ? "backend simd computes f32; spec.dtype is %s (use the reference backend)"
                                            : "backend simd: no SIMD kernels for this machine or build (%s)",
                   spec.dtype != DType::f32 ? to_string(spec.dtype) : to_string(options.max_isa));
  }
  p->backend = Backend::reference;
  p->isa = Isa::none;
  p->vector = 1;
  std::snprintf(p->kernel_name, sizeof p->kernel_name, "%s_rnn__reference", to_string(spec.dtype));
  return Status::ok;
}

void layout_reference(PlanImpl* p) {
  const RnnSpec& s = p->spec;
  const std::uint64_t es = dtype_size(s.dtype), H = s.hidden_size, B = p->options.max_batch,
                      T = p->options.max_seq_len;
  Arena packed(kPackedHeaderBytes);
  packed.take(static_cast<std::uint64_t>(param_count(s)), es);
  p->packed_bytes = packed.size();
  p->hidden_stride = s.hidden_size;

  Arena ws(0);
  WorkspaceLayout& w = p->ws;
  for (int d = 0; d < p->dirs; ++d) {
    w.h[d][0] = ws.take(B * H, es);
    w.h[d][1] = ws.take(B * H, es);
    if (s.mode == Mode::lstm) w.c[d] = ws.take(B * H, es);
  }
  w.gates = ws.take(static_cast<std::uint64_t>(p->gates) * H, es);
  if (s.num_layers > 1) w.layer_out[0] = ws.take(T * B * p->dirs * H, es);
  if (s.num_layers > 2) w.layer_out[1] = ws.take(T * B * p->dirs * H, es);
  w.total = ws.size();
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
}

void layout_simd(PlanImpl* p) {
  const RnnSpec& s = p->spec;
  const std::uint64_t V = p->vector, H = s.hidden_size, G = p->gates, B = p->options.max_batch,
                      T = p->options.max_seq_len;
  const std::uint64_t Hp = static_cast<std::uint64_t>(round_up(s.hidden_size, p->vector));
  const bool reset_before = s.mode == Mode::gru && s.gru_variant == GruVariant::reset_before;
  p->hidden_stride = static_cast<std::int32_t>(Hp);
  (void)V;

  Arena packed(kPackedHeaderBytes);
  for (int l = 0; l < s.num_layers; ++l) {
    LayerPlan& lp = p->layers[l];
    for (int d = 0; d < p->dirs; ++d) {
      DirectionPack& dp = lp.dir[d];
      if (!lp.skip_input) dp.w_panel = packed.take(Hp * lp.input_size * G, 4);
      if (reset_before) {
        dp.r_panel = packed.take(Hp * H * 2, 4);
        dp.r_panel_n = packed.take(Hp * H, 4);
      } else {
        dp.r_panel = packed.take(Hp * H * G, 4);
      }
      dp.bias = packed.take(Hp * G, 4);
      if (s.mode == Mode::gru && !reset_before) dp.bias_rn = packed.take(Hp, 4);
    }
  }
  p->packed_bytes = packed.size();

  Arena ws(0);
  WorkspaceLayout& w = p->ws;
  for (int d = 0; d < p->dirs; ++d) {
    w.proj[d] = ws.take(T * B * G * Hp, 4);
    w.h[d][0] = ws.take(B * Hp, 4);
    w.h[d][1] = ws.take(B * Hp, 4);
    if (s.mode == Mode::lstm) w.c[d] = ws.take(B * Hp, 4);
    if (reset_before) {
      w.rh[d] = ws.take(B * Hp, 4);
      w.z[d] = ws.take(B * Hp, 4);
    }
  }
  if (s.num_layers > 1) w.layer_out[0] = ws.take(T * B * p->dirs * H, 4);
  if (s.num_layers > 2) w.layer_out[1] = ws.take(T * B * p->dirs * H, 4);
  w.active = ws.take(B, 1);
  w.row_ptrs = ws.take(T * B, sizeof(const float*));
  w.total = ws.size();
  if (packed.overflow() || ws.overflow()) w.total = ~std::size_t{0};
}

}  // namespace

const PlanImpl& impl(const Plan& plan) {
  // Plan's storage holds a PlanImpl placed by Plan::create (or zero bytes: magic 0).
  return *std::launder(reinterpret_cast<const PlanImpl*>(&plan));
}

}  // namespace detail

using detail::impl;
using detail::PlanImpl;

Status Plan::create(const RnnSpec& spec, const PlanOptions& options, Plan* out) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "Plan::create: out is null");
  RNNCORE_ENSURE(options.max_batch >= 1 && options.max_batch <= (1 << 24), Status::invalid_size,
                 "options.max_batch = %d (must be 1..%d)", options.max_batch, 1 << 24);
  RNNCORE_ENSURE(options.max_seq_len >= 1 && options.max_seq_len <= (1 << 28), Status::invalid_size,
                 "options.max_seq_len = %d (must be 1..%d)", options.max_seq_len, 1 << 28);
  const bool isa_ok = (options.max_isa >= Isa::none && options.max_isa <= Isa::neon) || options.max_isa == Isa::best;
  RNNCORE_ENSURE(isa_ok, Status::invalid_enum, "options.max_isa = %d is not an instruction set",
                 static_cast<int>(options.max_isa));

  PlanImpl p;
  p.magic = detail::kPlanMagic;
  p.spec = spec;
  p.options = options;
  p.gates = num_gates(spec.mode);
  p.dirs = num_directions(spec);
  for (int l = 0; l < spec.num_layers; ++l) {
    p.layers[l].input_size = layer_input_size(spec, l);
    p.layers[l].skip_input = l == 0 && uses_skip_input(spec);
  }
  RNNCORE_RETURN_IF_ERROR(detail::choose_backend(spec, options, &p));
  if (p.backend == Backend::simd)
    detail::layout_simd(&p);
  else
    detail::layout_reference(&p);
  RNNCORE_ENSURE(p.ws.total != ~std::size_t{0}, Status::invalid_size,
                 "buffers for max_batch = %d and max_seq_len = %d would exceed 2^46 bytes", options.max_batch,
                 options.max_seq_len);
  p.fingerprint = detail::packed_fingerprint(p);

  std::memset(out->storage_, 0, sizeof out->storage_);
  new (out->storage_) PlanImpl(p);
  return Status::ok;
}

const RnnSpec& Plan::spec() const { return impl(*this).spec; }
const PlanOptions& Plan::options() const { return impl(*this).options; }
Backend Plan::backend() const { return impl(*this).backend; }
Isa Plan::isa() const { return impl(*this).isa; }
const char* Plan::kernel_name() const { return impl(*this).kernel_name; }
std::size_t Plan::packed_weight_bytes() const { return impl(*this).packed_bytes; }
std::size_t Plan::workspace_bytes() const { return impl(*this).ws.total; }

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
  auto* bytes = static_cast<unsigned char*>(packed);
  std::memset(bytes, 0, p.packed_bytes);
  const detail::PackedHeader header{detail::kPackedMagic, p.fingerprint};
  std::memcpy(bytes, &header, sizeof header);
  return p.backend == Backend::simd ? detail::simd_pack(p, canonical, bytes)
                                    : detail::reference_pack(p, canonical, bytes);
}

}  // namespace rnncore

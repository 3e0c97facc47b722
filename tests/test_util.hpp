// Helpers shared by the tests: deterministic random data, aligned buffers, error measures.
#ifndef RNNCORE_TESTS_TEST_UTIL_HPP
#define RNNCORE_TESTS_TEST_UTIL_HPP

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "src/shared/half.hpp"

namespace rnncore_test {

// xorshift64*: tiny, deterministic across platforms.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int range(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }

 private:
  std::uint64_t s_;
};

template <class T>
std::vector<T> random_vector(Rng& rng, std::size_t n, double scale) {
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng.uniform(-scale, scale));
  return v;
}

// A kAlignment-aligned byte buffer.
struct AlignedBuffer {
  // Filled with 0xff bytes (NaN as f32 and f64): a library read of a byte it never wrote that
  // reaches a result shows as NaN.
  explicit AlignedBuffer(std::size_t bytes)
      : ptr(static_cast<unsigned char*>(std::aligned_alloc(rnncore::kAlignment, (bytes + 63) / 64 * 64 + 64))), size(bytes) {
    std::memset(ptr, 0xff, (bytes + 63) / 64 * 64 + 64);
  }
  ~AlignedBuffer() { std::free(ptr); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  unsigned char* ptr;
  std::size_t size;
};

// Infinity-norm relative error max|a − b| / max|b| (the convention of tests/golden/README.md).
template <class A, class B>
double rel_error(const A* a, const B* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;  // (std::max would skip a NaN)
    if (std::isnan(x)) continue;                          // both NaN: they agree
    num = std::max(num, std::fabs(x - y));
    den = std::max(den, std::fabs(y));
  }
  return num / std::max(den, 1e-30);
}

// Outputs of one forward run.
template <class T>
struct Outputs {
  std::vector<T> y, hy, cy;
};

// The SIMD instruction sets this build and machine run under RNNCORE_MAX_ISA (max_isa forces each in
// turn): none where the build has no kernels for this CPU, or under RNNCORE_MAX_ISA=none. Tests loop over
// these, never over available_isas() (what the CPU has, cap or not).
inline std::vector<rnncore::Isa> isas_here() {
  using namespace rnncore;
  std::vector<Isa> out;
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512, Isa::neon}) {
    Plan plan;
    RnnSpec spec;
    spec.input_size = spec.hidden_size = 4;
    PlanOptions opt;
    opt.backend = Backend::simd;
    opt.max_isa = isa;
    if (Plan::create(spec, opt, &plan) == Status::ok && plan.isa() == isa) out.push_back(isa);
  }
  return out;
}

// The CPU backends of this build and machine: the reference, and the SIMD backend when it runs here.
inline std::vector<rnncore::Backend> cpu_backends() {
  if (isas_here().empty()) return {rnncore::Backend::reference};
  return {rnncore::Backend::reference, rnncore::Backend::simd};
}

// Plans, packs and runs one forward of a stack into `out` (poisoned first, so every element must be
// written; h tensors hold state_elements(stack, B) elements, c tensors cell_state_elements).
template <class T>
rnncore::Status run_forward(const rnncore::StackSpec& stack, rnncore::PlanOptions opt, const std::vector<T>& canonical,
                            rnncore::ForwardArgs args, Outputs<T>* out) {
  using namespace rnncore;
  Plan plan;
  Status s = Plan::create(stack, opt, &plan);
  if (s != Status::ok) return s;
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
  s = plan.pack_weights(canonical.data(), packed.ptr, packed.size);
  if (s != Status::ok) return s;
  bool lstm = false;
  for (int l = 0; l < stack.num_layers; ++l) lstm = lstm || stack.layers[l].mode == Mode::lstm;
  const std::size_t steps = stack.head.last_step_only ? 1 : static_cast<std::size_t>(args.seq_len);  // y [B, out]
  out->y.assign(steps * args.batch * stack_output_size(stack), T(-7));
  out->hy.assign(static_cast<std::size_t>(state_elements(stack, args.batch)), T(-7));
  out->cy.assign(lstm ? static_cast<std::size_t>(cell_state_elements(stack, args.batch)) : 0, T(-7));
  args.y = out->y.data();
  args.hy = out->hy.data();
  args.cy = lstm ? out->cy.data() : nullptr;
  return plan.forward(packed.ptr, ws.ptr, ws.size, args);
}

// The same for a CudnnLSTM-style spec.
template <class T>
rnncore::Status run_forward(const rnncore::RnnSpec& spec, rnncore::PlanOptions opt, const std::vector<T>& canonical,
                            rnncore::ForwardArgs args, Outputs<T>* out) {
  const rnncore::Status s = rnncore::validate(spec);
  return s != rnncore::Status::ok ? s : run_forward(rnncore::to_stack(spec), opt, canonical, args, out);
}


// A dropout wrapper with the given keep probabilities.
inline rnncore::Wrapper dropout_wrapper(double in, double out, double state, bool variational = false,
                                        bool per_sequence = false,
                                        rnncore::StateFilter filter = rnncore::StateFilter::default_filter) {
  rnncore::Wrapper w;
  w.kind = rnncore::WrapperKind::dropout;
  w.dropout.input_keep = in;
  w.dropout.output_keep = out;
  w.dropout.state_keep = state;
  w.dropout.variational = variational;
  w.dropout.per_sequence = per_sequence;
  w.dropout.state_filter = filter;
  return w;
}

inline rnncore::Wrapper residual_wrapper() {
  rnncore::Wrapper w;
  w.kind = rnncore::WrapperKind::residual;
  return w;
}

// f16 / bf16 weight storage (PlanOptions::weight_dtype): the canonical weights with W, R and W_proj
// rounded as a SIMD plan stores them, every other parameter as given.
inline std::vector<double> stored_weights(const rnncore::StackSpec& st, const std::vector<float>& w,
                                          rnncore::DType weight_dtype) {
  using namespace rnncore;
  std::vector<double> out(w.begin(), w.end());
  auto round = [&](std::int64_t at, std::int64_t n) {
    for (std::int64_t i = at; at >= 0 && i < at + n; ++i) {
      const float v = w[static_cast<std::size_t>(i)];
      out[static_cast<std::size_t>(i)] = weight_dtype == DType::bf16 ? detail::bf16_to_f32(detail::f32_to_bf16(v))
                                                                     : detail::f16_to_f32(detail::f32_to_f16(v));
    }
  };
  auto width = [](const LayerSpec& ls) { return static_cast<std::int64_t>(ls.proj_size > 0 ? ls.proj_size : ls.hidden_size); };
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    const std::int64_t H = ls.hidden_size, O = width(ls);
    const std::int64_t I = l == 0 ? st.input_size : width(st.layers[l - 1]) * num_directions(st.layers[l - 1]);
    const int gates = ls.mode == Mode::lstm ? 4 : ls.mode == Mode::gru ? 3 : 1;
    for (int d = 0; d < num_directions(ls); ++d) {
      for (int g = 0; g < gates; ++g) {
        round(canonical_offset(st, l, d, ParamKind::input_weight, g), H * I);
        round(canonical_offset(st, l, d, ParamKind::recurrent_weight, g), H * O);
      }
      round(canonical_offset(st, l, d, ParamKind::projection, 0), H * O);
    }
  }
  return out;
}

// Whether a SIMD plan of `st` with bf16 weights runs vdpbf16ps on this machine and build: the
// AVX-512 kernels, which a bf16 plan takes only where the CPU has AVX512_BF16 (rnncore info says
// the same). Their products round the inputs to bf16 as well. False where bf16 plans convert the
// panels to f32 (AVX2, RNNCORE_MAX_ISA=avx2) or are refused.
inline bool bf16_native(const rnncore::StackSpec& st) {
  using namespace rnncore;
  PlanOptions opt;
  opt.backend = Backend::simd;
  opt.weight_dtype = DType::bf16;
  Plan plan;
  return Plan::create(st, opt, &plan) == Status::ok && plan.isa() == Isa::avx512;
}

}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_TEST_UTIL_HPP

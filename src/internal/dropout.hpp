// Dropout masks of a run (docs/design.md §5–6): which counter words each mask site uses, resolved from the
// stack and the run's seed, step and row ids. The element rule itself is include/rnncore/philox.h.
#ifndef RNNCORE_SRC_INTERNAL_DROPOUT_HPP
#define RNNCORE_SRC_INTERNAL_DROPOUT_HPP

#include <cstdint>

#include "rnncore/philox.h"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

// One mask site of one run: a [rows, width] mask per time step (or one per run if variational).
struct Mask {
  bool active = false;  // the run drops something here (dropout on and keep < 1)
  std::uint64_t seed = 0;
  std::uint32_t site = 0;
  bool variational = false;
  bool shared = false;  // TF-style variational mask: one row for the whole batch (c1 = 0)
  std::uint32_t width = 0;
  double keep = 1.0;
  rnncore_mask_params params{0, 1, 1.0f};
  std::uint32_t time_offset = 0;  // the run's: masks use t + offset

  std::uint32_t t_prime(int t) const { return variational ? 0u : static_cast<std::uint32_t>(t) + time_offset; }
  std::uint32_t row(const RunDropout& run, int b) const {
    if (shared) return 0u;
    return run.row_ids != nullptr ? run.row_ids[b] : static_cast<std::uint32_t>(b);
  }
  bool keeps(const RunDropout& run, int t, int b, int unit) const {
    return rnncore_mask_keep(seed, run.step, site, t_prime(t), row(run, b), static_cast<std::uint32_t>(unit), width,
                             &params) != 0;
  }
  // Value an element is multiplied by: 1/keep (in T's precision) or 0.
  template <class T>
  T value(const RunDropout& run, int t, int b, int unit) const {
    if (!keeps(run, t, b, unit)) return T(0);
    return sizeof(T) == 8 ? static_cast<T>(1.0 / keep) : static_cast<T>(params.scale);
  }
};

// The parts of a DropoutWrapper's masks.
enum class MaskKind : std::uint32_t {
  input = RNNCORE_SITE_WRAPPER_INPUT,
  output = RNNCORE_SITE_WRAPPER_OUTPUT,
  state_h = RNNCORE_SITE_STATE_H,
  state_c = RNNCORE_SITE_STATE_C,
};

// The mask of dropout wrapper `wrapper` of (layer, dir); inactive when the run has no dropout, the
// keep probability is 1, or the state filter excludes the part.
Mask wrapper_mask(const StackSpec& stack, const RunDropout& run, int layer, int dir, int wrapper, MaskKind kind);
// The masks of one (layer, direction)'s wrappers for a run.
struct WrapperMasks {
  int count = 0;
  Mask input[kMaxWrappers], output[kMaxWrappers], state_h[kMaxWrappers], state_c[kMaxWrappers];
  bool any_input = false, any_state_h = false, any_state_c = false, state_per_step = false;
};
WrapperMasks wrapper_masks(const PlanImpl& p, int layer, int dir, const RunDropout& run);

// v[0, width) *= row b's mask at time t (nothing when the mask is inactive). Element by element in
// T's precision, so a value recomputed this way is bit-identical to the forward's.
template <class T>
void multiply_by_mask(const Mask& m, const RunDropout& run, int t, int b, T* v, int width) {
  if (!m.active) return;
  for (int u = 0; u < width; ++u) v[u] *= m.value<T>(run, t, b, u);
}

// The inter-layer dropout mask on layer `layer`'s output (width D·H, direction bit 0).
Mask inter_layer_mask(const StackSpec& stack, const RunDropout& run, int layer);
// True when any site of the stack can drop something in a dropout run.
bool stack_has_dropout(const StackSpec& stack);
// Per-layer flags: whether some wrapper drops the input / the state / acts on the output.
void layer_dropout_flags(const StackSpec& stack, int layer, LayerPlan* lp);

// Fills out[0, m.width) with row b's mask values at time t (1/keep or 0), with the SIMD generator
// when a kernel table is given. The f64 values are 1/keep in double.
void mask_row(const simd::F32Kernels* kernels, const Mask& m, const RunDropout& run, int t, int b, float* out);
void mask_row(const simd::F32Kernels* kernels, const Mask& m, const RunDropout& run, int t, int b, double* out);

// multiply_by_mask through a whole mask row at once (the SIMD generator when `kernels` is given,
// four units per Philox call): bit-identical to it. `row`: m.width elements of scratch.
template <class T>
void multiply_by_mask_row(const simd::F32Kernels* kernels, const Mask& m, const RunDropout& run, int t, int b, T* v,
                          int width, T* row) {
  if (!m.active) return;
  mask_row(kernels, m, run, t, b, row);
  for (int u = 0; u < width; ++u) v[u] *= row[u];
}

// Element-wise residual: result = fn(input, output) over `width` elements (default: add).
template <class T>
void apply_residual(const ResidualFn& fn, const T* input, const T* output, T* result, int width);

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_DROPOUT_HPP

// Mask sites of wrappers and inter-layer dropout (docs/design.md §6).
#include "src/internal/dropout.hpp"

namespace rnncore {
namespace detail {

namespace {

// Depth of a dropout wrapper: 0 for the one nearest the cell, counting dropout wrappers outward.
std::uint32_t dropout_depth(const LayerSpec& ls, int wrapper) {
  std::uint32_t depth = 0;
  for (int w = 0; w < wrapper; ++w)
    if (ls.wrappers[w].kind == WrapperKind::dropout) ++depth;
  return depth;
}

bool filter_drops(StateFilter f, MaskKind kind) {
  if (kind == MaskKind::state_h) return f == StateFilter::default_filter || f == StateFilter::h_and_c;
  return f == StateFilter::h_and_c || f == StateFilter::c_only;
}

}  // namespace

Mask wrapper_mask(const StackSpec& stack, const RunDropout& run, int layer, int dir, int wrapper, MaskKind kind) {
  Mask m;
  const LayerSpec& ls = stack.layers[layer];
  const Wrapper& w = ls.wrappers[wrapper];
  if (w.kind != WrapperKind::dropout) return m;
  const DropoutWrapper& d = w.dropout;
  switch (kind) {
    case MaskKind::input: m.keep = d.input_keep; break;
    case MaskKind::output: m.keep = d.output_keep; break;
    case MaskKind::state_h:
    case MaskKind::state_c:
      m.keep = filter_drops(d.state_filter, kind) && (kind == MaskKind::state_h || ls.mode == Mode::lstm) ? d.state_keep : 1.0;
      break;
  }
  // h and the output have output_size units (P with a projection), c has hidden_size.
  m.width = static_cast<std::uint32_t>(kind == MaskKind::input     ? layer_input_size(stack, layer)
                                       : kind == MaskKind::state_c ? ls.hidden_size
                                                                   : output_size(ls));
  m.active = run.on && m.keep < 1.0;
  m.seed = d.has_seed ? d.seed : run.seed;
  m.variational = d.variational;
  m.shared = d.variational && !d.per_sequence;
  m.site = rnncore_mask_site(static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(dir), dropout_depth(ls, wrapper),
                             static_cast<std::uint32_t>(kind), d.variational ? 1 : 0);
  m.time_offset = run.time_offset;
  rnncore_mask_params_init(&m.params, m.keep);
  return m;
}

WrapperMasks wrapper_masks(const PlanImpl& p, int layer, int dir, const RunDropout& run) {
  WrapperMasks wm;
  wm.count = p.stack.layers[layer].num_wrappers;
  for (int w = 0; w < wm.count; ++w) {
    wm.input[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::input);
    wm.output[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::output);
    wm.state_h[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::state_h);
    wm.state_c[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::state_c);
    wm.any_input = wm.any_input || wm.input[w].active;
    wm.any_state_h = wm.any_state_h || wm.state_h[w].active;
    wm.any_state_c = wm.any_state_c || wm.state_c[w].active;
    wm.state_per_step = wm.state_per_step || (wm.state_h[w].active && !wm.state_h[w].variational) ||
                        (wm.state_c[w].active && !wm.state_c[w].variational);
  }
  return wm;
}

Mask inter_layer_mask(const StackSpec& stack, const RunDropout& run, int layer) {
  Mask m;
  m.keep = rnncore_keep_from_dropout(stack.dropout);
  m.active = run.on && layer < stack.num_layers - 1 && m.keep < 1.0;
  m.seed = run.seed;
  m.width = static_cast<std::uint32_t>(num_directions(stack.layers[layer]) * output_size(stack.layers[layer]));
  m.site = rnncore_mask_site(static_cast<std::uint32_t>(layer), 0, 0, RNNCORE_SITE_INTER_LAYER, 0);
  m.time_offset = run.time_offset;
  rnncore_mask_params_init(&m.params, m.keep);
  return m;
}

void layer_dropout_flags(const StackSpec& stack, int layer, LayerPlan* lp) {
  RunDropout on;
  on.on = true;
  lp->input_dropout = lp->state_dropout = lp->output_chain = false;
  const LayerSpec& ls = stack.layers[layer];
  for (int w = 0; w < ls.num_wrappers; ++w) {
    if (ls.wrappers[w].kind == WrapperKind::residual) {
      lp->output_chain = true;
      continue;
    }
    lp->input_dropout = lp->input_dropout || wrapper_mask(stack, on, layer, 0, w, MaskKind::input).active;
    lp->output_chain = lp->output_chain || wrapper_mask(stack, on, layer, 0, w, MaskKind::output).active;
    lp->state_dropout = lp->state_dropout || wrapper_mask(stack, on, layer, 0, w, MaskKind::state_h).active ||
                        wrapper_mask(stack, on, layer, 0, w, MaskKind::state_c).active;
  }
}

bool stack_has_dropout(const StackSpec& stack) {
  RunDropout on;
  on.on = true;
  for (int l = 0; l < stack.num_layers; ++l) {
    if (inter_layer_mask(stack, on, l).active) return true;
    LayerPlan lp;
    layer_dropout_flags(stack, l, &lp);
    if (lp.input_dropout || lp.state_dropout) return true;
    for (int w = 0; w < stack.layers[l].num_wrappers; ++w)
      if (wrapper_mask(stack, on, l, 0, w, MaskKind::output).active) return true;
  }
  return false;
}

void mask_row(const simd::F32Kernels* kernels, const Mask& m, const RunDropout& run, int t, int b, float* out) {
  if (kernels != nullptr)
    kernels->mask_row(m.seed, run.step, m.site, m.t_prime(t), m.row(run, b), m.width, 0, m.width, m.params, out);
  else
    rnncore_mask_row(m.seed, run.step, m.site, m.t_prime(t), m.row(run, b), m.width, &m.params, out);
}

void mask_row(const simd::F32Kernels*, const Mask& m, const RunDropout& run, int t, int b, double* out) {
  // Generate as floats in the first half of the (twice as wide) row, then widen back to front.
  float* f = reinterpret_cast<float*>(out);
  rnncore_mask_row(m.seed, run.step, m.site, m.t_prime(t), m.row(run, b), m.width, &m.params, f);
  const double scale = 1.0 / m.keep;
  for (int u = static_cast<int>(m.width) - 1; u >= 0; --u) out[u] = f[u] != 0.0f ? scale : 0.0;
}

template <class T>
void apply_residual(const ResidualFn& fn, const T* input, const T* output, T* result, int width) {
  if constexpr (sizeof(T) == 8) {
    if (fn.f64 != nullptr) return fn.f64(input, output, result, width, fn.user_data);
  } else {
    if (fn.f32 != nullptr) return fn.f32(input, output, result, width, fn.user_data);
  }
  for (int i = 0; i < width; ++i) result[i] = input[i] + output[i];
}

template void apply_residual<float>(const ResidualFn&, const float*, const float*, float*, int);
template void apply_residual<double>(const ResidualFn&, const double*, const double*, double*, int);

}  // namespace detail
}  // namespace rnncore

// Views of one (layer, direction)'s blocks in the canonical weight buffer (docs/design.md §4.1), shared by
// the reference forward and backward (which also reads its gradients through them).
#ifndef RNNCORE_SRC_INTERNAL_CANONICAL_PARAMS_HPP
#define RNNCORE_SRC_INTERNAL_CANONICAL_PARAMS_HPP

#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

// Canonical parameter blocks of one (layer, direction).
template <class T>
struct CellParams {
  T* W[4] = {};   // [H, I] per gate, null for a skip layer
  T* R[4] = {};   // [H, H]
  T* bW[4] = {};  // [H]
  T* bR[4] = {};  // [H]
  T* peep[4] = {};  // [H] LSTM peepholes for gates i, f, o (index 0, 1, 3); null without
  T* proj = nullptr;  // [P, H] LSTM projection; null without
};

template <class T>
CellParams<T> cell_params(const PlanImpl& p, int layer, int dir, T* canonical) {
  CellParams<T> cp;
  for (int g = 0; g < p.layers[layer].gates; ++g) {
    const std::int64_t w = canonical_offset(p.stack, layer, dir, ParamKind::input_weight, g);
    cp.W[g] = w < 0 ? nullptr : canonical + w;
    cp.R[g] = canonical + canonical_offset(p.stack, layer, dir, ParamKind::recurrent_weight, g);
    cp.bW[g] = canonical + canonical_offset(p.stack, layer, dir, ParamKind::input_bias, g);
    cp.bR[g] = canonical + canonical_offset(p.stack, layer, dir, ParamKind::recurrent_bias, g);
    const std::int64_t pe = canonical_offset(p.stack, layer, dir, ParamKind::peephole, g);
    cp.peep[g] = pe < 0 ? nullptr : canonical + pe;
  }
  const std::int64_t pr = canonical_offset(p.stack, layer, dir, ParamKind::projection, 0);
  cp.proj = pr < 0 ? nullptr : canonical + pr;
  return cp;
}

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_CANONICAL_PARAMS_HPP

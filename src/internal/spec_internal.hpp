// Internal helpers about specs and the canonical layout.
#ifndef RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP
#define RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP

#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace detail {

// Largest input or hidden size; keeps every size product far from int64 overflow.
constexpr int kMaxFeatureSize = 1 << 16;

// Canonical scalars of one (layer, direction) group: [W_0..W_G-1] [R_0..R_G-1] [bW_0..] [bR_0..].
// [W_0..W_G-1] [R_0..R_G-1] [bW_0..] [bR_0..] then the LSTM extensions: [p_i p_f p_o] [W_proj].
std::int64_t params_per_direction(const StackSpec& stack, int layer);
// Scalars of one direction's LSTM extensions: 3·H with peepholes, plus P·H with a projection.
std::int64_t extension_params(const LayerSpec& layer);

// Rounds n up to a multiple of m (m > 0).
constexpr std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP

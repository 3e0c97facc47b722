// Internal helpers about specs and the canonical layout.
#ifndef RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP
#define RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP

#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace detail {

// Largest input or hidden size; keeps every size product far from int64 overflow.
constexpr int kMaxFeatureSize = 1 << 16;
constexpr int kMaxVocabSize = 1 << 24;  // rows of an embedding table

// Canonical scalars of one (layer, direction) group: [W_0..W_G-1] [R_0..R_G-1] [bW_0..] [bR_0..].
// [W_0..W_G-1] [R_0..R_G-1] [bW_0..] [bR_0..] then the LSTM extensions: [p_i p_f p_o] [W_proj].
std::int64_t params_per_direction(const StackSpec& stack, int layer);
// Scalars of one direction's LSTM extensions: 3·H with peepholes, plus P·H with a projection.
std::int64_t extension_params(const LayerSpec& layer);

// Scalars of every layer's parameters: the canonical offset of the embedding table and head, which follow.
std::int64_t recurrent_param_count(const StackSpec& stack);
// The Dense chain's input width: D·O of the last layer.
std::int64_t head_input_size(const StackSpec& stack);
// The Dense chain after the last layer: pre_head[0..num_pre_head), then the head (k = num_pre_head);
// num_dense is 0 without a head. dense_input_size(k): the chain's input for k = 0, else Dense k−1's width.
int num_dense(const StackSpec& stack);
const DenseSpec& dense_at(const StackSpec& stack, int k);
std::int64_t dense_input_size(const StackSpec& stack, int k);

// Rounds n up to a multiple of m (m > 0).
constexpr std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_SPEC_INTERNAL_HPP

// The integer LSTM's portable matrix-vector kernels (src/internal/int8_kernels.hpp), the
// specification of the others, and the interleaved layout. src/kernels.cpp registers them.
#include "src/internal/int8_kernels.hpp"

#include "src/internal/plan_impl.hpp"

#include <cstddef>
#include <cstdint>

namespace rnncore {
namespace q8 {

void i8_dot_1x1__scalar(const std::int8_t* w, int rows, int k_size, const std::int8_t* v,
                        const std::int32_t* bias, std::int32_t* out) {
  for (int j = 0; j < rows; ++j) {
    const std::int8_t* row = w + static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size);
    // Unsigned, so that a sum beyond int32 (reachable only with a bias near the limits) wraps as
    // TFLite's int32 accumulator does, without undefined behaviour.
    std::uint32_t acc = static_cast<std::uint32_t>(bias[j]);
    for (int k = 0; k < k_size; ++k) {
      acc += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(v[k]));
    }
    out[j] = static_cast<std::int32_t>(acc);
  }
}

bool interleavable4(const std::int8_t* w, int rows, int k_size, int* bad_row, int* bad_column) {
  const std::size_t K = static_cast<std::size_t>(k_size);
  for (int j = 1; j < rows; j += 2) {
    const std::int8_t* odd = w + static_cast<std::size_t>(j) * K;
    for (int k = 0; k < k_size; ++k) {
      if (odd[k] == -128 && odd[static_cast<std::ptrdiff_t>(k) - k_size] < 0) {
        if (bad_row != nullptr) *bad_row = j;
        if (bad_column != nullptr) *bad_column = k;
        return false;
      }
    }
  }
  return true;
}

bool interleave4(const std::int8_t* w, int rows, int k_size, std::int8_t* out, int* bad_row, int* bad_column) {
  if (!interleavable4(w, rows, k_size, bad_row, bad_column)) return false;
  const int k_words = interleaved4_words(k_size);
  const std::size_t bytes = interleaved4_bytes(rows, k_size);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = 0;
  const auto at = [w, rows, k_size](int j, int k) -> int {
    return j < rows ? w[static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size) + static_cast<std::size_t>(k)] : 0;
  };
  for (int j = 0; j < rows; j += 2) {  // a pair of rows: j stored as it is, j + 1 corrected (the padding row too)
    for (int k = 0; k < k_size; ++k) {
      const int even = at(j, k);
      out[interleaved4_offset(j, k, k_words)] = static_cast<std::int8_t>(even);
      out[interleaved4_offset(j + 1, k, k_words)] = static_cast<std::int8_t>(at(j + 1, k) - (even < 0 ? 1 : 0));
    }
  }
  return true;
}

void widen_pairs(const std::int8_t* v, int n, std::int16_t* out) {
  int k = 0;
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  k = widen_pairs_dsp(v, n, out);
#endif
  for (const int padded = 4 * interleaved4_words(n); k < padded; ++k) out[widened_index(k)] = k < n ? v[k] : 0;
}

void i8_dot_panels_1x1__scalar(const PanelProduct* products, int count) {
  for (int i = 0; i < count; ++i) {
    const PanelProduct& p = products[i];
    for (int j = 0; j < p.rows; ++j) {
      std::uint32_t acc = static_cast<std::uint32_t>(p.bias[j]);  // wraps as i8_dot_1x1__scalar
      for (int k = 0; k < 4 * p.k_words; ++k) {
        acc += static_cast<std::uint32_t>(interleaved4_weight(p.w, j, k, p.k_words) *
                                          static_cast<std::int32_t>(p.v[widened_index(k)]));
      }
      p.out[j] = static_cast<std::int32_t>(acc);
    }
  }
}

}  // namespace q8
}  // namespace rnncore

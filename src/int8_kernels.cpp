// The integer LSTM's interleaved weight layouts (src/internal/int8_kernels.hpp): the check, the
// interleaving (int8 and int16) and the widened vector. The portable kernels that read it are the reference's
// (src/int8_reference.cpp).
#include "src/internal/int8_kernels.hpp"

#include "src/internal/plan_impl.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rnncore {
namespace q8 {

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

std::int8_t interleaved4_i16_weight(const std::int8_t* m, int j, int k, int k_words) {
  std::int16_t x;
  std::memcpy(&x, m + 2 * interleaved4_i16_index(j, k, k_words), 2);
  return static_cast<std::int8_t>(x);
}

void interleave4_i16(const std::int8_t* w, int rows, int k_size, std::int8_t* out) {
  const int k_words = interleaved4_words(k_size);
  const std::size_t bytes = interleaved4_i16_bytes(rows, k_size);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = 0;
  for (int j = 0; j < rows; ++j) {
    for (int k = 0; k < k_size; ++k) {
      const std::int16_t x = w[static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size) + static_cast<std::size_t>(k)];
      std::memcpy(out + 2 * interleaved4_i16_index(j, k, k_words), &x, 2);
    }
  }
}

void widen_pairs(const std::int8_t* v, int n, std::int16_t* out) {
  int k = 0;
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  k = widen_pairs_dsp(v, n, out);
#endif
  for (const int padded = 4 * interleaved4_words(n); k < padded; ++k) out[widened_index(k)] = k < n ? v[k] : 0;
}

}  // namespace q8
}  // namespace rnncore

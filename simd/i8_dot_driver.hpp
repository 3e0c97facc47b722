// The driver every int8 matrix-vector kernel (simd/i8_dot_<isa>.cpp) shares, written once: rows
// four at a time sharing the loads of v, then the rows left one at a time; per row the columns in
// steps of the ISA's width, an optional narrower step for what is left (`rest`), and scalar code
// for the last columns. Header-only and free of intrinsics, so that each kernel's unit compiles it
// with its own flags; each unit supplies the pieces as a struct `Ops`:
//   Acc                       one row's accumulator (int32 lanes, or what the ISA needs)
//   X                         the vector's columns of one step, prepared once for the four rows
//   kStep                     columns per step
//   zero()                    an empty accumulator
//   load(v)                   X for the columns [k, k + kStep) of v at v
//   mac(acc, row, x)          acc + the products of the row's columns [k, k + kStep) (row at column k) with x
//   rest(acc, r, n, v, k, K)  the n (1 or 4) rows' accumulators acc[i] (rows at r[i]) plus a
//                             narrower step over columns from k; returns the first column not taken
//   sum4(acc, bias, out)      out[i] = bias[i] + Σ lanes of acc[i] for i < 4, wrapping
//   sum1(acc)                 Σ lanes of acc, wrapping
// Every sum is int32 arithmetic modulo 2^32 (sums in any order give the same bits), so every
// kernel equals i8_dot_1x1__scalar bit for bit.
#ifndef RNNCORE_SIMD_I8_DOT_DRIVER_HPP
#define RNNCORE_SIMD_I8_DOT_DRIVER_HPP

#include <cstddef>
#include <cstdint>

namespace rnncore {
namespace q8 {
namespace driver {

// acc + Σ_{k0 <= k < k_size} row[k] · v[k], wrapping (unsigned, as the scalar kernel sums).
inline std::int32_t dot_rest(std::int32_t acc, const std::int8_t* row, const std::int8_t* v, int k0, int k_size) {
  std::uint32_t a = static_cast<std::uint32_t>(acc);
  for (int k = k0; k < k_size; ++k)
    a += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(v[k]));
  return static_cast<std::int32_t>(a);
}

// The rest of no width: every column after the steps goes to the scalar code.
struct NoRest {
  template <class Acc>
  static int rest(Acc*, const std::int8_t* const*, int, const std::int8_t*, int k, int) {
    return k;
  }
};

template <class Ops>
inline void dot_rows(const std::int8_t* w, int rows, int k_size, const std::int8_t* v, const std::int32_t* bias,
                     std::int32_t* out) {
  using Acc = typename Ops::Acc;
  const std::size_t K = static_cast<std::size_t>(k_size);
  const int steps_end = k_size - k_size % Ops::kStep;
  int j = 0;
  for (; j + 4 <= rows; j += 4) {
    const std::int8_t* const r0 = w + static_cast<std::size_t>(j) * K;
    const std::int8_t* const r[4] = {r0, r0 + K, r0 + 2 * K, r0 + 3 * K};
    Acc a[4] = {Ops::zero(), Ops::zero(), Ops::zero(), Ops::zero()};
    for (int k = 0; k < steps_end; k += Ops::kStep) {
      const typename Ops::X x = Ops::load(v + k);
      a[0] = Ops::mac(a[0], r[0] + k, x);
      a[1] = Ops::mac(a[1], r[1] + k, x);
      a[2] = Ops::mac(a[2], r[2] + k, x);
      a[3] = Ops::mac(a[3], r[3] + k, x);
    }
    const int done = Ops::rest(a, r, 4, v, steps_end, k_size);
    Ops::sum4(a, bias + j, out + j);
    if (done == k_size) continue;
    for (int i = 0; i < 4; ++i) out[j + i] = dot_rest(out[j + i], r[i], v, done, k_size);
  }
  for (; j < rows; ++j) {
    const std::int8_t* const r[1] = {w + static_cast<std::size_t>(j) * K};
    Acc a[1] = {Ops::zero()};
    for (int k = 0; k < steps_end; k += Ops::kStep) a[0] = Ops::mac(a[0], r[0] + k, Ops::load(v + k));
    const int done = Ops::rest(a, r, 1, v, steps_end, k_size);
    // The bias joins in unsigned arithmetic: the sum may wrap.
    const std::int32_t s = static_cast<std::int32_t>(static_cast<std::uint32_t>(bias[j]) + static_cast<std::uint32_t>(Ops::sum1(a[0])));
    out[j] = dot_rest(s, r[0], v, done, k_size);
  }
}

}  // namespace driver
}  // namespace q8
}  // namespace rnncore

#endif  // RNNCORE_SIMD_I8_DOT_DRIVER_HPP

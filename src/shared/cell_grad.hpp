// The cells' derivatives per unit (docs/design.md §2, §10.1): the one statement of backward's calculus,
// shared by the CPU backward (src/train.cpp) and the GPU's (src/gpu/device/backward.hpp). Inputs are what
// a training forward keeps (the gate activations, the new cell state) and the gradient reaching
// the cell's output; gradients of the gates are written `stride` elements apart (the gate blocks
// of a dgates row). No allocation, no libm beyond what callers pass in.
#ifndef RNNCORE_SRC_SHARED_CELL_GRAD_HPP
#define RNNCORE_SRC_SHARED_CELL_GRAD_HPP

#include <stdint.h>

#include "rnncore/philox.h"  // RNNCORE_HD

namespace rnncore {
namespace detail {

/// LSTM: from i, f, g, o, tc = tanh(c_t), c_{t−1}, dh (at h_t) and dc (at c_t, from the next
/// step): the pre-activation gradients i f g o into d[0], d[stride], d[2·stride], d[3·stride];
/// returns dc_{t−1}.
template <class T>
RNNCORE_HD inline T lstm_unit_backward(T i, T f, T g, T o, T tc, T c_prev, T dh, T dc, T* d, int64_t stride) {
  const T dct = dc + dh * o * (T(1) - tc * tc);
  d[0] = dct * g * i * (T(1) - i);
  d[stride] = dct * c_prev * f * (T(1) - f);
  d[2 * stride] = dct * i * (T(1) - g * g);
  d[3 * stride] = dh * tc * o * (T(1) - o);
  return dct * f;
}

/// GRU: from r, z, n, h_{t−1} and dh: the gradients of z and n into d[stride], d[2·stride];
/// reset-after also r into d[0] (from rec_n = R_n h + bR_n) and the gradient of rec_n into
/// d[3·stride]. Returns the part of dh_{t−1} that bypasses the recurrent weights (dh · z).
/// The reset-before r waits for d(r ⊙ h): gru_reset_before_r.
template <class T>
RNNCORE_HD inline T gru_unit_backward(bool reset_after, T r, T z, T n, T rec_n, T h_prev, T dh, T* d, int64_t stride) {
  const T dan = dh * (T(1) - z) * (T(1) - n * n);
  d[stride] = dh * (h_prev - n) * z * (T(1) - z);
  d[2 * stride] = dan;
  if (reset_after) {
    d[0] = dan * rec_n * r * (T(1) - r);
    d[3 * stride] = dan * r;
  }
  return dh * z;
}

/// Reset-before GRU: n saw R_n (r ⊙ h_{t−1}); from d(r ⊙ h) (= R_nᵀ dn) the gradient of r's
/// pre-activation into *dr; returns what reaches dh_{t−1} this way.
template <class T>
RNNCORE_HD inline T gru_reset_before_r(T r, T h_prev, T drh, T* dr) {
  *dr = drh * h_prev * r * (T(1) - r);
  return drh * r;
}

/// Elman RNN: the pre-activation gradient from h_t = act(pre) and dh.
template <class T>
RNNCORE_HD inline T rnn_unit_backward(bool tanh_act, T h, T dh) {
  return dh * (tanh_act ? T(1) - h * h : (h > T(0) ? T(1) : T(0)));
}

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_SHARED_CELL_GRAD_HPP

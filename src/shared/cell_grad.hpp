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

/// Whether a clip to [−clip, clip] (clip 0: none) passes the gradient at the value v it was given:
/// everywhere but where it bound (TF's clip_by_value and PyTorch's clamp pass it at the bounds).
template <class T>
RNNCORE_HD inline bool clip_passes(T v, double clip) {
  return clip <= 0.0 || (v >= static_cast<T>(-clip) && v <= static_cast<T>(clip));
}

/// An LSTM unit's peephole weights on gates i, f (from c_{t−1}) and o (from c_t); zeros without.
template <class T>
struct LstmPeepholes {
  T i = T(0), f = T(0), o = T(0);
};

/// LSTM with peepholes and a cell clip (TF LSTMCell): as lstm_unit_backward, from dm at
/// m = o ⊙ tanh(c_t) (the projection's gradient already taken back through it) and dc at the
/// clipped c_t; `clipped`: the cell clip bound c_t, so nothing reaches f ⊙ c_{t−1} + i ⊙ g.
/// Returns dc_{t−1} (through f and the i, f peepholes).
template <class T>
RNNCORE_HD inline T lstm_ext_unit_backward(T i, T f, T g, T o, T tc, T c_prev, T dm, T dc, LstmPeepholes<T> p, bool clipped,
                                           T* d, int64_t stride) {
  const T dpo = dm * tc * o * (T(1) - o);
  const T dct = clipped ? T(0) : dc + dm * o * (T(1) - tc * tc) + p.o * dpo;
  const T dpi = dct * g * i * (T(1) - i), dpf = dct * c_prev * f * (T(1) - f);
  d[0] = dpi;
  d[stride] = dpf;
  d[2 * stride] = dct * i * (T(1) - g * g);
  d[3 * stride] = dpo;
  return dct * f + p.i * dpi + p.f * dpf;
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

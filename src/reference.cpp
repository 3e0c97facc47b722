// The scalar reference backend: the specification of every cell and wrapper (docs/design.md §2–3, §5), written
// as plainly as possible over the canonical weights, in f32 and f64, one time step and one row at
// a time. Every fast path is tested against it. Packed weights are the canonical buffer behind the
// packed header.
#include <cmath>
#include <cstring>

#include "src/internal/canonical_params.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/backend.hpp"

namespace rnncore {
namespace detail {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// W_g x + bW_g for unit u (the input itself in skip mode).
template <class T>
T input_term(const CellParams<const T>& cp, int g, int u, const T* x, int in_size) {
  const T wx = cp.W[g] != nullptr ? dot(cp.W[g] + static_cast<std::int64_t>(u) * in_size, x, in_size) : x[u];
  return wx + cp.bW[g][u];
}

// R_g h + bR_g for unit u; h has `width` units (the layer's output size: H, or P with a projection).
template <class T>
T recurrent_term(const CellParams<const T>& cp, int g, int u, const T* h, int width) {
  return dot(cp.R[g] + static_cast<std::int64_t>(u) * width, h, width) + cp.bR[g][u];
}

// TF's clip_by_value(v, −clip, clip); clip 0 means none.
template <class T>
T clip_value(T v, double clip) {
  if (clip <= 0.0) return v;
  const T lo = static_cast<T>(-clip), hi = static_cast<T>(clip);
  return v < lo ? lo : v > hi ? hi : v;
}

// One LSTM step for one row (TF LSTMCell with its options; the plain cuDNN LSTM without them):
//   i = σ(W_i x + bW_i + R_i h + bR_i [+ p_i ⊙ c]), f likewise with p_f, g = tanh(…),
//   c' = clip(f ⊙ c + i ⊙ g), o = σ(W_o x + bW_o + R_o h + bR_o [+ p_o ⊙ c']), m = o ⊙ tanh(c'),
//   h' = clip_proj(W_proj m) with a projection, else m.
// `m` is a scratch row of H; `keep` (training) records i f g o c h, with the extensions the
// reserve row of keep_width.
template <class T>
void lstm_step(const LayerPlan& lp, const LayerSpec& ls, const CellParams<const T>& cp, const T* x, const T* h,
               T* h_next, T* c, T* m, T* keep) {
  const int H = lp.hidden, I = lp.input_size, O = lp.out;
  T* cell_out = cp.proj != nullptr ? m : h_next;
  for (int u = 0; u < H; ++u) {
    T pre[4];
    for (int g = 0; g < 4; ++g) pre[g] = input_term(cp, g, u, x, I) + recurrent_term(cp, g, u, h, O);
    if (cp.peep[0] != nullptr) {
      pre[0] += cp.peep[0][u] * c[u];
      pre[1] += cp.peep[1][u] * c[u];
    }
    const T i = sigmoid(pre[0]), f = sigmoid(pre[1]), gg = std::tanh(pre[2]);
    const T c_raw = f * c[u] + i * gg;
    c[u] = clip_value(c_raw, ls.cell_clip);
    if (cp.peep[3] != nullptr) pre[3] += cp.peep[3][u] * c[u];
    const T o = sigmoid(pre[3]);
    cell_out[u] = o * std::tanh(c[u]);
    if (keep != nullptr) {
      const T kept[7] = {i, f, gg, o, c[u], cell_out[u], c_raw};
      for (int k = 0; k < (lp.extensions ? 7 : 6); ++k) keep[k * H + u] = kept[k];
    }
  }
  T* keep_h = keep != nullptr && lp.extensions ? keep + 7 * H : nullptr;  // h, then h̃
  if (cp.proj == nullptr) {
    if (keep_h != nullptr)
      for (int k = 0; k < O; ++k) keep_h[k] = keep_h[O + k] = h_next[k];
    return;
  }
  for (int k = 0; k < O; ++k) {
    const T raw = dot(cp.proj + static_cast<std::int64_t>(k) * H, m, H);
    h_next[k] = clip_value(raw, ls.proj_clip);
    if (keep_h != nullptr) {
      keep_h[k] = h_next[k];
      keep_h[O + k] = raw;
    }
  }
}

// One cell step for one row: reads x, h, c; writes h_next and c (in place). With `keep` (a reserve
// row, slot-major: keep_slots) it also records the gate activations and new state for backward.
template <class T>
void cell_step(const LayerPlan& lp, const LayerSpec& ls, const CellParams<const T>& cp, const T* x, const T* h, T* h_next,
               T* c, T* scratch, T* keep) {
  const int H = lp.hidden, I = lp.input_size;
  switch (lp.mode) {
    case Mode::lstm:
      lstm_step(lp, ls, cp, x, h, h_next, c, scratch, keep);
      break;
    case Mode::gru:
      if (lp.gru_variant == GruVariant::reset_after) {
        for (int u = 0; u < H; ++u) {
          const T r = sigmoid(input_term(cp, 0, u, x, I) + recurrent_term(cp, 0, u, h, H));
          const T z = sigmoid(input_term(cp, 1, u, x, I) + recurrent_term(cp, 1, u, h, H));
          const T hn = recurrent_term(cp, 2, u, h, H);
          const T n = std::tanh(input_term(cp, 2, u, x, I) + r * hn);
          h_next[u] = (T(1) - z) * n + z * h[u];
          if (keep != nullptr) {
            const T kept[5] = {r, z, n, hn, h_next[u]};
            for (int k = 0; k < 5; ++k) keep[k * H + u] = kept[k];
          }
        }
      } else {  // reset-before: the n gate sees R_n (r ⊙ h), so all of r comes first
        T* rh = scratch;
        for (int u = 0; u < H; ++u) {
          const T r = sigmoid(input_term(cp, 0, u, x, I) + recurrent_term(cp, 0, u, h, H));
          rh[u] = r * h[u];
          if (keep != nullptr) keep[u] = r;
        }
        for (int u = 0; u < H; ++u) {
          const T z = sigmoid(input_term(cp, 1, u, x, I) + recurrent_term(cp, 1, u, h, H));
          const T n = std::tanh(input_term(cp, 2, u, x, I) + recurrent_term(cp, 2, u, rh, H));
          h_next[u] = (T(1) - z) * n + z * h[u];
          if (keep != nullptr) {
            keep[H + u] = z;
            keep[2 * H + u] = n;
            keep[3 * H + u] = h_next[u];
          }
        }
      }
      break;
    case Mode::rnn_tanh:
    case Mode::rnn_relu:
      for (int u = 0; u < H; ++u) {
        const T pre = input_term(cp, 0, u, x, I) + recurrent_term(cp, 0, u, h, H);
        // ReLU keeps NaN (as PyTorch does): bad input must not become a believable 0.
        h_next[u] = lp.mode == Mode::rnn_tanh ? std::tanh(pre) : (pre > T(0) || pre != pre ? pre : T(0));
        if (keep != nullptr) keep[u] = h_next[u];
      }
      break;
  }
}

// Row b of an initial state ([B, width] slot, or null: zeros) into dst.
template <class T>
void restore_row(const void* initial, int b, int width, T* dst) {
  if (initial != nullptr)
    std::memcpy(dst, static_cast<const T*>(initial) + static_cast<std::int64_t>(b) * width, sizeof(T) * width);
  else
    std::memset(dst, 0, sizeof(T) * width);
}

template <class T>
void run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* canonical,
                   const ReferenceBuffers& buf) {
  const LayerPlan& lp = p.layers[layer];
  const LayerSpec& ls = p.stack.layers[layer];
  // h, y and the wrappers' output side have O units (P with a projection); c has H.
  const int H = lp.hidden, O = lp.out, I = lp.input_size, B = io.batch, nw = ls.num_wrappers;
  const CellParams<const T> cp = cell_params(p, layer, dir, reinterpret_cast<const T*>(canonical));
  T* h = reinterpret_cast<T*>(buf.h[0]);
  T* h_next = reinterpret_cast<T*>(buf.h[1]);
  T* c = lp.mode == Mode::lstm ? reinterpret_cast<T*>(buf.c) : nullptr;
  T* rows = reinterpret_cast<T*>(buf.rows);
  const int keep_row = keep_width(lp);
  T* x_cell = rows;                      // the input after every wrapper's input dropout
  T* x_level = rows + p.max_width;       // the input a residual wrapper sees
  T* out = rows + 2 * p.max_width;       // the output on its way out through the wrappers
  T* res = rows + 3 * p.max_width;
  T* cell_scratch = rows + 4 * p.max_width;
  const std::size_t state_bytes = sizeof(T) * static_cast<std::size_t>(B) * O;
  const std::size_t cell_bytes = sizeof(T) * static_cast<std::size_t>(B) * H;

  const WrapperMasks wm = wrapper_masks(p, layer, dir, io.dropout);

  if (io.h0 != nullptr) std::memcpy(h, io.h0, state_bytes); else std::memset(h, 0, state_bytes);
  if (c != nullptr) {
    if (io.c0 != nullptr) std::memcpy(c, io.c0, cell_bytes); else std::memset(c, 0, cell_bytes);
  }
  const T* x = static_cast<const T*>(io.x);
  T* y = static_cast<T*>(io.y);
  for (int s = 0; s < io.steps; ++s) {
    const int t = io.reverse ? io.steps - 1 - s : s;
    for (int b = 0; b < B; ++b) {
      T* hb = h + static_cast<std::int64_t>(b) * O;
      T* hnb = h_next + static_cast<std::int64_t>(b) * O;
      T* cb = c != nullptr ? c + static_cast<std::int64_t>(b) * H : nullptr;
      T* yb = y + t * io.y_st + b * io.y_sb;
      const int len = io.lengths != nullptr ? io.lengths[b] : io.steps;
      if (t >= len) {  // past the row's length: state carries over, output is zero
        std::memcpy(hnb, hb, sizeof(T) * O);
        for (int u = 0; u < O; ++u) yb[u] = T(0);
        continue;
      }
      if (io.resets.at(t, b)) {  // a reset: the row starts again from its initial state
        restore_row(io.h0, b, O, hb);
        if (cb != nullptr) restore_row(io.c0, b, H, cb);
      }
      // In through the wrappers, outermost first: each dropout wrapper drops the input it passes on.
      const T* xb = x + t * io.x_st + b * io.x_sb;
      std::memcpy(x_cell, xb, sizeof(T) * I);
      for (int w = nw - 1; w >= 0; --w) multiply_by_mask(wm.input[w], io.dropout, t, b, x_cell, I);

      T* keep = io.keep == nullptr ? nullptr
                                   : static_cast<T*>(io.keep) + (static_cast<std::int64_t>(t) * B + b) * keep_row;
      cell_step(lp, ls, cp, x_cell, hb, hnb, cb, cell_scratch, keep);

      // Out through the wrappers, innermost first.
      std::memcpy(out, hnb, sizeof(T) * O);
      for (int w = 0; w < nw; ++w) {
        if (ls.wrappers[w].kind == WrapperKind::dropout) {
          multiply_by_mask(wm.output[w], io.dropout, t, b, out, O);
          multiply_by_mask(wm.state_h[w], io.dropout, t, b, hnb, O);
          if (cb != nullptr) multiply_by_mask(wm.state_c[w], io.dropout, t, b, cb, H);
        } else {  // residual: fn(the input this wrapper received, the output it got back)
          std::memcpy(x_level, xb, sizeof(T) * I);
          for (int v = nw - 1; v > w; --v) multiply_by_mask(wm.input[v], io.dropout, t, b, x_level, I);
          apply_residual(ls.wrappers[w].residual, x_level, out, res, O);
          std::memcpy(out, res, sizeof(T) * O);
        }
      }
      std::memcpy(yb, out, sizeof(T) * O);
    }
    T* tmp = h;
    h = h_next;
    h_next = tmp;
  }
  if (io.hy != nullptr) std::memcpy(io.hy, h, state_bytes);
  if (io.cy != nullptr && c != nullptr) std::memcpy(io.cy, c, cell_bytes);
}

}  // namespace

Status reference_pack(const PlanImpl& p, const void* canonical, unsigned char* packed) {
  std::memcpy(packed + kPackedHeaderBytes, canonical,
              static_cast<std::size_t>(param_count(p.stack)) * dtype_size(p.stack.dtype));
  return Status::ok;
}

void reference_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* canonical,
                             const ReferenceBuffers& buf) {
  if (p.stack.dtype == DType::f64)
    run_direction<double>(p, layer, dir, io, canonical, buf);
  else
    run_direction<float>(p, layer, dir, io, canonical, buf);
}

int keep_slots(const LayerPlan& lp) {
  switch (lp.mode) {
    case Mode::lstm: return 6;
    case Mode::gru: return lp.gru_variant == GruVariant::reset_after ? 5 : 4;
    case Mode::rnn_tanh:
    case Mode::rnn_relu: return 1;
  }
  return 1;
}

int keep_width(const LayerPlan& lp) {
  return lp.mode == Mode::lstm && lp.extensions ? 7 * lp.hidden + 2 * lp.out : keep_slots(lp) * lp.hidden;
}

int keep_h(const LayerPlan& lp) {
  return lp.mode == Mode::lstm && lp.extensions ? 7 * lp.hidden : (keep_slots(lp) - 1) * lp.hidden;
}

void reference_layers(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a,
                      const RunDropout& run) {
  for (int l = 0; l < p.stack.num_layers; ++l) {
    for (int d = 0; d < p.layers[l].dirs; ++d) {
      ReferenceBuffers buf;
      buf.h[0] = ws + p.ws.h[d][0];
      buf.h[1] = ws + p.ws.h[d][1];
      buf.c = ws + p.ws.c[d];
      buf.rows = ws + p.ws.scratch + static_cast<std::size_t>(d) * p.ws.scratch_stride;
      reference_run_direction(p, l, d, direction_io(p, a, ws, l, d, run), packed + kPackedHeaderBytes, buf);
    }
    apply_inter_layer_dropout(p, run, l, ws + p.ws.layer_out[l & 1], a.seq_len, a.batch, ws + p.ws.scratch);
  }
}

}  // namespace detail
}  // namespace rnncore

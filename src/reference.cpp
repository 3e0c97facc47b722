// The scalar reference backend: the specification of every cell (DESIGN §2–3), written as
// plainly as possible over the canonical weights, in f32 and f64. Every fast path is tested
// against it. Packed weights are the canonical buffer behind the packed header.
#include <cmath>
#include <cstring>

#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Canonical parameter blocks of one (layer, direction).
template <class T>
struct CellParams {
  const T* W[4] = {};   // [H, I] per gate, null for a skip layer
  const T* R[4] = {};   // [H, H]
  const T* bW[4] = {};  // [H]
  const T* bR[4] = {};  // [H]
};

template <class T>
CellParams<T> cell_params(const PlanImpl& p, int layer, int dir, const T* canonical) {
  CellParams<T> cp;
  for (int g = 0; g < p.gates; ++g) {
    const std::int64_t w = canonical_offset(p.spec, layer, dir, ParamKind::input_weight, g);
    cp.W[g] = w < 0 ? nullptr : canonical + w;
    cp.R[g] = canonical + canonical_offset(p.spec, layer, dir, ParamKind::recurrent_weight, g);
    cp.bW[g] = canonical + canonical_offset(p.spec, layer, dir, ParamKind::input_bias, g);
    cp.bR[g] = canonical + canonical_offset(p.spec, layer, dir, ParamKind::recurrent_bias, g);
  }
  return cp;
}

template <class T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// W_g x + bW_g for unit u (the input itself in skip mode).
template <class T>
T input_term(const CellParams<T>& cp, int g, int u, const T* x, int in_size) {
  const T wx = cp.W[g] != nullptr ? dot(cp.W[g] + static_cast<std::int64_t>(u) * in_size, x, in_size) : x[u];
  return wx + cp.bW[g][u];
}

template <class T>
T recurrent_term(const CellParams<T>& cp, int g, int u, const T* h, int hidden) {
  return dot(cp.R[g] + static_cast<std::int64_t>(u) * hidden, h, hidden) + cp.bR[g][u];
}

// One cell step for one row: reads x, h, c; writes h_next and c (in place).
template <class T>
void cell_step(const PlanImpl& p, const CellParams<T>& cp, const T* x, int in_size, const T* h, T* h_next, T* c,
               T* scratch) {
  const int H = p.spec.hidden_size;
  switch (p.spec.mode) {
    case Mode::lstm:
      for (int u = 0; u < H; ++u) {
        T pre[4];
        for (int g = 0; g < 4; ++g) pre[g] = input_term(cp, g, u, x, in_size) + recurrent_term(cp, g, u, h, H);
        const T i = sigmoid(pre[0]), f = sigmoid(pre[1]), gg = std::tanh(pre[2]), o = sigmoid(pre[3]);
        c[u] = f * c[u] + i * gg;
        h_next[u] = o * std::tanh(c[u]);
      }
      break;
    case Mode::gru:
      if (p.spec.gru_variant == GruVariant::reset_after) {
        for (int u = 0; u < H; ++u) {
          const T r = sigmoid(input_term(cp, 0, u, x, in_size) + recurrent_term(cp, 0, u, h, H));
          const T z = sigmoid(input_term(cp, 1, u, x, in_size) + recurrent_term(cp, 1, u, h, H));
          const T n = std::tanh(input_term(cp, 2, u, x, in_size) + r * recurrent_term(cp, 2, u, h, H));
          h_next[u] = (T(1) - z) * n + z * h[u];
        }
      } else {  // reset-before: the n gate sees R_n (r ⊙ h), so all of r comes first
        T* rh = scratch;
        for (int u = 0; u < H; ++u)
          rh[u] = sigmoid(input_term(cp, 0, u, x, in_size) + recurrent_term(cp, 0, u, h, H)) * h[u];
        for (int u = 0; u < H; ++u) {
          const T z = sigmoid(input_term(cp, 1, u, x, in_size) + recurrent_term(cp, 1, u, h, H));
          const T n = std::tanh(input_term(cp, 2, u, x, in_size) + recurrent_term(cp, 2, u, rh, H));
          h_next[u] = (T(1) - z) * n + z * h[u];
        }
      }
      break;
    case Mode::rnn_tanh:
    case Mode::rnn_relu:
      for (int u = 0; u < H; ++u) {
        const T pre = input_term(cp, 0, u, x, in_size) + recurrent_term(cp, 0, u, h, H);
        h_next[u] = p.spec.mode == Mode::rnn_tanh ? std::tanh(pre) : (pre > T(0) ? pre : T(0));
      }
      break;
  }
}

template <class T>
void run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                   unsigned char* ws) {
  const int H = p.spec.hidden_size, B = io.batch, in_size = p.layers[layer].input_size;
  const CellParams<T> cp = cell_params(p, layer, dir, reinterpret_cast<const T*>(packed + kPackedHeaderBytes));
  T* h = reinterpret_cast<T*>(ws + p.ws.h[dir][0]);
  T* h_next = reinterpret_cast<T*>(ws + p.ws.h[dir][1]);
  T* c = p.spec.mode == Mode::lstm ? reinterpret_cast<T*>(ws + p.ws.c[dir]) : nullptr;
  T* scratch = reinterpret_cast<T*>(ws + p.ws.gates);
  const std::size_t state_bytes = sizeof(T) * static_cast<std::size_t>(B) * H;

  if (io.h0 != nullptr) std::memcpy(h, io.h0, state_bytes); else std::memset(h, 0, state_bytes);
  if (c != nullptr) {
    if (io.c0 != nullptr) std::memcpy(c, io.c0, state_bytes); else std::memset(c, 0, state_bytes);
  }
  const T* x = static_cast<const T*>(io.x);
  T* y = static_cast<T*>(io.y);
  for (int s = 0; s < io.steps; ++s) {
    const int t = io.reverse ? io.steps - 1 - s : s;
    for (int b = 0; b < B; ++b) {
      T* hb = h + static_cast<std::int64_t>(b) * H;
      T* hnb = h_next + static_cast<std::int64_t>(b) * H;
      T* yb = y + t * io.y_st + b * io.y_sb;
      const int len = io.lengths != nullptr ? io.lengths[b] : io.steps;
      if (t >= len) {  // past the row's length: state carries over, output is zero
        std::memcpy(hnb, hb, sizeof(T) * H);
        for (int u = 0; u < H; ++u) yb[u] = T(0);
        continue;
      }
      cell_step(p, cp, x + t * io.x_st + b * io.x_sb, in_size, hb, hnb,
                c != nullptr ? c + static_cast<std::int64_t>(b) * H : nullptr, scratch);
      for (int u = 0; u < H; ++u) yb[u] = hnb[u];
    }
    T* tmp = h;
    h = h_next;
    h_next = tmp;
  }
  if (io.hy != nullptr) std::memcpy(io.hy, h, state_bytes);
  if (io.cy != nullptr && c != nullptr) std::memcpy(io.cy, c, state_bytes);
}

}  // namespace

Status reference_pack(const PlanImpl& p, const void* canonical, unsigned char* packed) {
  std::memcpy(packed + kPackedHeaderBytes, canonical,
              static_cast<std::size_t>(param_count(p.spec)) * dtype_size(p.spec.dtype));
  return Status::ok;
}

void reference_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                             unsigned char* ws) {
  if (p.spec.dtype == DType::f64)
    run_direction<double>(p, layer, dir, io, packed, ws);
  else
    run_direction<float>(p, layer, dir, io, packed, ws);
}

}  // namespace detail
}  // namespace rnncore

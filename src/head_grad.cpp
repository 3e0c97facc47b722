// Backward through the ends of a stack (docs/training.md), on the host backends: the Dense head,
// the Dense layers before it (StackSpec::pre_head) and the Embedding. The training forward keeps the
// head's input [T, B, D·H], each pre_head Dense's activations and the head's in the reserve
// (TrainLayout::head_in, pre_head_y, head_y), and the embedding's rows (embed_x).
//
// Head, for each row r the head mapped (every step: (t, b) with t < len_b; last step: each b with
// len_b > 0), with y the activations and dy the caller's gradient of y:
//   dz = act'(dy)  (none: dy; relu: dy where y > 0; sigmoid: dy y (1 − y); tanh: dy (1 − y²);
//                   softmax: y ⊙ (dy − Σ dy ⊙ y))
//   db += Σ_r dz_r,  dW += Σ_r dz_r ⊗ a_r,  da_r = Wᵀ dz_r
// where a_r is the head's input row. With a chain, a_r is the last pre_head Dense's activations and
// da_r its output gradient: the same three lines run for it with dz = act'(da), and so on down the
// chain. The first Dense's input row is each direction's output of the last layer at row r (last
// step: forward at len−1, reverse at 0), and its da goes back to those positions of the last
// layer's output gradient (zero elsewhere). Rows past a length produced a constant zero: their
// gradient is zero.
// Embedding: the table's row of each id seen gets the gradient of layer 0's input at that (t, b).
// Every sum runs in a fixed order (rows in time-major order, then units): bit-identical results
// for any thread count.
#include <cstring>

#include "src/internal/backend.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

namespace {

template <class T>
const T* canonical_part(const PlanImpl& p, const unsigned char* packed, ParamKind kind, int layer) {
  return reinterpret_cast<const T*>(packed + p.train.canonical) + canonical_offset(p.stack, layer, 0, kind, 0);
}

// dz of one row from its activations y and gradient dy.
template <class T>
void activation_grad(Activation act, const T* y, const T* dy, int n, T* dz) {
  T dot = 0;
  if (act == Activation::softmax)
    for (int j = 0; j < n; ++j) dot += dy[j] * y[j];
  for (int j = 0; j < n; ++j) {
    switch (act) {
      case Activation::relu: dz[j] = y[j] > T(0) ? dy[j] : T(0); break;
      case Activation::sigmoid: dz[j] = dy[j] * y[j] * (T(1) - y[j]); break;
      case Activation::tanh: dz[j] = dy[j] * (T(1) - y[j] * y[j]); break;
      case Activation::softmax: dz[j] = y[j] * (dy[j] - dot); break;
      default: dz[j] = dy[j]; break;
    }
  }
}

// One Dense of the chain (W [out, in], place k) on the n rows, from dz [n, out] of its pre-activations:
// its input gradient d_in = Wᵀ dz (each input column summed in increasing j) and, with dW, db, its
// weight gradients in rows' order. Its input row r is `segs` segments of `seg` columns: segment d at
// input(r, d), its gradient at d_in(r, d) (the first Dense reads each direction's part of the last
// layer's output at its own position; the others one contiguous row).
template <class T, class Active, class In, class DIn>
void dense_backward(const T* W, std::int64_t in, int out, std::int64_t n, const T* dz, int segs, int seg, Active active,
                    In input, DIn d_in, T* dW, T* db) {
  for (std::int64_t r = 0; r < n; ++r) {
    if (!active(r)) continue;
    const T* z = dz + r * out;
    for (int d = 0; d < segs; ++d) {
      T* dst = d_in(r, d);
      for (int k = 0; k < seg; ++k) {
        const std::int64_t col = static_cast<std::int64_t>(d) * seg + k;
        T sum = 0;
        for (int j = 0; j < out; ++j) sum += z[j] * W[j * in + col];
        dst[k] = sum;
      }
    }
  }
  if (dW == nullptr) return;
  for (std::int64_t r = 0; r < n; ++r) {
    if (!active(r)) continue;
    const T* z = dz + r * out;
    for (int j = 0; j < out; ++j) {
      db[j] += z[j];
      for (int d = 0; d < segs; ++d) {
        const T* src = input(r, d);
        T* row = dW + j * in + static_cast<std::int64_t>(d) * seg;
        for (int k = 0; k < seg; ++k) row[k] += z[j] * src[k];
      }
    }
  }
}

}  // namespace

template <class T>
void head_backward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const BackwardArgs& a, T* d_out,
                   T* dweights) {
  const StackSpec& st = p.stack;
  const ForwardArgs& f = a.forward;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  const int out = st.head.out_features, O = output_size(last), dirs = num_directions(last), K = st.num_pre_head;
  const std::int64_t in = head_input_size(st), steps = f.seq_len, B = f.batch;
  const bool last_step = st.head.last_step_only, batch_major = f.layout == Layout::batch_major;
  const auto* reserve = static_cast<const unsigned char*>(f.reserve);
  const T* o = reinterpret_cast<const T*>(reserve + p.train.head_in);  // [T, B, in]
  const T* y = reinterpret_cast<const T*>(reserve + p.train.head_y);   // [n, out]
  const T* dy = static_cast<const T*>(a.dy);
  T* dz = reinterpret_cast<T*>(ws + p.train.head_dz);
  std::memset(d_out, 0, sizeof(T) * static_cast<std::size_t>(steps * B * in));
  if (dy == nullptr) return;  // no gradient reaches the head: nothing flows back
  auto length = [&](std::int64_t b) { return f.seq_lengths != nullptr ? f.seq_lengths[b] : f.seq_len; };
  const std::int64_t n = last_step ? B : steps * B;
  auto active = [&](std::int64_t r) { return last_step ? length(r) > 0 : r / B < length(r % B); };
  // Where row r's input columns [d·O, (d+1)·O) sit in the [T, B, in] output: (t·B + b)·in + d·O.
  auto position = [&](std::int64_t r, int d) -> std::int64_t {
    if (!last_step) return r * in + static_cast<std::int64_t>(d) * O;
    const std::int64_t t = d == 0 ? length(r) - 1 : 0;
    return (t * B + r) * in + static_cast<std::int64_t>(d) * O;
  };

  for (std::int64_t r = 0; r < n; ++r) {  // the head's dz
    T* z = dz + r * out;
    if (!active(r)) {
      std::memset(z, 0, sizeof(T) * static_cast<std::size_t>(out));
      continue;
    }
    const std::int64_t t = r / B, b = r % B;
    const T* g = dy + (last_step ? r : (batch_major ? b * steps + t : r)) * out;
    activation_grad(st.head.activation, y + r * out, g, out, z);
  }
  // Down the chain, the head (place K) first: Dense k's input is Dense k−1's activations, or for
  // k = 0 the last layer's output; its input gradient becomes Dense k−1's dz in place.
  for (int k = K; k >= 0; --k) {
    const DenseSpec& ds = k == K ? st.head : st.pre_head[k];
    const std::int64_t w_in = dense_input_size(st, k);
    const T* W = canonical_part<T>(p, packed, ParamKind::dense_weight, k);
    T* dW = dweights != nullptr ? dweights + canonical_offset(st, k, 0, ParamKind::dense_weight, 0) : nullptr;
    T* db = dweights != nullptr ? dweights + canonical_offset(st, k, 0, ParamKind::dense_bias, 0) : nullptr;
    if (k == 0) {
      dense_backward(W, w_in, ds.out_features, n, dz, dirs, O, active, [&](std::int64_t r, int d) { return o + position(r, d); },
                     [&](std::int64_t r, int d) { return d_out + position(r, d); }, dW, db);
      break;
    }
    const int prev = st.pre_head[k - 1].out_features;
    const T* a_prev = reinterpret_cast<const T*>(reserve + p.train.pre_head_y[k - 1]);  // [n, prev]
    T* da = reinterpret_cast<T*>(ws + p.train.head_da[k % 2]);
    dense_backward(W, w_in, ds.out_features, n, dz, 1, prev, active, [&](std::int64_t r, int) { return a_prev + r * prev; },
                   [&](std::int64_t r, int) { return da + r * prev; }, dW, db);
    for (std::int64_t r = 0; r < n; ++r)
      if (active(r)) activation_grad(st.pre_head[k - 1].activation, a_prev + r * prev, da + r * prev, prev, da + r * prev);
    dz = da;
  }
}

template <class T>
void embedding_backward(const PlanImpl& p, const BackwardArgs& a, const T* d_x, T* dweights) {
  const ForwardArgs& f = a.forward;
  const std::int64_t I = p.stack.input_size, steps = f.seq_len, B = f.batch;
  const auto* ids = static_cast<const std::int32_t*>(f.x);
  T* dE = dweights + canonical_offset(p.stack, 0, 0, ParamKind::embedding, 0);
  for (std::int64_t t = 0; t < steps; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      if (f.seq_lengths != nullptr && t >= f.seq_lengths[b]) continue;  // not read by layer 0
      const std::int32_t id = ids[f.layout == Layout::batch_major ? b * steps + t : t * B + b];
      const T* g = d_x + (t * B + b) * I;
      T* row = dE + static_cast<std::int64_t>(id) * I;
      for (std::int64_t i = 0; i < I; ++i) row[i] += g[i];
    }
}

template void head_backward<float>(const PlanImpl&, const unsigned char*, unsigned char*, const BackwardArgs&, float*, float*);
template void head_backward<double>(const PlanImpl&, const unsigned char*, unsigned char*, const BackwardArgs&, double*,
                                    double*);
template void embedding_backward<float>(const PlanImpl&, const BackwardArgs&, const float*, float*);
template void embedding_backward<double>(const PlanImpl&, const BackwardArgs&, const double*, double*);

}  // namespace detail
}  // namespace rnncore

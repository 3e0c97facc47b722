// The ends of a stack on the CPU backends: the Embedding before layer 0 (a row of the table per
// token id) and the Dense head after the last layer (y = act(W o + b) for every step's output, or
// for each row's last outputs). The reference computes the head's products in the stack's dtype in
// increasing k; the SIMD backend with f32_matmul over Wᵀ packed at pack time (the same order of
// summation per element, so its results are the reference's up to the kernel's FMAs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "src/internal/backend.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

namespace {

template <class T>
const T* at(const unsigned char* base, std::size_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}
template <class T>
T* at(unsigned char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// Byte offset, within the tail at PlanImpl::ends, of a parameter of the ends (k: the Dense's place
// in the chain, the head last; 0 for the embedding).
std::size_t tail_offset(const PlanImpl& p, ParamKind kind, int k = 0) {
  const std::int64_t first = recurrent_param_count(p.stack);
  return static_cast<std::size_t>(canonical_offset(p.stack, k, 0, kind, 0) - first) * dtype_size(p.stack.dtype);
}

template <class T>
void embed(const PlanImpl& p, const unsigned char* packed, unsigned char* dst, const ForwardArgs& a) {
  const std::int64_t I = p.stack.input_size, T_ = a.seq_len, B = a.batch;
  const T* table = at<T>(packed, p.ends + tail_offset(p, ParamKind::embedding));
  const auto* ids = static_cast<const std::int32_t*>(a.x);
  T* out = reinterpret_cast<T*>(dst);
  for (std::int64_t t = 0; t < T_; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int32_t id = ids[a.layout == Layout::batch_major ? b * T_ + t : t * B + b];
      std::memcpy(out + (t * B + b) * I, table + id * I, sizeof(T) * static_cast<std::size_t>(I));
    }
}

// c [rows, out] = a [rows, in] · Wᵀ: the reference in increasing k.
template <class T>
void dense_product(const T* W, std::int64_t in, std::int64_t out, const T* a, std::int64_t rows, T* c) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) {
      T sum = 0;
      for (std::int64_t k = 0; k < in; ++k) sum += a[r * in + k] * W[j * in + k];
      c[r * out + j] = sum;
    }
}

// The head's (the chain's last Dense's) input width.
std::int64_t head_in(const StackSpec& st) { return dense_input_size(st, st.num_pre_head); }

template <class T>
void head_product(const PlanImpl& p, const unsigned char* packed, const T* a, int rows, T* c) {
  const T* W = at<T>(packed, p.ends + tail_offset(p, ParamKind::dense_weight, p.stack.num_pre_head));
  dense_product(W, head_in(p.stack), p.stack.head.out_features, a, rows, c);
}

// The SIMD backend: f32_matmul over the packed Wᵀ.
void head_product_matmul(const PlanImpl& p, const unsigned char* packed, const float* a, int rows, float* c) {
  simd::MatmulArgs m;
  m.a = a;
  m.a_k = 1;
  m.a_m = head_in(p.stack);
  m.b_packed = at<float>(packed, p.simd.head_wt);
  m.c = c;
  m.ldc = p.stack.head.out_features;
  m.n = p.stack.head.out_features;
  m.k = static_cast<std::int32_t>(head_in(p.stack));
  m.row_begin = 0;
  m.row_end = rows;
  p.simd.kernels()->matmul(m);
}

// y_row = act(c_row + b).
template <class T>
void epilogue(Activation act, const T* c, const T* bias, int n, T* y) {
  for (int j = 0; j < n; ++j) {
    const T v = c[j] + bias[j];
    switch (act) {
      case Activation::relu: y[j] = v > T(0) ? v : T(0); break;
      case Activation::sigmoid: y[j] = T(1) / (T(1) + std::exp(-v)); break;
      case Activation::tanh: y[j] = std::tanh(v); break;
      default: y[j] = v; break;
    }
  }
  if (act != Activation::softmax) return;
  T top = y[0], sum = 0;
  for (int j = 1; j < n; ++j) top = std::max(top, y[j]);
  for (int j = 0; j < n; ++j) sum += (y[j] = std::exp(y[j] - top));
  for (int j = 0; j < n; ++j) y[j] /= sum;
}

// Where a training forward keeps the ends' values in its reserve (a build without training has no
// training layout, and no caller passes a reserve there).
enum class TrainPart { head_in, head_y, pre_head_y };
std::size_t train_offset(const PlanImpl& p, TrainPart part, int k) {
#if RNNCORE_TRAINING
  switch (part) {
    case TrainPart::head_in: return p.train.head_in;
    case TrainPart::head_y: return p.train.head_y;
    case TrainPart::pre_head_y: return p.train.pre_head_y[k];
  }
#else
  (void)p, (void)part, (void)k;
#endif
  return 0;
}

// The Dense layers before the head on n rows, each product in increasing k on every backend, its
// activation in place (in the workspace, or in a training forward's reserve, where backward reads
// them); returns the rows the head reads (`rows` itself without pre_head).
template <class T>
const T* run_pre_head(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, unsigned char* reserve, const T* rows,
                      std::int64_t n) {
  const StackSpec& st = p.stack;
  for (int k = 0; k < st.num_pre_head; ++k) {
    const int out = st.pre_head[k].out_features;
    const T* W = at<T>(packed, p.ends + tail_offset(p, ParamKind::dense_weight, k));
    const T* bias = at<T>(packed, p.ends + tail_offset(p, ParamKind::dense_bias, k));
    T* mid = reserve != nullptr ? at<T>(reserve, train_offset(p, TrainPart::pre_head_y, k)) : at<T>(ws, p.ws.head_mid[k % 2]);
    dense_product(W, dense_input_size(st, k), out, rows, n, mid);
    for (std::int64_t r = 0; r < n; ++r) epilogue(st.pre_head[k].activation, mid + r * out, bias, out, mid + r * out);
    rows = mid;
  }
  return rows;
}

template <class T>
void head(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a, unsigned char* reserve) {
  const StackSpec& st = p.stack;
  const LayerSpec& last = st.layers[st.num_layers - 1];
  const int out = st.head.out_features, O = output_size(last), dirs = num_directions(last);
  const std::int64_t in = head_input_size(st), T_ = a.seq_len, B = a.batch;
  const T* bias = at<T>(packed, p.ends + tail_offset(p, ParamKind::dense_bias, st.num_pre_head));
  const T* o = reserve != nullptr ? at<T>(reserve, train_offset(p, TrainPart::head_in, 0)) : at<T>(ws, p.ws.head_in);  // [T, B, D·O]
  T* keep = reserve != nullptr ? at<T>(reserve, train_offset(p, TrainPart::head_y, 0)) : nullptr;  // [n, out] the activations (training)
  T* c = at<T>(ws, p.ws.head_out);
  auto length = [&](std::int64_t b) { return a.seq_lengths != nullptr ? a.seq_lengths[b] : a.seq_len; };
  const T* rows = o;
  std::int64_t n = T_ * B;
  if (st.head.last_step_only) {  // each row's last outputs: forward at len−1, reverse at 0
    T* r = at<T>(ws, p.ws.head_rows);
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t len = length(b);
      for (int d = 0; d < dirs; ++d) {
        T* dst = r + b * in + static_cast<std::int64_t>(d) * O;
        if (len == 0) std::fill(dst, dst + O, T(0));
        else std::memcpy(dst, o + ((d == 0 ? len - 1 : 0) * B + b) * in + d * O, sizeof(T) * static_cast<std::size_t>(O));
      }
    }
    rows = r;
    n = B;
  }
  rows = run_pre_head(p, packed, ws, reserve, rows, n);
  if constexpr (std::is_same<T, float>::value) {
    p.ops()->head_product_f32(p, packed, rows, static_cast<int>(n), c);
  } else {
    head_product(p, packed, rows, static_cast<int>(n), c);
  }
  T* y = static_cast<T*>(a.y);
  if (st.head.last_step_only) {
    for (std::int64_t b = 0; b < B; ++b) {
      if (length(b) == 0) std::fill(y + b * out, y + (b + 1) * out, T(0));
      else epilogue(st.head.activation, c + b * out, bias, out, y + b * out);
      if (keep != nullptr) std::memcpy(keep + b * out, y + b * out, sizeof(T) * static_cast<std::size_t>(out));
    }
    return;
  }
  const bool batch_major = a.layout == Layout::batch_major;
  for (std::int64_t t = 0; t < T_; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      T* row = y + (batch_major ? b * T_ + t : t * B + b) * out;
      if (t >= length(b)) std::fill(row, row + out, T(0));  // zero past a row's length, as y always is
      else epilogue(st.head.activation, c + (t * B + b) * out, bias, out, row);
      if (keep != nullptr) std::memcpy(keep + (t * B + b) * out, row, sizeof(T) * static_cast<std::size_t>(out));
    }
}

}  // namespace

void reference_head_product(const PlanImpl& p, const unsigned char* packed, const float* a, int n, float* c) {
  head_product(p, packed, a, n, c);
}

void simd_head_product(const PlanImpl& p, const unsigned char* packed, const float* a, int n, float* c) {
  if (p.simd.kernels()->matmul != nullptr) head_product_matmul(p, packed, a, n, c);
  else head_product(p, packed, a, n, c);
}

// (The reference's packed buffer is the canonical one: it has nothing to pack.)
void simd_pack_ends(const PlanImpl& p, const void* canonical, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const std::int64_t first = recurrent_param_count(st), tail = param_count(st) - first;
  const auto* c = static_cast<const float*>(canonical);
  if (tail > 0) std::memcpy(packed + p.ends, c + first, sizeof(float) * static_cast<std::size_t>(tail));
  if (st.head.out_features > 0) {  // the head's Wᵀ [in, out]: B(k, n) = W[n, k]
    const std::int64_t in = head_in(st);
    p.simd.kernels()->pack_b(c + canonical_offset(st, st.num_pre_head, 0, ParamKind::dense_weight, 0), 1, in, static_cast<std::int32_t>(in),
                      st.head.out_features, at<float>(packed, p.simd.head_wt));
  }
}

void embed_lookup(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a, unsigned char* out) {
  if (out == nullptr) out = ws + p.ws.embed_x;
  if (p.stack.dtype == DType::f64) embed<double>(p, packed, out, a);
  else embed<float>(p, packed, out, a);
}

void run_head(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a, unsigned char* reserve) {
  if (p.stack.dtype == DType::f64) head<double>(p, packed, ws, a, reserve);
  else head<float>(p, packed, ws, a, reserve);
}

}  // namespace detail
}  // namespace rnncore

// Training (DESIGN §10): the forward that keeps what backward needs, and backward through time.
//
// The training forward is the reference cell loop (src/reference.cpp) writing, per row and step, the
// gate activations and the new cell state into the reserve (keep_slots), and inner-layer outputs
// after inter-layer dropout. Backward regenerates every dropout mask from the mask function (never
// stored), walks each direction's steps in reverse for the recurrent gradients, then forms the
// weight and input gradients as sums over all (step, row) in a fixed order: the result does not
// depend on threads or on anything but the inputs.
#include <cmath>
#include <cstring>

#include "src/internal/canonical_params.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

namespace {

// What a reserve records of the run that filled it; backward refuses a reserve of another run.
struct ReserveHeader {
  std::uint64_t magic;
  std::uint64_t fingerprint;
  std::int32_t batch, seq_len, layout, dropout_on;
  std::uint64_t seed;
  std::uint32_t step, time_offset;
  std::uint64_t rows_hash;  // of seq_lengths and row_ids
};
static_assert(sizeof(ReserveHeader) <= kReserveHeaderBytes, "reserve header too large");

std::uint64_t hash_rows(const ForwardArgs& a) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (int b = 0; b < a.batch; ++b) {
    mix(a.seq_lengths != nullptr ? static_cast<std::uint32_t>(a.seq_lengths[b]) : 0xffffffffu);
    mix(a.row_ids != nullptr ? a.row_ids[b] : static_cast<std::uint32_t>(b));
  }
  return h;
}

ReserveHeader describe_run(const PlanImpl& p, const ForwardArgs& a, const RunDropout& run) {
  ReserveHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kReserveMagic;
  h.fingerprint = p.fingerprint;
  h.batch = a.batch;
  h.seq_len = a.seq_len;
  h.layout = static_cast<std::int32_t>(a.layout);
  h.dropout_on = run.on ? 1 : 0;
  h.seed = run.on ? run.seed : 0;
  h.step = run.on ? run.step : 0;
  h.time_offset = run.on ? run.time_offset : 0;
  h.rows_hash = hash_rows(a);
  return h;
}

// A strided [T, B, width] view (time and batch strides in elements).
template <class T>
struct SeqView {
  T* data = nullptr;
  std::int64_t st = 0, sb = 0;
  T* row(int t, int b) const { return data + t * st + b * sb; }
};

template <class T>
SeqView<T> caller_view(T* data, const ForwardArgs& a, std::int64_t width) {
  const bool bm = a.layout == Layout::batch_major;
  return {data, bm ? width : a.batch * width, bm ? a.seq_len * width : width};
}

template <class T>
SeqView<T> workspace_view(T* data, int batch, std::int64_t width) {
  return {data, batch * width, width};
}

template <class T>
void axpy(T* y, T a, const T* x, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

// Everything backward of one (layer, direction) reads and writes.
template <class T>
struct DirectionGrad {
  int layer = 0, dir = 0, batch = 0, steps = 0;
  const std::int32_t* lengths = nullptr;
  RunDropout run;
  CellParams<const T> w;       // the weights
  CellParams<T> dw;            // their gradients (null pointers: not wanted)
  SeqView<const T> x;          // the layer's input
  SeqView<const T> dy;         // gradient of this direction's output columns (data null: zero)
  SeqView<T> dx;               // gradient of the layer's input, added to (data null: not wanted)
  const T* keep = nullptr;     // reserve rows [T, B, keep_slots·H]
  const T* h0 = nullptr;       // [B, H] slots of the initial state, or null (zeros)
  const T* c0 = nullptr;
  const T* dhy = nullptr;      // [B, H] gradients of the final state, or null (zeros)
  const T* dcy = nullptr;
  T* dh0 = nullptr;            // [B, H] outputs, or null
  T* dc0 = nullptr;
  // Workspace.
  T *dh = nullptr, *dh_next = nullptr, *dc = nullptr, *dgates = nullptr, *hprev = nullptr, *xcell = nullptr, *rows = nullptr;
  int row_width = 0;           // elements of one scratch row
};

// The direction's view of a layer: steps in processing order, a row's previous step.
struct Walk {
  bool reverse;
  int steps;
  const std::int32_t* lengths;
  int length(int b) const { return lengths != nullptr ? lengths[b] : steps; }
  int time(int s) const { return reverse ? steps - 1 - s : s; }
  // The step before t in this direction for row b, or -1 when t is the row's first.
  int previous(int t, int b) const { return reverse ? (t + 1 < length(b) ? t + 1 : -1) : t - 1; }
};

template <class T>
class BackwardDirection {
 public:
  BackwardDirection(const PlanImpl& p, const DirectionGrad<T>& g)
      : p_(p), g_(g), lp_(p.layers[g.layer]), ls_(p.stack.layers[g.layer]), H_(lp_.hidden), I_(lp_.input_size),
        B_(g.batch), slots_(keep_slots(lp_) * lp_.hidden), gw_((lp_.gates + 1) * lp_.hidden),
        walk_{g.dir == 1, g.steps, g.lengths}, wm_(wrapper_masks(p, g.layer, g.dir, g.run)) {}

  void run() {
    gather_step_inputs();
    start_state_gradients();
    for (int s = g_.steps - 1; s >= 0; --s) step(walk_.time(s));
    if (g_.dh0 != nullptr) std::memcpy(g_.dh0, g_.dh, sizeof(T) * B_ * H_);
    if (g_.dc0 != nullptr) std::memcpy(g_.dc0, g_.dc, sizeof(T) * B_ * H_);
    weight_gradients();
    if (g_.dx.data != nullptr) input_gradients();
  }

 private:
  std::int64_t at(int t, int b) const { return static_cast<std::int64_t>(t) * B_ + b; }
  const T* keep(int t, int b) const { return g_.keep + at(t, b) * slots_; }
  T* scratch(int k) const { return g_.rows + static_cast<std::int64_t>(k) * g_.row_width; }
  bool active(int t, int b) const { return t < walk_.length(b); }

  // The state a step read, recomputed exactly as the forward made it: the previous step's kept
  // cell state with every state mask applied, or the initial state.
  void state_before(int t, int b, int slot, const Mask* masks, const T* initial, T* out) const {
    const int tp = walk_.previous(t, b);
    if (tp < 0) {
      if (initial != nullptr) std::memcpy(out, initial + static_cast<std::int64_t>(b) * H_, sizeof(T) * H_);
      else std::memset(out, 0, sizeof(T) * H_);
      return;
    }
    std::memcpy(out, keep(tp, b) + static_cast<std::int64_t>(slot) * H_, sizeof(T) * H_);
    for (int w = 0; w < wm_.count; ++w) multiply_by_mask(masks[w], g_.run, tp, b, out, H_);
  }

  // The cell input after input dropout and the state each step read; zeros for steps past a row's length.
  void gather_step_inputs() {
    for (int t = 0; t < g_.steps; ++t)
      for (int b = 0; b < B_; ++b) {
        T* xc = g_.xcell + at(t, b) * I_;
        T* hp = g_.hprev + at(t, b) * H_;
        std::memset(g_.dgates + at(t, b) * gw_, 0, sizeof(T) * gw_);
        if (!active(t, b)) {
          std::memset(xc, 0, sizeof(T) * I_);
          std::memset(hp, 0, sizeof(T) * H_);
          continue;
        }
        std::memcpy(xc, g_.x.row(t, b), sizeof(T) * I_);
        for (int w = wm_.count - 1; w >= 0; --w) multiply_by_mask(wm_.input[w], g_.run, t, b, xc, I_);
        state_before(t, b, keep_slots(lp_) - 1, wm_.state_h, g_.h0, hp);
      }
  }

  void start_state_gradients() {
    const std::size_t bytes = sizeof(T) * B_ * H_;
    if (g_.dhy != nullptr) std::memcpy(g_.dh, g_.dhy, bytes); else std::memset(g_.dh, 0, bytes);
    if (g_.dcy != nullptr) std::memcpy(g_.dc, g_.dcy, bytes); else std::memset(g_.dc, 0, bytes);
  }

  // The gradient reaching the cell's output h at (t, b): through the state masks from the next
  // step, and from y through the output wrappers (outermost first); residual wrappers pass the
  // gradient on to their input as well.
  void output_gradient(int t, int b, T* dh_cell) const {
    std::memcpy(dh_cell, g_.dh + static_cast<std::int64_t>(b) * H_, sizeof(T) * H_);
    for (int w = 0; w < wm_.count; ++w) multiply_by_mask(wm_.state_h[w], g_.run, t, b, dh_cell, H_);
    if (g_.dy.data == nullptr) return;
    T* dout = scratch(1);
    std::memcpy(dout, g_.dy.row(t, b), sizeof(T) * H_);
    for (int w = wm_.count - 1; w >= 0; --w) {
      if (ls_.wrappers[w].kind == WrapperKind::dropout) {
        multiply_by_mask(wm_.output[w], g_.run, t, b, dout, H_);
      } else if (g_.dx.data != nullptr) {  // residual (add): its input is the layer input after outer input masks
        T* dres = scratch(2);
        std::memcpy(dres, dout, sizeof(T) * H_);
        for (int v = wm_.count - 1; v > w; --v) multiply_by_mask(wm_.input[v], g_.run, t, b, dres, I_);
        axpy(g_.dx.row(t, b), T(1), dres, I_);
      }
    }
    for (int u = 0; u < H_; ++u) dh_cell[u] += dout[u];
  }

  // Pre-activation gradients of one row into dgates (input side G·H, then GRU reset-after's
  // recurrent n part), the part of dh_prev that bypasses the recurrent weights, and dc_prev.
  void cell_backward(int t, int b, const T* dh_cell, T* dgr, T* dh_direct) {
    const T* k = keep(t, b);
    const T* hp = g_.hprev + at(t, b) * H_;
    const int H = H_;
    switch (lp_.mode) {
      case Mode::lstm: {
        T* dc = g_.dc + static_cast<std::int64_t>(b) * H;
        T* c_prev = scratch(3);
        T* dc_cell = scratch(4);
        state_before(t, b, 4, wm_.state_c, g_.c0, c_prev);
        std::memcpy(dc_cell, dc, sizeof(T) * H);
        for (int w = 0; w < wm_.count; ++w) multiply_by_mask(wm_.state_c[w], g_.run, t, b, dc_cell, H);
        for (int u = 0; u < H; ++u) {
          const T i = k[u], f = k[H + u], g = k[2 * H + u], o = k[3 * H + u], tc = std::tanh(k[4 * H + u]);
          const T dct = dc_cell[u] + dh_cell[u] * o * (T(1) - tc * tc);
          dgr[u] = dct * g * i * (T(1) - i);
          dgr[H + u] = dct * c_prev[u] * f * (T(1) - f);
          dgr[2 * H + u] = dct * i * (T(1) - g * g);
          dgr[3 * H + u] = dh_cell[u] * tc * o * (T(1) - o);
          dc[u] = dct * f;
          dh_direct[u] = T(0);
        }
        break;
      }
      case Mode::gru: {
        const bool after = lp_.gru_variant == GruVariant::reset_after;
        for (int u = 0; u < H; ++u) {
          const T r = k[u], z = k[H + u], n = k[2 * H + u];
          const T dan = dh_cell[u] * (T(1) - z) * (T(1) - n * n);
          dgr[H + u] = dh_cell[u] * (hp[u] - n) * z * (T(1) - z);
          dgr[2 * H + u] = dan;
          dh_direct[u] = dh_cell[u] * z;
          if (after) {
            dgr[u] = dan * k[3 * H + u] * r * (T(1) - r);
            dgr[3 * H + u] = dan * r;  // gradient of R_n h + bR_n
          }
        }
        if (!after) {  // n saw R_n (r ⊙ h): its gradient reaches r and h through R_n
          T* d_rh = scratch(3);
          std::memset(d_rh, 0, sizeof(T) * H);
          for (int u = 0; u < H; ++u) axpy(d_rh, dgr[2 * H + u], g_.w.R[2] + static_cast<std::int64_t>(u) * H, H);
          for (int u = 0; u < H; ++u) {
            const T r = k[u];
            dgr[u] = d_rh[u] * hp[u] * r * (T(1) - r);
            dh_direct[u] += d_rh[u] * r;
          }
        }
        break;
      }
      case Mode::rnn_tanh:
      case Mode::rnn_relu:
        for (int u = 0; u < H; ++u) {
          const T h = k[u];
          const T slope = lp_.mode == Mode::rnn_tanh ? T(1) - h * h : (h > T(0) ? T(1) : T(0));
          dgr[u] = dh_cell[u] * slope;
          dh_direct[u] = T(0);
        }
        break;
    }
  }

  // Column of dgates that multiplies R_g (GRU reset-after: n's own; reset-before: n goes through
  // cell_backward's d(r ⊙ h) instead, -1).
  int recurrent_column(int g) const {
    if (lp_.mode != Mode::gru || g != 2) return g;
    return lp_.gru_variant == GruVariant::reset_after ? 3 : -1;
  }

  // One step t, all rows: cell gradients, then dh_prev = direct part + Σ_g R_gᵀ · dpre_g.
  void step(int t) {
    T* dh_cell = scratch(0);
    for (int b = 0; b < B_; ++b) {
      T* dh_next = g_.dh_next + static_cast<std::int64_t>(b) * H_;
      if (!active(t, b)) {  // the state passed this step unchanged
        std::memcpy(dh_next, g_.dh + static_cast<std::int64_t>(b) * H_, sizeof(T) * H_);
        continue;
      }
      output_gradient(t, b, dh_cell);
      cell_backward(t, b, dh_cell, g_.dgates + at(t, b) * gw_, dh_next);
    }
    for (int g = 0; g < lp_.gates; ++g) {
      const int col = recurrent_column(g);
      if (col < 0) continue;
      for (int u = 0; u < H_; ++u) {
        const T* r_row = g_.w.R[g] + static_cast<std::int64_t>(u) * H_;
        for (int b = 0; b < B_; ++b)
          if (active(t, b))
            axpy(g_.dh_next + static_cast<std::int64_t>(b) * H_, g_.dgates[at(t, b) * gw_ + col * H_ + u], r_row, H_);
      }
    }
    T* swap = g_.dh;
    g_.dh = g_.dh_next;
    g_.dh_next = swap;
  }

  // Σ over every (step, row), ascending: dW_g += dpre_g ⊗ x_cell, dR_g += dpre_rec_g ⊗ h_prev,
  // dbW_g += dpre_g, dbR_g += dpre_rec_g. Rows past a length hold zeros.
  void weight_gradients() {
    if (g_.dw.R[0] == nullptr) return;
    const std::int64_t rows = static_cast<std::int64_t>(g_.steps) * B_;
    const bool reset_before = lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_before;
    for (int g = 0; g < lp_.gates; ++g)
      for (int u = 0; u < H_; ++u)
        for (std::int64_t r = 0; r < rows; ++r) {
          const T d = g_.dgates[r * gw_ + g * H_ + u];
          if (g_.dw.W[g] != nullptr) axpy(g_.dw.W[g] + static_cast<std::int64_t>(u) * I_, d, g_.xcell + r * I_, I_);
          g_.dw.bW[g][u] += d;
        }
    for (int g = 0; g < lp_.gates; ++g) {
      if (reset_before && g == 2) {  // R_n multiplied r ⊙ h_prev: turn h_prev into it (r, z are done)
        for (std::int64_t r = 0; r < rows; ++r)
          for (int u = 0; u < H_; ++u) g_.hprev[r * H_ + u] *= g_.keep[r * slots_ + u];
      }
      const int col = reset_before && g == 2 ? 2 : recurrent_column(g);
      for (int u = 0; u < H_; ++u)
        for (std::int64_t r = 0; r < rows; ++r) {
          const T d = g_.dgates[r * gw_ + col * H_ + u];
          axpy(g_.dw.R[g] + static_cast<std::int64_t>(u) * H_, d, g_.hprev + r * H_, H_);
          g_.dw.bR[g][u] += d;
        }
    }
  }

  // dx += (Σ_g W_gᵀ dpre_g) ⊙ the input masks, computed into xcell (no longer needed).
  void input_gradients() {
    const std::int64_t rows = static_cast<std::int64_t>(g_.steps) * B_;
    std::memset(g_.xcell, 0, sizeof(T) * rows * I_);
    for (int g = 0; g < lp_.gates; ++g)
      for (int u = 0; u < H_; ++u) {
        for (std::int64_t r = 0; r < rows; ++r) {
          const T d = g_.dgates[r * gw_ + g * H_ + u];
          T* dxc = g_.xcell + r * I_;
          if (g_.w.W[g] != nullptr) axpy(dxc, d, g_.w.W[g] + static_cast<std::int64_t>(u) * I_, I_);
          else dxc[u] += d;  // skip input: every gate adds x itself
        }
      }
    for (int t = 0; t < g_.steps; ++t)
      for (int b = 0; b < B_; ++b) {
        if (!active(t, b)) continue;
        T* dxc = g_.xcell + at(t, b) * I_;
        for (int w = wm_.count - 1; w >= 0; --w) multiply_by_mask(wm_.input[w], g_.run, t, b, dxc, I_);
        axpy(g_.dx.row(t, b), T(1), dxc, I_);
      }
  }

  const PlanImpl& p_;
  DirectionGrad<T> g_;
  const LayerPlan& lp_;
  const LayerSpec& ls_;
  const int H_, I_, B_, slots_, gw_;
  const Walk walk_;
  const WrapperMasks wm_;
};

template <class T>
T* at_bytes(void* base, std::size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(base) + offset);
}

template <class T>
void backward_all(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const BackwardArgs& a) {
  const StackSpec& st = p.stack;
  const ForwardArgs& f = a.forward;
  const TrainLayout& tr = p.train;
  const int B = f.batch, steps = f.seq_len, L = st.num_layers;
  const RunDropout run = run_dropout(p, f);
  auto* reserve = static_cast<unsigned char*>(f.reserve);
  const T* canonical = reinterpret_cast<const T*>(packed + tr.canonical);
  T* dweights = static_cast<T*>(a.dweights);
  const std::size_t state_bytes = static_cast<std::size_t>(state_elements(st, B)) * sizeof(T);
  if (a.dc0 != nullptr) std::memset(a.dc0, 0, state_bytes);  // non-LSTM blocks stay zero
  if (a.dx != nullptr) std::memset(a.dx, 0, sizeof(T) * steps * B * st.input_size);

  int cur = 0;  // dlayer[cur]: gradient of the current layer's output (inner layers)
  for (int l = L - 1; l >= 0; --l) {
    const LayerPlan& lp = p.layers[l];
    const std::int64_t out_w = static_cast<std::int64_t>(lp.dirs) * lp.hidden, in_w = lp.input_size;
    SeqView<const T> dy;
    if (l == L - 1) {
      if (a.dy != nullptr) {
        const SeqView<T> v = caller_view(static_cast<T*>(const_cast<void*>(a.dy)), f, out_w);
        dy = {v.data, v.st, v.sb};
      }
    } else {
      dy = {at_bytes<T>(ws, tr.dlayer[cur]), B * out_w, out_w};
    }
    SeqView<T> dx;
    if (l > 0) {
      dx = workspace_view(at_bytes<T>(ws, tr.dlayer[cur ^ 1]), B, in_w);
      std::memset(dx.data, 0, sizeof(T) * steps * B * in_w);
    } else if (a.dx != nullptr) {
      dx = caller_view(static_cast<T*>(a.dx), f, in_w);
    }
    SeqView<const T> x;
    if (l == 0) {
      const SeqView<T> v = caller_view(static_cast<T*>(const_cast<void*>(f.x)), f, in_w);
      x = {v.data, v.st, v.sb};
    } else {
      x = {at_bytes<T>(reserve, tr.layer_out[l - 1]), B * in_w, in_w};
    }
    for (int d = 0; d < lp.dirs; ++d) {
      const std::size_t slot = static_cast<std::size_t>(state_offset(st, B, l, d)) * sizeof(T);
      auto state = [&](const void* base) -> const T* {
        return base == nullptr ? nullptr : reinterpret_cast<const T*>(static_cast<const unsigned char*>(base) + slot);
      };
      auto state_out = [&](void* base) -> T* { return base == nullptr ? nullptr : at_bytes<T>(base, slot); };
      const bool lstm = lp.mode == Mode::lstm;
      DirectionGrad<T> g;
      g.layer = l;
      g.dir = d;
      g.batch = B;
      g.steps = steps;
      g.lengths = f.seq_lengths;
      g.run = run;
      g.w = cell_params(p, l, d, canonical);
      if (dweights != nullptr) g.dw = cell_params(p, l, d, dweights);
      g.x = x;
      g.dy = dy;
      if (dy.data != nullptr) g.dy.data = dy.data + d * lp.hidden;
      g.dx = dx;
      g.keep = at_bytes<T>(reserve, tr.keep[l][d]);
      g.h0 = state(f.h0);
      g.c0 = lstm ? state(f.c0) : nullptr;
      g.dhy = state(a.dhy);
      g.dcy = lstm ? state(a.dcy) : nullptr;
      g.dh0 = state_out(a.dh0);
      g.dc0 = lstm ? state_out(a.dc0) : nullptr;
      g.dh = at_bytes<T>(ws, tr.dh[0]);
      g.dh_next = at_bytes<T>(ws, tr.dh[1]);
      g.dc = at_bytes<T>(ws, tr.dc);
      g.dgates = at_bytes<T>(ws, tr.dgates);
      g.hprev = at_bytes<T>(ws, tr.hprev);
      g.xcell = at_bytes<T>(ws, tr.xcell);
      g.rows = at_bytes<T>(ws, tr.brows);
      g.row_width = p.max_width;
      BackwardDirection<T>(p, g).run();
    }
    // The layer below produced this layer's input; its inter-layer mask scaled it.
    if (l > 0) apply_inter_layer_dropout(p, run, l - 1, reinterpret_cast<unsigned char*>(dx.data), steps, B, ws + tr.brows);
    cur ^= 1;
  }
}

}  // namespace

Status train_forward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a,
                     const RunDropout& run) {
  auto* reserve = static_cast<unsigned char*>(a.reserve);
  const ReserveHeader header = describe_run(p, a, run);
  std::memcpy(reserve, &header, sizeof header);
  const TrainLayout& tr = p.train;
  for (int l = 0; l < p.stack.num_layers; ++l) {
    for (int d = 0; d < p.layers[l].dirs; ++d) {
      ReferenceBuffers buf;
      buf.h[0] = ws + tr.h[d][0];
      buf.h[1] = ws + tr.h[d][1];
      buf.c = ws + tr.c[d];
      buf.rows = ws + tr.rows + static_cast<std::size_t>(d) * tr.rows_stride;
      reference_run_direction(p, l, d, direction_io(p, a, ws, l, d, run, reserve), packed + tr.canonical, buf);
    }
    if (l + 1 < p.stack.num_layers)
      apply_inter_layer_dropout(p, run, l, reserve + tr.layer_out[l], a.seq_len, a.batch, ws + tr.rows);
  }
  return Status::ok;
}

Status check_reserve(const PlanImpl& p, const ForwardArgs& a) {
  RNNCORE_ENSURE(a.reserve != nullptr, Status::null_pointer, "backward: forward.reserve is null (run a training forward first)");
  ReserveHeader have;
  std::memcpy(&have, a.reserve, sizeof have);
  RNNCORE_ENSURE(have.magic == kReserveMagic && have.fingerprint == p.fingerprint, Status::weights_not_packed,
                 "backward: the reserve was not filled by a training forward of this plan");
  const ReserveHeader want = describe_run(p, a, run_dropout(p, a));
  RNNCORE_ENSURE(have.batch == want.batch && have.seq_len == want.seq_len && have.layout == want.layout, Status::invalid_size,
                 "backward: the reserve holds a run of batch %d, seq_len %d, layout %d; backward was given %d, %d, %d",
                 have.batch, have.seq_len, have.layout, want.batch, want.seq_len, want.layout);
  RNNCORE_ENSURE(have.dropout_on == want.dropout_on && have.seed == want.seed && have.step == want.step &&
                     have.time_offset == want.time_offset,
                 Status::invalid_size,
                 "backward: the dropout of the reserve's run (on %d, seed %llu, step %u, time offset %u) differs from "
                 "backward's (on %d, seed %llu, step %u, time offset %u)",
                 have.dropout_on, static_cast<unsigned long long>(have.seed), have.step, have.time_offset, want.dropout_on,
                 static_cast<unsigned long long>(want.seed), want.step, want.time_offset);
  RNNCORE_ENSURE(have.rows_hash == want.rows_hash, Status::bad_length,
                 "backward: seq_lengths or row_ids differ from those of the training forward that filled the reserve");
  return Status::ok;
}

Status train_backward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const BackwardArgs& a) {
  const std::size_t es = dtype_size(p.stack.dtype);
  if (a.dweights != nullptr && !a.accumulate)
    std::memset(a.dweights, 0, static_cast<std::size_t>(param_count(p.stack)) * es);
  if (a.forward.batch == 0) return Status::ok;
  RNNCORE_RETURN_IF_ERROR(check_reserve(p, a.forward));
  if (p.stack.dtype == DType::f64)
    backward_all<double>(p, packed, ws, a);
  else
    backward_all<float>(p, packed, ws, a);
  return Status::ok;
}

}  // namespace detail
}  // namespace rnncore

// Training (docs/design.md §10.1): the forward that keeps what backward needs, and backward through time.
//
// The training forward writes, per row and step, the gate activations and the new cell state into
// the reserve (keep_slots), and inner-layer outputs after inter-layer dropout: on the reference
// backend its cell loop (src/reference.cpp) does, on the SIMD backend BatchedForward. Backward
// (BackwardDirection) regenerates every dropout mask from the mask function (never stored), walks
// each direction's steps in reverse for the recurrent gradients, then forms the weight and input
// gradients as products over all (step, row): plain loops on the reference backend, f32_matmul
// (simd/train_impl.hpp) on the SIMD one, whose cell gradients are kernels too and whose threads
// split a step's rows where nothing couples them (step_rows). Every sum has a fixed order: the
// result does not depend on threads or on anything but the inputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "src/internal/canonical_params.hpp"
#include "src/shared/cell_grad.hpp"
#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/spec_internal.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/thread_pool.hpp"
#include "src/shared/half.hpp"

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
  if (a.resets != nullptr)  // where each (step, row) was reset; nothing for a run without resets
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(a.seq_len) * a.batch; ++i)
      mix(a.resets[i] != 0 ? 1u + static_cast<std::uint32_t>(i) : 0u);
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

// C (+)= A · B (the shapes of simd::MatmulArgs, over rows [0, m)): the plan's SIMD kernel for f32
// when it has one, else plain loops (f64, the reference backend) summing k in increasing order.
template <class T>
struct Matmul {
  const T* a = nullptr;
  std::int64_t a_m = 0, a_k = 0;
  const T* b = nullptr;
  std::int64_t ldb = 0;
  T* c = nullptr;
  std::int64_t ldc = 0;
  std::int64_t m = 0;
  int n = 0, k = 0;
  bool accumulate = false;
  T* scratch = nullptr;         // f32 SIMD: simd::kMatmulScratchFloats for packing
  bool wide_scratch = false;    // f32 SIMD: scratch holds kMatmulWideScratchFloats a thread
  const T* b_packed = nullptr;  // f32 SIMD: B packed by pack_b (the plain loops read b)
  bool descending = false;      // f32 SIMD: simd::MatmulArgs::descending
  bool bf16 = false;            // f32 SIMD: simd::MatmulArgs::bf16
};

// The plan's threads for the products; each thread packs into its own kMatmulScratchFloats (or
// kMatmulWideScratchFloats: MatmulArgs::wide_scratch).
struct Threads {
  ThreadPool* pool = nullptr;
  int count = 1;
};

// A step's rows go to the plan's threads (forward and backward) when each gets at least this many.
constexpr int kMinStepRowsPerThread = 8;

Threads plan_threads(const PlanImpl& p) {
  Threads th;
  if (p.ops()->thread_pool && p.options.threads > 1) {
    th.pool = p.options.thread_pool;
    th.count = p.options.threads;
  }
  return th;
}

// A product of too few rows to share out (fewer than 16 a thread) against a packed B of at least
// this many floats (512 KiB: R at H ≈ 180 and up) shares its columns out over the threads; below,
// waking them costs about what the product does.
constexpr std::int64_t kMinColumnSplitFloats = std::int64_t{128} << 10;

// Whether a product of `rows` rows against a K × N B goes to the threads by columns: too few rows to
// share out, enough columns to pay for waking the threads.
bool by_columns(std::int64_t rows, std::int64_t k, std::int64_t n, const Threads& th) {
  return th.count > 1 && rows >= 1 && rows < 16 * th.count && k * n >= kMinColumnSplitFloats;
}

// fn(block_begin, block_end) over contiguous shares of `blocks` column blocks, one a thread (the
// f16 / bf16 stored panels' products, whose blocks are the inference gemm's); on the calling thread
// alone with one thread.
template <class Fn>
void over_column_blocks(const Threads& th, int blocks, const Fn& fn) {
  const int threads = std::min(th.count, blocks);
  if (threads <= 1) {
    fn(0, blocks);
    return;
  }
  struct Job {
    const Fn* fn;
    int blocks, threads;
  } job{&fn, blocks, threads};
  pool_run(th.pool, threads, [](void* context, int index) {
    const Job& j = *static_cast<const Job*>(context);
    (*j.fn)(j.blocks * index / j.threads, j.blocks * (index + 1) / j.threads);
  }, &job);
}

// The kernel over contiguous shares of the rows, or, for a few rows (the per-step products of a
// batch under 16 a thread), over shares of the columns (MatmulArgs::col_begin / col_end). The split
// cannot change a result: each element of C is one thread's, summed in the same order whatever its
// share.
void matmul_threaded(const simd::F32Kernels* kernels, const simd::MatmulArgs& args, const Threads& th) {
  const std::int32_t rows = args.row_end - args.row_begin;
  const bool columns = args.b_packed != nullptr && by_columns(rows, args.k, args.n, th);
  if (th.count <= 1 || (rows < 16 * th.count && !columns)) {
    kernels->matmul(args);
    return;
  }
  struct Job {
    const simd::F32Kernels* kernels;
    simd::MatmulArgs args;
    int threads;
    bool by_columns;
  } job{kernels, args, th.count, columns};
  pool_run(th.pool, th.count, [](void* context, int index) {
    const Job& j = *static_cast<const Job*>(context);
    simd::MatmulArgs a = j.args;
    if (j.by_columns) {
      const std::int64_t n = a.n;
      a.col_begin = static_cast<std::int32_t>(n * index / j.threads);
      a.col_end = index + 1 == j.threads ? INT32_MAX : static_cast<std::int32_t>(n * (index + 1) / j.threads);
    } else {
      const std::int64_t n = a.row_end - a.row_begin;
      a.row_end = a.row_begin + static_cast<std::int32_t>(n * (index + 1) / j.threads);
      a.row_begin = a.row_begin + static_cast<std::int32_t>(n * index / j.threads);
    }
    if (a.scratch != nullptr) a.scratch += index * (a.wide_scratch ? simd::kMatmulWideScratchFloats : simd::kMatmulScratchFloats);
    j.kernels->matmul(a);
  }, &job);
}

template <class T>
void matmul(const simd::F32Kernels* kernels, const Matmul<T>& g, const Threads& th = Threads()) {
  if constexpr (std::is_same<T, float>::value) {
    if (kernels != nullptr) {
      simd::MatmulArgs a;
      a.a = g.a;
      a.a_m = g.a_m;
      a.a_k = g.a_k;
      a.b = g.b;
      a.ldb = g.ldb;
      a.c = g.c;
      a.ldc = g.ldc;
      a.n = g.n;
      a.k = g.k;
      a.row_begin = 0;
      a.row_end = static_cast<std::int32_t>(g.m);
      a.accumulate = g.accumulate;
      a.scratch = g.scratch;
      a.b_packed = g.b_packed;
      a.descending = g.descending;
      a.wide_scratch = g.wide_scratch;
      a.bf16 = g.bf16;
      matmul_threaded(kernels, a, th);
      return;
    }
  }
  for (std::int64_t i = 0; i < g.m; ++i) {
    T* c = g.c + i * g.ldc;
    if (!g.accumulate) std::memset(c, 0, sizeof(T) * g.n);
    for (int p = 0; p < g.k; ++p) axpy(c, g.a[i * g.a_m + p * g.a_k], g.b + p * g.ldb, g.n);
  }
}

// Everything backward of one (layer, direction) reads and writes.
template <class T>
struct DirectionGrad {
  int layer = 0, dir = 0, batch = 0, steps = 0;
  const std::int32_t* lengths = nullptr;
  Resets resets;               // per-step state resets of the run (none: empty)
  RunDropout run;
  CellParams<const T> w;       // the weights
  CellParams<T> dw;            // their gradients (null pointers: not wanted)
  bool dw_fresh = false;       // dw's W and R blocks hold no values yet: their first product writes them
  SeqView<const T> x;          // the layer's input
  SeqView<const T> dy;         // gradient of this direction's output columns (data null: zero)
  SeqView<T> dx;               // gradient of the layer's input, added to (data null: not wanted)
  const T* keep = nullptr;     // reserve rows [T, B, keep_width]
  const T* h0 = nullptr;       // [B, O] slots of the initial state, or null (zeros); c0 [B, H]
  const T* c0 = nullptr;
  const T* dhy = nullptr;      // [B, O] gradients of the final state, or null (zeros); dcy [B, H]
  const T* dcy = nullptr;
  T* dh0 = nullptr;            // [B, O] outputs, or null; dc0 [B, H]
  T* dc0 = nullptr;
  // Workspace.
  T *dh = nullptr, *dh_next = nullptr, *dc = nullptr, *dgates = nullptr, *hprev = nullptr, *xcell = nullptr, *rows = nullptr;
  T* thread_rows = nullptr;    // SIMD, several threads: kScratchRows + 1 rows a thread
  int row_width = 0;           // elements of one scratch row
  const simd::F32Kernels* kernels = nullptr;  // SIMD backend: the matmul kernel
  T* pack = nullptr;                          // and its scratch (per thread)
  bool wide_pack = false;                     // pack holds kMatmulWideScratchFloats a thread (else kMatmulScratchFloats)
  T* r_packed = nullptr;                      // and R (and W_proj) packed for the per-step products
  const void* rt_panel = nullptr;             // f16 / bf16 weights: Rᵀ's stored panel for dh (or null)
  const void* wt_panel = nullptr;             // bf16 panels: Wᵀ's stored panel for dx (or null)
  bool bf16_products = false;                 // bf16 panels: the weight gradients by bf16 products
  Threads threads;
};

// The direction's view of a layer: steps in processing order, a row's previous step.
struct Walk {
  bool reverse;
  int steps;
  const std::int32_t* lengths;
  Resets resets;  // unidirectional runs only
  int length(int b) const { return lengths != nullptr ? lengths[b] : steps; }
  int time(int s) const { return reverse ? steps - 1 - s : s; }
  // The step before t in this direction for row b, or -1 when t is the row's first or a reset
  // started it again from the initial state.
  int previous(int t, int b) const {
    if (reverse) return t + 1 < length(b) ? t + 1 : -1;
    return resets.at(t, b) ? -1 : t - 1;
  }
};

template <class T>
class BackwardDirection {
 public:
  BackwardDirection(const PlanImpl& p, const DirectionGrad<T>& g)
      : p_(p), g_(g), lp_(p.layers[g.layer]), ls_(p.stack.layers[g.layer]), H_(lp_.hidden), O_(lp_.out),
        I_(lp_.input_size), B_(g.batch), slots_(keep_width(lp_)), gw_((lp_.gates + 1) * lp_.hidden),
        walk_{g.dir == 1, g.steps, g.lengths, g.resets}, wm_(wrapper_masks(p, g.layer, g.dir, g.run)),
        plain_(g.kernels != nullptr && wm_.count == 0 && g.lengths == nullptr),
        x_in_place_(plain_ && dense(g.x)), dx_in_place_(plain_ && dense(g.dx) && g.w.W[0] != nullptr),
        h_in_place_(plain_ && g.resets.r == nullptr && !lp_.extensions &&
                    !(lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_before)) {}

  void run() {
    pack_recurrent_weights();
    gather_step_inputs();
    start_state_gradients();
    if (g_.resets.r != nullptr) {  // every reset adds its state gradient to the initial state's
      if (g_.dh0 != nullptr) std::memset(g_.dh0, 0, sizeof(T) * B_ * O_);
      if (g_.dc0 != nullptr) std::memset(g_.dc0, 0, sizeof(T) * B_ * H_);
    }
    for (int s = g_.steps - 1; s >= 0; --s) step(walk_.time(s));
    if (g_.resets.r != nullptr) {
      if (g_.dh0 != nullptr) axpy(g_.dh0, T(1), g_.dh, B_ * O_);
      if (g_.dc0 != nullptr) axpy(g_.dc0, T(1), g_.dc, B_ * H_);
    } else {
      if (g_.dh0 != nullptr) std::memcpy(g_.dh0, g_.dh, sizeof(T) * B_ * O_);
      if (g_.dc0 != nullptr) std::memcpy(g_.dc0, g_.dc, sizeof(T) * B_ * H_);
    }
    weight_gradients();
    if (lp_.extensions) {
      peephole_gradients();
      projection_gradient();
    }
    if (g_.dx.data != nullptr) input_gradients();
  }

 private:
  std::int64_t at(int t, int b) const { return static_cast<std::int64_t>(t) * B_ + b; }
  const T* keep(int t, int b) const { return g_.keep + at(t, b) * slots_; }
  // Scratch row k of `rows`: kScratchRows + 1 rows of row_width, g_.rows or a worker's own
  // (step_rows); g_.rows continues with [B, H] that every thread shares by rows (shared_rows).
  T* scratch(int k, T* rows) const { return rows + static_cast<std::int64_t>(k) * g_.row_width; }
  T* shared_rows() const { return scratch(kScratchRows + 1, g_.rows); }
  T* worker_rows(int index) const { return g_.thread_rows + static_cast<std::int64_t>(index) * (kScratchRows + 1) * g_.row_width; }
  // v *= mask m at (t, b) (the row after the kScratchRows scratch rows holds the mask row).
  void apply(const Mask& m, int t, int b, T* v, int width, T* rows) const {
    multiply_by_mask_row(g_.kernels, m, g_.run, t, b, v, width, scratch(kScratchRows, rows));
  }
  bool active(int t, int b) const { return t < walk_.length(b); }
  // A view whose rows (t, b) are the consecutive rows of one [T·B, I] matrix.
  template <class V>
  bool dense(const V& v) const {
    return v.data != nullptr && v.sb == I_ && v.st == static_cast<std::int64_t>(B_) * I_;
  }

  // R packed once for the products of every step: R_0 … R_{G−1} together ([G·H, O]), a GRU's as
  // r, z | n (n's gradient column differs); an LSTM's W_proj [P, H] after them.
  void pack_recurrent_weights() {
    if constexpr (std::is_same<T, float>::value) {
      if (g_.kernels == nullptr) return;
      const bool gru = lp_.mode == Mode::gru;
      g_.kernels->pack_b(g_.w.R[0], O_, 1, (gru ? 2 : lp_.gates) * H_, O_, g_.r_packed);
      if (gru) g_.kernels->pack_b(g_.w.R[2], H_, 1, H_, H_, g_.r_packed + simd::packed_b_floats(2 * H_, H_));
      if (g_.w.proj != nullptr) g_.kernels->pack_b(g_.w.proj, H_, 1, O_, H_, packed_proj());
    }
  }
  // R_gate's packed rows (gate 0, or a GRU's n after r and z) and W_proj's after every gate's.
  const T* packed_r(int gate) const {
    return g_.r_packed == nullptr ? nullptr : g_.r_packed + simd::packed_b_floats(static_cast<std::int64_t>(gate) * H_, O_);
  }
  T* packed_proj() const { return g_.r_packed + simd::packed_b_floats(static_cast<std::int64_t>(lp_.gates) * H_, O_); }

  // The state a step read, recomputed exactly as the forward made it: the previous step's kept
  // state (`width` units at `offset` of the reserve row) with every state mask applied, or the
  // initial state.
  void state_before(int t, int b, int offset, int width, const Mask* masks, const T* initial, T* out, T* rows) const {
    const int tp = walk_.previous(t, b);
    if (tp < 0) {
      if (initial != nullptr) std::memcpy(out, initial + static_cast<std::int64_t>(b) * width, sizeof(T) * width);
      else std::memset(out, 0, sizeof(T) * width);
      return;
    }
    std::memcpy(out, keep(tp, b) + offset, sizeof(T) * width);
    for (int w = 0; w < wm_.count; ++w) apply(masks[w], tp, b, out, width, rows);
  }

  // The SIMD backend's threads for a loop over rows: the plan's, where each gets
  // kMinStepRowsPerThread rows or more, else one.
  int row_threads() const {
    const int n = g_.threads.count;
    return g_.kernels != nullptr && n > 1 && B_ >= kMinStepRowsPerThread * n ? n : 1;
  }

  // fn(b0, b1, rows, pack) over contiguous shares [b0, b1) of the rows, one a thread (row_threads),
  // each with scratch rows and matmul scratch of its own (one thread: g_.rows and g_.pack). Rows do
  // not meet in fn: the results are those of one thread whatever the shares.
  template <class Fn>
  void over_row_shares(const Fn& fn) {
    const int threads = row_threads();
    if (threads <= 1) {
      fn(0, B_, g_.rows, g_.pack);
      return;
    }
    struct Job {
      const BackwardDirection* self;
      const Fn* fn;
      int threads;
    } job{this, &fn, threads};
    pool_run(g_.threads.pool, threads, [](void* context, int index) {
      const Job& j = *static_cast<const Job*>(context);
      const int B = j.self->B_;
      (*j.fn)(B * index / j.threads, B * (index + 1) / j.threads, j.self->worker_rows(index),
              j.self->g_.pack + static_cast<std::int64_t>(index) * simd::kMatmulScratchFloats);
    }, &job);
  }

  // The cell input after input dropout and the state each step read; zeros for steps past a row's length.
  // Without masks or lengths the products read x (and the plain cells' h_{t−1}) where they lie
  // instead (x_in_place_, h_in_place_).
  void gather_step_inputs() {
    if (x_in_place_ && h_in_place_) return;
    over_row_shares([this](int b0, int b1, T* rows, T*) {
      for (int b = b0; b < b1; ++b)
        for (int t = 0; t < g_.steps; ++t) {
          T* xc = g_.xcell + at(t, b) * I_;
          T* hp = g_.hprev + at(t, b) * O_;
          if (!active(t, b)) {  // zero rows add nothing to the products over all (step, row)
            std::memset(g_.dgates + at(t, b) * gw_, 0, sizeof(T) * gw_);
            std::memset(xc, 0, sizeof(T) * I_);
            std::memset(hp, 0, sizeof(T) * O_);
            continue;
          }
          if (!x_in_place_) {
            std::memcpy(xc, g_.x.row(t, b), sizeof(T) * I_);
            for (int w = wm_.count - 1; w >= 0; --w) apply(wm_.input[w], t, b, xc, I_, rows);
          }
          if (!h_in_place_) state_before(t, b, keep_h(lp_), O_, wm_.state_h, g_.h0, hp, rows);
        }
    });
  }

  void start_state_gradients() {
    const std::size_t bytes = sizeof(T) * B_ * O_, cell_bytes = sizeof(T) * B_ * H_;
    if (g_.dhy != nullptr) std::memcpy(g_.dh, g_.dhy, bytes); else std::memset(g_.dh, 0, bytes);
    if (g_.dcy != nullptr) std::memcpy(g_.dc, g_.dcy, cell_bytes); else std::memset(g_.dc, 0, cell_bytes);
  }

  // The gradient reaching the cell's output h at (t, b): through the state masks from the next
  // step, and from y through the output wrappers (outermost first); residual wrappers pass the
  // gradient on to their input as well.
  void output_gradient(int t, int b, T* dh_cell, T* rows) const {
    std::memcpy(dh_cell, g_.dh + static_cast<std::int64_t>(b) * O_, sizeof(T) * O_);
    for (int w = 0; w < wm_.count; ++w) apply(wm_.state_h[w], t, b, dh_cell, O_, rows);
    if (g_.dy.data == nullptr) return;
    T* dout = scratch(1, rows);
    std::memcpy(dout, g_.dy.row(t, b), sizeof(T) * O_);
    for (int w = wm_.count - 1; w >= 0; --w) {
      if (ls_.wrappers[w].kind == WrapperKind::dropout) {
        apply(wm_.output[w], t, b, dout, O_, rows);
      } else if (g_.dx.data != nullptr) {  // residual (add): its input is the layer input after outer input masks
        T* dres = scratch(2, rows);
        std::memcpy(dres, dout, sizeof(T) * O_);
        for (int v = wm_.count - 1; v > w; --v) apply(wm_.input[v], t, b, dres, I_, rows);
        axpy(g_.dx.row(t, b), T(1), dres, I_);
      }
    }
    for (int u = 0; u < O_; ++u) dh_cell[u] += dout[u];
  }

  // Pre-activation gradients of one row into dgates (input side G·H, then GRU reset-after's
  // recurrent n part), the part of dh_prev that bypasses the recurrent weights, and dc_prev. The
  // reset-before GRU's r gate waits for reset_before_r (it needs R_nᵀ of every row).
  void cell_backward(int t, int b, const T* dh_cell, T* dgr, T* dh_direct, T* rows) {
    const T* k = keep(t, b);
    const T* hp = g_.hprev + at(t, b) * H_;
    const int H = H_;
    switch (lp_.mode) {
      case Mode::lstm: {
        T* dc = g_.dc + static_cast<std::int64_t>(b) * H;
        if constexpr (std::is_same<T, float>::value) {
          if (g_.kernels != nullptr) {
            lstm_cell_kernel(t, b, dh_cell, dc, dgr, rows);
            std::memset(dh_direct, 0, sizeof(T) * H);
            break;
          }
        }
        T* c_prev = scratch(3, rows);
        T* dc_cell = scratch(4, rows);
        T* tc = scratch(5, rows);
        state_before(t, b, 4 * H, H, wm_.state_c, g_.c0, c_prev, rows);
        std::memcpy(dc_cell, dc, sizeof(T) * H);
        for (int w = 0; w < wm_.count; ++w) apply(wm_.state_c[w], t, b, dc_cell, H, rows);
        tanh_row(k + 4 * H, tc, H);
        for (int u = 0; u < H; ++u) {
          dc[u] = lstm_unit_backward(k[u], k[H + u], k[2 * H + u], k[3 * H + u], tc[u], c_prev[u], dh_cell[u], dc_cell[u],
                                     dgr + u, H);
          dh_direct[u] = T(0);
        }
        break;
      }
      case Mode::gru: {
        const bool after = lp_.gru_variant == GruVariant::reset_after;
        if constexpr (std::is_same<T, float>::value) {
          if (g_.kernels != nullptr) {
            g_.kernels->gru_backward[after ? 1 : 0](k, hp, dh_cell, dh_direct, dgr, H);
            break;
          }
        }
        for (int u = 0; u < H; ++u)
          dh_direct[u] = gru_unit_backward(after, k[u], k[H + u], k[2 * H + u], after ? k[3 * H + u] : T(0), hp[u],
                                           dh_cell[u], dgr + u, H);
        break;
      }
      case Mode::rnn_tanh:
      case Mode::rnn_relu:
        for (int u = 0; u < H; ++u) {
          dgr[u] = rnn_unit_backward(lp_.mode == Mode::rnn_tanh, k[u], dh_cell[u]);
          dh_direct[u] = T(0);
        }
        break;
    }
  }

  // The SIMD backend's LSTM cell: one kernel over the row, reading c_{t−1} from the reserve where
  // no state mask changed it (the gradient at c_t goes through the state masks first).
  void lstm_cell_kernel(int t, int b, const float* dh_cell, float* dc, float* dgr, float* rows) const {
    const int H = H_, tp = walk_.previous(t, b);
    const float* c_prev = scratch(3, rows);
    if (tp >= 0 && wm_.count == 0) c_prev = keep(tp, b) + 4 * H;
    else state_before(t, b, 4 * H, H, wm_.state_c, g_.c0, scratch(3, rows), rows);
    if (wm_.count == 0) {
      g_.kernels->lstm_backward(keep(t, b), c_prev, dh_cell, dc, dgr, H);
      return;
    }
    float* dc_cell = scratch(4, rows);
    std::memcpy(dc_cell, dc, sizeof(float) * H);
    for (int w = 0; w < wm_.count; ++w) apply(wm_.state_c[w], t, b, dc_cell, H, rows);
    g_.kernels->lstm_backward(keep(t, b), c_prev, dh_cell, dc_cell, dgr, H);
    std::memcpy(dc, dc_cell, sizeof(float) * H);
  }

  // Reset-before GRU, rows [b0, b1): n saw R_n (r ⊙ h), so its gradient reaches r and h through R_nᵀ.
  void reset_before_r(int t, int b0, int b1, T* pack) {
    T* d_rh = shared_rows();  // [B, H]
    matmul_rows(t, b0, b1, 2 * H_, H_, 2, d_rh, false, pack);
    for (int b = b0; b < b1; ++b) {
      if (!active(t, b)) continue;
      const T* k = keep(t, b);
      const T* hp = g_.hprev + at(t, b) * H_;
      const T* drh = d_rh + static_cast<std::int64_t>(b) * H_;
      T* dgr = g_.dgates + at(t, b) * gw_;
      T* dh_direct = g_.dh_next + static_cast<std::int64_t>(b) * H_;
      for (int u = 0; u < H_; ++u) dh_direct[u] += gru_reset_before_r(k[u], hp[u], drh[u], dgr + u);
    }
  }

  // out[b0 … b1, ·] (+)= dgates[t, b0 … b1, column…column+k) · R from `gate` on ([k, H], row-major;
  // packed on the SIMD backend), on this thread (`pack`: its matmul scratch), the column blocks in
  // step t's order (simd::StepArgs::descending).
  void matmul_rows(int t, int b0, int b1, int column, int k, int gate, T* out, bool accumulate, T* pack) const {
    Matmul<T> m;
    m.a = g_.dgates + at(t, b0) * gw_ + column;
    m.a_m = gw_;
    m.a_k = 1;
    m.b = g_.w.R[gate];
    m.b_packed = packed_r(gate);
    m.ldb = O_;
    m.c = out + static_cast<std::int64_t>(b0) * O_;
    m.ldc = O_;
    m.m = b1 - b0;
    m.n = O_;
    m.k = k;
    m.accumulate = accumulate;
    m.scratch = pack;
    m.descending = (t & 1) != 0;
    // A batch too small to share its rows out runs its steps on the calling thread (row_threads()
    // is 1): the threads share the product's columns instead.
    matmul(g_.kernels, m, row_threads() == 1 ? g_.threads : Threads());
  }

  void tanh_row(const T* src, T* dst, int n) const {
    if constexpr (std::is_same<T, float>::value) {
      if (g_.kernels != nullptr) {
        std::memcpy(dst, src, sizeof(T) * n);
        g_.kernels->activate(simd::Activation::tanh, dst, n);
        return;
      }
    }
    for (int i = 0; i < n; ++i) dst[i] = std::tanh(src[i]);
  }

  // LSTM with extensions, rows [b0, b1) of step t (TF LSTMCell): the gradient at h through the
  // projection clip into dgates' last block (O units), dm = that · W_proj in one product (without a
  // projection dm is it), then the cell through the peepholes and the cell clip (the peepholes'
  // own gradients: peephole_gradients, after the steps).
  void lstm_ext_rows(int t, int b0, int b1, T* pack, T* rows) {
    T* dh_cell = scratch(0, rows);
    T* dm = shared_rows();  // [B, H]
    for (int b = b0; b < b1; ++b) {
      if (!active(t, b)) continue;
      output_gradient(t, b, dh_cell, rows);
      const T* h_raw = keep(t, b) + keep_h(lp_) + O_;
      T* d = g_.dgates + at(t, b) * gw_ + 4 * H_;
      for (int k = 0; k < O_; ++k) d[k] = clip_passes(h_raw[k], ls_.proj_clip) ? dh_cell[k] : T(0);
      std::memset(g_.dh_next + static_cast<std::int64_t>(b) * O_, 0, sizeof(T) * O_);  // all of dh_prev goes through R
    }
    if (g_.w.proj != nullptr) {
      Matmul<T> m;
      m.a = g_.dgates + at(t, b0) * gw_ + 4 * H_;
      m.a_m = gw_;
      m.a_k = 1;
      m.b = g_.w.proj;
      m.b_packed = g_.r_packed == nullptr ? nullptr : packed_proj();
      m.ldb = H_;
      m.c = dm + static_cast<std::int64_t>(b0) * H_;
      m.ldc = H_;
      m.m = b1 - b0;
      m.n = H_;
      m.k = O_;
      m.scratch = pack;
      matmul(g_.kernels, m, row_threads() == 1 ? g_.threads : Threads());  // few rows: by columns
    } else {
      for (int b = b0; b < b1; ++b)
        std::memcpy(dm + static_cast<std::int64_t>(b) * H_, g_.dgates + at(t, b) * gw_ + 4 * H_, sizeof(T) * H_);
    }
    for (int b = b0; b < b1; ++b)
      if (active(t, b)) lstm_ext_cell(t, b, dm + static_cast<std::int64_t>(b) * H_, rows);
  }

  void lstm_ext_cell(int t, int b, const T* dm, T* rows) {
    const T* k = keep(t, b);
    const int H = H_;
    T* dgr = g_.dgates + at(t, b) * gw_;
    T* dc = g_.dc + static_cast<std::int64_t>(b) * H;
    T* c_prev = scratch(3, rows);
    T* dc_cell = scratch(4, rows);
    T* tc = scratch(5, rows);
    state_before(t, b, 4 * H, H, wm_.state_c, g_.c0, c_prev, rows);
    std::memcpy(dc_cell, dc, sizeof(T) * H);
    for (int w = 0; w < wm_.count; ++w) apply(wm_.state_c[w], t, b, dc_cell, H, rows);
    tanh_row(k + 4 * H, tc, H);
    const CellParams<const T>& w = g_.w;
    for (int u = 0; u < H; ++u) {
      LstmPeepholes<T> peep;
      if (w.peep[0] != nullptr) peep = {w.peep[0][u], w.peep[1][u], w.peep[3][u]};
      dc[u] = lstm_ext_unit_backward(k[u], k[H + u], k[2 * H + u], k[3 * H + u], tc[u], c_prev[u], dm[u], dc_cell[u], peep,
                                     !clip_passes(k[6 * H + u], ls_.cell_clip), dgr + u, H);
    }
  }

  // The peepholes' gradients, Σ over (step, row) in the order the steps ran (from the last; rows
  // upwards): p_i and p_f saw c_{t−1}, p_o the new c.
  void peephole_gradients() {
    if (g_.dw.peep[0] == nullptr) return;
    const int H = H_;
    T* c_prev = scratch(3, g_.rows);
    for (int s = g_.steps - 1; s >= 0; --s) {
      const int t = walk_.time(s);
      for (int b = 0; b < B_; ++b) {
        if (!active(t, b)) continue;
        state_before(t, b, 4 * H, H, wm_.state_c, g_.c0, c_prev, g_.rows);
        const T* k = keep(t, b);
        const T* dgr = g_.dgates + at(t, b) * gw_;
        for (int u = 0; u < H; ++u) {
          g_.dw.peep[0][u] += dgr[u] * c_prev[u];
          g_.dw.peep[1][u] += dgr[H + u] * c_prev[u];
          g_.dw.peep[3][u] += dgr[3 * H + u] * k[4 * H + u];
        }
      }
    }
  }

  // One step t: each share of the rows (over_row_shares) through step_rows; then the resets'
  // gradients, and dh_next becomes dh.
  void step(int t) {
    over_row_shares([this, t](int b0, int b1, T* rows, T* pack) { step_rows(t, b0, b1, pack, rows); });
    if (g_.resets.r != nullptr) reset_gradients(t);
    T* swap = g_.dh;
    g_.dh = g_.dh_next;
    g_.dh_next = swap;
  }

  // Rows [b0, b1) of step t: cell gradients, then dh_next = direct part + Σ_g R_gᵀ · dpre_g for those
  // rows (rows past their length carry dh unchanged: their dgates rows are zero). `pack`: this
  // thread's matmul scratch; `rows`: its scratch rows.
  void step_rows(int t, int b0, int b1, T* pack, T* rows) {
    if (b0 == b1) return;
    const bool gru = lp_.mode == Mode::gru, reset_before = gru && lp_.gru_variant == GruVariant::reset_before;
    if constexpr (std::is_same<T, float>::value) {
      if (g_.kernels != nullptr && wm_.count == 0 && !lp_.extensions && !reset_before) plain_cells(t, b0, b1, pack);
      else cells(t, b0, b1, pack, rows);
      if (stored_dh_fits()) return stored_dh(t, b0, b1, pack);
    } else {
      cells(t, b0, b1, pack, rows);
    }
    // R_0 … R_{G−1} are consecutive in the canonical buffer: one product covers every gate whose
    // gradient column is its own (all but GRU n).
    matmul_rows(t, b0, b1, 0, (gru ? 2 : lp_.gates) * H_, 0, g_.dh_next, true, pack);
    if (gru && !reset_before) matmul_rows(t, b0, b1, 3 * H_, H_, 2, g_.dh_next, true, pack);
  }

  // The cell gradients of rows [b0, b1): through the wrappers, the LSTM's extensions, the
  // reset-before GRU's r.
  void cells(int t, int b0, int b1, T* pack, T* rows) {
    T* dh_cell = scratch(0, rows);
    for (int b = b0; b < b1; ++b) {
      T* dh_next = g_.dh_next + static_cast<std::int64_t>(b) * O_;
      if (!active(t, b)) {  // the state passed this step unchanged
        std::memcpy(dh_next, g_.dh + static_cast<std::int64_t>(b) * O_, sizeof(T) * O_);
        continue;
      }
      if (lp_.extensions) continue;  // lstm_ext_rows below
      output_gradient(t, b, dh_cell, rows);
      cell_backward(t, b, dh_cell, g_.dgates + at(t, b) * gw_, dh_next, rows);
    }
    if (lp_.extensions) lstm_ext_rows(t, b0, b1, pack, rows);
    if (lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_before) reset_before_r(t, b0, b1, pack);
  }

  // The SIMD backend's cells without wrappers, LSTM extensions or the reset-before GRU: each row's
  // kernel reads dh (+ dy) and its c_{t−1} or h_{t−1} where they lie.
  void plain_cells(int t, int b0, int b1, float* pack) {
    const int H = H_;
    const bool gru = lp_.mode == Mode::gru;
    for (int b = b0; b < b1; ++b) {
      float* dh_next = g_.dh_next + static_cast<std::int64_t>(b) * H;
      const float* dh = g_.dh + static_cast<std::int64_t>(b) * H;
      if (!active(t, b)) {  // the state passed this step unchanged
        std::memcpy(dh_next, dh, sizeof(float) * H);
        continue;
      }
      if (g_.dy.data != nullptr) {  // dh_next holds dh + dy until the cell replaces it
        const float* dy = g_.dy.row(t, b);
        for (int u = 0; u < H; ++u) dh_next[u] = dh[u] + dy[u];
        dh = dh_next;
      }
      const float* k = keep(t, b);
      float* dgr = g_.dgates + at(t, b) * gw_;
      if (lp_.mode == Mode::lstm) {
        const int tp = walk_.previous(t, b);
        const float* c_prev = pack;
        if (tp >= 0) c_prev = keep(tp, b) + 4 * H;
        else if (g_.c0 != nullptr) c_prev = g_.c0 + static_cast<std::int64_t>(b) * H;
        else std::memset(pack, 0, sizeof(float) * H);
        g_.kernels->lstm_backward(k, c_prev, dh, g_.dc + static_cast<std::int64_t>(b) * H, dgr, H);
        std::memset(dh_next, 0, sizeof(float) * H);
      } else if (gru) {  // reset-after; dh_direct = dh · z goes where dh was read, unit by unit
        g_.kernels->gru_backward[1](k, h_prev(t, b, pack), dh, dh_next, dgr, H);
      } else {
        for (int u = 0; u < H; ++u) dgr[u] = rnn_unit_backward(lp_.mode == Mode::rnn_tanh, k[u], dh[u]);
        std::memset(dh_next, 0, sizeof(float) * H);
      }
    }
  }

  // Scratch floats of stored_dh: the output row's width Op, K's (f32 and bf16) and a row's in all.
  struct StoredDhSizes {
    std::int64_t Op, Kr, k16, per_row;
  };
  StoredDhSizes stored_dh_sizes() const {
    const std::int64_t K = recurrent_k(lp_), Op = round_up(O_, 4 * p_.vector), Kr = round_up(K, 16), k16 = round_up(K, 32);
    return {Op, Kr, k16, Kr + Op + (p_.simd.weights == simd::Weights::bf16 ? k16 / 2 : 0)};
  }
  // Whether the stored panel takes the product: a row, its output and zeros fit the scratch (else,
  // at H in the tens of thousands, the f32 product on R as stored).
  bool stored_dh_fits() const {
    if (g_.rt_panel == nullptr) return false;
    const StoredDhSizes z = stored_dh_sizes();
    return z.Op + z.per_row <= simd::kMatmulScratchFloats;
  }

  // The inference gemm's arguments for `rows` rows of K against a transposed one-gate panel (4
  // vectors a block: simd_pack_transposed_panel) into c (rows Op floats apart, Op a whole number of
  // blocks), with no bias (`zeros`: Op floats). The caller sets the rows (a, a16).
  static simd::GemmArgs transposed_panel_args(const void* panel, int k, int rows, const float* zeros, float* c,
                                              std::int64_t Op) {
    simd::GemmArgs m;
    m.batch = rows;
    m.k = k;
    m.vectors = 4;
    m.panel = panel;
    m.bias = zeros;
    m.c = c;
    m.c_row_stride = Op;
    m.row_end = rows;
    return m;
  }

  // Runs `m` (transposed_panel_args) with its column blocks shared by `th`; each share then hands
  // every row's units [u0, u1) (of `n`) to store(row, u0, u1, those units of c).
  template <class Store>
  void transposed_panel_product(const simd::GemmArgs& m, simd::Weights w, int n, const Threads& th,
                                const Store& store) const {
    const int block = 4 * p_.vector;
    over_column_blocks(th, static_cast<int>(m.c_row_stride / block), [&](int j0, int j1) {
      simd::GemmArgs share = m;
      share.block_begin = j0;
      share.block_end = j1;
      g_.kernels->gemm[static_cast<int>(w)](share);
      const int u0 = j0 * block, u1 = std::min(j1 * block, n);
      for (int i = 0; i < m.row_end && u1 > u0; ++i) store(i, u0, u1, m.c + i * m.c_row_stride + u0);
    });
  }

  // f16 / bf16 weights: dh_next[b] += dpre[t, b] · R for rows [b0, b1) through Rᵀ's stored panel
  // (the inference's gemm; f32 accumulation), K = recurrent_k rows of R: the gate columns gathered
  // first (a reset-after GRU's r, z and recurrent n), bf16 rounds them to bf16 as the inference
  // does its inputs. `scratch`: simd::kMatmulScratchFloats floats, aligned.
  void stored_dh(int t, int b0, int b1, T* scratch) const {
    if constexpr (std::is_same<T, float>::value) {
      const bool bf16 = p_.simd.weights == simd::Weights::bf16;
      const bool reset_after = lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_after;
      const int K = recurrent_k(lp_);
      const StoredDhSizes z = stored_dh_sizes();
      const std::int64_t Op = z.Op, Kr = z.Kr, k16 = z.k16, per_row = z.per_row;
      const int chunk = static_cast<int>(std::max<std::int64_t>(1, (simd::kMatmulScratchFloats - Op) / per_row));
      float* zeros = scratch;
      std::memset(zeros, 0, sizeof(float) * Op);
      for (int r0 = b0; r0 < b1; r0 += chunk) {
        const int rows = std::min(chunk, b1 - r0);
        float* a = scratch + Op;
        float* c = a + rows * Kr;
        auto* a16 = reinterpret_cast<std::uint16_t*>(c + rows * Op);
        for (int i = 0; i < rows; ++i) {
          const float* src = g_.dgates + at(t, r0 + i) * gw_;
          float* row = a + i * Kr;
          std::memcpy(row, src, sizeof(float) * (reset_after ? 2 * H_ : K));
          if (reset_after) std::memcpy(row + 2 * H_, src + 3 * H_, sizeof(float) * H_);
          if (bf16) {
            std::memset(a16 + i * k16, 0, sizeof(std::uint16_t) * k16);
            g_.kernels->to_bf16(row, a16 + i * k16, K);
          }
        }
        simd::GemmArgs m = transposed_panel_args(g_.rt_panel, K, rows, zeros, c, Op);
        m.a = a;
        m.a_sb = Kr;
        m.a16 = bf16 ? a16 : nullptr;
        m.a16_stride = k16;
        // A step on the calling thread (too few rows to share out): the threads share the blocks,
        // each its columns of c and of dh_next.
        const bool columns = row_threads() == 1 && by_columns(b1 - b0, K, O_, g_.threads);
        transposed_panel_product(m, p_.simd.weights, O_, columns ? g_.threads : Threads(),
                                 [&](int i, int u0, int u1, const float* src) {
                                   axpy(g_.dh_next + static_cast<std::int64_t>(r0 + i) * O_ + u0, 1.0f, src, u1 - u0);
                                 });
      }
    }
  }

  // bf16 panels: dx (or xcell) of the `rows` (step, row) pairs = dpre · W through Wᵀ's stored panel
  // (the inference's gemm, f32 accumulation), dpre's rows rounded to bf16 as stored_dh rounds them;
  // as many rows a call as the products' scratch holds, the plan's threads sharing the column blocks.
  // Added to dx where it lies (dx_in_place_), else written to xcell for the input masks.
  void stored_dx(std::int64_t rows_total) {
    if constexpr (std::is_same<T, float>::value) {
      const int K = lp_.gates * H_, V = p_.vector;
      const std::int64_t Op = round_up(I_, 4 * V), k16 = round_up(K, 32);
      const std::int64_t scratch = static_cast<std::int64_t>(g_.threads.count) *
                                   (g_.wide_pack ? simd::kMatmulWideScratchFloats : simd::kMatmulScratchFloats);
      const int chunk = static_cast<int>(std::max<std::int64_t>(1, (scratch - Op) / (Op + k16 / 2)));
      float* zeros = g_.pack;
      std::memset(zeros, 0, sizeof(float) * Op);
      for (std::int64_t r0 = 0; r0 < rows_total; r0 += chunk) {
        const int rows = static_cast<int>(std::min<std::int64_t>(chunk, rows_total - r0));
        float* c = g_.pack + Op;
        auto* a16 = reinterpret_cast<std::uint16_t*>(c + rows * Op);
        for (int i = 0; i < rows; ++i) {
          g_.kernels->to_bf16(g_.dgates + (r0 + i) * gw_, a16 + i * k16, K);
          if (K % 2 != 0) a16[i * k16 + K] = 0;
        }
        simd::GemmArgs m = transposed_panel_args(g_.wt_panel, K, rows, zeros, c, Op);
        m.a16 = a16;
        m.a16_stride = k16;
        transposed_panel_product(m, simd::Weights::bf16, I_, g_.threads, [&](int i, int u0, int u1, const float* src) {
          if (dx_in_place_) axpy(g_.dx.data + (r0 + i) * I_ + u0, 1.0f, src, u1 - u0);
          else std::memcpy(g_.xcell + (r0 + i) * I_ + u0, src, sizeof(float) * (u1 - u0));
        });
      }
    }
  }

  // h_{t−1} of row b: gathered into hprev, or where it lies (h_in_place_; zeros into `zeros`).
  const float* h_prev(int t, int b, float* zeros) const {
    if (!h_in_place_) return g_.hprev + at(t, b) * H_;
    const int tp = walk_.previous(t, b);
    if (tp >= 0) return keep(tp, b) + keep_h(lp_);
    if (g_.h0 != nullptr) return g_.h0 + static_cast<std::int64_t>(b) * H_;
    std::memset(zeros, 0, sizeof(float) * H_);
    return zeros;
  }

  // A row reset before step t read the initial state: the gradient of the state it read goes to
  // dh0 / dc0, and none flows on into the steps before t.
  void reset_gradients(int t) {
    for (int b = 0; b < B_; ++b) {
      if (!g_.resets.at(t, b) || !active(t, b)) continue;
      const std::int64_t row = static_cast<std::int64_t>(b) * H_, hrow = static_cast<std::int64_t>(b) * O_;
      if (g_.dh0 != nullptr) axpy(g_.dh0 + hrow, T(1), g_.dh_next + hrow, O_);
      std::memset(g_.dh_next + hrow, 0, sizeof(T) * O_);
      if (lp_.mode != Mode::lstm) continue;
      if (g_.dc0 != nullptr) axpy(g_.dc0 + row, T(1), g_.dc + row, H_);
      std::memset(g_.dc + row, 0, sizeof(T) * H_);
    }
  }

  // d(out)[rows_out, n] (+)= Σ over every (step, row) r of dgates[r, column + m] · src[r, :]: a weight
  // gradient (rows past a length hold zeros); layers on bf16 panels round both to bf16.
  // Over (step, row) pairs [r0, r0 + count) only when given: src is then their first row, ldb apart.
  // overwrite: out holds no values yet (dw_fresh), so out = the product.
  void weight_product(int column, int rows_out, const T* src, int n, T* out, bool overwrite, std::int64_t r0 = 0,
                      int count = -1, std::int64_t ldb = 0) const {
    Matmul<T> m;
    m.a = g_.dgates + r0 * gw_ + column;
    m.a_m = 1;
    m.a_k = gw_;
    m.b = src;
    m.ldb = ldb > 0 ? ldb : n;
    m.c = out;
    m.ldc = n;
    m.m = rows_out;
    m.n = n;
    m.k = count >= 0 ? count : g_.steps * B_;
    if (overwrite && m.k == 0) {
      std::memset(out, 0, sizeof(T) * static_cast<std::size_t>(rows_out) * n);
      return;
    }
    m.accumulate = !overwrite;
    m.scratch = g_.pack;
    m.wide_scratch = g_.wide_pack;
    m.bf16 = g_.bf16_products;
    matmul(g_.kernels, m, g_.threads);
  }

  // dW += dpreᵀ · x_cell, dR += dpre_recᵀ · h_prev, dbW += Σ dpre, dbR += Σ dpre_rec.
  void weight_gradients() {
    if (g_.dw.R[0] == nullptr) return;
    const std::int64_t rows = static_cast<std::int64_t>(g_.steps) * B_;
    const int G = lp_.gates, H = H_;
    const bool gru = lp_.mode == Mode::gru, reset_after = gru && lp_.gru_variant == GruVariant::reset_after;
    const bool fresh = g_.dw_fresh;
    if (g_.dw.W[0] != nullptr) weight_product(0, G * H, x_in_place_ ? g_.x.data : g_.xcell, I_, g_.dw.W[0], fresh);
    for (int g = 0; g < G; ++g) {
      bias_gradient(g * H, g_.dw.bW[g], rows);
      bias_gradient((gru && g == 2 && reset_after ? 3 : g) * H, g_.dw.bR[g], rows);
    }
    if (h_in_place_) recurrent_weight_product(0, (gru ? 2 : G) * H, g_.dw.R[0], fresh);
    else weight_product(0, (gru ? 2 : G) * H, g_.hprev, O_, g_.dw.R[0], fresh);
    if (!gru) return;
    if (h_in_place_) return recurrent_weight_product(3 * H, H, g_.dw.R[2], fresh);  // reset-after
    if (!reset_after)  // R_n multiplied r ⊙ h_prev: h_prev becomes that (r and z are done; steps
      // past a row's length keep their zeros: their reserve rows were never written)
      for (int t = 0; t < g_.steps; ++t)
        for (int b = 0; b < B_; ++b) {
          if (!active(t, b)) continue;
          T* hp = g_.hprev + at(t, b) * H;
          const T* r = keep(t, b);
          for (int u = 0; u < H; ++u) hp[u] *= r[u];
        }
    weight_product(reset_after ? 3 * H : 2 * H, H, g_.hprev, H, g_.dw.R[2], fresh);
  }

  // out[0, H) += Σ over every (step, row) r of dgates[r, column…]: a product with A one row of ones
  // (a_k = 0), which sums r in increasing order as adding the rows one by one does (1 · x is exact,
  // so the fused and the plain sums agree) — on the SIMD backend in vectors, not in the baseline
  // ISA's loops of this file.
  void bias_gradient(int column, T* out, std::int64_t rows) const {
    static const T kOne = T(1);
    Matmul<T> m;
    m.a = &kOne;
    m.a_m = 0;
    m.a_k = 0;
    m.b = g_.dgates + column;
    m.ldb = gw_;
    m.c = out;
    m.ldc = H_;
    m.m = 1;
    m.n = H_;
    m.k = static_cast<int>(rows);
    m.accumulate = true;
    m.scratch = g_.pack;
    matmul(g_.kernels, m, g_.threads);
  }

  // dR += dpreᵀ · h_{t−1} read from the reserve: the steps that follow another read its kept h
  // (rows B apart), the first reads h0 (none: zeros, nothing to add). The pairs in increasing order;
  // overwrite (dw_fresh): the first product writes out.
  void recurrent_weight_product(int column, int rows_out, T* out, bool overwrite) {
    if (g_.steps == 0) {
      if (overwrite) std::memset(out, 0, sizeof(T) * static_cast<std::size_t>(rows_out) * O_);
      return;
    }
    const int follow = (g_.steps - 1) * B_;
    const T* kept = g_.keep + keep_h(lp_);
    if (walk_.reverse) {
      weight_product(column, rows_out, kept + static_cast<std::int64_t>(B_) * slots_, O_, out, overwrite, 0, follow, slots_);
      if (g_.h0 != nullptr) weight_product(column, rows_out, g_.h0, O_, out, false, at(g_.steps - 1, 0), B_);
    } else {
      if (g_.h0 != nullptr) weight_product(column, rows_out, g_.h0, O_, out, overwrite, 0, B_);
      weight_product(column, rows_out, kept, O_, out, overwrite && g_.h0 == nullptr, B_, follow, slots_);
    }
  }

  // dW_proj += Σ over every (step, row) of dh̃ᵀ · m (m gathered into hprev, no longer needed; zeros
  // for steps past a row's length, whose reserve rows were never written).
  void projection_gradient() {
    if (g_.dw.proj == nullptr) return;
    for (int t = 0; t < g_.steps; ++t)
      for (int b = 0; b < B_; ++b) {
        T* m = g_.hprev + at(t, b) * H_;
        if (active(t, b)) std::memcpy(m, keep(t, b) + 5 * H_, sizeof(T) * H_);
        else std::memset(m, 0, sizeof(T) * H_);
      }
    weight_product(4 * H_, O_, g_.hprev, H_, g_.dw.proj, false);
  }

  // dx += (Σ_g W_gᵀ dpre_g) ⊙ the input masks, computed into xcell (no longer needed).
  void input_gradients() {
    const std::int64_t rows = static_cast<std::int64_t>(g_.steps) * B_;
    if (g_.wt_panel != nullptr) {
      stored_dx(rows);
      if (dx_in_place_) return;
    } else if (g_.w.W[0] != nullptr) {
      Matmul<T> m;
      m.a = g_.dgates;
      m.a_m = gw_;
      m.a_k = 1;
      m.b = g_.w.W[0];
      m.ldb = I_;
      m.c = dx_in_place_ ? g_.dx.data : g_.xcell;  // no masks: added to dx itself
      m.ldc = I_;
      m.m = rows;
      m.n = I_;
      m.k = lp_.gates * H_;
      m.accumulate = dx_in_place_;
      m.scratch = g_.pack;
      matmul(g_.kernels, m, g_.threads);
      if (dx_in_place_) return;
    } else {  // skip input: every gate added x itself
      for (std::int64_t r = 0; r < rows; ++r)
        for (int u = 0; u < I_; ++u) {
          T s = T(0);
          for (int g = 0; g < lp_.gates; ++g) s += g_.dgates[r * gw_ + g * H_ + u];
          g_.xcell[r * I_ + u] = s;
        }
    }
    over_row_shares([this](int b0, int b1, T* rows, T*) {
      for (int b = b0; b < b1; ++b)
        for (int t = 0; t < g_.steps; ++t) {
          if (!active(t, b)) continue;
          T* dxc = g_.xcell + at(t, b) * I_;
          for (int w = wm_.count - 1; w >= 0; --w) apply(wm_.input[w], t, b, dxc, I_, rows);
          axpy(g_.dx.row(t, b), T(1), dxc, I_);
        }
    });
  }

  const PlanImpl& p_;
  DirectionGrad<T> g_;
  const LayerPlan& lp_;
  const LayerSpec& ls_;
  const int H_, O_, I_, B_, slots_, gw_;
  const Walk walk_;
  const WrapperMasks wm_;
  // SIMD, no masks, no lengths: x, dx (and h_{t−1} without resets, but for the reset-before GRU,
  // which scales it by r) are read and written where they lie rather than through xcell and hprev.
  const bool plain_, x_in_place_, dx_in_place_, h_in_place_;
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
  const std::size_t cell_bytes = static_cast<std::size_t>(cell_state_elements(st, B)) * sizeof(T);
  if (a.dc0 != nullptr) std::memset(a.dc0, 0, cell_bytes);  // non-LSTM blocks stay zero
  if (a.dx != nullptr) std::memset(a.dx, 0, sizeof(T) * steps * B * st.input_size);

  // The ends (src/head_grad.cpp): the head's gradient becomes the last layer's dy; layer 0's input
  // gradient goes to the embedding's rows.
  const bool head = st.head.out_features > 0, embedding = st.embedding.vocab_size > 0;
  if (head) head_backward<T>(p, packed, ws, a, at_bytes<T>(ws, tr.dlayer[0]), dweights);
  T* d_embedded = nullptr;

  int cur = 0;  // dlayer[cur]: gradient of the current layer's output (inner layers; the head's input)
  for (int l = L - 1; l >= 0; --l) {
    const LayerPlan& lp = p.layers[l];
    const std::int64_t out_w = static_cast<std::int64_t>(lp.dirs) * lp.out, in_w = lp.input_size;
    SeqView<const T> dy;
    if (l == L - 1 && head) {
      dy = {at_bytes<T>(ws, tr.dlayer[cur]), B * out_w, out_w};
    } else if (l == L - 1) {
      if (a.dy != nullptr) {
        const SeqView<T> v = caller_view(static_cast<T*>(const_cast<void*>(a.dy)), f, out_w);
        dy = {v.data, v.st, v.sb};
      }
    } else {
      dy = {at_bytes<T>(ws, tr.dlayer[cur]), B * out_w, out_w};
    }
    SeqView<T> dx;
    if (l > 0 || (embedding && dweights != nullptr)) {
      dx = workspace_view(at_bytes<T>(ws, tr.dlayer[cur ^ 1]), B, in_w);
      std::memset(dx.data, 0, sizeof(T) * steps * B * in_w);
      if (l == 0) d_embedded = dx.data;
    } else if (a.dx != nullptr) {
      dx = caller_view(static_cast<T*>(a.dx), f, in_w);
    }
    SeqView<const T> x;
    if (l == 0 && embedding) {
      x = {at_bytes<T>(reserve, tr.embed_x), B * in_w, in_w};
    } else if (l == 0) {
      const SeqView<T> v = caller_view(static_cast<T*>(const_cast<void*>(f.x)), f, in_w);
      x = {v.data, v.st, v.sb};
    } else {
      x = {at_bytes<T>(reserve, tr.layer_out[l - 1]), B * in_w, in_w};
    }
    for (int d = 0; d < lp.dirs; ++d) {
      // h slots have O units, c slots H (they differ only with a projection).
      const std::size_t slot = static_cast<std::size_t>(state_offset(st, B, l, d)) * sizeof(T);
      const std::size_t c_slot = static_cast<std::size_t>(cell_state_offset(st, B, l, d)) * sizeof(T);
      auto state = [&](const void* base, std::size_t at) -> const T* {
        return base == nullptr ? nullptr : reinterpret_cast<const T*>(static_cast<const unsigned char*>(base) + at);
      };
      auto state_out = [&](void* base, std::size_t at) -> T* { return base == nullptr ? nullptr : at_bytes<T>(base, at); };
      const bool lstm = lp.mode == Mode::lstm;
      DirectionGrad<T> g;
      g.layer = l;
      g.dir = d;
      g.batch = B;
      g.steps = steps;
      g.lengths = f.seq_lengths;
      g.resets = resets_of(f.resets, f.layout, B, steps);
      g.run = run;
      g.w = cell_params(p, l, d, canonical);
      if (dweights != nullptr) g.dw = cell_params(p, l, d, dweights);
      g.dw_fresh = dweights != nullptr && !a.accumulate;  // clear_weight_gradients left W and R to the products
      g.x = x;
      g.dy = dy;
      if (dy.data != nullptr) g.dy.data = dy.data + d * lp.out;
      g.dx = dx;
      g.keep = at_bytes<T>(reserve, tr.keep[l][d]);
      g.h0 = state(f.h0, slot);
      g.c0 = lstm ? state(f.c0, c_slot) : nullptr;
      g.dhy = state(a.dhy, slot);
      g.dcy = lstm ? state(a.dcy, c_slot) : nullptr;
      g.dh0 = state_out(a.dh0, slot);
      g.dc0 = lstm ? state_out(a.dc0, c_slot) : nullptr;
      g.dh = at_bytes<T>(ws, tr.dh[0]);
      g.dh_next = at_bytes<T>(ws, tr.dh[1]);
      g.dc = at_bytes<T>(ws, tr.dc);
      g.dgates = at_bytes<T>(ws, tr.dgates);
      g.hprev = at_bytes<T>(ws, tr.hprev);
      g.xcell = at_bytes<T>(ws, tr.xcell);
      g.rows = at_bytes<T>(ws, tr.brows);
      g.row_width = p.max_width;
      g.kernels = p.simd.kernels();  // the SIMD backend's (null in the others' plans)
      if (g.kernels != nullptr) {
        g.pack = at_bytes<T>(ws, p.simd.train.backward_pack);
        g.wide_pack = p.simd.train.backward_pack_wide;
        g.r_packed = at_bytes<T>(ws, p.simd.train.r_packed);
        g.thread_rows = at_bytes<T>(ws, p.simd.train.backward_rows);
        if (p.simd.train.rt_panel[l][d] != 0) g.rt_panel = packed + p.simd.train.rt_panel[l][d];
        if (p.simd.train.wt_panel[l][d] != 0) g.wt_panel = packed + p.simd.train.wt_panel[l][d];
        g.bf16_products = bf16_batched_products(p.simd, lp);
      }
      g.threads = plan_threads(p);
      BackwardDirection<T>(p, g).run();
    }
    // The layer below produced this layer's input; its inter-layer mask scaled it.
    if (l > 0) apply_inter_layer_dropout(p, run, l - 1, reinterpret_cast<unsigned char*>(dx.data), steps, B, ws + tr.brows);
    cur ^= 1;
  }
  if (d_embedded != nullptr) embedding_backward<T>(p, a, d_embedded, dweights);
}

// The training forward of one (layer, direction) on the SIMD backend, batched: the input
// projections of every step in one matmul (x_cell · Wᵀ), then per step the recurrent products of
// every row (h · Rᵀ), the cell with the kernels' vector math, and the wrappers — writing the same
// reserve rows as the reference cell loop. f32 only.
class BatchedForward {
 public:
  BatchedForward(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed, unsigned char* ws)
      : p_(p), lp_(p.layers[layer]), ls_(p.stack.layers[layer]), io_(io), k_(p.simd.kernels()), H_(lp_.hidden),
        O_(lp_.out), I_(lp_.input_size), B_(io.batch), G_(lp_.gates), GH_(lp_.gates * lp_.hidden),
        slots_(keep_width(lp_)), w_(cell_params(p, layer, dir, reinterpret_cast<const float*>(packed + p.train.canonical))),
        w_t_(p.simd.train.w_t[layer][dir] == 0 ? nullptr : reinterpret_cast<const float*>(packed + p.simd.train.w_t[layer][dir])),
        r_t_(reinterpret_cast<const float*>(packed + p.simd.train.r_t[layer][dir])),
        p_t_(w_.proj == nullptr ? nullptr : reinterpret_cast<const float*>(packed + p.simd.train.p_t[layer][dir])),
        proj_(reinterpret_cast<float*>(ws + p.simd.train.proj)), rec_(reinterpret_cast<float*>(ws + p.simd.train.rec)),
        h_(reinterpret_cast<float*>(ws + p.simd.train.state_h)), c_(reinterpret_cast<float*>(ws + p.simd.train.state_c)),
        rh_(reinterpret_cast<float*>(ws + p.simd.train.rh)), x_in_(reinterpret_cast<float*>(ws + p.simd.train.x_in)),
        rows_(reinterpret_cast<float*>(ws + p.train.rows + static_cast<std::size_t>(dir) * p.train.rows_stride)),
        thread_rows_(ws + p.simd.train.thread_rows), pack_(reinterpret_cast<float*>(ws + p.simd.train.forward_pack)),
        wm_(wrapper_masks(p, layer, dir, io.dropout)), dp_(lp_.dir[dir]), packed_(packed),
        stored_(trains_from_stored_panels(p.simd, p.layers[layer])),
        blocks_(reinterpret_cast<float*>(ws + p.simd.train.rec_blocks)),
        zero_bias_(reinterpret_cast<float*>(ws + p.simd.train.zero_bias)),
        h16_(reinterpret_cast<std::uint16_t*>(ws + p.simd.train.h16)),
        x16_(reinterpret_cast<std::uint16_t*>(ws + p.simd.train.x16)),
        x_blocks_(reinterpret_cast<float*>(ws + p.simd.train.x_blocks)), parallel_rows_(rows_in_parallel()) {}

  void run() {
    if (stored_) {  // the gemm adds a bias; bf16 pads K with zeros
      std::memset(zero_bias_, 0, sizeof(float) * static_cast<std::size_t>(G_) * lp_.hidden_stride);
      std::memset(h16_, 0, sizeof(std::uint16_t) * B_ * p_.simd.train.h16_stride);
    }
    project_inputs();
    const std::size_t state = sizeof(float) * B_ * O_, cell = sizeof(float) * B_ * H_;
    if (io_.h0 != nullptr) std::memcpy(h_, io_.h0, state); else std::memset(h_, 0, state);
    if (io_.c0 != nullptr) std::memcpy(c_, io_.c0, cell); else std::memset(c_, 0, cell);
    for (int s = 0; s < io_.steps; ++s) step(io_.reverse ? io_.steps - 1 - s : s);
    if (io_.hy != nullptr) std::memcpy(io_.hy, h_, state);
    if (io_.cy != nullptr && lp_.mode == Mode::lstm) std::memcpy(io_.cy, c_, cell);
  }

 private:
  std::int64_t at(int t, int b) const { return static_cast<std::int64_t>(t) * B_ + b; }
  // Scratch row k of `rows` (kScratchRows rows of max_width: rows_, or a worker's own in step_rows).
  float* row(int k, float* rows) const { return rows + static_cast<std::int64_t>(k) * p_.max_width; }
  float* worker_rows(int index) const {
    return reinterpret_cast<float*>(thread_rows_ + static_cast<std::size_t>(index) * p_.train.rows_stride);
  }
  bool active(int t, int b) const { return t < (io_.lengths != nullptr ? io_.lengths[b] : io_.steps); }
  void apply(const Mask& m, int t, int b, float* v, int width, float* rows) const {
    multiply_by_mask_row(k_, m, io_.dropout, t, b, v, width, row(3, rows));
  }
  const float* x_row(int t, int b) const { return static_cast<const float*>(io_.x) + t * io_.x_st + b * io_.x_sb; }

  // c[rows, n] (row stride ldc, G·H by default) = a[rows, k] (row stride lda, k by default) · B,
  // B packed at plan time.
  void product(const float* a, std::int64_t rows, int k, const float* b_packed, int n, float* c, std::int64_t ldc = 0,
               std::int64_t lda = 0) const {
    matmul_threaded(k_, product_args(a, rows, k, b_packed, n, c, ldc, lda), plan_threads(p_));
  }
  simd::MatmulArgs product_args(const float* a, std::int64_t rows, int k, const float* b_packed, int n, float* c,
                                std::int64_t ldc = 0, std::int64_t lda = 0) const {
    simd::MatmulArgs m;
    m.a = a;
    m.a_m = lda != 0 ? lda : k;
    m.a_k = 1;
    m.b_packed = b_packed;
    m.c = c;
    m.ldc = ldc != 0 ? ldc : GH_;
    m.n = n;
    m.k = k;
    m.row_begin = 0;
    m.row_end = static_cast<std::int32_t>(rows);
    m.scratch = pack_;
    return m;
  }

  // f16 / bf16 weights: c[b, g·H + u] (row stride G·H) = a[b, :] · the stored panel's gate g, unit
  // u (K = k; `gates` gates), by the inference's gemm into gate-vector rows, then into the step's
  // order; bf16 rounds the rows of a to bf16 first, as the inference does.
  // Rows [b0, b1) (default: all). Too few rows to share out, on the calling thread: the plan's
  // threads share the blocks (as rows_product shares an f32 product's columns).
  void stored_product(const float* a, int k, std::size_t panel, int gates, float* c, int b0 = 0, int b1 = -1) const {
    // (rows of rec_blocks G·Hp apart whatever `gates`: threads may run both products of a step)
    if (b1 < 0) b1 = B_;
    simd::GemmArgs g;
    g.a = a;
    g.a_sb = k;
    if (p_.simd.weights == simd::Weights::bf16) {
      g.a16 = h16_;
      g.a16_stride = static_cast<std::int64_t>(p_.simd.train.h16_stride);
      rows_to_bf16(a, k, b0, b1, h16_, g.a16_stride);
    }
    g.batch = B_;
    g.k = k;
    g.panel = packed_ + panel;
    g.c = blocks_;
    g.row_begin = b0;
    g.row_end = b1;
    const Threads th = parallel_rows_ ? Threads() : plan_threads(p_);
    gemm_to_gates(g, gates, by_columns(b1 - b0, k, static_cast<std::int64_t>(gates) * H_, th) ? th : Threads(), c);
  }

  // Rows [r0, r1) of a (k floats each) in bf16 at dst (rows `stride` apart), K padded to even with a
  // zero: the rows serve products of several K.
  void rows_to_bf16(const float* a, int k, int r0, int r1, std::uint16_t* dst, std::int64_t stride) const {
    for (int r = r0; r < r1; ++r) {
      k_->to_bf16(a + static_cast<std::int64_t>(r) * k, dst + r * stride, k);
      if (k % 2 != 0) dst[r * stride + k] = 0;
    }
  }

  // The inference gemm of `g` (its a, k, panel, output g.c and rows; `gates` gates a block) with no
  // bias, its column blocks shared by `th`: each share's blocks into g.c's rows of G·Hp floats in
  // gate-vector order, then its units to c's rows of G·H floats in gate order (the same rows).
  void gemm_to_gates(simd::GemmArgs g, int gates, const Threads& th, float* c) const {
    const int V = p_.vector, NV = simd::vectors_per_gate(lp_.cell), row = G_ * lp_.hidden_stride;
    g.vectors = gates * NV;
    g.bias = zero_bias_;
    g.c_row_stride = row;
    over_column_blocks(th, lp_.hidden_stride / (NV * V), [&](int j0, int j1) {
      simd::GemmArgs share = g;
      share.block_begin = j0;
      share.block_end = j1;
      k_->gemm[static_cast<int>(p_.simd.weights)](share);
      for (int r = g.row_begin; r < g.row_end; ++r)
        for (int j = j0; j < j1; ++j)
          for (int q = 0; q < gates * NV; ++q) {  // vector q of block j: gate q / NV, units from (j·NV + q % NV)·V
            const int gate = q / NV, u = (j * NV + q % NV) * V, n = std::min(V, H_ - u);
            if (n > 0)
              std::memcpy(c + static_cast<std::int64_t>(r) * GH_ + gate * H_ + u,
                          g.c + static_cast<std::int64_t>(r) * row + (j * gates * NV + q) * V, sizeof(float) * n);
          }
    });
  }

  // The input projection of a layer on bf16 panels (vdpbf16ps): proj = x_cell · Wᵀ on the
  // inference's W panel, x rounded to bf16 as the inference rounds it, kInputChunkRows rows (whole
  // steps) a call, the plan's threads sharing the column blocks. LSTM H 512 B 64, one thread: the
  // training forward 46 → 36 ms.
  void project_bf16() const {
    const int per_call = std::max(1, kInputChunkRows / B_);
    for (int t0 = 0; t0 < io_.steps; t0 += per_call) {
      const int rows = (std::min<int>(io_.steps, t0 + per_call) - t0) * B_;
      simd::GemmArgs g;
      g.a = x_in_ + at(t0, 0) * I_;
      g.a_sb = I_;
      g.a16 = x16_;
      g.a16_stride = static_cast<std::int64_t>(p_.simd.train.x16_stride);
      rows_to_bf16(g.a, I_, 0, rows, x16_, g.a16_stride);
      g.batch = rows;
      g.k = I_;
      g.panel = packed_ + dp_.w_panel;
      g.c = x_blocks_;
      g.row_begin = 0;
      g.row_end = rows;
      gemm_to_gates(g, G_, plan_threads(p_), proj_ + at(t0, 0) * GH_);
    }
  }

  // proj[t, b] = W x_cell + bW + bR (GRU reset-after: bR_n stays with the recurrent term).
  void project_inputs() {
    const std::int64_t rows = static_cast<std::int64_t>(io_.steps) * B_;
    struct Job {
      BatchedForward* self;
      int threads;
    } job{this, parallel_rows_ && wm_.count > 0 ? plan_threads(p_).count : 1};
    auto cell_inputs = [](void* context, int index) {  // x through the input masks, rows shared out
      const Job& j = *static_cast<const Job*>(context);
      BatchedForward& f = *j.self;
      float* rows = j.threads > 1 ? f.worker_rows(index) : f.rows_;
      for (int b = f.B_ * index / j.threads; b < f.B_ * (index + 1) / j.threads; ++b)
        for (int t = 0; t < f.io_.steps; ++t) {
          float* xc = f.x_in_ + f.at(t, b) * f.I_;
          std::memcpy(xc, f.x_row(t, b), sizeof(float) * f.I_);
          for (int w = f.wm_.count - 1; w >= 0; --w) f.apply(f.wm_.input[w], t, b, xc, f.I_, rows);
        }
    };
    if (job.threads > 1) pool_run(plan_threads(p_).pool, job.threads, cell_inputs, &job);
    else cell_inputs(&job, 0);
    if (!lp_.skip_input && bf16_batched_products(p_.simd, lp_)) {
      project_bf16();
    } else if (w_t_ != nullptr) {
      product(x_in_, rows, I_, w_t_, GH_, proj_);
    } else {  // skip input: every gate adds x itself
      for (std::int64_t r = 0; r < rows; ++r)
        for (int g = 0; g < G_; ++g) std::memcpy(proj_ + r * GH_ + g * H_, x_in_ + r * I_, sizeof(float) * H_);
    }
    const bool reset_after = lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_after;
    float* bias = rec_;  // G·H floats of scratch: the steps overwrite rec_
    for (int g = 0; g < G_; ++g)
      for (int u = 0; u < H_; ++u) bias[g * H_ + u] = w_.bW[g][u] + (reset_after && g == 2 ? 0.0f : w_.bR[g][u]);
    for (std::int64_t r = 0; r < rows; ++r) axpy(proj_ + r * GH_, 1.0f, bias, GH_);
  }

  // Whether a step's rows run on the plan's threads, each its share of the recurrent products, gates,
  // projection and state (nothing couples two rows of a step; wrappers use a worker's own scratch
  // rows), with kMinStepRowsPerThread rows a thread or more (as the backward's step_rows).
  bool rows_in_parallel() const {
    const Threads th = plan_threads(p_);
    return th.count > 1 && B_ >= kMinStepRowsPerThread * th.count;
  }

  // Step t with the rows shared out: each thread runs step_rows on its share. Every element of a
  // product is one thread's, summed in k order as one thread sums it: the same bits for any thread
  // count.
  void step_rows_parallel(int t) {
    const Threads th = plan_threads(p_);
    struct Job {
      BatchedForward* self;
      int t, threads;
    } job{this, t, th.count};
    pool_run(th.pool, th.count, [](void* context, int index) {
      const Job& j = *static_cast<const Job*>(context);
      BatchedForward& f = *j.self;
      f.step_rows(j.t, f.B_ * index / j.threads, f.B_ * (index + 1) / j.threads,
                  f.pack_ + static_cast<std::int64_t>(index) * simd::kMatmulScratchFloats, f.worker_rows(index));
    }, &job);
  }

  void step(int t) {
    if (io_.resets.r != nullptr) reset_rows(t);
    if (parallel_rows_) step_rows_parallel(t);
    else step_rows(t, 0, B_, pack_, rows_);
  }

  // c[b0 … b1) (row stride ldc, G·H by default) = a's rows (row stride lda, k by default) · B
  // (packed), on the calling thread with its matmul scratch `pack`; the column blocks in the order
  // of step t (simd::MatmulArgs::descending). A batch too small to share its rows out (its steps
  // run on the calling thread): the plan's threads share the product's columns.
  void rows_product(int t, int b0, int b1, const float* a, int k, const float* b_packed, int n, float* c, float* pack,
                    std::int64_t ldc = 0, std::int64_t lda = 0) const {
    simd::MatmulArgs m = product_args(a, B_, k, b_packed, n, c, ldc, lda);
    m.row_begin = b0;
    m.row_end = b1;
    m.scratch = pack;
    m.descending = (t & 1) != 0;
    if (!parallel_rows_) matmul_threaded(k_, m, plan_threads(p_));
    else k_->matmul(m);
  }

  // Rows [b0, b1) of step t: the recurrent products (the reset-before GRU's n gate waits for r ⊙ h),
  // the gates, an LSTM's projection, the output and state through the wrappers. `pack`: this
  // thread's matmul scratch; `rows`: its scratch rows.
  void step_rows(int t, int b0, int b1, float* pack, float* rows) {
    if (b0 == b1) return;
    const bool reset_before = lp_.mode == Mode::gru && lp_.gru_variant == GruVariant::reset_before;
    if (stored_) stored_product(h_, O_, dp_.r_panel, reset_before ? 2 : G_, rec_, b0, b1);
    else rows_product(t, b0, b1, h_, O_, r_t_, reset_before ? 2 * H_ : GH_, rec_, pack);
    for (int b = b0; b < b1; ++b)
      if (active(t, b)) gates(t, b);
    if (lp_.extensions) project(t, b0, b1, pack);
    if (reset_before) {
      if (stored_) stored_product(rh_, H_, dp_.r_panel_n, 1, rec_ + 2 * H_, b0, b1);
      else rows_product(t, b0, b1, rh_, H_, r_t_ + simd::packed_b_floats(H_, 2 * H_), H_, rec_ + 2 * H_, pack);
      for (int b = b0; b < b1; ++b)
        if (active(t, b)) reset_before_n(t, b);
    }
    for (int b = b0; b < b1; ++b) finish(t, b, rows);
  }

  float* keep(int t, int b) const { return static_cast<float*>(io_.keep) + at(t, b) * slots_; }

  // Rows reset before step t start again from their initial state (null: zeros).
  void reset_rows(int t) {
    // h is O wide (the projection's P with one), c is H wide.
    auto restore = [](float* dst, const void* initial, int width, int b) {
      const std::int64_t row = static_cast<std::int64_t>(b) * width;
      if (initial != nullptr) std::memcpy(dst + row, static_cast<const float*>(initial) + row, sizeof(float) * width);
      else std::memset(dst + row, 0, sizeof(float) * width);
    };
    for (int b = 0; b < B_; ++b) {
      if (!io_.resets.at(t, b) || !active(t, b)) continue;
      restore(h_, io_.h0, O_, b);
      if (lp_.mode == Mode::lstm) restore(c_, io_.c0, H_, b);
    }
  }

  // Gate activations and the new cell state into the reserve row.
  void gates(int t, int b) {
    float* k = keep(t, b);
    const float* pj = proj_ + at(t, b) * GH_;
    const float* rc = rec_ + static_cast<std::int64_t>(b) * GH_;
    const float* hp = h_ + static_cast<std::int64_t>(b) * H_;
    const int H = H_;
    switch (lp_.mode) {
      case Mode::lstm: {
        float* c = c_ + static_cast<std::int64_t>(b) * H;
        if (lp_.extensions) {
          lstm_ext_gates(k, pj, rc, c);
          break;
        }
        k_->lstm_forward(pj, rc, c, k, H);
        break;
      }
      case Mode::gru: {
        if (lp_.gru_variant == GruVariant::reset_after) {
          k_->gru_forward(pj, rc, w_.bR[2], hp, k, H);
          break;
        }
        for (int u = 0; u < 2 * H; ++u) k[u] = pj[u] + rc[u];
        k_->activate(simd::Activation::sigmoid, k, 2 * H);
        float* rh = rh_ + static_cast<std::int64_t>(b) * H;  // reset-before: n waits for R_n (r ⊙ h)
        for (int u = 0; u < H; ++u) rh[u] = k[u] * hp[u];
        break;
      }
      case Mode::rnn_tanh:
      case Mode::rnn_relu:
        for (int u = 0; u < H; ++u) k[u] = pj[u] + rc[u];
        k_->activate(lp_.mode == Mode::rnn_tanh ? simd::Activation::tanh : simd::Activation::relu, k, H);
        break;
    }
  }

  // LSTM with extensions (the reference's lstm_step): peepholes into i, f from c_{t−1} and into o
  // from the clipped c_t, the cell clip; keeps c̃ and m (project follows for every row).
  void lstm_ext_gates(float* k, const float* pj, const float* rc, const float* c) const {
    const int H = H_;
    for (int u = 0; u < 4 * H; ++u) k[u] = pj[u] + rc[u];
    if (w_.peep[0] != nullptr)
      for (int u = 0; u < H; ++u) {
        k[u] += w_.peep[0][u] * c[u];
        k[H + u] += w_.peep[1][u] * c[u];
      }
    k_->activate(simd::Activation::sigmoid, k, 2 * H);
    k_->activate(simd::Activation::tanh, k + 2 * H, H);
    for (int u = 0; u < H; ++u) {
      k[6 * H + u] = k[H + u] * c[u] + k[u] * k[2 * H + u];
      k[4 * H + u] = clip(k[6 * H + u], ls_.cell_clip);
    }
    if (w_.peep[3] != nullptr)
      for (int u = 0; u < H; ++u) k[3 * H + u] += w_.peep[3][u] * k[4 * H + u];
    k_->activate(simd::Activation::sigmoid, k + 3 * H, H);
    std::memcpy(k + 5 * H, k + 4 * H, sizeof(float) * H);
    k_->activate(simd::Activation::tanh, k + 5 * H, H);
    for (int u = 0; u < H; ++u) k[5 * H + u] *= k[3 * H + u];
  }

  // TF's clip_by_value(v, −clip, clip); clip 0 means none.
  static float clip(float v, double bound) {
    if (bound <= 0.0) return v;
    const float lo = static_cast<float>(-bound), hi = static_cast<float>(bound);
    return v < lo ? lo : v > hi ? hi : v;
  }

  // h̃ = W_proj m for rows [b0, b1) of step t (one product; without a projection h̃ = m), h = clip(h̃).
  void project(int t, int b0, int b1, float* pack) {
    const int kh = keep_h(lp_);
    for (int b = b0; b < b1; ++b)  // the product reads every row: rows past their length give zeros
      if (!active(t, b)) std::memset(keep(t, b) + 5 * H_, 0, sizeof(float) * H_);
    if (p_t_ != nullptr) rows_product(t, b0, b1, keep(t, 0) + 5 * H_, H_, p_t_, O_, keep(t, 0) + kh + O_, pack, slots_, slots_);
    for (int b = b0; b < b1; ++b) {
      if (!active(t, b)) continue;
      float* k = keep(t, b);
      if (p_t_ == nullptr) std::memcpy(k + kh + O_, k + 5 * H_, sizeof(float) * O_);
      for (int u = 0; u < O_; ++u) k[kh + u] = clip(k[kh + O_ + u], ls_.proj_clip);
    }
  }

  void reset_before_n(int t, int b) {
    float* k = keep(t, b);
    const float* pj = proj_ + at(t, b) * GH_;
    const float* rc = rec_ + static_cast<std::int64_t>(b) * GH_;
    for (int u = 0; u < H_; ++u) k[2 * H_ + u] = pj[2 * H_ + u] + rc[2 * H_ + u];
    finish_gru(k, h_ + static_cast<std::int64_t>(b) * H_, 3);
  }

  // n = tanh(k[2H…]) and h = (1 − z) n + z h_prev into slot `h_slot`.
  void finish_gru(float* k, const float* hp, int h_slot) const {
    const int H = H_;
    k_->activate(simd::Activation::tanh, k + 2 * H, H);
    for (int u = 0; u < H; ++u) k[h_slot * H + u] = (1.0f - k[H + u]) * k[2 * H + u] + k[H + u] * hp[u];
  }

  // The output through the wrappers, and the state (through the state masks) for the next step;
  // `rows`: the calling thread's scratch rows.
  void finish(int t, int b, float* rows) {
    float* y = static_cast<float*>(io_.y) + t * io_.y_st + b * io_.y_sb;
    if (!active(t, b)) {  // past the row's length: state carries over, output is zero
      std::memset(y, 0, sizeof(float) * O_);
      return;
    }
    const float* k = keep(t, b);
    float* h = h_ + static_cast<std::int64_t>(b) * O_;
    float* c = c_ + static_cast<std::int64_t>(b) * H_;
    std::memcpy(h, k + keep_h(lp_), sizeof(float) * O_);
    if (lp_.mode == Mode::lstm) std::memcpy(c, k + 4 * H_, sizeof(float) * H_);
    if (wm_.count == 0) {
      std::memcpy(y, h, sizeof(float) * O_);
      return;
    }
    float* out = row(1, rows);
    std::memcpy(out, h, sizeof(float) * O_);
    for (int w = 0; w < wm_.count; ++w) {
      if (ls_.wrappers[w].kind == WrapperKind::dropout) {
        apply(wm_.output[w], t, b, out, O_, rows);
        apply(wm_.state_h[w], t, b, h, O_, rows);
        if (lp_.mode == Mode::lstm) apply(wm_.state_c[w], t, b, c, H_, rows);
      } else {  // residual (add): the input this wrapper received, after the input masks outside it
        float* level = row(2, rows);
        std::memcpy(level, x_row(t, b), sizeof(float) * I_);
        for (int v = wm_.count - 1; v > w; --v) apply(wm_.input[v], t, b, level, I_, rows);
        for (int u = 0; u < O_; ++u) out[u] += level[u];
      }
    }
    std::memcpy(y, out, sizeof(float) * O_);
  }

  const PlanImpl& p_;
  const LayerPlan& lp_;
  const LayerSpec& ls_;
  const DirectionIO& io_;
  const simd::F32Kernels* k_;
  const int H_, O_, I_, B_, G_, GH_, slots_;
  const CellParams<const float> w_;
  const float *w_t_, *r_t_, *p_t_;
  float *proj_, *rec_, *h_, *c_, *rh_, *x_in_, *rows_;
  unsigned char* thread_rows_;  // a worker's kScratchRows rows each (p_.train.rows_stride bytes apart)
  float* pack_;
  const WrapperMasks wm_;
  const DirectionPack& dp_;
  const unsigned char* packed_;
  const bool stored_;  // trains_from_stored_panels: the recurrent products read the stored panels
  float *blocks_, *zero_bias_;
  std::uint16_t* h16_;
  std::uint16_t* x16_;  // bf16 panels: the input projection's rows in bf16 (project_bf16)
  float* x_blocks_;     // and its products in gate-vector order
  const bool parallel_rows_;  // rows_in_parallel()
};

// f16 / bf16 weights: the copy's W, R and W_proj as stored (each value rounded as the panels keep
// it), so that every training product, f32 ones included, and the gradients see the stored weights.
void round_stored_weights(const PlanImpl& p, float* canonical) {
  const bool bf16 = p.simd.weights == simd::Weights::bf16;
  auto round = [bf16](float* v, std::int64_t n) {
    if (bf16)
      for (std::int64_t i = 0; i < n; ++i) v[i] = round_to_bf16(v[i]);
    else
      for (std::int64_t i = 0; i < n; ++i) v[i] = f16_to_f32(f32_to_f16(v[i]));
  };
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    const std::int64_t H = lp.hidden;
    for (int d = 0; d < lp.dirs; ++d) {
      for (int g = 0; g < lp.gates; ++g) {
        const std::int64_t w = canonical_offset(p.stack, l, d, ParamKind::input_weight, g);
        if (w >= 0) round(canonical + w, H * lp.input_size);
        round(canonical + canonical_offset(p.stack, l, d, ParamKind::recurrent_weight, g), H * lp.out);
      }
      const std::int64_t pr = canonical_offset(p.stack, l, d, ParamKind::projection, 0);
      if (pr >= 0) round(canonical + pr, H * lp.out);
    }
  }
}

}  // namespace

void simd_pack_training(const PlanImpl& p, const float* canonical_in, unsigned char* packed) {
  const TrainLayout& tr = p.train;
  const SimdTrainLayout& st = p.simd.train;
  auto* canonical = reinterpret_cast<float*>(packed + tr.canonical);
  std::memcpy(canonical, canonical_in, static_cast<std::size_t>(param_count(p.stack)) * sizeof(float));
  if (p.simd.weights != simd::Weights::f32) round_stored_weights(p, canonical);
  for (int l = 0; l < p.stack.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    const int H = lp.hidden, GH = lp.gates * H;
    const bool reset_before = lp.mode == Mode::gru && lp.gru_variant == GruVariant::reset_before;
    for (int d = 0; d < lp.dirs; ++d) {
      // Wᵀ [I, G·H] and Rᵀ [H, G·H] packed straight from W_0…W_{G−1} ([G·H, K] together) by strides;
      // the reset-before GRU's Rᵀ in two (r, z | n), as its step uses them.
      const CellParams<const float> w = cell_params(p, l, d, static_cast<const float*>(canonical));
      auto* w_t = reinterpret_cast<float*>(packed + st.w_t[l][d]);
      auto* r_t = reinterpret_cast<float*>(packed + st.r_t[l][d]);
      const simd::F32Kernels& k = *p.simd.kernels();
      if (w.W[0] != nullptr && st.w_t[l][d] != 0) k.pack_b(w.W[0], 1, lp.input_size, lp.input_size, GH, w_t);
      if (st.r_t[l][d] == 0) {  // f16 / bf16: the forward reads the stored panels, the backward Rᵀ's
        simd_pack_transposed_panel(p, w.R[0], recurrent_k(lp), lp.out, packed + st.rt_panel[l][d]);
        if (st.wt_panel[l][d] != 0) simd_pack_transposed_panel(p, w.W[0], GH, lp.input_size, packed + st.wt_panel[l][d]);
      } else if (reset_before) {
        k.pack_b(w.R[0], 1, H, H, 2 * H, r_t);
        k.pack_b(w.R[2], 1, H, H, H, r_t + simd::packed_b_floats(H, 2 * H));
      } else {
        k.pack_b(w.R[0], 1, lp.out, lp.out, GH, r_t);  // R is [G·H, O]
      }
      if (w.proj != nullptr)  // W_projᵀ [H, P]
        k.pack_b(w.proj, 1, H, H, lp.out, reinterpret_cast<float*>(packed + st.p_t[l][d]));
    }
  }
}

Status train_forward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& a,
                     const RunDropout& run) {
  auto* reserve = static_cast<unsigned char*>(a.reserve);
  const ReserveHeader header = describe_run(p, a, run);
  std::memcpy(reserve, &header, sizeof header);
  const TrainLayout& tr = p.train;
  if (p.stack.embedding.vocab_size > 0) embed_lookup(p, packed, ws, a, reserve + tr.embed_x);
  for (int l = 0; l < p.stack.num_layers; ++l) {
    for (int d = 0; d < p.layers[l].dirs; ++d) {
      ReferenceBuffers buf;
      buf.h[0] = ws + tr.h[d][0];
      buf.h[1] = ws + tr.h[d][1];
      buf.c = ws + tr.c[d];
      buf.rows = ws + tr.rows + static_cast<std::size_t>(d) * tr.rows_stride;
      p.ops()->train_direction(p, l, d, reserve_direction_io(p, a, ws, l, d, run, reserve), packed, ws, buf);
    }
    if (l + 1 < p.stack.num_layers)
      apply_inter_layer_dropout(p, run, l, reserve + tr.layer_out[l], a.seq_len, a.batch, ws + tr.rows);
  }
  if (p.stack.head.out_features > 0) run_head(p, packed, ws, a, reserve);
  return Status::ok;
}

void reference_train_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                               unsigned char*, const ReferenceBuffers& rows) {
  reference_run_direction(p, layer, dir, io, packed + p.train.canonical, rows);
}

void simd_train_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                          unsigned char* ws, const ReferenceBuffers&) {
  BatchedForward(p, layer, dir, io, packed, ws).run();
}

void describe_reserve(const PlanImpl& p, const ForwardArgs& a, unsigned char* header) {
  const ReserveHeader h = describe_run(p, a, run_dropout(p, a));
  std::memset(header, 0, kReserveHeaderBytes);
  std::memcpy(header, &h, sizeof h);
}

Status check_reserve(const PlanImpl& p, const ForwardArgs& a) {
  RNNCORE_ENSURE(a.reserve != nullptr, Status::null_pointer, "backward: forward.reserve is null (run a training forward first)");
  return check_reserve_header(p, a, static_cast<const unsigned char*>(a.reserve));
}

Status check_reserve_header(const PlanImpl& p, const ForwardArgs& a, const unsigned char* header) {
  ReserveHeader have;
  std::memcpy(&have, header, sizeof have);
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
                 "backward: seq_lengths, row_ids or resets differ from those of the training forward that filled the "
                 "reserve");
  return Status::ok;
}

// dweights = 0 before a backward that overwrites it (BackwardArgs::accumulate off), all but each
// layer-direction's W and R blocks where backward runs (batch > 0): the first weight-gradient
// product into each writes it (dw_fresh), which spares clearing and reloading it (at batch 1 the
// clear alone was ~7 % of an LSTM H 512 backward on Zen 3). The blocks, in increasing order, are
// skipped between memsets.
void clear_weight_gradients(const PlanImpl& p, const BackwardArgs& a) {
  const std::size_t es = dtype_size(p.stack.dtype), total = static_cast<std::size_t>(param_count(p.stack)) * es;
  struct Block {
    std::size_t at, bytes;
  };
  Block blocks[4 * kMaxLayers];  // W and R of each layer-direction, sorted by offset
  int n = 0;
  auto add = [&](std::int64_t offset, std::size_t elements) {
    Block b{static_cast<std::size_t>(offset) * es, elements * es};
    int i = n++;
    for (; i > 0 && blocks[i - 1].at > b.at; --i) blocks[i] = blocks[i - 1];
    blocks[i] = b;
  };
  if (a.forward.batch > 0)
    for (int l = 0; l < p.stack.num_layers; ++l) {
      const LayerPlan& lp = p.layers[l];
      const std::size_t gh = static_cast<std::size_t>(lp.gates) * lp.hidden;
      for (int d = 0; d < lp.dirs; ++d) {
        const std::int64_t w = canonical_offset(p.stack, l, d, ParamKind::input_weight, 0);
        if (w >= 0) add(w, gh * static_cast<std::size_t>(lp.input_size));
        add(canonical_offset(p.stack, l, d, ParamKind::recurrent_weight, 0), gh * static_cast<std::size_t>(lp.out));
      }
    }
  auto* base = static_cast<unsigned char*>(a.dweights);
  std::size_t done = 0;  // bytes [0, done) cleared or left to the products
  for (int i = 0; i < n; ++i) {
    std::memset(base + done, 0, blocks[i].at - done);
    done = blocks[i].at + blocks[i].bytes;
  }
  std::memset(base + done, 0, total - done);
}

Status train_backward(const PlanImpl& p, const void* packed_v, void* workspace, const BackwardArgs& a) {
  const auto* packed = static_cast<const unsigned char*>(packed_v);
  auto* ws = static_cast<unsigned char*>(workspace);
  RNNCORE_ENSURE(a.dx == nullptr || p.stack.embedding.vocab_size == 0, Status::unsupported,
                 "backward: dx given for a stack with an embedding: its input is token ids (the table's gradient is in "
                 "dweights); pass dx = null");
  if (a.dweights != nullptr && !a.accumulate) clear_weight_gradients(p, a);
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

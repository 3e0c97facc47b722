// The SIMD backend's runtime side: packs canonical weights into gate-interleaved panels
// (simd/kernels.hpp) once, and runs one direction as an input-projection GEMM over all steps
// followed by one fused kernel call per step.
#include <cstring>

#include "src/internal/dropout.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {
namespace detail {

namespace {

// Packs the matrices {M_g : g in gates} ([H, K] row-major each) into panel order:
// block j, column k, gate g, lane v → M_g[j·V + v][k] (zero past H).
void pack_panel(float* dst, const float* const* mats, int gate_count, int H, int K, int V) {
  const int blocks = static_cast<int>(round_up(H, V) / V);
  for (int j = 0; j < blocks; ++j)
    for (int k = 0; k < K; ++k)
      for (int g = 0; g < gate_count; ++g)
        for (int v = 0; v < V; ++v) {
          const int unit = j * V + v;
          *dst++ = unit < H ? mats[g][static_cast<std::int64_t>(unit) * K + k] : 0.0f;
        }
}

// Gate-vector order (block j, gate g, lane v) of per-gate vectors {b_g} (+ {b2_g} when given).
void pack_gate_vectors(float* dst, const float* const* b, const float* const* b2, int gate_count, int H, int V) {
  const int blocks = static_cast<int>(round_up(H, V) / V);
  for (int j = 0; j < blocks; ++j)
    for (int g = 0; g < gate_count; ++g)
      for (int v = 0; v < V; ++v) {
        const int unit = j * V + v;
        float value = 0.0f;
        if (unit < H) value = b[g][unit] + (b2 != nullptr && b2[g] != nullptr ? b2[g][unit] : 0.0f);
        *dst++ = value;
      }
}

template <class T>
T* at(unsigned char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}
template <class T>
const T* at(const unsigned char* base, std::size_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

}  // namespace

Status simd_pack(const PlanImpl& p, const void* canonical_void, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const auto* canonical = static_cast<const float*>(canonical_void);
  const int V = p.vector;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    const int H = lp.hidden, G = lp.gates;
    const bool reset_before = lp.cell == simd::Cell::gru_reset_before;
    const bool reset_after = lp.cell == simd::Cell::gru_reset_after;
    for (int d = 0; d < lp.dirs; ++d) {
      const DirectionPack& dp = lp.dir[d];
      const float *W[4] = {}, *R[4] = {}, *bW[4] = {}, *bR[4] = {};
      for (int g = 0; g < G; ++g) {
        const std::int64_t w = canonical_offset(st, l, d, ParamKind::input_weight, g);
        W[g] = w < 0 ? nullptr : canonical + w;
        R[g] = canonical + canonical_offset(st, l, d, ParamKind::recurrent_weight, g);
        bW[g] = canonical + canonical_offset(st, l, d, ParamKind::input_bias, g);
        bR[g] = canonical + canonical_offset(st, l, d, ParamKind::recurrent_bias, g);
      }
      if (!lp.skip_input) pack_panel(at<float>(packed, dp.w_panel), W, G, H, lp.input_size, V);
      if (reset_before) {
        pack_panel(at<float>(packed, dp.r_panel), R, 2, H, H, V);
        pack_panel(at<float>(packed, dp.r_panel_n), R + 2, 1, H, H, V);
      } else {
        pack_panel(at<float>(packed, dp.r_panel), R, G, H, H, V);
      }
      // Both biases fold into the projection, except the reset-after GRU's bR_n, which r multiplies.
      const float* folded[4] = {bR[0], bR[1], bR[2], bR[3]};
      if (reset_after) {
        folded[2] = nullptr;
        const float* rn[1] = {bR[2]};
        pack_gate_vectors(at<float>(packed, dp.bias_rn), rn, nullptr, 1, H, V);
      }
      pack_gate_vectors(at<float>(packed, dp.bias), bW, folded, G, H, V);
    }
  }
  return Status::ok;
}

namespace {

// The masks of one (layer, direction)'s wrappers for this run.
struct WrapperMasks {
  int count = 0;
  Mask input[kMaxWrappers], output[kMaxWrappers], state_h[kMaxWrappers], state_c[kMaxWrappers];
  bool any_state_h = false, any_state_c = false, state_per_step = false;
};

WrapperMasks wrapper_masks(const PlanImpl& p, int layer, int dir, const RunDropout& run) {
  WrapperMasks wm;
  wm.count = p.stack.layers[layer].num_wrappers;
  for (int w = 0; w < wm.count; ++w) {
    wm.input[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::input);
    wm.output[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::output);
    wm.state_h[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::state_h);
    wm.state_c[w] = wrapper_mask(p.stack, run, layer, dir, w, MaskKind::state_c);
    wm.any_state_h = wm.any_state_h || wm.state_h[w].active;
    wm.any_state_c = wm.any_state_c || wm.state_c[w].active;
    wm.state_per_step = wm.state_per_step || (wm.state_h[w].active && !wm.state_h[w].variational) ||
                        (wm.state_c[w].active && !wm.state_c[w].variational);
  }
  return wm;
}

// dst[0, n) *= the mask row of `m` for (t, b); `row` is scratch of at least m.width floats.
void multiply_mask_row(const PlanImpl& p, const Mask& m, const RunDropout& run, int t, int b, float* dst, int n,
                       float* row) {
  if (!m.active) return;
  mask_row(p.kernels, m, run, t, b, row);
  for (int u = 0; u < n; ++u) dst[u] *= row[u];
}

// The combined state-dropout mask rows (product over the wrappers) for every row at time t.
void fill_state_masks(const PlanImpl& p, const Mask* masks, int count, const RunDropout& run, int t, int batch, int H,
                      int Hp, float* dst, float* row) {
  for (int b = 0; b < batch; ++b) {
    float* m = dst + static_cast<std::int64_t>(b) * Hp;
    for (int u = 0; u < Hp; ++u) m[u] = u < H ? 1.0f : 0.0f;
    for (int w = 0; w < count; ++w) multiply_mask_row(p, masks[w], run, t, b, m, H, row);
  }
}

}  // namespace

void simd_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                        unsigned char* ws) {
  const LayerPlan& lp = p.layers[layer];
  const LayerSpec& ls = p.stack.layers[layer];
  const DirectionPack& dp = lp.dir[dir];
  const simd::F32Kernels& k = *p.kernels;
  const int H = lp.hidden, G = lp.gates, V = p.vector, Hp = lp.hidden_stride, I = lp.input_size, B = io.batch,
            T = io.steps;
  const int blocks = Hp / V;
  const std::int64_t proj_row = static_cast<std::int64_t>(G) * Hp;
  const RunDropout& run = io.dropout;
  const WrapperMasks wm = wrapper_masks(p, layer, dir, run);
  float* proj = at<float>(ws, p.ws.proj[dir]);
  float* scratch = at<float>(ws, p.ws.scratch[dir]);
  float* mask_scratch = scratch;                 // one generated mask row
  float* x_level = scratch + p.max_width;        // the input a residual wrapper sees
  float* residual = scratch + 2 * p.max_width;   // a residual's result
  const auto* x_raw = static_cast<const float*>(io.x);
  auto length = [&](int b) { return io.lengths != nullptr ? io.lengths[b] : T; };

  // 0. Input dropout of every wrapper, into the cell input x_cell (only when something is dropped).
  const float* x = x_raw;
  std::int64_t x_st = io.x_st, x_sb = io.x_sb;
  bool input_dropped = false;
  for (int w = 0; w < wm.count; ++w) input_dropped = input_dropped || wm.input[w].active;
  if (input_dropped) {
    float* xc = at<float>(ws, p.ws.x_cell[dir]);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        float* dst = xc + (static_cast<std::int64_t>(t) * B + b) * I;
        std::memcpy(dst, x_raw + t * io.x_st + b * io.x_sb, sizeof(float) * I);
        for (int w = wm.count - 1; w >= 0; --w) multiply_mask_row(p, wm.input[w], run, t, b, dst, I, mask_scratch);
      }
    x = xc;
    x_st = static_cast<std::int64_t>(B) * I;
    x_sb = I;
  }

  // 1. Input projections of every step at once: proj[t·B + b] = W x + biases.
  if (lp.skip_input) {
    const float* bias = at<float>(packed, dp.bias);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        const float* xr = x + t * x_st + b * x_sb;
        float* row = proj + (static_cast<std::int64_t>(t) * B + b) * proj_row;
        for (int j = 0; j < blocks; ++j)
          for (int g = 0; g < G; ++g)
            for (int v = 0; v < V; ++v) {
              const int unit = j * V + v, i = (j * G + g) * V + v;
              row[i] = unit < H ? xr[unit] + bias[i] : 0.0f;
            }
      }
  } else if (T > 0) {
    const float** rows = at<const float*>(ws, p.ws.row_ptrs);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) rows[t * B + b] = x + t * x_st + b * x_sb;
    simd::GemmArgs g;
    g.a_rows = rows;
    g.k = I;
    g.gates = G;
    g.panel = at<float>(packed, dp.w_panel);
    g.bias = at<float>(packed, dp.bias);
    g.c = proj;
    g.c_row_stride = proj_row;
    g.row_begin = 0;
    g.row_end = T * B;
    g.block_begin = 0;
    g.block_end = blocks;
    k.gemm(g);
  }

  // 2. Initial state, padded to Hp with zeros.
  float* h = at<float>(ws, p.ws.h[dir][0]);
  float* h_next = at<float>(ws, p.ws.h[dir][1]);
  float* c = lp.mode == Mode::lstm ? at<float>(ws, p.ws.c[dir]) : nullptr;
  const std::size_t state_bytes = sizeof(float) * static_cast<std::size_t>(B) * Hp;
  std::memset(h, 0, state_bytes);
  if (c != nullptr) std::memset(c, 0, state_bytes);
  for (int b = 0; b < B; ++b) {
    if (io.h0 != nullptr) std::memcpy(h + b * Hp, static_cast<const float*>(io.h0) + b * H, sizeof(float) * H);
    if (c != nullptr && io.c0 != nullptr)
      std::memcpy(c + b * Hp, static_cast<const float*>(io.c0) + b * H, sizeof(float) * H);
  }

  // 3. One fused kernel call per step; state-dropout masks are made per step (once if variational).
  const simd::Cell cell = lp.cell;
  auto* active = at<std::uint8_t>(ws, p.ws.active);
  float* mask_h = wm.any_state_h ? at<float>(ws, p.ws.mask_h[dir]) : nullptr;
  float* mask_c = wm.any_state_c && c != nullptr ? at<float>(ws, p.ws.mask_c[dir]) : nullptr;
  simd::StepArgs a;
  a.hidden = H;
  a.hidden_padded = Hp;
  a.proj_row_stride = proj_row;
  a.panel = at<float>(packed, dp.r_panel);
  a.panel_n = cell == simd::Cell::gru_reset_before ? at<float>(packed, dp.r_panel_n) : nullptr;
  a.bias_rn = cell == simd::Cell::gru_reset_after ? at<float>(packed, dp.bias_rn) : nullptr;
  a.c = c;
  a.rh = cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.rh[dir]) : nullptr;
  a.z = cell == simd::Cell::gru_reset_before ? at<float>(ws, p.ws.z[dir]) : nullptr;
  a.mask_h = mask_h;
  a.mask_c = mask_c;
  a.mask_row_stride = Hp;
  a.y_row_stride = io.y_sb;
  a.active = active;
  a.row_begin = 0;
  a.row_end = B;
  a.block_begin = 0;
  a.block_end = blocks;
  for (int step = 0; step < T; ++step) {
    const int t = io.reverse ? T - 1 - step : step;
    for (int b = 0; b < B; ++b) active[b] = t < length(b) ? 1 : 0;
    if (step == 0 || wm.state_per_step) {
      if (mask_h != nullptr) fill_state_masks(p, wm.state_h, wm.count, run, t, B, H, Hp, mask_h, mask_scratch);
      if (mask_c != nullptr) fill_state_masks(p, wm.state_c, wm.count, run, t, B, H, Hp, mask_c, mask_scratch);
    }
    a.proj = proj + static_cast<std::int64_t>(t) * B * proj_row;
    a.h_prev = h;
    a.h_next = h_next;
    a.y = static_cast<float*>(io.y) + t * io.y_st;
    k.step[static_cast<int>(cell)](a);
    if (cell == simd::Cell::gru_reset_before) k.gru_reset_before_phase2(a);
    float* tmp = h;
    h = h_next;
    h_next = tmp;
  }

  // 4. Final states.
  for (int b = 0; b < B; ++b) {
    if (io.hy != nullptr) std::memcpy(static_cast<float*>(io.hy) + b * H, h + b * Hp, sizeof(float) * H);
    if (io.cy != nullptr && c != nullptr) std::memcpy(static_cast<float*>(io.cy) + b * H, c + b * Hp, sizeof(float) * H);
  }

  // 5. Out through the wrappers, innermost first: output dropout and residual connections.
  if (!lp.output_chain) return;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      if (t >= length(b)) continue;  // outputs past a row's length stay zero
      float* o = static_cast<float*>(io.y) + t * io.y_st + b * io.y_sb;
      for (int w = 0; w < wm.count; ++w) {
        if (ls.wrappers[w].kind == WrapperKind::dropout) {
          multiply_mask_row(p, wm.output[w], run, t, b, o, H, mask_scratch);
          continue;
        }
        std::memcpy(x_level, x_raw + t * io.x_st + b * io.x_sb, sizeof(float) * I);
        for (int v = wm.count - 1; v > w; --v) multiply_mask_row(p, wm.input[v], run, t, b, x_level, I, mask_scratch);
        apply_residual(ls.wrappers[w].residual, x_level, o, residual, H);
        std::memcpy(o, residual, sizeof(float) * H);
      }
    }
}

}  // namespace detail
}  // namespace rnncore

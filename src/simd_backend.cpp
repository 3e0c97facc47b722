// The SIMD backend's runtime side: packs canonical weights into gate-interleaved panels
// (simd/kernels.hpp) once, and runs one direction as an input-projection GEMM over all steps
// followed by one fused kernel call per step.
#include <cstring>

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

simd::Cell cell_of(const RnnSpec& s) {
  switch (s.mode) {
    case Mode::lstm: return simd::Cell::lstm;
    case Mode::gru: return s.gru_variant == GruVariant::reset_after ? simd::Cell::gru_reset_after : simd::Cell::gru_reset_before;
    case Mode::rnn_tanh: return simd::Cell::rnn_tanh;
    case Mode::rnn_relu: return simd::Cell::rnn_relu;
  }
  return simd::Cell::lstm;
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
  const RnnSpec& s = p.spec;
  const auto* canonical = static_cast<const float*>(canonical_void);
  const int H = s.hidden_size, G = p.gates, V = p.vector;
  const bool reset_before = s.mode == Mode::gru && s.gru_variant == GruVariant::reset_before;
  const bool reset_after = s.mode == Mode::gru && !reset_before;
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerPlan& lp = p.layers[l];
    for (int d = 0; d < p.dirs; ++d) {
      const DirectionPack& dp = lp.dir[d];
      const float *W[4] = {}, *R[4] = {}, *bW[4] = {}, *bR[4] = {};
      for (int g = 0; g < G; ++g) {
        const std::int64_t w = canonical_offset(s, l, d, ParamKind::input_weight, g);
        W[g] = w < 0 ? nullptr : canonical + w;
        R[g] = canonical + canonical_offset(s, l, d, ParamKind::recurrent_weight, g);
        bW[g] = canonical + canonical_offset(s, l, d, ParamKind::input_bias, g);
        bR[g] = canonical + canonical_offset(s, l, d, ParamKind::recurrent_bias, g);
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

void simd_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                        unsigned char* ws) {
  const RnnSpec& s = p.spec;
  const LayerPlan& lp = p.layers[layer];
  const DirectionPack& dp = lp.dir[dir];
  const simd::F32Kernels& k = *p.kernels;
  const int H = s.hidden_size, G = p.gates, V = p.vector, Hp = p.hidden_stride, B = io.batch, T = io.steps;
  const int blocks = Hp / V;
  const std::int64_t proj_row = static_cast<std::int64_t>(G) * Hp;
  float* proj = at<float>(ws, p.ws.proj[dir]);
  const auto* x = static_cast<const float*>(io.x);

  // 1. Input projections of every step at once: proj[t·B + b] = W x + biases.
  if (lp.skip_input) {
    const float* bias = at<float>(packed, dp.bias);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        const float* xr = x + t * io.x_st + b * io.x_sb;
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
      for (int b = 0; b < B; ++b) rows[t * B + b] = x + t * io.x_st + b * io.x_sb;
    simd::GemmArgs g;
    g.a_rows = rows;
    g.k = lp.input_size;
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
  float* c = s.mode == Mode::lstm ? at<float>(ws, p.ws.c[dir]) : nullptr;
  const std::size_t state_bytes = sizeof(float) * static_cast<std::size_t>(B) * Hp;
  std::memset(h, 0, state_bytes);
  if (c != nullptr) std::memset(c, 0, state_bytes);
  for (int b = 0; b < B; ++b) {
    if (io.h0 != nullptr) std::memcpy(h + b * Hp, static_cast<const float*>(io.h0) + b * H, sizeof(float) * H);
    if (c != nullptr && io.c0 != nullptr)
      std::memcpy(c + b * Hp, static_cast<const float*>(io.c0) + b * H, sizeof(float) * H);
  }

  // 3. One fused kernel call per step.
  const simd::Cell cell = cell_of(s);
  auto* active = at<std::uint8_t>(ws, p.ws.active);
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
  a.y_row_stride = io.y_sb;
  a.active = active;
  a.row_begin = 0;
  a.row_end = B;
  a.block_begin = 0;
  a.block_end = blocks;
  for (int step = 0; step < T; ++step) {
    const int t = io.reverse ? T - 1 - step : step;
    for (int b = 0; b < B; ++b) active[b] = t < (io.lengths != nullptr ? io.lengths[b] : T) ? 1 : 0;
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
}

}  // namespace detail
}  // namespace rnncore

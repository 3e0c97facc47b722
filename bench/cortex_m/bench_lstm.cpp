// Cortex-M instruction-count bench (bench/cortex_m_int8_counts.sh): one LSTM layer, I = H, B = 1,
// run for BENCH_REPS passes of BENCH_T steps, either the integer LSTM (src/int8_lstm_step.cpp, with the
// kernel int8_lstm_prepare picks) or the f32 LSTM through the public C API on the portable scalar
// path (max_isa RNNCORE_ISA_NONE, as examples/firmware/main.c plans it). The script counts the
// whole image's instructions under qemu-system-arm for (T, R) in {T1, T2} x {1, 2}; the double
// difference cancels start-up, weight set-up and each pass's fixed cost. It prints one line of
// memory figures. BENCH_INT8: 0 the f32 LSTM, 1 the int8 LSTM, 2 the int8 LSTM with the scalar
// kernel (i8_dot_1x1__scalar), 3 the int8 kernel alone (the matrix-vector products of a step, in
// the step's blocks, nothing else), 4 the int8 LSTM with per-channel weight scales, 5 the int8
// LSTM with interleaved weights (Int8WeightLayout::interleaved4, i8_dot_panels_4x16__dsp), 6 its
// kernel alone (the step's widening of x and h and its kernel calls). Built with
// -DBENCH_INT8=0..6 -DBENCH_H=.. -DBENCH_T=.. -DBENCH_REPS=..; the
// step count and repetitions live in volatile variables so that every variant has the same code.
// C++ without exceptions or RTTI, linked by the C driver like the firmware example (no libstdc++).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {  // the examples' C console and board
#include "examples/firmware/board.h"
#include "examples/firmware/console.h"
}
#include "rnncore/rnncore.h"
#include "src/internal/int8_lstm.hpp"

#ifndef BENCH_H
#define BENCH_H 32
#endif
#ifndef BENCH_T
#define BENCH_T 4
#endif
#ifndef BENCH_REPS
#define BENCH_REPS 1
#endif
#ifndef BENCH_CELL_LOG2  // the cell state's scale 2^BENCH_CELL_LOG2: its tanh has 15 + that integer bits
#define BENCH_CELL_LOG2 -11
#endif
#ifndef BENCH_INT8
#define BENCH_INT8 1
#endif
#define BENCH_MAX_T 16 /* the largest T the script uses: buffers are sized for it */

namespace {

constexpr int H = BENCH_H, I = BENCH_H;
volatile int g_steps = BENCH_T;
volatile int g_reps = BENCH_REPS;

// A small deterministic generator (xorshift32): the same weights and inputs on every run.
std::uint32_t g_rng = 2463534242u;
std::uint32_t next_u32() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}

void report(const char* key, unsigned long value) {
  put(" ");
  put(key);
  put("=");
  put_uint(value);
}

#if BENCH_INT8
using namespace rnncore::q8;
#define BENCH_INTERLEAVED (BENCH_INT8 == 5 || BENCH_INT8 == 6)
std::int8_t g_w[kGates][H * I], g_r[kGates][H * H];  // flash on a real part (const arrays)
#if BENCH_INTERLEAVED
alignas(4) std::int8_t g_wi[kGates][interleaved4_bytes(H, I)], g_ri[kGates][interleaved4_bytes(H, H)];  // flash too
#endif
std::int32_t g_b[kGates][H];
#if BENCH_INT8 == 4
std::int32_t g_bias_storage[24 * H];  // effective biases and the units' multipliers (RAM)
float g_row_scales[2][kGates][H];     // per-channel weight scales
#else
std::int32_t g_bias_storage[8 * H];  // effective biases (RAM)
#endif
std::int8_t g_x[BENCH_MAX_T * I];
#if BENCH_INTERLEAVED
std::int8_t g_scratch[H + 3 + 2 * ((I + 3) / 4 * 4 + (H + 3) / 4 * 4)];  // int8_lstm_scratch_bytes(params)
#else
std::int8_t g_scratch[H];
#endif
std::int8_t g_h[H];
std::int16_t g_c[H];
Int8LstmParams g_params;

int run() {
  for (int g = 0; g < kGates; ++g) {
    // −127..127, as symmetric quantizers give them (what the interleaved layout stores)
    for (auto& v : g_w[g]) v = static_cast<std::int8_t>(static_cast<int>(next_u32() % 255) - 127);
    for (auto& v : g_r[g]) v = static_cast<std::int8_t>(static_cast<int>(next_u32() % 255) - 127);
    for (auto& v : g_b[g]) v = static_cast<std::int32_t>(next_u32() % 20001) - 10000;
  }
  for (auto& v : g_x) v = static_cast<std::int8_t>(next_u32());
  Int8LstmQuantization q;
  q.input_scale = 1.0f / 64;
  q.input_zp = 3;
  for (int g = 0; g < kGates; ++g) {
    q.w_scale[g] = 1.0f / 512;
    q.r_scale[g] = 1.0f / 512;
  }
#if BENCH_INT8 == 4
  for (int g = 0; g < kGates; ++g) {  // per channel: the scales above times 1 .. 1.75 by unit
    for (int j = 0; j < H; ++j) g_row_scales[0][g][j] = g_row_scales[1][g][j] = (1.0f + 0.25f * (j % 4)) / 512;
    q.w_scales[g] = g_row_scales[0][g];
    q.r_scales[g] = g_row_scales[1][g];
  }
#endif
  q.state_scale = q.hidden_scale = 1.0f / 128;
  q.state_zp = q.hidden_zp = -5;
  // 2^-11 by default, as Keras conversions with a cell clip of 10; without a clip the converter
  // picks the scale from the calibrated cell range (2^-15 or 2^-14 for |c| up to 1 or 2)
  q.cell_scale = std::ldexp(1.0f, BENCH_CELL_LOG2);
  q.cell_clip = BENCH_CELL_LOG2 == -11 ? 10.0f : 0.0f;
#if BENCH_INTERLEAVED
  for (int g = 0; g < kGates; ++g) {
    if (!interleave4(g_w[g], H, I, g_wi[g]) || !interleave4(g_r[g], H, H, g_ri[g])) {
      put("FAIL: interleave4");
      end_line();
      return 1;
    }
  }
  q.weight_layout = Int8WeightLayout::interleaved4;
  const std::int8_t* w[kGates] = {g_wi[0], g_wi[1], g_wi[2], g_wi[3]};
  const std::int8_t* r[kGates] = {g_ri[0], g_ri[1], g_ri[2], g_ri[3]};
#else
  const std::int8_t* w[kGates] = {g_w[0], g_w[1], g_w[2], g_w[3]};
  const std::int8_t* r[kGates] = {g_r[0], g_r[1], g_r[2], g_r[3]};
#endif
  const std::int32_t* b[kGates] = {g_b[0], g_b[1], g_b[2], g_b[3]};
  if (int8_lstm_prepare(q, I, H, w, r, b, g_bias_storage, sizeof g_bias_storage / 4, &g_params) != rnncore::Status::ok) {
    put("FAIL: int8_lstm_prepare");
    end_line();
    return 1;
  }
#if BENCH_INT8 == 2
  g_params.dot = i8_dot_1x1__scalar;
#endif
  int n_kernels = 0;
  const DotRowsKernel* kernels = int8_dot_kernels(&n_kernels);
  const char* kernel = "?";
  for (int i = 0; i < n_kernels; ++i) {
    if (kernels[i].fn == g_params.dot) kernel = kernels[i].name;
  }
#if BENCH_INTERLEAVED
  const DotPanelsKernel* panel_kernels = int8_panel_kernels(&n_kernels);
  for (int i = 0; i < n_kernels; ++i) {
    if (panel_kernels[i].fn == g_params.dot_panels) kernel = panel_kernels[i].name;
  }
#endif
  board_stack_mark();
  const int steps = g_steps, reps = g_reps;
  for (int rep = 0; rep < reps; ++rep) {
#if BENCH_INT8 == 3
    // The kernel calls of int8_lstm_step (src/int8_lstm_step.cpp, step_block) and nothing else.
    for (int t = 0; t < steps; ++t) {
      std::int32_t ax[kUnitBlock], ah[kUnitBlock];
      for (int j0 = 0; j0 < H; j0 += kUnitBlock) {
        const int n = H - j0 < kUnitBlock ? H - j0 : kUnitBlock;
        for (int g = 0; g < kGates; ++g) {
          g_params.dot(g_params.w[g] + j0 * I, n, I, g_x + t * I, g_params.x_bias[g] + j0, ax);
          g_params.dot(g_params.r[g] + j0 * H, n, H, g_h, g_params.h_bias[g] + j0, ah);
        }
      }
    }
#elif BENCH_INT8 == 6
    // The same for interleaved weights: x and h widened, then the kernel calls.
    for (int t = 0; t < steps; ++t) {
      std::int32_t ax[kUnitBlock], ah[kUnitBlock];
      alignas(4) std::int16_t xw[(I + 3) / 4 * 4], hw[(H + 3) / 4 * 4];
      widen_pairs(g_x + t * I, I, xw);
      widen_pairs(g_h, H, hw);
      const int xk = (I + 3) / 4, hk = (H + 3) / 4;
      for (int j0 = 0; j0 < H; j0 += kUnitBlock) {
        const int n = H - j0 < kUnitBlock ? H - j0 : kUnitBlock;
        for (int g = 0; g < kGates; ++g) {
          const PanelProduct products[2] = {
              {g_params.w[g] + interleaved4_offset(j0, 0, xk), xw, g_params.x_bias[g] + j0, ax, n, xk},
              {g_params.r[g] + interleaved4_offset(j0, 0, hk), hw, g_params.h_bias[g] + j0, ah, n, hk}};
          g_params.dot_panels(products, 2);
        }
      }
    }
#else
    if (int8_lstm_sequence(g_params, 1, steps, g_x, nullptr, g_h, g_c, g_scratch, sizeof g_scratch) !=
        rnncore::Status::ok) {
      put("FAIL: int8_lstm_sequence");
      end_line();
      return 1;
    }
#endif
  }
  const unsigned long stack = board_stack_high_water();
  std::uint32_t sum = 0;  // so that the result is used
  for (int j = 0; j < H; ++j) sum = sum * 31u + static_cast<std::uint8_t>(g_h[j]) + static_cast<std::uint16_t>(g_c[j]);
  put("BENCH int8");
  put(" kernel=");
  put(kernel);
  report("H", H);
  report("T", static_cast<unsigned long>(steps));
  report("R", static_cast<unsigned long>(reps));
  end_line();
  put("MEM");
#if BENCH_INTERLEAVED
  report("weight_bytes", sizeof g_wi + sizeof g_ri);
#else
  report("weight_bytes", sizeof g_w + sizeof g_r);
#endif
  report("bias_bytes", sizeof g_b);
  report("eff_bias_bytes", sizeof g_bias_storage);
  report("state_bytes", sizeof g_h + sizeof g_c);
  report("scratch_bytes", sizeof g_scratch);
  report("params_bytes", sizeof g_params);
  report("stack_bytes", stack);
  report("checksum", sum);
  end_line();
  return 0;
}
#else
constexpr std::size_t kParams = static_cast<std::size_t>(4) * H * (I + H) + static_cast<std::size_t>(8) * H;
float g_weights[kParams];  // canonical weights (flash on a real part)
// Packed weights and workspace: the arena the C API needs; sized generously, checked below.
constexpr std::size_t kArenaBytes = kParams * 4 + 64 * 1024;
unsigned char g_arena[kArenaBytes] __attribute__((aligned(RNNCORE_ALIGNMENT)));
float g_x[BENCH_MAX_T * I], g_y[BENCH_MAX_T * H];
float g_h[H], g_c[H];
rnncore_plan g_plan;

int run() {
  rnncore_spec spec;
  rnncore_spec_init(&spec);
  spec.mode = RNNCORE_MODE_LSTM;
  spec.input_size = I;
  spec.hidden_size = H;
  spec.num_layers = 1;
  spec.direction = RNNCORE_UNIDIRECTIONAL;
  spec.input_mode = RNNCORE_INPUT_LINEAR;
  spec.dtype = RNNCORE_F32;
  if (static_cast<std::size_t>(rnncore_param_count(&spec)) != kParams) {
    put("FAIL: parameter count");
    end_line();
    return 1;
  }
  const float scale = 1.0f / static_cast<float>(H);
  for (auto& v : g_weights) v = (static_cast<float>(next_u32() >> 8) / 16777216.0f - 0.5f) * scale;
  for (auto& v : g_x) v = static_cast<float>(next_u32() >> 8) / 16777216.0f - 0.5f;
  rnncore_plan_options options;
  rnncore_plan_options_init(&options);
  options.max_batch = 1;
  options.max_seq_len = BENCH_MAX_T;
  options.max_isa = RNNCORE_ISA_NONE;
  rnncore_status status = rnncore_plan_create(&spec, &options, &g_plan);
  if (status != RNNCORE_OK) return put_failure("plan", status);
  const std::size_t packed = rnncore_plan_packed_weight_bytes(&g_plan);
  const std::size_t ws_at = (packed + RNNCORE_ALIGNMENT - 1) / RNNCORE_ALIGNMENT * RNNCORE_ALIGNMENT;
  const std::size_t ws = rnncore_plan_workspace_bytes(&g_plan);
  if (ws_at + ws > kArenaBytes) {
    put("FAIL: arena too small");
    end_line();
    return 1;
  }
  status = rnncore_plan_pack_weights(&g_plan, g_weights, g_arena, packed);
  if (status != RNNCORE_OK) return put_failure("pack", status);
  board_stack_mark();
  const int steps = g_steps, reps = g_reps;
  for (int rep = 0; rep < reps; ++rep) {
    rnncore_forward_args args;
    rnncore_forward_args_init(&args);
    args.batch = 1;
    args.seq_len = steps;
    args.x = g_x;
    args.y = g_y;
    args.hy = g_h;
    args.cy = g_c;
    status = rnncore_forward(&g_plan, g_arena, g_arena + ws_at, ws, &args);
    if (status != RNNCORE_OK) return put_failure("forward", status);
  }
  const unsigned long stack = board_stack_high_water();
  std::uint32_t sum = 0;
  for (int j = 0; j < H; ++j) {
    std::uint32_t u;
    std::memcpy(&u, &g_h[j], 4);
    sum = sum * 31u + u;
  }
  put("BENCH f32 kernel=");
  put(rnncore_plan_kernel_name(&g_plan));
  report("H", H);
  report("T", static_cast<unsigned long>(steps));
  report("R", static_cast<unsigned long>(reps));
  end_line();
  put("MEM");
  report("weight_bytes", sizeof g_weights);
  report("packed_bytes", packed);
  report("workspace_bytes", ws);
  report("state_bytes", sizeof g_h + sizeof g_c);
  report("stack_bytes", stack);
  report("checksum", sum);
  end_line();
  return 0;
}
#endif

}  // namespace

extern "C" int main(void) { return run(); }

// The integer LSTM's step (src/internal/int8_lstm.hpp; semantics in docs/int8.md): LiteRT's
// 8x8_16 LSTM, bit for bit, a block of kUnitBlock units at a time: the matrix-vector products
// (a registered kernel, src/internal/kernels.hpp), then the gates, the cell and the output state.
// The rest of a step runs, in this order: the step kernels of hosts that params hold
// (simd/i8_step_<isa>.cpp, on whole groups of lanes), or on Thumb-2 the assembly loops
// (src/internal/int8_thumb2.hpp, on pairs), then the C loops of the reference
// (src/internal/int8_step_loops.hpp, src/int8_reference.cpp) on the units left: a build with
// neither runs the reference's loops alone (update_cells_any<true>: the loops with the kernels'
// branches). Both are headers, so that the Cortex-M step compiles them as its own code, its
// instructions as before; the registry lists the same functions (src/kernels.cpp) and
// tests/checkkernels.cpp checks each against the reference (tests/cross/ checks the step on the
// emulated core). The
// arithmetic is the fixed-point library's (src/internal/int8_fixed_point.hpp); the activation
// tables are src/int8_tables.cpp's.
#include <cstdint>
#include <cstring>

#include "src/internal/error.hpp"
#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_step_loops.hpp"
#include "src/internal/int8_tables.hpp"
#include "src/internal/int8_thumb2.hpp"

namespace rnncore {
namespace q8 {

std::int32_t multiply_by_quantized_multiplier(std::int32_t x, QuantizedMultiplier m) {
  // the step's arithmetic wherever it applies, so that the tests of this function cover it
  return m.multiplier >= (std::int32_t{1} << 30) ? StepMultiplier(m)(x) : rescale(x, m);
}

std::int16_t sigmoid_q3_12(std::int16_t x) { return sigmoid_fixed(x); }

std::int16_t tanh_q(std::int16_t x, int integer_bits) {
  switch (integer_bits) {
    case 0: return tanh_fixed<0>(x);
    case 1: return tanh_fixed<1>(x);
    case 2: return tanh_fixed<2>(x);
    case 3: return tanh_fixed<3>(x);
    case 4: return tanh_fixed<4>(x);
    case 5: return tanh_fixed<5>(x);
    case 6: return tanh_fixed<6>(x);
    default: return 0;
  }
}

namespace {

// A gate per tensor: one pair of multipliers, and the loop without the left-shift case where (as
// for most models: effective scales below 1) both shift right.
template <bool kTanh>
RNNCORE_Q8_INLINE void gate_units_per_tensor(int n, const std::int32_t* ax, const std::int32_t* ah, std::int16_t* act,
                                             const StepMultiplier& mx, const StepMultiplier& mh) {
  const auto x_mult = [&mx](int) -> const StepMultiplier& { return mx; };
  const auto h_mult = [&mh](int) -> const StepMultiplier& { return mh; };
  const GateActivation<kTanh> activation;
  if (mx.right > 0 && mh.right > 0) {
    gate_units<true>(n, ax, ah, act, x_mult, h_mult, activation);
  } else {
    gate_units<false>(n, ax, ah, act, x_mult, h_mult, activation);
  }
}

// A block's int32 sums of one gate, the input part then the recurrent part (thumb2::gate_act_pairs
// reads both from one pointer).
struct StepSums {
  std::int32_t x[kUnitBlock];
  std::int32_t h[kUnitBlock];
};

// A step's operands for one batch row: x and h, and with interleaved weights the same widened
// (widen_pairs; null otherwise).
struct StepOperands {
  const std::int8_t* x;
  const std::int8_t* h;
  const std::int16_t* x_pairs;
  const std::int16_t* h_pairs;
  const std::int16_t* x_gates;  // a token table's row (Int8LstmParams::token_gates), or null
};

// Units [j0, j0 + n) of one batch row (n <= kUnitBlock): the four gates from x and the previous
// output state h, then the cell (c, in place) and the new output state (into h_next; h itself
// is still read by the blocks after this one). kPerChannel: the multipliers are per unit;
// kInterleaved: the weights are interleaved (the panel kernel, on x and h widened); kTokens: a
// token table's layer (in.x_gates: the input parts are read, only R multiplies), chosen once a row
// so that a step without a table pays no test for it.

template <bool kPerChannel, bool kInterleaved, bool kTokens>
RNNCORE_Q8_INLINE void step_block(const Int8LstmParams& p, int j0, int n, const StepOperands& in, std::int16_t* c,
                                  std::int8_t* h_next) {
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t j = static_cast<std::size_t>(j0);
  const int x_words = interleaved4_words(p.input_size), h_words = interleaved4_words(p.hidden_size);
  StepSums sums;
  std::int32_t* const ax = sums.x;
  std::int32_t* const ah = sums.h;
  alignas(4) std::int16_t act[kGates][kUnitBlock];
  // Interleaved weights: a gate's two products (x and h), set up once a block but for the weights
  // and biases. j0 is a multiple of kUnitBlock, so of 4: the block starts at a panel.
  PanelProduct products[2] = {{nullptr, in.x_pairs, nullptr, ax, n, x_words}, {nullptr, in.h_pairs, nullptr, ah, n, h_words}};
  // (bytes: the int16 panel layout's panels are twice as long)
  const std::size_t wide = kInterleaved && p.layout == Int8WeightLayout::interleaved4_i16 ? 2 : 1;
  const std::size_t x_panels = kInterleaved ? wide * interleaved4_offset(j0, 0, x_words) : j * I;
  const std::size_t h_panels = kInterleaved ? wide * interleaved4_offset(j0, 0, h_words) : j * H;
#if defined(RNNCORE_Q8_CENTRED_TABLES)
  [[maybe_unused]] const std::int16_t* const sigmoid_centre = GateActivation<false>().centre;
  [[maybe_unused]] const std::int16_t* const tanh_centre = GateActivation<true>().centre;
#endif
  for (int g = 0; g < kGates; ++g) {
    // int32 accumulators as in TFLite (the kernels wrap, as TFLite's do, without overflow UB).
    if constexpr (kTokens) {  // a token table: the input parts are read, only R multiplies
      const std::int16_t* const xg = in.x_gates + static_cast<std::size_t>(g) * H + j;
      for (int u = 0; u < n; ++u) ax[u] = int8_token_table_sum(xg[u]);
      if constexpr (!kInterleaved) {
        p.dot(p.r[g] + h_panels, n, p.hidden_size, in.h, p.h_bias[g] + j, ah);
      } else {
        products[1].w = p.r[g] + h_panels;
        products[1].bias = p.h_bias[g] + j;
        p.dot_panels(products + 1, 1);
      }
    } else if constexpr (!kInterleaved) {
      p.dot(p.w[g] + x_panels, n, p.input_size, in.x, p.x_bias[g] + j, ax);
      p.dot(p.r[g] + h_panels, n, p.hidden_size, in.h, p.h_bias[g] + j, ah);
    } else {
      products[0].w = p.w[g] + x_panels;
      products[0].bias = p.x_bias[g] + j;
      products[1].w = p.r[g] + h_panels;
      products[1].bias = p.h_bias[g] + j;
      p.dot_panels(products, 2);
    }
    int done = 0;  // units a step kernel or the assembly loop took; the rest go to the C loops below
#if !defined(RNNCORE_NO_HEAP)
    if (p.gate_activations != nullptr) {
      GateScaling s{p.x_mult[g], p.h_mult[g]};
      if constexpr (kPerChannel) {
        s.x_rows = p.x_mult_rows[g] + 2 * j;
        s.h_rows = p.h_mult_rows[g] + 2 * j;
      }
      done = p.gate_activations(n, ax, ah, s, g == 2 ? tanh_centre : sigmoid_centre, act[g]);
    } else  // (the Thumb-2 loop, where the build has it)
#endif
    {
#if defined(RNNCORE_Q8_THUMB2_LOOPS) && defined(RNNCORE_Q8_CENTRED_TABLES)
      // the usual case: per tensor, both multipliers shift right; an odd block's last unit goes below
      if (!kPerChannel && p.x_mult[g].shift < 0 && p.h_mult[g].shift < 0 && n >= 2) {
        done = n & ~1;
        thumb2::gate_act_pairs(done / 2, ax, act[g], p.x_mult[g], p.h_mult[g], g == 2 ? tanh_centre : sigmoid_centre);
      }
#endif
    }
    if (done == n) continue;
    if constexpr (!kPerChannel) {
      const StepMultiplier mx(p.x_mult[g]), mh(p.h_mult[g]);
      g == 2 ? gate_units_per_tensor<true>(n - done, ax + done, ah + done, act[g] + done, mx, mh)
             : gate_units_per_tensor<false>(n - done, ax + done, ah + done, act[g] + done, mx, mh);
    } else {  // each unit's own multipliers
      const std::int32_t* const xm = p.x_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const std::int32_t* const hm = p.h_mult_rows[g] + 2 * (j + static_cast<std::size_t>(done));
      const auto x_mult = [xm](int u) { return StepMultiplier({xm[2 * u], xm[2 * u + 1]}); };
      const auto h_mult = [hm](int u) { return StepMultiplier({hm[2 * u], hm[2 * u + 1]}); };
      g == 2 ? gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<true>())
             : gate_units<false>(n - done, ax + done, ah + done, act[g] + done, x_mult, h_mult, GateActivation<false>());
    }
  }
  update_cells_any</*kKernels=*/true>(p, j, n, act, c, h_next);
}

// The step's rows, each block after block. One copy per kind of layer, chosen once a step by
// int8_lstm_step and not inlined there: six copies of the block inlined into one function took a
// frame of 728 bytes on a Cortex-M4 (GCC 12 -O2); each of these takes about what the four copies
// before kTokens took together (520).
template <bool kPerChannel, bool kInterleaved, bool kTokens>
RNNCORE_Q8_NOINLINE void step_rows(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                                   std::int16_t* c, std::int8_t* scratch) {
  const int H = p.hidden_size;
  const std::size_t Hs = static_cast<std::size_t>(H), Is = static_cast<std::size_t>(p.input_size);
  // Interleaved weights: x and h widened once per step into the scratch, 4-byte aligned; the
  // blocks read h only widened, so the new state goes straight into h. Row-major weights: the
  // blocks read h itself, so the new state waits in the scratch until the last block.
  std::int16_t* x_pairs = nullptr;
  std::int16_t* h_pairs = nullptr;
  if constexpr (kInterleaved) {
    const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(scratch) + 3u) & ~std::uintptr_t{3};
    x_pairs = reinterpret_cast<std::int16_t*>(at);
    h_pairs = x_pairs + 4 * interleaved4_words(p.input_size);
  }
  for (int b = 0; b < batch; ++b) {
    const std::size_t bs = static_cast<std::size_t>(b);
    std::int8_t* hb = h + bs * Hs;
    // (a token table's layer: x is the token's row of 4H int16 input parts, one row per batch row)
    const std::int16_t* x_gates = kTokens ? reinterpret_cast<const std::int16_t*>(x) + bs * 4 * Hs : nullptr;
    const StepOperands in{x + bs * Is, hb, x_pairs, h_pairs, x_gates};
    if constexpr (kInterleaved) {
      if constexpr (!kTokens) widen_pairs(in.x, p.input_size, x_pairs);
      widen_pairs(hb, H, h_pairs);
    }
    std::int8_t* const h_next = kInterleaved ? hb : scratch;
    for (int j0 = 0; j0 < H; j0 += kUnitBlock) {
      const int n = H - j0 < kUnitBlock ? H - j0 : kUnitBlock;
      step_block<kPerChannel, kInterleaved, kTokens>(p, j0, n, in, c + bs * Hs, h_next);
    }
    if constexpr (!kInterleaved) std::memcpy(hb, scratch, Hs);
  }
}

// The step of a layer without a token table. int8_lstm_sequence (rnncore/int8.h's run) calls it
// directly: only a plan makes token tables, so an image that runs its layers through int8.h links
// neither token-table copy of step_rows (3,792 bytes on a Cortex-M7).
inline void step_without_tokens(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                                std::int16_t* c, std::int8_t* scratch) {
  const bool per_channel = p.x_mult_rows[0] != nullptr;
  if (int8_panel_layout(p.layout)) {
    per_channel ? step_rows<true, true, false>(p, batch, x, h, c, scratch) : step_rows<false, true, false>(p, batch, x, h, c, scratch);
  } else {
    per_channel ? step_rows<true, false, false>(p, batch, x, h, c, scratch) : step_rows<false, false, false>(p, batch, x, h, c, scratch);
  }
}

}  // namespace

// (step_without_tokens' two lines written out again: the plan's step compiles as before, to the instruction)
void int8_lstm_step(const Int8LstmParams& p, int batch, const std::int8_t* x, std::int8_t* h,
                    std::int16_t* c, std::int8_t* scratch) {
  const bool per_channel = p.x_mult_rows[0] != nullptr, interleaved = int8_panel_layout(p.layout);
  if (p.token_gates) {  // (per tensor: Plan::create refuses a token table with per-channel scales)
    interleaved ? step_rows<false, true, true>(p, batch, x, h, c, scratch) : step_rows<false, false, true>(p, batch, x, h, c, scratch);
  } else if (interleaved) {
    per_channel ? step_rows<true, true, false>(p, batch, x, h, c, scratch) : step_rows<false, true, false>(p, batch, x, h, c, scratch);
  } else {
    per_channel ? step_rows<true, false, false>(p, batch, x, h, c, scratch) : step_rows<false, false, false>(p, batch, x, h, c, scratch);
  }
}

Status int8_lstm_sequence(const Int8LstmParams& p, int batch, int seq_len, const std::int8_t* x,
                          std::int8_t* y, std::int8_t* h, std::int16_t* c, std::int8_t* scratch,
                          std::size_t scratch_bytes) {
  detail::clear_error();
  RNNCORE_ENSURE(x != nullptr && h != nullptr && c != nullptr && scratch != nullptr, Status::null_pointer,
                 "int8_lstm_sequence: x, h, c and scratch must not be null");
  RNNCORE_ENSURE(p.hidden_size > 0 && p.input_size > 0 && p.w[0] != nullptr, Status::weights_not_packed,
                 "int8_lstm_sequence: the parameters were not prepared (int8_lstm_prepare)");
  RNNCORE_ENSURE(batch >= 0 && seq_len >= 0, Status::invalid_size,
                 "int8_lstm_sequence: batch %d and seq_len %d must be >= 0", batch, seq_len);
  RNNCORE_ENSURE(!p.token_gates, Status::unsupported, "int8_lstm_sequence: a token table's layer runs in a plan only");
  RNNCORE_ENSURE(scratch_bytes >= int8_lstm_scratch_bytes(p), Status::buffer_too_small,
                 "int8_lstm_sequence: scratch has %zu bytes, needs %zu", scratch_bytes, int8_lstm_scratch_bytes(p));
  const std::size_t H = static_cast<std::size_t>(p.hidden_size), I = static_cast<std::size_t>(p.input_size);
  const std::size_t T = static_cast<std::size_t>(seq_len);
  for (int b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < T; ++t) {
      step_without_tokens(p, 1, x + (b * T + t) * I, h + b * H, c + b * H, scratch);
      if (y != nullptr) {
        for (std::size_t j = 0; j < H; ++j) y[(b * T + t) * H + j] = h[b * H + j];
      }
    }
  }
  return Status::ok;
}

}  // namespace q8
}  // namespace rnncore

// The integer LSTM's prepare (src/internal/int8_lstm.hpp; docs/int8.md): the model's scales
// to fixed-point multipliers, the zero points folded into the biases (caller memory), the weight
// layout and the kernels chosen. Runs once per layer, before any step.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "src/internal/error.hpp"
#include "src/internal/int8_lstm.hpp"
#include "src/internal/int8_tables.hpp"

namespace rnncore {
namespace q8 {

Status quantize_multiplier(double scale, const char* what, QuantizedMultiplier* out) {
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "quantize_multiplier: out is null");
  RNNCORE_ENSURE(std::isfinite(scale) && scale > 0.0, Status::invalid_size,
                 "%s: scale %g must be finite and positive", what, scale);
  int shift = 0;
  const double q = std::frexp(scale, &shift);  // scale = q · 2^shift, q in [0.5, 1)
  std::int64_t q_fixed = static_cast<std::int64_t>(std::round(q * static_cast<double>(std::int64_t{1} << 31)));
  if (q_fixed == (std::int64_t{1} << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  RNNCORE_ENSURE(shift >= -31, Status::invalid_size,
                 "%s: scale %g is below 2^-32; its fixed-point multiplier would round every product to 0",
                 what, scale);
  RNNCORE_ENSURE(shift <= 30, Status::invalid_size,
                 "%s: scale %g is 2^30 or more; its fixed-point multiplier overflows", what, scale);
  out->multiplier = static_cast<std::int32_t>(q_fixed);
  out->shift = shift;
  return Status::ok;
}


namespace {

const char* const kGateName[kGates] = {"i", "f", "g", "o"};

// The weights' layout: a known one, and interleaved weights 4-byte aligned (the kernel reads
// them with LDM, which faults on an unaligned address). Sets the layout and its kernel.
Status check_layout(Int8WeightLayout layout, const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                    Int8LstmParams* p) {
  RNNCORE_ENSURE(layout == Int8WeightLayout::row_major || int8_panel_layout(layout), Status::invalid_enum,
                 "int8_lstm_prepare: weight layout %d is none of row-major (0), interleaved (1), int16 panels (2)",
                 static_cast<int>(layout));
  p->layout = layout;
  if (!int8_panel_layout(layout)) return Status::ok;
  for (int g = 0; g < kGates; ++g) {
    RNNCORE_ENSURE(reinterpret_cast<std::uintptr_t>(w[g]) % 4 == 0 && reinterpret_cast<std::uintptr_t>(r[g]) % 4 == 0,
                   Status::misaligned, "int8_lstm_prepare: interleaved weights of gate %s are not 4-byte aligned",
                   kGateName[g]);
  }
  int n = 0;
  const DotPanelsKernel* kernels =
      layout == Int8WeightLayout::interleaved4 ? int8_panel_kernels(&n) : int16_panel_kernels(&n);
  p->dot_panels = kernels[n - 1].fn;
  return Status::ok;
}

// Weight (j, k) of a [rows, k_size] matrix in `layout`.
inline std::int8_t weight_at(const std::int8_t* m, Int8WeightLayout layout, int j, int k, int k_size) {
  switch (layout) {
    case Int8WeightLayout::interleaved4: return interleaved4_weight(m, j, k, interleaved4_words(k_size));
    case Int8WeightLayout::interleaved4_i16: return interleaved4_i16_weight(m, j, k, interleaved4_words(k_size));
    default: return m[static_cast<std::size_t>(j) * static_cast<std::size_t>(k_size) + k];
  }
}

// Everything prepare derives from the quantization alone: the checks of sizes, zero points and
// scales, the fixed-point multipliers, the cell shift and clip (into *out, weights untouched).
Status derive_scales(const Int8LstmQuantization& q, int input_size, int hidden_size,
                     const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                     const std::int32_t* bias_storage, std::size_t bias_storage_words, Int8LstmParams* out) {
  RNNCORE_ENSURE(out != nullptr && w != nullptr && r != nullptr && bias_storage != nullptr,
                 Status::null_pointer, "int8_lstm_prepare: out, w, r and the bias storage must not be null");
  // Up to 2^16 units an int8 dot product (|w x| <= 2^14 per term) stays within 2^30.
  RNNCORE_ENSURE(input_size > 0 && hidden_size > 0 && input_size <= (1 << 16) && hidden_size <= (1 << 16),
                 Status::invalid_size, "int8_lstm_prepare: input_size %d and hidden_size %d must be in 1..65536",
                 input_size, hidden_size);
  const bool per_channel = int8_lstm_per_channel(q);
  for (int g = 0; g < kGates; ++g) {
    RNNCORE_ENSURE(w[g] != nullptr && r[g] != nullptr, Status::null_pointer,
                   "int8_lstm_prepare: weights of gate %s are null", kGateName[g]);
    RNNCORE_ENSURE((q.w_scales[g] != nullptr) == per_channel && (q.r_scales[g] != nullptr) == per_channel,
                   Status::null_pointer,
                   "int8_lstm_prepare: per-channel weight scales are given for some weights only (gate %s); give "
                   "them for the input and recurrent weights of every gate, or for none",
                   kGateName[g]);
  }
  RNNCORE_ENSURE(bias_storage_words >= int8_lstm_storage_words(q, hidden_size), Status::buffer_too_small,
                 "int8_lstm_prepare: bias_storage has %zu int32 words, needs %zu", bias_storage_words,
                 int8_lstm_storage_words(q, hidden_size));
  const auto zp_ok = [](std::int32_t zp) { return zp >= -128 && zp <= 127; };
  RNNCORE_ENSURE(zp_ok(q.input_zp) && zp_ok(q.state_zp) && zp_ok(q.hidden_zp), Status::invalid_size,
                 "int8_lstm_prepare: zero points (input %d, state %d, hidden %d) must be in -128..127",
                 static_cast<int>(q.input_zp), static_cast<int>(q.state_zp), static_cast<int>(q.hidden_zp));
  const auto scale_ok = [](float s) { return std::isfinite(s) && s > 0.0f; };
  RNNCORE_ENSURE(scale_ok(q.input_scale), Status::invalid_size, "input scale %g must be finite and positive",
                 static_cast<double>(q.input_scale));
  RNNCORE_ENSURE(scale_ok(q.state_scale), Status::invalid_size,
                 "output state scale %g must be finite and positive", static_cast<double>(q.state_scale));
  RNNCORE_ENSURE(scale_ok(q.hidden_scale), Status::invalid_size, "hidden scale %g must be finite and positive",
                 static_cast<double>(q.hidden_scale));
  RNNCORE_ENSURE(scale_ok(q.cell_scale), Status::invalid_size, "cell state scale %g must be finite and positive",
                 static_cast<double>(q.cell_scale));
  RNNCORE_ENSURE(std::isfinite(q.cell_clip) && q.cell_clip >= 0.0f, Status::invalid_size,
                 "cell clip %g must be finite and >= 0 (0: none)", static_cast<double>(q.cell_clip));

  Int8LstmParams p;
  p.input_size = input_size;
  p.hidden_size = hidden_size;
  // The gate pre-activations are int16 Q3.12 (scale 2^-12); the effective scales are formed in
  // float, as TFLite forms them, before they become fixed-point multipliers.
  const float gate_scale = 1.0f / 4096.0f;
  // Named without snprintf: firmware images link no printf.
  static const char* const kInputWhat[kGates] = {"effective input scale of gate i", "effective input scale of gate f",
                                                 "effective input scale of gate g", "effective input scale of gate o"};
  static const char* const kRecurrentWhat[kGates] = {
      "effective recurrent scale of gate i", "effective recurrent scale of gate f",
      "effective recurrent scale of gate g", "effective recurrent scale of gate o"};
  for (int g = 0; g < kGates && !per_channel; ++g) {  // per channel: derive_row_multipliers
    RNNCORE_ENSURE(scale_ok(q.w_scale[g]), Status::invalid_size,
                   "input weight scale of gate %s is %g; it must be finite and positive", kGateName[g],
                   static_cast<double>(q.w_scale[g]));
    RNNCORE_ENSURE(scale_ok(q.r_scale[g]), Status::invalid_size,
                   "recurrent weight scale of gate %s is %g; it must be finite and positive", kGateName[g],
                   static_cast<double>(q.r_scale[g]));
    const float ex = q.w_scale[g] * q.input_scale / gate_scale;
    const float eh = q.r_scale[g] * q.state_scale / gate_scale;
    RNNCORE_RETURN_IF_ERROR(quantize_multiplier(ex, kInputWhat[g], &p.x_mult[g]));
    RNNCORE_RETURN_IF_ERROR(quantize_multiplier(eh, kRecurrentWhat[g], &p.h_mult[g]));
  }
  const float two_m15 = 1.0f / 32768.0f;
  RNNCORE_RETURN_IF_ERROR(
      quantize_multiplier(two_m15 / q.hidden_scale * two_m15, "effective hidden scale", &p.hidden_mult));

  int cell_log2 = 0;
  const float mantissa = std::frexp(q.cell_scale, &cell_log2);
  RNNCORE_ENSURE(mantissa == 0.5f, Status::unsupported,
                 "cell state scale %g is not a power of two (the integer LSTM needs 2^k)",
                 static_cast<double>(q.cell_scale));
  cell_log2 -= 1;
  // Finer than 2^-15 the cell state has a negative number of integer bits: LiteRT's ApplyTanh has
  // no case for it and leaves its output buffer as it was (see int8_lstm_step); below 2^-30 the
  // input-times-cell-gate shift 30 + k would be negative.
  RNNCORE_ENSURE(cell_log2 >= -30 && cell_log2 <= -9, Status::unsupported,
                 "cell state scale 2^%d is outside 2^-30 .. 2^-9 (tanh of the cell state needs at most 6 integer bits)",
                 cell_log2);
  p.cell_log2 = cell_log2;
  if (q.cell_clip > 0.0f) {
    float c = q.cell_clip / q.cell_scale;
    c = c < -32768.0f ? -32768.0f : (c > 32767.0f ? 32767.0f : c);
    p.cell_clip = static_cast<std::int16_t>(c);
  }
  p.hidden_zp = q.hidden_zp;
  for (int g = 0; g < kGates; ++g) {
    p.w[g] = w[g];
    p.r[g] = r[g];
  }
  p.dot = int8_best_dot_kernel().fn;
  if (const StepKernels* k = int8_best_step_kernels()) {
    p.gate_activations = k->gate;
    p.cell_update = k->cell;
  }
  RNNCORE_RETURN_IF_ERROR(check_layout(q.weight_layout, w, r, &p));
  *out = p;
  return Status::ok;
}

// The effective biases: the zero points' products with the weights' row sums, folded once. With
// `check` the values are already in `storage` (folded earlier, e.g. by `rnncore export-c` into
// flash) and must equal what folding gives; otherwise they are written there.
Status fold_biases(const Int8LstmQuantization& q, const std::int32_t* const bias[kGates], const std::int32_t* check,
                   std::int32_t* storage, Int8LstmParams* p) {
  const int H = p->hidden_size, I = p->input_size;
  for (int g = 0; g < kGates; ++g) {
    const std::size_t xo = static_cast<std::size_t>(g) * H, ho = static_cast<std::size_t>(kGates + g) * H;
    for (int j = 0; j < H; ++j) {
      std::int32_t sw = 0, sr = 0;
      for (int k = 0; k < I; ++k) sw += weight_at(p->w[g], p->layout, j, k, I);
      for (int k = 0; k < H; ++k) sr += weight_at(p->r[g], p->layout, j, k, H);
      const std::int64_t bx = static_cast<std::int64_t>(bias != nullptr && bias[g] != nullptr ? bias[g][j] : 0) -
                              static_cast<std::int64_t>(q.input_zp) * sw;
      const std::int64_t bh = -static_cast<std::int64_t>(q.state_zp) * sr;  // |z_h| <= 128, |sum| <= 2^23
      RNNCORE_ENSURE(bx >= std::numeric_limits<std::int32_t>::min() && bx <= std::numeric_limits<std::int32_t>::max(),
                     Status::invalid_size, "effective input bias of gate %s, unit %d (%lld) overflows int32",
                     kGateName[g], j, static_cast<long long>(bx));
      if (check != nullptr) {
        RNNCORE_ENSURE(check[xo + j] == bx && check[ho + j] == bh, Status::invalid_size,
                       "the folded biases of gate %s, unit %d do not match the weights, biases and zero points "
                       "(fold them again, e.g. export the model again%s)",
                       kGateName[g], j,
                       p->layout == Int8WeightLayout::interleaved4
                           ? "; interleaved weights exported before 2026-11-25 are in the older interleaved layout"
                           : "");
      } else {
        storage[xo + j] = static_cast<std::int32_t>(bx);
        storage[ho + j] = static_cast<std::int32_t>(bh);
      }
    }
    const std::int32_t* base = check != nullptr ? check : storage;
    p->x_bias[g] = base + xo;
    p->h_bias[g] = base + ho;
  }
  return Status::ok;
}

// Per channel: each unit's input and recurrent multipliers, formed as the per-tensor ones are,
// from the row's own weight scale; into storage after the biases (or checked there, as
// fold_biases checks a folded table).
Status derive_row_multipliers(const Int8LstmQuantization& q, const std::int32_t* check, std::int32_t* storage,
                              Int8LstmParams* p) {
  if (!int8_lstm_per_channel(q)) return Status::ok;
  const int H = p->hidden_size;
  const float gate_scale = 1.0f / 4096.0f;
  static const char* const kWhat[2] = {"effective input scale of a unit", "effective recurrent scale of a unit"};
  for (int part = 0; part < 2; ++part) {  // input weights, then recurrent weights
    for (int g = 0; g < kGates; ++g) {
      const float* const scales = part == 0 ? q.w_scales[g] : q.r_scales[g];
      const float operand_scale = part == 0 ? q.input_scale : q.state_scale;
      const std::size_t offset = (static_cast<std::size_t>(2 * kGates) + static_cast<std::size_t>(part * kGates + g) * 2) *
                                 static_cast<std::size_t>(H);
      for (int j = 0; j < H; ++j) {
        const float ws = scales[j];
        RNNCORE_ENSURE(std::isfinite(ws) && ws > 0.0f, Status::invalid_size,
                       "%s weight scale of gate %s, unit %d is %g; it must be finite and positive",
                       part == 0 ? "input" : "recurrent", kGateName[g], j, static_cast<double>(ws));
        QuantizedMultiplier m;
        RNNCORE_RETURN_IF_ERROR(quantize_multiplier(ws * operand_scale / gate_scale, kWhat[part], &m));
        const std::size_t at = offset + 2 * static_cast<std::size_t>(j);
        if (check != nullptr) {
          RNNCORE_ENSURE(check[at] == m.multiplier && check[at + 1] == m.shift, Status::invalid_size,
                         "the folded multipliers of gate %s, unit %d do not match the weight scales "
                         "(fold them again, e.g. export the model again)",
                         kGateName[g], j);
        } else {
          storage[at] = m.multiplier;
          storage[at + 1] = m.shift;
        }
      }
      const std::int32_t* const rows = (check != nullptr ? check : storage) + offset;
      (part == 0 ? p->x_mult_rows : p->h_mult_rows)[g] = rows;
    }
  }
  return Status::ok;
}

}  // namespace

Status int8_lstm_prepare(const Int8LstmQuantization& q, int input_size, int hidden_size,
                         const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                         const std::int32_t* const bias[kGates], std::int32_t* bias_storage,
                         std::size_t bias_storage_words, Int8LstmParams* out) {
  detail::clear_error();
  Int8LstmParams p;
  RNNCORE_RETURN_IF_ERROR(derive_scales(q, input_size, hidden_size, w, r, bias_storage, bias_storage_words, &p));
  fill_tables(p.cell_log2);
  RNNCORE_RETURN_IF_ERROR(fold_biases(q, bias, nullptr, bias_storage, &p));
  RNNCORE_RETURN_IF_ERROR(derive_row_multipliers(q, nullptr, bias_storage, &p));
  *out = p;
  return Status::ok;
}

Status int8_lstm_prepare_folded(const Int8LstmQuantization& q, int input_size, int hidden_size,
                                const std::int8_t* const w[kGates], const std::int8_t* const r[kGates],
                                const std::int32_t* const bias[kGates], const std::int32_t* folded_biases,
                                std::size_t folded_words, Int8LstmParams* out) {
  detail::clear_error();
  Int8LstmParams p;
  RNNCORE_RETURN_IF_ERROR(derive_scales(q, input_size, hidden_size, w, r, folded_biases, folded_words, &p));
  fill_tables(p.cell_log2);
  RNNCORE_RETURN_IF_ERROR(fold_biases(q, bias, folded_biases, nullptr, &p));
  RNNCORE_RETURN_IF_ERROR(derive_row_multipliers(q, folded_biases, nullptr, &p));
  *out = p;
  return Status::ok;
}

}  // namespace q8
}  // namespace rnncore

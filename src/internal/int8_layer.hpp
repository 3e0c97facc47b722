// The integer LSTM as a layer kind of StackSpec / Plan (StackSpec::dtype i8): the canonical byte
// layout of an integer stack (spec.cpp's param_count and canonical_offset read it), its validation,
// and the integer backend's plan part (PlanImpl::i8). The backend itself is src/int8_layer.cpp: it
// runs the q8 core (src/internal/int8_lstm.hpp, int8_dense.hpp, int8_activations.hpp,
// int8_elementwise.hpp) on the plan's buffers. docs/architecture.md, "The integer LSTM as a layer kind".
#ifndef RNNCORE_SRC_INTERNAL_INT8_LAYER_HPP
#define RNNCORE_SRC_INTERNAL_INT8_LAYER_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "rnncore/int8.h"
#include "rnncore/rnncore.hpp"
#include "src/internal/int8_kernels.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace detail {

// Byte offsets of one (layer, direction) in the canonical buffer of an integer stack.
struct Int8CanonicalDir {
  std::int64_t w = 0, r = 0, bias = 0, scales = -1, end = 0;  // scales: -1 per tensor
};
Int8CanonicalDir int8_canonical_dir(const StackSpec& st, int layer, int dir);
// Byte offsets of the tail (-1: absent) and the whole buffer's size.
struct Int8CanonicalTail {
  std::int64_t table = -1, end = 0;
  // Per Dense of the chain (pre_head[0..], the head last): W, b, the weight scales.
  std::int64_t dense_w[kMaxPreHead + 1] = {-1, -1, -1, -1}, dense_b[kMaxPreHead + 1] = {-1, -1, -1, -1},
               dense_scales[kMaxPreHead + 1] = {-1, -1, -1, -1};
};
Int8CanonicalTail int8_canonical_tail(const StackSpec& st);
std::int64_t int8_canonical_offset(const StackSpec& st, int layer, int dir, ParamKind kind, int gate);

// The integer stack's rules (validate(StackSpec) for dtype i8): LSTM layers without extensions,
// wrappers or dropout; quantization values in range; each layer's input is what the previous
// layer writes. The multipliers themselves are checked by Plan::create and pack_weights (the q8
// prepare functions, with their detail).
Status validate_int8(const StackSpec& st);
// The quantization of layer l's int8 output (its state's, or the concatenation's / merge's).
QuantParams int8_layer_output(const LayerSpec& ls);
// The quantization of layer l's input.
QuantParams int8_layer_input(const StackSpec& st, int layer);

// Where a prepared (layer, direction) lies in the packed buffer: its q8::Int8LstmParams with the
// pointers replaced by offsets from the buffer's start (PackedInt8Lstm, src/int8_layer.cpp), so the
// buffer may move or sit in flash. Its W, R and the prepare's storage follow it (DirRegions,
// src/int8_layer.cpp): the plan keeps one offset per direction.
struct Int8DirPack {
  std::size_t params = 0;
};

// The integer backend's part of a plan (zero in other plans).
// One Dense of the chain in the packed buffer: its prepared parameters, W, storage, activation
// table and softmax (the head's only).
struct Int8DensePack {
  std::size_t params = 0, w = 0, bias = 0, scale = 0, lut = 0, softmax = 0;
};

struct Int8Plan {
  // The kernels, each as its place in its op's kernel registry (src/internal/kernels.hpp; -1:
  // none), not a pointer, so that a plan value holds none (src/int8_layer.cpp reads them).
  std::int32_t dot = -1;                          // i8_dot, chosen under PlanOptions::max_isa
  // The panel kernel of the dot kernel's family where there is one (the Cortex-M DSP build): the
  // LSTM weights are packed interleaved (q8::interleave4) for it. -1: row-major weights.
  std::int32_t panels = -1;
  // The panel layout `panels` reads: interleaved4 (i8_dot_panels), or interleaved4_i16
  // (i16_dot_panels; PlanOptions::int8_weights = interleaved_i16: the weights pre-widened, twice
  // the bytes); row_major where panels is -1.
  q8::Int8WeightLayout panel_layout = q8::Int8WeightLayout::row_major;
  std::int32_t gate = -1;                         // i32_gate_act; -1: the step's scalar code
  std::int32_t cell = -1;                         // i16_cell_update
  Int8DirPack dir[kMaxLayers][2];
  rnncore_int8_add merge_add[kMaxLayers];         // sum, ave
  rnncore_int8_mul merge_mul[kMaxLayers];         // mul, ave (· 0.5)
  // Packed: the embedding table, then each Dense of the chain (pre_head[0..], the head last).
  std::size_t table = 0;
  Int8DensePack dense[kMaxPreHead + 1];
  // How forward walks the stack. Step-major (every layer one direction): each row's step runs
  // through every layer before the next step, a layer's output being its state h, so no buffer
  // holds more than one step and the workspace does not grow with max_seq_len. Layer-major (some
  // layer bidirectional): each layer over every step, its output [T, B, W] kept for the next.
  bool step_major = false;
  // Workspace (bytes): float input only, the quantized rows [T, B, I] (step-major: [B, I]; the
  // Embedding's rows and int8 x are read where they are); layer-major, the layers' outputs
  // [T, B, W] (two, alternating; only those a later layer reads whole: a last layer before a
  // last-step head writes its final rows into head_rows) and a merging layer's directions
  // [T, B, H] each ([B, H] for such a last layer); the head's rows [B, W] (last step), its output
  // [rows, F] and a softmax's (rows: B with last_step_only or step-major, else T·B); the activations of the
  // Dense layers before it, [rows, ·] in head_mid[k % 2]; the rows' state: step-major h (int8)
  // and c (int16) per layer [L, B, H] (state_rows), layer-major c alone [B, H], one set that the
  // directions and layers take in turn (a direction's h is its output row of the step, h0 copied
  // in before the first step, each step's row copied from the one before); per thread a step's
  // scratch. Rows of H at the stride max_hidden. Regions start at multiples of 4 bytes in a
  // one-thread plan, of kAlignment with threads.
  std::size_t x = 0, out[2] = {0, 0}, dir_out[2] = {0, 0}, head_rows = 0, head_a = 0, head_b = 0, head_mid[2] = {0, 0};
  std::size_t h = 0, c = 0, scratch = 0, scratch_stride = 0;
  std::int32_t max_hidden = 0, max_width = 0, state_rows = 0;
};

// Direction (l, d)'s quantization as prepare takes it (per channel: its scales in `canonical`), the
// weights row-major.
q8::Int8LstmQuantization int8_lstm_quantization(const StackSpec& st, int l, int d, const unsigned char* canonical);

// LiteRT's QUANTIZE on the CPU (its default XNNPACK delegate's f32 -> qs8 convert) of one value:
// x times `recip` (the float reciprocal of the scale), clamped to [-128 - zp, 127 - zp], rounded
// half to even, plus the zero point zp (NaN: zp). forward's float input, and io::Int8Runner's.
inline std::int8_t int8_quantize(float x, float recip, std::int32_t zp) {
  const float lo = static_cast<float>(-128 - zp), hi = static_cast<float>(127 - zp);
  float v = x * recip;
  if (std::isnan(v)) v = 0.0f;
  v = v < lo ? lo : v > hi ? hi : v;
  return static_cast<std::int8_t>(static_cast<long>(std::nearbyint(v)) + zp);
}

struct PlanImpl;
// What pack_weights prepared for direction (l, d), read back from a packed buffer of the integer
// plan p: its parameters with their pointers into `packed` (the kernels null). Prepare's storage
// (the folded biases, per channel the units' multipliers after them) is the
// q8::int8_lstm_storage_words words from x_bias[0]. export-c writes rnncore/int8.h's arrays from
// these, the Dense tables and softmax from p.i8.dense, and the merges from p.i8.merge_add / mul: one
// prepare for the header and the plan.
q8::Int8LstmParams int8_packed_lstm(const PlanImpl& p, const void* packed, int l, int d);

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_INT8_LAYER_HPP

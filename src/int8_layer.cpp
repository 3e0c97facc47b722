// The integer backend: a StackSpec of dtype i8 (integer LSTM layers, optionally an int8 Embedding
// first and an int8 Dense head last) planned, packed and run on the q8 core, bit for bit what the
// core's own functions give (src/internal/int8_layer.hpp; docs/architecture.md).
//
// Planning picks the matrix-vector and step kernels under PlanOptions::max_isa (and, where the dot
// kernel's family has one, its panel kernel for interleaved weights: the Cortex-M DSP build) and
// lays out the packed buffer and workspace. pack_weights lays the LSTM weights out for that kernel
// and runs the q8 prepare functions into the packed buffer
// and stores each prepared parameter block with its pointers as offsets (so the buffer may move);
// forward rebuilds them on the stack. A run is row-parallel: every batch row goes through the
// whole stack independently, so each of the plan's threads takes a block of rows from the input
// to the output, with no barrier.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "rnncore/rnncore.h"
#include "src/internal/arena.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/error.hpp"
#include "src/internal/int8_activations.hpp"
#include "src/internal/int8_dense.hpp"
#include "src/internal/int8_elementwise.hpp"
#include "src/internal/int8_fixed_point.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/int8_lstm.hpp"
#include "src/internal/kernels.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/internal/spec_internal.hpp"
#include "src/internal/thread_pool.hpp"

namespace rnncore {
namespace detail {

namespace {

// A prepared LSTM direction as the packed buffer holds it: 32-bit words only (no pointer, no
// enum, no padding), so that the layout is the same on every target (a 64-bit host packs, or
// export-c writes, for a 32-bit Cortex-M; both little-endian). Each pointer of the prepared
// parameters is an offset from the buffer's start (0: null); the kernels are the plan's.
struct PackedLstm {
  std::int32_t input_size, hidden_size, layout, cell_log2, cell_clip, hidden_zp;
  std::int32_t x_mult[q8::kGates][2], h_mult[q8::kGates][2], hidden_mult[2];  // (multiplier, shift)
  std::uint32_t w[q8::kGates], r[q8::kGates], x_bias[q8::kGates], h_bias[q8::kGates], x_rows[q8::kGates],
      h_rows[q8::kGates];
};
static_assert(sizeof(PackedLstm) == 4 * (6 + 2 * 2 * q8::kGates + 2 + 6 * q8::kGates), "PackedLstm has padding");
// The head's prepared Dense parameters, as PackedLstm.
struct PackedDense {
  std::int32_t in_size, out_size, output_zp, act_min, act_max;
  std::uint32_t w, bias, scale;
};
static_assert(sizeof(PackedDense) == 4 * 8, "PackedDense has padding");
static_assert(sizeof(float) == 4 && sizeof(rnncore_int8_softmax) == 4 * 258, "the packed softmax is 32-bit words");

template <class T>
std::uint32_t offset_of(const T* ptr, const unsigned char* base) {
  return ptr == nullptr ? 0 : static_cast<std::uint32_t>(reinterpret_cast<const unsigned char*>(ptr) - base);
}
template <class T>
const T* at(const unsigned char* base, std::uint32_t off) {
  return off == 0 ? nullptr : reinterpret_cast<const T*>(base + off);
}

PackedLstm pack_lstm_params(const q8::Int8LstmParams& prm, const unsigned char* packed) {
  PackedLstm o{};
  o.input_size = prm.input_size;
  o.hidden_size = prm.hidden_size;
  o.layout = static_cast<std::int32_t>(prm.layout);
  o.cell_log2 = prm.cell_log2;
  o.cell_clip = prm.cell_clip;
  o.hidden_zp = prm.hidden_zp;
  o.hidden_mult[0] = prm.hidden_mult.multiplier;
  o.hidden_mult[1] = prm.hidden_mult.shift;
  for (int g = 0; g < q8::kGates; ++g) {
    o.x_mult[g][0] = prm.x_mult[g].multiplier;
    o.x_mult[g][1] = prm.x_mult[g].shift;
    o.h_mult[g][0] = prm.h_mult[g].multiplier;
    o.h_mult[g][1] = prm.h_mult[g].shift;
    o.w[g] = offset_of(prm.w[g], packed);
    o.r[g] = offset_of(prm.r[g], packed);
    o.x_bias[g] = offset_of(prm.x_bias[g], packed);
    o.h_bias[g] = offset_of(prm.h_bias[g], packed);
    o.x_rows[g] = offset_of(prm.x_mult_rows[g], packed);
    o.h_rows[g] = offset_of(prm.h_mult_rows[g], packed);
  }
  return o;
}

// The prepared parameters from their packed form into *out (its kernels left as they are). Into
// the caller's value: a returned one is a second copy on unpack_lstm's frame (208 bytes on a
// Cortex-M; not on the stack peak, which the step sets, but a frame that needs nothing of it).
void unpack_lstm_params(const PackedLstm& o, const unsigned char* packed, q8::Int8LstmParams* out) {
  q8::Int8LstmParams& prm = *out;
  prm.input_size = o.input_size;
  prm.hidden_size = o.hidden_size;
  prm.layout = static_cast<q8::Int8WeightLayout>(o.layout);
  prm.cell_log2 = o.cell_log2;
  prm.cell_clip = static_cast<std::int16_t>(o.cell_clip);
  prm.hidden_zp = o.hidden_zp;
  prm.hidden_mult = q8::QuantizedMultiplier{o.hidden_mult[0], o.hidden_mult[1]};
  for (int g = 0; g < q8::kGates; ++g) {
    prm.x_mult[g] = q8::QuantizedMultiplier{o.x_mult[g][0], o.x_mult[g][1]};
    prm.h_mult[g] = q8::QuantizedMultiplier{o.h_mult[g][0], o.h_mult[g][1]};
    prm.w[g] = at<std::int8_t>(packed, o.w[g]);
    prm.r[g] = at<std::int8_t>(packed, o.r[g]);
    prm.x_bias[g] = at<std::int32_t>(packed, o.x_bias[g]);
    prm.h_bias[g] = at<std::int32_t>(packed, o.h_bias[g]);
    prm.x_mult_rows[g] = at<std::int32_t>(packed, o.x_rows[g]);
    prm.h_mult_rows[g] = at<std::int32_t>(packed, o.h_rows[g]);
  }
}

PackedDense pack_dense_params(const q8::Int8DenseParams& prm, const unsigned char* packed) {
  return PackedDense{prm.in_size,  prm.out_size, prm.output_zp, prm.act_min, prm.act_max, offset_of(prm.w, packed),
                     offset_of(prm.bias, packed), offset_of(prm.scale, packed)};
}

q8::Int8DenseParams unpack_dense_params(const PackedDense& o, const unsigned char* packed) {
  q8::Int8DenseParams prm;
  prm.in_size = o.in_size;
  prm.out_size = o.out_size;
  prm.output_zp = o.output_zp;
  prm.act_min = o.act_min;
  prm.act_max = o.act_max;
  prm.w = at<std::int8_t>(packed, o.w);
  prm.bias = at<std::int32_t>(packed, o.bias);
  prm.scale = at<float>(packed, o.scale);
  return prm;
}

q8::Int8Quant quant(const QuantParams& q) { return q8::Int8Quant{q.scale, q.zero_point}; }

// The quantization of what the head writes, or of the last layer's output.
QuantParams stack_output_quant(const StackSpec& st) {
  const DenseSpec& h = st.head;
  if (h.out_features == 0) return int8_layer_output(st.layers[st.num_layers - 1]);
  return h.activation == Activation::sigmoid || h.activation == Activation::tanh || h.activation == Activation::softmax
             ? h.int8_output
             : h.int8_linear;
}

// The quantization of what Dense k of the chain writes (after its table or softmax, if any).
QuantParams dense_output_quant(const DenseSpec& d) {
  return d.activation == Activation::sigmoid || d.activation == Activation::tanh || d.activation == Activation::softmax
             ? d.int8_output
             : d.int8_linear;
}

bool merged(const LayerSpec& ls) { return num_directions(ls) == 2 && ls.merge.mode != MergeMode::concat; }

// The vocabulary of layer l's token tables (PlanOptions::int8_token_table: layer 0 after an
// Embedding), or 0: its input weights are packed as usual.
int token_vocab(const PlanImpl& p, int l) {
  return p.options.int8_token_table && l == 0 ? p.stack.embedding.vocab_size : 0;
}

// Whether the last layer writes the caller's y itself (int8, no head; layer-major).
bool direct_output(const PlanImpl& p) { return p.stack.head.out_features == 0 && !p.stack.float_output; }
// Whether the head reads only each row's last outputs, so a layer-major last layer keeps only its
// final rows (in head_rows).
bool last_step_head(const StackSpec& st) { return st.head.out_features > 0 && st.head.last_step_only; }

// ---- Planning ----

// A direction's regions of the packed buffer, one after the other: the prepared parameters, W, R
// and the prepare's storage (q8::int8_lstm_storage_words). Taken from `pk` by the layout, and
// taken again from the parameters' offset by pack_lstm.
struct DirRegions {
  std::size_t params, w, r, storage;
};
// With interleaved weights each gate's matrix is padded to whole panels (interleaved4_bytes, a
// multiple of 16 bytes; every region starts at a multiple of kAlignment, as the panel kernel's LDM
// needs).
// The int16 panel layout takes twice the interleaved one's bytes. With a token table (`vocab` > 0,
// PlanOptions::int8_token_table) region w holds the table instead, [vocab][4H] int16 (at least 8H
// words: the prepare's biases pass through it, pack_lstm), and the storage only the recurrent
// parts' folded biases, 4H words: the input parts are in the table.
DirRegions take_dir(Arena* pk, int H, int I, bool per_channel, q8::Int8WeightLayout layout, int vocab = 0) {
  const bool interleaved = layout != q8::Int8WeightLayout::row_major;
  const std::uint64_t wide = layout == q8::Int8WeightLayout::interleaved4_i16 ? 2 : 1;
  const std::uint64_t gate_w = interleaved ? wide * q8::interleaved4_bytes(H, I) : static_cast<std::uint64_t>(H) * I;
  const std::uint64_t gate_r = interleaved ? wide * q8::interleaved4_bytes(H, H) : static_cast<std::uint64_t>(H) * H;
  DirRegions g;
  g.params = pk->take(1, sizeof(PackedLstm));
  g.w = vocab > 0 ? pk->take(static_cast<std::uint64_t>(vocab < 4 ? 4 : vocab) * 4 * H, 2) : pk->take(4 * gate_w, 1);
  g.r = pk->take(4 * gate_r, 1);
  g.storage = pk->take((per_channel ? 24 : vocab > 0 ? 4 : 8) * H, 4);
  return g;
}

// The panel kernel (interleaved weights) of the dot kernel `dot`'s family, other than the portable
// one: i8_dot_panels_4x16__dsp for i8_dot_4x16__dsp on a Cortex-M (M profile) with the DSP
// extension; null elsewhere (a Cortex-A build runs NEON, and the DSP row kernel only when capped,
// as `rnncore info` names it). `op`: i8_dot_panels, or i16_dot_panels for the int16 panel layout
// (i16_dot_panels_4x16__dsp).
const Kernel* panel_kernel_of(const char* dot, KernelOp op) {
  int n = 0;
  const Kernel* k = kernel_registry(op, &n);
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
  const char* family = std::strstr(dot, "__");
  if (family == nullptr || std::strcmp(family, "__scalar") == 0) return nullptr;
  for (int i = 0; i < n; ++i) {
    const char* f = std::strstr(k[i].own_name, "__");
    if (f != nullptr && std::strcmp(f, family) == 0) return &k[i];
  }
#else
  (void)dot;
  (void)k;
#endif
  return nullptr;
}

// The portable panel kernel: interleaved weights on a target without the DSP one (a host packing
// for a Cortex-M, or checking such a buffer).
const Kernel* portable_panel_kernel(KernelOp op) {
  int n = 0;
  const Kernel* k = kernel_registry(op, &n);
  for (int i = 0; i < n; ++i)
    if (std::strstr(k[i].own_name, "__scalar") != nullptr) return &k[i];
  return nullptr;
}

// The plan's kernels, from their registry indices (Int8Plan::dot, panels, gate, cell).
KernelOp panel_op(const PlanImpl& p) {
  return p.i8.panel_layout == q8::Int8WeightLayout::interleaved4_i16 ? KernelOp::i16_dot_panels : KernelOp::i8_dot_panels;
}
q8::DotRowsFn dot_kernel(const PlanImpl& p) { return kernel_at(KernelOp::i8_dot, p.i8.dot)->dot; }
q8::DotPanelsFn panel_kernel(const PlanImpl& p) {
  const Kernel* k = kernel_at(panel_op(p), p.i8.panels);
  return k != nullptr ? k->dot_panels : nullptr;
}
q8::GateActivationsFn gate_kernel(const PlanImpl& p) {
  const Kernel* k = kernel_at(KernelOp::i32_gate_act, p.i8.gate);
  return k != nullptr ? k->gate : nullptr;
}
q8::CellUpdateFn cell_kernel(const PlanImpl& p) {
  const Kernel* k = kernel_at(KernelOp::i16_cell_update, p.i8.cell);
  return k != nullptr ? k->cell : nullptr;
}

// Scratch bytes of a step of an (I, H) direction: q8::int8_lstm_scratch_bytes of its parameters.
std::size_t step_scratch_bytes(int I, int H, bool interleaved) {
  q8::Int8LstmParams prm;
  prm.input_size = I;
  prm.hidden_size = H;
  prm.layout = interleaved ? q8::Int8WeightLayout::interleaved4 : q8::Int8WeightLayout::row_major;
  return q8::int8_lstm_scratch_bytes(prm);
}

// The kernels under `cap` (named in kernel_name) and the merges' parameters.
Status choose_kernels(Isa cap, PlanImpl* p) {
  const Kernel* dot = select_kernel(KernelOp::i8_dot, cap);  // the scalar one at worst
  // The step kernels of the fastest gate kernel's family, or none: the step's own scalar code
  // (q8::int8_best_step_kernels' choice).
  const Kernel* gate = select_kernel(KernelOp::i32_gate_act, cap);
  if (gate != nullptr && gate->isa == Isa::none) gate = nullptr;
  const Kernel* cell = nullptr;
  int n_cell = 0;
  const Kernel* cells = kernel_registry(KernelOp::i16_cell_update, &n_cell);
  for (int i = 0; gate != nullptr && cell == nullptr && i < n_cell; ++i)
    if (cells[i].isa == gate->isa) cell = &cells[i];
  if (cell == nullptr) gate = nullptr;
  const Int8Weights want = p->options.int8_weights;
  RNNCORE_ENSURE(want >= Int8Weights::auto_select && want <= Int8Weights::interleaved_i16, Status::invalid_enum,
                 "Plan::create: int8_weights = %d is not an Int8Weights", static_cast<int>(want));
  const bool i16 = want == Int8Weights::interleaved_i16;
  const KernelOp pop = i16 ? KernelOp::i16_dot_panels : KernelOp::i8_dot_panels;
  const Kernel* panels = want == Int8Weights::row_major ? nullptr : panel_kernel_of(dot->own_name, pop);
  if (panels == nullptr && (want == Int8Weights::interleaved || i16)) panels = portable_panel_kernel(pop);
  p->i8.dot = kernel_index(KernelOp::i8_dot, dot);
  p->i8.panels = kernel_index(pop, panels);
  p->i8.panel_layout = panels == nullptr ? q8::Int8WeightLayout::row_major
                                         : (i16 ? q8::Int8WeightLayout::interleaved4_i16 : q8::Int8WeightLayout::interleaved4);
  p->i8.gate = kernel_index(KernelOp::i32_gate_act, gate);
  p->i8.cell = kernel_index(KernelOp::i16_cell_update, cell);
  p->isa = dot->isa;
  const char* name = panels != nullptr ? panels->own_name : dot->own_name;  // the LSTMs' kernel (the head's: `dot`)
  std::size_t n = 0;
  for (const char* c = name; *c != '\0' && n + 1 < sizeof p->kernel_name; ++c) p->kernel_name[n++] = *c;
  p->kernel_name[n] = '\0';
  // The merges need no weights: prepared here, so a bad quantization fails at plan time.
  const StackSpec& st = p->stack;
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    if (!merged(ls)) continue;
    const Int8Merge& m = ls.merge;
    Status s = Status::ok;
    if (m.mode == MergeMode::mul) {
      s = q8::int8_mul_prepare(quant(m.fw), quant(m.bw), quant(ls.int8_output), &p->i8.merge_mul[l]);
    } else if (m.mode == MergeMode::sum) {
      s = q8::int8_add_prepare(quant(m.fw), quant(m.bw), quant(ls.int8_output), &p->i8.merge_add[l]);
    } else {
      s = q8::int8_add_prepare(quant(m.fw), quant(m.bw), quant(m.sum), &p->i8.merge_add[l]);
      if (s == Status::ok) s = q8::int8_mul_prepare(quant(m.sum), quant(m.half), quant(ls.int8_output), &p->i8.merge_mul[l]);
    }
    RNNCORE_ENSURE(s == Status::ok, s, "layers[%d].merge: %s", l, last_error_detail());
  }
  return Status::ok;
}

Status layout_int8(PlanImpl* p, const GpuPlanner&) {
  // choose_backend left the cap in p->isa (none for backend reference: the portable kernels).
  RNNCORE_RETURN_IF_ERROR(choose_kernels(p->isa, p));
  const StackSpec& st = p->stack;
  Int8Plan& q = p->i8;
  const std::uint64_t B = p->options.max_batch, T = p->options.max_seq_len;
  Arena pk(kPackedHeaderBytes);
  int max_w = st.input_size;
  std::size_t step_scratch = 0;
  const bool interleaved = q.panels >= 0;
  const q8::Int8WeightLayout layout = q.panel_layout;
  if (p->options.int8_token_table) {
    RNNCORE_ENSURE(st.embedding.vocab_size > 0, Status::unsupported,
                   "Plan::create: int8_token_table needs an Embedding before layer 0 (its input is then a token id)");
    for (int d = 0; d < num_directions(st.layers[0]); ++d)
      RNNCORE_ENSURE(!st.layers[0].int8[d].per_channel, Status::unsupported,
                     "Plan::create: int8_token_table with per-channel weight scales in layers[0] (per tensor only)");
  }
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    const int H = ls.hidden_size, I = layer_input_size(st, l);
    q.max_hidden = std::max(q.max_hidden, ls.hidden_size);
    max_w = std::max(max_w, layer_output_width(ls));
    step_scratch = std::max(step_scratch, step_scratch_bytes(I, H, interleaved));
    for (int d = 0; d < num_directions(ls); ++d)
      q.dir[l][d].params = take_dir(&pk, H, I, ls.int8[d].per_channel, layout, token_vocab(*p, l)).params;
  }
  const std::uint64_t F = st.head.out_features, D = static_cast<std::uint64_t>(head_input_size(st));
  if (st.embedding.vocab_size > 0 && !p->options.int8_token_table)  // (token tables: no row is read)
    q.table = pk.take(static_cast<std::uint64_t>(st.embedding.vocab_size) * st.input_size, 1);
  std::uint64_t mid = 0;  // the widest Dense before the head
  for (int k = 0; k < num_dense(st); ++k) {
    const DenseSpec& h = dense_at(st, k);
    const std::uint64_t Fk = static_cast<std::uint64_t>(h.out_features);
    Int8DensePack& dk = q.dense[k];
    dk.params = pk.take(1, sizeof(PackedDense));
    dk.w = pk.take(Fk * static_cast<std::uint64_t>(dense_input_size(st, k)), 1);
    dk.bias = pk.take(Fk, 4);
    dk.scale = pk.take(Fk, 4);
    if (h.activation == Activation::sigmoid || h.activation == Activation::tanh) dk.lut = pk.take(256, 1);
    if (h.activation == Activation::softmax) dk.softmax = pk.take(1, sizeof(rnncore_int8_softmax));
    if (k < st.num_pre_head) mid = std::max(mid, Fk);
  }
  p->packed_bytes = pk.size();
  // PackedLstm and PackedDense hold 32-bit offsets.
  RNNCORE_ENSURE(p->packed_bytes <= 0xffffffffu, Status::invalid_size,
                 "Plan::create: the integer stack's packed weights take %zu bytes; at most 4 GiB", p->packed_bytes);
  q.max_width = max_w;

  // Regions at 4 bytes (the widened pairs' words): kAlignment only apart threads' rows and scratch,
  // so that two threads share no cache line; a one-thread plan (firmware) keeps its RAM to the bytes.
  const int threads = p->options.threads;
  const std::uint64_t align = threads > 1 ? kAlignment : 4;
  Arena ws(0, align);
  const std::uint64_t W = static_cast<std::uint64_t>(max_w), Hm = static_cast<std::uint64_t>(q.max_hidden);
  const int L = st.num_layers;
  q.step_major = true;
  for (int l = 0; l < L; ++l) q.step_major = q.step_major && num_directions(st.layers[l]) == 1;
  if (st.float_input) q.x = ws.take((q.step_major ? 1 : T) * B * st.input_size, 1);
  if (!q.step_major) {  // the buffers run_layers writes
    bool whole[2] = {false, false}, merge_whole = false, merge_last = false;
    for (int l = 0; l < L; ++l) {
      const bool last = l + 1 == L;
      if (!last || (!direct_output(*p) && !last_step_head(st))) whole[l & 1] = true;
      if (merged(st.layers[l])) (last && last_step_head(st) ? merge_last : merge_whole) = true;
    }
    for (int k = 0; k < 2; ++k)
      if (whole[k]) q.out[k] = ws.take(T * B * W, 1);
    if (merge_whole || merge_last) {
      q.dir_out[0] = ws.take((merge_whole ? T : 1) * B * Hm, 1);
      q.dir_out[1] = ws.take((merge_whole ? T : 1) * B * Hm, 1);
    }
  }
  if (F > 0) {
    const std::uint64_t rows = st.head.last_step_only || q.step_major ? B : T * B;
    if (st.head.last_step_only) q.head_rows = ws.take(B * D, 1);
    q.head_a = ws.take(rows * F, 1);
    if (st.head.activation == Activation::softmax) q.head_b = ws.take(rows * F, 1);  // the softmax's output
    for (int m = 0; m < std::min<int>(st.num_pre_head, 2); ++m) q.head_mid[m] = ws.take(rows * mid, 1);
  }
  // The states: step-major h and c per layer; layer-major c alone, one set the directions and the
  // layers take in turn (h is the direction's output row of the step: run_direction).
  q.state_rows = static_cast<std::int32_t>(B);
  if (q.step_major) q.h = ws.take(static_cast<std::uint64_t>(L) * B * Hm, 1);
  q.c = ws.take((q.step_major ? static_cast<std::uint64_t>(L) : 1) * B * Hm, 2);
  q.scratch_stride =
      static_cast<std::size_t>(round_up(static_cast<std::int64_t>(step_scratch), static_cast<std::int64_t>(align)));
  q.scratch = ws.take(static_cast<std::uint64_t>(threads) * q.scratch_stride, 1);
  p->ws.total = ws.size();
  if (pk.overflow() || ws.overflow()) p->ws.total = ~std::size_t{0};
  return Status::ok;
}

void layout_training_int8(PlanImpl*) {}  // Plan::create refuses training for integer stacks

// ---- Packing ----

q8::Int8LstmQuantization lstm_quantization(const StackSpec& st, int l, int d, const unsigned char* canonical) {
  const Int8LstmQuant& s = st.layers[l].int8[d];
  const QuantParams in = int8_layer_input(st, l);
  q8::Int8LstmQuantization q;
  q.input_scale = in.scale;
  q.input_zp = in.zero_point;
  for (int g = 0; g < q8::kGates; ++g) {
    q.w_scale[g] = s.w_scale[g];
    q.r_scale[g] = s.r_scale[g];
    if (s.per_channel) {
      q.w_scales[g] = reinterpret_cast<const float*>(canonical + canonical_offset(st, l, d, ParamKind::weight_scale, g));
      q.r_scales[g] = reinterpret_cast<const float*>(canonical + canonical_offset(st, l, d, ParamKind::weight_scale, 4 + g));
    }
  }
  q.state_scale = s.state.scale;
  q.state_zp = s.state.zero_point;
  q.hidden_scale = s.hidden.scale;
  q.hidden_zp = s.hidden.zero_point;
  q.cell_scale = s.cell_scale;
  q.cell_clip = s.cell_clip;
  return q;
}

// Direction (l, d)'s W and R (cw, cr: canonical, row-major) into their regions in the int16 panel
// layout (PlanOptions::int8_weights = interleaved_i16), gate after gate: every int8 weight has it.
// cw null (a token table's layer): R alone.
q8::Int8WeightLayout copy_weights_i16(int H, int I, const DirRegions& dp, const std::int8_t* cw, const std::int8_t* cr,
                                      unsigned char* packed, const std::int8_t* w[q8::kGates], const std::int8_t* r[q8::kGates]) {
  const std::size_t hi = static_cast<std::size_t>(H) * I, hh = static_cast<std::size_t>(H) * H;
  const std::size_t gate_w = q8::interleaved4_i16_bytes(H, I), gate_r = q8::interleaved4_i16_bytes(H, H);
  for (int g = 0; g < q8::kGates; ++g) {
    auto* pw = reinterpret_cast<std::int8_t*>(packed + dp.w) + g * gate_w;
    auto* pr = reinterpret_cast<std::int8_t*>(packed + dp.r) + g * gate_r;
    if (cw != nullptr) q8::interleave4_i16(cw + g * hi, H, I, pw);
    q8::interleave4_i16(cr + g * hh, H, H, pr);
    w[g] = pw;
    r[g] = pr;
  }
  return q8::Int8WeightLayout::interleaved4_i16;
}

// Direction (l, d)'s W and R from the canonical bytes into their regions, gate after gate: in the
// plan's interleaved layout where it has one and the weights allow it (q8::interleavable4: no -128
// beside a negative weight, which TFLite's symmetric weights never hold), else row-major (the
// regions are large enough for either). Returns the layout written; w and r point at each gate.
// A token table's layer (token_vocab): R alone (region w holds the table; w is left pointing there).
q8::Int8WeightLayout copy_weights(const PlanImpl& p, int l, int d, const DirRegions& dp, const unsigned char* canonical,
                                  unsigned char* packed, const std::int8_t* w[q8::kGates], const std::int8_t* r[q8::kGates]) {
  const StackSpec& st = p.stack;
  const int H = st.layers[l].hidden_size, I = layer_input_size(st, l);
  const auto* cw = token_vocab(p, l) > 0 ? nullptr
                                         : reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::input_weight, 0));
  const auto* cr = reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::recurrent_weight, 0));
  const std::size_t hi = static_cast<std::size_t>(H) * I, hh = static_cast<std::size_t>(H) * H;
  if (p.i8.panel_layout == q8::Int8WeightLayout::interleaved4_i16) return copy_weights_i16(H, I, dp, cw, cr, packed, w, r);
  bool interleaved = p.i8.panels >= 0;
  for (int g = 0; g < q8::kGates && interleaved; ++g)
    interleaved = (cw == nullptr || q8::interleavable4(cw + g * hi, H, I)) && q8::interleavable4(cr + g * hh, H, H);
  const std::size_t gate_w = interleaved ? q8::interleaved4_bytes(H, I) : hi;
  const std::size_t gate_r = interleaved ? q8::interleaved4_bytes(H, H) : hh;
  for (int g = 0; g < q8::kGates; ++g) {
    auto* pw = reinterpret_cast<std::int8_t*>(packed + dp.w) + g * gate_w;
    auto* pr = reinterpret_cast<std::int8_t*>(packed + dp.r) + g * gate_r;
    if (interleaved) {
      if (cw != nullptr) q8::interleave4(cw + g * hi, H, I, pw);
      q8::interleave4(cr + g * hh, H, H, pr);
    } else {
      if (cw != nullptr) std::memcpy(pw, cw + g * hi, hi);
      std::memcpy(pr, cr + g * hh, hh);
    }
    w[g] = pw;
    r[g] = pr;
  }
  return interleaved ? q8::Int8WeightLayout::interleaved4 : q8::Int8WeightLayout::row_major;
}

// Layer 0's token table (PlanOptions::int8_token_table) into `table`, [vocab][4H]: token v's
// input part of gate g, unit j, as the step computes it from the token's embedded row e_v and
// TFLite rescales and saturates it on its own before the recurrent part is added (docs/int8.md,
// "One step"): sat16(MBQM(bx_g[j] + Σ_k W_g[j,k]·e_v[k], x_mult_g)) — in int16 exactly. `prm`:
// prepared on the canonical (row-major) W, which checked that each folded bias
// bx_g[j] = b_g[j] − z_x·Σ_k W_g[j,k] fits int32; the sum is taken here as b_g[j] + Σ_k W_g[j,k]·(e_v[k] − z_x),
// the same value modulo 2^32 (the table's region overwrites the prepare's copy of bx).
void fill_token_table(const StackSpec& st, const q8::Int8LstmParams& prm, const std::int8_t* cw, const std::int32_t* const b[q8::kGates],
                      std::int32_t input_zp, const std::int8_t* embedding, std::int16_t* table) {
  const int V = st.embedding.vocab_size, H = prm.hidden_size, I = prm.input_size;
  const std::size_t Hs = static_cast<std::size_t>(H), Is = static_cast<std::size_t>(I);
  for (int v = 0; v < V; ++v) {
    const std::int8_t* e = embedding + static_cast<std::size_t>(v) * Is;
    std::int16_t* row = table + static_cast<std::size_t>(v) * 4 * Hs;
    for (int g = 0; g < q8::kGates; ++g)
      for (std::size_t j = 0; j < Hs; ++j) {
        const std::int8_t* wj = cw + (static_cast<std::size_t>(g) * Hs + j) * Is;
        std::uint32_t acc = static_cast<std::uint32_t>(b[g] != nullptr ? b[g][j] : 0);  // wrapping, as the kernels
        for (std::size_t k = 0; k < Is; ++k) acc += static_cast<std::uint32_t>(wj[k] * (e[k] - input_zp));
        const std::int32_t z = q8::multiply_by_quantized_multiplier(static_cast<std::int32_t>(acc), prm.x_mult[g]);
        row[static_cast<std::size_t>(g) * Hs + j] = static_cast<std::int16_t>(z < -32768 ? -32768 : (z > 32767 ? 32767 : z));
      }
  }
}

Status pack_lstm(const PlanImpl& p, int l, int d, const unsigned char* canonical, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const int H = st.layers[l].hidden_size, I = layer_input_size(st, l);
  Arena at_params(p.i8.dir[l][d].params);
  const DirRegions dp = take_dir(&at_params, H, I, st.layers[l].int8[d].per_channel, p.i8.panel_layout, token_vocab(p, l));
  const std::int8_t* w[q8::kGates];
  const std::int8_t* r[q8::kGates];
  const std::int32_t* b[q8::kGates];
  const q8::Int8WeightLayout layout = copy_weights(p, l, d, dp, canonical, packed, w, r);
  for (int g = 0; g < q8::kGates; ++g)
    b[g] = reinterpret_cast<const std::int32_t*>(canonical + canonical_offset(st, l, d, ParamKind::input_bias, g));
  q8::Int8LstmQuantization q = lstm_quantization(st, l, d, canonical);
  q.weight_layout = layout;
  const auto* cw = reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::input_weight, 0));
  const bool tabled = token_vocab(p, l) > 0;
  const std::int8_t* packed_r[q8::kGates] = {};
  if (tabled) {  // prepared on the canonical W and R (row sums do not depend on the layout), R then as packed
    const std::size_t hi = static_cast<std::size_t>(H) * I, hh = static_cast<std::size_t>(H) * H;
    const auto* cr = reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, l, d, ParamKind::recurrent_weight, 0));
    for (int g = 0; g < q8::kGates; ++g) {
      packed_r[g] = r[g];
      w[g] = cw + g * hi;
      r[g] = cr + g * hh;
    }
    q.weight_layout = q8::Int8WeightLayout::row_major;
  }
  q8::Int8LstmParams prm;
  // (a token table's layer: the prepare's 8H words pass through the table's region, the input
  // parts' folded biases first; the recurrent parts' move to the storage, 4H words, before the table
  // is written over them)
  auto* storage = reinterpret_cast<std::int32_t*>(packed + (tabled ? dp.w : dp.storage));
  const Status s = q8::int8_lstm_prepare(q, I, H, w, r, b, storage, q8::int8_lstm_storage_words(q, H), &prm);
  RNNCORE_ENSURE(s == Status::ok, s, "pack_weights: layers[%d] direction %d: %s", l, d, last_error_detail());
  if (tabled) {
    auto* h_bias = reinterpret_cast<std::int32_t*>(packed + dp.storage);
    for (int g = 0; g < q8::kGates; ++g) {
      std::memcpy(h_bias + static_cast<std::size_t>(g) * H, prm.h_bias[g], static_cast<std::size_t>(H) * sizeof(std::int32_t));
      prm.h_bias[g] = h_bias + static_cast<std::size_t>(g) * H;
    }
    auto* table = reinterpret_cast<std::int16_t*>(packed + dp.w);
    fill_token_table(st, prm, cw, b, q.input_zp,
                     reinterpret_cast<const std::int8_t*>(canonical + canonical_offset(st, 0, 0, ParamKind::embedding, 0)), table);
    prm.layout = layout;  // R's, as copy_weights packed it
    for (int g = 0; g < q8::kGates; ++g) {
      prm.r[g] = packed_r[g];
      prm.w[g] = g == 0 ? reinterpret_cast<const std::int8_t*>(table) : nullptr;  // (unpack_lstm: token_gates)
      prm.x_bias[g] = nullptr;
      prm.x_mult[g] = q8::int8_token_table_multiplier();
    }
  }
  const PackedLstm out = pack_lstm_params(prm, packed);
  std::memcpy(packed + dp.params, &out, sizeof out);
  return Status::ok;
}

// Dense k of the chain (pre_head[0..], the head last).
Status pack_dense(const PlanImpl& p, int k, const unsigned char* canonical, unsigned char* packed) {
  const StackSpec& st = p.stack;
  const DenseSpec& h = dense_at(st, k);
  const Int8DensePack& q = p.i8.dense[k];
  const int F = h.out_features, D = static_cast<int>(dense_input_size(st, k));
  std::memcpy(packed + q.w, canonical + canonical_offset(st, k, 0, ParamKind::dense_weight, 0),
              static_cast<std::size_t>(F) * D);
  const QuantParams in = k == 0 ? int8_layer_output(st.layers[st.num_layers - 1]) : dense_output_quant(dense_at(st, k - 1));
  q8::Int8DenseQuantization dq;
  dq.input_scale = in.scale;
  dq.input_zp = in.zero_point;
  dq.w_scales = h.int8_per_channel
                    ? reinterpret_cast<const float*>(canonical + canonical_offset(st, -1 - k, 0, ParamKind::weight_scale, 0))
                    : &h.int8_w_scale;
  dq.w_scale_count = h.int8_per_channel ? F : 1;
  dq.output_scale = h.int8_linear.scale;
  dq.output_zp = h.int8_linear.zero_point;
  dq.relu = h.activation == Activation::relu;
  q8::Int8DenseParams prm;
  Status s = q8::int8_dense_prepare(
      dq, D, F, reinterpret_cast<const std::int8_t*>(packed + q.w),
      reinterpret_cast<const std::int32_t*>(canonical + canonical_offset(st, k, 0, ParamKind::dense_bias, 0)),
      reinterpret_cast<std::int32_t*>(packed + q.bias), reinterpret_cast<float*>(packed + q.scale), &prm);
  RNNCORE_ENSURE(s == Status::ok, s, "pack_weights: Dense %d of the head's chain: %s", k, last_error_detail());
  const PackedDense out = pack_dense_params(prm, packed);
  std::memcpy(packed + q.params, &out, sizeof out);
  if (h.activation == Activation::sigmoid || h.activation == Activation::tanh) {
    s = q8::int8_activation_table(h.activation == Activation::sigmoid ? q8::TableActivation::sigmoid : q8::TableActivation::tanh,
                                  h.int8_linear.scale, h.int8_linear.zero_point, h.int8_output.scale,
                                  h.int8_output.zero_point, reinterpret_cast<std::int8_t*>(packed + q.lut));
    RNNCORE_ENSURE(s == Status::ok, s, "pack_weights: Dense %d's %s: %s", k, to_string(h.activation), last_error_detail());
  } else if (h.activation == Activation::softmax) {
    rnncore_int8_softmax sm;
    s = q8::int8_softmax_prepare(h.int8_linear.scale, h.int8_softmax_beta, h.int8_output.scale, h.int8_output.zero_point, &sm);
    RNNCORE_ENSURE(s == Status::ok, s, "pack_weights: the head's softmax: %s", last_error_detail());
    std::memcpy(packed + q.softmax, &sm, sizeof sm);
  }
  return Status::ok;
}

Status pack_int8(const PlanImpl& p, const void* canonical, void* packed) {
  unsigned char* bytes = begin_host_pack(p, packed);
  const auto* can = static_cast<const unsigned char*>(canonical);
  const StackSpec& st = p.stack;
  for (int l = 0; l < st.num_layers; ++l)
    for (int d = 0; d < num_directions(st.layers[l]); ++d) {
      const Status s = pack_lstm(p, l, d, can, bytes);
      if (s != Status::ok) {
        std::memset(bytes, 0, kPackedHeaderBytes);  // not a packed buffer
        return s;
      }
    }
  if (st.embedding.vocab_size > 0 && !p.options.int8_token_table)
    std::memcpy(bytes + p.i8.table, can + canonical_offset(st, 0, 0, ParamKind::embedding, 0),
                static_cast<std::size_t>(st.embedding.vocab_size) * st.input_size);
  for (int k = 0; k < num_dense(st); ++k) {
    const Status s = pack_dense(p, k, can, bytes);
    if (s != Status::ok) {
      std::memset(bytes, 0, kPackedHeaderBytes);
      return s;
    }
  }
  return Status::ok;
}

// ---- Running ----

// Rows of an int8 tensor: row (t, b) at base + t·st + b·sb; or, with ids (the Embedding's token
// ids, read in place), row ids[t·st + b·sb] of the table `base`, of `width` bytes.
struct View {
  const std::int8_t* base = nullptr;
  std::int64_t st = 0, sb = 0;
  const std::int32_t* ids = nullptr;
  std::int64_t width = 0;
  const std::int8_t* row(std::int64_t t, std::int64_t b) const {
    return ids != nullptr ? base + static_cast<std::int64_t>(ids[t * st + b * sb]) * width : base + t * st + b * sb;
  }
};

struct Run {
  const PlanImpl* p;
  const unsigned char* pk;
  unsigned char* ws;
  const ForwardArgs* a;
  int threads;  // rows are split over this many threads
};

template <class T>
T* ws_at(const Run& r, std::size_t off) {
  return reinterpret_cast<T*>(r.ws + off);
}

// Direction (l, d)'s prepared parameters, its kernels' pointers into the packed buffer. Not
// inlined, into the caller's value: the packed copy it reads stays off the frame the step runs on
// (the firmware's stack peak).
RNNCORE_Q8_NOINLINE void unpack_lstm(const Run& r, int l, int d, q8::Int8LstmParams* prm) {
  PackedLstm pl;
  std::memcpy(&pl, r.pk + r.p->i8.dir[l][d].params, sizeof pl);
  unpack_lstm_params(pl, r.pk, prm);
  prm->dot = dot_kernel(*r.p);
  prm->dot_panels = q8::int8_panel_layout(prm->layout) ? panel_kernel(*r.p) : nullptr;
  prm->gate_activations = gate_kernel(*r.p);
  prm->cell_update = cell_kernel(*r.p);
  prm->token_gates = token_vocab(*r.p, l) > 0;
}

// Layer 0's input with token tables (PlanOptions::int8_token_table): each step's row of direction
// d's table for the token, 4H int16 as bytes, instead of its embedded row; else `in` itself.
View layer0_rows(const Run& r, const View& in, int d) {
  if (token_vocab(*r.p, 0) == 0) return in;
  PackedLstm pl;
  std::memcpy(&pl, r.pk + r.p->i8.dir[0][d].params, sizeof pl);
  View v = in;
  v.base = reinterpret_cast<const std::int8_t*>(r.pk + pl.w[0]);
  v.width = 8 * static_cast<std::int64_t>(pl.hidden_size);
  return v;
}

// Row b's state of layer l in the workspace (Int8Plan::h, c): rows at the widest layer's stride,
// so that another thread at another layer never shares them. Layer-major: c alone, one set.
std::int64_t state_row(const Run& r, int l, std::int64_t b) {
  const Int8Plan& q = r.p->i8;
  return (q.step_major ? l * static_cast<std::int64_t>(q.state_rows) + b : b) * q.max_hidden;
}
std::int8_t* state_h(const Run& r, int l, std::int64_t b) { return ws_at<std::int8_t>(r, r.p->i8.h) + state_row(r, l, b); }
std::int16_t* state_c(const Run& r, int l, std::int64_t b) { return ws_at<std::int16_t>(r, r.p->i8.c) + state_row(r, l, b); }

// Row b's state of (l, d) from h0 / c0 (or LiteRT's initial one) into h and c, and back to hy / cy.
void load_state(const Run& r, int l, int d, std::int64_t b, std::int8_t* h, std::int16_t* c) {
  const StackSpec& st = r.p->stack;
  const ForwardArgs& a = *r.a;
  const std::int64_t H = st.layers[l].hidden_size;
  const std::size_t hs = static_cast<std::size_t>(H);
  if (a.h0 != nullptr)
    std::memcpy(h, static_cast<const std::int8_t*>(a.h0) + state_offset(st, a.batch, l, d) + b * H, hs);
  else
    std::memset(h, static_cast<std::uint8_t>(st.layers[l].int8[d].state.zero_point), hs);
  if (a.c0 != nullptr)
    std::memcpy(c, static_cast<const std::int16_t*>(a.c0) + cell_state_offset(st, a.batch, l, d) + b * H, 2 * hs);
  else
    std::memset(c, 0, 2 * hs);
}
void store_state(const Run& r, int l, int d, std::int64_t b, const std::int8_t* h, const std::int16_t* c) {
  const StackSpec& st = r.p->stack;
  const ForwardArgs& a = *r.a;
  const std::int64_t H = st.layers[l].hidden_size;
  const std::size_t hs = static_cast<std::size_t>(H);
  if (a.hy != nullptr) std::memcpy(static_cast<std::int8_t*>(a.hy) + state_offset(st, a.batch, l, d) + b * H, h, hs);
  if (a.cy != nullptr) std::memcpy(static_cast<std::int16_t*>(a.cy) + cell_state_offset(st, a.batch, l, d) + b * H, c, 2 * hs);
}

// LiteRT's QUANTIZE on the CPU (int8_quantize) of x's row (t, b) into `row`.
void quantize_row(const Run& r, std::int64_t t, std::int64_t b, std::int8_t* row) {
  const StackSpec& st = r.p->stack;
  const ForwardArgs& a = *r.a;
  const std::int64_t I = st.input_size;
  const std::int64_t at_tb = a.layout == Layout::batch_major ? b * a.seq_len + t : t * a.batch + b;
  const float* xf = static_cast<const float*>(a.x) + at_tb * I;
  const float recip = 1.0f / st.input_quant.scale;
  for (std::int64_t i = 0; i < I; ++i) row[i] = int8_quantize(xf[i], recip, st.input_quant.zero_point);
}

// Layer 0's int8 input rows [b0, b1) in x's order of steps: the caller's int8 x in its layout, the
// Embedding's table rows of its token ids (in place), or (float input, layer-major) the rows
// quantized into the workspace, time-major.
View input_rows(const Run& r, int b0, int b1) {
  const PlanImpl& p = *r.p;
  const StackSpec& st = p.stack;
  const ForwardArgs& a = *r.a;
  const std::int64_t T = a.seq_len, B = a.batch, I = st.input_size;
  const bool bm = a.layout == Layout::batch_major;
  if (st.embedding.vocab_size > 0)
    return View{reinterpret_cast<const std::int8_t*>(r.pk + p.i8.table), bm ? 1 : B, bm ? T : 1,
                static_cast<const std::int32_t*>(a.x), I};
  if (!st.float_input) return View{static_cast<const std::int8_t*>(a.x), bm ? I : B * I, bm ? T * I : I};
  std::int8_t* x = ws_at<std::int8_t>(r, p.i8.x);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = b0; b < b1; ++b) quantize_row(r, t, b, x + (t * B + b) * I);
  return View{x, B * I, I};
}

// x's steps last to first (StackSpec::reverse_input): the same rows, time running backwards.
View reversed(View v, std::int64_t steps) {
  if (v.ids != nullptr)
    v.ids += (steps - 1) * v.st;
  else
    v.base += (steps - 1) * v.st;
  v.st = -v.st;
  return v;
}

// Layer 0's int8 input for rows [b0, b1) (input_rows), reversed in time where the stack says so.
View input_view(const Run& r, int b0, int b1) {
  const View v = input_rows(r, b0, b1);
  return r.p->stack.reverse_input && r.a->seq_len > 0 ? reversed(v, r.a->seq_len) : v;
}

// One direction of layer l for rows [b0, b1): each row's steps in order (reverse: last to first),
// its state from h0 / c0 (or LiteRT's initial one) and to hy / cy; step t's output to
// out + t·out_st + b·out_sb (out_st 0: only the last step's stays). h is that output row itself:
// the initial state is loaded into the first step's row, each later row starts as a copy of the
// row before and the step updates it in place (no h of its own in the workspace); c is the plan's
// one slot. A run of no steps writes no row: its h goes to hy through the scratch.
void run_direction(const Run& r, int l, int d, const View& in, std::int8_t* out, std::ptrdiff_t out_st, std::ptrdiff_t out_sb,
                   int b0, int b1, std::int8_t* scratch) {
  q8::Int8LstmParams prm;
  unpack_lstm(r, l, d, &prm);
  const View src = l == 0 ? layer0_rows(r, in, d) : in;
  const int T = r.a->seq_len;
  const std::size_t hs = static_cast<std::size_t>(r.p->stack.layers[l].hidden_size);
  for (int b = b0; b < b1; ++b) {
    std::int8_t* const rows = out + b * out_sb;
    std::int16_t* c = state_c(r, l, b);
    std::int8_t* h = T > 0 ? rows + (d == 0 ? 0 : T - 1) * out_st : scratch;
    load_state(r, l, d, b, h, c);
    for (int k = 0; k < T; ++k) {
      const int t = d == 0 ? k : T - 1 - k;
      std::int8_t* const row = rows + t * out_st;
      if (row != h) std::memcpy(row, h, hs);
      h = row;
      q8::int8_lstm_step(prm, 1, src.row(t, b), h, c, scratch);
    }
    store_state(r, l, d, b, h, c);
  }
}

// A merging layer's output row from its directions' rows.
void merge_row(const PlanImpl& p, int l, std::size_t n, const std::int8_t* fw, const std::int8_t* bw, std::int8_t* y) {
  const Int8Merge& m = p.stack.layers[l].merge;
  switch (m.mode) {
    case MergeMode::sum: q8::int8_add(p.i8.merge_add[l], n, fw, bw, y); break;
    case MergeMode::mul: q8::int8_mul(p.i8.merge_mul[l], n, fw, bw, y); break;
    case MergeMode::ave:
      q8::int8_add(p.i8.merge_add[l], n, fw, bw, y);
      q8::int8_mul_constant(p.i8.merge_mul[l], n, y, static_cast<std::int8_t>(m.half_value), y);
      break;
    case MergeMode::concat: break;
  }
}

// Layer-major: every layer for rows [b0, b1); returns the last layer's output (time-major in the
// workspace; before a last-step head, each row's last outputs in head_rows, step stride 0).
// The workspace's rows have one stride for every layer (the widest output; a merge's directions:
// the widest layer), so that a thread's rows never overlap another's while the threads are at
// different layers (no barrier between them).
View run_layers(const Run& r, int b0, int b1, std::int8_t* scratch) {
  const PlanImpl& p = *r.p;
  const StackSpec& st = p.stack;
  const std::ptrdiff_t T = r.a->seq_len, B = r.a->batch, S = p.i8.max_width, Sd = p.i8.max_hidden;
  View in = input_view(r, b0, b1);
  for (int l = 0; l < st.num_layers; ++l) {
    const LayerSpec& ls = st.layers[l];
    const std::ptrdiff_t H = ls.hidden_size, W = layer_output_width(ls);
    const bool last = l + 1 == st.num_layers;
    // Rows of this layer's output: the workspace's, the caller's y itself (the last layer of a
    // stack without a head, writing int8), or each row's final ones (before a last-step head).
    std::int8_t* out = ws_at<std::int8_t>(r, p.i8.out[l & 1]);
    std::ptrdiff_t ost = B * S, osb = S, dst = B * Sd;
    if (last && direct_output(p)) {
      const bool bm = r.a->layout == Layout::batch_major;
      out = static_cast<std::int8_t*>(r.a->y);
      ost = bm ? W : B * W;
      osb = bm ? T * W : W;
    } else if (last && last_step_head(st)) {
      out = ws_at<std::int8_t>(r, p.i8.head_rows);
      ost = 0;
      osb = W;
      dst = 0;
    }
    if (merged(ls)) {
      std::int8_t* dir_out[2] = {ws_at<std::int8_t>(r, p.i8.dir_out[0]), ws_at<std::int8_t>(r, p.i8.dir_out[1])};
      for (int d = 0; d < 2; ++d) run_direction(r, l, d, in, dir_out[d], dst, Sd, b0, b1, scratch);
      const std::ptrdiff_t rows = ost == 0 ? (T > 0 ? 1 : 0) : T;
      for (std::ptrdiff_t t = 0; t < rows; ++t)
        for (std::ptrdiff_t b = b0; b < b1; ++b)
          merge_row(p, l, static_cast<std::size_t>(H), dir_out[0] + t * dst + b * Sd, dir_out[1] + t * dst + b * Sd,
                    out + t * ost + b * osb);
    } else {
      for (int d = 0; d < num_directions(ls); ++d) run_direction(r, l, d, in, out + d * H, ost, osb, b0, b1, scratch);
    }
    in = View{out, ost, osb};
  }
  return in;
}

// Dense k of the chain's prepared parameters, its kernel's pointers into the packed buffer.
q8::Int8DenseParams dense_params(const Run& r, int k) {
  PackedDense pd;
  std::memcpy(&pd, r.pk + r.p->i8.dense[k].params, sizeof pd);
  q8::Int8DenseParams dp = unpack_dense_params(pd, r.pk);
  dp.dot = dot_kernel(*r.p);
  return dp;
}

// Dense k of the chain on n rows. Not inlined: its prepared parameters, read from the packed
// buffer at each call, are on the stack only while it runs, not under every step (the firmware's
// stack peak).
RNNCORE_Q8_NOINLINE void dense_rows(const Run& r, int k, int n, const std::int8_t* in, std::int8_t* out) {
  q8::int8_dense(dense_params(r, k), n, in, out);
}

// The head's softmax on n rows. Not inlined: its 1 KiB of parameters are on the stack only while
// it runs, not under every step of a stack with a head.
RNNCORE_Q8_NOINLINE void head_softmax(const Run& r, int n, const std::int8_t* in, std::int8_t* out) {
  const StackSpec& st = r.p->stack;
  rnncore_int8_softmax sm;
  std::memcpy(&sm, r.pk + r.p->i8.dense[st.num_pre_head].softmax, sizeof sm);
  q8::int8_softmax(sm, n, static_cast<int>(st.head.out_features), in, out);
}

// The head (through the Dense layers before it) on n rows of the last layer's output at `rows`,
// into the head's buffers' rows from `first`; returns where its int8 rows are (row `first`).
const std::int8_t* head_apply(const Run& r, const std::int8_t* rows, int n, std::int64_t first) {
  const PlanImpl& p = *r.p;
  const StackSpec& st = p.stack;
  const DenseSpec& h = st.head;
  const std::int64_t F = h.out_features;
  std::int8_t* ya = ws_at<std::int8_t>(r, p.i8.head_a) + first * F;
  for (int k = 0; k < num_dense(st); ++k) {  // n rows of Dense k's input at `rows`
    const DenseSpec& d = dense_at(st, k);
    const std::int64_t Fk = d.out_features;
    std::int8_t* out = k == st.num_pre_head ? ya : ws_at<std::int8_t>(r, p.i8.head_mid[k % 2]) + first * Fk;
    dense_rows(r, k, n, rows, out);
    if (d.activation == Activation::sigmoid || d.activation == Activation::tanh)
      q8::int8_lookup(reinterpret_cast<const std::int8_t*>(r.pk + p.i8.dense[k].lut), static_cast<int>(n * Fk), out, out);
    rows = out;
  }
  if (h.activation != Activation::softmax) return ya;
  std::int8_t* yb = ws_at<std::int8_t>(r, p.i8.head_b) + first * F;
  head_softmax(r, n, ya, yb);
  return yb;
}

// Row (t, b) of the result (t 0 with last_step: y is [B, width]) into y, in the caller's layout,
// int8 or dequantized.
void emit_row(const Run& r, const std::int8_t* src, std::int64_t W, std::int64_t t, std::int64_t b, bool last_step) {
  const StackSpec& st = r.p->stack;
  const ForwardArgs& a = *r.a;
  const bool bm = a.layout == Layout::batch_major && !last_step;
  const std::int64_t dst = (bm ? b * a.seq_len + t : t * a.batch + b) * W;
  if (!st.float_output) {
    std::memcpy(static_cast<std::int8_t*>(a.y) + dst, src, static_cast<std::size_t>(W));
    return;
  }
  const QuantParams q = stack_output_quant(st);
  float* y = static_cast<float*>(a.y) + dst;  // LiteRT's DEQUANTIZE
  for (std::int64_t i = 0; i < W; ++i) y[i] = q.scale * static_cast<float>(src[i] - q.zero_point);
}

// A last-step head on rows [b0, b1) of head_rows (zeros for a run of no steps), into y.
void emit_last_step_head(const Run& r, int b0, int b1) {
  const StackSpec& st = r.p->stack;
  const std::int64_t D = head_input_size(st), F = st.head.out_features;
  std::int8_t* rows = ws_at<std::int8_t>(r, r.p->i8.head_rows);
  if (r.a->seq_len == 0) std::memset(rows + b0 * D, 0, static_cast<std::size_t>((b1 - b0) * D));
  const std::int8_t* res = head_apply(r, rows + b0 * D, b1 - b0, b0);
  for (std::int64_t b = b0; b < b1; ++b) emit_row(r, res + (b - b0) * F, F, 0, b, true);
}

// Layer-major rows [b0, b1): the layers, then the head on each step's rows (or the last step's), into y.
RNNCORE_Q8_NOINLINE void run_rows_by_layer(const Run& r, int b0, int b1, std::int8_t* scratch) {
  const StackSpec& st = r.p->stack;
  const View o = run_layers(r, b0, b1, scratch);
  const std::int64_t T = r.a->seq_len, F = st.head.out_features;
  if (last_step_head(st)) return emit_last_step_head(r, b0, b1);
  const std::int64_t W = F > 0 ? F : stack_output_size(st);
  if (F == 0 && direct_output(*r.p)) return;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = b0; b < b1; ++b)
      emit_row(r, F > 0 ? head_apply(r, o.row(t, b), 1, t * r.a->batch + b) : o.row(t, b), W, t, b, false);
}

// One field of a packed parameter block at `block` (each read on its own: a copy of the whole
// block, as unpack_dense_params takes it, is a byte loop at -Os).
template <class T>
T packed_field(const unsigned char* block, std::size_t offset) {
  T v;
  std::memcpy(&v, block + offset, sizeof v);
  return v;
}

// Whether the head is one Dense layer whose int8 rows are the result's rows as they are: no Dense
// before it, no activation table or softmax after it, an int8 result (emit_step writes into y).
bool head_in_place(const StackSpec& st) {
  const Activation act = st.head.activation;
  return st.head.out_features > 0 && st.num_pre_head == 0 && !st.float_output && act != Activation::sigmoid &&
         act != Activation::tanh && act != Activation::softmax;
}

// Step t's row b of the result in a step-major walk, from the last layer's output row y: the
// head's (head_apply) or y itself, through emit_row; a head_in_place head straight into y's row,
// its parameters read from the packed buffer as they are and `dot` the plan's kernel (the step's:
// no registry look-up), with no copy. Not inlined: the head's parameters stay off the step's frame.
RNNCORE_Q8_NOINLINE void emit_step(const Run& r, const std::int8_t* y, int t, int b, q8::DotRowsFn dot) {
  const StackSpec& st = r.p->stack;
  const std::int64_t F = st.head.out_features;
  if (head_in_place(st)) {
    const ForwardArgs& a = *r.a;
    const std::int64_t row = a.layout == Layout::batch_major ? static_cast<std::int64_t>(b) * a.seq_len + t
                                                              : static_cast<std::int64_t>(t) * a.batch + b;
    const unsigned char* pd = r.pk + r.p->i8.dense[0].params;
    q8::Int8DenseParams dp;
    dp.in_size = packed_field<std::int32_t>(pd, offsetof(PackedDense, in_size));
    dp.out_size = packed_field<std::int32_t>(pd, offsetof(PackedDense, out_size));
    dp.output_zp = packed_field<std::int32_t>(pd, offsetof(PackedDense, output_zp));
    dp.act_min = packed_field<std::int32_t>(pd, offsetof(PackedDense, act_min));
    dp.act_max = packed_field<std::int32_t>(pd, offsetof(PackedDense, act_max));
    dp.w = at<std::int8_t>(r.pk, packed_field<std::uint32_t>(pd, offsetof(PackedDense, w)));
    dp.bias = at<std::int32_t>(r.pk, packed_field<std::uint32_t>(pd, offsetof(PackedDense, bias)));
    dp.scale = at<float>(r.pk, packed_field<std::uint32_t>(pd, offsetof(PackedDense, scale)));
    dp.dot = dot;
    q8::int8_dense(dp, 1, y, static_cast<std::int8_t*>(a.y) + row * F);
    return;
  }
  if (F > 0) return emit_row(r, head_apply(r, y, 1, b), F, t, b, false);
  emit_row(r, y, stack_output_size(st), t, b, false);
}

// Step-major rows [b0, b1) (Int8Plan::step_major): each step through every layer (a layer's
// output is its state h), then the head and y's row of that step; a last-step head after the
// last step.
RNNCORE_Q8_NOINLINE void run_rows_by_step(const Run& r, int b0, int b1, std::int8_t* scratch) {
  const PlanImpl& p = *r.p;
  const StackSpec& st = p.stack;
  const int L = st.num_layers;
  const std::int64_t T = r.a->seq_len;
  const View in = st.float_input ? View{} : layer0_rows(r, input_view(r, b0, b1), 0);
  std::int8_t* xq = ws_at<std::int8_t>(r, p.i8.x);  // float input: one step's quantized rows [B, I]
  const bool every_step = !last_step_head(st), quantize = st.float_input;
  const std::int64_t layer_rows = static_cast<std::int64_t>(p.i8.state_rows) * p.i8.max_hidden;  // state_row's step per layer
  q8::Int8LstmParams prm;
  int unpacked = -1;  // the layer prm is for (read again per layer only in stacks of several)
  for (std::int64_t b = b0; b < b1; ++b) {
    for (int l = 0; l < L; ++l) load_state(r, l, 0, b, state_h(r, l, b), state_c(r, l, b));
    std::int8_t* const h0 = state_h(r, 0, b);
    std::int16_t* const c0 = state_c(r, 0, b);
    const std::int8_t* y = nullptr;
    for (std::int64_t t = 0; t < T; ++t) {
      if (quantize) {
        y = xq + b * st.input_size;
        quantize_row(r, st.reverse_input ? T - 1 - t : t, b, xq + b * st.input_size);
      } else {
        y = in.row(t, b);
      }
      std::int8_t* h = h0;
      std::int16_t* c = c0;
      for (int l = 0; l < L; ++l, h += layer_rows, c += layer_rows) {
        if (unpacked != l) {
          unpack_lstm(r, l, 0, &prm);
          unpacked = l;
        }
        q8::int8_lstm_step(prm, 1, y, h, c, scratch);
        y = h;
      }
      if (every_step) emit_step(r, y, static_cast<int>(t), static_cast<int>(b), prm.dot);
    }
    if (!every_step && T > 0)
      std::memcpy(ws_at<std::int8_t>(r, p.i8.head_rows) + b * head_input_size(st), y, static_cast<std::size_t>(head_input_size(st)));
    for (int l = 0; l < L; ++l) store_state(r, l, 0, b, state_h(r, l, b), state_c(r, l, b));
  }
  if (last_step_head(st)) emit_last_step_head(r, b0, b1);
}

// (Each walk its own frame: the other's buffers stay off the stack a step runs on.)
void run_rows(const Run& r, int b0, int b1, std::int8_t* scratch) {
  if (r.p->i8.step_major)
    run_rows_by_step(r, b0, b1, scratch);
  else
    run_rows_by_layer(r, b0, b1, scratch);
}

void forward_thread(void* context, int index) {
  const Run& r = *static_cast<const Run*>(context);
  const int threads = r.threads;
  const int B = r.a->batch;
  const int b0 = static_cast<int>(static_cast<std::int64_t>(B) * index / threads);
  const int b1 = static_cast<int>(static_cast<std::int64_t>(B) * (index + 1) / threads);
  if (b0 < b1)
    run_rows(r, b0, b1, ws_at<std::int8_t>(r, r.p->i8.scratch + static_cast<std::size_t>(index) * r.p->i8.scratch_stride));
}

Status forward_int8(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& a) {
  RNNCORE_ENSURE(a.seq_lengths == nullptr, Status::unsupported,
                 "forward: seq_lengths on an integer stack (dtype i8): every row runs seq_len steps, as LiteRT's op");
  RNNCORE_ENSURE(a.reserve == nullptr, Status::unsupported, "forward: an integer stack does not train");
  const int threads = p.options.threads < a.batch ? p.options.threads : a.batch;
  Run r{&p, static_cast<const unsigned char*>(packed), static_cast<unsigned char*>(workspace), &a, threads};
  if (threads <= 1)
    forward_thread(&r, 0);
  else
    pool_run(p.options.thread_pool, threads, forward_thread, &r);
  return Status::ok;
}

Status backward_int8(const PlanImpl&, const void*, void*, const BackwardArgs&) {
  return fail_status(Status::unsupported, "backward: an integer stack (dtype i8) does not train");
}

}  // namespace

const BackendOps kInt8Backend = {
    Backend::simd, /*device_memory=*/false, /*thread_pool=*/true, /*resets=*/false,
    layout_int8, layout_training_int8, pack_int8, forward_int8, backward_int8,
    nullptr, nullptr,
};

q8::Int8LstmQuantization int8_lstm_quantization(const StackSpec& st, int l, int d, const unsigned char* canonical) {
  return lstm_quantization(st, l, d, canonical);
}

q8::Int8LstmParams int8_packed_lstm(const PlanImpl& p, const void* packed, int l, int d) {
  const auto* pk = static_cast<const unsigned char*>(packed);
  PackedLstm pl;
  std::memcpy(&pl, pk + p.i8.dir[l][d].params, sizeof pl);
  q8::Int8LstmParams prm;  // (the kernels null)
  unpack_lstm_params(pl, pk, &prm);
  return prm;
}

}  // namespace detail
}  // namespace rnncore

// In the same object as the table: a call links it (see kInt8Backend in src/internal/backend.hpp).
void rnncore_link_int8(void) {}

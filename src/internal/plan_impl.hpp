// What a Plan holds: the stack, the chosen backend and kernels, and every offset into the caller's
// packed-weight buffer and workspace. Computed once by Plan::create; read-only afterwards.
#ifndef RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP
#define RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/rnncore.hpp"
#include "simd/kernels.hpp"
#include "src/internal/arena.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/gpu/host/plan_data.hpp"

namespace rnncore {
namespace detail {

// Byte offsets of one direction's packed parameters, in the SIMD backend's panel layout (below) or
// the GPU's row-major W, R and biases (src/gpu/host/plan.hpp, compute_layout); zero in a reference
// plan, whose packed buffer is the canonical one.
struct DirectionPack {
  std::size_t w_panel = 0;    // SIMD: input panel (nb × I × G × V)
  std::size_t r_panel = 0;    // SIMD: recurrent panel (GRU reset-before: r, z only)
  std::size_t r_panel_n = 0;  // SIMD GRU reset-before: n gate recurrent panel
  std::size_t bias = 0;       // SIMD: folded projection bias in gate-vector order
  std::size_t bias_rn = 0;    // SIMD GRU reset-after: bR_n
  std::size_t peepholes = 0;  // SIMD LSTM with peepholes: p_i, p_f, p_o in gate-vector order
  std::size_t proj_panel = 0; // SIMD LSTM with a projection: W_proj as a one-gate panel (Pp × H)
  std::size_t proj_bias = 0;  //   and its bias (zeros: TF's and PyTorch's projections have none)
};

// Per-layer facts, derived from the stack once.
struct LayerPlan {
  Mode mode = Mode::lstm;
  GruVariant gru_variant = GruVariant::reset_after;
  simd::Cell cell = simd::Cell::lstm;
  std::int32_t input_size = 0;     // I_l
  std::int32_t hidden = 0;         // H_l: cell units (c, gates)
  std::int32_t out = 0;            // O_l: units of h and of the output per direction (P_l, or H_l)
  bool extensions = false;         // LSTM projection, peepholes or clips (not on the GPU)
  std::int32_t hidden_stride = 0;  // floats per state row: Hp (SIMD) or H (reference)
  std::int32_t gates = 0;
  std::int32_t dirs = 1;
  bool skip_input = false;         // W x replaced by x (layer 0, input_mode skip)
  bool input_dropout = false;      // some wrapper drops the cell input
  bool state_dropout = false;      // some wrapper drops the outgoing state
  bool output_chain = false;       // some wrapper drops the output or adds a residual
  DirectionPack dir[2];
};

// Byte offsets into the workspace that every backend's layout uses (each takes the ones it needs).
// Regions are sized for the largest layer.
struct WorkspaceLayout {
  std::size_t proj[2] = {0, 0};       // SIMD, GPU: input projections of a chunk of steps (or of all steps)
  std::size_t h[2][2] = {{0, 0}, {0, 0}};  // [dir][buffer] rows of Hs (double-buffered h)
  std::size_t c[2] = {0, 0};          // [dir] rows of Hs
  std::size_t rh[2] = {0, 0};         // SIMD, GPU: GRU reset-before scratch r ⊙ h
  std::size_t z[2] = {0, 0};          // SIMD, GPU: GRU reset-before scratch z
  std::size_t layer_out[2] = {0, 0};  // [T, B, D·H] outputs of inner layers
  std::size_t x_cell[2] = {0, 0};     // [dir] [T, B, I]: the input after input dropout
  std::size_t embed_x = 0;            // embedding: [T, B, I] the looked-up rows layer 0 reads
  std::size_t head_in = 0;            // head: [T, B, D·O] the last layer's output (time-major)
  std::size_t head_rows = 0;          //   last_step_only: [B, D·O] each row's last outputs
  std::size_t head_out = 0;           //   [T, B, out] (or [B, out]) the head's products before the epilogue
  std::size_t head_mid[2] = {0, 0};   //   pre_head: [T, B, ·] (or [B, ·]) Dense k's activations in head_mid[k % 2]
  std::size_t scratch = 0;            // per thread (SIMD) or direction (reference): kScratchRows rows
  std::size_t scratch_stride = 0;     //   of max_width elements each
  std::size_t total = 0;
};

// Training plans: the canonical weights in the packed buffer, the reserve a training forward fills
// and the buffers of the training forward and of backward that every backend uses. Offsets in bytes;
// regions sized for the plan's max batch and length (a run with fewer rows or steps uses their
// leading parts).
struct TrainLayout {
  std::size_t canonical = 0;           // packed buffer: the canonical weights
  // Reserve: a header, then per (layer, dir) [T, B, keep_width] rows, then inner-layer outputs.
  std::size_t keep[kMaxLayers][2] = {};
  std::size_t layer_out[kMaxLayers] = {};  // [T, B, D·H] after inter-layer dropout (l < L-1)
  std::size_t embed_x = 0;   // embedding: [T, B, I] the rows layer 0 read
  std::size_t head_in = 0;   // head: [T, B, D·H] the last layer's output
  std::size_t head_y = 0;    //   [T, B, out] (or [B, out]) the head's activations, time-major
  std::size_t pre_head_y[kMaxPreHead] = {};  //   pre_head: [T, B, ·] (or [B, ·]) Dense k's activations
  std::size_t reserve_total = 0;
  // Training-forward workspace of the host backends (the reference cell loop).
  std::size_t h[2][2] = {{0, 0}, {0, 0}}, c[2] = {0, 0}, rows = 0, rows_stride = 0;
  std::size_t forward_total = 0;
  // Backward workspace.
  std::size_t dh[2] = {0, 0}, dc = 0;  // [B, H] gradients of the state passed between steps (dh: two turns)
  std::size_t dgates = 0;    // [T, B, (G+1)·H] pre-activation gradients of one direction
  std::size_t hprev = 0;     // [T, B, H] the state each step read
  std::size_t xcell = 0;     // [T, B, I] the cell input after input dropout
  std::size_t dlayer[2] = {0, 0};  // [T, B, max_width] gradients of layer outputs / inputs
  std::size_t brows = 0;     // kScratchRows + 1 rows of max_width (the last: a mask row), then [B, H]
                             // (the reset-before GRU's d(r ⊙ h))
  std::size_t head_dz = 0;   // head: [T, B, out] (or [B, out]) gradients of its pre-activations
  std::size_t head_da[2] = {0, 0};  //   pre_head: [T, B, ·] (or [B, ·]) gradients of Dense k's output in head_da[k % 2]
  std::size_t backward_total = 0;
};

// The SIMD backend's own workspace regions (beside WorkspaceLayout's).
struct SimdWorkspace {
  std::size_t proj_floats = 0;        // floats of each WorkspaceLayout::proj (rows of G·Hp; a chunk of steps)
  std::size_t mask_h[2] = {0, 0};     // [dir] [B] rows of Hs: this step's state mask for h
  std::size_t mask_c[2] = {0, 0};     // [dir] [B] rows of Hs: for c
  std::size_t h16[2][2] = {{0, 0}, {0, 0}};  // bf16 weights: h in bf16, [dir][buffer] rows of Hs
  std::size_t rh16[2] = {0, 0};       // bf16 weights, GRU reset-before: r ⊙ h in bf16
  std::size_t cell_out[2] = {0, 0};   // LSTM projection: o ⊙ tanh(c), [dir] rows of Hs
  std::size_t cell_out16[2] = {0, 0}; //   and in bf16 (bf16 weights)
  std::size_t x16 = 0;                // bf16 weights: per thread, a chunk's input rows in bf16
  std::size_t x16_stride = 0;
};

// The SIMD backend's own training regions (beside TrainLayout's).
struct SimdTrainLayout {
  // Per (layer, dir) Wᵀ [I, G·H] (none for a skip layer or bf16_batched_products) and Rᵀ [H, G·H] packed for f32_matmul
  // (F32Kernels::pack_b): the B operands of the batched training forward (f16 / bf16 weights: no
  // Rᵀ, r_t 0: the forward reads the inference's stored recurrent panels).
  std::size_t w_t[kMaxLayers][2] = {}, r_t[kMaxLayers][2] = {};
  std::size_t p_t[kMaxLayers][2] = {};  // LSTM projection: W_projᵀ [H, P] packed likewise
  // The batched training forward: projections of every step [T, B, G·H], one step's recurrent
  // products [B, G·H], the state [B, H] (h, c, r ⊙ h) and the cell input [T, B, I].
  std::size_t proj = 0, rec = 0, state_h = 0, state_c = 0, rh = 0, x_in = 0;
  std::size_t forward_pack = 0;   // simd::kMatmulScratchFloats per thread for the matmuls' packed tiles
  std::size_t thread_rows = 0;    // more than one thread: kScratchRows rows (train.rows_stride bytes) per thread
  // f16 / bf16 weights: the recurrent products read the inference's panels (gemm[w]) into rows of
  // G·Hp floats in gate-vector order (rec_blocks), after zeros (zero_bias, G·Hp floats); bf16 rounds
  // their input rows to h16 (rows of h16_stride elements).
  std::size_t rec_blocks = 0, zero_bias = 0, h16 = 0, h16_stride = 0;
  // bf16 panels (vdpbf16ps): the input projection's rows in bf16 (x16, rows of x16_stride elements)
  // and its products in gate-vector order (x_blocks, rows of G·Hp floats), kInputChunkRows rows (or
  // B, if more) at a time.
  std::size_t x16 = 0, x16_stride = 0, x_blocks = 0;
  // f16 / bf16 weights, per (layer, dir): the backward's per-step dh = dpre · R reads Rᵀ as a
  // one-gate panel of O units over K = recurrent_k rows of R (simd_pack_transposed_panel).
  std::size_t rt_panel[kMaxLayers][2] = {};
  // bf16 panels (vdpbf16ps), per (layer, dir) with input weights: the backward's dx = dpre · W reads
  // Wᵀ as a one-gate panel of I units over K = G·H rows of W (0: dx is an f32 product).
  std::size_t wt_panel[kMaxLayers][2] = {};
  std::size_t backward_pack = 0;  // backward: simd::kMatmulScratchFloats per thread
  bool backward_pack_wide = false;  // kMatmulWideScratchFloats instead (wide_backward_pack)
  std::size_t backward_rows = 0;  // backward, more than one thread: kScratchRows + 1 rows of max_width per thread
  std::size_t r_packed = 0;       // backward: one direction's R [G·H, O] (and W_proj [P, H]) packed for the per-step products
};

// The SIMD backend's part of a plan (all zero in the other backends' plans: kernels null).
struct SimdPlan {
  // Its F32Kernels table, as the table's place in the kernel registry (kernel_registry(f32_rnn);
  // -1: none), so that a plan holds no pointer (a plan value may be a const object in flash:
  // docs/porting.md, "The plan"); kernels() reads it (src/kernels.cpp).
  std::int32_t table = -1;
  const simd::F32Kernels* kernels() const;
  simd::Weights weights = simd::Weights::f32;  // storage of the packed weights
  bool bf16_pairs = false;                     // bf16 panels in k-pairs (vdpbf16ps)
  std::size_t head_wt = 0;                     // packed buffer: the head's Wᵀ packed for f32_matmul
  SimdWorkspace ws;
#if RNNCORE_TRAINING
  SimdTrainLayout train;                       // options.training only
#endif
};
constexpr std::size_t kGpuGradArgBytesPerLayer = 8192;

// Values a training forward keeps per row and step, in units of H (reserve rows are slot-major:
// slot s of unit u at s·H + u): LSTM i f g o c h; GRU reset-after r z n (R_n h + bR_n) h;
// GRU reset-before r z n h; Elman RNN h.
int keep_slots(const LayerPlan& lp);
// Elements of one reserve row, and where its h (the state the next step reads, lp.out units)
// starts. An LSTM with extensions keeps i f g o c m c̃ (H each; m = o ⊙ tanh c, c̃ the cell state
// before the cell clip), then h h̃ (O each; h̃ the projection before the projection clip; without
// a projection h = h̃ = m); every other layer keep_slots·H, h in the last slot.
int keep_width(const LayerPlan& lp);
// Whether a SIMD training plan's per-step recurrent products (the forward's h·Rᵀ, the backward's
// dh = dpre·R) of layer `lp` read the stored panels instead of f32 products on the stored weights.
// f16: always (f32 inputs: the products of f32 on the stored weights, exactly). bf16: where the
// kernel table has native bf16 dot products (bf16_pairs, vdpbf16ps), for every cell but the ReLU
// RNN: the panels round h and dpre to bf16 too (f32 accumulation), ≈ 2^-8 relative per input,
// which the saturating cells absorb but which flips ReLU units against the f64 reference (a
// bidirectional ReLU RNN's dx 0.16 off, measured); a ReLU layer, and bf16 on a table that would
// convert the panels (AVX2), keep f32 products on the stored (rounded) weights.
inline bool trains_from_stored_panels(const SimdPlan& s, const LayerPlan& lp) {
  if (s.weights == simd::Weights::f16) return true;
  return s.weights == simd::Weights::bf16 && s.bf16_pairs && lp.mode != Mode::rnn_relu;
}
// Whether the layer's batched training products (the forward's input projection, the backward's dx)
// run on bf16 panels too (vdpbf16ps), their f32 operand rounded to bf16 as the inference rounds x.
inline bool bf16_batched_products(const SimdPlan& s, const LayerPlan& lp) {
  return s.weights == simd::Weights::bf16 && trains_from_stored_panels(s, lp);
}
// Rows of R [G·H, O] the backward's per-step dh product reads: every gate's, but a reset-before
// GRU's n (its gradient reaches h through r ⊙ h).
inline int recurrent_k(const LayerPlan& lp) {
  return lp.mode == Mode::gru && lp.gru_variant == GruVariant::reset_before ? 2 * lp.hidden : lp.gates * lp.hidden;
}
int keep_h(const LayerPlan& lp);

constexpr std::uint64_t kPackedMagic = 0x4b4341505243524eull;  // packed buffer header
constexpr std::size_t kPackedHeaderBytes = 64;
constexpr int kScratchRows = 6;
// Rows (whole steps, at least one) of a training forward's input projection on bf16 panels per
// call: enough that the W panel is read once for many rows (at B = 1, one step a call read it 50
// times per sequence and made the step 10 % slower than f32).
constexpr int kInputChunkRows = 64;
constexpr std::uint64_t kReserveMagic = 0x5652455345525243ull;  // reserve filled by a training forward
constexpr std::size_t kReserveHeaderBytes = 64;  // rows of the per-direction scratch area

struct BackendOps;  // src/internal/backend.hpp
// Which backend table a plan runs on (PlanImpl::ops, set once by choose_backend).
enum class BackendTable : std::int32_t { none = 0, reference = 1, simd = 2, gpu = 3, int8 = 4 };

// A plan: the common part (the stack, the layers, the layouts every backend uses) and the chosen
// backend's part (`simd` or `gpu`; the other stays zero). `ops()` is the chosen backend's table.
// A plan holds no pointer of its own making (the backend table and the kernels are indices; only
// options.thread_pool is the caller's), so that its bytes are the same in every image of a build:
// a planned value can be kept as a const object (in flash) and run from there.
struct PlanImpl {
  std::uint64_t magic = 0;
  StackSpec stack;
  PlanOptions options;
  BackendTable table = BackendTable::none;  // the chosen backend's operations
  const BackendOps* ops() const;     // its static table (src/plan.cpp); null before the choice
  Backend backend = Backend::reference;  // what Plan::backend() reports (ops()->kind once chosen)
  Isa isa = Isa::none;
  char kernel_name[32] = {0};
  std::int32_t vector = 1;           // V
  std::int32_t max_width = 0;        // widest input, output or state row of any layer
  bool any_dropout = false;          // some wrapper or inter-layer dropout can drop something
  std::size_t packed_bytes = 0;
  // The embedding table, head W and b in their canonical layout (param_kind embedding...), in the
  // packed buffer at `ends` (bytes).
  std::size_t ends = 0;
  std::uint64_t fingerprint = 0;     // identifies the packed layout; stored in the packed header
  WorkspaceLayout ws;
  LayerPlan layers[kMaxLayers];
#if RNNCORE_TRAINING  // (a build without training has no training layout: a smaller plan)
  TrainLayout train;                 // options.training only
#endif
  SimdPlan simd;                     // backend simd only
  Int8Plan i8;                       // integer stacks (dtype i8) only
#ifndef RNNCORE_NO_GPU_PLAN
  gpu::GpuPlan gpu;                  // backend gpu only: the device planned for and the kernel choices
#endif
};
// A created plan's magic. It holds the plan's size, so that a plan value made by a build of another
// layout (pointer width, max_layers, training: a const plan of export-c --plan) is refused as not created.
constexpr std::uint64_t kPlanMagic = 0x4e414c5045524f43ull ^ (std::uint64_t{sizeof(PlanImpl)} << 40);

// The packed buffer's first kPackedHeaderBytes: PackedHeader, then at kPackedFamilyOffset the
// kernel family the buffer was packed for (Plan::kernel_name, Plan::isa), so that a plan of
// another family can say how to match; the rest zero.
struct PackedHeader {
  std::uint64_t magic;
  std::uint64_t fingerprint;
};
struct PackedFamily {
  char kernel_name[32];
  std::int32_t isa;
  std::int32_t reserved;  // no padding: every byte is defined (export-c writes them)
};
constexpr std::size_t kPackedFamilyOffset = sizeof(PackedHeader);
static_assert(kPackedFamilyOffset + sizeof(PackedFamily) <= kPackedHeaderBytes, "the packed header outgrew its bytes");

const PlanImpl& impl(const Plan& plan);
// The packed layout's identity (stored in the packed header, checked by forward): shapes, backend,
// weight storage (the SIMD panels' or the GPU's), training and the buffer's size. Plan::create sets
// PlanImpl::fingerprint to it once the layout is made.
std::uint64_t packed_fingerprint(const PlanImpl& p);

// A dropout run's parameters (docs/design.md §6), resolved once per forward call.
struct RunDropout {
  bool on = false;
  std::uint64_t seed = 0;
  std::uint32_t step = 0;  // step mod 2^32
  const std::uint32_t* row_ids = nullptr;
  std::uint32_t time_offset = 0;  // added to a step's time index in the masks (streaming)
};

// A run's per-step state resets (ForwardArgs::resets) in its layout: at(t, b) is true where row b's
// state is replaced by its initial state before step t. Empty (r null) for a run without resets.
struct Resets {
  const std::uint8_t* r = nullptr;
  std::int64_t st = 0, sb = 0;
  bool at(int t, int b) const { return r != nullptr && r[t * st + b * sb] != 0; }
};
// The run's resets ([T, B], or [B, T] batch-major; none when null), as the step loops read them.
inline Resets resets_of(const std::uint8_t* r, Layout layout, std::int64_t B, std::int64_t T) {
  if (r == nullptr) return Resets{};
  const bool bm = layout == Layout::batch_major;
  return Resets{r, bm ? 1 : B, bm ? T : 1};
}

// One direction of one layer, as seen by a backend. Element pointers are of the stack's dtype;
// strides are in elements. y points at this direction's first column; x_full_width is the layer
// input's row width (residuals read it).
struct DirectionIO {
  const void* x = nullptr;
  std::int64_t x_st = 0, x_sb = 0;
  void* y = nullptr;
  std::int64_t y_st = 0, y_sb = 0;
  const void* h0 = nullptr;  // [B, H] slot or null
  const void* c0 = nullptr;
  void* hy = nullptr;        // [B, H] slot or null
  void* cy = nullptr;
  std::int32_t steps = 0, batch = 0;
  const std::int32_t* lengths = nullptr;
  bool reverse = false;
  Resets resets;  // unidirectional layers only (forward refuses resets otherwise)
  RunDropout dropout;
  void* keep = nullptr;  // training forward: this direction's reserve rows [T, B, keep_width]
};

// Where the reference cell loop of one direction keeps its state: two h buffers and c ([B, H]
// each) and kScratchRows rows of max_width elements.
struct ReferenceBuffers {
  unsigned char* h[2] = {nullptr, nullptr};
  unsigned char* c = nullptr;
  unsigned char* rows = nullptr;
};

// The views of (layer, dir) for a run: the layer's input (the caller's x, or the previous layer's
// output in the workspace), its output columns, and its state slots.
DirectionIO direction_io(const PlanImpl& p, const ForwardArgs& a, unsigned char* ws, int layer, int dir,
                         const RunDropout& run);
// The same for a training forward (src/train_plan.cpp): the embedded rows, inner-layer outputs and
// the head's input live in its reserve (TrainLayout), and io.keep is the direction's reserve rows.
DirectionIO reserve_direction_io(const PlanImpl& p, const ForwardArgs& a, unsigned char* ws, int layer, int dir,
                                 const RunDropout& run, unsigned char* reserve);

// The dropout parameters of a run (dropout on only in training and Monte-Carlo runs of a stack with dropout).
RunDropout run_dropout(const PlanImpl& p, const ForwardArgs& args);
// Inter-layer dropout (if active for `layer`) on its time-major output [T, B, D·H]; scratch: one row.
void apply_inter_layer_dropout(const PlanImpl& p, const RunDropout& run, int layer, unsigned char* out, int steps, int batch,
                               unsigned char* scratch);

// Embedding and head (src/head.cpp), on the host backends. embed_lookup fills ws.embed_x from the
// token ids in args.x; run_head maps ws.head_in into args.y (its f32 products by the backend's
// BackendOps::head_product_f32). Ids are checked by forward first.
// A training forward passes the reserve: embed_lookup's rows go to `out` (its embed_x), run_head
// reads the last layer's output from its head_in and keeps each pre_head Dense's activations and
// the head's there (TrainLayout::pre_head_y, head_y).
void embed_lookup(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
                  unsigned char* out = nullptr);
void run_head(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
              unsigned char* reserve = nullptr);
// Backward through the ends (src/head_grad.cpp), T float or double. head_backward maps args.dy (the
// head's output gradient) through the head and the pre_head chain to d_out [T, B, D·H] time-major,
// the last layer's output gradient, and adds every Dense's dW, db to `dweights` (when not null); embedding_backward adds layer 0's input gradient
// d_x [T, B, I] (time-major) to the table's rows of the ids seen.
template <class T>
void head_backward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const BackwardArgs& args, T* d_out,
                   T* dweights);
template <class T>
void embedding_backward(const PlanImpl& p, const BackwardArgs& args, const T* d_x, T* dweights);

// The reserve's header (kReserveHeaderBytes) describing a training forward's run, and the check
// that backward's run is that one (the GPU backend copies the header between host and device).
void describe_reserve(const PlanImpl& p, const ForwardArgs& args, unsigned char* header);
Status check_reserve_header(const PlanImpl& p, const ForwardArgs& args, const unsigned char* header);

// (Each backend's operations: src/internal/backend.hpp.)

// The per-direction f32 workspace buffers the SIMD and GPU layouts share, in this order: proj,
// h[0], h[1], c (LSTM), rh and z (reset-before GRU), x_cell (input dropout); sizes in elements.
struct DirectionBuffers {
  std::uint64_t proj = 0, state = 0, x_cell = 0;
  bool lstm = false, reset_before = false;
};
void take_direction_buffers(Arena* ws, const DirectionBuffers& sizes, int dir, WorkspaceLayout* w);

// Where Plan::create gets a GPU plan's device part: the build's backend (gpu_select, gpu_layout:
// the device's own description and occupancy), or a described device without a runtime (the
// emulator tests plan for device profiles through create_plan with src/gpu/host/plan.hpp's functions).
struct GpuPlanner {
  Status (*select)(const PlanOptions& options, PlanImpl* p, const void* context) = nullptr;
  Status (*layout)(PlanImpl* p, const void* context) = nullptr;
  const void* context = nullptr;
};
GpuPlanner build_gpu_planner();
// Plan::create with the GPU part from `gpu`.
Status create_plan(const StackSpec& stack, const PlanOptions& options, const GpuPlanner& gpu, Plan* out);

// CPU features: the best f32 kernel table not above `cap` (also capped by env RNNCORE_MAX_ISA), or null.
const simd::F32Kernels* select_f32_kernels(Isa cap, Isa* chosen);
// The registry's index of an F32Kernels table (SimdPlan::table), or -1.
int f32_table_index(const simd::F32Kernels* table);
bool cpu_has_avx512_bf16();
// Whether this CPU runs `isa` (and the OS saves its registers); whether it has AArch64's SDOT.
bool cpu_has_isa(Isa isa);
bool cpu_has_arm_dotprod();
// Whether it has x86 AVX-512 VNNI (vpdpbusd) as well as Isa::avx512.
bool cpu_has_avx512_vnni();
// Whether a kernel of `isa` lies within a cap (none: portable code, always), and the cap
// RNNCORE_MAX_ISA sets (best when unset).
bool isa_within_cap(Isa isa, Isa cap);
Isa env_isa_cap();

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP

// What a Plan holds: the stack, the chosen backend and kernels, and every offset into the caller's
// packed-weight buffer and workspace. Computed once by Plan::create; read-only afterwards.
#ifndef RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP
#define RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/rnncore.hpp"
#include "simd/kernels.hpp"

namespace rnncore {
namespace detail {

// Byte offsets of one direction's packed parameters.
struct DirectionPack {
  std::size_t w_panel = 0;    // SIMD: input panel (nb × I × G × V)
  std::size_t r_panel = 0;    // SIMD: recurrent panel (GRU reset-before: r, z only)
  std::size_t r_panel_n = 0;  // SIMD GRU reset-before: n gate recurrent panel
  std::size_t bias = 0;       // SIMD: folded projection bias in gate-vector order
  std::size_t bias_rn = 0;    // SIMD GRU reset-after: bR_n
};

// Per-layer facts, derived from the stack once.
struct LayerPlan {
  Mode mode = Mode::lstm;
  GruVariant gru_variant = GruVariant::reset_after;
  simd::Cell cell = simd::Cell::lstm;
  std::int32_t input_size = 0;     // I_l
  std::int32_t hidden = 0;         // H_l
  std::int32_t hidden_stride = 0;  // floats per state row: Hp (SIMD) or H (reference)
  std::int32_t gates = 0;
  std::int32_t dirs = 1;
  bool skip_input = false;         // W x replaced by x (layer 0, input_mode skip)
  bool input_dropout = false;      // some wrapper drops the cell input
  bool state_dropout = false;      // some wrapper drops the outgoing state
  bool output_chain = false;       // some wrapper drops the output or adds a residual
  DirectionPack dir[2];
};

// Byte offsets into the workspace. Regions are sized for the largest layer.
struct WorkspaceLayout {
  std::size_t proj[2] = {0, 0};       // SIMD: [T·B] rows of G·Hp — input projections of all steps
  std::size_t h[2][2] = {{0, 0}, {0, 0}};  // [dir][buffer] rows of Hs (double-buffered h)
  std::size_t c[2] = {0, 0};          // [dir] rows of Hs
  std::size_t rh[2] = {0, 0};         // GRU reset-before scratch r ⊙ h
  std::size_t z[2] = {0, 0};          // GRU reset-before scratch z
  std::size_t gates = 0;              // reference: one row of G·H pre-activations
  std::size_t layer_out[2] = {0, 0};  // [T, B, D·H] outputs of inner layers
  std::size_t x_cell[2] = {0, 0};     // [dir] [T, B, I]: the input after input dropout
  std::size_t mask_h[2] = {0, 0};     // [dir] [B] rows of Hs: this step's state mask for h
  std::size_t mask_c[2] = {0, 0};     // [dir] [B] rows of Hs: for c
  std::size_t scratch[2] = {0, 0};    // [dir] rows for masks, residual inputs and cell rows
  std::size_t active = 0;             // [B] bytes: row active at the current step
  std::size_t row_ptrs = 0;           // [T·B] row pointers for the projection GEMM
  std::size_t total = 0;
};

constexpr std::uint64_t kPlanMagic = 0x4e414c5045524f43ull;    // plan initialised
constexpr std::uint64_t kPackedMagic = 0x4b4341505243524eull;  // packed buffer header
constexpr std::size_t kPackedHeaderBytes = 64;
constexpr int kScratchRows = 6;  // rows of the per-direction scratch area

struct PlanImpl {
  std::uint64_t magic = 0;
  StackSpec stack;
  PlanOptions options;
  Backend backend = Backend::reference;
  Isa isa = Isa::none;
  const simd::F32Kernels* kernels = nullptr;  // SIMD backend only
  char kernel_name[32] = {0};
  std::int32_t vector = 1;           // V
  std::int32_t max_width = 0;        // widest input, output or state row of any layer
  bool any_dropout = false;          // some wrapper or inter-layer dropout can drop something
  std::size_t packed_bytes = 0;
  std::uint64_t fingerprint = 0;     // identifies the packed layout; stored in the packed header
  WorkspaceLayout ws;
  LayerPlan layers[kMaxLayers];
};

// The packed buffer's first kPackedHeaderBytes.
struct PackedHeader {
  std::uint64_t magic;
  std::uint64_t fingerprint;
};

const PlanImpl& impl(const Plan& plan);

// A dropout run's parameters (DESIGN §6), resolved once per forward call.
struct RunDropout {
  bool on = false;
  std::uint64_t seed = 0;
  std::uint32_t step = 0;  // step mod 2^32
  const std::uint32_t* row_ids = nullptr;
};

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
  RunDropout dropout;
};

// Backends.
Status reference_pack(const PlanImpl& p, const void* canonical, unsigned char* packed);
void reference_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                             unsigned char* ws);
Status simd_pack(const PlanImpl& p, const void* canonical, unsigned char* packed);
void simd_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                        unsigned char* ws);

// GPU backend (src/gpu/, built with -Dgpu=cuda or -Dgpu=hip; src/gpu_none.cpp otherwise).
// Buffers of a GPU plan (packed weights, workspace) and the tensors of ForwardArgs are device
// memory, except seq_lengths and row_ids, which are host arrays (forward() validates them).
// gpu_select: whether a device is usable; writes the kernel family name.
Status gpu_select(const PlanOptions& options, PlanImpl* p);
// Fills packed_bytes and ws (device byte offsets) for the plan.
Status gpu_layout(PlanImpl* p);
// Packs host canonical weights into the device buffer `packed` (no allocation beyond it).
Status gpu_pack(const PlanImpl& p, const void* canonical_host, void* packed_device);
// The whole forward pass on the GPU, on args.stream.
Status gpu_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args);

// CPU features: the best f32 kernel table not above `cap` (also capped by env RNNCORE_MAX_ISA), or null.
const simd::F32Kernels* select_f32_kernels(Isa cap, Isa* chosen);

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_PLAN_IMPL_HPP

// Interface between the runtime (src/) and the f32 SIMD kernels (simd/).
//
// Packed layouts (all f32, V = vector width in floats). A block holds NV·V hidden units (NV = 4 for
// the one-gate Elman cells, so that a micro-tile is as wide as an LSTM's; 1 otherwise); Hp = H
// rounded up to NV·V, nb = Hp / (NV·V):
//   panel of a matrix set {M_g} over K inputs: for block j < nb, its PW = G·NV vectors (vector
//     g·NV + n: gate g, sub-vector n) in passes of P = F32Kernels::pass_vectors[PW] (P divides PW):
//     for pass q, for k < K, for each vector of the pass: V floats
//     M_g[(j·NV + n)·V + v][k] (zero past H). One block holds every gate of its units, so a
//     micro-kernel's tile ends with all the pre-activations the cell needs; a pass is the part one
//     register tile accumulates, and lies contiguous so that it streams from cache.
//   gate vectors (proj rows, biases): for block j, for gate g, for n: V floats — the same order.
// Kernel families are named dtype_op_tile__isa (e.g. f32_rnn_6x2__avx2: 6 rows x 2 vectors).
#ifndef RNNCORE_SIMD_KERNELS_HPP
#define RNNCORE_SIMD_KERNELS_HPP

#include <cstdint>

#include "rnncore/philox.h"

namespace rnncore {
namespace simd {

/// The cell computation a step kernel performs.
enum class Cell : std::int32_t { lstm = 0, gru_reset_after = 1, gru_reset_before = 2, rnn_tanh = 3, rnn_relu = 4 };
constexpr int kCellCount = 5;

/// Storage of packed weights. bf16 also rounds the matrix products' inputs (x, h) to bf16: the
/// products are then exact in f32 and run two k at a time on AVX512_BF16 (vdpbf16ps); f16 keeps
/// f32 inputs and converts the weights (F16C). Accumulation and cell math stay f32.
enum class Weights : std::int32_t { f32 = 0, f16 = 1, bf16 = 2 };
constexpr int kWeightsCount = 3;

/// Vectors per gate in a block (NV above).
constexpr int vectors_per_gate(Cell cell) { return cell == Cell::rnn_tanh || cell == Cell::rnn_relu ? 4 : 1; }

/// C[r, :] = A[r, :] · panel + bias for rows r in [row_begin, row_end) and blocks [block_begin, block_end).
/// Row r of A is the input of time t = r / batch, batch row b = r % batch: a + t·a_st + b·a_sb.
struct GemmArgs {
  const float* a = nullptr;              ///< f32 rows (f32 and f16 weights)
  const std::uint16_t* a16 = nullptr;    ///< bf16 weights: bf16 rows, row r at a16 + r · a16_stride (K padded to even)
  std::int64_t a16_stride = 0;
  std::int64_t a_st = 0, a_sb = 0;
  std::int32_t batch = 1;
  std::int32_t k = 0;
  std::int32_t vectors = 0;              ///< vectors per block of the panel: G·NV (1..4)
  const void* panel = nullptr;           ///< nb × K × G·NV × V elements of the weight type (bf16 pairs: K/2 × … × 2)
  const float* bias = nullptr;           ///< nb × G·NV × V (gate-vector order)
  float* c = nullptr;                    ///< rows of nb × G·NV × V floats
  std::int64_t c_row_stride = 0;         ///< floats between rows of C
  std::int32_t row_begin = 0, row_end = 0;
  std::int32_t block_begin = 0, block_end = 0;
};

/// One time step of one direction for rows [row_begin, row_end) and unit blocks [block_begin, block_end).
struct StepArgs {
  std::int32_t hidden = 0;               ///< H
  std::int32_t hidden_padded = 0;        ///< Hp
  std::int32_t state_size = 0;           ///< units of h, the recurrent products' K: H, or P with an LSTM projection
  const float* proj = nullptr;           ///< rows of G × Hp gate vectors: W x + biases for this step
  std::int64_t proj_row_stride = 0;
  const void* panel = nullptr;           ///< recurrent panel (GRU reset-before: the r, z gates)
  const void* panel_n = nullptr;         ///< GRU reset-before: the n gate's recurrent panel
  const float* bias_rn = nullptr;        ///< GRU reset-after: bR_n, Hp floats
  const float* h_prev = nullptr;         ///< rows of Hp floats
  float* h_next = nullptr;               ///< rows of Hp floats
  float* c = nullptr;                    ///< LSTM cell state, rows of Hp floats (updated in place)
  float* rh = nullptr;                   ///< GRU reset-before scratch: r ⊙ h, rows of Hp
  const std::uint16_t* h16_prev = nullptr;  ///< bf16 weights: h_prev in bf16, rows of Hp (the products read these)
  std::uint16_t* h16_next = nullptr;        ///< bf16 weights: the (dropped) new state in bf16
  std::uint16_t* rh16 = nullptr;            ///< bf16 weights, GRU reset-before: r ⊙ h in bf16
  float* z = nullptr;                    ///< GRU reset-before scratch: z, rows of Hp
  const float* mask_h = nullptr;         ///< state dropout: rows of Hp mask values (1/keep or 0) for h, or null
  const float* mask_c = nullptr;         ///< state dropout for the LSTM c, or null
  std::int64_t mask_row_stride = 0;      ///< floats between mask rows (0: one row shared by the batch)
  // LSTM extensions (TF LSTMCell): peepholes, cell clip and, with a projection, the cell output.
  const float* peepholes = nullptr;      ///< p_i, p_f, p_o in gate-vector order (3 × Hp floats), or null
  float cell_clip = 0.0f;                ///< c is clipped to [−cell_clip, cell_clip]; 0: no clip
  float* cell_out = nullptr;             ///< projection: o ⊙ tanh(c) goes here (rows of Hp), not to h_next and y
  std::uint16_t* cell_out16 = nullptr;   ///< bf16 weights with a projection: the same in bf16
  float* y = nullptr;                    ///< output row base for this step (H floats per row written)
  std::int64_t y_row_stride = 0;
  const std::int32_t* lengths = nullptr;  ///< per row: steps of the row (null: all); the row is active iff t < length
  std::int32_t t = 0;                    ///< the time index of this step
  std::int32_t row_begin = 0, row_end = 0;
  std::int32_t block_begin = 0, block_end = 0;
  /// Visit the blocks from the last to the first. The runtime alternates the order step by step: the
  /// panels a step read last are still in cache and are the first the next step reads (R larger
  /// than the cache would otherwise miss on every block). Results do not depend on it.
  bool descending = false;
};

/// Training: C[m, :] (+)= Σ_k A(m, k) · B[k, :] for rows m in [row_begin, row_end), N columns.
/// A(m, k) = a[m·a_m + k·a_k] (a_k = 1: row-major A; a_m = 1: A transposed); B and C row-major.
/// Deterministic: each element's sum order depends on K only (not on the row range).
struct MatmulArgs {
  const float* a = nullptr;
  std::int64_t a_m = 0, a_k = 0;
  const float* b = nullptr;
  std::int64_t ldb = 0;
  float* c = nullptr;
  std::int64_t ldc = 0;
  std::int32_t n = 0, k = 0;
  std::int32_t row_begin = 0, row_end = 0;
  bool accumulate = false;  ///< add to C instead of overwriting it
  float* scratch = nullptr;  ///< kMatmulScratchFloats floats for packed tiles of A and B (null: no packing)
  const float* b_packed = nullptr;  ///< B already packed by F32Kernels::pack_b (then `b` may be null)
  /// One row against a packed B: visit the column panels from the last (StepArgs::descending's
  /// reason: the per-step products alternate). Results do not depend on it.
  bool descending = false;
  /// Only the register tiles (a single row: runs of panels) that start in columns
  /// [col_begin, col_end), so that threads can share a few rows' columns: each tile is one
  /// thread's, and a column's sum does not depend on the tile it is in.
  std::int32_t col_begin = 0, col_end = INT32_MAX;
  /// `scratch` holds kMatmulWideScratchFloats: a product with A transposed, K over 256 and N over
  /// 512 then packs B in blocks of 768 × up to 1024 (one pass of A's tiles for every column, C
  /// loaded and stored once every 768 k). Results do not depend on it.
  bool wide_scratch = false;
  /// Round A and B to bf16 and multiply k-pairs by vdpbf16ps (f32 accumulation), where the kernels
  /// have bf16 pairs (F32Kernels::bf16_pairs), A is transposed (a_m = 1), B unpacked and there is
  /// scratch; otherwise an f32 product. The weight gradients of layers on bf16 panels.
  bool bf16 = false;
};
/// Floats of MatmulArgs::scratch (a block of B of 256 × 512 floats and a tile of A of up to 512 × 8).
constexpr std::int64_t kMatmulScratchFloats = 256 * 512 + 512 * 8;
/// The same with MatmulArgs::wide_scratch (a block of 768 × 1024 and a tile of A of up to 768 × 8).
constexpr std::int64_t kMatmulWideScratchFloats = 768 * 1024 + 768 * 8;
/// Floats F32Kernels::pack_b writes for a K × N matrix: every column panel is whole vectors, the
/// last one's columns past N zeros (N rounded up to 16, the widest vector of any instruction set).
constexpr std::int64_t packed_b_floats(std::int64_t k, std::int64_t n) { return k * ((n + 15) / 16 * 16); }

/// Element-wise activations of the training path.
enum class Activation : std::int32_t { sigmoid = 0, tanh = 1, relu = 2 };

/// f32 kernels of one instruction set; chosen once per plan.
struct F32Kernels {
  const char* name;      ///< dtype_op_tile__isa, e.g. "f32_rnn_6x2__avx2" (LSTM step tile: rows x vectors)
  std::int32_t vector;   ///< V: floats per vector
  std::int32_t pass_vectors[5];  ///< [PW]: vectors per pass of a block's panel of PW (1..4) vectors
  /// Per weight storage (null where this instruction set has none).
  void (*gemm[kWeightsCount])(const GemmArgs&);
  /// Full step for every cell but GRU reset-before, which runs phase 1 (r, z, r⊙h) then phase 2 (n, h).
  void (*step[kWeightsCount][kCellCount])(const StepArgs&);
  void (*gru_reset_before_phase2[kWeightsCount])(const StepArgs&);
  /// bf16 panels hold k-pairs for vdpbf16ps ([K/2][vectors][V][2]) instead of one k per row.
  bool bf16_pairs;
  /// n floats → bf16, round to nearest even (the rounding of the matrix products' inputs).
  void (*to_bf16)(const float* src, std::uint16_t* dst, std::int32_t n);
  /// Units [unit_begin, unit_end) of a dropout mask row (1/keep or 0 each) into out[0, end − begin),
  /// bit-identical to rnncore_mask_row; unit_begin is a multiple of 4.
  void (*mask_row)(std::uint64_t seed, std::uint64_t step, std::uint32_t site, std::uint32_t t_prime, std::uint32_t row,
                   std::uint32_t width, std::uint32_t unit_begin, std::uint32_t unit_end, const rnncore_mask_params& params,
                   float* out);
  /// Training (simd/train_impl.hpp): f32_matmul and in-place activations with the step kernels' math.
  void (*matmul)(const MatmulArgs&);
  void (*activate)(Activation kind, float* v, std::int32_t n);
  /// Packs a K × N matrix B(k, n) = b[k·b_k + n·b_n] into packed_b_floats(k, n) floats for
  /// MatmulArgs::b_packed (a matrix every call of a run reuses, e.g. the recurrent weights, is packed
  /// once).
  void (*pack_b)(const float* b, std::int64_t b_k, std::int64_t b_n, std::int32_t k, std::int32_t n, float* out);
  /// One row of the training forward's LSTM cell (no extensions): from the gates' input parts pj
  /// and recurrent parts rc (i, f, g, o; h floats each) and c_{t−1}, keep = i, f, g, o, c_t, h_t
  /// (the reference's lstm_step; one pass instead of one per activation).
  void (*lstm_forward)(const float* pj, const float* rc, const float* c_prev, float* keep, std::int32_t h);
  /// One row of the training forward's reset-after GRU cell: from pj (r, z, n), rc (r, z, n) and
  /// b_Rn, h_{t−1}: keep = r, z, n, rc_n + b_Rn, h_t.
  void (*gru_forward)(const float* pj, const float* rc, const float* b_rn, const float* h_prev, float* keep, std::int32_t h);
  /// One row of an LSTM's cell backward (no extensions): from keep = i, f, g, o, c_t (h floats
  /// each), c_{t−1} and dh at h_t, the gradient at c_t in dc (replaced by dc_{t−1}) and the gates'
  /// pre-activation gradients into d[0, 4h) (src/shared/cell_grad.hpp's lstm_unit_backward).
  void (*lstm_backward)(const float* keep, const float* c_prev, const float* dh, float* dc, float* d, std::int32_t h);
  /// One row of a GRU's cell backward, [0] reset-before, [1] reset-after: from keep = r, z, n
  /// (reset-after: and rec_n) (h floats each), h_{t−1} and dh at h_t, the gradients of z and n
  /// (reset-after: r and rec_n too) into d (gates h floats apart) and dh · z into dh_direct
  /// (src/shared/cell_grad.hpp's gru_unit_backward).
  void (*gru_backward[2])(const float* keep, const float* h_prev, const float* dh, float* dh_direct, float* d, std::int32_t h);
  /// The vector math of simd/math.hpp on n values (n a multiple of `vector`), for accuracy tests.
  void (*math)(const float* x, float* exp, float* sigmoid, float* tanh, std::int32_t n);
};

// One table per instruction set compiled in (null when not built).
extern const F32Kernels* const f32_kernels_sse2;
extern const F32Kernels* const f32_kernels_avx2;
extern const F32Kernels* const f32_kernels_avx512;
extern const F32Kernels* const f32_kernels_neon;

}  // namespace simd
}  // namespace rnncore

#endif  // RNNCORE_SIMD_KERNELS_HPP

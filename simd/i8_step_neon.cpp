// The integer LSTM's step kernels on NEON, ARMv7 and AArch64 (src/internal/int8_kernels.hpp): a
// gate's activations and the cell update, 8 units a pass in two registers of 4 int32 lanes, the
// arithmetic of the reference (src/int8_reference.cpp) lane by lane, so bit-identical to it.
//
// The rescaling x · m ≈ x · M · 2^(shift − 31) (TFLite's MultiplyByQuantizedMultiplier): x shifted
// left by max(shift, 0), wrapping (VSHL); VQRDMULH, which is gemmlowp's rounding doubling high
// multiply itself (saturating only for −2^31 · −2^31, which a positive M excludes); then a right
// shift by max(−shift, 0) rounding half away from zero: VRSHL rounds half up, so negative values
// are first lowered by one (saturating, which changes no result), where the shift is not zero.
// The activation tables have no gather: four scalar loads per register.
#include <arm_neon.h>

#include <cstdint>

#include "src/internal/int8_kernels.hpp"

namespace rnncore {
namespace q8 {
namespace {

// A multiplier per lane: M, the left shift and minus the right shift (VRSHL's count).
struct Scaling4 {
  int32x4_t m, left, minus_right;
};

inline Scaling4 broadcast(QuantizedMultiplier q) {
  return {vdupq_n_s32(q.multiplier), vdupq_n_s32(q.shift > 0 ? q.shift : 0), vdupq_n_s32(q.shift < 0 ? q.shift : 0)};
}

// Four (multiplier, shift) pairs from rows[0 .. 7].
inline Scaling4 load_pairs(const std::int32_t* rows) {
  const int32x4x2_t v = vld2q_s32(rows);
  const int32x4_t zero = vdupq_n_s32(0);
  return {v.val[0], vmaxq_s32(v.val[1], zero), vminq_s32(v.val[1], zero)};
}

// x / 2^e rounded half away from zero, minus_e = −e in −31..0 per lane (rounding_divide_by_pot).
// x & −e has x's sign bit where e > 0 and is 0 where e = 0: the lowering by one, or none.
inline int32x4_t rounding_shift(int32x4_t x, int32x4_t minus_e) {
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, minus_e), 31);
  return vrshlq_s32(vqaddq_s32(x, fixup), minus_e);
}

inline int32x4_t rescale(int32x4_t x, const Scaling4& s) {
  return rounding_shift(vqrdmulhq_s32(vshlq_s32(x, s.left), s.m), s.minus_right);
}

// centre[z] per lane, z an int16 value.
inline int16x4_t lookup(const std::int16_t* centre, int16x4_t z) {
  int16x4_t r = vdup_n_s16(centre[vget_lane_s16(z, 0)]);
  r = vset_lane_s16(centre[vget_lane_s16(z, 1)], r, 1);
  r = vset_lane_s16(centre[vget_lane_s16(z, 2)], r, 2);
  return vset_lane_s16(centre[vget_lane_s16(z, 3)], r, 3);
}

// Four units of a gate: the activation of sat16(sat16(rescale(x)) + rescale(h)).
inline int16x4_t gate4(int32x4_t x, int32x4_t h, const Scaling4& xs, const Scaling4& hs, const std::int16_t* centre) {
  const int32x4_t zx = vmovl_s16(vqmovn_s32(rescale(x, xs)));
  return lookup(centre, vqmovn_s32(vaddq_s32(rescale(h, hs), zx)));
}

// Four units' cell update (c in place) and int8 output states, as i16_cell_update_8__avx2.
struct CellConstants {
  int16x4_t clip_low, clip_high;
  int32x4_t minus_15, minus_ig_shift, zp;
  Scaling4 out;
  const std::int16_t* tanh_centre;
};

inline int16x4_t wrap16(int32x4_t v) { return vmovn_s32(v); }

inline int16x4_t cell4(const CellConstants& k, int16x4_t gi, int16x4_t gf, int16x4_t gg, int16x4_t go, int16x4_t* c) {
  const int16x4_t fc = wrap16(rounding_shift(vmull_s16(gf, *c), k.minus_15));
  const int16x4_t ig = wrap16(rounding_shift(vmull_s16(gi, gg), k.minus_ig_shift));
  const int16x4_t cell = vmin_s16(vmax_s16(vqmovn_s32(vaddl_s16(fc, ig)), k.clip_low), k.clip_high);
  *c = cell;
  const int16x4_t t = k.tanh_centre != nullptr ? lookup(k.tanh_centre, cell) : gi;
  return vqmovn_s32(vaddq_s32(rescale(vmull_s16(go, t), k.out), k.zp));
}

}  // namespace

int i32_gate_act_8__neon(int n, const std::int32_t* ax, const std::int32_t* ah, const GateScaling& s,
                        const std::int16_t* centre, std::int16_t* act) {
  const int whole = n & ~7;
  const Scaling4 x_tensor = broadcast(s.x), h_tensor = broadcast(s.h);
  for (int u = 0; u < whole; u += 8) {
    int16x4_t half[2];
    for (int k = 0; k < 2; ++k) {
      const int v = u + 4 * k;
      const Scaling4 xs = s.x_rows != nullptr ? load_pairs(s.x_rows + 2 * v) : x_tensor;
      const Scaling4 hs = s.h_rows != nullptr ? load_pairs(s.h_rows + 2 * v) : h_tensor;
      half[k] = gate4(vld1q_s32(ax + v), vld1q_s32(ah + v), xs, hs, centre);
    }
    vst1q_s16(act + u, vcombine_s16(half[0], half[1]));
  }
  return whole;
}

int i16_cell_update_8__neon(int n, const CellUpdate& cu, const BlockGates& gates, std::int16_t* c, std::int8_t* h_next) {
  const int whole = n & ~7;
  const std::int16_t clip_high = cu.cell_clip > 0 ? cu.cell_clip : std::int16_t{32767};
  const std::int16_t clip_low = cu.cell_clip > 0 ? static_cast<std::int16_t>(-cu.cell_clip) : std::int16_t{-32768};
  const CellConstants k{vdup_n_s16(clip_low),  vdup_n_s16(clip_high), vdupq_n_s32(-15), vdupq_n_s32(-(30 + cu.cell_log2)),
                        vdupq_n_s32(cu.hidden_zp), broadcast(cu.hidden_mult), cu.tanh_centre};
  for (int u = 0; u < whole; u += 8) {
    const int16x8_t gi = vld1q_s16(gates.i + u), gf = vld1q_s16(gates.f + u), gg = vld1q_s16(gates.g + u),
                    go = vld1q_s16(gates.o + u), cells = vld1q_s16(c + u);
    int16x4_t c_low = vget_low_s16(cells), c_high = vget_high_s16(cells);
    const int16x4_t h_low = cell4(k, vget_low_s16(gi), vget_low_s16(gf), vget_low_s16(gg), vget_low_s16(go), &c_low);
    const int16x4_t h_high = cell4(k, vget_high_s16(gi), vget_high_s16(gf), vget_high_s16(gg), vget_high_s16(go), &c_high);
    vst1q_s16(c + u, vcombine_s16(c_low, c_high));
    vst1_s8(h_next + u, vqmovn_s16(vcombine_s16(h_low, h_high)));
  }
  return whole;
}

}  // namespace q8
}  // namespace rnncore

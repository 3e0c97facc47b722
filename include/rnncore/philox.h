/* rnncore — Philox4x32-10 and the dropout mask function.
 *
 * This header is self-contained (only <stdint.h>) and compiles as C99, as C++17 and as HIP/CUDA
 * device code (every function is `static inline RNNCORE_HD`). Every backend of rnncore (reference,
 * SIMD, GPU) draws its dropout masks through exactly the function below, so masks are bit-identical
 * across backends, thread counts and batch splits; users may call it to reproduce a mask.
 *
 * PHILOX4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11)
 *   state x = counter (x0, x1, x2, x3), key (k0, k1); ten times:
 *     (hi0, lo0) = 0xD2511F53 * x0,  (hi1, lo1) = 0xCD9E8D57 * x2        (32x32 -> 64-bit products)
 *     x = (hi1 ^ x1 ^ k0,  lo1,  hi0 ^ x3 ^ k1,  lo0)
 *     then, between rounds, k0 += 0x9E3779B9, k1 += 0xBB67AE85             (mod 2^32)
 *   the output is the final x.
 *   Known answers (counter | key -> output):
 *     00000000 00000000 00000000 00000000 | 00000000 00000000 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
 *     ffffffff ffffffff ffffffff ffffffff | ffffffff ffffffff -> 408f276d 41c83b0e a20bc7c6 6d5451fd
 *     243f6a88 85a308d3 13198a2e 03707344 | a4093822 299f31d0 -> d16cfe09 94fdcceb 5001e420 24126ea1
 *
 * THE MASK FUNCTION. A mask of `width` units multiplies one tensor of that width (for inter-layer
 * dropout: a layer's whole output, D*H units, both directions concatenated). Its element at
 * (step, site, t, row, unit), 0 <= unit < width, is drawn as follows.
 *   key  k0 = seed & 0xffffffff, k1 = seed >> 32; seed (uint64) is the dropout wrapper's own seed if
 *        it has one, else the run's seed.
 *   c0 = t' * ceil(width / 4) + floor(unit / 4)    (uint32 arithmetic, wraps mod 2^32)
 *        t' = t (the time step), or 0 for a variational mask (one mask for the whole sequence).
 *   c1 = row: the batch row, or the caller's row id if one is given, or 0 for a TF-style
 *        variational mask shared by all rows.
 *   c2 = site = layer << 16 | direction << 15 | wrapper_depth << 8 | kind  (rnncore_mask_site)
 *        kind: 1 wrapper input, 2 wrapper output, 3 state h, 4 state c, 5 inter-layer,
 *        | 0x80 for a variational mask. layer: index in the stack; direction: 0 forward,
 *        1 reverse (always 0 for inter-layer masks); wrapper_depth: 0 for the dropout wrapper
 *        nearest the cell, counting outward.
 *   c3 = step mod 2^32 (the run counter).
 *   u  = word (unit mod 4) of Philox4x32-10((c0, c1, c2, c3), (k0, k1)).
 *   The element is kept iff keep == 1, or u < floor(keep * 2^32) evaluated in double precision
 *   from the keep probability as given (inter-layer dropout p: keep = 1 - p in double).
 *   A kept value is multiplied by 1/keep (here: the float nearest to the double 1.0 / keep);
 *   a dropped value becomes 0.
 * One Philox call thus serves four consecutive units 4q .. 4q+3 (rnncore_mask_word4).
 */
#ifndef RNNCORE_PHILOX_H
#define RNNCORE_PHILOX_H

#include <stdint.h>

/** Qualifier of every function here: host and device under nvcc / hipcc, nothing otherwise. */
#if defined(__CUDACC__) || defined(__HIPCC__)
#define RNNCORE_HD __host__ __device__
#else
#define RNNCORE_HD
#endif

/** Philox4x32 round multipliers and Weyl key increments (published constants). */
#define RNNCORE_PHILOX_M0 0xD2511F53u
#define RNNCORE_PHILOX_M1 0xCD9E8D57u
#define RNNCORE_PHILOX_W0 0x9E3779B9u
#define RNNCORE_PHILOX_W1 0xBB67AE85u
/** Number of Philox rounds used by rnncore. */
#define RNNCORE_PHILOX_ROUNDS 10

/** Kind of a mask site (bits 0..6 of the site word), plus the variational flag (bit 7). */
typedef enum rnncore_site_kind {
  RNNCORE_SITE_WRAPPER_INPUT = 1,  /**< input of a dropout wrapper */
  RNNCORE_SITE_WRAPPER_OUTPUT = 2, /**< output of a dropout wrapper */
  RNNCORE_SITE_STATE_H = 3,        /**< recurrent state h of a dropout wrapper */
  RNNCORE_SITE_STATE_C = 4,        /**< recurrent state c (LSTM) of a dropout wrapper */
  RNNCORE_SITE_INTER_LAYER = 5,    /**< dropout between stacked layers (cuDNN-style), direction bit 0 */
  RNNCORE_SITE_VARIATIONAL = 0x80  /**< OR-ed into the kind of a variational (per-sequence) mask */
} rnncore_site_kind;

/** Precomputed form of a keep probability. Fill it with rnncore_mask_params_init. */
typedef struct rnncore_mask_params {
  uint32_t threshold;  /**< floor(keep * 2^32); an element is kept iff its word u < threshold ... */
  int32_t always_keep; /**< ... unless this is nonzero (keep == 1: floor(2^32) does not fit in 32 bits) */
  float scale;         /**< multiplier of kept values: (float)(1.0 / keep); 1 when always_keep */
} rnncore_mask_params;

/** Philox4x32-10: out = Philox(ctr, key). out may alias ctr. */
static inline RNNCORE_HD void rnncore_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  int r;
  for (r = 0; r < RNNCORE_PHILOX_ROUNDS; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    hi0 = __umulhi(RNNCORE_PHILOX_M0, x0);
    lo0 = RNNCORE_PHILOX_M0 * x0;
    hi1 = __umulhi(RNNCORE_PHILOX_M1, x2);
    lo1 = RNNCORE_PHILOX_M1 * x2;
#else
    const uint64_t p0 = (uint64_t)RNNCORE_PHILOX_M0 * x0;
    const uint64_t p1 = (uint64_t)RNNCORE_PHILOX_M1 * x2;
    hi0 = (uint32_t)(p0 >> 32);
    lo0 = (uint32_t)p0;
    hi1 = (uint32_t)(p1 >> 32);
    lo1 = (uint32_t)p1;
#endif
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
    k0 += RNNCORE_PHILOX_W0;
    k1 += RNNCORE_PHILOX_W1;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

/** Site word c2 = layer << 16 | direction << 15 | wrapper_depth << 8 | kind [| 0x80 if variational].
 *  Ranges: layer < 2^16, direction 0 or 1, wrapper_depth < 128, kind in 1..5 (higher bits are masked off). */
static inline RNNCORE_HD uint32_t rnncore_mask_site(uint32_t layer, uint32_t direction, uint32_t wrapper_depth,
                                                    uint32_t kind, int variational) {
  return ((layer & 0xFFFFu) << 16) | ((direction & 1u) << 15) | ((wrapper_depth & 0x7Fu) << 8) | (kind & 0x7Fu) |
         (variational ? (uint32_t)RNNCORE_SITE_VARIATIONAL : 0u);
}

/** Keep probability of a dropout rate p (inter-layer dropout): 1 - p in double. */
static inline RNNCORE_HD double rnncore_keep_from_dropout(double p) { return 1.0 - p; }

/** 1 iff keep is a valid keep probability, 0 < keep <= 1 (NaN is not). */
static inline RNNCORE_HD int rnncore_keep_valid(double keep) { return keep > 0.0 && keep <= 1.0; }

/** floor(keep * 2^32) for keep in (0, 1), computed in double (the product is exact).
 *  keep >= 1 returns 0xFFFFFFFF, which is NOT the mask rule: keep == 1 means "always keep" and
 *  callers must test it separately (rnncore_mask_params.always_keep does). keep <= 0 or NaN returns 0. */
static inline RNNCORE_HD uint32_t rnncore_keep_threshold(double keep) {
  if (!(keep > 0.0)) return 0u;
  if (keep >= 1.0) return 0xFFFFFFFFu;
  return (uint32_t)(keep * 4294967296.0); /* < 2^32; truncation == floor for positive values */
}

/** Fills *p for a keep probability. Returns 1 on success; 0 if keep is not in (0, 1] (then *p
 *  drops everything: threshold 0, always_keep 0, scale 0). */
static inline RNNCORE_HD int rnncore_mask_params_init(rnncore_mask_params* p, double keep) {
  if (!rnncore_keep_valid(keep)) {
    p->threshold = 0u;
    p->always_keep = 0;
    p->scale = 0.0f;
    return 0;
  }
  p->threshold = rnncore_keep_threshold(keep);
  p->always_keep = keep == 1.0;
  p->scale = (float)(1.0 / keep);
  return 1;
}

/** Number of Philox calls per mask row (and the stride of c0 per time step): ceil(width / 4). */
static inline RNNCORE_HD uint32_t rnncore_mask_groups(uint32_t width) { return width / 4u + (width % 4u != 0u); }

/** Philox key of a seed: (seed & 0xffffffff, seed >> 32). */
static inline RNNCORE_HD void rnncore_mask_key(uint64_t seed, uint32_t key[2]) {
  key[0] = (uint32_t)seed;
  key[1] = (uint32_t)(seed >> 32);
}

/** Philox counter of group q (units 4q..4q+3) of a mask of `width` units. */
static inline RNNCORE_HD void rnncore_mask_counter(uint64_t step, uint32_t site, uint32_t t_prime, uint32_t row,
                                                   uint32_t q, uint32_t width, uint32_t ctr[4]) {
  ctr[0] = t_prime * rnncore_mask_groups(width) + q;
  ctr[1] = row;
  ctr[2] = site;
  ctr[3] = (uint32_t)step;
}

/** The four uniform words of group q: words[w] is compared against the threshold for unit 4q + w. */
static inline RNNCORE_HD void rnncore_mask_words4(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                                  uint32_t row, uint32_t q, uint32_t width, uint32_t words[4]) {
  uint32_t ctr[4], key[2];
  rnncore_mask_counter(step, site, t_prime, row, q, width, ctr);
  rnncore_mask_key(seed, key);
  rnncore_philox4x32_10(ctr, key, words);
}

/** Keep bits of units 4q .. 4q+3 from one Philox call: bit w (0..3) is set iff unit 4q + w is kept.
 *  Bits of units >= width (in the last, partial group) are computed like the others; ignore them. */
static inline RNNCORE_HD uint32_t rnncore_mask_word4(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                                     uint32_t row, uint32_t q, uint32_t width,
                                                     const rnncore_mask_params* p) {
  uint32_t u[4];
  if (p->always_keep) return 0xFu;
  rnncore_mask_words4(seed, step, site, t_prime, row, q, width, u);
  return (uint32_t)(u[0] < p->threshold) | (uint32_t)(u[1] < p->threshold) << 1 |
         (uint32_t)(u[2] < p->threshold) << 2 | (uint32_t)(u[3] < p->threshold) << 3;
}

/** The uniform word u of one mask element (for tests and diagnostics). */
static inline RNNCORE_HD uint32_t rnncore_mask_word(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                                    uint32_t row, uint32_t unit, uint32_t width) {
  uint32_t u[4];
  rnncore_mask_words4(seed, step, site, t_prime, row, unit / 4u, width, u);
  return u[unit % 4u];
}

/** 1 iff the mask element at (seed, step, site, t', row, unit) of a mask of `width` units is kept. */
static inline RNNCORE_HD int rnncore_mask_keep(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                               uint32_t row, uint32_t unit, uint32_t width,
                                               const rnncore_mask_params* p) {
  if (p->always_keep) return 1;
  return rnncore_mask_word(seed, step, site, t_prime, row, unit, width) < p->threshold;
}

/** Value of one mask element: p->scale if kept, 0 if dropped. */
static inline RNNCORE_HD float rnncore_mask_value(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                                  uint32_t row, uint32_t unit, uint32_t width,
                                                  const rnncore_mask_params* p) {
  return rnncore_mask_keep(seed, step, site, t_prime, row, unit, width, p) ? p->scale : 0.0f;
}

/** Scalar reference of a whole mask row: out[u] = p->scale or 0 for u in [0, width). */
static inline RNNCORE_HD void rnncore_mask_row(uint64_t seed, uint64_t step, uint32_t site, uint32_t t_prime,
                                               uint32_t row, uint32_t width, const rnncore_mask_params* p,
                                               float* out) {
  uint32_t q, w, u[4];
  const uint32_t groups = rnncore_mask_groups(width);
  for (q = 0; q < groups; ++q) {
    if (p->always_keep) {
      u[0] = u[1] = u[2] = u[3] = 0u;
    } else {
      rnncore_mask_words4(seed, step, site, t_prime, row, q, width, u);
    }
    for (w = 0; w < 4u && 4u * q + w < width; ++w)
      out[4u * q + w] = (p->always_keep || u[w] < p->threshold) ? p->scale : 0.0f;
  }
}

#endif /* RNNCORE_PHILOX_H */

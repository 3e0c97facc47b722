#!/usr/bin/env python3
"""Independent reference for rnncore's dropout masks (stdlib only).

Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
as 1, 2, 3", SC'11) and the mask function of include/rnncore/philox.h:

  key     = (seed & 0xffffffff, seed >> 32)
  counter = (t' * ceil(width / 4) + unit // 4  (mod 2^32),
             row,
             site = layer << 16 | direction << 15 | wrapper_depth << 8 | kind,
             step mod 2^32)
  u       = word (unit mod 4) of Philox4x32-10(counter, key)
  keep iff keep == 1, or u < floor(keep * 2^32) computed in double precision.

Running this file checks the published known answers and regenerates
  tests/golden/masks/masks_fixture.json   (human-readable)
  tests/golden/masks/masks_fixture.inc    (C initialisers used by tests/test_philox.cpp)
"""

import json
import math
import os
import random
import sys

MASK32 = 0xFFFFFFFF

# Published Philox4x32 constants.
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85

SITE_WRAPPER_INPUT = 1
SITE_WRAPPER_OUTPUT = 2
SITE_STATE_H = 3
SITE_STATE_C = 4
SITE_INTER_LAYER = 5
SITE_VARIATIONAL = 0x80

KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox4x32_10(ctr, key):
    """Philox4x32 with 10 rounds; ctr: 4 uint32, key: 2 uint32 -> tuple of 4 uint32."""
    x0, x1, x2, x3 = (int(v) & MASK32 for v in ctr)
    k0, k1 = (int(v) & MASK32 for v in key)
    for r in range(10):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        p0 = PHILOX_M0 * x0  # exact 64-bit products (Python ints are unbounded)
        p1 = PHILOX_M1 * x2
        x0, x1, x2, x3 = ((p1 >> 32) ^ x1 ^ k0, p1 & MASK32,
                          (p0 >> 32) ^ x3 ^ k1, p0 & MASK32)
    return (x0, x1, x2, x3)


def mask_site(layer, direction, wrapper_depth, kind, variational=False):
    """Site word c2 of a mask."""
    assert 0 <= layer < (1 << 16) and direction in (0, 1)
    assert 0 <= wrapper_depth < (1 << 7) and 1 <= kind <= 0x7F
    return ((layer << 16) | (direction << 15) | (wrapper_depth << 8) | kind
            | (SITE_VARIATIONAL if variational else 0))


def keep_from_dropout(p):
    """Keep probability of an inter-layer dropout rate p (double arithmetic)."""
    return 1.0 - float(p)


def keep_threshold(keep):
    """floor(keep * 2^32) in double precision, or None for keep == 1 (always keep)."""
    keep = float(keep)
    if not (0.0 < keep <= 1.0):
        raise ValueError("keep must lie in (0, 1]")
    if keep == 1.0:
        return None
    return int(math.floor(keep * 4294967296.0))  # the product is exact (power-of-two scaling)


def mask_counter(step, site, t_prime, row, unit, width):
    """Philox counter of a mask element."""
    groups = (width + 3) // 4
    c0 = (t_prime * groups + unit // 4) & MASK32
    return (c0, row & MASK32, site & MASK32, step & MASK32)


def mask_key(seed):
    return (seed & MASK32, (seed >> 32) & MASK32)


def mask_word(seed, step, site, t_prime, row, unit, width):
    """The uniform 32-bit word compared against the threshold."""
    return philox4x32_10(mask_counter(step, site, t_prime, row, unit, width), mask_key(seed))[unit % 4]


def mask_keep(seed, step, site, t_prime, row, unit, width, keep):
    """1 if the element is kept, 0 if it is dropped."""
    assert 0 <= unit < width
    thr = keep_threshold(keep)
    if thr is None:
        return 1
    return 1 if mask_word(seed, step, site, t_prime, row, unit, width) < thr else 0


def mask_tensor(seed, step, site, t_prime, rows, width, keep, row_ids=None):
    """[rows][width] list of 0/1; row_ids optionally replaces the batch row index (c1)."""
    ids = list(range(rows)) if row_ids is None else list(row_ids)
    return [[mask_keep(seed, step, site, t_prime, r, u, width, keep) for u in range(width)] for r in ids]


# --------------------------------------------------------------------------------------------
# Fixture generation


def check_known_answers():
    ok = True
    for ctr, key, want in KNOWN_ANSWERS:
        got = philox4x32_10(ctr, key)
        if got != want:
            ok = False
            print("KAT FAILED: ctr=%s key=%s got=%s want=%s" % (
                [hex(v) for v in ctr], [hex(v) for v in key], [hex(v) for v in got], [hex(v) for v in want]))
    return ok


def _c_double(x):
    # repr() is the shortest string that round-trips; C/C++ parse it back to the same double.
    s = repr(float(x))
    return s if ("." in s or "e" in s) else s + ".0"


def build_fixture():
    rng = random.Random(20240611)
    seeds = [0, 1, 42, 0xFFFFFFFF, 1 << 32, 0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFFF,
             0xDEADBEEF00000001]
    steps = [0, 1, 7, 0xFFFFFFFF, 1 << 32, (1 << 32) + 5, 0xFFFFFFFFFFFFFFFF, 123456789012]
    sites = [
        mask_site(0, 0, 0, SITE_WRAPPER_INPUT),
        mask_site(0, 0, 0, SITE_WRAPPER_OUTPUT),
        mask_site(1, 0, 0, SITE_STATE_H),
        mask_site(0, 1, 0, SITE_STATE_C),
        mask_site(2, 0, 0, SITE_INTER_LAYER),
        mask_site(3, 1, 2, SITE_STATE_H, variational=True),
        mask_site(0, 0, 1, SITE_WRAPPER_INPUT, variational=True),
        mask_site(15, 1, 5, SITE_INTER_LAYER, variational=True),
    ]
    widths = [1, 3, 4, 5, 17, 33, 100]
    keeps = [0.1, 0.5, 0.8, 0.999, 1.0, 0.3, keep_from_dropout(0.7), 1.0 / 3.0]
    t_primes = [0, 1, 2, 9, 1000, 0x7FFFFFFF]
    rows = [0, 1, 3, 255, 0xFFFFFFFF]

    elements = []
    # Exhaustive small corner: every unit of every width at one coordinate.
    for width in widths:
        for unit in range(width) if width <= 17 else (0, 1, 2, 3, width - 1):
            elements.append((seeds[5], steps[1], sites[2], 1, 2, unit, width, 0.5))
    # Random coverage of the remaining dimensions.
    while len(elements) < 400:
        width = rng.choice(widths)
        elements.append((rng.choice(seeds), rng.choice(steps), rng.choice(sites), rng.choice(t_primes),
                         rng.choice(rows), rng.randrange(width), width, rng.choice(keeps)))
    # Seeds and steps that differ only above bit 31.
    for seed in (5, 5 + (1 << 32)):
        for step in (9, 9 + (1 << 32)):
            for unit in range(8):
                elements.append((seed, step, sites[0], 3, 1, unit, 33, 0.5))

    out = []
    for (seed, step, site, tp, row, unit, width, keep) in elements:
        word = mask_word(seed, step, site, tp, row, unit, width)
        out.append(dict(seed=seed, step=step, site=site, t_prime=tp, row=row, unit=unit, width=width,
                        keep=keep, word=word, kept=mask_keep(seed, step, site, tp, row, unit, width, keep)))

    thresholds = []
    for keep in [0.1, 0.3, 0.5, 0.8, 0.999, 1.0 / 3.0, 2.0 / 3.0, 0.7, 0.9, 0.95, keep_from_dropout(0.7),
                 keep_from_dropout(0.1), keep_from_dropout(0.2), 1.0 - 2.0 ** -53, 2.0 ** -32, 2.0 ** -33,
                 1.0]:
        thr = keep_threshold(keep)
        thresholds.append(dict(keep=keep, threshold=0xFFFFFFFF if thr is None else thr,
                               always_keep=1 if thr is None else 0))

    philox = []
    for _ in range(48):
        ctr = tuple(rng.getrandbits(32) for _ in range(4))
        key = tuple(rng.getrandbits(32) for _ in range(2))
        philox.append(dict(ctr=list(ctr), key=list(key), out=list(philox4x32_10(ctr, key))))

    return dict(elements=out, thresholds=thresholds, philox=philox)


def write_json(path, fx):
    with open(path, "w") as f:
        f.write('{\n  "generator": "tests/golden/masks.py",\n')
        f.write('  "fields": ["seed", "step", "site", "t_prime", "row", "unit", "width", "keep", "word", "kept"],\n')
        f.write('  "elements": [\n')
        f.write(",\n".join("    " + json.dumps([e["seed"], e["step"], e["site"], e["t_prime"], e["row"], e["unit"],
                                                e["width"], e["keep"], e["word"], e["kept"]])
                           for e in fx["elements"]))
        f.write('\n  ],\n  "thresholds": [\n')
        f.write(",\n".join("    " + json.dumps(t) for t in fx["thresholds"]))
        f.write('\n  ],\n  "philox": [\n')
        f.write(",\n".join("    " + json.dumps(p) for p in fx["philox"]))
        f.write('\n  ]\n}\n')


def write_inc(path, fx):
    lines = ["/* Generated by tests/golden/masks.py -- do not edit. */",
             "/* Before including, define (each may expand to nothing)",
             "     RNNCORE_FIXTURE_ELEMENT(seed, step, site, t_prime, row, unit, width, keep, word, kept),",
             "     RNNCORE_FIXTURE_THRESHOLD(keep, threshold, always_keep),",
             "     RNNCORE_FIXTURE_PHILOX(c0, c1, c2, c3, k0, k1, o0, o1, o2, o3). */"]
    element = "RNNCORE_FIXTURE_ELEMENT(0x%016XULL, 0x%016XULL, 0x%08Xu, 0x%08Xu, 0x%08Xu, %du, %du, %s, 0x%08Xu, %d)"
    for e in fx["elements"]:
        lines.append(element % (
            e["seed"], e["step"], e["site"], e["t_prime"], e["row"], e["unit"], e["width"], _c_double(e["keep"]),
            e["word"], e["kept"]))
    for t in fx["thresholds"]:
        lines.append("RNNCORE_FIXTURE_THRESHOLD(%s, 0x%08Xu, %d)" % (
            float(t["keep"]).hex(), t["threshold"], t["always_keep"]))
    for p in fx["philox"]:
        lines.append("RNNCORE_FIXTURE_PHILOX(" + ", ".join("0x%08Xu" % v for v in p["ctr"] + p["key"] + p["out"]) + ")")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if not check_known_answers():
        return 1
    print("philox4x32_10: 3 known answers OK")
    # Spot checks of the mask function against hand-built counters.
    site = mask_site(2, 1, 0, SITE_STATE_H, variational=True)
    assert site == (2 << 16) | (1 << 15) | 3 | 0x80
    assert mask_counter(5, site, 3, 7, 9, 10) == (3 * 3 + 2, 7, site, 5)
    assert keep_threshold(0.5) == 1 << 31 and keep_threshold(0.3) == 1288490188
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = os.path.join(here, "masks")
    os.makedirs(outdir, exist_ok=True)
    fx = build_fixture()
    jpath = os.path.join(outdir, "masks_fixture.json")
    ipath = os.path.join(outdir, "masks_fixture.inc")
    write_json(jpath, fx)
    write_inc(ipath, fx)
    kept = sum(e["kept"] for e in fx["elements"])
    print("wrote %s (%d bytes) and %s (%d bytes): %d elements (%d kept), %d thresholds, %d philox vectors" % (
        os.path.relpath(jpath), os.path.getsize(jpath), os.path.relpath(ipath), os.path.getsize(ipath),
        len(fx["elements"]), kept, len(fx["thresholds"]), len(fx["philox"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

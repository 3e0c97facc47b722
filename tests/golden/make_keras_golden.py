#!/tmp/tfenv/bin/python
"""Generate Keras-layout golden data for rnncore: tests/golden/keras/<case>.safetensors

Needs TensorFlow/Keras, which Debian does not package; use a venv outside the
repository (see README.md, section "Keras"):
    /usr/bin/python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu numpy
    /tmp/tfenv/bin/python tests/golden/make_keras_golden.py

The expected outputs are produced by real Keras layers (keras.layers.LSTM,
GRU(reset_after=True/False), SimpleRNN(activation='tanh'/'relu'),
Bidirectional(..., merge_mode='concat'), and two stacked layers), built with
dtype='float64' and given the stored float32 weights upcast to float64, run
on the float64 copy of the stored float32 input.  The same layers in float32
are also run and their error is reported (not stored).

Every case is cross-checked (relative inf-norm error <= 1e-12) against
  * `keras_numpy_forward` below: an independent float64 numpy loop written
    directly on the Keras layout from the documented Keras equations
        LSTM  columns i, f, c, o;  z = x K + h RK + b
              c' = f*c + i*tanh(z_c);  h' = o*tanh(c')
        GRU   columns z, r, h (z first, r second)
              reset_after=True : bias [2, 3H], row 0 = input bias b_i,
                                 row 1 = recurrent bias b_r
                   z = s(x K_z + b_iz + h RK_z + b_rz),  r likewise,
                   n = tanh(x K_h + b_ih + r * (h RK_h + b_rh))
              reset_after=False: bias [3H], input bias only
                   z = s(x K_z + b_z + h RK_z),  r likewise,
                   n = tanh(x K_h + b_h + (r*h) RK_h)
              h' = z*h + (1-z)*n
        SimpleRNN  h' = act(x K + b + h RK)
    backward direction runs t = T-1..0, its outputs are stored at t;
  * rnn_reference.forward (the shared canonical-layout loops) after the
    Keras -> canonical conversion documented in README.md ("Weight layouts").
For GRU cases it also checks that plausible *wrong* readings of the Keras
equations (z/r swapped, bias rows swapped, h' = (1-z)*h + z*n, the other
reset variant) are rejected (differ by > 1e-3) on every case where they can
make a difference, so the 1e-12 agreement above really pins them down.
For bidirectional cases it checks likewise that swapping the two halves of y,
or the directions' initial states, is rejected (forward first everywhere:
y = concat(forward, backward), return_state = [forward states, backward
states], initial_state = [forward states, backward states]).

Deterministic: fixed seeds, single-threaded TF, oneDNN off; re-running
reproduces byte-identical files.
"""

import argparse
import os
import sys

# must be set before tensorflow / keras are imported
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ["KERAS_BACKEND"] = "tensorflow"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import rnn_reference as ref  # noqa: E402

SEED = 20240617
TOL = 1e-12          # float64 Keras vs float64 numpy loops
TOL_F32 = 1e-5       # float32 Keras vs float64 Keras (reported, asserted loosely)
DIFF = 1e-3          # a wrong reading of the equations must differ by more than this

# kind -> (rnncore mode, Keras reset_after or None, Keras activation or None)
KINDS = {
    "lstm": ("lstm", None, None),
    "gru_ra1": ("gru", True, None),
    "gru_ra0": ("gru", False, None),
    "rnn_tanh": ("rnn_tanh", None, "tanh"),
    "rnn_relu": ("rnn_relu", None, "relu"),
}

# (kind, num_layers, bidirectional, I, H, B, T, has_initial_state, bias)
CASES = [
    ("lstm", 1, 0, 1, 3, 3, 4, 0, 1),
    ("lstm", 1, 0, 3, 17, 1, 7, 1, 1),
    ("lstm", 1, 0, 17, 1, 5, 1, 1, 1),
    ("lstm", 1, 0, 33, 33, 3, 4, 0, 0),
    ("gru_ra1", 1, 0, 3, 1, 5, 7, 0, 1),
    ("gru_ra1", 1, 0, 17, 33, 1, 4, 1, 1),
    ("gru_ra1", 1, 0, 33, 3, 3, 1, 1, 0),
    ("gru_ra1", 1, 0, 1, 17, 3, 7, 0, 1),
    ("gru_ra0", 1, 0, 17, 17, 3, 4, 0, 1),
    ("gru_ra0", 1, 0, 33, 1, 1, 7, 1, 1),
    ("gru_ra0", 1, 0, 1, 33, 5, 1, 1, 1),
    ("gru_ra0", 1, 0, 3, 3, 5, 4, 0, 0),
    ("rnn_tanh", 1, 0, 33, 17, 1, 7, 0, 1),
    ("rnn_tanh", 1, 0, 1, 1, 5, 4, 1, 1),
    ("rnn_tanh", 1, 0, 3, 33, 3, 1, 0, 0),
    ("rnn_tanh", 1, 0, 17, 3, 3, 7, 1, 1),
    ("rnn_relu", 1, 0, 1, 17, 5, 4, 1, 1),
    ("rnn_relu", 1, 0, 3, 3, 1, 1, 0, 1),
    ("rnn_relu", 1, 0, 17, 33, 3, 7, 0, 0),
    ("rnn_relu", 1, 0, 33, 1, 3, 4, 1, 1),
    # Bidirectional(merge_mode='concat')
    ("lstm", 1, 1, 17, 3, 3, 7, 1, 1),
    ("gru_ra1", 1, 1, 3, 17, 5, 4, 0, 1),
    # two stacked layers (layer 1 input size = H)
    ("gru_ra0", 2, 0, 33, 17, 3, 4, 1, 1),
]


# ----------------------------------------------------------------------------
# independent numpy loop on the Keras layout
# ----------------------------------------------------------------------------

def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def keras_numpy_step(mode, reset_after, K, RK, b, x, h, c,
                     swap_zr=False, swap_bias_rows=False, flip_update=False, other_reset=False):
    """One Keras-semantics step, float64.  K [I, G*H], RK [H, G*H], b as stored
    by Keras or None.  The keyword flags select deliberately WRONG readings
    (negative controls)."""
    H = RK.shape[0]
    if mode == "lstm":
        zz = x @ K + h @ RK + (0.0 if b is None else b)
        i, f = _sig(zz[:, 0:H]), _sig(zz[:, H:2 * H])
        g, o = np.tanh(zz[:, 2 * H:3 * H]), _sig(zz[:, 3 * H:4 * H])
        c_new = f * c + i * g
        return o * np.tanh(c_new), c_new
    if mode in ("rnn_tanh", "rnn_relu"):
        a = x @ K + h @ RK + (0.0 if b is None else b)
        return (np.tanh(a) if mode == "rnn_tanh" else np.maximum(a, 0.0)), None
    assert mode == "gru"
    zc, rc, hc = (slice(H, 2 * H), slice(0, H), slice(2 * H, 3 * H)) if swap_zr else \
                 (slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H))
    if reset_after:
        if b is None:
            b_in, b_rec = np.zeros(3 * H), np.zeros(3 * H)
        else:
            b_in, b_rec = (b[1], b[0]) if swap_bias_rows else (b[0], b[1])
        xw = x @ K + b_in
        hr = h @ RK + b_rec
        z = _sig(xw[:, zc] + hr[:, zc])
        r = _sig(xw[:, rc] + hr[:, rc])
        if other_reset:   # reset-before reading of the same tensors
            n = np.tanh(xw[:, hc] + (r * h) @ RK[:, hc] + b_rec[hc])
        else:
            n = np.tanh(xw[:, hc] + r * hr[:, hc])
    else:
        xw = x @ K + (0.0 if b is None else b)
        z = _sig(xw[:, zc] + h @ RK[:, zc])
        r = _sig(xw[:, rc] + h @ RK[:, rc])
        if other_reset:   # reset-after reading of the same tensors
            n = np.tanh(xw[:, hc] + r * (h @ RK[:, hc]))
        else:
            n = np.tanh(xw[:, hc] + (r * h) @ RK[:, hc])
    if flip_update:
        return (1.0 - z) * h + z * n, None
    return z * h + (1.0 - z) * n, None


def keras_numpy_forward(mode, reset_after, weights, x, L, D, h0, c0, **flags):
    """weights[l*D+d] = (K, RK, b or None) float64; x [T, B, I] time-major.
    Returns y [T, B, D*H], hn [L*D, B, H], cn [L*D, B, H] or None."""
    T, B, _ = x.shape
    H = weights[0][1].shape[0]
    hn = np.zeros((L * D, B, H))
    cn = np.zeros((L * D, B, H))
    inp = x
    for l in range(L):
        y = np.zeros((T, B, D * H))
        for d in range(D):
            K, RK, b = weights[l * D + d]
            h = np.zeros((B, H)) if h0 is None else h0[l * D + d].copy()
            c = np.zeros((B, H)) if c0 is None else c0[l * D + d].copy()
            for t in (range(T) if d == 0 else range(T - 1, -1, -1)):
                h, c = keras_numpy_step(mode, reset_after, K, RK, b, inp[t], h, c, **flags)
                y[t, :, d * H:(d + 1) * H] = h
            hn[l * D + d] = h
            if c is not None:
                cn[l * D + d] = c
        inp = y
    return inp, hn, (cn if mode == "lstm" else None)


def canonical_from_keras(mode, reset_after, K, RK, b):
    """Keras (kernel, recurrent_kernel, bias) -> rnn_reference canonical dict,
    exactly as documented in README.md ("Weight layouts", Keras)."""
    G = ref.GATES[mode]
    H = RK.shape[0]
    perm = [1, 0, 2] if mode == "gru" else list(range(G))   # canonical gate g = Keras block perm[g]
    blk = lambda a, k: a[..., k * H:(k + 1) * H]            # noqa: E731
    W = np.stack([blk(K, k).T for k in perm])
    R = np.stack([blk(RK, k).T for k in perm])
    bW = np.zeros((G, H))
    bR = np.zeros((G, H))
    if b is not None:
        if mode == "gru" and reset_after:
            bW = np.stack([blk(b[0], k) for k in perm])
            bR = np.stack([blk(b[1], k) for k in perm])
        else:
            bW = np.stack([blk(b, k) for k in perm])
    return {"W": W, "R": R, "bW": bW, "bR": bR}


# ----------------------------------------------------------------------------
# Keras side
# ----------------------------------------------------------------------------

def make_rnn_layer(kind, H, use_bias, dtype):
    mode, reset_after, act = KINDS[kind]
    kw = dict(return_sequences=True, return_state=True, use_bias=use_bias, dtype=dtype)
    if mode == "lstm":
        return keras.layers.LSTM(H, **kw)
    if mode == "gru":
        return keras.layers.GRU(H, reset_after=reset_after, **kw)
    return keras.layers.SimpleRNN(H, activation=act, **kw)


def layer_source(kind, bi, L):
    mode, reset_after, act = KINDS[kind]
    if mode == "lstm":
        s = "keras.layers.LSTM"
    elif mode == "gru":
        s = f"keras.layers.GRU(reset_after={reset_after})"
    else:
        s = f"keras.layers.SimpleRNN(activation='{act}')"
    if bi:
        s = f"keras.layers.Bidirectional({s}, merge_mode='concat')"
    if L > 1:
        s = f"{L} x {s}"
    return f"tensorflow {tf.__version__} keras {keras.__version__} {s}"


def run_keras(c, weights32, X32, h032, c032, dtype):
    """Build the Keras model in `dtype`, set the float32 weights (cast), run it.
    Returns (y [T,B,D*H], hn, cn or None) time-major float64 numpy, and the
    weights as Keras holds them (get_weights(), float32 cast back) per [l*D+d]."""
    kind, L, bi, I, H, B, T, has_init, bias = c["spec"]
    mode = KINDS[kind][0]
    D = 2 if bi else 1
    ns = 2 if mode == "lstm" else 1
    npdt = np.float64 if dtype == "float64" else np.float32
    x = np.ascontiguousarray(X32.astype(npdt).transpose(1, 0, 2))        # Keras is batch-major
    hn, cn, got_w = [], [], []
    for l in range(L):
        cell = make_rnn_layer(kind, H, bool(bias), dtype)
        if bi:
            # the wrapper needs the dtype too: with its default float32 policy
            # it silently returns a float32 y (states stay float64)
            layer = keras.layers.Bidirectional(cell, merge_mode="concat", dtype=dtype)
            subs = [layer.forward_layer, layer.backward_layer]
        else:
            layer = cell
            subs = [layer]
        layer.build((None, T, x.shape[-1]))
        assert [s.go_backwards for s in subs] == [False, True][:D]
        for d, s in enumerate(subs):
            s.set_weights([w.astype(npdt) for w in weights32[l * D + d]])
            back = s.get_weights()
            assert len(back) == len(weights32[l * D + d])
            for a, w in zip(back, weights32[l * D + d]):
                assert a.dtype == npdt and a.shape == w.shape and np.array_equal(a.astype(np.float32), w)
            got_w.append([a.astype(np.float32) for a in back])
        init = None
        if has_init:
            # Keras order: per direction [h] or [h, c]; Bidirectional takes
            # forward's states then backward's
            init = []
            for d in range(D):
                init.append(h032[l * D + d].astype(npdt))
                if mode == "lstm":
                    init.append(c032[l * D + d].astype(npdt))
        out = layer(x, initial_state=init) if init is not None else layer(x)
        out = [np.asarray(o) for o in out]
        assert len(out) == 1 + D * ns, len(out)
        for o in out:
            assert o.dtype == npdt, (o.dtype, dtype)
        y = out[0]
        assert y.shape == (B, T, D * H)
        for d in range(D):
            st = out[1 + d * ns:1 + (d + 1) * ns]
            hn.append(st[0])
            if mode == "lstm":
                cn.append(st[1])
        x = y
    yt = np.ascontiguousarray(x.transpose(1, 0, 2)).astype(np.float64)
    hn = np.stack(hn).astype(np.float64)
    cn = np.stack(cn).astype(np.float64) if mode == "lstm" else None
    return yt, hn, cn, got_w


# ----------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------

def case_name(spec):
    kind, L, bi, I, H, B, T, has_init, bias = spec
    n = f"{kind}_l{L}_{'bi' if bi else 'uni'}_I{I}_H{H}_B{B}_T{T}"
    if has_init:
        n += "_h0"
    if not bias:
        n += "_nobias"
    return n


def tensor_names(L, D):
    """Stored names of (kernel, recurrent_kernel, bias) for index l*D+d."""
    out = []
    for l in range(L):
        for d in range(D):
            sfx = "" if (L == 1 and D == 1) else f"_l{l}" + ("_reverse" if d else "")
            out.append((f"kernel{sfx}", f"recurrent_kernel{sfx}", f"bias{sfx}"))
    return out


def generate_case(index, spec):
    kind, L, bi, I, H, B, T, has_init, bias = spec
    mode, reset_after, _ = KINDS[kind]
    D = 2 if bi else 1
    G = ref.GATES[mode]
    c = {"spec": spec, "name": case_name(spec)}
    rng = np.random.default_rng([SEED, index])
    k = 1.0 / np.sqrt(H)
    weights32 = []
    for l in range(L):
        Il = I if l == 0 else D * H
        for d in range(D):
            w = [rng.uniform(-k, k, size=(Il, G * H)).astype(np.float32),
                 rng.uniform(-k, k, size=(H, G * H)).astype(np.float32)]
            if bias:
                bshape = (2, G * H) if (mode == "gru" and reset_after) else (G * H,)
                w.append(rng.uniform(-k, k, size=bshape).astype(np.float32))
            weights32.append(w)
    X32 = rng.standard_normal((T, B, I)).astype(np.float32)
    h032 = c032 = None
    if has_init:
        h032 = rng.standard_normal((L * D, B, H)).astype(np.float32)
        if mode == "lstm":
            c032 = rng.standard_normal((L * D, B, H)).astype(np.float32)

    # ---- reference: Keras in float64
    y, hn, cn, kw = run_keras(c, weights32, X32, h032, c032, "float64")
    # the stored weights are exactly what Keras holds (get_weights()), no reordering
    for a, b_ in zip(kw, weights32):
        assert all(np.array_equal(p, q) for p, q in zip(a, b_))

    f64 = (lambda a: None if a is None else a.astype(np.float64))
    X, h0, c0 = f64(X32), f64(h032), f64(c032)
    w64 = [(w[0].astype(np.float64), w[1].astype(np.float64),
            w[2].astype(np.float64) if bias else None) for w in weights32]

    def err(res):
        e = [ref.rel_err(res[0], y), ref.rel_err(res[1], hn)]
        if mode == "lstm":
            e.append(ref.rel_err(res[2], cn))
        return max(e)

    checks = []
    e = err(keras_numpy_forward(mode, reset_after, w64, X, L, D, h0, c0))
    assert e <= TOL, (c["name"], "keras float64 vs keras-layout numpy loop", e)
    checks.append("numpy")

    canon = [canonical_from_keras(mode, reset_after, *w) for w in w64]
    gv = "reset-before" if (mode == "gru" and not reset_after) else "reset-after"
    e = err(ref.forward(mode, canon, X, L, bool(bi), None, h0, c0, gru_variant=gv))
    assert e <= TOL, (c["name"], "keras float64 vs rnn_reference (canonical)", e)
    checks.append("canon")

    rejected = []
    if mode == "gru":
        # negative controls: each wrong reading must be rejected wherever it can matter
        h_matters = bool(has_init) or T > 1 or L > 1
        controls = {"zr": dict(swap_zr=True), "upd": dict(flip_update=True),
                    "reset": dict(other_reset=True)}
        if reset_after and bias:
            controls["brows"] = dict(swap_bias_rows=True)
        for nm, fl in controls.items():
            ew = err(keras_numpy_forward(mode, reset_after, w64, X, L, D, h0, c0, **fl))
            # with h == 0 at every step r multiplies 0 (zr, reset cannot
            # matter); with H == 1 and no recurrent bias (r*h) RK == r*(h RK)
            can_matter = h_matters or nm in ("upd", "brows")
            if nm == "reset":
                can_matter = h_matters and (H > 1 or bool(reset_after and bias))
            if can_matter:
                assert ew > DIFF, (c["name"], f"wrong reading '{nm}' not rejected", ew)
                rejected.append(nm)
        checks.append("!" + ",".join(rejected))

    if bi:
        # direction order: forward half first in y, forward state first in
        # hn/cn and in initial_state; the swapped readings must be rejected
        sw = np.concatenate([y[..., H:], y[..., :H]], axis=-1)
        assert ref.rel_err(sw, y) > DIFF, (c["name"], "y halves indistinguishable")
        ctl = ["ysw"]
        if has_init:
            perm = [l * D + (1 - d) for l in range(L) for d in range(D)]
            ew = err(keras_numpy_forward(mode, reset_after, w64, X, L, D, h0[perm],
                                         None if c0 is None else c0[perm]))
            assert ew > DIFF, (c["name"], "initial-state direction order not rejected", ew)
            ctl.append("h0sw")
        checks.append("!" + ",".join(ctl))

    # ---- the same model in float32 (reported only)
    y32, hn32, cn32, _ = run_keras(c, weights32, X32, h032, c032, "float32")
    e32 = err((y32, hn32, cn32))
    assert e32 <= TOL_F32, (c["name"], "keras float32 vs float64", e32)

    tensors = {}
    for (kn, rn, bn), w in zip(tensor_names(L, D), weights32):
        tensors[kn] = w[0]
        tensors[rn] = w[1]
        if bias:
            tensors[bn] = w[2]
    tensors["input"] = X32
    if has_init:
        tensors["h0"] = h032
        if mode == "lstm":
            tensors["c0"] = c032
    tensors["expected.y"] = np.ascontiguousarray(y, dtype=np.float64)
    tensors["expected.hn"] = np.ascontiguousarray(hn, dtype=np.float64)
    if mode == "lstm":
        tensors["expected.cn"] = np.ascontiguousarray(cn, dtype=np.float64)

    meta = {
        "mode": mode,
        "input_size": str(I),
        "hidden_size": str(H),
        "num_layers": str(L),
        "bidirectional": str(bi),
        "batch_first": "0",
        "seq_len": str(T),
        "batch": str(B),
        "has_lengths": "0",
        "has_initial_state": str(has_init),
        "format": "keras",
        "bias": str(bias),
        "source": layer_source(kind, bi, L) + " float64",
        "case": c["name"],
    }
    if mode == "gru":
        meta["gru"] = "reset-after" if reset_after else "reset-before"
    c["maxy"] = float(np.max(np.abs(y)))
    c["e32"] = e32
    c["checks"] = checks
    return c, tensors, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "keras"), help="output directory")
    args = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(SEED)   # initializers are overwritten anyway
    os.makedirs(args.out, exist_ok=True)

    names = [case_name(s) for s in CASES]
    assert len(set(names)) == len(names)
    hdr = (f"{'case':<38} {'mode':<8} {'gru':<12} {'L':>1} {'D':>1} {'I':>2} {'H':>2} {'B':>1} {'T':>1} "
           f"{'h0':>2} {'bias':>4} {'max|y|':>7} {'f32 rel':>8} {'checks':<36} {'bytes':>6}")
    print(hdr)
    print("-" * len(hdr))
    total = 0
    for i, spec in enumerate(CASES):
        c, tensors, meta = generate_case(i, spec)
        path = os.path.join(args.out, c["name"] + ".safetensors")
        nbytes = safetensors_io.save_file(tensors, path, meta)
        back, bmeta = safetensors_io.load_file(path)
        assert bmeta == meta and set(back) == set(tensors)
        for n, v in tensors.items():
            assert back[n].dtype == v.dtype and np.array_equal(back[n], v), n
        total += nbytes
        kind, L, bi, I, H, B, T, has_init, bias = spec
        print(f"{c['name']:<38} {meta['mode']:<8} {meta.get('gru', '-'):<12} {L:>1} {2 if bi else 1:>1} "
              f"{I:>2} {H:>2} {B:>1} {T:>1} {has_init:>2} {bias:>4} {c['maxy']:>7.4f} {c['e32']:>8.1e} "
              f"{'+'.join(c['checks']):<36} {nbytes:>6}")
    print("-" * len(hdr))
    print(f"{len(CASES)} files, {total} bytes ({total / 1e6:.3f} MB) in {os.path.relpath(args.out)}")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, numpy {np.__version__}, "
          f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()

"""Independent float64 numpy reference of rnncore's recurrent semantics, plus
the weight-layout conversions between PyTorch, ONNX and the canonical layout.

This module is only used by the golden-data generators to cross-check the
PyTorch / ONNX references they store; the stored expected outputs always come
from PyTorch (make_pytorch_golden.py) or from the onnx backend-test helpers
(make_onnx_golden.py).

Canonical layout (rnncore's internal order, = cuDNN / TF CudnnLSTM): for each
layer l and direction d, a dict with
    W  [G, H, I_l]   input weights, one [H, I_l] block per gate
    R  [G, H, H]     recurrent weights
    bW [G, H]        input biases
    bR [G, H]        recurrent biases
gate order: LSTM i, f, g, o;  GRU r, z, n;  RNN one gate.
I_0 = input_size, I_l = D * H for l > 0.
"""

import numpy as np

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}

# ONNX row-block order expressed in canonical gate indices:
#   LSTM ONNX i,o,f,c  ->  canonical i=0, f=1, g(c)=2, o=3
#   GRU  ONNX z,r,h    ->  canonical r=0, z=1, n(h)=2
ONNX_ORDER = {"lstm": [0, 3, 1, 2], "gru": [1, 0, 2], "rnn_tanh": [0], "rnn_relu": [0]}


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rel_err(ours, ref):
    """Infinity-norm relative error: max|ours - ref| / max(max|ref|, 1e-30)."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(ours - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


# ----------------------------------------------------------------------------
# layout conversions
# ----------------------------------------------------------------------------

def canonical_from_torch(sd, mode, num_layers, bidirectional, hidden_size, prefix=""):
    """PyTorch state_dict (numpy arrays) -> canonical list indexed [layer*D + dir]."""
    G, H = GATES[mode], hidden_size
    D = 2 if bidirectional else 1
    out = []
    for l in range(num_layers):
        for d in range(D):
            sfx = f"_l{l}" + ("_reverse" if d else "")
            wih = np.asarray(sd[f"{prefix}weight_ih{sfx}"], dtype=np.float64)
            whh = np.asarray(sd[f"{prefix}weight_hh{sfx}"], dtype=np.float64)
            bih = sd.get(f"{prefix}bias_ih{sfx}")
            bhh = sd.get(f"{prefix}bias_hh{sfx}")
            out.append({
                "W": wih.reshape(G, H, -1),
                "R": whh.reshape(G, H, H),
                "bW": np.zeros((G, H)) if bih is None else np.asarray(bih, np.float64).reshape(G, H),
                "bR": np.zeros((G, H)) if bhh is None else np.asarray(bhh, np.float64).reshape(G, H),
            })
    return out


def torch_from_canonical(canon, mode, num_layers, bidirectional, bias=True):
    """Canonical -> dict of PyTorch parameter names (no prefix) -> arrays."""
    D = 2 if bidirectional else 1
    sd = {}
    for l in range(num_layers):
        for d in range(D):
            c = canon[l * D + d]
            sfx = f"_l{l}" + ("_reverse" if d else "")
            G, H, I = c["W"].shape
            sd[f"weight_ih{sfx}"] = c["W"].reshape(G * H, I)
            sd[f"weight_hh{sfx}"] = c["R"].reshape(G * H, H)
            if bias:
                sd[f"bias_ih{sfx}"] = c["bW"].reshape(G * H)
                sd[f"bias_hh{sfx}"] = c["bR"].reshape(G * H)
    return sd


def canonical_from_onnx(W, R, B, mode):
    """ONNX W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] or None -> canonical list [dir]."""
    D, GH, I = W.shape
    G = GATES[mode]
    H = GH // G
    order = ONNX_ORDER[mode]          # order[k] = canonical index of ONNX block k
    out = []
    for d in range(D):
        Wo = np.asarray(W[d], np.float64).reshape(G, H, I)
        Ro = np.asarray(R[d], np.float64).reshape(G, H, H)
        if B is None:
            Bo = np.zeros((2, G, H))
        else:
            Bo = np.asarray(B[d], np.float64).reshape(2, G, H)
        c = {k: np.zeros_like(v) for k, v in (("W", Wo), ("R", Ro), ("bW", Bo[0]), ("bR", Bo[1]))}
        for k, g in enumerate(order):
            c["W"][g] = Wo[k]
            c["R"][g] = Ro[k]
            c["bW"][g] = Bo[0, k]
            c["bR"][g] = Bo[1, k]
        out.append(c)
    return out


# ----------------------------------------------------------------------------
# reference forward pass
# ----------------------------------------------------------------------------

def _cell(mode, gru_variant, c, x, h, cs):
    """One step for a batch of rows. Returns (h_new, c_new)."""
    W, R, bW, bR = c["W"], c["R"], c["bW"], c["bR"]
    if mode == "lstm":
        pre = [x @ W[k].T + bW[k] + h @ R[k].T + bR[k] for k in range(4)]
        i, f, g, o = sigmoid(pre[0]), sigmoid(pre[1]), np.tanh(pre[2]), sigmoid(pre[3])
        cn = f * cs + i * g
        return o * np.tanh(cn), cn
    if mode == "gru":
        r = sigmoid(x @ W[0].T + bW[0] + h @ R[0].T + bR[0])
        z = sigmoid(x @ W[1].T + bW[1] + h @ R[1].T + bR[1])
        if gru_variant == "reset-after":
            n = np.tanh(x @ W[2].T + bW[2] + r * (h @ R[2].T + bR[2]))
        elif gru_variant == "reset-before":
            n = np.tanh(x @ W[2].T + bW[2] + (r * h) @ R[2].T + bR[2])
        else:
            raise ValueError(gru_variant)
        return (1.0 - z) * n + z * h, None
    a = x @ W[0].T + bW[0] + h @ R[0].T + bR[0]
    if mode == "rnn_tanh":
        return np.tanh(a), None
    if mode == "rnn_relu":
        return np.maximum(a, 0.0), None
    raise ValueError(mode)


def forward(mode, canon, x, num_layers, bidirectional, lengths=None, h0=None, c0=None,
            gru_variant="reset-after"):
    """Time-major float64 reference.

    x [T, B, I]; lengths [B] (ints 0..T) or None (= all T); h0/c0 [L*D, B, H] or None.
    Returns y [T, B, D*H], hn [L*D, B, H], cn (LSTM) or None.
    Row b: forward direction processes t = 0..len-1, reverse t = len-1..0;
    y is 0 for t >= len; final states are the states after the row's last
    processed step (the initial state when len == 0).
    """
    x = np.asarray(x, np.float64)
    T, B, _ = x.shape
    D = 2 if bidirectional else 1
    H = canon[0]["R"].shape[-1]
    lens = np.full(B, T, dtype=np.int64) if lengths is None else np.asarray(lengths, np.int64)
    assert lens.shape == (B,) and np.all(lens >= 0) and np.all(lens <= T)
    h_init = np.zeros((num_layers * D, B, H)) if h0 is None else np.asarray(h0, np.float64)
    c_init = np.zeros((num_layers * D, B, H)) if c0 is None else np.asarray(c0, np.float64)
    hn = np.zeros((num_layers * D, B, H))
    cn = np.zeros((num_layers * D, B, H))
    inp = x
    for l in range(num_layers):
        y = np.zeros((T, B, D * H))
        for d in range(D):
            c = canon[l * D + d]
            h = h_init[l * D + d].copy()
            cs = c_init[l * D + d].copy()
            steps = range(T) if d == 0 else range(T - 1, -1, -1)
            for t in steps:
                act = (t < lens)[:, None]
                hh, cc = _cell(mode, gru_variant, c, inp[t], h, cs)
                h = np.where(act, hh, h)
                if cc is not None:
                    cs = np.where(act, cc, cs)
                y[t, :, d * H:(d + 1) * H] = np.where(act, hh, 0.0)
            hn[l * D + d] = h
            cn[l * D + d] = cs
        inp = y
    return inp, hn, (cn if mode == "lstm" else None)

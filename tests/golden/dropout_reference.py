#!/usr/bin/python3
"""Float64 reference forward of an rnncore *stack*: heterogeneous layers, each
direction a cell wrapped by TensorFlow-style DropoutWrapper / ResidualWrapper,
plus CudnnLSTM-style inter-layer dropout, with masks from masks.py.

Used by make_dropout_golden.py to produce tests/golden/dropout/*.safetensors,
and through autograd (stack_forward(..., autograd=True)) by make_grad_golden.py.
Running this file on its own performs the self-checks (see `self_check`).

The cells are torch.nn.LSTMCell / GRUCell (reset-after) / RNNCell in float64;
the reset-before GRU, which torch lacks, is written out here:
    r = sigmoid(W_r x + b_ir + R_r h + b_hr),  z likewise,
    n = tanh(W_n x + b_in + R_n (r * h) + b_hn),  h' = (1 - z) * n + z * h.

Stack configuration: the dict form of the JSON documented in
tools/stack_config.hpp:
    {"input_size": I, "dropout": p,
     "layers": [{"mode": "lstm"|"gru"|"rnn_tanh"|"rnn_relu", "hidden_size": H,
                 "direction": "unidirectional"|"bidirectional",
                 "gru": "reset-after"|"reset-before",
                 "wrappers": [  # innermost first
                     {"type": "dropout", "input_keep": .., "output_keep": ..,
                      "state_keep": .., "variational": bool, "per_sequence": bool,
                      "state_filter": "default"|"h_and_c"|"c_only"|"none",
                      "seed": int},
                     {"type": "residual"}]}]}

Weights: PyTorch names (with a prefix, "rnn." in the golden files)
weight_ih_l{l}[_reverse] [G*H_l, I_l], weight_hh_l{l}[_reverse] [G*H_l, H_l],
bias_ih_l{l}[_reverse], bias_hh_l{l}[_reverse] [G*H_l]; gate order as PyTorch
(LSTM i, f, g, o; GRU r, z, n).

State tensors (h0, c0, hn, cn) are lists of per-(layer, direction) [B, H_l]
blocks in the order layer-major, then direction (forward, reverse); see
pack_state / unpack_state for the array form stored in the files.

Semantics of one step of row b at time t of direction d of layer l, with the
layer's wrappers w_0 (innermost) .. w_{n-1}:
  1. received[n-1] = x; going inwards, each dropout wrapper with input_keep < 1
     multiplies what it received by its input mask before passing it on:
     received[w-1] = received[w] * m_in_w (dropout) or received[w] (residual);
     the cell sees x_cell = received[0] * m_in_0 (or received[0]).
  2. (out, state') = cell(x_cell, state); out = h'.
  3. going outwards, w = 0 .. n-1: dropout: out *= m_out_w, h' *= m_h_w,
     c' *= m_c_w (as keeps and the state filter say); residual:
     out = received[w] + out.
  4. y[t, b, d*H:(d+1)*H] = out; the (dropped) state' is the next state and,
     after the row's last step, the final state.
At t >= len_b nothing happens: the state carries over and y is exactly 0.
Inter-layer dropout (training, p > 0) multiplies the whole [D*H] output of every
layer but the last by the mask of site (layer, 0, 0, kind 5).

Mask coordinates (docs/design.md §6): seed = the wrapper's seed or the run
seed; t' = t (the real time index, also in the reverse direction) or 0 when
variational; row = the row id (batch index, or the caller's id), or 0 for a
variational mask without per_sequence; site = layer<<16 | direction<<15 |
depth<<8 | kind (| 0x80 variational), depth counting dropout wrappers only
(0 = nearest the cell); widths: input I_l, output/state H_l, inter-layer D*H.
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import masks  # noqa: E402

DT = torch.float64
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
FILTERS = ("default", "h_and_c", "c_only", "none")

KIND_INPUT, KIND_OUTPUT, KIND_STATE_H, KIND_STATE_C, KIND_INTER = 1, 2, 3, 4, 5


# ----------------------------------------------------------------------------
# configuration helpers
# ----------------------------------------------------------------------------

def num_dirs(layer):
    d = layer.get("direction", "unidirectional")
    assert d in ("unidirectional", "bidirectional"), d
    return 2 if d == "bidirectional" else 1


def gru_variant(layer):
    return layer.get("gru", "reset-after")


def layer_input_sizes(config):
    sizes = [int(config["input_size"])]
    for layer in config["layers"][:-1]:
        sizes.append(num_dirs(layer) * int(layer["hidden_size"]))
    return sizes


def state_blocks(config):
    """[(layer, direction, H_l)] in rnncore's state order."""
    return [(l, d, int(layer["hidden_size"]))
            for l, layer in enumerate(config["layers"]) for d in range(num_dirs(layer))]


def uniform_hidden(config):
    return len({int(layer["hidden_size"]) for layer in config["layers"]}) == 1


def pack_state(config, blocks, B):
    """List of [B, H_l] blocks -> [L*D, B, H] when every layer has the same H,
    else the 1-D concatenation (length sum over blocks of B*H_l)."""
    arrs = [np.asarray(b, np.float64).reshape(B, h) for b, (_, _, h) in zip(blocks, state_blocks(config))]
    if uniform_hidden(config):
        return np.stack(arrs, axis=0)
    return np.concatenate([a.reshape(-1) for a in arrs])


def unpack_state(config, arr, B):
    """Inverse of pack_state (accepts either array form)."""
    flat = np.asarray(arr, np.float64).reshape(-1)
    out, off = [], 0
    for (_, _, h) in state_blocks(config):
        out.append(flat[off:off + B * h].reshape(B, h).copy())
        off += B * h
    assert off == flat.size, (off, flat.size)
    return out


def validate(config):
    """Asserts the structural rules the reference relies on."""
    sizes = layer_input_sizes(config)
    assert 0.0 <= float(config.get("dropout", 0.0)) < 1.0
    for l, layer in enumerate(config["layers"]):
        assert layer["mode"] in GATES, layer["mode"]
        assert gru_variant(layer) in ("reset-after", "reset-before")
        for w in layer.get("wrappers", []):
            if w["type"] == "residual":
                assert sizes[l] == int(layer["hidden_size"]), "residual needs I_l == H_l"
                continue
            assert w["type"] == "dropout", w
            for k in ("input_keep", "output_keep", "state_keep"):
                assert 0.0 < float(w.get(k, 1.0)) <= 1.0
            assert w.get("state_filter", "default") in FILTERS
            assert not w.get("per_sequence", False) or w.get("variational", False)


# ----------------------------------------------------------------------------
# cells
# ----------------------------------------------------------------------------

class Cell:
    """One direction of one layer, float64."""

    def __init__(self, mode, variant, I, H, wih, whh, bih=None, bhh=None):
        self.mode, self.variant, self.I, self.H = mode, variant, I, H
        G = GATES[mode]
        t = lambda a: torch.as_tensor(np.asarray(a, np.float64), dtype=DT)  # noqa: E731
        wih, whh = t(wih), t(whh)
        assert tuple(wih.shape) == (G * H, I) and tuple(whh.shape) == (G * H, H), (wih.shape, whh.shape)
        bias = bih is not None
        bih = t(bih) if bias else torch.zeros(G * H, dtype=DT)
        bhh = t(bhh) if bias else torch.zeros(G * H, dtype=DT)
        self.module = None
        self.bias = bias
        self.grad = False  # enable_grad(): build an autograd graph (make_grad_golden.py)
        if mode == "gru" and variant == "reset-before":
            self.wih, self.whh, self.bih, self.bhh = wih, whh, bih, bhh
            return
        if mode == "lstm":
            m = torch.nn.LSTMCell(I, H, bias=bias, dtype=DT)
        elif mode == "gru":
            m = torch.nn.GRUCell(I, H, bias=bias, dtype=DT)
        else:
            m = torch.nn.RNNCell(I, H, bias=bias, nonlinearity=mode[4:], dtype=DT)
        with torch.no_grad():
            m.weight_ih.copy_(wih)
            m.weight_hh.copy_(whh)
            if bias:
                m.bias_ih.copy_(bih)
                m.bias_hh.copy_(bhh)
        self.module = m

    def enable_grad(self):
        """Let calls record an autograd graph; parameters() are then leaf tensors
        whose .grad receives the weight gradients."""
        self.grad = True
        for v in self.parameters().values():
            v.requires_grad_(True)
        return self

    def parameters(self):
        """PyTorch-named parameter tensors (no layer suffix): weight_ih, weight_hh[, bias_ih, bias_hh]."""
        if self.module is not None:
            return dict(self.module.named_parameters())
        out = {"weight_ih": self.wih, "weight_hh": self.whh}
        if self.bias:
            out.update(bias_ih=self.bih, bias_hh=self.bhh)
        return out

    def __call__(self, x, h, c):
        """x [N, I], h [N, H], c [N, H] or None -> (h', c' or None)."""
        with (torch.enable_grad() if self.grad else torch.no_grad()):
            if self.module is None:
                H = self.H
                gi = x @ self.wih.T + self.bih
                gh = h @ self.whh[:2 * H].T + self.bhh[:2 * H]
                r = torch.sigmoid(gi[:, :H] + gh[:, :H])
                z = torch.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
                n = torch.tanh(gi[:, 2 * H:] + (r * h) @ self.whh[2 * H:].T + self.bhh[2 * H:])
                return (1.0 - z) * n + z * h, None
            if self.mode == "lstm":
                h1, c1 = self.module(x, (h, c))
                return h1, c1
            return self.module(x, h), None


def build_cells(config, weights, prefix="rnn."):
    """cells[l][d] from a PyTorch-named weight dict (numpy arrays)."""
    sizes = layer_input_sizes(config)
    cells = []
    for l, layer in enumerate(config["layers"]):
        row = []
        for d in range(num_dirs(layer)):
            sfx = "_l%d%s" % (l, "_reverse" if d else "")
            row.append(Cell(layer["mode"], gru_variant(layer), sizes[l], int(layer["hidden_size"]),
                            weights[prefix + "weight_ih" + sfx], weights[prefix + "weight_hh" + sfx],
                            weights.get(prefix + "bias_ih" + sfx), weights.get(prefix + "bias_hh" + sfx)))
        cells.append(row)
    return cells


# ----------------------------------------------------------------------------
# masks
# ----------------------------------------------------------------------------

class MaskSource:
    """Scaled mask vectors (0 or 1/keep, float64) from masks.mask_keep, cached."""

    def __init__(self, run_seed, step):
        self.run_seed, self.step = int(run_seed), int(step)
        self.cache = {}
        self.log = []  # (layer, direction, depth, kind, variational, t', row, keep, 0/1 vector)

    def vector(self, seed, layer, direction, depth, kind, variational, t_prime, row, width, keep):
        key = (seed, layer, direction, depth, kind, variational, t_prime, row, width, keep)
        v = self.cache.get(key)
        if v is None:
            site = masks.mask_site(layer, direction, depth, kind, variational=variational)
            bits = [masks.mask_keep(seed, self.step, site, t_prime, row, u, width, keep) for u in range(width)]
            v = torch.tensor(bits, dtype=DT) * (1.0 / keep)
            self.cache[key] = v
            self.log.append((layer, direction, depth, kind, variational, t_prime, row, keep, bits))
        return v

    def wrapper(self, w, layer, direction, depth, kind, t, row_id, width, keep):
        variational = bool(w.get("variational", False))
        seed = int(w["seed"]) if "seed" in w else self.run_seed
        tp = 0 if variational else t
        row = row_id if (not variational or w.get("per_sequence", False)) else 0
        return self.vector(seed, layer, direction, depth, kind, variational, tp, row, width, keep)

    def inter_layer(self, layer, t, row_id, width, keep):
        return self.vector(self.run_seed, layer, 0, 0, KIND_INTER, False, t, row_id, width, keep)


def drops_h(mode, flt):
    return flt in ("default", "h_and_c")


def drops_c(mode, flt):
    return mode == "lstm" and flt in ("h_and_c", "c_only")


# ----------------------------------------------------------------------------
# forward
# ----------------------------------------------------------------------------

def stack_forward(config, weights, x, seq_lengths=None, h0=None, c0=None, seed=0, step=0, row_ids=None,
                  training=True, prefix="rnn.", mask_source=None, cells=None, autograd=False):
    """Float64 forward of a stack.

    x [T, B, I] (time-major); seq_lengths [B] or None; h0/c0: state arrays in
    either pack_state form, or None (zeros); row_ids [B] or None (the batch
    index). training=False: an inference run (no dropout at all; residual
    wrappers still apply). Returns (y [T, B, D_last*H_last], hn blocks, cn blocks),
    the blocks being lists of [B, H_l] float64 arrays (cn blocks of non-LSTM
    layers are zero).

    autograd=True (make_grad_golden.py): x may be a torch tensor and h0/c0
    lists of [B, H_l] torch blocks (requiring grad); cells (from build_cells,
    with enable_grad()) replaces the cells built from `weights`; y and the
    blocks are returned as torch tensors in the autograd graph.
    """
    validate(config)
    x = x if autograd and torch.is_tensor(x) else torch.as_tensor(np.asarray(x, np.float64), dtype=DT)
    T, B, I = x.shape
    assert I == int(config["input_size"])
    lens = [T] * B if seq_lengths is None else [int(v) for v in seq_lengths]
    assert len(lens) == B and all(0 <= n <= T for n in lens)
    rows = list(range(B)) if row_ids is None else [int(v) for v in row_ids]
    assert len(rows) == B
    blocks = state_blocks(config)
    h_init = [np.zeros((B, h)) for (_, _, h) in blocks] if h0 is None else \
        (list(h0) if autograd and isinstance(h0, (list, tuple)) else unpack_state(config, h0, B))
    c_init = [np.zeros((B, h)) for (_, _, h) in blocks] if c0 is None else \
        (list(c0) if autograd and isinstance(c0, (list, tuple)) else unpack_state(config, c0, B))
    cells = build_cells(config, weights, prefix) if cells is None else cells
    ms = MaskSource(seed, step) if mask_source is None else mask_source
    p = float(config.get("dropout", 0.0))
    inter_keep = masks.keep_from_dropout(p)
    L = len(config["layers"])

    hn, cn = [], []
    inp = x
    bi = 0  # index into blocks
    for l, layer in enumerate(config["layers"]):
        mode, H, D = layer["mode"], int(layer["hidden_size"]), num_dirs(layer)
        I_l = inp.shape[2]
        wrappers = layer.get("wrappers", [])
        depth, ndrop = [], 0
        for w in wrappers:
            depth.append(ndrop)
            ndrop += w["type"] == "dropout"
        out_l = torch.zeros((T, B, D * H), dtype=DT)
        for d in range(D):
            cell = cells[l][d]
            hblk = np.zeros((B, H))
            cblk = np.zeros((B, H))
            hrows, crows = [], []
            for b in range(B):
                h = torch.as_tensor(h_init[bi][b:b + 1], dtype=DT).clone()
                c = torch.as_tensor(c_init[bi][b:b + 1], dtype=DT).clone()
                times = range(lens[b]) if d == 0 else range(lens[b] - 1, -1, -1)
                for t in times:
                    # 1. inputs, outermost wrapper first
                    received = [None] * len(wrappers)
                    level = inp[t, b:b + 1]
                    for wi in range(len(wrappers) - 1, -1, -1):
                        w = wrappers[wi]
                        received[wi] = level
                        if training and w["type"] == "dropout" and float(w.get("input_keep", 1.0)) < 1.0:
                            level = level * ms.wrapper(w, l, d, depth[wi], KIND_INPUT, t, rows[b], I_l,
                                                       float(w["input_keep"]))
                    # 2. the cell
                    h1, c1 = cell(level, h, c if mode == "lstm" else None)
                    out = h1
                    # 3. outputs and states, innermost wrapper first
                    for wi, w in enumerate(wrappers):
                        if w["type"] == "residual":
                            out = received[wi] + out
                            continue
                        if not training:
                            continue
                        ok = float(w.get("output_keep", 1.0))
                        sk = float(w.get("state_keep", 1.0))
                        flt = w.get("state_filter", "default")
                        if ok < 1.0:
                            out = out * ms.wrapper(w, l, d, depth[wi], KIND_OUTPUT, t, rows[b], H, ok)
                        if sk < 1.0 and drops_h(mode, flt):
                            h1 = h1 * ms.wrapper(w, l, d, depth[wi], KIND_STATE_H, t, rows[b], H, sk)
                        if sk < 1.0 and drops_c(mode, flt):
                            c1 = c1 * ms.wrapper(w, l, d, depth[wi], KIND_STATE_C, t, rows[b], H, sk)
                    # 4. carry
                    h = h1
                    if mode == "lstm":
                        c = c1
                    out_l[t, b, d * H:(d + 1) * H] = out[0]
                if autograd:
                    hrows.append(h[0])
                    crows.append(c[0])
                    continue
                hblk[b] = h[0].numpy()
                if mode == "lstm":
                    cblk[b] = c[0].numpy()
            if autograd:
                hblk = torch.stack(hrows)
                cblk = torch.stack(crows) if mode == "lstm" else torch.zeros((B, H), dtype=DT)
            hn.append(hblk)
            cn.append(cblk)
            bi += 1
        if training and p > 0.0 and l < L - 1:
            for b in range(B):
                for t in range(lens[b]):  # padded steps are exactly 0 already
                    out_l[t, b] = out_l[t, b] * ms.inter_layer(l, t, rows[b], D * H, inter_keep)
        inp = out_l
    return (inp if autograd else inp.numpy()), hn, cn


# ----------------------------------------------------------------------------
# self-check: the loop against torch.nn.LSTM / GRU / RNN
# ----------------------------------------------------------------------------

def torch_module(mode, I, H, L, bidirectional):
    kw = dict(input_size=I, hidden_size=H, num_layers=L, bidirectional=bidirectional, dtype=DT)
    if mode == "lstm":
        return torch.nn.LSTM(**kw)
    if mode == "gru":
        return torch.nn.GRU(**kw)
    return torch.nn.RNN(nonlinearity=mode[4:], **kw)


def uniform_config(mode, I, H, L, bidirectional, variant="reset-after", keeps_one_wrappers=False):
    layer = {"mode": mode, "hidden_size": H, "direction": "bidirectional" if bidirectional else "unidirectional"}
    if mode == "gru":
        layer["gru"] = variant
    if keeps_one_wrappers:
        layer["wrappers"] = [{"type": "dropout", "input_keep": 1.0, "output_keep": 1.0, "state_keep": 1.0,
                              "state_filter": "h_and_c"},
                             {"type": "dropout", "input_keep": 1.0, "variational": True, "per_sequence": True}]
    return {"input_size": I, "dropout": 0.0, "layers": [dict(layer) for _ in range(L)]}


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) if b.size else 0.0


def self_check(verbose=True, tol=1e-12):
    """With no dropout (inference runs, and training runs whose keeps are all 1
    and p = 0) and no residual, uniform stacks must equal torch.nn.LSTM / GRU /
    RNN in float64 -- batched without lengths, pack_padded_sequence with
    lengths (no zeros) -- and the reset-before GRU the numpy loop of
    rnn_reference.py (lengths with zeros too)."""
    import rnn_reference
    rng = np.random.default_rng(7041)
    worst = 0.0
    count = 0
    for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        for bidirectional in (False, True):
            I, H, L, B, T = 5, 3 + 2 * bidirectional, 2, 4, 6
            D = 2 if bidirectional else 1
            mod = torch_module(mode, I, H, L, bidirectional)
            k = 1.0 / np.sqrt(H)
            sd = {}
            with torch.no_grad():
                for name, prm in mod.named_parameters():
                    v = rng.uniform(-k, k, size=tuple(prm.shape)).astype(np.float32)
                    prm.copy_(torch.from_numpy(v.astype(np.float64)))
                    sd["rnn." + name] = v
            x = rng.standard_normal((T, B, I)).astype(np.float32)
            h0 = rng.standard_normal((L * D, B, H)).astype(np.float32)
            c0 = rng.standard_normal((L * D, B, H)).astype(np.float32)
            lens = [3, 6, 1, 5]
            xt, h0t, c0t = (torch.from_numpy(a.astype(np.float64)) for a in (x, h0, c0))
            with torch.no_grad():
                state = (h0t, c0t) if mode == "lstm" else h0t
                y_full, s_full = mod(xt, state)
                packed = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lens), enforce_sorted=False)
                py, s_len = mod(packed, state)
                y_len, _ = torch.nn.utils.rnn.pad_packed_sequence(py, total_length=T)
            hn_full, cn_full = (s_full if mode == "lstm" else (s_full, None))
            hn_len, cn_len = (s_len if mode == "lstm" else (s_len, None))
            for training, wrapped in ((False, False), (True, False), (True, True)):
                cfg = uniform_config(mode, I, H, L, bidirectional, keeps_one_wrappers=wrapped)
                for lengths, yr, hr, cr in ((None, y_full, hn_full, cn_full), (lens, y_len, hn_len, cn_len)):
                    y, hn, cn = stack_forward(cfg, sd, x, lengths, h0, c0, seed=(1 << 40) + 3, step=11,
                                              training=training)
                    errs = [rel_err(y, yr.numpy()), rel_err(pack_state(cfg, hn, B), hr.numpy())]
                    if mode == "lstm":
                        errs.append(rel_err(pack_state(cfg, cn, B), cr.numpy()))
                    e = max(errs)
                    worst = max(worst, e)
                    count += 1
                    assert e <= tol, (mode, bidirectional, training, wrapped, lengths, errs)
    # reset-before GRU against the independent numpy loop
    for bidirectional in (False, True):
        I, H, L, B, T = 3, 5, 2, 5, 4
        D = 2 if bidirectional else 1
        sd = {}
        for l in range(L):
            for d in range(D):
                sfx = "_l%d%s" % (l, "_reverse" if d else "")
                Il = I if l == 0 else D * H
                k = 1.0 / np.sqrt(H)
                sd["rnn.weight_ih" + sfx] = rng.uniform(-k, k, (3 * H, Il)).astype(np.float32)
                sd["rnn.weight_hh" + sfx] = rng.uniform(-k, k, (3 * H, H)).astype(np.float32)
                sd["rnn.bias_ih" + sfx] = rng.uniform(-k, k, (3 * H,)).astype(np.float32)
                sd["rnn.bias_hh" + sfx] = rng.uniform(-k, k, (3 * H,)).astype(np.float32)
        x = rng.standard_normal((T, B, I)).astype(np.float32)
        h0 = rng.standard_normal((L * D, B, H)).astype(np.float32)
        lens = [4, 0, 2, 1, 3]
        canon = rnn_reference.canonical_from_torch(sd, "gru", L, bidirectional, H, prefix="rnn.")
        yr, hr, _ = rnn_reference.forward("gru", canon, x, L, bidirectional, lens, h0, None,
                                          gru_variant="reset-before")
        for training in (False, True):
            cfg = uniform_config("gru", I, H, L, bidirectional, "reset-before", keeps_one_wrappers=training)
            y, hn, _ = stack_forward(cfg, sd, x, lens, h0, None, seed=5, step=(1 << 33) + 1, training=training)
            e = max(rel_err(y, yr), rel_err(pack_state(cfg, hn, B), hr))
            worst = max(worst, e)
            count += 1
            assert e <= tol, ("gru reset-before", bidirectional, training, e)
    if verbose:
        print("dropout_reference self-check: %d comparisons with no dropout, max rel err %.1e "
              "(torch.nn.LSTM/GRU/RNN batched and packed; numpy loop for reset-before GRU)" % (count, worst))
    return worst


if __name__ == "__main__":
    if not masks.check_known_answers():
        sys.exit(1)
    print("masks.py: Philox known answers OK")
    self_check()

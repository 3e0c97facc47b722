#!/usr/bin/python3
"""Generate golden data for stacks with DropoutWrapper / ResidualWrapper and
inter-layer dropout: tests/golden/dropout/<case>.safetensors (+ <case>.json for
three cases, for the CLI test).

Run from anywhere with Debian's python (torch 1.13 CPU, numpy 1.24):
    /usr/bin/python3 tests/golden/make_dropout_golden.py

Deterministic (fixed seeds, float64 CPU arithmetic, deterministic writer).

Stored values: weights (PyTorch names, prefix "rnn."), input and initial states
as float32; expected outputs computed in float64 by dropout_reference.py (a
hand-written loop over torch.nn.LSTMCell / GRUCell / RNNCell and a reset-before
GRU, masks from masks.py) and stored as F64. Checks, all asserted:
  * masks.py's Philox known answers;
  * dropout_reference.self_check(): with no dropout the loop equals
    torch.nn.LSTM / GRU / RNN (batched and pack_padded_sequence) and the numpy
    loop of rnn_reference.py (reset-before GRU), rel <= 1e-12;
  * every case: a second implementation in this file (numpy, vectorised over
    the batch, cells from rnn_reference._cell, masks as whole [T, B, width]
    tensors from masks.mask_tensor) agrees, rel <= 1e-12  ("numpy");
  * cases without effective state dropout: composing whole-sequence
    torch.nn.LSTM/GRU/RNN single-layer calls (numpy loop for reset-before)
    with element-wise input masks, output masks, residual adds and inter-layer
    masks agrees, rel <= 1e-12  ("torch");
  * cases whose last layer's outermost wrapper is a dropout wrapper with output
    dropout: y is exactly 0 wherever that output mask drops, and (modes other
    than rnn_relu) nowhere else inside the lengths  ("zeros");
  * lstm_all_filter_none: the same run with state_keep = 1 gives bit-identical
    results  ("none=keep1");
  * y is exactly 0 at t >= len; the files read back equal what was written.
"""

import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dropout_reference as dref  # noqa: E402
import masks  # noqa: E402
import rnn_reference  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 20240917
TOL = 1e-12
OUTDIR = os.path.join(HERE, "dropout")
CLI_JSON = ("lstm_input_nonvar", "rnn_tanh_drop_of_res", "gnmt_l3_interlayer")
P32 = 1 << 32


def L(mode, H, bi=False, wrappers=(), gru=None):
    layer = {"mode": mode, "hidden_size": H, "direction": "bidirectional" if bi else "unidirectional"}
    if mode == "gru":
        layer["gru"] = gru or "reset-after"
    if wrappers:
        layer["wrappers"] = [dict(w) for w in wrappers]
    return layer


def DW(input_keep=1.0, output_keep=1.0, state_keep=1.0, variational=False, per_sequence=False,
       state_filter="default", seed=None):
    w = {"type": "dropout", "input_keep": input_keep, "output_keep": output_keep, "state_keep": state_keep,
         "variational": variational}
    if variational:
        w["per_sequence"] = per_sequence
    w["state_filter"] = state_filter
    if seed is not None:
        w["seed"] = seed
    return w


RW = {"type": "residual"}


def cfg(I, layers, dropout=0.0):
    return {"input_size": I, "dropout": dropout, "layers": layers}


# name, config, T, B, lengths, row_ids, initial state, run seed, step, what it covers
CASES = [
    ("lstm_input_nonvar", cfg(5, [L("lstm", 3, wrappers=[DW(input_keep=0.6)])]),
     5, 3, None, None, False, 0x123456789, 7,
     "LSTM, input dropout only, non-variational; run seed >= 2^32"),
    ("lstm_output_var_shared", cfg(3, [L("lstm", 17, wrappers=[DW(output_keep=0.7, variational=True)])]),
     4, 4, [4, 0, 1, 3], None, False, 42, P32 + 3,
     "LSTM, output dropout only, variational shared by the batch (TF); lengths with 0; step >= 2^32"),
    ("lstm_state_default_perseq", cfg(17, [L("lstm", 5, wrappers=[DW(state_keep=0.75, variational=True,
                                                                      per_sequence=True)])]),
     6, 3, None, [517, 3, 998], True, P32 + 1, 123,
     "LSTM, state dropout only, filter default (h), variational per_sequence; row ids; h0/c0"),
    ("lstm_state_h_and_c_nonvar", cfg(3, [L("lstm", 3, wrappers=[DW(state_keep=0.8, state_filter="h_and_c")])]),
     5, 4, [3, 0, 5, 1], None, True, 0xDEADBEEFCAFE, 3 * P32 + 17,
     "LSTM, state dropout filter h_and_c, non-variational; unsorted lengths with 0; h0/c0"),
    ("lstm_state_c_only_var_shared", cfg(5, [L("lstm", 3, wrappers=[DW(state_keep=0.5, variational=True,
                                                                       state_filter="c_only")])]),
     7, 5, None, [10, 200, 3, 999, 47], True, 1234567, 2 * P32 + 5,
     "LSTM H=3, state dropout filter c_only, variational shared; row ids; h0/c0"),
    ("lstm_all_filter_none", cfg(1, [L("lstm", 5, wrappers=[DW(0.6, 0.8, 0.6, state_filter="none")])]),
     4, 2, [4, 2], None, False, (1 << 40) + 9, 77,
     "LSTM I=1, input+output dropout and state_keep<1 with filter none (= no state dropout)"),
    ("gru_all_perseq", cfg(5, [L("gru", 17, wrappers=[DW(0.8, 0.7, 0.9, variational=True, per_sequence=True)])]),
     5, 4, [5, 0, 3, 2], [31, 700, 5, 64], True, P32 + 77, 9,
     "GRU reset-after, input+output+state together, variational per_sequence; lengths with 0; row ids; h0"),
    ("gru_rb_l2_nonvar_interlayer", cfg(3, [L("gru", 5, gru="reset-before", wrappers=[DW(0.75, 0.8, 0.7)]),
                                            L("gru", 5, gru="reset-before", wrappers=[DW(1.0, 0.9, 0.85)])],
                                        dropout=0.2),
     5, 3, [2, 5, 0], None, True, 99, P32 + 1,
     "GRU reset-before, 2 layers, input/output/state non-variational, inter-layer p=0.2; lengths with 0; h0"),
    ("rnn_tanh_drop_of_res", cfg(5, [L("rnn_tanh", 5, wrappers=[RW, DW(input_keep=0.7, output_keep=0.8)])]),
     4, 3, [4, 1, 3], None, False, (1 << 35) + 5, 3,
     "RNN tanh, Dropout(Residual(cell)), I == H: the residual sees the dropped input, the sum is dropped"),
    ("rnn_relu_res_of_drop", cfg(3, [L("rnn_relu", 3, wrappers=[DW(0.7, 0.6, 0.9, variational=True), RW])]),
     6, 4, None, None, True, 573, 7 * P32 + 2,
     "RNN relu, Residual(Dropout(cell)), I == H: the raw input is added to the dropped output; var shared; h0"),
    ("lstm_two_dropouts_runseed", cfg(17, [L("lstm", 5, wrappers=[
        DW(0.8, 0.7, 0.85, state_filter="h_and_c"), DW(0.75, 0.9, 0.8, variational=True)])]),
     5, 3, [5, 3, 0], None, True, P32 + 316, P32 + 15,
     "LSTM, two dropout wrappers (depth 0 non-var h_and_c, depth 1 var), both on the run seed; h0/c0"),
    ("gru_drop_res_drop_seeds", cfg(17, [L("gru", 17, wrappers=[
        DW(0.8, 0.75, 0.9, seed=P32 + 11), RW, DW(0.7, 0.85, 1.0, variational=True, per_sequence=True, seed=7)])]),
     4, 3, [4, 2, 3], [100, 42, 901], False, 1 << 33, 5,
     "GRU, Dropout(Residual(Dropout(cell))) I == H = 17, both dropout wrappers with their own seeds; row ids"),
    ("lstm_bi_input_l2", cfg(5, [L("lstm", 3, bi=True, wrappers=[DW(input_keep=0.7)]),
                                 L("lstm", 3, bi=True, wrappers=[DW(input_keep=0.8, variational=True)])]),
     6, 5, [0, 4, 2, 6, 1], None, True, P32 + 2027, P32 + 2,
     "bidirectional LSTM x2, input dropout (non-var / var shared): per-direction masks; lengths with 0; h0/c0"),
    ("gnmt_l3_interlayer", cfg(3, [L("lstm", 5, bi=True, wrappers=[DW(input_keep=0.8)]),
                                   L("lstm", 10, wrappers=[DW(input_keep=0.8, seed=(1 << 34) + 1)]),
                                   L("lstm", 10, wrappers=[DW(input_keep=0.8), RW])], dropout=0.3),
     5, 4, [5, 0, 3, 2], None, True, 5 * P32 + 3, P32 + 8,
     "GNMT-like: bi LSTM, LSTM, Residual(Dropout(LSTM)) with I_2 = D*H_1 = H_2 = 10, inter-layer p=0.3; h0/c0"),
    ("mixed_odd_widths", cfg(1, [L("lstm", 3, wrappers=[DW(0.5, 0.9, 0.7, state_filter="h_and_c")]),
                                 L("gru", 17, bi=True, gru="reset-before",
                                   wrappers=[DW(output_keep=0.8, variational=True, per_sequence=True)]),
                                 L("rnn_relu", 1, wrappers=[DW(0.6, 1.0, 0.5, variational=True, per_sequence=True)])], dropout=0.25),
     5, 3, [5, 0, 3], [1000, 0, 513], True, 3, P32,
     "LSTM(I=1,H=3) / bi reset-before GRU(H=17) / RNN relu(H=1), widths 1,3,17,34, p=0.25; step = 2^32; row ids"),
    ("rnn_tanh_bi_var_shared", cfg(3, [L("rnn_tanh", 5, bi=True, wrappers=[DW(0.6, 0.75, 0.8, variational=True)])]),
     4, 3, [1, 4, 0], None, False, 0xFEDCBA9876543212, 11,
     "bidirectional RNN tanh, input+output+state variational shared (masks differ per direction); seed >= 2^63"),
]


# ----------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------

def make_weights(config, rng, prefix="rnn."):
    sizes = dref.layer_input_sizes(config)
    sd = {}
    for l, layer in enumerate(config["layers"]):
        G, H = dref.GATES[layer["mode"]], int(layer["hidden_size"])
        k = 1.0 / np.sqrt(H)
        for d in range(dref.num_dirs(layer)):
            sfx = "_l%d%s" % (l, "_reverse" if d else "")
            sd[prefix + "weight_ih" + sfx] = rng.uniform(-k, k, (G * H, sizes[l])).astype(np.float32)
            sd[prefix + "weight_hh" + sfx] = rng.uniform(-k, k, (G * H, H)).astype(np.float32)
            sd[prefix + "bias_ih" + sfx] = rng.uniform(-k, k, (G * H,)).astype(np.float32)
            sd[prefix + "bias_hh" + sfx] = rng.uniform(-k, k, (G * H,)).astype(np.float32)
    return sd


def has_lstm(config):
    return any(layer["mode"] == "lstm" for layer in config["layers"])


def make_states(config, B, rng):
    blocks = dref.state_blocks(config)
    h = [rng.standard_normal((B, hh)).astype(np.float32) for (_, _, hh) in blocks]
    c = [rng.standard_normal((B, hh)).astype(np.float32) if config["layers"][l]["mode"] == "lstm"
         else np.zeros((B, hh), np.float32) for (l, _, hh) in blocks]
    return dref.pack_state(config, h, B).astype(np.float32), dref.pack_state(config, c, B).astype(np.float32)


# ----------------------------------------------------------------------------
# second implementation: numpy, vectorised over the batch
# ----------------------------------------------------------------------------

def mask_full(seed, step, l, d, depth, kind, variational, per_sequence, T, B, width, keep, rows):
    """Scaled mask [T, B, width] (0 or 1/keep) from masks.mask_tensor."""
    site = masks.mask_site(l, d, depth, kind, variational=variational)
    if variational:
        ids = list(rows) if per_sequence else [0] * B
        m = np.array(masks.mask_tensor(seed, step, site, 0, B, width, keep, row_ids=ids), np.float64)
        m = np.broadcast_to(m, (T, B, width))
    else:
        m = np.stack([np.array(masks.mask_tensor(seed, step, site, t, B, width, keep, row_ids=rows), np.float64)
                      for t in range(T)])
    return m / keep


def layer_canon(sd, l, layer, prefix="rnn."):
    D = dref.num_dirs(layer)
    sub = {}
    for d in range(D):
        for nm in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            sub["%s_l0%s" % (nm, "_reverse" if d else "")] = sd["%s%s_l%d%s" % (prefix, nm, l, "_reverse" if d else "")]
    return rnn_reference.canonical_from_torch(sub, layer["mode"], 1, D == 2, int(layer["hidden_size"]))


def wrapper_masks(config, l, d, T, B, I_l, seed, step, rows):
    """Per wrapper: dict of scaled [T, B, width] masks (None where the keep is 1
    or the filter excludes the part)."""
    layer = config["layers"][l]
    mode, H = layer["mode"], int(layer["hidden_size"])
    out, depth = [], 0
    for w in layer.get("wrappers", []):
        if w["type"] != "dropout":
            out.append(None)
            continue
        s = int(w.get("seed", seed))
        var, ps = bool(w.get("variational", False)), bool(w.get("per_sequence", False))
        flt = w.get("state_filter", "default")
        ik, ok, sk = (float(w.get(k, 1.0)) for k in ("input_keep", "output_keep", "state_keep"))
        mk = lambda kind, width, keep: mask_full(s, step, l, d, depth, kind, var, ps, T, B, width, keep, rows)  # noqa
        out.append({
            "in": mk(1, I_l, ik) if ik < 1 else None,
            "out": mk(2, H, ok) if ok < 1 else None,
            "h": mk(3, H, sk) if sk < 1 and flt in ("default", "h_and_c") else None,
            "c": mk(4, H, sk) if sk < 1 and mode == "lstm" and flt in ("h_and_c", "c_only") else None,
        })
        depth += 1
    return out


def numpy_forward(config, sd, x, lens, h0, c0, seed, step, rows):
    x = np.asarray(x, np.float64)
    T, B, _ = x.shape
    lens = np.array([T] * B if lens is None else lens)
    rows = list(range(B)) if rows is None else list(rows)
    blocks = dref.state_blocks(config)
    h_init = [np.zeros((B, h)) for (_, _, h) in blocks] if h0 is None else dref.unpack_state(config, h0, B)
    c_init = [np.zeros((B, h)) for (_, _, h) in blocks] if c0 is None else dref.unpack_state(config, c0, B)
    p = float(config.get("dropout", 0.0))
    nl = len(config["layers"])
    hn, cn = [], []
    inp, k = x, 0
    for l, layer in enumerate(config["layers"]):
        mode, H, D = layer["mode"], int(layer["hidden_size"]), dref.num_dirs(layer)
        wr = layer.get("wrappers", [])
        canon = layer_canon(sd, l, layer)
        y = np.zeros((T, B, D * H))
        for d in range(D):
            M = wrapper_masks(config, l, d, T, B, inp.shape[2], seed, step, rows)
            h, c = h_init[k].copy(), c_init[k].copy()
            for t in (range(T) if d == 0 else range(T - 1, -1, -1)):
                act = (t < lens)[:, None]
                recv = [None] * len(wr)
                lev = inp[t]
                for wi in range(len(wr) - 1, -1, -1):
                    recv[wi] = lev
                    if M[wi] is not None and M[wi]["in"] is not None:
                        lev = lev * M[wi]["in"][t]
                h1, c1 = rnn_reference._cell(mode, dref.gru_variant(layer), canon[d], lev, h, c)
                o = h1
                for wi, w in enumerate(wr):
                    if w["type"] == "residual":
                        o = recv[wi] + o
                        continue
                    if M[wi]["out"] is not None:
                        o = o * M[wi]["out"][t]
                    if M[wi]["h"] is not None:
                        h1 = h1 * M[wi]["h"][t]
                    if M[wi]["c"] is not None:
                        c1 = c1 * M[wi]["c"][t]
                h = np.where(act, h1, h)
                if mode == "lstm":
                    c = np.where(act, c1, c)
                y[t, :, d * H:(d + 1) * H] = np.where(act, o, 0.0)
            hn.append(h)
            cn.append(c if mode == "lstm" else np.zeros((B, H)))
            k += 1
        if p > 0 and l < nl - 1:
            y = y * mask_full(seed, step, l, 0, 0, 5, False, False, T, B, D * H, masks.keep_from_dropout(p), rows)
        inp = y
    return inp, hn, cn


# ----------------------------------------------------------------------------
# third check: whole-sequence torch modules + element-wise masks
# (valid when no state dropout is in effect: then the masks act outside the recurrence)
# ----------------------------------------------------------------------------

def has_state_dropout(config):
    for layer in config["layers"]:
        for w in layer.get("wrappers", []):
            if w["type"] == "dropout" and float(w.get("state_keep", 1.0)) < 1.0:
                flt = w.get("state_filter", "default")
                if flt in ("default", "h_and_c") or (layer["mode"] == "lstm" and flt == "c_only"):
                    return True
    return False


def rows_matter(config):
    """False when every mask in use is shared by the batch (variational without per_sequence)."""
    if float(config.get("dropout", 0.0)) > 0.0:
        return True
    for layer in config["layers"]:
        for w in layer.get("wrappers", []):
            if w["type"] != "dropout" or all(float(w.get(k, 1.0)) >= 1.0
                                             for k in ("input_keep", "output_keep", "state_keep")):
                continue
            if not w.get("variational", False) or w.get("per_sequence", False):
                return True
    return False


def run_direction(mode, variant, canon_d, sd_w, xs, lens, h0b, c0b, reverse):
    """One direction of one layer over whole sequences, row by row.
    torch.nn.LSTM/GRU/RNN for everything but the reset-before GRU."""
    T, B, I = xs.shape
    H = h0b.shape[1]
    y = np.zeros((T, B, H))
    hn, cn = h0b.copy(), c0b.copy()
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            continue
        seq = xs[:n, b:b + 1]
        if reverse:
            seq = seq[::-1]
        if mode == "gru" and variant == "reset-before":
            yb, hb, _ = rnn_reference.forward("gru", [canon_d], seq, 1, False, None, h0b[None, b:b + 1], None,
                                              gru_variant="reset-before")
            cb = None
        else:
            mod = dref.torch_module(mode, I, H, 1, False)
            with torch.no_grad():
                for nm in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(mod, nm + "_l0").copy_(torch.from_numpy(np.asarray(sd_w[nm], np.float64)))
                st = torch.from_numpy(h0b[None, b:b + 1].copy())
                xt = torch.from_numpy(np.array(seq, np.float64, copy=True))
                if mode == "lstm":
                    yt, (ht, ct) = mod(xt, (st, torch.from_numpy(c0b[None, b:b + 1].copy())))
                    cb = ct.numpy()
                else:
                    yt, ht = mod(xt, st)
                    cb = None
            yb, hb = yt.numpy(), ht.numpy()
        if reverse:
            yb = yb[::-1]
        y[:n, b] = yb[:, 0]
        hn[b] = hb[0, 0]
        if cb is not None:
            cn[b] = cb[0, 0]
    return y, hn, cn


def torch_composed_forward(config, sd, x, lens, h0, c0, seed, step, rows):
    assert not has_state_dropout(config)
    x = np.asarray(x, np.float64)
    T, B, _ = x.shape
    lens = np.array([T] * B if lens is None else lens)
    rows = list(range(B)) if rows is None else list(rows)
    blocks = dref.state_blocks(config)
    h_init = [np.zeros((B, h)) for (_, _, h) in blocks] if h0 is None else dref.unpack_state(config, h0, B)
    c_init = [np.zeros((B, h)) for (_, _, h) in blocks] if c0 is None else dref.unpack_state(config, c0, B)
    valid = (np.arange(T)[:, None] < lens[None, :])[:, :, None]
    p = float(config.get("dropout", 0.0))
    nl = len(config["layers"])
    hn, cn = [], []
    inp, k = x, 0
    for l, layer in enumerate(config["layers"]):
        mode, H, D = layer["mode"], int(layer["hidden_size"]), dref.num_dirs(layer)
        wr = layer.get("wrappers", [])
        canon = layer_canon(sd, l, layer)
        outs = []
        for d in range(D):
            M = wrapper_masks(config, l, d, T, B, inp.shape[2], seed, step, rows)
            recv, lev = [None] * len(wr), inp
            for wi in range(len(wr) - 1, -1, -1):
                recv[wi] = lev
                if M[wi] is not None and M[wi]["in"] is not None:
                    lev = lev * M[wi]["in"]
            sfx = "_l%d%s" % (l, "_reverse" if d else "")
            sd_w = {nm: sd["rnn." + nm + sfx] for nm in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
            o, h, c = run_direction(mode, dref.gru_variant(layer), canon[d], sd_w, lev, lens,
                                    h_init[k].astype(np.float64), c_init[k].astype(np.float64), d == 1)
            for wi, w in enumerate(wr):
                if w["type"] == "residual":
                    o = recv[wi] + o
                elif M[wi]["out"] is not None:
                    o = o * M[wi]["out"]
            outs.append(np.where(valid, o, 0.0))
            hn.append(h)
            cn.append(c if mode == "lstm" else np.zeros((B, H)))
            k += 1
        y = np.concatenate(outs, axis=2)
        if p > 0 and l < nl - 1:
            y = y * mask_full(seed, step, l, 0, 0, 5, False, False, T, B, D * H, masks.keep_from_dropout(p), rows)
        inp = y
    return inp, hn, cn


# ----------------------------------------------------------------------------
# zero pattern of the last layer's output mask
# ----------------------------------------------------------------------------

def zero_pattern_check(config, y, lens, seed, step, rows):
    """None if not applicable, else True after asserting: y is exactly 0 wherever
    the outermost wrapper's output mask drops; and when the layer has dropout
    wrappers only (y = h' times the product of their output masks) and its mode
    cannot produce exact zeros (not relu), y is 0 nowhere else."""
    last = len(config["layers"]) - 1
    layer = config["layers"][last]
    wr = layer.get("wrappers", [])
    if not wr or wr[-1]["type"] != "dropout" or float(wr[-1].get("output_keep", 1.0)) >= 1.0:
        return None
    T, B, _ = y.shape
    lens = np.array([T] * B if lens is None else lens)
    rows = list(range(B)) if rows is None else list(rows)
    H, D = int(layer["hidden_size"]), dref.num_dirs(layer)
    valid = (np.arange(T)[:, None] < lens[None, :])[:, :, None]
    for d in range(D):
        M = wrapper_masks(config, last, d, T, B, dref.layer_input_sizes(config)[last], seed, step, rows)
        yd = y[:, :, d * H:(d + 1) * H]
        dropped = (M[-1]["out"] == 0.0) & valid
        assert np.any(dropped), "no element of y dropped by the output mask: weak case"
        assert np.all(yd[dropped] == 0.0), "y not zero where the output mask drops"
        if layer["mode"] != "rnn_relu" and all(w["type"] == "dropout" for w in wr):
            any_drop = np.zeros(yd.shape, bool)
            for m in M:
                if m["out"] is not None:
                    any_drop |= m["out"] == 0.0
            assert np.array_equal((yd == 0.0) & valid, any_drop & valid), "y zero where the output masks keep"
    return True


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------

def layer_summary(layer):
    m = layer["mode"]
    if m == "gru":
        m = "gru_ra" if dref.gru_variant(layer) == "reset-after" else "gru_rb"
    s = "%s%s%d" % (m, "(bi)" if dref.num_dirs(layer) == 2 else "", int(layer["hidden_size"]))
    ws = []
    for w in layer.get("wrappers", []):
        if w["type"] == "residual":
            ws.append("R")
        else:
            t = "D"
            if w.get("variational"):
                t += "v" + ("p" if w.get("per_sequence") else "s")
            ks = "/".join("%g" % float(w.get(k, 1.0)) for k in ("input_keep", "output_keep", "state_keep"))
            t += "[" + ks + ("," + w["state_filter"] if float(w.get("state_keep", 1)) < 1 else "") + \
                 (",seed" if "seed" in w else "") + "]"
            ws.append(t)
    return s + ("{" + " ".join(ws) + "}" if ws else "")


def generate(index, case):
    name, config, T, B, lens, rows, has_init, seed, step, _what = case
    dref.validate(config)
    rng = np.random.default_rng([SEED, index])
    sd = make_weights(config, rng)
    x = rng.standard_normal((T, B, int(config["input_size"]))).astype(np.float32)
    h0 = c0 = None
    if has_init:
        h0, c0 = make_states(config, B, rng)
    lstm = has_lstm(config)
    c0_arg = c0 if lstm else None

    ms = dref.MaskSource(seed, step)
    y, hn, cn = dref.stack_forward(config, sd, x, lens, h0, c0_arg, seed=seed, step=step, row_ids=rows,
                                   mask_source=ms)
    # every mask site in use both keeps and drops somewhere (no vacuous site)
    # (a site of one element, e.g. a shared variational mask of width 1, only has to drop)
    sites = {}
    for (l, d, depth, kind, var, _tp, _row, _keep, bits) in ms.log:
        s = sites.setdefault((l, d, depth, kind, var), [set(), 0])
        s[0].update(bits)
        s[1] += len(bits)
    weak = [k for k, (v, n) in sites.items() if 0 not in v or (1 not in v and n > 1)]
    assert not weak, (name, "mask sites that never drop or never keep (layer, dir, depth, kind, var)", weak)
    hn_arr = dref.pack_state(config, hn, B)
    cn_arr = dref.pack_state(config, cn, B)

    checks = []
    # padding is exactly zero
    if lens is not None:
        for b, n in enumerate(lens):
            assert np.all(y[n:, b] == 0.0)
    # numpy implementation
    y2, hn2, cn2 = numpy_forward(config, sd, x, lens, h0, c0_arg, seed, step, rows)
    errs = [dref.rel_err(y2, y), dref.rel_err(dref.pack_state(config, hn2, B), hn_arr)]
    if lstm:
        errs.append(dref.rel_err(dref.pack_state(config, cn2, B), cn_arr))
    assert max(errs) <= TOL, (name, "numpy", errs)
    checks.append("numpy")
    worst = max(errs)
    # torch composition
    if not has_state_dropout(config):
        y3, hn3, cn3 = torch_composed_forward(config, sd, x, lens, h0, c0_arg, seed, step, rows)
        errs = [dref.rel_err(y3, y), dref.rel_err(dref.pack_state(config, hn3, B), hn_arr)]
        if lstm:
            errs.append(dref.rel_err(dref.pack_state(config, cn3, B), cn_arr))
        assert max(errs) <= TOL, (name, "torch", errs)
        checks.append("torch")
        worst = max(worst, max(errs))
    if zero_pattern_check(config, y, lens, seed, step, rows):
        checks.append("zeros")
    if name == "lstm_all_filter_none":
        alt = copy.deepcopy(config)
        alt["layers"][0]["wrappers"][0]["state_keep"] = 1.0
        ya, hna, cna = dref.stack_forward(alt, sd, x, lens, h0, c0_arg, seed=seed, step=step, row_ids=rows)
        assert np.array_equal(ya, y) and all(np.array_equal(a, b) for a, b in zip(hna, hn)) and \
            all(np.array_equal(a, b) for a, b in zip(cna, cn))
        checks.append("none=keep1")
    # bidirectional layers: the two directions' masks of a site differ (the direction bit)
    by_site = {}
    for (l, d, depth, kind, var, tp, row, _keep, bits) in ms.log:
        by_site.setdefault((l, depth, kind, var, tp, row), {})[d] = bits
    pairs = [v for v in by_site.values() if len(v) == 2]
    if pairs:
        assert any(v[0] != v[1] for v in pairs), (name, "forward and reverse masks identical")
        checks.append("dirs")
    # row ids: they matter unless every mask is a TF-style shared variational one (row 0)
    if rows is not None:
        yn, _, _ = dref.stack_forward(config, sd, x, lens, h0, c0_arg, seed=seed, step=step, row_ids=None)
        if rows_matter(config):
            assert dref.rel_err(yn, y) > 1e-3, (name, "row ids had no visible effect")
            checks.append("!ids")
        else:
            assert np.array_equal(yn, y), (name, "shared variational masks depend on the row ids")
            checks.append("ids=none")
    # dropout must have changed something compared with the inference run
    yi, hni, _ = dref.stack_forward(config, sd, x, lens, h0, c0_arg, seed=seed, step=step, row_ids=rows,
                                    training=False)
    assert dref.rel_err(yi, y) > 1e-3, (name, "dropout had no visible effect")
    checks.append("!infer")

    tensors = dict(sd)
    tensors["input"] = x
    if lens is not None:
        tensors["seq_lengths"] = np.asarray(lens, np.int32)
    if rows is not None:
        assert len(set(rows)) == len(rows)
        tensors["row_ids"] = np.asarray(rows, np.int32)
    if has_init:
        tensors["h0"] = h0
        if lstm:
            tensors["c0"] = c0
    tensors["expected.y"] = np.asarray(y, np.float64)
    tensors["expected.hn"] = hn_arr
    if lstm:
        tensors["expected.cn"] = cn_arr
    cjson = json.dumps(config, separators=(", ", ": "))
    meta = {
        "config": cjson,
        "seed": str(seed),
        "step": str(step),
        "run_mode": "training",
        "has_lengths": "1" if lens is not None else "0",
        "has_row_ids": "1" if rows is not None else "0",
        "has_initial_state": "1" if has_init else "0",
        "batch_first": "0",
        "format": "pytorch",
        "prefix": "rnn.",
        "state_layout": "uniform" if dref.uniform_hidden(config) else "flat",
        "seq_len": str(T),
        "batch": str(B),
        "input_size": str(config["input_size"]),
        "case": name,
        "source": "torch %s nn.LSTMCell/GRUCell/RNNCell float64 loop (tests/golden/dropout_reference.py)"
                  % torch.__version__,
    }
    os.makedirs(OUTDIR, exist_ok=True)
    path = os.path.join(OUTDIR, name + ".safetensors")
    nbytes = safetensors_io.save_file(tensors, path, meta)
    back, bmeta = safetensors_io.load_file(path)
    assert bmeta == meta and set(back) == set(tensors)
    for kname, v in tensors.items():
        assert back[kname].dtype.itemsize == np.asarray(v).dtype.itemsize and np.array_equal(back[kname], v), kname
    assert json.loads(bmeta["config"]) == config
    if name in CLI_JSON:
        jpath = os.path.join(OUTDIR, name + ".json")
        with open(jpath, "w") as f:
            f.write(cjson + "\n")
        nbytes += os.path.getsize(jpath)
    return dict(name=name, layers=" | ".join(layer_summary(ly) for ly in config["layers"]),
                p=float(config.get("dropout", 0.0)), T=T, B=B, I=config["input_size"], lens=lens, rows=rows is not None,
                h0=has_init, checks="+".join(checks), err=worst, bytes=nbytes, maxy=float(np.max(np.abs(y))))


def main():
    if not masks.check_known_answers():
        return 1
    print("masks.py: Philox known answers OK")
    dref.self_check()
    names = [c[0] for c in CASES]
    assert len(set(names)) == len(names)
    rows = [generate(i, c) for i, c in enumerate(CASES)]
    total = sum(r["bytes"] for r in rows)
    hdr = "%-30s %-4s %2s %2s %2s %-17s %3s %2s %-36s %7s %8s" % (
        "case", "p", "I", "T", "B", "lengths", "ids", "h0", "checks", "maxerr", "bytes")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print("%-30s %-4g %2d %2d %2d %-17s %3d %2d %-36s %7.1e %8d" % (
            r["name"], r["p"], r["I"], r["T"], r["B"], "-" if r["lens"] is None else str(r["lens"]), r["rows"],
            r["h0"], r["checks"], r["err"], r["bytes"]))
        print("    " + r["layers"])
    print("-" * len(hdr))
    print("%d cases, %d bytes (%.3f MB) in %s (incl. %d .json)" % (
        len(rows), total, total / 1e6, os.path.relpath(OUTDIR), len(CLI_JSON)))
    assert total < 1_500_000
    return 0


if __name__ == "__main__":
    sys.exit(main())

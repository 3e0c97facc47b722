#!/usr/bin/python3
"""Generate golden GRADIENTS for rnncore's backward pass: tests/golden/grad/<case>.safetensors

Run from anywhere with Debian's python (torch 1.13 CPU, numpy 1.24):
    /usr/bin/python3 tests/golden/make_grad_golden.py [--out DIR]

Deterministic: re-running reproduces byte-identical files (fixed seeds, one
thread, float64 CPU autograd, deterministic safetensors writer).

Every file holds one forward problem (weights, input, lengths, row ids,
initial states as float32, exactly as the forward goldens store them), the
incoming gradients dy, dhn, dcn (float32, N(0, 1)) of the scalar loss
    loss = sum(y * dy) + sum(hn * dhn) + sum(cn * dcn)      (cn: LSTM layers)
and the expected outputs and gradients, computed in float64 by autograd from
the exact float32 values:
    expected.y / hn / cn, expected.dx, expected.dh0, expected.dc0, grad.rnn.<weight>.
The gradients w.r.t. the initial state exist also when the file has no h0 (the
initial state is then zero).

Two references, chosen per case:
  * "nn": torch.nn.LSTM / GRU / RNN (float64), run PER ROW on x[:len_b, b]
    with its own initial state (len 0: the initial state is the final state,
    y is 0) -- PyTorch's packed-sequence semantics, also for len 0 -- for
    uniform stacks without effective dropout or residuals (no-dropout
    training runs, and the inference case);
  * "loop": dropout_reference.stack_forward(autograd=True), the float64 loop
    over torch.nn.LSTMCell / GRUCell / RNNCell (and a reset-before GRU) with
    masks from masks.py, used by make_dropout_golden.py, for everything else.
Checks, all asserted (see the summary table):
  * batched / packed: for "nn" cases, one batched module call (no lengths) or
    pack_padded_sequence(enforce_sorted=False) over the rows with len > 0
    gives the same outputs and gradients, rel <= 1e-12;
  * loop: for "nn" cases, the stack_forward loop through autograd agrees with
    torch.nn, rel <= 1e-12 (every output and gradient);
  * numpy+fd: the numpy forward of make_dropout_golden.py (an independent
    implementation, vectorised over the batch) agrees with the stored forward
    outputs (rel <= 1e-12), and central finite differences of its loss in
    float64 (step 1e-6) agree with the autograd gradients, max error <= 1e-6
    relative to the largest magnitude of each gradient tensor: every element
    of small tensors, a fixed random subset (plus the largest element) of the
    others;
  * =dropout: cases that mirror tests/golden/dropout/<case> use the same
    weights, input, states, seed and step, and their forward outputs equal
    that file's bit for bit;
  * !infer: training runs with dropout: the gradients differ (> 1e-3) from
    those of the inference run; every mask site in use both keeps and drops;
  * y and dx are exactly 0 at t >= len; rows with len 0 have dh0 = dhn and
    dc0 = dcn exactly; the files read back equal to what was written.
"""

import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dropout_reference as dref  # noqa: E402
import make_dropout_golden as mdg  # noqa: E402
import masks  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 20250214
TOL = 1e-12
FD_TOL = 1e-6
FD_EPS = 1e-6
FD_ALL = 24     # tensors with at most this many elements are checked element by element
FD_SAMPLE = 16  # otherwise this many random elements plus the largest
DT = torch.float64
P32 = 1 << 32

L, DW, RW, cfg = mdg.L, mdg.DW, mdg.RW, mdg.cfg


def uni(mode, I, H, nl, bi=False, gru=None):
    return cfg(I, [L(mode, H, bi=bi, gru=gru) for _ in range(nl)])


# ----------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------
# mirror: take config, T, B, lengths, row ids, seed, step and the data draws of dropout/<mirror>
def C(name, config, T, B, lens=None, rows=None, init=False, bf=False, bias=True, dhn=True, training=True,
      seed=0, step=0, what="", mirror=None):
    return dict(name=name, config=config, T=T, B=B, lens=lens, rows=rows, init=init, bf=bf, bias=bias, dhn=dhn,
                training=training, seed=seed, step=step, what=what, mirror=mirror)


CASES = [
    # --- uniform stacks, torch.nn reference ---------------------------------------------------
    C("lstm_l1_uni_I3_H5", uni("lstm", 3, 5, 1), 4, 3, what="LSTM basic: full lengths, zero initial state"),
    C("lstm_l2_bi_len_I5_H3_h0", uni("lstm", 5, 3, 2, bi=True), 6, 4, lens=[3, 0, 6, 1], init=True,
      what="bi LSTM x2, unsorted lengths with 0 and T, h0/c0"),
    C("lstm_l3_uni_len_I2_H4_bf_nobias_nodhn", uni("lstm", 2, 4, 3), 5, 3, lens=[5, 2, 0], bf=True, bias=False,
      dhn=False, what="LSTM x3, batch-first, bias=False, no dhn/dcn (only dy)"),
    C("lstm_l1_bi_I9_H17_bf_h0", uni("lstm", 9, 17, 1, bi=True), 3, 2, init=True, bf=True,
      what="bi LSTM H=17, batch-first, h0/c0"),
    C("lstm_l2_uni_len_I1_H1_h0", uni("lstm", 1, 1, 2), 6, 4, lens=[1, 6, 0, 3], init=True,
      what="LSTM I=H=1, lengths with 0, h0/c0"),
    C("gru_l1_uni_I4_H7_h0", uni("gru", 4, 7, 1), 5, 2, init=True, what="GRU reset-after, h0"),
    C("gru_l2_bi_len_I3_H5", uni("gru", 3, 5, 2, bi=True), 6, 4, lens=[6, 2, 0, 4],
      what="bi GRU x2, lengths with 0 and T"),
    C("gru_l3_uni_len_I17_H3_bf_h0", uni("gru", 17, 3, 3), 4, 3, lens=[1, 4, 3], init=True, bf=True,
      what="GRU x3 I=17, batch-first, lengths, h0"),
    C("gru_l1_bi_I1_H2_nobias_nodhn", uni("gru", 1, 2, 1, bi=True), 3, 3, bias=False, dhn=False,
      what="bi GRU I=1 H=2, bias=False, no dhn"),
    C("rnn_tanh_l1_uni_len_I5_H4_h0", uni("rnn_tanh", 5, 4, 1), 6, 4, lens=[0, 6, 3, 5], init=True,
      what="RNN tanh, lengths with 0 and T, h0"),
    C("rnn_tanh_l3_bi_len_I2_H3_bf_h0", uni("rnn_tanh", 2, 3, 3, bi=True), 5, 3, lens=[2, 5, 0], init=True,
      bf=True, what="bi RNN tanh x3, batch-first, lengths with 0, h0"),
    C("rnn_relu_l1_bi_len_I6_H5_h0", uni("rnn_relu", 6, 5, 1, bi=True), 5, 4, lens=[4, 5, 0, 2], init=True,
      what="bi RNN relu, lengths with 0, h0"),
    C("rnn_relu_l3_uni_I4_H6_bf_nodhn", uni("rnn_relu", 4, 6, 3), 6, 2, bf=True, dhn=False,
      what="RNN relu x3, batch-first, no dhn"),
    # --- reset-before GRU (no torch module): loop reference ---------------------------------
    C("gru_rb_l1_uni_len_I4_H5_h0", uni("gru", 4, 5, 1, gru="reset-before"), 5, 3, lens=[5, 0, 2], init=True,
      what="GRU reset-before, lengths with 0, h0"),
    C("gru_rb_l2_bi_I3_H3_bf", uni("gru", 3, 3, 2, bi=True, gru="reset-before"), 4, 2, bf=True,
      what="bi GRU reset-before x2, batch-first"),
    # --- inter-layer dropout, training --------------------------------------------------------
    C("lstm_l3_uni_p0.4_len_h0", cfg(4, [L("lstm", 4) for _ in range(3)], dropout=0.4), 5, 3, lens=[5, 0, 3],
      init=True, seed=P32 + 5, step=3, what="LSTM x3, inter-layer p=0.4, lengths with 0, h0/c0"),
    C("lstm_l2_bi_p0.3_ids", cfg(3, [L("lstm", 3, bi=True) for _ in range(2)], dropout=0.3), 4, 3,
      rows=[7, 300, 42], seed=91, step=P32 + 4, what="bi LSTM x2, inter-layer p=0.3 (D*H wide), row ids"),
    C("gru_l2_bi_p0.5_len_h0", cfg(5, [L("gru", 4, bi=True) for _ in range(2)], dropout=0.5), 6, 4,
      lens=[6, 1, 0, 4], init=True, seed=(1 << 36) + 17, step=12, what="bi GRU x2, inter-layer p=0.5, lengths, h0"),
    C("rnn_tanh_l2_uni_p0.3_h0", cfg(3, [L("rnn_tanh", 6) for _ in range(2)], dropout=0.3), 5, 2, init=True,
      seed=2024, step=1, what="RNN tanh x2, inter-layer p=0.3, h0"),
    C("rnn_relu_l2_bi_p0.35_len", cfg(2, [L("rnn_relu", 5, bi=True) for _ in range(2)], dropout=0.35), 4, 4,
      lens=[4, 0, 2, 3], dhn=False, seed=0xFFFFFFFFFFFF, step=9,
      what="bi RNN relu x2, inter-layer p=0.35, lengths with 0, no dhn"),
    # --- wrappers -------------------------------------------------------------------------------
    C("residual_lstm_gru_l2", cfg(5, [L("lstm", 5, wrappers=[RW]), L("gru", 5, wrappers=[RW])]), 5, 3,
      lens=[5, 3, 0], init=True, what="ResidualWrapper (add) alone on LSTM then GRU layers, no dropout; h0/c0"),
    C("infer_lstm_bi_l2_dropout_cfg",
      cfg(4, [L("lstm", 4, bi=True, wrappers=[DW(0.7, 0.8, 0.6, state_filter="h_and_c")]),
              L("lstm", 4, bi=True, wrappers=[DW(0.5, 1.0, 1.0, variational=True)])], dropout=0.5),
      4, 3, lens=[2, 4, 0], init=True, training=False, seed=5, step=6,
      what="INFERENCE run of a stack with dropout wrappers and p=0.5: no mask applies (= nn.LSTM)"),
] + [
    # --- mirrors of tests/golden/dropout/<case> (same weights, input, states, seed, step) ----
    C(n, None, 0, 0, mirror=n) for n in (
        "lstm_input_nonvar", "lstm_output_var_shared", "lstm_state_default_perseq", "lstm_state_h_and_c_nonvar",
        "lstm_state_c_only_var_shared", "lstm_two_dropouts_runseed", "gru_all_perseq",
        "gru_rb_l2_nonvar_interlayer", "rnn_tanh_drop_of_res", "rnn_relu_res_of_drop", "gru_drop_res_drop_seeds",
        "gnmt_l3_interlayer", "mixed_odd_widths", "rnn_tanh_bi_var_shared")
]


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------

def has_lstm(config):
    return any(layer["mode"] == "lstm" for layer in config["layers"])


def is_uniform(config):
    """Same mode, GRU variant, H and direction in every layer and no wrappers:
    expressible as one torch.nn.LSTM/GRU/RNN-like module (num_layers = L)."""
    ls = config["layers"]
    keys = {(ly["mode"], dref.gru_variant(ly) if ly["mode"] == "gru" else "", int(ly["hidden_size"]),
             dref.num_dirs(ly)) for ly in ls}
    return len(keys) == 1 and not any(ly.get("wrappers") for ly in ls)


def dropout_effective(config, training):
    if not training:
        return False
    if float(config.get("dropout", 0.0)) > 0.0 and len(config["layers"]) > 1:
        return True
    for ly in config["layers"]:
        for w in ly.get("wrappers", []):
            if w["type"] == "dropout" and any(float(w.get(k, 1.0)) < 1.0
                                              for k in ("input_keep", "output_keep", "state_keep")):
                return True
    return False


def nn_equivalent(config, training):
    """torch.nn reference applies: uniform layers (wrappers allowed only when they
    cannot act), reset-after GRU, no residual, no dropout in effect."""
    ls = config["layers"]
    keys = {(ly["mode"], dref.gru_variant(ly) if ly["mode"] == "gru" else "", int(ly["hidden_size"]),
             dref.num_dirs(ly)) for ly in ls}
    if len(keys) != 1 or next(iter(keys))[1] == "reset-before":
        return False
    if any(w["type"] == "residual" for ly in ls for w in ly.get("wrappers", [])):
        return False
    return not dropout_effective(config, training)


def inference_config(config):
    """The same stack with every dropout switched off (what an inference run computes)."""
    c = copy.deepcopy(config)
    c["dropout"] = 0.0
    for ly in c["layers"]:
        for w in ly.get("wrappers", []):
            if w["type"] == "dropout":
                for k in ("input_keep", "output_keep", "state_keep"):
                    w[k] = 1.0
    return c


def make_weights(config, rng, bias):
    sizes = dref.layer_input_sizes(config)
    sd = {}
    for l, layer in enumerate(config["layers"]):
        G, H = dref.GATES[layer["mode"]], int(layer["hidden_size"])
        k = 1.0 / np.sqrt(H)
        for d in range(dref.num_dirs(layer)):
            sfx = "_l%d%s" % (l, "_reverse" if d else "")
            sd["rnn.weight_ih" + sfx] = rng.uniform(-k, k, (G * H, sizes[l])).astype(np.float32)
            sd["rnn.weight_hh" + sfx] = rng.uniform(-k, k, (G * H, H)).astype(np.float32)
            if bias:
                sd["rnn.bias_ih" + sfx] = rng.uniform(-k, k, (G * H,)).astype(np.float32)
                sd["rnn.bias_hh" + sfx] = rng.uniform(-k, k, (G * H,)).astype(np.float32)
    return sd


def state_zeros(config, B):
    return dref.pack_state(config, [np.zeros((B, h)) for (_, _, h) in dref.state_blocks(config)], B)


def torch_blocks(config, leaf, B):
    """Views of a state leaf tensor (either pack_state form) as [B, H_l] blocks."""
    flat = leaf.reshape(-1)
    out, off = [], 0
    for (_, _, h) in dref.state_blocks(config):
        out.append(flat[off:off + B * h].reshape(B, h))
        off += B * h
    return out


def torch_pack(config, blocks):
    if dref.uniform_hidden(config):
        return torch.stack(blocks, 0)
    return torch.cat([b.reshape(-1) for b in blocks])


def rel(a, b):
    return dref.rel_err(a, b)


def max_rel(d1, d2, keys):
    return max(rel(d1[k], d2[k]) for k in keys)


# ----------------------------------------------------------------------------
# reference 1: torch.nn modules, per row
# ----------------------------------------------------------------------------

def nn_module(config, bias, bf):
    ly = config["layers"][0]
    mode, H = ly["mode"], int(ly["hidden_size"])
    kw = dict(input_size=int(config["input_size"]), hidden_size=H, num_layers=len(config["layers"]),
              bias=bias, batch_first=bf, bidirectional=dref.num_dirs(ly) == 2, dtype=DT)
    if mode == "lstm":
        return torch.nn.LSTM(**kw)
    if mode == "gru":
        return torch.nn.GRU(**kw)
    return torch.nn.RNN(nonlinearity=mode[4:], **kw)


def nn_load(mod, sd):
    with torch.no_grad():
        for name, p in mod.named_parameters():
            p.copy_(torch.from_numpy(sd["rnn." + name].astype(np.float64)))
    assert {"rnn." + n for n, _ in mod.named_parameters()} == set(sd)


def nn_call(mod, lstm, x, h, c):
    if lstm:
        y, (hn, cn) = mod(x, (h, c))
        return y, hn, cn
    y, hn = mod(x, h)
    return y, hn, None


def nn_grads(p, variant="per_row"):
    """Outputs and gradients from torch.nn.  variant: per_row (the reference),
    batched (one call, no lengths), packed (pack_padded_sequence over the rows
    with len > 0; returns only those rows)."""
    config, bf, B, T = p["config"], p["bf"], p["B"], p["T"]
    lstm = config["layers"][0]["mode"] == "lstm"
    mod = nn_module(config, p["bias"], bf)
    nn_load(mod, p["sd"])
    x = torch.tensor(p["x"].astype(np.float64), requires_grad=True)
    h0 = torch.tensor(p["h0"].astype(np.float64), requires_grad=True)
    c0 = torch.tensor(p["c0"].astype(np.float64), requires_grad=True)
    lens = p["lens_arr"]
    dy, dhn, dcn = (torch.from_numpy(p[k].astype(np.float64)) for k in ("dy", "dhn", "dcn"))
    rows = list(range(B))
    if variant == "batched":
        y, hn, cn = nn_call(mod, lstm, x, h0, c0)
    elif variant == "packed":
        rows = [b for b in range(B) if lens[b] > 0]
        ri = torch.tensor(rows)
        xs = x[ri] if bf else x[:, ri]
        packed = torch.nn.utils.rnn.pack_padded_sequence(xs, torch.tensor([int(lens[b]) for b in rows]),
                                                         batch_first=bf, enforce_sorted=False)
        yp, hn, cn = nn_call(mod, lstm, packed, h0[:, ri].contiguous(), c0[:, ri].contiguous())
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(yp, batch_first=bf, total_length=T)
        dy = dy[ri] if bf else dy[:, ri]
        dhn, dcn = dhn[:, ri], dcn[:, ri]
    else:
        ys, hs, cs = [], [], []
        for b in range(B):
            n = int(lens[b])
            if n == 0:
                ys.append(torch.zeros((T, dy.shape[2]), dtype=DT))
                hs.append(h0[:, b])
                cs.append(c0[:, b])
                continue
            xb = x[b:b + 1, :n] if bf else x[:n, b:b + 1]
            yb, hb, cb = nn_call(mod, lstm, xb, h0[:, b:b + 1].contiguous(), c0[:, b:b + 1].contiguous())
            yb = yb[0] if bf else yb[:, 0]
            ys.append(torch.cat([yb, torch.zeros((T - n, yb.shape[1]), dtype=DT)], 0))
            hs.append(hb[:, 0])
            cs.append(cb[:, 0] if lstm else c0[:, b] * 0.0)
        y = torch.stack(ys, 0 if bf else 1)
        hn = torch.stack(hs, 1)
        cn = torch.stack(cs, 1) if lstm else None
    loss = (y * dy).sum() + (hn * dhn).sum()
    if lstm:
        loss = loss + (cn * dcn).sum()
    names = [n for n, _ in mod.named_parameters()]
    inputs = [x, h0] + ([c0] if lstm else []) + [prm for _, prm in mod.named_parameters()]
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    grads = [np.zeros(tuple(t.shape)) if g is None else g.detach().numpy().copy() for g, t in zip(grads, inputs)]
    out = {"y": y.detach().numpy().copy(), "hn": hn.detach().numpy().copy(), "dx": grads[0], "dh0": grads[1]}
    if lstm:
        out["cn"] = cn.detach().numpy().copy()
        out["dc0"] = grads[2]
    for n, g in zip(names, grads[2 + lstm:]):
        out["grad.rnn." + n] = g
    if variant == "packed":  # restrict the row-indexed entries to the rows used
        sel = np.array(rows)
        out["dx"] = out["dx"][sel] if bf else out["dx"][:, sel]
        out["dh0"] = out["dh0"][:, sel]
        if lstm:
            out["dc0"] = out["dc0"][:, sel]
    return out


# ----------------------------------------------------------------------------
# reference 2: the stack_forward loop through autograd
# ----------------------------------------------------------------------------

def loop_grads(p, training=None, mask_source=None):
    config, bf, B = p["config"], p["bf"], p["B"]
    training = p["training"] if training is None else training
    lstm = has_lstm(config)
    cells = dref.build_cells(config, p["sd"])
    for row in cells:
        for cell in row:
            cell.enable_grad()
    x = torch.tensor(p["x"].astype(np.float64), requires_grad=True)
    h0 = torch.tensor(p["h0"].astype(np.float64), requires_grad=True)
    c0 = torch.tensor(p["c0"].astype(np.float64), requires_grad=True)
    xt = x.transpose(0, 1) if bf else x
    y, hn, cn = dref.stack_forward(config, None, xt, p["lens"], torch_blocks(config, h0, B),
                                   torch_blocks(config, c0, B), seed=p["seed"], step=p["step"], row_ids=p["rows"],
                                   training=training, mask_source=mask_source, cells=cells, autograd=True)
    if bf:
        y = y.transpose(0, 1)
    hn, cn = torch_pack(config, hn), torch_pack(config, cn)
    dy, dhn, dcn = (torch.from_numpy(p[k].astype(np.float64)) for k in ("dy", "dhn", "dcn"))
    loss = (y * dy).sum() + (hn * dhn).sum()
    if lstm:
        loss = loss + (cn * dcn).sum()
    names, prms = [], []
    for l, row in enumerate(cells):
        for d, cell in enumerate(row):
            for n, t in cell.parameters().items():
                names.append("grad.rnn.%s_l%d%s" % (n, l, "_reverse" if d else ""))
                prms.append(t)
    inputs = [x, h0] + ([c0] if lstm else []) + prms
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    grads = [np.zeros(tuple(t.shape)) if g is None else g.detach().numpy().copy() for g, t in zip(grads, inputs)]
    out = {"y": y.detach().numpy().copy(), "hn": hn.detach().numpy().copy(), "dx": grads[0], "dh0": grads[1]}
    if lstm:
        out["cn"] = cn.detach().numpy().copy()
        out["dc0"] = grads[2]
    for n, g in zip(names, grads[2 + lstm:]):
        out[n] = g
    return out


# ----------------------------------------------------------------------------
# check: numpy forward (make_dropout_golden.numpy_forward) and finite differences
# ----------------------------------------------------------------------------

_mask_cache = {}
_mask_full_uncached = mdg.mask_full


def _mask_full_cached(seed, step, l, d, depth, kind, variational, per_sequence, T, B, width, keep, rows):
    key = (seed, step, l, d, depth, kind, variational, per_sequence, T, B, width, keep, tuple(rows))
    m = _mask_cache.get(key)
    if m is None:
        m = _mask_full_uncached(seed, step, l, d, depth, kind, variational, per_sequence, T, B, width, keep, rows)
        _mask_cache[key] = m
    return m


mdg.mask_full = _mask_full_cached  # numpy_forward / wrapper_masks look it up in their module


def numpy_loss_fn(p):
    """Returns f(values) -> (loss, y, hn, cn) on the numpy implementation; values:
    dict of float64 arrays 'input', 'h0', 'c0' (file layouts) and 'rnn.*'."""
    config = p["config"] if p["training"] else inference_config(p["config"])
    lstm = has_lstm(config)
    bf, B = p["bf"], p["B"]
    dy, dhn, dcn = (p[k].astype(np.float64) for k in ("dy", "dhn", "dcn"))
    zero_bias = {}
    if not p["bias"]:  # numpy_forward wants biases: zeros (not perturbed)
        for k, v in p["sd"].items():
            zero_bias[k.replace("weight_", "bias_")] = np.zeros(v.shape[0])

    def f(vals):
        sd = dict(zero_bias)
        sd.update({k: v for k, v in vals.items() if k.startswith("rnn.")})
        x = vals["input"].transpose(1, 0, 2) if bf else vals["input"]
        y, hn, cn = mdg.numpy_forward(config, sd, x, p["lens"], vals["h0"], vals["c0"] if lstm else None,
                                      p["seed"], p["step"], p["rows"])
        if bf:
            y = y.transpose(1, 0, 2)
        hn, cn = dref.pack_state(config, hn, B), dref.pack_state(config, cn, B)
        loss = float(np.sum(y * dy) + np.sum(hn * dhn) + (np.sum(cn * dcn) if lstm else 0.0))
        return loss, y, hn, cn
    return f


def fd_check(p, ref, case_index):
    """Central differences of the numpy loss against the autograd gradients."""
    lstm = has_lstm(p["config"])
    f = numpy_loss_fn(p)
    vals = {"input": p["x"].astype(np.float64), "h0": p["h0"].astype(np.float64), "c0": p["c0"].astype(np.float64)}
    vals.update({k: v.astype(np.float64) for k, v in p["sd"].items()})
    loss0, y, hn, cn = f(vals)
    ferr = max(rel(y, ref["y"]), rel(hn, ref["hn"]), rel(cn, ref["cn"]) if lstm else 0.0)
    assert ferr <= TOL, (p["name"], "numpy forward", ferr)
    gmap = {"input": "dx", "h0": "dh0", "c0": "dc0"}
    rng = np.random.default_rng([SEED, 1000 + case_index])
    worst, count = 0.0, 0
    for name in sorted(vals):
        if name == "c0" and not lstm:
            continue
        g = ref[gmap.get(name, "grad." + name)]
        v = vals[name]
        assert g.shape == v.shape, (name, g.shape, v.shape)
        n = v.size
        if n <= FD_ALL:
            idx = list(range(n))
        else:
            idx = sorted(set(int(i) for i in rng.choice(n, FD_SAMPLE, replace=False)) | {int(np.argmax(np.abs(g)))})
        scale = max(float(np.max(np.abs(g))), 1e-30)
        flat = v.reshape(-1)
        for i in idx:
            old = flat[i]
            flat[i] = old + FD_EPS
            lp = f(vals)[0]
            flat[i] = old - FD_EPS
            lm = f(vals)[0]
            flat[i] = old
            fd = (lp - lm) / (2 * FD_EPS)
            e = abs(fd - g.reshape(-1)[i]) / scale
            worst = max(worst, e)
            count += 1
            assert e <= FD_TOL, (p["name"], "finite differences", name, i, fd, g.reshape(-1)[i], e)
    return worst, count, ferr


# ----------------------------------------------------------------------------
# one case
# ----------------------------------------------------------------------------

def build_problem(index, case):
    """Everything the file stores except the expected values."""
    p = dict(case)
    if case["mirror"] is not None:
        mi = [c[0] for c in mdg.CASES].index(case["mirror"])
        (_n, config, T, B, lens, rows, has_init, seed, step, what) = mdg.CASES[mi]
        rng = np.random.default_rng([mdg.SEED, mi])  # exactly make_dropout_golden's draws
        sd = mdg.make_weights(config, rng)
        x = rng.standard_normal((T, B, int(config["input_size"]))).astype(np.float32)
        h0 = c0 = None
        if has_init:
            h0, c0 = mdg.make_states(config, B, rng)
        p.update(config=config, T=T, B=B, lens=lens, rows=rows, init=has_init, seed=seed, step=step,
                 what="= dropout/%s: %s" % (case["mirror"], what))
        rng = np.random.default_rng([SEED, index])
    else:
        config, T, B = case["config"], case["T"], case["B"]
        rng = np.random.default_rng([SEED, index])
        sd = make_weights(config, rng, case["bias"])
        I = int(config["input_size"])
        x = rng.standard_normal((B, T, I) if case["bf"] else (T, B, I)).astype(np.float32)
        h0 = c0 = None
        if case["init"]:
            h0, c0 = mdg.make_states(config, B, rng)
    dref.validate(config)
    p["sd"], p["x"] = sd, x
    p["stored_h0"] = h0
    p["stored_c0"] = c0 if (h0 is not None and has_lstm(config)) else None
    zeros = state_zeros(config, B).astype(np.float32)
    p["h0"] = zeros if h0 is None else h0
    p["c0"] = zeros if (h0 is None or not has_lstm(config)) else c0
    T, B = p["T"], p["B"]
    p["lens_arr"] = np.full(B, T) if p["lens"] is None else np.asarray(p["lens"])
    # incoming gradients
    D_last, H_last = dref.num_dirs(config["layers"][-1]), int(config["layers"][-1]["hidden_size"])
    yshape = (B, T, D_last * H_last) if p["bf"] else (T, B, D_last * H_last)
    p["dy"] = rng.standard_normal(yshape).astype(np.float32)
    if p["dhn"]:
        blocks = dref.state_blocks(config)
        p["dhn"] = dref.pack_state(config, [rng.standard_normal((B, h)) for (_, _, h) in blocks], B).astype(np.float32)
        p["dcn"] = dref.pack_state(config, [rng.standard_normal((B, h)) if config["layers"][l]["mode"] == "lstm"
                                            else np.zeros((B, h)) for (l, _, h) in blocks], B).astype(np.float32)
        p["has_dhn"] = True
    else:
        p["dhn"] = zeros
        p["dcn"] = zeros
        p["has_dhn"] = False
    return p


def generate(index, case, outdir):
    p = build_problem(index, case)
    config, T, B, bf, lens = p["config"], p["T"], p["B"], p["bf"], p["lens_arr"]
    lstm = has_lstm(config)
    keys = ["y", "hn", "dx", "dh0"] + (["cn", "dc0"] if lstm else [])
    checks, worst = [], 0.0

    use_nn = nn_equivalent(config, p["training"]) and p["rows"] is None
    ms = dref.MaskSource(p["seed"], p["step"])
    lp = loop_grads(p, mask_source=ms)
    if use_nn:
        ref = nn_grads(p)
        gkeys = keys + [k for k in ref if k.startswith("grad.")]
        assert set(ref) == set(lp) == set(gkeys), (sorted(ref), sorted(lp))
        # one batched call / the packed path
        if p["lens"] is None:
            e = max_rel(nn_grads(p, "batched"), ref, gkeys)
            assert e <= TOL, (p["name"], "batched", e)
            checks.append("batched")
        elif (lens > 0).any():
            pk = nn_grads(p, "packed")
            sel = np.nonzero(lens > 0)[0]
            sub = dict(ref)
            for k in ("y", "dx"):
                sub[k] = ref[k][sel] if bf else ref[k][:, sel]
            for k in ("hn", "cn", "dh0", "dc0"):
                if k in sub:
                    sub[k] = ref[k][:, sel]
            e = max_rel(pk, sub, gkeys)
            assert e <= TOL, (p["name"], "packed", e)
            checks.append("packed" if len(sel) == B else "packed(len>0)")
            worst = max(worst, e)
        e = max_rel(lp, ref, gkeys)
        assert e <= TOL, (p["name"], "loop vs nn", e)
        checks.append("loop")
        worst = max(worst, e)
    else:
        ref = lp
        gkeys = keys + [k for k in ref if k.startswith("grad.")]
    assert set(k[len("grad."):] for k in gkeys if k.startswith("grad.")) == set(p["sd"])

    # the autograd loop's forward equals the plain stack_forward (numpy mode) bit for bit
    y0, hn0, cn0 = dref.stack_forward(config, p["sd"], p["x"].transpose(1, 0, 2) if bf else p["x"], p["lens"],
                                      p["stored_h0"], p["stored_c0"], seed=p["seed"], step=p["step"],
                                      row_ids=p["rows"], training=p["training"])
    if bf:
        y0 = y0.transpose(1, 0, 2)
    assert np.array_equal(y0, lp["y"]) and np.array_equal(dref.pack_state(config, hn0, B), lp["hn"]), p["name"]
    if lstm:
        assert np.array_equal(dref.pack_state(config, cn0, B), lp["cn"]), p["name"]

    # independent numpy forward + finite differences
    fd_worst, fd_count, ferr = fd_check(p, ref, index)
    checks.append("numpy+fd")
    worst = max(worst, ferr)

    # mirror: same forward as the committed dropout golden
    if p["mirror"] is not None:
        dpath = os.path.join(HERE, "dropout", p["mirror"] + ".safetensors")
        dt, dmeta = safetensors_io.load_file(dpath)
        assert np.array_equal(dt["input"], p["x"]) and np.array_equal(dt["expected.y"], ref["y"]) and \
            np.array_equal(dt["expected.hn"], ref["hn"]), p["name"]
        if lstm:
            assert np.array_equal(dt["expected.cn"], ref["cn"])
        assert json.loads(dmeta["config"]) == config and dmeta["seed"] == str(p["seed"])
        checks.append("=dropout")

    # dropout visible in the gradients; every mask site keeps and drops
    if dropout_effective(config, p["training"]):
        inf = loop_grads(p, training=False)
        e = max(rel(inf[k], ref[k]) for k in gkeys if k.startswith("grad."))
        assert e > 1e-3, (p["name"], "dropout had no visible effect on the weight gradients", e)
        checks.append("!infer")
        sites = {}
        for (l, d, depth, kind, var, _tp, _row, _keep, bits) in ms.log:
            s = sites.setdefault((l, d, depth, kind, var), [set(), 0])
            s[0].update(bits)
            s[1] += len(bits)
        weak = [k for k, (v, n) in sites.items() if 0 not in v or (1 not in v and n > 1)]
        assert not weak, (p["name"], "mask sites that never drop or never keep", weak)
    else:
        assert not ms.log, (p["name"], "masks drawn in a run without dropout")
        if not p["training"]:
            checks.append("infer")

    # padding and length-0 rows
    yt = ref["y"].transpose(1, 0, 2) if bf else ref["y"]
    dxt = ref["dx"].transpose(1, 0, 2) if bf else ref["dx"]
    for b in range(B):
        assert np.all(yt[lens[b]:, b] == 0.0) and np.all(dxt[lens[b]:, b] == 0.0), (p["name"], "padding")
        if lens[b] == 0:
            for blk_g, blk_d in zip(dref.unpack_state(config, ref["dh0"], B), dref.unpack_state(config, p["dhn"], B)):
                assert np.array_equal(blk_g[b], blk_d[b].astype(np.float64)), (p["name"], "len 0 dh0")
            if lstm:
                for (l, _, _), g, dd in zip(dref.state_blocks(config), dref.unpack_state(config, ref["dc0"], B),
                                            dref.unpack_state(config, p["dcn"], B)):
                    if config["layers"][l]["mode"] == "lstm":
                        assert np.array_equal(g[b], dd[b].astype(np.float64)), (p["name"], "len 0 dc0")

    # ---- the file ----
    tensors = dict(p["sd"])
    tensors["input"] = p["x"]
    if p["lens"] is not None:
        tensors["seq_lengths"] = np.asarray(p["lens"], np.int32)
    if p["rows"] is not None:
        assert len(set(p["rows"])) == len(p["rows"])
        tensors["row_ids"] = np.asarray(p["rows"], np.int32)
    if p["stored_h0"] is not None:
        tensors["h0"] = p["stored_h0"]
        if p["stored_c0"] is not None:
            tensors["c0"] = p["stored_c0"]
    tensors["expected.y"] = ref["y"]
    tensors["expected.hn"] = ref["hn"]
    if lstm:
        tensors["expected.cn"] = ref["cn"]
    tensors["dy"] = p["dy"]
    if p["has_dhn"]:
        tensors["dhn"] = p["dhn"]
        if lstm:
            tensors["dcn"] = p["dcn"]
    tensors["expected.dx"] = ref["dx"]
    tensors["expected.dh0"] = ref["dh0"]
    if lstm:
        tensors["expected.dc0"] = ref["dc0"]
    for k in gkeys:
        if k.startswith("grad."):
            tensors[k] = ref[k]
    for k, v in tensors.items():
        if k.startswith(("expected.", "grad.")):
            assert v.dtype == np.float64, k
        elif k in ("seq_lengths", "row_ids"):
            assert v.dtype == np.int32, k
        else:
            assert v.dtype == np.float32, k
    for k in p["sd"]:
        assert tensors["grad." + k].shape == tensors[k].shape, k

    ly0 = config["layers"][0]
    modes = sorted({ly["mode"] for ly in config["layers"]})
    if use_nn:
        cls = {"lstm": "nn.LSTM", "gru": "nn.GRU", "rnn_tanh": "nn.RNN(tanh)", "rnn_relu": "nn.RNN(relu)"}[ly0["mode"]]
        source = "torch %s %s float64 autograd, per row" % (torch.__version__, cls)
    else:
        source = ("torch %s nn.LSTMCell/GRUCell/RNNCell float64 loop (tests/golden/dropout_reference.py), autograd"
                  % torch.__version__)
    meta = {
        "config": json.dumps(config, separators=(", ", ": ")),
        "run_mode": "training" if p["training"] else "inference",
        "seed": str(p["seed"]),
        "step": str(p["step"]),
        "batch_first": "1" if bf else "0",
        "has_dhn": "1" if p["has_dhn"] else "0",
        "has_lengths": "1" if p["lens"] is not None else "0",
        "has_row_ids": "1" if p["rows"] is not None else "0",
        "has_initial_state": "1" if p["stored_h0"] is not None else "0",
        "bias": "1" if p["bias"] else "0",
        "format": "pytorch",
        "prefix": "rnn.",
        "state_layout": "uniform" if dref.uniform_hidden(config) else "flat",
        "seq_len": str(T),
        "batch": str(B),
        "input_size": str(config["input_size"]),
        "uniform": "1" if is_uniform(config) else "0",
        "loss": "sum(y*dy)+sum(hn*dhn)+sum(cn*dcn)",
        "source": source,
        "case": p["name"],
    }
    if is_uniform(config):
        meta.update(mode=ly0["mode"], hidden_size=str(ly0["hidden_size"]), num_layers=str(len(config["layers"])),
                    bidirectional="1" if dref.num_dirs(ly0) == 2 else "0")
        if ly0["mode"] == "gru":
            meta["gru"] = dref.gru_variant(ly0)
    path = os.path.join(outdir, p["name"] + ".safetensors")
    nbytes = safetensors_io.save_file(tensors, path, meta)
    back, bmeta = safetensors_io.load_file(path)
    assert bmeta == meta and set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and np.array_equal(back[k], v), k
    assert json.loads(bmeta["config"]) == config

    gmax = max(float(np.max(np.abs(ref[k]))) for k in gkeys if k.startswith("grad."))
    return dict(name=p["name"], layers=" | ".join(mdg.layer_summary(ly) for ly in config["layers"]),
                p=float(config.get("dropout", 0.0)), I=int(config["input_size"]), T=T, B=B,
                lens=p["lens"], ids=p["rows"] is not None, h0=p["stored_h0"] is not None, bf=bf,
                bias=p["bias"], dhn=p["has_dhn"], mode="train" if p["training"] else "infer",
                ref="nn" if use_nn else "loop", checks="+".join(checks), err=worst, fd=fd_worst, nfd=fd_count,
                gmax=gmax, bytes=nbytes, what=p["what"], modes=modes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "grad"), help="output directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not masks.check_known_answers():
        return 1
    os.makedirs(args.out, exist_ok=True)
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names)
    rows = [generate(i, c, args.out) for i, c in enumerate(CASES)]

    hdr = "%-38s %-5s %-4s %-4s %2s %2s %2s %-13s %3s %2s %2s %4s %3s %-34s %7s %7s %7s %6s" % (
        "case", "run", "ref", "p", "I", "T", "B", "lengths", "ids", "h0", "bf", "bias", "dhn", "checks",
        "maxerr", "fd_err", "max|dW|", "bytes")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print("%-38s %-5s %-4s %-4g %2d %2d %2d %-13s %3d %2d %2d %4d %3d %-34s %7.1e %7.1e %7.3f %6d" % (
            r["name"], r["mode"], r["ref"], r["p"], r["I"], r["T"], r["B"],
            "-" if r["lens"] is None else ",".join(str(v) for v in r["lens"]), r["ids"], r["h0"], r["bf"],
            r["bias"], r["dhn"], r["checks"], r["err"], r["fd"], r["gmax"], r["bytes"]))
        print("    " + r["layers"])
    print("-" * len(hdr))
    total = sum(r["bytes"] for r in rows)
    print("%d files, %d bytes (%.3f MB) in %s; %d finite-difference comparisons, max err %.1e" % (
        len(rows), total, total / 1e6, os.path.relpath(args.out), sum(r["nfd"] for r in rows),
        max(r["fd"] for r in rows)))
    # coverage
    allmodes = set().union(*(r["modes"] for r in rows))
    assert allmodes == {"lstm", "gru", "rnn_tanh", "rnn_relu"}
    assert any(not r["bias"] for r in rows) and any(not r["dhn"] for r in rows) and any(r["bf"] for r in rows)
    assert any(r["mode"] == "infer" for r in rows)
    assert total < 1_500_000
    return 0


if __name__ == "__main__":
    sys.exit(main())

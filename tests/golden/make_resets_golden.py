#!/usr/bin/env python3
"""Golden data for per-step state resets (ForwardArgs::resets, `--resets`): tests/golden/resets/<case>.safetensors

Run with a PyTorch install (CPU is enough):
    /work/venvs/torch/bin/python tests/golden/make_resets_golden.py [--out DIR]

Deterministic: fixed seeds, float64 autograd, the deterministic writer of safetensors_io.py.

The reference is torch.nn.LSTM / nn.GRU / nn.RNN (float64) run ONE STEP AT A TIME over the whole
batch, the state reset by hand: before step t, where resets[t, b] != 0 and t < len_b, row b's state
of every layer is set to its initial state (h0 / c0, or zeros); at t >= len_b a row's state carries
over and its output is 0 (PyTorch's packed-sequence semantics). The loss is
    sum(y * dy) + sum(hn * dhn) + sum(cn * dcn)
and autograd gives every gradient: the weights (grad.rnn.<name>), dx, dh0 and dc0 (the initial
state receives the gradient of every reset). The files have the layout of tests/golden/grad/ (the
gradient goldens), plus `resets` (int32, laid out like x's first two dimensions).

Checks, asserted: for cases of full lengths, the step loop without resets gives the batched nn
module's outputs and final state (rel <= 1e-12); every case resets some rows after t = 0 and, for
the first such row, running the module from the initial state over the steps after its last reset
gives the same outputs, and the loss of that row from the reset on sends exactly zero gradient to
its inputs before the reset; the files read back equal.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

DT = torch.float64
SEED = 20261128


def module(mode, I, H, L, bias):
    if mode == "lstm":
        return torch.nn.LSTM(I, H, L, bias=bias)
    if mode == "gru":
        return torch.nn.GRU(I, H, L, bias=bias)
    return torch.nn.RNN(I, H, L, nonlinearity="tanh" if mode == "rnn_tanh" else "relu", bias=bias)


def run_loop(rnn, mode, x, lens, resets, h0, c0):
    """x [T, B, I]; resets [T, B] (0/1); returns y [T, B, H], hn, cn (cn None for non-LSTM)."""
    T, B = x.shape[0], x.shape[1]
    h, c = h0, c0
    ys = []
    for t in range(T):
        active = torch.tensor([t < lens[b] for b in range(B)]).view(1, B, 1)
        reset = torch.tensor([bool(resets[t, b]) and t < lens[b] for b in range(B)]).view(1, B, 1)
        h = torch.where(reset, h0, h)
        if c is not None:
            c = torch.where(reset, c0, c)
        if mode == "lstm":
            out, (hn, cn) = rnn(x[t:t + 1], (h, c))
            c = torch.where(active, cn, c)
        else:
            out, hn = rnn(x[t:t + 1], h)
        h = torch.where(active, hn, h)
        ys.append(torch.where(active, out, torch.zeros_like(out)))
    return torch.cat(ys, 0), h, c


def make_case(name, mode, I, H, L, T, B, lens, resets, init, bf, bias, dhn, seed, what, outdir):
    g = torch.Generator().manual_seed(seed)
    rnn = module(mode, I, H, L, bias)
    sd = {}
    for k, v in rnn.state_dict().items():  # float32-representable weights in U(-0.6, 0.6)
        sd[k] = (torch.rand(v.shape, generator=g, dtype=DT) * 1.2 - 0.6).float().double()
    rnn = rnn.double()
    rnn.load_state_dict(sd)
    params = dict(rnn.named_parameters())
    x = torch.randn(T, B, I, generator=g, dtype=DT).float().double().requires_grad_(True)
    lstm = mode == "lstm"
    if init:
        h0 = torch.randn(L, B, H, generator=g, dtype=DT).float().double()
        c0 = torch.randn(L, B, H, generator=g, dtype=DT).float().double() if lstm else None
    else:
        h0 = torch.zeros(L, B, H, dtype=DT)
        c0 = torch.zeros(L, B, H, dtype=DT) if lstm else None
    h0.requires_grad_(True)
    if c0 is not None:
        c0.requires_grad_(True)
    dy = torch.randn(T, B, H, generator=g, dtype=DT).float().double()
    dhn_t = torch.randn(L, B, H, generator=g, dtype=DT).float().double() if dhn else torch.zeros(L, B, H, dtype=DT)
    dcn_t = (torch.randn(L, B, H, generator=g, dtype=DT).float().double() if dhn else torch.zeros(L, B, H, dtype=DT)) \
        if lstm else None
    lens = lens if lens is not None else [T] * B
    R = np.array(resets, dtype=np.int32).reshape(T, B)
    assert R[1:].any(), name + ": some reset after t = 0"

    def loss_of(y, hn, cn):
        s = (y * dy).sum() + (hn * dhn_t).sum()
        return s + (cn * dcn_t).sum() if lstm else s

    y, hn, cn = run_loop(rnn, mode, x, lens, R, h0, c0)
    wrt = [x, h0] + ([c0] if lstm else []) + list(params.values())
    grads = torch.autograd.grad(loss_of(y, hn, cn), wrt, retain_graph=True)
    dx, dh0 = grads[0], grads[1]
    dc0 = grads[2] if lstm else None
    dW = dict(zip(params.keys(), grads[3 if lstm else 2:]))

    # Check: no resets -> the step loop equals one batched call of the module (full lengths only).
    if all(n == T for n in lens):
        y0, hn0, cn0 = run_loop(rnn, mode, x, lens, np.zeros((T, B), np.int32), h0, c0)
        yb, st = rnn(x, (h0, c0) if lstm else h0)
        hb = st[0] if lstm else st
        assert torch.allclose(y0, yb, rtol=1e-12, atol=1e-12) and torch.allclose(hn0, hb, rtol=1e-12, atol=1e-12)
    # Check: the tail after a row's last reset is the module run from the initial state.
    for b in range(B):
        ts = [t for t in range(1, lens[b]) if R[t, b]]
        if not ts:
            continue
        t0 = ts[-1]
        hb0 = h0[:, b:b + 1].contiguous()
        st = (hb0, c0[:, b:b + 1].contiguous()) if lstm else hb0
        yt, _ = rnn(x[t0:lens[b], b:b + 1], st)
        assert torch.allclose(yt, y[t0:lens[b], b:b + 1], rtol=1e-12, atol=1e-12), (name, b)
        # The loss of that row from the reset on (outputs and final state) sends no gradient to
        # its inputs before the reset.
        tail = (y[t0:, b] * dy[t0:, b]).sum() + (hn[:, b] * dhn_t[:, b]).sum()
        if lstm:
            tail = tail + (cn[:, b] * dcn_t[:, b]).sum()
        (gx,) = torch.autograd.grad(tail, [x], retain_graph=True)
        assert torch.count_nonzero(gx[:t0, b]) == 0 and torch.count_nonzero(gx[t0:lens[b], b]) > 0, (name, b)
        break

    bft = (lambda a: np.ascontiguousarray(np.swapaxes(a, 0, 1))) if bf else (lambda a: a)
    f32 = lambda a: np.ascontiguousarray(a.detach().numpy().astype(np.float32))  # noqa: E731
    f64 = lambda a: np.ascontiguousarray(a.detach().numpy().astype(np.float64))  # noqa: E731
    tensors = {"input": bft(f32(x)), "dy": bft(f32(dy)), "resets": bft(R.copy())}
    tensors["resets"] = np.ascontiguousarray(tensors["resets"]).astype(np.int32)
    if init:
        tensors["h0"] = f32(h0)
        if lstm:
            tensors["c0"] = f32(c0)
    if dhn:
        tensors["dhn"] = f32(dhn_t)
        if lstm:
            tensors["dcn"] = f32(dcn_t)
    if any(n != T for n in lens):
        tensors["seq_lengths"] = np.array(lens, dtype=np.int32)
    for k, v in sd.items():
        tensors["rnn." + k] = np.ascontiguousarray(v.numpy().astype(np.float32))
    tensors["expected.y"] = bft(f64(y))
    tensors["expected.hn"] = f64(hn)
    tensors["expected.dx"] = bft(f64(dx))
    tensors["expected.dh0"] = f64(dh0)
    if lstm:
        tensors["expected.cn"] = f64(cn)
        tensors["expected.dc0"] = f64(dc0)
    for k, v in dW.items():
        tensors["grad.rnn." + k] = f64(v)
    config = {"input_size": I, "dropout": 0.0, "layers": [{"mode": mode, "hidden_size": H} for _ in range(L)]}
    meta = {
        "config": json.dumps(config, separators=(", ", ": ")),
        "run_mode": "training", "seed": "0", "step": "0",
        "batch_first": "1" if bf else "0",
        "has_dhn": "1" if dhn else "0",
        "has_lengths": "1" if "seq_lengths" in tensors else "0",
        "has_row_ids": "0",
        "has_initial_state": "1" if init else "0",
        "bias": "1" if bias else "0",
        "format": "pytorch", "prefix": "rnn.", "state_layout": "uniform",
        "seq_len": str(T), "batch": str(B), "input_size": str(I), "uniform": "1",
        "loss": "sum(y*dy)+sum(hn*dhn)+sum(cn*dcn)",
        "source": "torch %s %s float64, a step at a time, state reset by hand, autograd" % (torch.__version__, mode),
        "case": name, "what": what,
    }
    path = os.path.join(outdir, name + ".safetensors")
    safetensors_io.save_file(tensors, path, meta)
    back, bmeta = safetensors_io.load_file(path)
    assert bmeta == meta and set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k
    print("%-34s %-8s I=%d H=%d L=%d T=%d B=%d resets=%d %s" % (name, mode, I, H, L, T, B, int(R.sum()), what))


def pattern(rng, T, B, p):
    r = (rng.random((T, B)) < p).astype(np.int32)
    r[0, :] = rng.integers(0, 2, B)  # a reset at t = 0 changes nothing, but must be accepted
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "resets"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(SEED)
    cases = [
        # name, mode, I, H, L, T, B, lengths, init, batch_first, bias, dhn, what
        ("lstm_l2_I3_H4_len_h0", "lstm", 3, 4, 2, 7, 4, [7, 3, 0, 5], True, False, True, True,
         "LSTM x2, lengths with 0, h0/c0"),
        ("lstm_l1_I5_H6_bf", "lstm", 5, 6, 1, 6, 3, None, False, True, True, True,
         "LSTM, batch-first, zero initial state"),
        ("gru_l2_I4_H5_len_h0", "gru", 4, 5, 2, 8, 3, [8, 5, 2], True, False, True, True,
         "GRU (reset-after) x2, lengths, h0"),
        ("gru_l1_I3_H3_bf_nobias", "gru", 3, 3, 1, 5, 4, None, True, True, False, False,
         "GRU, batch-first, bias=False, no dhn"),
        ("rnn_tanh_l2_I4_H3_h0", "rnn_tanh", 4, 3, 2, 6, 3, None, True, False, True, True,
         "RNN tanh x2, h0"),
        ("rnn_relu_l1_I2_H5_len", "rnn_relu", 2, 5, 1, 7, 4, [7, 1, 4, 6], False, False, True, True,
         "RNN relu, lengths"),
        ("lstm_l3_I2_H3_all_reset", "lstm", 2, 3, 3, 5, 2, None, True, False, True, True,
         "LSTM x3, every row reset at every step"),
    ]
    for i, (name, mode, I, H, L, T, B, lens, init, bf, bias, dhn, what) in enumerate(cases):
        R = np.ones((T, B), np.int32) if "all_reset" in name else pattern(rng, T, B, 0.3)
        if not R[1:].any():
            R[T // 2, 0] = 1
        make_case(name, mode, I, H, L, T, B, lens, R, init, bf, bias, dhn, SEED + i, what, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Generate PyTorch golden data for LSTM projections: tests/golden/pytorch_proj/<case>.safetensors

    /usr/bin/python3 tests/golden/make_pytorch_proj_golden.py

nn.LSTM(proj_size=P) (PyTorch docs): h_t = W_hr (o_t * tanh(c_t)), weight_hr_l{k}[_reverse] [P, H],
weight_hh_l{k} [4H, P], h_0 / h_n [L*D, B, P], c_0 / c_n [L*D, B, H], output [T, B, D*P], layer k > 0
reads D*P features. The file layout is make_pytorch_golden.py's (tensors 'rnn.*', input, h0, c0,
seq_lengths, expected.y / hn / cn in float64; metadata as there plus 'proj_size'). Parameters and
inputs are float32 values; expected outputs come from the float64 module, one row at a time (row b
alone on x[:len_b, b]; a row of length 0 keeps its initial state and outputs zeros), and are checked
against a batched call (no lengths) and against an independent numpy implementation to 1e-12.
Deterministic: fixed seeds, so re-running reproduces byte-identical files.
"""

import copy
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import rnn_reference as ref  # noqa: E402

SEED = 20261124
TOL = 1e-12
# name, I, H, P, layers, bidirectional, B, T, lengths, initial state
CASES = [
    ("lstm_proj_l1_h0", 3, 5, 2, 1, False, 3, 4, None, True),
    ("lstm_proj_l1_bi", 2, 4, 1, 1, True, 2, 3, None, False),
    ("lstm_proj_l2_len", 4, 6, 3, 2, False, 3, 4, [4, 2, 0], False),
    ("lstm_proj_l2_bi_len_h0", 3, 4, 3, 2, True, 3, 5, [5, 1, 3], True),
]


def numpy_forward(sd, I, H, P, L, bi, x, lens, h0, c0):
    """Independent float64 implementation of the projected LSTM (time-major), per row and step."""
    T, B, _ = x.shape
    D = 2 if bi else 1
    y = np.zeros((T, B, D * P))
    hn = np.zeros((L * D, B, P))
    cn = np.zeros((L * D, B, H))
    inp = x.astype(np.float64)
    for l in range(L):
        out = np.zeros((T, B, D * P))
        for d in range(D):
            sfx = "_l%d%s" % (l, "_reverse" if d else "")
            Wi, Wh = sd["weight_ih" + sfx].astype(np.float64), sd["weight_hh" + sfx].astype(np.float64)
            b = sd["bias_ih" + sfx].astype(np.float64) + sd["bias_hh" + sfx].astype(np.float64)
            Wr = sd["weight_hr" + sfx].astype(np.float64)
            for r in range(B):
                h = np.zeros(P) if h0 is None else h0[l * D + d, r].astype(np.float64)
                c = np.zeros(H) if c0 is None else c0[l * D + d, r].astype(np.float64)
                steps = range(lens[r]) if d == 0 else reversed(range(lens[r]))
                for t in steps:
                    g = Wi @ inp[t, r] + Wh @ h + b
                    i, f, gg, o = ref.sigmoid(g[:H]), ref.sigmoid(g[H:2 * H]), np.tanh(g[2 * H:3 * H]), ref.sigmoid(g[3 * H:])
                    c = f * c + i * gg
                    h = Wr @ (o * np.tanh(c))
                    out[t, r, d * P:(d + 1) * P] = h
                hn[l * D + d, r], cn[l * D + d, r] = h, c
        inp = out
        y = out
    return y, hn, cn


def generate(index, case):
    name, I, H, P, L, bi, B, T, lengths, init = case
    D = 2 if bi else 1
    rng = np.random.default_rng([SEED, index])
    mod = torch.nn.LSTM(input_size=I, hidden_size=H, num_layers=L, bidirectional=bi, proj_size=P)
    k = 1.0 / np.sqrt(H)
    sd32 = {}
    with torch.no_grad():
        for pname, p in mod.named_parameters():
            v = rng.uniform(-k, k, size=tuple(p.shape)).astype(np.float32)
            p.copy_(torch.from_numpy(v))
            sd32[pname] = v
    assert list(mod.state_dict().keys()) == list(sd32.keys())
    assert sd32["weight_hr_l0"].shape == (P, H) and sd32["weight_hh_l0"].shape == (4 * H, P)
    x32 = rng.standard_normal((T, B, I)).astype(np.float32)
    lens = np.array(lengths if lengths is not None else [T] * B, dtype=np.int32)
    h032 = rng.standard_normal((L * D, B, P)).astype(np.float32) if init else None
    c032 = rng.standard_normal((L * D, B, H)).astype(np.float32) if init else None

    mod64 = copy.deepcopy(mod).double().eval()
    x64 = torch.from_numpy(x32.astype(np.float64))
    y = torch.zeros((T, B, D * P), dtype=torch.float64)
    hn = torch.zeros((L * D, B, P), dtype=torch.float64)
    cn = torch.zeros((L * D, B, H), dtype=torch.float64)
    with torch.no_grad():
        for b in range(B):
            n = int(lens[b])
            h0b = torch.zeros((L * D, 1, P), dtype=torch.float64) if h032 is None else \
                torch.from_numpy(h032[:, b:b + 1].astype(np.float64))
            c0b = torch.zeros((L * D, 1, H), dtype=torch.float64) if c032 is None else \
                torch.from_numpy(c032[:, b:b + 1].astype(np.float64))
            if n == 0:
                hn[:, b], cn[:, b] = h0b[:, 0], c0b[:, 0]
                continue
            yb, (hb, cb) = mod64(x64[:n, b:b + 1], (h0b, c0b))
            y[:n, b], hn[:, b], cn[:, b] = yb[:, 0], hb[:, 0], cb[:, 0]
        if lengths is None:
            h0t = None if h032 is None else torch.from_numpy(h032.astype(np.float64))
            c0t = None if c032 is None else torch.from_numpy(c032.astype(np.float64))
            yb, (hb, cb) = mod64(x64) if h0t is None else mod64(x64, (h0t, c0t))
            errs = [ref.rel_err(yb.numpy(), y.numpy()), ref.rel_err(hb.numpy(), hn.numpy()),
                    ref.rel_err(cb.numpy(), cn.numpy())]
            assert max(errs) <= TOL, (name, "batched vs per-row", errs)
    ny, nhn, ncn = numpy_forward(sd32, I, H, P, L, bi, x32, lens, h032, c032)
    errs = [ref.rel_err(ny, y.numpy()), ref.rel_err(nhn, hn.numpy()), ref.rel_err(ncn, cn.numpy())]
    assert max(errs) <= TOL, (name, "numpy vs torch", errs)

    tensors = {"rnn." + n: v for n, v in sd32.items()}
    tensors["input"] = x32
    if lengths is not None:
        tensors["seq_lengths"] = lens
    if init:
        tensors["h0"], tensors["c0"] = h032, c032
    tensors["expected.y"] = y.numpy()
    tensors["expected.hn"] = hn.numpy()
    tensors["expected.cn"] = cn.numpy()
    meta = {"mode": "lstm", "input_size": str(I), "hidden_size": str(H), "proj_size": str(P), "num_layers": str(L),
            "bidirectional": str(int(bi)), "batch_first": "0", "seq_len": str(T), "batch": str(B),
            "has_lengths": str(int(lengths is not None)), "has_initial_state": str(int(init)), "format": "pytorch",
            "bias": "1", "source": "torch %s nn.LSTM(proj_size=%d) float64" % (torch.__version__, P), "case": name}
    return tensors, meta


def main():
    torch.set_num_threads(1)
    out = os.path.join(HERE, "pytorch_proj")
    os.makedirs(out, exist_ok=True)
    for index, case in enumerate(CASES):
        tensors, meta = generate(index, case)
        path = os.path.join(out, case[0] + ".safetensors")
        n = safetensors_io.save_file(tensors, path, meta)
        print("%-26s %6d bytes" % (case[0], n))


if __name__ == "__main__":
    main()

#!/work/venvs/torch/bin/python
"""Generate golden GRADIENTS of LSTM projections (nn.LSTM(proj_size=P)): tests/golden/grad/lstm_proj_*.safetensors

    /work/venvs/torch/bin/python tests/golden/make_pytorch_proj_grad_golden.py     (any Python with torch, numpy)

The files have make_grad_golden.py's layout, so every test of tests/golden/grad reads them (the C++
golden test, `rnncore grad` in test_cli): the stack's JSON config (metadata 'config', with
proj_size), the float32 parameters 'rnn.*' (weight_hr_l{k}[_reverse] [P, H] among them), input,
h0 [L*D, B, P], c0 [L*D, B, H], seq_lengths, the incoming gradients dy, dhn, dcn (float32 N(0, 1)) of
    loss = sum(y * dy) + sum(hn * dhn) + sum(cn * dcn),
and, from float64 autograd on the exact float32 values: expected.y / hn / cn, expected.dx / dh0 / dc0
and grad.rnn.<parameter>. The module runs one row at a time on x[:len_b, b] with its own initial state
(PyTorch's packed-sequence semantics; a row of length 0 keeps its state and outputs zeros).
Checks, all asserted: without lengths, one batched call gives the same outputs and gradients
(1e-12); central differences of the float64 loss (step 1e-6) agree with autograd within 1e-6 of each
tensor's largest magnitude on a fixed random subset of every gradient tensor. Deterministic: fixed
seeds, so re-running reproduces byte-identical files.
"""

import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

SEED = 20261128
TOL = 1e-12
FD_EPS = 1e-6
FD_TOL = 1e-6
FD_SAMPLE = 10
# name, I, H, P, layers, bidirectional, B, T, lengths, initial state
CASES = [
    ("lstm_proj_l1_uni_I3_H5_P2_h0", 3, 5, 2, 1, False, 3, 4, None, True),
    ("lstm_proj_l2_bi_len_I3_H4_P3_h0", 3, 4, 3, 2, True, 3, 5, [5, 1, 0], True),
    ("lstm_proj_l2_uni_len_I2_H6_P1", 2, 6, 1, 2, False, 2, 4, [3, 4], False),
]


def per_row(mod, x, h0, c0, lens, dy, dhn, dcn):
    """y, hn, cn and the loss, row by row (float64 tensors; x [T, B, I], states [L*D, B, ·])."""
    T, B, _ = x.shape
    y = torch.zeros((T, B, dy.shape[2]), dtype=torch.float64)
    hn, cn = torch.zeros_like(h0), torch.zeros_like(c0)
    ys, hs, cs = [], [], []
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            hs.append(h0[:, b])
            cs.append(c0[:, b])
            ys.append(torch.zeros((T, dy.shape[2]), dtype=torch.float64))
            continue
        yb, (hb, cb) = mod(x[:n, b:b + 1], (h0[:, b:b + 1].contiguous(), c0[:, b:b + 1].contiguous()))
        ys.append(torch.cat([yb[:, 0], torch.zeros((T - n, dy.shape[2]), dtype=torch.float64)], 0))
        hs.append(hb[:, 0])
        cs.append(cb[:, 0])
    y, hn, cn = torch.stack(ys, 1), torch.stack(hs, 1), torch.stack(cs, 1)
    loss = (y * dy).sum() + (hn * dhn).sum() + (cn * dcn).sum()
    return y, hn, cn, loss


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
    x32 = rng.standard_normal((T, B, I)).astype(np.float32)
    lens = np.array(lengths if lengths is not None else [T] * B, dtype=np.int32)
    h032 = (rng.standard_normal((L * D, B, P)) if init else np.zeros((L * D, B, P))).astype(np.float32)
    c032 = (rng.standard_normal((L * D, B, H)) if init else np.zeros((L * D, B, H))).astype(np.float32)
    dy32 = rng.standard_normal((T, B, D * P)).astype(np.float32)
    dhn32 = rng.standard_normal((L * D, B, P)).astype(np.float32)
    dcn32 = rng.standard_normal((L * D, B, H)).astype(np.float32)

    mod64 = copy.deepcopy(mod).double()
    t64 = lambda a, grad=False: torch.tensor(a.astype(np.float64), requires_grad=grad)  # noqa: E731
    x, h0, c0 = t64(x32, True), t64(h032, True), t64(c032, True)
    dy, dhn, dcn = t64(dy32), t64(dhn32), t64(dcn32)
    y, hn, cn, loss = per_row(mod64, x, h0, c0, lens, dy, dhn, dcn)
    params = dict(mod64.named_parameters())
    leaves = [x, h0, c0] + list(params.values())
    grads = [g.detach().numpy() for g in torch.autograd.grad(loss, leaves)]
    names = ["x", "h0", "c0"] + list(params)

    if lengths is None:  # one batched call
        xb, h0b, c0b = t64(x32, True), t64(h032, True), t64(c032, True)
        yb, (hb, cb) = mod64(xb, (h0b, c0b))
        lb = (yb * dy).sum() + (hb * dhn).sum() + (cb * dcn).sum()
        gb = torch.autograd.grad(lb, [xb, h0b, c0b] + list(params.values()))
        for n, a, b in zip(names, grads, gb):
            assert np.max(np.abs(a - b.numpy())) <= TOL * max(np.max(np.abs(a)), 1e-30), (name, "batched", n)

    frng = np.random.default_rng([SEED, index, 1])  # central differences of the float64 loss
    worst = 0.0
    with torch.no_grad():
        for n, leaf, g in zip(names, leaves, grads):
            idx = frng.choice(g.size, size=min(FD_SAMPLE, g.size), replace=False).tolist() + [int(np.argmax(np.abs(g)))]
            flat = leaf.view(-1)
            for i in idx:
                keep = flat[i].item()
                flat[i] = keep + FD_EPS
                up = per_row(mod64, x, h0, c0, lens, dy, dhn, dcn)[3].item()
                flat[i] = keep - FD_EPS
                down = per_row(mod64, x, h0, c0, lens, dy, dhn, dcn)[3].item()
                flat[i] = keep
                err = abs((up - down) / (2 * FD_EPS) - g.flat[i]) / max(np.max(np.abs(g)), 1e-30)
                worst = max(worst, err)
                assert err <= FD_TOL, (name, n, i, err)

    tensors = {"rnn." + n: v for n, v in sd32.items()}
    tensors.update({"input": x32, "dy": dy32, "dhn": dhn32, "dcn": dcn32})
    if lengths is not None:
        tensors["seq_lengths"] = lens
    if init:
        tensors["h0"], tensors["c0"] = h032, c032
    tensors["expected.y"] = y.detach().numpy()
    tensors["expected.hn"] = hn.detach().numpy()
    tensors["expected.cn"] = cn.detach().numpy()
    tensors["expected.dx"], tensors["expected.dh0"], tensors["expected.dc0"] = grads[0], grads[1], grads[2]
    for n, g in zip(names[3:], grads[3:]):
        tensors["grad.rnn." + n] = g
    config = {"input_size": I, "dropout": 0.0,
              "layers": [{"mode": "lstm", "hidden_size": H, "proj_size": P,
                          "direction": "bidirectional" if bi else "unidirectional"} for _ in range(L)]}
    meta = {"config": json.dumps(config), "run_mode": "training", "seed": "0", "step": "0", "batch_first": "0",
            "has_lengths": str(int(lengths is not None)), "has_initial_state": str(int(init)), "format": "pytorch",
            "prefix": "rnn.", "seq_len": str(T), "batch": str(B), "loss": "sum(y*dy)+sum(hn*dhn)+sum(cn*dcn)",
            "source": "torch %s nn.LSTM(proj_size=%d) float64 autograd, per row" % (torch.__version__.split("+")[0], P),
            "case": name}
    return tensors, meta, worst


def main():
    torch.set_num_threads(1)
    out = os.path.join(HERE, "grad")
    for index, case in enumerate(CASES):
        tensors, meta, worst = generate(index, case)
        n = safetensors_io.save_file(tensors, os.path.join(out, case[0] + ".safetensors"), meta)
        print("%-34s %6d bytes  fd %.1e" % (case[0], n, worst))


if __name__ == "__main__":
    main()

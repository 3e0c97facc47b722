#!/usr/bin/env python3
"""Generate PyTorch golden data for an LSTM followed by a Linear head: tests/golden/pytorch_head/<case>.safetensors

    /work/venvs/torch/bin/python tests/golden/make_pytorch_head_golden.py

Each file is the state_dict of a module `Net(lstm=nn.LSTM(...), fc=nn.Linear(D*H, F))` (tensors
'lstm.*' and 'fc.*', float32), plus 'input' x [T, B, I] (float32, time-major) and 'expected.y' in
float64: the module run in float64 (module.double()) as a user would write it,
  * every step:  y = act(fc(out))                       [T, B, F]
  * last step:   y = act(fc(cat(out[-1, :, :H], out[0, :, H:])))   [B, F]
    (each direction's last output in its own order: Keras return_sequences=False)
with act from the metadata 'head_activation' (none or softmax) and 'head_last_step' ("1" for the
last step), which io::load_model reads; x and y (float32) also as <case>.x.npy, <case>.y.npy. An independent numpy implementation checks every output to 1e-12.
Deterministic: fixed seeds, so re-running reproduces byte-identical files.
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

SEED = 20261128
TOL = 1e-12
# name, I, H, layers, bidirectional, F, B, T, activation, last step
CASES = [
    ("lstm2_linear_every_step", 5, 8, 2, False, 3, 3, 6, "none", False),
    ("bilstm_linear_last_step_softmax", 4, 6, 1, True, 4, 2, 5, "softmax", True),
]


class Net(torch.nn.Module):
    def __init__(self, I, H, L, bi, F):
        super().__init__()
        self.lstm = torch.nn.LSTM(I, H, num_layers=L, bidirectional=bi)
        self.fc = torch.nn.Linear((2 if bi else 1) * H, F)

    def forward(self, x, H, last_step, activation):
        out, _ = self.lstm(x)
        if last_step:
            out = torch.cat([out[-1, :, :H], out[0, :, H:]], dim=1)
        y = self.fc(out)
        return torch.softmax(y, dim=-1) if activation == "softmax" else y


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def numpy_forward(sd, I, H, L, bi, x, last_step, activation):
    """Independent float64 LSTM (PyTorch gate order i, f, g, o) and head."""
    T, B, _ = x.shape
    D = 2 if bi else 1
    inp = x
    for l in range(L):
        out = np.zeros((T, B, D * H))
        for d in range(D):
            sfx = f"_l{l}" + ("_reverse" if d else "")
            Wi, Wh = sd["lstm.weight_ih" + sfx], sd["lstm.weight_hh" + sfx]
            b = sd["lstm.bias_ih" + sfx] + sd["lstm.bias_hh" + sfx]
            h = np.zeros((B, H))
            c = np.zeros((B, H))
            for t in (range(T - 1, -1, -1) if d else range(T)):
                g = inp[t] @ Wi.T + h @ Wh.T + b
                i, f, gg, o = sigmoid(g[:, :H]), sigmoid(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), sigmoid(g[:, 3 * H:])
                c = f * c + i * gg
                h = o * np.tanh(c)
                out[t, :, d * H:(d + 1) * H] = h
        inp = out
    if last_step:
        inp = np.concatenate([inp[-1, :, :H], inp[0, :, H:]], axis=1)
    y = inp @ sd["fc.weight"].T + sd["fc.bias"]
    if activation == "softmax":
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
    return y


def main():
    out_dir = os.path.join(HERE, "pytorch_head")
    os.makedirs(out_dir, exist_ok=True)
    for k, (name, I, H, L, bi, F, B, T, activation, last_step) in enumerate(CASES):
        torch.manual_seed(SEED + k)
        net = Net(I, H, L, bi, F).float()
        sd = {n: p.detach().numpy().astype(np.float32) for n, p in net.state_dict().items()}
        x = np.random.default_rng(SEED + k).uniform(-1, 1, (T, B, I)).astype(np.float32)
        with torch.no_grad():
            y = net.double()(torch.from_numpy(x.astype(np.float64)), H, last_step, activation).numpy()
        sd64 = {n: v.astype(np.float64) for n, v in sd.items()}
        y_np = numpy_forward(sd64, I, H, L, bi, x.astype(np.float64), last_step, activation)
        err = np.abs(y - y_np).max() / max(np.abs(y_np).max(), 1e-30)
        assert err < TOL, (name, err)
        tensors = dict(sd)
        tensors["input"] = x
        tensors["expected.y"] = y.astype(np.float64)
        meta = {"head_activation": activation, "head_last_step": "1" if last_step else "0",
                "generator": "tests/golden/make_pytorch_head_golden.py", "torch": torch.__version__}
        safetensors_io.save_file(tensors, os.path.join(out_dir, name + ".safetensors"), metadata=meta)
        # The input and PyTorch's output as .npy, for the export-c header test (tests/meson.build).
        np.save(os.path.join(out_dir, name + ".x.npy"), x)
        np.save(os.path.join(out_dir, name + ".y.npy"), y.astype(np.float32))
        print(f"{name}: y {list(y.shape)}, numpy check {err:.1e}")


if __name__ == "__main__":
    main()

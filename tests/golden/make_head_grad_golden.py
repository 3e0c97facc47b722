#!/usr/bin/env python3
"""Generate PyTorch autograd golden GRADIENTS through the ends of a stack: tests/golden/head_grad/<case>.safetensors

    /work/venvs/torch/bin/python tests/golden/make_head_grad_golden.py

Each file is one module run as a user writes it,
  * embed_lstm_linear_tanh:  Embedding(V, I) -> nn.LSTM(I, H) -> Linear(H, F) -> tanh, every step
  * bilstm_linear_last_softmax:  nn.LSTM(I, H, bidirectional) -> Linear(2H, F) -> softmax of
    cat(out[-1, :, :H], out[0, :, H:]) (each direction's last output: Keras return_sequences=False)
  * lstm_mlp_relu_none:  nn.LSTM(I, H) -> Linear(H, M) -> ReLU -> Linear(M, F), every step
  * bilstm_mlp_relu_last_softmax:  nn.LSTM(I, H, bidirectional) -> Linear(2H, M) -> ReLU ->
    Linear(M, F) -> softmax, on each direction's last output (a Dense layer before the head:
    StackSpec::pre_head)
with its state_dict ('embedding.weight', 'lstm.*', 'fc.*' or 'fc1.*', 'fc2.*', float32), the input ('input': token ids int32
[T, B], or x float32 [T, B, I], time-major), 'dy' (float32, N(0, 1), shaped like y) and, computed in
float64 by autograd from the exact float32 values, 'expected.y' and 'grad.<parameter>' of the loss
sum(y * dy) for every parameter (the embedding's: zero rows for ids never seen).
The Embedding case's module alone (state_dict, metadata head_activation) and its token ids [T, B]
and [B, T] also go to tests/data/quantize/ (embed_lstm_linear_tanh*), for the quantize → export-c
header test.
Central finite differences of the float64 loss (step 1e-6) check every gradient element to 1e-7
relative to the largest magnitude of its tensor. Deterministic: fixed seeds.
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

SEED = 20261129
FD_STEP = 1e-6
FD_TOL = 1e-7
# name, vocab (0: float input), I, H, bidirectional, F, B, T, activation, last step, M (a Linear of
# M units and a ReLU before the head; 0: none)
CASES = [
    ("embed_lstm_linear_tanh", 7, 4, 5, False, 3, 3, 6, "tanh", False, 0),
    ("bilstm_linear_last_softmax", 0, 3, 4, True, 5, 2, 5, "softmax", True, 0),
    ("lstm_mlp_relu_none", 0, 3, 4, False, 3, 3, 5, "none", False, 6),
    ("bilstm_mlp_relu_last_softmax", 0, 3, 4, True, 4, 2, 5, "softmax", True, 5),
]


class Net(torch.nn.Module):
    def __init__(self, V, I, H, bi, F, M):
        super().__init__()
        if V > 0:
            self.embedding = torch.nn.Embedding(V, I)
        self.lstm = torch.nn.LSTM(I, H, bidirectional=bi)
        if M > 0:
            self.fc1 = torch.nn.Linear((2 if bi else 1) * H, M)
            self.fc2 = torch.nn.Linear(M, F)
        else:
            self.fc = torch.nn.Linear((2 if bi else 1) * H, F)

    def forward(self, x, H, last_step, activation):
        if hasattr(self, "embedding"):
            x = self.embedding(x)
        out, _ = self.lstm(x)
        if last_step:
            out = torch.cat([out[-1, :, :H], out[0, :, H:]], dim=1)
        y = self.fc2(torch.relu(self.fc1(out))) if hasattr(self, "fc1") else self.fc(out)
        if activation == "softmax":
            return torch.softmax(y, dim=-1)
        return torch.tanh(y) if activation == "tanh" else y


def main():
    out_dir = os.path.join(HERE, "head_grad")
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    for k, (name, V, I, H, bi, F, B, T, activation, last_step, M) in enumerate(CASES):
        torch.manual_seed(SEED + k)
        net = Net(V, I, H, bi, F, M).float()
        sd = {n: p.detach().numpy().astype(np.float32) for n, p in net.state_dict().items()}
        rng = np.random.default_rng(SEED + k)
        if V > 0:
            x = rng.integers(0, V - 1, (T, B)).astype(np.int32)  # id V-1 never seen: its gradient row is zero
            x_t = torch.from_numpy(x.astype(np.int64))
        else:
            x = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
            x_t = torch.from_numpy(x.astype(np.float64))
        net = net.double()
        with torch.no_grad():
            y0 = net(x_t, H, last_step, activation)
        dy = rng.standard_normal(tuple(y0.shape)).astype(np.float32)
        dy_t = torch.from_numpy(dy.astype(np.float64))
        net.zero_grad()
        y = net(x_t, H, last_step, activation)
        (y * dy_t).sum().backward()
        grads = {n: p.grad.detach().numpy().copy() for n, p in net.named_parameters()}

        # Central differences of the float64 loss, every element.
        with torch.no_grad():
            for n, p in net.named_parameters():
                fd = np.zeros(p.shape)
                flat = p.view(-1)
                for i in range(flat.numel()):
                    v = flat[i].item()
                    flat[i] = v + FD_STEP
                    lp = (net(x_t, H, last_step, activation) * dy_t).sum().item()
                    flat[i] = v - FD_STEP
                    lm = (net(x_t, H, last_step, activation) * dy_t).sum().item()
                    flat[i] = v
                    fd.reshape(-1)[i] = (lp - lm) / (2 * FD_STEP)
                err = np.abs(fd - grads[n]).max() / max(np.abs(grads[n]).max(), 1e-30)
                assert err < FD_TOL, (name, n, err)
        if V > 0:
            assert np.all(grads["embedding.weight"][V - 1] == 0.0)

        tensors = dict(sd)
        tensors["input"] = x
        tensors["dy"] = dy
        tensors["expected.y"] = y.detach().numpy().astype(np.float64)
        for n, g in grads.items():
            tensors["grad." + n] = g.astype(np.float64)
        meta = {"head_activation": activation, "head_last_step": "1" if last_step else "0",
                "generator": "tests/golden/make_head_grad_golden.py", "torch": torch.__version__}
        if M > 0:
            meta["pre_head_activation"] = "relu"
        safetensors_io.save_file(tensors, os.path.join(out_dir, name + ".safetensors"), metadata=meta)
        if V > 0:  # the module alone and its ids, for `rnncore quantize` and export-c (tests/meson.build)
            data_dir = os.path.join(HERE, "..", "data", "quantize")
            safetensors_io.save_file(sd, os.path.join(data_dir, name + ".safetensors"),
                                     metadata={"head_activation": activation})
            np.save(os.path.join(data_dir, name + "_ids.npy"), x)
            np.save(os.path.join(data_dir, name + "_ids_bf.npy"), np.ascontiguousarray(x.T))
        print(f"{name}: y {list(y.shape)}, {len(grads)} gradients, finite differences agree")


if __name__ == "__main__":
    main()

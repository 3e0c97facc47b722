#!/usr/bin/python3
"""Generate the float LSTM and the calibration / evaluation inputs that tests/test_cli.cpp quantizes
with `rnncore quantize` (tests/data/quantize/).

    /usr/bin/python3 tests/golden/make_quantize_data.py

Produces (deterministic):
  lstm_I8_H24.safetensors  state_dict of nn.LSTM(8, 24) (prefix "lstm.", float32, PyTorch's default init)
  calib.npy                float32 [T=40, B=4, I=8], time-major: the calibration data
  eval.npy                 float32 [T=60, B=3, I=8], time-major: held-out data of the same distribution
  eval_y.npy               float32 [60, 3, 24]: PyTorch's output on eval.npy
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

OUT = os.path.normpath(os.path.join(HERE, "..", "data", "quantize"))
I, H = 8, 24


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size=I, hidden_size=H)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(13)
    net = Net().eval()
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    safetensors_io.save_file(sd, os.path.join(OUT, "lstm_I8_H24.safetensors"), {"mode": "lstm"})
    rng = np.random.default_rng(13)
    # Inputs with an offset and unequal spread per feature, so that the input's zero point is not 0.
    shift = rng.uniform(-0.5, 1.0, I).astype(np.float32)
    spread = rng.uniform(0.5, 2.0, I).astype(np.float32)
    calib = (rng.standard_normal((40, 4, I)) * spread + shift).astype(np.float32)
    ev = (rng.standard_normal((60, 3, I)) * spread + shift).astype(np.float32)
    np.save(os.path.join(OUT, "calib.npy"), calib)
    np.save(os.path.join(OUT, "eval.npy"), ev)
    with torch.no_grad():
        y, _ = net.lstm(torch.from_numpy(ev))
    np.save(os.path.join(OUT, "eval_y.npy"), y.numpy().astype(np.float32))


if __name__ == "__main__":
    main()

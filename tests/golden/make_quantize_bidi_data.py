#!/usr/bin/python3
"""Generate the bidirectional float LSTM and the calibration / evaluation inputs that
tests/test_quantize.cpp quantizes with `rnncore quantize` (tests/data/quantize/).

    /usr/bin/python3 tests/golden/make_quantize_bidi_data.py

Produces (deterministic):
  lstm_bi2_I5_H10.safetensors  state_dict of nn.LSTM(5, 10, num_layers=2, bidirectional=True)
                               (prefix "lstm.", float32, PyTorch's default init; layer 1 reads
                               layer 0's [forward h, backward h], 20 wide)
  bidi_calib.npy               float32 [T=30, B=4, I=5], time-major: the calibration data
  bidi_eval.npy                float32 [T=40, B=3, I=5], time-major: held-out data of the same distribution
  bidi_eval_y.npy              float32 [40, 3, 20]: PyTorch's output on bidi_eval.npy
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

OUT = os.path.normpath(os.path.join(HERE, "..", "data", "quantize"))
I, H = 5, 10


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size=I, hidden_size=H, num_layers=2, bidirectional=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(17)
    net = Net().eval()
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    safetensors_io.save_file(sd, os.path.join(OUT, "lstm_bi2_I5_H10.safetensors"), {"mode": "lstm"})
    rng = np.random.default_rng(17)
    # Inputs with an offset and unequal spread per feature, so that the input's zero point is not 0.
    shift = rng.uniform(-0.5, 1.0, I).astype(np.float32)
    spread = rng.uniform(0.5, 2.0, I).astype(np.float32)
    calib = (rng.standard_normal((30, 4, I)) * spread + shift).astype(np.float32)
    ev = (rng.standard_normal((40, 3, I)) * spread + shift).astype(np.float32)
    np.save(os.path.join(OUT, "bidi_calib.npy"), calib)
    np.save(os.path.join(OUT, "bidi_eval.npy"), ev)
    with torch.no_grad():
        y, _ = net.lstm(torch.from_numpy(ev))
    np.save(os.path.join(OUT, "bidi_eval_y.npy"), y.numpy().astype(np.float32))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Generate the float LSTMs and the calibration / evaluation inputs that `rnncore quantize` is
tested on (tests/test_quantize.cpp, tests/meson.build; into tests/data/quantize/).

    /usr/bin/python3 tests/golden/make_quantize_data.py

Produces (deterministic; PyTorch's default initialisation, prefix "lstm.", float32):
  lstm_I8_H24.safetensors      state_dict of nn.LSTM(8, 24)
  calib.npy                    float32 [T=40, B=4, I=8], time-major: the calibration data
  eval.npy                     float32 [T=60, B=3, I=8], time-major: held-out data of the same distribution
  eval_y.npy                   float32 [60, 3, 24]: PyTorch's output on eval.npy
  lstm_bi2_I5_H10.safetensors  state_dict of nn.LSTM(5, 10, num_layers=2, bidirectional=True)
                               (layer 1 reads layer 0's [forward h, backward h], 20 wide)
  bidi_calib.npy               float32 [T=30, B=4, I=5]
  bidi_eval.npy                float32 [T=40, B=3, I=5]
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


class Net(torch.nn.Module):
    def __init__(self, **lstm_args):
        super().__init__()
        self.lstm = torch.nn.LSTM(**lstm_args)


def write_set(seed, model_file, prefix, calib_shape, eval_shape, **lstm_args):
    """One float LSTM, its calibration and evaluation inputs and PyTorch's output on the latter."""
    torch.manual_seed(seed)
    net = Net(**lstm_args).eval()
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    safetensors_io.save_file(sd, os.path.join(OUT, model_file), {"mode": "lstm"})
    I = lstm_args["input_size"]
    rng = np.random.default_rng(seed)
    # Inputs with an offset and unequal spread per feature, so that the input's zero point is not 0.
    shift = rng.uniform(-0.5, 1.0, I).astype(np.float32)
    spread = rng.uniform(0.5, 2.0, I).astype(np.float32)
    calib = (rng.standard_normal(calib_shape + (I,)) * spread + shift).astype(np.float32)
    ev = (rng.standard_normal(eval_shape + (I,)) * spread + shift).astype(np.float32)
    np.save(os.path.join(OUT, prefix + "calib.npy"), calib)
    np.save(os.path.join(OUT, prefix + "eval.npy"), ev)
    with torch.no_grad():
        y, _ = net.lstm(torch.from_numpy(ev))
    np.save(os.path.join(OUT, prefix + "eval_y.npy"), y.numpy().astype(np.float32))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    write_set(13, "lstm_I8_H24.safetensors", "", (40, 4), (60, 3), input_size=8, hidden_size=24)
    write_set(17, "lstm_bi2_I5_H10.safetensors", "bidi_", (30, 4), (40, 3), input_size=5, hidden_size=10,
              num_layers=2, bidirectional=True)


if __name__ == "__main__":
    main()

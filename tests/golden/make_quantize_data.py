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
  lstm_uni_bi_I6_H9_7.safetensors  a stack mixing directions: nn.LSTM(6, 9), then
                               nn.LSTM(9, 7, bidirectional=True) on its output (as layers l0, l1)
  mixed_stack.json             its --config (the weights alone do not say it)
  mixed_calib.npy, mixed_eval.npy, mixed_eval_y.npy   [T=30, B=4, 6], [T=40, B=3, 6], [40, 3, 14]
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
    write_data(seed, net.lstm, sd, model_file, prefix, calib_shape, eval_shape, lstm_args["input_size"])


def write_mixed_set(seed):
    """A unidirectional LSTM layer, then a bidirectional one: PyTorch has no such module, so two
    nn.LSTMs, their tensors named as layers 0 and 1 of one stack."""
    torch.manual_seed(seed)
    first, second = torch.nn.LSTM(6, 9).eval(), torch.nn.LSTM(9, 7, bidirectional=True).eval()
    sd = {"lstm." + k: v.detach().numpy().astype(np.float32) for k, v in first.state_dict().items()}
    sd.update({"lstm." + k.replace("_l0", "_l1"): v.detach().numpy().astype(np.float32)
               for k, v in second.state_dict().items()})
    with open(os.path.join(OUT, "mixed_stack.json"), "w") as f:
        f.write('{"layers": [{"mode": "lstm", "hidden_size": 9},\n'
                '            {"mode": "lstm", "hidden_size": 7, "direction": "bidirectional"}]}\n')
    write_data(seed, lambda x: second(first(x)[0]), sd, "lstm_uni_bi_I6_H9_7.safetensors", "mixed_", (30, 4), (40, 3), 6)


def write_data(seed, forward, sd, model_file, prefix, calib_shape, eval_shape, I):
    safetensors_io.save_file(sd, os.path.join(OUT, model_file), {"mode": "lstm"})
    rng = np.random.default_rng(seed)
    # Inputs with an offset and unequal spread per feature, so that the input's zero point is not 0.
    shift = rng.uniform(-0.5, 1.0, I).astype(np.float32)
    spread = rng.uniform(0.5, 2.0, I).astype(np.float32)
    calib = (rng.standard_normal(calib_shape + (I,)) * spread + shift).astype(np.float32)
    ev = (rng.standard_normal(eval_shape + (I,)) * spread + shift).astype(np.float32)
    np.save(os.path.join(OUT, prefix + "calib.npy"), calib)
    np.save(os.path.join(OUT, prefix + "eval.npy"), ev)
    with torch.no_grad():
        y, _ = forward(torch.from_numpy(ev))
    np.save(os.path.join(OUT, prefix + "eval_y.npy"), y.numpy().astype(np.float32))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    write_set(13, "lstm_I8_H24.safetensors", "", (40, 4), (60, 3), input_size=8, hidden_size=24)
    write_set(17, "lstm_bi2_I5_H10.safetensors", "bidi_", (30, 4), (40, 3), input_size=5, hidden_size=10,
              num_layers=2, bidirectional=True)
    write_mixed_set(19)


if __name__ == "__main__":
    main()

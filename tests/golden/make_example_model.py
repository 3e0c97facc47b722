#!/usr/bin/python3
"""Generate the bundled quick-start example model in examples/models/.

    /usr/bin/python3 tests/golden/make_example_model.py

Produces (deterministic, byte-identical on re-run):
  examples/models/lstm_small.safetensors        state_dict of SmallLSTM (prefix "lstm.", float32)
  examples/models/lstm_small_input.npy          float32 [T=50, B=4, I=16], time-major
  examples/models/lstm_small_expected_y.npy     float32 [50, 4, 32]  PyTorch float32 output
  examples/models/lstm_small_expected_hn.npy    float32 [2, 4, 32]
  examples/models/lstm_small_expected_cn.npy    float32 [2, 4, 32]

The expected outputs are what a user gets from PyTorch in float32 (not a
float64 reference), so comparisons against them need a float32-level
tolerance (about 1e-5 relative).
"""

import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

SEED = 1234
T, B, I, H, L = 50, 4, 16, 32, 2


class SmallLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size=I, hidden_size=H, num_layers=L)

    def forward(self, x):
        return self.lstm(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "..", "examples", "models")))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)

    torch.manual_seed(SEED)
    model = SmallLSTM().eval()        # PyTorch's default init: U(-1/sqrt(H), 1/sqrt(H))
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}

    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    with torch.no_grad():
        y, (hn, cn) = model(torch.from_numpy(x))
    y, hn, cn = (t.numpy().astype(np.float32) for t in (y, hn, cn))
    assert y.shape == (T, B, H) and hn.shape == (L, B, H) and cn.shape == (L, B, H)

    # sanity: float64 run of the same model agrees at float32 level
    m64 = SmallLSTM().double()
    m64.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in sd.items()})
    with torch.no_grad():
        y64, _ = m64(torch.from_numpy(x.astype(np.float64)))
    err = float(np.max(np.abs(y - y64.numpy())) / np.max(np.abs(y64.numpy())))
    assert err < 1e-5, err

    meta = {
        "mode": "lstm",
        "input_size": str(I),
        "hidden_size": str(H),
        "num_layers": str(L),
        "bidirectional": "0",
        "batch_first": "0",
        "bias": "1",
        "format": "pytorch",
        "source": f"torch {torch.__version__} nn.LSTM float32 state_dict of SmallLSTM (make_example_model.py)",
    }
    path = os.path.join(args.out, "lstm_small.safetensors")
    n = safetensors_io.save_file(sd, path, meta)
    back, bmeta = safetensors_io.load_file(path)
    assert bmeta == meta and all(np.array_equal(back[k], v) for k, v in sd.items())
    arrays = {"input": x, "expected_y": y, "expected_hn": hn, "expected_cn": cn}
    for name, a in arrays.items():
        np.save(os.path.join(args.out, f"lstm_small_{name}.npy"), a)
    print(f"{path}: {n} bytes; tensors:")
    for k, v in sd.items():
        print(f"  {k:<22} {list(v.shape)}")
    for name, a in arrays.items():
        print(f"lstm_small_{name}.npy {a.dtype} {list(a.shape)}")
    print(f"float32 vs float64 PyTorch output: relative error {err:.2e}")


if __name__ == "__main__":
    main()

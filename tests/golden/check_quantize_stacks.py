#!/tmp/tfenv/bin/python
"""`rnncore quantize` against TFLite's converter on Keras stacks the tests do not hold (docs/int8.md,
"Against TFLite's converter"): for each case below, a Keras model of stacked LSTMs with seeded
weights (gain x, forget bias +1) and representative batches is converted by the TFLite converter
(full integer, float I/O) and quantized by

    rnncore quantize --config STACK.json --batch-first --carry-state B --cell-clip 10 --cell-range batch-end

and the two files are compared: every key (scales as float32) and tensor, and both files' int8 output
from `rnncore run` on the calibration data. Nothing is written to the repository (a temporary
directory). Needs TensorFlow 2.21 with tf-keras (see make_tflite_int8_golden.py):

    /tmp/tfenv/bin/python tests/golden/check_quantize_stacks.py [path/to/rnncore]   # default build/tools/rnncore
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from safetensors_io import save_file  # noqa: E402
import tflite_to_safetensors  # noqa: E402
from tf_to_safetensors import write_safetensors  # noqa: E402

# I, hidden sizes, T, rows per representative batch, batches, weight gain, seed
CASES = [
    (3, (24, 24), 20, 2, 8, 2.0, 101),
    (9, (16, 32, 8), 12, 4, 6, 2.5, 102),
    (5, (40, 10), 25, 3, 10, 1.8, 103),
    (12, (8, 8, 8, 8), 15, 2, 12, 3.0, 104),
]


def read(path):
    """(metadata, {name: raw bytes}) of a safetensors file."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return meta, {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}


def same(key, a, b):
    if "scale" in key or "clip" in key:
        return np.float32(float(a)) == np.float32(float(b))
    return a == b


def check(rnncore, d, I, sizes, T, B, batches, gain, seed):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    out, layers = inp, []
    for h in sizes:
        layers.append(keras.layers.LSTM(h, return_sequences=True))
        out = layers[-1](out)
    model = keras.Model(inp, out)
    tensors = {}
    for k, (layer, h) in enumerate(zip(layers, sizes)):
        kernel, rkernel, bias = layer.get_weights()
        bias = bias + rng.uniform(-0.5, 0.5, bias.shape).astype(np.float32)
        bias[h:2 * h] += np.float32(1.0)
        layer.set_weights([kernel * np.float32(gain), rkernel * np.float32(gain), bias])
        kernel, rkernel, bias = layer.get_weights()
        tensors.update({f"kernel_l{k}": kernel, f"recurrent_kernel_l{k}": rkernel, f"bias_l{k}": bias})
    shift = rng.uniform(-0.3, 0.6, I).astype(np.float32)
    calib = [(1.5 * rng.standard_normal((B, T, I)) + shift).astype(np.float32) for _ in range(batches)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    weights, meta, _ = tflite_to_safetensors.extract(conv.convert(), tf)
    save_file(tensors, d + "/float.safetensors", {"format": "keras", "mode": "lstm"})
    np.save(d + "/calib.npy", np.concatenate(calib, axis=0))
    write_safetensors(d + "/tflite.safetensors", sorted(weights.items()), meta)
    with open(d + "/stack.json", "w") as f:
        json.dump({"layers": [{"mode": "lstm", "hidden_size": h} for h in sizes]}, f)
    r = subprocess.run([rnncore, "quantize", "--weights", d + "/float.safetensors", "--config", d + "/stack.json",
                        "--calibration", d + "/calib.npy", "--batch-first", "--carry-state", str(B), "--cell-clip", "10",
                        "--cell-range", "batch-end", "--output", d + "/mine.safetensors"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"rnncore quantize failed: {r.stderr.strip()}"
    mine, mine_t = read(d + "/mine.safetensors")
    theirs, theirs_t = read(d + "/tflite.safetensors")
    keys = [k for k in theirs if k not in ("source", "tf_version")]
    differ = [k for k in keys if k not in mine or not same(k, mine[k], theirs[k])]
    not_scales = [k for k in differ if k not in mine or "scale" not in k]
    worst = max([abs(float(mine[k]) / float(theirs[k]) - 1) for k in differ if k not in not_scales] + [0.0])
    t_differ = [k for k in theirs_t if mine_t.get(k) != theirs_t[k]]
    ys = []
    for name in ("mine", "tflite"):
        subprocess.run([rnncore, "run", "--weights", f"{d}/{name}.safetensors", "--input", d + "/calib.npy", "--output",
                        f"{d}/y_{name}.npy"], check=True, capture_output=True)
        with open(f"{d}/y_{name}.npy", "rb") as f:
            ys.append(f.read())
    cells = [int(np.log2(float(theirs[f"l{k}.cell_scale"]))) for k in range(len(sizes))]
    return (f"{len(keys)} keys: {len(differ)} differ ({len(not_scales)} not scales {not_scales}; scales by at most "
            f"{worst:.2g} relative); "
            f"{len(theirs_t)} tensors: {len(t_differ)} differ; cell scales 2^{cells}; int8 outputs equal: {ys[0] == ys[1]}")


def main():
    rnncore = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tools", "rnncore")
    with tempfile.TemporaryDirectory() as d:
        for c in CASES:
            print(f"I={c[0]} H={c[1]} T={c[2]} batches {c[4]}x{c[3]} gain {c[5]}: {check(rnncore, d, *c)}")


if __name__ == "__main__":
    main()

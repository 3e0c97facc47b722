#!/tmp/tfenv/bin/python
"""The integer LSTM against LiteRT on random Keras models the tests do not hold (docs/int8.md,
"Running a quantized Keras model"): each seed builds a Keras model of 1-3 LSTM layers (H 1..128,
I 1..64, T 1..100, B 1..8) with go_backwards, Bidirectional (concat, sum, mul, ave), Embedding
inputs, Dropout layers and dropout arguments (inference: no effect), unit_forget_bias=False, weight
gains of 0.5-3, random biases and Dense heads (relu, none, sigmoid, tanh, softmax); TFLite's
converter makes it full integer (int8 or float I/O) from 32 representative batches, LiteRT runs it
on one more, and so do tools/tflite_to_safetensors.py and `rnncore run`. Outputs must be equal bit
for bit (float I/O: rnncore's int8 output dequantized with the scale LiteRT dequantizes with).

Each seed prints one line: EQUAL, DIFFER, REFUSED (the converter script's one-line error; expected
for a Bidirectional around a go_backwards LSTM), RUN FAILED, or CONVERSION FAILED (TensorFlow's own
failure); then the counts. Exit status 1 if any model differs or fails to run in rnncore.
Nothing is written to the repository (a temporary directory). Needs TensorFlow 2.21 with tf-keras
(see make_tflite_int8_golden.py):

    /tmp/tfenv/bin/python tests/golden/check_keras_int8_random.py [--rnncore build/tools/rnncore]
        [--first 200] [--count 51]

Seeds 200..250 gave 48 EQUAL, 2 REFUSED, 1 CONVERSION FAILED (2026-11-27, TF 2.21.0).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")  # TensorFlow's deprecation notices, one per model
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def add_lstm_layers(rng, h, desc, count):
    for k in range(count):
        units = int(rng.choice([1, 4, 16, 20, 32, 48, 64, 100, 128]))
        last = k + 1 == count
        kw = dict(return_sequences=True if not last else bool(rng.random() < 0.5))
        if rng.random() < 0.2:
            kw["unit_forget_bias"] = False
        if rng.random() < 0.2:
            kw["recurrent_dropout"] = 0.0
            kw["dropout"] = 0.1
        backwards = k == 0 and rng.random() < 0.2
        if backwards:
            kw["go_backwards"] = True
        lstm = keras.layers.LSTM(units, **kw)
        merge = None
        if rng.random() < 0.25:
            merge = str(rng.choice(["concat", "concat", "sum", "mul", "ave"]))
            wrapper = keras.layers.Bidirectional(lstm, merge_mode=merge)
            h = wrapper(h)
            cells = [wrapper.forward_layer, wrapper.backward_layer]
        else:
            h = lstm(h)
            cells = [lstm]
        gain = float(rng.choice([0.5, 1.0, 1.0, 2.0, 3.0]))
        bias_spread = float(rng.choice([0, 0.5, 1.5]))
        for cell in cells:
            kernel, recurrent, bias = cell.get_weights()
            bias = bias + rng.uniform(-1, 1, bias.shape).astype(np.float32) * bias_spread
            cell.set_weights([kernel * gain, recurrent * gain, bias])
        desc["layers"].append(dict(H=units, return_sequences=kw.pop("return_sequences"), bidirectional=merge,
                                   gain=gain, **kw))
    return h


def add_dense_head(rng, h, desc):
    count = int(rng.choice([0, 0, 1, 2]))
    if desc["layers"][-1]["return_sequences"] and rng.random() >= 0.5:
        return h
    for d in range(count):
        last = d + 1 == count
        act = str(rng.choice(["relu", "None", "softmax", "sigmoid", "tanh"] if last else ["relu", "None"]))
        layer = keras.layers.Dense(int(rng.integers(1, 12)), activation=None if act == "None" else act)
        h = layer(h)
        w, b = layer.get_weights()
        layer.set_weights([w, rng.uniform(-0.3, 0.3, b.shape).astype(np.float32)])
        desc.setdefault("dense", []).append((layer.units, act))
    return h


def build_and_convert(seed):
    """The seed's Keras model converted to full integer, LiteRT's input and output on one batch."""
    rng = np.random.default_rng(seed)
    tf.keras.utils.set_random_seed(seed)
    I = int(rng.choice([1, 3, 8, 13, 32, 40, 64]))
    T = int(rng.choice([1, 5, 16, 33, 100]))
    B = int(rng.choice([1, 2, 3, 8]))
    layers = int(rng.choice([1, 1, 2, 3]))
    desc = dict(I=I, T=T, B=B, layers=[])
    embed = rng.random() < 0.15
    if embed:
        desc["embed"] = int(rng.integers(10, 80))
        inp = keras.Input(shape=(T,), batch_size=B, dtype="int32")
        h = keras.layers.Embedding(desc["embed"], I)(inp)
    else:
        inp = keras.Input(shape=(T, I), batch_size=B)
        h = inp
    if rng.random() < 0.3:
        h = keras.layers.Dropout(0.2)(h)
        desc["dropout_layer"] = True
    h = add_lstm_layers(rng, h, desc, layers)
    h = add_dense_head(rng, h, desc)
    model = keras.Model(inp, h)

    in_gain = float(rng.choice([0.3, 1.0, 3.0]))
    shape = (B, T) if embed else (B, T, I)

    def sample():
        if embed:
            return rng.integers(0, desc["embed"], shape).astype(np.int32)
        return (in_gain * rng.standard_normal(shape)).astype(np.float32)

    calibration = [sample() for _ in range(32)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calibration)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    int_io = rng.random() < 0.6
    if int_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    desc["io"] = "int8" if int_io else "float"
    flatbuffer = conv.convert()

    interp = tf.lite.Interpreter(model_content=flatbuffer)
    interp.allocate_tensors()
    in_detail, out_detail = interp.get_input_details()[0], interp.get_output_details()[0]
    x = sample()
    if not embed and in_detail["dtype"] == np.int8:
        scale, zero = in_detail["quantization"]
        x = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)
    interp.set_tensor(in_detail["index"], x)
    interp.invoke()
    return flatbuffer, x, interp.get_tensor(out_detail["index"]).copy(), desc, out_detail


def dequantized_like_litert(flatbuffer, out_detail, out):
    """rnncore's int8 output through the DEQUANTIZE that ends LiteRT's float-output model."""
    interp = tf.lite.Interpreter(model_content=flatbuffer)
    interp.allocate_tensors()
    deq = [o for o in interp._get_ops_details()
           if o["op_name"] == "DEQUANTIZE" and out_detail["index"] in list(o["outputs"])]
    scale, zero = interp._get_tensor_details(int(deq[0]["inputs"][0]), 0)["quantization"]
    return (out.astype(np.int32) - zero).astype(np.float32) * np.float32(scale)


def check_seed(seed, rnncore, work):
    try:
        flatbuffer, x, y, desc, out_detail = build_and_convert(seed)
    except Exception as e:  # TensorFlow's converter or LiteRT failing is not rnncore's result
        return "CONVERSION FAILED", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    base = os.path.join(work, f"m{seed}")
    with open(base + ".tflite", "wb") as f:
        f.write(flatbuffer)
    np.save(base + ".x.npy", x)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "tflite_to_safetensors.py"), base + ".tflite",
                        "-o", base + ".safetensors"], capture_output=True, text=True)
    if r.returncode != 0:
        return "REFUSED", r.stderr.strip().splitlines()[-1][:300] + "  " + json.dumps(desc)
    r = subprocess.run([rnncore, "run", "--weights", base + ".safetensors", "--input", base + ".x.npy",
                        "--output", base + ".out.npy"], capture_output=True, text=True)
    if r.returncode != 0:
        return "RUN FAILED", r.stderr.strip()[-300:] + "  " + json.dumps(desc)
    out = np.load(base + ".out.npy")
    if out_detail["dtype"] == np.float32 and out.dtype == np.int8:
        out = dequantized_like_litert(flatbuffer, out_detail, out)
    if out.shape == y.shape and np.array_equal(out.astype(y.dtype), y):
        return "EQUAL", f"{out.shape}  {json.dumps(desc)}"
    differ = int(np.sum(out.reshape(-1) != y.reshape(-1))) if out.size == y.size else -1
    return "DIFFER", f"{out.shape} vs {y.shape}, {differ} values differ  {json.dumps(desc)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rnncore", default=os.path.join(ROOT, "build", "tools", "rnncore"))
    ap.add_argument("--first", type=int, default=200, help="first seed (default 200)")
    ap.add_argument("--count", type=int, default=51, help="number of seeds (default 51)")
    args = ap.parse_args()
    if not os.access(args.rnncore, os.X_OK):
        sys.exit(f"check_keras_int8_random: no rnncore at {args.rnncore} (build it, or pass --rnncore)")
    counts = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="rnncore-keras-int8-") as work:
        for seed in range(args.first, args.first + args.count):
            verdict, detail = check_seed(seed, args.rnncore, work)
            counts[verdict] += 1
            print(f"seed {seed}: {verdict} {detail}", flush=True)
    print(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    sys.exit(1 if counts["DIFFER"] or counts["RUN FAILED"] else 0)


if __name__ == "__main__":
    main()

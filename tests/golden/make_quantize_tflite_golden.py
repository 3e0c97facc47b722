#!/tmp/tfenv/bin/python
"""The same Keras LSTM and calibration data quantized by TFLite's converter, for comparing its
choice of scales with `rnncore quantize`'s (tests/test_cli.cpp). Output in tests/data/quantize/:

  keras_lstm.safetensors    the float Keras LSTM (kernel [I, 4H], recurrent_kernel [H, 4H],
                            bias [4H]; metadata format=keras, mode=lstm): what rnncore quantize reads
  keras_calib.npy           float32 [B=64, T=30, I=6], batch-first: the representative data set, its
                            16 batches of 4 rows stacked along B (each row starts from a zero state,
                            in TFLite's calibration as in rnncore's)
  keras_tflite.safetensors  TFLite's full-integer conversion of that model with that data set
                            (float32 input and output), as tools/tflite_to_safetensors.py writes it
  keras_stack2_*            the same three files for two stacked LSTMs (I 6 -> H 20 -> H 12, both
                            returning sequences; kernel_l0 ... bias_l1), converted as one model

--stack-only writes the keras_stack2_* files alone.

Needs TensorFlow 2.21 with tf-keras (see make_tflite_int8_golden.py):
    /tmp/tfenv/bin/python tests/golden/make_quantize_tflite_golden.py
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import save_file  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import tflite_to_safetensors  # noqa: E402
from tf_to_safetensors import write_safetensors  # noqa: E402

OUT = os.path.normpath(os.path.join(HERE, "..", "data", "quantize"))
I, H, T, B, BATCHES = 6, 20, 30, 4, 16


def convert_and_save(model, float_tensors, calib, stem):
    """Converts `model` to full integer with `calib` (a list of [B, T, I] batches) as the
    representative dataset and writes <stem>_lstm.safetensors (the float Keras weights),
    <stem>_calib.npy (the batches stacked along B) and <stem>_tflite.safetensors (the conversion,
    as tools/tflite_to_safetensors.py writes it)."""
    def representative():
        for c in calib:
            yield [c]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    fb = conv.convert()
    weights, meta, _ = tflite_to_safetensors.extract(fb, tf)
    meta["source"] = "make_quantize_tflite_golden.py (TFLite converter)"

    os.makedirs(OUT, exist_ok=True)
    save_file(float_tensors, os.path.join(OUT, stem + "_lstm.safetensors"), {"format": "keras", "mode": "lstm"})
    np.save(os.path.join(OUT, stem + "_calib.npy"), np.concatenate(calib, axis=0))
    write_safetensors(os.path.join(OUT, stem + "_tflite.safetensors"), sorted(weights.items()), meta)
    print({k: meta[k] for k in sorted(meta)})


def boost(layer, h, rng):
    """A larger gain (x2) and a forget bias near 1, so that |c| exceeds 1 (a cell scale coarser than
    2^-15). Returns the layer's weights after it."""
    kernel, rkernel, bias = layer.get_weights()
    bias = bias + rng.uniform(-0.5, 0.5, bias.shape).astype(np.float32)
    bias[h:2 * h] += np.float32(1.0)
    layer.set_weights([kernel * np.float32(2.0), rkernel * np.float32(2.0), bias])
    return layer.get_weights()


def main():
    tf.keras.utils.set_random_seed(21)
    rng = np.random.default_rng(21)
    inp = keras.Input(shape=(T, I), batch_size=B)
    layer = keras.layers.LSTM(H, return_sequences=True)
    model = keras.Model(inp, layer(inp))
    kernel, rkernel, bias = boost(layer, H, rng)

    shift = rng.uniform(-0.3, 0.6, I).astype(np.float32)
    calib = [(1.5 * rng.standard_normal((B, T, I)) + shift).astype(np.float32) for _ in range(BATCHES)]
    # keras_lstm.safetensors, keras_calib.npy, keras_tflite.safetensors
    convert_and_save(model, {"kernel": kernel, "recurrent_kernel": rkernel, "bias": bias}, calib, "keras")


def stack2():
    """Two stacked LSTMs (20 then 12 units), both with every |c| above 1/2 on the calibration data, so
    that the converter's cell scales are ones rnncore quantize also takes (2^-15 or coarser)."""
    tf.keras.utils.set_random_seed(22)
    rng = np.random.default_rng(22)
    sizes = (20, 12)
    inp = keras.Input(shape=(T, I), batch_size=B)
    layers = [keras.layers.LSTM(h, return_sequences=True) for h in sizes]
    out = inp
    for layer in layers:
        out = layer(out)
    model = keras.Model(inp, out)
    tensors = {}
    for k, (layer, h) in enumerate(zip(layers, sizes)):
        kernel, rkernel, bias = boost(layer, h, rng)
        tensors.update({f"kernel_l{k}": kernel, f"recurrent_kernel_l{k}": rkernel, f"bias_l{k}": bias})

    shift = rng.uniform(-0.3, 0.6, I).astype(np.float32)
    calib = [(1.5 * rng.standard_normal((B, T, I)) + shift).astype(np.float32) for _ in range(BATCHES)]
    convert_and_save(model, tensors, calib, "keras_stack2")


if __name__ == "__main__":
    if "--stack-only" not in sys.argv[1:]:
        main()
    stack2()

#!/tmp/tfenv/bin/python
"""The four public LSTM models of the Cortex-M record (Plumerai, Nov 2022), rebuilt from the
TensorFlow / Keras tutorials, converted to full-integer int8 by the TFLite converter, with LiteRT's
and TensorFlow's outputs on a sample kept as goldens (bench/mcu_models/README.md).

Needs TensorFlow 2.21 with tf-keras (a venv outside the repository, as tests/golden/ does):
    /usr/bin/python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu tf-keras safetensors numpy
    /tmp/tfenv/bin/python bench/mcu_models/make_models.py            # all four
    /tmp/tfenv/bin/python bench/mcu_models/make_models.py weather    # one

Per model NAME it writes into bench/mcu_models/:
  NAME.tflite               the converted model (int8 weights, int8 output; int8 or token-id input)
  NAME.safetensors          its conversion by tools/tflite_to_safetensors.py (what rnncore runs)
  NAME_input.npy            the sample: token ids int32 [B, T], or int8 [1, T, I] (weather); B = 8
                            sequences for the models with one output per sequence (simple, bidi),
                            else 1
  NAME_expected_y.npy       LiteRT's int8 output for it (a fresh interpreter: zero initial state)
  NAME_f32_y.npy            TensorFlow's float output of the Keras model on the same sample (ids,
                            or the float input whose quantization is NAME_input.npy)
and for the weather model also
  weather_f32_input.npy     float32 [1, 24, 19], the float sample
  weather_f32.safetensors   the Keras float LSTM in rnncore's canonical layout (W0_l0 ...) and the
                            Dense layer (dense_w [1, 32], dense_b [1]), for the f32 firmware
  weather_state_h0.npy, weather_state_c0.npy, weather_state_expected_y.npy
                            a non-zero initial state (int8 h, int16 c) set in LiteRT's variable
                            tensors before invoke(), and LiteRT's output from it
  weather_extra.h           those, the Dense layer, the float sample and output as C arrays
                            (weather_extra.py)

Weights are Keras's seeded initial ones (glorot / orthogonal, unit forget bias), the Dense biases
drawn uniformly in +-0.3 (Keras's zero biases would be dropped by the converter); calibration: 64
random samples of the model's input. Seeds are fixed and the converter's calibration is
deterministic, so a rerun reproduces the files (checked with md5sum on TF 2.21.0).
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "golden"))
from safetensors_io import save_file  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import tflite_to_safetensors  # noqa: E402

import weather_extra  # noqa: E402  (bench/mcu_models/weather_extra.py)

# name: (vocabulary or None, embedding width or input features, LSTM layers ("lstm"/"bi", units,
# return_sequences), steps T, Dense head (units, activation) or None, seed). README.md says where
# each size comes from and which ones Plumerai did not publish.
MODELS = {
    # Keras RNN guide, "simple LSTM": Embedding(1000, 64) -> LSTM(128) -> Dense(10); T chosen: 100
    "simple": (1000, 64, (("lstm", 128, False),), 100, (10, None), 51),
    # TF time-series tutorial, lstm_model: LSTM(32, return_sequences=True) -> Dense(1) over the
    # wide window of 24 hours of 19 features
    "weather": (None, 19, (("lstm", 32, True),), 24, (1, None), 52),
    # TF text generation tutorial (Shakespeare), 65 characters, Embedding 256, seq_length 100; the
    # tutorial's RNN is a GRU(1024): an LSTM here (Plumerai's), of 512 units (int8 weights 1.5 MiB,
    # 1024 would need 5 MiB, more than the STM32L4R9's 2 MiB of flash); logits for every step
    "text": (65, 256, (("lstm", 512, True),), 100, (65, None), 53),
    # Keras IMDB bidirectional LSTM: Embedding(20000, 128) -> Bidirectional(LSTM(64, seq)) ->
    # Bidirectional(LSTM(64)) -> Dense(1, sigmoid); vocabulary 2000 (the table is 2.5 MiB at 20000)
    # and 16 steps (the example's 200 would need 25 KiB for layer 0's output alone)
    "bidi": (2000, 128, (("bi", 64, True), ("bi", 64, False)), 16, (1, "sigmoid"), 54),
}


def build(name):
    V, E, layers, T, head, seed = MODELS[name]
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(1000 + seed)
    if V:
        inp = keras.Input(shape=(T,), batch_size=1, dtype="int32")
        h = keras.layers.Embedding(V, E, embeddings_initializer=keras.initializers.RandomUniform(-1, 1))(inp)
    else:
        inp = keras.Input(shape=(T, E), batch_size=1)
        h = inp
    for kind, units, rs in layers:
        lstm = keras.layers.LSTM(units, return_sequences=rs)
        h = keras.layers.Bidirectional(lstm, merge_mode="concat")(h) if kind == "bi" else lstm(h)
    dense = keras.layers.Dense(head[0], activation=head[1])
    h = dense(h)
    w, b = dense.get_weights()
    dense.set_weights([w, rng.uniform(-0.3, 0.3, b.shape).astype(np.float32)])
    model = keras.Model(inp, h)

    def sample():
        if V:
            return rng.integers(0, V, (1, T)).astype(np.int32)
        return rng.standard_normal((1, T, E)).astype(np.float32)

    calib = [sample() for _ in range(64)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if not V:
        conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    fb = conv.convert()
    _, meta, info = tflite_to_safetensors.extract(fb, tf)
    tflite = os.path.join(HERE, name + ".tflite")
    with open(tflite, "wb") as f:
        f.write(fb)
    assert tflite_to_safetensors.main([tflite, "-o", os.path.join(HERE, name + ".safetensors")]) == 0

    # The sample: one sequence; for a last-step model (one output per sequence) eight, each run by
    # a fresh interpreter (the model's batch is 1), stacked as the sample's batch rows.
    rows = 1 if layers[-1][2] else 8
    xf = np.concatenate([sample() for _ in range(rows)])
    if V:
        xq = xf
    else:
        s, z = info["graph_input"]["quantization"]
        xq = np.clip(np.round(xf / s) + z, -128, 127).astype(np.int8)
    ys, yf = [], []
    for b in range(rows):
        it = tf.lite.Interpreter(model_content=fb)
        it.allocate_tensors()
        it.set_tensor(info["graph_input"]["index"], xq[b:b + 1])
        it.invoke()
        ys.append(it.get_tensor(info["graph_output"]["index"]).copy())
        yf.append(model(xf[b:b + 1]).numpy().astype(np.float32))
    y = np.concatenate(ys)
    np.save(os.path.join(HERE, name + "_input.npy"), xq)
    np.save(os.path.join(HERE, name + "_expected_y.npy"), y)
    np.save(os.path.join(HERE, name + "_f32_y.npy"), np.concatenate(yf))
    print(name, "layers", meta.get("layers", "1"), "dense", meta.get("dense"), "y", y.shape, y.dtype)

    if name == "weather":
        np.save(os.path.join(HERE, "weather_f32_input.npy"), xf)
        lstm = model.layers[1]
        kernel, rec, bias = lstm.get_weights()
        H = rec.shape[0]
        t = {}
        for k in range(4):  # Keras gate order i, f, c, o = canonical i, f, g, o
            t["W%d_l0" % k] = np.ascontiguousarray(kernel[:, k * H:(k + 1) * H].T)
            t["R%d_l0" % k] = np.ascontiguousarray(rec[:, k * H:(k + 1) * H].T)
            t["bW%d_l0" % k] = bias[k * H:(k + 1) * H].copy()
            t["bR%d_l0" % k] = np.zeros(H, np.float32)
        dw, db = model.layers[2].get_weights()
        t["dense_w"] = np.ascontiguousarray(dw.T)
        t["dense_b"] = db
        save_file(t, os.path.join(HERE, "weather_f32.safetensors"),
                  metadata={"made_by": "bench/mcu_models/make_models.py", "tf_version": tf.__version__})
        # A non-zero initial state: LiteRT's variable tensors set before invoke().
        (hi, ci), = info["states"]
        h0 = rng.integers(-100, 100, (1, H)).astype(np.int8)
        c0 = rng.integers(-12000, 12000, (1, H)).astype(np.int16)
        it = tf.lite.Interpreter(model_content=fb)
        it.allocate_tensors()
        it.set_tensor(hi, h0)
        it.set_tensor(ci, c0)
        it.set_tensor(info["graph_input"]["index"], xq)
        it.invoke()
        ys = it.get_tensor(info["graph_output"]["index"]).copy()
        assert not np.array_equal(ys, y)
        np.save(os.path.join(HERE, "weather_state_h0.npy"), h0)
        np.save(os.path.join(HERE, "weather_state_c0.npy"), c0)
        np.save(os.path.join(HERE, "weather_state_expected_y.npy"), ys)
        weather_extra.main()  # weather_extra.h, the C arrays of these


if __name__ == "__main__":
    names = sys.argv[1:] or list(MODELS)
    if len(names) == 1:
        build(names[0])
    else:  # each model in a process of its own: TensorFlow's function names count across models
        import subprocess
        for n in names:
            subprocess.run([sys.executable, os.path.abspath(__file__), n], check=True)

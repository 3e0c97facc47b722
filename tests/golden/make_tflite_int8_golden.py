#!/tmp/tfenv/bin/python
"""Golden data for rnncore's integer LSTM: tests/golden/tflite_int8/<case>.safetensors (+ <case>.tflite)

Needs TensorFlow 2.21 with tf-keras (a venv outside the repository, as for make_tf_golden.py):
    /usr/bin/python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu tf-keras numpy
    /tmp/tfenv/bin/python tests/golden/make_tflite_int8_golden.py
    /tmp/tfenv/bin/python tests/golden/make_tflite_int8_golden.py --embeddings-only   # the Embedding cases alone
    /tmp/tfenv/bin/python tests/golden/make_tflite_int8_golden.py --bidi-merge-only   # merge_mode sum/mul/ave alone
    /tmp/tfenv/bin/python tests/golden/make_tflite_int8_golden.py --stack-states-only # adds hn, cn to the stacks' io files
    /tmp/tfenv/bin/python tests/golden/make_tflite_int8_golden.py --softmax-shapes-only # Softmax layers, narrower backward LSTM

For each case a small tf.keras model `Input(batch B, T, I) -> LSTM(H)` (unidirectional,
return_sequences on or off) with seeded random weights is converted by the TFLite converter to a
full-integer model (representative dataset, TFLITE_BUILTINS_INT8, int8 input and output). The
converter fuses the Keras LSTM into one UNIDIRECTIONAL_SEQUENCE_LSTM op with int8 weights, int32
biases, an int8 output state and an int16 cell state: LiteRT's integer "8x8_16" LSTM
(tensorflow/lite/kernels/lstm_eval.cc, LstmStepInteger8x8_16). The script reads the weights and
quantization with the model converter's own code (tools/tflite_to_safetensors.py, extract(): it
checks the op, its variant and operand types), checks that the model holds exactly that op (with
return_sequences off, a STRIDED_SLICE follows it), then runs TFLite's interpreter on a seeded int8
input and stores, in one safetensors file per case:

  x          I8  [B, T, I]   the int8 input given to the interpreter
  y          I8  [B, T, H]   the interpreter's int8 output ([B, H] when return_sequences is off)
  w_i w_f w_c w_o  I8 [H, I] input weights per gate (TFLite order i, f, c(=g), o; symmetric, zp 0)
  r_i r_f r_c r_o  I8 [H, H] recurrent weights per gate
  b_i b_f b_c b_o  I32 [H]   gate biases (scale = weight scale x input scale, zp 0)
  h0 I8 [B, H], c0 I16 [B, H]  the op's variable state tensors before the run
  hn I8 [B, H], cn I16 [B, H]  the same tensors after the run (final states)

and in the metadata (strings; scales are float32 values written so they read back exactly):
  input_scale input_zp, w_<g>_scale, r_<g>_scale, b_<g>_scale, output_scale output_zp
  (the output tensor), output_state_scale output_state_zp (variable tensor 18), cell_scale
  (variable tensor 19, a power of two), hidden_scale hidden_zp (the op's intermediate
  "effective_hidden_scale_intermediate", intermediate 4 in lstm.cc), cell_clip proj_clip
  (the op's options), return_sequences, I H T B, tf_version.

The <case>.tflite file is the converted model itself (a few KiB); tools/tflite_to_safetensors.py
turns it into tests/golden/tflite_int8/converted/<case>.safetensors, which test_cli runs with
`rnncore run` against the y stored here (tests/golden/README.md). Seeds are fixed; the converter's calibration is
deterministic, so re-running reproduces the files (checked with md5sum on TF 2.21.0).
"""
import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import load_file, save_file  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import tflite_to_safetensors  # noqa: E402
from tflite_to_safetensors import IN_C, IN_H  # noqa: E402

OUT = os.path.join(HERE, "tflite_int8")

# name, I, H, T, B, return_sequences, weight gain (scales the Keras initial weights, so that the
# cell state grows and the converter picks a coarser power-of-two cell scale), input gain, seed,
# and optionally a constant added to the forget and input gates' biases (long memory: with
# f near 1 and i near 1 the cell state integrates over many steps and needs a coarser scale) and
# one added to the cell gate's bias (a drift: g keeps one sign, so |c| grows about linearly in t)
CASES = [
    ("lstm_I3_H4_T5_B1_seq", 3, 4, 5, 1, True, 1.0, 1.0, 1),
    ("lstm_I8_H16_T6_B2_seq", 8, 16, 6, 2, True, 1.0, 1.0, 2),
    ("lstm_I16_H32_T8_B2_last", 16, 32, 8, 2, False, 1.0, 1.0, 3),
    ("lstm_I5_H8_T7_B1_seq_gain3", 5, 8, 7, 1, True, 3.0, 2.0, 4),
    ("lstm_I12_H24_T8_B2_seq_gain2", 12, 24, 8, 2, True, 2.0, 3.0, 5),
    ("lstm_I4_H12_T6_B1_last_gain4", 4, 12, 6, 1, False, 4.0, 1.5, 6),
    ("lstm_I4_H8_T40_B1_seq_memory", 4, 8, 40, 1, True, 4.0, 2.0, 7, 5.0),
    ("lstm_I6_H10_T48_B2_seq_memory", 6, 10, 48, 2, True, 3.0, 2.0, 9, 3.0),
    ("lstm_I4_H8_T24_B1_seq_clip", 4, 8, 24, 1, True, 2.0, 1.0, 10, 6.0, 3.0),
    # a negative constant on the input and forget gates keeps |c| below 1/2 (or 1/8): the converter
    # picks a cell scale finer than 2^-15, where LiteRT's tanh of the cell state has no case and
    # the input gate stands in for it (docs/int8.md)
    ("lstm_I2_H24_T10_B1_seq_fine16", 2, 24, 10, 1, True, 1.0, 1.0, 11, -1.7),
    ("lstm_I3_H16_T12_B2_seq_fine18", 3, 16, 12, 2, True, 1.0, 1.0, 12, -3.0),
    # the firmware example's model (examples/firmware_int8, write_example below): the shape of the
    # float firmware example (examples/firmware), 50 steps of 4 rows
    ("lstm_I16_H32_T50_B4_seq", 16, 32, 50, 4, True, 1.0, 1.0, 13),
]
EXAMPLE_CASE = "lstm_I16_H32_T50_B4_seq"
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "models")

# The order of the metadata keys in the committed files (so that re-running reproduces them byte for
# byte); the values come from the converter's extract().
META_KEYS = ["op", "I", "H", "T", "B", "return_sequences", "input_scale", "input_zp", "output_scale", "output_zp",
             "cell_clip", "proj_clip", "tf_version", "made_by"] + \
    [f"{p}_{g}_scale" for g in "ifco" for p in "wrb"] + \
    ["output_state_scale", "output_state_zp", "cell_scale", "hidden_scale", "hidden_zp"]


def make_case(name, I, H, T, B, return_sequences, gain, in_gain, seed, memory_bias=0.0, drift=0.0):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(1000 + seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    layer = keras.layers.LSTM(H, return_sequences=return_sequences)
    model = keras.Model(inp, layer(inp))
    kernel, rkernel, bias = layer.get_weights()
    bias = bias + rng.uniform(-0.5, 0.5, bias.shape).astype(np.float32)
    bias[: 2 * H] += np.float32(memory_bias)  # Keras bias order i, f, c, o
    bias[2 * H : 3 * H] += np.float32(drift)
    layer.set_weights([kernel * gain, rkernel * gain, bias])

    calib = [(in_gain * rng.standard_normal((B, T, I))).astype(np.float32) for _ in range(64)]

    def representative():
        for c in calib:
            yield [c]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    fb = conv.convert()

    # The model's weights and quantization, read as tools/tflite_to_safetensors.py reads them (it
    # also checks the op, its variant and operand types).
    weights, conv_meta, info = tflite_to_safetensors.extract(fb, tf)
    assert conv_meta["graph_input"] == conv_meta["graph_output"] == "int8", conv_meta
    assert conv_meta["return_sequences"] == ("1" if return_sequences else "0"), conv_meta
    it, ins = info["interpreter"], info["inputs"]
    names = [o["op_name"] for o in it._get_ops_details()]
    expect = ["UNIDIRECTIONAL_SEQUENCE_LSTM"] + ([] if return_sequences else ["STRIDED_SLICE"])
    assert names == expect, f"{name}: ops {names}, expected {expect}"
    in_det, out_det = info["graph_input"], info["graph_output"]
    in_scale, in_zp = float(conv_meta["input_scale"]), int(conv_meta["input_zp"])

    xf = (in_gain * rng.standard_normal((B, T, I))).astype(np.float32)
    x = np.clip(np.round(xf / in_scale) + in_zp, -128, 127).astype(np.int8)

    h0 = it.get_tensor(ins[IN_H]).copy()
    c0 = it.get_tensor(ins[IN_C]).copy()
    it.set_tensor(in_det["index"], x)
    it.invoke()
    y = it.get_tensor(out_det["index"]).copy()
    hn = it.get_tensor(ins[IN_H]).copy()
    cn = it.get_tensor(ins[IN_C]).copy()

    tensors = {"x": x, "y": y, "h0": h0.astype(np.int8), "c0": c0.astype(np.int16),
               "hn": hn.astype(np.int8), "cn": cn.astype(np.int16)}
    tensors.update(weights)
    conv_meta.update({"T": str(T), "B": str(B), "made_by": "tests/golden/make_tflite_int8_golden.py"})
    meta = {k: conv_meta[k] for k in META_KEYS}

    assert tensors["w_i"].shape == (H, I) and tensors["r_i"].shape == (H, H)
    assert y.shape == ((B, T, H) if return_sequences else (B, H))
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
    with open(os.path.join(OUT, name + ".tflite"), "wb") as f:
        f.write(fb)
    return meta, y


# Stacked LSTMs (Keras LSTM layers one after another; the converter writes one fused op each):
# name, I, hidden sizes, T, B, return_sequences of the last layer, seed, and optionally go_backwards
# for the first layer (the converter writes a REVERSE_V2 of the time axis before it). Written to
# tflite_int8/stacks/<name>.tflite, the converted model <name>.safetensors, and <name>.io.safetensors
# (the int8 input x, LiteRT's output y, and every LSTM op's final states: hn int8 and cn int16, the
# [B, H] blocks of layer 0 (forward, then backward), layer 1, ... flattened, as `rnncore run --hn
# --cn` writes them for a stack).
STACKS = [
    ("stack2_I6_H12_8_T10_B2_last", 6, (12, 8), 10, 2, False, 21),
    ("stack3_I4_H16_16_8_T12_B3_seq", 4, (16, 16, 8), 12, 3, True, 22),
    ("stack2_I10_H24_32_T20_B1_seq", 10, (24, 32), 20, 1, True, 23),
    ("backwards_I6_H12_T10_B2_seq", 6, (12,), 10, 2, True, 24, True),
    ("backwards_stack2_I5_H16_8_T9_B2_last", 5, (16, 8), 9, 2, False, 25, True),
    # Dense layers on the last step (FULLY_CONNECTED, per-channel weights; LiteRT runs them on XNNPACK):
    # (units, activation) each, with random biases (Keras's zero biases would be dropped)
    ("dense_I6_H12_T10_B2_relu7_3", 6, (12,), 10, 2, False, 26, False, ((7, "relu"), (3, None))),
    ("dense_stack2_I8_H16_12_T15_B3_5", 8, (16, 12), 15, 3, False, 27, False, ((5, None),)),
    # Classifier heads: Dense(..., activation="softmax") is a FULLY_CONNECTED and a SOFTMAX op
    ("dense_softmax_I6_H12_T10_B4_softmax5", 6, (12,), 10, 4, False, 28, False, ((5, "softmax"),)),
    ("dense_softmax_stack2_I5_H16_10_T8_B3_relu8_softmax4", 5, (16, 10), 8, 3, False, 29, False,
     ((8, "relu"), (4, "softmax"))),
    # Dense(..., activation="sigmoid" / "tanh"): a FULLY_CONNECTED and a LOGISTIC / TANH op
    ("dense_sigmoid_I5_H10_T8_B6_sigmoid1", 5, (10,), 8, 6, False, 30, False, ((1, "sigmoid"),)),
    ("dense_tanh_stack2_I4_H12_8_T6_B3_tanh6_3", 4, (12, 8), 6, 3, False, 31, False, ((6, "tanh"), (3, None))),
    # Dense layers and a softmax on every step (keep_num_dims FULLY_CONNECTED on [B, T, H])
    ("dense_seq_I5_H10_T7_B3_relu4_softmax3", 5, (10,), 7, 3, True, 33, False, ((4, "relu"), (3, "softmax"))),
    # A classifier head through export-c and the C API (tests/int8_head_header.c)
    ("dense_head_I6_H14_T9_B5_sigmoid8_softmax3", 6, (14,), 9, 5, False, 32, False, ((8, "sigmoid"), (3, "softmax"))),
]


def convert_with_head(inp, h, dense, rng, shape):
    """Adds Dense layers ((units, activation) each, random biases: Keras's zero biases would be
    dropped) on h, converts the Keras model with full-integer quantization (int8 I/O, 64
    calibration batches of `shape`) and extracts it: (flatbuffer, metadata, info)."""
    for units, activation in dense:
        layer = keras.layers.Dense(units, activation=activation)
        h = layer(h)
        w, b = layer.get_weights()
        layer.set_weights([w, rng.uniform(-0.3, 0.3, b.shape).astype(np.float32)])
    model = keras.Model(inp, h)
    calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(64)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    fb = conv.convert()
    _, meta, info = tflite_to_safetensors.extract(fb, tf)
    return fb, meta, info


def run_litert(fb, info, rng, shape):
    """(x, y): a random int8 input of `shape` and LiteRT's output for it. A fresh default interpreter
    (XNNPACK takes the Dense layers): its LSTM state variables would carry over between invoke()s."""
    it = tf.lite.Interpreter(model_content=fb)
    it.allocate_tensors()
    s, z = info["graph_input"]["quantization"]
    x = np.clip(np.round(rng.standard_normal(shape) / s) + z, -128, 127).astype(np.int8)
    it.set_tensor(info["graph_input"]["index"], x)
    it.invoke()
    return x, it.get_tensor(info["graph_output"]["index"]).copy()


def final_states(fb, x, y):
    """(hn, cn): every LSTM op's variable output and cell state after LiteRT's default interpreter
    runs the model on x from its initial state, flattened in rnncore's order (layer by layer, a
    bidirectional layer's forward direction first). Checks that the run gives y."""
    _, _, info = tflite_to_safetensors.extract(fb, tf)
    it = tf.lite.Interpreter(model_content=fb)
    it.allocate_tensors()
    it.set_tensor(info["graph_input"]["index"], x)
    it.invoke()
    assert np.array_equal(it.get_tensor(info["graph_output"]["index"]), y)
    hn = np.concatenate([it.get_tensor(h).reshape(-1) for h, _ in info["states"]]).astype(np.int8)
    cn = np.concatenate([it.get_tensor(c).reshape(-1) for _, c in info["states"]]).astype(np.int16)
    return hn, cn


def write_stack_io(name, fb, x, y):
    """tflite_int8/stacks/<name>.io.safetensors: x, y and the final states (final_states)."""
    hn, cn = final_states(fb, x, y)
    save_file({"x": x, "y": y, "hn": hn, "cn": cn}, os.path.join(OUT, "stacks", name + ".io.safetensors"),
              metadata={"made_by": "tests/golden/make_tflite_int8_golden.py", "tf_version": tf.__version__})


def write_stack_golden(name, fb, x, y):
    """tflite_int8/stacks/<name>.tflite, its conversion <name>.safetensors and <name>.io.safetensors."""
    out = os.path.join(OUT, "stacks")
    os.makedirs(out, exist_ok=True)
    tflite = os.path.join(out, name + ".tflite")
    with open(tflite, "wb") as f:
        f.write(fb)
    assert tflite_to_safetensors.main([tflite, "-o", os.path.join(out, name + ".safetensors")]) == 0
    write_stack_io(name, fb, x, y)


def add_stack_states():
    """Rewrites every committed stack golden's io file with its final states, from the committed
    .tflite and x (y checked unchanged)."""
    out = os.path.join(OUT, "stacks")
    for f in sorted(os.listdir(out)):
        if f.endswith(".io.safetensors"):
            name = f[:-len(".io.safetensors")]
            t, _ = load_file(os.path.join(out, f))
            with open(os.path.join(out, name + ".tflite"), "rb") as g:
                write_stack_io(name, g.read(), t["x"], t["y"])


def make_stack(name, I, sizes, T, B, return_sequences, seed, go_backwards=False, dense=()):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(2000 + seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    h = inp
    for k, H in enumerate(sizes):
        h = keras.layers.LSTM(H, return_sequences=return_sequences or k + 1 < len(sizes),
                              go_backwards=go_backwards and k == 0)(h)
    fb, meta, info = convert_with_head(inp, h, dense, rng, (B, T, I))
    assert meta.get("layers", "1") == str(len(sizes)), meta
    assert meta.get("reverse_input", "0") == ("1" if go_backwards else "0"), meta
    assert meta.get("dense", "0") == str(len(dense)), meta
    assert meta.get("softmax", "0") == ("1" if dense and dense[-1][1] == "softmax" else "0"), meta
    x, y = run_litert(fb, info, rng, (B, T, I))
    width = dense[-1][0] if dense else sizes[-1]
    assert y.shape == ((B, T, width) if return_sequences else (B, width))
    write_stack_golden(name, fb, x, y)


# A Keras Softmax layer with no Dense layer before it, or after an activated Dense layer (the
# converter's SOFTMAX after the last step, after the LSTM's every step, or after a FULLY_CONNECTED
# with relu / a LOGISTIC): name, I, H, T, B, return_sequences, seed, Dense layers before the
# Softmax. io::load_model holds each as a head of weight 1 and scale 1 (exact) with the softmax.
# And a Keras Bidirectional whose backward LSTM is narrower (backward_layer=LSTM(4)), which the
# converter writes and io::load_model refuses (a StackSpec layer has one width): name, I, H fw, H bw,
# T, B, seed. Written to tflite_int8/stacks/ as the stacks above.
SOFTMAX_SHAPES = [
    ("softmax_I5_H8_T7_B3_last", 5, 8, 7, 3, False, 61, ()),
    ("softmax_seq_I4_H6_T6_B2_seq", 4, 6, 6, 2, True, 62, ()),
    ("dense_relu_softmax_I6_H10_T8_B3_relu5_softmax", 6, 10, 8, 3, False, 63, ((5, "relu"),)),
    ("dense_sigmoid_softmax_I5_H8_T6_B2_sigmoid4_softmax", 5, 8, 6, 2, False, 64, ((4, "sigmoid"),)),
]
BIDI_WIDTHS = ("bidi_widths_I4_H6_4_T5_B2_seq", 4, 6, 4, 5, 2, 65)


def make_softmax_shape(name, I, H, T, B, return_sequences, seed, dense):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(2000 + seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    h = keras.layers.LSTM(H, return_sequences=return_sequences)(inp)
    for units, activation in dense:
        layer = keras.layers.Dense(units, activation=activation)
        h = layer(h)
        w, b = layer.get_weights()
        layer.set_weights([w, rng.uniform(-0.3, 0.3, b.shape).astype(np.float32)])
    h = keras.layers.Softmax()(h)
    fb, meta, info = convert_with_head(inp, h, (), rng, (B, T, I))
    assert meta.get("dense", "0") == str(len(dense)), meta
    assert meta.get("softmax", "0") == "1", meta
    x, y = run_litert(fb, info, rng, (B, T, I))
    width = dense[-1][0] if dense else H
    assert y.shape == ((B, T, width) if return_sequences else (B, width)), y.shape
    write_stack_golden(name, fb, x, y)


def make_bidi_widths(name, I, H, Hb, T, B, seed):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(2000 + seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    h = keras.layers.Bidirectional(keras.layers.LSTM(H, return_sequences=True),
                                   backward_layer=keras.layers.LSTM(Hb, return_sequences=True, go_backwards=True))(inp)
    fb, meta, info = convert_with_head(inp, h, (), rng, (B, T, I))
    assert (meta["l0.fw.H"], meta["l0.bw.H"]) == (str(H), str(Hb)), meta
    x, y = run_litert(fb, info, rng, (B, T, I))
    write_stack_golden(name, fb, x, y)


# Keras Bidirectional(LSTM) layers (merge_mode concat; the converter writes a forward LSTM op, a
# REVERSE_V2, a backward LSTM op, a REVERSE_V2 of its output (every step) or STRIDED_SLICEs of both
# last steps, and a CONCATENATION): name, I, layers ("bi" or "lstm", H, return_sequences), T, B,
# seed, Dense head ((units, activation) each). Written to tflite_int8/stacks/ as the stacks above.
BIDI = [
    ("bidi_I5_H6_T7_B2_seq", 5, (("bi", 6, True),), 7, 2, 31),
    ("bidi_dense_I7_H8_T9_B3_last_4_3", 7, (("bi", 8, False),), 9, 3, 32, ((4, "relu"), (3, None))),
    ("bidi_stack2_I6_H8_6_T8_B2_last", 6, (("bi", 8, True), ("lstm", 6, False)), 8, 2, 33),
    ("bidi_stack2_I4_H6_5_T6_B2_seq_bibi", 4, (("bi", 6, True), ("bi", 5, True)), 6, 2, 34),
]


# Keras Bidirectional(LSTM) with merge_mode sum, mul and ave: the directions meet in an int8 ADD, a
# MUL, or an ADD and a MUL by a constant 0.5 (LiteRT runs them on XNNPACK). Layers as BIDI's, with
# the kind "bi" replaced by the merge mode.
BIDI_MERGE = [
    ("bidi_sum_I5_H8_T7_B2_seq", 5, (("sum", 8, True),), 7, 2, 51),
    ("bidi_mul_dense_I6_H6_T8_B3_last_4", 6, (("mul", 6, False),), 8, 3, 52, ((4, None),)),
    ("bidi_ave_stack2_I4_H6_5_T6_B2_seq", 4, (("ave", 6, True), ("ave", 5, True)), 6, 2, 53),
    ("bidi_sum_stack2_I7_H10_6_T9_B2_dense_softmax3", 7, (("sum", 10, True), ("lstm", 6, False)), 9, 2, 54,
     ((3, "softmax"),)),
]


def make_bidi(name, I, layers, T, B, seed, dense=()):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(2000 + seed)
    inp = keras.Input(shape=(T, I), batch_size=B)
    h = inp
    for kind, H, rs in layers:
        lstm = keras.layers.LSTM(H, return_sequences=rs)
        merge = "concat" if kind == "bi" else kind
        h = lstm(h) if kind == "lstm" else keras.layers.Bidirectional(lstm, merge_mode=merge)(h)
    fb, meta, info = convert_with_head(inp, h, dense, rng, (B, T, I))
    assert meta["layers"] == str(len(layers)), meta
    assert [meta.get("l%d.bidirectional" % k) for k in range(len(layers))] == \
        [None if kind == "lstm" else "concat" if kind == "bi" else kind for kind, _, _ in layers], meta
    assert meta.get("dense", "0") == str(len(dense)), meta
    assert meta.get("softmax", "0") == ("1" if dense and dense[-1][1] == "softmax" else "0"), meta
    x, y = run_litert(fb, info, rng, (B, T, I))
    last = layers[-1]
    width = dense[-1][0] if dense else last[1] * (2 if last[0] == "bi" else 1)
    assert y.shape == ((B, T, width) if last[2] else (B, width)), y.shape
    write_stack_golden(name, fb, x, y)


# Models that start with a Keras Embedding (token ids, int32 [B, T] -> int8 rows: the converter's
# GATHER of an int8 table): name, V, E, layers ("bi" or "lstm", H, return_sequences), T, B, seed,
# Dense head, the Embedding's initializer range. Written to tflite_int8/stacks/ as the stacks above.
EMBEDDINGS = [
    ("embed_V40_E8_H12_T9_B3_last", 40, 8, (("lstm", 12, False),), 9, 3, 41, (), 0.05),
    ("embed_stack2_V60_E6_H10_8_T7_B2_dense_softmax3", 60, 6, (("lstm", 10, True), ("lstm", 8, False)), 7, 2, 42,
     ((3, "softmax"),), 1.0),
    ("embed_bidi_V25_E5_H6_T6_B2_seq", 25, 5, (("bi", 6, True),), 6, 2, 43, (), 0.5),
]


def make_embedding(name, V, E, layers, T, B, seed, dense, init):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(2000 + seed)
    inp = keras.Input(shape=(T,), batch_size=B, dtype="int32")
    h = keras.layers.Embedding(V, E, embeddings_initializer=keras.initializers.RandomUniform(-init, init))(inp)
    for kind, H, rs in layers:
        lstm = keras.layers.LSTM(H, return_sequences=rs)
        h = keras.layers.Bidirectional(lstm, merge_mode="concat")(h) if kind == "bi" else lstm(h)
    for units, activation in dense:
        layer = keras.layers.Dense(units, activation=activation)
        h = layer(h)
        w, b = layer.get_weights()
        layer.set_weights([w, rng.uniform(-0.3, 0.3, b.shape).astype(np.float32)])
    calib = [rng.integers(0, V, (B, T)).astype(np.int32) for _ in range(64)]
    conv = tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, h))
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_output_type = tf.int8
    fb = conv.convert()
    _, meta, info = tflite_to_safetensors.extract(fb, tf)
    assert meta["graph_input"] == "token_ids" and meta["embedding.V"] == str(V) and meta["embedding.E"] == str(E), meta
    it = tf.lite.Interpreter(model_content=fb)
    it.allocate_tensors()
    x = rng.integers(0, V, (B, T)).astype(np.int32)
    x[0, 0], x[-1, -1] = 0, V - 1  # both ends of the vocabulary
    it.set_tensor(info["graph_input"]["index"], x)
    it.invoke()
    write_stack_golden(name, fb, x, it.get_tensor(info["graph_output"]["index"]).copy())


def check_embedding_refusals():
    """Embeddings the converter refuses, each naming why: a float Keras Input (a CAST to int32 before
    the GATHER) and a float conversion (a float32 table). Nothing is written."""
    for float_input, expect in ((True, "cast to integers (a CAST op)"), (False, "has a float32 table")):
        tf.keras.utils.set_random_seed(44)
        inp = keras.Input((5,), batch_size=1, dtype="float32" if float_input else "int32")
        model = keras.Model(inp, keras.layers.LSTM(4)(keras.layers.Embedding(10, 3)(inp)))
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        if float_input:  # full integer; the float input goes through a CAST
            calib = [np.random.default_rng(44).integers(0, 10, (1, 5)).astype(np.float32) for _ in range(8)]
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([c] for c in calib)
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        try:
            tflite_to_safetensors.extract(conv.convert(), tf)
        except tflite_to_safetensors.ConvertError as e:
            assert expect in str(e), (float_input, str(e))
        else:
            raise AssertionError("an Embedding with float_input=%s was not refused" % float_input)


def check_bidi_refusals():
    """Bidirectional variants the converter refuses, each naming what: go_backwards on the wrapped
    LSTM, with merge_mode concat and sum. Nothing is written."""
    for merge, go_backwards, expect in (("concat", True, "go_backwards=True"),
                                        ("sum", True, "go_backwards=True")):
        tf.keras.utils.set_random_seed(35)
        rng = np.random.default_rng(2035)
        inp = keras.Input(shape=(6, 4), batch_size=2)
        lstm = keras.layers.LSTM(5, return_sequences=True, go_backwards=go_backwards)
        model = keras.Model(inp, keras.layers.Bidirectional(lstm, merge_mode=merge)(inp))
        calib = [rng.standard_normal((2, 6, 4)).astype(np.float32) for _ in range(16)]
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([c] for c in calib)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        try:
            tflite_to_safetensors.extract(conv.convert(), tf)
        except tflite_to_safetensors.ConvertError as e:
            assert expect in str(e), (merge, go_backwards, str(e))
        else:
            raise AssertionError("Bidirectional merge_mode=%s go_backwards=%s was not refused" % (merge, go_backwards))


# The stacks whose exported headers tests/int8_<kind>_header.c run through the C API: their samples as .npy.
HEADER_STACK = "dense_stack2_I8_H16_12_T15_B3_5"
HEADER_HEAD = "dense_head_I6_H14_T9_B5_sigmoid8_softmax3"
HEADER_SEQ = "dense_seq_I5_H10_T7_B3_relu4_softmax3"
HEADER_BIDI = "bidi_stack2_I4_H6_5_T6_B2_seq_bibi"
HEADER_MERGE = "bidi_ave_stack2_I4_H6_5_T6_B2_seq"
HEADER_EMBED = "embed_stack2_V60_E6_H10_8_T7_B2_dense_softmax3"
HEADER_SOFTMAX = "dense_relu_softmax_I6_H10_T8_B3_relu5_softmax"
HEADER_BACKWARDS = "backwards_stack2_I5_H16_8_T9_B2_last"


def write_stack_sample(name):
    t, _ = load_file(os.path.join(OUT, "stacks", name + ".io.safetensors"))
    np.save(os.path.join(OUT, "stacks", name + ".x.npy"), t["x"])
    np.save(os.path.join(OUT, "stacks", name + ".y.npy"), t["y"])


def write_example(name):
    """examples/models/lstm_int8*: the converted model, the golden's int8 input and LiteRT's output
    (as .npy), which `rnncore export-c` turns into examples/firmware_int8's header."""
    tflite = os.path.join(OUT, name + ".tflite")
    for out in (os.path.join(OUT, "converted", name + ".safetensors"), os.path.join(EXAMPLES, "lstm_int8.safetensors")):
        assert tflite_to_safetensors.main([tflite, "-o", out]) == 0
    t, _ = load_file(os.path.join(OUT, name + ".safetensors"))
    np.save(os.path.join(EXAMPLES, "lstm_int8_input.npy"), t["x"])
    np.save(os.path.join(EXAMPLES, "lstm_int8_expected_y.npy"), t["y"])


def write_elementwise():
    """tflite_int8/elementwise/<op>_<k>.safetensors: LiteRT's int8 ADD and MUL (on XNNPACK, as in
    the merged Bidirectional layers) on every pair of int8 operands, a [65536] and b [65536] (a
    varies fastest), and their output y, for quantizations drawn from calibration; metadata
    op (ADD / MUL), a_scale a_zp b_scale b_zp y_scale y_zp. tests/test_int8_lstm.cpp replays them."""
    out = os.path.join(OUT, "elementwise")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2060)
    a = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    for k, op in enumerate(("ADD", "ADD", "MUL", "MUL")):
        ra, rb = rng.uniform(0.2, 3.0, 2)
        ia, ib = keras.Input(shape=(65536,), batch_size=1), keras.Input(shape=(65536,), batch_size=1)
        o = (keras.layers.Add() if op == "ADD" else keras.layers.Multiply())([ia, ib])
        calib = [[rng.uniform(-ra, ra * rng.uniform(0.3, 1.0), (1, 65536)).astype(np.float32),
                  rng.uniform(-rb * rng.uniform(0.3, 1.0), rb, (1, 65536)).astype(np.float32)] for _ in range(8)]
        conv = tf.lite.TFLiteConverter.from_keras_model(keras.Model([ia, ib], o))
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: iter(calib)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
        it = tf.lite.Interpreter(model_content=conv.convert())
        it.allocate_tensors()
        the_op = [d for d in it._get_ops_details() if d["op_name"] == op][0]
        det = {d["index"]: d for d in it.get_tensor_details()}
        quant = [det[t]["quantization"] for t in (*the_op["inputs"], the_op["outputs"][0])]
        it.set_tensor(the_op["inputs"][0], a.reshape(1, -1))
        it.set_tensor(the_op["inputs"][1], b.reshape(1, -1))
        it.invoke()
        y = it.get_tensor(it.get_output_details()[0]["index"]).reshape(-1).copy()
        meta = {"op": op, "made_by": "tests/golden/make_tflite_int8_golden.py", "tf_version": tf.__version__}
        for key, (sc, zp) in zip(("a", "b", "y"), quant):
            meta.update({key + "_scale": tflite_to_safetensors.f32s(sc), key + "_zp": str(zp)})
        save_file({"a": a, "b": b, "y": y}, os.path.join(out, "%s_%d.safetensors" % (op.lower(), k)), metadata=meta)
        print("elementwise %s %d: a %s b %s y %s" % (op, k, quant[0], quant[1], quant[2]))


def main():
    print(f"TensorFlow {tf.__version__}")
    if sys.argv[1:] == ["--embeddings-only"]:  # adds the Embedding cases without rewriting the others
        for c in EMBEDDINGS:
            make_embedding(*c)
        check_embedding_refusals()
        write_stack_sample(HEADER_EMBED)
        return
    if sys.argv[1:] == ["--softmax-shapes-only"]:  # adds the Softmax-layer cases without rewriting the others
        for c in SOFTMAX_SHAPES:
            make_softmax_shape(*c)
        make_bidi_widths(*BIDI_WIDTHS)
        write_stack_sample(HEADER_SOFTMAX)
    write_stack_sample(HEADER_BACKWARDS)
        return
    if sys.argv[1:] == ["--stack-states-only"]:
        add_stack_states()
        return
    if sys.argv[1:] == ["--bidi-merge-only"]:  # adds the merge_mode cases without rewriting the others
        for c in BIDI_MERGE:
            make_bidi(*c)
        check_bidi_refusals()
        write_elementwise()
        write_stack_sample(HEADER_MERGE)
        return
    print(f"{'case':34s} {'in scale/zp':>18s} {'out scale/zp':>18s} {'cell':>10s}  y range")
    for c in CASES:
        meta, y = make_case(*c)
        print(f"{c[0]:34s} {float(meta['input_scale']):12.6g}/{meta['input_zp']:>4s} "
              f"{float(meta['output_scale']):12.6g}/{meta['output_zp']:>4s} "
              f"2^{int(np.log2(float(meta['cell_scale']))):<4d}  [{y.min()}, {y.max()}]")
    write_example(EXAMPLE_CASE)
    for c in STACKS:
        make_stack(*c)
    for c in BIDI + BIDI_MERGE:
        make_bidi(*c)
    write_elementwise()
    for c in EMBEDDINGS:
        make_embedding(*c)
    for c in SOFTMAX_SHAPES:
        make_softmax_shape(*c)
    make_bidi_widths(*BIDI_WIDTHS)
    check_embedding_refusals()
    check_bidi_refusals()
    write_stack_sample(HEADER_STACK)
    write_stack_sample(HEADER_HEAD)
    write_stack_sample(HEADER_SEQ)
    write_stack_sample(HEADER_BIDI)
    write_stack_sample(HEADER_EMBED)
    write_stack_sample(HEADER_MERGE)
    write_stack_sample(HEADER_SOFTMAX)
    write_stack_sample(HEADER_BACKWARDS)


if __name__ == "__main__":
    main()

#!/tmp/tfenv/bin/python
"""Helper of make_tf_golden.py (run by it in a process of its own: Keras 3 needs eager TensorFlow,
which make_tf_golden.py turns off for its tf.compat.v1 graphs).

    tf_keras_models.py OUTDIR

For every model in MODELS: a Keras 3 model in float32 (keras.layers.LSTM / GRU / Bidirectional(LSTM),
return_sequences=True, as a user would build it), its weights drawn from a seeded generator, saved
with model.save() as OUTDIR/<name>.keras; and the expected outputs, from the same layers built in
float64 with return_state=True and given the float32 weights, run on the float64 copy of the
float32 input: OUTDIR/<name>.npz with input [T, B, I] (time-major, as rnncore's golden files),
y [T, B, D*H], hn [L*D, B, H] (per layer, forward then backward), cn (LSTM layers' c; 0 for a GRU
layer) and config (the stack configuration JSON for models whose layers differ, else '').
"""

import json
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.pop("TF_USE_LEGACY_KERAS", None)

import numpy as np  # noqa: E402
import keras  # noqa: E402

# name, layers (kind, H), I, B, T. Kinds: lstm, gru (reset_after=True, Keras' default), gru_rb
# (reset_after=False), bilstm (Bidirectional(LSTM), merge_mode concat).
MODELS = [
    ("keras_file_lstm_gru_bilstm", [("lstm", 4), ("gru", 4), ("bilstm", 4)], 3, 2, 4),
    ("keras_file_bilstm_l2", [("bilstm", 3), ("bilstm", 3)], 2, 3, 5),
    ("keras_file_gru_rb", [("gru_rb", 5)], 3, 2, 4),
]


def make_layer(kind, H, dtype, state):
    kw = dict(return_sequences=True, return_state=state, dtype=dtype)
    if kind == "lstm":
        return keras.layers.LSTM(H, **kw)
    if kind in ("gru", "gru_rb"):
        return keras.layers.GRU(H, reset_after=kind == "gru", **kw)
    if kind == "bilstm":
        return keras.layers.Bidirectional(keras.layers.LSTM(H, **kw), merge_mode="concat", dtype=dtype)
    raise ValueError(kind)


def build(layers, I, B, T, dtype, state):
    inp = keras.Input((T, I), batch_size=B, dtype=dtype)
    y, states, built = inp, [], []
    for kind, H in layers:
        layer = make_layer(kind, H, dtype, state)
        out = layer(y)
        built.append(layer)
        if state:
            y, rest = out[0], list(out[1:])
            states.append(rest)
        else:
            y = out
    outputs = [y] + [s for st in states for s in st] if state else y
    return keras.Model(inp, outputs), built


def config_of(layers, I):
    out = []
    for kind, H in layers:
        layer = {"mode": "gru" if kind.startswith("gru") else "lstm", "hidden_size": H}
        if kind.startswith("gru"):
            layer["gru"] = "reset-after" if kind == "gru" else "reset-before"
        if kind == "bilstm":
            layer["direction"] = "bidirectional"
        out.append(layer)
    return {"input_size": I, "layers": out}


def main(outdir):
    keras.utils.set_random_seed(1)
    for name, layers, I, B, T in MODELS:
        rng = np.random.default_rng(sum(map(ord, name)))
        model, built = build(layers, I, B, T, "float32", False)
        for layer in built:
            layer.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in layer.get_weights()])
        model.save(os.path.join(outdir, name + ".keras"))
        x = rng.standard_normal((B, T, I)).astype(np.float32)
        twin, twin_layers = build(layers, I, B, T, "float64", True)
        for a, b in zip(built, twin_layers):
            b.set_weights([w.astype(np.float64) for w in a.get_weights()])
        outs = twin(x.astype(np.float64), training=False)
        outs = [np.asarray(o) for o in outs]
        y32 = np.asarray(model(x, training=False))
        err = float(np.max(np.abs(y32 - outs[0])) / np.max(np.abs(outs[0])))
        assert err < 1e-5, (name, err)
        hn, cn, k = [], [], 1
        for kind, H in layers:
            if kind == "lstm":
                hn.append(outs[k]); cn.append(outs[k + 1]); k += 2
            elif kind == "bilstm":  # [h_fw, c_fw, h_bw, c_bw]
                hn += [outs[k], outs[k + 2]]; cn += [outs[k + 1], outs[k + 3]]; k += 4
            else:
                hn.append(outs[k]); cn.append(np.zeros_like(outs[k])); k += 1
        assert k == len(outs)
        uniform = len({(kind, H) for kind, H in layers}) == 1
        lstm = any(kind.endswith("lstm") for kind, _ in layers)
        np.savez(os.path.join(outdir, name + ".npz"), input=x.transpose(1, 0, 2), y=outs[0].transpose(1, 0, 2),
                 hn=np.stack(hn), cn=np.stack(cn) if lstm else np.zeros(0),
                 config=json.dumps(config_of(layers, I), separators=(",", ":")) if not uniform else "",
                 keras=keras.__version__, err=err)


if __name__ == "__main__":
    main(sys.argv[1])

#!/tmp/tfenv/bin/python
"""TF1 checkpoints whose layers differ, through tools/tf_to_safetensors.py: tests/golden/tf_layers/

    /tmp/tfenv/bin/python tests/golden/make_tf_layers_golden.py [CASE ...]   (no names: every case)

(the venv of make_tf_golden.py: TensorFlow 2.21 + tf-keras). Each case is a tf.compat.v1 graph whose
layers differ in what the checkpoint does not store -- cell_clip, proj_clip, forget_bias, the
BasicRNNCell activation -- or in size, built the ways users build stacks: per-layer bidirectional scopes
(stack_bidirectional_dynamic_rnn's, `stack_bidirectional_rnn/cell_<k>/bidirectional_rnn/fw|bw`),
dynamic_rnn over a MultiRNNCell, static_rnn over a MultiRNNCell without sequence_length (its ops are
named rnn/rnn/multi_rnn_cell/cell_0/..., not like the variables), and a TF 1.x graph (control flow v1:
the while loops in the graph itself; reference variables). Variables are drawn from a seeded
generator, a Saver writes the checkpoint and its .meta graph, the converter converts it with no option,
and <case>.model.safetensors is what it wrote. The expected outputs come from the same graph in
float64 with the checkpoint's values; <case>.data.safetensors holds input, initial states and
expected.y, expected.hn, expected.cn in rnncore's layouts (states of layers that differ in size as
per-layer [B, O_l] blocks, flattened, as `rnncore run` reads and writes them).

Every case also checks that its graph fact matters: the graph with the fact taken out (the clip, the
relu, the forget bias; for sizes, nothing to take out) gives outputs at least 1e-3 away (relative), so a
converter that dropped or misplaced the fact would fail the test. REFUSALS are checkpoints that rnncore
cannot run as TF does: the converter must stop with the line given, naming the layer and the fact;
the script asserts that and stores nothing for them.
Re-running reproduces byte-identical files (TensorFlow 2.21.0, tf-keras 2.21.0, numpy 2.4).
"""

import os
import subprocess
import sys
import tempfile
import zlib

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
rc = v1.nn.rnn_cell
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "tf_layers")
TOOL = os.path.join(ROOT, "tools", "tf_to_safetensors.py")

# A cell: (kind, units, options). kind lstm (LSTMCell) or rnn (BasicRNNCell); options as the cell takes
# them, 'relu' for BasicRNNCell(activation=tf.nn.relu). A layer: one cell, or (fw, bw) for per-layer
# bidirectional scopes.
# name, structure, layers, I, B, T, initial state, the facts that matter (what `plain` takes out), metadata expected
CASES = [
    ("sbidir_lstm_cellclip_then_none", "stack_bidir",
     [("lstm", 4, {"cell_clip": 0.5}), ("lstm", 4, {})], 3, 2, 5, True,
     {"cell_clip": "0.5,0.0"}),
    ("sbidir_rnn_tanh_then_relu", "stack_bidir",
     [("rnn", 4, {}), ("rnn", 4, {"relu": True})], 3, 2, 5, False,
     {"config": '{"layers":[{"mode":"rnn_tanh","hidden_size":4,"direction":"bidirectional"},'
                '{"mode":"rnn_relu","hidden_size":4,"direction":"bidirectional"}]}'}),
    ("sbidir_lstm_clips_per_layer", "stack_bidir",
     [("lstm", 4, {"cell_clip": 0.5}), ("lstm", 4, {"cell_clip": 0.25})], 3, 2, 5, True,
     {"cell_clip": "0.5,0.25"}),
    ("sbidir_lstm_projclip_l0", "stack_bidir",
     [("lstm", 4, {"num_proj": 2, "proj_clip": 0.125}), ("lstm", 4, {})], 3, 2, 4, True,
     {"proj_clip": "0.125,0.0"}),
    ("sbidir_lstm_forget_bias_per_layer", "stack_bidir",
     [("lstm", 4, {"forget_bias": 0.5}), ("lstm", 4, {"forget_bias": -1.5})], 3, 2, 5, False,
     {"forget_bias": "0.5,-1.5"}),
    ("static_lstm_cellclip_l2", "static",
     [("lstm", 4, {"cell_clip": 0.25}), ("lstm", 4, {"cell_clip": 0.25})], 3, 2, 5, True,
     {"cell_clip": "0.25"}),
    ("static_rnn_relu_l2", "static",
     [("rnn", 4, {"relu": True}), ("rnn", 4, {"relu": True})], 3, 3, 4, False,
     {"mode": "rnn_relu"}),
    ("static_lstm_clip_rnn_relu", "static",
     [("lstm", 5, {"cell_clip": 0.25}), ("rnn", 3, {"relu": True})], 3, 2, 4, True,
     {"config": '{"layers":[{"mode":"lstm","hidden_size":5},{"mode":"rnn_relu","hidden_size":3}]}',
      "cell_clip": "0.25,0.0"}),
    ("multi_lstm_8_then_5", "multi",
     [("lstm", 8, {}), ("lstm", 5, {})], 3, 2, 5, True,
     {"config": '{"layers":[{"mode":"lstm","hidden_size":8},{"mode":"lstm","hidden_size":5}]}'}),
    # TF 1.x graphs: while loops in the graph itself (Enter/Exit, control flow v1) and reference variables
    ("sbidir_v1graph_lstm_fb_clip", "stack_bidir_v1",
     [("lstm", 4, {"cell_clip": 0.5, "forget_bias": 0.5}), ("lstm", 4, {})], 3, 2, 5, True,
     {"cell_clip": "0.5,0.0", "forget_bias": "0.5,1.0"}),
    ("sbidir_lstm_6_then_3_clip", "stack_bidir",
     [("lstm", 6, {}), ("lstm", 3, {"cell_clip": 0.25})], 2, 2, 4, False,
     {"config": '{"layers":[{"mode":"lstm","hidden_size":6,"direction":"bidirectional"},'
                '{"mode":"lstm","hidden_size":3,"direction":"bidirectional"}]}', "cell_clip": "0.0,0.25"}),
]

# Checkpoints the converter must refuse: name, structure, layers (a layer may be a (fw, bw) pair), I, the line
REFUSALS = [
    ("refuse_directions_differ_in_clip", "stack_bidir",
     [(("lstm", 4, {"cell_clip": 0.5}), ("lstm", 4, {})), ("lstm", 4, {})], 3,
     "layer 0: its directions differ in cell_clip (fw 0.5, bw 0.0); rnncore's bidirectional layer has one"),
    ("refuse_directions_differ_in_size", "stack_bidir",
     [(("lstm", 4, {}), ("lstm", 3, {}))], 3,
     "layer 0: its directions differ in size (fw 4, bw 3); rnncore's bidirectional layer has one"),
    ("refuse_graph_without_the_ops", "static+variables_only_meta",
     [("lstm", 4, {}), ("lstm", 4, {})], 3,
     "layer 0 (cell 'rnn/multi_rnn_cell/cell_0/lstm_cell'): no op of the .meta graph reads its kernel "
     "'rnn/multi_rnn_cell/cell_0/lstm_cell/kernel' inside a cell scope, so its forget bias, clips and activation "
     "cannot be read; the conversion stops rather than guess them"),
    ("refuse_rnn_sigmoid", "static",
     [("rnn", 4, {}), ("rnn", 4, {"activation": "sigmoid"})], 3,
     "layer 1 (cell 'rnn/multi_rnn_cell/cell_1/basic_rnn_cell'): activation ops Sigmoid; rnncore's Elman RNN runs "
     "tanh or relu"),
]


def make_cell(spec, dtype, plain=False):
    kind, units, opts = spec
    opts = dict(opts)
    if kind == "rnn":
        act = {"relu": tf.nn.relu, "sigmoid": tf.sigmoid}.get(opts.get("activation", "relu" if opts.get("relu") else ""))
        return rc.BasicRNNCell(units, activation=None if plain else act, dtype=dtype)
    opts.pop("relu", None)
    if plain:  # the facts a checkpoint does not store, taken out
        opts.pop("cell_clip", None)
        opts.pop("proj_clip", None)
        opts.pop("forget_bias", None)
    return rc.LSTMCell(units, dtype=dtype, **opts)


def pair(layer):
    return layer if isinstance(layer[0], tuple) else (layer, layer)


def out_units(spec):
    return spec[2].get("num_proj") or spec[1]


def build(structure, layers, I, B, T, dtype, plain=False):
    """The graph: placeholders x [T, B, I] and per (layer, direction) h0 [B, O], c0 [B, H]; outputs y, hn, cn
    (hn, cn: lists per layer*D + direction)."""
    x = v1.placeholder(dtype, [T, B, I], name="x")
    h0, c0, hn, cn = [], [], [], []

    def state(spec):
        h0.append(v1.placeholder(dtype, [B, out_units(spec)]))
        c0.append(v1.placeholder(dtype, [B, spec[1]]))
        return rc.LSTMStateTuple(c0[-1], h0[-1]) if spec[0] == "lstm" else h0[-1]

    def keep(st, spec):
        hn.append(st.h if spec[0] == "lstm" else st)
        if spec[0] == "lstm":
            cn.append(st.c)

    if structure.startswith("stack_bidir"):  # one bidirectional_dynamic_rnn per layer, stack_bidirectional_dynamic_rnn's scopes
        y = x
        with v1.variable_scope("stack_bidirectional_rnn"):
            for l, layer in enumerate(layers):
                fs, bs = pair(layer)
                with v1.variable_scope("cell_%d" % l):
                    (yf, yb), (sf, sb) = v1.nn.bidirectional_dynamic_rnn(
                        make_cell(fs, dtype, plain), make_cell(bs, dtype, plain), y, initial_state_fw=state(fs),
                        initial_state_bw=state(bs), dtype=dtype, time_major=True)
                    y = tf.concat([yf, yb], 2)
                    keep(sf, fs)
                    keep(sb, bs)
    else:
        cell = rc.MultiRNNCell([make_cell(spec, dtype, plain) for spec in layers])
        s0 = tuple(state(spec) for spec in layers)
        if structure == "static":  # static_rnn without sequence_length
            ys, s = v1.nn.static_rnn(cell, tf.unstack(x, axis=0), initial_state=s0, dtype=dtype)
            y = tf.stack(ys)
        else:
            y, s = v1.nn.dynamic_rnn(cell, x, initial_state=s0, dtype=dtype, time_major=True)
        for st, spec in zip(s, layers):
            keep(st, spec)
    return x, h0, c0, y, hn, cn


def run(name, structure, layers, I, B, T, dtype, feeds, values=None, ckpt=None, plain=False):
    if structure.endswith("_v1"):  # a TF 1.x graph
        v1.disable_control_flow_v2()
        v1.disable_resource_variables()
    try:
        return run_graph(name, structure, layers, I, B, T, dtype, feeds, values, ckpt, plain)
    finally:
        v1.enable_control_flow_v2()
        v1.enable_resource_variables()


def run_graph(name, structure, layers, I, B, T, dtype, feeds, values, ckpt, plain):
    g = v1.Graph()
    with g.as_default():
        x, h0, c0, y, hn, cn = build(structure, layers, I, B, T, dtype, plain)
        with v1.Session(graph=g, config=v1.ConfigProto(intra_op_parallelism_threads=1,
                                                       inter_op_parallelism_threads=1)) as sess:
            sess.run(v1.global_variables_initializer())
            variables = sorted(v1.global_variables(), key=lambda v: v.name)
            if values is None:  # kernels U(-0.6, 0.6), biases U(-0.5, 0.5), as make_tf_golden.py
                rng = np.random.default_rng(zlib.crc32(name.encode()))
                for v in variables:
                    scale = 0.5 if "bias" in v.name else 0.6
                    v.load(rng.uniform(-scale, scale, v.shape.as_list()).astype(np.float32), sess)
            else:
                for v in variables:
                    v.load(values[v.name.split(":")[0]].astype(dtype.as_numpy_dtype), sess)
            if ckpt is not None:
                v1.train.Saver().save(sess, ckpt)
            got = {v.name.split(":")[0]: sess.run(v) for v in variables}
            fd = {x: feeds["x"].astype(dtype.as_numpy_dtype)}
            for i, (h, c) in enumerate(zip(h0, c0)):
                fd[h] = feeds["h0"][i].astype(dtype.as_numpy_dtype)
                fd[c] = feeds["c0"][i].astype(dtype.as_numpy_dtype)
            out = sess.run([y, hn, cn], fd)
    return out, got


def flat(parts, uniform):
    """Per (layer, direction) [B, O] states: [L*D, B, O] where the layers agree in size and projection
    (`uniform`), else flattened blocks (rnncore's per-layer state layout)."""
    if uniform:
        return np.stack(parts)
    return np.concatenate([p.reshape(-1) for p in parts])


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def convert(ckpt, model):
    return subprocess.run([sys.executable, TOOL, ckpt, "-o", model], capture_output=True, text=True)


def initial_states(rng, structure, layers, B, init):
    specs = [spec for layer in layers for spec in (pair(layer) if structure.startswith("stack_bidir") else [layer])]
    draw = (lambda shape: rng.standard_normal(shape)) if init else np.zeros
    return specs, [draw((B, out_units(s))).astype(np.float32) for s in specs], \
        [draw((B, s[1])).astype(np.float32) for s in specs]


def make_case(case, tmp):
    name, structure, layers, I, B, T, init, expect_meta = case
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32)}
    specs, feeds["h0"], feeds["c0"] = initial_states(rng, structure, layers, B, init)
    ckpt = os.path.join(tmp, name, "model.ckpt")
    out32, values = run(name, structure, layers, I, B, T, tf.float32, feeds, ckpt=ckpt)
    out64, _ = run(name, structure, layers, I, B, T, tf.float64, feeds, values=values)
    # c of every layer (rnncore's c blocks include an Elman layer's, unused): stored for all-LSTM stacks only
    all_lstm = all(s[0] == "lstm" for s in specs)
    uniform = len({(s[1], out_units(s)) for s in specs}) == 1
    y, hn, cn = out64[0], flat(out64[1], uniform), flat(out64[2], uniform) if all_lstm else None
    err = max(rel(np.asarray(a), np.asarray(b)) for a, b in
              [(out32[0], out64[0])] + list(zip(out32[1], out64[1])) + list(zip(out32[2], out64[2])))
    assert err < 1e-5, (name, err)
    matters = "-"
    if any(s[2] for s in specs):  # a fact the checkpoint does not store
        plain, _ = run(name, structure, layers, I, B, T, tf.float64, feeds, values=values, plain=True)
        d = max(rel(plain[0], y), rel(flat(plain[1], uniform), hn))
        assert d > 1e-3, (name, "the graph facts do not change the output", d)
        matters = "%.2f" % d

    model = os.path.join(OUT, name + ".model.safetensors")
    r = convert(ckpt, model)
    if r.returncode != 0:
        raise SystemExit("converter failed on %s:\n%s" % (name, r.stderr))
    meta = safetensors_io.load_file(model)[1]
    for k, v in expect_meta.items():
        assert meta.get(k) == v, (name, k, meta.get(k), v)
    data = {"input": feeds["x"], "expected.y": y, "expected.hn": hn}
    if cn is not None:
        data["expected.cn"] = cn
    if init:
        data["h0"] = flat(feeds["h0"], uniform)
        if any(s[0] == "lstm" for s in specs):
            data["c0"] = flat([c if s[0] == "lstm" else np.zeros_like(c) for c, s in zip(feeds["c0"], specs)], uniform)
    safetensors_io.save_file(data, os.path.join(OUT, name + ".data.safetensors"),
                             metadata={"case": name, "seq_len": str(T), "batch": str(B), "tensorflow": tf.__version__,
                                       "source": "tests/golden/make_tf_layers_golden.py"})
    print("%-34s f32-vs-f64 %.1e  without the facts %-5s %s" % (
        name, err, matters, ", ".join("%s=%s" % (k, meta[k]) for k in sorted(expect_meta))))


def check_refusal(case, tmp):
    name, structure, layers, I, line = case
    B, T = 2, 3
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32)}
    _, feeds["h0"], feeds["c0"] = initial_states(rng, structure, layers, B, False)
    ckpt = os.path.join(tmp, name, "model.ckpt")
    structure, _, meta = structure.partition("+")
    _, values = run(name, structure, layers, I, B, T, tf.float32, feeds, ckpt=ckpt)
    if meta == "variables_only_meta":  # a .meta graph with the variables and none of the ops that use them
        with v1.Graph().as_default():
            for n, v in sorted(values.items()):
                v1.get_variable(n, shape=v.shape)
            v1.train.export_meta_graph(filename=ckpt + ".meta")
    model = os.path.join(tmp, name + ".safetensors")
    r = convert(ckpt, model)
    errors = [l for l in r.stderr.splitlines() if l.startswith("tf_to_safetensors: error: ")]
    assert r.returncode == 1 and not os.path.exists(model), (name, r.returncode, r.stderr)
    assert errors == ["tf_to_safetensors: error: " + line], (name, errors)
    print("%-34s refused: %s" % (name, line))


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if not only or case[0] in only:
                make_case(case, tmp)
        for case in REFUSALS:
            if not only or case[0] in only:
                check_refusal(case, tmp)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("%d cases, %d refusals, %d bytes in %s" % (len(CASES), len(REFUSALS), total, OUT))


if __name__ == "__main__":
    main()

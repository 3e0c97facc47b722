#!/tmp/tfenv/bin/python
"""Generate TensorFlow GRADIENT goldens for LSTMCell's options: tests/golden/tf_grad/<case>.{model,data}.safetensors

Needs the TF venv of make_tf_golden.py (TensorFlow with tf-keras for the TF1 cells):
    /tmp/tfenv/bin/python tests/golden/make_tf_grad_golden.py

Every case is a tf.compat.v1 graph of TF's own LSTMCell (use_peepholes, cell_clip, num_proj,
proj_clip, forget_bias 1) under MultiRNNCell, unrolled by static_rnn with sequence_length (zero
output and a carried state past a row's length), built as make_tf_golden.py builds its cases: the
variables drawn from a seeded generator, saved by tf.train.Saver in float32 and converted by
tools/tf_to_safetensors.py, whose output is stored unchanged as <case>.model.safetensors (weights as TF
saved them, renamed cell_<l>/...; forget bias and clips read from the graph). The same graph in
float64, with the checkpoint's values, gives the expected outputs and, through tf.GradientTape, the
gradients of
    loss = sum(y * dy) + sum(hn * dhn) + sum(cn * dcn)
(dy, dhn, dcn float32 N(0, 1), stored) with respect to the input, the initial state and every
variable. <case>.data.safetensors holds input, h0, c0, seq_lengths, dy, dhn, dcn, expected.y [T, B, O],
expected.hn [L, B, O], expected.cn [L, B, H], expected.dx, expected.dh0, expected.dc0 and
grad.<name> for every tensor of the model file (the name the converter gave that variable).
Checks, all asserted: every clip binds (the float64 outputs change when that one clip is removed);
central differences of the float64 loss (step 1e-6) agree with the tape's gradients within 1e-6 of
each tensor's largest magnitude, on a fixed random subset of elements of every gradient tensor;
the float32 graph agrees with the float64 one (1e-5). Re-running reproduces byte-identical files.
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

v1 = tf.compat.v1  # eager: the graphs are built in graphs of their own (v1.Graph().as_default())
rc = v1.nn.rnn_cell
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "tf_grad")
TOOL = os.path.join(ROOT, "tools", "tf_to_safetensors.py")
FD_EPS = 1e-6
FD_TOL = 1e-6
FD_SAMPLE = 12

# name, I, H, B, T, lengths, initial state, per layer LSTMCell options
CASES = [
    ("lstm_peep_cellclip_proj_projclip_len_h0", 3, 5, 3, 5, [5, 2, 4], True,
     [dict(use_peepholes=True, cell_clip=0.25, num_proj=3, proj_clip=0.03125)]),
    ("lstm_l2_peep_clips_proj_len_h0", 2, 5, 3, 4, [4, 0, 3], True,
     [dict(use_peepholes=True, cell_clip=0.25, num_proj=3, proj_clip=None),
      dict(use_peepholes=False, cell_clip=0.125, num_proj=3, proj_clip=0.03125)]),
    ("lstm_peep_cellclip", 4, 4, 2, 4, None, False,
     [dict(use_peepholes=True, cell_clip=0.25, num_proj=None, proj_clip=None)]),
    ("lstm_proj", 3, 4, 2, 3, None, True,
     [dict(use_peepholes=False, cell_clip=None, num_proj=2, proj_clip=None)]),
]


def out_size(H, opts):
    return opts[0]["num_proj"] or H


def build(case, dtype, layers):
    """The graph of a case (as make_tf_golden.py builds its cases): placeholders x, h0, c0 and the
    outputs y, hn, cn of MultiRNNCell(LSTMCell...) unrolled by static_rnn."""
    name, I, H, B, T, lengths, init, _ = case
    L, O = len(layers), out_size(H, layers)
    x = v1.placeholder(dtype, [T, B, I], name="x")
    h0 = v1.placeholder(dtype, [L, B, O], name="h0")
    c0 = v1.placeholder(dtype, [L, B, H], name="c0")
    cell = rc.MultiRNNCell([rc.LSTMCell(H, dtype=dtype, **o) for o in layers])
    s0 = tuple(rc.LSTMStateTuple(c0[l], h0[l]) for l in range(L)) if init else None
    seq = tf.constant(lengths, tf.int32) if lengths is not None else None
    ys, s = v1.nn.static_rnn(cell, tf.unstack(x, axis=0), initial_state=s0, dtype=dtype, sequence_length=seq)
    return (x, h0, c0), (tf.stack(ys), tf.stack([st.h for st in s]), tf.stack([st.c for st in s]))


def run_graph(case, dtype, feeds, layers, values=None, ckpt=None):
    """Runs a case's graph: its outputs and the variables' values (drawn as make_tf_golden.py draws
    them when `values` is None: kernels U(-0.6, 0.6), biases U(-0.5, 0.5), float32)."""
    g = v1.Graph()
    with g.as_default():
        v1.set_random_seed(1)
        ph, outs = build(case, dtype, layers)
        np_dtype = dtype.as_numpy_dtype
        with v1.Session(graph=g, config=v1.ConfigProto(intra_op_parallelism_threads=1,
                                                       inter_op_parallelism_threads=1)) as sess:
            sess.run(v1.global_variables_initializer())
            if values is None:
                rng = np.random.default_rng(zlib.crc32(case[0].encode()))
                for v in sorted(v1.global_variables(), key=lambda v: v.name):
                    scale = 0.5 if "bias" in v.name else 0.6
                    v.load(rng.uniform(-scale, scale, v.shape.as_list()).astype(np.float32), sess)
            else:
                for v in v1.global_variables():
                    v.load(values[v.name.split(":")[0]].astype(np_dtype), sess)
            if ckpt is not None:
                v1.train.Saver().save(sess, ckpt)
            got = {v.name.split(":")[0]: sess.run(v) for v in v1.global_variables()}
            fd = {p: feeds[k].astype(np_dtype) for p, k in zip(ph, ("x", "h0", "c0"))}
            outs = sess.run(list(outs), fd)
    return outs, got


class Eager:
    """The case's cells in eager float64 with the checkpoint's values, unrolled step by step as
    static_rnn does (past a row's length: zero output, the state carried), and the gradients of the
    loss through tf.GradientTape."""

    def __init__(self, case, layers, values):
        name, I, H, B, T, lengths, init, _ = case
        self.case, self.H = case, H
        self.cell = rc.MultiRNNCell([rc.LSTMCell(H, dtype=tf.float64, **o) for o in layers])
        self.cell(tf.zeros([B, I], tf.float64), self.cell.zero_state(B, tf.float64))  # builds the variables
        self.variables = sorted(self.cell.variables, key=lambda v: v.name)
        self.names = ["rnn/" + v.name.split(":")[0] for v in self.variables]  # static_rnn's scope
        for v, n in zip(self.variables, self.names):
            v.assign(values[n].astype(np.float64))

    def loss(self, feeds):
        name, I, H, B, T, lengths, init, layers = self.case
        x, h0, c0 = feeds["x"], feeds["h0"], feeds["c0"]
        lens = np.asarray(lengths if lengths is not None else [T] * B)
        state = tuple(rc.LSTMStateTuple(c0[l], h0[l]) for l in range(len(layers)))
        ys = []
        for t in range(T):
            out, new = self.cell(x[t], state)
            active = tf.constant((t < lens)[:, None])
            ys.append(tf.where(active, out, tf.zeros_like(out)))
            state = tuple(rc.LSTMStateTuple(tf.where(active, n.c, o.c), tf.where(active, n.h, o.h))
                          for n, o in zip(new, state))
        y, hn, cn = tf.stack(ys), tf.stack([s.h for s in state]), tf.stack([s.c for s in state])
        loss = tf.reduce_sum(y * feeds["dy"]) + tf.reduce_sum(hn * feeds["dhn"]) + tf.reduce_sum(cn * feeds["dcn"])
        return (y, hn, cn), loss

    def gradients(self, feeds):
        f = {k: tf.constant(v.astype(np.float64)) for k, v in feeds.items()}
        with tf.GradientTape() as tape:
            tape.watch([f["x"], f["h0"], f["c0"]])
            outs, loss = self.loss(f)
        grads = tape.gradient(loss, [f["x"], f["h0"], f["c0"]] + self.variables)
        names = ["x", "h0", "c0"] + self.names
        return [o.numpy() for o in outs], {n: g.numpy() for n, g in zip(names, grads)}

    def loss_at(self, feeds, name, index, delta):
        """The loss with one element of a feed or variable shifted by delta."""
        f = {k: v.astype(np.float64).copy() for k, v in feeds.items()}
        if name in f:
            f[name].flat[index] += delta
            return float(self.loss({k: tf.constant(v) for k, v in f.items()})[1])
        v = self.variables[self.names.index(name)]
        keep = v.numpy()
        shifted = keep.copy()
        shifted.flat[index] += delta
        v.assign(shifted)
        loss = float(self.loss({k: tf.constant(v) for k, v in f.items()})[1])
        v.assign(keep)
        return loss


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def check_fd(case, eager, feeds, grads):
    """Central differences of the float64 loss against the tape's gradients (a sample of each tensor)."""
    rng = np.random.default_rng(zlib.crc32(case[0].encode()) + 1)
    worst = 0.0
    for name, g in grads.items():
        idx = rng.choice(g.size, size=min(FD_SAMPLE, g.size), replace=False).tolist() + [int(np.argmax(np.abs(g)))]
        for i in idx:
            fd = (eager.loss_at(feeds, name, i, FD_EPS) - eager.loss_at(feeds, name, i, -FD_EPS)) / (2 * FD_EPS)
            err = abs(fd - g.flat[i]) / max(np.max(np.abs(g)), 1e-30)
            worst = max(worst, err)
            assert err <= FD_TOL, (case[0], name, i, err)
    return worst


def check_clips_bind(case, feeds, layers, values, out64):
    for l, o in enumerate(layers):
        for clip in ("cell_clip", "proj_clip"):
            if o[clip] is None:
                continue
            without = [dict(x) for x in layers]
            without[l][clip] = None
            other = run_graph(case, tf.float64, feeds, without, values=values)[0]
            assert rel(other[0], out64[0]) > 1e-6 or rel(other[1], out64[1]) > 1e-6, (case[0], l, clip, "does not bind")


def make_case(case, tmp):
    name, I, H, B, T, lengths, init, layers = case
    L, O = len(layers), out_size(H, layers)
    rng = np.random.default_rng(sum(map(ord, name)))
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32),
             "h0": (rng.standard_normal((L, B, O)) if init else np.zeros((L, B, O))).astype(np.float32),
             "c0": (rng.standard_normal((L, B, H)) if init else np.zeros((L, B, H))).astype(np.float32),
             "dy": rng.standard_normal((T, B, O)).astype(np.float32),
             "dhn": rng.standard_normal((L, B, O)).astype(np.float32),
             "dcn": rng.standard_normal((L, B, H)).astype(np.float32)}
    ckpt = os.path.join(tmp, name, "model.ckpt")
    out32, values = run_graph(case, tf.float32, feeds, layers, ckpt=ckpt)
    out64, _ = run_graph(case, tf.float64, feeds, layers, values=values)
    err32 = max(rel(a, b) for a, b in zip(out32, out64))
    assert err32 < 1e-5, (name, err32)
    check_clips_bind(case, feeds, layers, values, out64)
    eager = Eager(case, layers, values)
    outs, grads = eager.gradients(feeds)
    err_eager = max(rel(a, b) for a, b in zip(outs, out64))
    assert err_eager <= 1e-12, (name, "eager unroll vs static_rnn", err_eager)
    fd = check_fd(case, eager, feeds, grads)

    model = os.path.join(OUT, name + ".model.safetensors")
    r = subprocess.run([sys.executable, TOOL, ckpt, "-o", model], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("converter failed on %s:\n%s" % (name, r.stderr))
    converted = safetensors_io.load_file(model)
    converted = converted[0] if isinstance(converted, tuple) else converted
    data = {"input": feeds["x"], "dy": feeds["dy"], "dhn": feeds["dhn"], "dcn": feeds["dcn"],
            "expected.y": out64[0], "expected.hn": out64[1], "expected.cn": out64[2],
            "expected.dx": grads["x"], "expected.dh0": grads["h0"], "expected.dc0": grads["c0"]}
    if init:
        data["h0"], data["c0"] = feeds["h0"], feeds["c0"]
    if lengths is not None:
        data["seq_lengths"] = np.asarray(lengths, np.int32)
    for var, value in values.items():  # the converter's name of each variable: the tensor equal to it
        match = [n for n, t in converted.items() if t.shape == value.shape and np.array_equal(t, value)]
        assert len(match) == 1, (name, var, match)
        data["grad." + match[0]] = grads[var]
    assert len(values) == len(converted), (name, sorted(values), sorted(converted))
    meta = {"case": name, "seq_len": str(T), "batch": str(B), "batch_first": "0", "run_mode": "training", "seed": "0",
            "step": "0", "tensorflow": tf.__version__,
            "loss": "sum(y*dy)+sum(hn*dhn)+sum(cn*dcn)", "source": "tests/golden/make_tf_grad_golden.py"}
    safetensors_io.save_file(data, os.path.join(OUT, name + ".data.safetensors"), metadata=meta)
    print("%-42s f32-vs-f64 %.1e  fd %.1e  %d tensors" % (name, err32, fd, len(converted)))


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            make_case(case, tmp)


if __name__ == "__main__":
    main()

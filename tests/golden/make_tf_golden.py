#!/tmp/tfenv/bin/python
"""Generate TensorFlow-checkpoint golden data for rnncore: tests/golden/tf/<case>.{model,data}.safetensors

Needs TensorFlow with the TF1 cells (tf.compat.v1.nn.rnn_cell lives in tf-keras since TF 2.16), in a
venv outside the repository:
    /usr/bin/python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu tf-keras numpy
    /tmp/tfenv/bin/python tests/golden/make_tf_golden.py [CASE ...]     (no names: every case)

For every case a tf.compat.v1 graph is built in float32 from TF's own cells (LSTMCell, GRUCell,
BasicRNNCell, MultiRNNCell, DropoutWrapper, ResidualWrapper, dynamic_rnn, bidirectional_dynamic_rnn;
LSTMCell with every combination of use_peepholes, cell_clip, num_proj and proj_clip),
its variables are drawn from a seeded generator (biases too, so they matter), a tf.train.Saver writes a
checkpoint (with its .meta graph), and tools/tf_to_safetensors.py converts it: that output is stored
unchanged as <case>.model.safetensors (the weights exactly as TF saved them, renamed). The expected
outputs come from the same graph built in float64 with the checkpoint's float32 values, run on the
float64 copy of the stored float32 input; <case>.data.safetensors holds input, initial states,
lengths, expected.y [T, B, D*O], expected.hn [L*D, B, O], expected.cn [L*D, B, H] (rnncore's layouts;
O = num_proj, or H) and, for
wrapped cells, the stack configuration (metadata 'config', docs/config.md). The float32 graph's
error against the float64 one is printed (not stored). Re-running reproduces byte-identical files
(checked with md5sum; TensorFlow 2.21.0, tf-keras 2.21.0, numpy 2.4).

DropoutWrapper with keep probabilities < 1 (DROPOUT_CASES, dropout_*): TF draws its masks at random, so
TF's own DropoutWrapper is given rnncore's masks (docs/dropout.md, masks.py) as its noise and does the
rest itself (state filter, order, 1/keep scaling); the data file says run_mode training, seed and step.
See RnncoreMaskDropoutWrapper.

Keras files (KERAS_FILE_CASES, keras_file_*): Keras 3 models (LSTM, GRU reset_after True and False,
Bidirectional(LSTM), one model mixing them) saved with model.save() as .keras by tf_keras_models.py
(a process of its own: Keras 3 needs eager TensorFlow) and converted by the tool; the mixed model's
data file carries its stack configuration.

Cells TF 2.x no longer ships are written here from their documented definitions, with TF's variable
names: CudnnCompatibleGRUCell (reset-after: gates/kernel [I+H, 2H] r,u; candidate/input_projection and
candidate/hidden_projection kernels and biases; h' = u*h + (1-u)*c) and LSTMBlockCell (scope
lstm_cell, kernel/bias, with use_peephole w_i_diag/w_f_diag/w_o_diag, run by TF's own LSTMBlockCell op; its float64 twin is an LSTMCell, as the op
has no float64 kernel; the script checks the op against it). CudnnCompatibleLSTMCell is LSTMCell with
forget_bias 0 under the scope name cudnn_compatible_lstm_cell.
"""

import json
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
import masks  # noqa: E402
import safetensors_io  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
rc = v1.nn.rnn_cell
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "tf")
TOOL = os.path.join(ROOT, "tools", "tf_to_safetensors.py")


class CudnnCompatibleGRUCell(rc.GRUCell):
    """The reset-after GRU of tf.contrib.cudnn_rnn, from its documented equations and variable names."""

    def build(self, inputs_shape):
        i, h = int(inputs_shape[-1]), self._num_units
        self._gk = self.add_weight("gates/kernel", [i + h, 2 * h])
        self._gb = self.add_weight("gates/bias", [2 * h])
        self._ik = self.add_weight("candidate/input_projection/kernel", [i, h])
        self._hk = self.add_weight("candidate/hidden_projection/kernel", [h, h])
        self._ib = self.add_weight("candidate/input_projection/bias", [h])
        self._hb = self.add_weight("candidate/hidden_projection/bias", [h])
        self.built = True

    def call(self, inputs, state):
        gates = tf.sigmoid(tf.matmul(tf.concat([inputs, state], 1), self._gk) + self._gb)
        r, u = tf.split(gates, 2, axis=1)
        c = tf.tanh(tf.matmul(inputs, self._ik) + self._ib + r * (tf.matmul(state, self._hk) + self._hb))
        h = u * state + (1 - u) * c
        return h, h


class LSTMBlockCell(rc.LSTMCell):
    """tf.contrib.rnn.LSTMBlockCell: LSTMCell's variables, run by TF's fused LSTMBlockCell op. Its
    use_peephole variables are LSTMCell's w_i_diag, w_f_diag, w_o_diag (contrib's names for wci, wcf, wco);
    cell_clip is the op's attribute (-1: none)."""

    def call(self, inputs, state):
        c, h = state
        z = tf.zeros([self._num_units], inputs.dtype)
        peep = self._use_peepholes
        out = tf.raw_ops.LSTMBlockCell(x=inputs, cs_prev=c, h_prev=h, w=self._kernel,
                                       wci=self._w_i_diag if peep else z, wcf=self._w_f_diag if peep else z,
                                       wco=self._w_o_diag if peep else z, b=self._bias,
                                       forget_bias=self._forget_bias,
                                       cell_clip=self._cell_clip if self._cell_clip is not None else -1.0,
                                       use_peephole=peep)
        cs, h_new = out[1], out[6]
        return h_new, rc.LSTMStateTuple(cs, h_new)


def layer_kind(kind, layer):
    """The cell kind of one layer: 'a/b' is a stack whose layer 0 is a and layers above b."""
    kinds = kind.split("/")
    return kinds[min(layer, len(kinds) - 1)]


def lstm_options(kind):
    """LSTMCell options of an 'lstm+<flags>' kind: p use_peepholes, c cell_clip 0.25 (C: 0.125), P num_proj 2,
    q proj_clip 0.125 (Q: 0.0625, R: 0.03125, S: 0.015625); for a per-layer 'a/b' kind, layer 0's.
    The clips bind with these weights and inputs (make_case prints where: a final c or an output on the bound)
    and are exact in float32, so the float32 graph the converter reads clips where the float64 reference does."""
    flags = layer_kind(kind, 0).split("+", 1)[1]
    return {"use_peepholes": "p" in flags,
            "cell_clip": 0.25 if "c" in flags else 0.125 if "C" in flags else None,
            "num_proj": 2 if "P" in flags else None,
            "proj_clip": 0.125 if "q" in flags else 0.0625 if "Q" in flags else 0.03125 if "R" in flags else 0.015625 if "S" in flags else None}


def out_size(kind, H):
    """Units of h and of the output: num_proj, or H."""
    return lstm_options(kind)["num_proj"] or H if kind.startswith("lstm+") else H


def make_cell(kind, H, dtype, block_op=True):
    if kind.startswith("lstm+"):
        return rc.LSTMCell(H, dtype=dtype, **lstm_options(kind))
    if kind == "lstm":
        return rc.LSTMCell(H, dtype=dtype)
    if kind == "lstm_fb05":
        return rc.LSTMCell(H, forget_bias=0.5, dtype=dtype)
    if kind == "cudnn_lstm":
        return rc.LSTMCell(H, forget_bias=0.0, name="cudnn_compatible_lstm_cell", dtype=dtype)
    if kind == "block_lstm":
        cls = LSTMBlockCell if block_op else rc.LSTMCell
        return cls(H, forget_bias=1.0, name="lstm_cell", dtype=dtype)
    if kind == "block_lstm_peep":  # LSTMBlockCell(use_peephole=True, cell_clip=0.25)
        cls = LSTMBlockCell if block_op else rc.LSTMCell
        return cls(H, forget_bias=1.0, use_peepholes=True, cell_clip=0.25, name="lstm_cell", dtype=dtype)
    if kind == "gru":
        return rc.GRUCell(H, dtype=dtype)
    if kind == "cudnn_gru":
        return CudnnCompatibleGRUCell(H, name="cudnn_compatible_gru_cell", dtype=dtype)
    if kind == "rnn_tanh":
        return rc.BasicRNNCell(H, dtype=dtype)
    if kind == "rnn_relu":
        return rc.BasicRNNCell(H, activation=tf.nn.relu, dtype=dtype)
    raise ValueError(kind)


MODES = {"lstm": "lstm", "lstm_fb05": "lstm", "cudnn_lstm": "lstm", "block_lstm": "lstm", "block_lstm_peep": "lstm",
         "gru": "gru", "cudnn_gru": "gru", "rnn_tanh": "rnn_tanh", "rnn_relu": "rnn_relu"}

# name, cell kind, layers, structure, I, H, B, T, lengths, initial state, wrappers
CASES = [
    ("lstm_cell_fb1_h0", "lstm", 1, "multi", 3, 4, 3, 5, None, True, None),
    ("lstm_cell_fb05_len", "lstm_fb05", 1, "single", 3, 4, 3, 5, [5, 2, 0], False, None),
    ("lstm_block_cell_l2", "block_lstm", 2, "multi", 3, 4, 2, 4, None, True, None),
    ("lstm_block_cell_peep_clip_l2_len", "block_lstm_peep", 2, "multi", 3, 4, 3, 5, [5, 2, 4], True, None),
    ("cudnn_compatible_lstm_l2", "cudnn_lstm", 2, "multi", 3, 5, 2, 4, [4, 3], False, None),
    ("gru_cell_l2_h0", "gru", 2, "multi", 3, 4, 3, 4, None, True, None),
    ("cudnn_compatible_gru_len", "cudnn_gru", 1, "single", 2, 4, 3, 5, [1, 5, 3], True, None),
    ("basic_rnn_tanh_l2", "rnn_tanh", 2, "multi", 3, 4, 2, 4, None, False, None),
    ("basic_rnn_relu", "rnn_relu", 1, "single", 3, 4, 3, 4, None, True, None),
    ("bidir_lstm_len", "lstm", 1, "bidir", 3, 4, 3, 5, [5, 3, 1], True, None),
    ("stack_bidir_gru_l2", "gru", 2, "stack_bidir", 3, 3, 2, 4, [4, 2], False, None),
    ("stack_bidir_cudnn_lstm_l2", "cudnn_lstm", 2, "stack_bidir", 2, 3, 2, 3, None, False, None),
    ("residual_lstm_l3", "lstm", 3, "multi", 3, 4, 2, 4, [4, 1], False, "residual"),
    ("dropout_keep1_gru_l2", "gru", 2, "multi", 3, 4, 2, 4, None, False, "dropout"),
    # LSTMCell with every combination of peepholes (p), cell clip (c), projection (P) and projection clip (q)
    ("lstm_peep_len", "lstm+p", 1, "single", 3, 4, 2, 4, [4, 2], True, None),
    ("lstm_cellclip_h0", "lstm+c", 1, "single", 3, 4, 2, 5, None, True, None),
    ("lstm_proj_l2_h0", "lstm+P", 2, "multi", 3, 4, 2, 4, None, True, None),
    ("lstm_peep_cellclip_len", "lstm+pc", 1, "single", 3, 4, 3, 5, [5, 0, 3], False, None),
    ("bidir_lstm_peep_proj_len", "lstm+pP", 1, "bidir", 3, 4, 2, 4, [4, 1], True, None),
    ("lstm_cellclip_proj", "lstm+cP", 1, "single", 2, 4, 2, 4, None, False, None),
    ("lstm_peep_cellclip_proj_l2_len", "lstm+pcP", 2, "multi", 3, 4, 2, 4, [4, 3], False, None),
    ("lstm_proj_projclip_h0", "lstm+Pq", 1, "single", 3, 4, 2, 4, None, True, None),
    ("lstm_peep_proj_projclip_len", "lstm+pPq", 1, "single", 3, 5, 2, 4, [3, 4], False, None),
    ("bidir_lstm_cellclip_proj_projclip", "lstm+cPq", 1, "bidir", 2, 4, 2, 3, None, False, None),
    ("lstm_all_l2_h0_len", "lstm+pcPq", 2, "multi", 3, 4, 2, 4, [2, 4], True, None),
    ("stack_bidir_lstm_all_l2", "lstm+pcPq", 2, "stack_bidir", 3, 4, 2, 3, None, True, None),
    # Layers that clip (and peep) differently: the converter writes one clip value per layer
    ("lstm_perlayer_clips_l3", "lstm+pcPS/lstm+CPR", 3, "multi", 3, 4, 2, 5, [5, 3], True, None),
]
for _case in CASES:
    MODES.setdefault(_case[1], "lstm" if _case[1].startswith("lstm") else _case[1])

# DropoutWrapper with keep probabilities < 1. TF draws its masks at random; these cases give TF's own
# DropoutWrapper rnncore's masks instead (docs/dropout.md, masks.py) and let it do the rest: which
# parts it drops (state filter), the order, the 1/keep scaling. The masks enter as TF's noise u in
# [0, 1): TF keeps an element iff floor(keep + u) = 1, so u = (1 + keep) / 2 keeps and (1 - keep) / 2
# drops. Variational wrappers get it as their [1, width] recurrent noise (shared by the batch, row 0 of
# rnncore's masks, as TF's); the others per time step (the graph is unrolled with static_rnn, so
# each wrapper knows its step). Stored metadata: config (the wrapper), run_mode training, seed, step.
# name, cell kind, layers, I, H, B, T, lengths, initial state, dropout wrapper (docs/config.md keys), run seed, step
DROPOUT_CASES = [
    ("dropout_lstm_l2_len", "lstm", 2, 3, 4, 3, 5, [5, 2, 4], True,
     {"input_keep": 0.7, "output_keep": 0.8, "state_keep": 0.75}, 0x1234567890, 3),
    ("dropout_lstm_var_h_and_c", "lstm", 1, 4, 5, 3, 5, None, True,
     {"input_keep": 0.8, "output_keep": 0.75, "state_keep": 0.7, "variational": True, "state_filter": "h_and_c",
      "seed": 77}, 5, (1 << 32) + 9),
    ("dropout_gru_var_l2_len", "gru", 2, 3, 4, 4, 4, [4, 1, 3, 0], False,
     {"input_keep": 0.8, "output_keep": 0.7, "state_keep": 0.6, "variational": True}, 44, 11),
    ("dropout_gru_cudnn_state", "cudnn_gru", 1, 3, 5, 3, 4, None, True,
     {"input_keep": 0.6, "state_keep": 0.7}, 9, 1),
    ("dropout_lstm_peep_proj_c_only_len", "lstm+pP", 2, 3, 4, 2, 5, [5, 3], True,
     {"input_keep": 0.75, "output_keep": 0.8, "state_keep": 0.7, "state_filter": "c_only"}, 1 << 40, 7),
]
DROPOUT_BY_NAME = {c[0]: c for c in DROPOUT_CASES}


def mask_noise(keep, bits):
    """TF noise in [0, 1) for which TF's floor(keep + u) keeps exactly where bits is 1."""
    b = np.asarray(bits, np.float64)
    return b * (1.0 + keep) / 2.0 + (1.0 - b) * (1.0 - keep) / 2.0


class RnncoreMaskDropoutWrapper(rc.DropoutWrapper):
    """TF's DropoutWrapper whose random noise is replaced by rnncore's masks (layer l, direction 0, depth 0)."""

    def __init__(self, cell, layer, wrapper, seed, step, batch, input_size, dtype):
        self.rn = dict(wrapper)
        self.rn_layer, self.rn_seed, self.rn_step, self.rn_batch = layer, int(wrapper.get("seed", seed)), step, batch
        self.rn_t = 0
        flt = wrapper.get("state_filter", "default")
        visitor = {"default": None, "h_and_c": lambda s: True,
                   # TF's visitor protocol: a structure of bools picks sub-parts, and each leaf is asked again
                   "c_only": lambda s: rc.LSTMStateTuple(c=True, h=False) if isinstance(s, rc.LSTMStateTuple) else True,
                   "none": lambda s: False}[flt]
        # The keeps as float64 constants: TF reads a keep given as a Python float back from a float32
        # tensor (its scale is then 1/float32(keep), up to 6e-8 off rnncore's 1/keep).
        keeps = [tf.constant(float(wrapper.get(k, 1.0)), tf.float64) for k in ("input_keep", "output_keep", "state_keep")]
        super().__init__(cell, input_keep_prob=keeps[0], output_keep_prob=keeps[1], state_keep_prob=keeps[2],
                         variational_recurrent=wrapper.get("variational", False), input_size=input_size,
                         dtype=dtype, dropout_state_filter_visitor=visitor)
        if self._variational_recurrent:  # TF drew [1, width] noise here: replace it with rnncore's row-0 masks
            for attr, prefix in (("_recurrent_input_noise", "input"), ("_recurrent_state_noise", "state"),
                                 ("_recurrent_output_noise", "output")):
                noise = getattr(self, attr)
                if noise is not None:
                    flat = tf.nest.flatten(noise)
                    setattr(self, attr, tf.nest.pack_sequence_as(noise, [
                        self.rn_noise(prefix, i, len(flat), int(n.shape[-1]), 0, [0], dtype)
                        for i, n in enumerate(flat)]))

    def rn_noise(self, prefix, index, nparts, width, t, rows, dtype):
        keep = float(self.rn[{"input": "input_keep", "output": "output_keep", "state": "state_keep"}[prefix]])
        if prefix == "state":  # the flattened state: LSTMStateTuple (c, h), else h
            kind = (masks.SITE_STATE_C, masks.SITE_STATE_H)[index] if nparts == 2 else masks.SITE_STATE_H
        else:
            kind = masks.SITE_WRAPPER_INPUT if prefix == "input" else masks.SITE_WRAPPER_OUTPUT
        var = bool(self.rn.get("variational", False))
        site = masks.mask_site(self.rn_layer, 0, 0, kind, variational=var)
        bits = masks.mask_tensor(self.rn_seed, self.rn_step, site, t, len(rows), width, keep, row_ids=rows)
        flt = self.rn.get("state_filter", "default")
        if prefix != "state" or {masks.SITE_STATE_H: flt in ("default", "h_and_c"),
                                 masks.SITE_STATE_C: flt in ("h_and_c", "c_only")}[kind]:
            MASK_LOG.append((self.rn_layer, kind, var, bits))  # a mask TF applies (not one its filter skips)
        return tf.constant(mask_noise(keep, bits), dtype)

    def _dropout(self, values, salt_prefix, recurrent_noise, keep_prob, shallow_filtered_substructure=None):
        if self._variational_recurrent:
            return super()._dropout(values, salt_prefix, recurrent_noise, keep_prob, shallow_filtered_substructure)
        # Per step: noise of step t for every row, through TF's own noise path (floor(keep + u) / keep).
        flat = tf.nest.flatten(values)
        noise = tf.nest.pack_sequence_as(values, [
            self.rn_noise(salt_prefix, i, len(flat), int(v.shape[-1]), self.rn_t, list(range(self.rn_batch)), v.dtype)
            for i, v in enumerate(flat)])
        self._variational_recurrent = True
        try:
            return super()._dropout(values, salt_prefix, noise, keep_prob, shallow_filtered_substructure)
        finally:
            self._variational_recurrent = False

    def _call_wrapped_cell(self, inputs, state, cell_call_fn, **kwargs):
        out = super()._call_wrapped_cell(inputs, state, cell_call_fn, **kwargs)
        self.rn_t += 1
        return out


MASK_LOG = []  # (layer, kind, variational, bits) of every mask drawn


def wrap(cell, layer, wrappers):
    if wrappers == "residual" and layer > 0:
        return rc.ResidualWrapper(cell)
    if wrappers == "dropout":
        return rc.DropoutWrapper(cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0)
    return cell


def layer_config(case):
    name, kind, L, structure, I, H, B, T, lengths, init, wrappers = case
    layers = []
    for l in range(L):
        layer = {"mode": MODES[kind], "hidden_size": H}
        if MODES[kind] == "gru":
            layer["gru"] = "reset-after" if kind == "cudnn_gru" else "reset-before"
        if structure in ("bidir", "stack_bidir"):
            layer["direction"] = "bidirectional"
        if wrappers == "residual" and l > 0:
            layer["wrappers"] = [{"type": "residual"}]
        if wrappers == "dropout":
            layer["wrappers"] = [{"type": "dropout", "input_keep": 1, "output_keep": 1, "state_keep": 1}]
        layers.append(layer)
    return {"input_size": I, "layers": layers}


def state_tuple(kind, c, h):
    return rc.LSTMStateTuple(c, h) if MODES[kind] == "lstm" else h


def build(case, dtype, block_op=True):
    """The graph of a case: placeholders, and outputs y [T, B, D*H], hn, cn as lists per layer*D+dir."""
    name, kind, L, structure, I, H, B, T, lengths, init, wrappers = case
    D = 2 if structure in ("bidir", "stack_bidir") else 1
    x = v1.placeholder(dtype, [T, B, I], name="x")
    h0 = v1.placeholder(dtype, [L * D, B, out_size(kind, H)], name="h0")
    c0 = v1.placeholder(dtype, [L * D, B, H], name="c0")
    seq = tf.constant(lengths, tf.int32) if lengths is not None else None
    lstm = MODES[kind] == "lstm"

    def init_state(i):
        return state_tuple(kind, c0[i], h0[i]) if init else None

    def parts(state):
        return (state.c, state.h) if lstm else (None, state)

    hn, cn = [], []
    if structure in ("single", "multi"):
        if structure == "single":
            cell = wrap(make_cell(kind, H, dtype, block_op), 0, wrappers)
            s0 = init_state(0)
        else:
            cell = rc.MultiRNNCell([wrap(make_cell(layer_kind(kind, l), H, dtype, block_op), l, wrappers)
                                    for l in range(L)])
            s0 = tuple(init_state(l) for l in range(L)) if init else None
        y, s = v1.nn.dynamic_rnn(cell, x, sequence_length=seq, initial_state=s0, dtype=dtype, time_major=True)
        for st in ([s] if structure == "single" else list(s)):
            c, h = parts(st)
            hn.append(h)
            cn.append(c)
    elif structure == "bidir":
        fw, bw = make_cell(kind, H, dtype, block_op), make_cell(kind, H, dtype, block_op)
        (yf, yb), (sf, sb) = v1.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=seq, initial_state_fw=init_state(0), initial_state_bw=init_state(1),
            dtype=dtype, time_major=True)
        y = tf.concat([yf, yb], 2)
        for st in (sf, sb):
            c, h = parts(st)
            hn.append(h)
            cn.append(c)
    else:  # stack_bidir: one bidirectional_dynamic_rnn per layer, as CudnnLSTM's checkpoint scopes say
        y = x
        with v1.variable_scope("stack_bidirectional_rnn"):
            for l in range(L):
                with v1.variable_scope("cell_%d" % l):
                    fw, bw = make_cell(kind, H, dtype, block_op), make_cell(kind, H, dtype, block_op)
                    (yf, yb), (sf, sb) = v1.nn.bidirectional_dynamic_rnn(
                        fw, bw, y, sequence_length=seq, initial_state_fw=init_state(2 * l),
                        initial_state_bw=init_state(2 * l + 1), dtype=dtype, time_major=True)
                    y = tf.concat([yf, yb], 2)
                    for st in (sf, sb):
                        c, h = parts(st)
                        hn.append(h)
                        cn.append(c)
    return x, h0, c0, y, tf.stack(hn), (tf.stack(cn) if lstm else None)


def build_dropout(case, dtype, block_op=True):
    """A DROPOUT_CASES graph: MultiRNNCell of RnncoreMaskDropoutWrapper(cell), unrolled by static_rnn."""
    name, kind, L, I, H, B, T, lengths, init, wrapper, seed, step = case
    O = out_size(kind, H)
    lstm = MODES[kind] == "lstm"
    x = v1.placeholder(dtype, [T, B, I], name="x")
    h0 = v1.placeholder(dtype, [L, B, O], name="h0")
    c0 = v1.placeholder(dtype, [L, B, H], name="c0")
    seq = tf.constant(lengths, tf.int32) if lengths is not None else None
    cells = [RnncoreMaskDropoutWrapper(make_cell(kind, H, dtype, block_op), l, wrapper, seed, step, B,
                                       I if l == 0 else O, dtype) for l in range(L)]
    cell = rc.MultiRNNCell(cells)
    s0 = tuple(state_tuple(kind, c0[l], h0[l]) for l in range(L)) if init else None
    ys, s = v1.nn.static_rnn(cell, tf.unstack(x, axis=0), initial_state=s0, dtype=dtype, sequence_length=seq)
    assert all(c.rn_t == T for c in cells), [c.rn_t for c in cells]  # one call per step: t is the step
    hn = [st.h if lstm else st for st in s]
    cn = [st.c for st in s] if lstm else None
    return x, h0, c0, tf.stack(ys), tf.stack(hn), (tf.stack(cn) if lstm else None)


def draw_variables(sess, rng):
    """Every variable drawn from a seeded generator (TF's initializers are not reproducible across
    runs here; biases would start at 0 or 1) and rounded to float32: kernels U(-0.6, 0.6), biases
    U(-0.5, 0.5)."""
    for v in sorted(v1.global_variables(), key=lambda v: v.name):
        scale = 0.5 if "bias" in v.name else 0.6
        v.load(rng.uniform(-scale, scale, v.shape.as_list()).astype(np.float32), sess)


def run(case, dtype, feeds, values=None, ckpt=None, block_op=True):
    g = v1.Graph()
    with g.as_default():
        v1.set_random_seed(1)
        x, h0, c0, y, hn, cn = (build_dropout if case[0] in DROPOUT_BY_NAME else build)(case, dtype, block_op)
        with v1.Session(graph=g, config=v1.ConfigProto(intra_op_parallelism_threads=1,
                                                       inter_op_parallelism_threads=1)) as sess:
            sess.run(v1.global_variables_initializer())
            if values is None:
                draw_variables(sess, np.random.default_rng(zlib.crc32(case[0].encode())))
            else:
                for v in v1.global_variables():
                    v.load(values[v.name.split(":")[0]].astype(dtype.as_numpy_dtype), sess)
            if ckpt is not None:
                v1.train.Saver().save(sess, ckpt)
            got = {v.name.split(":")[0]: sess.run(v) for v in v1.global_variables()}
            fd = {x: feeds["x"].astype(dtype.as_numpy_dtype), h0: feeds["h0"].astype(dtype.as_numpy_dtype),
                  c0: feeds["c0"].astype(dtype.as_numpy_dtype)}
            outs = sess.run([y, hn] + ([cn] if cn is not None else []), fd)
    return outs, got


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def make_case(case, tmp):
    name, kind, L, structure, I, H, B, T, lengths, init, wrappers = case
    D = 2 if structure in ("bidir", "stack_bidir") else 1
    O = out_size(kind, H)
    rng = np.random.default_rng(sum(map(ord, name)))
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32),
             "h0": (rng.standard_normal((L * D, B, O)) if init else np.zeros((L * D, B, O))).astype(np.float32),
             "c0": (rng.standard_normal((L * D, B, H)) if init else np.zeros((L * D, B, H))).astype(np.float32)}
    ckpt = os.path.join(tmp, name, "model.ckpt")
    out32, values = run(case, tf.float32, feeds, ckpt=ckpt)
    out64, _ = run(case, tf.float64, feeds, values=values, block_op=False)
    err = max(rel(a, b) for a, b in zip(out32, out64))
    assert err < 1e-5, (name, err)  # also: the LSTMBlockCell op agrees with its LSTMCell twin
    opts = lstm_options(kind) if kind.startswith("lstm+") else {}
    binds = []  # the clips bind: some final c, some output sits on the bound
    if opts.get("cell_clip"):
        binds.append("cell_clip %s" % ("binds" if np.max(np.abs(out64[2])) == opts["cell_clip"] else "not at the end"))
    if opts.get("proj_clip"):
        binds.append("proj_clip %s" % ("binds" if np.max(np.abs(out64[0])) == opts["proj_clip"] else "not reached"))
    if "/" in kind:  # per-layer clips: each layer's final c and h (hn is the projected, clipped h) on its bounds
        for l in range(L):
            o = lstm_options(layer_kind(kind, l))
            on = [np.max(np.abs(out64[2][l])) == o["cell_clip"], np.max(np.abs(out64[1][l])) == o["proj_clip"]]
            binds.append("layer %d: cell_clip %g %s, proj_clip %g %s" % (
                l, o["cell_clip"], "binds" if on[0] else "-", o["proj_clip"], "binds" if on[1] else "-"))
            assert all(on), (name, binds[-1])

    model = os.path.join(OUT, name + ".model.safetensors")
    r = subprocess.run([sys.executable, TOOL, ckpt, "-o", model], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("converter failed on %s:\n%s" % (name, r.stderr))
    data = {"input": feeds["x"], "expected.y": out64[0], "expected.hn": out64[1]}
    if MODES[kind] == "lstm":
        data["expected.cn"] = out64[2]
    if init:
        data["h0"] = feeds["h0"]
        if MODES[kind] == "lstm":
            data["c0"] = feeds["c0"]
    if lengths is not None:
        data["seq_lengths"] = np.asarray(lengths, np.int32)
    meta = {"case": name, "seq_len": str(T), "batch": str(B), "tensorflow": tf.__version__,
            "source": "tests/golden/make_tf_golden.py"}
    if wrappers is not None:
        meta["config"] = json.dumps(layer_config(case), separators=(",", ":"))
    safetensors_io.save_file(data, os.path.join(OUT, name + ".data.safetensors"), metadata=meta)
    tool_lines = [l for l in r.stderr.splitlines() if l.startswith(("layer", "note", "wrote"))]
    print("%-28s f32-vs-f64 %.1e  %s%s" % (name, err, tool_lines[-1] if tool_lines else "",
                                           "  [%s]" % ", ".join(binds) if binds else ""))


def make_dropout_case(case, tmp):
    name, kind, L, I, H, B, T, lengths, init, wrapper, seed, step = case
    O = out_size(kind, H)
    lstm = MODES[kind] == "lstm"
    rng = np.random.default_rng(sum(map(ord, name)))
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32),
             "h0": (rng.standard_normal((L, B, O)) if init else np.zeros((L, B, O))).astype(np.float32),
             "c0": (rng.standard_normal((L, B, H)) if init else np.zeros((L, B, H))).astype(np.float32)}
    ckpt = os.path.join(tmp, name, "model.ckpt")
    del MASK_LOG[:]
    out32, values = run(case, tf.float32, feeds, ckpt=ckpt)
    out64, _ = run(case, tf.float64, feeds, values=values, block_op=False)
    err = max(rel(a, b) for a, b in zip(out32, out64))
    assert err < 1e-5, (name, err)
    # Every mask site keeps somewhere and drops somewhere (no vacuous site).
    sites = {}
    for (l, kind_, var, bits) in MASK_LOG:
        sites.setdefault((l, kind_, var), set()).update(b for row in bits for b in row)
    weak = [k for k, v in sites.items() if v != {0, 1}]
    assert not weak, (name, "mask sites that never drop or never keep (layer, kind, variational)", weak)
    # The masks change the result: the same graph with keep 1 everywhere differs.
    plain = (name, kind, L, I, H, B, T, lengths, init, {"seed": wrapper.get("seed", 0)}, seed, step)
    DROPOUT_BY_NAME[name] = plain
    try:
        outp, _ = run(plain, tf.float64, feeds, values=values, block_op=False)
    finally:
        DROPOUT_BY_NAME[name] = case
    assert rel(outp[0], out64[0]) > 1e-3, (name, "dropout had no visible effect")
    if lengths is not None:
        for b, n in enumerate(lengths):
            assert np.all(out64[0][n:, b] == 0.0)

    model = os.path.join(OUT, name + ".model.safetensors")
    r = subprocess.run([sys.executable, TOOL, ckpt, "-o", model], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("converter failed on %s:\n%s" % (name, r.stderr))
    data = {"input": feeds["x"], "expected.y": out64[0], "expected.hn": out64[1]}
    if lstm:
        data["expected.cn"] = out64[2]
    if init:
        data["h0"] = feeds["h0"]
        if lstm:
            data["c0"] = feeds["c0"]
    if lengths is not None:
        data["seq_lengths"] = np.asarray(lengths, np.int32)
    layer = {"mode": MODES[kind], "hidden_size": H}
    if MODES[kind] == "gru":
        layer["gru"] = "reset-after" if kind == "cudnn_gru" else "reset-before"
    opts = lstm_options(kind) if kind.startswith("lstm+") else {}
    if opts.get("num_proj"):
        layer["proj_size"] = opts["num_proj"]
    if opts.get("use_peepholes"):
        layer["peepholes"] = True
    layer["wrappers"] = [dict({"type": "dropout"}, **wrapper)]
    config = {"input_size": I, "layers": [dict(layer) for _ in range(L)]}
    meta = {"case": name, "seq_len": str(T), "batch": str(B), "tensorflow": tf.__version__,
            "source": "tests/golden/make_tf_golden.py (TF DropoutWrapper given rnncore's masks)",
            "config": json.dumps(config, separators=(",", ":")), "run_mode": "training", "seed": str(seed),
            "step": str(step)}
    safetensors_io.save_file(data, os.path.join(OUT, name + ".data.safetensors"), metadata=meta)
    tool_lines = [l for l in r.stderr.splitlines() if l.startswith(("layer", "note", "wrote"))]
    print("%-28s f32-vs-f64 %.1e  %d mask sites  %s" % (name, err, len(sites), tool_lines[-1] if tool_lines else ""))


KERAS_FILE_CASES = ["keras_file_lstm_gru_bilstm", "keras_file_bilstm_l2", "keras_file_gru_rb"]  # tf_keras_models.py


def make_keras_file_cases(tmp, only):
    """Keras 3 models saved as .keras (tests/golden/tf_keras_models.py, in a process of its own: Keras 3 needs
    eager TensorFlow), converted by tools/tf_to_safetensors.py: <case>.model.safetensors as the tool wrote it,
    <case>.data.safetensors with the float64 Keras twin's outputs (and 'config' where the layers differ)."""
    names = [n for n in KERAS_FILE_CASES if not only or n in only]
    if not names:
        return
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_keras_models.py")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    r = subprocess.run([sys.executable, helper, tmp], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit("tf_keras_models.py failed:\n%s" % r.stderr)
    for name in names:
        z = np.load(os.path.join(tmp, name + ".npz"))
        model = os.path.join(OUT, name + ".model.safetensors")
        t = subprocess.run([sys.executable, TOOL, os.path.join(tmp, name + ".keras"), "-o", model],
                           capture_output=True, text=True, env=env)
        if t.returncode != 0:
            raise SystemExit("converter failed on %s:\n%s" % (name, t.stderr))
        T, B = z["input"].shape[:2]
        data = {"input": z["input"], "expected.y": z["y"], "expected.hn": z["hn"]}
        if z["cn"].size:
            data["expected.cn"] = z["cn"]
        meta = {"case": name, "seq_len": str(T), "batch": str(B), "keras": str(z["keras"]), "format": "keras",
                "source": "tests/golden/make_tf_golden.py (a .keras file from tests/golden/tf_keras_models.py)"}
        if str(z["config"]):
            meta["config"] = str(z["config"])
        safetensors_io.save_file(data, os.path.join(OUT, name + ".data.safetensors"), metadata=meta)
        tool_lines = [l for l in t.stderr.splitlines() if l.startswith(("layer", "note", "wrote"))]
        print("%-28s f32-vs-f64 %.1e  %s" % (name, float(z["err"]), tool_lines[-1] if tool_lines else ""))


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])  # case names: make only those
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if not only or case[0] in only:
                make_case(case, tmp)
        for case in DROPOUT_CASES:
            if not only or case[0] in only:
                make_dropout_case(case, tmp)
        make_keras_file_cases(tmp, only)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("%d cases, %d bytes in %s" % (len(CASES) + len(DROPOUT_CASES) + len(KERAS_FILE_CASES), total, OUT))


if __name__ == "__main__":
    main()

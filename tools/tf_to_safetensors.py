#!/usr/bin/env python3
"""Convert a TensorFlow checkpoint (TF1 RNN cells, CudnnLSTM) or a Keras model to an rnncore model file.

    tf_to_safetensors.py CHECKPOINT_PREFIX -o model.safetensors     # e.g. /tmp/run/model.ckpt-1000
    tf_to_safetensors.py model.keras -o model.safetensors           # or model.h5
    rnncore run --weights model.safetensors --input x.npy --output y.npy

Checkpoints: the variables of TF1 cells -- LSTMCell, BasicLSTMCell, LSTMBlockCell,
CudnnCompatibleLSTMCell (also what CudnnLSTM saves), GRUCell, CudnnCompatibleGRUCell, BasicRNNCell --
under MultiRNNCell (`.../multi_rnn_cell/cell_<k>/...`), bidirectional_dynamic_rnn (`.../fw/...`,
`.../bw/...`) and stack_bidirectional_dynamic_rnn / CudnnLSTM scopes are written in rnncore's
`tensorflow` layout (docs/weights.md) as TF saved them, renamed `cell_<l>[/fw|/bw]/<variable>`.
LSTMCell's peepholes (`w_i_diag`, `w_f_diag`, `w_o_diag`) and projection (`projection/kernel`,
num_proj) are written with the cell's other variables.
Metadata: format, mode, gru variant, forget_bias, cell_clip, proj_clip (one value for every layer, or
a comma-separated list of one per layer, 0 for none, where the layers differ), and `config`, the stack
(docs/config.md), where the layers differ in cell or size: `rnncore run` runs the file with no flag.
What a checkpoint does not store -- LSTMCell's forget_bias, cell_clip and proj_clip, the RNN activation --
is read from the `.meta` graph next to it when there is one, for each cell from its own ops (those that
multiply by its kernel, in the graph or in a while loop's body function); a fact that cannot be read for
its layer, or that rnncore cannot hold, stops the conversion with a line naming the layer and the fact.
Without a graph, TF's defaults (no clipping, tanh) are assumed and said so (override with --forget-bias /
--mode). LSTMBlockCell's peepholes (use_peephole: w_i_diag, w_f_diag, w_o_diag, its wci, wcf, wco) and
cell_clip are read like LSTMCell's; the op's use_peephole attribute must agree with the variables.

Keras models: LSTM, GRU, SimpleRNN layers (and Bidirectional of them, merge_mode concat), in
sequence, written in rnncore's `keras` layout.

Wrappers (DropoutWrapper, ResidualWrapper) own no variables: give them to `rnncore run --config`
(docs/config.md).

Needs TensorFlow (`pip install tensorflow-cpu`; for TF1 graphs also tf-keras); rnncore itself does not.
"""

import argparse
import json
import os
import re
import struct
import sys

import numpy as np

CELL_SCOPES = {  # scope name -> (mode, default forget bias)
    "lstm_cell": ("lstm", 1.0),  # LSTMCell, LSTMBlockCell
    "basic_lstm_cell": ("lstm", 1.0),
    "cudnn_compatible_lstm_cell": ("lstm", 0.0),
    "gru_cell": ("gru", None),
    "cudnn_compatible_gru_cell": ("gru", None),
    "basic_rnn_cell": ("rnn_tanh", None),
}
# Variables of a cell, relative to its scope (longest first, so "gates/kernel" is not read as "kernel").
CELL_VARIABLES = [
    "candidate/input_projection/kernel", "candidate/input_projection/bias",
    "candidate/hidden_projection/kernel", "candidate/hidden_projection/bias",
    "candidate/kernel", "candidate/bias", "gates/kernel", "gates/bias",
    "projection/kernel", "w_i_diag", "w_f_diag", "w_o_diag", "kernel", "bias",
]


class ConvertError(Exception):
    pass


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def import_tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError:
        raise ConvertError("TensorFlow is not installed: pip install tensorflow-cpu (only this converter needs it)")
    return tf


# ---------------------------------------------------------------- safetensors


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, ndarray) in order; metadata: dict of strings. Float tensors keep
    F32/F64/F16, int8/int16/int32 ones I8/I16/I32 (tflite_to_safetensors.py); anything else becomes F32."""
    dtypes = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("float16"): "F16",
              np.dtype("int8"): "I8", np.dtype("int16"): "I16", np.dtype("int32"): "I32"}
    header = {"__metadata__": metadata}
    offset, blobs = 0, []
    # Wider elements first, so every tensor is aligned to its element size.
    for name, a in sorted(tensors, key=lambda t: -np.asarray(t[1]).dtype.itemsize):
        a = np.ascontiguousarray(a)
        if a.dtype not in dtypes:
            a = a.astype(np.float32)
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------- checkpoints


def split_cell_variable(name):
    """'rnn/multi_rnn_cell/cell_0/lstm_cell/kernel' -> ('rnn/multi_rnn_cell/cell_0', 'lstm_cell', 'kernel')."""
    for var in CELL_VARIABLES:
        if name.endswith("/" + var):
            scope = name[: -len(var) - 1]
            outer, _, cell = scope.rpartition("/")
            return outer, cell, var
    return None


class Cell:
    def __init__(self, outer, name):
        self.outer, self.name, self.vars = outer, name, {}
        parts = outer.split("/") if outer else []
        self.direction = 0
        dir_at = max((i for i, p in enumerate(parts) if p in ("fw", "bw")), default=-1)
        if dir_at >= 0:
            self.direction = 1 if parts[dir_at] == "bw" else 0
        layer_at = max((i for i, p in enumerate(parts) if re.fullmatch(r"cell_\d+", p)), default=-1)
        self.layer = int(parts[layer_at][5:]) if layer_at >= 0 else 0
        # A direction scope outside the layer scope: bidirectional_dynamic_rnn over whole stacks.
        self.stack_per_direction = 0 <= dir_at < layer_at
        drop = {dir_at, layer_at}
        if layer_at > 0 and parts[layer_at - 1] == "multi_rnn_cell":
            drop.add(layer_at - 1)
        self.group = "/".join(p for i, p in enumerate(parts) if i not in drop)
        self.bidirectional = dir_at >= 0

    @property
    def scope(self):
        return (self.outer + "/" if self.outer else "") + self.name

    def kind(self):
        v = self.vars
        if "gates/kernel" in v:
            return "cudnn_gru" if "candidate/input_projection/kernel" in v else "gru"
        return CELL_SCOPES[self.name][0]


def find_cells(names, scope):
    cells, ignored = {}, []
    for n in sorted(names):
        if scope and not (n == scope or n.startswith(scope.rstrip("/") + "/")):
            continue
        parts = split_cell_variable(n)
        if parts is None or parts[1] not in CELL_SCOPES:
            ignored.append(n)
            continue
        outer, cell, var = parts
        key = (outer, cell)
        cells.setdefault(key, Cell(outer, cell)).vars[var] = n
    return list(cells.values()), ignored


class Graph:
    """A checkpoint's .meta graph: its bodies (the top-level graph, and each function: the while-loop
    bodies of dynamic_rnn), and which variables a tensor of a body reads, followed through variable
    reads, identities and function arguments to the caller's input (a While, If or call op)."""

    CALL_ATTRS = (("body", 0), ("cond", 0), ("f", 0), ("then_branch", 1), ("else_branch", 1))

    def __init__(self, meta_path, tf):
        from tensorflow.core.protobuf import meta_graph_pb2

        m = meta_graph_pb2.MetaGraphDef()
        with open(meta_path, "rb") as f:
            m.ParseFromString(f.read())
        self.tf = tf
        self.bodies = {"": {n.name: n for n in m.graph_def.node}}
        self.args = {"": []}
        for fn in m.graph_def.library.function:
            self.bodies[fn.signature.name] = {n.name: n for n in fn.node_def}
            self.args[fn.signature.name] = [a.name for a in fn.signature.input_arg]
        self.callers = {}  # function -> [(body of the call, call node, inputs before the function's)]
        for body_name, body in self.bodies.items():
            for node in body.values():
                for attr, skip in self.CALL_ATTRS:
                    if attr in node.attr and node.attr[attr].HasField("func"):
                        self.callers.setdefault(node.attr[attr].func.name, []).append((body_name, node, skip))

    def variables(self, body_name, ref, depth=0):
        """Names of the variables that tensor `ref` of a body reads."""
        name = ref.lstrip("^").split(":")[0]
        node = self.bodies[body_name].get(name)
        if depth > 100:
            return set()
        if node is None:  # a function argument: what each caller passes there
            if name not in self.args[body_name]:
                return set()
            i, out = self.args[body_name].index(name), set()
            for caller_body, call, skip in self.callers.get(body_name, []):
                inputs = [x for x in call.input if not x.startswith("^")]
                if skip + i < len(inputs):
                    out |= self.variables(caller_body, inputs[skip + i], depth + 1)
            return out
        if node.op in ("VarHandleOp", "VariableV2", "Variable"):
            shared = node.attr["shared_name"].s.decode() if "shared_name" in node.attr else ""
            return {node.name, shared} - {""}
        if node.op in ("ReadVariableOp", "Identity", "RefIdentity", "Enter", "RefEnter", "Switch", "RefSwitch"):
            return self.variables(body_name, node.input[0], depth + 1)
        return set()

    def cell_scopes(self, cell):
        """Where the ops of `cell` are: (body, op scope) of each op that multiplies by the cell's kernel
        (a MatMul, or the fused LSTMBlockCell op's w). static_rnn gives every step's ops one scope
        (rnn/rnn/multi_rnn_cell/cell_0/lstm_cell, ops MatMul_1, clip_by_value_1, ...); dynamic_rnn puts
        them in its while loop's body function (lstm_cell/MatMul in a function per layer and direction)."""
        kernel = cell.vars.get("kernel") or cell.vars.get("gates/kernel")
        found = set()
        for body_name, body in self.bodies.items():
            for node in body.values():
                if node.op in ("MatMul", "BatchMatMul", "BatchMatMulV2") and len(node.input) >= 2:
                    w = node.input[1]
                elif node.op == "LSTMBlockCell" and len(node.input) >= 4:
                    w = node.input[3]
                else:
                    continue
                if kernel in self.variables(body_name, w):
                    found.add((body_name, node.name.rpartition("/")[0]))
        return found

    def const_value(self, body, ref):
        node = body.get(ref.split(":")[0])
        if node is None or node.op != "Const":
            return None
        v = self.tf.make_ndarray(node.attr["value"].tensor)
        return float(v) if v.size == 1 else None


ACTIVATION_OPS = {"Tanh", "Relu", "Sigmoid", "Relu6", "Elu", "Selu", "Softsign", "Softplus", "LeakyRelu", "Gelu"}


def clip_kind(body, node):
    """'proj_clip' if a clip_by_value's Minimum clips LSTMCell's projection (a MatMul), else 'cell_clip'."""
    src = body.get(node.input[0].split(":")[0].lstrip("^"))
    return "proj_clip" if src is not None and src.op in ("MatMul", "BatchMatMulV2") else "cell_clip"


def inspect_graph(cell, where, graph):
    """What the graph says about one cell, read from its own ops only (Graph.cell_scopes): forget bias
    values, clip values, activation ops, the fused op's attributes. `where` names the layer in errors."""
    found = {"forget_bias": set(), "cell_clip": set(), "proj_clip": set(), "activations": set(),
             "block_op": False, "block_peephole": False}
    scopes = graph.cell_scopes(cell)
    if not scopes and cell.name.startswith("cudnn_compatible_"):
        # CudnnLSTM / CudnnGRU: the CudnnRNN op runs opaque parameters, saved under these names; the cell has
        # no option (forget bias 0, no clip, tanh), so there is nothing to read.
        found["fixed"] = True
        return found
    if not scopes or any(not path for _, path in scopes):
        raise ConvertError("%s: no op of the .meta graph reads its kernel '%s' inside a cell scope, so its "
                           "forget bias, clips and activation cannot be read; the conversion stops rather than "
                           "guess them" % (where, cell.vars.get("kernel") or cell.vars.get("gates/kernel")))
    for body_name, path in sorted(scopes):
        body = graph.bodies[body_name]
        for name, node in body.items():
            if not name.startswith(path + "/"):
                continue
            rest = name[len(path) + 1:]
            # clip_ops.clip_by_value(x, -clip, clip): Minimum(x, clip), then Maximum(., -clip).
            if re.match(r"clip_by_value(_\d+)?/Minimum$", rest) and node.op == "Minimum":
                v = graph.const_value(body, node.input[1])
                if v is None:
                    raise ConvertError("%s: clip_by_value '%s' with a bound that is not a constant" % (where, name))
                found[clip_kind(body, node)].add(v)
            if node.op in ACTIVATION_OPS:
                found["activations"].add(node.op)
            if node.op == "LSTMBlockCell":  # LSTMBlockCell / CudnnCompatibleLSTMCell: attributes of one op
                found["forget_bias"].add(float(node.attr["forget_bias"].f))
                if node.attr["cell_clip"].f > 0:
                    found["cell_clip"].add(float(node.attr["cell_clip"].f))
                found["block_op"] = True
                found["block_peephole"] = found["block_peephole"] or node.attr["use_peephole"].b
            # LSTMCell's f gate: add(split:2, forget_bias) (static_rnn numbers each step's: add_2, split_1:2)
            if re.fullmatch(r"add(_\d+)?", rest) and node.op in ("Add", "AddV2") and len(node.input) == 2:
                if re.search(r"split(_\d+)?(:output)?:2$", node.input[0]):
                    v = graph.const_value(body, node.input[1])
                    if v is not None:
                        found["forget_bias"].add(v)
    return found


def order_layers(cells):
    groups = sorted({c.group for c in cells})
    if len(groups) > 1:
        raise ConvertError("several recurrent models in the checkpoint (scopes %s); pass --scope to pick one"
                           % ", ".join("'%s'" % g for g in groups))
    bi = {c.bidirectional for c in cells}
    if len(bi) > 1:
        raise ConvertError("some cells are under fw/bw scopes and some are not: " +
                           ", ".join(c.scope for c in cells))
    if any(c.stack_per_direction for c in cells) and max(c.layer for c in cells) > 0:
        raise ConvertError("bidirectional_dynamic_rnn over MultiRNNCell stacks runs each direction's whole stack "
                           "on its own; rnncore's bidirectional layers concatenate both directions after every "
                           "layer (CudnnLSTM, stack_bidirectional_dynamic_rnn). Not convertible: " +
                           ", ".join(c.scope for c in cells))
    D = 2 if bi.pop() else 1
    by = {}
    for c in cells:
        if (c.layer, c.direction) in by:
            raise ConvertError("two cells for layer %d direction %d: '%s' and '%s'; pass --scope"
                               % (c.layer, c.direction, by[(c.layer, c.direction)].scope, c.scope))
        by[(c.layer, c.direction)] = c
    L = max(c.layer for c in cells) + 1
    for l in range(L):
        for d in range(D):
            if (l, d) not in by:
                raise ConvertError("layer %d%s is missing (cells found: %s)"
                                   % (l, ["", " forward", " backward"][d + (D == 2)],
                                      ", ".join(c.scope for c in cells)))
    return [[by[(l, d)] for d in range(D)] for l in range(L)]


def check_cell(cell):
    v = cell.vars
    peep = [p for p in ("w_i_diag", "w_f_diag", "w_o_diag") if p in v]
    if peep and len(peep) != 3:
        raise ConvertError("cell '%s' has %s but not all of w_i_diag, w_f_diag, w_o_diag" % (cell.scope, peep))
    need = {"lstm": ["kernel", "bias"], "rnn_tanh": ["kernel", "bias"],
            "gru": ["gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"],
            "cudnn_gru": ["gates/kernel", "gates/bias", "candidate/input_projection/kernel",
                          "candidate/input_projection/bias", "candidate/hidden_projection/kernel",
                          "candidate/hidden_projection/bias"]}[cell.kind()]
    if cell.kind() == "lstm":  # LSTMCell(use_peepholes=True), LSTMCell(num_proj=P)
        need = need + peep + (["projection/kernel"] if "projection/kernel" in v else [])
    missing = [n for n in need if n not in v]
    if missing:
        raise ConvertError("cell '%s' lacks %s" % (cell.scope, ", ".join(missing)))
    extra = [n for n in v if n not in need]
    if extra:
        raise ConvertError("cell '%s' has variables of another cell kind too: %s" % (cell.scope, ", ".join(extra)))
    return need


def convert_checkpoint(path, args):
    tf = import_tensorflow()
    progress("reading checkpoint %s" % path)
    try:
        reader = tf.train.load_checkpoint(path)
    except Exception as e:  # TF raises several types for a bad path
        raise ConvertError("cannot read checkpoint '%s': %s" % (path, str(e).splitlines()[0]))
    names = list(reader.get_variable_to_shape_map())
    cells, ignored = find_cells(names, args.scope)
    if not cells:
        raise ConvertError("no TF1 RNN cell variables in '%s'%s (looked for scopes %s); variables: %s"
                           % (path, " under scope '%s'" % args.scope if args.scope else "",
                              ", ".join(sorted(CELL_SCOPES)), ", ".join(sorted(names)[:20])))
    layers = order_layers(cells)
    needs = [[check_cell(c) for c in layer] for layer in layers]

    meta = path + ".meta"
    graph = Graph(meta, tf) if os.path.exists(meta) else None
    if graph is None:
        progress("note: no graph %s: forget_bias, cell_clip and the RNN activation are not in checkpoints; "
                 "TF's defaults are assumed (pass --forget-bias / --mode to say otherwise)" % meta)
    else:
        progress("reading graph %s" % meta)
    facts = [layer_facts(l, layer, graph, args, reader) for l, layer in enumerate(layers)]

    tensors, D = [], len(layers[0])
    for l, layer in enumerate(layers):
        for d, c in enumerate(layer):
            progress("layer %d%s: %s (%s) %s" % (l, ["", "/fw", "/bw"][d + (D == 2)], c.scope, c.kind(),
                                                 list(reader.get_tensor(c.vars[needs[l][d][0]]).shape)))
            for var in needs[l][d]:
                name = "cell_%d%s/%s" % (l, ["", "/fw", "/bw"][d + (D == 2)], var)
                tensors.append((name, reader.get_tensor(c.vars[var])))

    metadata = {"format": "tensorflow", "source": "tools/tf_to_safetensors.py from TensorFlow %s checkpoint %s"
                % (tf.__version__, os.path.basename(path))}
    metadata.update(stack_metadata(facts, D))
    metadata["tf_scopes"] = ",".join(c.scope for layer in layers for c in layer)
    ignored_note(ignored)
    return tensors, metadata


def layer_name(l, d, D, cell):
    return "layer %d%s (cell '%s')" % (l, ["", "/fw", "/bw"][d + (D == 2)], cell.scope)


def cell_facts(cell, where, graph, args, reader):
    """One cell's mode, GRU variant, hidden size, forget bias and clips, from its variables and its own ops."""
    kind = cell.kind()
    mode = {"cudnn_gru": "gru"}.get(kind, kind)
    g = inspect_graph(cell, where, graph) if graph is not None else None
    f = {"mode": mode, "gru": None, "forget_bias": None, "cell_clip": 0.0, "proj_clip": 0.0}
    f["hidden"] = int(reader.get_tensor(cell.vars["gates/bias" if mode == "gru" else "bias"]).shape[0]
                      // {"lstm": 4, "gru": 2, "rnn_tanh": 1}[mode])
    if mode == "gru":
        f["gru"] = "reset-after" if kind == "cudnn_gru" else "reset-before"
    if "w_i_diag" in cell.vars and graph is not None and cell.name != "lstm_cell":
        raise ConvertError("%s: peepholes of this cell kind are not supported (LSTMCell's are)" % where)
    if g is None:
        if mode == "lstm":
            f["forget_bias"] = CELL_SCOPES[cell.name][1]
        if mode == "rnn_tanh" and args.mode:
            f["mode"] = args.mode
        return f
    for key in ("cell_clip", "proj_clip"):
        if mode != "lstm" and g[key]:
            raise ConvertError("%s (%s) clips (%s): only LSTM cells clip in rnncore" % (where, mode, key))
        if len(g[key]) > 1:
            raise ConvertError("%s: its ops hold several %s values %s" % (where, key, sorted(g[key])))
        f[key] = g[key].pop() if g[key] else 0.0
    if g["block_op"] and g["block_peephole"] != ("w_i_diag" in cell.vars):
        raise ConvertError("%s: its LSTMBlockCell op has use_peephole=%s but the checkpoint %s w_i_diag, w_f_diag, "
                           "w_o_diag" % (where, g["block_peephole"], "lacks" if g["block_peephole"] else "has"))
    acts = g["activations"]
    if mode == "rnn_tanh":
        if acts not in ({"Tanh"}, {"Relu"}):
            raise ConvertError("%s: activation ops %s; rnncore's Elman RNN runs tanh or relu"
                               % (where, ", ".join(sorted(acts)) or "none found"))
        f["mode"] = "rnn_relu" if acts == {"Relu"} else "rnn_tanh"
        if args.mode and args.mode != f["mode"]:
            raise ConvertError("%s: the graph says activation %s, --mode says %s" % (where, f["mode"][4:], args.mode))
    elif acts - {"Sigmoid", "Tanh"}:
        raise ConvertError("%s: activation ops %s; rnncore's %s runs sigmoid gates and tanh"
                           % (where, ", ".join(sorted(acts - {"Sigmoid", "Tanh"})), mode.upper()))
    if mode == "lstm":
        if len(g["forget_bias"]) > 1:
            raise ConvertError("%s: its ops add several forget biases %s" % (where, sorted(g["forget_bias"])))
        if g["forget_bias"]:
            f["forget_bias"] = g["forget_bias"].pop()
        else:
            f["forget_bias"] = CELL_SCOPES[cell.name][1]
            if args.forget_bias is None and not g.get("fixed"):
                progress("note: %s: no forget bias found among its ops; assuming %g" % (where, f["forget_bias"]))
    return f


def layer_facts(l, layer, graph, args, reader):
    """The facts of layer l, which its directions must share (rnncore has one cell description per layer)."""
    D = len(layer)
    per_dir = [cell_facts(c, layer_name(l, d, D, c), graph, args, reader) for d, c in enumerate(layer)]
    if args.forget_bias is not None:
        for f in per_dir:
            if f["mode"] == "lstm":
                f["forget_bias"] = args.forget_bias
    for key in ("mode", "gru", "hidden", "forget_bias", "cell_clip", "proj_clip"):
        values = [f[key] for f in per_dir]
        if len(set(values)) > 1:
            raise ConvertError("layer %d: its directions differ in %s (%s); rnncore's bidirectional layer has one"
                               % (l, {"hidden": "size", "gru": "GRU variant"}.get(key, key),
                                  ", ".join("%s %s" % (["fw", "bw"][d], v) for d, v in enumerate(values))))
    return per_dir[0]


def stack_metadata(facts, D):
    """Metadata that `rnncore run` reads: the stack, where its layers differ in cell or size (key 'config',
    docs/config.md), else mode and gru; forget_bias and the clips, one value or one per layer."""
    out = {}
    modes = [f["mode"] for f in facts]
    if len({(f["mode"], f["gru"], f["hidden"]) for f in facts}) == 1:
        out["mode"] = modes[0]
        if facts[0]["gru"]:
            out["gru"] = facts[0]["gru"]
    else:
        layers = []
        for f in facts:
            layer = {"mode": f["mode"], "hidden_size": f["hidden"]}
            if D == 2:
                layer["direction"] = "bidirectional"
            if f["gru"]:
                layer["gru"] = f["gru"]
            layers.append(layer)
        out["config"] = json.dumps({"layers": layers}, separators=(",", ":"))
        progress("note: the layers differ (%s): the file carries its stack (metadata 'config')"
                 % ", ".join("%s %d" % (f["mode"], f["hidden"]) for f in facts))
    if "lstm" in modes:
        # One value for every layer, or one per layer (0 for a layer that is not an LSTM) where they differ.
        for key in ("forget_bias", "cell_clip", "proj_clip"):
            values = [float(f[key] or 0.0) if f["mode"] == "lstm" else 0.0 for f in facts]
            lstm_values = {v for v, m in zip(values, modes) if m == "lstm"}
            if key != "forget_bias" and max(values) == 0:
                continue
            if len(lstm_values) == 1 and (key == "forget_bias" or len(set(values)) == 1):
                out[key] = repr(lstm_values.pop())
            else:
                out[key] = ",".join(repr(v) for v in values)
    return out


def ignored_note(ignored):
    ignored = [n for n in ignored if not n.startswith("global_step") and "/Adam" not in n and "/Momentum" not in n]
    if ignored:
        progress("not recurrent-cell variables, left out: %s%s" % (", ".join(ignored[:10]),
                                                                   " ..." if len(ignored) > 10 else ""))


# ---------------------------------------------------------------- Keras


def keras_cell(layer, keras):
    """(mode, gru variant or None, cell layer) of a Keras recurrent layer, or None for another layer."""
    name = type(layer).__name__
    if name == "Bidirectional":
        if layer.merge_mode != "concat":
            raise ConvertError("layer '%s': Bidirectional merge_mode '%s' (rnncore concatenates)"
                               % (layer.name, layer.merge_mode))
        return keras_cell(layer.forward_layer, keras)
    if name not in ("LSTM", "GRU", "SimpleRNN"):
        return None
    act = getattr(layer.activation, "__name__", str(layer.activation))
    rec = getattr(getattr(layer, "recurrent_activation", None), "__name__", "sigmoid")
    if name == "SimpleRNN":
        if act not in ("tanh", "relu"):
            raise ConvertError("layer '%s': SimpleRNN activation '%s' (rnncore has tanh and relu)" % (layer.name, act))
        return ("rnn_" + act, None, layer)
    if act != "tanh" or rec != "sigmoid":
        raise ConvertError("layer '%s': activations %s/%s (rnncore runs tanh with sigmoid gates)"
                           % (layer.name, act, rec))
    if getattr(layer, "go_backwards", False):
        raise ConvertError("layer '%s': go_backwards is not supported" % layer.name)
    if name == "GRU":
        return ("gru", "reset-after" if layer.reset_after else "reset-before", layer)
    return ("lstm", None, layer)


def convert_keras(path, args):
    tf = import_tensorflow()
    import keras

    progress("loading Keras model %s" % path)
    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as e:
        raise ConvertError("cannot load Keras model '%s': %s" % (path, str(e).splitlines()[0]))
    found = []
    for layer in model.layers:
        cell = keras_cell(layer, keras)
        if cell is None:
            if found or type(layer).__name__ not in ("InputLayer",):
                progress("note: layer '%s' (%s) is not recurrent: left out" % (layer.name, type(layer).__name__))
            continue
        found.append((layer, cell))
    if not found:
        raise ConvertError("no LSTM, GRU or SimpleRNN layer in '%s'" % path)
    for layer, (mode, _, _) in found:  # a Keras layer says its activation: --mode may only agree with it
        if args.mode and mode != args.mode:
            raise ConvertError("layer '%s' is %s; --mode %s does not apply" % (layer.name, mode, args.mode))
    modes = {c[0] for _, c in found}
    bis = {type(l).__name__ == "Bidirectional" for l, _ in found}
    single = len(found) == 1 and not bis == {True}
    tensors = []
    for i, (layer, (mode, gru, _)) in enumerate(found):
        dirs = [layer.forward_layer, layer.backward_layer] if type(layer).__name__ == "Bidirectional" else [layer]
        for d, sub in enumerate(dirs):
            weights = sub.get_weights()
            progress("layer %d%s: %s %s" % (i, " reverse" if d else "", sub.name, [list(w.shape) for w in weights]))
            for part, w in zip(("kernel", "recurrent_kernel", "bias"), weights):
                name = part if single else "%s_l%d%s" % (part, i, "_reverse" if d else "")
                tensors.append((name, w))
    metadata = {"format": "keras", "source": "tools/tf_to_safetensors.py from Keras %s model %s"
                % (keras.__version__, os.path.basename(path))}
    # Layers that differ in cell, size or direction: the file carries its stack (docs/config.md).
    stack = []
    for layer, (mode, gru, cell_layer) in found:
        entry = {"mode": mode, "hidden_size": int(cell_layer.units)}
        if type(layer).__name__ == "Bidirectional":
            entry["direction"] = "bidirectional"
        if gru:
            entry["gru"] = gru
        stack.append(entry)
    if any(e != stack[0] for e in stack):
        metadata["config"] = json.dumps({"layers": stack}, separators=(",", ":"))
        progress("note: the layers differ (%s): the file carries its stack (metadata 'config')"
                 % ", ".join("%s %d%s" % (e["mode"], e["hidden_size"], " bi" if "direction" in e else "") for e in stack))
        return tensors, metadata
    if len(modes) == 1:
        metadata["mode"] = modes.pop()
    grus = {c[1] for _, c in found if c[1]}
    if len(grus) == 1:
        metadata["gru"] = grus.pop()
    return tensors, metadata


# ---------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Convert a TensorFlow checkpoint (TF1 RNN cells, CudnnLSTM) or a Keras .keras/.h5 model to "
                    "a safetensors file that `rnncore run --weights` runs with no flags.",
        epilog="Wrappers (DropoutWrapper, ResidualWrapper) own no variables: pass them to rnncore with "
               "--config (docs/config.md). Layouts: docs/weights.md.")
    p.add_argument("model", help="checkpoint prefix (model.ckpt-1000, as given to Saver.restore) or a "
                                 ".keras / .h5 file")
    p.add_argument("-o", "--output", required=True, help="safetensors file to write")
    p.add_argument("--scope", help="take only the variables under this scope (a checkpoint with several RNNs)")
    p.add_argument("--forget-bias", type=float, help="LSTMCell forget_bias of every LSTM layer (default: each "
                                                     "layer's, read from the .meta graph, else 1.0 for LSTMCell, 0 "
                                                     "for CudnnCompatibleLSTMCell)")
    p.add_argument("--mode", choices=["rnn_tanh", "rnn_relu"],
                   help="activation of BasicRNNCell / SimpleRNN layers (default: each layer's, from the graph, "
                        "else tanh; a graph that says otherwise refuses it)")
    args = p.parse_args(argv)
    try:
        if args.model.endswith((".keras", ".h5", ".hdf5")):
            if not os.path.exists(args.model):
                raise ConvertError("'%s' does not exist" % args.model)
            tensors, metadata = convert_keras(args.model, args)
        else:
            if os.path.isdir(args.model):
                raise ConvertError("'%s' is a directory; give the checkpoint prefix (e.g. %s/model.ckpt), or a "
                                   "SavedModel's variables/variables" % (args.model, args.model.rstrip("/")))
            tensors, metadata = convert_checkpoint(args.model, args)
        write_safetensors(args.output, tensors, metadata)
    except ConvertError as e:
        print("tf_to_safetensors: error: %s" % e, file=sys.stderr)
        return 1
    progress("wrote %s: %d tensors, %s" % (args.output, len(tensors),
                                         ", ".join("%s=%s" % kv for kv in metadata.items() if kv[0] != "source")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Convert a quantized (int8) TFLite LSTM model to a safetensors file that `rnncore run` runs.

    tflite_to_safetensors.py model.tflite -o model.safetensors
    rnncore run --weights model.safetensors --input x.npy --output y.npy

The .tflite file is read through LiteRT's interpreter (`tf.lite.Interpreter`: tensor details,
quantization parameters, the ops) and the op options from the flatbuffer. It must hold one or more
UNIDIRECTIONAL_SEQUENCE_LSTM ops, each feeding the next (stacked Keras LSTMs), with TFLite's integer
"8x8_16" semantics -- int8 input, weights and output, int32 biases, int16 cell state, per-tensor
weight scales -- as the TFLite converter writes for a Keras LSTM with full-integer quantization
(representative dataset, TFLITE_BUILTINS_INT8). Around them the graph may have a QUANTIZE op (float
input), a REVERSE_V2 of the time axis (Keras go_backwards on the first layer), a STRIDED_SLICE taking
the last step (return_sequences=False), Dense layers on it or on every step (FULLY_CONNECTED, each
optionally followed by a LOGISTIC or TANH: a Keras Dense with activation="sigmoid" / "tanh"), a
SOFTMAX (activation="softmax") and a DEQUANTIZE op (float output); first, a GATHER of an int8
table by the model's integer input (a Keras Embedding on token ids). A layer may be a Keras
Bidirectional(LSTM): the forward LSTM op on the layer's input, the backward one on its REVERSE_V2,
the backward output reversed back (every step) or both last steps taken (STRIDED_SLICE), and then
(merge_mode concat) a CONCATENATION [forward, backward] whose inputs and output have one
quantization (a copy), or (sum, mul, ave) an int8 ADD, a MUL, or an ADD and a MUL by a constant 0.5,
without fused activations. Nothing else. Refused, naming the feature: projection, peepholes, CIFG,
layer normalization, per-channel weight scales, int16 activations (16x8), hybrid or float LSTMs,
time-major ops, BIDIRECTIONAL_SEQUENCE_LSTM ops, a requantizing CONCATENATION, other ops.

Written (docs/int8.md, "The model file"):
  w_i w_f w_c w_o  I8 [H, I]   input weights per gate (TFLite order i, f, c(=g), o)
  r_i r_f r_c r_o  I8 [H, H]   recurrent weights per gate
  b_i b_f b_c b_o  I32 [H]     gate biases
  metadata (strings; scales as float32 values that read back exactly):
    format=tflite_int8, op=UNIDIRECTIONAL_SEQUENCE_LSTM, I, H, return_sequences (1/0),
    input_scale input_zp (the op's int8 input), w_<g>_scale r_<g>_scale b_<g>_scale,
    output_scale output_zp (the model's int8 output), output_state_scale output_state_zp,
    cell_scale, hidden_scale hidden_zp, cell_clip proj_clip,
    graph_input (int8 or float32: float32 when a QUANTIZE op quantizes it with input_scale/zp),
    graph_output (int8 or float32: float32 when a DEQUANTIZE op dequantizes output_scale/zp),
    source (the .tflite file's name), tf_version; reverse_input=1 for go_backwards.
  A stack of L >= 2 LSTMs: metadata layers=L and every layer's tensors and keys prefixed "l<k>."
  (docs/int8.md, "The model file"); the unprefixed I, H, input_*, output_* describe the model.
  A bidirectional layer k (the file is then always prefixed): l<k>.bidirectional=concat (or sum,
  mul, ave), l<k>.I, l<k>.H (its output width: both directions' for concat, one direction's
  otherwise), l<k>.input_scale/zp, l<k>.output_scale/zp (the CONCATENATION's, or the last merge
  op's, output), and each direction's tensors and keys as a layer's under l<k>.fw. and l<k>.bw.
  A merge's ADD / MUL: l<k>.merge.fw_scale/zp and merge.bw_scale/zp (the quantization it reads each
  direction's output with); for ave also merge.sum_scale/zp (the ADD's output) and merge.half,
  merge.half_scale/zp (the MUL's int8 constant 0.5).
  Dense layer j: fc<j>.w I8 [out, in], fc<j>.b I32 [out], fc<j>.in/out/input_scale/input_zp/
  w_scales/output_scale/output_zp/activation (none, relu, sigmoid, tanh; for sigmoid and tanh
  fc<j>.linear_scale/zp are the FULLY_CONNECTED's output and output_* the LOGISTIC / TANH op's).
  A SOFTMAX on the last step or after the Dense layers (the file is then prefixed): softmax=1,
  softmax.beta, softmax.input_scale/zp, softmax.output_scale/zp (the model's output).
  A Keras Embedding first (a GATHER of an int8 constant table [V, E] by the model's int32 or int64
  input [B, T], the token ids): embedding.table I8 [V, E], embedding=1, embedding.V, embedding.E,
  embedding.scale, embedding.zp (the table's quantization = the lookup's output = the first LSTM's
  input), embedding.ids_dtype (int32 / int64), and graph_input=token_ids. A float table, or a
  GATHER elsewhere or on other indices (a float input CAST to integers), is refused.

Needs TensorFlow (`pip install tensorflow-cpu`); rnncore itself does not. The golden-data script
tests/golden/make_tflite_int8_golden.py extracts its models with this module.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_to_safetensors import ConvertError, import_tensorflow, write_safetensors  # noqa: E402

# UNIDIRECTIONAL_SEQUENCE_LSTM operand indices (tensorflow/lite/kernels/lstm_shared.h)
IN_X = 0
IN_W = {"i": 1, "f": 2, "c": 3, "o": 4}
IN_R = {"i": 5, "f": 6, "c": 7, "o": 8}
IN_PEEP = (9, 10, 11)
IN_B = {"i": 12, "f": 13, "c": 14, "o": 15}
IN_PROJ = (16, 17)
IN_H = 18
IN_C = 19
IN_LN = (20, 21, 22, 23)

LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"


def f32s(v):
    """A float32 value as a string that reads back (strtod, then to float) exactly."""
    return repr(float(np.float32(v)))


def one_scale(detail, what):
    """(scale, zero point) of a per-tensor quantized tensor; refuses per-channel and unquantized ones."""
    q = detail["quantization_parameters"]
    scales, zps = q["scales"], q["zero_points"]
    if len(scales) > 1:
        raise ConvertError("%s (tensor '%s') has per-channel quantization (%d scales); rnncore's integer LSTM, "
                           "like TFLite's fused integer LSTM, takes one scale per tensor"
                           % (what, detail["name"], len(scales)))
    if len(scales) == 0:
        raise ConvertError("%s (tensor '%s') is not quantized" % (what, detail["name"]))
    return float(scales[0]), int(zps[0])


def ops_options(model_bytes, op_name, options_class):
    """(operator, its options table) of every op `op_name` (a BuiltinOperator name) of the model's
    first subgraph, in op order, from the flatbuffer (the interpreter shows neither op options nor
    intermediates); and the schema module."""
    from tensorflow.lite.python import schema_py_generated as schema_fb

    m = schema_fb.Model.GetRootAsModel(model_bytes, 0)
    sg = m.Subgraphs(0)
    wanted = getattr(schema_fb.BuiltinOperator, op_name)
    found = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == wanted:
            t = op.BuiltinOptions()
            o = None
            if t is not None:  # an op without an options table has its defaults
                o = getattr(schema_fb, options_class)()
                o.Init(t.Bytes, t.Pos)
            found.append((op, o))
    return found, schema_fb


def lstm_options(model_bytes):
    """Per UNIDIRECTIONAL_SEQUENCE_LSTM op of the model, in op order: cell_clip, proj_clip, time_major,
    asymmetric_quantize_inputs, whether its activation is tanh, and its intermediate tensors."""
    found, schema_fb = ops_options(model_bytes, LSTM_OP, "UnidirectionalSequenceLSTMOptions")
    if not found:
        raise ConvertError("no %s op in the model" % LSTM_OP)
    return [{
        "cell_clip": o.CellClip(),
        "proj_clip": o.ProjClip(),
        "time_major": bool(o.TimeMajor()),
        "asymmetric_quantize_inputs": bool(o.AsymmetricQuantizeInputs()),
        "tanh_activation": o.FusedActivationFunction() == schema_fb.ActivationFunctionType.TANH,
        "intermediates": [op.Intermediates(j) for j in range(op.IntermediatesLength())],
    } for op, o in found]


def fc_options(model_bytes):
    """Per FULLY_CONNECTED op, in op order: its fused activation (a name), weights format and
    keep_num_dims."""
    found, schema_fb = ops_options(model_bytes, "FULLY_CONNECTED", "FullyConnectedOptions")
    names = {v: k for k, v in vars(schema_fb.ActivationFunctionType).items() if not k.startswith("_")}
    return [{"activation": names.get(o.FusedActivationFunction(), "?"), "weights_format": o.WeightsFormat(),
             "keep_num_dims": bool(o.KeepNumDims())} for _, o in found]


def extract_dense(it, det, op, opts, what):
    """One FULLY_CONNECTED op after the LSTM (a Keras Dense on the last step): int8 input and output
    (per tensor), int8 weights [N, K] (per output channel or per tensor, symmetric), int32 bias or
    none, activation NONE or RELU. Returns (tensors, metadata) with the names of layer j's "fc<j>."."""
    ins = list(op["inputs"]) + [-1] * (3 - len(op["inputs"]))
    x, w, b = ins[:3]
    y = op["outputs"][0]
    types = [np.dtype(det[k]["dtype"]).name for k in (x, w, y)]
    if types != ["int8"] * 3 or (b != -1 and np.dtype(det[b]["dtype"]).name != "int32"):
        raise ConvertError("%s: operand types %s (bias %s); expected int8 input, weights and output and an int32 bias"
                           % (what, types, None if b == -1 else np.dtype(det[b]["dtype"]).name))
    rank = len(det[x]["shape"])
    if opts["weights_format"] != 0 or (opts["keep_num_dims"] and rank != 3):
        raise ConvertError("%s: shuffled weights, or keep_num_dims on a rank-%d input, are not supported" % (what, rank))
    if opts["activation"] not in ("NONE", "RELU"):
        raise ConvertError("%s: fused activation %s is not supported (NONE or RELU)" % (what, opts["activation"]))
    N, K = det[w]["shape"]
    # [B, K] on the last step; [B, T, K] on every step (keep_num_dims: the rows are B·T)
    if list(det[x]["shape"])[-1] != K or rank not in (2, 3) or (rank == 3 and not opts["keep_num_dims"]):
        raise ConvertError("%s: input shape %s, weights [%d, %d]" % (what, list(det[x]["shape"]), N, K))
    q = det[w]["quantization_parameters"]
    scales, zps = q["scales"], q["zero_points"]
    if len(scales) not in (1, N) or np.any(zps != 0) or (len(scales) == N and N > 1 and q["quantized_dimension"] != 0):
        raise ConvertError("%s: weight quantization with %d scales (dimension %d) and zero points %s; expected "
                           "symmetric scales per tensor or per output channel" % (what, len(scales),
                                                                                q["quantized_dimension"], list(zps)))
    sx, zx = one_scale(det[x], "the input of " + what)
    sy, zy = one_scale(det[y], "the output of " + what)
    w_scales = np.broadcast_to(np.asarray(scales, np.float32), (N,))
    tensors = {"w": it.get_tensor(w).copy(),
               "b": it.get_tensor(b).astype(np.int32) if b != -1 else np.zeros(N, np.int32)}
    meta = {"in": str(int(K)), "out": str(int(N)), "input_scale": f32s(sx), "input_zp": str(zx),
            "w_scales": ",".join(f32s(v) for v in w_scales), "output_scale": f32s(sy), "output_zp": str(zy),
            "activation": opts["activation"].lower()}
    return tensors, meta


def softmax_betas(model_bytes):
    """Per SOFTMAX op, in op order: its beta."""
    found, _ = ops_options(model_bytes, "SOFTMAX", "SoftmaxOptions")
    return [o.Beta() for _, o in found]


def extract_softmax(det, op, beta, prev_scale, prev_zp):
    """The SOFTMAX op of a classifier head (Keras Dense(..., activation="softmax"), or a softmax on
    the last step): int8 input and output [B, N] per tensor, reading what the op before it writes.
    Returns its "softmax." metadata."""
    x, y = op["inputs"][0], op["outputs"][0]
    types = [np.dtype(det[k]["dtype"]).name for k in (x, y)]
    if types != ["int8"] * 2 or len(det[x]["shape"]) not in (2, 3):
        raise ConvertError("the SOFTMAX: operand types %s, input shape %s; expected int8 [batch, units] or "
                           "[batch, steps, units]" % (types, list(det[x]["shape"])))
    sx, zx = one_scale(det[x], "the input of the SOFTMAX")
    sy, zy = one_scale(det[y], "the output of the SOFTMAX")
    if (f32s(sx), str(zx)) != (prev_scale, prev_zp):
        raise ConvertError("the SOFTMAX reads its input with another quantization than the op before writes it")
    if not (np.isfinite(beta) and beta > 0):
        raise ConvertError("the SOFTMAX has beta %r; a finite positive beta is supported" % beta)
    return {"softmax": "1", "softmax.beta": f32s(beta), "softmax.input_scale": f32s(sx), "softmax.input_zp": str(zx),
            "softmax.output_scale": f32s(sy), "softmax.output_zp": str(zy)}


LUT_ACTIVATIONS = {"LOGISTIC": "sigmoid", "TANH": "tanh"}


def split_head(ops_after):
    """The ops after the last step as a head: Dense layers [(FULLY_CONNECTED, LOGISTIC/TANH op or
    None)], then an optional SOFTMAX op; None when the ops are not of that form."""
    dense, softmax, k = [], None, 0
    while k < len(ops_after) and ops_after[k]["op_name"] == "FULLY_CONNECTED":
        act = ops_after[k + 1] if k + 1 < len(ops_after) and ops_after[k + 1]["op_name"] in LUT_ACTIVATIONS else None
        dense.append((ops_after[k], act))
        k += 2 if act is not None else 1
    if k < len(ops_after) and ops_after[k]["op_name"] == "SOFTMAX":
        softmax = ops_after[k]
        k += 1
    return (dense, softmax) if k == len(ops_after) else None


def extract_head(it, det, model_bytes, dense, softmax, prev_scale, prev_zp):
    """Tensors and metadata of a head (split_head's parts) after a last step written with
    (prev_scale, prev_zp): each Dense layer j under "fc<j>." -- a LOGISTIC or TANH after it is its
    activation (sigmoid, tanh; its output quantization is the layer's, the FULLY_CONNECTED's own
    is linear_scale / linear_zp) -- and a softmax under "softmax.". Returns (tensors, meta, the
    metadata prefix of the head's output)."""
    tensors, meta, last = {}, {}, None
    if dense:
        meta["dense"] = str(len(dense))
    for j, ((op, act), o) in enumerate(zip(dense, fc_options(model_bytes))):
        what = "Dense %d (FULLY_CONNECTED)" % (j + 1)
        dt, dm = extract_dense(it, det, op, o, what)
        if (dm["input_scale"], dm["input_zp"]) != (prev_scale, prev_zp):
            raise ConvertError("Dense %d reads its input with another quantization than the op before writes it"
                               % (j + 1))
        if act is not None:
            if dm["activation"] != "none":
                raise ConvertError("%s: a fused %s before %s" % (what, dm["activation"], act["op_name"]))
            x, y = act["inputs"][0], act["outputs"][0]
            if x != op["outputs"][0] or [np.dtype(det[t]["dtype"]).name for t in (x, y)] != ["int8"] * 2:
                raise ConvertError("%s: the %s after it must read its int8 output and write int8" % (what, act["op_name"]))
            sy, zy = one_scale(det[y], "the output of the %s after %s" % (act["op_name"], what))
            dm.update({"activation": LUT_ACTIVATIONS[act["op_name"]], "linear_scale": dm["output_scale"],
                       "linear_zp": dm["output_zp"], "output_scale": f32s(sy), "output_zp": str(zy)})
        prev_scale, prev_zp = dm["output_scale"], dm["output_zp"]
        tensors.update({"fc%d.%s" % (j, n): v for n, v in dt.items()})
        meta.update({"fc%d.%s" % (j, key): v for key, v in dm.items()})
        last = "fc%d." % j
    if softmax is not None:
        meta.update(extract_softmax(det, softmax, softmax_betas(model_bytes)[0], prev_scale, prev_zp))
        last = "softmax."
    return tensors, meta, last


def add_head(it, det, model_bytes, parts, L, return_sequences, tensors, meta):
    """Adds a prefixed file's head (split_head's parts, after L LSTM layers) and the model-level keys:
    return_sequences, and the model's input and output as a single-layer file states them (I and H:
    their widths)."""
    ht, hm, head_last = extract_head(it, det, model_bytes, parts[0], parts[1], meta["l%d.output_scale" % (L - 1)],
                                     meta["l%d.output_zp" % (L - 1)])
    tensors.update(ht)
    meta.update(hm)
    meta["return_sequences"] = "1" if return_sequences else "0"
    last = head_last or "l%d." % (L - 1)
    meta["I"] = meta["l0.I"]
    meta["H"] = meta["fc%d.out" % (len(parts[0]) - 1)] if parts[0] else meta["l%d.H" % (L - 1)]
    for key in ("input_scale", "input_zp"):
        meta[key] = meta["l0." + key]
    for key in ("output_scale", "output_zp"):
        meta[key] = meta[last + key]


def check_last_step_slice(it, op, lstm_out, det):
    """A STRIDED_SLICE after the LSTM must take the last time step ([:, -1, :], shrinking the time axis)."""
    if op["inputs"][0] != lstm_out:
        raise ConvertError("the STRIDED_SLICE does not read the LSTM's output")
    try:
        begin, end, strides = (it.get_tensor(k) for k in op["inputs"][1:4])
    except ValueError:
        raise ConvertError("the STRIDED_SLICE's begin/end/strides are not constants")
    T = det[lstm_out]["shape"][1]
    out_shape = list(det[op["outputs"][0]]["shape"])
    in_shape = list(det[lstm_out]["shape"])
    last = (begin[1] == -1 or begin[1] == T - 1) and strides[1] == 1
    if not last or out_shape != [in_shape[0], in_shape[2]]:
        raise ConvertError("the STRIDED_SLICE after the LSTM (begin %s, end %s, strides %s, shape %s) is not the "
                           "last time step that a Keras LSTM with return_sequences=False returns"
                           % (list(begin), list(end), list(strides), out_shape))


def extract_layer(it, det, lstm, opts, what):
    """One LSTM op's weights and quantization: (tensors, metadata) with the names and keys of a
    single-layer file. `what` names the op in errors ("the LSTM", "LSTM 2 of 3")."""
    ins = list(lstm["inputs"])
    ins += [-1] * (24 - len(ins))
    if ins[IN_W["i"]] == -1:
        raise ConvertError("%s: CIFG (coupled input and forget gate: no input-gate weights) is not supported" % what)
    if any(ins[k] != -1 for k in IN_PEEP):
        raise ConvertError("%s: peephole connections are not supported" % what)
    if any(ins[k] != -1 for k in IN_PROJ):
        raise ConvertError("%s: a projection layer is not supported" % what)
    if any(ins[k] != -1 for k in IN_LN):
        raise ConvertError("%s: layer normalization is not supported" % what)
    types = [np.dtype(det[k]["dtype"]).name if k != -1 else None for k in ins]
    x_type = types[IN_X]
    if x_type == "int16":
        raise ConvertError("int16 activations (the 16x8 integer LSTM) are not supported, only int8 (8x8_16)")
    if x_type != "int8" or types[IN_W["i"]] != "int8":
        raise ConvertError("not a full-integer int8 LSTM (input %s, weights %s): a float or hybrid LSTM; convert "
                           "with a representative dataset and supported_ops=[TFLITE_BUILTINS_INT8]"
                           % (x_type, types[IN_W["i"]]))
    expect = ["int8"] * 9 + ["int32"] * 4
    got = [types[k] for k in [IN_X] + [IN_W[g] for g in "ifco"] + [IN_R[g] for g in "ifco"] + [IN_B[g] for g in "ifco"]]
    if got != expect or types[IN_H] != "int8" or types[IN_C] != "int16":
        raise ConvertError("%s: operand types %s (output state %s, cell state %s); expected int8 input and weights, "
                           "int32 biases, int8 output state and int16 cell state" % (what, got, types[IN_H], types[IN_C]))
    if opts["time_major"]:
        raise ConvertError("a time-major LSTM op is not supported (Keras writes batch-major ones)")
    if opts["asymmetric_quantize_inputs"]:
        raise ConvertError("asymmetric_quantize_inputs (a hybrid LSTM) is not supported")
    if not opts["tanh_activation"]:
        raise ConvertError("%s: the activation is not tanh; only tanh is supported" % what)
    if len(opts["intermediates"]) != 5:
        raise ConvertError("%s has %d intermediate tensors; an integer LSTM has 5 (the fifth: the effective hidden "
                           "scale)" % (what, len(opts["intermediates"])))
    hid = det[opts["intermediates"][4]]

    x_shape = det[ins[IN_X]]["shape"]
    H, I = det[ins[IN_W["i"]]]["shape"]
    tensors = {}
    meta = {"I": str(int(I)), "H": str(int(H))}
    in_scale, in_zp = one_scale(det[ins[IN_X]], "the input of " + what)
    out_scale, out_zp = one_scale(det[lstm["outputs"][0]], "the output of " + what)
    meta.update({"input_scale": f32s(in_scale), "input_zp": str(in_zp),
                 "output_scale": f32s(out_scale), "output_zp": str(out_zp),
                 "cell_clip": f32s(opts["cell_clip"]), "proj_clip": f32s(opts["proj_clip"])})
    for g in "ifco":
        for prefix, table, kind in (("w", IN_W, "input weights"), ("r", IN_R, "recurrent weights"), ("b", IN_B, "bias")):
            d = det[ins[table[g]]]
            s, zp = one_scale(d, "gate %s %s" % (g, kind))
            if zp != 0:
                raise ConvertError("gate %s %s (tensor '%s') have zero point %d; expected symmetric (0)"
                                   % (g, kind, d["name"], zp))
            tensors["%s_%s" % (prefix, g)] = it.get_tensor(d["index"]).copy()
            meta["%s_%s_scale" % (prefix, g)] = f32s(s)
    s, zp = one_scale(det[ins[IN_H]], "the output state")
    meta["output_state_scale"], meta["output_state_zp"] = f32s(s), str(zp)
    s, zp = one_scale(det[ins[IN_C]], "the cell state")
    if zp != 0:
        raise ConvertError("the cell state has zero point %d; expected 0" % zp)
    meta["cell_scale"] = f32s(s)
    s, zp = one_scale(hid, "the effective hidden scale intermediate")
    meta["hidden_scale"], meta["hidden_zp"] = f32s(s), str(zp)
    if tensors["w_i"].shape != (H, I) or tensors["r_i"].shape != (H, H) or len(x_shape) != 3 or x_shape[2] != I:
        raise ConvertError("unexpected shapes: input %s, w_i %s, r_i %s"
                           % (list(x_shape), list(tensors["w_i"].shape), list(tensors["r_i"].shape)))
    return tensors, meta


# Metadata keys of one layer; in a file of several layers each carries its layer's prefix "l<k>.".
LAYER_KEYS = ("I", "H", "input_scale", "input_zp", "output_scale", "output_zp", "cell_clip", "proj_clip") + \
    tuple("%s_%s_scale" % (p, g) for g in "ifco" for p in "wrb") + \
    ("output_state_scale", "output_state_zp", "cell_scale", "hidden_scale", "hidden_zp")


def concat_options(model_bytes):
    """Per CONCATENATION op, in op order: its axis and whether its fused activation is NONE."""
    found, schema_fb = ops_options(model_bytes, "CONCATENATION", "ConcatenationOptions")
    return [{"axis": o.Axis(), "no_activation": o.FusedActivationFunction() == schema_fb.ActivationFunctionType.NONE}
            for _, o in found]


def bidi_merge(it, det, op, ends, k, next_ops, no_activation):
    """A Keras Bidirectional's directions merged by an int8 ADD (merge_mode sum), MUL (mul) or ADD
    then MUL by a constant 0.5 (ave): {"mode", "ops", "merge_meta"}, the metadata being the
    quantization each op reads its operands with (merge.fw_scale/zp, merge.bw_scale/zp; for ave
    also the ADD's output merge.sum_scale/zp and the constant merge.half, merge.half_scale/zp)."""
    if sorted(op["inputs"]) != sorted(ends) or len(op["inputs"]) != 2:
        raise ConvertError("layer %d: the %s merging the directions takes %s, not the two directions' outputs"
                           % (k, op["op_name"], list(op["inputs"])))
    if not no_activation.get(op["index"], False):
        raise ConvertError("layer %d: the %s merging the directions has a fused activation" % (k, op["op_name"]))
    meta = {}
    for d, t in (("fw", ends[0]), ("bw", ends[1])):
        s, z = one_scale(det[t], "the %s output read by layer %d's %s" % (d, k, op["op_name"]))
        meta.update({"merge.%s_scale" % d: f32s(s), "merge.%s_zp" % d: str(z)})
    if op["op_name"] == "MUL":
        return {"mode": "mul", "ops": [op], "merge_meta": meta}
    after = next_ops(op["outputs"][0])
    if len(after) == 1 and after[0]["op_name"] == "MUL":
        # merge_mode ave: (forward + backward) · 0.5, the 0.5 a quantized constant.
        mul = after[0]
        const = [t for t in mul["inputs"] if t != op["outputs"][0]]
        try:
            value = np.ravel(it.get_tensor(const[0])) if len(const) == 1 else None
        except ValueError:
            value = None
        if value is None or value.size != 1 or not no_activation.get(mul["index"], False):
            raise ConvertError("layer %d: the ADD merging the directions is followed by a MUL that is not by a "
                               "constant (Keras merge_mode ave multiplies by 0.5)" % k)
        hs, hz = one_scale(det[const[0]], "the constant of layer %d's MUL" % k)
        if abs(hs * (int(value[0]) - hz) - 0.5) > hs:
            raise ConvertError("layer %d: the ADD merging the directions is followed by a MUL by %g, not 0.5 "
                               "(Keras merge_mode ave)" % (k, hs * (int(value[0]) - hz)))
        s, z = one_scale(det[op["outputs"][0]], "the sum of layer %d's directions" % k)
        meta.update({"merge.sum_scale": f32s(s), "merge.sum_zp": str(z), "merge.half": str(int(value[0])),
                     "merge.half_scale": f32s(hs), "merge.half_zp": str(hz)})
        return {"mode": "ave", "ops": [op, mul], "merge_meta": meta}
    return {"mode": "sum", "ops": [op], "merge_meta": meta}


def extract_graph(model_bytes, tf, it, ops, det, lstm_opts, start):
    """A model with a Keras Bidirectional(LSTM) layer, walked from its input: [QUANTIZE], then layers,
    each a plain LSTM ([REVERSE_V2] before the first: go_backwards) or a bidirectional one -- the
    forward LSTM on the layer's input, the backward LSTM on its REVERSE_V2 (time axis), the backward
    output reversed back (every step) or both outputs' last steps (STRIDED_SLICE), then a
    CONCATENATION [forward, backward] on the last axis --, then [STRIDED_SLICE of the last step]
    [FULLY_CONNECTED ...] [DEQUANTIZE]. Returns extract()'s (tensors, metadata, info); the file is
    always prefixed (layers, l<k>.; a bidirectional layer's directions under l<k>.fw. and l<k>.bw.).
    `start` is the tensor the first layer reads: the model's input, or an Embedding's output."""
    consumers = {}
    for o in ops:
        for t in o["inputs"]:
            consumers.setdefault(t, []).append(o)
    used = set()
    opts_concat = dict(zip((o["index"] for o in ops if o["op_name"] == "CONCATENATION"), concat_options(model_bytes)))
    no_activation = {}  # ADD and MUL ops: whether the fused activation is NONE
    for name, options in (("ADD", "AddOptions"), ("MUL", "MulOptions")):
        found, schema_fb = ops_options(model_bytes, name, options)
        indices = [o["index"] for o in ops if o["op_name"] == name]
        no_activation.update({i: opt is None or opt.FusedActivationFunction() == schema_fb.ActivationFunctionType.NONE
                              for i, (_, opt) in zip(indices, found)})

    def next_ops(t):
        return [o for o in consumers.get(t, []) if o["inputs"][0] == t or o["op_name"] in ("CONCATENATION", "ADD", "MUL")]

    def take(o):
        used.add(o["index"])
        return o["outputs"][0]

    def time_reverse(o, where):
        axis = it.get_tensor(o["inputs"][1]) if len(o["inputs"]) > 1 else None
        if axis is None or list(np.ravel(axis)) != [1]:
            raise ConvertError("the REVERSE_V2 %s reverses axes %s; only the time axis (1) is supported"
                               % (where, None if axis is None else list(np.ravel(axis))))

    graph_in, graph_out = it.get_input_details(), it.get_output_details()
    if len(graph_in) != 1 or len(graph_out) != 1:
        raise ConvertError("the model has %d inputs and %d outputs; expected one of each" % (len(graph_in), len(graph_out)))
    cur = start  # the model's input, or an Embedding's output (find_embedding)
    nxt = next_ops(cur)
    float_in = len(nxt) == 1 and nxt[0]["op_name"] == "QUANTIZE"
    if float_in:
        cur = take(nxt[0])
    layers = []  # {"fw": op} or {"fw": op, "bw": op, "mode": merge_mode, "ops": the merge's ops, ...}
    reverse = False
    return_sequences = True
    while return_sequences:
        nxt = next_ops(cur)
        kinds = sorted(o["op_name"] for o in nxt)
        k = len(layers)
        if kinds == ["REVERSE_V2"] and not layers and [o["op_name"] for o in next_ops(nxt[0]["outputs"][0])] == [LSTM_OP]:
            time_reverse(nxt[0], "before the first LSTM")  # Keras go_backwards on the first layer
            reverse = True
            cur = take(nxt[0])
            continue
        if kinds == [LSTM_OP]:
            lstm = nxt[0]
            cur = take(lstm)
            layers.append({"fw": lstm})
            after = next_ops(cur)
            if [o["op_name"] for o in after] == ["STRIDED_SLICE"]:
                check_last_step_slice(it, after[0], cur, det)
                cur = take(after[0])
                return_sequences = False
            continue
        if kinds != ["REVERSE_V2", LSTM_OP]:
            break
        # Keras Bidirectional: the forward LSTM reads the layer's input, the backward one its reverse.
        rev = [o for o in nxt if o["op_name"] == "REVERSE_V2"][0]
        fw = [o for o in nxt if o["op_name"] == LSTM_OP][0]
        time_reverse(rev, "before the backward LSTM of a bidirectional layer")
        bw_in = next_ops(take(rev))
        if [o["op_name"] for o in bw_in] != [LSTM_OP]:
            raise ConvertError("layer %d: the time-reversed input feeds %s, not one LSTM (the backward direction of "
                               "a Keras Bidirectional)" % (k, ", ".join(o["op_name"] for o in bw_in) or "nothing"))
        bw = bw_in[0]
        ends, seqs = [], []
        for d, lstm in (("forward", fw), ("backward", bw)):
            t = take(lstm)
            after = next_ops(t)
            names = [o["op_name"] for o in after]
            if names == ["STRIDED_SLICE"]:
                check_last_step_slice(it, after[0], t, det)
                t = take(after[0])
                seqs.append(False)
            elif d == "forward" and names == ["REVERSE_V2"]:
                raise ConvertError("layer %d: the output of the LSTM on the layer's own input is reversed in time "
                                   "(a Keras Bidirectional around an LSTM with go_backwards=True); not supported" % k)
            elif d == "backward" and names == ["REVERSE_V2"]:
                time_reverse(after[0], "after the backward LSTM")
                t = take(after[0])
                seqs.append(True)
            else:
                seqs.append(True)
            ends.append(t)
        merge = next_ops(ends[0])
        if len(merge) != 1 or [o["index"] for o in next_ops(ends[1])] != [merge[0]["index"]]:
            raise ConvertError("layer %d: the two directions of the bidirectional LSTM do not meet in one op" % k)
        merge = merge[0]
        if merge["op_name"] not in ("CONCATENATION", "ADD", "MUL"):
            raise ConvertError("layer %d: the directions of the bidirectional LSTM meet in a %s op; only "
                               "CONCATENATION, ADD and MUL (Keras merge_mode concat, sum, ave, mul) are supported"
                               % (k, merge["op_name"]))
        if seqs[0] != seqs[1] or (seqs[1] and [o["op_name"] for o in next_ops(bw["outputs"][0])] != ["REVERSE_V2"]):
            raise ConvertError("layer %d: the backward LSTM's output is not reversed back (or the directions differ "
                               "in return_sequences)" % k)
        if merge["op_name"] != "CONCATENATION":
            layer = bidi_merge(it, det, merge, ends, k, next_ops, no_activation)
            for o in layer["ops"]:
                cur = take(o)
            layer.update({"fw": fw, "bw": bw})
            layers.append(layer)
            return_sequences = seqs[0]
            continue
        if list(merge["inputs"]) != ends:
            raise ConvertError("layer %d: the CONCATENATION does not take [forward, backward] (the order of a Keras "
                               "Bidirectional with merge_mode='concat'; go_backwards inside it is not supported)" % k)
        co = opts_concat[merge["index"]]
        rank = len(det[merge["outputs"][0]]["shape"])
        if co["axis"] not in (-1, rank - 1) or not co["no_activation"]:
            raise ConvertError("layer %d: a CONCATENATION on axis %d or with a fused activation" % (k, co["axis"]))
        labels = [one_scale(det[t], "an input of layer %d's CONCATENATION" % k) for t in ends]
        out_label = one_scale(det[merge["outputs"][0]], "the output of layer %d's CONCATENATION" % k)
        if any((f32s(s), z) != (f32s(out_label[0]), out_label[1]) for s, z in labels):
            raise ConvertError("layer %d: the CONCATENATION requantizes (inputs %s, output %s); only one of equal "
                               "quantization (a copy) is supported" % (k, labels, out_label))
        cur = take(merge)
        layers.append({"fw": fw, "bw": bw, "mode": "concat", "ops": [merge]})
        return_sequences = seqs[0]
    if not layers:
        raise ConvertError("no LSTM reads the model's input")
    head = []  # the ops after the last step, checked by split_head
    dequant = False
    while True:
        nxt = next_ops(cur)
        if len(nxt) == 1 and nxt[0]["op_name"] in ("FULLY_CONNECTED", "SOFTMAX", *LUT_ACTIVATIONS) and not dequant:
            head.append(nxt[0])
            cur = take(nxt[0])
        elif len(nxt) == 1 and nxt[0]["op_name"] == "DEQUANTIZE" and not dequant:
            dequant = True
            y_int8 = cur
            cur = take(nxt[0])
        elif not nxt:
            break
        else:
            raise ConvertError("after the LSTM layers: %s (only a STRIDED_SLICE taking the last step, Dense layers "
                               "on it (FULLY_CONNECTED, each optionally followed by a LOGISTIC or TANH), a SOFTMAX "
                               "and a DEQUANTIZE are supported)" % ", ".join(o["op_name"] for o in nxt))
    parts = split_head(head)
    if parts is None:
        raise ConvertError("after the last step: %s (Dense layers, each optionally followed by a LOGISTIC or TANH, "
                           "then a SOFTMAX, are supported)" % ", ".join(o["op_name"] for o in head))
    if not dequant:
        y_int8 = cur
    left = [o["op_name"] for o in ops if o["index"] not in used]
    if left:
        raise ConvertError("ops outside the supported chain of LSTM layers: %s (ops: %s)"
                           % (", ".join(left), ", ".join(o["op_name"] for o in ops)))
    if cur != graph_out[0]["index"]:
        raise ConvertError("the model's output is not the last layer's output")

    L = len(layers)
    tensors, meta = {}, {"format": "tflite_int8", "op": LSTM_OP, "layers": str(L)}
    for k, layer in enumerate(layers):
        prefix = "l%d." % k
        if "bw" not in layer:
            lt, lm = extract_layer(it, det, layer["fw"], lstm_opts[layer["fw"]["index"]], "LSTM layer %d" % k)
            tensors.update({prefix + n: v for n, v in lt.items()})
            meta.update({prefix + key: lm[key] for key in LAYER_KEYS})
            continue
        widths = []
        for d, name in (("fw", "forward"), ("bw", "backward")):
            op = layer[d]
            lt, lm = extract_layer(it, det, op, lstm_opts[op["index"]], "the %s LSTM of layer %d" % (name, k))
            tensors.update({prefix + d + "." + n: v for n, v in lt.items()})
            meta.update({prefix + d + "." + key: lm[key] for key in LAYER_KEYS})
            widths.append(int(lm["H"]))
        if layer["mode"] == "concat":
            width = sum(widths)
        elif widths[0] != widths[1]:
            raise ConvertError("layer %d: merge_mode %s of directions of widths %d and %d" % (k, layer["mode"], *widths))
        else:
            width = widths[0]
        meta.update({prefix + key: v for key, v in layer.get("merge_meta", {}).items()})
        s, z = one_scale(det[layer["ops"][-1]["outputs"][0]], "the output of layer %d" % k)
        meta.update({prefix + "bidirectional": layer["mode"], prefix + "I": meta[prefix + "fw.I"], prefix + "H": str(width),
                     prefix + "input_scale": meta[prefix + "fw.input_scale"],
                     prefix + "input_zp": meta[prefix + "fw.input_zp"],
                     prefix + "output_scale": f32s(s), prefix + "output_zp": str(z)})
    add_head(it, det, model_bytes, parts, L, return_sequences, tensors, meta)
    s, zp = one_scale(det[y_int8], "the model's int8 output")
    if (f32s(s), str(zp)) != (meta["output_scale"], meta["output_zp"]):
        raise ConvertError("the model's int8 output has another quantization than the last layer's output")
    if reverse:
        meta["reverse_input"] = "1"
    meta["graph_input"] = "float32" if float_in else "int8"
    meta["graph_output"] = "float32" if dequant else "int8"
    meta["tf_version"] = tf.__version__
    first = layers[0]["fw"]
    ins = list(first["inputs"])
    ins += [-1] * (24 - len(ins))
    info = {"interpreter": it, "lstm": first, "inputs": ins, "graph_input": graph_in[0],
            "graph_output": graph_out[0], "x": first["inputs"][IN_X], "y": y_int8,
            "states": [(op["inputs"][IN_H], op["inputs"][IN_C]) for layer in layers
                       for op in ([layer["fw"], layer["bw"]] if "bw" in layer else [layer["fw"]])]}
    return tensors, meta, info

def find_embedding(it, ops, det):
    """A Keras Embedding in front of the LSTMs: the model's first op a GATHER whose params are an
    int8 constant table [V, E] and whose indices are the model's integer input [B, T] (token ids).
    Returns (the GATHER op, tensors, metadata) -- the table under "embedding.table" and its keys
    under "embedding." -- or None when the model has no GATHER; refuses any other GATHER."""
    gathers = [o for o in ops if o["op_name"] == "GATHER"]
    if not gathers:
        return None
    graph_in = it.get_input_details()
    op = gathers[0]
    table, ids = op["inputs"][0], op["inputs"][1]
    y = op["outputs"][0]
    cast = [o for o in ops if o["op_name"] == "CAST" and ids in o["outputs"]]
    if len(gathers) == 1 and len(graph_in) == 1 and cast and cast[0]["inputs"][0] == graph_in[0]["index"]:
        raise ConvertError("the Embedding's token ids are the model's %s input cast to integers (a CAST op); declare "
                           "the Keras Input with dtype='int32' so that the ids reach the Embedding as they are"
                           % np.dtype(graph_in[0]["dtype"]).name)
    if len(gathers) > 1 or op is not ops[0] or len(graph_in) != 1 or ids != graph_in[0]["index"]:
        raise ConvertError("a GATHER op elsewhere than first, on the model's input (ops: %s); only a Keras Embedding "
                           "in front of the LSTMs is supported" % ", ".join(o["op_name"] for o in ops))
    ids_type = np.dtype(det[ids]["dtype"]).name
    types = [np.dtype(det[t]["dtype"]).name for t in (table, y)]
    if types != ["int8", "int8"]:
        raise ConvertError("the Embedding (GATHER) has a %s table and %s output; only an int8 table (full-integer "
                           "quantization: representative dataset, TFLITE_BUILTINS_INT8) is supported" % tuple(types))
    if ids_type not in ("int32", "int64") or len(det[ids]["shape"]) != 2:
        raise ConvertError("the Embedding's token ids are %s %s; expected int32 or int64 [batch, steps]"
                           % (ids_type, list(det[ids]["shape"])))
    try:
        values = it.get_tensor(table).copy()
    except ValueError:
        values = None
    if values is None or values.ndim != 2 or det[table].get("sparsity_parameters"):
        raise ConvertError("the Embedding's table (tensor '%s') is not a constant int8 [V, E] array" % det[table]["name"])
    s, zp = one_scale(det[table], "the Embedding's table")
    ys, yzp = one_scale(det[y], "the Embedding's output")
    if (f32s(s), zp) != (f32s(ys), yzp):
        raise ConvertError("the Embedding (GATHER) output's quantization (%r, %d) differs from its table's (%r, %d); "
                           "only a lookup that copies (one quantization) is supported" % (ys, yzp, s, zp))
    V, E = values.shape
    meta = {"embedding": "1", "embedding.V": str(int(V)), "embedding.E": str(int(E)), "embedding.scale": f32s(s),
            "embedding.zp": str(zp), "embedding.ids_dtype": ids_type}
    return op, {"embedding.table": values}, meta


def add_embedding(emb, tensors, meta):
    """Adds an embedding (find_embedding's) to a converted model: its table and keys, graph_input
    token_ids; the first LSTM must read the table's rows as they are (its input quantization)."""
    _, et, em = emb
    if (meta["input_scale"], meta["input_zp"]) != (em["embedding.scale"], em["embedding.zp"]):
        raise ConvertError("the first LSTM reads its input with (%s, %s), the Embedding writes (%s, %s)"
                           % (meta["input_scale"], meta["input_zp"], em["embedding.scale"], em["embedding.zp"]))
    if meta["I"] != em["embedding.E"]:
        raise ConvertError("the first LSTM takes %s inputs, the Embedding writes %s" % (meta["I"], em["embedding.E"]))
    tensors.update(et)
    meta.update(em)
    meta["graph_input"] = "token_ids"


def extract(model_bytes, tf):
    """Reads a quantized .tflite model: returns (tensors, metadata, info) where tensors maps the
    weight names to arrays, metadata the quantization (strings, see the module docstring) and info
    {interpreter, lstm (the first LSTM op's details), inputs (its operand indices), graph_input,
    graph_output (tensor details), x, y (the first LSTM's int8 input and the model's int8 output
    tensor indices), states (per LSTM op, layer by layer, a bidirectional layer's forward direction
    first: the indices of its variable output and cell state tensors)}. Raises ConvertError naming
    what is not supported."""
    opts = lstm_options(model_bytes)
    # Without the default delegates, so that the ops are the model's own (XNNPACK would take a QUANTIZE
    # or DEQUANTIZE op into a DELEGATE node); the LSTM itself runs on the built-in kernel either way.
    it = tf.lite.Interpreter(model_content=model_bytes, experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    ops = it._get_ops_details()
    det = {d["index"]: d for d in it.get_tensor_details()}
    emb = find_embedding(it, ops, det)
    start = it.get_input_details()[0]["index"]
    if emb is not None:  # the LSTMs read the lookup's rows: the graph is read from there on
        ops = [o for o in ops if o is not emb[0]]
        start = emb[0]["outputs"][0]
    names = [o["op_name"] for o in ops]
    lstms = [o for o in ops if o["op_name"] == LSTM_OP]
    if any(n == "BIDIRECTIONAL_SEQUENCE_LSTM" for n in names):
        raise ConvertError("BIDIRECTIONAL_SEQUENCE_LSTM is not supported (unidirectional LSTMs only)")
    first_lstm = names.index(LSTM_OP) if lstms else len(names)
    if len(lstms) >= 2 and ("CONCATENATION" in names or "REVERSE_V2" in names[first_lstm:] or names.count("REVERSE_V2") > 1
                            or "ADD" in names or "MUL" in names):
        # Keras Bidirectional somewhere: the graph is walked from the input (extract_graph).
        if len(opts) != len(lstms):
            raise ConvertError("the flatbuffer lists %d LSTM ops, the interpreter %d" % (len(opts), len(lstms)))
        tensors, meta, info = extract_graph(model_bytes, tf, it, ops, det, dict(zip((o["index"] for o in lstms), opts)),
                                            start)
        if emb is not None:
            add_embedding(emb, tensors, meta)
        return tensors, meta, info
    if not lstms:
        raise ConvertError("the model has no %s op (ops: %s)" % (LSTM_OP, ", ".join(names) or "none"))
    if len(opts) != len(lstms):
        raise ConvertError("the flatbuffer lists %d LSTM ops, the interpreter %d" % (len(opts), len(lstms)))

    # The graph: [QUANTIZE] LSTM ... LSTM [STRIDED_SLICE] [DEQUANTIZE], each feeding the next.
    first = names.index(LSTM_OP)
    last = first + len(lstms) - 1
    if names[first:last + 1] != [LSTM_OP] * len(lstms):
        raise ConvertError("ops between the LSTMs: %s (stacked LSTMs must feed each other directly)"
                           % ", ".join(names[first:last + 1]))
    before, after = ops[:first], ops[last + 1:]
    graph_in = it.get_input_details()
    graph_out = it.get_output_details()
    if len(graph_in) != 1 or len(graph_out) != 1:
        raise ConvertError("the model has %d inputs and %d outputs; expected one of each" % (len(graph_in), len(graph_out)))
    before_names = [o["op_name"] for o in before]
    if before_names not in ([], ["QUANTIZE"], ["REVERSE_V2"], ["QUANTIZE", "REVERSE_V2"], ["REVERSE_V2", "QUANTIZE"]):
        raise ConvertError("ops before the LSTM: %s (only a QUANTIZE of a float input and a REVERSE_V2 of the time "
                           "axis, Keras go_backwards, are supported)" % ", ".join(before_names))
    reverse = "REVERSE_V2" in before_names
    for o in before:  # a chain from the model's input to the first LSTM
        if o["op_name"] == "REVERSE_V2":
            axis = it.get_tensor(o["inputs"][1]) if len(o["inputs"]) > 1 else None
            if axis is None or list(np.ravel(axis)) != [1]:
                raise ConvertError("the REVERSE_V2 before the LSTM reverses axes %s; only the time axis (1, Keras "
                                   "go_backwards) is supported" % (None if axis is None else list(np.ravel(axis))))
    chain = start
    for o in before:
        if o["inputs"][0] != chain:
            raise ConvertError("the %s op before the LSTM does not read the model's input" % o["op_name"])
        chain = o["outputs"][0]
    after_names = [o["op_name"] for o in after]
    body = after[1:] if after_names[:1] == ["STRIDED_SLICE"] else list(after)
    if body and body[-1]["op_name"] == "DEQUANTIZE":
        body = body[:-1]
    parts = split_head(body)
    if parts is None:
        raise ConvertError("ops after the LSTM: %s (only a STRIDED_SLICE taking the last step, Dense layers on it "
                           "(FULLY_CONNECTED, each optionally followed by a LOGISTIC or TANH), a SOFTMAX and a "
                           "DEQUANTIZE to a float output are supported)" % ", ".join(after_names))
    x_index = lstms[0]["inputs"][IN_X]
    if chain != x_index:
        raise ConvertError("the model's input does not reach the LSTM's input through the ops before it")
    for k in range(1, len(lstms)):
        if lstms[k]["inputs"][IN_X] != lstms[k - 1]["outputs"][0]:
            raise ConvertError("LSTM %d does not read the output of LSTM %d (only a plain stack is supported)" % (k + 1, k))
    lstm_out = lstms[-1]["outputs"][0]
    y = lstm_out
    return_sequences = True
    for o in after:
        if o["inputs"][0] != y:
            raise ConvertError("the %s op does not read the output of the op before it" % o["op_name"])
        if o["op_name"] == "STRIDED_SLICE":
            check_last_step_slice(it, o, lstm_out, det)
            return_sequences = False
        y = o["outputs"][0]
    int8_ops = [o for o in after if o["op_name"] != "DEQUANTIZE"]
    y_int8 = int8_ops[-1]["outputs"][0] if int8_ops else lstm_out
    if y != graph_out[0]["index"] and y_int8 != graph_out[0]["index"]:
        raise ConvertError("the model's output is not the LSTM's output")

    L = len(lstms)
    # One plain LSTM keeps the single-layer file (no prefixes); a stack or a head prefixes.
    prefixed = L > 1 or bool(body)
    tensors, meta = {}, {"format": "tflite_int8", "op": LSTM_OP}
    if prefixed:
        meta["layers"] = str(L)
    for k, (op, o) in enumerate(zip(lstms, opts)):
        what = "the LSTM" if L == 1 else "LSTM %d of %d" % (k + 1, L)
        lt, lm = extract_layer(it, det, op, o, what)
        prefix = "l%d." % k if prefixed else ""
        tensors.update({prefix + n: v for n, v in lt.items()})
        if not prefixed:
            meta.update({"I": lm["I"], "H": lm["H"], "return_sequences": "1" if return_sequences else "0"})
        meta.update({prefix + key: lm[key] for key in LAYER_KEYS if prefixed or key not in ("I", "H")})
    if prefixed:
        add_head(it, det, model_bytes, parts, L, return_sequences, tensors, meta)
    # The model's output: the last LSTM's output, or its last step (same quantization).
    s, zp = one_scale(det[y_int8], "the model's int8 output")
    if (f32s(s), str(zp)) != (meta["output_scale"], meta["output_zp"]):
        raise ConvertError("the last step's quantization differs from the LSTM output's")
    if reverse:
        meta["reverse_input"] = "1"  # Keras go_backwards: the LSTM reads the steps last to first
    meta["graph_input"] = "float32" if "QUANTIZE" in before_names else "int8"
    meta["graph_output"] = "float32" if after and after[-1]["op_name"] == "DEQUANTIZE" else "int8"
    meta["tf_version"] = tf.__version__
    ins = list(lstms[0]["inputs"])
    ins += [-1] * (24 - len(ins))
    info = {"interpreter": it, "lstm": lstms[0], "inputs": ins, "graph_input": graph_in[0],
            "graph_output": graph_out[0], "x": x_index, "y": y_int8,
            "states": [(op["inputs"][IN_H], op["inputs"][IN_C]) for op in lstms]}
    if emb is not None:
        add_embedding(emb, tensors, meta)
    return tensors, meta, info


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Convert a quantized (int8) TFLite LSTM model -- UNIDIRECTIONAL_SEQUENCE_LSTM ops, as the "
                    "TFLite converter writes for Keras LSTMs with full-integer quantization (one, stacked, "
                    "go_backwards on the first, Bidirectional with merge_mode concat, Dense layers on the last "
                    "step; a Keras Embedding first) -- to a safetensors file that `rnncore run --weights` runs bit for bit as LiteRT does.",
        epilog="Semantics and file contents: docs/int8.md.")
    p.add_argument("model", help="the .tflite file")
    p.add_argument("-o", "--output", required=True, help="safetensors file to write")
    args = p.parse_args(argv)
    try:
        if not os.path.exists(args.model):
            raise ConvertError("'%s' does not exist" % args.model)
        with open(args.model, "rb") as f:
            model_bytes = f.read()
        if not model_bytes:
            raise ConvertError("'%s' is empty" % args.model)
        tf = import_tensorflow()
        try:
            tensors, meta, _ = extract(model_bytes, tf)
        except ConvertError:
            raise
        except Exception as e:  # not a flatbuffer, or one the interpreter refuses
            raise ConvertError("'%s' could not be read as a TFLite model: %s" % (args.model, str(e).splitlines()[0]))
        meta["source"] = os.path.basename(args.model)
        write_safetensors(args.output, sorted(tensors.items()), meta)
    except ConvertError as e:
        print("tflite_to_safetensors: error: %s" % e, file=sys.stderr)
        return 1
    L = int(meta.get("layers", "1"))
    prefixed = "layers" in meta
    cells = ", ".join(meta[("l%d." % k if prefixed else "") + "cell_scale"] if ("l%d.bidirectional" % k) not in meta
                      else "%s/%s" % (meta["l%d.fw.cell_scale" % k], meta["l%d.bw.cell_scale" % k]) for k in range(L))
    layers = "" if not prefixed else " layers=%d (H %s)" % (L, ", ".join(
        meta["l%d.H" % k] + ({None: "", "concat": " bidirectional"}.get(meta.get("l%d.bidirectional" % k),
                                                                       " bidirectional " + meta.get("l%d.bidirectional" % k, "")))
        for k in range(L)))
    if "dense" in meta:
        layers += " dense=%s (%s)" % (meta["dense"], ", ".join(
            "%s %s" % (meta["fc%d.out" % j], meta["fc%d.activation" % j]) for j in range(int(meta["dense"]))))
    if meta.get("softmax") == "1":
        layers += " softmax (beta %s)" % meta["softmax.beta"]
    if meta.get("embedding") == "1":
        layers = " embedding %sx%s (ids %s)" % (meta["embedding.V"], meta["embedding.E"], meta["embedding.ids_dtype"]) + layers
    print("wrote %s: I=%s H=%s%s return_sequences=%s input %s, output %s, cell scale %s"
          % (args.output, meta["I"], meta["H"], layers, meta["return_sequences"], meta["graph_input"],
             meta["graph_output"], cells), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

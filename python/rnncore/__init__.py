"""rnncore: fused LSTM, GRU and Elman RNN stacks (cuDNN semantics) from Python.

NumPy API (no PyTorch needed)::

    import rnncore
    model = rnncore.load("lstm.safetensors")            # io::load_model's inference
    y, h, c = model.run(x)                              # x [T, B, I] float32
    model = rnncore.load("lstm.safetensors", training=True)
    y, h, c = model.run(x, train=True, seed=1, step=0)  # dropout masks from (seed, step)
    g = model.grad(x, dy, train=True, seed=1, step=0)   # dx, dh0, dc0, weight gradients

    report = rnncore.quantize("lstm.safetensors", calib, "q.safetensors")  # int8 model, accuracy lost
    header = rnncore.export_c("q.safetensors", "model.h")             # a C header for firmware
    q = rnncore.load("q.safetensors")                                 # an Int8Model (int8 file)
    y8, h8, c8 = q.run(x_bti)                                         # x [B, T, I]; int8 y as LiteRT's

PyTorch modules: :mod:`rnncore.torch` (``LSTM``, ``GRU``, ``RNN``, ``Stack``). See docs/python.md.
"""

from __future__ import annotations

import json as _json
import os as _os
import tempfile as _tempfile

import numpy as _np

from . import _core
from ._core import ArgumentError, Error

__all__ = ["ArgumentError", "Error", "Int8Model", "Model", "export_c", "info", "load", "quantize", "__version__"]
__version__ = _core.version()


def info():
    """What ``rnncore info`` reports: version, instruction sets this CPU runs, backends, kernels (float, and
    ``"int8"``: the integer LSTM's matrix-vector and step kernels)."""
    return _core.info()


class Model:
    """A recurrent stack with its weights, run on NumPy arrays.

    ``run`` and ``grad`` release the GIL and read float32 (float64 for ``dtype="float64"``) C-contiguous
    arrays in place; other float arrays are converted first. Time-major ``[T, B, I]`` unless
    ``batch_first``. Errors raise :class:`rnncore.ArgumentError` (a ``ValueError``) for bad arguments and
    :class:`rnncore.Error` (a ``RuntimeError``) otherwise, with the library's one-line detail.
    """

    def __init__(self, net):
        self._net = net
        self._state = None  # (h, c, steps so far) of a stream

    # -- description --
    @property
    def mode(self):
        return self._net.mode

    @property
    def input_size(self):
        return self._net.input_size

    @property
    def num_layers(self):
        return self._net.num_layers

    @property
    def hidden_sizes(self):
        return self._net.hidden_sizes

    @property
    def bidirectional(self):
        return self._net.bidirectional

    @property
    def format(self):
        """The weight format the file was read as (pytorch, onnx, keras, tensorflow, canonical)."""
        return self._net.format

    @property
    def kernel(self):
        """The kernel family a run uses, e.g. ``f32_rnn_6x4__avx512``."""
        return self._net.kernel

    @property
    def weight_dtype(self):
        """How the packed weights are stored: ``"f32"``, ``"bf16"`` or ``"f16"`` (``load``'s ``weight_dtype``)."""
        return self._net.weight_dtype

    @property
    def vocab_size(self):
        """Rows of the Embedding before layer 0 (x is then token ids), or 0."""
        return self._net.vocab_size

    @property
    def head(self):
        """The Dense head after the last layer as ``(out_features, activation, last_step_only)``, or None."""
        return self._net.head

    @property
    def ends(self):
        """The file's tensors of the Embedding and head that run with the stack, as ``name [dims]``
        (a module's network: ``embedding.weight``, ``head.weight``, ``head.bias``)."""
        return list(self._net.ends)

    @property
    def notes(self):
        """Defaults the loader chose (what ``rnncore run`` prints to stderr)."""
        return list(self._net.notes)

    @property
    def ignored(self):
        """Tensors of the file that are not weights of the recurrent stack, as ``name [dims]``."""
        return list(self._net.ignored)

    def state_shapes(self, batch):
        """Shapes of h and c for ``batch`` rows: ``[L*D, B, H]`` (flat when the layers differ)."""
        return self._net.state_shapes(batch)

    # -- weights --
    def weights(self):
        """The weights as ``{name: array}`` in the file's format."""
        return {name: t for (name, _, _), t in zip(self._net.tensors(), self._net.export())}

    def set_weights(self, tensors):
        """Replaces weights from ``{name: array}`` in the model's format (names as ``weights()``); the
        tensors not given keep their values."""
        names = [name for name, _, _ in self._net.tensors()]
        unknown = sorted(set(tensors) - set(names))
        if unknown:
            raise ArgumentError(f"set_weights: {unknown[0]}: not a weight of this model (expected one of {names})")
        current = self.weights()
        self._net.set_weights([tensors[name] if name in tensors else current[name] for name in names])

    # -- running --
    def run(self, x, h0=None, c0=None, lengths=None, *, batch_first=False, train=False, mc_dropout=False,
            seed=0, step=0, time_offset=0, row_ids=None, resets=None):
        """Runs the stack: returns ``(y, h, c)`` (``c`` is None unless LSTM).

        ``lengths`` [B]: per-row lengths (outputs past them are 0, states stop there). ``resets``
        [T, B] ([B, T] with ``batch_first``; any integer or bool dtype): where nonzero, that row's state
        in every layer returns to ``h0``/``c0`` (or zeros) before that step (unidirectional stacks). ``train``: a
        training run (dropout on; masks from ``seed`` and ``step``, as ``rnncore run --train --seed S
        --step N``); ``mc_dropout``: dropout in an inference run.
        """
        mode = "training" if train else ("monte_carlo" if mc_dropout else "inference")
        y, h, c, _ = self._net.forward(x, h0, c0, lengths, batch_first, mode, seed, step, time_offset, row_ids,
                                       False, resets)
        return y, h, c

    def grad(self, x, dy=None, dh=None, dc=None, h0=None, c0=None, lengths=None, *, batch_first=False,
             train=False, seed=0, step=0, time_offset=0, row_ids=None, resets=None, need_dx=True):
        """Forward and backward through time (a model loaded with ``training=True``).

        Returns a dict: ``y``, ``h``, ``c`` (the forward's outputs), ``dx``, ``dh0``, ``dc0`` and
        ``weights`` (``{name: gradient}`` in the model's format) for the scalar
        ``sum(y*dy) + sum(h*dh) + sum(c*dc)``. ``resets`` as :meth:`run`'s. With a head, ``dy`` is the
        head's output's gradient and ``weights`` holds the head's W and b too; with an Embedding, the
        table's gradient, and ``dx`` is None (x is token ids); under the names :attr:`ends` gives.
        ``need_dx=False``: ``dx`` is None and the backward skips the first layer's input product.
        """
        mode = "training" if train else "inference"
        y, h, c, reserve = self._net.forward(x, h0, c0, lengths, batch_first, mode, seed, step, time_offset,
                                             row_ids, True, resets)
        dx, dh0, dc0, dw = self._net.backward(x, reserve, dy, dh, dc, h0, c0, lengths, batch_first, mode, seed,
                                              step, time_offset, row_ids, resets, need_dx)
        names = [name for name, _, _ in self._net.tensors()]
        weights = dict(zip(names, self._net.export_gradients(dw)))
        # The Embedding's table and the head's W and b, under the names `ends` gives them.
        weights.update(zip([e.rsplit(" [", 1)[0] for e in self._net.ends], self._net.end_tensors(dw)))
        return {"y": y, "h": h, "c": c, "dx": dx, "dh0": dh0, "dc0": dc0, "weights": weights}

    # -- streaming --
    def reset(self):
        """Forgets the streamed state: the next ``stream`` call starts from zeros at step 0."""
        self._state = None

    def stream(self, x, lengths=None, *, batch_first=False, train=False, seed=0, step=0):
        """Runs the next chunk of a sequence, carrying h, c and the time index (for dropout masks) from
        the previous call: chunks fed one after another give one whole-sequence run's outputs."""
        h0, c0, t0 = self._state if self._state is not None else (None, None, 0)
        x = _np.asarray(x)
        y, h, c = self.run(x, h0, c0, lengths, batch_first=batch_first, train=train, seed=seed, step=step,
                           time_offset=t0)
        self._state = (h, c, t0 + x.shape[1 if batch_first else 0])
        return y, h, c


class Int8Model:
    """An integer LSTM model file (format ``tflite_int8``: written by :func:`quantize` or converted from a
    ``.tflite``), run as LiteRT runs it (``rnncore run`` on such a file; docs/int8.md). What
    :func:`load` returns for such a file.

    Batch-major, as the TFLite op: ``run(x)`` takes ``x`` int8 ``[B, T, I]``, floating point
    ``[B, T, I]`` (quantized as TFLite's QUANTIZE op), or token ids ``[B, T]`` for a model that starts
    with an Embedding, and returns ``(y, h, c)``: ``y`` int8 ``[B, T, O]`` (``[B, O]`` for a last-step
    model), the final states ``h`` int8 and ``c`` int16 (shape ``state_shape(B)``). ``h0`` / ``c0``: a
    state to start from, as returned (None: LiteRT's start, h at its zero point and c = 0). Bit for
    bit what the firmware's C API computes (rnncore/int8.h). The GIL is released during a run.
    """

    def __init__(self, net):
        self._net = net

    @property
    def input_size(self):
        return self._net.input_size

    @property
    def output_size(self):
        return self._net.output_size

    @property
    def return_sequences(self):
        return self._net.return_sequences

    @property
    def has_embedding(self):
        return self._net.has_embedding

    @property
    def kernel(self):
        """The integer kernels its LSTM layers run."""
        return self._net.kernel

    @property
    def description(self):
        """What the model is, one line each (``rnncore run``'s first lines)."""
        return list(self._net.description)

    @property
    def origin(self):
        return self._net.origin

    @property
    def metadata(self):
        """The file's metadata (its quantization: docs/int8.md, "The model file")."""
        return dict(self._net.metadata)

    @property
    def output_quantization(self):
        """``(scale, zero_point)`` of the int8 output: y ≈ (q − zero_point) · scale. None where an
        activation table or a Bidirectional merge ends the model (its keys: docs/int8.md)."""
        m = dict(self._net.metadata)
        if m.get("softmax") == "1":
            prefix = "softmax."
        elif "dense" in m:
            prefix = f"fc{int(m['dense']) - 1}."
            if m.get(prefix + "activation") in ("sigmoid", "tanh"):
                return None
        else:
            prefix = f"l{int(m['layers']) - 1}." if int(m.get("layers", "1")) > 1 else ""
        if prefix + "output_scale" not in m or prefix + "output_zp" not in m:
            return None
        return float(m[prefix + "output_scale"]), int(m[prefix + "output_zp"])

    def dequantize(self, y):
        """The float values of an int8 output (as TFLite's DEQUANTIZE op): float32 (y − z) · s."""
        q = self.output_quantization
        if q is None:
            raise Error("dequantize: this model's output quantization is not one scale and zero point")
        return ((_np.asarray(y).astype(_np.int32) - q[1]).astype(_np.float32) * _np.float32(q[0])).astype(_np.float32)

    def state_shape(self, batch):
        return tuple(self._net.state_shape(batch))

    def quantize_input(self, x):
        """Floating-point input as the int8 values the model reads (TFLite's QUANTIZE op)."""
        return self._net.quantize_input(x)

    def run(self, x, h0=None, c0=None):
        """Runs the model on ``x`` (batch-major, see the class): returns ``(y, h, c)``."""
        return self._net.run(x, h0, c0)


def load(source, *, format="", prefix=None, mode="", gru="", dtype="float32", threads=1, backend="auto",
         training=False, dropout=None, config=None, head_activation=None, head_last_step=None, weight_dtype="f32"):
    """Loads a model: from a safetensors file, an ``.onnx`` file or a PyTorch module.

    A safetensors file goes through ``io::load_model``'s loader (format, prefix, layers and mode
    inferred from the tensor names, shapes and metadata; each hint pins what it names). An ``.onnx``
    file: its LSTM, GRU or RNN nodes, in graph order, are the layers (needs the ``onnx`` package). A
    ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` (or an ``rnncore.torch`` one): its configuration and weights.

    ``training=True`` plans for ``grad`` (backward). ``threads``: CPU threads per run (results are the
    same bits for any count). ``backend``: auto, reference, simd or gpu. ``dropout``: the inter-layer
    dropout p of training runs (``rnncore run --dropout P``; a file holds none). ``config``: a stack
    configuration (docs/config.md: layers of differing cells and sizes, TF's DropoutWrapper and
    ResidualWrapper), as a JSON file's path or a dict, which the weights must match
    (``rnncore run --config``; safetensors files only). ``weight_dtype``: how the packed weights
    are stored: ``"f32"``, or ``"bf16"`` / ``"f16"`` on the SIMD backend (the products read the
    rounded weights and accumulate in f32; gradients stay f32; docs/training.md states the error),
    as ``rnncore run --dtype``.

    A file's (or a network module's) Embedding before layer 0 and Dense / Linear head after the
    last layer run with the stack: ``run`` then takes integer token ids ``[T, B]`` and returns the
    head's output. ``head_activation`` (none, relu, sigmoid, tanh, softmax) and ``head_last_step``
    (the head maps each row's last step only: y ``[B, F]``) pin what the file's metadata
    (``head_activation``, ``head_last_step``) would say. An int8 model file (format ``tflite_int8``)
    loads as an :class:`Int8Model`.
    """
    if config is not None and (hasattr(source, "state_dict") or str(source).endswith(".onnx")):
        raise ArgumentError("load: config= applies to safetensors files")
    config_path, config_text = ("", _json.dumps(config)) if isinstance(config, dict) else (str(config or ""), "")
    head = ("" if head_activation is None else str(head_activation),
            "" if head_last_step is None else ("1" if head_last_step else "0"))
    if hasattr(source, "state_dict") and hasattr(source, "hidden_size"):
        if head != ("", ""):
            raise ArgumentError("load: head_activation= and head_last_step= apply to a file or a network with a "
                                "Linear head, not to a single recurrent module")
        return _from_module(source, dtype, threads, backend, training, dropout, weight_dtype)
    if hasattr(source, "state_dict") and hasattr(source, "named_children"):
        return _from_network(source, head, dtype, threads, backend, training, dropout, weight_dtype)
    if str(source).endswith(".onnx"):
        return _from_onnx(str(source), dtype, threads, backend, training, dropout, weight_dtype)
    if _core.is_int8_model(str(source)):
        return _int8(str(source), format, prefix, mode, gru, dtype, threads, backend, training, dropout, config,
                     weight_dtype)
    return Model(_core.Net.load(str(source), format, prefix, mode, gru, dtype, threads, backend, training, dropout,
                                config_path, config_text, *head, weight_dtype=weight_dtype))


def _int8(path, format, prefix, mode, gru, dtype, threads, backend, training, dropout, config, weight_dtype):
    """An int8 model file: ``threads`` applies (as ``rnncore run --threads``); every other option of a float
    model is refused (as ``rnncore run`` refuses them)."""
    given = [name for name, value, default in (("format", format, ""), ("prefix", prefix, None), ("mode", mode, ""),
                                               ("gru", gru, ""), ("dtype", dtype, "float32"),
                                               ("backend", backend, "auto"), ("training", training, False),
                                               ("dropout", dropout, None), ("config", config, None),
                                               ("weight_dtype", weight_dtype, "f32"))
             if value != default]
    if given:
        raise ArgumentError(f"load: {given[0]}= does not apply to {path}, an int8 LSTM model (format tflite_int8)")
    return Int8Model(_core.Int8Net(path, threads))


def _from_module(module, dtype, threads, backend, training, dropout, weight_dtype):
    """A torch.nn.LSTM / GRU / RNN (or rnncore.torch's): torch.nn's attributes and state_dict."""
    kind = type(module).__name__
    if kind not in ("LSTM", "GRU", "RNN"):
        raise ArgumentError(f"load: a {kind} module; expected torch.nn.LSTM, GRU or RNN")
    mode = {"LSTM": "lstm", "GRU": "gru"}.get(kind) or "rnn_" + getattr(module, "nonlinearity", "tanh")
    p = module.dropout if dropout is None else dropout
    net = _core.Net(mode, module.input_size, module.hidden_size, module.num_layers, module.bidirectional,
                    getattr(module, "proj_size", 0), p, "reset-after", dtype, threads, backend, training, "pytorch",
                    weight_dtype)
    state = {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
    net.set_weights([state.get(name) for name, _, _ in net.tensors()])
    return Model(net)


def _from_network(module, head, dtype, threads, backend, training, dropout, weight_dtype):
    """A network module whose children are one torch.nn (or rnncore.torch) LSTM / GRU / RNN, optionally
    an nn.Embedding before it and an nn.Linear after it (children without parameters, such as
    nn.Dropout, are passed over): the file loader's model of their weights, as if saved together."""
    kinds = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}
    rnns, embeds, linears = [], [], []
    for name, child in module.named_children():
        kind = type(child).__name__
        if kind in kinds and hasattr(child, "hidden_size"):
            rnns.append(child)
        elif kind == "Embedding":
            embeds.append(child)
        elif kind == "Linear":
            linears.append(child)
        elif any(True for _ in child.parameters()):
            raise ArgumentError(f"load: {type(module).__name__}.{name} is a {kind}; a network loads as an "
                                "nn.Embedding, one LSTM / GRU / RNN and an nn.Linear head")
    if len(rnns) != 1 or len(embeds) > 1 or len(linears) > 1:
        raise ArgumentError(f"load: {type(module).__name__} has {len(rnns)} recurrent module(s), {len(embeds)} "
                            f"nn.Embedding(s) and {len(linears)} nn.Linear(s); expected one recurrent module, at "
                            "most one Embedding before it and one Linear after it")
    rnn = rnns[0]
    mode = kinds[type(rnn).__name__]
    if mode == "rnn":
        mode += "_" + getattr(rnn, "nonlinearity", "tanh")
    if getattr(rnn, "proj_size", 0):
        raise ArgumentError("load: an LSTM with proj_size and a head or embedding does not load as one network")
    tensors = {"rnn." + k: v for k, v in rnn.state_dict().items()}
    if embeds:
        if embeds[0].max_norm is not None:
            raise ArgumentError("load: nn.Embedding(max_norm=...) renormalizes rows at lookup; rnncore reads them as "
                                "they are")
        tensors["embedding.weight"] = embeds[0].weight
    if linears:
        tensors["head.weight"] = linears[0].weight
        if linears[0].bias is not None:
            tensors["head.bias"] = linears[0].bias
    arrays = [_np.ascontiguousarray(t.detach().cpu().numpy()) for t in tensors.values()]
    with _tempfile.TemporaryDirectory(prefix="rnncore-") as tmp:
        path = _os.path.join(tmp, "network.safetensors")
        _core.save_safetensors(path, list(tensors), arrays, [])
        p = rnn.dropout if dropout is None else dropout
        return Model(_core.Net.load(path, "pytorch", "rnn.", mode, "", dtype, threads, backend, training, p, "", "",
                                    *head, weight_dtype=weight_dtype))


def _onnx_attributes(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _from_onnx(path, dtype, threads, backend, training, dropout, weight_dtype):
    """The LSTM / GRU / RNN nodes of an ONNX graph, in order, as the layers of one stack."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        raise Error(f"load: {path}: reading an .onnx file needs the onnx package (pip install onnx)") from e
    graph = onnx.load(path).graph
    nodes = [n for n in graph.node if n.op_type in ("LSTM", "GRU", "RNN")]
    if not nodes:
        raise ArgumentError(f"load: {path}: no LSTM, GRU or RNN node in the graph")
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    first, attrs = nodes[0], [_onnx_attributes(n) for n in nodes]
    for n, a in zip(nodes, attrs):
        where = f"load: {path}: node {n.name or n.op_type}"
        if n.op_type != first.op_type or any(a.get(k) != attrs[0].get(k) for k in ("hidden_size", "linear_before_reset")):
            raise ArgumentError(f"{where}: every recurrent node must be a {first.op_type} with the first one's "
                                "hidden_size and linear_before_reset")
        if a.get("direction", b"forward") not in (b"forward", b"bidirectional", "forward", "bidirectional"):
            raise ArgumentError(f"{where}: direction {a['direction']!r} is not supported (forward, bidirectional)")
        if a.get("layout", 0) != 0 or a.get("clip") is not None or a.get("input_forget", 0):
            raise ArgumentError(f"{where}: layout, clip and input_forget are not supported")
        if a.get("activations") is not None and n.op_type != "RNN":
            raise ArgumentError(f"{where}: custom activations are not supported")
        if len(n.input) > 7 and n.input[7]:
            raise ArgumentError(f"{where}: peepholes (input P) are not supported here")
        for i in (1, 2) + ((3,) if len(n.input) > 3 and n.input[3] else ()):
            if n.input[i] not in init:
                raise ArgumentError(f"{where}: input {n.input[i]} is not an initializer")
    mode = {"LSTM": "lstm", "GRU": "gru"}.get(first.op_type)
    if mode is None:
        acts = attrs[0].get("activations") or [b"Tanh"]
        act = acts[0].decode() if isinstance(acts[0], bytes) else acts[0]
        mode = {"Tanh": "rnn_tanh", "Relu": "rnn_relu"}.get(act)
        if mode is None:
            raise ArgumentError(f"load: {path}: RNN activation {act} is not supported (Tanh, Relu)")
    gru = "reset-after" if attrs[0].get("linear_before_reset", 0) else "reset-before"
    w0 = init[first.input[1]]
    directions = w0.shape[0]
    net = _core.Net(mode, w0.shape[2], attrs[0]["hidden_size"], len(nodes), directions == 2, 0,
                    dropout or 0.0, gru, dtype, threads, backend, training, "onnx", weight_dtype)
    tensors = {}
    for l, n in enumerate(nodes):
        suffix = "" if len(nodes) == 1 else f"_l{l}"
        tensors["W" + suffix], tensors["R" + suffix] = init[n.input[1]], init[n.input[2]]
        if len(n.input) > 3 and n.input[3]:
            tensors["B" + suffix] = init[n.input[3]]
    net.set_weights([tensors.get(name) for name, _, _ in net.tensors()])
    return Model(net)


def _npy(data, tmp, name):
    """A path for io: `data` itself (a path), or an array saved as .npy in `tmp` ("" for None)."""
    if data is None:
        return ""
    if isinstance(data, (str, _os.PathLike)):
        return str(data)
    path = _os.path.join(tmp, name + ".npy")
    _np.save(path, _np.ascontiguousarray(data))
    return path


def quantize(weights, calibration, output, *, eval=None, config=None, batch_first=False, carry_state=0,
             cell_clip=None, cell_range="every-step", per_channel=False, format="", prefix=None, mode=""):
    """Post-training quantization of a float LSTM file to an int8 model file (``rnncore quantize``).

    ``weights``: the float model (safetensors); ``calibration`` (and ``eval``, held-out data): float
    input ``[T, B, I]`` (``[B, T, I]`` with ``batch_first``) as an array or a ``.npy`` path;
    ``output``: the int8 model to write (format tflite_int8, docs/int8.md). ``config``: the float
    model's stack configuration (a JSON path). The other options are those of ``rnncore quantize``
    (``cell_clip``: None keeps the model's; 0 none). Returns the report as a dict: ``model``,
    ``calibration``, ``quantization`` (lines), ``written``, ``calibration_accuracy`` and
    ``eval_accuracy`` (``max_abs``, ``rms``, ``range``, ``snr_db`` of the int8 output against the
    float one; None without ``eval``), ``notes``.
    """
    with _tempfile.TemporaryDirectory(prefix="rnncore-") as tmp:
        return _core.quantize(str(weights), _npy(calibration, tmp, "calibration"), str(output),
                              _npy(eval, tmp, "eval"), str(config or ""), batch_first, carry_state, cell_clip,
                              cell_range, per_channel, format, prefix, mode)


def export_c(weights, output=None, *, name=None, sample_input=None, sample_output=None, max_batch=0, max_seq_len=0,
             interleave=False, format="", prefix=None, mode="", gru=""):
    """A model file as a C header for firmware (``rnncore export-c``); returns the header's text.

    ``output``: where to write it (None: not written); ``name``: the C identifier its names start with
    (default: from ``output``, else from ``weights``). ``sample_input`` / ``sample_output``: test vectors to
    embed, arrays or ``.npy`` paths (float ``[T, B, I]``; an int8 model's int8 ``[B, T, I]``).
    ``max_batch`` / ``max_seq_len``: plan sizes (0: the sample's, else 1). ``interleave``: an int8 model's
    weights in the Cortex-M4/M7 kernel's layout.
    """
    with _tempfile.TemporaryDirectory(prefix="rnncore-") as tmp:
        header, _summary, _notes = _core.export_c(
            str(weights), "" if output is None else str(output), name or "", _npy(sample_input, tmp, "sample_input"),
            _npy(sample_output, tmp, "sample_output"), max_batch, max_seq_len, interleave, format, prefix, mode, gru)
    if output is not None:
        with open(output, "w") as f:
            f.write(header)
    return header

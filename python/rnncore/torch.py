"""rnncore.torch: LSTM, GRU and RNN modules that drop into PyTorch code, and Stack: a stack
configuration's layers (differing cells, sizes, directions; TF's DropoutWrapper and ResidualWrapper).

The constructors take torch.nn's arguments and the parameters carry torch.nn's names, so
``ours.load_state_dict(nn_lstm.state_dict())`` works; ``forward(input, hx)`` returns what torch.nn
returns, for tensors and PackedSequence. Each run is one ``torch.library`` custom op,
``rnncore::rnn``, with a fake (meta) implementation and an autograd formula that calls the library's
backward (``rnncore::rnn_backward``), so ``torch.compile(fullgraph=True)`` traces the modules and
``torch.export`` keeps them as ops.

Dropout (``dropout=p``, between layers as in torch.nn) uses rnncore's mask function, not PyTorch's
generator: a training forward's masks come from the module's ``seed`` and ``step`` and equal those of
``rnncore run --train --seed S --step N``. ``step`` counts up by one after each training forward
that applies dropout; set it (or ``seed``) to replay a run. ``row_offset`` is added to each batch row's
index in the mask function: under DDP, rank r with local batch B sets ``row_offset = r * B`` so that
the ranks' masks are those of one process running the whole batch. ``forward(input, hx, resets=)``:
per-step state resets (``[T, B]``, ``[B, T]`` batch-first; any integer or bool dtype), an input of the
op. CPU tensors only (float32; float64 runs the reference backend).

A run reads its tensors and makes its outputs through libtorch's stable C ABI when the installed
torch has it (2.15 and later; ``kernel_path()`` says "stable-abi"), else through torch's Python API
("python-api": the same outputs, a few microseconds slower a call). ``RNNCORE_TORCH_ABI=0`` in the
environment before the import chooses the second.
"""

import itertools
import json
import glob
import math
import operator
import os
import threading
import warnings
import weakref
from typing import Optional

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from . import ArgumentError, _core

__all__ = ["LSTM", "GRU", "RNN", "Stack", "kernel_path"]


# ---- how runs read and make tensors ----

def _use_abi(enable: bool) -> bool:
    """Runs read and make tensors through libtorch's stable C ABI (found in the loaded libtorch_cpu,
    or among the process's global symbols) when `enable` and it is there, else through torch's
    Python API. Returns whether the ABI is used."""
    global _abi
    libs = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.*"))
    _abi = bool(enable) and any(_core.torch_abi(lib) for lib in (*libs, None))
    if not _abi:
        _core.torch_abi(None, False)
    return _abi


_abi = False
_use_abi(os.environ.get("RNNCORE_TORCH_ABI", "1") != "0")


def kernel_path() -> str:
    """How the runs read their tensors and make their outputs: "stable-abi" (libtorch's stable C ABI,
    torch >= 2.15) or "python-api" (attributes and torch.empty through torch's Python API)."""
    return "stable-abi" if _abi else "python-api"

def _warn_if_cores_contended(threads):
    """Warns once when a module on `threads` threads would share the cores with torch's OpenMP workers
    while they spin after each torch op (docs/python.md, "threads= above 1 inside a torch program"):
    torch's intra-op threads and the module's together outnumber this process's cores, and neither
    OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (libgomp reads them when torch is loaded)."""
    global _contention_warned
    if threads <= 1 or _contention_warned or "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch_threads = torch.get_num_threads()
    if torch_threads <= 1 or threads + torch_threads - 1 <= cores:
        return
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return
    _contention_warned = True
    warnings.warn(f"rnncore.torch: threads={threads} beside torch's {torch_threads} OpenMP threads on {cores} cores: "
                  "torch's workers spin for milliseconds after each torch op and take cores from rnncore's pool. "
                  "Give the module fewer threads, or try OMP_WAIT_POLICY=PASSIVE at Python's start where it does "
                  "not slow torch's own ops (docs/python.md)",
                  RuntimeWarning, stacklevel=4)


_contention_warned = False

# ---- the nets behind the ops: one per module, found by the op's `spec` string ----

_nets: dict = {}
_nets_lock = threading.Lock()
_uids = itertools.count()


class _Entry:
    """A module's _core.Nets (one for training runs, one for inference) and which of its format's
    tensors the module has. Each net checks and imports the module's weights itself at each run
    (_core.Net.take_tensors: weight_check "values" compares shapes and bytes with the last import's,
    "version" each tensor's data_ptr and version counter) and packs them at its next run after an
    import."""

    def __init__(self, spec):
        d = json.loads(spec)
        self.spec = d
        self.lock = threading.Lock()
        weight_dtype = d.get("weight_dtype", "f32")
        if "config" in d:  # rnncore.torch.Stack: layers and wrappers of a stack configuration
            def make(dtype, threads, backend, training):
                return _core.Net.from_config(d["config"], dtype, threads, backend, training, weight_dtype=weight_dtype)
        else:
            def make(dtype, threads, backend, training):
                return _core.Net(d["mode"], d["input_size"], d["hidden_size"], d["num_layers"], d["bidirectional"],
                                 d["proj_size"], d["dropout"], "reset-after", dtype, threads, backend, training,
                                 weight_dtype=weight_dtype)
        self.net = make(d["dtype"], d["threads"], "auto", True)
        # Runs without a backward use an inference plan: its packing is about half a training plan's.
        self.infer = make(d["dtype"], d["threads"], "auto", False)
        # The output's width and the states' shapes for one row (the fake implementation scales them).
        d["width"], (d["h1"], d["c1"]) = self.net.output_width, self.net.state_shapes(1)
        tensors = self.net.tensors()
        self.names = [name for name, _, _ in tensors]
        self.present = [i for i, name in enumerate(self.names) if d["bias"] or not name.startswith("bias_")]
        self.dtype = torch.float64 if d["dtype"] == "float64" else torch.float32
        self.by_version = d.get("weight_check") == "version"
        self.lstm = d["mode"] == "lstm"
        self.batch_first = d["batch_first"]


def _drop_entries(specs):
    """Frees a collected module's nets (packed weights, workspaces, its last weights)."""
    with _nets_lock:
        for spec in specs:
            _nets.pop(spec, None)


def _entry(spec: str) -> _Entry:
    e = _nets.get(spec)  # atomic under the GIL: a run takes the lock only to make the entry
    if e is not None:
        return e
    with _nets_lock:
        e = _nets.get(spec)
        if e is None:
            e = _nets[spec] = _Entry(spec)
        return e


def _row_ids(x, spec: dict, row_offset: int):
    """The mask function's row of each batch row: its index plus `row_offset` (None: the index)."""
    if not row_offset:
        return None
    return np.arange(x.shape[0 if spec["batch_first"] else 1], dtype=np.int64) + row_offset


def _run_mode(spec: dict, train: bool) -> str:
    return "training" if train else "inference"  # train: a training-mode module with dropout somewhere


# ---- the custom ops ----

def _resets(resets: Optional[Tensor]):
    """The resets as NumPy (any integer or bool dtype; the library checks the shape), or None."""
    if resets is None:
        return None
    if resets.is_floating_point() or resets.is_complex():
        raise ArgumentError(f"resets: dtype {resets.dtype}, expected an integer or bool tensor")
    return resets.detach().cpu().numpy()


def _lengths(lengths: Optional[Tensor]):
    return None if lengths is None else lengths.detach().cpu().numpy()


def _run_tensors(x, weights, h0, c0, lengths, spec, seed, step, row_offset, train, need_reserve, resets=None,
                 op=False):
    """One run of a module's stack: one call into the extension, which checks and imports the weights
    and returns tensors (y, h_n, c_n or None, reserve or None; op: empty tensors for the Nones)."""
    e = _nets.get(spec) or _entry(spec)
    with e.lock:  # the weights' check and the run that uses them, together
        return (e.net if need_reserve else e.infer).tensor_forward(
            x, weights, h0, c0, None if lengths is None else _lengths(lengths),
            _row_ids(x, e.spec, row_offset) if row_offset else None, None if resets is None else _resets(resets),
            e.batch_first, "training" if train else "inference", seed, step, e.by_version, need_reserve, op)


def _rnn_impl(x: Tensor, weights: list[Tensor], h0: Optional[Tensor], c0: Optional[Tensor],
              lengths: Optional[Tensor], spec: str, seed: int, step: int, row_offset: int, train: bool,
              need_reserve: bool, resets: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One run of a module's stack: (y, h_n, c_n (empty unless LSTM), reserve (empty unless need_reserve)).
    resets: per-step state resets, [T, B] ([B, T] batch-first), integer or bool, or None."""
    return _run_tensors(x, weights, h0, c0, lengths, spec, seed, step, row_offset, train, need_reserve, resets, True)


_rnn = torch.library.custom_op("rnncore::rnn", _rnn_impl, mutates_args=())


def _eager(tensors) -> bool:
    """True when a run can skip the dispatcher and call the op's body: plain CPU tensors, nothing tracing
    or compiling (Dynamo, torch.export, FakeTensor, a dispatch mode) and no autograd to record (the
    caller checks that). Saves the custom op's dispatch, most of a small module's per-call cost."""
    if torch.compiler.is_compiling() or _dispatch_modes() != 0:
        return False
    return _PLAIN.issuperset(map(type, tensors))


_PLAIN = frozenset((Tensor, nn.Parameter, type(None)))
_dispatch_modes = torch._C._len_torch_dispatch_stack


def _autocast_inputs(dtype, *tensors):
    """Inside torch.autocast: floating tensors of another type (a bf16 / f16 output of an autocast layer
    before) cast to the module's dtype, as autocast does for the ops it runs in f32; the cast is
    differentiable, so their gradients return in their own type. The run and its outputs stay in the
    module's dtype (reduced-precision products: ``weight_dtype=``)."""
    return tuple(t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != dtype else t
                 for t in tensors)


def _shapes(spec: dict, x: Tensor):
    """Sizes of a run on x: T, B, and the shapes of y, h and c (states [L*D, B, ·], or flat when the
    layers differ: B times one row's)."""
    t, b = (x.shape[1], x.shape[0]) if spec["batch_first"] else (x.shape[0], x.shape[1])
    y = (b, t, spec["width"]) if spec["batch_first"] else (t, b, spec["width"])
    h1, c1 = spec["h1"], spec["c1"]
    if len(h1) == 3:
        return t, b, y, (h1[0], b, h1[2]), (c1[0], b, c1[2])
    return t, b, y, (b * h1[0],), (b * c1[0],)


@_rnn.register_fake
def _(x, weights, h0, c0, lengths, spec, seed, step, row_offset, train, need_reserve, resets=None):
    e = _entry(spec)
    t, b, y, hs, cs = _shapes(e.spec, x)
    c = x.new_empty(cs) if e.spec["mode"] == "lstm" else x.new_empty(0)
    if not need_reserve:
        n = 0
    elif isinstance(t, int) and isinstance(b, int):
        n = e.net.reserve_bytes(b, t)
    else:
        n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(y), x.new_empty(hs), c, x.new_empty(n, dtype=torch.uint8)


@torch.library.custom_op("rnncore::rnn_backward", mutates_args=())
def _rnn_backward(x: Tensor, weights: list[Tensor], h0: Optional[Tensor], c0: Optional[Tensor],
                  lengths: Optional[Tensor], reserve: Tensor, dy: Tensor, dh: Tensor, dc: Optional[Tensor], spec: str,
                  seed: int, step: int, row_offset: int, train: bool,
                  resets: Optional[Tensor] = None, need_dx: bool = True,
                  need_dw: bool = True) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """The gradients of a run of `_rnn` with the same arguments: (dx (empty when need_dx is false: the first
    layer's input product is skipped), dh0, dc0 (empty unless LSTM), dweights (none when need_dw is false:
    the weight products are skipped))."""
    e = _entry(spec)
    with e.lock:
        dx, dh0, dc0, dws = e.net.tensor_backward(
            x, weights, h0, c0, _lengths(lengths), _row_ids(x, e.spec, row_offset), _resets(resets),
            e.batch_first, _run_mode(e.spec, train), seed, step, e.by_version, reserve, dy, dh, dc, need_dx, need_dw)
    def empty():  # a new one each time: a custom op's outputs may not alias each other
        return torch.empty(0, dtype=e.dtype)
    return empty() if dx is None else dx, dh0, empty() if dc0 is None else dc0, dws


@_rnn_backward.register_fake
def _(x, weights, h0, c0, lengths, reserve, dy, dh, dc, spec, seed, step, row_offset, train, resets=None,
      need_dx=True, need_dw=True):
    e = _entry(spec)
    _, _, _, hs, cs = _shapes(e.spec, x)
    dc0 = x.new_empty(cs) if e.spec["mode"] == "lstm" else x.new_empty(0)
    dx = torch.empty_like(x) if need_dx else x.new_empty(0)
    return dx, x.new_empty(hs), dc0, [torch.empty_like(w) for w in weights] if need_dw else []


def _setup_context(ctx, inputs, output):
    x, weights, h0, c0, lengths, spec, seed, step, row_offset, train, need_reserve, resets = inputs
    ctx.args = (spec, seed, step, row_offset, train, h0 is not None, c0 is not None)
    ctx.save_for_backward(x, h0, c0, lengths, resets, output[3], *weights)
    # No zeros for the outputs without a gradient: autograd would fill one of the reserve's size
    # (tens of MB at B = 64: 40 % of a training step's page faults) that backward never reads.
    ctx.set_materialize_grads(False)
    ctx.shapes = (output[0].shape, output[1].shape, output[2].shape)


def _backward(ctx, dy, dh, dc, _dreserve):
    spec, seed, step, row_offset, train, has_h0, has_c0 = ctx.args
    x, h0, c0, lengths, resets, reserve, *weights = ctx.saved_tensors
    lstm = _entry(spec).lstm
    y_shape, h_shape, c_shape = ctx.shapes
    dy = x.new_zeros(y_shape) if dy is None else dy  # (no gradient reached that output)
    dh = x.new_zeros(h_shape) if dh is None else dh
    dc = x.new_zeros(c_shape) if dc is None and lstm else dc
    need_dx = ctx.needs_input_grad[0]  # an input that needs no gradient spares the first layer's input product
    need_dw = any(ctx.needs_input_grad[1])  # frozen weights spare the weight products (two of four a layer)
    dx, dh0, dc0, dws = torch.ops.rnncore.rnn_backward(x, weights, h0, c0, lengths, reserve, dy.contiguous(),
                                                       dh.contiguous(), dc.contiguous() if lstm else None, spec,
                                                       seed, step, row_offset, train, resets, need_dx, need_dw)
    dws = list(dws) if need_dw else [None] * len(weights)
    return (dx if need_dx else None, dws, dh0 if has_h0 else None, dc0 if has_c0 else None) + (None,) * 8


_rnn.register_autograd(_backward, setup_context=_setup_context)


# ---- the modules ----

class _RNNBase(nn.Module):
    """torch.nn.RNNBase's interface over rnncore::rnn."""

    _mode = "lstm"
    _gates = 4

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None, *, seed=0, threads=1, row_offset=0,
                 weight_check="values", config=None, stochastic=None, weight_dtype="f32"):
        super().__init__()
        if weight_check not in ("values", "version"):
            raise ArgumentError(f"weight_check '{weight_check}': expected 'values' or 'version'")
        if device is not None and torch.device(device).type != "cpu":
            raise ArgumentError(f"device {device}: rnncore.torch runs on the CPU")
        dtype = dtype or torch.get_default_dtype()
        if dtype not in (torch.float32, torch.float64):
            raise ArgumentError(f"dtype {dtype}: expected torch.float32 or torch.float64")
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1 or isinstance(dropout, bool):
            raise ArgumentError(f"dropout {dropout}: expected a probability in [0, 1)")
        _warn_if_cores_contended(threads)
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        self.seed, self.step, self.threads, self.row_offset = seed, 0, threads, row_offset
        self.weight_dtype = weight_dtype
        self._spec = json.dumps({
            "uid": next(_uids), "mode": mode, "input_size": input_size, "hidden_size": hidden_size,
            "num_layers": num_layers, "bidirectional": bool(bidirectional), "proj_size": proj_size,
            "dropout": float(dropout), "bias": bool(bias), "batch_first": bool(batch_first),
            "dtype": "float64" if dtype == torch.float64 else "float32", "threads": threads,
            "weight_check": weight_check, "weight_dtype": weight_dtype,
            **({"config": config} if config is not None else {}),
        })
        # Whether a training-mode forward draws dropout masks (and counts `step` up).
        self._stochastic = self.dropout > 0 if stochastic is None else stochastic
        self._spec_tm = json.dumps({**json.loads(self._spec), "batch_first": False})  # PackedSequence runs
        weakref.finalize(self, _drop_entries, (self._spec, self._spec_tm))
        e = _entry(self._spec)  # validates the configuration (rnncore.ArgumentError on a bad one)
        self._flat_weights_names = [e.names[i] for i in e.present]
        # At least two names (weight_ih_l0, weight_hh_l0): itemgetter returns a tuple.
        self._get_weights = operator.itemgetter(*self._flat_weights_names)
        shapes = {name: shape for name, shape, _ in e.net.tensors()}
        for name in self._flat_weights_names:
            setattr(self, name, nn.Parameter(torch.empty(shapes[name], dtype=dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        """torch.nn's initialisation: every parameter uniform in ±1/sqrt(hidden_size)."""
        k = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            nn.init.uniform_(w, -k, k)

    @property
    def all_weights(self):
        return list(self._weights())

    def _weights(self):
        """The weights in the format's order (a sequence): from _parameters, in one C call when eager
        (Dynamo cannot trace itemgetter); nn.Module.__getattr__ costs 2 us a name, so only for a name that
        is not a parameter (torch.func may put plain tensors elsewhere)."""
        p = self._parameters
        if not torch.compiler.is_compiling():
            try:
                return self._get_weights(p)
            except KeyError:
                pass
        return [p[n] if n in p else getattr(self, n) for n in self._flat_weights_names]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.weight_dtype != "f32":
            s += f", weight_dtype='{self.weight_dtype}'"
        return s

    def _run(self, x, h0, c0, lengths, batch_first, resets=None):
        train = self.training and self._stochastic
        weights = self._weights()
        if torch.is_autocast_enabled("cpu"):
            x, h0, c0 = _autocast_inputs(weights[0].dtype, x, h0, c0)
        need_reserve = torch.is_grad_enabled() and (
            x.requires_grad or any(w.requires_grad for w in weights)
            or (h0 is not None and h0.requires_grad) or (c0 is not None and c0.requires_grad))
        spec = self._spec if batch_first == self.batch_first else self._spec_tm
        if not need_reserve and _eager((x, h0, c0, lengths, resets, *weights)):
            # The op's body without the dispatcher, and without the tensors an op must return but this
            # call drops (an empty reserve; an empty c for a GRU or RNN).
            y, h, c, _ = _run_tensors(x, weights, h0, c0, lengths, spec, self.seed, self.step, self.row_offset, train,
                                      False, resets)
        else:
            y, h, c, _ = torch.ops.rnncore.rnn(x.contiguous(), list(weights), h0, c0, lengths, spec, self.seed,
                                               self.step, self.row_offset, train, need_reserve, resets)
        if train:
            self.step += 1
        return y, h, c

    def forward(self, input, hx=None, resets=None):
        """torch.nn's forward; ``resets``: per-step state resets (any integer or bool dtype), ``[T, B]``
        (``[B, T]`` with batch_first; ``[T, B]`` in the caller's row order for a PackedSequence; ``[T]``
        unbatched): where nonzero, that row's state in every layer returns to ``hx`` (or zeros) before
        that step. Unidirectional modules only."""
        lstm = self.mode == "lstm"
        if isinstance(hx, tuple) != lstm and hx is not None:
            raise ArgumentError(f"hx: expected {'a tuple (h_0, c_0)' if lstm else 'a tensor h_0'}")
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if isinstance(input, PackedSequence):
            padded, lengths = pad_packed_sequence(input)  # [T, B, I], rows in the caller's order
            y, h, c = self._run(padded, h0, c0, lengths, False, resets)
            # torch.nn's packing of the output: the input's batch sizes and row order.
            order = input.sorted_indices
            if order is not None:
                y, lengths = y.index_select(1, order), lengths.index_select(0, order.cpu())
            data = pack_padded_sequence(y, lengths, enforce_sorted=True).data
            out = PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        elif input.dim() == 3:
            out, h, c = self._run(input, h0, c0, None, self.batch_first, resets)
        elif input.dim() == 2:  # unbatched [T, I], states [L*D, H]
            y, h, c = self._run(input.unsqueeze(1), None if h0 is None else h0.unsqueeze(1),
                                None if c0 is None else c0.unsqueeze(1), None, False,
                                None if resets is None else resets.unsqueeze(1))
            out, h, c = y.squeeze(1), h.squeeze(1), (c.squeeze(1) if lstm else c)
        else:
            raise ArgumentError(f"input: {input.dim()} dimensions, expected 3 (batched) or 2 (unbatched)")
        return (out, (h, c)) if lstm else (out, h)


class LSTM(_RNNBase):
    """torch.nn.LSTM on rnncore (``seed=``, ``threads=``, ``row_offset=``, ``weight_check=``, ``weight_dtype=``
    besides torch.nn's arguments)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None, **kw):
        super().__init__("lstm", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype, **kw)


class GRU(_RNNBase):
    """torch.nn.GRU on rnncore (``seed=``, ``threads=``, ``row_offset=``, ``weight_check=``, ``weight_dtype=``
    besides torch.nn's arguments)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, **kw):
        super().__init__("gru", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype, **kw)


class RNN(_RNNBase):
    """torch.nn.RNN on rnncore (``seed=``, ``threads=``, ``row_offset=``, ``weight_check=``, ``weight_dtype=``
    besides torch.nn's arguments)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kw):
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"nonlinearity '{nonlinearity}': expected 'tanh' or 'relu'")
        super().__init__("rnn_" + nonlinearity, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype, **kw)
        self.nonlinearity = nonlinearity


class Stack(_RNNBase):
    """A stack of layers that differ in cell, size or direction, with TensorFlow's cell wrappers
    (DropoutWrapper: input, output and state keep probabilities, variational, per sequence, state
    filters; ResidualWrapper) and inter-layer dropout: a stack configuration (docs/config.md) as a
    dict, JSON text or a JSON file's path, whose ``input_size`` must be given.

    The parameters are the PyTorch format's tensors of that stack (``weight_ih_l0``, ... with each
    layer's own shapes; ``named_parameters()`` lists them), initialised uniform in ±1/sqrt(H) of
    layer 0. ``forward(input, hx)`` as torch.nn's: ``(output, (h_n, c_n))`` when layer 0 is an LSTM,
    else ``(output, h_n)``; the states are ``[L*D, B, H]`` when the layers are alike, else flat (each
    layer's and direction's ``[B, H]`` one after another). Dropout (inter-layer and the wrappers')
    from the module's ``seed`` and ``step`` as the other modules'; masks as ``rnncore run --config
    --train --seed S --step N``.
    """

    def __init__(self, config, batch_first=False, device=None, dtype=None, **kw):
        if isinstance(config, dict):
            cfg = config
        elif isinstance(config, str) and config.lstrip().startswith("{"):
            cfg = json.loads(config)
        else:
            with open(config) as f:
                cfg = json.load(f)
        layers = cfg.get("layers") or [{}]
        first = layers[0]
        stochastic = cfg.get("dropout", 0) > 0 or any(
            w.get("type") == "dropout" and any(w.get(k, 1) < 1 for k in ("input_keep", "output_keep", "state_keep"))
            for layer in layers for w in layer.get("wrappers", []))
        self.config = cfg
        super().__init__(first.get("mode", "lstm"), cfg.get("input_size", 0), first.get("hidden_size", 0),
                         len(layers), True, batch_first, 0.0, first.get("direction") == "bidirectional", 0, device,
                         dtype, config=json.dumps(cfg), stochastic=stochastic, **kw)
        self.dropout = float(cfg.get("dropout", 0.0))

    def extra_repr(self):
        return json.dumps(self.config)

#!/usr/bin/python3
"""Generate ONNX-layout golden data for rnncore: tests/golden/onnx/<case>.safetensors

Run with Debian's python (onnx 1.12, torch 1.13 CPU, numpy 1.24):
    /usr/bin/python3 tests/golden/make_onnx_golden.py

The expected outputs come from the numpy reference implementations shipped
with onnx's backend node tests (onnx.backend.test.case.node.{lstm,gru,rnn}:
LSTM_Helper, GRU_Helper, RNN_Helper), evaluated in float64 on float64 copies
of the stored float32 tensors.  What those helpers do (onnx 1.12):

  * only num_directions == 1 (W.shape[0] == 1); anything else raises
    NotImplementedError;
  * no sequence_lens input (every row runs all T steps);
  * fixed default activations: LSTM f=sigmoid, g=h=tanh; GRU f=sigmoid,
    g=tanh; RNN f=tanh.  No `activations`, `clip` or `input_forget`;
  * Y is returned as [T, num_directions, B, H] (layout 0) and Y_h as
    [num_directions, B, H]; LSTM_Helper does not return Y_c;
  * bias B = [Wb, Rb] is used completely:
      LSTM: gates = X W^T + H R^T + (Wb + Rb), plus peepholes P (we never pass
            P, so the helper uses zeros, i.e. no peepholes);
      GRU:  z, r = f(X W^T + H R^T + Wb + Rb) for their blocks;
            linear_before_reset=0 (reset-before):
                h~ = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)
            linear_before_reset=1 (reset-after):
                h~ = g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)
            H' = (1 - z) * h~ + z * H   (no part of B is ignored);
      RNN:  H' = f(X W^T + H R^T + Wb + Rb).
    Absent B / initial_h / initial_c default to zeros.

Where a helper lacks a feature we obtain it by an obviously-equivalent
transformation (each one is marked "EQUIVALENT TRANSFORMATION" below):
  * reverse direction: run the single-direction helper on the time-reversed
    input (X[::-1]) with the reverse direction's W/R/B/initial state, then
    time-reverse its Y back; its Y_h (state after the last processed step,
    i.e. after original time 0) is the reverse direction's Y_h;
  * bidirectional: forward and reverse computed independently as above and
    stacked along the direction axis (ONNX directions do not interact within
    a layer);
  * sequence_lens: each row b is run on its own as a batch of one, on
    X[:len_b, b] (reversed for the reverse direction); Y of that row is zero
    for t >= len_b (ONNX Runtime's convention) and Y_h / Y_c are the states
    after the row's last processed step.  ONNX cases use lengths >= 1 only;
  * LSTM Y_c: the helper does not return it, so we subclass LSTM_Helper and
    record the argument of its output activation h(.), which the helper calls
    exactly once per step with the new cell state C_t;
  * RNN with activations=["Relu"]: the helper's activation is its method f;
    the subclass overrides f with max(x, 0).

Cross-checks performed by this script (all must pass, relative inf-norm
error <= 1e-12):
  * every case against the independent numpy loops in rnn_reference.py (which
    include a hand-written reset-before GRU);
  * LSTM, GRU with linear_before_reset=1 and RNN tanh/relu: the ONNX weights
    converted to PyTorch layout (direct block permutation written out below),
    run through torch.nn.{LSTM,GRU,RNN} in float64;
  * onnx shape inference on an ONNX node built from the stored tensors gives
    Y = [T, D, B, H] and Y_h = [D, B, H] (checks the stored ONNX shapes).

Deterministic: re-running reproduces byte-identical files.
"""

import argparse
import os
import sys

import numpy as np
import onnx
import onnx.helper
import onnx.shape_inference
import torch
from onnx.backend.test.case.node.gru import GRU_Helper
from onnx.backend.test.case.node.lstm import LSTM_Helper
from onnx.backend.test.case.node.rnn import RNN_Helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import rnn_reference as ref  # noqa: E402

SEED = 20240612
SIZES = [1, 3, 17, 33]
TOL = 1e-12

# (case kind, rnncore mode, linear_before_reset or None, ONNX op, ONNX activations per direction)
KINDS = [
    ("lstm", "lstm", None, "LSTM", ["Sigmoid", "Tanh", "Tanh"]),
    ("gru_lbr0", "gru", 0, "GRU", ["Sigmoid", "Tanh"]),
    ("gru_lbr1", "gru", 1, "GRU", ["Sigmoid", "Tanh"]),
    ("rnn_tanh", "rnn_tanh", None, "RNN", ["Tanh"]),
    ("rnn_relu", "rnn_relu", None, "RNN", ["Relu"]),
]
NO_BIAS = {2, 9}   # case indices stored without B (bias "0")


class LSTMHelperWithC(LSTM_Helper):
    """EQUIVALENT TRANSFORMATION: record C_t, the argument of the output
    activation h(C_t) that LSTM_Helper.step calls once per time step."""

    def h(self, x):
        self.last_c = np.array(x, copy=True)
        return super().h(x)


class RNNHelperRelu(RNN_Helper):
    """EQUIVALENT TRANSFORMATION: activations=["Relu"] by overriding the
    helper's activation method f."""

    def f(self, x):
        return np.maximum(x, 0.0)


def helper_one_direction(mode, lbr, x, W, R, B, h0, c0):
    """Run the onnx helper for ONE direction: x [n, b, I] float64, W [1, G*H, I], ...
    Returns y [n, b, H], hn [b, H], cn [b, H] or None."""
    params = {"X": x, "W": W, "R": R}
    if B is not None:
        params["B"] = B
    if h0 is not None:
        params["initial_h"] = h0
    if c0 is not None:
        params["initial_c"] = c0
    if mode == "lstm":
        hlp = LSTMHelperWithC(**params)
    elif mode == "gru":
        hlp = GRU_Helper(linear_before_reset=lbr, **params)
    elif mode == "rnn_tanh":
        hlp = RNN_Helper(**params)
    elif mode == "rnn_relu":
        hlp = RNNHelperRelu(**params)
    else:
        raise ValueError(mode)
    Y, Y_h = hlp.step()
    assert Y.shape == (x.shape[0], 1, x.shape[1], R.shape[-1]) and Y_h.shape == (1, x.shape[1], R.shape[-1])
    assert Y.dtype == np.float64 and Y_h.dtype == np.float64
    cn = None
    if mode == "lstm":
        # the helper keeps C_t with a leading time axis of size 1: [1, b, H]
        assert hlp.last_c.shape == (1, x.shape[1], R.shape[-1]), hlp.last_c.shape
        cn = hlp.last_c[0]
    return Y[:, 0], Y_h[0], cn


def onnx_reference(mode, lbr, X, W, R, B, h0, c0, lens):
    """ONNX-semantics forward pass built from the helpers (float64).
    X [T, Bt, I]; W [D, G*H, I]; ...; lens [Bt] or None.
    Returns ONNX-layout Y [T, D, Bt, H], Y_h [D, Bt, H], Y_c [D, Bt, H] or None."""
    T, Bt, _ = X.shape
    D = W.shape[0]
    H = R.shape[-1]
    Y = np.zeros((T, D, Bt, H))
    Y_h = np.zeros((D, Bt, H))
    Y_c = np.zeros((D, Bt, H))
    lens = np.full(Bt, T) if lens is None else lens
    # EQUIVALENT TRANSFORMATION (sequence_lens): group rows by length (rows of
    # equal length run together as one helper batch; rows never interact).
    for n in sorted(set(int(v) for v in lens)):
        rows = np.nonzero(lens == n)[0]
        assert n >= 1
        for d in range(D):
            xs = X[:n, rows]
            if d == 1:
                # EQUIVALENT TRANSFORMATION (reverse direction): time-reverse
                xs = xs[::-1]
            sl = slice(d, d + 1)
            y, hn, cn = helper_one_direction(
                mode, lbr, np.ascontiguousarray(xs), W[sl], R[sl],
                None if B is None else B[sl],
                None if h0 is None else h0[sl][:, rows],
                None if c0 is None else c0[sl][:, rows])
            if d == 1:
                y = y[::-1]
            Y[:n, d][:, rows] = y
            Y_h[d, rows] = hn
            if cn is not None:
                Y_c[d, rows] = cn
    return Y, Y_h, (Y_c if mode == "lstm" else None)


def onnx_to_torch(mode, W, R, B):
    """Direct ONNX -> PyTorch parameter conversion (per direction d):
       LSTM: ONNX blocks i,o,f,c  -> torch i,f,g,o = ONNX blocks [0, 2, 3, 1]
       GRU:  ONNX blocks z,r,h    -> torch r,z,n   = ONNX blocks [1, 0, 2]
       RNN:  identical.
       weight_ih = W[d] (reordered), weight_hh = R[d] (reordered),
       bias_ih = B[d][:G*H] (reordered), bias_hh = B[d][G*H:] (reordered)."""
    perm = {"lstm": [0, 2, 3, 1], "gru": [1, 0, 2], "rnn_tanh": [0], "rnn_relu": [0]}[mode]
    D, GH, _ = W.shape
    G = len(perm)
    H = GH // G

    def reorder(a):  # a [G*H, ...]
        return np.concatenate([a[k * H:(k + 1) * H] for k in perm], axis=0)

    sd = {}
    for d in range(D):
        sfx = "_l0" + ("_reverse" if d else "")
        sd["weight_ih" + sfx] = reorder(W[d])
        sd["weight_hh" + sfx] = reorder(R[d])
        if B is not None:
            sd["bias_ih" + sfx] = reorder(B[d][:GH])
            sd["bias_hh" + sfx] = reorder(B[d][GH:])
    return sd


def torch_check(mode, X, W, R, B, h0, c0, lens, y, hn, cn):
    """Run torch in float64 on the converted weights; compare with rnncore-layout expected."""
    D, GH, I = W.shape
    H = R.shape[-1]
    kw = dict(input_size=I, hidden_size=H, num_layers=1, bias=B is not None, bidirectional=D == 2)
    if mode == "lstm":
        mod = torch.nn.LSTM(**kw)
    elif mode == "gru":
        mod = torch.nn.GRU(**kw)
    else:
        mod = torch.nn.RNN(nonlinearity=mode[4:], **kw)
    mod = mod.double()
    sd = onnx_to_torch(mode, W, R, B)
    assert set(sd) == set(mod.state_dict())
    mod.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in sd.items()})
    T, Bt, _ = X.shape
    x = torch.from_numpy(X)
    if lens is not None:
        x = torch.nn.utils.rnn.pack_padded_sequence(x, torch.from_numpy(lens.astype(np.int64)),
                                                    enforce_sorted=False)
    hx = None
    if h0 is not None:
        hx = torch.from_numpy(h0)
        if mode == "lstm":
            hx = (hx, torch.from_numpy(c0))
    with torch.no_grad():
        out, hid = mod(x, hx)
    if lens is not None:
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
    if mode == "lstm":
        th, tc = hid
    else:
        th, tc = hid, None
    errs = [ref.rel_err(out.numpy(), y), ref.rel_err(th.numpy(), hn)]
    if mode == "lstm":
        errs.append(ref.rel_err(tc.numpy(), cn))
    return max(errs)


def shape_check(op, attrs, T, Bt, D, H, I, has_b, has_lens, has_h0, has_c0):
    """ONNX shape inference on a node with the stored tensors' shapes."""
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    names = ["X", "W", "R", "B" if has_b else "", "sequence_lens" if has_lens else "",
             "initial_h" if has_h0 else ""]
    if op == "LSTM":
        names.append("initial_c" if has_c0 else "")
    while names and names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = onnx.helper.make_node(op, names, outs, **attrs)
    shapes = {"X": [T, Bt, I], "W": [D, G * H, I], "R": [D, G * H, H], "B": [D, 2 * G * H],
              "sequence_lens": [Bt], "initial_h": [D, Bt, H], "initial_c": [D, Bt, H]}
    inputs = []
    for n in names:
        if n:
            et = onnx.TensorProto.INT32 if n == "sequence_lens" else onnx.TensorProto.FLOAT
            inputs.append(onnx.helper.make_tensor_value_info(n, et, shapes[n]))
    # graph outputs declared with symbolic dims only; inference fills them in
    outputs = [onnx.helper.make_tensor_value_info(
        n, onnx.TensorProto.FLOAT, [f"{n}_{j}" for j in range(4 if n == "Y" else 3)]) for n in outs]
    graph = onnx.helper.make_graph([node], "g", inputs, outputs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    got = {}
    for vi in inferred.graph.output:
        got[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    assert got["Y"] == [T, D, Bt, H], got
    assert got["Y_h"] == [D, Bt, H], got
    if op == "LSTM":
        assert got["Y_c"] == [D, Bt, H], got


def case_table():
    cases = []
    for kk, (kind, mode, lbr, op, acts) in enumerate(KINDS):
        for bi in (0, 1):
            for has_init in (0, 1):
                i = len(cases)
                I = SIZES[(i + i // 4) % 4]
                H = SIZES[(3 * i + 1) % 4]
                Bt = [3, 1, 5, 2][(i + i // 8) % 4]
                T = [4, 7, 1, 2, 7][i % 5]
                has_len = int(i % 4 in (1, 2) and Bt >= 2 and T >= 2)
                c = dict(index=i, kind=kind, mode=mode, lbr=lbr, op=op, acts=acts, bi=bi,
                         has_init=has_init, I=I, H=H, B=Bt, T=T, has_len=has_len,
                         bias=int(i not in NO_BIAS))
                name = f"{kind}_{'bi' if bi else 'uni'}_I{I}_H{H}_B{Bt}_T{T}"
                if has_init:
                    name += "_h0"
                if has_len:
                    name += "_len"
                if not c["bias"]:
                    name += "_nobias"
                c["name"] = name
                cases.append(c)
    return cases


def generate_case(c):
    mode, lbr, I, H, Bt, T = c["mode"], c["lbr"], c["I"], c["H"], c["B"], c["T"]
    D = 2 if c["bi"] else 1
    G = ref.GATES[mode]
    rng = np.random.default_rng([SEED, c["index"]])
    k = 1.0 / np.sqrt(H)
    W32 = rng.uniform(-k, k, size=(D, G * H, I)).astype(np.float32)
    R32 = rng.uniform(-k, k, size=(D, G * H, H)).astype(np.float32)
    B32 = rng.uniform(-k, k, size=(D, 2 * G * H)).astype(np.float32) if c["bias"] else None
    X32 = rng.standard_normal((T, Bt, I)).astype(np.float32)
    lens = None
    if c["has_len"]:
        # lengths >= 1, containing 1 and T, unsorted
        base = [T, 1] + [int(v) for v in rng.integers(1, T + 1, size=Bt - 2)]
        while True:
            lens = np.array([base[j] for j in rng.permutation(Bt)], dtype=np.int32)
            if not all(lens[j] >= lens[j + 1] for j in range(Bt - 1)):
                break
    h032 = c032 = None
    if c["has_init"]:
        h032 = rng.standard_normal((D, Bt, H)).astype(np.float32)
        if mode == "lstm":
            c032 = rng.standard_normal((D, Bt, H)).astype(np.float32)

    f64 = (lambda a: None if a is None else a.astype(np.float64))
    X, W, R, B, h0, c0 = map(f64, (X32, W32, R32, B32, h032, c032))

    Y, Y_h, Y_c = onnx_reference(mode, lbr, X, W, R, B, h0, c0, lens)
    # ONNX Y [T, D, B, H] -> rnncore y [T, B, D*H] (forward then reverse)
    y = np.ascontiguousarray(Y.transpose(0, 2, 1, 3).reshape(T, Bt, D * H))
    hn, cn = Y_h, Y_c
    if lens is not None:
        for b in range(Bt):
            assert np.all(y[lens[b]:, b] == 0.0)

    checks = []
    # independent numpy loops (canonical layout)
    canon = ref.canonical_from_onnx(W32, R32, B32, mode)
    gv = None if lbr is None else ("reset-after" if lbr else "reset-before")
    ny, nhn, ncn = ref.forward(mode, canon, X, 1, c["bi"], lens, h0, c0, gru_variant=gv or "reset-after")
    errs = [ref.rel_err(ny, y), ref.rel_err(nhn, hn)] + ([ref.rel_err(ncn, cn)] if mode == "lstm" else [])
    assert max(errs) <= TOL, (c["name"], "numpy vs onnx helper", errs)
    checks.append("numpy")

    if lbr != 0:
        e = torch_check(mode, X, W, R, B, h0, c0, lens, y, hn, cn)
        assert e <= TOL, (c["name"], "torch vs onnx helper", e)
        checks.append("torch")
    else:
        # the reset-before GRU must differ from the reset-after one on the same
        # weights (otherwise the case would not discriminate the variants)
        ay, _, _ = ref.forward(mode, canon, X, 1, c["bi"], lens, h0, c0, gru_variant="reset-after")
        assert ref.rel_err(ay, y) > 1e-3, (c["name"], "reset-before indistinguishable from reset-after")
        checks.append("!=after")

    attrs = {"hidden_size": H, "direction": "bidirectional" if D == 2 else "forward",
             "activations": c["acts"] * D}
    if lbr is not None:
        attrs["linear_before_reset"] = lbr
    shape_check(c["op"], attrs, T, Bt, D, H, I, B32 is not None, lens is not None,
                h032 is not None, c032 is not None)
    checks.append("shape")

    tensors = {"W": W32, "R": R32, "input": X32}
    if B32 is not None:
        tensors["B"] = B32
    if lens is not None:
        tensors["sequence_lens"] = lens
    if h032 is not None:
        tensors["initial_h"] = h032
        if mode == "lstm":
            tensors["initial_c"] = c032
    tensors["expected.y"] = y
    tensors["expected.hn"] = np.ascontiguousarray(hn)
    if mode == "lstm":
        tensors["expected.cn"] = np.ascontiguousarray(cn)

    helper = {"lstm": "LSTM_Helper", "gru": "GRU_Helper", "rnn_tanh": "RNN_Helper",
              "rnn_relu": "RNN_Helper(f=relu)"}[mode]
    meta = {
        "mode": mode,
        "input_size": str(I),
        "hidden_size": str(H),
        "num_layers": "1",
        "bidirectional": str(c["bi"]),
        "direction": attrs["direction"],
        "batch_first": "0",
        "layout": "0",
        "seq_len": str(T),
        "batch": str(Bt),
        "has_lengths": str(c["has_len"]),
        "has_initial_state": str(c["has_init"]),
        "format": "onnx",
        "bias": str(c["bias"]),
        "activations": ",".join(attrs["activations"]),
        "source": f"onnx {onnx.__version__} backend-test {helper} float64",
        "case": c["name"],
    }
    if mode == "gru":
        meta["gru"] = "reset-after" if lbr else "reset-before"
        meta["linear_before_reset"] = str(lbr)
    return tensors, meta, lens, checks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "onnx"), help="output directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)

    # sanity: the helpers really are single-direction only (documented above)
    try:
        RNN_Helper(X=np.zeros((1, 1, 1)), W=np.zeros((2, 1, 1)), R=np.zeros((2, 1, 1)))
        raise AssertionError("RNN_Helper unexpectedly accepts 2 directions")
    except NotImplementedError:
        pass

    cases = case_table()
    assert len(set(c["name"] for c in cases)) == len(cases)
    hdr = (f"{'case':<40} {'mode':<8} {'lbr':>3} {'D':>1} {'I':>2} {'H':>2} {'B':>1} {'T':>1} "
           f"{'h0':>2} {'bias':>4} {'lengths':<16} {'checks':<20} {'bytes':>6}")
    print(hdr)
    print("-" * len(hdr))
    total = 0
    for c in cases:
        tensors, meta, lens, checks = generate_case(c)
        path = os.path.join(args.out, c["name"] + ".safetensors")
        nbytes = safetensors_io.save_file(tensors, path, meta)
        back, bmeta = safetensors_io.load_file(path)
        assert bmeta == meta and set(back) == set(tensors)
        for n, v in tensors.items():
            assert back[n].dtype == v.dtype and np.array_equal(back[n], v), n
        total += nbytes
        lbr = "-" if c["lbr"] is None else str(c["lbr"])
        print(f"{c['name']:<40} {c['mode']:<8} {lbr:>3} {2 if c['bi'] else 1:>1} {c['I']:>2} {c['H']:>2} "
              f"{c['B']:>1} {c['T']:>1} {c['has_init']:>2} {c['bias']:>4} "
              f"{(str(list(lens)) if lens is not None else '-'):<16} {'+'.join(checks):<20} {nbytes:>6}")
    print("-" * len(hdr))
    print(f"{len(cases)} files, {total} bytes ({total / 1e6:.3f} MB) in {os.path.relpath(args.out)}")


if __name__ == "__main__":
    main()

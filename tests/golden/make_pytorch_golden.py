#!/usr/bin/python3
"""Generate PyTorch golden data for rnncore: tests/golden/pytorch/<case>.safetensors

Run from anywhere with Debian's python (torch 1.13 CPU, numpy 1.24):
    /usr/bin/python3 tests/golden/make_pytorch_golden.py

Deterministic: re-running reproduces byte-identical files (fixed seeds,
deterministic CPU float64 kernels, deterministic safetensors writer).

For every case the stored parameters/inputs are float32 values; the expected
outputs are computed in float64 (module.double(), inputs upcast exactly) and
stored as F64.  The reference is constructed PER ROW: row b is run alone on
x[:len_b, b] with its own initial state (rows with len_b == 0 take the initial
state and produce all-zero output).  The script additionally asserts that
  * without lengths: one batched call of the module agrees with the per-row
    reference to 1e-12 (relative, infinity norm);
  * with lengths and no zero length: PyTorch's
    pack_padded_sequence(enforce_sorted=False) path agrees to 1e-12;
  * always: the independent numpy implementation in rnn_reference.py agrees
    to 1e-12.
"""

import argparse
import copy
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import rnn_reference as ref  # noqa: E402

SEED = 20240611
SIZES = [1, 3, 17, 33]
MODES = ["lstm", "gru", "rnn_tanh", "rnn_relu"]
TOL = 1e-12

# cases built with bias=False: (mode, within-mode index j = (L-1)*4 + bi*2 + has_len)
NO_BIAS = {("lstm", 5), ("gru", 8), ("rnn_tanh", 3), ("rnn_relu", 10)}


def make_lengths(rng, B, T, flavor):
    """Per-row lengths in an unsorted order.

    flavor 'zero'   : contains 0, 1 and T (as far as B allows)
    flavor 'nozero' : contains 1 and T, no 0
    flavor 'short'  : contains 1, no 0, max < T (trailing all-padding steps)
    """
    if flavor == "zero":
        base, lo, hi = [0, T, 1], 0, T
    elif flavor == "nozero":
        base, lo, hi = [T, 1], 1, T
    elif flavor == "short":
        assert T >= 3
        base, lo, hi = [1, T - 1], 1, T - 1
    else:
        raise ValueError(flavor)
    base = list(dict.fromkeys(base))[:B]      # drop duplicates (e.g. T == 1)
    extra = [int(v) for v in rng.integers(lo, hi + 1, size=B - len(base))]
    lens = base + extra
    # shuffle until the order is neither non-increasing nor (for B > 2)
    # non-decreasing, so that implementations relying on sorted lengths fail
    for _ in range(1000):
        perm = [lens[k] for k in rng.permutation(B)]
        if B == 1 or len(set(perm)) == 1:
            return perm
        dec = all(perm[k] >= perm[k + 1] for k in range(B - 1))
        inc = all(perm[k] <= perm[k + 1] for k in range(B - 1))
        if not dec and (B <= 2 or not inc):
            return perm
    raise RuntimeError("could not shuffle lengths")


def case_table():
    cases = []
    k_full = 0
    k_len = 0
    for m, mode in enumerate(MODES):
        for L in (1, 2, 3):
            for bi in (0, 1):
                for has_len in (0, 1):
                    i = len(cases)
                    j = (L - 1) * 4 + bi * 2 + has_len
                    # Latin-square style assignment: every (I, H) pair of
                    # SIZES x SIZES occurs exactly 3 times over the 48 cases.
                    I = SIZES[(j + m) % 4]
                    H = SIZES[(3 * j + j // 4 + 2 * m + 1) % 4]
                    if has_len:
                        k = k_len
                        k_len += 1
                        T = [7, 4, 2, 7, 1, 4][k % 6]
                        B = [5, 3, 3, 5, 2, 5][(k + k // 6) % 6]
                        if T == 1:
                            flavor = "zero"
                        else:
                            # k alternates uni/bi: this pattern gives each
                            # direction count every flavor
                            flavor = ["zero", "nozero", "short", "zero",
                                      "nozero", "zero", "zero", "short"][k % 8]
                            if flavor == "short" and T < 3:
                                flavor = "nozero"
                    else:
                        k = k_full
                        k_full += 1
                        B = [1, 2, 3, 5][k % 4]
                        T = [1, 2, 4, 7][(k + k // 4) % 4]
                        flavor = None
                    # random initial states in half of the cases, chosen so
                    # that they are independent of the lengths flavor
                    has_init = (k + k // 4) % 2 if has_len else (k + k // 2) % 2
                    cases.append(dict(
                        index=i, mode=mode, L=L, bi=bi, has_len=has_len, I=I, H=H, B=B, T=T,
                        batch_first=int(i % 3 == 2),
                        has_init=int(has_init),
                        bias=int((mode, j) not in NO_BIAS),
                        flavor=flavor,
                    ))
    for c in cases:
        name = "{mode}_l{L}_{d}_{ln}_I{I}_H{H}".format(
            mode=c["mode"], L=c["L"], d="bi" if c["bi"] else "uni",
            ln="len" if c["has_len"] else "full", I=c["I"], H=c["H"])
        if c["batch_first"]:
            name += "_bf"
        if c["has_init"]:
            name += "_h0"
        if not c["bias"]:
            name += "_nobias"
        c["name"] = name
    return cases


def build_module(mode, I, H, L, bi, bias, batch_first):
    kw = dict(input_size=I, hidden_size=H, num_layers=L, bias=bool(bias),
              batch_first=bool(batch_first), bidirectional=bool(bi))
    if mode == "lstm":
        return torch.nn.LSTM(**kw)
    if mode == "gru":
        return torch.nn.GRU(**kw)
    if mode == "rnn_tanh":
        return torch.nn.RNN(nonlinearity="tanh", **kw)
    if mode == "rnn_relu":
        return torch.nn.RNN(nonlinearity="relu", **kw)
    raise ValueError(mode)


def torch_call(mod, mode, x, h0, c0):
    if mode == "lstm":
        if h0 is None:
            y, (hn, cn) = mod(x)
        else:
            y, (hn, cn) = mod(x, (h0, c0))
        return y, hn, cn
    y, hn = mod(x) if h0 is None else mod(x, h0)
    return y, hn, None


def per_row_reference(mod64, c, x64, lens, h064, c064):
    """Per-row float64 reference; returns y (layout per batch_first), hn, cn."""
    mode, L, D, H, B, T, bf = c["mode"], c["L"], 2 if c["bi"] else 1, c["H"], c["B"], c["T"], c["batch_first"]
    y = torch.zeros((B, T, D * H) if bf else (T, B, D * H), dtype=torch.float64)
    hn = torch.zeros((L * D, B, H), dtype=torch.float64)
    cn = torch.zeros((L * D, B, H), dtype=torch.float64)
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            if h064 is not None:
                hn[:, b] = h064[:, b]
                if mode == "lstm":
                    cn[:, b] = c064[:, b]
            continue
        xb = x64[b:b + 1, :n] if bf else x64[:n, b:b + 1]
        hb = None if h064 is None else h064[:, b:b + 1].contiguous()
        cb = None if (h064 is None or mode != "lstm") else c064[:, b:b + 1].contiguous()
        yb, hnb, cnb = torch_call(mod64, mode, xb, hb, cb)
        if bf:
            y[b, :n] = yb[0]
        else:
            y[:n, b] = yb[:, 0]
        hn[:, b] = hnb[:, 0]
        if mode == "lstm":
            cn[:, b] = cnb[:, 0]
    return y, hn, (cn if mode == "lstm" else None)


def generate_case(c):
    mode, I, H, L, B, T = c["mode"], c["I"], c["H"], c["L"], c["B"], c["T"]
    D = 2 if c["bi"] else 1
    bf = c["batch_first"]
    rng = np.random.default_rng([SEED, c["index"]])

    mod = build_module(mode, I, H, L, c["bi"], c["bias"], bf)
    k = 1.0 / np.sqrt(H)
    sd32 = {}
    with torch.no_grad():
        for pname, p in mod.named_parameters():
            v = rng.uniform(-k, k, size=tuple(p.shape)).astype(np.float32)
            p.copy_(torch.from_numpy(v))
            sd32[pname] = v
    # state_dict must be exactly the parameters we drew
    assert list(mod.state_dict().keys()) == list(sd32.keys())

    x32 = rng.standard_normal((B, T, I) if bf else (T, B, I)).astype(np.float32)
    lens = np.full(B, T, dtype=np.int32)
    if c["has_len"]:
        lens = np.array(make_lengths(rng, B, T, c["flavor"]), dtype=np.int32)
    h032 = c032 = None
    if c["has_init"]:
        h032 = rng.standard_normal((L * D, B, H)).astype(np.float32)
        if mode == "lstm":
            c032 = rng.standard_normal((L * D, B, H)).astype(np.float32)

    mod64 = copy.deepcopy(mod).double().eval()
    x64 = torch.from_numpy(x32.astype(np.float64))
    h064 = None if h032 is None else torch.from_numpy(h032.astype(np.float64))
    c064 = None if c032 is None else torch.from_numpy(c032.astype(np.float64))

    checks = []
    with torch.no_grad():
        y, hn, cn = per_row_reference(mod64, c, x64, lens, h064, c064)

        if not c["has_len"]:
            yb, hnb, cnb = torch_call(mod64, mode, x64, h064, c064)
            errs = [ref.rel_err(yb.numpy(), y.numpy()), ref.rel_err(hnb.numpy(), hn.numpy())]
            if mode == "lstm":
                errs.append(ref.rel_err(cnb.numpy(), cn.numpy()))
            assert max(errs) <= TOL, (c["name"], "batched vs per-row", errs)
            checks.append("batched")
        else:
            # pack_padded_sequence rejects zero lengths: check the rows with
            # len > 0 through the packed path (all rows when none is 0), and
            # the len == 0 rows against the initial state / zeros.
            rows = np.nonzero(lens > 0)[0]
            zrows = np.nonzero(lens == 0)[0]
            if len(rows):
                ri = torch.from_numpy(rows)
                xs = x64[ri] if bf else x64[:, ri]
                hs = None if h064 is None else h064[:, ri].contiguous()
                cs = None if c064 is None else c064[:, ri].contiguous()
                packed = torch.nn.utils.rnn.pack_padded_sequence(
                    xs, torch.from_numpy(lens[rows].astype(np.int64)), batch_first=bool(bf),
                    enforce_sorted=False)
                yp, hnp, cnp = torch_call(mod64, mode, packed, hs, cs)
                yp, _ = torch.nn.utils.rnn.pad_packed_sequence(yp, batch_first=bool(bf), total_length=T)
                ys = y[ri] if bf else y[:, ri]
                errs = [ref.rel_err(yp.numpy(), ys.numpy()), ref.rel_err(hnp.numpy(), hn[:, ri].numpy())]
                if mode == "lstm":
                    errs.append(ref.rel_err(cnp.numpy(), cn[:, ri].numpy()))
                assert max(errs) <= TOL, (c["name"], "packed vs per-row", errs)
                checks.append("packed" if len(zrows) == 0 else "packed(len>0)")
            for b in zrows:
                h_exp = np.zeros((L * D, H)) if h032 is None else h032[:, b].astype(np.float64)
                assert np.array_equal(hn[:, b].numpy(), h_exp)
                if mode == "lstm":
                    c_exp = np.zeros((L * D, H)) if c032 is None else c032[:, b].astype(np.float64)
                    assert np.array_equal(cn[:, b].numpy(), c_exp)

    # independent numpy implementation (time-major)
    canon = ref.canonical_from_torch(sd32, mode, L, c["bi"], H)
    xt = x32.transpose(1, 0, 2) if bf else x32
    ny, nhn, ncn = ref.forward("gru" if mode == "gru" else mode, canon, xt, L, c["bi"], lens,
                               h032, c032, gru_variant="reset-after")
    if bf:
        ny = ny.transpose(1, 0, 2)
    errs = [ref.rel_err(ny, y.numpy()), ref.rel_err(nhn, hn.numpy())]
    if mode == "lstm":
        errs.append(ref.rel_err(ncn, cn.numpy()))
    assert max(errs) <= TOL, (c["name"], "numpy vs torch", errs)
    checks.append("numpy")

    # rows' padded outputs must be exactly zero
    yt = y.numpy().transpose(1, 0, 2) if bf else y.numpy()
    for b in range(B):
        assert np.all(yt[lens[b]:, b] == 0.0)

    tensors = {"rnn." + n: v for n, v in sd32.items()}
    tensors["input"] = x32
    if c["has_len"]:
        tensors["seq_lengths"] = lens.astype(np.int32)
    if h032 is not None:
        tensors["h0"] = h032
        if mode == "lstm":
            tensors["c0"] = c032
    tensors["expected.y"] = y.numpy().astype(np.float64)
    tensors["expected.hn"] = hn.numpy().astype(np.float64)
    if mode == "lstm":
        tensors["expected.cn"] = cn.numpy().astype(np.float64)

    cls = {"lstm": "nn.LSTM", "gru": "nn.GRU", "rnn_tanh": "nn.RNN(tanh)", "rnn_relu": "nn.RNN(relu)"}[mode]
    meta = {
        "mode": mode,
        "input_size": str(I),
        "hidden_size": str(H),
        "num_layers": str(L),
        "bidirectional": str(c["bi"]),
        "batch_first": str(bf),
        "seq_len": str(T),
        "batch": str(B),
        "has_lengths": str(c["has_len"]),
        "has_initial_state": str(c["has_init"]),
        "format": "pytorch",
        "bias": str(c["bias"]),
        "source": f"torch {torch.__version__} {cls} float64",
        "case": c["name"],
    }
    if mode == "gru":
        meta["gru"] = "reset-after"
    return tensors, meta, lens, checks, float(np.max(np.abs(y.numpy()))) if y.numel() else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "pytorch"), help="output directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)

    cases = case_table()
    names = [c["name"] for c in cases]
    assert len(cases) == 48 and len(set(names)) == 48

    # coverage assertions required by the test plan
    for s in SIZES:
        assert sum(c["I"] == s for c in cases) >= 3 and sum(c["H"] == s for c in cases) >= 3
    assert sum(not c["bias"] for c in cases) >= 2
    assert sum(c["has_init"] for c in cases) == 24
    assert any(c["batch_first"] for c in cases)

    hdr = (f"{'case':<44} {'mode':<8} {'L':>1} {'D':>1} {'I':>2} {'H':>2} {'B':>1} {'T':>1} "
           f"{'bf':>2} {'h0':>2} {'bias':>4} {'lengths':<15} {'max|y|':>8} {'checks':<20} {'bytes':>7}")
    print(hdr)
    print("-" * len(hdr))
    total = 0
    seen_lens = set()
    for c in cases:
        tensors, meta, lens, checks, ymax = generate_case(c)
        path = os.path.join(args.out, c["name"] + ".safetensors")
        nbytes = safetensors_io.save_file(tensors, path, meta)
        # read back and verify
        back, bmeta = safetensors_io.load_file(path)
        assert bmeta == meta and set(back) == set(tensors)
        for n, v in tensors.items():
            assert back[n].dtype == v.dtype and back[n].shape == v.shape and np.array_equal(back[n], v), n
        total += nbytes
        if c["has_len"]:
            seen_lens.update(int(v) for v in lens)
        print(f"{c['name']:<44} {c['mode']:<8} {c['L']:>1} {2 if c['bi'] else 1:>1} {c['I']:>2} {c['H']:>2} "
              f"{c['B']:>1} {c['T']:>1} {c['batch_first']:>2} {c['has_init']:>2} {c['bias']:>4} "
              f"{(str(list(lens)) if c['has_len'] else '-'):<15} {ymax:8.4f} {'+'.join(checks):<20} {nbytes:>7}")
    assert {0, 1, 7}.issubset(seen_lens)
    print("-" * len(hdr))
    print(f"{len(cases)} files, {total} bytes ({total / 1e6:.3f} MB) in {os.path.relpath(args.out)}")
    assert total < 4_000_000


if __name__ == "__main__":
    main()

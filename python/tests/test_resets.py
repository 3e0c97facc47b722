"""Per-step state resets (resets=, docs/design.md §3.5) from Python: rnncore.torch modules, the custom op
under torch.compile, and the NumPy API, against a torch.nn loop that resets the state by hand."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import rnncore  # noqa: E402
import rnncore.torch as rt  # noqa: E402

FORWARD_TOL = 1e-5
GRAD_TOL = 2e-4


def pair(kind, seed, **kw):
    torch.manual_seed(seed)
    if kind == "lstm":
        ref, mod = nn.LSTM(**kw), rt.LSTM(**kw)
    elif kind == "gru":
        ref, mod = nn.GRU(**kw), rt.GRU(**kw)
    else:
        ref, mod = nn.RNN(nonlinearity=kind, **kw), rt.RNN(nonlinearity=kind, **kw)
    mod.load_state_dict(ref.state_dict())
    return ref, mod


def reference(ref, x, hx, resets, batch_first):
    """torch.nn one step at a time; where resets[t, b], row b's state in every layer is set back to
    hx's (zeros without hx) before step t. Returns (y, h_n[, c_n]) time-major or batch-major as x."""
    if batch_first:
        x, resets = x.transpose(0, 1), resets.t()
    lstm = isinstance(ref, nn.LSTM)
    t, b = x.shape[0], x.shape[1]
    hw = ref.proj_size if lstm and ref.proj_size else ref.hidden_size
    init = hx if hx is not None else (
        (x.new_zeros(ref.num_layers, b, hw), x.new_zeros(ref.num_layers, b, ref.hidden_size)) if lstm
        else x.new_zeros(ref.num_layers, b, hw))
    state, ys = init, []
    for s in range(t):
        keep = (resets[s] == 0).to(x.dtype).view(1, b, 1)
        if lstm:
            state = (state[0] * keep + init[0] * (1 - keep), state[1] * keep + init[1] * (1 - keep))
        else:
            state = state * keep + init * (1 - keep)
        if ref.batch_first:
            y, state = ref(x[s].unsqueeze(1), state)
            y = y.squeeze(1)
        else:
            y, state = ref(x[s:s + 1], state)
            y = y.squeeze(0)
        ys.append(y)
    y = torch.stack(ys, 1 if batch_first else 0)
    return [y] + (list(state) if lstm else [state])


def flat(out):
    y, hx = out
    return [y] + (list(hx) if isinstance(hx, tuple) else [hx])


CASES = [
    ("lstm", dict(input_size=4, hidden_size=6, num_layers=2), False, True, torch.bool),
    ("lstm", dict(input_size=3, hidden_size=5, num_layers=1, batch_first=True), True, False, torch.int64),
    ("lstm", dict(input_size=4, hidden_size=7, proj_size=3, num_layers=2), True, True, torch.uint8),
    ("gru", dict(input_size=5, hidden_size=6, num_layers=2, batch_first=True), True, True, torch.int32),
    ("gru", dict(input_size=2, hidden_size=4, num_layers=1), False, False, torch.bool),
    ("tanh", dict(input_size=3, hidden_size=5, num_layers=3), True, True, torch.int8),
    ("relu", dict(input_size=3, hidden_size=4, num_layers=1, batch_first=True, bias=False), True, False, torch.int16),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_module_resets_match_a_torch_nn_loop(case):
    kind, kw, with_hx, many, dtype = CASES[case]
    ref, mod = pair(kind, case, **kw)
    gen = torch.Generator().manual_seed(case)
    t, b = 7, 4
    bf = kw.get("batch_first", False)
    x = torch.randn((b, t, kw["input_size"]) if bf else (t, b, kw["input_size"]), generator=gen, requires_grad=True)
    r = torch.rand(t, b, generator=gen) < (0.35 if many else 0.15)
    r[0, 0] = r[3, 1] = True  # a reset at the first step and one inside
    resets = (r.t() if bf else r).contiguous().to(dtype) * (3 if dtype != torch.bool else 1)  # any nonzero
    hx, inputs = None, [x]
    if with_hx:
        L = kw["num_layers"]
        h = torch.randn(L, b, kw.get("proj_size") or kw["hidden_size"], generator=gen, requires_grad=True)
        hx = (h, torch.randn(L, b, kw["hidden_size"], generator=gen, requires_grad=True)) if kind == "lstm" else h
        inputs += list(hx) if kind == "lstm" else [hx]
    ref_out = reference(ref, x, hx, resets, bf)
    our_out = flat(mod(x, hx, resets=resets))
    for r_, o in zip(ref_out, our_out):
        assert r_.shape == o.shape
        assert (r_ - o).abs().max().item() <= FORWARD_TOL
    cot = [torch.randn(o.shape, generator=gen) for o in ref_out]
    names = ["input", "h0", "c0"][: len(inputs)] + [n for n, _ in mod.named_parameters()]
    rg = torch.autograd.grad(ref_out, inputs + list(ref.parameters()), cot)
    og = torch.autograd.grad(our_out, inputs + list(mod.parameters()), cot)
    for name, a, o in zip(names, rg, og):
        err = (a - o).abs().max().item() / max(a.abs().max().item(), 1e-30)
        assert err <= GRAD_TOL, f"{name}: gradient differs by {err:.2e} of its largest magnitude"


def test_no_reset_equals_no_resets_and_unbatched():
    ref, mod = pair("lstm", 1, input_size=3, hidden_size=4, num_layers=2)
    x = torch.randn(5, 2, 3)
    with torch.no_grad():
        a = flat(mod(x))
        b = flat(mod(x, resets=torch.zeros(5, 2, dtype=torch.bool)))
        assert all(torch.equal(p, q) for p, q in zip(a, b))
        r = torch.tensor([0, 0, 1, 0, 1])
        y1 = flat(mod(x[:, 1], resets=r))
        y2 = flat(mod(x[:, 1:2], resets=r.view(5, 1)))
        assert torch.equal(y1[0], y2[0].squeeze(1)) and torch.equal(y1[1], y2[1].squeeze(1))


def test_resets_under_torch_compile_fullgraph():
    torch._dynamo.reset()
    _, mod = pair("gru", 2, input_size=3, hidden_size=5, num_layers=2, batch_first=True)
    x = torch.randn(3, 6, 3, requires_grad=True)
    resets = torch.zeros(3, 6, dtype=torch.uint8)
    resets[1, 2] = resets[2, 4] = 1

    def f(x, resets):
        y, h = mod(x, resets=resets)
        return y.sum() + h.square().sum()

    eager = f(x, resets)
    (gx,) = torch.autograd.grad(eager, [x])
    compiled = torch.compile(f, fullgraph=True)
    got = compiled(x, resets)
    (cx,) = torch.autograd.grad(got, [x])
    assert torch.allclose(eager, got, atol=1e-5) and torch.allclose(gx, cx, atol=1e-6)
    # the resets change the result (the test would see them dropped)
    assert not torch.allclose(eager, f(x, torch.zeros_like(resets)))


def test_opcheck_with_resets():
    mod = rt.LSTM(3, 5, num_layers=2)
    x = torch.randn(4, 2, 3, requires_grad=True)
    h0 = torch.randn(2, 2, 5, requires_grad=True)
    c0 = torch.randn(2, 2, 5, requires_grad=True)
    resets = torch.tensor([[0, 0], [1, 0], [0, 1], [0, 0]], dtype=torch.uint8)
    torch.library.opcheck(torch.ops.rnncore.rnn.default,
                          (x, mod.all_weights, h0, c0, None, mod._spec, 0, 0, 0, False, True, resets))


def test_numpy_api_resets_match_a_torch_nn_loop():
    ref, _ = pair("lstm", 3, input_size=4, hidden_size=5, num_layers=2, batch_first=True)
    m = rnncore.load(ref, training=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 6, 4)).astype(np.float32)  # [B, T, I]
    h0 = rng.standard_normal((2, 3, 5)).astype(np.float32)
    c0 = rng.standard_normal((2, 3, 5)).astype(np.float32)
    resets = rng.random((3, 6)) < 0.3  # [B, T]: bool
    resets[0, 2] = True
    y, h, c = m.run(x, h0, c0, resets=resets, batch_first=True)
    xt = torch.from_numpy(x).requires_grad_()
    h0t, c0t = torch.from_numpy(h0).requires_grad_(), torch.from_numpy(c0).requires_grad_()
    want = reference(ref, xt, (h0t, c0t), torch.from_numpy(resets), True)
    for w, o in zip(want, (y, h, c)):
        assert np.abs(w.detach().numpy() - o).max() <= FORWARD_TOL
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dh = rng.standard_normal(h.shape).astype(np.float32)
    g = m.grad(x, dy=dy, dh=dh, h0=h0, c0=c0, resets=resets.astype(np.int64), batch_first=True)
    assert np.abs(g["y"] - y).max() <= FORWARD_TOL  # a training plan's forward: the same to rounding
    params = dict(ref.named_parameters())
    names = list(params)
    rg = torch.autograd.grad(want[:2], [xt, h0t, c0t] + [params[n] for n in names],
                             [torch.from_numpy(dy), torch.from_numpy(dh)])
    ours = [g["dx"], g["dh0"], g["dc0"]] + [g["weights"][n] for n in names]
    for name, a, o in zip(["dx", "dh0", "dc0"] + names, rg, ours):
        a = a.numpy()
        assert np.abs(a - o).max() <= GRAD_TOL * max(np.abs(a).max(), 1e-30), name


@pytest.mark.parametrize("resets, match", [
    (np.zeros((6, 3), np.uint8), "resets: shape"),        # [T, B] where batch_first wants [B, T]
    (np.zeros((3, 6), np.float32), "integer or bool"),
    (np.zeros((3,), np.uint8), "resets: shape"),
])
def test_bad_resets_raise(resets, match):
    ref, _ = pair("gru", 4, input_size=2, hidden_size=3, batch_first=True)
    m = rnncore.load(ref)
    with pytest.raises(rnncore.ArgumentError, match=match):
        m.run(np.zeros((3, 6, 2), np.float32), resets=resets, batch_first=True)


def test_bad_resets_raise_in_torch():
    _, mod = pair("lstm", 5, input_size=2, hidden_size=3)
    with pytest.raises(ValueError, match="resets"):
        mod(torch.zeros(4, 2, 2), resets=torch.zeros(4, 2))  # float
    bi = rt.LSTM(2, 3, bidirectional=True)
    with pytest.raises((ValueError, RuntimeError), match="(?i)reset|bidirectional"):
        bi(torch.zeros(4, 2, 2), resets=torch.zeros(4, 2, dtype=torch.bool))


def test_packed_sequence_resets_in_the_callers_row_order():
    """A PackedSequence takes resets [T, B] in the caller's row order: each row's final state equals a run
    of that row alone up to its length."""
    _, mod = pair("gru", 6, input_size=3, hidden_size=4)
    x = torch.randn(5, 3, 3)
    lengths = torch.tensor([5, 2, 4])
    r = torch.zeros(5, 3, dtype=torch.bool)
    r[1, 0] = r[2, 2] = True
    with torch.no_grad():
        _, h = mod(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False), resets=r)
        _, h_plain = mod(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
        assert not torch.equal(h, h_plain)
        for b in range(3):
            n = int(lengths[b])
            _, hb = mod(x[:n, b:b + 1], resets=r[:n, b:b + 1])
            assert torch.equal(hb[:, 0], h[:, b])

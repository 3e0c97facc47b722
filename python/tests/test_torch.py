"""rnncore.torch against torch.nn: forward, every gradient, PackedSequence, opcheck, torch.compile,
dropout from (seed, step), bad inputs."""

import os
import random
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

import rnncore  # noqa: E402
import rnncore.torch as rt  # noqa: E402

FORWARD_TOL = 1e-5  # absolute, on outputs and states
GRAD_TOL = 2e-4     # relative to the largest magnitude of the reference gradient


def pair(kind, seed, **kw):
    """A random torch.nn module and the rnncore.torch module with its state_dict."""
    torch.manual_seed(seed)
    if kind == "lstm":
        ref, ours = nn.LSTM(**kw), rt.LSTM
    elif kind == "gru":
        ref, ours = nn.GRU(**kw), rt.GRU
    else:
        ref, ours = nn.RNN(nonlinearity=kind, **kw), rt.RNN
        kw = dict(kw, nonlinearity=kind)
    mod = ours(**kw)
    mod.load_state_dict(ref.state_dict())
    return ref, mod


def random_config(rng):
    kind = rng.choice(["lstm", "gru", "tanh", "relu"])
    return kind, dict(input_size=rng.randint(1, 12), hidden_size=rng.randint(1, 24), num_layers=rng.randint(1, 3),
                      bias=rng.random() < 0.8, batch_first=rng.random() < 0.5, bidirectional=rng.random() < 0.5)


def states(kind, kw, batch, gen):
    d = 2 if kw["bidirectional"] else 1
    h = torch.randn(kw["num_layers"] * d, batch, kw["hidden_size"], generator=gen)
    return (h, torch.randn(h.shape, generator=gen)) if kind == "lstm" else h


def flat(out):
    """Tensors of a forward's result: output, h_n (and c_n)."""
    y, hx = out
    return [y] + (list(hx) if isinstance(hx, tuple) else [hx])


def assert_grads_close(ref_grads, our_grads, names):
    for name, r, o in zip(names, ref_grads, our_grads):
        scale = max(r.abs().max().item(), 1e-30)
        err = (r - o).abs().max().item() / scale
        assert err <= GRAD_TOL, f"{name}: gradient differs by {err:.2e} of its largest magnitude"


def compare(ref, mod, x, hx, gen):
    """Forward within FORWARD_TOL, and every gradient (input, states, weights) within GRAD_TOL."""
    inputs = [x] + ([] if hx is None else (list(hx) if isinstance(hx, tuple) else [hx]))
    for t in inputs:
        t.requires_grad_(True)
    ref_out, our_out = flat(ref(x, hx)), flat(mod(x, hx))
    for r, o in zip(ref_out, our_out):
        assert r.shape == o.shape
        assert (r - o).abs().max().item() <= FORWARD_TOL
    cot = [torch.randn(r.shape, generator=gen) for r in ref_out]
    ref_params, our_params = list(ref.parameters()), list(mod.parameters())
    names = ["input", "h0", "c0"][: len(inputs)] + [n for n, _ in mod.named_parameters()]
    rg = torch.autograd.grad(ref_out, inputs + ref_params, cot)
    og = torch.autograd.grad(our_out, inputs + our_params, cot)
    assert_grads_close(rg, og, names)


@pytest.mark.parametrize("seed", range(24))
def test_random_models_match_torch_nn(seed):
    rng = random.Random(seed)
    kind, kw = random_config(rng)
    ref, mod = pair(kind, seed, **kw)
    assert [n for n, _ in mod.named_parameters()] == [n for n, _ in ref.named_parameters()]
    gen = torch.Generator().manual_seed(seed)
    t, b = rng.randint(1, 9), rng.randint(1, 5)
    x = torch.randn((b, t, kw["input_size"]) if kw["batch_first"] else (t, b, kw["input_size"]), generator=gen)
    hx = states(kind, kw, b, gen) if rng.random() < 0.5 else None
    compare(ref, mod, x, hx, gen)


@pytest.mark.parametrize("kind", ["lstm", "gru", "tanh"])
def test_packed_sequence(kind):
    kw = dict(input_size=5, hidden_size=7, num_layers=2, bidirectional=True)
    ref, mod = pair(kind, 11, **kw)
    gen = torch.Generator().manual_seed(3)
    lengths = torch.tensor([3, 6, 1, 6, 4])
    x = torch.randn(6, 5, 5, generator=gen, requires_grad=True)
    hx = states(kind, kw, 5, gen)
    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
    ref_out, our_out = ref(packed, hx), mod(packed, hx)
    assert torch.equal(our_out[0].batch_sizes, ref_out[0].batch_sizes)
    assert torch.equal(our_out[0].sorted_indices, ref_out[0].sorted_indices)
    rflat = [ref_out[0].data] + flat((None, ref_out[1]))[1:]
    oflat = [our_out[0].data] + flat((None, our_out[1]))[1:]
    for r, o in zip(rflat, oflat):
        assert (r - o).abs().max().item() <= FORWARD_TOL
    cot = [torch.randn(r.shape, generator=gen) for r in rflat]
    rg = torch.autograd.grad(rflat, [x] + list(ref.parameters()), cot, retain_graph=True)  # `packed` is shared
    og = torch.autograd.grad(oflat, [x] + list(mod.parameters()), cot)
    assert_grads_close(rg, og, ["input"] + [n for n, _ in mod.named_parameters()])
    y, _ = pad_packed_sequence(our_out[0])
    assert y.shape == (6, 5, 14)


def test_unbatched_input_and_projection():
    ref, mod = pair("lstm", 5, input_size=4, hidden_size=6, num_layers=2, proj_size=3)
    x = torch.randn(7, 4)
    with torch.no_grad():
        for r, o in zip(flat(ref(x)), flat(mod(x))):
            assert r.shape == o.shape and (r - o).abs().max().item() <= FORWARD_TOL
    gen = torch.Generator().manual_seed(5)
    compare(ref, mod, x, None, gen)  # unbatched, with gradients


@pytest.mark.parametrize("seed", range(8))
def test_projection_gradients_match_torch_nn(seed):
    """LSTM(proj_size=P): forward and every gradient (input, h0 [L*D, B, P], c0 [L*D, B, H], weight_hr_l*)."""
    rng = random.Random(100 + seed)
    hidden = rng.randint(2, 16)
    kw = dict(input_size=rng.randint(1, 10), hidden_size=hidden, proj_size=rng.randint(1, hidden - 1),
              num_layers=rng.randint(1, 3), bias=rng.random() < 0.8, batch_first=rng.random() < 0.5,
              bidirectional=seed % 2 == 1)
    ref, mod = pair("lstm", seed, **kw)
    assert [n for n, _ in mod.named_parameters()] == [n for n, _ in ref.named_parameters()]
    gen = torch.Generator().manual_seed(seed)
    t, b = rng.randint(1, 9), rng.randint(1, 5)
    x = torch.randn((b, t, kw["input_size"]) if kw["batch_first"] else (t, b, kw["input_size"]), generator=gen)
    d = 2 if kw["bidirectional"] else 1
    hx = None
    if seed % 4 < 2:
        hx = (torch.randn(kw["num_layers"] * d, b, kw["proj_size"], generator=gen),
              torch.randn(kw["num_layers"] * d, b, hidden, generator=gen))
    compare(ref, mod, x, hx, gen)


def test_projection_float64_gradcheck():
    torch.manual_seed(1)
    mod = rt.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True, dtype=torch.float64)
    names = [n for n, _ in mod.named_parameters()]
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(4, 2, 2, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(4, 2, 5, dtype=torch.float64, requires_grad=True)
    params = [p.detach().clone().requires_grad_() for p in mod.parameters()]

    def f(x, h0, c0, *ps):
        return flat(torch.func.functional_call(mod, dict(zip(names, ps)), (x, (h0, c0))))

    assert torch.autograd.gradcheck(f, (x, h0, c0, *params), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind,output", [("lstm", 0), ("lstm", 1), ("lstm", 2), ("gru", 0), ("gru", 1)])
def test_gradient_through_one_output(kind, output):
    """A loss of one output alone (y, h_n or c_n): the others get no gradient (autograd passes None,
    not zeros of their size) and backward takes them as zero, as torch.nn does."""
    ref, mod = pair(kind, 5, input_size=6, hidden_size=7, num_layers=2)
    x = torch.randn(5, 3, 6, requires_grad=True)

    def loss(m):
        out = flat(m(x))
        return (out[output] ** 2).sum()

    names = ["input"] + [n for n, _ in mod.named_parameters()]
    rg = torch.autograd.grad(loss(ref), [x, *ref.parameters()])
    og = torch.autograd.grad(loss(mod), [x, *mod.parameters()])
    assert_grads_close(rg, og, names)


@pytest.mark.parametrize("kind", ["lstm", "gru", "tanh"])
def test_float64_gradcheck(kind):
    """Finite differences of the whole function: input, initial states and every weight."""
    torch.manual_seed(0)
    cls = {"lstm": rt.LSTM, "gru": rt.GRU, "tanh": rt.RNN}[kind]
    mod = cls(3, 4, num_layers=2, bidirectional=True, dtype=torch.float64)
    names = [n for n, _ in mod.named_parameters()]
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(4, 2, 4, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(4, 2, 4, dtype=torch.float64, requires_grad=True)
    params = [p.detach().clone().requires_grad_() for p in mod.parameters()]

    def f(x, h0, c0, *ps):
        hx = (h0, c0) if kind == "lstm" else h0
        return flat(torch.func.functional_call(mod, dict(zip(names, ps)), (x, hx)))

    assert torch.autograd.gradcheck(f, (x, h0, c0, *params), eps=1e-6, atol=1e-7)


def opcheck_args(kind, need_reserve):
    mod = {"lstm": rt.LSTM, "gru": rt.GRU}[kind](3, 5, num_layers=2)
    x = torch.randn(4, 2, 3, requires_grad=True)
    h0 = torch.randn(2, 2, 5, requires_grad=True)
    c0 = torch.randn(2, 2, 5, requires_grad=True) if kind == "lstm" else None
    return (x, mod.all_weights, h0, c0, torch.tensor([4, 2]), mod._spec, 0, 0, 0, False, need_reserve)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_opcheck(kind):
    torch.library.opcheck(torch.ops.rnncore.rnn.default, opcheck_args(kind, True))
    torch.library.opcheck(torch.ops.rnncore.rnn.default, opcheck_args(kind, False),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_input_without_gradient(kind):
    """An input that needs no gradient: the backward skips dx (the first layer's input product) and every
    other gradient is the same, bit for bit; opcheck's autograd tests pass on that path too."""
    torch.manual_seed(2)
    mod = {"lstm": rt.LSTM, "gru": rt.GRU}[kind](6, 9, num_layers=2, bidirectional=True)
    x = torch.randn(5, 3, 6)
    h0 = torch.randn(4, 3, 9, requires_grad=True)
    hx = (h0, torch.zeros(4, 3, 9)) if kind == "lstm" else h0
    grads = []
    for need in (True, False):
        xi = x.clone().requires_grad_(need)
        y, _ = mod(xi, hx)
        g = torch.autograd.grad(y.square().sum(), [h0] + list(mod.parameters()))
        grads.append(g)
        assert (xi.grad is None) and (not need or xi.requires_grad)
    for a, b in zip(*grads):
        assert torch.equal(a, b)
    args = opcheck_args(kind, True)
    args[0].requires_grad_(False)
    torch.library.opcheck(torch.ops.rnncore.rnn.default, args)
    # The backward op itself returns an empty dx when asked for none.
    y, hn, cn, reserve = torch.ops.rnncore.rnn(*args)
    out = torch.ops.rnncore.rnn_backward(args[0], args[1], args[2], args[3], args[4], reserve, torch.ones_like(y),
                                         torch.zeros_like(hn), torch.zeros_like(cn) if kind == "lstm" else None,
                                         args[5], 0, 0, 0, False, None, False)
    assert out[0].numel() == 0 and out[1].shape == hn.shape


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_frozen_weights(kind):
    """Weights that need no gradient (a frozen layer): the backward skips the weight products and the
    input's and states' gradients are the same, bit for bit; opcheck passes on that path."""
    torch.manual_seed(3)
    mod = {"lstm": rt.LSTM, "gru": rt.GRU}[kind](6, 9, num_layers=2, bidirectional=True)
    x = torch.randn(5, 3, 6, requires_grad=True)
    h0 = torch.randn(4, 3, 9, requires_grad=True)
    hx = (h0, torch.zeros(4, 3, 9)) if kind == "lstm" else h0
    y, _ = mod(x, hx)
    full = torch.autograd.grad(y.square().sum(), [x, h0])
    for w in mod.parameters():
        w.requires_grad_(False)
    y, _ = mod(x, hx)
    frozen = torch.autograd.grad(y.square().sum(), [x, h0])
    for a, b in zip(full, frozen):
        assert torch.equal(a, b)
    assert all(w.grad is None for w in mod.parameters())
    args = opcheck_args(kind, True)
    for w in args[1]:
        w.requires_grad_(False)
    torch.library.opcheck(torch.ops.rnncore.rnn.default, args)
    y, hn, cn, reserve = torch.ops.rnncore.rnn(*args)
    out = torch.ops.rnncore.rnn_backward(args[0], args[1], args[2], args[3], args[4], reserve, torch.ones_like(y),
                                         torch.zeros_like(hn), torch.zeros_like(cn) if kind == "lstm" else None,
                                         args[5], 0, 0, 0, False, None, True, False)
    assert out[3] == [] and out[0].shape == args[0].shape


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("weight_dtype, tol", [("f16", 2e-3), ("bf16", 2e-2)])
def test_weight_storage(kind, weight_dtype, tol):
    """weight_dtype="f16" / "bf16" (mixed precision: weights stored rounded, f32 accumulation, f32
    gradients): the output and every gradient within the storage's error of torch.nn's in f32
    (docs/training.md: f16 about 1e-3, bf16 about 1e-2 of the largest), and not equal to them."""
    if rnncore.info()["kernels"][weight_dtype] is None:
        pytest.skip(f"no {weight_dtype} weight storage in this build")
    ref, _ = pair(kind, 11, input_size=10, hidden_size=24, num_layers=2)
    mod = {"lstm": rt.LSTM, "gru": rt.GRU}[kind](10, 24, num_layers=2, weight_dtype=weight_dtype)
    mod.load_state_dict(ref.state_dict())
    assert mod.weight_dtype == weight_dtype and f"weight_dtype='{weight_dtype}'" in repr(mod)
    x = torch.randn(7, 4, 10, requires_grad=True)
    rel = lambda a, b: ((a - b).abs().max() / b.abs().max()).item()  # noqa: E731
    y_ref, _ = ref(x)
    y, _ = mod(x)
    assert 1e-6 < rel(y, y_ref) < tol
    g = torch.randn_like(y)
    want = torch.autograd.grad(y_ref, [x, *ref.parameters()], g)
    got = torch.autograd.grad(y, [x, *mod.parameters()], g)
    for a, b in zip(got, want):
        assert rel(a, b) < tol
    with torch.no_grad():
        assert rel(mod(x)[0], y_ref) < tol  # the inference plan stores them the same way
    m = rnncore.load(ref, weight_dtype=weight_dtype)  # the NumPy API from the torch.nn module
    assert m.weight_dtype == weight_dtype
    y_np = torch.from_numpy(m.run(x.detach().numpy())[0])
    assert 1e-6 < rel(y_np, y_ref.detach()) < tol


def test_weight_storage_errors():
    with pytest.raises(rnncore.ArgumentError, match="weight_dtype 'int8': expected f32, bf16 or f16"):
        rt.LSTM(4, 8, weight_dtype="int8")
    with pytest.raises(rnncore.Error):  # float64 runs on the reference backend, which keeps f32 weights
        rt.LSTM(4, 8, dtype=torch.float64, weight_dtype="bf16")


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = rt.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True, dropout=0.2)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def test_torch_compile_fullgraph():
    """torch.compile's default backend (Inductor), no graph break: inference, and a training step with
    dropout (the module's step advances as in eager mode) and its gradients."""
    torch.manual_seed(1)
    model = Tagger()
    x = torch.randn(3, 5, 6)
    compiled = torch.compile(model, fullgraph=True)
    model.eval()
    assert torch.allclose(compiled(x), model(x), atol=1e-6)
    model.train()
    model.rnn.step = 0
    eager = model(x)
    grads = torch.autograd.grad(eager.square().sum(), list(model.parameters()))
    model.rnn.step = 0
    out = compiled(x)
    assert model.rnn.step == 1
    assert torch.allclose(out, eager, atol=1e-6)
    cgrads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    for g, c in zip(grads, cgrads):
        assert torch.allclose(g, c, atol=1e-5)


def test_dropout_reproducible_and_equal_to_the_library_run(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    mod = rt.LSTM(4, 6, num_layers=3, dropout=0.5, seed=7)
    x = torch.randn(5, 2, 4)
    mod.train()
    mod.step = 3
    y3 = mod(x)[0]
    assert mod.step == 4
    y4 = mod(x)[0]
    mod.step = 3
    assert torch.equal(mod(x)[0], y3)
    assert not torch.equal(y3, y4)
    mod.eval()
    y_eval = mod(x)[0]
    assert not torch.equal(y3, y_eval) and mod.step == 4
    # The same masks as the library's own training run (what `rnncore run --train --seed 7 --step 3` runs):
    # a file holds no dropout, so the NumPy API is given the module's p (`rnncore run --dropout 0.5`).
    path = tmp_path / "m.safetensors"
    safetensors.save_file({k: v.contiguous() for k, v in mod.state_dict().items()}, str(path))
    m = rnncore.load(path, training=True, dropout=0.5)
    y_lib = m.run(x.numpy(), train=True, seed=7, step=3)[0]
    np.testing.assert_allclose(y_lib, y3.detach().numpy(), atol=1e-6)


def test_dropout_gradients_match_a_masked_reference():
    mod = rt.GRU(3, 4, num_layers=2, dropout=0.3, seed=2)
    mod.train()
    x = torch.randn(6, 2, 3, requires_grad=True)
    mod.step = 5
    y = mod(x)[0]
    g = torch.autograd.grad(y.sum(), [x] + list(mod.parameters()))
    mod.step = 5
    y2 = mod(x)[0]
    g2 = torch.autograd.grad(y2.sum(), [x] + list(mod.parameters()))
    assert torch.equal(y, y2)
    for a, b in zip(g, g2):
        assert torch.equal(a, b)


@pytest.mark.parametrize("cast", [torch.bfloat16, torch.float16])
def test_inside_autocast(cast):
    """Inside torch.autocast an autocast layer before hands the module a bf16 / f16 input: the module runs
    it (and h0) cast to its dtype, outputs in f32 equal to the run on the cast values, the gradient
    returns through the cast to the layer before, eagerly and compiled; outside autocast such an input
    stays an error."""
    torch.manual_seed(3)
    lin, mod = nn.Linear(6, 6), rt.LSTM(6, 5)
    x, h0, c0 = torch.randn(4, 3, 6), torch.randn(1, 3, 5).to(cast), torch.randn(1, 3, 5)
    with torch.autocast("cpu", dtype=cast):
        z = lin(x)
        y, (h, c) = mod(z, (h0, c0))
    assert z.dtype == cast and y.dtype == h.dtype == torch.float32
    ref_y, (ref_h, _) = mod(z.detach().float(), (h0.float(), c0))
    assert torch.equal(y, ref_y) and torch.equal(h, ref_h)
    y.square().sum().backward()
    assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0
    compiled = torch.compile(lambda t: mod(lin(t))[0], fullgraph=True)
    with torch.autocast("cpu", dtype=cast):
        assert torch.equal(compiled(x), mod(lin(x))[0])
    with pytest.raises(ValueError, match=f"dtype {cast}, expected torch.float32"):
        mod(z.detach())


def test_bad_inputs_raise_clear_errors():
    mod = rt.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"x: shape \[5, 2, 7\], expected \[T, B, 3\]"):
        mod(torch.randn(5, 2, 7))
    with pytest.raises(ValueError, match="dtype torch.float64, expected torch.float32"):
        mod(torch.randn(5, 2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"h0: shape \[1, 3, 4\], expected \[1, 2, 4\]"):
        mod(torch.randn(5, 2, 3), (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4)))
    with pytest.raises(ValueError, match="hx: expected a tuple"):
        mod(torch.randn(5, 2, 3), torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="4 dimensions"):
        mod(torch.randn(5, 2, 3, 1))
    with pytest.raises(ValueError, match="runs on the CPU"):
        rt.GRU(3, 4, device="cuda")
    with pytest.raises(ValueError, match="nonlinearity"):
        rt.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        rt.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden"):
        rt.LSTM(3, 0)
    # A non-contiguous input is accepted, as torch.nn does: the same result as its contiguous copy.
    x = torch.randn(2, 5, 3).transpose(0, 1)
    assert torch.equal(mod(x)[0], mod(x.contiguous())[0])


def test_torch_export_keeps_the_op():
    mod = rt.GRU(6, 8, num_layers=2)
    x = torch.randn(5, 3, 6)
    ep = torch.export.export(mod, (x,))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.rnncore.rnn.default in targets
    assert torch.equal(ep.module()(x)[0], mod(x)[0])


@pytest.mark.parametrize("kind, kw", [("lstm", dict(num_layers=2, bidirectional=True)), ("gru", dict(bias=False)),
                                      ("tanh", dict(num_layers=3))])
def test_tensor_runs_import_and_export_as_the_numpy_api(kind, kw):
    """A run imports the module's tensors and its backward returns their gradients, in one call into the
    extension each: the canonical weights equal set_weights' import of the same tensors, the gradients
    export_gradients' of the NumPy API's backward."""
    _, mod = pair(kind, 9, input_size=3, hidden_size=5, **kw)
    e = rt._entry(mod._spec)
    x = torch.randn(4, 2, 3, requires_grad=True)
    y = mod(x)[0]  # a training run: imports into e.net
    imported = e.net.canonical()
    full = [None] * len(e.names)
    for i, w in zip(e.present, mod.all_weights):
        full[i] = w.detach().numpy()
    e.net.set_weights(full)
    np.testing.assert_array_equal(imported, e.net.canonical())
    dy = torch.randn_like(y)
    y.backward(dy)
    xs = x.detach().numpy()
    _, hn, cn, reserve = e.net.forward(xs, keep_reserve=True)
    _, _, _, dw = e.net.backward(xs, reserve, dy.numpy(), np.zeros_like(hn), None if cn is None else np.zeros_like(cn))
    want = e.net.export_gradients(dw)
    for w, i in zip(mod.all_weights, e.present):
        np.testing.assert_array_equal(w.grad.numpy(), want[i])


def count_imports(mod):
    """How many times a module's weights were imported (into either of its nets) so far."""
    e = rt._entry(mod._spec)
    return lambda: e.net.imports + e.infer.imports


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_module_over_changing_shapes(kind):
    """Each net reuses its last plan while the batch and length repeat: runs whose shapes change and
    come back (inference, then forward and backward) still match torch.nn."""
    ref, mod = pair(kind, 5, input_size=3, hidden_size=7, num_layers=2)
    gen = torch.Generator().manual_seed(5)
    shapes = [(4, 2), (4, 2), (9, 3), (1, 1), (4, 2), (9, 3), (9, 3), (2, 5)]
    with torch.no_grad():
        for t, b in shapes:
            x = torch.randn(t, b, 3, generator=gen)
            for r, o in zip(flat(ref(x)), flat(mod(x))):
                torch.testing.assert_close(o, r, atol=FORWARD_TOL, rtol=0)
    for t, b in shapes[:5]:
        compare(ref, mod, torch.randn(t, b, 3, generator=gen), None, gen)


@pytest.mark.parametrize("weight_check", ["values", "version"])
def test_weights_are_packed_once_and_again_after_a_change(weight_check):
    ref, mod = pair("lstm", 11, input_size=4, hidden_size=6, num_layers=2)
    mod = rt.LSTM(4, 6, num_layers=2, weight_check=weight_check)
    mod.load_state_dict(ref.state_dict())
    imports = count_imports(mod)
    before = imports()
    x = torch.randn(5, 3, 4)
    opt = torch.optim.SGD(mod.parameters(), lr=0.5)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    for step in range(3):
        with torch.no_grad():
            for _ in range(3):  # inference runs reuse the packed weights
                torch.testing.assert_close(mod(x)[0], ref(x)[0], atol=FORWARD_TOL, rtol=0)
        for m, o in ((mod, opt), (ref, opt_ref)):  # a training step: forward, backward, optimizer
            o.zero_grad()
            m(x)[0].square().sum().backward()
            o.step()
    # Per step: one import for the inference net and one for the training net (whose backward reuses it).
    assert imports() - before == 6
    with torch.no_grad():
        torch.testing.assert_close(mod(x)[0], ref(x)[0], atol=FORWARD_TOL, rtol=0)
        for name in ("weight_hh_l1", "bias_ih_l0"):  # writes the version counters do not see
            getattr(mod, name).data.mul_(0.5)
            getattr(ref, name).data.mul_(0.5)
        if weight_check == "values":
            torch.testing.assert_close(mod(x)[0], ref(x)[0], atol=FORWARD_TOL, rtol=0)
        else:
            assert not torch.allclose(mod(x)[0], ref(x)[0], atol=FORWARD_TOL)  # documented: not seen
        for m in (mod, ref):  # a new storage under the same Parameter: seen by both checks
            m.weight_ih_l0.data = torch.full_like(m.weight_ih_l0, 0.25)
            m.weight_hh_l1.data = ref.weight_hh_l1.detach().clone()
        torch.testing.assert_close(mod(x)[0], ref(x)[0], atol=FORWARD_TOL, rtol=0)
    with pytest.raises(rnncore.ArgumentError, match="weight_check 'sometimes'"):
        rt.GRU(2, 2, weight_check="sometimes")


@pytest.mark.parametrize("weight_check", ["values", "version"])
def test_weights_read_from_any_layout_and_checked(weight_check):
    """The extension reads the weight tensors themselves: a non-contiguous one (a transposed copy's
    transpose) runs as its contiguous copy would; a weight of another dtype is refused by name."""
    ref, mod = pair("lstm", 13, input_size=4, hidden_size=4)
    mod = rt.LSTM(4, 4, weight_check=weight_check)
    mod.load_state_dict(ref.state_dict())
    x = torch.randn(3, 2, 4)
    with torch.no_grad():
        w = mod.weight_hh_l0
        w.data = w.detach().t().contiguous().t()
        assert not w.is_contiguous()
        torch.testing.assert_close(mod(x)[0], ref(x)[0], atol=FORWARD_TOL, rtol=0)
        mod.weight_ih_l0.data = mod.weight_ih_l0.detach().double()
        with pytest.raises(ValueError, match="weight_ih_l0: dtype torch.float64, expected torch.float32"):
            mod(x)


def test_eager_runs_skip_the_dispatcher_with_the_ops_results():
    """No-grad eager runs call the op's body directly; the dispatched op gives the same bits."""
    _, mod = pair("gru", 12, input_size=3, hidden_size=5, bidirectional=True)
    x, h0 = torch.randn(6, 2, 3), torch.randn(2, 2, 5)
    with torch.no_grad():
        y, h = mod(x, h0)
        y2, h2, _, _ = torch.ops.rnncore.rnn(x, mod.all_weights, h0, None, None, mod._spec, 0, 0, 0, False, False)
    assert torch.equal(y, y2) and torch.equal(h, h2)
    assert rt._eager((x, h0, None, *mod.all_weights))
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # tracing: the op, so that fake tensors meet its fake implementation
        assert not rt._eager((x, h0, None))


def _torch_version():
    return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])


def test_runs_use_the_stable_c_abi_where_torch_has_it():
    """With torch >= 2.15 the runs read and make tensors through libtorch's C ABI (unless the
    environment asked for torch's Python API); before 2.14 (no Python tensor conversions in the ABI)
    through torch's Python API."""
    import os
    if os.environ.get("RNNCORE_TORCH_ABI") == "0" or _torch_version() < (2, 14):
        assert rt.kernel_path() == "python-api"
    elif _torch_version() >= (2, 15):
        assert rt.kernel_path() == "stable-abi"
    else:
        assert rt.kernel_path() in ("stable-abi", "python-api")


def _runs(kind, **kw):
    """Everything a module gives on one set of inputs: eager outputs without gradients, a training
    forward's outputs and its gradients, and the errors of a wrong dtype and a wrong shape."""
    _, mod = pair(kind, 21, input_size=3, hidden_size=5, **kw)
    lstm = kind == "lstm"
    torch.manual_seed(22)
    x = torch.randn(2, 4, 3) if kw.get("batch_first") else torch.randn(4, 2, 3)
    h0 = torch.randn(kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1), 2, 5)
    hx = (h0, torch.randn_like(h0)) if lstm else h0
    out = []
    with torch.no_grad():
        y, h = mod(x, hx)
        out += [y, *(h if lstm else (h,))]
        out.append(mod(x[:, :1].transpose(0, 1))[0])  # not contiguous
        out.append(mod(x[1:])[0])  # contiguous at an offset in its storage
    xg = x.clone().requires_grad_()
    y, h = mod(xg, hx)
    (y.square().sum() + (h[0] if lstm else h).sum()).backward()
    out += [y.detach(), xg.grad, *(p.grad for p in mod.parameters())]
    errors = []
    for bad in (x.double(), torch.randn(4, 2, 7)):
        with pytest.raises(ValueError) as e:
            mod(bad)
        errors.append(str(e.value))
    return out, errors


@pytest.mark.parametrize("kind,kw", [("lstm", {"num_layers": 2}), ("gru", {"bidirectional": True}),
                                     ("tanh", {"batch_first": True})])
def test_both_kernel_paths_give_the_same_results(kind, kw):
    """The C ABI path and torch's Python API path: the same bits and the same errors."""
    first = rt.kernel_path()
    try:
        rt._use_abi(True)
        a, ea = _runs(kind, **kw)
        assert not rt._use_abi(False) and rt.kernel_path() == "python-api"
        b, eb = _runs(kind, **kw)
    finally:
        rt._use_abi(first == "stable-abi")
    assert rt.kernel_path() == first
    assert len(a) == len(b) and all(torch.equal(u, v) for u, v in zip(a, b))
    assert ea == eb


# ---- rnncore.torch.Stack: layers that differ, TF's wrappers ----

STACK = {"input_size": 6, "layers": [{"mode": "lstm", "hidden_size": 8, "direction": "bidirectional"},
                                     {"mode": "gru", "hidden_size": 5}]}


def _stack_and_reference():
    torch.manual_seed(11)
    ours = rt.Stack(STACK)
    l0, l1 = torch.nn.LSTM(6, 8, bidirectional=True), torch.nn.GRU(16, 5)
    with torch.no_grad():
        for name, p in ours.named_parameters():
            layer, key = (l1, name.replace("_l1", "_l0")) if "_l1" in name else (l0, name)
            getattr(layer, key).copy_(p)
    return ours, l0, l1


def test_stack_of_differing_layers_equals_torch_nn_layers():
    ours, l0, l1 = _stack_and_reference()
    x = torch.randn(7, 3, 6, requires_grad=True)
    out, (h, c) = ours(x)  # layer 0 is an LSTM: (h_n, c_n), flat here
    assert c.shape == h.shape == (3 * (8 + 8 + 5),)  # a slot for every layer and direction
    ref_mid, (h0, _) = l0(x)
    ref, h1 = l1(ref_mid)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    # flat states: layer 0 forward, layer 0 reverse, layer 1, each [B, H]
    torch.testing.assert_close(h, torch.cat([h0[0].flatten(), h0[1].flatten(), h1[0].flatten()]), atol=1e-5, rtol=0)
    out.square().sum().backward()
    (ref.square().sum()).backward()
    ref_grads = {**{n: p.grad for n, p in l0.named_parameters()},
                 **{n.replace("_l0", "_l1"): p.grad for n, p in l1.named_parameters()}}
    for name, p in ours.named_parameters():
        g = ref_grads[name]
        torch.testing.assert_close(p.grad, g, atol=2e-4 * g.abs().max().item(), rtol=0)


def test_stack_with_dropout_wrapper_replays_and_equals_the_numpy_api(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    cfg = {"input_size": 6, "dropout": 0.2,
           "layers": [{"mode": "lstm", "hidden_size": 8,
                       "wrappers": [{"type": "dropout", "output_keep": 0.7, "state_keep": 0.8, "variational": True}]},
                      {"mode": "lstm", "hidden_size": 8, "wrappers": [{"type": "residual"}]}]}
    torch.manual_seed(2)
    ours = rt.Stack(cfg, seed=9).train()
    x = torch.randn(5, 2, 6)
    with torch.no_grad():
        ours.step = 4
        y1, _ = ours(x)
        assert ours.step == 5
        ours.step = 4
        y2, _ = ours(x)
        torch.testing.assert_close(y1, y2, atol=0, rtol=0)  # replayed from (seed, step)
        y3, _ = ours(x)
        assert not torch.equal(y2, y3)  # the next step's masks
        ours.eval()
        y_eval, _ = ours(x)
    st.save_file({"lstm." + k: v.detach().contiguous() for k, v in ours.state_dict().items()}, str(tmp_path / "s.safetensors"))
    m = rnncore.load(tmp_path / "s.safetensors", config=cfg, training=True)
    np.testing.assert_array_equal(m.run(x.numpy(), train=True, seed=9, step=4)[0], y1.numpy())
    np.testing.assert_array_equal(m.run(x.numpy())[0], y_eval.numpy())


def test_stack_compiles_without_graph_breaks():
    ours, _, _ = _stack_and_reference()
    x = torch.randn(4, 2, 6)
    compiled = torch.compile(ours, fullgraph=True)
    out, (h, _) = compiled(x)
    torch.testing.assert_close(out, ours(x)[0], atol=0, rtol=0)
    assert h.shape == (2 * (8 + 8 + 5),)


def test_stack_needs_an_input_size():
    with pytest.raises(rnncore.ArgumentError, match="input_size"):
        rt.Stack({"layers": [{"mode": "lstm", "hidden_size": 4}]})


def test_threads_beside_spinning_openmp_workers_warn_once(monkeypatch):
    # More threads than cores between torch's OpenMP workers and the module's: one RuntimeWarning that
    # names the fix; none with OMP_WAIT_POLICY set, with threads=1, or a second time.
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        pytest.skip("torch without OpenMP")
    cores = len(os.sched_getaffinity(0))
    for var in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: cores)
    monkeypatch.setattr(rt, "_contention_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt.LSTM(3, 4, threads=1)
    with pytest.warns(RuntimeWarning, match="fewer threads, or try OMP_WAIT_POLICY=PASSIVE"):
        rt.GRU(3, 4, threads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt.GRU(3, 4, threads=2)  # once
        monkeypatch.setattr(rt, "_contention_warned", False)
        monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
        rt.LSTM(3, 4, threads=2)

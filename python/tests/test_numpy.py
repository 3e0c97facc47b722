"""The NumPy API: rnncore.info, rnncore.load, Model.run / grad / stream, errors. No PyTorch needed."""

import pathlib

import numpy as np
import pytest

import rnncore

MODELS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "models"


def small(**kw):
    return rnncore.load(MODELS / "lstm_small.safetensors", **kw)


def test_info_reports_what_rnncore_info_does():
    i = rnncore.info()
    assert i["version"] == rnncore.__version__ == "0.1.0"
    assert i["backends"][0].startswith("reference")
    assert i["kernels"]["f64"] == "f64_rnn__reference"
    assert i["kernels"]["f32"].startswith("f32_rnn")
    assert i["kernels"]["int8"].startswith("i8_dot_")  # the integer LSTM's: "i8_dot_4x16__avx2 + ..."
    assert isinstance(i["isas"], list) and isinstance(i["threads"], bool)


def test_run_equals_the_pytorch_golden():
    m = small()
    assert (m.mode, m.format, m.num_layers, m.hidden_sizes, m.input_size) == ("lstm", "pytorch", 2, [32, 32], 16)
    x = np.load(MODELS / "lstm_small_input.npy")
    y, h, c = m.run(x)
    np.testing.assert_allclose(y, np.load(MODELS / "lstm_small_expected_y.npy"), atol=1e-5, rtol=0)
    np.testing.assert_allclose(h, np.load(MODELS / "lstm_small_expected_hn.npy"), atol=1e-5, rtol=0)
    np.testing.assert_allclose(c, np.load(MODELS / "lstm_small_expected_cn.npy"), atol=1e-5, rtol=0)


def test_layouts_lengths_states_and_copies():
    m = small()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 3, 16), dtype=np.float32)
    y, h, c = m.run(x)
    yb, hb, cb = m.run(np.ascontiguousarray(x.transpose(1, 0, 2)), batch_first=True)
    np.testing.assert_array_equal(yb.transpose(1, 0, 2), y)
    np.testing.assert_array_equal(hb, h)
    # A float64 or non-contiguous input is converted: the same result.
    np.testing.assert_array_equal(m.run(x.astype(np.float64))[0], y)
    np.testing.assert_array_equal(m.run(np.asfortranarray(x))[0], y)
    # Lengths: a row of length 4 equals that row run alone for 4 steps; zeros after.
    y2, h2, _ = m.run(x, lengths=np.array([7, 4, 0]))
    y1, h1, _ = m.run(x[:4, 1:2])
    np.testing.assert_array_equal(y2[:4, 1:2], y1)
    np.testing.assert_array_equal(h2[:, 1:2], h1)
    assert not y2[4:, 1].any() and not y2[:, 2].any()
    # Initial states are used.
    h0 = rng.standard_normal(h.shape, dtype=np.float32)
    assert not np.array_equal(m.run(x, h0=h0)[0], y)


def test_stream_equals_one_run():
    m = small()
    x = np.random.default_rng(2).standard_normal((9, 2, 16), dtype=np.float32)
    y, h, c = m.run(x)
    parts = [m.stream(x[a:b])[0] for a, b in ((0, 1), (1, 5), (5, 9))]
    np.testing.assert_array_equal(np.concatenate(parts), y)
    np.testing.assert_array_equal(m.stream(x[:0 + 1])[1], m.run(x[:1], h0=h, c0=c)[1])
    m.reset()
    np.testing.assert_array_equal(m.stream(x)[0], y)


def test_dropout_is_reproducible_from_seed_and_step():
    m = rnncore.load(MODELS / "lstm_small.safetensors", training=True)
    x = np.random.default_rng(3).standard_normal((5, 2, 16), dtype=np.float32)
    # The file's model has no dropout: a training run equals inference.
    np.testing.assert_array_equal(m.run(x, train=True, seed=1, step=2)[0], m.run(x)[0])


def test_grad_matches_finite_differences():
    m = small(training=True, dtype="float64")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 2, 16))
    dy = rng.standard_normal((4, 2, 32))
    g = m.grad(x, dy=dy)
    assert g["dx"].shape == x.shape and g["dc0"].shape == (2, 2, 32)
    assert set(g["weights"]) == set(m.weights())
    eps = 1e-6
    for (t, b, i) in ((0, 0, 0), (3, 1, 5), (1, 0, 15)):
        xp, xm = x.copy(), x.copy()
        xp[t, b, i] += eps
        xm[t, b, i] -= eps
        fd = ((m.run(xp)[0] * dy).sum() - (m.run(xm)[0] * dy).sum()) / (2 * eps)
        assert abs(fd - g["dx"][t, b, i]) < 1e-6 * max(1.0, abs(fd))
    name = "lstm.weight_hh_l1"
    w = m.weights()
    wp = {name: w[name].copy()}
    wp[name][3, 7] += eps
    m.set_weights(wp)
    up = (m.run(x)[0] * dy).sum()
    wp[name][3, 7] -= 2 * eps
    m.set_weights(wp)
    down = (m.run(x)[0] * dy).sum()
    fd = (up - down) / (2 * eps)
    assert abs(fd - g["weights"][name][3, 7]) < 1e-6 * max(1.0, abs(fd))


def test_grad_without_dx():
    """need_dx=False: dx is None, every other gradient the same bit for bit."""
    m = small(training=True)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 3, 16), dtype=np.float32)
    dy = rng.standard_normal((5, 3, 32), dtype=np.float32)
    full, part = m.grad(x, dy=dy), m.grad(x, dy=dy, need_dx=False)
    assert full["dx"] is not None and part["dx"] is None
    for k in ("y", "h", "c", "dh0", "dc0"):
        np.testing.assert_array_equal(full[k], part[k])
    for k, v in full["weights"].items():
        np.testing.assert_array_equal(v, part["weights"][k])


def test_weights_round_trip():
    m = small()
    w = m.weights()
    x = np.random.default_rng(5).standard_normal((3, 1, 16), dtype=np.float32)
    y = m.run(x)[0]
    m.set_weights({k: np.zeros_like(v) for k, v in w.items()})
    assert not m.run(x)[0].any()
    m.set_weights(w)
    np.testing.assert_array_equal(m.run(x)[0], y)


@pytest.mark.parametrize("call, match", [
    (lambda m: m.run(np.zeros((5, 2, 15), np.float32)), r"x: shape \[5, 2, 15\], expected \[T, B, 16\]"),
    (lambda m: m.run(np.zeros((5, 2), np.float32)), r"x: shape \[5, 2\]"),
    (lambda m: m.run(np.zeros((5, 2, 16), np.int32)), r"x: dtype int32, expected a floating-point array"),
    (lambda m: m.run(np.zeros((5, 2, 16), np.float32), h0=np.zeros((2, 3, 32), np.float32)),
     r"h0: shape \[2, 3, 32\], expected \[2, 2, 32\]"),
    (lambda m: m.run(np.zeros((5, 2, 16), np.float32), lengths=np.array([6, 1])), r"lengths"),
    (lambda m: m.run(np.zeros((5, 2, 16), np.float32), lengths=np.array([1.0, 1.0])), r"lengths: expected an integer"),
    (lambda m: m.run(np.zeros((0, 2, 16), np.float32)), r"at least 1"),
    (lambda m: m.set_weights({"nope": np.zeros(3)}), r"nope: not a weight"),
    (lambda m: m.set_weights({"lstm.weight_hh_l0": np.zeros((3, 3))}), r"weight_hh_l0"),
])
def test_bad_arguments_raise_value_errors(call, match):
    with pytest.raises(ValueError, match=match) as e:
        call(small())
    assert isinstance(e.value, rnncore.ArgumentError)


@pytest.mark.parametrize("weight_dtype, tol", [("f16", 2e-3), ("bf16", 2e-2)])
def test_weight_storage(weight_dtype, tol):
    """weight_dtype="f16" / "bf16": the packed weights rounded to that storage (SIMD backend): the output
    within the storage's error of the f32 model's, and not equal to it (the rounding took place)."""
    if rnncore.info()["kernels"][weight_dtype] is None:
        pytest.skip(f"no {weight_dtype} weight storage in this build")
    x = np.load(MODELS / "lstm_small_input.npy")
    want = small().run(x)[0]
    m = rnncore.load(MODELS / "lstm_small.safetensors", weight_dtype=weight_dtype)
    assert m.weight_dtype == weight_dtype and small().weight_dtype == "f32"
    err = np.abs(m.run(x)[0] - want).max() / np.abs(want).max()
    assert 1e-6 < err < tol
    with pytest.raises(rnncore.ArgumentError, match="weight_dtype 'f8': expected f32, bf16 or f16"):
        rnncore.load(MODELS / "lstm_small.safetensors", weight_dtype="f8")
    with pytest.raises(rnncore.Error):  # the reference backend keeps f32 weights
        rnncore.load(MODELS / "lstm_small.safetensors", weight_dtype=weight_dtype, backend="reference")


def test_errors_carry_the_status():
    with pytest.raises(rnncore.ArgumentError) as e:
        small().run(np.zeros((5, 2, 15), np.float32))
    assert e.value.status == "a size is zero, negative or too large"


def test_failures_raise_runtime_errors(tmp_path):
    with pytest.raises(RuntimeError, match="cannot open"):
        rnncore.load(tmp_path / "missing.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x03\x00\x00\x00\x00\x00\x00\x00abc")
    with pytest.raises(rnncore.Error):
        rnncore.load(tmp_path / "bad.safetensors")
    with pytest.raises(RuntimeError, match="training=True"):
        small().grad(np.zeros((2, 1, 16), np.float32))


def test_threads_run_at_once_with_the_same_results():
    import threading
    m = small()
    xs = [np.random.default_rng(10 + i).standard_normal((20, 4, 16), dtype=np.float32) for i in range(4)]
    want = [m.run(x)[0] for x in xs]
    got = [None] * 4

    def work(i):
        for _ in range(5):
            got[i] = m.run(xs[i])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)


def test_stack_config_with_wrappers():
    """config= (docs/config.md), as `rnncore run --config`: TF's DropoutWrapper and ResidualWrapper."""
    plain = {"layers": [{"mode": "lstm", "hidden_size": 32}, {"mode": "lstm", "hidden_size": 32}]}
    x = np.random.default_rng(6).standard_normal((6, 3, 16), dtype=np.float32)
    np.testing.assert_array_equal(small(config=plain).run(x)[0], small().run(x)[0])
    wrapped = {"layers": [{"mode": "lstm", "hidden_size": 32},
                          {"mode": "lstm", "hidden_size": 32,
                           "wrappers": [{"type": "dropout", "output_keep": 0.75}, {"type": "residual"}]}]}
    m = small(config=wrapped, training=True)
    # Inference: no dropout; the residual adds layer 1's input (layer 0's output) to its output.
    w = small().weights()
    layer0 = rnncore._core.Net("lstm", 16, 32)  # the file's layer 0 alone
    layer0.set_weights([w["lstm." + name] for name, _, _ in layer0.tensors()])
    y0 = rnncore.Model(layer0).run(x)[0]
    plain_y = small().run(x)[0]
    np.testing.assert_allclose(m.run(x)[0], plain_y + y0, atol=1e-6)
    # Training: output dropout zeroes about a quarter of layer 1's outputs before the residual.
    y1 = m.run(x, train=True, seed=3, step=1)[0]
    np.testing.assert_array_equal(y1, m.run(x, train=True, seed=3, step=1)[0])
    dropped = np.isclose(y1, y0, atol=1e-7).mean()
    assert 0.15 < dropped < 0.35
    g = m.grad(x, dy=np.ones_like(y1), train=True, seed=3, step=1)
    np.testing.assert_allclose(g["y"], y1, atol=1e-6)  # the training forward: batched products
    with pytest.raises(rnncore.Error, match=r"config:1:\d+: unknown key 'typo'"):
        small(config={"layers": [{"mode": "lstm", "hidden_size": 32, "typo": 1}]})


def test_thread_count_gives_the_same_bits():
    x = np.random.default_rng(7).standard_normal((12, 5, 16), dtype=np.float32)
    y1, h1, c1 = small().run(x)
    y2, h2, c2 = small(threads=2).run(x)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(c1, c2)

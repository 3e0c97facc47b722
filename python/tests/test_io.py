"""rnncore.quantize and rnncore.export_c (io::quantize, io::export_c), and a PyTorch LSTM + Linear file
whose head rnncore.load runs."""

import pathlib

import numpy as np
import pytest

import rnncore

MODELS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "models"
SMALL = MODELS / "lstm_small.safetensors"


def test_quantize_writes_an_int8_model_and_reports_its_accuracy(tmp_path):
    x = np.load(MODELS / "lstm_small_input.npy")  # [T=50, B=4, I=16]
    np.save(tmp_path / "eval.npy", x[:, :2])
    r = rnncore.quantize(SMALL, x, tmp_path / "q.safetensors", eval=tmp_path / "eval.npy", per_channel=True)
    assert (tmp_path / "q.safetensors").stat().st_size > 0
    assert "input 16, hidden 32, 32" in r["model"] and "tflite_int8" in r["written"]
    assert len(r["quantization"]) == 4  # two lines per layer and direction
    acc = r["calibration_accuracy"]
    assert acc["shape"] == (50, 4, 32) and acc["values"] == 50 * 4 * 32
    # The int8 model follows the float one closely on this data: 8-bit outputs, error well under 1%.
    assert 0 < acc["max_abs"] < 0.01 * acc["range"] and acc["snr_db"] > 30
    assert r["eval_accuracy"]["shape"] == (50, 2, 32)


def test_quantize_errors_raise_with_the_detail(tmp_path):
    x = np.load(MODELS / "lstm_small_input.npy")
    with pytest.raises(rnncore.ArgumentError, match="carry-state 3 does not divide the calibration's 4 rows"):
        rnncore.quantize(SMALL, x, tmp_path / "q.safetensors", carry_state=3)
    with pytest.raises(rnncore.Error, match=r"expected shape \[T, B, 16\].*found \[50, 4, 5\]"):
        rnncore.quantize(SMALL, x[..., :5], tmp_path / "q.safetensors")
    assert not (tmp_path / "q.safetensors").exists()
    with pytest.raises(rnncore.Error, match="nothing.safetensors"):
        rnncore.quantize(tmp_path / "nothing.safetensors", x, tmp_path / "q.safetensors")


def test_export_c_float_and_int8(tmp_path):
    x = np.load(MODELS / "lstm_small_input.npy")
    text = rnncore.export_c(SMALL, tmp_path / "small.h", sample_input=x[:3, :1])
    assert (tmp_path / "small.h").read_text() == text
    assert text.startswith("/* small.h: ")
    assert "small_packed" in text and "small_spec" in text and "small_sample_input" in text
    # Deterministic: the same model and options give the same bytes; no output path: not written.
    assert rnncore.export_c(SMALL, name="small", max_batch=1, max_seq_len=3) == rnncore.export_c(
        SMALL, name="small", max_batch=1, max_seq_len=3)
    rnncore.quantize(SMALL, x, tmp_path / "q.safetensors")
    q = rnncore.export_c(tmp_path / "q.safetensors", name="q", interleave=True)
    assert "rnncore/int8.h" in q and "q_l0_quantization" in q and "q_l1_folded_bias" in q
    with pytest.raises(rnncore.ArgumentError):
        rnncore.export_c(SMALL, name="bad name")
    with pytest.raises(rnncore.Error, match="missing.safetensors"):
        rnncore.export_c(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("bidirectional", [False, True])
def test_load_runs_a_pytorch_linear_head(tmp_path, bidirectional):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(5, 8, num_layers=2, bidirectional=bidirectional)
    fc = torch.nn.Linear(16 if bidirectional else 8, 3)
    tensors = {f"lstm.{k}": v for k, v in lstm.state_dict().items()}
    tensors.update({f"fc.{k}": v for k, v in fc.state_dict().items()})
    st.save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp_path / "m.safetensors"))
    m = rnncore.load(tmp_path / "m.safetensors")
    assert any("Linear head 'fc.weight' [3, " in n for n in m.notes)
    x = torch.randn(7, 4, 5)
    y, h, c = m.run(x.numpy())
    with torch.no_grad():
        out, (hn, cn) = lstm(x)
        ref = fc(out)
    assert y.shape == (7, 4, 3)
    np.testing.assert_allclose(y, ref.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(h, hn.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(c, cn.numpy(), atol=1e-5, rtol=0)


def test_load_runs_a_last_step_softmax_head_of_the_golden():
    golden = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "pytorch_head"
    path = golden / "bilstm_linear_last_step_softmax.safetensors"
    st = pytest.importorskip("safetensors.numpy")
    data = st.load_file(str(path))
    m = rnncore.load(path)
    y, _, _ = m.run(data["input"])
    assert y.shape == data["expected.y"].shape  # [B, F]: the last step only
    np.testing.assert_allclose(y, data["expected.y"], atol=1e-5, rtol=0)


# ---- int8 model files: rnncore.load -> rnncore.Int8Model (io::Int8Runner, as `rnncore run`) ----

MCU = MODELS.parents[1] / "bench" / "mcu_models"


@pytest.mark.parametrize("path, x, expected", [
    (MODELS / "lstm_int8.safetensors", MODELS / "lstm_int8_input.npy", MODELS / "lstm_int8_expected_y.npy"),
    # an Embedding (token ids), two Bidirectional LSTMs, a Dense head with a sigmoid table
    (MCU / "bidi.safetensors", MCU / "bidi_input.npy", MCU / "bidi_expected_y.npy"),
    # a Dense head on every step
    (MCU / "weather.safetensors", MCU / "weather_input.npy", MCU / "weather_expected_y.npy"),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_int8_model_equals_litert(path, x, expected, threads):
    q = rnncore.load(path, threads=threads)  # threads: the rows on the planned Model's threads
    assert isinstance(q, rnncore.Int8Model)
    y, h, c = q.run(np.load(x))
    assert y.dtype == np.int8 and h.dtype == np.int8 and c.dtype == np.int16
    np.testing.assert_array_equal(y, np.load(expected))  # LiteRT's output, bit for bit


def test_int8_model_states_float_input_and_dequantize():
    q = rnncore.load(MODELS / "lstm_int8.safetensors")
    x = np.load(MODELS / "lstm_int8_input.npy")
    y, h, c = q.run(x)
    assert h.shape == c.shape == q.state_shape(4) == (4, 32)
    np.testing.assert_array_equal(h, y[:, -1])
    y1, h1, c1 = q.run(x[:, :20])  # carried across two calls: the same bits
    y2, h2, c2 = q.run(x[:, 20:], h1, c1)
    np.testing.assert_array_equal(np.concatenate([y1, y2], 1), y)
    np.testing.assert_array_equal(c2, c)
    scale, zp = q.output_quantization
    np.testing.assert_array_equal(q.dequantize(y), (y.astype(np.float32) - zp) * np.float32(scale))
    xf = (x.astype(np.float32) + 0.25) * 0.03  # float input: quantized as TFLite's QUANTIZE op first
    np.testing.assert_array_equal(q.run(xf)[0], q.run(q.quantize_input(xf))[0])


def test_quantized_model_runs_on_the_host(tmp_path):
    x = np.load(MODELS / "lstm_small_input.npy")  # [T, B, I]
    r = rnncore.quantize(SMALL, x, tmp_path / "q.safetensors")
    q = rnncore.load(tmp_path / "q.safetensors")
    y_float = rnncore.load(SMALL).run(x)[0]
    y = q.dequantize(q.run(np.ascontiguousarray(x.transpose(1, 0, 2)))[0]).transpose(1, 0, 2)
    snr = 10 * np.log10(np.sum(y_float.astype(np.float64) ** 2) / np.sum((y_float - y).astype(np.float64) ** 2))
    assert abs(snr - r["calibration_accuracy"]["snr_db"]) < 0.05  # the report's error is this run's


@pytest.mark.parametrize("call, match", [
    (lambda q: q.run(np.zeros((2, 3, 5), np.int8)), r"expected shape \[B, T, 16\]"),
    (lambda q: q.run(np.zeros((2, 3), np.int64)), "expected int8 or floating-point input"),
    (lambda q: q.run(np.zeros((2, 0, 16), np.int8)), "at least one row and one step"),
    (lambda q: q.run(np.zeros((2, 3, 16), np.int8), h0=np.zeros((2, 32), np.int16)), "h0: expected int8"),
    (lambda q: q.run(np.zeros((2, 3, 16), np.int8), c0=np.zeros((3, 32), np.int16)), r"c0: expected int16 \[2, 32\]"),
    (lambda q: q.run(np.zeros((2, 3, 16), np.int8), h0=np.zeros((32, 2), np.int8)), r"h0: expected int8 \[2, 32\]"),
])
def test_int8_model_bad_inputs(call, match):
    with pytest.raises(rnncore.ArgumentError, match=match):
        call(rnncore.load(MODELS / "lstm_int8.safetensors"))


def test_int8_model_refuses_float_options():
    with pytest.raises(rnncore.ArgumentError, match="training= does not apply"):
        rnncore.load(MODELS / "lstm_int8.safetensors", training=True)
    with pytest.raises(rnncore.ArgumentError, match="token ids"):
        rnncore.load(MCU / "bidi.safetensors").run(np.zeros((1, 16, 4), np.int8))


class _Tagger:
    """A network of torch modules: Embedding, recurrent layers, Linear (built lazily: torch is optional)."""

    @staticmethod
    def make(torch, kind, bidirectional):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(11, 6)
                rnn = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_relu": torch.nn.RNN}[kind]
                extra = {"nonlinearity": "relu"} if kind == "rnn_relu" else {}
                self.rnn = rnn(6, 8, num_layers=2, bidirectional=bidirectional, **extra)
                self.drop = torch.nn.Dropout(0.1)
                self.out = torch.nn.Linear(16 if bidirectional else 8, 5)

            def forward(self, ids):  # ids [T, B]
                y, _ = self.rnn(self.embed(ids))
                return self.out(self.drop(y))
        return Net()


@pytest.mark.parametrize("kind, bidirectional", [("lstm", False), ("gru", True), ("rnn_relu", False)])
def test_load_a_network_with_embedding_and_head(kind, bidirectional):
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    net = _Tagger.make(torch, kind, bidirectional).eval()
    m = rnncore.load(net)
    assert m.vocab_size == 11 and m.head == (5, "none", False) and m.mode == kind
    ids = torch.randint(0, 11, (9, 3))
    y, h, _ = m.run(ids.numpy())
    with torch.no_grad():
        ref = net(ids)
    assert y.shape == (9, 3, 5)
    np.testing.assert_allclose(y, ref.numpy(), atol=1e-5, rtol=0)
    # the last step only, with a softmax; batch-major ids; int32 ids too
    m = rnncore.load(net, head_activation="softmax", head_last_step=True)
    y, _, _ = m.run(ids.numpy().T.astype(np.int32).copy(), batch_first=True)
    with torch.no_grad():  # each direction's last step: the forward's at T-1, the backward's at 0 (Keras')
        out = net.rnn(net.embed(ids))[0]
        last = torch.cat([out[-1, :, :8], out[0, :, 8:]], -1) if bidirectional else out[-1]
        last = torch.softmax(net.out(last), -1)
    np.testing.assert_allclose(y, last.numpy(), atol=1e-6, rtol=0)


def test_embedding_inputs_are_checked():
    torch = pytest.importorskip("torch")
    m = rnncore.load(_Tagger.make(torch, "lstm", False))
    with pytest.raises(rnncore.ArgumentError, match=r"token id 11 at \[1, 0\] is outside the embedding's vocabulary"):
        m.run(np.array([[0, 1], [11, 2]]))
    with pytest.raises(rnncore.ArgumentError, match="expected integer token ids"):
        m.run(np.zeros((2, 3, 6), np.float32))
    with pytest.raises(rnncore.ArgumentError, match=r"expected \[T, B\]"):
        m.run(np.zeros((2, 3, 6), np.int64))


def test_load_refuses_networks_it_cannot_run():
    torch = pytest.importorskip("torch")
    two = torch.nn.Sequential(torch.nn.LSTM(3, 4), torch.nn.LSTM(4, 4))
    with pytest.raises(rnncore.ArgumentError, match="2 recurrent module"):
        rnncore.load(two)
    conv = torch.nn.Sequential(torch.nn.Conv1d(3, 3, 1), torch.nn.LSTM(3, 4))
    with pytest.raises(rnncore.ArgumentError, match="is a Conv1d"):
        rnncore.load(conv)
    with pytest.raises(rnncore.ArgumentError, match="not to a single recurrent module"):
        rnncore.load(torch.nn.LSTM(3, 4), head_last_step=True)

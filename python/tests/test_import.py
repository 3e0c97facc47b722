"""Models in from other frameworks: a torch.nn module, an .onnx file (against onnxruntime)."""

import numpy as np
import pytest

import rnncore


def test_from_torch_module():
    torch = pytest.importorskip("torch")
    for ref in (torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True), torch.nn.GRU(4, 5, bias=False),
                torch.nn.RNN(4, 3, nonlinearity="relu", num_layers=3)):
        m = rnncore.load(ref)
        x = torch.randn(7, 2, 4)
        with torch.no_grad():
            y_ref = ref(x)[0].numpy()
        np.testing.assert_allclose(m.run(x.numpy())[0], y_ref, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="Linear"):
        rnncore.load(type("Linear", (), {"state_dict": None, "hidden_size": 1})())


def onnx_stack(op, layers, directions, input_size, hidden, seed, linear_before_reset=0, activations=None):
    """A graph of `layers` recurrent nodes, each layer's Y [T, D, B, H] reshaped into the next one's X."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    nodes, inits = [], []
    x_name, width = "x", input_size
    for l in range(layers):
        w = rng.uniform(-0.5, 0.5, (directions, g * hidden, width)).astype(np.float32)
        r = rng.uniform(-0.5, 0.5, (directions, g * hidden, hidden)).astype(np.float32)
        b = rng.uniform(-0.5, 0.5, (directions, 2 * g * hidden)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{l}"), numpy_helper.from_array(r, f"R{l}"),
                  numpy_helper.from_array(b, f"B{l}")]
        attrs = dict(hidden_size=hidden, direction="bidirectional" if directions == 2 else "forward")
        if op == "GRU":
            attrs["linear_before_reset"] = linear_before_reset
        if activations:
            attrs["activations"] = activations * directions
        nodes.append(helper.make_node(op, [x_name, f"W{l}", f"R{l}", f"B{l}"], [f"y{l}"], name=f"rnn{l}", **attrs))
        nodes.append(helper.make_node("Transpose", [f"y{l}"], [f"t{l}"], perm=[0, 2, 1, 3]))
        inits.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), f"shape{l}"))
        nodes.append(helper.make_node("Reshape", [f"t{l}", f"shape{l}"], [f"o{l}"]))
        x_name, width = f"o{l}", directions * hidden
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op, layers, directions, extra", [
    ("LSTM", 1, 1, {}), ("LSTM", 2, 2, {}), ("GRU", 2, 1, {"linear_before_reset": 1}),
    ("GRU", 1, 2, {"linear_before_reset": 0}), ("RNN", 3, 1, {}), ("RNN", 1, 2, {"activations": ["Relu"]}),
])
def test_onnx_file_against_onnxruntime(tmp_path, op, layers, directions, extra):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    model = onnx_stack(op, layers, directions, 5, 6, seed=layers * 10 + directions, **extra)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.random.default_rng(3).standard_normal((7, 3, 5), dtype=np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    m = rnncore.load(path)
    assert m.format == "onnx" and m.num_layers == layers and m.bidirectional == (directions == 2)
    np.testing.assert_allclose(m.run(x)[0], want, atol=1e-5, rtol=0)


def test_onnx_refusals(tmp_path):
    onnx = pytest.importorskip("onnx")
    model = onnx_stack("LSTM", 1, 1, 3, 4, seed=1)
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("clip", 3.0))
    onnx.save(model, str(tmp_path / "clip.onnx"))
    with pytest.raises(ValueError, match="clip"):
        rnncore.load(tmp_path / "clip.onnx")
    empty = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    onnx.save(empty, str(tmp_path / "empty.onnx"))
    with pytest.raises(ValueError, match="no LSTM, GRU or RNN node"):
        rnncore.load(tmp_path / "empty.onnx")

"""Model.grad through an Embedding and a Dense / Linear head (docs/training.md "Embedding and Dense
head"), against PyTorch autograd on the network the model was loaded from."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import rnncore  # noqa: E402

GRAD_TOL = 2e-4


class Tagger(nn.Module):
    """Embedding -> LSTM -> Linear on every step."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 4)
        self.rnn = nn.LSTM(4, 5, num_layers=2)
        self.fc = nn.Linear(5, 3)

    def forward(self, ids):
        return self.fc(self.rnn(self.emb(ids))[0])


class Classifier(nn.Module):
    """Bidirectional GRU -> Linear on each row's last step -> softmax (batch-first)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = self.rnn(x)[0]
        last = torch.cat([y[:, -1, :4], y[:, 0, 4:]], dim=1)  # forward's step T-1, reverse's step 0 (Keras')
        return torch.softmax(self.fc(last), dim=1)


# The model's names for the ends (Model.ends) and the network's.
RENAME = {"embedding.weight": "emb.weight", "head.weight": "fc.weight", "head.bias": "fc.bias"}


def check(net, m, x, want_y, y, g, dy, inputs):
    assert np.abs(want_y.detach().numpy() - y).max() <= 1e-5
    params = dict(net.named_parameters())
    got = {RENAME.get(k, k.replace("rnn.", "rnn.", 1)): v for k, v in g["weights"].items()}
    assert set(got) == set(params)
    names = list(params)
    ref = torch.autograd.grad(want_y, inputs + [params[n] for n in names], torch.from_numpy(dy))
    if inputs:
        a = ref[0].numpy()
        assert np.abs(a - g["dx"]).max() <= GRAD_TOL * np.abs(a).max()
    for n, a in zip(names, ref[len(inputs):]):
        a = a.numpy()
        err = np.abs(a - got[n]).max() / max(np.abs(a).max(), 1e-30)
        assert err <= GRAD_TOL, f"{n}: gradient differs by {err:.2e} of its largest magnitude"


def test_embedding_and_head_gradients_match_pytorch():
    torch.manual_seed(0)
    net = Tagger()
    m = rnncore.load(net, training=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 11, (6, 2)).astype(np.int32)
    ids[0, 0] = ids[4, 1] = 3  # a token seen twice: its row sums both
    y, _, _ = m.run(ids)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    g = m.grad(ids, dy=dy)
    assert g["dx"] is None  # token ids have no gradient; the table's is in weights
    check(net, m, ids, net(torch.from_numpy(ids).long()), y, g, dy, [])


def test_last_step_softmax_head_gradients_match_pytorch():
    torch.manual_seed(1)
    net = Classifier()
    m = rnncore.load(net, training=True, head_last_step=True, head_activation="softmax")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7, 3)).astype(np.float32)  # [B, T, I]
    y, _, _ = m.run(x, batch_first=True)
    assert y.shape == (3, 5)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    g = m.grad(x, dy=dy, batch_first=True)
    xt = torch.from_numpy(x).requires_grad_()
    check(net, m, x, net(xt), y, g, dy, [xt])

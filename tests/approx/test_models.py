"""MLP / GLU containers and the Approximant dataclass."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from polyinterp.approx import GLU, MLP, Approximant
from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64


@pytest.mark.parametrize("act,name", [(nn.ReLU(), "relu"), (nn.GELU(), "gelu"), (nn.GELU("tanh"), "gelu_tanh"),
                                      (nn.Tanh(), "tanh"), (nn.SiLU(), "silu"), (nn.Sigmoid(), "sigmoid")])
def test_from_module_matches_module(act, name):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 7), act, nn.Linear(7, 3))
    mlp = MLP.from_module(net)
    assert mlp.activation.name == name and mlp.dtype == DT and (mlp.d, mlp.h, mlp.o) == (5, 7, 3)
    x = torch.randn(11, 5)
    torch.testing.assert_close(mlp(x), net.double()(x.double()), rtol=1e-12, atol=1e-12)


def test_from_module_rejects_other_architectures():
    with pytest.raises(ApproxInputError, match="nn.Sequential"):
        MLP.from_module(nn.Sequential(nn.Linear(3, 3), nn.ReLU()))
    with pytest.raises(ApproxInputError, match="unsupported activation module"):
        MLP.from_module(nn.Sequential(nn.Linear(3, 3), nn.Softplus(), nn.Linear(3, 1)))


def test_shape_errors():
    with pytest.raises(ApproxInputError, match="b1 has shape"):
        MLP(torch.zeros(4, 3), torch.zeros(5), torch.zeros(2, 4), torch.zeros(2))
    with pytest.raises(ApproxInputError, match="V has shape"):
        GLU(torch.zeros(4, 3), torch.zeros(4), torch.zeros(4, 2), torch.zeros(4), torch.zeros(2, 4), torch.zeros(2))


def test_affine_composition():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    M, c, x = r(4, 3), r(4), r(9, 3)
    for model in (MLP(r(6, 4), r(6), r(2, 6), r(2), "gelu"), GLU(r(6, 4), r(6), r(6, 4), r(6), r(2, 6), r(2), "tanh")):
        torch.testing.assert_close(model.affine(M, c)(x), model(c + x @ M.T), rtol=1e-12, atol=1e-12)
    ap = Approximant(r(2), r(2, 4), (lambda G: G + G.transpose(1, 2))(r(2, 4, 4)))
    torch.testing.assert_close(ap.compose(M, c)(x), ap(c + x @ M.T), rtol=1e-12, atol=1e-12)


def test_approximant_call_chunks_and_state_dict():
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    G = r(3, 5, 5)
    ap = Approximant(r(3), r(3, 5), G + G.transpose(1, 2), {"method": "x"})
    x = r(100, 5)
    naive = ap.alpha + x @ ap.beta.T + torch.einsum("ni,oij,nj->no", x, ap.gamma, x)
    torch.testing.assert_close(ap(x), naive, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ap(x, chunk_size=7), naive, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ap(x[0]), naive[0])
    back = Approximant.from_state_dict(ap.state_dict())
    assert torch.equal(back(x), ap(x)) and back.fit_info == {"method": "x"}
    lin = Approximant(ap.alpha, ap.beta)
    assert lin.degree == 1 and "gamma" not in lin.state_dict()
    torch.testing.assert_close(lin(x), ap.alpha + x @ ap.beta.T)
    torch.testing.assert_close(lin.quadratic()(x), lin(x))
    with pytest.raises(ApproxInputError, match="expects d = 5"):
        ap(r(2, 4))
    with pytest.raises(ApproxInputError, match="lacks"):
        Approximant.from_state_dict({"alpha": ap.alpha})

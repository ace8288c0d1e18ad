"""The one entry, approximate(): exact FVU against Monte Carlo (mixture and Gaussian), the quadratic under
N(0, I) against an independent derivation of the authors' closed form, frozen results that survive .to()
and a save and load, the models it reads and the ones it refuses."""

from __future__ import annotations

import dataclasses
import io
import math

import numpy as np
import pytest
import torch
from scipy import integrate

from polyinterp.approx import (FVU_DEFINITIONS, GLU, MLP, Approximation, GaussianMixture, approximate, as_model,
                               glu_from_linears)
from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64
D = 20


def _net(act, d=D, h=24, o=4, seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(d, h), act, torch.nn.Linear(h, o))
    with torch.no_grad():
        net[0].weight.mul_(1.5)
    return net


def _mixture(d=D, seed=1):
    g = torch.Generator().manual_seed(seed)
    means = 0.6 * torch.randn(3, d, generator=g, dtype=DT)
    A = torch.randn(3, d, d, generator=g, dtype=DT) / d ** 0.5
    covs = A @ A.transpose(1, 2) + 0.1 * torch.eye(d, dtype=DT)
    return GaussianMixture(torch.tensor([0.5, 0.3, 0.2], dtype=DT), means, covs)


def _monte_carlo(net, result, mix, n=10 ** 6, seed=3, definition="ours"):
    """The sampled FVU on n draws from ``mix``, the model and polynomial evaluated in chunks."""
    x = mix.sample(n, seed=seed)
    with torch.no_grad():
        f = torch.cat([net.double()(xc) for xc in x.split(2 ** 17)])
    return result.fvu(definition, x=x, f=f)


@pytest.fixture(scope="module")
def gelu_net():
    torch.set_num_threads(1)
    return _net(torch.nn.GELU())


@pytest.mark.parametrize("degree", [1, 2])
def test_exact_fvu_under_a_mixture_agrees_with_monte_carlo(gelu_net, degree):
    mix = _mixture()
    res = approximate(gelu_net, mix, degree=degree)
    for definition in FVU_DEFINITIONS:
        exact, mc = res.fvu(definition), _monte_carlo(gelu_net, res, mix, definition=definition)
        assert exact.route == "exact" and mc.route == "sampled" and mc.n == 10 ** 6
        assert abs(exact.value - mc.value) < 3 * mc.se, (degree, definition, exact, mc)
    assert res.fvu("flattened").value <= res.fvu("ours").value  # theirs is never above ours


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_exact_fvu_under_one_gaussian_agrees_with_monte_carlo(gelu_net, degree):
    mean = 0.3 * torch.ones(D, dtype=DT)
    A = torch.randn(D, D, generator=torch.Generator().manual_seed(7), dtype=DT) / D ** 0.5
    one = GaussianMixture.single(mean, A @ A.T + 0.2 * torch.eye(D, dtype=DT))
    res = approximate(gelu_net, one, degree=degree)
    exact, mc = res.fvu(), _monte_carlo(gelu_net, res, one)
    assert abs(exact.value - mc.value) < 3 * mc.se, (degree, exact, mc)


def test_the_cubic_on_principal_components_agrees_with_monte_carlo(gelu_net):
    mix = _mixture()
    res = approximate(gelu_net, mix, degree=3, components=6)
    exact, mc = res.fvu(), _monte_carlo(gelu_net, res, mix, n=2 * 10 ** 5)
    assert abs(exact.value - mc.value) < 3 * mc.se, (exact, mc)


# -- the quadratic under N(0, I), derived independently -----------------------------------------------------
def _normal_expectations(phi, s, b):
    """E[φ(s t + b) tᵏ], k = 0, 1, 2, t ~ N(0, 1), by adaptive quadrature split at the ReLU kink."""
    kink = -b / s
    out = []
    for k in range(3):
        fun = lambda t: phi(s * t + b) * t ** k * math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        out.append(sum(integrate.quad(fun, lo, hi, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
                       for lo, hi in ((-np.inf, kink), (kink, np.inf))))
    return out


def _authors_quadratic(net, phi):
    """Under x ~ N(0, I) the centred features x_i, x_i x_j (i < j) and x_i² − 1 are orthogonal, with
    variances 1, 1 and 2; each coefficient is E[f F] / E[F²] (the route of the authors' closed form).
    With w = |w| ŵ, t = ŵ·x and y = x − ŵ t independent of t: E[φ x_i] = ŵ_i E[φ t] and
    E[φ x_i x_j] = ŵ_iŵ_j E[φ t²] + (δ_ij − ŵ_iŵ_j) E[φ]."""
    W1, b1 = net[0].weight.detach().double().numpy(), net[0].bias.detach().double().numpy()
    W2, b2 = net[2].weight.detach().double().numpy(), net[2].bias.detach().double().numpy()
    h, d = W1.shape
    E = np.zeros((h, 3))
    s = np.linalg.norm(W1, axis=1)
    for i in range(h):
        E[i] = _normal_expectations(phi, s[i], b1[i])
    U = W1 / s[:, None]
    Ef = W2 @ E[:, 0] + b2
    Efx = W2 @ (E[:, 1, None] * U)  # [o, d]
    Efxx = np.einsum("oh,hij->oij", W2, E[:, 2, None, None] * U[:, :, None] * U[:, None, :]
                     + E[:, 0, None, None] * (np.eye(d)[None] - U[:, :, None] * U[:, None, :]))
    Efxx = Efxx + b2[:, None, None] * np.eye(d)  # the output bias: E[b2 x_i x_j] = b2 δ_ij
    diag = np.einsum("oii->oi", Efxx)
    c_sq = (diag - Ef[:, None]) / 2  # E[f (x_i² − 1)] / 2
    gamma = Efxx / 2  # off-diagonal: coefficient E[f x_i x_j] of x_i x_j, split over Γ_ij and Γ_ji
    idx = np.arange(d)
    gamma[:, idx, idx] = c_sq
    return Ef - c_sq.sum(1), Efx, gamma


@pytest.mark.parametrize("act, phi", [
    (torch.nn.GELU(), lambda y: 0.5 * y * math.erfc(-y / math.sqrt(2))),
    (torch.nn.ReLU(), lambda y: max(y, 0.0)),
])
def test_the_quadratic_under_a_standard_gaussian_is_the_authors_closed_form(act, phi):
    d = 6
    net = _net(act, d=d, h=10, o=3, seed=4)
    res = approximate(net, GaussianMixture.single(torch.zeros(d), torch.eye(d)), degree=2)
    alpha, beta, gamma = _authors_quadratic(net, phi)
    g = res.polynomial
    scale = max(np.abs(alpha).max(), np.abs(beta).max(), np.abs(gamma).max())
    for got, want in ((g.alpha, alpha), (g.beta, beta), (g.gamma, gamma)):
        assert np.abs(got.numpy() - want).max() < 1e-10 * scale


# -- frozen, moved, saved ---------------------------------------------------------------------------------
@pytest.mark.parametrize("degree, components, K", [(1, None, 3), (2, None, 3), (3, 4, 3), (3, None, 1)])
def test_results_are_frozen_and_keep_their_fvu_through_to_and_a_save(gelu_net, degree, components, K):
    mix = _mixture() if K == 3 else GaussianMixture.single(torch.zeros(D), torch.eye(D))
    res = approximate(gelu_net, mix, degree=degree, components=components)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.degree = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.polynomial.fit_info = {}
    with pytest.raises(TypeError):
        res.diagnostics["seconds"] = 0.0
    moved = res.to("cpu", torch.float32)
    assert moved.fvu().value == res.fvu().value
    buf = io.BytesIO()
    torch.save(res.state_dict(), buf)
    buf.seek(0)
    loaded = Approximation.from_state_dict(torch.load(buf, weights_only=False))
    for definition in FVU_DEFINITIONS:
        assert loaded.fvu(definition).value == res.fvu(definition).value
    x = mix.sample(50, seed=0)
    torch.testing.assert_close(loaded(x), res(x), rtol=0, atol=0)
    assert loaded.distribution.K == mix.K and dict(loaded.diagnostics) == dict(res.diagnostics)


def test_the_principal_component_polynomial_keeps_its_fvu_without_the_model(gelu_net):
    from polyinterp.approx import ReducedPolynomialApproximant

    g = approximate(gelu_net, _mixture(), degree=3, components=4).polynomial
    assert isinstance(g, ReducedPolynomialApproximant)
    assert g.to("cpu", torch.float32).fvu() == g.fvu()
    assert ReducedPolynomialApproximant.from_state_dict(g.state_dict()).fvu() == g.fvu()


# -- models -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", [torch.nn.ReLU(), torch.nn.GELU(), torch.nn.GELU(approximate="tanh"), torch.nn.Tanh(),
                                 torch.nn.Sigmoid(), torch.nn.SiLU(), torch.nn.Identity()])
def test_every_supported_activation_is_read_from_the_module(act):
    net = _net(act, d=5, h=7, o=2)
    x = torch.randn(9, 5, dtype=DT)
    model = as_model(net)
    assert isinstance(model, MLP)
    torch.testing.assert_close(model(x), net.double()(x))
    assert approximate(net, GaussianMixture.single(torch.zeros(5), torch.eye(5)), degree=1).fvu().value < 1


class _GatedBlock(torch.nn.Module):
    """The layout of an LLM's MLP block: down(act(gate x) * up x)."""

    def __init__(self, d, h, o):
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(d, h, bias=False), torch.nn.Linear(d, h, bias=False)
        self.down_proj, self.act_fn = torch.nn.Linear(h, o, bias=False), torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def test_a_gated_block_is_a_glu():
    torch.manual_seed(0)
    block = _GatedBlock(6, 8, 3).double()
    x = torch.randn(11, 6, dtype=DT)
    glu = as_model(block)
    assert isinstance(glu, GLU)
    torch.testing.assert_close(glu(x), block(x))
    same = glu_from_linears(block.gate_proj, block.up_proj, block.down_proj, "silu")
    torch.testing.assert_close(same(x), block(x))
    mix = GaussianMixture.single(torch.zeros(6), torch.eye(6))
    res = approximate(block, mix, degree=2)
    mc = res.fvu(x=(xs := mix.sample(200_000, seed=1)), f=block(xs).detach())
    assert abs(res.fvu().value - mc.value) < 3 * mc.se


def test_plain_weight_tensors_are_a_model():
    W1, b1, W2, b2 = torch.randn(7, 4), torch.randn(7), torch.randn(2, 7), torch.randn(2)
    res = approximate(MLP(W1, b1, W2, b2, "relu"), GaussianMixture.single(torch.zeros(4), torch.eye(4)), degree=2)
    assert res.degree == 2 and res.polynomial.gamma.shape == (2, 4, 4)


@pytest.mark.parametrize("model, name", [
    (torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Softplus(), torch.nn.Linear(4, 2)), "Softplus"),
    (torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), r"nn.Sequential\(Linear, ReLU\)"),
    (torch.nn.LSTM(4, 4), "LSTM"),
    (torch.nn.Linear(4, 2), "Linear"),
])
def test_an_unsupported_module_is_refused_by_name(model, name):
    with pytest.raises(ApproxInputError, match=name) as err:
        approximate(model, GaussianMixture.single(torch.zeros(4), torch.eye(4)), degree=1)
    assert "supported" in str(err.value)


def test_impossible_fits_are_refused_naming_what_is_possible(gelu_net):
    mix = _mixture()
    with pytest.raises(ApproxInputError, match="principal components"):
        approximate(gelu_net, mix, degree=3)
    with pytest.raises(ApproxInputError, match="degree=2"):
        approximate(gelu_net, mix, degree=3, method="sgd")
    with pytest.raises(ApproxInputError, match="steps"):
        approximate(gelu_net, mix, degree=1, steps=10)
    with pytest.raises(ApproxInputError, match="GaussianMixture"):
        approximate(gelu_net, (torch.zeros(D), torch.eye(D)), degree=1)


def test_the_sgd_baseline_has_an_exact_fvu_no_better_than_the_exact_fit(gelu_net):
    mix = _mixture()
    sgd = approximate(gelu_net, mix, degree=2, method="sgd", steps=50, seed=0)
    assert sgd.method == "sgd" and sgd.diagnostics["method"] == "sgd"
    assert sgd.fvu().value >= approximate(gelu_net, mix, degree=2).fvu().value - 1e-9

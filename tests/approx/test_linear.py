"""Exact linear approximant against an explicit Monte-Carlo least-squares fit."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx import GaussianMixture, linear_approximant, solve_covariance
from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64
CASES = [("mlp", "relu"), ("mlp", "gelu"), ("mlp", "tanh"), ("glu", "relu"), ("glu", "silu")]


@pytest.mark.parametrize("kind,act", CASES)
@pytest.mark.parametrize("K", [1, 3])
def test_linear_matches_monte_carlo_least_squares(kind, act, K, random_model, random_mixture, mc_lsq, basis):
    _, coefficients, chi2 = basis
    d = 8
    model = random_model(kind, d, 12, 2, seed=10 + K, activation=act)
    mix = random_mixture(d, K, seed=20 + K)
    lin = linear_approximant(model, mix)
    mc, cov = mc_lsq(model, mix, 1_000_000, degree=1, seed=30 + K)
    stat = chi2(coefficients(lin, 1), mc, cov)
    p = d + 1
    assert bool((stat < p + 6 * (2 * p) ** 0.5).all()), stat  # χ²_p: within sampling error
    # and it is not vacuous: a 2 % perturbation of β is detected
    bad = coefficients(lin, 1).clone()
    bad[:, 1:] *= 1.02
    assert bool((chi2(bad, mc, cov) > p + 6 * (2 * p) ** 0.5).all())


def test_singular_covariance_uses_pseudo_inverse(random_model):
    """A constant coordinate (zero variance): min-norm solution, coefficient 0 on it, same predictions."""
    g = torch.Generator().manual_seed(0)
    d = 4
    A = torch.randn(3, d, d, generator=g, dtype=DT)
    covs = A @ A.transpose(1, 2) / d + 0.1 * torch.eye(d, dtype=DT)
    covs[:, 0, :] = 0
    covs[:, :, 0] = 0
    means = torch.randn(3, d, generator=g, dtype=DT)
    means[:, 0] = 0.7  # the same constant in every component
    mix = GaussianMixture(torch.tensor([0.2, 0.3, 0.5], dtype=DT), means, covs)
    model = random_model("mlp", d, 6, 2, seed=3)
    lin = linear_approximant(model, mix)
    assert lin.fit_info["solve"] == "pinv" and lin.fit_info["rank"] == d - 1
    torch.testing.assert_close(lin.beta[:, 0], torch.zeros(2, dtype=DT), atol=1e-12, rtol=0)
    # reduced problem on the varying coordinates: the model with x0 = 0.7 folded into the bias
    red_model = type(model)(model.W1[:, 1:], model.b1 + 0.7 * model.W1[:, 0], model.W2, model.b2, "relu")
    red = linear_approximant(red_model, GaussianMixture(mix.weights, means[:, 1:], covs[:, 1:, 1:]))
    torch.testing.assert_close(lin.beta[:, 1:], red.beta, rtol=1e-10, atol=1e-12)
    x = mix.sample(100, seed=1)
    torch.testing.assert_close(lin(x), red(x[:, 1:]), rtol=1e-10, atol=1e-12)
    ridged = linear_approximant(model, mix, ridge=1e-3)
    assert ridged.fit_info["solve"] == "cholesky"


def test_solve_covariance_rejects_negative_ridge():
    with pytest.raises(ApproxInputError, match="ridge must be >= 0"):
        solve_covariance(torch.eye(2, dtype=DT), torch.ones(1, 2, dtype=DT), ridge=-1)


def test_model_mixture_mismatch_errors(random_model, random_mixture):
    with pytest.raises(ApproxInputError, match="input dimension 5 differs"):
        linear_approximant(random_model("mlp", 5, 3, 1, 0), random_mixture(4, 2, 0))
    with pytest.raises(ApproxInputError, match="must be an MLP or a GLU"):
        linear_approximant(torch.nn.Linear(4, 1), random_mixture(4, 2, 0))

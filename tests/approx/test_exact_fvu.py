"""Exact (sample-free) FVU under a mixture against 10^6 Monte-Carlo samples, and the optimality of
the exact quadratic under it."""

from __future__ import annotations

import math

import pytest
import torch

from polyinterp.approx import Approximant, linear_approximant, quadratic_approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.approx.moments.output_moments import output_moments

DT = torch.float64


def _mc_fvu(model, g, mix, n: int, seed: int) -> tuple[float, float]:
    """Pooled FVU on n samples and its standard error (delta method for the ratio of two means)."""
    x = mix.sample(n, torch.Generator().manual_seed(seed))
    f = model(x)
    num = ((f - g(x)) ** 2).sum(1)
    den = ((f - f.mean(0)) ** 2).sum(1)
    ratio = float(num.mean() / den.mean())
    se = float((num - ratio * den).std() / math.sqrt(n) / den.mean())
    return ratio, se


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("mlp", "gelu"), ("mlp", "tanh"), ("glu", "relu")])
@pytest.mark.parametrize("K", [1, 3])
def test_exact_fvu_matches_monte_carlo(random_model, random_mixture, kind, act, K):
    model = random_model(kind, 5, 8, 3, seed=3, activation=act)
    weights = None if K == 1 else torch.tensor([0.6, 0.3, 0.1], dtype=DT)
    mix = random_mixture(5, K, seed=4, weights=weights)
    approx = {"linear": linear_approximant(model, mix),
              "quadratic": quadratic_approximant(model, mix, tol=1e-12, inner_dtype=None)}
    exact = exact_fvu(model, approx, mix)
    for name, g in approx.items():
        mc, se = _mc_fvu(model, g, mix, 1_000_000, seed=11)
        assert abs(exact[name] - mc) <= 3 * se, (name, exact[name], mc, se)
    assert exact["quadratic"] < exact["linear"]


def test_output_moments_match_monte_carlo(random_model, random_mixture):
    model = random_model("glu", 4, 6, 2, seed=5, activation="gelu")
    mix = random_mixture(4, 2, seed=6)
    ef, ef2 = output_moments(model, mix)
    f = model(mix.sample(1_000_000, torch.Generator().manual_seed(2)))
    for exact, v in ((ef, f), (ef2, f * f)):
        assert ((exact - v.mean(0)).abs() <= 3 * v.std(0) / 1000).all(), (exact, v.mean(0))


def test_the_exact_quadratic_minimises_the_exact_fvu(random_model, random_mixture):
    model = random_model("mlp", 5, 10, 3, seed=7)
    mix = random_mixture(5, 3, seed=8, spread=1.5)
    best = quadratic_approximant(model, mix, tol=1e-12, inner_dtype=None)
    sgd = quadratic_approximant(model, mix, method="sgd", steps=200, batch=256, lr=3e-3, seed=0)
    g = torch.Generator().manual_seed(1)
    others = {"sgd": sgd}
    for i in range(3):
        dg = 1e-3 * torch.randn(best.gamma.shape, generator=g, dtype=DT)
        others[f"perturbed{i}"] = Approximant(best.alpha.clone(), best.beta + 1e-3 * torch.randn(best.beta.shape, generator=g,
                                              dtype=DT), best.gamma + 0.5 * (dg + dg.transpose(1, 2)), {})
    fvus = exact_fvu(model, {"best": best, **others}, mix)
    for name in others:
        assert fvus["best"] <= fvus[name] + 1e-12, (name, fvus)


def test_mismatched_approximant_is_refused(random_model, random_mixture):
    model = random_model("mlp", 4, 5, 2, seed=1)
    mix = random_mixture(4, 2, seed=2)
    other = linear_approximant(random_model("mlp", 3, 5, 2, seed=1), random_mixture(3, 2, seed=2))
    with pytest.raises(ApproxInputError, match="approximant 'x'"):
        exact_fvu(model, {"x": other}, mix)

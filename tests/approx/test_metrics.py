"""FVU, KL and the analytic moments E[g²], E[f·g]."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyinterp.approx import (expected_inner, expected_sq_norm, fidelity, fvu, kl_divergence, linear_approximant,
                               quadratic_approximant)
from polyinterp.approx.errors import ApproxInputError

DT = torch.float64


def test_fvu_and_kl_match_numpy_formulas():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(500, 4, generator=g, dtype=DT) * torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=DT)
    h = f + 0.3 * torch.randn(500, 4, generator=g, dtype=DT)
    F, H = f.numpy(), h.numpy()
    ref = ((F - H) ** 2).sum() / ((F - F.mean(0)) ** 2).sum()
    assert fvu(f, h) == pytest.approx(ref, rel=1e-13)
    p = np.exp(F - F.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = np.exp(H - H.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    assert kl_divergence(f, h) == pytest.approx((p * np.log(p / q)).sum(1).mean(), rel=1e-12)
    assert fvu(f, f) == 0.0 and kl_divergence(f, f) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ApproxInputError, match="differ in shape"):
        fvu(f, h[:, :3])
    with pytest.raises(ApproxInputError, match="constant"):
        fvu(torch.ones(5, 2), torch.zeros(5, 2))


def test_streamed_fidelity_equals_direct(random_model, random_mixture):
    model, mix = random_model("mlp", 5, 8, 3, 0), random_mixture(5, 3, 0)
    quad = quadratic_approximant(model, mix)
    x = mix.sample(10_000, seed=1)
    out = fidelity(model, quad, x, chunk_size=999)
    assert out["n"] == 10_000
    assert out["fvu"] == pytest.approx(fvu(model(x), quad(x)), rel=1e-10)
    assert out["kl"] == pytest.approx(kl_divergence(model(x), quad(x)), rel=1e-10)


@pytest.mark.parametrize("degree", [1, 2])
def test_analytic_moments_match_monte_carlo(degree, random_model, random_mixture):
    model, mix = random_model("glu", 4, 6, 2, 3, activation="gelu"), random_mixture(4, 3, 4)
    g = linear_approximant(model, mix) if degree == 1 else quadratic_approximant(model, mix)
    x = mix.sample(1_000_000, seed=5)
    gx, fx = g(x), model(x)
    for exact, vals in ((expected_sq_norm(g, mix), gx**2), (expected_inner(model, g, mix), fx * gx)):
        se = vals.std(0) / len(x) ** 0.5
        assert bool(((vals.mean(0) - exact).abs() < 5 * se).all()), (vals.mean(0), exact, se)
    # at the least-squares optimum E[f g] = E[g²] (the residual is orthogonal to the basis)
    torch.testing.assert_close(expected_inner(model, g, mix), expected_sq_norm(g, mix), rtol=1e-6, atol=1e-9)

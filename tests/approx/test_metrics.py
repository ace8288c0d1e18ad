"""FVU, KL and the analytic moments E[g²], E[f·g]."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyinterp.approx import (expected_inner, expected_sq_norm, fidelity, fvu, kl_divergence, linear_approximant,
                               quadratic_approximant)
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.evaluate.metrics import accuracy_and_se, fvu_and_se, fvu_flat_and_se, kl_and_se

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


def _draw(n, gen):
    """f = (x₀ + x₁², sin x₂ + x₀x₁) and g its linear part: a ratio estimator with a skewed numerator."""
    x = torch.randn(n, 3, generator=gen, dtype=DT)
    f = torch.stack([x[:, 0] + x[:, 1] ** 2, torch.sin(x[:, 2]) + x[:, 0] * x[:, 1]], 1)
    g = torch.stack([x[:, 0] + 1.0, 0.9 * x[:, 2]], 1)
    labels = (x[:, 0] > 0.3).long()
    return f, g, labels


@pytest.mark.parametrize("n", [300, 3000])
def test_standard_errors_match_the_spread_of_repeated_estimates(n):
    """The reported standard error of FVU, KL and accuracy is the spread of the estimate over
    independent sample sets (400 replications: the spread itself is known to ±3.5 %)."""
    gen = torch.Generator().manual_seed(7)
    est = {"fvu": [], "fvu_flat": [], "kl": [], "accuracy": []}
    ses = {"fvu": [], "fvu_flat": [], "kl": [], "accuracy": []}
    for _ in range(400):
        f, g, labels = _draw(n, gen)
        for name, (v, se) in (("fvu", fvu_and_se(f, g)), ("fvu_flat", fvu_flat_and_se(f, g)), ("kl", kl_and_se(f, g)),
                              ("accuracy", accuracy_and_se(g, labels))):
            est[name].append(v)
            ses[name].append(se)
    for name in est:
        spread = float(np.std(est[name], ddof=1))
        assert float(np.mean(ses[name])) == pytest.approx(spread, rel=0.15), name


def test_estimates_with_standard_errors_equal_the_plain_estimates():
    gen = torch.Generator().manual_seed(3)
    f, g, labels = _draw(1000, gen)
    assert fvu_and_se(f, g)[0] == pytest.approx(fvu(f, g), rel=1e-14)
    assert kl_and_se(f, g)[0] == pytest.approx(kl_divergence(f, g), rel=1e-14)
    p = float((g.argmax(1) == labels).double().mean())
    assert accuracy_and_se(g, labels) == pytest.approx((p, (p * (1 - p) / 1000) ** 0.5), rel=1e-14)
    assert fvu_and_se(f, f) == (0.0, 0.0)


def test_flat_fvu_is_the_authors_flattened_variance_ratio():
    """fvu_flat is numpy's var of the flattened residual over var of the flattened outputs (the paper
    authors' fvu_between_models), whatever the divisor; a hand case: outputs with different means."""
    gen = torch.Generator().manual_seed(5)
    f, g, _ = _draw(500, gen)
    fn, gn = f.numpy(), g.numpy()
    for ddof in (0, 1):
        ref = np.var((fn - gn).ravel(), ddof=ddof) / np.var(fn.ravel(), ddof=ddof)
        assert fvu_flat_and_se(f, g)[0] == pytest.approx(ref, rel=1e-12)
    # f = (x, x + 10), g = (x + 1, x + 11): every residual is -1, so the flattened residual has no
    # variance (flat FVU 0) while ours counts the shared offset: Σ 1 / Σ Var = 2n / (2 n var x).
    x = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=DT)
    f2 = torch.stack([x, x + 10], 1)
    assert fvu_flat_and_se(f2, f2 + 1)[0] == 0.0
    assert fvu_and_se(f2, f2 + 1)[0] == pytest.approx(1 / float(x.var(unbiased=False)), rel=1e-14)


@pytest.mark.parametrize("seed", range(20))
def test_flat_fvu_is_never_above_ours(seed):
    """Theirs adds the spread of the per-output means to the denominator and removes the shared mean
    residual from the numerator, so it is at most ours on the same values."""
    gen = torch.Generator().manual_seed(seed)
    n, o = 50, 4
    f = torch.randn(n, o, generator=gen, dtype=DT) * torch.rand(o, generator=gen, dtype=DT) * 3 \
        + torch.randn(o, generator=gen, dtype=DT) * 5
    g = f + torch.randn(n, o, generator=gen, dtype=DT) * 0.5 + torch.randn(o, generator=gen, dtype=DT)
    assert fvu_flat_and_se(f, g)[0] <= fvu_and_se(f, g)[0] * (1 + 1e-12)


def _random_quadratic(d, o, seed, symmetric=True):
    from polyinterp.approx import Approximant

    g = torch.Generator().manual_seed(seed)
    gamma = torch.randn(o, d, d, generator=g, dtype=DT) / d
    if symmetric:
        gamma = gamma + gamma.transpose(1, 2)
    return Approximant(torch.randn(o, generator=g, dtype=DT), torch.randn(o, d, generator=g, dtype=DT), gamma)


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "asymmetric"])
def test_expected_sq_norm_equals_the_gram_operator_route(symmetric, random_mixture):
    """E g² per output against ⟨θ, Aθ⟩ with the Gram operator A (the full (E g, E g x, E g x xᵀ) under
    the mixture), for a Γ that is no fit; an asymmetric Γ is the form of its symmetric part. Every term
    of E_k g² = (E_k g)² + bᵀΣb + 2 tr((ΓΣ)²) is ≥ 0, so both routes carry only float64 round-off
    relative to the value (d = 7: ≲ 1e-14); 1e-11 leaves room for the mean's own cancellation."""
    from polyinterp.approx import Approximant
    from polyinterp.approx.solvers.gram_operator import GramOperator, inner

    mix = random_mixture(7, 3, 11)
    g = _random_quadratic(7, 4, 12, symmetric)
    sym = 0.5 * (g.gamma + g.gamma.transpose(1, 2))
    theta = (g.alpha, g.beta, sym)
    want = inner(theta, GramOperator(mix)(theta))
    torch.testing.assert_close(expected_sq_norm(g, mix), want, rtol=1e-11, atol=0)
    torch.testing.assert_close(expected_sq_norm(Approximant(g.alpha, g.beta, sym), mix), want, rtol=1e-11, atol=0)


def test_expected_sq_norm_of_an_unfitted_quadratic_matches_monte_carlo(random_mixture):
    """The same against the sample mean of g(x)² on 10⁶ mixture samples (within 5 standard errors),
    for a Γ that is not a least-squares fit (the test above with a fit also checks E[f g] = E[g²])."""
    mix = random_mixture(5, 3, 21)
    g = _random_quadratic(5, 3, 22, symmetric=False)
    vals = g(mix.sample(1_000_000, seed=23)) ** 2
    se = vals.std(0) / len(vals) ** 0.5
    exact = expected_sq_norm(g, mix)
    assert bool(((vals.mean(0) - exact).abs() < 5 * se).all()), (vals.mean(0), exact, se)

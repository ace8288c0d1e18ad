"""Feature images under the data (polyinterp.approx.evaluate.features): whitened quadratic features drawn back
as patterns, linear patterns Σβ, variance shares. Compared with independent routes: the generalised
eigenproblem ΣΓ p = λ p, Monte-Carlo variances and regressions, and planted features."""

from __future__ import annotations

import math

import pytest
import torch

from polyinterp.approx import MLP, quadratic_gaussian
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.evaluate.features import (direction_variance_share, feature_summary, linear_pattern, psd_sqrt,
                                        top_eigenpair, whitened_quadratic_features)

DT = torch.float64


def _cos(a, b):
    return float(a @ b / (a.norm() * b.norm()))


def _random_spd(d, seed, floor=0.1):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g, dtype=DT) / math.sqrt(d)
    return A @ A.T + floor * torch.eye(d, dtype=DT)


def _random_sym(d, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g, dtype=DT)
    return 0.5 * (A + A.T)


def _planted_cov(n_high=8, n_low=4, low_var=1e-6, seed=0):
    """Block-diagonal Σ: a random SPD block on the first n_high coordinates, variance ``low_var`` (the
    near-constant 'border pixels') on the last n_low."""
    d = n_high + n_low
    cov = torch.zeros(d, d, dtype=DT)
    cov[:n_high, :n_high] = _random_spd(n_high, seed)
    cov[n_high:, n_high:] = low_var * torch.eye(n_low, dtype=DT)
    return cov


def _planted_directions(n_high=8, n_low=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    u = torch.zeros(n_high + n_low, dtype=DT)
    u[:n_high] = torch.randn(n_high, generator=g, dtype=DT)
    e = torch.zeros(n_high + n_low, dtype=DT)
    e[n_high:] = torch.randn(n_low, generator=g, dtype=DT)
    return u / u.norm(), e / e.norm()


def test_psd_sqrt_of_a_singular_covariance():
    g = torch.Generator().manual_seed(3)
    A = torch.randn(7, 4, generator=g, dtype=DT)
    cov = A @ A.T  # rank 4: eigh gives round-off negatives, clipped to 0
    S = psd_sqrt(cov)
    assert torch.equal(S, S.T)
    assert float(torch.linalg.eigvalsh(S).min()) > -1e-7
    torch.testing.assert_close(S @ S, cov, rtol=0, atol=1e-10)


def test_whitened_patterns_solve_the_generalised_eigenproblem():
    """p_i = Σ^{1/2} v_i are the eigenvectors of ΣΓ (ΣΓ p = λ p, pᵀΣ⁻¹p = δ), the λ_i its eigenvalues
    (computed here by a general, non-symmetric eigensolver), ordered by |λ|; shares λ²/tr((ΣΓ)²)."""
    d = 9
    gamma, cov = _random_sym(d, 10), _random_spd(d, 11)
    f = whitened_quadratic_features(gamma, cov)
    ref = torch.linalg.eigvals(cov @ gamma).real
    ref = ref[ref.abs().argsort(descending=True)]
    torch.testing.assert_close(f.eigvals, ref, rtol=1e-9, atol=1e-12)
    assert bool((f.eigvals.abs()[:-1] >= f.eigvals.abs()[1:]).all())
    P = f.patterns.T  # columns p_i
    torch.testing.assert_close(cov @ gamma @ P, P * f.eigvals, rtol=0, atol=1e-10)
    torch.testing.assert_close(P.T @ torch.linalg.solve(cov, P), torch.eye(d, dtype=DT), rtol=0, atol=1e-10)
    assert bool((f.patterns.sum(1) >= 0).all())
    tr = float(torch.trace(cov @ gamma @ cov @ gamma))
    torch.testing.assert_close(f.variance_share, ref ** 2 / tr, rtol=1e-9, atol=1e-14)
    assert f.quadratic_variance == pytest.approx(2 * tr, rel=1e-10)
    # the same features from a precomputed root
    g = whitened_quadratic_features(gamma, cov_sqrt=psd_sqrt(cov))
    torch.testing.assert_close(g.patterns, f.patterns)
    # one coordinate's share without a square root: (eᵀΣΓΣe / eᵀΣe)² / tr((ΣΓ)²), never above the top share
    for seed in range(5):
        e = torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=DT)
        ref_share = float((e @ cov @ gamma @ cov @ e / (e @ cov @ e)) ** 2 / tr)
        assert direction_variance_share(gamma, e, cov) == pytest.approx(ref_share, rel=1e-9)
        assert ref_share <= float(f.variance_share[0])


def test_planted_feature_on_high_variance_pixels_beats_the_ridge_direction():
    """Γ = a uuᵀ + b eeᵀ, u on high-variance pixels, e on near-constant ones (variance 1e-6), b ≫ a:
    the raw top eigenvector is e; the whitened top pattern is ∝ Σu and carries the variance."""
    cov = _planted_cov()
    u, e = _planted_directions()
    a, b = 1.0, 100.0
    gamma = a * torch.outer(u, u) + b * torch.outer(e, e)
    lam, vec = top_eigenpair(gamma)
    assert lam == pytest.approx(b) and abs(_cos(vec, e)) > 0.999
    f = whitened_quadratic_features(gamma, cov)
    assert _cos(f.patterns[0], cov @ u) ** 2 > 0.999 ** 2
    assert float(f.eigvals[0]) == pytest.approx(a * float(u @ cov @ u), rel=1e-9)  # λ₁ = a uᵀΣu
    assert float(f.variance_share[0]) > 0.999
    assert float(f.patterns[0].sum()) >= 0
    # the raw eigenvector's coordinate eᵀx explains almost none of the quadratic term's variance;
    # the whitened feature's filter Σ^{-1/2}v₁ explains its share
    assert direction_variance_share(gamma, vec, cov) < 1e-6
    filt = torch.linalg.solve(psd_sqrt(cov), f.directions[0])
    assert direction_variance_share(gamma, filt, cov) == pytest.approx(float(f.variance_share[0]), rel=1e-9)


def _mc_variance(y):
    """Sample variance of y and its standard error (from the sample fourth central moment)."""
    c = y - y.mean()
    s2 = (c ** 2).mean()
    return float(s2), float(((c ** 2 - s2) ** 2).mean().sqrt() / math.sqrt(len(y)))


def test_variance_of_the_quadratic_form_matches_samples():
    """Var(xᵀΓx) = 2 tr((ΣΓ)²) + 4 μᵀΓΣΓμ under N(μ, Σ), and each whitened feature λ_i (f_iᵀ(x−μ))²
    (filter f_i = Σ⁻¹p_i) has variance 2λ_i², against 4·10⁵ samples drawn by Cholesky."""
    d, n = 6, 400_000
    gamma, cov = _random_sym(d, 20), _random_spd(d, 21)
    g = torch.Generator().manual_seed(22)
    mu = torch.randn(d, generator=g, dtype=DT)
    x = mu + torch.randn(n, d, generator=g, dtype=DT) @ torch.linalg.cholesky(cov).T
    q = torch.einsum("ni,ij,nj->n", x, gamma, x)
    f = whitened_quadratic_features(gamma, cov)
    exact = f.quadratic_variance + 4 * float(mu @ gamma @ cov @ gamma @ mu)
    var, se = _mc_variance(q)
    assert abs(var - exact) < 3 * se, (var, exact, se)
    # decomposition along the features: q = μᵀΓμ + 2μᵀΓ(x−μ) + Σ λ_i c_i², c_i = f_iᵀ(x−μ)
    c = (x - mu) @ torch.linalg.solve(cov, f.patterns.T)
    torch.testing.assert_close(q, float(mu @ gamma @ mu) + 2 * (x - mu) @ (gamma @ mu) + (c ** 2) @ f.eigvals,
                               rtol=1e-9, atol=1e-9)
    for i in (0, 1, d - 1):
        var_i, se_i = _mc_variance(f.eigvals[i] * c[:, i] ** 2)
        assert abs(var_i - 2 * float(f.eigvals[i]) ** 2) < 3 * se_i, (i, var_i, se_i)
    # the features are uncorrelated: their variances add up to the quadratic part's
    var_q, se_q = _mc_variance((c ** 2) @ f.eigvals)
    assert abs(var_q - f.quadratic_variance) < 3 * se_q


@pytest.mark.parametrize("which", ["top_whitened_filter", "raw_top", "random"])
def test_direction_share_is_the_r2_of_one_coordinate(which):
    """direction_variance_share(e) = R² of regressing the quadratic part (x−μ)ᵀΓ(x−μ) on (eᵀ(x−μ))²
    over samples (the best function of eᵀx, by Hermite orthogonality)."""
    d, n = 6, 400_000
    gamma, cov = _random_sym(d, 30), _random_spd(d, 31)
    g = torch.Generator().manual_seed(32)
    dx = torch.randn(n, d, generator=g, dtype=DT) @ torch.linalg.cholesky(cov).T
    q = torch.einsum("ni,ij,nj->n", dx, gamma, dx)
    if which == "top_whitened_filter":
        e = torch.linalg.solve(cov, whitened_quadratic_features(gamma, cov).patterns[0])
    elif which == "raw_top":
        e = top_eigenpair(gamma)[1]
    else:
        e = torch.randn(d, generator=g, dtype=DT)
    X = torch.stack([torch.ones(n, dtype=DT), (dx @ e) ** 2], 1)
    resid = q - X @ torch.linalg.lstsq(X, q[:, None]).solution[:, 0]
    r2 = 1 - float(resid.var() / q.var())
    assert direction_variance_share(gamma, e, cov) == pytest.approx(r2, abs=0.01)


def test_linear_pattern_is_the_covariance_of_input_and_output():
    d, n = 5, 400_000
    cov = _random_spd(d, 40)
    g = torch.Generator().manual_seed(41)
    beta = torch.randn(d, generator=g, dtype=DT)
    x = torch.randn(n, d, generator=g, dtype=DT) @ torch.linalg.cholesky(cov).T + 3.0
    y = x @ beta
    pattern, variance = linear_pattern(beta, cov)
    xc, yc = x - x.mean(0), y - y.mean()
    sample = (xc * yc[:, None]).mean(0)
    se = (xc * yc[:, None]).std(0) / math.sqrt(n)
    assert bool(((sample - pattern).abs() < 4 * se).all()), (sample, pattern, se)
    var, se_v = _mc_variance(y)
    assert abs(var - variance) < 3 * se_v


def test_synthetic_mlp_under_a_gaussian_with_near_constant_pixels():
    """An MLP with one hidden unit on high-variance pixels and one with large weights on pixels of
    variance 1e-6: the quadratic approximant under that Gaussian has its raw top eigenvector on the
    near-constant pixels; the whitened top pattern is the high-variance unit's Σu and carries ~all of
    the variance share."""
    n_high, n_low = 8, 4
    cov = _planted_cov(n_high, n_low)
    u, e = _planted_directions(n_high, n_low)
    d = n_high + n_low
    g = torch.Generator().manual_seed(50)
    noise = 0.05 * torch.randn(4, d, generator=g, dtype=DT)
    W1 = torch.cat([u[None], 30 * e[None], noise])
    b1 = torch.tensor([0.1, 0.0, 0.2, -0.1, 0.3, 0.0], dtype=DT)
    W2 = torch.tensor([[1.0, 1.0, 0.01, -0.01, 0.01, 0.01]], dtype=DT)
    model = MLP(W1, b1, W2, torch.zeros(1, dtype=DT))
    quad = quadratic_gaussian(model, torch.zeros(d, dtype=DT), cov)
    gamma = quad.gamma[0]
    s = feature_summary(gamma, quad.beta[0], cov)
    assert abs(_cos(s.raw_eigvec, e)) > 0.999
    assert s.raw_variance_share < 1e-3
    assert abs(_cos(s.whitened.patterns[0], cov @ u)) > 0.999
    assert float(s.whitened.variance_share[0]) > 0.99
    low = slice(n_high, d)
    energy = lambda v: float(v[low].square().sum() / v.square().sum())  # noqa: E731
    assert energy(s.whitened.patterns[0]) < 1e-4 < 0.99 < energy(s.raw_eigvec)


def test_a_quadratic_form_only_on_constant_pixels_has_no_share():
    cov = _planted_cov(low_var=0.0)  # exactly constant pixels: Σ singular
    _, e = _planted_directions()
    f = whitened_quadratic_features(torch.outer(e, e), cov)
    assert bool((f.variance_share == 0).all()) and float(f.eigvals.abs().max()) < 1e-12
    assert direction_variance_share(torch.outer(e, e), e, cov) == 0.0


def test_feature_summary_collects_filters_and_patterns():
    d = 7
    gamma, cov = _random_sym(d, 60), _random_spd(d, 61)
    beta = torch.randn(d, generator=torch.Generator().manual_seed(62), dtype=DT)
    s = feature_summary(gamma, beta, cov)
    lam, vec = top_eigenpair(gamma)
    assert s.raw_eigval == lam and torch.equal(s.raw_eigvec, vec) and vec.sum() >= 0
    torch.testing.assert_close(s.linear_pattern, cov @ beta)
    assert s.linear_variance == pytest.approx(float(beta @ cov @ beta))
    torch.testing.assert_close(s.whitened.patterns, whitened_quadratic_features(gamma, cov).patterns)


def test_bad_shapes_are_named():
    with pytest.raises(ApproxInputError, match="gamma"):
        whitened_quadratic_features(torch.zeros(3, 4, dtype=DT), torch.eye(3, dtype=DT))
    with pytest.raises(ApproxInputError, match="cov"):
        whitened_quadratic_features(torch.zeros(3, 3, dtype=DT), torch.eye(4, dtype=DT))
    with pytest.raises(ApproxInputError, match="exactly one"):
        whitened_quadratic_features(torch.zeros(3, 3, dtype=DT))
    with pytest.raises(ApproxInputError, match="beta"):
        linear_pattern(torch.zeros(4, dtype=DT), torch.eye(3, dtype=DT))
    with pytest.raises(ApproxInputError, match="non-finite"):
        psd_sqrt(torch.full((2, 2), float("nan"), dtype=DT))

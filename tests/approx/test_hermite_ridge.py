"""The degree-n Gaussian polynomial in factored Hermite form (approx/fits/hermite_ridge.py) against
independent routes: today's exact linear and quadratic (n ≤ 2), brute-force least squares on explicit
monomial features with the exact Gram by Isserlis and the exact right-hand side by one-dimensional
quadrature (n = 3, 4), least squares on 10⁶ samples, and the Monte-Carlo FVU.

The brute-force route below shares nothing with the module but the model's activation: the Gram
E[u^α u^β] (u = x − μ) comes from the Isserlis/Stein recursion, and E[φ(y) u^α] from conditioning on
t = (y − m)/σ (u | t Gaussian, its monomial moments by the same recursion) and composite
Gauss–Legendre quadrature in t split at the activation's kink. It is exact up to round-off.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from polyinterp.approx import GLU, MLP, GaussianMixture, linear_approximant, quadratic_gaussian
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.approx.moments.output_moments import output_moments
from polyinterp.approx.fits.hermite_ridge import HermiteRidgeApproximant, gaussian_polynomial_approximant
from reference_quadrature import split_normal_nodes as _nodes

DT = torch.float64


# -- the independent brute-force route --------------------------------------------------------------
def _monomials(d: int, n: int) -> list[tuple[int, ...]]:
    return [c for k in range(n + 1) for c in itertools.combinations_with_replacement(range(d), k)]


def _moments(mean: np.ndarray, cov: np.ndarray):
    """E[∏_j u_{key_j}] for u ~ N(mean, cov) by E[u_i F] = mean_i E F + Σ_j cov_ij E ∂_j F (Isserlis);
    ``mean`` may be batched [Q, d] (then values are [Q])."""
    memo: dict[tuple[int, ...], object] = {(): np.ones(mean.shape[:-1]) if mean.ndim > 1 else 1.0}

    def m(key: tuple[int, ...]):
        if key not in memo:
            i, rest = key[0], key[1:]
            val = mean[..., i] * m(rest)
            for j in range(len(rest)):
                val = val + cov[i, rest[j]] * m(rest[:j] + rest[j + 1:])
            memo[key] = val
        return memo[key]

    return lambda key: m(tuple(sorted(key)))



def _phi(model, y: np.ndarray) -> np.ndarray:
    return model.activation(torch.as_tensor(y, dtype=DT)).numpy()


def _exact_lsq(model, mu: torch.Tensor, S: torch.Tensor, n: int):
    """Least squares on the monomials of u = x − μ of degree ≤ n: (θ [p, o], Gram [p, p], rhs [p, o], keys)."""
    d = mu.shape[0]
    keys = _monomials(d, n)
    Sn, mun = S.numpy(), mu.numpy()
    M0 = _moments(np.zeros(d), Sn)
    G = np.array([[M0(a + b) for b in keys] for a in keys])
    glu = isinstance(model, GLU)
    W, b = (model.W, model.b) if glu else (model.W1, model.b1)
    W, b = W.numpy(), b.numpy()
    R = np.zeros((len(keys), model.h))
    for i in range(model.h):
        w = W[i]
        m = float(w @ mun + b[i])
        var = float(w @ Sn @ w)
        if glu:
            v, mz = model.V[i].numpy(), float(model.V[i].numpy() @ mun + model.c[i])
        if var == 0.0:  # a ridge that is constant under the Gaussian
            mom, wt, phi = M0, 1.0, _phi(model, np.array(m))
        else:
            s = math.sqrt(var)
            g = Sn @ w / s  # Cov(u, t)
            t, wt = _nodes(-m / s)
            mom = _moments(t[:, None] * g[None, :], Sn - np.outer(g, g))  # u | t
            phi = _phi(model, m + s * t)
        for a, key in enumerate(keys):
            inner = mom(key)
            if glu:  # z = m_z + vᵀu
                inner = mz * inner + sum(v[j] * mom(key + (j,)) for j in range(d))
            R[a, i] = np.sum(wt * phi * inner)
    rhs = R @ model.W2.numpy().T + np.array([M0(k) for k in keys])[:, None] * model.b2.numpy()[None, :]
    theta = np.linalg.solve(G, rhs)
    return theta, G, rhs, keys


def _features(u: torch.Tensor, keys) -> torch.Tensor:
    cols = [torch.ones(u.shape[0], dtype=u.dtype)]
    cache = {(): cols[0]}
    for key in keys[1:]:
        cache[key] = cache[key[:-1]] * u[:, key[-1]]
        cols.append(cache[key])
    return torch.stack(cols, 1)


# -- problems -----------------------------------------------------------------------------------------
def _gaussian(d: int, seed: int, spread: float = 0.7, rank: int | None = None):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g, dtype=DT) / math.sqrt(d)
    if rank is None:
        S = A @ A.T + 0.3 * torch.eye(d, dtype=DT)
    else:
        B = torch.randn(d, rank, generator=g, dtype=DT) / math.sqrt(rank)
        S = B @ B.T
    return spread * torch.randn(d, generator=g, dtype=DT), 0.5 * (S + S.T)


def _model(kind: str, d: int, h: int, o: int, seed: int, act: str):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    if kind == "mlp":
        return MLP(r(h, d) / math.sqrt(d), 0.5 * r(h), r(o, h) / math.sqrt(h), r(o), act)
    return GLU(r(h, d) / math.sqrt(d), 0.5 * r(h), r(h, d) / math.sqrt(d), 0.5 * r(h), r(o, h) / math.sqrt(h), r(o), act)


def _sample(mu, S, n, seed):
    return GaussianMixture.single(mu, S).sample(n, torch.Generator().manual_seed(seed))


def _rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).pow(2).mean().sqrt() / (b - b.mean(0)).pow(2).mean().sqrt())


# -- n ≤ 2: today's closed forms ---------------------------------------------------------------------
@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("mlp", "gelu"), ("mlp", "tanh"), ("glu", "relu"),
                                      ("glu", "gelu"), ("glu", "tanh")])
def test_degree_one_and_two_equal_the_exact_linear_and_quadratic(kind, act):
    d = 6
    model = _model(kind, d, 9, 3, seed=1, act=act)
    mu, S = _gaussian(d, seed=2)
    mix = GaussianMixture.single(mu, S)
    x = 2.0 * torch.randn(200, d, generator=torch.Generator().manual_seed(3), dtype=DT)  # off the bulk too
    for n, ref in ((1, linear_approximant(model, mix)), (2, quadratic_gaussian(model, mu, S))):
        g = gaussian_polynomial_approximant(model, mu, S, n)
        assert g.degree == n and g.coef.shape == (9, n + 1)
        torch.testing.assert_close(g(x), ref(x), rtol=1e-10, atol=1e-10 * float(ref(x).abs().max()))
        a = g.to_approximant()
        for mine, theirs in ((a.alpha, ref.alpha), (a.beta, ref.beta), (a.gamma, ref.gamma)):
            if theirs is None:
                assert mine is None
            else:
                torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-12)
        # the analytic FVU against exact_fvu's independent route (E f² − 2E[fg] + E g²)
        other = exact_fvu(model, {"ref": ref}, mix)["ref"]
        assert g.fvu() == pytest.approx(other, rel=1e-10)


def test_degree_zero_is_the_mean_and_a_k1_mixture_is_accepted():
    model = _model("glu", 4, 5, 2, seed=4, act="gelu")
    mu, S = _gaussian(4, seed=5)
    mix = GaussianMixture.single(mu, S)
    g0 = gaussian_polynomial_approximant(model, mix, degree=0)
    ef, _ = output_moments(model, mix)
    x = torch.randn(7, 4, dtype=DT)
    torch.testing.assert_close(g0(x), ef.expand(7, 2), rtol=1e-12, atol=1e-12)
    assert g0.fvu() == pytest.approx(1.0, abs=1e-12)
    assert g0(x[0]).shape == (2,)


# -- n = 3, 4: brute-force least squares -------------------------------------------------------------
@pytest.mark.parametrize("kind,act,n,d", [("mlp", "relu", 3, 5), ("mlp", "gelu", 3, 5), ("mlp", "relu", 4, 5),
                                          ("mlp", "gelu", 4, 5), ("glu", "relu", 3, 5), ("glu", "gelu", 3, 5),
                                          ("glu", "relu", 4, 5), ("glu", "gelu", 4, 5)])
def test_degree_three_and_four_equal_exact_least_squares(kind, act, n, d):
    model = _model(kind, d, 8, 2, seed=10 + n, act=act)
    if kind == "mlp":  # one dead unit: w_i = 0, the ridge is the constant φ(b_i)
        W1 = model.W1.clone()
        W1[3] = 0
        model = MLP(W1, model.b1, model.W2, model.b2, act)
    mu, S = _gaussian(d, seed=20 + n)
    g = gaussian_polynomial_approximant(model, mu, S, n)
    theta, _, rhs, keys = _exact_lsq(model, mu, S, n)
    x = _sample(mu, S, 4000, seed=1)
    ls = _features(x - mu, keys) @ torch.as_tensor(theta)
    assert _rel_rms(g(x), ls) < 1e-9
    # E g² of the Hermite formula against θᵀ E[f u^α] = θᵀ Gram θ of the brute-force fit
    m = g.expected_moments()
    var = m["ef2"] - m["ef"] ** 2
    eg2_ls = torch.as_tensor(np.einsum("po,po->o", theta, rhs))
    assert float(((m["eg2"] - eg2_ls).abs() / var).max()) < 1e-10
    torch.testing.assert_close(m["eg"], m["ef"], rtol=1e-12, atol=1e-12)
    if kind == "mlp":
        assert g.fit_info["dead"] == 1
        torch.testing.assert_close(g.coef[3, 1:], torch.zeros(n, dtype=DT))


def _mc_lsq(model, mu, S, keys, n_samples: int, seed: int, chunk: int = 200_000):
    """Least squares on samples: (θ̂ [o, p], sandwich covariance [o, p, p])."""
    gen = torch.Generator().manual_seed(seed)
    mix = GaussianMixture.single(mu, S)
    p = len(keys)
    XtX, Xtf = torch.zeros(p, p, dtype=DT), torch.zeros(p, model.o, dtype=DT)
    xs = [mix.sample(min(chunk, n_samples - i), gen) for i in range(0, n_samples, chunk)]
    for x in xs:
        X = _features(x - mu, keys)
        XtX += X.T @ X
        Xtf += X.T @ model(x)
    coef = torch.linalg.solve(XtX, Xtf).T
    meat = torch.zeros(model.o, p, p, dtype=DT)
    for x in xs:
        X = _features(x - mu, keys)
        r = model(x) - X @ coef.T
        for o in range(model.o):
            Xr = X * r[:, o:o + 1]
            meat[o] += Xr.T @ Xr
    Ginv = torch.linalg.inv(XtX)
    return coef, Ginv @ meat @ Ginv


@pytest.mark.parametrize("kind,act,n,d", [("mlp", "relu", 3, 4), ("mlp", "gelu", 4, 3), ("glu", "relu", 4, 3)])
def test_matches_monte_carlo_least_squares(kind, act, n, d):
    model = _model(kind, d, 8, 2, seed=30 + n, act=act)
    mu, S = _gaussian(d, seed=40 + n)
    g = gaussian_polynomial_approximant(model, mu, S, n)
    keys = _monomials(d, n)
    p = len(keys)
    # monomial coefficients of g by interpolation (exact: g is a polynomial of degree ≤ n)
    x = 1.5 * torch.randn(5 * p, d, generator=torch.Generator().manual_seed(2), dtype=DT) + mu
    F = _features(x - mu, keys)
    mine = torch.linalg.lstsq(F, g(x)).solution.T  # [o, p]
    assert float((F @ mine.T - g(x)).abs().max()) < 1e-9 * float(g(x).abs().max())
    mc, cov = _mc_lsq(model, mu, S, keys, 1_000_000, seed=50 + n)
    chi2 = lambda c: torch.einsum("op,op->o", c - mc, torch.linalg.solve(cov, (c - mc)[..., None])[..., 0])  # noqa: E731
    bound = p + 6 * (2 * p) ** 0.5  # χ²_p mean + 6 standard deviations
    assert bool((chi2(mine) < bound).all()), (chi2(mine), bound)
    # and the test has power: the degree-(n−1) projection padded with zeros is rejected
    lower = gaussian_polynomial_approximant(model, mu, S, n - 1)
    low = torch.linalg.lstsq(F, lower(x)).solution.T
    assert bool((chi2(low) > bound).all())


# -- the analytic FVU --------------------------------------------------------------------------------
def _mc_fvu(model, g, mu, S, n: int, seed: int) -> tuple[float, float]:
    """Pooled FVU on n samples and its standard error (delta method for the ratio of two means)."""
    x = _sample(mu, S, n, seed)
    f = model(x)
    num = ((f - g(x)) ** 2).sum(1)
    den = ((f - f.mean(0)) ** 2).sum(1)
    ratio = float(num.mean() / den.mean())
    return ratio, float((num - ratio * den).std() / math.sqrt(n) / den.mean())


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("mlp", "gelu"), ("glu", "relu"), ("glu", "gelu")])
def test_fvu_matches_monte_carlo(kind, act):
    d = 5
    model = _model(kind, d, 8, 3, seed=60, act=act)
    mu, S = _gaussian(d, seed=61)
    previous = 1.0
    for n in (3, 4):
        g = gaussian_polynomial_approximant(model, mu, S, n)
        exact = g.fvu()
        mc, se = _mc_fvu(model, g, mu, S, 1_000_000, seed=62 + n)
        assert abs(exact - mc) <= 3 * se, (n, exact, mc, se)
        assert 0 < exact <= previous + 1e-12  # nested spaces: the FVU cannot grow with the degree
        per = g.fvu(per_output=True)
        assert per.shape == (3,) and bool((per >= -1e-12).all())
        previous = exact


# -- dead directions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mlp", "glu"])
def test_dead_directions_under_a_singular_covariance(kind):
    d, h, n = 5, 7, 3
    mu, S = _gaussian(d, seed=70, rank=d - 1)
    null = torch.linalg.eigh(S).eigenvectors[:, 0]  # Σ null = 0 (up to round-off)
    model = _model(kind, d, h, 2, seed=71, act="relu")
    W = (model.W1 if kind == "mlp" else model.W).clone()
    W[0] = 0.0  # w = 0
    W[1] = 2.0 * null  # Σ singular along w: σ² is round-off, the unit is constant on the support
    if kind == "mlp":
        model = MLP(W, model.b1, model.W2, model.b2, "relu")
    else:
        model = GLU(W, model.b, model.V, model.c, model.W2, model.b2, "relu")
    g = gaussian_polynomial_approximant(model, mu, S, n)
    assert g.fit_info["dead"] == 2
    assert bool(torch.isfinite(g.coef).all()) and bool((g.scale[:2] == 0).all())
    b = model.b1 if kind == "mlp" else model.b
    m = W[:2] @ mu + b[:2]
    if kind == "mlp":
        torch.testing.assert_close(g.coef[:2, 0], torch.relu(m), rtol=1e-15, atol=0)
        assert bool((g.coef[:2, 1:] == 0).all())
        # on the support the dead units are the constants φ(m_i): fold them into b2
        W2 = model.W2.clone()
        b2 = model.b2 + W2[:, :2] @ torch.relu(m)
        W2[:, :2] = 0
        folded = gaussian_polynomial_approximant(MLP(W, model.b1, W2, b2, "relu"), mu, S, n)
        x = _sample(mu, S, 1000, seed=1)
        torch.testing.assert_close(g(x), folded(x), rtol=1e-12, atol=1e-12)
    mc, se = _mc_fvu(model, g, mu, S, 1_000_000, seed=72)
    assert abs(g.fvu() - mc) <= 3 * se, (g.fvu(), mc, se)


# -- dtype, device, errors ------------------------------------------------------------------------------
def test_float32_matches_float64():
    model = _model("glu", 6, 10, 3, seed=80, act="gelu")
    mu, S = _gaussian(6, seed=81)
    g64 = gaussian_polynomial_approximant(model, mu, S, 4)
    g32 = gaussian_polynomial_approximant(model.to(dtype=torch.float32), mu.float(), S.float(), 4)
    assert g32.dtype == torch.float32 and g32.coef.dtype == torch.float32
    x = _sample(mu, S, 500, seed=2)
    assert _rel_rms(g32(x.float()).double(), g64(x)) < 1e-5
    assert g32.fvu() == pytest.approx(g64.fvu(), rel=1e-4)
    assert g64.to(dtype=torch.float32)(x.float()).dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    model = _model("mlp", 6, 8, 2, seed=90, act="relu")
    mu, S = _gaussian(6, seed=91)
    cpu = gaussian_polynomial_approximant(model, mu, S, 4)
    gpu = gaussian_polynomial_approximant(model.to("cuda"), mu.cuda(), S.cuda(), 4)
    assert gpu.coef.is_cuda
    torch.testing.assert_close(gpu.coef.cpu(), cpu.coef, rtol=1e-10, atol=1e-12)
    x = _sample(mu, S, 100, seed=3)
    torch.testing.assert_close(gpu(x.cuda()).cpu(), cpu(x), rtol=1e-10, atol=1e-12)
    assert gpu.fvu() == pytest.approx(cpu.fvu(), rel=1e-10)


def test_errors():
    model = _model("mlp", 4, 5, 2, seed=1, act="relu")
    mu, S = _gaussian(4, seed=2)
    for bad in (-1, 2.0, True):
        with pytest.raises(ApproxInputError, match="degree"):
            gaussian_polynomial_approximant(model, mu, S, bad)
    with pytest.raises(ApproxInputError, match="input dimension"):
        gaussian_polynomial_approximant(model, torch.zeros(3, dtype=DT), torch.eye(3, dtype=DT), 3)
    with pytest.raises(ApproxInputError, match="K = 2"):
        mix = GaussianMixture(torch.tensor([0.5, 0.5], dtype=DT), mu.expand(2, 4), S.expand(2, 4, 4))
        gaussian_polynomial_approximant(model, mix, degree=3)
    with pytest.raises(ApproxInputError, match="cov is missing"):
        gaussian_polynomial_approximant(model, mu, degree=3)
    g = gaussian_polynomial_approximant(model, mu, S, 3)
    with pytest.raises(ApproxInputError, match="degree <= 2"):
        g.to_approximant()
    with pytest.raises(ApproxInputError, match="features"):
        g(torch.zeros(2, 5, dtype=DT))
    assert isinstance(g, HermiteRidgeApproximant)

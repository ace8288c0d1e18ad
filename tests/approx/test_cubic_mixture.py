"""The reduced (principal-component) polynomial under a mixture (approx/fits/cubic_mixture.py) against
independent routes:

* explicitly assembled normal equations in the *monomials* of u, with the Gram E[u^α u^β] (moments
  up to order 6 per component) by brute-force non-central Isserlis — an explicit sum over all
  partial pairings of the factors (pairs → covariance, singletons → mean) — and the right-hand side
  E_k[f(x) u^α] by conditioning on each hidden unit's standardised pre-activation t (u | t is
  Gaussian; its monomial moments by the same pairing sum) and composite Gauss–Legendre in t split at
  the activation's kink. Shares nothing with the module but the activation function and the PCs
  (the PCs are checked on their own in test_principal_components.py);
* least squares on 10⁶ mixture samples (χ² of the coefficients with the sandwich covariance) and
  the Monte-Carlo E‖f − g‖² (within 3 standard errors);
* today's exact approximants where they coincide: degree 1 and 2 at p = d (linear_approximant,
  quadratic_approximant(method="exact")), and degree 3 under one Gaussian (the factored Hermite
  form of hermite_ridge.py).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pytest
import torch

from polyinterp.approx import (GLU, GaussianMixture, ReducedPolynomialApproximant,
                               gaussian_polynomial_approximant, linear_approximant, principal_components,
                               quadratic_approximant, reduced_polynomial_approximant, reduced_polynomial_approximants)
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.approx.moments.hermite_gram import HermiteGram
from polyinterp.approx.moments.hermite_rhs import hermite_rhs_mixture
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis
from reference_quadrature import split_normal_nodes as _nodes
from random_problems import random_model as _model

DT = torch.float64


# -- brute-force Isserlis -----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _partial_pairings(n: int) -> tuple[tuple[tuple[tuple[int, int], ...], tuple[int, ...]], ...]:
    """All ways to split positions 0..n−1 into pairs and singletons: ((pairs), (singles))."""
    if n == 0:
        return (((), ()),)
    out = []
    last = n - 1
    for pairs, singles in _partial_pairings(n - 1):  # `last` alone
        out.append((pairs, singles + (last,)))
    for j in range(n - 1):  # `last` paired with j
        rest = [i for i in range(n - 1) if i != j]
        for pairs, singles in _partial_pairings(n - 2):
            out.append((tuple((rest[a], rest[b]) for a, b in pairs) + ((j, last),),
                        tuple(rest[s] for s in singles)))
    return tuple(out)


def test_partial_pairings_are_counted_right():
    # telephone numbers: the number of partial matchings of n labelled items
    assert [len(_partial_pairings(n)) for n in range(7)] == [1, 1, 2, 4, 10, 26, 76]


def _moment(key, mean: np.ndarray, cov: np.ndarray):
    """E[Π_l v_{key_l}] for v ~ N(mean, cov) (mean may be batched [Q, D]): Σ over partial pairings."""
    total = 0.0
    for pairs, singles in _partial_pairings(len(key)):
        term = 1.0
        for a, b in pairs:
            term = term * cov[key[a], key[b]]
        for s in singles:
            term = term * mean[..., key[s]]
        total = total + term
    return total


def _keys(p: int, n: int):
    return [c for a in range(n + 1) for c in itertools.combinations_with_replacement(range(p), a)]



def brute_force_normal_equations(model, mix: GaussianMixture, B: np.ndarray, shift: np.ndarray, n: int):
    """(G [M, M], b [M, o], keys) in the monomials u^key of u = (x − shift) B, degree ≤ n."""
    p = B.shape[1]
    keys = _keys(p, n)
    glu = isinstance(model, GLU)
    W, bias = (model.W, model.b) if glu else (model.W1, model.b1)
    W, bias, W2, b2 = W.numpy(), bias.numpy(), model.W2.numpy(), model.b2.numpy()
    G = np.zeros((len(keys), len(keys)))
    rhs = np.zeros((len(keys), model.o))
    for k in range(mix.K):
        pi, mu, Sig = float(mix.weights[k]), mix.means[k].numpy(), mix.covs[k].numpy()
        m, S = (mu - shift) @ B, B.T @ Sig @ B
        mom = {key: _moment(key, m, S) for key in _keys(p, 2 * n)}
        for a, ka in enumerate(keys):
            for c, kc in enumerate(keys):
                G[a, c] += pi * mom[tuple(sorted(ka + kc))]
        R = np.zeros((len(keys), model.h))
        for i in range(model.h):
            w = W[i]
            nu, var = float(w @ mu + bias[i]), float(w @ Sig @ w)
            s = math.sqrt(var)
            cu = B.T @ Sig @ w  # Cov(u, y)
            t, wt = _nodes(-nu / s)
            phi = model.activation(torch.as_tensor(nu + s * t, dtype=DT)).numpy()
            if not glu:
                cmean = m[None, :] + t[:, None] * (cu / s)[None, :]
                ccov = S - np.outer(cu, cu) / var
                for a, key in enumerate(keys):
                    R[a, i] = np.sum(wt * phi * _moment(key, cmean, ccov))
            else:  # v = (u, q), q = vᵀx + c
                v = model.V[i].numpy()
                nq, kap, cq = float(v @ mu + model.c[i]), float(w @ Sig @ v), B.T @ Sig @ v
                mean_full = np.concatenate([m, [nq]])
                cov_full = np.block([[S, cq[:, None]], [cq[None, :], np.array([[v @ Sig @ v]])]])
                cvec = np.concatenate([cu, [kap]])
                cmean = mean_full[None, :] + t[:, None] * (cvec / s)[None, :]
                ccov = cov_full - np.outer(cvec, cvec) / var
                for a, key in enumerate(keys):
                    R[a, i] = np.sum(wt * phi * _moment(key + (p,), cmean, ccov))
        rhs += pi * (R @ W2.T + np.array([mom[key] for key in keys])[:, None] * b2[None, :])
    return G, rhs, keys


def monomial_coefficients(g: ReducedPolynomialApproximant, keys) -> np.ndarray:
    """g's coefficients [M, o] on the monomials u^key (from its symmetric monomial tensors)."""
    T = g.monomial_tensors()
    out = []
    for key in keys:
        a = len(key)
        count = math.factorial(a) / math.prod(math.factorial(len(list(grp))) for _, grp in itertools.groupby(key))
        out.append(T[a][(slice(None),) + tuple(key)] * count if a else T[0])
    return torch.stack(out, 0).numpy()


def _mixture(d, K, seed, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT) / math.sqrt(d)
    covs = A @ A.transpose(1, 2) + 0.2 * torch.eye(d, dtype=DT)
    means = spread * torch.randn(K, d, generator=g, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.2
    return GaussianMixture(w / w.sum(), means, covs)



CASES = [("mlp", "relu"), ("mlp", "gelu"), ("mlp", "tanh"), ("glu", "relu"), ("glu", "gelu")]


# -- the explicitly assembled normal equations ----------------------------------------------------------
@pytest.mark.parametrize("kind,act", CASES)
@pytest.mark.parametrize("d,p", [(4, 4), (5, 3)])
def test_cubic_equals_brute_force_normal_equations(kind, act, d, p):
    mix = _mixture(d, 3, seed=10 + d)
    model = _model(kind, d, 6, 2, seed=20 + d, activation=act)
    fits = reduced_polynomial_approximants(model, mix, p, degrees=(2, 3), method="dense")
    pcg = reduced_polynomial_approximants(model, mix, p, degrees=(2, 3), method="pcg", tol=1e-10)
    pcs = fits[3].pcs
    B, shift = pcs.basis.numpy(), pcs.mean.numpy()
    for n, g in fits.items():
        G, rhs, keys = brute_force_normal_equations(model, mix, B, shift, n)
        ref = np.linalg.solve(G, rhs)
        for fit in (g, pcg[n]):  # measured: dense ≤ 4e-15, PCG ≤ 5e-12 relative (at tol 1e-12)
            ours = monomial_coefficients(fit, keys)
            assert np.abs(ours - ref).max() <= 1e-8 * np.abs(ref).max(), (n, np.abs(ours - ref).max())
        # the normal equations themselves: ψ = M u^key, so G_ψ = M G Mᵀ and b_ψ = M b
        basis = PolynomialBasis(p, n)
        eye = ReducedPolynomialApproximant(n, pcs, torch.eye(basis.size, dtype=DT))
        M = monomial_coefficients(eye, keys).T  # [N, M]: row α = ψ_α in monomials
        means, covs = pcs.reduce(mix)
        G_ours = HermiteGram(mix.weights, means, covs, basis).dense().numpy()
        assert np.abs(G_ours - M @ G @ M.T).max() <= 1e-10 * np.abs(G_ours).max()
        b_ours = basis.pack(hermite_rhs_mixture(model, mix.weights, mix.means, mix.covs, pcs.mean, pcs.basis, n)).numpy()
        assert np.abs(b_ours.T - M @ rhs).max() <= 1e-10 * np.abs(b_ours).max()
    # under a mixture the least-squares quadratic is not the truncation of the cubic
    q3 = fits[3].coefficients[:, :fits[2].coefficients.shape[1]]
    assert float((q3 - fits[2].coefficients).abs().max()) > 1e-3


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("glu", "gelu")])
def test_pcg_equals_dense(kind, act):
    d, p = 5, 4
    mix = _mixture(d, 3, seed=3)
    model = _model(kind, d, 8, 3, seed=4, activation=act)
    dense = reduced_polynomial_approximant(model, mix, p, 3, method="dense")
    pcg = reduced_polynomial_approximant(model, mix, p, 3, method="pcg", tol=1e-11)
    assert pcg.fit_info["converged"] and pcg.fit_info["residual"] <= 1e-11
    assert pcg.fit_info["method"] == "pcg" and dense.fit_info["solve"] == "cholesky"
    scale = float(dense.coefficients.abs().max())
    torch.testing.assert_close(pcg.coefficients, dense.coefficients, rtol=0, atol=1e-9 * scale)
    # the residual is a true one and the dense solve is exact
    assert dense.fit_info["residual"] <= 1e-12
    # a warm start from the solution needs no iteration
    again = reduced_polynomial_approximant(model, mix, p, 3, method="pcg", tol=1e-8, warm_start=pcg)
    assert again.fit_info["start"] == "warm_start" and again.fit_info["iterations"] == 0


# -- Monte Carlo -------------------------------------------------------------------------------------
def _mc_fit(model, mix, g: ReducedPolynomialApproximant, n: int, seed: int, chunk: int = 250_000):
    """Least squares on n samples in g's basis; (θ̂ [o, N], sandwich covariance [o, N, N])."""
    gen = torch.Generator().manual_seed(seed)
    basis = g.basis
    N = basis.size
    XtX = torch.zeros(N, N, dtype=DT)
    Xtf = torch.zeros(N, model.o, dtype=DT)
    xs = [mix.sample(min(chunk, n - i), gen) for i in range(0, n, chunk)]
    for x in xs:
        X = basis.features(g.pcs.project(x))
        XtX += X.T @ X
        Xtf += X.T @ model(x)
    coef = torch.linalg.solve(XtX, Xtf).T
    meat = torch.zeros(model.o, N, N, dtype=DT)
    for x in xs:
        X = basis.features(g.pcs.project(x))
        r = model(x) - X @ coef.T
        for o in range(model.o):
            Xr = X * r[:, o:o + 1]
            meat[o] += Xr.T @ Xr
    Ginv = torch.linalg.inv(XtX)
    return coef, Ginv @ meat @ Ginv


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("glu", "gelu")])
def test_cubic_matches_monte_carlo_least_squares(kind, act):
    d, p = 5, 3
    mix = _mixture(d, 3, seed=31)
    model = _model(kind, d, 8, 2, seed=32, activation=act)
    g = reduced_polynomial_approximant(model, mix, p, 3)
    mc, cov = _mc_fit(model, mix, g, 1_000_000, seed=33)
    delta = g.coefficients - mc
    stat = torch.einsum("on,on->o", delta, torch.linalg.solve(cov, delta[..., None])[..., 0])
    N = g.basis.size
    assert bool((stat < N + 6 * (2 * N) ** 0.5).all()), stat
    bad = g.coefficients.clone()
    bad[:, g.basis.offsets()[3]:] *= 1.05  # a 5 % error in the cubic terms is detected
    delta = bad - mc
    stat_bad = torch.einsum("on,on->o", delta, torch.linalg.solve(cov, delta[..., None])[..., 0])
    assert bool((stat_bad > N + 6 * (2 * N) ** 0.5).all()), stat_bad


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("glu", "relu")])
def test_fvu_matches_monte_carlo(kind, act):
    d, p = 5, 3
    mix = _mixture(d, 3, seed=41)
    model = _model(kind, d, 8, 2, seed=42, activation=act)
    fits = reduced_polynomial_approximants(model, mix, p, degrees=(2, 3))
    x = mix.sample(1_000_000, torch.Generator().manual_seed(43))
    f = model(x)
    mom = fits[3].expected_moments()
    var = float((mom["ef2"] - mom["ef"] ** 2).sum())
    for n, g in fits.items():
        err = (f - g(x)).pow(2).sum(1)
        mean, se = float(err.mean()), float(err.std()) / math.sqrt(err.numel())
        exact = g.fvu() * var
        assert abs(mean - exact) <= 3 * se, (n, mean, exact, se)
        per = g.fvu(per_output=True)
        assert per.shape == (model.o,) and bool((per > 0).all())
    assert fits[3].fvu() < fits[2].fvu()  # the cubic has the quadratic in its span


# -- special cases equal to today's approximants ----------------------------------------------------
@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("glu", "gelu")])
def test_full_rank_quadratic_and_linear_equal_todays_exact(kind, act):
    d = 4
    mix = _mixture(d, 3, seed=51)
    model = _model(kind, d, 7, 2, seed=52, activation=act)
    fits = reduced_polynomial_approximants(model, mix, d, degrees=(1, 2))
    x = mix.sample(2000, torch.Generator().manual_seed(53))
    quad = quadratic_approximant(model, mix, tol=1e-13, max_iter=2000, inner_dtype=None)
    lin = linear_approximant(model, mix)
    for n, ref in ((2, quad), (1, lin)):
        a, b = fits[n](x), ref(x)
        assert float((a - b).abs().max()) <= 1e-9 * float(b.abs().max()), n


@pytest.mark.parametrize("kind,act", [("mlp", "relu"), ("mlp", "tanh"), ("glu", "relu")])
def test_single_gaussian_cubic_equals_hermite_form(kind, act):
    d = 4
    mix = _mixture(d, 1, seed=61)
    model = _model(kind, d, 7, 2, seed=62, activation=act)
    g = reduced_polynomial_approximant(model, mix, d, 3)
    ref = gaussian_polynomial_approximant(model, mix, degree=3)
    x = mix.sample(2000, torch.Generator().manual_seed(63))
    a, b = g(x), ref(x)
    assert float((a - b).abs().max()) <= 1e-9 * float(b.abs().max())  # measured ≤ 1.2e-15
    assert abs(g.fvu() - ref.fvu()) <= 1e-10  # two exact FVU routes (θᵀGθ here, E g² in factored form there)
    # one Gaussian: the Gram is diagonal in the normalised Hermite basis of whitened u, G = I
    assert g.fit_info["residual"] <= 1e-12


# -- API -------------------------------------------------------------------------------------------
def test_api_shapes_round_trip_and_errors():
    d, p = 5, 3
    mix = _mixture(d, 2, seed=71)
    model = _model("mlp", d, 6, 3, seed=72, activation="relu")
    g = reduced_polynomial_approximant(model, mix, p)
    assert g.degree == 3 and g.components == p and g.coefficients.shape == (3, math.comb(p + 3, 3))
    assert {"method", "seconds", "residual", "iterations"} <= set(g.fit_info)
    x = mix.sample(50, torch.Generator().manual_seed(73))
    assert g(x).shape == (50, 3) and g(x[0]).shape == (3,)
    torch.testing.assert_close(g(x, chunk_size=7), g(x))
    # the monomial tensors evaluate to the same polynomial
    u = g.pcs.project(x)
    T = g.monomial_tensors()
    val = (T[0] + u @ T[1].T + torch.einsum("oij,ni,nj->no", T[2], u, u)
           + torch.einsum("oijk,ni,nj,nk->no", T[3], u, u, u))
    torch.testing.assert_close(val, g(x))
    h = ReducedPolynomialApproximant.from_state_dict(g.state_dict())
    torch.testing.assert_close(h(x), g(x))
    assert abs(h.fvu() - g.fvu()) <= 1e-12  # the moments travel with the state
    assert g.to(dtype=torch.float32)(x).dtype == torch.float32
    # a ridge shrinks towards 0 in the Hermite basis (and the FVU can only get worse)
    r = reduced_polynomial_approximant(model, mix, p, ridge=1e-1)
    assert float(r.coefficients.norm()) < float(g.coefficients.norm()) and r.fvu() >= g.fvu() - 1e-12
    pcs = principal_components(mix, p)
    torch.testing.assert_close(reduced_polynomial_approximant(model, mix, p, pcs=pcs).coefficients, g.coefficients)
    # degree ≤ 2 as an Approximant in x: same values, same exact FVU through exact_fvu
    q = reduced_polynomial_approximant(model, mix, p, 2)
    qa = q.to_approximant()
    assert qa.d == d and qa.degree == 2
    torch.testing.assert_close(qa(x), q(x))
    assert abs(exact_fvu(model, {"q": qa}, mix)["q"] - q.fvu()) <= 1e-10
    with pytest.raises(ApproxInputError, match="degree <= 2"):
        g.to_approximant()
    # float32 inputs are computed in float64
    g32 = reduced_polynomial_approximant(model.to(dtype=torch.float32), mix.to(dtype=torch.float32), p)
    assert g32.dtype == DT and float((g32.coefficients - g.coefficients).abs().max()) < 1e-4
    with pytest.raises(ApproxInputError, match="components"):
        reduced_polynomial_approximant(model, mix, d + 1)
    with pytest.raises(ApproxInputError, match="degree"):
        reduced_polynomial_approximant(model, mix, p, degree=-1)
    with pytest.raises(ApproxInputError, match="method"):
        reduced_polynomial_approximant(model, mix, p, method="qr")
    with pytest.raises(ApproxInputError, match="input dimension"):
        reduced_polynomial_approximant(_model("mlp", d + 1, 4, 2, 1, "relu"), mix, p)
    with pytest.raises(ApproxInputError, match="features"):
        g(torch.zeros(2, d + 1, dtype=DT))


@pytest.mark.parametrize("degree", [0, 1, 2, 3, 4])
def test_evaluation_equals_the_hermite_features_route(degree):
    """g(x) (monomial tensors by Horner's scheme) against the definition, Σ_α θ_α ψ_α(u(x)) with the
    normalised Hermite features, at every degree up to 4, chunked or not, and on one input."""
    d, p = 6, 4
    mix = _mixture(d, 3, seed=81, spread=1.5)
    model = _model("mlp", d, 7, 3, seed=82, activation="gelu")
    g = reduced_polynomial_approximant(model, mix, p, degree)
    x = mix.sample(301, torch.Generator().manual_seed(83))
    want = g.basis.features(g.pcs.project(x)) @ g.coefficients.T
    scale = float(want.abs().max())
    torch.testing.assert_close(g(x), want, rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(g(x, chunk_size=13), want, rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(g(x[5]), want[5], rtol=0, atol=1e-13 * scale)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    d, p = 5, 4
    mix = _mixture(d, 3, seed=81)
    model = _model("glu", d, 8, 2, seed=82, activation="gelu")
    cpu = reduced_polynomial_approximant(model, mix, p, method="pcg", tol=1e-10)
    gpu = reduced_polynomial_approximant(model.to("cuda"), mix.to("cuda"), p, method="pcg", tol=1e-10)
    assert gpu.device.type == "cuda" and gpu.fit_info["converged"]
    scale = float(cpu.coefficients.abs().max())
    torch.testing.assert_close(gpu.coefficients.cpu(), cpu.coefficients, rtol=0, atol=1e-8 * scale)
    x = mix.sample(100, torch.Generator().manual_seed(83))
    torch.testing.assert_close(gpu(x.to("cuda")).cpu(), cpu(x), rtol=1e-8, atol=1e-8 * scale)
    assert abs(gpu.fvu() - cpu.fvu()) <= 1e-8

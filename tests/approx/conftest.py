"""Shared fixtures of the approximant-library tests: random problems and an explicit Monte-Carlo
least-squares fit (the independent route the closed forms are compared with)."""

from __future__ import annotations

import pytest
import torch

from random_problems import random_model as _random_model
from random_problems import random_mixture as _random_mixture

DT = torch.float64


@pytest.fixture
def random_mixture():
    return _random_mixture


@pytest.fixture
def random_model():
    return _random_model


def features(x: torch.Tensor, degree: int) -> torch.Tensor:
    """Monomial basis [1, x_i, x_i x_j (i ≤ j)] (degree 2) or [1, x_i] (degree 1)."""
    cols = [torch.ones(x.shape[0], 1, dtype=x.dtype), x]
    if degree == 2:
        i, j = torch.triu_indices(x.shape[1], x.shape[1])
        cols.append(x[:, i] * x[:, j])
    return torch.cat(cols, 1)


def coefficients(approx, degree: int) -> torch.Tensor:
    """An approximant's coefficients in the monomial basis of :func:`features`, [o, p]."""
    parts = [approx.alpha[:, None], approx.beta]
    if degree == 2:
        d = approx.d
        i, j = torch.triu_indices(d, d)
        G = approx.gamma
        parts.append(torch.where(i == j, 1.0, 2.0) * G[:, i, j])
    return torch.cat(parts, 1)


def mc_least_squares(model, mixture, n: int, degree: int, seed: int, chunk: int = 200_000):
    """Explicit least squares on n mixture samples; returns (coef [o, p], cov_of_coef [o, p, p]).

    The coefficient covariance is the sandwich Ĝ⁻¹ M̂ Ĝ⁻¹ / n with Ĝ = XᵀX/n, M̂ = Σ x xᵀ r²/n,
    valid for the misspecified regression (the residual r is not noise independent of x).
    """
    gen = torch.Generator().manual_seed(seed)
    xs = [mixture.sample(min(chunk, n - i), gen) for i in range(0, n, chunk)]
    p = features(xs[0][:1], degree).shape[1]
    XtX = torch.zeros(p, p, dtype=DT)
    Xtf = torch.zeros(p, model.o, dtype=DT)
    for x in xs:
        X = features(x, degree)
        XtX += X.T @ X
        Xtf += X.T @ model(x)
    coef = torch.linalg.solve(XtX, Xtf).T  # [o, p]
    meat = torch.zeros(model.o, p, p, dtype=DT)
    for x in xs:
        X = features(x, degree)
        r = model(x) - X @ coef.T
        for o in range(model.o):
            Xr = X * r[:, o:o + 1]
            meat[o] += Xr.T @ Xr
    Ginv = torch.linalg.inv(XtX)
    cov = Ginv @ meat @ Ginv
    return coef, cov


def chi2_statistic(exact_coef: torch.Tensor, mc_coef: torch.Tensor, cov: torch.Tensor) -> torch.Tensor:
    """(θ − θ̂)ᵀ V⁻¹ (θ − θ̂) per output; ~ χ²_p when θ is the population least-squares solution."""
    delta = exact_coef - mc_coef
    return torch.einsum("op,op->o", delta, torch.linalg.solve(cov, delta[..., None])[..., 0])


@pytest.fixture
def mc_lsq():
    return mc_least_squares


@pytest.fixture
def basis():
    return features, coefficients, chi2_statistic


@pytest.fixture(autouse=True)
def _one_thread():
    """These problems are small: one intra-op thread avoids OpenMP synchronisation costs (which are
    large on a busy 2-core runner). Restored after each test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

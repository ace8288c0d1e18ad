"""Univariate Gaussian moments against scipy.integrate.quad (independent route)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from polyinterp.approx import derivative_expectations, gaussian_moments, hermite_moments
from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64
pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
SQ2PI = math.sqrt(2 * math.pi)


def _pdf(t):
    return math.exp(-0.5 * t * t) / SQ2PI


def _exp_neg(y):  # e^{-y} without overflow
    return math.exp(-y) if y > -700 else math.inf


# Each activation as (asymptote c, remainder φ(y) − c(y)) for y of the sign of μ, written without
# cancellation (1 − tanh by 2/(e^{2y}+1), …), so quad integrates a small smooth remainder accurately.
def _split(name, mu):
    if name == "relu":
        return (lambda y: y, lambda y: -y if y < 0 else 0.0) if mu > 0 else (lambda y: 0.0, lambda y: max(y, 0.0))
    if name == "gelu":
        return (lambda y: y, lambda y: -y * special.ndtr(-y)) if mu > 0 else (lambda y: 0.0, lambda y: y * special.ndtr(y))
    if name == "tanh":
        if mu > 0:
            return lambda y: 1.0, lambda y: -2.0 / (math.exp(2 * y) + 1) if y < 350 else 0.0
        return lambda y: -1.0, lambda y: 2.0 / (_exp_neg(2 * y) + 1)
    if name == "sigmoid":
        if mu > 0:
            return lambda y: 1.0, lambda y: -1.0 / (math.exp(y) + 1) if y < 700 else 0.0
        return lambda y: 0.0, lambda y: 1.0 / (_exp_neg(y) + 1)
    if name == "silu":
        if mu > 0:
            return lambda y: y, lambda y: -y / (math.exp(y) + 1) if y < 700 else 0.0
        return lambda y: 0.0, lambda y: y / (_exp_neg(y) + 1)
    if name == "identity":
        return lambda y: y, lambda y: 0.0
    raise KeyError(name)


_TK = [1.0, 0.0, 1.0, 0.0, 3.0, 0.0]  # E[t^k]


def quad_moment(name: str, mu: float, sigma: float, k: int) -> float:
    """E[φ(μ+σt)·t^k] = E[c(y) t^k] (analytic) + quad of the remainder, split at the bend t = −μ/σ."""
    asym, rem = _split(name, mu)
    if sigma == 0:
        return (asym(mu) + rem(mu)) * _TK[k]
    # asymptote part: c is 0, a constant or y = μ + σt, whose moments are known exactly
    c0 = asym(0.0)
    if asym(1.0) == c0:  # constant
        base = c0 * _TK[k]
    else:  # identity: E[(μ + σt) t^k]
        base = mu * _TK[k] + sigma * _TK[k + 1]
    t0 = -mu / sigma
    edges = sorted({-40.0, -12.0, -6.0, -2.0, 0.0, 2.0, 6.0, 12.0, 40.0, *[min(40.0, max(-40.0, t0 + c / max(sigma, 1.0))) for c in (-3, -1, 0, 1, 3)]})
    tot = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        if b > a:
            tot += integrate.quad(lambda t: rem(mu + sigma * t) * t**k * _pdf(t), a, b, epsabs=1e-17, epsrel=1e-13,
                                  limit=400)[0]
    return base + tot


def _close(got: float, ref: float, rel=1e-10, abs_=1e-14) -> bool:
    return abs(got - ref) <= max(abs_, rel * abs(ref))


ACTS = ["relu", "gelu", "tanh", "sigmoid", "silu", "identity"]


@pytest.mark.parametrize("name", ACTS)
@settings(max_examples=25, derandomize=True, deadline=None)
@given(mu=st.floats(-10, 10), sigma=st.one_of(st.just(0.0), st.floats(0, 10), st.floats(1e-8, 1e-2)))
def test_raw_moments_match_quad(name, mu, sigma):
    got = gaussian_moments(name, torch.tensor([mu], dtype=DT), torch.tensor([sigma], dtype=DT), kmax=4)[0]
    for k in range(5):
        ref = quad_moment(name, mu, sigma, k)
        assert _close(float(got[k]), ref), (name, mu, sigma, k, float(got[k]), ref)


@pytest.mark.parametrize("name", ACTS)
def test_raw_moments_grid(name):
    mus = [-10.0, -3.0, -0.5, 0.0, 0.7, 4.0, 10.0]
    sigmas = [0.0, 1e-6, 0.01, 0.3, 1.0, 3.0, 10.0]
    M, S = torch.meshgrid(torch.tensor(mus, dtype=DT), torch.tensor(sigmas, dtype=DT), indexing="ij")
    got = gaussian_moments(name, M, S, kmax=4)
    assert got.shape == (7, 7, 5)
    for i, mu in enumerate(mus):
        for j, s in enumerate(sigmas):
            for k in range(5):
                ref = quad_moment(name, mu, s, k)
                assert _close(float(got[i, j, k]), ref), (name, mu, s, k, float(got[i, j, k]), ref)


@pytest.mark.parametrize("name", ["relu", "gelu"])
@pytest.mark.parametrize("mu,sigma", [(-10.0, 1.0), (-100.0, 10.0), (-1.0, 0.1), (-30.0, 3.0)])
def test_left_tail_relative_accuracy(name, mu, sigma):
    """μ/σ = −10: values ~1e-23; relative error below 1e-8 (no 1 − Φ by subtraction)."""
    f = (lambda y: max(y, 0.0)) if name == "relu" else (lambda y: y * special.ndtr(y))
    lo = -mu / sigma - 3 if name == "relu" else -40.0
    got = gaussian_moments(name, torch.tensor(mu, dtype=DT), torch.tensor(sigma, dtype=DT), kmax=4)
    for k in range(5):
        ref = integrate.quad(lambda t: f(mu + sigma * t) * t**k * _pdf(t), lo, 40, epsabs=0, epsrel=1e-13,
                             points=None, limit=500)[0] if name == "gelu" else \
            integrate.quad(lambda t: f(mu + sigma * t) * t**k * _pdf(t), -mu / sigma, 60, epsabs=0, epsrel=1e-13)[0]
        assert ref != 0
        assert abs(float(got[k]) / ref - 1) < 1e-8, (k, float(got[k]), ref)


@pytest.mark.parametrize("name", ACTS)
@pytest.mark.parametrize("mu,sigma", [(-2.0, 0.5), (0.3, 1.0), (1.5, 4.0), (-6.0, 2.0)])
def test_hermite_moments_match_quad(name, mu, sigma):
    """E[φ(y) He_k(t)] = σᵏ E[φ⁽ᵏ⁾(y)] (Stein) against quad of φ·He_k."""
    he = [lambda t: 1.0, lambda t: t, lambda t: t * t - 1, lambda t: t**3 - 3 * t, lambda t: t**4 - 6 * t * t + 3]
    got = hermite_moments(name, torch.tensor(mu, dtype=DT), torch.tensor(sigma, dtype=DT), kmax=4)
    asym, rem = _split(name, mu)
    f = lambda y: asym(y) + rem(y)  # noqa: E731
    t0 = -mu / sigma
    for k in range(5):
        ref = sum(integrate.quad(lambda t: f(mu + sigma * t) * he[k](t) * _pdf(t), a, b, epsabs=1e-15, epsrel=1e-12,
                                 limit=400)[0] for a, b in [(-40, t0), (t0, 40)])
        assert _close(float(got[k]), ref, rel=1e-9, abs_=1e-12), (k, float(got[k]), ref)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "silu", "gelu"])
def test_derivative_expectations_at_zero_sigma_are_derivatives(name):
    mu = torch.tensor([-1.3, 0.0, 0.4, 2.0], dtype=DT)
    got = derivative_expectations(name, mu, torch.zeros_like(mu), kmax=3)
    from polyinterp.approx import get_activation

    y = mu.clone().requires_grad_(True)
    vals = [get_activation(name)(y)]
    for _ in range(3):
        vals.append(torch.autograd.grad(vals[-1].sum(), y, create_graph=True)[0])
    for k in range(4):
        torch.testing.assert_close(got[:, k], vals[k].detach(), rtol=1e-12, atol=1e-14)


def test_relu_at_zero_sigma():
    mu = torch.tensor([-2.0, 3.0], dtype=DT)
    d = derivative_expectations("relu", mu, torch.zeros_like(mu), kmax=4)
    torch.testing.assert_close(d, torch.tensor([[0.0, 0, 0, 0, 0], [3.0, 1, 0, 0, 0]], dtype=DT))
    h = hermite_moments("relu", mu, torch.zeros_like(mu), kmax=4)
    torch.testing.assert_close(h, torch.tensor([[0.0, 0, 0, 0, 0], [3.0, 0, 0, 0, 0]], dtype=DT))  # φ(μ)·[k = 0]


def test_gauss_hermite_option_is_accurate_for_smooth_units_only():
    mu, s = torch.tensor(0.3, dtype=DT), torch.tensor(0.5, dtype=DT)
    gh = gaussian_moments("tanh", mu, s, method="hermite")
    ref = torch.tensor([quad_moment("tanh", 0.3, 0.5, k) for k in range(5)], dtype=DT)
    torch.testing.assert_close(gh, ref, rtol=1e-10, atol=1e-14)
    sharp = gaussian_moments("tanh", mu, torch.tensor(10.0, dtype=DT), method="hermite")
    ref10 = torch.tensor([quad_moment("tanh", 0.3, 10.0, k) for k in range(5)], dtype=DT)
    assert float((sharp - ref10).abs().max()) > 1e-8  # why the mapped rule is the default


def test_custom_callable_and_errors():
    got = gaussian_moments(lambda y: y * y, torch.tensor(1.0, dtype=DT), torch.tensor(2.0, dtype=DT), kmax=2)
    # E[(1+2t)²] = 5, E[(1+2t)² t] = 4, E[(1+2t)² t²] = 1 + 4·3 = 13
    torch.testing.assert_close(got, torch.tensor([5.0, 4.0, 13.0], dtype=DT), rtol=1e-13, atol=1e-13)
    with pytest.raises(ApproxInputError, match="standard deviations must be >= 0"):
        gaussian_moments("relu", torch.tensor(0.0), torch.tensor(-1.0))
    with pytest.raises(ApproxInputError, match="unknown activation 'swish2'"):
        gaussian_moments("swish2", torch.tensor(0.0), torch.tensor(1.0))
    with pytest.raises(ApproxInputError, match="finite"):
        gaussian_moments("relu", torch.tensor(float("nan")), torch.tensor(1.0))

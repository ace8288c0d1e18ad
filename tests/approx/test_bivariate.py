"""Bivariate Gaussian moments against independent routes: high-precision quadrature (mpmath) of the
defining integrals, scipy's 2-D quadrature, Monte Carlo for the GLU's four-variable moment."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest
import torch
from scipy import integrate

from polyinterp.approx.moments.bivariate import bvn_upper, product_moment, relu_product_moment

DT = torch.float64
mp.mp.dps = 30


def _t(*v):
    return [torch.tensor(x, dtype=DT) for x in v]


def _bvn_reference(h, k, r):
    """P(U > h, V > k) by Plackett's integral from ρ = 0, in 30-digit arithmetic."""
    if abs(r) == 1.0:
        return float(mp.ncdf(-max(h, k))) if r > 0 else max(0.0, float(mp.ncdf(-h) - mp.ncdf(k)))
    f = lambda th: mp.exp(-(h * h + k * k - 2 * h * k * mp.sin(th)) / (2 * mp.cos(th) ** 2))  # noqa: E731
    return float(mp.ncdf(-h) * mp.ncdf(-k) + mp.quad(f, [0, mp.asin(r)]) / (2 * mp.pi))


@pytest.mark.parametrize("r", [-1.0, -0.999, -0.93, -0.71, -0.7, -0.3, 0.0, 0.2, 0.7, 0.71, 0.9, 0.999, 1.0])
def test_bvn_upper_matches_plackett_quadrature(r):
    for h, k in itertools.product([-8.0, -3.0, -0.5, 0.0, 0.7, 2.5, 6.0], [-6.0, -1.3, 0.0, 0.4, 3.0, 8.0]):
        ours = float(bvn_upper(*_t(h, k, r)))
        assert ours == pytest.approx(_bvn_reference(h, k, r), abs=1e-13), (h, k, r)


def _relu_reference(m1, m2, s1, s2, r):
    """E[ReLU(a) ReLU(b)] as the 2-D integral with its inner integral (over b given a) done in closed
    form, the outer by 30-digit quadrature split at both kinks."""
    def inner(u):  # E[ReLU(b) | a = m1 + s1 u]
        mb, sb = m2 + s2 * r * u, s2 * mp.sqrt(max(1 - r * r, 0))
        if sb == 0:
            return max(mb, 0)
        return mb * mp.ncdf(mb / sb) + sb * mp.npdf(mb / sb)
    if s1 == 0:  # a is the constant m1
        eb = m2 * mp.ncdf(m2 / s2) + s2 * mp.npdf(m2 / s2) if s2 > 0 else max(m2, 0)
        return max(m1, 0) * float(eb)
    lo = -m1 / s1
    pts = {lo, lo + 1, lo + 4, 0.0}
    if r != 0 and s2 > 0:
        pts.add(-m2 / (s2 * r))
    pts = sorted(p for p in pts if p >= lo)
    return float(mp.quad(lambda u: (m1 + s1 * u) * inner(u) * mp.npdf(u), pts + [mp.inf]))


RELU_CASES = [(0.3, -0.2, 1.0, 2.0, 0.5), (8.0, 1.0, 1.0, 1.0, 0.999), (-8.0, 1.0, 1.0, 1.0, -0.999),
              (1.0, 1.0, 1.0, 1.0, 1.0), (1.0, -0.5, 1.0, 2.0, -1.0), (0.5, 0.5, 0.0, 1.0, 0.3),
              (0.5, -0.5, 1.0, 0.0, 0.3), (2.0, 3.0, 0.0, 0.0, 0.1), (-1.0, 2.0, 0.5, 1.5, 0.999),
              (1.0, 2.0, 0.5, 1.5, -0.999), (0.1, 0.2, 1.0, 1.0, 0.9), (-3.0, -2.0, 1.0, 1.0, 0.95),
              (3.0, -8.0, 1.0, 1.0, -0.3), (8.0, 8.0, 1.0, 1.0, 0.0), (-8.0, -8.0, 1.0, 1.0, 0.999),
              (0.0, 0.0, 1.0, 1.0, -0.999), (5.0, -1.0, 0.5, 3.0, 0.7), (-0.5, 4.0, 2.0, 0.5, -0.71),
              (100.0, 1.0, 1.0, 1.0, 0.5), (1.0, 1.0, 1e-9, 1.0, 0.3), (60.0, -70.0, 1.0, 1.0, 0.9),
              (1.0, 2.0, 1e-3, 1e-3, 0.999)]


@pytest.mark.parametrize("case", RELU_CASES)
def test_relu_product_moment_matches_quadrature(case):
    ours = float(relu_product_moment(*_t(*case)))
    ref = _relu_reference(*case)
    assert ours == pytest.approx(ref, rel=1e-10, abs=1e-12), case


def test_relu_product_moment_matches_scipy_2d_quadrature():
    for m1, m2, s1, s2, r in [(0.3, -0.2, 1.0, 2.0, 0.5), (-0.4, 0.9, 0.7, 1.2, -0.6)]:
        c = r * s1 * s2
        det = (s1 * s2) ** 2 - c * c

        def f(y, x):
            dx, dy = x - m1, y - m2
            q = (s2 * s2 * dx * dx - 2 * c * dx * dy + s1 * s1 * dy * dy) / det
            return x * y * math.exp(-0.5 * q) / (2 * math.pi * math.sqrt(det))
        ref, err = integrate.dblquad(f, 0, m1 + 14 * s1, 0, m2 + 14 * s2, epsabs=1e-13, epsrel=1e-12)
        assert float(relu_product_moment(*_t(m1, m2, s1, s2, r))) == pytest.approx(ref, rel=1e-9)


def _cov2(s1, s2, r):
    c = r * s1 * s2
    return torch.tensor([[s1 * s1, c], [c, s2 * s2]], dtype=DT)


def test_generic_route_equals_the_closed_form_for_relu():
    mean = torch.tensor([c[:2] for c in RELU_CASES], dtype=DT)
    cov = torch.stack([_cov2(*c[2:]) for c in RELU_CASES])
    closed = relu_product_moment(mean[:, 0], mean[:, 1], cov[:, 0, 0].sqrt(), cov[:, 1, 1].sqrt(),
                                 torch.tensor([c[4] for c in RELU_CASES], dtype=DT))
    torch.testing.assert_close(product_moment("relu", mean, cov), closed, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("act,fn", [("tanh", math.tanh), ("gelu", lambda y: 0.5 * y * math.erfc(-y / math.sqrt(2)))])
def test_smooth_activations_match_quadrature(act, fn):
    """Against nested adaptive quadrature (scipy) of the 2-D integral in (u, v), a = m1 + s1 u,
    b = m2 + s2 (ρ u + √(1 − ρ²) v), each split where its argument crosses 0."""
    npdf = lambda t: math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)  # noqa: E731
    for m1, m2, s1, s2, r in [(0.3, -0.2, 1.0, 2.0, 0.5), (1.0, 0.5, 3.0, 0.2, -0.95), (-2.0, 1.0, 0.5, 10.0, 0.999)]:
        sb = s2 * math.sqrt(1 - r * r)

        def outer(u):
            mb = m2 + s2 * r * u
            inner = integrate.quad(lambda v: fn(mb + sb * v) * npdf(v), -12, 12, points=[max(-12, min(12, -mb / sb))],
                                   epsabs=1e-14, epsrel=1e-13, limit=200)[0]
            return fn(m1 + s1 * u) * inner * npdf(u)
        pts = sorted({max(-12, min(12, -m1 / s1)), max(-12, min(12, -m2 / (s2 * r)))})
        ref = integrate.quad(outer, -12, 12, points=pts, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
        ours = float(product_moment(act, torch.tensor([m1, m2], dtype=DT), _cov2(s1, s2, r)))
        assert ours == pytest.approx(ref, rel=1e-9, abs=1e-12), (act, m1, m2, s1, s2, r)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_glu_moment_matches_monte_carlo(act):
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 4, generator=g, dtype=DT)
    cov = A @ A.T / 4 + 0.1 * torch.eye(4, dtype=DT)
    mean = torch.tensor([0.3, -0.5, 1.0, -0.4], dtype=DT)
    ours = float(product_moment(act, mean, cov, glu=True))
    n = 2_000_000
    x = mean + torch.randn(n, 4, generator=g, dtype=DT) @ torch.linalg.cholesky(cov).T
    phi = torch.nn.functional.relu if act == "relu" else torch.nn.functional.gelu
    v = phi(x[:, 0]) * x[:, 2] * phi(x[:, 1]) * x[:, 3]
    assert abs(ours - float(v.mean())) <= 3 * float(v.std()) / math.sqrt(n)
    # the degenerate pair (i = j): E[φ(a)² z²] against the same samples
    cov_ii = cov[[0, 0, 2, 2]][:, [0, 0, 2, 2]]
    ours_ii = float(product_moment(act, mean[[0, 0, 2, 2]], cov_ii, glu=True))
    v = (phi(x[:, 0]) * x[:, 2]) ** 2
    assert abs(ours_ii - float(v.mean())) <= 3 * float(v.std()) / math.sqrt(n)


def test_dead_units_and_zero_variance_are_exact_limits():
    # σ = 0 on one side factors: ReLU(m1)·E[ReLU(b)]
    e = float(relu_product_moment(*_t(0.7, 0.2, 0.0, 1.3, 0.4)))
    z = 0.2 / 1.3
    assert e == pytest.approx(0.7 * (0.2 * float(mp.ncdf(z)) + 1.3 * float(mp.npdf(z))), rel=1e-14)
    assert float(relu_product_moment(*_t(-0.7, 0.2, 0.0, 1.3, 0.4))) == 0.0
    assert float(relu_product_moment(*_t(2.0, 3.0, 0.0, 0.0, 0.0))) == 6.0
    # deep in the negative tail the moment is 0, not a cancellation residue
    assert 0.0 <= float(relu_product_moment(*_t(-40.0, -40.0, 1.0, 1.0, 0.5))) < 1e-300

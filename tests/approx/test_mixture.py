"""GaussianMixture: validation, sampling, total moments (law of total covariance), weights."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx import GaussianMixture
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.errors import PolyinterpError

DT = torch.float64


def _parts(K=3, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT)
    return torch.tensor([0.6, 0.3, 0.1], dtype=DT)[:K], torch.randn(K, d, generator=g, dtype=DT), \
        A @ A.transpose(1, 2) / d + 0.1 * torch.eye(d, dtype=DT)


@pytest.mark.parametrize("mutate,match", [
    (lambda w, m, c: (w * 2, m, c), "sum to 1"),
    (lambda w, m, c: (torch.tensor([1.2, -0.3, 0.1], dtype=DT), m, c), ">= 0"),
    (lambda w, m, c: (w, m[:, :3], c), "shapes disagree"),
    (lambda w, m, c: (w[:2], m, c), "shapes disagree"),
    (lambda w, m, c: (w, m[0], c), r"means must be \[K, d\]"),
    (lambda w, m, c: (w, m, c + torch.triu(torch.ones_like(c), 1) * 0.1), "not symmetric"),
    (lambda w, m, c: (w, m, c - 2.0 * torch.eye(4, dtype=DT)), "not positive semi-definite"),
    (lambda w, m, c: (w, m * float("nan"), c), "NaN"),
])
def test_validation_errors_name_the_problem(mutate, match):
    with pytest.raises(ApproxInputError, match=match) as err:
        GaussianMixture(*mutate(*_parts()))
    assert isinstance(err.value, PolyinterpError)


def test_singular_psd_covariance_is_accepted_and_sampled():
    w, m, c = _parts()
    c[:, 0, :] = 0
    c[:, :, 0] = 0  # a constant coordinate (like MNIST's border pixels)
    mix = GaussianMixture(w, m, c)
    x, lab = mix.sample(1000, seed=1, return_labels=True)
    torch.testing.assert_close(x[:, 0], m[lab, 0])


def test_total_moments_match_explicit_formula_and_samples():
    w, m, c = _parts()
    mix = GaussianMixture(w, m, c)
    mu = (w[:, None] * m).sum(0)
    cov = sum(w[k] * (c[k] + torch.outer(m[k] - mu, m[k] - mu)) for k in range(3))
    torch.testing.assert_close(mix.total_mean(), mu, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(mix.total_cov(), cov, rtol=1e-13, atol=1e-14)
    x, lab = mix.sample(400_000, seed=2, return_labels=True)
    n = x.shape[0]
    se_mean = (torch.diagonal(cov) / n).sqrt()
    assert bool(((x.mean(0) - mu).abs() < 5 * se_mean).all())
    emp = torch.cov(x.T)
    se_cov = ((torch.diagonal(cov)[:, None] * torch.diagonal(cov)[None] + cov**2) / n).sqrt() * 2
    assert bool(((emp - cov).abs() < 5 * se_cov).all())
    freq = torch.bincount(lab, minlength=3).to(DT) / n  # the weights are honoured
    assert bool(((freq - w).abs() < 5 * (w * (1 - w) / n).sqrt()).all())
    for k in range(3):  # component-wise moments
        xk = x[lab == k]
        torch.testing.assert_close(torch.cov(xk.T), c[k], rtol=0, atol=6 * float(c[k].abs().max()) / len(xk) ** 0.5)


def test_sampling_is_reproducible_by_seed_and_generator():
    mix = GaussianMixture(*_parts())
    a = mix.sample(50, seed=7)
    b = mix.sample(50, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    assert not torch.equal(a, mix.sample(50, seed=8))


def test_samples_in_float32_are_the_float64_points_to_float32_round_off():
    """sample(dtype=float32) draws as in float64 (same labels, same normals) and maps them in float32:
    within d + 1 float32 ulps of the points' scale (the rounding of a d-term product and a sum; 0.63 measured
    at d = 4), and the generator left where float64 leaves it."""
    mix = GaussianMixture(*_parts())
    g64, g32 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    (x64, l64), (x32, l32) = mix.sample(200, g64, return_labels=True), mix.sample(200, g32, return_labels=True,
                                                                                  dtype=torch.float32)
    assert x32.dtype == torch.float32 and torch.equal(l32, l64)
    bound = (mix.d + 1) * torch.finfo(torch.float32).eps * float(x64.abs().max())
    assert 0 < float((x32.double() - x64).abs().max()) < bound
    torch.testing.assert_close(mix.sample(5, g64).float(), mix.sample(5, g32, dtype=torch.float32), rtol=0, atol=bound)
    with pytest.raises(ApproxInputError, match="floating dtype, got torch.int64"):
        mix.sample(5, seed=1, dtype=torch.int64)


def test_to_dtype_and_single():
    mix = GaussianMixture(*_parts()).to(dtype=torch.float32)
    assert mix.means.dtype == torch.float32 and mix.K == 3 and mix.d == 4
    one = GaussianMixture.single(torch.zeros(2), torch.eye(2))
    assert one.K == 1 and one.dtype == DT
    torch.testing.assert_close(one.total_cov(), torch.eye(2, dtype=DT))
    mm = GaussianMixture(*_parts()).moment_matched()
    torch.testing.assert_close(mm.covs[0], GaussianMixture(*_parts()).total_cov())


def test_float32_weights_summing_to_one_in_float32_are_accepted():
    GaussianMixture(torch.tensor([0.5, 0.3, 0.2]), torch.zeros(3, 2), torch.eye(2).expand(3, 2, 2))

"""Whitened principal components of a mixture (approx/core/principal_components.py)."""

from __future__ import annotations

import math

import pytest
import torch

from polyinterp.approx import GaussianMixture, principal_components
from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64


def _mixture(d, K, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT) / math.sqrt(d)
    w = torch.rand(K, generator=g, dtype=DT) + 0.2
    return GaussianMixture(w / w.sum(), torch.randn(K, d, generator=g, dtype=DT),
                           A @ A.transpose(1, 2) + 0.1 * torch.eye(d, dtype=DT))


def test_components_are_the_top_eigenvectors_and_whitened():
    mix = _mixture(6, 3, 0)
    pcs = principal_components(mix, 4)
    evals = torch.linalg.eigvalsh(mix.total_cov()).flip(0)
    torch.testing.assert_close(pcs.eigenvalues, evals[:4])
    assert abs(pcs.explained - float(evals[:4].sum() / evals.sum())) < 1e-12
    P = pcs.directions
    torch.testing.assert_close(P.T @ P, torch.eye(4, dtype=DT))
    torch.testing.assert_close(mix.total_cov() @ P, P * pcs.eigenvalues)
    # u has mean 0 and covariance I under the mixture (law of total covariance on the reduced moments)
    m, S = pcs.reduce(mix)
    torch.testing.assert_close(mix.weights @ m, torch.zeros(4, dtype=DT), rtol=0, atol=1e-12)
    cov = torch.einsum("k,kij->ij", mix.weights, S + m[:, :, None] * m[:, None, :])
    torch.testing.assert_close(cov, torch.eye(4, dtype=DT))
    x = mix.sample(5, torch.Generator().manual_seed(1))
    torch.testing.assert_close(pcs.project(x), (x - mix.total_mean()) @ P / pcs.eigenvalues.sqrt())
    # signs are fixed: the largest entry of every direction is positive
    assert bool((P.gather(0, P.abs().argmax(0, keepdim=True)) > 0).all())
    torch.testing.assert_close(principal_components(mix, 4).directions, P)


def test_errors():
    mix = _mixture(4, 2, 2)
    with pytest.raises(ApproxInputError, match="components"):
        principal_components(mix, 5)
    flat = GaussianMixture(torch.ones(1, dtype=DT), torch.zeros(1, 3, dtype=DT),
                           torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=DT))[None])
    with pytest.raises(ApproxInputError, match="at most 2 components"):
        principal_components(flat, 3)
    with pytest.raises(ApproxInputError, match="GaussianMixture"):
        principal_components("mixture", 2)

"""The normalised Hermite basis (approx/moments/polynomial_basis.py): size and order, orthonormality under
N(0, I) by tensor Gauss–Hermite quadrature (exact for polynomials), pack/unpack adjointness, and
the monomial tensors against the features."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis, basis_size, monomial_tensors, symmetrize

DT = torch.float64


def _grid(p: int, pts: int):
    x, w = np.polynomial.hermite_e.hermegauss(pts)
    w = w / math.sqrt(2 * math.pi)
    nodes = torch.tensor(list(itertools.product(x, repeat=p)), dtype=DT)
    weights = torch.tensor([math.prod(c) for c in itertools.product(w, repeat=p)], dtype=DT)
    return nodes, weights


def test_size_order_and_multi_indices():
    B = PolynomialBasis(50, 3)
    assert B.size == basis_size(50, 3) == 23426 and B.block_sizes() == [1, 50, 1275, 22100]
    small = PolynomialBasis(3, 2)
    alpha = small.multi_indices()
    assert alpha.tolist()[:5] == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [2, 0, 0]]
    assert small.degrees().tolist() == alpha.sum(1).tolist()
    with pytest.raises(ApproxInputError, match="degree"):
        PolynomialBasis(3, -1)
    with pytest.raises(ApproxInputError, match="variables"):
        PolynomialBasis(0, 2)


@pytest.mark.parametrize("p,n", [(2, 4), (3, 3)])
def test_features_are_orthonormal_under_the_standard_gaussian(p, n):
    B = PolynomialBasis(p, n)
    z, w = _grid(p, n + 2)
    F = B.features(z)
    torch.testing.assert_close((F.T * w) @ F, torch.eye(B.size, dtype=DT), rtol=0, atol=1e-12)


def test_pack_is_the_adjoint_of_unpack_and_monomials_evaluate_alike():
    p, n, o = 3, 3, 2
    B = PolynomialBasis(p, n)
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(o, B.size, generator=g, dtype=DT)
    T = B.unpack(theta)
    for t in T[2:]:
        torch.testing.assert_close(t, symmetrize(t))
    R = [torch.randn(o, generator=g, dtype=DT)] + [symmetrize(torch.randn(o, *([p] * b), generator=g, dtype=DT))
                                                   for b in range(1, n + 1)]
    lhs = (B.pack(R) * theta).sum(1)
    rhs = sum((r * t).reshape(o, -1).sum(1) for r, t in zip(R, T, strict=True))
    torch.testing.assert_close(lhs, rhs)
    u = torch.randn(7, p, generator=g, dtype=DT)
    M = monomial_tensors(T)
    val = (M[0] + u @ M[1].T + torch.einsum("oij,ni,nj->no", M[2], u, u)
           + torch.einsum("oijk,ni,nj,nk->no", M[3], u, u, u))
    torch.testing.assert_close(val, B.features(u) @ theta.T)
    # Hermite tensors evaluate through He⁽ᵃ⁾(u) too: He_ij = u_i u_j − δ_ij
    eye = torch.eye(p, dtype=DT)
    He2 = u[:, :, None] * u[:, None, :] - eye
    He3 = (u[:, :, None, None] * u[:, None, :, None] * u[:, None, None, :]
           - 3 * symmetrize(eye[None, :, :, None] * u[:, None, None, :]))
    val = T[0] + u @ T[1].T + torch.einsum("oij,nij->no", T[2], He2) + torch.einsum("oijk,nijk->no", T[3], He3)
    torch.testing.assert_close(val, B.features(u) @ theta.T)

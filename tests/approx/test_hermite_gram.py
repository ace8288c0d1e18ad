"""The Gram operator of the normalised Hermite basis under a mixture (approx/moments/hermite_gram.py) against
tensor Gauss–Hermite quadrature (exact for polynomials of the degree used), for several degrees."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from polyinterp.approx.moments.hermite_gram import (HermiteGram, apply_all_slots, gram_diagonal, hermite_means)
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis

DT = torch.float64


def _problem(p, K, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, p, p, generator=g, dtype=DT) / math.sqrt(p)
    S = A @ A.transpose(1, 2) + 0.3 * torch.eye(p, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.2
    return w / w.sum(), torch.randn(K, p, generator=g, dtype=DT), S


def _quadrature_gram(w, m, S, basis, pts):
    x, wq = np.polynomial.hermite_e.hermegauss(pts)
    wq = wq / math.sqrt(2 * math.pi)
    p = basis.p
    z = torch.tensor(list(itertools.product(x, repeat=p)), dtype=DT)
    wz = torch.tensor([math.prod(c) for c in itertools.product(wq, repeat=p)], dtype=DT)
    G = 0
    for k in range(w.shape[0]):
        F = basis.features(m[k] + z @ torch.linalg.cholesky(S[k]).T)
        G = G + w[k] * (F.T * wz) @ F
    return G


@pytest.mark.parametrize("p,n,K", [(3, 3, 3), (2, 4, 2), (4, 2, 3), (3, 1, 2)])
def test_gram_equals_quadrature(p, n, K):
    w, m, S = _problem(p, K, seed=p + 10 * n)
    basis = PolynomialBasis(p, n)
    op = HermiteGram(w, m, S, basis)
    G = op.dense()
    ref = _quadrature_gram(w, m, S, basis, n + 2)
    assert float((G - ref).abs().max()) <= 1e-11 * float(ref.abs().max())
    theta = torch.randn(3, basis.size, generator=torch.Generator().manual_seed(1), dtype=DT)
    torch.testing.assert_close(op(theta), theta @ G, rtol=1e-12, atol=1e-12 * float(G.abs().max()))
    # symmetric before the explicit symmetrisation of dense(), to round-off
    raw = op(torch.eye(basis.size, dtype=DT))
    assert float((raw - raw.T).abs().max()) <= 1e-13 * float(raw.abs().max())
    torch.testing.assert_close(gram_diagonal(w, m, S, basis), G.diagonal(), rtol=1e-12, atol=1e-12)
    # tensors() is the same operator before packing
    Rt = op.tensors(basis.unpack(theta))
    torch.testing.assert_close(basis.pack(Rt), op(theta))


def test_hermite_means_and_slot_products():
    _, m, S = _problem(3, 1, seed=5)
    h = hermite_means(m[0], S[0], 4)
    x, wq = np.polynomial.hermite_e.hermegauss(6)
    wq = wq / math.sqrt(2 * math.pi)
    z = torch.tensor(list(itertools.product(x, repeat=3)), dtype=DT)
    wz = torch.tensor([math.prod(c) for c in itertools.product(wq, repeat=3)], dtype=DT)
    u = m[0] + z @ torch.linalg.cholesky(S[0]).T
    eye = torch.eye(3, dtype=DT)
    He2 = u[:, :, None] * u[:, None, :] - eye
    torch.testing.assert_close(h[1], (wz[:, None] * u).sum(0))
    torch.testing.assert_close(h[2], torch.einsum("n,nij->ij", wz, He2))
    He3 = (u[:, :, None, None] * u[:, None, :, None] * u[:, None, None, :]
           - (eye[None, :, :, None] * u[:, None, None, :] + eye[None, :, None, :] * u[:, None, :, None]
              + eye[None, None, :, :] * u[:, :, None, None]))
    torch.testing.assert_close(h[3], torch.einsum("n,nijk->ijk", wz, He3))
    X = torch.randn(2, 3, 3, 3, dtype=DT, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(apply_all_slots(X, S[0]), torch.einsum("oijk,ia,jb,kc->oabc", X, S[0], S[0], S[0]))

"""E_k[f(x) He_j(u)] by tilting and Stein (approx/moments/hermite_rhs.py) against tensor Gauss–Hermite
quadrature over x (smooth activations, where that quadrature converges fast), and the special case
E[φ(y) He_α(z)] = E[φ^{(|α|)}(y)] c^α for u = z ~ N(0, I)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from polyinterp.approx import MLP
from polyinterp.approx.moments.hermite_rhs import rhs_component
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis
from polyinterp.approx.moments.univariate import derivative_expectations
from random_problems import random_model as _model

DT = torch.float64



@pytest.mark.parametrize("kind,act", [("mlp", "gelu"), ("mlp", "tanh"), ("glu", "gelu"), ("glu", "sigmoid")])
def test_rhs_equals_quadrature(kind, act):
    d, p, n = 3, 2, 3
    g = torch.Generator().manual_seed(7)
    model = _model(kind, d, 5, 2, seed=8, activation=act)
    mean = torch.randn(d, generator=g, dtype=DT)
    A = torch.randn(d, d, generator=g, dtype=DT) / math.sqrt(d)
    cov = A @ A.T + 0.2 * torch.eye(d, dtype=DT)
    shift = torch.randn(d, generator=g, dtype=DT)
    B = torch.randn(d, p, generator=g, dtype=DT)
    basis = PolynomialBasis(p, n)
    ours = basis.pack(rhs_component(model, mean, cov, shift, B, n))
    x, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / math.sqrt(2 * math.pi)
    z = torch.tensor(list(itertools.product(x, repeat=d)), dtype=DT)
    wz = torch.tensor([math.prod(c) for c in itertools.product(w, repeat=d)], dtype=DT)
    X = mean + z @ torch.linalg.cholesky(cov).T
    ref = ((basis.features((X - shift) @ B).T * wz) @ model(X)).T
    assert float((ours - ref).abs().max()) <= 1e-9 * float(ref.abs().max())


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_standard_gaussian_special_case(act):
    # x = z ~ N(0, I_p), u = z: E[φ(y) He_α(z)] = E[φ^{(|α|)}(y)] c^α with c = w
    p, n = 3, 3
    model = _model("mlp", p, 4, 1, seed=9, activation=act)
    model = MLP(model.W1, model.b1, torch.eye(4, dtype=DT), torch.zeros(4, dtype=DT), act)  # one output per unit
    R = rhs_component(model, torch.zeros(p, dtype=DT), torch.eye(p, dtype=DT), torch.zeros(p, dtype=DT),
                      torch.eye(p, dtype=DT), n)
    W = model.W1
    D = derivative_expectations(act, model.b1, W.norm(dim=1), kmax=n)
    torch.testing.assert_close(R[3], D[:, 3, None, None, None] * torch.einsum("hi,hj,hk->hijk", W, W, W))
    torch.testing.assert_close(R[1], D[:, 1, None] * W)
    torch.testing.assert_close(R[0], D[:, 0])

"""Dense matrices of maps on quadratic coefficients θ = (α, β, Γ symmetric), for tests that check the
matrix-free operators against an explicit route."""

from __future__ import annotations

import math

import torch

DT = torch.float64


def theta_basis(d: int):
    """Orthonormal basis of (α, β, Γ symmetric) under αα' + β·β' + tr ΓΓ'."""
    out = []

    def theta(a=0.0, b=None, G=None):
        return (torch.tensor([a], dtype=DT), (b if b is not None else torch.zeros(d, dtype=DT))[None],
                (G if G is not None else torch.zeros(d, d, dtype=DT))[None])
    out.append(theta(a=1.0))
    for i in range(d):
        out.append(theta(b=torch.eye(d, dtype=DT)[i]))
    for i in range(d):
        for j in range(i, d):
            G = torch.zeros(d, d, dtype=DT)
            G[i, j] = G[j, i] = 1.0 if i == j else 1 / math.sqrt(2)
            out.append(theta(G=G))
    return out


def operator_matrix(op, basis) -> torch.Tensor:
    """[p, p] matrix of a map on θ-space in an orthonormal basis: A_ij = ⟨e_i, op(e_j)⟩."""
    cols = [op(e) for e in basis]
    return torch.tensor([[float(sum((a * b).sum() for a, b in zip(ei, c))) for c in cols] for ei in basis], dtype=DT)


def combine(basis, coefficients: torch.Tensor):
    """Σ_j c_j e_j as a block of one θ (α [1], β [1, d], Γ [1, d, d])."""
    return tuple(sum(float(c) * e[part] for c, e in zip(coefficients, basis)) for part in range(3))

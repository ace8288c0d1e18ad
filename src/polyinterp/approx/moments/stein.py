"""Gaussian expectations of a model and its derivatives (Stein's lemma), for x ~ N(μ, Σ).

For f = MLP or GLU the library needs E f, E ∇f and E ∇²f under one Gaussian: with z = x − μ,
E[f z] = Σ E∇f and E[f z zᵀ] = E[f] Σ + Σ (E∇²f) Σ (first- and second-order Stein / Hermite).
The Hessian is kept factored (``L_tᵀ diag(c_t) R_t`` plus transpose), so no [o, d, d] tensor is
formed unless asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.mlp import GLU, MLP
from polyinterp.approx.moments.univariate import derivative_expectations


@dataclass
class FactoredHessian:
    """H_o = Σ_t (L_tᵀ diag(C_t[o]) R_t + R_tᵀ diag(C_t[o]) L_t), L_t, R_t [h, d], C_t [o, h]."""

    terms: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

    def dense(self) -> torch.Tensor:
        out = 0
        for L, R, C in self.terms:
            M = torch.einsum("hi,oh,hj->oij", L, C, R)
            out = out + M + M.transpose(1, 2)
        return out

    def sandwich(self, S: torch.Tensor) -> torch.Tensor:
        """S H_o S for a symmetric S [d, d] (or S [d, d'] giving Sᵀ H S), shape [o, d', d'], a new tensor
        (0 when the Hessian has no terms)."""
        out = None
        for L, R, C in self.terms:
            LS = L @ S
            RS = LS if R is L else R @ S  # the MLP's term is W₁ᵀ diag(c) W₁: one product
            M = torch.einsum("hi,oh,hj->oij", LS, C, RS)
            M = M + M.transpose(1, 2)
            out = M if out is None else out.add_(M)
        return 0 if out is None else out  # no terms (order < 2): the zero Hessian

    def trace(self, S: torch.Tensor) -> torch.Tensor:
        """tr(H_o S) for a symmetric S, shape [o]."""
        out = 0
        for L, R, C in self.terms:
            out = out + 2 * C @ ((L @ S) * R).sum(1)
        return out

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """H_o v, shape [o, d]."""
        out = 0
        for L, R, C in self.terms:
            out = out + (C * (R @ v)) @ L + (C * (L @ v)) @ R
        return out

    def quad(self, v: torch.Tensor) -> torch.Tensor:
        """vᵀ H_o v, shape [o]."""
        out = 0
        for L, R, C in self.terms:
            out = out + 2 * C @ ((L @ v) * (R @ v))
        return out


@dataclass
class SteinData:
    """E f [o], E ∇f [o, d] and E ∇²f (factored) of a model under one Gaussian."""

    mean_f: torch.Tensor
    grad: torch.Tensor
    hess: FactoredHessian


def _std(A: torch.Tensor, cov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    AS = A @ cov
    return AS, (AS * A).sum(1).clamp_min(0).sqrt()


def stein_data(model, mean: torch.Tensor, cov: torch.Tensor, order: int = 2) -> SteinData:
    """E f, E ∇f and (``order`` = 2) E ∇²f of an :class:`MLP` or :class:`GLU` under N(mean, cov)."""
    if isinstance(model, MLP):
        y = model.W1 @ mean + model.b1
        _, s = _std(model.W1, cov)
        D = derivative_expectations(model.activation, y, s, kmax=order)
        mean_f = model.W2 @ D[:, 0] + model.b2
        grad = (model.W2 * D[:, 1]) @ model.W1
        hess = FactoredHessian([(model.W1, model.W1, 0.5 * model.W2 * D[:, 2])] if order >= 2 else [])
        return SteinData(mean_f, grad, hess)
    if isinstance(model, GLU):
        y = model.W @ mean + model.b
        q = model.V @ mean + model.c
        WS, s = _std(model.W, cov)
        kappa = (WS * model.V).sum(1)  # Cov(v·x, w·x)
        D = derivative_expectations(model.activation, y, s, kmax=order + 1)
        mean_f = model.W2 @ (D[:, 0] * q + kappa * D[:, 1]) + model.b2
        grad = (model.W2 * (D[:, 1] * q + kappa * D[:, 2])) @ model.W + (model.W2 * D[:, 0]) @ model.V
        terms = []
        if order >= 2:
            terms = [(model.W, model.W, 0.5 * model.W2 * (D[:, 2] * q + kappa * D[:, 3])),
                     (model.W, model.V, model.W2 * D[:, 1])]
        return SteinData(mean_f, grad, FactoredHessian(terms))
    raise TypeError(f"expected MLP or GLU, got {type(model).__name__}")

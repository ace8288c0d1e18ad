"""The exact quadratic approximant under one Gaussian, by second-order Stein (Hermite projection)."""

from __future__ import annotations

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.moments.stein import stein_data


def quadratic_gaussian(model, mean: torch.Tensor, cov: torch.Tensor) -> Approximant:
    """Projection of f onto {1, x, x xᵀ} in L²(N(μ, Σ)), closed form, O(h·d²) per output.

    H = E[∇²f] (per output), Γ = H/2, β = E[∇f] − Hμ, α = E f − E[∇f]·μ + ½ μᵀHμ − ½ tr(HΣ).
    (The Hermite expansion of f truncated at degree 2, rewritten in the monomials of x.) When Σ is
    singular this is still a least-squares solution (not the minimum-norm one).
    """
    sd = stein_data(model, mean, cov, order=2)
    H = sd.hess.dense()
    Hmu = sd.hess.matvec(mean)
    alpha = sd.mean_f - sd.grad @ mean + 0.5 * (Hmu @ mean) - 0.5 * sd.hess.trace(cov)
    beta = sd.grad - Hmu
    gamma = 0.5 * H
    return Approximant(alpha, beta, 0.5 * (gamma + gamma.transpose(1, 2)), {})

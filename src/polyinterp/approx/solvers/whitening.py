"""Affine whitening of a mixture by its total (moment-matched) covariance."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.mixture import GaussianMixture


@dataclass
class Whitening:
    """x = shift + M x̃ and x̃ = P (x − shift), M [d, r], P [r, d]; r = rank of the total covariance.

    Directions in which the total covariance vanishes (eigenvalue ≤ ``rcond`` × largest) carry no
    variance under the mixture: x is constant there, so they are dropped and an approximant built
    in x̃ has zero coefficients along them (the minimum-norm least-squares choice).
    """

    shift: torch.Tensor
    M: torch.Tensor
    P: torch.Tensor

    @property
    def rank(self) -> int:
        return self.M.shape[1]


def whitening(mixture: GaussianMixture, rcond: float = 1e-10) -> Whitening:
    mean = mixture.total_mean()
    evals, evecs = torch.linalg.eigh(mixture.total_cov())
    keep = evals > rcond * evals[-1].clamp_min(torch.finfo(evals.dtype).tiny)
    lam, Q = evals[keep], evecs[:, keep]
    return Whitening(mean, Q * lam.sqrt(), (Q / lam.sqrt()).T)


def whiten_mixture(mixture: GaussianMixture, w: Whitening) -> GaussianMixture:
    """The mixture of x̃ = P (x − shift): means P(μ_k − shift), covariances P Σ_k Pᵀ."""
    means = (mixture.means - w.shift) @ w.P.T
    covs = w.P @ mixture.covs @ w.P.T
    covs = 0.5 * (covs + covs.transpose(1, 2))
    return GaussianMixture(mixture.weights, means, covs, dtype=mixture.dtype, device=mixture.device, validate=False)

"""Principal components of a Gaussian mixture, whitened: the p input coordinates of the reduced
polynomial approximants.

Choice (documented because the alternatives differ): the components are the top-p eigenvectors of
the mixture's total covariance C = Σ_k π_k (Σ_k + (μ_k − μ̄)(μ_k − μ̄)ᵀ) of x in its own units,
i.e. principal components *before* whitening (after whitening by C itself every direction has
variance 1 and "principal" means nothing), and the coordinates are then scaled to unit variance:

    u = Λ^{-1/2} Pᵀ (x − μ̄),   P [d, p] orthonormal top-p eigenvectors, Λ their eigenvalues,

so u has mean 0 and covariance I_p under the mixture (under component k, u ~ N(m_k, S_k) with
m_k = Λ^{-1/2}Pᵀ(μ_k − μ̄), S_k = Λ^{-1/2}PᵀΣ_kPΛ^{-1/2}). The scaling does not change which
polynomials are reachable (a polynomial of degree ≤ n in u is one in Pᵀx); it makes the
normalised Hermite basis in u orthonormal under the moment-matched Gaussian, which conditions the
normal equations. Eigenvalues are sorted descending; each eigenvector's sign is fixed (its entry
of largest magnitude is positive), so the coordinates are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture


@dataclass
class PrincipalComponents:
    """u = (x − mean) @ basis with basis = directions / √eigenvalues ([d, p]); see the module docstring."""

    mean: torch.Tensor          # μ̄ [d]
    directions: torch.Tensor    # P [d, p], orthonormal columns
    eigenvalues: torch.Tensor   # Λ [p], descending
    explained: float            # Σ_{i≤p} λ_i / tr C

    @property
    def p(self) -> int:
        return self.directions.shape[1]

    @property
    def d(self) -> int:
        return self.directions.shape[0]

    @property
    def basis(self) -> torch.Tensor:
        """B = P Λ^{-1/2} [d, p], so that u = (x − μ̄) B."""
        return self.directions / self.eigenvalues.sqrt()

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """u [n, p] for x [n, d]."""
        if x.shape[-1] != self.d:
            raise ApproxInputError(f"input has {x.shape[-1]} features, the principal components expect d = {self.d}")
        return (x.to(self.mean.dtype) - self.mean) @ self.basis

    def reduce(self, mixture: GaussianMixture) -> tuple[torch.Tensor, torch.Tensor]:
        """Means m_k [K, p] and covariances S_k [K, p, p] of u under the mixture's components."""
        B = self.basis.to(mixture.dtype)
        means = (mixture.means - self.mean.to(mixture.dtype)) @ B
        covs = B.T @ mixture.covs @ B
        return means, 0.5 * (covs + covs.transpose(1, 2))

    def to(self, device=None, dtype: torch.dtype | None = None) -> "PrincipalComponents":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        return PrincipalComponents(f(self.mean), f(self.directions), f(self.eigenvalues), self.explained)


def principal_components(mixture: GaussianMixture, components: int = 50, *,
                         rcond: float = 1e-10) -> PrincipalComponents:
    """The top-``components`` whitened principal components of the mixture's total covariance.

    Raises :class:`ApproxInputError` when ``components`` exceeds d or when the p-th eigenvalue is
    ≤ ``rcond`` × the largest (a direction without variance cannot be whitened: ask for fewer).
    """
    if not isinstance(mixture, GaussianMixture):
        raise ApproxInputError(f"mixture must be a GaussianMixture, got {type(mixture).__name__}")
    if isinstance(components, bool) or not isinstance(components, int) or not 1 <= components <= mixture.d:
        raise ApproxInputError(f"components must be an int in [1, d = {mixture.d}], got {components!r}")
    C = mixture.total_cov()
    evals, evecs = torch.linalg.eigh(C)
    evals, evecs = evals.flip(0), evecs.flip(1)
    lam, P = evals[:components], evecs[:, :components]
    if not float(lam[-1]) > rcond * float(evals[0].clamp_min(torch.finfo(evals.dtype).tiny)):
        raise ApproxInputError(f"principal component {components} has variance {float(lam[-1]):.3e} (largest "
                               f"{float(evals[0]):.3e}): at most {int((evals > rcond * evals[0]).sum())} components "
                               "carry variance under this mixture; ask for fewer components")
    pivot = P.abs().argmax(0)
    signs = torch.sign(P[pivot, torch.arange(components, device=P.device)])
    P = P * torch.where(signs == 0, torch.ones_like(signs), signs)
    explained = float(lam.sum() / evals.clamp_min(0).sum())
    return PrincipalComponents(mixture.total_mean(), P, lam, explained)

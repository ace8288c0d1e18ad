"""The exact linear (degree-1) least-squares approximant of an MLP or GLU under a Gaussian mixture."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import check_model
from polyinterp.approx.moments.stein import stein_data


def moments_linear(model, mixture: GaussianMixture) -> tuple[torch.Tensor, torch.Tensor]:
    """E f [o] and Cov(f, x) [o, d] under the mixture.

    Per component Stein's lemma gives Cov_k(f, x) = E_k[∇f] Σ_k; across components the law of total
    covariance adds Σ_k π_k (E_k f − E f)(μ_k − μ̄)ᵀ. Weights are honoured.
    """
    Ef_k, C = [], 0
    for k in range(mixture.K):
        sd = stein_data(model, mixture.means[k], mixture.covs[k], order=1)
        Ef_k.append(sd.mean_f)
        C = C + mixture.weights[k] * (sd.grad @ mixture.covs[k])
    Ef_k = torch.stack(Ef_k)  # [K, o]
    Ef = mixture.weights @ Ef_k
    dm = mixture.means - mixture.total_mean()
    C = C + ((Ef_k - Ef) * mixture.weights[:, None]).T @ dm
    return Ef, C


def solve_covariance(cov: torch.Tensor, rhs: torch.Tensor, ridge: float = 0.0, rcond: float = 1e-10):
    """X with X cov = rhs (rhs [o, d]), and the route taken.

    Policy: ``ridge`` (absolute, default 0) is added to the diagonal first. Then a Cholesky
    factorisation is tried; if the matrix is not numerically positive definite (e.g. MNIST's
    constant border pixels, whose variance is exactly 0), the minimum-norm least-squares solution is
    used instead: an eigendecomposition with eigenvalues ≤ ``rcond`` × largest treated as zero
    (pseudo-inverse). Along a zero-variance direction x is constant under the data, so any
    coefficient fits equally well; the pseudo-inverse sets it to 0.
    """
    if ridge < 0:
        raise ApproxInputError(f"ridge must be >= 0, got {ridge}")
    A = cov + ridge * torch.eye(cov.shape[0], dtype=cov.dtype, device=cov.device) if ridge else cov
    L, info = torch.linalg.cholesky_ex(A)
    if int(info) == 0:
        diag = torch.diagonal(L)
        if float(diag.min()) ** 2 > rcond * float(diag.max()) ** 2:
            return torch.cholesky_solve(rhs.T, L).T, {"solve": "cholesky", "rank": A.shape[0], "ridge": ridge}
    evals, evecs = torch.linalg.eigh(A)
    keep = evals > rcond * evals[-1].clamp_min(torch.finfo(evals.dtype).tiny)
    Q = evecs[:, keep]
    X = ((rhs @ Q) / evals[keep]) @ Q.T
    return X, {"solve": "pinv", "rank": int(keep.sum()), "ridge": ridge}


def linear_approximant(model, mixture: GaussianMixture, *, ridge: float = 0.0, rcond: float = 1e-10) -> Approximant:
    """The L²(mixture)-optimal affine map g(x) = α + β x (exact, no sampling).

    β = Cov(f, x) Cov(x)⁻¹ and α = E f − β μ̄; the linear solve follows :func:`solve_covariance`
    (``ridge``/``rcond`` policy). Returns an :class:`Approximant` with ``gamma = None``.
    """
    if not isinstance(mixture, GaussianMixture):
        raise ApproxInputError(f"mixture must be a GaussianMixture, got {type(mixture).__name__}")
    check_model(model, mixture.d, mixture.device)
    t0 = time.perf_counter()
    model = model.to(dtype=mixture.dtype)
    Ef, C = moments_linear(model, mixture)
    beta, info = solve_covariance(mixture.total_cov(), C, ridge, rcond)
    alpha = Ef - beta @ mixture.total_mean()
    info.update(method="exact", degree=1, iterations=0, residual=0.0, seconds=time.perf_counter() - t0)
    return Approximant(alpha, beta, None, info)

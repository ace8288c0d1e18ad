"""Feature images of a polynomial approximant that show what drives its output under the data.

For one output, g(x) = α + βᵀx + xᵀΓx, and a data covariance Σ (and mean μ). Raw coefficients β
and eigenvectors of Γ are *filters*: along directions where the data barely vary (near-constant
pixels) they are set by whatever regularised the fit (the mixture's ridge), not by the function,
and they barely move g on real inputs. Drawn back as *patterns* (Haufe et al. 2014, "On the
interpretation of weight vectors of linear models in multivariate neuroimaging"), they show the
covariance of the input with the feature instead:

- linear: the pattern Σβ = Cov(x, βᵀx), with variance Var(βᵀx) = βᵀΣβ;
- quadratic: with x = μ + Σ^{1/2} z, z ~ N(0, I), the quadratic part of xᵀΓx is zᵀMz with
  M = Σ^{1/2} Γ Σ^{1/2} = Σ_i λ_i v_i v_iᵀ, i.e. Σ_i λ_i (v_iᵀz)²: independent features of variance
  2λ_i² each, so Var(xᵀΓx) = 2 Σ_i λ_i² + 4 μᵀΓΣΓμ (the second term is linear in z). Feature i's
  pattern is Σ^{1/2} v_i = Cov(x, v_iᵀz) and its *variance share* is λ_i² / Σ_j λ_j².

Pure torch on tensors of any device; float64 throughout. Σ^{1/2} is the symmetric square root by
``eigh`` with eigenvalues clipped at 0, so a PSD Σ that is singular or nearly so is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.errors import ApproxInputError

DT = torch.float64


def _square(m: torch.Tensor, name: str, d: int | None = None) -> torch.Tensor:
    if m.ndim != 2 or m.shape[0] != m.shape[1] or (d is not None and m.shape[0] != d):
        want = "[d, d]" if d is None else f"[{d}, {d}]"
        raise ApproxInputError(f"{name} must be a square matrix {want}, got shape {tuple(m.shape)}")
    if not bool(torch.isfinite(m).all()):
        raise ApproxInputError(f"{name} has non-finite entries")
    m = m.to(DT)
    return 0.5 * (m + m.T)


def _signed(v: torch.Tensor) -> torch.Tensor:
    """v (rows, or one vector) with the sign that makes its entries' sum ≥ 0."""
    s = torch.where(v.sum(-1, keepdim=True) >= 0, 1.0, -1.0).to(v.dtype)
    return v * s


def psd_sqrt(cov: torch.Tensor) -> torch.Tensor:
    """The symmetric square root S of a PSD matrix (S = Sᵀ ⪰ 0, S S = Σ), by ``eigh`` with the
    eigenvalues clipped at 0 (round-off negatives of a singular Σ become 0). Float64 [d, d]."""
    cov = _square(cov, "cov")
    evals, evecs = torch.linalg.eigh(cov)
    root = (evecs * evals.clamp_min(0).sqrt()) @ evecs.T
    return 0.5 * (root + root.T)


def top_eigenpair(gamma: torch.Tensor) -> tuple[float, torch.Tensor]:
    """The raw eigenpair of the symmetric Γ with the largest |eigenvalue|: (λ, unit v), the sign of v
    chosen so that its entries sum to ≥ 0. No data enter: this is Γ's filter, not a pattern."""
    vals, vecs = torch.linalg.eigh(_square(gamma, "gamma"))
    i = int(vals.abs().argmax())
    return float(vals[i]), _signed(vecs[:, i])


@dataclass
class QuadraticFeatures:
    """Eigen-features of M = Σ^{1/2} Γ Σ^{1/2}, ordered by |λ| descending (all d of them).

    ``eigvals`` [d]: λ_i; ``directions`` [d, d]: row i is the unit eigenvector v_i of M (whitened
    coordinates); ``patterns`` [d, d]: row i is Σ^{1/2} v_i in input space, the sign of v_i chosen
    so that the pattern's entries sum to ≥ 0; ``variance_share`` [d]: λ_i² / Σ_j λ_j² (sums to 1;
    all 0 when M = 0), feature i's share of the quadratic part of Var(xᵀΓx) under N(μ, Σ).
    """

    eigvals: torch.Tensor
    directions: torch.Tensor
    patterns: torch.Tensor
    variance_share: torch.Tensor

    @property
    def quadratic_variance(self) -> float:
        """2 Σ λ_i² = 2 tr((ΣΓ)²): the variance of zᵀMz, the part of xᵀΓx that is quadratic in z."""
        return float(2 * (self.eigvals ** 2).sum())


def whitened_quadratic_features(gamma: torch.Tensor, cov: torch.Tensor | None = None, *,
                                cov_sqrt: torch.Tensor | None = None) -> QuadraticFeatures:
    """The whitened eigen-features of the quadratic form xᵀΓx under a covariance Σ (see the module
    docstring). Give ``cov`` (Σ, PSD [d, d]) or its symmetric root ``cov_sqrt`` (from
    :func:`psd_sqrt`, to reuse one root for many Γ). Directions where Σ vanishes get no weight: a
    Γ that lives only there has M = 0 and all shares 0."""
    gamma = _square(gamma, "gamma")
    if (cov is None) == (cov_sqrt is None):
        raise ApproxInputError("whitened_quadratic_features needs exactly one of cov, cov_sqrt")
    S = psd_sqrt(_square(cov, "cov", gamma.shape[0])) if cov_sqrt is None else _square(cov_sqrt, "cov_sqrt", gamma.shape[0])
    S = S.to(gamma.device)
    M = S @ gamma @ S
    vals, vecs = torch.linalg.eigh(0.5 * (M + M.T))
    order = torch.argsort(vals.abs(), descending=True, stable=True)
    vals, vecs = vals[order], vecs[:, order].T  # rows: v_i
    patterns = vecs @ S  # rows: (S v_i)ᵀ (S symmetric)
    sign = torch.where(patterns.sum(1, keepdim=True) >= 0, 1.0, -1.0).to(DT)
    energy = (vals ** 2).sum()
    share = vals ** 2 / energy if float(energy) > 0 else torch.zeros_like(vals)
    return QuadraticFeatures(vals, vecs * sign, patterns * sign, share)


def direction_variance_share(gamma: torch.Tensor, direction: torch.Tensor, cov: torch.Tensor | None = None, *,
                             cov_sqrt: torch.Tensor | None = None) -> float:
    """The share of the quadratic part of Var(xᵀΓx) under N(μ, Σ) that one input coordinate eᵀx
    explains: (wᵀMw)² / ‖M‖_F² with w = Σ^{1/2}e / ‖Σ^{1/2}e‖ and M = Σ^{1/2} Γ Σ^{1/2}, in [0, 1].

    zᵀMz's projection onto functions of eᵀx = eᵀμ + ‖Σ^{1/2}e‖ wᵀz is (wᵀMw)((wᵀz)² − 1), of variance
    2(wᵀMw)². For e = Σ^{-1/2}v_i (the filter of whitened feature i) this is that feature's
    variance share λ_i² / Σ λ_j²; for a raw eigenvector of Γ on near-constant inputs it is ≈ 0.
    0 when Σ^{1/2}e = 0 or M = 0."""
    gamma = _square(gamma, "gamma")
    if (cov is None) == (cov_sqrt is None):
        raise ApproxInputError("direction_variance_share needs exactly one of cov, cov_sqrt")
    S = psd_sqrt(_square(cov, "cov", gamma.shape[0])) if cov_sqrt is None else _square(cov_sqrt, "cov_sqrt", gamma.shape[0])
    S = S.to(gamma.device)
    e = direction.to(device=gamma.device, dtype=DT).reshape(-1)
    if e.numel() != gamma.shape[0]:
        raise ApproxInputError(f"direction must have {gamma.shape[0]} entries, got {e.numel()}")
    M = S @ gamma @ S
    w = S @ e
    norm_w, norm_m = float(w.norm()), float(M.norm())
    if norm_w == 0 or norm_m == 0:
        return 0.0
    w = w / norm_w
    return float((w @ M @ w) ** 2 / norm_m ** 2)


def linear_pattern(beta: torch.Tensor, cov: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The linear pattern Σβ = Cov(x, βᵀx) [d] and the variance βᵀΣβ of the linear term."""
    cov = _square(cov, "cov")
    beta = beta.to(device=cov.device, dtype=DT).reshape(-1)
    if beta.numel() != cov.shape[0]:
        raise ApproxInputError(f"beta must have {cov.shape[0]} entries (the covariance's size), got {beta.numel()}")
    pattern = cov @ beta
    return pattern, float(beta @ pattern)


@dataclass
class FeatureSummary:
    """What fig1 draws for one output: the raw filters and the data patterns side by side.

    ``beta``: the linear filter β [d]; ``linear_pattern``: Σβ [d]; ``linear_variance``: βᵀΣβ;
    ``raw_eigval``, ``raw_eigvec``: Γ's top eigenpair by |λ| (:func:`top_eigenpair`);
    ``raw_variance_share``: :func:`direction_variance_share` of that eigenvector;
    ``whitened``: :class:`QuadraticFeatures` of Γ under Σ.
    """

    beta: torch.Tensor
    linear_pattern: torch.Tensor
    linear_variance: float
    raw_eigval: float
    raw_eigvec: torch.Tensor
    raw_variance_share: float
    whitened: QuadraticFeatures


def feature_summary(gamma: torch.Tensor, beta: torch.Tensor, cov: torch.Tensor, *,
                    cov_sqrt: torch.Tensor | None = None) -> FeatureSummary:
    """Filters and patterns of one output's β [d] and Γ [d, d] under the covariance Σ [d, d] (PSD);
    ``cov_sqrt``: Σ's root from :func:`psd_sqrt`, when already computed."""
    cov = _square(cov, "cov", gamma.shape[-1]).to(gamma.device)
    S = psd_sqrt(cov) if cov_sqrt is None else cov_sqrt.to(gamma.device)
    pattern, variance = linear_pattern(beta, cov)
    lam, vec = top_eigenpair(gamma)
    return FeatureSummary(beta.to(DT).reshape(-1), pattern, variance, lam, vec,
                          direction_variance_share(gamma, vec, cov_sqrt=S),
                          whitened_quadratic_features(gamma, cov_sqrt=S))

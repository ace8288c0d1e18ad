"""Gaussian mixtures Σ_k π_k N(μ_k, Σ_k); a single Gaussian is the case K = 1."""

from __future__ import annotations

import torch

from polyinterp.approx.core.errors import ApproxInputError


def class_gaussians(x, labels, classes=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Class frequencies [K], means [K, d] and unbiased covariances [K, d, d] of the rows of ``x`` [n, d]
    grouped by ``labels`` [n], in float64, one component per class of ``classes`` (default: the distinct
    labels, sorted). A class with fewer than 2 rows raises :class:`ApproxInputError` naming it."""
    x = torch.as_tensor(x).to(torch.float64)
    labels = torch.as_tensor(labels)
    if x.dim() != 2 or labels.shape != x.shape[:1]:
        raise ApproxInputError(f"need x [n, d] and labels [n], got {tuple(x.shape)} and {tuple(labels.shape)}")
    classes = labels.unique().tolist() if classes is None else list(classes)
    weights, means, covs = [], [], []
    for k in classes:
        xk = x[labels == k]
        if xk.shape[0] < 2:
            raise ApproxInputError(f"class {k} has {xk.shape[0]} samples; need at least 2 for a covariance "
                                   "(drop the class or add samples)")
        mu = xk.mean(0)
        z = xk - mu
        weights.append(xk.shape[0] / x.shape[0])
        means.append(mu)
        covs.append(z.T @ z / (xk.shape[0] - 1))
    return torch.tensor(weights, dtype=torch.float64), torch.stack(means), torch.stack(covs)


def ridged(weights: torch.Tensor, covs: torch.Tensor, ridge: float) -> tuple[torch.Tensor, float, float]:
    """``covs`` + ridge_abs·I with ridge_abs = ``ridge`` × the mean within-class variance
    Σ_k w_k tr(Σ_k)/d; returns (covs, ridge_abs, mean within-class variance). ``ridge`` ≥ 0 is relative,
    so it means the same on data of any scale."""
    if not ridge >= 0:
        raise ApproxInputError(f"ridge must be >= 0 (relative to the mean within-class variance), got {ridge!r}")
    mean_var = float((weights * torch.diagonal(covs, dim1=1, dim2=2).mean(1)).sum())
    ridge_abs = ridge * mean_var
    return covs + ridge_abs * torch.eye(covs.shape[-1], dtype=covs.dtype), ridge_abs, mean_var


class GaussianMixture:
    """A Gaussian mixture with weights ``[K]``, means ``[K, d]`` and covariances ``[K, d, d]``.

    Validation (``validate=True``): weights finite, ≥ 0, summing to 1 (to 1e-8, or 16 ulps of their dtype; then renormalised
    exactly), means finite, covariances symmetric (to 1e-8 relative; then symmetrised exactly) and
    positive semi-definite (smallest eigenvalue ≥ −1e-8 × largest). Tensors are converted to
    ``dtype`` (float64 by default) on the device of ``means`` unless ``device`` is given. The weights
    are honoured everywhere (components are never averaged equally).

    ``ridge`` and ``ridge_abs``: the ridge a mixture fitted from data was given (relative, and the
    absolute value added to every covariance's diagonal; see :meth:`from_data`), ``None`` otherwise.
    """

    def __init__(self, weights, means, covs, *, dtype: torch.dtype | None = torch.float64, device=None,
                 validate: bool = True, ridge: float | None = None, ridge_abs: float | None = None):
        means = torch.as_tensor(means)
        device = torch.device(device) if device is not None else means.device
        dtype = dtype or (means.dtype if means.is_floating_point() else torch.float64)
        weights = torch.as_tensor(weights)
        wtol = max(1e-8, 16 * torch.finfo(weights.dtype).eps) if weights.is_floating_point() else 1e-8
        weights = weights.to(device=device, dtype=dtype)
        means = means.to(device=device, dtype=dtype)
        covs = torch.as_tensor(covs).to(device=device, dtype=dtype)
        if means.dim() == 1:
            raise ApproxInputError(f"means must be [K, d], got shape {tuple(means.shape)}; for one Gaussian use "
                                   "means[None] and covs[None] (K = 1)")
        if weights.dim() != 1 or means.dim() != 2 or covs.dim() != 3:
            raise ApproxInputError(f"expected weights [K], means [K, d], covs [K, d, d]; got {tuple(weights.shape)}, "
                                   f"{tuple(means.shape)}, {tuple(covs.shape)}")
        K, d = means.shape
        if weights.shape[0] != K or covs.shape != (K, d, d):
            raise ApproxInputError(f"shapes disagree: weights {tuple(weights.shape)}, means {tuple(means.shape)}, "
                                   f"covs {tuple(covs.shape)}; need [K], [K, d], [K, d, d] with the same K and d")
        if K == 0 or d == 0:
            raise ApproxInputError("a mixture needs K >= 1 components in d >= 1 dimensions")
        if validate:
            weights, covs = self._validated(weights, means, covs, wtol)
        self.weights, self.means, self.covs = weights, means, covs
        self.ridge, self.ridge_abs = ridge, ridge_abs
        self._factors: torch.Tensor | None = None
        self._cast: dict = {}  # dtype → (factors, means) in that dtype, for sample(dtype=)

    @staticmethod
    def _validated(weights, means, covs, wtol=1e-8):
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            raise ApproxInputError(f"mixture weights must be finite and >= 0, got {weights.tolist()}")
        total = float(weights.sum())
        if abs(total - 1.0) > wtol:
            raise ApproxInputError(f"mixture weights must sum to 1, they sum to {total!r}; divide them by their sum")
        weights = weights / weights.sum()
        if not bool(torch.isfinite(means).all()):
            raise ApproxInputError("mixture means contain NaN or inf")
        if not bool(torch.isfinite(covs).all()):
            raise ApproxInputError("mixture covariances contain NaN or inf")
        scale = covs.abs().amax(dim=(1, 2)).clamp_min(torch.finfo(covs.dtype).tiny)
        asym = (covs - covs.transpose(1, 2)).abs().amax(dim=(1, 2)) / scale
        if bool((asym > 1e-8).any()):
            k = int(asym.argmax())
            raise ApproxInputError(f"covariance of component {k} is not symmetric (relative asymmetry "
                                   f"{float(asym[k]):.2e}); pass (C + C.T)/2")
        covs = 0.5 * (covs + covs.transpose(1, 2))
        # PSD check: a Cholesky factorisation with a tiny jitter succeeds for every PSD matrix (cheap);
        # only the components where it fails get the (slow) eigenvalue test with its exact message.
        jitter = 1e-10 * scale * covs.shape[-1]
        eye = torch.eye(covs.shape[-1], dtype=covs.dtype, device=covs.device)
        _, info = torch.linalg.cholesky_ex(covs + jitter[:, None, None] * eye)
        for k in info.nonzero().flatten().tolist():
            eig = torch.linalg.eigvalsh(covs[k])
            if float(eig[0]) < -1e-8 * max(float(eig[-1].abs()), torch.finfo(covs.dtype).tiny):
                raise ApproxInputError(f"covariance of component {k} is not positive semi-definite (smallest "
                                       f"eigenvalue {float(eig[0]):.3e}); fix it or add a ridge c·I")
        return weights, covs

    # -- shape ------------------------------------------------------------------------------------
    @property
    def K(self) -> int:
        return self.means.shape[0]

    @property
    def d(self) -> int:
        return self.means.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.means.dtype

    @property
    def device(self) -> torch.device:
        return self.means.device

    def __repr__(self) -> str:
        ridge = "" if self.ridge is None else f", ridge={self.ridge:g}"
        return f"GaussianMixture(K={self.K}, d={self.d}{ridge}, dtype={self.dtype}, device={self.device})"

    def to(self, device=None, dtype: torch.dtype | None = None) -> "GaussianMixture":
        """A copy on ``device`` in ``dtype`` (no re-validation)."""
        device = self.device if device is None else device
        dtype = dtype or self.dtype
        return GaussianMixture(self.weights, self.means, self.covs, dtype=dtype, device=device, validate=False,
                               ridge=self.ridge, ridge_abs=self.ridge_abs)

    @classmethod
    def single(cls, mean, cov, **kw) -> "GaussianMixture":
        """The one-component mixture N(mean, cov)."""
        mean = torch.as_tensor(mean)
        return cls(torch.ones(1, dtype=torch.float64), mean[None], torch.as_tensor(cov)[None], **kw)

    @classmethod
    def from_data(cls, x, labels, *, ridge: float = 0.0, classes=None, **kw) -> "GaussianMixture":
        """One component per class of ``labels`` [n] (sorted; or ``classes``, in that order) of the rows of
        ``x`` [n, d]: weight = the class's share of the rows, mean, unbiased covariance + ``ridge`` × (mean
        within-class variance Σ_k w_k tr(Σ_k)/d) · I. The ridge (relative, and absolute as
        ``ridge_abs``) is recorded on the mixture. Data whose class covariances are singular (constant
        pixels, fewer rows than d) need ``ridge`` > 0 for the exact quadratic's solver; MNIST's study
        uses 1e-2. Keywords ``kw``: as the constructor (``dtype``, ``device``)."""
        weights, means, covs = class_gaussians(x, labels, classes)
        covs, ridge_abs, _ = ridged(weights, covs, ridge)
        return cls(weights, means, covs, ridge=float(ridge), ridge_abs=ridge_abs, **kw)

    @classmethod
    def gaussian_from_data(cls, x, *, ridge: float = 0.0, **kw) -> "GaussianMixture":
        """The one Gaussian (K = 1) of the rows of ``x`` [n, d]: their mean and unbiased covariance +
        ``ridge`` × (mean variance) · I, as :meth:`from_data` with every row in one class."""
        x = torch.as_tensor(x)
        return cls.from_data(x, torch.zeros(x.shape[0], dtype=torch.long), ridge=ridge, **kw)

    # -- moments ----------------------------------------------------------------------------------
    def total_mean(self) -> torch.Tensor:
        """E[x] = Σ π_k μ_k, shape [d]."""
        return self.weights @ self.means

    def total_cov(self) -> torch.Tensor:
        """Cov[x] = Σ π_k (Σ_k + (μ_k − μ̄)(μ_k − μ̄)ᵀ) (law of total covariance), shape [d, d]."""
        dev = self.means - self.total_mean()
        within = torch.einsum("k,kij->ij", self.weights, self.covs)
        between = (dev * self.weights[:, None]).T @ dev
        out = within + between
        return 0.5 * (out + out.T)

    def moment_matched(self) -> "GaussianMixture":
        """The single Gaussian with the mixture's mean and covariance."""
        return GaussianMixture(torch.ones(1, dtype=self.dtype, device=self.device), self.total_mean()[None],
                               self.total_cov()[None], dtype=self.dtype, device=self.device, validate=False)

    # -- sampling ---------------------------------------------------------------------------------
    def _sqrt_factors(self) -> torch.Tensor:
        """A_k with A_k A_kᵀ = Σ_k: Cholesky, or eigh for components that are singular."""
        if self._factors is None:
            L, info = torch.linalg.cholesky_ex(self.covs)
            for k in info.nonzero().flatten().tolist():
                evals, evecs = torch.linalg.eigh(self.covs[k])
                L[k] = evecs * evals.clamp_min(0).sqrt()
            self._factors = L
        return self._factors

    def sample(self, n: int, generator: torch.Generator | None = None, *, seed: int | None = None,
               return_labels: bool = False, dtype: torch.dtype | None = None):
        """``n`` samples [n, d] (and their component labels with ``return_labels``).

        Reproducible with a seeded ``generator`` on the mixture's device, or ``seed``. ``dtype``: the
        samples' dtype (default: the mixture's). The draws are the same whatever ``dtype`` (the labels and
        standard normals are drawn in the mixture's dtype); only the map μ_k + A_k z runs in ``dtype``, so
        a seed gives the same points to ``dtype``'s round-off, for half the arithmetic in float32.
        """
        if not isinstance(n, int) or n < 0:
            raise ApproxInputError(f"number of samples must be a non-negative int, got {n!r}")
        dtype = self.dtype if dtype is None else dtype
        if not dtype.is_floating_point:
            raise ApproxInputError(f"samples need a floating dtype, got {dtype}; pass e.g. torch.float32 or leave dtype unset")
        if generator is None and seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(int(seed))
        labels = torch.multinomial(self.weights, n, replacement=True, generator=generator) if n else \
            torch.zeros(0, dtype=torch.long, device=self.device)
        eps = torch.randn(n, self.d, generator=generator, dtype=self.dtype, device=self.device)
        A, means = self._sqrt_factors(), self.means
        if dtype != self.dtype:  # the factors and means cast once per dtype and kept
            if dtype not in self._cast:
                self._cast[dtype] = (A.to(dtype), means.to(dtype))
            (A, means), eps = self._cast[dtype], eps.to(dtype)
        x = torch.empty(n, self.d, dtype=dtype, device=self.device)
        for k in range(self.K):
            idx = (labels == k).nonzero().squeeze(1)
            if idx.numel():
                x[idx] = means[k] + eps[idx] @ A[k].T
        return (x, labels) if return_labels else x

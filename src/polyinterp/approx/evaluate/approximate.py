"""One entry to every fit: ``approximate(model, distribution, degree=…, method=…)`` → a frozen
:class:`Approximation` (the polynomial, the distribution it was fitted under, the moments of its exact
FVU, the fit's diagnostics).

What is fitted, by degree n and distribution (K components):

* K = 1 (one Gaussian), any n: the exact L² projection (n = 1: :func:`linear_approximant`, n = 2: the
  closed-form quadratic, n ≥ 3: :func:`gaussian_polynomial_approximant`, a Hermite form in x).
* K > 1, n = 1 and 2: the exact least-squares linear and quadratic in all d inputs
  (:func:`linear_approximant`, :func:`quadratic_approximant`, PCG on the normal equations).
* K > 1, n ≥ 3: only on the mixture's top ``components`` whitened principal components
  (:func:`reduced_polynomial_approximant`); without ``components`` the call is refused, since the
  full polynomial has C(d + n, n) coefficients per output (9·10⁷ for the cubic at d = 784).
* ``method="sgd"``: the paper's baseline (degree 2 only), minibatch SGD on mixture samples.
* ``components=p`` with any degree: the polynomial in the top-p principal components.

The FVU has three definitions, each a function of the per-output moments E f_o, E f_o², E g_o,
E[f_o g_o], E g_o² (exact, kept on the result; r = f − g, o outputs):

* ``"ours"``: Σ_o E(f_o − g_o)² / Σ_o Var f_o (squared residuals over variances, pooled over outputs,
  each output centred on its own mean);
* ``"flattened"`` (the paper authors' code, ``fvu_between_models``): Var(f − g) / Var(f) over the
  flattened [n, o] outputs, one grand mean: [mean_o E r_o² − (mean_o E r_o)²] /
  [mean_o E f_o² − (mean_o E f_o)²];
* ``"uncentred"`` (EleutherAI/polyapprox's tests): Σ_o E(f_o − g_o)² / Σ_o E f_o².
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import as_model
from polyinterp.approx.evaluate.metrics import (expected_sq_norm, fvu_and_se, fvu_flat_and_se,
                                                fvu_uncentred_and_se)
from polyinterp.approx.fits.cubic_mixture import ReducedPolynomialApproximant, reduced_polynomial_approximant
from polyinterp.approx.fits.hermite_ridge import HermiteRidgeApproximant, gaussian_polynomial_approximant
from polyinterp.approx.fits.linear import linear_approximant
from polyinterp.approx.fits.quadratic import quadratic_approximant
from polyinterp.approx.moments.monomial_rhs import monomial_rhs
from polyinterp.approx.moments.output_moments import output_moments
from polyinterp.approx.solvers.gram_operator import inner

FVU_DEFINITIONS = ("ours", "flattened", "uncentred")
_FORMS = {cls.__name__: cls for cls in (Approximant, HermiteRidgeApproximant, ReducedPolynomialApproximant)}


@dataclass(frozen=True)
class FVUEstimate:
    """An FVU: ``value``, ``route`` (``"exact"``: from the closed-form moments, ``se`` = 0; ``"sampled"``:
    on ``n`` samples, ``se`` its delta-method standard error) and ``definition`` (:data:`FVU_DEFINITIONS`).
    ``float(estimate)`` is the value."""

    value: float
    se: float
    route: str
    definition: str
    n: int | None = None

    def __float__(self) -> float:
        return self.value

    def __str__(self) -> str:
        if self.route == "exact":
            return f"{self.value:.6g} (exact, {self.definition})"
        return f"{self.value:.6g} ± {self.se:.2g} (sampled, n = {self.n}, {self.definition})"


@dataclass(frozen=True)
class OutputMoments:
    """Per-output [o] float64 moments under the fitting distribution: ``ef`` = E f, ``ef2`` = E f²,
    ``eg`` = E g, ``efg`` = E[f g], ``eg2`` = E g²; :meth:`fvu` computes each definition from them."""

    ef: torch.Tensor
    ef2: torch.Tensor
    eg: torch.Tensor
    efg: torch.Tensor
    eg2: torch.Tensor

    def fvu(self, definition: str = "ours") -> float:
        """The FVU of ``definition`` (module docstring) from these moments; a constant model raises."""
        _check_definition(definition)
        err = self.ef2 - 2 * self.efg + self.eg2  # E(f_o − g_o)²
        if definition == "ours":
            num, den = err.sum(), (self.ef2 - self.ef ** 2).sum()
        elif definition == "flattened":
            o = err.shape[0]
            num = err.sum() / o - ((self.ef - self.eg).sum() / o) ** 2
            den = self.ef2.sum() / o - (self.ef.sum() / o) ** 2
        else:
            num, den = err.sum(), self.ef2.sum()
        if not float(den) > 0:
            raise ApproxInputError(f"the model's output is constant under this distribution, so the {definition!r} "
                                   "FVU is undefined")
        return float(num / den)

    def to(self, device=None) -> "OutputMoments":
        return OutputMoments(*(getattr(self, f.name).to(device=device) for f in dataclasses.fields(self)))


def _check_definition(definition: str) -> None:
    if definition not in FVU_DEFINITIONS:
        raise ApproxInputError(f"unknown FVU definition {definition!r}; use one of {FVU_DEFINITIONS}")


def _mixture_state(m: GaussianMixture) -> dict:
    return {"weights": m.weights, "means": m.means, "covs": m.covs, "ridge": m.ridge, "ridge_abs": m.ridge_abs}


@dataclass(frozen=True)
class Approximation:
    """The result of :func:`approximate`: ``polynomial`` (an :class:`Approximant` in α, β, Γ for degree ≤ 2
    in all inputs; a :class:`HermiteRidgeApproximant` for degree ≥ 3 under one Gaussian; a
    :class:`ReducedPolynomialApproximant` on principal components), the ``distribution`` it was fitted
    under, ``degree``, ``method`` (``"exact"`` or ``"sgd"``), ``moments`` (:class:`OutputMoments`, exact,
    computed at the fit) and ``diagnostics`` (a read-only mapping: solver, iterations, residual, seconds,
    …; not part of the polynomial). Frozen: assigning a field raises. :meth:`to` and
    :meth:`state_dict` / :meth:`from_state_dict` keep the moments, so the exact FVU survives both."""

    polynomial: Any
    distribution: GaussianMixture
    degree: int
    method: str
    moments: OutputMoments
    diagnostics: Mapping[str, Any]

    d = property(lambda self: self.polynomial.d)
    o = property(lambda self: self.polynomial.o)

    @property
    def coefficients(self) -> dict[str, torch.Tensor]:
        """The polynomial's coefficient tensors by name (α, β, Γ for an :class:`Approximant`; the form's
        own tensors otherwise, as in its state dict)."""
        return {k: v for k, v in self.polynomial.state_dict().items() if isinstance(v, torch.Tensor)}

    def __call__(self, x: torch.Tensor, **kw) -> torch.Tensor:
        """g(x) for inputs x [n, d] (or [d]) → [n, o] (or [o])."""
        return self.polynomial(x, **kw)

    def fvu(self, definition: str = "ours", *, x: torch.Tensor | None = None,
            f: torch.Tensor | None = None) -> FVUEstimate:
        """The FVU of ``definition`` (``"ours"``, ``"flattened"``, ``"uncentred"``; formulas in the module
        docstring). Without samples: exact under the fitting distribution, from :attr:`moments`
        (``route="exact"``, ``se`` = 0). With inputs ``x`` [n, d] and the model's outputs ``f`` [n, o] on
        them: the sample estimate and its standard error (``route="sampled"``), e.g. on data or on
        ``distribution.sample(n)`` as a Monte Carlo check."""
        _check_definition(definition)
        if x is None and f is None:
            return FVUEstimate(self.moments.fvu(definition), 0.0, "exact", definition)
        if x is None or f is None:
            raise ApproxInputError("a sampled FVU needs both x (inputs [n, d]) and f (the model's outputs on them)")
        g = self.polynomial(x)
        fun = {"ours": fvu_and_se, "flattened": fvu_flat_and_se, "uncentred": fvu_uncentred_and_se}[definition]
        value, se = fun(f.to(torch.float64), g.to(torch.float64))
        return FVUEstimate(value, se, "sampled", definition, int(x.shape[0]))

    def to(self, device=None, dtype: torch.dtype | None = None) -> "Approximation":
        """A copy with the polynomial on ``device`` in ``dtype`` (the moments stay float64)."""
        return Approximation(self.polynomial.to(device, dtype), self.distribution.to(device, dtype), self.degree,
                             self.method, self.moments.to(device), self.diagnostics)

    def state_dict(self) -> dict[str, Any]:
        """Plain tensors, numbers and strings (``torch.save``-able)."""
        return {"form": type(self.polynomial).__name__, "polynomial": self.polynomial.state_dict(),
                "distribution": _mixture_state(self.distribution), "degree": self.degree, "method": self.method,
                "moments": {f.name: getattr(self.moments, f.name) for f in dataclasses.fields(OutputMoments)},
                "diagnostics": dict(self.diagnostics)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "Approximation":
        """The result :meth:`state_dict` saved; its FVU is exact as before (no model needed)."""
        missing = [k for k in ("form", "polynomial", "distribution", "degree", "method", "moments") if k not in state]
        if missing or state.get("form") not in _FORMS:
            raise ApproxInputError(f"not an Approximation state dict (missing {missing}, form {state.get('form')!r}); "
                                   "save one with Approximation.state_dict()")
        dist = state["distribution"]
        mix = GaussianMixture(dist["weights"], dist["means"], dist["covs"], dtype=None, validate=False,
                              ridge=dist.get("ridge"), ridge_abs=dist.get("ridge_abs"))
        return cls(_FORMS[state["form"]].from_state_dict(state["polynomial"]), mix, int(state["degree"]),
                   state["method"], OutputMoments(**state["moments"]),
                   MappingProxyType(dict(state.get("diagnostics", {}))))


def _monomial_moments(model, g: Approximant, mixture: GaussianMixture, ef, ef2) -> OutputMoments:
    q = g.to(mixture.device, mixture.dtype).quadratic()
    efg = inner((q.alpha, q.beta, q.gamma), monomial_rhs(model.to(dtype=mixture.dtype), mixture))
    second = mixture.covs + mixture.means[:, :, None] * mixture.means[:, None, :]  # E_k[x xᵀ]
    eg_k = q.alpha + mixture.means @ q.beta.T + torch.einsum("oij,kij->ko", q.gamma, second)
    return OutputMoments(ef, ef2, mixture.weights @ eg_k, efg, expected_sq_norm(q, mixture))


def _options_for(fun, options: dict, what: str) -> dict:
    params = inspect.signature(fun).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return options
    allowed = {n for n, p in params.items() if p.kind == p.KEYWORD_ONLY or n not in ("model", "mixture", "mean", "cov")}
    bad = sorted(set(options) - allowed)
    if bad:
        raise ApproxInputError(f"option(s) {bad} do not apply to {what}; its options are {sorted(allowed)}")
    return options


def approximate(model, distribution: GaussianMixture, degree: int = 2, method: str = "exact", *,
                components: int | None = None, **options) -> Approximation:
    """The least-squares polynomial of degree ≤ ``degree`` of ``model`` under ``distribution`` (a
    :class:`GaussianMixture`; one Gaussian is ``GaussianMixture.single(mean, cov)`` or K = 1).

    ``model``: an :class:`MLP` or :class:`GLU`, an ``nn.Sequential(nn.Linear, activation, nn.Linear)``
    or a gated MLP block (see :func:`~polyinterp.approx.core.mlp.as_model`). ``method``: ``"exact"``
    or ``"sgd"`` (the paper's baseline, degree 2). ``components``: fit on the distribution's top
    principal components (needed for degree ≥ 3 under a mixture of K > 1). ``options``: passed to the
    fit that runs (module docstring), e.g. ``ridge`` for the linear fit, ``tol`` for the exact quadratic,
    ``steps``/``lr``/``seed`` for SGD; an option the fit does not take is refused by name.

    Returns a frozen :class:`Approximation` whose ``fvu()`` is exact under ``distribution``. A
    combination that has no exact fit (degree ≥ 3 under a mixture without ``components``; SGD at
    another degree) raises :class:`ApproxInputError` naming what is possible.
    """
    if not isinstance(distribution, GaussianMixture):
        raise ApproxInputError(f"distribution must be a GaussianMixture (one Gaussian: GaussianMixture.single(mean, "
                               f"cov); from data: GaussianMixture.from_data), got {type(distribution).__name__}")
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
        raise ApproxInputError(f"degree must be an int >= 1, got {degree!r}")
    if method not in ("exact", "sgd"):
        raise ApproxInputError(f"unknown method {method!r}; use 'exact' or 'sgd'")
    model = as_model(model, dtype=distribution.dtype).to(device=distribution.device, dtype=distribution.dtype)
    t0 = time.perf_counter()
    K = distribution.K
    if method == "sgd":
        if degree != 2 or components is not None:
            raise ApproxInputError(f"method='sgd' fits the quadratic in all inputs only (degree=2, no components); "
                                   f"got degree={degree}, components={components}: use method='exact'")
        g = quadratic_approximant(model, distribution, "sgd", **options)
    elif components is not None:
        kw = _options_for(reduced_polynomial_approximant, options, "the principal-component fit")
        g = reduced_polynomial_approximant(model, distribution, components, degree, **kw)
    elif degree == 1:
        g = linear_approximant(model, distribution, **_options_for(linear_approximant, options, "the linear fit"))
    elif degree == 2:
        g = quadratic_approximant(model, distribution, "exact", **options)
    elif K == 1:
        kw = _options_for(gaussian_polynomial_approximant, options, "the Gaussian polynomial fit")
        kw.pop("degree", None)
        g = gaussian_polynomial_approximant(model, distribution, degree=degree, **kw)
    else:
        raise ApproxInputError(
            f"degree {degree} in all d = {distribution.d} inputs under a mixture of K = {K} components has no exact "
            f"fit here (C(d + {degree}, {degree}) coefficients per output); possible: degree 1 or 2 in all inputs, "
            f"degree {degree} on the mixture's top principal components (components=p, e.g. 20 to 50), or degree "
            f"{degree} under one Gaussian (distribution.moment_matched())")
    t_fit = time.perf_counter() - t0
    if isinstance(g, ReducedPolynomialApproximant):
        m = g.expected_moments()
        moments = OutputMoments(m["ef"], m["ef2"], m["eg"], m["efg"], m["eg2"])
    elif isinstance(g, HermiteRidgeApproximant):
        m = g.expected_moments()  # g is the orthogonal projection of f, so E[f g] = E g²
        moments = OutputMoments(m["ef"], m["ef2"], m["eg"], m["eg2"], m["eg2"])
    else:
        ef, ef2 = output_moments(model, distribution)
        moments = _monomial_moments(model, g, distribution, ef, ef2)
    diagnostics = {**g.fit_info, "fit_seconds": t_fit, "fvu_moments_seconds": time.perf_counter() - t0 - t_fit}
    return Approximation(g, distribution, degree, method, moments, MappingProxyType(diagnostics))

"""One entry point for the quadratic approximant: ``exact`` (closed form / PCG) or ``sgd`` (baseline),
each method with its own options dataclass."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import check_model
from polyinterp.approx.fits.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.solvers.precision import resolve_inner_dtype
from polyinterp.approx.fits.quadratic_mixture import quadratic_mixture
from polyinterp.approx.fits.quadratic_sgd import quadratic_sgd


@dataclass(frozen=True)
class ExactOptions:
    """Options of the exact L²(mixture) projection (K > 1: block PCG on the normal equations).

    ``tol``: relative residual (float64, whitened coordinates); ``max_iter``: PCG iterations;
    ``inner_dtype``: precision of the products inside PCG (``"auto"``: bfloat16 where fast, else
    float32; None or ``"float64"``: all float64; the result meets ``tol`` in float64 either way);
    ``preconditioner``: ``"joint_diagonal"`` or ``"moment_matched"``; ``jd_sweeps`` and ``rcond``:
    used only when no :class:`SolverPlan` is given (the plan is then built here, with the default Newton
    basis, or the identity basis when ``jd_sweeps`` = 0; build a :class:`SolverPlan` with
    ``basis="jacobi"`` for a given number of Jacobi sweeps)."""

    tol: float = 1e-6
    max_iter: int = 500
    inner_dtype: object = "auto"
    preconditioner: str = "joint_diagonal"
    jd_sweeps: int = 2
    rcond: float = 1e-10


@dataclass(frozen=True)
class SGDOptions:
    """Options of the paper's baseline: minibatch SGD on mixture samples (``steps`` of ``batch``
    samples at learning rate ``lr``) from the closed form under N(0, I) (``init="standard"``) or
    under the moment-matched Gaussian (``init="moment_matched"``), with ``optimizer``
    ``"adamw_schedulefree"`` (AdamW-ScheduleFree, its averaged iterate returned) or
    ``"sgd_schedulefree"`` (the authors' code: torch SGD in schedule-free's ScheduleFreeWrapper with
    ``momentum``, the iterate returned as their code leaves it, in train mode). ``product_dtype``: the
    precision of the large product inside each step (:func:`quadratic_sgd`): ``"float32"`` (as the
    authors ran it), ``"bfloat16"``, or ``"auto"`` (bfloat16 where its products are fast and d ≥ 256,
    as for the exact fit's ``inner_dtype``)."""

    steps: int = 2000
    batch: int = 256
    lr: float = 1e-3
    init: str = "standard"
    optimizer: str = "adamw_schedulefree"
    momentum: float = 0.9
    product_dtype: object = "float32"


SGD_PRODUCT_DTYPES = ("auto", "bfloat16", "float32")
_OPTIONS = {"exact": ExactOptions, "sgd": SGDOptions}


def _options(method: str, options: dict):
    if method not in _OPTIONS:
        raise ApproxInputError(f"unknown method {method!r}; use 'exact' or 'sgd'")
    cls = _OPTIONS[method]
    names = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(options) - names)
    if bad:
        raise ApproxInputError(f"option(s) {bad} do not belong to method {method!r}; its options are "
                               f"{sorted(names)} ({cls.__name__})")
    return cls(**options)


def quadratic_approximant(model, mixture: GaussianMixture, method: str = "exact", *, plan=None,
                          warm_start: Approximant | None = None, warm_start_model=None,
                          generator: torch.Generator | None = None, seed: int | None = None,
                          **options) -> Approximant:
    """Quadratic approximant g(x) = α + βx + xᵀΓx of an :class:`MLP`/:class:`GLU` under ``mixture``.

    ``method="exact"``: the L²(mixture) projection. K = 1 uses the closed form (second-order Stein);
    K > 1 solves the normal equations matrix-free by PCG (:mod:`polyinterp.approx.fits.quadratic_mixture`)
    with the mixture's ``plan`` (a :class:`SolverPlan`; built here when omitted), from ``warm_start``
    when given (with ``warm_start_model``, the model it was computed for, corrected by the change of
    the closed form). ``method="sgd"``: the paper's baseline, samples drawn with ``generator`` or
    ``seed``. ``options``: the fields of :class:`ExactOptions` or :class:`SGDOptions` (an option of
    the other method is refused by name). ``fit_info`` records method, iterations, residual, seconds.
    """
    opts = _options(method, options)
    unused = {"sgd": {"plan": plan, "warm_start": warm_start, "warm_start_model": warm_start_model},
              "exact": {"generator": generator, "seed": seed}}[method]
    given = sorted(k for k, v in unused.items() if v is not None)
    if given:
        raise ApproxInputError(f"argument(s) {given} do not apply to method {method!r}")
    if not isinstance(mixture, GaussianMixture):
        raise ApproxInputError(f"mixture must be a GaussianMixture, got {type(mixture).__name__}")
    check_model(model, mixture.d, mixture.device)
    model = model.to(dtype=mixture.dtype)
    if method == "sgd":
        products = resolve_inner_dtype(opts.product_dtype, SGD_PRODUCT_DTYPES, device=mixture.device, d=mixture.d,
                                       key="sgd product_dtype")
        return quadratic_sgd(model, mixture, steps=opts.steps, batch=opts.batch, lr=opts.lr, generator=generator,
                             seed=seed, init=opts.init, optimizer=opts.optimizer, momentum=opts.momentum,
                             product_dtype=products)
    if not opts.tol > 0:
        raise ApproxInputError(f"tol must be > 0, got {opts.tol}")
    if warm_start is not None and (warm_start.d != mixture.d or warm_start.o != model.o):
        raise ApproxInputError(f"warm_start has d = {warm_start.d}, o = {warm_start.o}; the problem has "
                               f"d = {mixture.d}, o = {model.o}: pass the solution of the same problem")
    if warm_start_model is not None:
        if warm_start is None:
            raise ApproxInputError("warm_start_model was given without warm_start; pass the previous solution too")
        check_model(warm_start_model, mixture.d, mixture.device)
    if mixture.K == 1:
        t0 = time.perf_counter()
        out = quadratic_gaussian(model, mixture.means[0], mixture.covs[0])
        return dataclasses.replace(out, fit_info={"method": "exact", "degree": 2, "solver": "closed_form", "iterations": 0,
                        "residual": 0.0, "tol": opts.tol, "converged": True, "K": 1,
                        "seconds": time.perf_counter() - t0})
    return quadratic_mixture(model, mixture, tol=opts.tol, max_iter=opts.max_iter, warm_start=warm_start,
                             inner_dtype=opts.inner_dtype, rcond=opts.rcond, preconditioner=opts.preconditioner,
                             jd_sweeps=opts.jd_sweeps, plan=plan, warm_start_model=warm_start_model)

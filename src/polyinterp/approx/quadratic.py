"""One entry point for the quadratic approximant: ``exact`` (closed form / PCG) or ``sgd`` (baseline)."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.approximant import Approximant
from polyinterp.approx.errors import ApproxInputError
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.mlp import check_model
from polyinterp.approx.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.quadratic_mixture import quadratic_mixture
from polyinterp.approx.quadratic_sgd import quadratic_sgd


def quadratic_approximant(model, mixture: GaussianMixture, method: str = "exact", *, tol: float = 1e-6,
                          max_iter: int = 500, warm_start: Approximant | None = None,
                          inner_dtype="auto", rcond: float = 1e-10,
                          sgd_steps: int = 2000, sgd_batch: int = 256, sgd_lr: float = 1e-3,
                          sgd_init: str = "standard", generator: torch.Generator | None = None,
                          seed: int | None = None, preconditioner: str = "joint_diagonal",
                          jd_sweeps: int = 2, plan=None, warm_start_model=None) -> Approximant:
    """Quadratic approximant g(x) = α + βx + xᵀΓx of an :class:`MLP`/:class:`GLU` under ``mixture``.

    ``method="exact"``: the L²(mixture) projection. K = 1 uses the closed form (second-order Stein,
    O(h·d²)); K > 1 solves the normal equations matrix-free by PCG to relative residual ``tol``
    (in whitened coordinates) within ``max_iter`` iterations, from ``warm_start`` when given (e.g.
    the previous checkpoint's solution; with ``warm_start_model``, the model it was computed for, the
    start is corrected by the change of the closed form), preconditioned by ``preconditioner`` (``"joint_diagonal"``
    in the basis of ``plan``, a :class:`SolverPlan` built once per mixture — here, with ``jd_sweeps``
    Jacobi sweeps, when omitted — or ``"moment_matched"``) — see
    :mod:`polyinterp.approx.quadratic_mixture` and :mod:`polyinterp.approx.mixture_preconditioner`.
    ``method="sgd"``: the paper's baseline (``sgd_steps``, ``sgd_batch``, ``sgd_lr``; samples drawn
    with ``generator`` or ``seed``). ``inner_dtype``: precision of the products inside PCG
    (``"auto"``: bfloat16 where fast, else float32; None: float64) — the result meets ``tol`` in
    float64 either way. ``fit_info`` records method, iterations, residual and seconds.
    """
    if not isinstance(mixture, GaussianMixture):
        raise ApproxInputError(f"mixture must be a GaussianMixture, got {type(mixture).__name__}")
    check_model(model, mixture.d, mixture.device)
    if not tol > 0:
        raise ApproxInputError(f"tol must be > 0, got {tol}")
    if warm_start is not None and (warm_start.d != mixture.d or warm_start.o != model.o):
        raise ApproxInputError(f"warm_start has d = {warm_start.d}, o = {warm_start.o}; the problem has "
                               f"d = {mixture.d}, o = {model.o}: pass the solution of the same problem")
    if warm_start_model is not None:
        if warm_start is None:
            raise ApproxInputError("warm_start_model was given without warm_start; pass the previous solution too")
        check_model(warm_start_model, mixture.d, mixture.device)
    model = model.to(dtype=mixture.dtype)
    if method == "exact":
        if mixture.K == 1:
            t0 = time.perf_counter()
            out = quadratic_gaussian(model, mixture.means[0], mixture.covs[0])
            out.fit_info = {"method": "exact", "degree": 2, "solver": "closed_form", "iterations": 0,
                            "residual": 0.0, "tol": tol, "converged": True, "K": 1,
                            "seconds": time.perf_counter() - t0}
            return out
        return quadratic_mixture(model, mixture, tol=tol, max_iter=max_iter, warm_start=warm_start,
                                 inner_dtype=inner_dtype, rcond=rcond, preconditioner=preconditioner,
                                 jd_sweeps=jd_sweeps, plan=plan, warm_start_model=warm_start_model)
    if method == "sgd":
        return quadratic_sgd(model, mixture, steps=sgd_steps, batch=sgd_batch, lr=sgd_lr, generator=generator,
                             seed=seed, init=sgd_init)
    raise ApproxInputError(f"unknown method {method!r}; use 'exact' or 'sgd'")

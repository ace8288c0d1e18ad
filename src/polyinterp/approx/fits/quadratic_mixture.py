"""Exact quadratic approximant under a Gaussian mixture: matrix-free normal equations + PCG.

Unknowns θ = (α [o], β [o, d], Γ [o, d, d] symmetric) with the Frobenius inner product
⟨θ, θ'⟩ = αα' + β·β' + tr(ΓΓ') (so off-diagonal entries of Γ count twice, as they do in g).
The normal equations are A θ = r with

    A θ = (E[g], E[g x], E[g x xᵀ]),  r = (E[f], E[f x], E[f x xᵀ]),  g(x) = α + βᵀx + xᵀΓx,

an operator that is self-adjoint and positive semi-definite in that inner product (⟨θ', Aθ⟩ =
E[g g']). Per component k (x = μ_k + z, z ~ N(0, Σ_k)), with c = α + βᵀμ + μᵀΓμ and b = β + 2Γμ,
Isserlis gives E[g] = c + tr(ΓΣ), E[g z] = Σb, E[g z zᵀ] = (c + tr(ΓΣ))Σ + 2ΣΓΣ; and Stein gives the
right-hand side E[f z] = Σ E∇f, E[f z zᵀ] = E[f]Σ + Σ E[∇²f] Σ. Nothing of size d² × d² is formed.

The system is solved in coordinates whitened by the mixture's total covariance by block PCG
(:mod:`polyinterp.approx.solvers.block_pcg`) on the quadratics as forms x̃ᵀXx̃ (x̃ = (1, x)) in the
preconditioner's basis Q (:mod:`polyinterp.approx.solvers.form_operator`): with the joint-diagonal
preconditioner (:mod:`polyinterp.approx.solvers.mixture_preconditioner`) Q jointly diagonalises the components'
second moments and the preconditioner is an elementwise division plus a rank-(K + 1) Woodbury
correction, with no d³ product; with the moment-matched one (the closed-form inverse of the Gram
operator of N(0, I), Γ = (R − r₀I)/2, β = r₁, α = r₀ − tr Γ) Q is the identity. The isolated
eigenvalues that the plan found are deflated (:mod:`polyinterp.approx.solvers.deflation`), together with the
plan's coarse space of forms W S Wᵀ (:mod:`polyinterp.approx.solvers.coarse_space`) when it has one. The Gram products
inside the iteration run in ``inner_dtype``: ``"auto"`` picks bfloat16 for the d³ products where the
hardware has fast bfloat16 (AVX512-BF16/AMX CPUs, CUDA from compute capability 8.0) and d ≥ 256,
float32 otherwise. Iterate and residual are float64, the recursive residual is replaced whenever it has
dropped tenfold (bfloat16 products) or ten-thousandfold (float32 ones; reliable updates,
:data:`REPLACE_FACTOR`): with bfloat16 products by a float32 update anchored at the last float64 residual
(:func:`_anchored_operator`), else by the float64 residual; a stall and the end take a float64 residual,
and convergence is declared on a float64 residual only, in the Frobenius norm of the residual's form
(r₀² + 2‖r₁‖² + ‖R₂‖², the same in every basis Q), so ``tol`` holds in float64 whatever the inner
precision (lower precision may cost iterations; measurements in ``bench/README.md``).
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.solvers.block_pcg import block_pcg, relative_residual
from polyinterp.approx.solvers.deflation import Deflation
from polyinterp.approx.core.device_clock import clock
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.form_operator import (FormGramOperator, affine_map, form_to_theta, rotate,
                                                     theta_to_form)
from polyinterp.approx.solvers.gram_operator import Theta, add, block_inner, cast
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.solvers.precision import resolve_inner_dtype
from polyinterp.approx.solvers.mixture_preconditioner import BasisPreconditioner, form_to_dual, to_form
from polyinterp.approx.fits.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.solvers.solver_plan import SolverPlan
from polyinterp.approx.moments.monomial_rhs import monomial_rhs


def standard_gaussian_inverse(r: Theta) -> Theta:
    """Inverse of the Gram operator of N(0, I): the preconditioner in whitened coordinates."""
    r0, r1, R2 = r
    eye = torch.eye(R2.shape[-1], dtype=R2.dtype, device=R2.device)
    G = 0.5 * (R2 - r0[:, None, None] * eye)
    return r0 - torch.diagonal(G, dim1=1, dim2=2).sum(-1), r1, G


# Reliable updates: the float64 residual replaces the recursive one once that has fallen by this factor
# since the last float64 one. bfloat16 products (good to ≈ 3e-3) let the recursive residual drift from the
# true one within a decade or two; float32 (and float64) ones do not: on the MNIST mixture at ridges 1e-2 and
# 1e-4 and on the synthetic one, factors 1e-2, 1e-3 (MNIST, 1e-2) and 1e-5 took the same iterations to the same
# float64 residual (to 3 %), so with the default tol 1e-6 a solve whose coarse-corrected start is within 1e-2
# typically takes only its start's and its final float64 residual (a stall restart adds one: the cold solve at
# ridge 1e-4 took three), each costing about two float32 products (bench/README.md, "Lanczos on forms, fewer
# float64 residuals").
REPLACE_FACTOR = {torch.bfloat16: 0.1, torch.float32: 1e-4, torch.float64: 1e-4}


def _inner_operator(op_hi: FormGramOperator, wmix: GaussianMixture, inner_dtype):
    """(operator inside the iteration, resolved dtype): ``op_hi`` itself for float64, else a float32
    copy of it whose products run in the resolved dtype (any input precision, float32 output: the
    iteration's search directions are float32 then)."""
    inner_dtype = resolve_inner_dtype(inner_dtype, device=wmix.device, d=wmix.d)
    if inner_dtype is None or inner_dtype == wmix.dtype:
        return op_hi, wmix.dtype
    lo = op_hi.to(torch.float32, product_dtype=inner_dtype)
    return (lambda th: lo(cast(th, torch.float32))), inner_dtype


def _anchored_operator(op_hi: FormGramOperator, resolved):
    """The operator of block PCG's intermediate reliable updates (``op_mid``): float32 products where the
    iteration's are bfloat16, whose recursive residual drifts within a decade (:data:`REPLACE_FACTOR`). An
    update anchored at the last float64 residual has float32 round-off on the correction alone, so it
    replaces the drifted residual about as well as a float64 one, for the price of a float32 product
    (convergence is still declared on a float64 residual). None otherwise: with float32 or float64 products
    every reliable update is rare (ten-thousandfold) and takes a float64 residual."""
    if resolved != torch.bfloat16:
        return None
    mid = op_hi.to(torch.float32, product_dtype=torch.float32)
    return lambda th: mid(cast(th, torch.float32))


def quadratic_mixture(model, mixture: GaussianMixture, *, tol: float = 1e-6, max_iter: int = 500,
                      warm_start: Approximant | None = None, inner_dtype="auto",
                      rcond: float = 1e-10, preconditioner: str = "joint_diagonal", jd_sweeps: int = 2,
                      plan: SolverPlan | None = None, warm_start_model=None) -> Approximant:
    """The exact L²(mixture) projection of ``model`` onto quadratics (see module docstring).

    ``preconditioner``: ``"joint_diagonal"`` (default, :class:`MixturePreconditioner` in the basis of
    ``plan``, with the plan's deflation) or ``"moment_matched"`` (the Gram inverse of N(0, I) in
    whitened coordinates, no deflation).
    ``plan``: the per-mixture precomputation (:class:`SolverPlan`, reusable for every model of the
    same mixture); built here when omitted, with the default (Newton) basis, Lanczos steps and coarse space and
    ``rcond``, or with the identity basis when ``jd_sweeps`` = 0 (any other value builds the Newton basis; for
    Jacobi sweeps pass ``SolverPlan.build(mixture, basis="jacobi", sweeps=…)`` as the plan; a given plan brings
    its own whitening and basis, so ``rcond`` and ``jd_sweeps`` are then unused).
    ``inner_dtype``: ``"auto"``, ``torch.bfloat16``, ``torch.float32`` or None (all float64), or
    one of the names in :data:`polyinterp.approx.solvers.precision.INNER_DTYPES` (as in the config).
    ``warm_start``: a previous solution (e.g. the previous checkpoint's). With ``warm_start_model``,
    the model it solved for, the start is corrected by the change of the moment-matched closed form,
    x₀ = x_prev + (x_mm(model) − x_mm(warm_start_model)): the closed form carries the change of the
    network and x_prev the mixture's correction to it. The start with the smaller residual is used.
    """
    t0 = time.perf_counter()
    t_coarse = 0.0
    if preconditioner not in ("joint_diagonal", "moment_matched"):
        raise ApproxInputError(f"preconditioner must be 'joint_diagonal' or 'moment_matched', got {preconditioner!r}")
    t_setup = time.perf_counter()
    if plan is None:
        # without Jacobi sweeps (moment-matched preconditioner) the plan has no deflation either
        plan = SolverPlan.build(mixture, sweeps=jd_sweeps if preconditioner == "joint_diagonal" else 0, rcond=rcond)
    plan = plan.to(mixture.device, mixture.dtype)
    W = plan.whitening
    wmix = plan.whiten(mixture)
    # the iteration runs on forms x̃ᵀXx̃ in the preconditioner's basis Q (identity for the moment-matched
    # one), where the joint-diagonal preconditioner needs no n³ product (polyinterp.approx.solvers.form_operator)
    Q = plan.basis if preconditioner == "joint_diagonal" else torch.eye(W.rank + 1, dtype=mixture.dtype,
                                                                         device=mixture.device)
    op_hi = FormGramOperator(wmix, Q)
    op_lo, resolved = _inner_operator(op_hi, wmix, inner_dtype)
    op_mid = _anchored_operator(op_hi, resolved)
    # with low-precision products the search directions and the work around the product are float32
    directions = None if resolved == wmix.dtype else torch.float32
    to_q = lambda theta: (rotate(theta_to_form(theta), Q),)  # noqa: E731  coefficients → state
    dual_to_q = lambda r: (rotate(to_form(r), Q),)  # noqa: E731  right-hand side → state
    deflation = None
    if preconditioner == "joint_diagonal":
        # from the operator's rotated moments: the same preconditioner as
        # MixturePreconditioner(wmix, plan.basis).in_basis() without its n³ products
        precond = BasisPreconditioner.from_moments(op_hi.M, wmix.weights, Q[0]).to(directions or wmix.dtype)
        if plan.coarse_basis is not None:
            t_coarse = clock(Q)
            deflation = plan.coarse_space(op_hi, product_dtype=None if resolved == wmix.dtype else torch.float32)
            t_coarse = clock(Q) - t_coarse
        elif (V := plan.deflation_forms()) is not None:
            deflation = Deflation(V, op_hi)
    else:
        precond = lambda R: (theta_to_form(standard_gaussian_inverse(form_to_dual(R[0]))),)  # noqa: E731
    t_setup_end = clock(Q)
    t_setup = t_setup_end - t_setup
    wmodel = model.affine(W.M, W.shift)
    rhs = dual_to_q(monomial_rhs(wmodel, wmix))
    t_rhs = clock(Q)
    eye = torch.eye(W.rank, dtype=mixture.dtype, device=mixture.device)
    zero = torch.zeros(W.rank, dtype=mixture.dtype, device=mixture.device)
    mm = quadratic_gaussian(wmodel, zero, eye)
    x0, start, r0 = to_q((mm.alpha, mm.beta, mm.gamma)), "moment_matched", None
    if warm_start is not None:
        # keep the warm start only if its residual beats the moment-matched start's
        # the warm start in whitened coordinates and the basis Q at once: one sandwich by T Q, T the whitening's
        # affine map on x̃ (instead of composing, then rotating)
        ws = warm_start.to(mixture.device, mixture.dtype).quadratic()
        x_ws = (rotate(theta_to_form((ws.alpha, ws.beta, ws.gamma)), affine_map(W.M, W.shift) @ Q),)
        if warm_start_model is not None:
            prev = warm_start_model.to(mixture.device, mixture.dtype).affine(W.M, W.shift)
            mm_prev = quadratic_gaussian(prev, zero, eye)
            x_ws = add(x_ws, add(x0, to_q((mm_prev.alpha, mm_prev.beta, mm_prev.gamma)), -1.0))
        bnorm = torch.diagonal(block_inner(rhs, rhs)).sqrt()
        r_ws = add(rhs, op_hi(x_ws), -1.0)
        # r_mm = r_ws + A(x_ws − x_mm) only decides the start (to a few per cent), so the inner
        # operator will do; the start's float64 residual is computed when it is the closed form
        r_mm = add(r_ws, op_lo(add(x_ws, x0, -1.0)))
        if float((relative_residual(r_ws, bnorm) / relative_residual(r_mm, bnorm)).max()) <= 1.0:
            x0, r0 = x_ws, r_ws
            start = "warm_start (closed-form corrected)" if warm_start_model is not None else "warm_start"
        else:
            start = "moment_matched (warm start was worse)"
    t_start = clock(Q)
    xq, it, rel, extra = block_pcg(op_hi, op_lo, precond, rhs, x0, tol, max_iter, r0=r0, deflation=deflation,
                                   replace_factor=REPLACE_FACTOR.get(resolved, 0.1), direction_dtype=directions,
                                   op_mid=op_mid)
    t_pcg = clock(Q) - t_start
    # back from the basis Q and to the original coordinates, x' = P(x − shift), in one sandwich (Γ symmetrised);
    # α, β, Γ as tensors of their own, not views into the form (which a saved file would carry whole)
    out = Approximant(*(t.contiguous() for t in form_to_theta(rotate(xq[0], Q.T @ affine_map(W.P, -(W.P @ W.shift))))),
                      {})
    return dataclasses.replace(out, fit_info={
        "method": "exact", "degree": 2, "iterations": it, "residual": float(rel.max()), "tol": tol,
        "converged": bool((rel <= tol).all()), "seconds": time.perf_counter() - t0, "start": start,
        "inner_dtype": str(resolved).replace("torch.", ""), "rank": W.rank, "K": mixture.K,
        "true_residuals": extra["true_residuals"], "anchored_residuals": extra["anchored_residuals"],
        "preconditioner": preconditioner, "deflated": getattr(deflation, "explicit", getattr(deflation, "k", 0)),
        "coarse_dimension": getattr(deflation, "m", 0),
        "deflation_rejected": int((plan.deflation_info or {}).get("rejected", 0)),
        "setup_seconds": t_setup, "basis": plan.basis_method, "jd_sweeps": plan.sweeps,
        # where the time went (each part timed after the device finished it): setup (the plan when none was
        # given, whitening, operator, preconditioner; coarse_setup: of it the coarse space), right-hand side,
        # start (closed form, warm start's residuals, PCG's start residual and coarse correction), the
        # iterations, the later float64 residuals and the float32 updates anchored at them (each with its
        # coarse correction)
        "seconds_by_part": {"setup": t_setup, "coarse_setup": t_coarse, "rhs": t_rhs - t_setup_end,
                            "start": t_start - t_rhs + extra["start_seconds"],
                            "iterations": t_pcg - extra["start_seconds"] - extra["true_residual_seconds"]
                            - extra["anchored_residual_seconds"],
                            "true_residuals": extra["true_residual_seconds"],
                            "anchored_residuals": extra["anchored_residual_seconds"]},
        "residual_history": [h for h in extra["history"] if math.isfinite(h)],
    })

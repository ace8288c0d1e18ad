"""Exact quadratic approximant under a Gaussian mixture: matrix-free normal equations + PCG.

Unknowns θ = (α [o], β [o, d], Γ [o, d, d] symmetric) with the Frobenius inner product
⟨θ, θ'⟩ = αα' + β·β' + tr(ΓΓ') (so off-diagonal entries of Γ count twice, as they do in g).
The normal equations are A θ = r with

    A θ = (E[g], E[g x], E[g x xᵀ]),  r = (E[f], E[f x], E[f x xᵀ]),  g(x) = α + βᵀx + xᵀΓx,

an operator that is self-adjoint and positive semi-definite in that inner product (⟨θ', Aθ⟩ =
E[g g']). Per component k (x = μ_k + z, z ~ N(0, Σ_k)), with c = α + βᵀμ + μᵀΓμ and b = β + 2Γμ,
Isserlis gives E[g] = c + tr(ΓΣ), E[g z] = Σb, E[g z zᵀ] = (c + tr(ΓΣ))Σ + 2ΣΓΣ; and Stein gives the
right-hand side E[f z] = Σ E∇f, E[f z zᵀ] = E[f]Σ + Σ E[∇²f] Σ. Nothing of size d² × d² is formed.

The system is solved in coordinates whitened by the mixture's total covariance, where the Gram
operator of the moment-matched Gaussian N(0, I) has the closed-form inverse used as preconditioner
(Γ = (R − r₀I)/2, β = r₁, α = r₀ − tr Γ). Matrix–vector products run in ``inner_dtype`` (float32 by
default: twice the speed on CPUs) while iterate and residual are float64; the recursive residual is
replaced by the true float64 residual whenever it has dropped tenfold (reliable updates), which
keeps the attainable accuracy of float64. The operator output is symmetrised exactly (round-off
asymmetry otherwise makes CG diverge).
"""

from __future__ import annotations

import math
import time

import torch

from polyinterp.approx.approximant import Approximant
from polyinterp.approx.errors import ApproxInputError
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.mixture_preconditioner import MixturePreconditioner
from polyinterp.approx.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.solver_plan import SolverPlan
from polyinterp.approx.stein import stein_data

Theta = tuple  # (alpha [o], beta [o, d], gamma [o, d, d])


def _sym(G: torch.Tensor) -> torch.Tensor:
    return 0.5 * (G + G.transpose(-1, -2))


def inner(x: Theta, y: Theta) -> torch.Tensor:
    """Per-output inner products [o]."""
    return x[0] * y[0] + (x[1] * y[1]).sum(-1) + (x[2] * y[2]).sum((-1, -2))


def cast(x: Theta, dtype: torch.dtype) -> Theta:
    return tuple(t.to(dtype) for t in x)


class GramOperator:
    """θ ↦ (E[g], E[g x], E[g x xᵀ]) under a mixture (exactly symmetrised)."""

    def __init__(self, mixture: GaussianMixture):
        self.w, self.m, self.S = mixture.weights, mixture.means, mixture.covs

    def __call__(self, theta: Theta) -> Theta:
        a, b, G = theta
        w, m, S = self.w.to(G.dtype), self.m.to(G.dtype), self.S.to(G.dtype)
        o, d = b.shape
        R2 = torch.zeros_like(G)
        Eg_all, Egz_all = [], []
        for k in range(w.shape[0]):
            Gm = G @ m[k]  # [o, d]
            c = a + b @ m[k] + Gm @ m[k]
            Eg = c + (G * S[k]).sum((1, 2))
            Egz = (b + 2 * Gm) @ S[k]
            SGS = (torch.matmul(S[k], G).reshape(o * d, d) @ S[k]).view(o, d, d)
            R2.add_(SGS, alpha=float(2 * w[k]))
            Eg_all.append(Eg)
            Egz_all.append(Egz)
        Eg = torch.stack(Eg_all, 1) * w  # [o, K] weighted
        Egz = torch.stack(Egz_all, 1) * w[:, None]  # [o, K, d] weighted
        R2 += torch.einsum("ok,kij->oij", Eg, S)
        R2 += torch.einsum("ok,ki,kj->oij", Eg, m, m)
        mEgz = torch.einsum("ki,okj->oij", m, Egz)
        R2 += mEgz + mEgz.transpose(1, 2)
        r0 = Eg.sum(1)
        r1 = torch.einsum("ok,ki->oi", Eg, m) + Egz.sum(1)
        return r0, r1, _sym(R2)


def rhs_mixture(model, mixture: GaussianMixture) -> Theta:
    """(E[f], E[f x], E[f x xᵀ]) under the mixture, by first/second-order Stein per component."""
    r0 = r1 = R2 = 0
    for k in range(mixture.K):
        m, S, w = mixture.means[k], mixture.covs[k], mixture.weights[k]
        sd = stein_data(model, m, S, order=2)
        Ef = sd.mean_f
        Efz = sd.grad @ S
        Efzz = Ef[:, None, None] * S + sd.hess.sandwich(S)
        mEfz = m[None, :, None] * Efz[:, None, :]
        r0 = r0 + w * Ef
        r1 = r1 + w * (Ef[:, None] * m + Efz)
        R2 = R2 + w * (Efzz + Ef[:, None, None] * torch.outer(m, m) + mEfz + mEfz.transpose(1, 2))
    return r0, r1, _sym(R2)


def standard_gaussian_inverse(r: Theta) -> Theta:
    """Inverse of the Gram operator of N(0, I): the preconditioner in whitened coordinates."""
    r0, r1, R2 = r
    eye = torch.eye(R2.shape[-1], dtype=R2.dtype, device=R2.device)
    G = 0.5 * (R2 - r0[:, None, None] * eye)
    return r0 - torch.diagonal(G, dim1=1, dim2=2).sum(-1), r1, G


def block_inner(X: Theta, Y: Theta) -> torch.Tensor:
    """[s, t] matrix of inner products between the columns (outputs) of two blocks."""
    return (X[0][:, None] * Y[0][None, :] + X[1] @ Y[1].T
            + X[2].reshape(X[2].shape[0], -1) @ Y[2].reshape(Y[2].shape[0], -1).T)


def block_combine(X: Theta, T: torch.Tensor) -> Theta:
    """Columns recombined, X T for T [s, t]."""
    return (T.T @ X[0], T.T @ X[1], (T.T @ X[2].reshape(X[2].shape[0], -1)).view(T.shape[1], *X[2].shape[1:]))


def _add(X: Theta, Y: Theta, a: float = 1.0) -> Theta:
    return tuple(x + a * y for x, y in zip(X, Y))


def _rel(R: Theta, bnorm: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(block_inner(R, R)).clamp_min(0).sqrt() / bnorm


def block_pcg(op_hi, op_lo, precond, rhs: Theta, x0: Theta, tol: float, max_iter: int, replace_factor: float = 0.1,
              r0: Theta | None = None):
    """Block preconditioned CG over the o right-hand sides (one per output), which share the operator.

    The search block is A-orthonormalised every iteration (eigen-decomposition of PᵀAP, dropping
    directions below 1e-12 of the largest, so converged or dependent columns cannot break it down).
    Searching the joint Krylov space of all outputs needs ~40 % fewer iterations than o separate
    CG runs on MNIST. ``op_lo`` computes the products inside the iteration; ``op_hi`` the true
    residual at the start, whenever the recursive residual fell by ``replace_factor`` since the last
    true one (reliable updates), and before declaring convergence.
    ``r0`` is the residual of ``x0`` when the caller has it already.
    Returns (x, iterations, relative residual per output [o], info).
    """
    bnorm = torch.diagonal(block_inner(rhs, rhs)).sqrt().clamp_min(torch.finfo(rhs[1].dtype).tiny)
    X = x0
    R = _add(rhs, op_hi(X), -1.0) if r0 is None else r0
    rel = _rel(R, bnorm)
    history, n_true, it = [float(rel.max())], 1, 0
    last_true = rel.clone()
    P = precond(R)
    while it < max_iter and not bool((rel <= tol).all()):
        Q = op_lo(P)
        C = block_inner(P, Q)
        lam, V = torch.linalg.eigh(0.5 * (C + C.T))
        keep = lam > 1e-12 * lam[-1].clamp_min(torch.finfo(lam.dtype).tiny)
        if not bool(keep.any()):
            break
        T = V[:, keep] / lam[keep].sqrt()
        P, Q = block_combine(P, T), block_combine(Q, T)
        alpha = block_inner(P, R)
        X = _add(X, block_combine(P, alpha))
        R = _add(R, block_combine(Q, alpha), -1.0)
        rel = _rel(R, bnorm)
        it += 1
        if bool((rel <= tol).all()) or bool((rel <= replace_factor * last_true).all()) or it == max_iter:
            R = _add(rhs, op_hi(X), -1.0)
            rel = _rel(R, bnorm)
            last_true = rel.clone()
            n_true += 1
        history.append(float(rel.max()))
        Z = precond(R)
        P = _add(Z, block_combine(P, -block_inner(Q, Z)))
    return X, it, rel, {"history": history, "true_residuals": n_true}


def quadratic_mixture(model, mixture: GaussianMixture, *, tol: float = 1e-6, max_iter: int = 500,
                      warm_start: Approximant | None = None, inner_dtype: torch.dtype | None = torch.float32,
                      rcond: float = 1e-10, preconditioner: str = "joint_diagonal", jd_sweeps: int = 2,
                      plan: SolverPlan | None = None, warm_start_model=None) -> Approximant:
    """The exact L²(mixture) projection of ``model`` onto quadratics (see module docstring).

    ``preconditioner``: ``"joint_diagonal"`` (default, :class:`MixturePreconditioner` in the basis of
    ``plan``) or ``"moment_matched"`` (the Gram inverse of N(0, I) in whitened coordinates).
    ``plan``: the per-mixture precomputation (:class:`SolverPlan`, reusable for every model of the
    same mixture); built here with ``jd_sweeps`` Jacobi sweeps and ``rcond`` when omitted (a given
    plan brings its own whitening, so ``rcond`` and ``jd_sweeps`` are then unused).
    ``warm_start``: a previous solution (e.g. the previous checkpoint's). With ``warm_start_model``,
    the model it solved for, the start is corrected by the change of the moment-matched closed form,
    x₀ = x_prev + (x_mm(model) − x_mm(warm_start_model)): the closed form carries the change of the
    network and x_prev the mixture's correction to it (on MNIST, step 8192 → 16384: relative
    residual 0.016 against 0.37 for x_prev alone and 0.08 for x_mm). The start with the smaller
    residual is used.
    """
    t0 = time.perf_counter()
    if preconditioner not in ("joint_diagonal", "moment_matched"):
        raise ApproxInputError(f"preconditioner must be 'joint_diagonal' or 'moment_matched', got {preconditioner!r}")
    t_setup = time.perf_counter()
    if plan is None:
        plan = SolverPlan.build(mixture, sweeps=jd_sweeps if preconditioner == "joint_diagonal" else 0, rcond=rcond)
    plan = plan.to(mixture.device, mixture.dtype)
    W = plan.whitening
    wmix = plan.whiten(mixture)
    if preconditioner == "joint_diagonal":
        precond = MixturePreconditioner(wmix, plan.basis, dtype=inner_dtype)
    else:
        precond = standard_gaussian_inverse
    t_setup = time.perf_counter() - t_setup
    wmodel = model.affine(W.M, W.shift)
    rhs = rhs_mixture(wmodel, wmix)
    op_hi = GramOperator(wmix)
    if inner_dtype is None or inner_dtype == mixture.dtype:
        op_lo = op_hi
    else:
        lo = GramOperator(wmix.to(dtype=inner_dtype))
        op_lo = lambda th: cast(lo(cast(th, inner_dtype)), mixture.dtype)  # noqa: E731
    eye = torch.eye(W.rank, dtype=mixture.dtype, device=mixture.device)
    zero = torch.zeros(W.rank, dtype=mixture.dtype, device=mixture.device)
    mm = quadratic_gaussian(wmodel, zero, eye)
    x0, start, r0 = (mm.alpha, mm.beta, mm.gamma), "moment_matched", None
    if warm_start is not None:
        # keep the warm start only if its residual beats the moment-matched start's (one extra product)
        ws = warm_start.to(mixture.device, mixture.dtype).quadratic().compose(W.M, W.shift)
        x_ws = (ws.alpha, ws.beta, ws.gamma)
        if warm_start_model is not None:
            prev = warm_start_model.to(mixture.device, mixture.dtype).affine(W.M, W.shift)
            mm_prev = quadratic_gaussian(prev, zero, eye)
            x_ws = _add(x_ws, _add(x0, (mm_prev.alpha, mm_prev.beta, mm_prev.gamma), -1.0))
        bnorm = torch.diagonal(block_inner(rhs, rhs)).sqrt()
        r_ws, r_mm = _add(rhs, op_hi(x_ws), -1.0), _add(rhs, op_hi(x0), -1.0)
        if float((_rel(r_ws, bnorm) / _rel(r_mm, bnorm)).max()) <= 1.0:
            x0, r0 = x_ws, r_ws
            start = "warm_start (closed-form corrected)" if warm_start_model is not None else "warm_start"
        else:
            r0, start = r_mm, "moment_matched (warm start was worse)"
    x, it, rel, extra = block_pcg(op_hi, op_lo, precond, rhs, x0, tol, max_iter, r0=r0)
    g = Approximant(x[0], x[1], _sym(x[2]), {})
    out = g.compose(W.P, -(W.P @ W.shift))
    out.fit_info = {
        "method": "exact", "degree": 2, "iterations": it, "residual": float(rel.max()), "tol": tol,
        "converged": bool((rel <= tol).all()), "seconds": time.perf_counter() - t0, "start": start,
        "inner_dtype": str(inner_dtype).replace("torch.", ""), "rank": W.rank, "K": mixture.K,
        "true_residuals": extra["true_residuals"], "preconditioner": preconditioner,
        "setup_seconds": t_setup, "jd_sweeps": plan.sweeps,
        "residual_history": [h for h in extra["history"] if math.isfinite(h)],
    }
    return out

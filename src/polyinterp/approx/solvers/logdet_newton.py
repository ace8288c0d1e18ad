"""Joint diagonalisation for the log-det criterion by quasi-Newton steps on all index pairs at once.

Finds an orthogonal Q that lowers Pham's criterion (the ``"logdet"`` criterion of
:mod:`polyinterp.approx.solvers.joint_diagonal`)

    D(Q) = Σ_k w_k [log det diag(QᵀM_kQ) − log det M_k] ≥ 0      (M_k positive definite),

not by Jacobi rotations of one pair after another, but by moving Q along all pairs at once:
Q ← Q·cay(A), cay(A) = (I − A/2)⁻¹(I + A/2) (orthogonal for skew-symmetric A). With C_k = QᵀM_kQ and
d_k = diag(C_k), the derivative of D along Q·exp(t E_pq) (E_pq = e_p e_qᵀ − e_q e_pᵀ) at t = 0 is

    g_pq = −2 Σ_k w_k C_k[p, q] (1/d_k[p] − 1/d_k[q]),

and the second derivative, where C_k is nearly diagonal, is h_pq = 2 Σ_k w_k (d_k[p] − d_k[q])² /
(d_k[p] d_k[q]) ≥ 0 (its exact value also holds −C_k[p, q]² terms, which make it negative near equal
diagonal entries; this Gauss–Newton part keeps every step a descent direction). The step is
A_pq = −g_pq / h_pq, each entry capped at :data:`MAX_ANGLE`, halved until D decreases (it never
increases). Each iteration costs K + 1 products of n × n matrices per trial (d_k of the trial from
C_k·cay(A) alone) and K more on acceptance, all GEMMs, so the work is in the BLAS (or on the GPU)
instead of in the many small rotation kernels of a Jacobi sweep.

The iteration runs in ``dtype`` (float32 by default: the basis only has to make the preconditioner
good, and float32 halves the time); the result is orthonormalised in the matrices' dtype, so Q is
orthogonal to that precision. Measured on the MNIST mixture in bench/README.md ("A Newton basis").
"""

from __future__ import annotations

import math

import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.joint_diagonal import log_determinants


NEWTON_ITERATIONS = 40  # the most iterations (their cost: bench/README.md, "A Newton basis")
NEWTON_RTOL = 1e-4  # stop when an iteration lowers D by less than this × the decrease so far
MAX_ANGLE = math.pi / 4  # the largest |A_pq| of one step (a rotation by 2·atan(A_pq/2) ≤ 0.75 rad)
HALVINGS = 8  # step halvings before the iteration is declared stationary
REFRESH = 10  # every this many iterations Q is re-orthonormalised and C_k recomputed from M_k


def _orthonormal(Q: torch.Tensor) -> torch.Tensor:
    """The orthogonal factor of the QR decomposition of Q with its signs matched to Q's columns (Q
    itself when Q is orthogonal)."""
    q, r = torch.linalg.qr(Q)
    sign = torch.where(torch.diagonal(r) < 0, -1.0, 1.0).to(Q.dtype)
    return q * sign


def _sum_logs(d: torch.Tensor, w: torch.Tensor) -> float:
    """Σ_k w_k Σ_p log d_k[p] for d [K, n], the logs summed in float64 (a float32 sum of K·n logs would
    round at the scale of the late steps' decrease); +inf where an entry is not positive."""
    if not bool((d > 0).all()):
        return math.inf
    return float((w.double() * d.double().log().sum(-1)).sum())


def _sum_log_diagonals(C: torch.Tensor, w: torch.Tensor) -> float:
    """Σ_k w_k log det diag(C_k) (:func:`_sum_logs` of the diagonals)."""
    return _sum_logs(torch.diagonal(C, dim1=-2, dim2=-1), w)


def combination_eigenbasis(mats: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """The eigenvectors of Σ_k c_k M_k for coefficients c_k drawn uniformly from (0, 1) with ``seed`` (on
    the CPU, so every device draws the same): the exact joint diagonaliser when the M_k commute and their
    combination has distinct eigenvalues, and the start of :func:`logdet_newton` otherwise."""
    g = torch.Generator().manual_seed(seed)
    c = torch.rand(mats.shape[0], generator=g, dtype=torch.float64).to(mats.device, mats.dtype)
    S = (c[:, None, None] * mats).sum(0)
    return torch.linalg.eigh(0.5 * (S + S.T))[1]


def logdet_newton(mats: torch.Tensor, weights: torch.Tensor, *, iterations: int = NEWTON_ITERATIONS,
                  rtol: float = NEWTON_RTOL, dtype: torch.dtype | None = torch.float32,
                  start: torch.Tensor | None = None, info: dict | None = None) -> torch.Tensor:
    """An orthogonal Q [n, n] (mats' dtype) that lowers the log-det criterion D of the symmetric positive
    definite ``mats`` [K, n, n] with ``weights`` [K] ≥ 0 (module docstring), after at most ``iterations``
    steps from ``start`` (orthonormalised here; default: :func:`combination_eigenbasis`), stopping early
    when a step lowers D by less than ``rtol`` × the decrease so far or no halved step lowers it. The
    steps run in ``dtype`` (None: mats' dtype; a lower precision falls back to mats' when a diagonal entry
    of the start is not positive in it). Guarantees: D(Q) ≤ D(start) up to ``dtype``'s round-off in
    evaluating D (each trial's diagonal is scaled by its columns' norms, so a slightly non-orthogonal
    float32 step cannot pass for a decrease, and the logs are summed in float64), and Q is orthogonal to
    mats' precision.
    ``info``, when given, receives ``iterations``, ``criterion`` (D after each accepted step, as the steps
    evaluated it, the start first), ``divergence`` (D of the returned Q, in mats' dtype), ``halvings``
    (per accepted step) and ``dtype``."""
    if mats.dim() != 3 or mats.shape[1] != mats.shape[2] or mats.shape[0] < 1 or weights.shape != mats.shape[:1]:
        raise ApproxInputError(f"logdet_newton needs mats [K, n, n] (K ≥ 1) and weights [K], got {tuple(mats.shape)} "
                               f"and {tuple(weights.shape)}")
    if iterations < 0:
        raise ApproxInputError(f"iterations must be ≥ 0, got {iterations}")
    weights = weights.to(mats.device)
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ApproxInputError(f"logdet_newton needs finite weights ≥ 0, got {weights.tolist()}")
    if start is not None and start.shape != mats.shape[1:]:
        raise ApproxInputError(f"start must be an orthogonal [n, n] = {list(mats.shape[1:])} matrix, got "
                               f"{list(start.shape)}")
    hi = mats.dtype
    mats = 0.5 * (mats + mats.transpose(-1, -2))
    w_hi = weights.to(hi)
    const = float((w_hi * log_determinants(mats, "logdet_newton")).sum())
    Q0 = combination_eigenbasis(mats) if start is None else _orthonormal(start.to(mats.device, hi))
    C0 = Q0.T @ mats @ Q0  # the steps turn the start by U (Q = Q0·U), so the start stays exact in mats' dtype
    C0 = 0.5 * (C0 + C0.transpose(-1, -2))
    work = hi if dtype is None else dtype
    C0w, w = C0.to(work), weights.to(work)
    f = _sum_log_diagonals(C0w, w)
    if not math.isfinite(f) and torch.finfo(work).eps > torch.finfo(hi).eps:  # lost a small diagonal entry
        work, C0w, w = hi, C0, w_hi
        f = _sum_log_diagonals(C0w, w)
    C = C0w
    history, halvings = [f - const], []
    eye = torch.eye(C.shape[-1], dtype=work, device=C.device)
    U = eye
    f0, it = f, 0
    while it < iterations:
        d = torch.diagonal(C, dim1=-2, dim2=-1)  # [K, n]
        wv = w[:, None, None]
        inv = 1.0 / d
        g = -2 * (wv * C * (inv[:, :, None] - inv[:, None, :])).sum(0)
        a, b = d[:, :, None], d[:, None, :]
        h = 2 * (wv * (a - b) ** 2 / (a * b)).sum(0)
        A = torch.where(h > 0, -g / h.clamp_min(torch.finfo(work).tiny), 0.0)
        A = (0.5 * (A - A.T)).clamp(-MAX_ANGLE, MAX_ANGLE)
        step, accepted = 1.0, None
        for halving in range(HALVINGS + 1):
            S = 0.5 * step * A
            R = torch.linalg.solve(eye - S, eye + S)
            CR = C @ R
            # diag(Rᵀ C_k R) over the columns' squared norms (1 in exact arithmetic): what the step changes by
            # turning, not by the round-off in R's column norms
            dn = (CR * R[None]).sum(-2) / (R * R).sum(-2)
            fn = _sum_logs(dn, w)
            if fn < f:
                accepted = (R, CR, fn)
                break
            step *= 0.5
        if accepted is None:
            break
        R, CR, fn = accepted
        it += 1
        halvings.append(halving)
        U = U @ R
        decrease, f = f - fn, fn
        if it % REFRESH == 0:  # against the drift of the products: U orthonormal again, C_k from the start's
            U = _orthonormal(U)
            C = U.T @ C0w @ U
            f = _sum_log_diagonals(C, w)
        else:
            C = R.T @ CR
        C = 0.5 * (C + C.transpose(-1, -2))
        history.append(f - const)
        if decrease < rtol * (f0 - f):
            break
    Q = Q0 if it == 0 else _orthonormal(Q0 @ U.to(hi))
    if info is not None:
        divergence = _sum_log_diagonals(Q.T @ mats @ Q, w_hi) - const
        info.update({"iterations": it, "criterion": history, "divergence": divergence, "halvings": halvings,
                     "dtype": str(work).replace("torch.", "")})
    return Q

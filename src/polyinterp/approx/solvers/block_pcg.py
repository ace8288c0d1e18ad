"""Block preconditioned conjugate gradients for the o right-hand sides (one per output) of the mixture
quadratic's normal equations, which share one operator; with deflation and mixed precision."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.core.device_clock import clock
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.gram_operator import Theta, add, add_, block_combine, block_inner, cast


STALL_RATIO = 0.9  # a true residual when the recursive one fell by less than this over ``stall_window`` iterations


def relative_residual(R: Theta, bnorm: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(block_inner(R, R)).clamp_min(0).sqrt() / bnorm


def _own(S: Theta, like: Theta) -> Theta:
    """A copy of the state S in the precision of ``like``'s parts, for the iteration to update in place (in-place
    updates of the copy leave S unchanged)."""
    return tuple(s.to(dtype=t.dtype, copy=True) for s, t in zip(S, like))


def block_pcg(op_hi, op_lo, precond, rhs: Theta, x0: Theta, tol: float, max_iter: int, replace_factor: float = 0.1,
              r0: Theta | None = None, deflation=None, direction_dtype: torch.dtype | None = None, op_mid=None,
              stall_window: int = 2):
    """Solve A X = rhs column by column in the joint Krylov space of all columns.

    The search block is A-orthonormalised every iteration (eigen-decomposition of PᵀAP, dropping
    directions below 1e-12 of the largest, so converged or dependent columns cannot break it down).

    Precision: ``op_lo`` computes the products inside the iteration (e.g. in bfloat16/float32);
    ``op_hi`` (float64) the true residual at the start, whenever the recursive residual fell by
    ``replace_factor`` since the last replacement (reliable updates; with ``op_mid`` an intermediate one is
    anchored, below) or has stalled (fallen by less than :data:`STALL_RATIO` over ``stall_window`` iterations), at
    ``max_iter`` and before declaring convergence, which is only ever declared on a true residual.
    ``op_mid``: products for the reliable updates that are neither final nor a stall restart (e.g. float32 ones
    where ``op_lo``'s are bfloat16): such an update is anchored at the last float64 pair (X_t, R_t),
    R = R_t − op_mid(X − X_t), so its round-off is op_mid's on the correction X − X_t alone, not on X (the
    same residual to that round-off, at the price of an ``op_mid`` product instead of a float64 one).
    Convergence, ``max_iter`` and stall restarts still take a float64 residual, which becomes the next anchor.
    Default None: every reliable update is a float64 residual.
    ``stall_window`` (default 2; a positive int, else :class:`ApproxInputError`): the iterations over which a fall
    of less than :data:`STALL_RATIO` is a stall. A system whose residual falls slowly and not monotonically at its
    own pace (the Jacobi-preconditioned Hermite Gram of :mod:`polyinterp.approx.fits.cubic_mixture`, ≈ 8 % an
    iteration on average) often falls by less than that over two iterations; a longer window keeps it from
    taking a float64 residual every few iterations for no stall at all.
    ``r0``: the residual of ``x0`` when the caller has it already (neither ``x0`` nor ``r0`` is modified: the
    iteration updates its own copies in place). ``deflation``: a
    :class:`~polyinterp.approx.solvers.deflation.Deflation` or
    :class:`~polyinterp.approx.solvers.coarse_space.SubspaceDeflation` (coarse correction of the start, search
    directions projected A-orthogonal to its space; the residual's part in that space, which low-precision
    products leave, is removed every iteration, or only before each true residual when the deflation says
    ``correct_each_iteration = False``, then by its ``correct_solution``: the iterate alone, since the
    residual is recomputed).
    ``direction_dtype``: the precision of the search block P, its image A P, the preconditioned residual and
    the block's inner products and recombinations (default: the right-hand side's). float32 where ``op_lo``'s
    products are float32 or bfloat16 anyway: it halves the memory traffic of the work around the product,
    while iterate and residual, their updates and every float64 residual stay in the right-hand side's
    precision; ``precond``, ``op_lo`` and ``deflation.project`` are then called on states in that precision.
    The block's A-orthonormalisation (eigen-decomposition of PᵀAP) is always in float64.
    Returns (x, iterations, relative residual per output [o], info); info's ``history`` holds the
    largest relative residual of the start (before the coarse correction) and after each iteration,
    ``true_residuals`` the number of float64 residuals, ``anchored_residuals`` the number of ``op_mid``
    updates, ``start_seconds`` the time to the first iteration (start residual and coarse correction),
    ``true_residual_seconds`` the time of the later float64 residuals with their coarse corrections and
    ``anchored_residual_seconds`` that of the ``op_mid`` updates with theirs.
    """
    if isinstance(stall_window, bool) or not isinstance(stall_window, int) or stall_window < 1:
        raise ApproxInputError(f"stall_window must be a positive int (iterations), got {stall_window!r}")
    t_start = clock(rhs[-1])
    ddt = direction_dtype or rhs[-1].dtype
    low = lambda S: cast(S, ddt)  # noqa: E731  (no copy when already in ddt)
    bnorm = torch.diagonal(block_inner(rhs, rhs)).sqrt().clamp_min(torch.finfo(rhs[-1].dtype).tiny)
    X = x0
    R = add(rhs, op_hi(X), -1.0) if r0 is None else r0
    history = [float(relative_residual(R, bnorm).max())]  # of the start as given
    if deflation is not None:
        X, R = deflation.correct(X, R)
    project = deflation.project if deflation is not None else (lambda Z: Z)
    # a coarse space whose correction costs a fair part of an iteration corrects only before each true residual
    every = deflation is not None and getattr(deflation, "correct_each_iteration", True)
    rel = relative_residual(R, bnorm)
    n_true, it = 1, 0
    if deflation is not None and not every and bool((rel <= tol).all()):
        # the coarse correction alone met the tolerance (a coarse space as large as the problem): its
        # residual update ran in the deflation's precision, so convergence is decided on a true residual
        R = add(rhs, op_hi(X), -1.0)
        rel, n_true = relative_residual(R, bnorm), 2
    last_replaced, since_replaced = rel.clone(), []
    X_t, R_t, n_mid, t_mid = X, R, 0, 0.0  # the last float64 pair, the anchor of op_mid's updates
    # the iteration updates X and R in place (no new state per update: bench/README.md, "The exact fit's fixed
    # cost"), so they are copies, neither the caller's x0 and r0 nor the anchor, in the right-hand side's
    # precision (as X + A·P was when a start of lower precision was given)
    X, R = _own(X, rhs), _own(R, rhs)
    P = project(precond(low(R)))
    t_true, t_start = 0.0, clock(rhs[-1]) - t_start
    while it < max_iter and not bool((rel <= tol).all()):
        Q = low(op_lo(P))
        C = block_inner(P, Q).to(torch.float64)
        lam, V = torch.linalg.eigh(0.5 * (C + C.T))
        keep = lam > 1e-12 * lam[-1].clamp_min(torch.finfo(lam.dtype).tiny)
        if not bool(keep.any()):
            break
        T = (V[:, keep] / lam[keep].sqrt()).to(ddt)
        P, Q = block_combine(P, T), block_combine(Q, T)
        alpha = block_inner(P, low(R))
        X = add_(X, block_combine(P, alpha))
        R = add_(R, block_combine(Q, alpha), -1.0)
        if every:
            # in exact arithmetic R stays orthogonal to W; low-precision products leave components there
            # that the deflated directions can never remove, so they are removed here (k inner products)
            X, R = deflation.correct(X, R)
        rel = relative_residual(R, bnorm)
        it += 1
        final = bool((rel <= tol).all()) or it == max_iter
        since_replaced.append(float(rel.max()))
        # stalled: no progress over stall_window iterations (low-precision products leave residual parts, e.g.
        # in a coarse space corrected only here, that the iteration cannot remove); a true residual restarts it
        stalled = (len(since_replaced) > stall_window
                   and since_replaced[-1] >= STALL_RATIO * since_replaced[-1 - stall_window])
        if final or stalled or bool((rel <= replace_factor * last_replaced).all()):
            t0 = time.perf_counter()  # the bool above waited for the device
            if deflation is not None and not every:
                # the residual is recomputed below, so only the iterate is corrected
                X = deflation.correct_solution(X, R)
            if op_mid is not None and not (final or stalled):
                D = add(X, X_t, -1.0)
                R = add(R_t, cast(op_mid(D), R_t[-1].dtype), -1.0)  # D in full precision: op_mid casts it
                rel, n_mid = relative_residual(R, bnorm), n_mid + 1
                t_mid += clock(rel) - t0
            else:
                R = add(rhs, op_hi(X), -1.0)
                rel, n_true = relative_residual(R, bnorm), n_true + 1
                X_t, R_t = X, R
                if op_mid is not None:  # only anchored updates read the anchor: it stays as it is
                    X, R = _own(X, rhs), _own(R, rhs)
                t_true += clock(rel) - t0
            last_replaced, since_replaced = rel.clone(), []
        history.append(float(rel.max()))
        Z = project(precond(low(R)))
        P = add_(block_combine(P, -block_inner(Q, Z)), Z)  # Z + P·C, the sum into the new block
    return X, it, rel, {"history": history, "true_residuals": n_true, "anchored_residuals": n_mid,
                        "start_seconds": t_start, "true_residual_seconds": t_true, "anchored_residual_seconds": t_mid}

"""Approximate joint diagonalisation of symmetric matrices by Jacobi rotations.

Finds an orthogonal Q that makes every QᵀM_kQ as diagonal as possible, i.e. lowers
Σ_k w_k ‖offdiag(QᵀM_kQ)‖²_F. Each rotation of a pair (p, q) is the optimal one of Cardoso &
Souloumiac (1996, real case): the leading eigenvector (x, y) of Σ_k w_k g_k g_kᵀ with
g_k = (M_k[p,p] − M_k[q,q], 2 M_k[p,q]) gives cos θ = √((x + r)/2r), sin θ = y/√(2r(x + r)),
r = ‖(x, y)‖ (x ≥ 0). Each rotation does not increase the off-diagonal mass.

For speed the n indices are split into blocks of size ``block``; a round-robin tournament pairs
the blocks, all pairs of a round are treated at once (their 2b × 2b sub-problems are diagonalised
by one vectorised round-robin Jacobi sweep), and each round's rotations are applied to the full
matrices as batched matrix products. A sweep visits every index pair at least once.

Two criteria (``criterion``): ``"frobenius"``, the off-diagonal mass above (closed-form rotations),
and ``"logdet"``, Pham's criterion for positive definite matrices (Pham 2001, SIAM J. Matrix Anal.
Appl. 22; here restricted to orthogonal Q),

    Σ_k w_k [log det diag(QᵀM_kQ) − log det M_k] ≥ 0   (0 iff every QᵀM_kQ is diagonal),

the weighted Kullback–Leibler divergence of each N(0, M_k) from its diagonal approximation. It weighs
an off-diagonal entry by the diagonal entries beside it, (QᵀM_kQ)_pq² / (λ_kp λ_kq), so a class's
small-variance directions count as much as its large ones, where the Frobenius criterion sees only
the large. For the pair (p, q) with a = M_k[p,p], b = M_k[q,q], c = M_k[p,q], s = (a + b)/2 and
h = (a − b)/2 the rotation by θ leaves λ_kp λ_kq = s² − (h cos 2θ + c sin 2θ)², so the optimal angle
maximises −Σ_k w_k log(1 − ((h_k cos φ + c_k sin φ)/s_k)²) over φ = 2θ ∈ [0, π): found on a grid of
:data:`LOGDET_GRID` angles refined by :data:`NEWTON_STEPS` Newton steps (each kept only where it
gains), and never worse than no rotation, so no rotation increases the criterion.
"""

from __future__ import annotations

import math

import torch

from polyinterp.approx.core.errors import ApproxInputError


def _round_robin(m: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """m − 1 rounds of m/2 disjoint pairs (m even) covering every pair of 0…m−1 once."""
    idx = list(range(m))
    rounds = []
    for _ in range(m - 1):
        rounds.append((torch.tensor(idx[: m // 2]), torch.tensor(idx[m // 2 :][::-1])))
        idx = [idx[0], idx[-1]] + idx[1:-1]
    return rounds


def _rotations(A: torch.Tensor, w: torch.Tensor, p: torch.Tensor, q: torch.Tensor):
    """Optimal (cos, sin) for the pairs (p, q) of A [K, B, m, m]; returns two [B, len(p)] tensors."""
    g1 = A[..., p, p] - A[..., q, q]  # [K, B, P]
    g2 = 2 * A[..., p, q]
    wv = w.view(-1, *([1] * (g1.dim() - 1)))
    G11, G12, G22 = (wv * g1 * g1).sum(0), (wv * g1 * g2).sum(0), (wv * g2 * g2).sum(0)
    half = 0.5 * (G11 + G22)
    lmax = half + torch.sqrt((0.5 * (G11 - G22)) ** 2 + G12**2)
    # eigenvector of [[G11, G12], [G12, G22]] for lmax; pick the better-conditioned of two forms
    x1, y1 = G12, lmax - G11
    x2, y2 = lmax - G22, G12
    first = (x1 * x1 + y1 * y1) >= (x2 * x2 + y2 * y2)
    x, y = torch.where(first, x1, x2), torch.where(first, y1, y2)
    sign = torch.where(x < 0, -1.0, 1.0).to(x.dtype)
    x, y = x * sign, y * sign
    r = torch.sqrt(x * x + y * y)
    ok = r > torch.finfo(r.dtype).tiny ** 0.5
    r = torch.where(ok, r, torch.ones_like(r))
    c = torch.where(ok, torch.sqrt((x + r) / (2 * r)), torch.ones_like(r))
    s = torch.where(ok, y / torch.sqrt(2 * r * (x + r)).clamp_min(torch.finfo(r.dtype).tiny), torch.zeros_like(r))
    return c, s


LOGDET_GRID = 64
NEWTON_STEPS = 3


def _rotations_logdet(A: torch.Tensor, w: torch.Tensor, p: torch.Tensor, q: torch.Tensor):
    """The log-det criterion's (cos, sin) for the pairs (p, q) of A [K, B, m, m] (module docstring);
    zero (padding) rows get no rotation."""
    a, b, c = A[..., p, p], A[..., q, q], A[..., p, q]  # [K, B, P]
    s = 0.5 * (a + b)
    ok = s > torch.finfo(A.dtype).tiny ** 0.5
    s = torch.where(ok, s, torch.ones_like(s))
    h, c = torch.where(ok, 0.5 * (a - b) / s, 0.0), torch.where(ok, c / s, 0.0)
    wv = w.view(-1, *([1] * h.dim()))

    def parts(phi: torch.Tensor):  # x, x' and 1 − x² at angles phi [B, P, G], broadcast over K
        cos, sin = torch.cos(phi), torch.sin(phi)
        x, dx = h[..., None] * cos + c[..., None] * sin, c[..., None] * cos - h[..., None] * sin
        return x, dx, (1 - x * x).clamp_min(1e-300)

    def gain(phi: torch.Tensor) -> torch.Tensor:  # the criterion's decrease [B, P, G]
        return -(wv * torch.log(parts(phi)[2])).sum(0)

    grid = torch.arange(LOGDET_GRID, dtype=A.dtype, device=A.device) * (math.pi / LOGDET_GRID)
    gains = gain(grid)
    at = gains.argmax(-1, keepdim=True)
    best, best_gain = grid[at], gains.gather(-1, at)  # [B, P, 1]
    for _ in range(NEWTON_STEPS):  # Newton on the gain, each step kept only where it gains
        x, dx, u = parts(best)
        d1 = (wv * 2 * x * dx / u).sum(0)
        d2 = (wv * (2 * (dx * dx - x * x) * u + 4 * x * x * dx * dx) / (u * u)).sum(0)
        step = torch.where(d2 < 0, -d1 / d2.clamp_max(-torch.finfo(A.dtype).tiny), 0.0)
        step = step.clamp(-math.pi / LOGDET_GRID, math.pi / LOGDET_GRID)
        moved = gain(best + step)
        better = moved > best_gain
        best, best_gain = torch.where(better, best + step, best), torch.where(better, moved, best_gain)
    best = torch.where(best_gain > gains[..., :1], best, 0.0)[..., 0]  # never worse than no rotation (grid[0] = 0)
    return torch.cos(0.5 * best), torch.sin(0.5 * best)


def _rotate(T: torch.Tensor, p, q, c, s, dim: int) -> None:
    """In place: indices p, q of dimension ``dim`` (−1 or −2) of T mixed by the rotations (c, s)."""
    if dim == -1:
        Tp, Tq = T[..., p].clone(), T[..., q].clone()
        cc, ss = c.unsqueeze(-2), s.unsqueeze(-2)
        T[..., p], T[..., q] = cc * Tp + ss * Tq, cc * Tq - ss * Tp
    else:
        Tp, Tq = T[..., p, :].clone(), T[..., q, :].clone()
        cc, ss = c.unsqueeze(-1), s.unsqueeze(-1)
        T[..., p, :], T[..., q, :] = cc * Tp + ss * Tq, cc * Tq - ss * Tp


def _jacobi_sweep(A: torch.Tensor, w: torch.Tensor, rounds, rotations=_rotations) -> torch.Tensor:
    """One round-robin sweep (``rounds`` = ``_round_robin(m)`` on A's device) on A [K, B, m, m]
    (m even, modified in place); returns R [B, m, m] with A_new = Rᵀ A_old R."""
    m = A.shape[-1]
    R = torch.eye(m, dtype=A.dtype, device=A.device).expand(A.shape[1], m, m).clone()
    for p, q in rounds:
        c, s = rotations(A, w, p, q)
        _rotate(A, p, q, c, s, -1)
        _rotate(A, p, q, c, s, -2)
        _rotate(R, p, q, c, s, -1)
    return R


def log_determinants(mats: torch.Tensor, caller: str) -> torch.Tensor:
    """log det M_k [K] of positive definite mats [K, n, n], else an ApproxInputError (a ValueError) naming
    ``caller`` and k. One Cholesky factor per matrix (not the batched LU of ``torch.linalg.slogdet``, which
    can hang in MKL's batched getrf; bench/README.md)."""
    logdet = []
    for k in range(mats.shape[0]):
        L, bad = torch.linalg.cholesky_ex(mats[k])
        if bad:
            raise ApproxInputError(f"{caller}: matrix {k} is not positive definite (the log-det criterion needs "
                                   "positive definite M_k; add a ridge)")
        logdet.append(2 * torch.diagonal(L).log().sum())
    return torch.stack(logdet)


def logdet_divergence(mats: torch.Tensor, weights: torch.Tensor, Q: torch.Tensor | None = None) -> float:
    """Σ_k w_k [log det diag(QᵀM_kQ) − log det M_k] (the ``"logdet"`` criterion; M_k positive definite,
    else a ValueError naming k: :func:`log_determinants`)."""
    logdet = log_determinants(mats, "logdet_divergence")
    M = mats if Q is None else Q.T @ mats @ Q
    diag = torch.diagonal(M, dim1=-2, dim2=-1).log().sum(-1)
    return float((weights * (diag - logdet)).sum())


def off_diagonal_mass(mats: torch.Tensor, weights: torch.Tensor, Q: torch.Tensor | None = None) -> float:
    """Σ_k w_k ‖offdiag(QᵀM_kQ)‖²_F (Q = I when omitted)."""
    M = mats if Q is None else Q.T @ mats @ Q
    off = M - torch.diag_embed(torch.diagonal(M, dim1=-2, dim2=-1))
    return float((weights * (off**2).sum((-1, -2))).sum())


CRITERIA = {"frobenius": _rotations, "logdet": _rotations_logdet}


def joint_diagonalize(mats: torch.Tensor, weights: torch.Tensor, *, sweeps: int = 2, block: int = 16,
                      criterion: str = "frobenius", start: torch.Tensor | None = None) -> torch.Tensor:
    """An orthogonal Q [n, n] with QᵀM_kQ nearly diagonal for all k (mats [K, n, n] symmetric,
    weights [K] ≥ 0; positive definite for ``criterion="logdet"``). ``sweeps`` block sweeps of the
    ``criterion``'s rotations (module docstring), none of which increases it, from the orthogonal
    ``start`` (identity when omitted; Q = start·R). Cost per sweep ≈ (n/b) batched passes over the
    K n² entries plus the small sub-problems."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {sorted(CRITERIA)}, got {criterion!r}")
    if start is not None:
        start = start.to(mats.dtype)
        return start @ joint_diagonalize(start.T @ mats @ start, weights, sweeps=sweeps, block=block,
                                         criterion=criterion)
    rotations = CRITERIA[criterion]
    K, n, _ = mats.shape
    b = max(1, min(block, (n + 1) // 2))
    nb = -(-n // b)
    nb += nb % 2
    N = nb * b
    M = torch.zeros(K, N, N, dtype=mats.dtype, device=mats.device)
    M[:, :n, :n] = 0.5 * (mats + mats.transpose(-1, -2))
    Q = torch.eye(N, dtype=mats.dtype, device=mats.device)
    w = weights.to(mats.dtype)
    blocks = torch.arange(N, device=mats.device).view(nb, b)
    dev = lambda rounds: [(p.to(mats.device), q.to(mats.device)) for p, q in rounds]  # noqa: E731
    outer, inner = dev(_round_robin(nb)), dev(_round_robin(2 * b))
    for _ in range(sweeps):
        for bp, bq in outer:
            idx = torch.cat([blocks[bp], blocks[bq]], 1)  # [P, 2b]
            sub = M[:, idx[:, :, None], idx[:, None, :]]  # [K, P, 2b, 2b]
            R = _jacobi_sweep(sub, w, inner, rotations)  # [P, 2b, 2b]
            flat = idx.reshape(-1)
            P = idx.shape[0]
            cols = M[:, :, flat].view(K, N, P, 2 * b)
            M[:, :, flat] = torch.einsum("knpi,pij->knpj", cols, R).reshape(K, N, -1)
            rows = M[:, flat, :].view(K, P, 2 * b, N)
            M[:, flat, :] = torch.einsum("pij,kpin->kpjn", R, rows).reshape(K, -1, N)
            qc = Q[:, flat].view(N, P, 2 * b)
            Q[:, flat] = torch.einsum("npi,pij->npj", qc, R).reshape(N, -1)
    # padded indices carry zero matrices, so no rotation mixes them with real ones
    return Q[:n, :n].contiguous()

"""Deflation of the preconditioned Gram operator's outlying eigenvalues (computed once per mixture).

The joint-diagonal preconditioner M leaves a few eigenvalues of M·A isolated from the rest of the
spectrum (e.g. along the constant α, whose mean terms M only approximates; the MNIST spectrum is in
``bench/README.md``). Each isolated eigenvalue costs CG a plateau of iterations until its Krylov
space resolves it. Since A depends on the mixture only,
their eigenvectors are found once, by a Lanczos run of single-output PCG from a random right-hand
side (:func:`outlier_eigenvectors`, stored in the :class:`~polyinterp.approx.solvers.solver_plan.SolverPlan`),
and projected out of every solve by deflated CG (Saad, Yeung, Erhel & Guyomarc'h, SIAM J. Sci.
Comput. 21, 2000; :class:`Deflation`). Deflation with any full-rank W leaves the solution exact; the
better W spans eigenvectors, the fewer iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.gram_operator import Theta, add, block_combine, block_inner, cast, sym


@dataclass
class LanczosRun:
    """What :func:`lanczos` found: Ritz values ``theta`` (ascending) and the eigenvectors ``S`` of the
    tridiagonal T, the preconditioned residuals ``basis`` (a block [m, ...], scaled so that the Ritz
    vector of θ_i is Σ_j S_ji basis_j), Lanczos's residual estimate of each Ritz pair relative to θ_i
    (``estimates``, |T_{m,m+1} S_mi| / |θ_i|) and the number of steps ``m``."""

    theta: torch.Tensor
    S: torch.Tensor
    basis: Theta
    estimates: torch.Tensor
    steps: int

    def ritz_vectors(self, index) -> Theta:
        """The Ritz vectors of the Ritz values ``index`` (a block [len(index), ...], not normalised)."""
        S = self.S[:, torch.as_tensor(index, dtype=torch.long)]
        return block_combine(self.basis, S.to(dtype=self.basis[0].dtype, device=self.basis[0].device))


def lanczos(op, precond, start: Theta, steps: int) -> LanczosRun:
    """``steps`` Lanczos steps of ``precond``·``op`` from the residual ``start`` (a block of one vector),
    read off single-output PCG: with step lengths a_j and ratios b_j, T = tridiag(√b_j / a_j;
    1/a_j + b_{j−1}/a_{j−1}) and the Ritz vector of θ_i is Σ_j S_ji (−1)^j z_j / √(r_j·z_j). Stops early
    when the Krylov space is exhausted (small problems)."""
    dot = lambda x, y: float(block_inner(x, y)[0, 0])  # noqa: E731
    r = start
    z = precond(r)
    rz = dot(r, z)
    rz0, p = rz, z
    a_list, b_list, Z = [], [], []
    for j in range(steps):
        Z.append(tuple(((-1) ** j / rz ** 0.5) * t for t in z))
        q = op(p)
        a = rz / dot(p, q)
        r = add(r, q, -a)
        z = precond(r)
        rz_new = dot(r, z)
        b = rz_new / rz
        a_list.append(a)
        b_list.append(b)
        rz = rz_new
        if rz <= 1e-24 * rz0:
            break
        p = add(z, p, b)
    m = len(a_list)
    T = torch.zeros(m, m, dtype=torch.float64)
    for j in range(m):
        T[j, j] = 1 / a_list[j] + (b_list[j - 1] / a_list[j - 1] if j else 0.0)
        if j + 1 < m:
            T[j, j + 1] = T[j + 1, j] = b_list[j] ** 0.5 / a_list[j]
    theta, S = torch.linalg.eigh(T)
    next_off = b_list[-1] ** 0.5 / a_list[-1]
    estimate = next_off * S[-1].abs() / theta.abs().clamp_min(1e-300)
    basis = tuple(torch.cat([v[c] for v in Z]) for c in range(len(Z[0])))  # [m, ...]
    return LanczosRun(theta, S, basis, estimate, m)


def random_start(d: int, seed: int = 0, dtype=torch.float64, device=None) -> Theta:
    """A random symmetric right-hand side (α [1], β [1, d], Γ [1, d, d]) for :func:`lanczos`, from ``seed``."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype).to(device)  # noqa: E731
    return rnd(1), rnd(1, d), sym(rnd(1, d, d))


def outlier_eigenvectors(op, precond, d: int, *, steps: int = 60, rel_tol: float = 0.05, gap: float = 1.5,
                         max_vectors: int = 16, seed: int = 0, dtype=torch.float64, device=None,
                         info: dict | None = None, run: LanczosRun | None = None, convert=None) -> Theta:
    """Eigenvectors of the isolated eigenvalues of ``precond``·``op``, from ``steps`` Lanczos steps
    (:func:`lanczos`) from a random symmetric right-hand side (α, β, Γ) of dimension ``d``, or from the
    given ``run`` (any kind of state; then ``steps``, ``d`` and ``seed`` are unused). ``convert`` (only with
    ``run``): a map from the run's states to those of ``op`` and ``precond``, applied to the candidate Ritz
    vectors before they are checked and returned (a run of the same preconditioned operator in another
    representation, e.g. on forms in a rotated basis, checked and returned in coefficients; default: none,
    the same states).

    Ghost copies (loss of orthogonality repeats a converged Ritz value) are merged (neighbours within 1e-6
    relative, or within the product of their estimates when both are at most ``rel_tol``), and an unconverged
    Ritz value whose error bound reaches a converged neighbour (a ghost still forming) is not counted
    as its neighbour. Candidates are, from each end of the
    spectrum inwards, the Ritz pairs that Lanczos's residual estimate |T_{m,m+1} S_mi| calls
    converged (at most ``rel_tol``·θ_i) and that stand apart from the next Ritz value by the factor
    ``gap`` (deflating each cuts the condition number by at least that factor), at most
    ``max_vectors``. That estimate is not reliable once the Lanczos vectors have lost orthogonality
    (and how soon that happens depends on round-off, i.e. on the CPU), so every candidate is
    checked by one application of the operator: kept are only those whose true relative residual
    ‖B v − λ v‖ / (|λ| ‖v‖), B = ``precond``·``op``, λ = ⟨v, B v⟩ / ⟨v, v⟩ (Frobenius inner
    product), is at most ``rel_tol``, and that are not (nearly) in the span of those kept before.

    Guarantees: every returned vector has unit Frobenius norm and true relative residual ≤
    ``rel_tol`` under the given operators; the vectors are linearly independent (not orthogonalised:
    a combination of eigenvectors is no eigenvector). Returns a block [k, ...] (k may be 0).
    ``info`` (a dict) receives the Ritz values and residual estimates, the candidates' Ritz values
    and true residuals, and how many were kept and rejected.
    """
    if run is None:
        if convert is not None:
            raise ApproxInputError("outlier_eigenvectors: convert maps a given run's states to op's; pass run= too "
                                   "(a run built here is in op's states already)")
        run = lanczos(op, precond, random_start(d, seed, dtype, device), steps)
    theta, S, estimate, m = run.theta, run.S, run.estimates, run.steps
    if info is not None:
        info.update(ritz_values=theta.tolist(), estimates=estimate.tolist(), steps=m)
    # one Ritz pair per eigenvalue (ghost copies repeat a converged Ritz value), ascending: neighbours are
    # copies when they agree to 1e-6 relative, or, when both estimates call them converged, to the product of
    # their estimates (a ghost that has converged less far than its original: on the MNIST mixture
    # 0.003441795 and 0.003441821 with estimates 1.7e-3 and 3.3e-2, 7.6e-6 apart, which left the lowest
    # eigenvalue looking clustered, not isolated). A converged Ritz value's error is about its estimate
    # squared (over the relative gap); the product, between the two squares, is a heuristic bound that
    # merges at most values 0.25 % apart (rel_tol = 0.05)
    def copies(i: int, j: int) -> bool:
        e_i, e_j = float(estimate[i]), float(estimate[j])
        bound = e_i * e_j if max(e_i, e_j) <= rel_tol else 0.0
        return abs(theta[i] - theta[j]) <= max(1e-6, bound) * abs(theta[i])

    distinct: list[int] = []
    for i in range(m):
        if distinct and copies(i, distinct[-1]):
            if estimate[i] < estimate[distinct[-1]]:
                distinct[-1] = i
        else:
            distinct.append(i)
    # a ghost still forming: an unconverged Ritz value whose error bound (|θ − λ| ≤ estimate·|θ| for
    # some eigenvalue λ) reaches a converged neighbour need not be another eigenvalue, so it is not
    # taken as the neighbour that decides whether the converged one is isolated
    def forming_ghost(pos: int) -> bool:
        i = distinct[pos]
        if estimate[i] <= rel_tol:
            return False
        return any(0 <= q < len(distinct) and estimate[distinct[q]] <= rel_tol
                   and abs(theta[i] - theta[distinct[q]]) <= estimate[i] * abs(theta[i]) for q in (pos - 1, pos + 1))
    distinct = [i for pos, i in enumerate(distinct) if not forming_ghost(pos)]

    def isolated(i: int, neighbour: int) -> bool:  # converged, and ≥ gap from the next Ritz value inwards
        hi_, lo_ = max(theta[i], theta[neighbour]), min(theta[i], theta[neighbour])
        return bool(estimate[i] <= rel_tol) and bool(hi_ >= gap * lo_)

    sel, lo, hi = [], 0, len(distinct) - 1
    while lo < hi and len(sel) < max_vectors and isolated(distinct[lo], distinct[lo + 1]):
        sel.append(distinct[lo])
        lo += 1
    while hi > lo and len(sel) < max_vectors and isolated(distinct[hi], distinct[hi - 1]):
        sel.append(distinct[hi])
        hi -= 1
    if info is not None:
        info.update(candidates=len(sel), kept=0, rejected=0, candidate_ritz_values=[],
                    candidate_residuals=[])
    if not sel:
        empty = tuple(t[:0] for t in run.basis)
        return convert(empty) if convert is not None else empty
    sel = torch.tensor(sorted(sel), dtype=torch.long)
    V = run.ritz_vectors(sel)
    if convert is not None:
        V = convert(V)
    V = block_combine(V, torch.diag(torch.diagonal(block_inner(V, V)).rsqrt()))  # unit vectors
    BV = precond(op(V))  # one application checks every candidate
    lam = torch.diagonal(block_inner(V, BV))
    R = add(BV, block_combine(V, torch.diag(lam)), -1.0)
    true_res = torch.diagonal(block_inner(R, R)).clamp_min(0).sqrt() / lam.abs().clamp_min(1e-300)
    kept: list[int] = []
    for i in range(len(sel)):
        if not bool(true_res[i] <= rel_tol):
            continue
        if kept:  # independent of those kept: its part outside their span is not small
            Vk = tuple(t[kept] for t in V)
            G = block_inner(Vk, Vk)
            c = block_inner(Vk, tuple(t[i:i + 1] for t in V))[:, 0]
            if float(1.0 - c @ torch.linalg.solve(G, c)) < 1e-2:
                continue
        kept.append(i)
    if info is not None:
        info.update(kept=len(kept), rejected=len(sel) - len(kept),
                    candidate_ritz_values=theta[sel].tolist(), candidate_residuals=true_res.tolist())
    return tuple(t[kept] for t in V)


class Deflation:
    """Coarse space W (a block of single-output vectors) for deflated block PCG: ``correct`` makes a
    residual orthogonal to W (x += W E⁻¹Wᵀr, r −= AW E⁻¹Wᵀr, E = WᵀAW) and ``project`` makes a
    search direction A-orthogonal to W (z −= W E⁻¹(AW)ᵀz). ``op`` computes AW (in full precision)."""

    def __init__(self, W: Theta, op):
        self.W = W
        self.AW = op(W)
        E = block_inner(W, self.AW)
        self.Einv = torch.linalg.inv(0.5 * (E + E.T))
        self.k = W[0].shape[0]

    def _coordinates(self, R: Theta) -> torch.Tensor:
        """E⁻¹Wᵀr [k, o]: the correction's coordinates for the residual block R."""
        return self.Einv @ block_inner(self.W, R)

    def correct(self, X: Theta, R: Theta) -> tuple[Theta, Theta]:
        C = self._coordinates(R)
        return add(X, block_combine(self.W, C)), add(R, block_combine(self.AW, C), -1.0)

    def correct_solution(self, X: Theta, R: Theta) -> Theta:
        """The iterate of :meth:`correct` alone, for a caller that recomputes the residual."""
        return add(X, block_combine(self.W, self._coordinates(R)))

    def project(self, Z: Theta) -> Theta:
        """Z − W E⁻¹(AW)ᵀZ, in Z's precision (a block PCG with float32 search directions projects in float32;
        W and AW are cast once per precision)."""
        W, AW = self._in(Z[-1].dtype)
        return add(Z, block_combine(W, (self.Einv @ block_inner(AW, Z).to(self.Einv.dtype)).to(Z[-1].dtype)), -1.0)

    def _in(self, dtype: torch.dtype) -> tuple[Theta, Theta]:
        if dtype == self.W[-1].dtype:
            return self.W, self.AW
        cache = self.__dict__.setdefault("_cast", {})
        if dtype not in cache:
            cache[dtype] = (cast(self.W, dtype), cast(self.AW, dtype))
        return cache[dtype]

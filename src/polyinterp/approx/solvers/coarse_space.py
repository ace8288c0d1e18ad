"""A coarse space of forms on a subspace, for deflated block PCG on the mixture quadratic's forms.

The forms W S Wᵀ (W [n, p] with orthonormal columns, S symmetric p × p) are a space of dimension
p(p + 1)/2 on which the Gram operator G of :mod:`polyinterp.approx.solvers.form_operator` is cheap: with
B_k = M_k W, N_k = WᵀM_kW and ν_k = Wᵀm̃_k,

    G(W S Wᵀ) = Σ_k w_k [2 B_k S B_kᵀ + tr(N_k S) M_k − 2 (ν_kᵀSν_k) m̃_k m̃_kᵀ]            (prolongation)
    Wᵀ G(Y) W = Σ_k w_k [2 B_kᵀ Y B_k + tr(M_k Y) N_k − 2 (m̃_kᵀYm̃_k) ν_k ν_kᵀ]            (restriction)

(the second by self-adjointness), O(K·n²·p) a form instead of the O(K·n³) of a Gram product, and the
Galerkin operator S ↦ Wᵀ G(W S Wᵀ) W is the same operator on p × p forms with moments N_k, ν_k, which
is formed densely (p⁴ entries) and factored once. That makes every cross form u vᵀ of two directions
of span W a coarse vector — the forms the joint-diagonal preconditioner cannot resolve when the ridge
is small (bench/README.md, "A coarse space of cross forms"). :class:`SubspaceDeflation` deflates
this space together with a block of explicit vectors (the plan's Lanczos eigenvectors).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.form_operator import PAD, FormGramOperator


def ritz_subspace(forms: torch.Tensor, rank: int, extra: torch.Tensor | None = None,
                  rtol: float = 1e-6) -> torch.Tensor:
    """An orthonormal basis W [n, p] of the span of the ``rank`` leading eigenvectors (largest |eigenvalue|)
    of each symmetric form of ``forms`` [c, n, n] and of the columns of ``extra`` [n, j]; directions whose
    singular value is below ``rtol`` × the largest (dependent ones) are dropped, so p ≤ c·rank + j.
    With Ritz vectors of the preconditioned operator's lowest eigenvalues as ``forms`` (nearly all of
    their mass is in a few such directions; bench/README.md), W S Wᵀ spans them and every cross form
    of their directions."""
    lam, U = torch.linalg.eigh(0.5 * (forms + forms.transpose(1, 2)))
    top = lam.abs().argsort(dim=1, descending=True)[:, :rank]  # [c, rank]
    cols = torch.gather(U, 2, top[:, None, :].expand(-1, U.shape[1], -1))  # [c, n, rank]
    cols = cols.transpose(0, 1).reshape(U.shape[1], -1)
    if extra is not None:
        cols = torch.cat([cols, extra.to(cols.dtype)], 1)
    Us, sv, _ = torch.linalg.svd(cols, full_matrices=False)
    return Us[:, sv > rtol * sv[0]]


def _sym_basis(p: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Indices (a ≤ b) of the orthonormal basis of symmetric p × p matrices, Z_aa = e_a e_aᵀ and
    Z_ab = (e_a e_bᵀ + e_b e_aᵀ)/√2, and each element's entry h (1 or 1/√2)."""
    a, b = torch.triu_indices(p, p, device=device)
    h = torch.full(a.shape, 1 / math.sqrt(2), dtype=torch.float64, device=device)
    h[a == b] = 1.0
    return a, b, h


class SubspaceDeflation:
    """Coarse space {W S Wᵀ} ⊕ span(V) for :func:`~polyinterp.approx.solvers.block_pcg.block_pcg`, with the
    interface of :class:`~polyinterp.approx.solvers.deflation.Deflation`: ``correct`` makes a residual
    orthogonal to the space (x += Z E⁻¹Zᵀr, r −= AZ E⁻¹Zᵀr, E = ZᵀAZ), ``project`` makes a search
    direction A-orthogonal to it (z −= Z E⁻¹(AZ)ᵀz). ``op``: the float64 form operator (its moments
    and basis are used, no n³ product); ``W`` [n, p] (orthonormalised here, in the operator's basis);
    ``V``: explicit forms (a 1-tuple [k, n, n], or None); their A-images come from ``op``.
    ``product_dtype``: the precision of the two O(K·n²·p) GEMMs of ``project``, called every iteration
    (float32 where the iteration's products are low-precision anyway; default: the operator's); the rest
    of ``project`` runs in its argument's precision (float32 search directions are projected in float32,
    with only the small Galerkin solve in float64);
    ``correct``, called at the start and before each float64 residual, runs in the operator's precision,
    so the residual it returns is as accurate as the one it was given.
    Guarantees: the coarse space is deflated exactly (to round-off) whatever W and V, so the solution
    of deflated CG is the solution of A x = b; E is symmetric positive definite when A is on the space."""

    correct_each_iteration = False  # a correction costs about a Gram product: once, at the start (bench/README.md)
    GALERKIN_ROWS = 1024  # rows of the Galerkin matrix formed at a time (1024·p² entries of scratch)

    def __init__(self, op: FormGramOperator, W: torch.Tensor, V=None, product_dtype: torch.dtype | None = None):
        self._subspace(op, torch.linalg.qr(W.to(op.M.dtype))[0], product_dtype)
        M = self.M
        E_ss = self._galerkin()
        if V is not None and V[0].shape[0] > 0:
            # only the span counts: V's parts outside the subspace forms (those inside are deflated already,
            # and keeping them would make E singular); a vector (nearly) inside is dropped
            V0 = V[0].to(M.dtype)
            W = self.W
            V1 = V0 - W @ (W.T @ V0 @ W) @ W.T
            keep = V1.flatten(1).norm(dim=1) > 1e-3 * V0.flatten(1).norm(dim=1)
            V1 = V1[keep]
            self.V = V1 / V1.flatten(1).norm(dim=1)[:, None, None] if len(V1) else None
        else:
            self.V = None
        if self.V is not None:
            self.AV = op((self.V,))[0]
            E_sv = self._restrict(self.AV)  # [k, m]
            E_vv = (self.V.reshape(len(self.V), -1) @ self.AV.reshape(len(self.V), -1).T)
            E = torch.cat([torch.cat([E_ss, E_sv.T], 1), torch.cat([E_sv, E_vv], 1)], 0)
        else:
            self.AV = None
            E = E_ss
        self._factored(torch.linalg.cholesky(0.5 * (E + E.T)))

    @classmethod
    def from_factor(cls, op: FormGramOperator, factor: dict, product_dtype: torch.dtype | None = None):
        """The coarse space whose :meth:`factor` is ``factor``, on ``op``, without forming its Galerkin matrix,
        the explicit vectors' A-images or the Cholesky factor (most of a fit's setup at MNIST size: bench/README.md,
        "The coarse space factored once per mixture"): the same
        object, to the bit, as the one that made ``factor`` when ``op`` is the operator it was made with
        (:class:`~polyinterp.approx.solvers.solver_plan.SolverPlan` keeps one per mixture). Only the
        O(K·n²·p) moments on the subspace are recomputed."""
        missing = [key for key in ("W", "V", "AV", "E_chol") if key not in factor]
        if missing or (factor["V"] is None) != (factor["AV"] is None):
            raise ApproxInputError(f"coarse-space factor lacks {missing or ['AV' if factor['AV'] is None else 'V']}; "
                                   "it must come from SubspaceDeflation.factor(); rebuild the solver plan (SolverPlan.build)")
        W, E_chol, n = factor["W"], factor["E_chol"], op.M.shape[-1]
        p = W.shape[1] if W.dim() == 2 else 0
        k = p * (p + 1) // 2 + (0 if factor["V"] is None else len(factor["V"]))
        if W.dim() != 2 or W.shape[0] != n or tuple(E_chol.shape) != (k, k):
            raise ApproxInputError(f"coarse-space factor with W {tuple(W.shape)} and E {tuple(E_chol.shape)} does not fit "
                                   f"this operator: expected W [{n}, p] and E [k, k] with k = p(p + 1)/2 + the explicit "
                                   f"vectors ({k} here); rebuild the solver plan (SolverPlan.build) for this mixture")
        self = cls.__new__(cls)
        to = lambda t: None if t is None else t.to(op.M.device, op.M.dtype)  # noqa: E731
        self._subspace(op, to(W), product_dtype)
        self.V, self.AV = to(factor["V"]), to(factor["AV"])
        self._factored(to(E_chol))
        return self

    def factor(self) -> dict:
        """What :meth:`from_factor` needs to rebuild this coarse space on the same operator: the orthonormal
        subspace W, the explicit vectors V kept (or None) and their A-images AV, and the Cholesky factor of E."""
        return {"W": self.W, "V": self.V, "AV": self.AV, "E_chol": self.E_chol}

    def _subspace(self, op: FormGramOperator, W: torch.Tensor, product_dtype) -> None:
        """The operator's moments on the subspace W [n, p] (orthonormal columns): O(K·n²·p)."""
        M, mt, w = op.M, op.mt, op.w
        self.W, self.w, self.M, self.mt = W, w, M, mt
        self.B = M @ W  # [K, n, p]
        # B̃ = [√(2 w_k) B_k]_k [n, K·p]: the Σ_k 2 w_k B_k(·)B_kᵀ and Σ_k 2 w_k B_kᵀ(·)B_k terms as one GEMM each
        self.Bw = (self.B * (2 * w.to(M.dtype)).sqrt()[:, None, None]).transpose(0, 1).reshape(M.shape[1], -1)
        self.Bw_lo = self.Bw.to(product_dtype or M.dtype)
        # the same with its K·p columns zero-padded to a multiple of PAD, for the first GEMM of _restrict_image (an
        # output width such as 970 = 10·97 is slow: 0.21 s against 0.13 s at 992, f32 at MNIST size, one thread,
        # bench/README.md "The exact fit's fixed cost"); the padded columns are cut off its result (the slice's
        # reshape copies o·n·K·p entries, inside that measurement); the same numbers to round-off
        pad = -self.Bw_lo.shape[1] % PAD
        self.Bw_lo_padded = torch.nn.functional.pad(self.Bw_lo, (0, pad)) if pad else self.Bw_lo
        self.N = W.T @ self.B  # [K, p, p]
        self.N = 0.5 * (self.N + self.N.transpose(1, 2))
        self.nu = mt @ W  # [K, p]
        p = W.shape[1]
        self.ia, self.ib, self.h = _sym_basis(p, W.device)
        self.h = self.h.to(M.dtype)

    def _factored(self, E_chol: torch.Tensor) -> None:
        """The Cholesky factor of E = ZᵀAZ and the sizes that follow from it and V."""
        self.E_chol = E_chol
        self.m = self.ia.shape[0]  # the subspace forms' dimension p(p + 1)/2
        self.explicit = 0 if self.V is None else len(self.V)
        self.k = E_chol.shape[0]

    def _galerkin(self) -> torch.Tensor:
        """ZᵀAZ [m, m] on the symmetric basis of :func:`_sym_basis` (a = (a₁ ≤ a₂), b = (c ≤ d)):
        s_a s_b Σ_k w_k [2 (N_a₁c N_a₂d + N_a₁d N_a₂c) + 2 N_a₁a₂ N_cd − 4 ν_a₁ν_a₂ ν_cν_d], s = 1/√2 on the
        diagonal pairs and 1 elsewhere. The sum over k comes first, as one batched product
        T_a = Σ_k w_k N_k[a₁, :]ᵀ N_k[a₂, :] [m, p, p] (m·p²·K work, in blocks of rows), from which the first
        term is gathered (T_a[c, d] + T_a[d, c]); the other two are one GEMM each over k. No p⁴ tensor."""
        ia, ib, w = self.ia, self.ib, self.w.to(self.N.dtype)
        N = self.N  # [K, p, p]
        K, p, _ = N.shape
        m = ia.shape[0]
        A = (N[:, ia, :] * w[:, None, None]).permute(1, 2, 0)  # [m, p, K]: w_k N_k[a₁, c]
        B = N[:, ib, :].permute(1, 0, 2)  # [m, K, p]: N_k[a₂, d]
        cd, dc = ia * p + ib, ib * p + ia
        F = N.new_empty(m, m)
        for r in range(0, m, self.GALERKIN_ROWS):  # T in blocks of rows: m·p² memory would be 2.6 GB at p = 160
            T = torch.bmm(A[r:r + self.GALERKIN_ROWS], B[r:r + self.GALERKIN_ROWS]).reshape(-1, p * p)
            F[r:r + self.GALERKIN_ROWS] = T[:, cd] + T[:, dc]  # row a, column c·p + d: Σ_k w_k N_k[a₁, c] N_k[a₂, d]
        F *= 2
        nv = N[:, ia, ib].T  # [m, K]: N_k[a₁, a₂]
        mu = (self.nu[:, ia] * self.nu[:, ib]).T  # [m, K]: ν_a₁ ν_a₂
        F += (2 * nv * w) @ nv.T
        F -= (4 * mu * w) @ mu.T
        s = torch.ones(m, dtype=F.dtype, device=F.device)
        s[ia == ib] = 1 / math.sqrt(2)
        return s[:, None] * F * s[None, :]

    def _restrict_form(self, Y: torch.Tensor) -> torch.Tensor:
        """[o, m]: ⟨Z_a, W Ŷ Wᵀ⟩ for p × p forms Ŷ [o, p, p] (symmetric)."""
        return Y[:, self.ia, self.ib] / self._in(Y.dtype).h

    def _restrict(self, Y: torch.Tensor) -> torch.Tensor:
        """[o, m]: ⟨Z_a, Y⟩ = coordinates of WᵀYW for forms Y [o, n, n]."""
        return self._restrict_form(self.W.T @ Y @ self.W)

    def _in(self, dtype: torch.dtype) -> SimpleNamespace:
        """The moments, subspace and explicit vectors in ``dtype`` (the float64 ones themselves, other
        precisions cast once and kept)."""
        if dtype == self.M.dtype:
            return self
        cache = self.__dict__.setdefault("_cast", {})
        if dtype not in cache:
            names = ("w", "M", "mt", "N", "nu", "W", "h", "V", "AV")
            cache[dtype] = SimpleNamespace(**{k: None if getattr(self, k) is None else getattr(self, k).to(dtype)
                                              for k in names})
        return cache[dtype]

    def _prolong_form(self, s: torch.Tensor) -> torch.Tensor:
        """[o, p, p]: Σ_a s_a (Z_a as a p × p form)."""
        o, p = s.shape[0], self.W.shape[1]
        S = s.new_zeros(o, p, p)
        S[:, self.ia, self.ib] = s * self._in(s.dtype).h
        return S + S.transpose(1, 2) - torch.diag_embed(torch.diagonal(S, dim1=1, dim2=2))

    def _apply_to_coarse(self, S: torch.Tensor, precise: bool = False) -> torch.Tensor:
        """G(W S Wᵀ) [o, n, n] for S [o, p, p] (the prolongation formula of the module docstring)."""
        w = self.w.to(S.dtype)
        K, n, p = self.B.shape
        o = S.shape[0]
        Bw = self.Bw if precise else self.Bw_lo
        BS = (Bw.view(n * K, p) @ S.to(Bw.dtype)).reshape(o, n, K * p)  # √(2w_k) B_k S, k-major columns
        out = (BS @ Bw.T).to(S.dtype)  # Σ_k 2 w_k B_k S B_kᵀ
        tr = (S.reshape(S.shape[0], -1) @ self.N.reshape(self.N.shape[0], -1).T) * w  # [o, K]
        nSn = ((S @ self.nu.T) * self.nu.T[None]).sum(1) * w  # [o, K]: ν_kᵀSν_k w_k
        out += (tr @ self.M.reshape(K, -1)).view(o, n, n)
        out -= 2 * (self.mt.T[None] * nSn[:, None, :]) @ self.mt
        return 0.5 * (out + out.transpose(1, 2))

    def _restrict_image(self, Y: torch.Tensor) -> torch.Tensor:
        """[o, m]: ⟨AZ_a, Y⟩ = coordinates of Wᵀ G(Y) W (the restriction formula), no n³ product; in Y's
        precision, its two large GEMMs in ``product_dtype``."""
        c = self._in(Y.dtype)
        K, n, p = self.B.shape
        o = Y.shape[0]
        Bw = self.Bw_lo
        YB = (Y.to(Bw.dtype) @ self.Bw_lo_padded)[..., :K * p].reshape(o, n * K, p)  # √(2w_k) Y B_k, rows (a, k)
        out = (Bw.view(n * K, p).T @ YB).to(Y.dtype)  # Σ_k 2 w_k B_kᵀ Y B_k
        tr = (Y.reshape(Y.shape[0], -1) @ c.M.reshape(K, -1).T) * c.w
        mYm = ((Y @ c.mt.T) * c.mt.T[None]).sum(1) * c.w  # [o, K]: m̃_kᵀYm̃_k w_k
        out += (tr @ c.N.reshape(K, -1)).view(o, p, p)
        out -= 2 * (c.nu.T[None] * mYm[:, None, :]) @ c.nu
        return self._restrict_form(0.5 * (out + out.transpose(1, 2)))

    def _solve(self, y: torch.Tensor) -> torch.Tensor:
        """E⁻¹y in float64 (the factor's precision), returned in y's."""
        # two triangular solves: the same result as torch.cholesky_solve in half its time (0.09 s against
        # 0.19 s at m = 4753, o = 10, 2 threads)
        L = self.E_chol
        x = torch.linalg.solve_triangular(L.T, torch.linalg.solve_triangular(L, y.T.to(L.dtype), upper=False),
                                          upper=True).T
        return x.to(y.dtype)

    def _split(self, c: torch.Tensor):
        return c[:, :self.m], c[:, self.m:]

    def _prolong(self, c: torch.Tensor) -> torch.Tensor:
        s, v = self._split(c)
        at = self._in(c.dtype)
        X = at.W @ self._prolong_form(s) @ at.W.T
        if at.V is not None:
            X = X + torch.einsum("oj,jab->oab", v, at.V)
        # exactly symmetric: the operator cannot see an antisymmetric part (G(X) = G(sym X)), so PCG would
        # never remove one that round-off left in a search direction (float32 ones: ≈ 3e-7 of the iterate)
        return 0.5 * (X + X.transpose(1, 2))

    def _coordinates(self, r: torch.Tensor) -> torch.Tensor:
        """E⁻¹Zᵀr [o, k]: the coarse correction's coordinates for residual forms r [o, n, n]."""
        y = self._restrict(r)
        if self.V is not None:
            y = torch.cat([y, r.reshape(r.shape[0], -1) @ self.V.reshape(len(self.V), -1).T], 1)
        return self._solve(y)

    def correct_solution(self, X, R):
        """The iterate of :meth:`correct` alone (x + Z E⁻¹Zᵀr), without its residual update: for a caller
        that computes the new residual afresh (block PCG before a float64 residual)."""
        (x,), (r,) = X, R
        return (x + self._prolong(self._coordinates(r)),)

    def correct(self, X, R):
        (x,), (r,) = X, R
        c = self._coordinates(r)
        s, v = self._split(c)
        AZc = self._apply_to_coarse(self._prolong_form(s), precise=True)  # rare (start, replacements): exact
        if self.AV is not None:
            AZc = AZc + torch.einsum("oj,jab->oab", v, self.AV)
        return (x + self._prolong(c),), (r - AZc,)

    def project(self, Z):
        """z − Z E⁻¹(AZ)ᵀz, in z's precision (the Galerkin solve in float64)."""
        (z,) = Z
        y = self._restrict_image(z)
        AV = self._in(z.dtype).AV
        if AV is not None:
            y = torch.cat([y, z.reshape(z.shape[0], -1) @ AV.reshape(len(AV), -1).T], 1)
        return (z - self._prolong(self._solve(y)),)

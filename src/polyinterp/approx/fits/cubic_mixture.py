"""The exact least-squares polynomial of degree n (the cubic by default) of an MLP or GLU under a
Gaussian mixture, in the mixture's top-p whitened principal components.

Problem. u = Λ^{-1/2}Pᵀ(x − μ̄) ∈ R^p (:mod:`polyinterp.approx.core.principal_components`: PCs of the
total covariance before whitening, scaled to unit variance). Among all polynomials g of degree ≤ n
*in u* (one polynomial for the whole mixture), minimise E_mix‖f(x) − g(u)‖² with f the full
network of all d inputs. In the normalised Hermite basis ψ_α(u) (orthonormal under N(0, I_p), the
moment-matched Gaussian of u; :mod:`polyinterp.approx.moments.polynomial_basis`) the normal equations are

    G θ_o = b_o,   G = Σ_k π_k E_k[ψ ψᵀ],   b_o = Σ_k π_k E_k[f_o(x) ψ(u)],

G from Gaussian moments of u up to order 2n per component (:mod:`polyinterp.approx.moments.hermite_gram`,
generating functions; N = C(p + n, n) = 23 426 unknowns per output at p = 50, n = 3) and b exactly
by tilting and Stein (:mod:`polyinterp.approx.moments.hermite_rhs`). The basis is a choice of conditioning
only: the least-squares polynomial does not depend on it. The lower-degree fits
(:func:`reduced_polynomial_approximants`) solve their own normal equations (the leading blocks of
G and b): under a mixture the least-squares quadratic is not the truncation of the cubic.

Solvers (``method``): ``"dense"`` assembles G [N, N] from the operator on identity columns and
solves by Cholesky (``"eigh"`` pseudo-inverse when G + ridge·I is not numerically positive
definite: eigenvalues ≤ ``rcond`` × largest dropped); ``"pcg"`` runs block conjugate gradients
(:func:`~polyinterp.approx.solvers.block_pcg.block_pcg`, the one of every exact solve) on the o
right-hand sides with the matrix-free operator (≈ 3·K·o·p⁴ multiply-adds per product at n = 3), Jacobi-preconditioned (diag G by the same formulas at i = j), from the moment-matched
solution (or a warm start), to a relative residual ‖b − Gθ‖/‖b‖ ≤ ``tol`` per output, declared on
a true float64 residual; ``"auto"`` is dense for N ≤ ``dense_max`` (default 600: assembly costs N
operator columns, PCG o columns per iteration), PCG otherwise. Dense at p = 50 would cost
N/o = 2 343 operator products, 4.4 GB for G and a 4·10¹² flop Cholesky, so it is not used there;
on the MNIST class mixture (K = 10) the PCG needs ≈ 160 iterations in float64 products and ≈ 210
with float32 products at p = 50 (κ(G) ≈ 10³ already at p = 20). ``ridge`` (default 0) adds
ridge·I to G: in this basis I is the Gram of the moment-matched Gaussian, so the ridge is relative
to the data's own scale.

FVU, exactly: for any θ, E‖f − g‖² = Σ_o (E f_o² − 2 θ_oᵀb_o + θ_oᵀGθ_o) (the three moments of the
expanded square; E f_o² from :func:`polyinterp.approx.moments.output_moments.output_moments`, bivariate Gaussian
moments of the hidden layer). At the exact least-squares θ, θᵀGθ = θᵀb and this is E f² − θᵀb;
the computed θᵀGθ (one extra operator product) is used, so the value is exact for the θ returned,
converged or not. FVU = Σ_o E(f_o − g_o)² / Σ_o Var f_o (pooled over outputs, as
:func:`~polyinterp.approx.evaluate.exact_fvu.exact_fvu`).

MLP and GLU, any activation of :mod:`polyinterp.approx.core.activations`: the right-hand side needs
E[φ⁽ʳ⁾(y)] for r ≤ n (n + 1 for a GLU), closed form for ReLU (any order) and GELU (order ≤ 4),
otherwise quadrature of autograd derivatives (:func:`~polyinterp.approx.moments.univariate.derivative_expectations`,
which needs a smooth φ). Pure torch, any device; the computation is float64 whatever the inputs'
dtype (the model and mixture are cast), except the operator products inside PCG, which run in
``inner_dtype`` (float32 by default: ≈ 2.5× cheaper products, ≈ 25 % more iterations at p = 50 on
the MNIST class mixture; float64 residual replacements keep ``tol`` in float64).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.fitted_polynomial import FittedPolynomial, chunk_rows, fvu_from_moments
from polyinterp.approx.moments.hermite_gram import HermiteGram, gram_diagonal
from polyinterp.approx.moments.hermite_rhs import hermite_rhs_mixture
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import check_model
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis, monomial_tensors
from polyinterp.approx.core.principal_components import PrincipalComponents, principal_components
from polyinterp.approx.moments.output_moments import output_moments
from polyinterp.approx.solvers.block_pcg import block_pcg
from polyinterp.approx.solvers.precision import resolve_inner_dtype

_CHUNK_BYTES = 64 * 2**20
METHODS = ("auto", "dense", "pcg")


@dataclass(frozen=True)
class ReducedPolynomialApproximant(FittedPolynomial):
    """g(x) = Σ_α coefficients[o, α] ψ_α(u(x)), u(x) = whitened principal components of x.

    ``degree`` n, ``components`` p, ``pcs`` (:class:`PrincipalComponents`: the projection),
    ``coefficients`` [o, N] in the normalised Hermite basis of u (order: ``basis``), ``fit_info``
    (method, seconds, residual, iterations, …), ``moments``: the per-output [o] moments under the
    fitting mixture that :meth:`fvu` needs (``ef`` = E f, ``ef2`` = E f², ``efg`` = E[f g], ``eg2`` =
    E g², and ``eg`` = E g when known), computed when the fit is made. Frozen: no field can be
    reassigned; the moments travel with :meth:`to` and :meth:`state_dict`, so ``fvu()`` is exact
    under the fitting mixture after a move or a save and load.
    """

    degree: int
    pcs: PrincipalComponents
    coefficients: torch.Tensor
    fit_info: dict[str, Any] = field(default_factory=dict)
    moments: dict[str, torch.Tensor] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "fit_info", dict(self.fit_info))
        if self.moments is not None:
            object.__setattr__(self, "moments", dict(self.moments))

    components = property(lambda self: self.pcs.p)
    o = property(lambda self: self.coefficients.shape[0])
    d = property(lambda self: self.pcs.d)
    dtype = property(lambda self: self.coefficients.dtype)
    device = property(lambda self: self.coefficients.device)

    @property
    def basis(self) -> PolynomialBasis:
        return PolynomialBasis(self.components, self.degree)

    def __call__(self, x: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
        """g(x) for x [n, d] (or [d]) in the original coordinates → [n, o] (or [o]), in chunks.

        From the monomial tensors, g = Σ_a T_a[u, …, u], by Horner's scheme: one GEMM contracts T_n's
        first slot with u for all rows at once ([m, p] · [p, o·p^(n−1)]), then T_(n−1) is added and the
        next slot contracted, row by row, down to T_0. The same polynomial as the Hermite features ψ(u)
        times the coefficients (equal to round-off, ``tests/approx/test_cubic_mixture.py``), without the
        N = C(p + n, n) features of every row: at p = 50, n = 3 about a third of the time (bench/README.md,
        "The higher-degree forms by Horner's scheme, the quadratic form by its upper block triangle")."""
        T = self.monomial_tensors()
        o, p, n = self.o, self.components, self.degree
        top = T[n].reshape(o, p, -1).transpose(0, 1).reshape(p, -1) if n > 0 else None  # [p, o·p^(n−1)]

        def rows(xc):
            u = self.pcs.project(xc)
            if n == 0:
                return T[0].expand(len(u), o)
            acc = (u @ top).view(len(u), o, -1)  # [m, o, p^(n−1)]: T_n with one slot contracted
            for a in range(n - 1, -1, -1):
                acc = acc + T[a].reshape(1, o, -1)
                if a > 0:  # contract the next slot: [m, o, p^(a−1), p] · u
                    acc = torch.einsum("nok,nk->no", acc.view(len(u), o * p ** (a - 1), p), u).view(len(u), o, -1)
            return acc.view(len(u), o)

        per_row = self.dtype.itemsize * 2 * max(o * p ** max(n - 1, 0), self.d)
        return self._evaluate(x, chunk_size or chunk_rows(_CHUNK_BYTES, per_row), rows)

    def hermite_tensors(self) -> list[torch.Tensor]:
        """Symmetric tensors Θ_a [o, p, …, p], a = 0..n, with g = Σ_a ⟨Θ_a, He⁽ᵃ⁾(u)⟩."""
        return self.basis.unpack(self.coefficients)

    def monomial_tensors(self) -> list[torch.Tensor]:
        """Symmetric tensors T_a [o, p, …, p], a = 0..n, with g = Σ_a T_a[u, …, u] (u: whitened PCs)."""
        return monomial_tensors(self.hermite_tensors())

    def to_approximant(self) -> Approximant:
        """The same polynomial as an :class:`~polyinterp.approx.core.approximant.Approximant` in x (α, β, Γ of
        x; degree ≤ 2 only: higher degrees would need the dⁿ tensors), e.g. for
        :func:`~polyinterp.approx.evaluate.exact_fvu.exact_fvu` and the quadratic metrics. Γ has rank ≤ p."""
        if self.degree > 2:
            raise ApproxInputError(f"to_approximant needs degree <= 2, this approximant has degree {self.degree}; "
                                   "evaluate it directly or use monomial_tensors()")
        T = self.monomial_tensors() + [None] * (2 - self.degree)
        o, p = self.o, self.components
        beta = T[1] if self.degree >= 1 else self.coefficients.new_zeros(o, p)
        in_u = Approximant(T[0], beta, T[2], dict(self.fit_info))
        B = self.pcs.basis
        return in_u.compose(B.T, -(self.pcs.mean @ B))

    def expected_moments(self) -> dict[str, torch.Tensor]:
        """Per-output [o] moments under the fitting mixture: ``ef`` = E f, ``ef2`` = E f², ``efg`` =
        E[f g] = θᵀb, ``eg2`` = E g² = θᵀGθ (and ``eg`` = E g when the fit recorded it)."""
        need = ("ef", "ef2", "efg", "eg2")
        if self.moments is None or any(k not in self.moments for k in need):
            have = sorted(self.moments or {})
            raise ApproxInputError(f"this approximant carries the moments {have}, not {list(need)}; fit it with "
                                   "reduced_polynomial_approximant(s) (or load a state dict saved from such a fit)")
        return dict(self.moments)

    def fvu(self, per_output: bool = False):
        """E‖f − g‖² / Σ_o Var f_o under the fitting mixture, exactly (module docstring); with
        ``per_output`` a float64 tensor [o] of E(f_o − g_o)²/Var f_o."""
        m = self.expected_moments()
        return fvu_from_moments(m["ef2"] - 2 * m["efg"] + m["eg2"], m["ef2"] - m["ef"] ** 2, per_output, "mixture")

    def to(self, device=None, dtype: torch.dtype | None = None) -> "ReducedPolynomialApproximant":
        """A copy on ``device`` in ``dtype``; the moments of :meth:`fvu` come along (moved, kept in float64)."""
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        mom = None if self.moments is None else {k: v.to(device=device or v.device) for k, v in self.moments.items()}
        return ReducedPolynomialApproximant(self.degree, self.pcs.to(device, dtype), f(self.coefficients),
                                            dict(self.fit_info), mom)

    def state_dict(self) -> dict[str, Any]:
        """Plain tensors and the fit info (``torch.save``-able), with the moments of :meth:`fvu`."""
        out = {"degree": self.degree, "coefficients": self.coefficients, "pc_mean": self.pcs.mean,
               "pc_directions": self.pcs.directions, "pc_eigenvalues": self.pcs.eigenvalues,
               "pc_explained": self.pcs.explained, "fit_info": dict(self.fit_info)}
        if self.moments is not None:
            out["moments"] = dict(self.moments)
        return out

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "ReducedPolynomialApproximant":
        keys = ("degree", "coefficients", "pc_mean", "pc_directions", "pc_eigenvalues")
        missing = [k for k in keys if k not in state]
        if missing:
            raise ApproxInputError(f"state dict lacks {missing}; it must come from "
                                   "ReducedPolynomialApproximant.state_dict()")
        pcs = PrincipalComponents(state["pc_mean"], state["pc_directions"], state["pc_eigenvalues"],
                                  float(state.get("pc_explained", float("nan"))))
        mom = state.get("moments")
        return cls(int(state["degree"]), pcs, state["coefficients"], dict(state.get("fit_info", {})),
                   None if mom is None else dict(mom))


# -- solvers ------------------------------------------------------------------------------------------
def _solve_dense(op: HermiteGram, b: torch.Tensor, ridge: float, rcond: float):
    G = op.dense()
    if ridge:
        G.diagonal().add_(ridge)
    L, info = torch.linalg.cholesky_ex(G)
    if int(info) == 0:
        diag = L.diagonal()
        if float(diag.min()) ** 2 > rcond * float(diag.max()) ** 2:
            return torch.cholesky_solve(b.T, L).T, {"solve": "cholesky", "rank": G.shape[0]}
    evals, evecs = torch.linalg.eigh(G)
    keep = evals > rcond * evals[-1].clamp_min(torch.finfo(evals.dtype).tiny)
    Q = evecs[:, keep]
    return ((b @ Q) / evals[keep]) @ Q.T, {"solve": "eigh", "rank": int(keep.sum())}


def _check_common(model, mixture, degree):
    if not isinstance(mixture, GaussianMixture):
        raise ApproxInputError(f"mixture must be a GaussianMixture, got {type(mixture).__name__}")
    check_model(model, mixture.d, mixture.device)
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
        raise ApproxInputError(f"degree must be a non-negative int, got {degree!r}")


# Jacobi-preconditioned PCG on the Hermite Gram converges by ≈ 8 % an iteration on the MNIST class mixture (p = 50,
# n = 3), so a fall of less than 10 % over two iterations is its pace, not a stall: over block_pcg's default window
# of 2 it took a float64 residual every ≈ 4 iterations (48 in a 202-iteration cubic), over 6 it takes them where a
# decade is gained (8), the same iterations ±2 (bench/README.md, "The degree fits' float64 residuals").
STALL_WINDOW = 6


def _solve_pcg(op: HermiteGram, b, x0, ws, ridge, inner, tol, max_iter, means, covs, weights):
    apply = (lambda th: op(th) + ridge * th) if ridge else op
    diag = gram_diagonal(weights, means, covs, op.basis) + ridge
    inv = 1.0 / diag.clamp_min(torch.finfo(diag.dtype).tiny)
    start, r0 = "moment_matched", None
    if ws is not None:
        if ws.coefficients.shape != b.shape:
            raise ApproxInputError(f"warm start of degree {op.basis.degree} has coefficients of shape "
                                   f"{tuple(ws.coefficients.shape)}, expected {tuple(b.shape)}: pass a fit of the "
                                   "same degree, components and outputs")
        xw = ws.coefficients.to(b.device, b.dtype)
        rw, r0 = b - apply(xw), b - apply(x0)  # each start's residual, the chosen one PCG's own start
        if float(rw.norm()) < float(r0.norm()):
            x0, r0, start = xw, rw, "warm_start"
        else:
            start = "moment_matched (warm start was worse)"
    apply_lo = apply
    if inner is not None:
        lo = op.to(inner)
        apply_lo = ((lambda th: lo(th.to(inner)).to(th.dtype) + ridge * th) if ridge
                    else (lambda th: lo(th.to(inner)).to(th.dtype)))
    # the coefficients [o, N] as a block of one part, (θ,), for the one block PCG of every exact solve
    (theta,), it, rel, pcg = block_pcg(lambda T: (apply(T[0]),), lambda T: (apply_lo(T[0]),),
                                       lambda T: (T[0] * inv,), (b,), (x0,), tol, max_iter,
                                       r0=None if r0 is None else (r0,), stall_window=STALL_WINDOW)
    hist, n_true = pcg["history"], pcg["true_residuals"]
    info = {"solve": "block_pcg", "preconditioner": "jacobi", "start": start, "iterations": it,
            "inner_dtype": str(inner or b.dtype).replace("torch.", ""), "converged": bool((rel <= tol).all()),
            "true_residuals": n_true, "residual_history": hist}
    return theta, info


def reduced_polynomial_approximants(model, mixture: GaussianMixture, components: int = 50, degrees=(2, 3), *,
                                    method: str = "auto", tol: float = 1e-8, max_iter: int = 2000,
                                    ridge: float = 0.0, rcond: float = 1e-12, dense_max: int = 600,
                                    pcs: PrincipalComponents | None = None, warm_start: dict | None = None,
                                    inner_dtype="float32") -> dict[int, ReducedPolynomialApproximant]:
    """The exact least-squares polynomials of each degree in ``degrees`` in the same ``components``
    whitened PCs (module docstring), sharing the PCs and the right-hand side; ``{degree: approximant}``.

    ``method``: ``"auto"`` (dense when the basis has ≤ ``dense_max`` functions, else PCG), ``"dense"``
    or ``"pcg"``; ``tol``/``max_iter``: PCG's relative residual per output (float64, true residual)
    and iteration cap; ``ridge``: added to G (relative to the moment-matched Gaussian's Gram, I);
    ``rcond``: the dense solve's eigenvalue cut when Cholesky fails; ``inner_dtype``: precision of the
    products inside PCG (``"float32"`` default, ``"float64"``/None); ``pcs``: precomputed
    :class:`PrincipalComponents` of this mixture (reused across checkpoints); ``warm_start``:
    ``{degree: approximant}`` of a previous fit on the same PCs (the PCG start when its residual beats
    the moment-matched solution's).

    ``fit_info``: method (dense/pcg), solve (cholesky/eigh/block_pcg), iterations, converged, residual
    (max over outputs of ‖b − Gθ‖/‖b‖, computed afresh in float64), seconds (this degree's solve
    plus the shared right-hand side), rhs_seconds, total_seconds (the whole call), basis_size,
    components, explained_variance, K, ridge, tol; for PCG also start, inner_dtype, true_residuals,
    residual_history, preconditioner; for dense also rank.
    """
    degrees = sorted(set(degrees))
    if not degrees:
        raise ApproxInputError("degrees is empty; pass e.g. (2, 3)")
    for n in degrees:
        _check_common(model, mixture, n)
    if method not in METHODS:
        raise ApproxInputError(f"method must be one of {METHODS}, got {method!r}")
    if not tol > 0 or ridge < 0 or not rcond > 0:
        raise ApproxInputError(f"need tol > 0, ridge >= 0, rcond > 0; got tol={tol}, ridge={ridge}, rcond={rcond}")
    inner = resolve_inner_dtype(inner_dtype, ("float32", "float64"))
    t0 = time.perf_counter()
    if mixture.dtype != torch.float64:
        mixture = mixture.to(dtype=torch.float64)
    model = model.to(dtype=torch.float64)
    if pcs is None:
        pcs = principal_components(mixture, components)
    elif pcs.p != components or pcs.d != mixture.d:
        raise ApproxInputError(f"pcs has p = {pcs.p}, d = {pcs.d}; the call asks for components = {components} "
                               f"in d = {mixture.d}")
    pcs = pcs.to(mixture.device, mixture.dtype)
    means, covs = pcs.reduce(mixture)
    nmax = degrees[-1]
    t_rhs = time.perf_counter()
    full = PolynomialBasis(pcs.p, nmax)
    b_full = full.pack(hermite_rhs_mixture(model, mixture.weights, mixture.means, mixture.covs, pcs.mean, pcs.basis, nmax))
    # the moment-matched start: under N(0, I) of u the Gram is I, so its least-squares θ is its own b
    mm = mixture.moment_matched()
    b_mm = full.pack(hermite_rhs_mixture(model, mm.weights, mm.means, mm.covs, pcs.mean, pcs.basis, nmax))
    t_rhs = time.perf_counter() - t_rhs
    ef, ef2 = output_moments(model, mixture)  # E f, E f²: the FVU's, shared by every degree
    fits = {}
    for n in degrees:
        t1 = time.perf_counter()
        basis = PolynomialBasis(pcs.p, n)
        N = basis.size
        b = b_full[:, :N].contiguous()  # the graded order makes lower degrees the leading blocks
        op = HermiteGram(mixture.weights, means, covs, basis)
        chosen = method if method != "auto" else ("dense" if N <= dense_max else "pcg")
        info: dict[str, Any] = {"method": chosen, "degree": n, "components": pcs.p, "basis_size": N, "K": mixture.K,
                                "ridge": ridge, "tol": tol, "explained_variance": pcs.explained}
        if chosen == "dense":
            theta, extra = _solve_dense(op, b, ridge, rcond)
            info.update(extra, iterations=0)
        else:
            ws = None if warm_start is None else warm_start.get(n)
            theta, extra = _solve_pcg(op, b, b_mm[:, :N].clone(), ws, ridge, inner, tol, max_iter, means, covs,
                                      mixture.weights)
            info.update(extra)
        Gth = op(theta)  # without the ridge: E g² is of the polynomial, not of the penalised objective
        resid = (b - Gth - ridge * theta).norm(dim=1) / b.norm(dim=1).clamp_min(torch.finfo(b.dtype).tiny)
        info.update(residual=float(resid.max()), seconds=time.perf_counter() - t1 + t_rhs, rhs_seconds=t_rhs)
        info.setdefault("converged", bool(float(resid.max()) <= tol))
        unit = torch.zeros(1, N, dtype=theta.dtype, device=theta.device)
        unit[0, 0] = 1.0  # ψ_0 = 1, so (G e_0)_α = E ψ_α and E g = θᵀ G e_0
        eg = theta @ op(unit)[0]
        fits[n] = (theta, info, {"ef": ef, "ef2": ef2, "eg": eg, "efg": (theta * b).sum(1), "eg2": (Gth * theta).sum(1)})
    total = time.perf_counter() - t0
    return {n: ReducedPolynomialApproximant(n, pcs, theta, {**info, "total_seconds": total}, moments)
            for n, (theta, info, moments) in fits.items()}


def reduced_polynomial_approximant(model, mixture: GaussianMixture, components: int = 50, degree: int = 3,
                                   **kw) -> ReducedPolynomialApproximant:
    """The exact L²(mixture) polynomial of degree ≤ ``degree`` (default the cubic) of ``model`` in the
    mixture's top-``components`` whitened principal components; keywords as
    :func:`reduced_polynomial_approximants` (``warm_start`` an approximant of this degree)."""
    ws = kw.pop("warm_start", None)
    if ws is not None:
        kw["warm_start"] = {degree: ws}
    return reduced_polynomial_approximants(model, mixture, components, (degree,), **kw)[degree]

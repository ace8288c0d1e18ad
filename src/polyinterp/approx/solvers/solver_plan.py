"""What the exact mixture quadratic precomputes once per mixture and reuses for every model.

The Gram operator of the normal equations depends on the mixture only, so its whitening and the
basis that jointly diagonalises the components' second moments (the slow part of building the
:class:`~polyinterp.approx.solvers.mixture_preconditioner.MixturePreconditioner`) can be computed once and
shared by all checkpoints and seeds; so can the eigenvectors of the preconditioned operator's
isolated eigenvalues, which the solver deflates (:mod:`polyinterp.approx.solvers.deflation`). A plan carries
its own whitening, so a saved plan stays valid wherever it is loaded (another machine's eigensolver
may pick a different but equally valid whitening; the basis belongs to this one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.device_clock import clock
from polyinterp.approx.solvers.coarse_space import SubspaceDeflation, ritz_subspace
from polyinterp.approx.solvers.deflation import lanczos, outlier_eigenvectors, random_start
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.form_operator import FormGramOperator, form_to_theta, rotate, theta_to_form
from polyinterp.approx.solvers.gram_operator import GramOperator
from polyinterp.approx.solvers.joint_diagonal import joint_diagonalize
from polyinterp.approx.solvers.logdet_newton import NEWTON_ITERATIONS, logdet_newton
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.solvers.mixture_preconditioner import (BasisPreconditioner, MixturePreconditioner, second_moments,
                                                     to_form)
from polyinterp.approx.solvers.whitening import Whitening, whiten_mixture, whitening


LOGDET_SWEEPS = 3  # the default of the Jacobi basis; measured in bench/README.md ("The log-det criterion")
BASIS_METHODS = ("newton", "jacobi", "identity")  # newton: the default, measured in bench/README.md ("A Newton basis")
MAX_COARSE_DIRECTIONS = 160  # p = 160: a Galerkin matrix of 12 880² float64 entries (1.3 GB)
COARSE_RITZ, COARSE_RANK = 12, 8  # the defaults; measured in bench/README.md ("A coarse space of cross forms")


@dataclass
class SolverPlan:
    """``whitening`` of the mixture, ``basis`` Q [r + 1, r + 1] (orthogonal, in x̃ = (1, x̃_white)), found as
    ``basis_method`` says: ``"newton"``, the log-det criterion lowered by all-pairs quasi-Newton steps
    (:func:`~polyinterp.approx.solvers.logdet_newton.logdet_newton`; ``basis_info`` holds its steps, criterion and
    final divergence; ``sweeps`` = ``logdet_sweeps`` = 0), ``"jacobi"``, ``sweeps`` Jacobi sweeps of the
    off-diagonal mass then ``logdet_sweeps`` of the log-det criterion, or ``"identity"`` (default when
    omitted: jacobi if ``sweeps`` > 0, else identity, as plans saved before the Newton basis were); and
    ``deflation``: a block (α [k], β [k, r], Γ [k, r, r]) of eigenvectors of the joint-diagonal
    preconditioned operator (whitened coordinates; k = 0 when none were found or asked for), each of
    unit norm with true relative residual ≤ 0.05 (checked when the plan was built, in coefficients, with
    float32 Gram products and the float32 coefficient preconditioner; the Lanczos run itself iterates on forms
    in the basis Q, with float32 products).
    ``deflation_info``: what the Lanczos run found: candidates, kept, rejected, and each candidate's
    Ritz value and true relative residual (:func:`~polyinterp.approx.solvers.deflation.outlier_eigenvectors`),
    and the coarse space's dimension p and Ritz values.
    ``coarse_basis``: W [r + 1, p] with orthonormal columns (whitened x̃ coordinates) or None: the solver
    deflates every form W S Wᵀ besides the deflation block
    (:class:`~polyinterp.approx.solvers.coarse_space.SubspaceDeflation`).
    ``coarse_factor``: that coarse space's :meth:`~polyinterp.approx.solvers.coarse_space.SubspaceDeflation.factor`
    on the float64 form operator of the whitened mixture in the basis Q (its Galerkin matrix factored once
    per mixture, not once per fit; :meth:`coarse_space`), or None (then each fit factors it).
    ``seconds_by_part``: where ``seconds`` went (whitening; newton, or frobenius_sweeps and logdet_sweeps;
    lanczos; deflation and coarse: the eigenvector checks and the subspace; coarse_factor), when the plan
    was built here."""

    whitening: Whitening
    basis: torch.Tensor
    sweeps: int
    seconds: float = 0.0
    deflation: tuple | None = None
    deflation_info: dict | None = None
    logdet_sweeps: int = 0
    coarse_basis: torch.Tensor | None = None
    seconds_by_part: dict | None = None
    basis_method: str | None = None
    basis_info: dict | None = None
    coarse_factor: dict | None = None

    def __post_init__(self):
        if self.basis_method is None:
            self.basis_method = "jacobi" if self.sweeps > 0 else "identity"
        if self.basis_method not in BASIS_METHODS:
            raise ApproxInputError(f"solver plan basis_method must be one of {list(BASIS_METHODS)}, got "
                                   f"{self.basis_method!r}; rebuild the plan with SolverPlan.build(mixture)")

    @classmethod
    def build(cls, mixture: GaussianMixture, *, sweeps: int = 2, block: int = 16, rcond: float = 1e-10,
              lanczos_steps: int = 120, logdet_sweeps: int = LOGDET_SWEEPS, coarse_ritz: int = COARSE_RITZ,
              coarse_rank: int = COARSE_RANK, basis: str = "newton",
              newton_iterations: int = NEWTON_ITERATIONS) -> "SolverPlan":
        """The basis: ``basis`` = ``"identity"`` or ``sweeps`` = 0 keeps the identity (and builds no deflation); ``basis`` =
        ``"newton"`` (default) lowers the log-det criterion (it weighs each class's small-variance directions
        as much as its large ones, which is what the preconditioner needs when the ridge is small) by at most
        ``newton_iterations`` all-pairs quasi-Newton steps (:func:`~polyinterp.approx.solvers.logdet_newton.logdet_newton`,
        float32 steps; ``sweeps`` and ``logdet_sweeps`` unused), and ``basis`` = ``"jacobi"`` takes ``sweeps``
        Jacobi sweeps with the off-diagonal-mass criterion, then ``logdet_sweeps`` more with the log-det
        criterion from there (``joint_diagonalize``'s ``criterion="logdet"``).
        ``lanczos_steps`` steps of the Lanczos run (on forms in the basis Q) that finds the eigenvectors to deflate (0: none;
        none with the identity basis either); the Ritz vectors of its ``coarse_ritz`` lowest Ritz values, ``coarse_rank``
        leading directions each, and the constant span the coarse space's subspace
        (:func:`~polyinterp.approx.solvers.coarse_space.ritz_subspace`; 0: no coarse space, only the deflation)."""
        if coarse_ritz * coarse_rank + 1 > MAX_COARSE_DIRECTIONS:
            raise ApproxInputError(
                f"coarse_ritz × coarse_rank + 1 = {coarse_ritz * coarse_rank + 1} coarse directions exceed "
                f"{MAX_COARSE_DIRECTIONS} (the coarse space's dense Galerkin matrix has (p(p + 1)/2)² entries); "
                "lower coarse_ritz or coarse_rank")
        if basis not in BASIS_METHODS:
            raise ApproxInputError(f"basis must be one of {list(BASIS_METHODS)}, got {basis!r}")
        t0 = clock(mixture.means)
        parts, t = {}, t0

        def lap(name):
            nonlocal t
            now = clock(mixture.means)
            parts[name], t = now - t, now

        W = whitening(mixture, rcond)
        wmix = whiten_mixture(mixture, W)
        _, M = second_moments(wmix)
        lap("whitening")
        basis_info = None
        if basis == "identity":
            sweeps = 0
        if sweeps > 0 and basis == "newton":
            sweeps, logdet_sweeps, basis_info = 0, 0, {}
            Q = logdet_newton(M, wmix.weights, iterations=newton_iterations, info=basis_info)
            lap("newton")
        elif sweeps > 0:
            Q = joint_diagonalize(M, wmix.weights, sweeps=sweeps, block=block)
            lap("frobenius_sweeps")
            if logdet_sweeps > 0:
                Q = joint_diagonalize(M, wmix.weights, sweeps=logdet_sweeps, block=block, criterion="logdet", start=Q)
                lap("logdet_sweeps")
        else:
            logdet_sweeps, basis = 0, "identity"
            Q = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
        deflation, info, coarse = None, None, None
        if basis != "identity" and lanczos_steps > 0:
            # the run iterates on forms in the basis Q, as the solver does (the same preconditioned operator,
            # hence the same Ritz pairs, as in coefficients, without the preconditioner's four n³ rotations a
            # step; bench/README.md, "Lanczos on forms, fewer float64 residuals"); float32 products are ample for the
            # outliers' eigenvectors and halve the time
            form_op = FormGramOperator(wmix, Q, product_dtype=torch.float32)
            run = lanczos(form_op, BasisPreconditioner.from_moments(form_op.M, wmix.weights, Q[0]),
                          (rotate(to_form(random_start(W.rank, 0, wmix.dtype, wmix.device)), Q),), lanczos_steps)
            lap("lanczos")
            info = {}
            # candidates are checked in coefficients (whitened coordinates), the plan's representation
            to_coefficients = lambda s: form_to_theta(rotate(s[0], Q.T))  # noqa: E731
            deflation = outlier_eigenvectors(GramOperator(wmix, product_dtype=torch.float32),
                                             MixturePreconditioner(wmix, Q, dtype=torch.float32), W.rank, run=run,
                                             info=info, convert=to_coefficients)
            lap("deflation")
            info = {k: info[k] for k in ("steps", "candidates", "kept", "rejected", "candidate_ritz_values",
                                         "candidate_residuals")}
            if coarse_ritz > 0 and coarse_rank > 0:
                low = run.ritz_vectors(range(min(coarse_ritz, run.steps)))[0]  # forms in the basis Q
                e0 = torch.zeros(W.rank + 1, 1, dtype=wmix.dtype, device=wmix.device)
                e0[0] = 1.0  # the constant, where the mean terms the preconditioner approximates live
                coarse = ritz_subspace(rotate(low, Q.T), coarse_rank, e0)
                info["coarse_dimension"] = coarse.shape[1]
                info["coarse_ritz_values"] = run.theta[:coarse_ritz].tolist()
                lap("coarse")
        plan = cls(W, Q, sweeps, clock(mixture.means) - t0, deflation, info, logdet_sweeps, coarse, parts, basis,
                   basis_info)
        if coarse is not None:
            # the operator the solver builds (quadratic_mixture: the same whitened mixture and basis, float64)
            plan.coarse_factor = plan.coarse_space(FormGramOperator(wmix, Q)).factor()
            lap("coarse_factor")
            plan.seconds = clock(mixture.means) - t0
        return plan

    def deflation_forms(self) -> tuple | None:
        """The deflation block as forms in the basis Q (a 1-tuple [k, r + 1, r + 1]), or None when it is empty."""
        if self.deflation is None or self.deflation[0].shape[0] == 0:
            return None
        return (rotate(theta_to_form(self.deflation), self.basis),)

    def coarse_space(self, op: FormGramOperator, product_dtype: torch.dtype | None = None) -> SubspaceDeflation | None:
        """The coarse space {W S Wᵀ} ⊕ span(deflation) on ``op`` (the float64 form operator of this plan's
        whitened mixture in its basis Q), from :attr:`coarse_factor` when the plan has one (the same, to the
        bit, as factoring it here, where ``op`` is computed as the plan computed it), else factored here;
        None without a coarse basis. ``product_dtype``: :class:`SubspaceDeflation`'s."""
        if self.coarse_basis is None:
            return None
        W = self.basis.T @ self.coarse_basis
        if self.coarse_factor is not None:
            fW = self.coarse_factor["W"].to(W.device, W.dtype)
            if fW.shape != W.shape or float((W - fW @ (fW.T @ W)).norm()) > 1e-8 * float(W.norm()):
                raise ApproxInputError(
                    f"the solver plan's coarse_factor (W {tuple(fW.shape)}) is not of its coarse_basis "
                    f"({tuple(W.shape)}): the basis was changed after the plan was built; set "
                    "plan.coarse_factor = None (each fit then factors the coarse space) or rebuild the plan")
            return SubspaceDeflation.from_factor(op, self.coarse_factor, product_dtype=product_dtype)
        return SubspaceDeflation(op, W, self.deflation_forms(), product_dtype=product_dtype)

    def whiten(self, mixture: GaussianMixture, tol: float = 1e-6) -> GaussianMixture:
        """The mixture in this plan's whitened coordinates; an error if the plan was built for
        another mixture (its whitened total covariance must be the identity, its total mean zero)."""
        W = self.whitening
        if W.P.shape[1] != mixture.d:
            raise ApproxInputError(f"the solver plan is for d = {W.P.shape[1]}, the mixture has d = {mixture.d}; "
                                   "build the plan from this mixture (SolverPlan.build)")
        W = Whitening(*(t.to(mixture.device, mixture.dtype) for t in (W.shift, W.M, W.P)))
        wmix = whiten_mixture(mixture, W)
        cov, mean = wmix.total_cov(), wmix.total_mean()
        err = max(float((cov - torch.eye(W.rank, dtype=cov.dtype, device=cov.device)).abs().max()),
                  float(mean.abs().max()))
        if err > tol:
            raise ApproxInputError(f"the solver plan does not whiten this mixture (error {err:.2e} > {tol:g}): it "
                                   "was built for another mixture; rebuild it with SolverPlan.build(mixture)")
        return wmix

    def state_dict(self) -> dict:
        W = self.whitening
        return {"shift": W.shift, "M": W.M, "P": W.P, "basis": self.basis, "sweeps": self.sweeps,
                "seconds": self.seconds, "deflation": self.deflation, "deflation_info": self.deflation_info,
                "logdet_sweeps": self.logdet_sweeps, "coarse_basis": self.coarse_basis,
                "seconds_by_part": self.seconds_by_part, "basis_method": self.basis_method, "basis_info": self.basis_info,
                "coarse_factor": self.coarse_factor}

    @classmethod
    def from_state_dict(cls, state: dict) -> "SolverPlan":
        missing = [k for k in ("shift", "M", "P", "basis", "sweeps") if k not in state]
        if missing:
            raise ApproxInputError(f"solver plan state lacks {missing}; it must come from SolverPlan.state_dict()")
        deflation = state.get("deflation")
        if deflation is not None and (len(deflation) != 3 or deflation[1].shape[-1] != state["P"].shape[0]):
            raise ApproxInputError("solver plan state has a deflation block that does not match its whitening; "
                                   "rebuild the plan with SolverPlan.build(mixture)")
        coarse = state.get("coarse_basis")
        if coarse is not None and (coarse.dim() != 2 or coarse.shape[0] != state["P"].shape[0] + 1):
            raise ApproxInputError(f"solver plan state has a coarse basis of shape {tuple(coarse.shape)}, which does not "
                                   f"match its whitening (rank {state['P'].shape[0]}: [rank + 1, p] expected); "
                                   "rebuild the plan with SolverPlan.build(mixture)")
        factor = state.get("coarse_factor")  # None in plans saved before it: each fit factors the coarse space
        if factor is not None and (coarse is None or factor["W"].shape != coarse.shape):
            raise ApproxInputError(
                f"solver plan state has a coarse-space factor with W {tuple(factor['W'].shape)}, which does not match "
                f"its coarse basis ({'none' if coarse is None else tuple(coarse.shape)}); rebuild the plan with "
                "SolverPlan.build(mixture)")
        sweeps = int(state["sweeps"])
        method = state.get("basis_method")  # None in plans saved before the Newton basis: inferred from sweeps
        return cls(Whitening(state["shift"], state["M"], state["P"]), state["basis"], sweeps,
                   float(state.get("seconds", 0.0)), tuple(deflation) if deflation is not None else None,
                   state.get("deflation_info"), int(state.get("logdet_sweeps", 0)), coarse, state.get("seconds_by_part"),
                   method, state.get("basis_info"), factor)

    def to(self, device=None, dtype=None) -> "SolverPlan":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        W = self.whitening
        deflation = tuple(f(t) for t in self.deflation) if self.deflation is not None else None
        info = dict(self.deflation_info) if self.deflation_info is not None else None
        coarse = f(self.coarse_basis) if self.coarse_basis is not None else None
        basis_info = dict(self.basis_info) if self.basis_info is not None else None
        # the factor is kept in float64 only: a rounded Cholesky factor would no longer deflate its space exactly,
        # so a plan cast to another dtype drops it and each fit factors the coarse space (as without one)
        keep = self.coarse_factor is not None and (dtype is None or dtype == torch.float64)
        factor = {k: None if t is None else f(t) for k, t in self.coarse_factor.items()} if keep else None
        return SolverPlan(Whitening(f(W.shift), f(W.M), f(W.P)), f(self.basis), self.sweeps, self.seconds, deflation, info,
                          self.logdet_sweeps, coarse, self.seconds_by_part, self.basis_method, basis_info, factor)

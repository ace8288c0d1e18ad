"""What the exact mixture quadratic precomputes once per mixture and reuses for every model.

The Gram operator of the normal equations depends on the mixture only, so its whitening and the
basis that jointly diagonalises the components' second moments (the slow part of building the
:class:`~polyinterp.approx.mixture_preconditioner.MixturePreconditioner`) can be computed once and
shared by all checkpoints and seeds; so can the eigenvectors of the preconditioned operator's
isolated eigenvalues, which the solver deflates (:mod:`polyinterp.approx.deflation`). A plan carries
its own whitening, so a saved plan stays valid wherever it is loaded (another machine's eigensolver
may pick a different but equally valid whitening; the basis belongs to this one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from polyinterp.approx.deflation import outlier_eigenvectors
from polyinterp.approx.errors import ApproxInputError
from polyinterp.approx.gram_operator import GramOperator
from polyinterp.approx.joint_diagonal import joint_diagonalize
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.mixture_preconditioner import MixturePreconditioner, second_moments
from polyinterp.approx.whitening import Whitening, whiten_mixture, whitening


LOGDET_SWEEPS = 3  # the default; measured in bench/README.md ("The log-det criterion")


@dataclass
class SolverPlan:
    """``whitening`` of the mixture, ``basis`` Q [r + 1, r + 1] (orthogonal, in x̃ = (1, x̃_white); from
    ``sweeps`` Jacobi sweeps of the off-diagonal mass, then ``logdet_sweeps`` of the log-det criterion) and
    ``deflation``: a block (α [k], β [k, r], Γ [k, r, r]) of eigenvectors of the joint-diagonal
    preconditioned operator (whitened coordinates; k = 0 when none were found or asked for), each of
    unit norm with true relative residual ≤ 0.05 (checked when the plan was built, with the float32
    products the Lanczos run used).
    ``deflation_info``: what the Lanczos run found: candidates, kept, rejected, and each candidate's
    Ritz value and true relative residual (:func:`~polyinterp.approx.deflation.outlier_eigenvectors`)."""

    whitening: Whitening
    basis: torch.Tensor
    sweeps: int
    seconds: float = 0.0
    deflation: tuple | None = None
    deflation_info: dict | None = None
    logdet_sweeps: int = 0

    @classmethod
    def build(cls, mixture: GaussianMixture, *, sweeps: int = 2, block: int = 16, rcond: float = 1e-10,
              lanczos_steps: int = 60, logdet_sweeps: int = LOGDET_SWEEPS) -> "SolverPlan":
        """``sweeps`` Jacobi sweeps for the basis (0: identity) with the off-diagonal-mass criterion, then
        ``logdet_sweeps`` more with the log-det criterion from there (``joint_diagonalize``'s
        ``criterion="logdet"``: it weighs each class's small-variance directions as much as its large
        ones, which is what the preconditioner needs when the ridge is small; needs ``sweeps`` > 0);
        ``lanczos_steps`` steps of the Lanczos run that finds the eigenvectors to deflate (0: none;
        needs ``sweeps`` > 0)."""
        t0 = time.perf_counter()
        W = whitening(mixture, rcond)
        wmix = whiten_mixture(mixture, W)
        _, M = second_moments(wmix)
        if sweeps > 0:
            Q = joint_diagonalize(M, wmix.weights, sweeps=sweeps, block=block)
            if logdet_sweeps > 0:
                Q = joint_diagonalize(M, wmix.weights, sweeps=logdet_sweeps, block=block, criterion="logdet", start=Q)
        else:
            logdet_sweeps = 0
            Q = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
        deflation, info = None, None
        if sweeps > 0 and lanczos_steps > 0:
            # float32 products are ample for the outliers' eigenvectors and halve the time
            op = GramOperator(wmix, product_dtype=torch.float32)
            precond = MixturePreconditioner(wmix, Q, dtype=torch.float32)
            info = {}
            deflation = outlier_eigenvectors(op, precond, W.rank, steps=lanczos_steps, dtype=wmix.dtype,
                                             device=wmix.device, info=info)
            info = {k: info[k] for k in ("steps", "candidates", "kept", "rejected", "candidate_ritz_values",
                                         "candidate_residuals")}
        return cls(W, Q, sweeps, time.perf_counter() - t0, deflation, info, logdet_sweeps)

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
                "logdet_sweeps": self.logdet_sweeps}

    @classmethod
    def from_state_dict(cls, state: dict) -> "SolverPlan":
        missing = [k for k in ("shift", "M", "P", "basis", "sweeps") if k not in state]
        if missing:
            raise ApproxInputError(f"solver plan state lacks {missing}; it must come from SolverPlan.state_dict()")
        deflation = state.get("deflation")
        if deflation is not None and (len(deflation) != 3 or deflation[1].shape[-1] != state["P"].shape[0]):
            raise ApproxInputError("solver plan state has a deflation block that does not match its whitening; "
                                   "rebuild the plan with SolverPlan.build(mixture)")
        return cls(Whitening(state["shift"], state["M"], state["P"]), state["basis"], int(state["sweeps"]),
                   float(state.get("seconds", 0.0)), tuple(deflation) if deflation is not None else None,
                   state.get("deflation_info"), int(state.get("logdet_sweeps", 0)))

    def to(self, device=None, dtype=None) -> "SolverPlan":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        W = self.whitening
        deflation = tuple(f(t) for t in self.deflation) if self.deflation is not None else None
        info = dict(self.deflation_info) if self.deflation_info is not None else None
        return SolverPlan(Whitening(f(W.shift), f(W.M), f(W.P)), f(self.basis), self.sweeps, self.seconds, deflation, info,
                          self.logdet_sweeps)

"""What the exact mixture quadratic precomputes once per mixture and reuses for every model.

The Gram operator of the normal equations depends on the mixture only, so its whitening and the
basis that jointly diagonalises the components' second moments (the slow part of building the
:class:`~polyinterp.approx.mixture_preconditioner.MixturePreconditioner`) can be computed once and
shared by all checkpoints and seeds. A plan carries its own whitening, so a saved plan stays valid
wherever it is loaded (another machine's eigensolver may pick a different but equally valid
whitening; the basis belongs to this one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from polyinterp.approx.errors import ApproxInputError
from polyinterp.approx.joint_diagonal import joint_diagonalize
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.mixture_preconditioner import second_moments
from polyinterp.approx.whitening import Whitening, whiten_mixture, whitening


@dataclass
class SolverPlan:
    """``whitening`` of the mixture and ``basis`` Q [r + 1, r + 1] (orthogonal, in x̃ = (1, x̃_white))."""

    whitening: Whitening
    basis: torch.Tensor
    sweeps: int
    seconds: float = 0.0

    @classmethod
    def build(cls, mixture: GaussianMixture, *, sweeps: int = 2, block: int = 16, rcond: float = 1e-10) -> "SolverPlan":
        t0 = time.perf_counter()
        W = whitening(mixture, rcond)
        wmix = whiten_mixture(mixture, W)
        _, M = second_moments(wmix)
        if sweeps > 0:
            Q = joint_diagonalize(M, wmix.weights, sweeps=sweeps, block=block)
        else:
            Q = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
        return cls(W, Q, sweeps, time.perf_counter() - t0)

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
                "seconds": self.seconds}

    @classmethod
    def from_state_dict(cls, state: dict) -> "SolverPlan":
        missing = [k for k in ("shift", "M", "P", "basis", "sweeps") if k not in state]
        if missing:
            raise ApproxInputError(f"solver plan state lacks {missing}; it must come from SolverPlan.state_dict()")
        return cls(Whitening(state["shift"], state["M"], state["P"]), state["basis"], int(state["sweeps"]),
                   float(state.get("seconds", 0.0)))

    def to(self, device=None, dtype=None) -> "SolverPlan":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        W = self.whitening
        return SolverPlan(Whitening(f(W.shift), f(W.M), f(W.P)), f(self.basis), self.sweeps, self.seconds)

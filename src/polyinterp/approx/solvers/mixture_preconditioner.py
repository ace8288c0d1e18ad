"""Preconditioner for the mixture quadratic's normal equations (whitened coordinates).

Write a quadratic as a form in x̃ = (1, x): g(x) = x̃ᵀ X x̃ with X = [[α, βᵀ/2], [β/2, Γ]]. Under
component k (x̃ has mean m̃_k = (1, μ_k) and second moment M_k = E_k[x̃x̃ᵀ]) Isserlis gives

    E_k[g g'] = 2 tr(X M_k X' M_k) + tr(X M_k) tr(X' M_k) − 2 (m̃_kᵀ X m̃_k)(m̃_kᵀ X' m̃_k),

so the Gram operator is G(X) = Σ_k w_k [2 M_k X M_k + tr(M_k X) M_k − 2 (m̃_kᵀXm̃_k) m̃_k m̃_kᵀ].
In whitened coordinates Σ_k w_k M_k = I. The preconditioner keeps what is cheap to invert:

* the Kronecker part Σ_k w_k M_k ⊗ M_k with every M_k replaced by its diagonal in a basis Q that
  jointly diagonalises the M_k (``joint_diagonalize``, computed once per mixture by
  :class:`~polyinterp.approx.solvers.solver_plan.SolverPlan`; its log-det sweeps matter where the ridge is
  small: a form u vᵀ with u large in one class and v small there is preconditioned by λ_ku λ_kv, so
  v's small variance in that class must be right relatively, not only absolutely): X ↦ Q [(QᵀXQ) ⊙ D] Qᵀ with
  D_ij = 2 Σ_k w_k λ_ki λ_kj, λ_k = diag(QᵀM_kQ) > 0 — exactly invertible elementwise;
* the rank-K trace terms tr(M_k X) M_k exactly, and −2 X₀₀ e₀e₀ᵀ (the mean terms of the
  moment-matched Gaussian), both by the Woodbury identity. The coefficient of the negative term is
  capped so that the preconditioner stays positive definite (Cauchy–Schwarz bound below).

With Q = I and all M_k = I this is the moment-matched Gaussian's Gram operator (the previous
preconditioner) except that the cap turns the e₀ coefficient −2 into −1.9. On the MNIST class mixture it roughly halves the block-PCG iterations.
The preconditioner maps a residual (r₀, r₁, R₂) (the dual of (α, β, Γ) under the inner product
αα' + β·β' + tr ΓΓ') to a correction (α, β, Γ); it is symmetric positive definite in that inner
product.
"""

from __future__ import annotations

import torch

from polyinterp.approx.core.mixture import GaussianMixture


def second_moments(mixture: GaussianMixture) -> tuple[torch.Tensor, torch.Tensor]:
    """m̃_k = (1, μ_k) [K, n] and M_k = E_k[x̃x̃ᵀ] [K, n, n] with n = d + 1."""
    K, d = mixture.means.shape
    mt = torch.cat([mixture.means.new_ones(K, 1), mixture.means], 1)
    M = torch.zeros(K, d + 1, d + 1, dtype=mixture.dtype, device=mixture.device)
    M[:, 1:, 1:] = mixture.covs
    return mt, M + mt[:, :, None] * mt[:, None, :]


def to_form(r) -> torch.Tensor:
    """Residual (r₀ [o], r₁ [o, d], R₂ [o, d, d]) → its matrix [o, n, n] in x̃ (tr(X·form) = ⟨θ, r⟩)."""
    r0, r1, R2 = r
    o, d = r1.shape
    X = r1.new_empty(o, d + 1, d + 1)
    X[:, 0, 0], X[:, 0, 1:], X[:, 1:, 0], X[:, 1:, 1:] = r0, r1, r1, R2
    return X


def form_to_dual(R: torch.Tensor):
    """Inverse of :func:`to_form`: a residual's matrix [o, n, n] → (r₀, r₁, R₂) (r₁ from the first column)."""
    return R[:, 0, 0], R[:, 1:, 0], R[:, 1:, 1:]


def from_form(X: torch.Tensor):
    """Matrix [o, n, n] of g in x̃ → coefficients (α, β, Γ)."""
    return X[:, 0, 0], 2 * X[:, 1:, 0], X[:, 1:, 1:]


def _base_diagonal_and_e0_coefficient(lam: torch.Tensor, w: torch.Tensor, q0: torch.Tensor) -> tuple[torch.Tensor, float]:
    """D_ij = 2 Σ_k w_k λ_ki λ_kj (the base part, a division in the basis) from the diagonals λ [K, n], and
    the coefficient s₀ of the e₀e₀ᵀ term, −2 capped so that the preconditioner stays positive definite:
    ⟨X, BX⟩ ≥ 2 X₀₀²·(1/ρ) with ρ = 2 Σ q0_i² q0_j² / D_ij (Cauchy–Schwarz; q0 = Qᵀe₀)."""
    D = 2 * torch.einsum("k,ki,kj->ij", w, lam, lam)
    rho = float(2 * (q0[:, None] ** 2 * q0[None, :] ** 2 / D).sum())
    return D, -2.0 * min(1.0, 0.95 / rho)


def _capacitance_inverse(UBU: torch.Tensor, s0: float) -> torch.Tensor:
    """(diag(1/s) + ⟨U_i, B⁻¹U_j⟩)⁻¹ of the Woodbury identity, s = (1, …, 1, s₀), from the Gram matrix
    UBU [K + 1, K + 1] of the terms (symmetrised)."""
    signs = torch.ones(UBU.shape[0], dtype=UBU.dtype, device=UBU.device)
    signs[-1] = s0
    cap = torch.diag(1 / signs) + UBU
    return torch.linalg.inv(0.5 * (cap + cap.T))


class MixturePreconditioner:
    """See the module docstring. ``mixture`` must be whitened (Σ_k w_k M_k = I); ``basis`` is the
    orthogonal Q [d + 1, d + 1] (identity when omitted). ``dtype`` is the precision of the four n³
    products per output and application (float32 by default: the preconditioner need not be exact,
    only fixed and symmetric)."""

    def __init__(self, mixture: GaussianMixture, basis: torch.Tensor | None = None,
                 dtype: torch.dtype | None = torch.float32):
        w = mixture.weights
        _, M = second_moments(mixture)
        n = M.shape[-1]
        self.n, self.dtype = n, dtype or mixture.dtype
        Q = torch.eye(n, dtype=M.dtype, device=M.device) if basis is None else basis.to(M.device, M.dtype)
        lam = torch.diagonal(Q.T @ M @ Q, dim1=1, dim2=2)  # [K, n], > 0 since every M_k is PD
        self.Q = Q
        self.D, s0 = _base_diagonal_and_e0_coefficient(lam, w, Q[0])
        self.Q_lo, self.Dinv_lo = Q.to(self.dtype), (1 / self.D).to(self.dtype)
        # Woodbury terms: P = B + Σ_j s_j U_j ⊗ U_j (rank one each), U = [√w_k M_k ..., e₀e₀ᵀ]
        E0 = torch.zeros(n, n, dtype=M.dtype, device=M.device)
        E0[0, 0] = 1.0
        self.U = torch.cat([w.sqrt()[:, None, None] * M, E0[None]])  # [K + 1, n, n]
        BU = self._base_inverse(self.U.to(self.dtype)).to(M.dtype)
        self.BU = 0.5 * (BU + BU.transpose(1, 2))
        self.cap_inv = _capacitance_inverse(torch.einsum("iab,jab->ij", self.U, self.BU), s0)
        self.e0_coefficient = s0

    def _base_inverse(self, X: torch.Tensor) -> torch.Tensor:
        Q = self.Q_lo
        return Q @ ((Q.T @ X @ Q) * self.Dinv_lo) @ Q.T

    def __call__(self, r):
        R = to_form(r)
        Y = self._base_inverse(R.to(self.dtype)).to(R.dtype)
        Y = 0.5 * (Y + Y.transpose(1, 2))
        c = torch.einsum("jab,oab->oj", self.U, Y) @ self.cap_inv.T
        return from_form(Y - torch.einsum("oj,jab->oab", c, self.BU))

    def in_basis(self) -> "BasisPreconditioner":
        """The same preconditioner acting on forms in the basis Q (forms X [o, n, n] as 1-tuples, the
        states of :class:`~polyinterp.approx.solvers.form_operator.FormGramOperator` in that basis): there
        its base part is an elementwise division, so one application costs O(K·o·n²), no n³ product.
        (:meth:`BasisPreconditioner.from_moments` builds it from moments already rotated, without this
        class's n³ products.)"""
        Q = self.Q
        return BasisPreconditioner(1 / self.D, (Q.T @ self.U @ Q).reshape(self.U.shape[0], -1),
                                   (Q.T @ self.BU @ Q).reshape(self.BU.shape[0], -1), self.cap_inv)


class BasisPreconditioner:
    """:class:`MixturePreconditioner` in its own basis Q, in the mixture's precision: a residual form
    R̃ = QᵀRQ maps to Ỹ − Σ_j c_j (QᵀB⁻¹U_jQ) with Ỹ = R̃ ⊙ D⁻¹ and c = cap⁻¹ ⟨QᵀU_jQ, Ỹ⟩
    (the Woodbury correction of :class:`MixturePreconditioner`, rotated; symmetric positive definite
    in the Frobenius inner product). ``Dinv`` [n, n], ``U`` and ``BU`` [K + 1, n²] (QᵀU_jQ and
    QᵀB⁻¹U_jQ, flattened), ``cap_inv`` [K + 1, K + 1]."""

    def __init__(self, Dinv: torch.Tensor, U: torch.Tensor, BU: torch.Tensor, cap_inv: torch.Tensor):
        self.Dinv, self.U, self.BU, self.cap_inv = Dinv, U, BU, cap_inv

    @classmethod
    def from_moments(cls, M: torch.Tensor, weights: torch.Tensor, q0: torch.Tensor) -> "BasisPreconditioner":
        """The preconditioner of ``MixturePreconditioner(mixture, Q).in_basis()`` from the rotated second
        moments M [K, n, n] = QᵀM_kQ (as :class:`~polyinterp.approx.solvers.form_operator.FormGramOperator` holds
        them) and q0 = Qᵀe₀ (the first row of Q), in their precision: in the basis the base inverse is an
        elementwise division, so this costs O(K²·n²), no n³ product."""
        K = M.shape[0]
        w = weights.to(M.dtype)
        D, s0 = _base_diagonal_and_e0_coefficient(torch.diagonal(M, dim1=1, dim2=2), w, q0)
        U = torch.cat([w.sqrt()[:, None, None] * M, torch.outer(q0, q0)[None]])  # QᵀU_jQ
        U = 0.5 * (U + U.transpose(1, 2))
        BU = U / D  # QᵀB⁻¹U_jQ: B⁻¹ is the division by D in this basis
        U, BU = U.reshape(K + 1, -1), BU.reshape(K + 1, -1)
        return cls(1 / D, U, BU, _capacitance_inverse(U @ BU.T, s0))

    def to(self, dtype: torch.dtype) -> "BasisPreconditioner":
        """The same preconditioner held in ``dtype`` (e.g. float32 for float32 search directions, so that a
        call does not cast its K + 1 forms U and BU again)."""
        return BasisPreconditioner(self.Dinv.to(dtype), self.U.to(dtype), self.BU.to(dtype), self.cap_inv.to(dtype))

    def __call__(self, state):
        (R,) = state
        o = R.shape[0]
        Y = R * self.Dinv.to(R.dtype)
        c = (Y.reshape(o, -1) @ self.U.T.to(R.dtype)) @ self.cap_inv.T.to(R.dtype)
        Y = Y - (c @ self.BU.to(R.dtype)).view_as(Y)
        return (0.5 * (Y + Y.transpose(1, 2)),)

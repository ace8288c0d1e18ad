"""The mixture quadratic's normal equations as forms in x̃ = (1, x), in a rotated basis.

A quadratic g(x) = α + βᵀx + xᵀΓx is the form x̃ᵀXx̃ with X = J(θ) = [[α, βᵀ/2], [β/2, Γ]]. Under
component k (second moment M_k = E_k[x̃x̃ᵀ], mean m̃_k = (1, μ_k)) Isserlis gives
E_k[g x̃x̃ᵀ] = 2 M_k X M_k + tr(M_k X) M_k − 2 (m̃_kᵀXm̃_k) m̃_k m̃_kᵀ, so the normal equations
E[g x̃x̃ᵀ] = E[f x̃x̃ᵀ] read G(X) = F with

    G(X) = Σ_k w_k [2 M_k X M_k + tr(M_k X) M_k − 2 (m̃_kᵀXm̃_k) m̃_k m̃_kᵀ],   F = T(r),

T the map of the right-hand side (E f, E f x, E f x xᵀ) to its matrix [[E f, E f xᵀ], [E f x, E f x xᵀ]]
(:func:`~polyinterp.approx.solvers.mixture_preconditioner.to_form`). G is self-adjoint and positive
semi-definite in the Frobenius inner product (⟨X', G(X)⟩ = E[g g']) and stays so under any rotation
X ↦ QᵀXQ, M_k ↦ QᵀM_kQ, m̃_k ↦ Qᵀm̃_k (Frobenius norms are unchanged). In the basis Q that jointly
diagonalises the M_k the joint-diagonal preconditioner is an elementwise division plus a rank-(K + 1)
Woodbury correction, with no n³ product (:meth:`MixturePreconditioner.in_basis`): the solver iterates
there (:func:`~polyinterp.approx.fits.quadratic_mixture.quadratic_mixture`).

A state is a 1-tuple (X [o, n, n],) so that :mod:`polyinterp.approx.solvers.block_pcg` and
:mod:`polyinterp.approx.solvers.deflation` handle it as they handle (α, β, Γ).
"""

from __future__ import annotations

import torch

from polyinterp.approx.solvers.gram_operator import Theta, sym
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.solvers.mixture_preconditioner import from_form, second_moments, to_form


def theta_to_form(theta: Theta) -> torch.Tensor:
    """J: coefficients (α [o], β [o, d], Γ [o, d, d]) → the form X [o, d + 1, d + 1] (x̃ᵀXx̃ = g)."""
    a, b, G = theta
    return to_form((a, 0.5 * b, G))


def form_to_theta(X: torch.Tensor) -> Theta:
    """J⁻¹ (the inverse of :func:`theta_to_form`) of the symmetric part of X: the Gram operator cannot see an
    antisymmetric part, so a solution's is round-off, and β takes both halves of the first row and column."""
    return from_form(sym(X))


def rotate(X: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """QᵀXQ for every form of the block X [o, n, n] (or a single [n, n])."""
    return Q.T @ X @ Q


def affine_map(M: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """T [d + 1, d' + 1] with x̃ = T x̃' for x = shift + M x' (M [d, d'], shift [d]): the form of
    x' ↦ g(shift + M x') is TᵀXT (:meth:`~polyinterp.approx.core.approximant.Approximant.compose` on forms), and
    a change of coordinates followed by a rotation Q is the single sandwich ``rotate(X, T @ Q)``."""
    d, d2 = M.shape
    T = M.new_zeros(d + 1, d2 + 1)
    T[0, 0] = 1.0
    T[1:, 0] = shift
    T[1:, 1:] = M
    return T


PAD = 32


def _padded(M: torch.Tensor) -> torch.Tensor:
    """M [K, n, n] zero-padded to n rounded up to a multiple of :data:`PAD` (GEMMs of odd sizes such as
    n = d + 1 = 785 are slow; measured in bench/README.md, "Iterating on forms"); the zero rows and
    columns leave the n × n block of M X M unchanged."""
    n = M.shape[-1]
    p = -(-n // PAD) * PAD
    if p == n:
        return M
    out = M.new_zeros(M.shape[0], p, p)
    out[:, :n, :n] = M
    return out


class FormGramOperator:
    """(X,) ↦ (G(X),) of the module docstring in the basis Q (identity when omitted), exactly
    symmetrised. ``product_dtype``: the precision of the products M_k X M_k per output and component
    (:func:`sandwich_sum`, nearly all the flops: ≈ 3.26 p³ each at p = 800, the forms zero-padded to p, a
    multiple of :data:`PAD` rows; default: the mixture's dtype); the rest is in the mixture's."""

    def __init__(self, mixture: GaussianMixture, basis: torch.Tensor | None = None,
                 product_dtype: torch.dtype | None = None):
        mt, M = second_moments(mixture)
        if basis is not None:
            Q = basis.to(M.device, M.dtype)
            M, mt = rotate(M, Q), mt @ Q
        self.w, self.mt, self.M = mixture.weights, mt, sym(M)
        self.product_dtype = product_dtype or mixture.dtype
        self.M_prod = _padded(self.M.to(self.product_dtype))

    def to(self, dtype: torch.dtype, product_dtype: torch.dtype | None = None) -> "FormGramOperator":
        """The same operator with its moments in ``dtype`` (products in ``product_dtype``)."""
        op = object.__new__(FormGramOperator)
        op.w, op.mt, op.M = self.w.to(dtype), self.mt.to(dtype), self.M.to(dtype)
        op.product_dtype = product_dtype or dtype
        op.M_prod = _padded(self.M.to(op.product_dtype))
        return op

    def __call__(self, state: Theta) -> Theta:
        (X,) = state
        w, mt, M = self.w.to(X.dtype), self.mt.to(X.dtype), self.M.to(X.dtype)
        o, n, _ = X.shape
        p = self.M_prod.shape[-1]
        Xp = X.new_zeros(o, p, p, dtype=self.product_dtype)
        Xp[:, :n, :n] = sym(X)  # G(X) = G(sym X); sandwich_sum needs symmetric forms
        out = sandwich_sum(self.M_prod, Xp, 2 * w, X.dtype)[:, :n, :n]
        tr = X.reshape(o, -1) @ M.reshape(M.shape[0], -1).T  # [o, K]: tr(M_k X), M_k symmetric
        mXm = ((X @ mt.T) * mt.T[None]).sum(1)  # [o, K]: m̃_kᵀ X m̃_k
        out += torch.einsum("ok,kab->oab", tr * w, M)
        out -= 2 * torch.einsum("ok,ka,kb->oab", mXm * w, mt, mt)
        return (sym(out),)


# at most this many row blocks in the second product (bench/README.md, "The second product on the upper blocks")
BLOCKS = 4


def _block_starts(p: int) -> list[int]:
    """Starts of the row blocks of :func:`sandwich_sum`: at most :data:`BLOCKS` blocks of a common size that
    is a multiple of :data:`PAD` rows (the last one possibly shorter)."""
    size = max(PAD, -(-p // (BLOCKS * PAD)) * PAD)
    return list(range(0, p, size))


def sandwich_sum(M: torch.Tensor, X: torch.Tensor, c: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Σ_k c_k M_k X M_k [o, p, p] in ``dtype`` for symmetric M [K, p, p] and symmetric forms X [o, p, p]
    (both in the products' precision; the sum in ``dtype``).

    Both factors symmetric, so M_k X M_k = (X M_k)ᵀ M_k is symmetric: one GEMM forms X M_k for every output
    at once, the second is formed on the blocks on and above the block diagonal only (row blocks of sizes
    b_i starting at s_i: 2p Σ b_i (p − s_i) flops, (3 + Σ b_i²/p²) p³ per output and component with the
    first GEMM instead of 4 p³; 3.25 p³ for four equal blocks, 3.26 p³ at p = 800, none saved at p = 32),
    and the blocks below are copied from them. Guarantees: the strictly lower blocks are exact transposes
    of the upper ones; each diagonal block is the product as computed (symmetric to round-off only; the
    operator symmetrises its output). In bfloat16 each block is rounded once instead of being averaged with
    its transpose: a rounding error of the same order (measured in bench/README.md)."""
    o, p, _ = X.shape
    starts = _block_starts(p)
    ends = starts[1:] + [p]
    out = X.new_zeros(o, p, p, dtype=dtype)
    coefficients = c.tolist()  # one device synchronisation, not one per block
    for k in range(M.shape[0]):
        Y = (X.reshape(o * p, p) @ M[k]).view(o, p, p)  # X M_k, whose transpose is M_k X
        for s, e in zip(starts, ends):
            out[:, s:e, s:].add_((Y[:, :, s:e].transpose(1, 2) @ M[k][:, s:]).to(dtype), alpha=coefficients[k])
    for i, (s, e) in enumerate(zip(starts, ends)):
        for s2, e2 in zip(starts[:i], ends[:i]):
            out[:, s:e, s2:e2] = out[:, s2:e2, s:e].transpose(1, 2)
    return out

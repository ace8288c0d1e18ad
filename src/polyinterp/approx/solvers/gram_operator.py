"""The Gram operator of the quadratic basis {1, x, x xᵀ} under a Gaussian mixture, and the algebra of
its arguments.

An argument θ = (α [o], β [o, d], Γ [o, d, d]) holds one quadratic per output; the inner product is
⟨θ, θ'⟩ = αα' + β·β' + tr(ΓΓ') per output (so off-diagonal entries of Γ count twice, as they do in
g(x) = α + βᵀx + xᵀΓx). The operator maps θ to (E[g], E[g x], E[g x xᵀ]); it is self-adjoint and
positive semi-definite in that inner product (⟨θ', Aθ⟩ = E[g g']). Per component k (x = μ_k + z,
z ~ N(0, Σ_k)), with c = α + βᵀμ + μᵀΓμ and b = β + 2Γμ, Isserlis gives E[g] = c + tr(ΓΣ),
E[g z] = Σb, E[g z zᵀ] = (c + tr(ΓΣ))Σ + 2ΣΓΣ. Nothing of size d² × d² is formed.
"""

from __future__ import annotations

import torch

from polyinterp.approx.core.mixture import GaussianMixture

Theta = tuple  # (alpha [o], beta [o, d], gamma [o, d, d])


def sym(G: torch.Tensor) -> torch.Tensor:
    return 0.5 * (G + G.transpose(-1, -2))


def inner(x: Theta, y: Theta) -> torch.Tensor:
    """Per-output inner products [o]."""
    return x[0] * y[0] + (x[1] * y[1]).sum(-1) + (x[2] * y[2]).sum((-1, -2))


def cast(x: Theta, dtype: torch.dtype) -> Theta:
    return tuple(t.to(dtype) for t in x)


def add(X: Theta, Y: Theta, a: float = 1.0) -> Theta:
    """X + a·Y."""
    return tuple(x + a * y for x, y in zip(X, Y))


def add_(X: Theta, Y: Theta, a: float = 1.0) -> Theta:
    """X += a·Y in place (X's tensors are overwritten and returned; Y may be of a lower precision): for
    a = ±1 the same numbers, to the bit, as :func:`add`, without allocating a new state (at MNIST size each
    is 49 MB of fresh pages)."""
    for x, y in zip(X, Y):
        x.add_(y, alpha=a)
    return X


def block_inner(X: Theta, Y: Theta) -> torch.Tensor:
    """[s, t] matrix of inner products between the columns (outputs) of two blocks (tuples of any
    length whose parts have the outputs as leading dimension: (α, β, Γ) or a form (X,))."""
    return sum(x.reshape(x.shape[0], -1) @ y.reshape(y.shape[0], -1).T for x, y in zip(X, Y))


def block_combine(X: Theta, T: torch.Tensor) -> Theta:
    """Columns recombined, X T for T [s, t] (any tuple of parts, as :func:`block_inner`)."""
    return tuple((T.T @ x.reshape(x.shape[0], -1)).view(T.shape[1], *x.shape[1:]) for x in X)


class GramOperator:
    """θ ↦ (E[g], E[g x], E[g x xᵀ]) under a mixture (exactly symmetrised: round-off asymmetry
    otherwise makes CG diverge).

    ``product_dtype``: the precision of the two d × d × d products Σ_k Γ Σ_k per output and component,
    which are nearly all the flops (default: the mixture's dtype). ``torch.bfloat16`` (with a float32
    mixture) is meant for CPUs with AVX512-BF16/AMX and tensor-core GPUs, in the inner iterations of :func:`~polyinterp.approx.solvers.block_pcg.block_pcg`, whose
    float64 residual replacements keep the solution's accuracy (the product is good to ~3e-3).
    """

    def __init__(self, mixture: GaussianMixture, product_dtype: torch.dtype | None = None):
        self.w, self.m, self.S = mixture.weights, mixture.means, mixture.covs
        self.product_dtype = product_dtype or mixture.dtype
        self.S_prod = self.S.to(self.product_dtype)

    def __call__(self, theta: Theta) -> Theta:
        a, b, G = theta
        w, m, S = self.w.to(G.dtype), self.m.to(G.dtype), self.S.to(G.dtype)
        o, d = b.shape
        R2 = torch.zeros_like(G)
        Gp = G.to(self.product_dtype)
        Eg_all, Egz_all = [], []
        for k in range(w.shape[0]):
            Gm = G @ m[k]  # [o, d]
            c = a + b @ m[k] + Gm @ m[k]
            Eg = c + (G * S[k]).sum((1, 2))
            Egz = (b + 2 * Gm) @ S[k]
            SGS = (torch.matmul(self.S_prod[k], Gp).reshape(o * d, d) @ self.S_prod[k]).view(o, d, d)
            R2.add_(SGS.to(G.dtype), alpha=float(2 * w[k]))
            Eg_all.append(Eg)
            Egz_all.append(Egz)
        Eg = torch.stack(Eg_all, 1) * w  # [o, K] weighted
        Egz = torch.stack(Egz_all, 1) * w[:, None]  # [o, K, d] weighted
        R2 += torch.einsum("ok,kij->oij", Eg, S)
        R2 += torch.einsum("ok,ki,kj->oij", Eg, m, m)
        mEgz = torch.einsum("ki,okj->oij", m, Egz)
        R2 += mEgz + mEgz.transpose(1, 2)
        r0 = Eg.sum(1)
        r1 = torch.einsum("ok,ki->oi", Eg, m) + Egz.sum(1)
        return r0, r1, sym(R2)

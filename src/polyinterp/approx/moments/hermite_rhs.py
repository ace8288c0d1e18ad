"""The right-hand side E_k[f(x) He_j(u)] of the reduced polynomial's normal equations, exactly, for an
MLP or GLU f of the full input x and a Hermite polynomial of the linear coordinates u = (x − μ̄)B.

Derivation (tilting). Under component k, x ~ N(μ, Σ); u ~ N(m, S) with m = (μ − μ̄)B, S = BᵀΣB; a
pre-activation y = wᵀx + b ~ N(ν, σ²) has Cov(y, u) = c := BᵀΣw [p]. For jointly Gaussian (y, u),
multiplying the density by e^{sᵀu} shifts the mean of (y, u) by (cᵀs, Ss) and keeps the
covariance (Cameron–Martin), so with Φ(τ) := E[φ(y + τ)]

    E[φ(y) exp(sᵀu − |s|²/2)] = exp(sᵀm + ½ sᵀ(S − I)s) · Φ(cᵀs).

Both sides generate Hermite moments (Σ_α He_α(u)s^α/α! = exp(sᵀu − |s|²/2)), and Φ⁽ʳ⁾(0) =
E[φ⁽ʳ⁾(y)] =: D_r (Stein; :func:`~polyinterp.approx.moments.univariate.derivative_expectations`), so by
Leibniz over the index list j of length b

    E[φ(y) He_j(u)] = Σ_{J⊂[b]} h_{b−|J|}(j_{J^c}) · D_{|J|} · Π_{l∈J} c_{j_l}
                    = Sym(Σ_r C(b, r) (D_r c^{⊗r}) ⊗ h_{b−r})(j),

with the same Hermite means h_q = E[He⁽q⁾(u)] as the Gram operator
(:mod:`polyinterp.approx.moments.hermite_gram`). For f = W2 φ(W1x + b1) + b2 the per-output tensors are
Z_r = Σ_i W2[o, i] D_{i,r} c_i^{⊗r} (+ b2 in Z_0): the Gram operator's Z_r with g replaced by f.
(Special case m = 0, S = I: E[φ(y) He_α(z)] = E[φ^{(|α|)}(y)] c^α.)

GLU unit φ(y)·q, q = vᵀx + c' ~ N(ν_q, ·), Cov(y, q) = κ, Cov(q, u) = e := BᵀΣv: the tilt gives
E[φ(y)q e^{sᵀu}]/E[e^{sᵀu}] = E[φ(y + cᵀs)(q + eᵀs)] = ν_q Φ(cᵀs) + κ Φ'(cᵀs) + (eᵀs) Φ(cᵀs), so
Z_r = Σ_i W2[o, i] ((ν_q D_r + κ D_{r+1}) c_i^{⊗r} + r D_{r−1} e_i ⊗ c_i^{⊗(r−1)}) (symmetrised by
the expansion), which needs D up to order n + 1.
"""

from __future__ import annotations

import torch

from polyinterp.approx.moments.hermite_gram import expand, hermite_means
from polyinterp.approx.core.mlp import GLU, MLP
from polyinterp.approx.moments.polynomial_basis import symmetrize
from polyinterp.approx.moments.univariate import derivative_expectations

_CHUNK_BYTES = 64 * 2**20


def _weighted_powers(a: torch.Tensor, c: torch.Tensor, r: int, e: torch.Tensor | None = None) -> torch.Tensor:
    """Σ_i a[o, i] · (first ⊗ c_i^{⊗(r−1)}) [o, p^r] with first = c_i (or e_i when given), in chunks of units."""
    o, (h, p) = a.shape[0], c.shape
    first = c if e is None else e
    if r == 0:
        return a.sum(1)
    out = a.new_zeros(o, p**r)
    step = max(1, _CHUNK_BYTES // (8 * max(1, p ** (r - 1)) * max(p, o)))
    for s in range(0, h, step):
        cs, fs, as_ = c[s:s + step], first[s:s + step], a[:, s:s + step]
        tail = torch.ones(cs.shape[0], 1, dtype=c.dtype, device=c.device)
        for _ in range(r - 1):
            tail = (tail[:, :, None] * cs[:, None, :]).reshape(cs.shape[0], -1)  # c^{⊗(r−1)} [h_s, p^{r−1}]
        lead = as_[:, :, None] * fs[None]  # [o, h_s, p]
        out += torch.einsum("ohi,hj->oij", lead, tail).reshape(o, -1)
    return out


def rhs_component(model, mean: torch.Tensor, cov: torch.Tensor, shift: torch.Tensor, B: torch.Tensor,
                  degree: int, symmetric: bool = True) -> list[torch.Tensor]:
    """E[f He⁽ᵇ⁾(u)], b = 0..degree, [o, p, …, p], for x ~ N(mean, cov) and u = (x − shift)B
    (``symmetric=False``: before the final symmetrisation, whose result is the value)."""
    SB = cov @ B  # [d, p]
    m = (mean - shift) @ B
    S = B.T @ SB
    S = 0.5 * (S + S.T)
    h = hermite_means(m, S, degree)
    p = B.shape[1]
    shape = lambda Zr, r: Zr.reshape(Zr.shape[0], *([p] * r))  # noqa: E731
    if isinstance(model, MLP):
        W, bias = model.W1, model.b1
    elif isinstance(model, GLU):
        W, bias = model.W, model.b
    else:
        raise TypeError(f"expected MLP or GLU, got {type(model).__name__}")
    WS = W @ cov
    nu = W @ mean + bias
    sigma = (WS * W).sum(1).clamp_min(0).sqrt()
    c = W @ SB  # Cov(y_i, u) [h, p]
    glu = isinstance(model, GLU)
    D = derivative_expectations(model.activation, nu, sigma, kmax=degree + 1 if glu else degree)  # [h, n(+1)+1]
    W2 = model.W2
    Z = []
    if not glu:
        for r in range(degree + 1):
            Z.append(shape(_weighted_powers(W2 * D[:, r], c, r), r))
        Z[0] = Z[0] + model.b2
    else:
        nu_q = model.V @ mean + model.c
        kappa = (WS * model.V).sum(1)
        e = model.V @ SB  # Cov(q_i, u)
        for r in range(degree + 1):
            Zr = _weighted_powers(W2 * (nu_q * D[:, r] + kappa * D[:, r + 1]), c, r)
            if r >= 1:
                Zr = Zr + r * _weighted_powers(W2 * D[:, r - 1], c, r, e)
            Z.append(shape(Zr, r))
        Z[0] = Z[0] + model.b2
    return expand(Z, h, degree, symmetric)


def hermite_rhs_mixture(model, weights, means, covs, shift: torch.Tensor, B: torch.Tensor, degree: int) -> list[torch.Tensor]:
    """Σ_k π_k E_k[f He⁽ᵇ⁾(u)], b = 0..degree (tensors [o, p, …, p])."""
    out = None
    for k in range(weights.shape[0]):
        R = rhs_component(model, means[k], covs[k], shift, B, degree, symmetric=False)
        out = [weights[k] * r for r in R] if out is None else [acc.add_(r, alpha=float(weights[k]))
                                                                for acc, r in zip(out, R, strict=True)]
    return [symmetrize(r) for r in out]

"""The Gram operator of the normalised Hermite basis ψ_α(u) (:mod:`polyinterp.approx.moments.polynomial_basis`)
under a Gaussian mixture of u, matrix-free, for any degree n (moments of u up to order 2n).

Generating functions. Σ_α He_α(u) s^α/α! = exp(sᵀu − |s|²/2). For u ~ N(m, S), with A = S − I,

    E[exp(sᵀu − |s|²/2) exp(tᵀu − |t|²/2)] = exp(sᵀm + ½ sᵀAs) · exp(tᵀm + ½ tᵀAt) · exp(sᵀSt),

so (Leibniz on the three factors; index lists i, j of lengths a, b)

    E[He_i(u) He_j(u)] = Σ_r Σ_{I⊂[a], J⊂[b], |I|=|J|=r} h(i_{I^c}) h(j_{J^c}) perm S[i_I, j_J],

with the Hermite means h_q = E[He⁽q⁾(u)] (the "moments" of N(m, A), A possibly indefinite):
h₀ = 1, h₁ = m, h_q = Sym(m ⊗ h_{q−1}) + (q − 1) Sym(A ⊗ h_{q−2}). For g = Σ_a ⟨Θ_a, He⁽ᵃ⁾⟩ with
symmetric Θ_a this becomes, per component,

    W_r = Σ_{a≥r} a!/(a−r)! ⟨Θ_a, h_{a−r}⟩       (contract a − r slots; r-tensor)
    Z_r = W_r ×₁ S ×₂ … ×_r S                    (S on every slot)
    E[g He⁽ᵇ⁾] = Sym(Σ_{r≤b} C(b, r) Z_r ⊗ h_{b−r}),

and E[g g'] = Σ_r ⟨W_r, W'_r ×S…×S⟩ / r! (symmetric, PSD). The cost per component and output is
n·p^{n+1} multiply-adds for Z_n (3·p⁴ for the cubic) plus O(p^n) for the rest; nothing of size
N × N is formed. The mixture's operator is the π-weighted sum over components. The right-hand side
E[f He⁽ᵇ⁾] has the same form (:mod:`polyinterp.approx.moments.hermite_rhs`), so :func:`expand` is shared.
"""

from __future__ import annotations

import itertools
import math

import torch

from polyinterp.approx.moments.polynomial_basis import PolynomialBasis, block_table, symmetrize


def hermite_means(m: torch.Tensor, S: torch.Tensor, degree: int) -> list[torch.Tensor]:
    """h_q = E[He⁽q⁾(u)] for u ~ N(m, S), q = 0..degree (h_q [p]^q, symmetric)."""
    A = S - torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
    h = [torch.ones((), dtype=m.dtype, device=m.device)]
    if degree >= 1:
        h.append(m)
    for q in range(2, degree + 1):
        t = torch.tensordot(m, h[q - 1], dims=0) + (q - 1) * torch.tensordot(A, h[q - 2], dims=0)
        h.append(symmetrize(t, lead=0))
    return h


def apply_all_slots(W: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """W ×₁ S ×₂ … ×_r S for W [o, p, …, p] (S symmetric): one contiguous batched product per slot."""
    r, o, p = W.dim() - 1, W.shape[0], S.shape[0]
    if r == 0:
        return W
    W = W.reshape(-1, p) @ S  # the last slot: one matrix product
    for slot in range(r - 1):  # the others: batches of [p, p] @ [p, p^(r−slot−1)]
        W = torch.matmul(S, W.reshape(o * p**slot, p, p ** (r - slot - 1)))
    return W.reshape(o, *([p] * r))


def expand(Z: list[torch.Tensor], h: list[torch.Tensor], degree: int, symmetric: bool = True) -> list[torch.Tensor]:
    """R_b = Sym(Σ_{r≤b} C(b, r) Z_r ⊗ h_{b−r}), b = 0..degree (Z_r [o, p^r] need not be symmetric);
    ``symmetric=False`` skips the final Sym (for callers that sum several expansions first)."""
    out = []
    for b in range(degree + 1):
        acc = 0
        for r in range(b + 1):
            term = Z[r] if b == r else Z[r][(...,) + (None,) * (b - r)] * h[b - r]
            acc = acc + math.comb(b, r) * term
        out.append(symmetrize(acc) if symmetric else acc)
    return out


class HermiteGram:
    """θ ↦ G θ with G_{αβ} = Σ_k π_k E_k[ψ_α(u) ψ_β(u)] in packed coordinates (θ [o, N] → [o, N]).

    ``weights`` [K], ``means`` [K, p], ``covs`` [K, p, p] of u. Implementation of the module
    docstring's formulas, batched over components where they are linear in h: the contractions
    ⟨Θ_a, h^k_q⟩ and the outer products Σ_k π_k Z^k_r ⊗ h^k_q are single matrix products over k, so
    only Z^k_r = W^k_r ×S_k… is per component (n products of [o·p^{n−1}, p] × [p, p] for r = n); the
    symmetrisation is folded into the packing (the mean over the b! slot orders of the representative
    positions). Symmetric up to round-off (pack is the adjoint of unpack on symmetric tensors).
    :meth:`dense` assembles G [N, N] column block by block (exactly symmetrised), for small N.
    """

    def __init__(self, weights: torch.Tensor, means: torch.Tensor, covs: torch.Tensor, basis: PolynomialBasis):
        self.w, self.m, self.S, self.basis = weights, means, covs, basis
        n, K = basis.degree, weights.shape[0]
        hs = [hermite_means(means[k], covs[k], n) for k in range(K)]
        # H[q] [p^q, K]: the Hermite means of every component, flattened (H[0] = ones)
        self.H = [torch.stack([hs[k][q].reshape(-1) for k in range(K)], 1) for q in range(n + 1)]

    def to(self, dtype: torch.dtype) -> "HermiteGram":
        """The same operator computing in ``dtype`` (the Hermite means are cast, not recomputed)."""
        out = object.__new__(HermiteGram)
        out.w, out.m, out.S, out.basis = self.w.to(dtype), self.m.to(dtype), self.S.to(dtype), self.basis
        out.H = [t.to(dtype) for t in self.H]
        return out

    def tensors_flat(self, theta_t: list[torch.Tensor]) -> list[torch.Tensor]:
        """X_b [o, p^b] with Sym(X_b) = E_mix[g He⁽ᵇ⁾], b = 0..n (X_b itself need not be symmetric)."""
        n, p, K = self.basis.degree, self.basis.p, self.w.shape[0]
        o = theta_t[0].shape[0]
        flat = [t.reshape(o, -1) for t in theta_t]
        w = self.w.to(flat[0].dtype)
        Zsum = [None] * (n + 1)   # Σ_k π_k Z^k_r [o, p^r]
        Zk = [None] * (n + 1)     # π_k Z^k_r stacked [o, p^r, K] (r < n; needed for the outer products)
        for r in range(n + 1):
            # W^k_r = a!/(a−r)! ⟨Θ_a, h^k_{a−r}⟩ summed over a ≥ r; the a = r term is r!·Θ_r for every k
            top = flat[r]  # times r! (folded into the weights below when no a > r term exists)
            Wk = None  # the rest, all k at once [o, p^r, K]
            for a in range(r + 1, n + 1):
                c = math.factorial(a) // math.factorial(a - r)
                t = c * (flat[a].reshape(o * p**r, p ** (a - r)) @ self.H[a - r]).reshape(o, p**r, K)
                Wk = t if Wk is None else Wk + t
            if Wk is not None:
                top = math.factorial(r) * top
            if r == 0:
                Z = (top[:, :, None] + (0 if Wk is None else Wk)) * w  # [o, 1, K]
                Zsum[r], Zk[r] = Z.sum(-1), Z
                continue
            acc = torch.zeros(o, p**r, dtype=flat[0].dtype, device=flat[0].device)
            Zr = [] if r < n else None
            for k in range(K):
                Wr = top if Wk is None else top + Wk[:, :, k]
                if Zr is None:  # only the sum over k is needed: the last product accumulates in place
                    Y = Wr.reshape(o, *([p] * r))
                    for slot in range(r - 1):
                        Y = torch.matmul(self.S[k], Y.reshape(o * p**slot, p, p ** (r - slot - 1)))
                    scale = float(w[k]) * (math.factorial(r) if Wk is None else 1)
                    acc.view(-1, p).addmm_(Y.reshape(-1, p), self.S[k], alpha=scale)
                    continue
                z = apply_all_slots(Wr.reshape(o, *([p] * r)), self.S[k]).reshape(o, p**r)
                z.mul_(float(w[k]) * (math.factorial(r) if Wk is None else 1))
                acc.add_(z)
                Zr.append(z)
            Zsum[r] = acc
            if Zr is not None:
                Zk[r] = torch.stack(Zr, -1)
        out = []
        for b in range(n + 1):
            X = Zsum[b]
            for r in range(b):  # Σ_k π_k Z^k_r ⊗ h^k_{b−r}: one product over k, accumulated in place
                X.view(o * p**r, p ** (b - r)).addmm_(Zk[r].reshape(o * p**r, K), self.H[b - r].T,
                                                      alpha=math.comb(b, r))
            out.append(X)
        return out

    def pack_flat(self, X: list[torch.Tensor]) -> torch.Tensor:
        """Packed E[g ψ_β] from the X_b of :meth:`tensors_flat` (symmetrisation at the packed positions)."""
        cols = []
        for b, Xb in enumerate(X):
            if b == 0:
                cols.append(Xb.reshape(-1, 1))
                continue
            idx = block_table(self.basis, b, "flat", Xb.device)  # [b!, N_b]
            vals = Xb[:, idx.reshape(-1)].reshape(Xb.shape[0], *idx.shape).mean(1)
            cols.append(vals / self.basis.alpha_factorial(b, Xb.dtype, Xb.device).sqrt())
        return torch.cat(cols, 1)

    def tensors(self, theta_t: list[torch.Tensor]) -> list[torch.Tensor]:
        """The operator on tensors: E_mix[g He⁽ᵇ⁾] [o, p, …, p], b = 0..n (symmetric)."""
        p = self.basis.p
        return [symmetrize(X.reshape(X.shape[0], *([p] * b))) for b, X in enumerate(self.tensors_flat(theta_t))]

    def __call__(self, theta: torch.Tensor) -> torch.Tensor:
        return self.pack_flat(self.tensors_flat(self.basis.unpack(theta)))

    def dense(self, chunk: int | None = None) -> torch.Tensor:
        """G [N, N] from the operator on identity columns in chunks, symmetrised exactly block by block
        (memory: G itself, 8·N² bytes in float64, plus one chunk; for small N)."""
        N, p, n = self.basis.size, self.basis.p, self.basis.degree
        if chunk is None:
            chunk = max(1, min(N, (64 * 2**20) // (8 * max(1, p**n) * 4)))
        dtype, device = self.m.dtype, self.m.device
        G = torch.empty(N, N, dtype=dtype, device=device)
        for s in range(0, N, chunk):
            cols = torch.arange(s, min(N, s + chunk), device=device)
            eye = torch.zeros(cols.numel(), N, dtype=dtype, device=device)
            eye[torch.arange(cols.numel(), device=device), cols] = 1.0
            G[s:s + chunk] = self(eye)
        for s in range(0, N, chunk):  # (G + Gᵀ)/2 in place, one pair of blocks at a time
            for t in range(s, N, chunk):
                a, b = G[s:s + chunk, t:t + chunk], G[t:t + chunk, s:s + chunk]
                avg = 0.5 * (a + b.T)
                a.copy_(avg)
                b.copy_(avg.T)
        return G


def gram_diagonal(weights: torch.Tensor, means: torch.Tensor, covs: torch.Tensor,
                  basis: PolynomialBasis) -> torch.Tensor:
    """diag G [N]: Σ_k π_k E_k[ψ_α(u)²], from the generating-function formula at i = j (gathers only,
    O(N·K·Σ_r C(a, r)²·r!)); the Jacobi preconditioner of :mod:`polyinterp.approx.fits.cubic_mixture`."""
    n, p, K = basis.degree, basis.p, weights.shape[0]
    dtype, device = means.dtype, means.device
    hs = [hermite_means(means[k], covs[k], n) for k in range(K)]
    H = [torch.stack([hs[k][q].reshape(-1) for k in range(K)], 1) for q in range(n + 1)]  # [p^q, K]
    out = [torch.ones(1, dtype=dtype, device=device)]  # ψ_0 = 1
    for a in range(1, n + 1):
        L = basis.index_lists(a, device)  # [N_a, a]
        acc = torch.zeros(L.shape[0], K, dtype=dtype, device=device)
        for r in range(a + 1):
            rest = a - r
            pw = p ** torch.arange(rest - 1, -1, -1, device=device)
            for I in itertools.combinations(range(a), r):
                Ic = [s for s in range(a) if s not in I]
                hI = H[rest][(L[:, Ic] * pw).sum(1)] if rest else H[0].expand(L.shape[0], K)
                for J in itertools.combinations(range(a), r):
                    Jc = [s for s in range(a) if s not in J]
                    hJ = H[rest][(L[:, Jc] * pw).sum(1)] if rest else H[0].expand(L.shape[0], K)
                    perm = 0  # perm S_k[i_I, i_J] (r = 0: the empty permanent, 1)
                    for sigma in itertools.permutations(J):
                        prod = 1
                        for i_slot, j_slot in zip(I, sigma, strict=True):
                            prod = prod * covs[:, L[:, i_slot], L[:, j_slot]].T  # [N_a, K]
                        perm = perm + prod
                    acc += hI * hJ * perm
        out.append((acc @ weights) / basis.alpha_factorial(a, dtype, device))
    return torch.cat(out)

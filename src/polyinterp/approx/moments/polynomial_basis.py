"""The normalised Hermite basis of polynomials of degree ≤ n in p variables, and its two coordinate
systems: packed coefficients (one per multi-index) and full symmetric tensors (one per degree).

Basis. ψ_α(u) = He_α(u)/√α! with He_α(u) = Π_j He_{α_j}(u_j) the probabilists' Hermite polynomials
and α! = Π_j α_j!, for all multi-indices |α| ≤ n: orthonormal under N(0, I_p), graded by degree,
N = C(p + n, n) functions (23 426 for p = 50, n = 3). Order: by degree, then the sorted index lists
(i₁ ≤ … ≤ i_a) of :func:`itertools.combinations_with_replacement` (the multi-index α counts how
often each variable occurs in the list).

Tensors. A polynomial g = Σ_α θ_α ψ_α is also g = Σ_a ⟨Θ_a, He⁽ᵃ⁾(u)⟩ with symmetric tensors
Θ_a [p]^a and He⁽ᵃ⁾(u)_{i₁…i_a} = He_α(u) (α the multi-index of the list): each α has a!/α! lists,
so Θ_a[i] = θ_α √α!/a! (:func:`unpack`). Conversely, for a symmetric tensor R_b of values
R_b[j] = E[F·He_j], the packed values E[F ψ_β] are R_b[j_β]/√β! (:func:`pack`); with these two
maps the full-tensor inner product Σ_b ⟨R_b, Θ_b⟩ equals the packed dot product (pack is the adjoint
of unpack on symmetric tensors), so a Gram operator computed on tensors is symmetric in packed
coordinates. :func:`monomial_tensors` rewrites the Hermite tensors as monomial ones, g(u) =
Σ_a T_a[u, …, u], from He⁽ᵃ⁾(u) = Σ_k (−1)ᵏ Sym(I^{⊗k} ⊗ u^{⊗(a−2k)}) · C(a, 2k)(2k − 1)!!.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from polyinterp.approx.core.errors import ApproxInputError


def basis_size(p: int, degree: int) -> int:
    """N = C(p + n, n), the number of monomials of degree ≤ n in p variables."""
    return math.comb(p + degree, degree)


@lru_cache(maxsize=16)
def _lists(p: int, a: int) -> tuple[tuple[int, ...], ...]:
    return tuple(itertools.combinations_with_replacement(range(p), a))


@lru_cache(maxsize=16)
def _block(p: int, a: int, degree: int) -> dict[str, torch.Tensor]:
    """CPU index tables of the degree-a block: lists [N_a, a], flat positions of every permutation of
    the slots [a!, N_a], α! [N_a], and the (variable, power) slots of the features [N_a, a]."""
    rows = _lists(p, a)
    lists = torch.tensor(rows, dtype=torch.long).reshape(len(rows), a)
    powers = p ** torch.arange(a - 1, -1, -1)
    perms = sorted(set(itertools.permutations(range(a))))
    flat = torch.stack([(lists[:, list(q)] * powers).sum(1) if a else torch.zeros(len(rows), dtype=torch.long)
                        for q in perms])
    fact, slots = [], []
    for row in rows:
        groups = [(j, len(list(g))) for j, g in itertools.groupby(row)]
        fact.append(math.prod(math.factorial(k) for _, k in groups))
        slot = [j * (degree + 1) + k for j, k in groups]
        slots.append(slot + [0] * (a - len(slot)))  # (variable 0, power 0) is He_0 = 1
    return {"lists": lists, "flat": flat, "fact": torch.tensor(fact, dtype=torch.float64),
            "slots": torch.tensor(slots, dtype=torch.long).reshape(len(rows), a)}


@lru_cache(maxsize=64)
def _table(p: int, a: int, degree: int, key: str, device: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """One table of :func:`_block` on ``device`` (cached, so products on a GPU copy no index tables)."""
    t = _block(p, a, degree)[key]
    return t.to(device=device, dtype=dtype or t.dtype)


def block_table(basis: "PolynomialBasis", a: int, key: str, device=None, dtype=None) -> torch.Tensor:
    """The ``key`` table (lists, flat, fact, slots) of ``basis``'s degree-a block on ``device``."""
    return _table(basis.p, a, basis.degree, key, str(torch.device(device or "cpu")), dtype)


@dataclass(frozen=True)
class PolynomialBasis:
    """Normalised Hermite basis of degree ≤ ``degree`` in ``p`` variables (module docstring)."""

    p: int
    degree: int

    def __post_init__(self):
        if isinstance(self.p, bool) or not isinstance(self.p, int) or self.p < 1:
            raise ApproxInputError(f"the number of variables must be an int >= 1, got {self.p!r}")
        if isinstance(self.degree, bool) or not isinstance(self.degree, int) or self.degree < 0:
            raise ApproxInputError(f"degree must be a non-negative int, got {self.degree!r}")

    @property
    def size(self) -> int:
        return basis_size(self.p, self.degree)

    def block_sizes(self) -> list[int]:
        """Number of basis functions of each degree a = 0..n: C(p + a − 1, a)."""
        return [math.comb(self.p + a - 1, a) for a in range(self.degree + 1)]

    def offsets(self) -> list[int]:
        """Start of each degree's block in the packed coordinates (length n + 2)."""
        return [0] + list(itertools.accumulate(self.block_sizes()))

    def index_lists(self, a: int, device=None) -> torch.Tensor:
        """The sorted index lists of degree a, LongTensor [N_a, a]."""
        return block_table(self, a, "lists", device)

    def flat_index(self, a: int, device=None) -> torch.Tensor:
        """Position of each degree-a list in the flattened tensor [p^a], LongTensor [N_a]."""
        return block_table(self, a, "flat", device)[0]

    def alpha_factorial(self, a: int, dtype=torch.float64, device=None) -> torch.Tensor:
        """α! of each degree-a basis function [N_a]."""
        return block_table(self, a, "fact", device, dtype)

    def multi_indices(self) -> torch.Tensor:
        """The exponents α of every basis function, LongTensor [N, p] (graded order)."""
        out = torch.zeros(self.size, self.p, dtype=torch.long)
        row = 0
        for a in range(self.degree + 1):
            for lst in _lists(self.p, a):
                for i in lst:
                    out[row, i] += 1
                row += 1
        return out

    def degrees(self) -> torch.Tensor:
        """The degree |α| of every basis function, LongTensor [N]."""
        return torch.cat([torch.full((n,), a, dtype=torch.long) for a, n in enumerate(self.block_sizes())])

    # -- coordinates ---------------------------------------------------------------------------------
    def unpack(self, theta: torch.Tensor) -> list[torch.Tensor]:
        """Packed coefficients θ [o, N] → symmetric tensors Θ_a [o, p, …, p] (a = 0..n)."""
        if theta.shape[-1] != self.size:
            raise ApproxInputError(f"packed coefficients have {theta.shape[-1]} entries, the basis has {self.size}")
        o, p = theta.shape[0], self.p
        off = self.offsets()
        out = []
        for a in range(self.degree + 1):
            blk = theta[:, off[a]:off[a + 1]]
            if a == 0:
                out.append(blk[:, 0].clone())
                continue
            scale = self.alpha_factorial(a, theta.dtype, theta.device).sqrt() / math.factorial(a)
            vals = blk * scale
            full = theta.new_zeros(o, p**a)
            idx = block_table(self, a, "flat", theta.device)  # [a!, N_a]
            full[:, idx.reshape(-1)] = vals.repeat(1, idx.shape[0])  # every list of an orbit gets its value
            out.append(full.view(o, *([p] * a)))
        return out

    def pack(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """Symmetric tensors R_b [o, p, …, p] of values E[F He_j] → packed E[F ψ_β] [o, N]."""
        cols = []
        for a, R in enumerate(tensors):
            if a == 0:
                cols.append(R[:, None])
                continue
            flat = R.reshape(R.shape[0], -1)[:, self.flat_index(a, R.device)]
            cols.append(flat / self.alpha_factorial(a, R.dtype, R.device).sqrt())
        return torch.cat(cols, 1)

    # -- evaluation ------------------------------------------------------------------------------------
    def features(self, u: torch.Tensor) -> torch.Tensor:
        """ψ(u) [n, N] for points u [n, p]."""
        if u.shape[-1] != self.p:
            raise ApproxInputError(f"points have {u.shape[-1]} coordinates, the basis has p = {self.p}")
        n, p, deg = u.shape[0], self.p, self.degree
        He = [torch.ones_like(u)]
        if deg >= 1:
            He.append(u)
        for k in range(1, deg):
            He.append(u * He[k] - k * He[k - 1])
        Hu = torch.stack(He, -1).reshape(n, p * (deg + 1))  # [n, p·(n+1)], entry j·(n+1) + power
        cols = [torch.ones(n, 1, dtype=u.dtype, device=u.device)]
        for a in range(1, deg + 1):
            slots = block_table(self, a, "slots", u.device)  # [N_a, a] (variable, power) flat indices
            val = Hu[:, slots[:, 0]]
            for s in range(1, a):
                val = val * Hu[:, slots[:, s]]
            cols.append(val / self.alpha_factorial(a, u.dtype, u.device).sqrt())
        return torch.cat(cols, 1)


def symmetrize(T: torch.Tensor, lead: int = 1) -> torch.Tensor:
    """Average of T over all permutations of its trailing axes (the first ``lead`` axes are kept)."""
    a = T.dim() - lead
    if a <= 1:
        return T
    out = torch.zeros_like(T)
    perms = list(itertools.permutations(range(lead, lead + a)))
    for perm in perms:
        out += T.permute(*range(lead), *perm)
    return out / len(perms)


def _double_factorial(k: int) -> int:
    return math.prod(range(k, 0, -2)) if k > 0 else 1


def monomial_tensors(hermite: list[torch.Tensor]) -> list[torch.Tensor]:
    """Hermite tensors Θ_a (g = Σ_a ⟨Θ_a, He⁽ᵃ⁾(u)⟩) → monomial tensors T_a (g = Σ_a T_a[u, …, u]),
    symmetric, [o, p, …, p]. Uses He⁽ᵃ⁾(u) = Σ_k (−1)ᵏ C(a, 2k)(2k − 1)!! Sym(I^{⊗k} ⊗ u^{⊗(a−2k)})."""
    out = [torch.zeros_like(t) for t in hermite]
    for a, Th in enumerate(hermite):
        for k in range(a // 2 + 1):
            X = Th
            for _ in range(k):  # contract a pair of slots with the identity (Th is symmetric)
                X = torch.diagonal(X, dim1=-2, dim2=-1).sum(-1)
            coef = (-1) ** k * math.comb(a, 2 * k) * _double_factorial(2 * k - 1)
            out[a - 2 * k] = out[a - 2 * k] + coef * X
    return out

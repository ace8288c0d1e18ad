"""The result type: a polynomial g(x) = α + β x + xᵀ Γ x per output (degree 1 when Γ is None)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from polyinterp.approx.core.blocks import block_edges
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.fitted_polynomial import FittedPolynomial, chunk_rows

_CHUNK_BYTES = 128 * 2**20
_QUAD_BLOCK = 128  # inputs per block row of the quadratic form's evaluation (Approximant.__call__)
_QUAD_ROWS_BYTES = 8 * 2**20  # bytes of a block row's product [rows, o·(d − lo)] taken at a time


@dataclass(frozen=True)
class Approximant(FittedPolynomial):
    """Coefficients ``alpha [o]``, ``beta [o, d]`` and ``gamma [o, d, d]`` (symmetric; ``None`` for a
    linear approximant), and ``fit_info`` (method, iterations, residual, seconds, …). Frozen: a field
    cannot be reassigned (a changed copy is :func:`dataclasses.replace`); ``fit_info`` is the fit's own
    copy of the dict it was given."""

    alpha: torch.Tensor
    beta: torch.Tensor
    gamma: torch.Tensor | None = None
    fit_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "fit_info", dict(self.fit_info))
        if self.alpha.dim() != 1 or self.beta.dim() != 2 or self.beta.shape[0] != self.alpha.shape[0]:
            raise ApproxInputError(f"need alpha [o], beta [o, d]; got {tuple(self.alpha.shape)}, "
                                   f"{tuple(self.beta.shape)}")
        if self.gamma is not None and tuple(self.gamma.shape) != (self.o, self.d, self.d):
            raise ApproxInputError(f"gamma must be [o, d, d] = {(self.o, self.d, self.d)}, got {tuple(self.gamma.shape)}")

    o = property(lambda self: self.alpha.shape[0])
    d = property(lambda self: self.beta.shape[1])
    degree = property(lambda self: 1 if self.gamma is None else 2)
    dtype = property(lambda self: self.beta.dtype)
    device = property(lambda self: self.beta.device)

    def __call__(self, x: torch.Tensor, chunk_size: int | None = None,
                 quad_dtype: torch.dtype | None = None) -> torch.Tensor:
        """g(x) for x [n, d] (or [d]) → [n, o], in chunks so that n = 10⁶ at d = 784 fits in memory.

        ``quad_dtype`` (default: the approximant's own dtype, the route as before): the dtype in
        which the quadratic form xᵀΓx, the O(n·o·d²) part, is computed; α + βx and the result stay in
        the approximant's dtype. ``torch.float32`` (TF32 matmuls off, PyTorch's default) is 1.6–2×
        faster on CPU; its error is float32 round-off of the form, at most 1.3e-6 of max |xᵀΓx|.
        Bound: FVU and KL against a float64 model change by less than 1e-6 relative. Measured on the
        MNIST metrics (d = 784, o = 10; 10⁵ mixture samples and the 10⁴ test images at all 12
        checkpoints of seed 0): at most 2.6e-8 (FVU) and 9.2e-8 (KL), no argmax changed;
        ``tests/approx/test_approximant_dtype.py`` checks the bound on a fitted random MLP.

        The form is summed by its upper block triangle, xᵀΓx = Σ_I x_Iᵀ [Γ_II, Γ_IJ + Γ_JIᵀ (J > I)] x_(I…)
        over blocks I of at most 128 inputs, one GEMM per block row: in m blocks (m + 1)/2m of the products
        of one [d, o·d] GEMM (0.57 at d = 784). In float32 its sums round otherwise than that GEMM's: on the MNIST
        metrics of step 2048 (default run, seed 0) FVU and KL moved by at most 3.4e-8 relative, no argmax
        (bench/README.md, "The higher-degree forms by Horner's scheme, the quadratic form by its upper
        block triangle").

        Each block row's product, [rows, o·(d − lo)], is taken over at most 8 MiB of it at a time (≈ 270 rows at
        d = 784, o = 10, float32), so that the contraction with x reads it back from the cache rather than from
        memory, where a whole chunk's (128 MiB) went, in ≈ 0.8 of the time. Each row's sums are those of the whole
        chunk's GEMM where the BLAS does not sum a row otherwise for fewer rows: on MKL here the MNIST metrics and
        attack tables came out the same to the bit (bench/README.md, "The quadratic form's products in cache-sized
        rows").
        """
        if self.gamma is None:
            return self._evaluate(x, None, lambda xc: xc @ self.beta.T + self.alpha)
        quad_dtype = quad_dtype or self.dtype
        o, d = self.o, self.d
        edges = block_edges(d, _QUAD_BLOCK)  # the block rows of the upper triangle (docstring)
        rows_of = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            gi = self.gamma[:, lo:hi, lo:].clone()  # [o, b, d − lo]
            gi[:, :, hi - lo:] += self.gamma[:, hi:, lo:hi].transpose(1, 2)
            rows_of.append((lo, hi, gi.permute(1, 0, 2).reshape(hi - lo, o * (d - lo)).to(quad_dtype)))

        sub = chunk_rows(_QUAD_ROWS_BYTES, quad_dtype.itemsize * o * d)  # rows whose products stay in cache

        def rows(xc):
            xq = xc.to(quad_dtype)
            quad = xq.new_empty(len(xq), o)
            for s in range(0, len(xq), sub):
                xs = xq[s:s + sub]
                quad[s:s + sub] = sum(torch.einsum("nok,nk->no", (xs[:, lo:hi] @ gi).view(-1, o, d - lo), xs[:, lo:])
                                      for lo, hi, gi in rows_of)
            return quad.to(self.dtype) + xc @ self.beta.T + self.alpha

        return self._evaluate(x, chunk_size or chunk_rows(_CHUNK_BYTES, quad_dtype.itemsize * o * d), rows)

    def to(self, device=None, dtype: torch.dtype | None = None) -> "Approximant":
        f = lambda t: None if t is None else t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa
        return Approximant(f(self.alpha), f(self.beta), f(self.gamma), dict(self.fit_info))

    def compose(self, M: torch.Tensor, shift: torch.Tensor) -> "Approximant":
        """The approximant x' ↦ g(shift + M x') (M [d, d'])."""
        if self.gamma is None:
            return Approximant(self.alpha + self.beta @ shift, self.beta @ M, None, dict(self.fit_info))
        Gs = torch.einsum("oij,j->oi", self.gamma, shift)
        alpha = self.alpha + self.beta @ shift + Gs @ shift
        beta = (self.beta + 2 * Gs) @ M
        gamma = M.T @ self.gamma @ M
        return Approximant(alpha, beta, 0.5 * (gamma + gamma.transpose(1, 2)), dict(self.fit_info))

    def quadratic(self) -> "Approximant":
        """The same polynomial with an explicit zero ``gamma`` when it is linear."""
        if self.gamma is not None:
            return self
        gamma = self.beta.new_zeros(self.o, self.d, self.d)
        return Approximant(self.alpha, self.beta, gamma, dict(self.fit_info))

    def state_dict(self) -> dict[str, Any]:
        """Plain dict of tensors and the fit info (``torch.save``-able)."""
        out = {"alpha": self.alpha, "beta": self.beta, "fit_info": dict(self.fit_info)}
        if self.gamma is not None:
            out["gamma"] = self.gamma
        return out

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "Approximant":
        missing = [k for k in ("alpha", "beta") if k not in state]
        if missing:
            raise ApproxInputError(f"approximant state dict lacks {missing}; it must come from Approximant.state_dict()")
        return cls(state["alpha"], state["beta"], state.get("gamma"), dict(state.get("fit_info", {})))

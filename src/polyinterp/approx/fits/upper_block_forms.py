"""Symmetric forms trained by their upper block triangle, each entry with the gradient it has as an entry
of the full matrix: the SGD fit's quadratic term at a little over half the products."""

from __future__ import annotations

import torch

from polyinterp.approx.core.blocks import block_edges


class UpperBlockForms:
    """o symmetric forms G_k [d, d], kept as their column blocks on and above the diagonal.

    With the inputs cut into blocks J = [e_J, e_(J+1)) (:func:`block_edges`), ``parameters[J]`` is
    C_J [e_(J+1), o·b_J]: the rows 0…e_(J+1) of the forms' columns in block J, the o forms side by side
    (C_J[a, k·b_J + c] = G_k[a, e_J + c]). Every entry above the diagonal blocks is held once (G_k[a, c]
    stands for G_k[c, a] too); the diagonal blocks are held whole.

    :meth:`quadratic` evaluates xᵀG_kx from those entries alone, each above the diagonal blocks counted
    twice: one GEMM [n, e_(J+1)] × [e_(J+1), o·b_J] per block J, in m blocks (m + 1)/2m of the products of
    the full [n, d] × [d, o·d] one (0.54 at d = 784 in 14 blocks). :meth:`set_grad` gives each held entry
    G_k[a, c] the derivative that the full matrix's entry has, Σ_n r_nk x_na x_nc (one GEMM
    [e_(J+1), n] × [n, o·b_J] per block), not the derivative by the held entry itself (twice that above
    the diagonal blocks). So an elementwise optimiser (SGD, Adam, schedule-free) moves each held entry
    exactly as it moves that entry of full matrices trained from a symmetric start, whose symmetric part
    alone the quadratic sees and whose gradient is symmetric: the same fit to round-off, from about half
    the arithmetic and half the optimiser's state.

    ``product_dtype`` in :meth:`quadratic` and :meth:`set_grad`: the products' inputs rounded to it and their
    results returned in it (for bfloat16 the GEMM accumulates in float32 and rounds its result once), then
    widened to x's dtype: the rounding of the full matrices' product and gradient in the same precision. The
    diagonal blocks' gradients, rounded entry by entry, are then not exactly symmetric, nor are the held
    diagonal blocks after a step; :meth:`gamma` returns each diagonal block's symmetric part.

    Only the held entries of the start ``gamma`` are read: a start that is not symmetric is taken as its
    upper block triangle mirrored, not as its symmetric part (the closed-form starts are symmetric).
    """

    def __init__(self, gamma: torch.Tensor, block: int, dtype: torch.dtype | None = None):
        """Held entries of ``gamma`` [o, d, d] (symmetric) in ``dtype`` (default: gamma's), blocks of at
        most ``block`` inputs. The parameters are new leaf tensors."""
        o, d, d2 = gamma.shape
        if d != d2:
            raise ValueError(f"gamma must be [o, d, d], got {list(gamma.shape)}")
        self.o, self.d = o, d
        edges = block_edges(d, block)
        self.spans = list(zip(edges[:-1], edges[1:]))
        self.parameters = [gamma[:, :hi, lo:hi].permute(1, 0, 2).reshape(hi, o * (hi - lo))
                           .to(dtype or gamma.dtype, copy=True, memory_format=torch.contiguous_format)
                           for lo, hi in self.spans]  # contiguous: schedule-free's swap views them as bytes

    @torch.no_grad()
    def quadratic(self, x: torch.Tensor, product_dtype: torch.dtype | None = None) -> torch.Tensor:
        """[n, o]: xᵀG_kx for each row of ``x`` [n, d]."""
        xl = x if product_dtype is None else x.to(product_dtype)
        # The rows above block J count twice (G_k[a, c] and G_k[c, a]): each block's rows are doubled (exactly)
        # after its own product, so when block J's turn comes the rows before it are doubled and its own are not.
        xw = xl.clone()
        q = x.new_zeros(x.shape[0], self.o)
        for (lo, hi), C in zip(self.spans, self.parameters):
            y = xw[:, :hi] @ (C if product_dtype is None else C.to(product_dtype))
            xw[:, lo:hi].mul_(2)
            q += (y.to(x.dtype).view(len(x), self.o, hi - lo) * x[:, None, lo:hi]).sum(-1)
        return q

    @torch.no_grad()
    def set_grad(self, r: torch.Tensor, x: torch.Tensor, product_dtype: torch.dtype | None = None) -> None:
        """Set each parameter's ``.grad`` to the full matrices' gradient of Σ_nk r_nk x_nᵀG_kx_n at the held
        entries, ``r`` [n, o] the derivative by each output (class docstring)."""
        xl = x if product_dtype is None else x.to(product_dtype)
        for (lo, hi), C in zip(self.spans, self.parameters):
            w = (r[:, :, None] * x[:, None, lo:hi]).reshape(len(x), -1)
            C.grad = (xl[:, :hi].T @ (w if product_dtype is None else w.to(product_dtype))).to(C.dtype)

    @torch.no_grad()
    def gamma(self) -> torch.Tensor:
        """The forms [o, d, d]: held entries mirrored below the diagonal blocks, each diagonal block's
        symmetric part."""
        o, d = self.o, self.d
        G = self.parameters[0].new_empty(o, d, d)
        for (lo, hi), C in zip(self.spans, self.parameters):
            col = C.view(hi, o, hi - lo).permute(1, 0, 2)  # [o, hi, b]: G_k[:hi, lo:hi]
            G[:, :lo, lo:hi] = col[:, :lo]
            G[:, lo:hi, :lo] = col[:, :lo].transpose(1, 2)
            diag = col[:, lo:hi]
            G[:, lo:hi, lo:hi] = 0.5 * (diag + diag.transpose(1, 2))
        return G

"""P copies of one cubic MLP as one model: stacked weights, one batched product per layer.

``BatchedMLP(model, P)`` holds P copies of a :class:`~polyinterp.cubic.regressor.model.CubicMLP`'s
weights, ``[P, out, in]`` and ``[P, out]`` per Linear layer, as separate parameters that can then be
trained apart (each copy on its own target) in one forward and one backward pass per step. Copy p's
output depends on copy p's weights alone, so a loss that is the sum of per-copy losses gives each
copy exactly the gradient of its own loss, and an elementwise optimiser (Adam) over the stacked
tensors updates each copy as it would update that copy alone.

The forward pass repeats ``CubicMLP``'s operations, layer by layer, with :func:`batched_linear` in
place of ``nn.Linear``: a batched product whose forward and backward products are, per copy, those
autograd computes for ``nn.Linear`` (the weight's gradient as gradᵀ · input, not (inputᵀ · grad)ᵀ as
``torch.bmm``'s own backward would), so on the CPU (MKL) each copy's numbers are those of training
it alone, bit for bit. A layer of input or output width 1 (the first and the last of a network
reading x alone) is the exception: one of its products has a dimension 1, which MKL computes as a
matrix-vector product that no batched product reproduces to the last bit, so such a layer runs copy
by copy through ``F.linear``, as ``CubicMLP`` does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from polyinterp.cubic.regressor.model import CubicMLP
from polyinterp.errors import DataError


class _BatchedLinear(torch.autograd.Function):
    """x · wᵀ (+ b) per copy, with the backward products of ``F.linear`` / ``x @ w.T``."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None
        return torch.bmm(x, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x = torch.bmm(grad, w) if ctx.needs_input_grad[0] else None
        grad_w = torch.bmm(grad.transpose(1, 2), x) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(1) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def batched_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Per copy p, ``x[p] @ w[p].T`` (+ ``b[p]``, added as ``F.linear`` adds it): ``x`` [P, n, in],
    ``w`` [P, out, in], ``b`` [P, out] or None → [P, n, out]. Its gradients are computed by the
    products autograd uses for ``F.linear(x[p], w[p], b[p])`` (or ``x[p] @ w[p].T`` without bias)."""
    return _BatchedLinear.apply(x, w, b)


class BatchedMLP(nn.Module):
    """``copies`` copies of ``model``'s weights; ``forward(x)`` gives every copy's output, ``[P, n]``."""

    def __init__(self, model: CubicMLP, copies: int):
        super().__init__()
        copies = int(copies)
        if copies < 1:
            raise DataError(f"a batched model needs at least one copy, not {copies}.")
        self.widths, self.copies = tuple(model.widths), copies
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]  # body's in order, then out
        self.weights = nn.ParameterList(
            [nn.Parameter(lin.weight.detach().unsqueeze(0).repeat(copies, 1, 1)) for lin in linears])
        self.biases = nn.ParameterList(
            [nn.Parameter(lin.bias.detach().unsqueeze(0).repeat(copies, 1)) for lin in linears])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Every copy's output, ``[P, n]``, on inputs ``x``: ``[n, in]`` shared by all copies, or
        ``[P, n, in]``, copy p reading ``x[p]``."""
        h = x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if 1 in w.shape[1:]:  # a matrix-vector product in CubicMLP's pass: copy by copy, the same call
                # (unbind, not h[p]: one backward node for all copies, not a full-size gradient per copy)
                hs = [h] * self.copies if h.dim() == 2 else h.unbind(0)
                h = torch.stack([F.linear(hp, wp, bp) for hp, wp, bp in zip(hs, w.unbind(0), b.unbind(0))])
            else:
                h = batched_linear(h.expand(self.copies, *h.shape) if h.dim() == 2 else h, w, b)
            if i < last:
                h = torch.relu_(h)  # CubicMLP's in-place ReLU
        return h.squeeze(-1)

    @torch.no_grad()
    def copy(self, p: int) -> CubicMLP:
        """Copy ``p`` as a ``CubicMLP`` of its own (weights cloned, on this model's device, eval mode)."""
        model = CubicMLP(self.widths).to(self.weights[0].device)
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        for lin, w, b in zip(linears, self.weights, self.biases):
            lin.weight.copy_(w[p])
            lin.bias.copy_(b[p])
        return model.eval()

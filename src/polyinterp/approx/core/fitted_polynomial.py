"""What the fitted polynomial forms share: :class:`~polyinterp.approx.core.approximant.Approximant` (α, β, Γ
in x), :class:`~polyinterp.approx.fits.hermite_ridge.HermiteRidgeApproximant` (Hermite ridge form) and
:class:`~polyinterp.approx.fits.cubic_mixture.ReducedPolynomialApproximant` (Hermite basis of principal
components): the checks and chunking of their evaluation, and the FVU from their exact moments."""

from __future__ import annotations

from collections.abc import Callable

import torch

from polyinterp.approx.core.errors import ApproxInputError


class FittedPolynomial:
    """Base of the fitted polynomial forms; a subclass has the properties ``d`` (inputs), ``o`` (outputs)
    and ``dtype``, and evaluates rows of inputs with :meth:`_evaluate`."""

    def _evaluate(self, x: torch.Tensor, chunk_size: int | None, rows: Callable[[torch.Tensor], torch.Tensor]):
        """``rows`` (x [m, d] in the form's dtype → [m, o]) on x [n, d] → [n, o], or on one input x [d] → [o],
        ``chunk_size`` rows at a time (None: all at once). An input of another width than ``d`` raises
        :class:`ApproxInputError` naming both widths."""
        if x.shape[-1] != self.d:
            raise ApproxInputError(f"input has {x.shape[-1]} features, the approximant expects d = {self.d}")
        squeeze = x.dim() == 1
        x = x.reshape(-1, self.d).to(self.dtype)
        # written into one output, not gathered by torch.cat: a chunk's small result kept between the large
        # temporaries of the next chunks can pin the C heap's free space, which then grows with every
        # chunk (seen: 20 GB over the 600 chunks of a cubic on 10⁵ MNIST inputs, bench/README.md)
        out = x.new_empty(len(x), self.o)
        step = max(1, chunk_size or len(x))
        for start in range(0, len(x), step):
            out[start:start + step] = rows(x[start:start + step])
        return out[0] if squeeze else out


def chunk_rows(budget_bytes: int, row_bytes: int) -> int:
    """How many input rows fit in ``budget_bytes`` when one row's temporaries take ``row_bytes`` (at least 1)."""
    return max(1, budget_bytes // max(1, row_bytes))


def fvu_from_moments(err: torch.Tensor, var: torch.Tensor, per_output: bool, under: str):
    """FVU from exact per-output moments: Σ_o E(f_o − g_o)² / Σ_o Var f_o for ``err`` = E(f_o − g_o)² [o]
    and ``var`` = Var f_o [o], or with ``per_output`` the tensor err / var. A constant output (Σ_o Var f_o
    not > 0) raises :class:`ApproxInputError`; ``under`` names the distribution in that message."""
    if per_output:
        return err / var
    total = float(var.sum())
    if not total > 0:
        raise ApproxInputError(f"the model's output is constant under this {under}, so the FVU is undefined")
    return float(err.sum()) / total

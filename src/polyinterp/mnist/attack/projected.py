"""The attacked models evaluated on projected inputs x' = x − (xV)Vᵀ for many direction sets V at once.

A :class:`DirectionSets` holds the rows of several orthonormal direction sets in one matrix U [m, d]
(set i is ``U[start_i:stop_i]``): the k = 0…k_max prefixes of one basis's top singular vectors
(:meth:`DirectionSets.nested`, m = k_max rows for k_max + 1 sets) or the random draws of one k side
by side (:meth:`DirectionSets.stacked`). :class:`Projection` computes the coordinates c = xUᵀ once;
every model reads its columns, so the products with x are one wide product per set of sets and per
model rather than one skinny product per set, model and basis.

For a set V (its columns are rows of U) and c its coordinate columns:

- :class:`~polyinterp.approx.Approximant`: β·x' = β·x − c(βV)ᵀ and
  x'ᵀΓx' = xᵀΓx − 2 cᵀ(VᵀΓₛx) + cᵀ(VᵀΓₛV)c (Γₛ = (Γ + Γᵀ)/2; expand (x − Vc)ᵀΓ(x − Vc) with
  c = Vᵀx), so g(x) is computed once per model, and per set of sets Γₛ Uᵀ, x Γₛ Uᵀ and U Γₛ Uᵀ once;
- ``nn.Sequential`` starting with ``nn.Linear`` (the MLP): W₁x' + b = (W₁x + b) − c(W₁V)ᵀ;
- :class:`~polyinterp.mnist.model.GLUNet`: the same for its gate and value layers;
- anything else: each set projected and evaluated directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from polyinterp.approx import Approximant
from polyinterp.mnist.model import GLUNet


def project_out(x: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """x minus its component in the span of the orthonormal rows of ``directions``."""
    if len(directions) == 0:
        return x
    return x - (x @ directions.T) @ directions


@dataclass(frozen=True)
class DirectionSets:
    """Direction sets stored as row ranges of one matrix: ``rows`` [m, d]; set i is
    ``rows[spans[i][0]:spans[i][1]]`` (orthonormal rows within a set; an empty span is no direction)."""

    rows: torch.Tensor
    spans: tuple[tuple[int, int], ...]

    @classmethod
    def nested(cls, rows: torch.Tensor, k_max: int) -> "DirectionSets":
        """The prefixes ``rows[:k]`` for k = 0…k_max (a k beyond the rows gives all of them, as slicing does)."""
        rows = rows[:k_max]
        return cls(rows, tuple((0, min(k, len(rows))) for k in range(k_max + 1)))

    @classmethod
    def stacked(cls, sets: list[torch.Tensor], d: int | None = None) -> "DirectionSets":
        """The given sets ([k_i, d] each) one after another; ``d`` is needed only when ``sets`` is empty."""
        ends = torch.tensor([0, *[len(s) for s in sets]]).cumsum(0).tolist()
        rows = torch.cat(sets) if sets else torch.zeros(0, d or 0, dtype=torch.float64)
        return cls(rows, tuple(zip(ends[:-1], ends[1:])))

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, i: int) -> torch.Tensor:
        a, b = self.spans[i]
        return self.rows[a:b]


@dataclass(frozen=True)
class Projection:
    """Inputs ``x`` [n, d] and direction ``sets``, with the coordinates ``coords`` = x·rowsᵀ [n, m]
    that every model evaluated on these sets shares (:meth:`of` computes them)."""

    x: torch.Tensor
    sets: DirectionSets
    coords: torch.Tensor

    @classmethod
    def of(cls, x: torch.Tensor, sets: DirectionSets) -> "Projection":
        rows = sets.rows.to(device=x.device, dtype=x.dtype)
        return cls(x, DirectionSets(rows, sets.spans), x @ rows.T)


@torch.no_grad()
def batch_evaluator(model, x: torch.Tensor) -> Callable[[Projection], list[torch.Tensor]]:
    """The function ``p ↦ [model(project_out(x, V)) for V in p.sets]`` for projections ``p`` of these
    inputs x, by the routes of the module docstring; what does not depend on the directions (g(x),
    the first layer on x) is computed here, once."""
    if isinstance(model, Approximant):
        evaluate = _approximant_evaluator(model, x)
    elif isinstance(model, nn.Sequential) and len(model) and isinstance(model[0], nn.Linear):
        evaluate = _sequential_evaluator(model, x)
    elif isinstance(model, GLUNet):
        evaluate = _glu_evaluator(model, x)
    else:
        def evaluate(p: Projection) -> list[torch.Tensor]:
            return [model(project_out(x, p.sets[i])) for i in range(len(p.sets))]

    @torch.no_grad()
    def checked(p: Projection) -> list[torch.Tensor]:
        if p.x is not x:
            raise ValueError("a Projection of other inputs than the evaluator's; make it with Projection.of(x, sets) "
                             "from the same x")
        return evaluate(p)

    return checked


def projected_evaluator(model, x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function ``dirs ↦ model(project_out(x, dirs))`` for one set dirs [k, d] (orthonormal
    rows): :func:`batch_evaluator` on that one set."""
    evaluate = batch_evaluator(model, x)
    return lambda dirs: evaluate(Projection.of(x, DirectionSets.stacked([dirs], x.shape[1])))[0]


def _approximant_evaluator(approx: Approximant, x: torch.Tensor):
    x = x.to(approx.dtype)
    g0 = approx(x)
    gamma = None if approx.gamma is None else 0.5 * (approx.gamma + approx.gamma.transpose(1, 2))
    n, o, d = len(x), approx.o, approx.d

    @torch.no_grad()
    def evaluate(p: Projection) -> list[torch.Tensor]:
        U, c = p.sets.rows.to(x.dtype), p.coords.to(x.dtype)  # [m, d], [n, m]
        m = len(U)
        bu = approx.beta @ U.T  # [o, m]
        if gamma is not None:
            gu = (gamma.reshape(o * d, d) @ U.T).view(o, d, m)  # Γₛ Uᵀ
            xgu = (x @ gu.permute(1, 0, 2).reshape(d, o * m)).view(n, o, m)  # x Γₛ Uᵀ
            ugu = U @ gu  # [o, m, m]: U Γₛ Uᵀ
        outs = []
        for a, b in p.sets.spans:
            if a == b:
                outs.append(g0)
                continue
            cs = c[:, a:b]
            out = g0 - cs @ bu[:, a:b].T
            if gamma is not None:
                out = (out - 2 * torch.einsum("nok,nk->no", xgu[:, :, a:b], cs)
                       + torch.einsum("nk,okl,nl->no", cs, ugu[:, a:b, a:b], cs))
            outs.append(out)
        return outs

    return evaluate


def _projected_layer(h0: torch.Tensor, weight_u: torch.Tensor, c: torch.Tensor, span: tuple[int, int]) -> torch.Tensor:
    """layer(x − (xV)Vᵀ) from h0 = layer(x), the layer's W·Uᵀ and the coordinates c = xUᵀ: h0 − c_V (WV)ᵀ."""
    a, b = span
    return h0 if a == b else h0 - c[:, a:b] @ weight_u[:, a:b].T


def _sequential_evaluator(model: nn.Sequential, x: torch.Tensor):
    first, rest = model[0], model[1:]
    h0 = first(x)

    @torch.no_grad()
    def evaluate(p: Projection) -> list[torch.Tensor]:
        wu = first.weight @ p.sets.rows.to(x.dtype).T
        return [rest(_projected_layer(h0, wu, p.coords, span)) for span in p.sets.spans]

    return evaluate


def _glu_evaluator(model: GLUNet, x: torch.Tensor):
    g0, v0 = model.gate(x), model.value(x)

    @torch.no_grad()
    def evaluate(p: Projection) -> list[torch.Tensor]:
        U = p.sets.rows.to(x.dtype)
        gu, vu = model.gate.weight @ U.T, model.value.weight @ U.T
        return [model.out(model.act(_projected_layer(g0, gu, p.coords, s)) * _projected_layer(v0, vu, p.coords, s))
                for s in p.sets.spans]

    return evaluate

"""The FVU of an approximant under a Gaussian mixture, exactly (no samples).

    FVU = E‖f − g‖² / Σ_o Var f_o,   E‖f − g‖² = Σ_o (E f_o² − 2 E[f_o g_o] + E g_o²),

every expectation under the mixture (the weighted sum over components). E[f g] contracts g's
coefficients with E[f], E[f x], E[f x xᵀ] (the normal equations' right-hand side) and E g² is
(E_k g)² + Var_k g per component, one product ΓΣ_k per output
(:func:`polyinterp.approx.evaluate.metrics.expected_sq_norm`); E f² needs the second moments of the
hidden layer, E[h_i h_j] for every pair of hidden units under each component — a bivariate
Gaussian expectation (:mod:`polyinterp.approx.moments.bivariate`: closed form for ReLU MLPs, quadrature in
one variable and exact in the others for other activations and GLUs). This is the quantity the
exact quadratic minimises, so the exact fit's FVU is ≤ that of any other quadratic, up to the
solver's tolerance.
"""

from __future__ import annotations

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import GLU, MLP
from polyinterp.approx.evaluate.metrics import expected_sq_norm
from polyinterp.approx.moments.monomial_rhs import monomial_rhs
from polyinterp.approx.moments.output_moments import output_moments
from polyinterp.approx.solvers.gram_operator import inner


def exact_fvu(model, approximants: dict[str, Approximant], mixture: GaussianMixture) -> dict[str, float]:
    """FVU of each approximant under ``mixture``, pooled over outputs, without sampling:
    ``{name: E‖f − g‖² / Σ_o Var f_o}``. ``model``: an :class:`MLP` or :class:`GLU`."""
    if not isinstance(model, (MLP, GLU)):
        raise ApproxInputError(f"exact_fvu needs an MLP or GLU, got {type(model).__name__}")
    for name, g in approximants.items():
        if g.d != mixture.d or g.o != model.o:
            raise ApproxInputError(f"approximant {name!r} has d = {g.d}, o = {g.o}; the model has d = {mixture.d}, "
                                   f"o = {model.o}")
    ef, ef2 = output_moments(model, mixture)
    var = float((ef2 - ef * ef).sum())
    if not var > 0:
        raise ApproxInputError("the model's output is constant under this mixture, so the FVU is undefined")
    rhs = monomial_rhs(model.to(dtype=mixture.dtype), mixture)  # E[f], E[f x], E[f x xᵀ], shared by all g
    out = {}
    for name, g in approximants.items():
        q = g.to(mixture.device, mixture.dtype).quadratic()
        err = ef2 - 2 * inner((q.alpha, q.beta, q.gamma), rhs) + expected_sq_norm(q, mixture)
        out[name] = float(err.sum()) / var
    return out

"""Approximants beyond degree 2 at one checkpoint (rule ``mnist_degree_approximants``).

For each n in ``mnist.approx.degrees``: ``gaussian_deg{n}``, the exact least-squares polynomial of
degree ≤ n of the MLP under the mixture's moment-matched Gaussian N(μ̄, Σ̄), in factored Hermite form
(:func:`polyinterp.approx.gaussian_polynomial_approximant`; no dⁿ tensor). When some n ≥ 3 is asked,
also the exact least-squares quadratic and cubic of the full network under the full class mixture *in
its top-p whitened principal components* (p = ``mnist.approx.cubic.components``; PCs of the mixture's
total covariance, taken before whitening and then scaled to unit variance:
:mod:`polyinterp.approx.core.principal_components`): ``quadratic_pc{p}`` and ``cubic_pc{p}``
(:func:`polyinterp.approx.reduced_polynomial_approximants`), so that the cubic's gain is measured
against its own reduced-input quadratic and against the full-d ``quadratic`` of
:mod:`polyinterp.mnist.approximants`.

Their metrics rows (same schema as :mod:`polyinterp.mnist.metrics`, no ``mlp`` rows): Monte Carlo FVU,
KL and accuracy on the same seeded mixture samples and test images as every other approximant, and
for the PC fits the exact mixture FVU (``mixture_exact``, n_samples 0; E f² by bivariate Gaussian
moments, E[f g] and E g² from the normal equations). The Gaussian forms have no exact *mixture* FVU
here (it would need the mixture expectations of every Hermite product), so their mixture values are
Monte Carlo.
"""

from __future__ import annotations

import logging

import torch

from polyinterp.approx import gaussian_polynomial_approximant
from polyinterp.approx.fits.cubic_mixture import ReducedPolynomialApproximant, reduced_polynomial_approximants
from polyinterp.approx.fits.hermite_ridge import HermiteRidgeApproximant
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError
from polyinterp.io import load_torch, save_parquet, save_torch
from polyinterp.mnist.approximants import load_gaussian_mixture
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.metrics import fidelity_table
from polyinterp.mnist.model import load_network, polynomial_network

log = logging.getLogger(__name__)

REDUCED_NAMES = {2: "quadratic", 3: "cubic"}


def reduced_degrees(degrees) -> tuple[int, ...]:
    """Degrees of the principal-component fits: the quadratic and the cubic when any degree ≥ 3 is asked."""
    return (2, 3) if max(degrees, default=0) >= 3 else ()


def approximant_names(degrees, components: int) -> list[str]:
    """The approximant names this step writes, in table order."""
    return ([f"gaussian_deg{n}" for n in sorted(set(degrees))]
            + [f"{REDUCED_NAMES[n]}_pc{components}" for n in reduced_degrees(degrees)])


def fit_degree_approximants(ckpt: dict, mixture: dict, params: dict, warm_start: dict | None = None) -> dict:
    """``{name: approximant}`` (names of :func:`approximant_names`) of the checkpoint's MLP under
    ``mixture``; ``warm_start``: a previous checkpoint's saved file (its PC fits start the PCG)."""
    degrees, p = sorted(set(params["degrees"])), int(params["components"])
    device = resolve_device(params["device"])
    mix = load_gaussian_mixture(mixture, device)
    if reduced_degrees(degrees) and p > mix.d:
        raise ConfigError(f"config key 'mnist.approx.cubic.components' is {p}, more than the d = {mix.d} inputs "
                          f"of this preprocessing; set it to at most {mix.d}")
    mlp = polynomial_network(load_network(ckpt, device))
    out: dict = {}
    gauss = mix.moment_matched()
    for n in degrees:
        g = gaussian_polynomial_approximant(mlp, gauss, degree=n)
        out[f"gaussian_deg{n}"] = g
        log.info("step %d: gaussian_deg%d %.2f s", ckpt["step"], n, g.fit_info["seconds"])
    if reduced_degrees(degrees):
        start = None
        if warm_start is not None:
            start = {n: ReducedPolynomialApproximant.from_state_dict(warm_start["reduced"][n]).to(device)
                     for n in reduced_degrees(degrees) if n in warm_start.get("reduced", {})}
        fits = reduced_polynomial_approximants(
            mlp, mix, components=p, degrees=reduced_degrees(degrees), method="auto", tol=params["tol"],
            max_iter=params["max_iter"], inner_dtype=params["inner_dtype"], warm_start=start or None)
        for n, g in fits.items():
            info = g.fit_info
            if not info["converged"]:
                log.warning("step %d: %s_pc%d stopped at relative residual %.2e > tol %.1e after %d iterations",
                            ckpt["step"], REDUCED_NAMES[n], p, info["residual"], params["tol"], info["iterations"])
            log.info("step %d: %s_pc%d (%d basis functions) %s, %d iterations, residual %.2e, %.1f s",
                     ckpt["step"], REDUCED_NAMES[n], p, info["basis_size"], info["method"], info["iterations"],
                     info["residual"], info["seconds"])
            out[f"{REDUCED_NAMES[n]}_pc{p}"] = g
    return out


def saved_state(ckpt: dict, fitted: dict, params: dict) -> dict:
    """What the rule saves: the step, seed, settings and every approximant's state dict (the PC fits
    by degree under ``reduced``, the next checkpoint's warm start)."""
    return {"step": int(ckpt["step"]), "seed": int(ckpt["seed"]), "degrees": sorted(set(params["degrees"])),
            "components": int(params["components"]),
            "gaussian": {g.degree: g.to("cpu").state_dict() for g in fitted.values()
                         if isinstance(g, HermiteRidgeApproximant)},
            "reduced": {g.degree: _on_cpu(g.state_dict())  # state_dict() adds E f, E f² (the FVU's moments)
                        for g in fitted.values() if isinstance(g, ReducedPolynomialApproximant)}}


def _on_cpu(obj):
    """Tensors of a (nested) state dict moved to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _on_cpu(v) for k, v in obj.items()}
    return obj


def degree_approximants_step(*, ckpt: str, mixture: str, data: str, approx: str, metrics: str, params: dict,
                             warm: list[str] = ()) -> None:
    """Rule ``mnist_degree_approximants`` for one (seed, step): the higher-degree approximants of
    ``ckpt`` under ``mixture`` (warm-started from ``warm``, the same seed's previous file; empty: cold),
    saved to ``approx``, and their metrics (module docstring) on mixture samples and the test images of
    ``data``, written to ``metrics``."""
    if len(warm) > 1:
        raise ConfigError(f"mnist_degree_approximants takes at most one warm start, got {len(warm)}: {list(warm)}")
    if not params["degrees"]:
        raise ConfigError("config key 'mnist.approx.degrees' is empty, so there is nothing to fit; "
                          "the workflow should not have asked for this step")
    ck, mix = load_torch(ckpt), load_torch(mixture)
    fitted = fit_degree_approximants(ck, mix, params, load_torch(warm[0]) if warm else None)
    device = resolve_device(params["device"])
    model = load_network(ck, device).to(torch.float64)
    exact = {name: g.fvu() for name, g in fitted.items() if isinstance(g, ReducedPolynomialApproximant)}
    fits = {name: "gaussian" if isinstance(g, HermiteRidgeApproximant) else "mixture" for name, g in fitted.items()}
    table = fidelity_table(ck, model, fitted, exact, mix, load_mnist(data), params, with_mlp=False, fit=fits)
    save_torch(saved_state(ck, fitted, params), approx)
    save_parquet(table, metrics)

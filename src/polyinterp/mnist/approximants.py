"""Per-checkpoint linear and quadratic approximants of an MNIST network (MLP or GLU), fitted under
the class mixture and, with ``mnist.approx.fits`` containing ``gaussian``, under its moment-matched
single Gaussian (the maximum-entropy choice when only the first two moments are kept).

Saved file: ``linear``, ``quadratic`` (exact) and ``quadratic_sgd`` (the paper's baseline, where it
runs) fitted under the mixture, as state dicts; ``gaussian``: ``{"linear", "quadratic"}`` fitted under
the moment-matched Gaussian (closed form, no solver); ``mlp``: the network approximated."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from polyinterp.approx import (Approximant, GaussianMixture, SolverPlan, linear_approximant,
                               quadratic_approximant)
from polyinterp.approx.solvers.logdet_newton import NEWTON_ITERATIONS
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError
from polyinterp.io import load_torch, save_torch
from polyinterp.mnist.model import load_network, model_name, polynomial_network

log = logging.getLogger(__name__)
FITS = ("mixture", "gaussian")  # the distributions approximants are fitted under (the tables' fit column)


def load_gaussian_mixture(mixture: dict, device: torch.device, dtype=torch.float64) -> GaussianMixture:
    """The saved class mixture (rule ``mnist_mixture``) as a :class:`GaussianMixture`, its ridge recorded."""
    return GaussianMixture(mixture["weights"], mixture["means"], mixture["covs"], ridge=mixture.get("ridge"),
                           ridge_abs=mixture.get("ridge_abs")).to(device, dtype)


def fit_approximants(ckpt: dict, mixture: dict, params: dict, plan: SolverPlan,
                     warm_start: dict | None = None) -> dict:
    """Linear, exact quadratic and (when enabled) the paper's SGD quadratic under the mixture, and with
    ``"gaussian"`` in ``params['fits']`` (default: mixture only) the linear and quadratic under its
    moment-matched Gaussian, as state dicts (layout: module docstring). ``plan``: the mixture's
    :class:`SolverPlan` (rule ``mnist_solver_plan``)."""
    device = resolve_device(params["device"])
    mix = load_gaussian_mixture(mixture, device)
    mlp = polynomial_network(load_network(ckpt, device))
    out = {"step": ckpt["step"], "seed": ckpt["seed"], "ridge": mixture["ridge"], "preprocess": ckpt["preprocess"],
           "model": model_name(ckpt),
           "mlp": {"arch": ckpt["arch"], "state": ckpt["state"]}}  # the network approximated (next warm start)
    lin = linear_approximant(mlp, mix)
    out["linear"] = lin.to("cpu").state_dict()
    start = Approximant.from_state_dict(warm_start["quadratic"]).to(device) if warm_start else None
    start_model = (polynomial_network(load_network(warm_start["mlp"], device))
                   if warm_start and "mlp" in warm_start else None)
    quad = quadratic_approximant(
        mlp, mix, method="exact", tol=params["tol"], max_iter=params["max_iter"], inner_dtype=params["inner_dtype"],
        plan=plan.to(device), warm_start=start, warm_start_model=start_model,
    )
    out["quadratic"] = quad.to("cpu").state_dict()
    log.info("step %d: linear %s; quadratic exact %s", ckpt["step"], lin.fit_info, quad.fit_info)
    if params["sgd"]["enabled"]:
        sgd = quadratic_approximant(
            mlp, mix, method="sgd", steps=params["sgd"]["steps"], batch=params["sgd"]["batch"],
            lr=params["sgd"]["lr"], optimizer=params["sgd"].get("optimizer", "adamw_schedulefree"),
            momentum=params["sgd"].get("momentum", 0.9), product_dtype=params["sgd"].get("product_dtype", "float32"),
            seed=int(ckpt["seed"]) * 1_000_003 + int(ckpt["step"]),
        )
        out["quadratic_sgd"] = sgd.to("cpu").state_dict()
        log.info("step %d: quadratic sgd %s", ckpt["step"], sgd.fit_info)
    fits = check_fits(params.get("fits", ["mixture"]))
    if "gaussian" in fits:
        gauss = mix.moment_matched()
        out["gaussian"] = {"linear": linear_approximant(mlp, gauss).to("cpu").state_dict(),
                           "quadratic": quadratic_approximant(mlp, gauss, method="exact").to("cpu").state_dict()}
    return out


def check_fits(fits) -> list[str]:
    """``mnist.approx.fits``, checked: the mixture (the paper's fits, which the attack and the SGD
    baseline use) and optionally the moment-matched Gaussian."""
    fits = list(fits)
    if "mixture" not in fits or any(f not in FITS for f in fits):
        raise ConfigError(f"config key 'mnist.approx.fits' is {fits}; it must contain 'mixture' and may add"
                          " 'gaussian' (the moment-matched single Gaussian).")
    return fits


def approximants_step(*, ckpt: str, mixture: str, plan: str, approx: str, params: dict,
                      warm: list[str] = ()) -> None:
    """Rule ``mnist_approximants`` for one (seed, step): the approximants of ``ckpt`` under ``mixture``
    (exact quadratic with the mixture's solver ``plan``), warm-started from ``warm`` (the previous
    checkpoint's ``approx`` file; empty: cold start), written to ``approx``."""
    if len(warm) > 1:
        raise ConfigError(f"mnist_approximants takes at most one warm start, got {len(warm)}: {list(warm)}")
    start = load_torch(warm[0]) if warm else None
    solver_plan = SolverPlan.from_state_dict(load_torch(plan))
    save_torch(fit_approximants(load_torch(ckpt), load_torch(mixture), params, solver_plan, start), approx)


def solver_plan_step(*, mixture: str, plan: str, params: dict) -> None:
    """Rule ``mnist_solver_plan``: whitening, joint-diagonal basis and deflation vectors of ``mixture``,
    once for all checkpoints and seeds, on ``params['device']``; saved (on CPU) to ``plan``."""
    mix = load_gaussian_mixture(load_torch(mixture), resolve_device(params["device"]))
    # the rule passes the Jacobi keys only with jd_basis: jacobi, and jd_newton_iterations only with newton
    built = SolverPlan.build(mix, basis=params["jd_basis"], sweeps=params.get("jd_sweeps", 2),
                             logdet_sweeps=params.get("jd_logdet_sweeps", 0),
                             newton_iterations=params.get("jd_newton_iterations", NEWTON_ITERATIONS),
                             lanczos_steps=params["deflation_steps"], coarse_ritz=params["coarse_ritz"],
                             coarse_rank=params["coarse_rank"])
    how = (f"{built.basis_info['iterations']} Newton steps on the log-det criterion" if built.basis_method == "newton"
           else f"{built.sweeps} + {built.logdet_sweeps} (log-det) Jacobi sweeps" if built.basis_method == "jacobi"
           else "the identity basis")
    log.info("solver plan: %s, %d deflated eigenvectors, a coarse space on %d directions, "
             "%.1f s (rank %d)", how,
             0 if built.deflation is None else built.deflation[0].shape[0],
             0 if built.coarse_basis is None else built.coarse_basis.shape[1], built.seconds, built.whitening.rank)
    log.info("solver plan seconds by part: %s",
             ", ".join(f"{k} {v:.1f}" for k, v in (built.seconds_by_part or {}).items()))
    info = built.deflation_info
    if info:
        log.info("deflation: %d candidate Ritz pairs, %d kept, %d rejected by their true residual; "
                 "Ritz values %s, true relative residuals %s", info["candidates"], info["kept"], info["rejected"],
                 [f"{v:.4g}" for v in info["candidate_ritz_values"]],
                 [f"{v:.2e}" for v in info["candidate_residuals"]])
    save_torch(built.to("cpu").state_dict(), plan)


def load_approximants(path: str | Path, device="cpu", fit: str = "mixture") -> dict[str, Approximant]:
    """The approximants saved by :func:`approximants_step` that were fitted under ``fit``: keyed linear /
    quadratic / quadratic_sgd for the mixture, linear / quadratic for the Gaussian (empty when the run
    did not fit it)."""
    return approximants_of(load_torch(path), device, fit)


def load_approximant_fits(path: str | Path, device="cpu") -> dict[str, dict[str, Approximant]]:
    """fit → :func:`load_approximants` of that fit, for every fit of :data:`FITS`, from one read of the file."""
    saved = load_torch(path)
    return {fit: approximants_of(saved, device, fit) for fit in FITS}


def approximants_of(saved: dict, device, fit: str) -> dict[str, Approximant]:
    """The approximants fitted under ``fit`` in a loaded approximants file ``saved`` (layout: module docstring)."""
    group = saved if fit == "mixture" else saved.get(fit, {})
    return {name: Approximant.from_state_dict(group[name]).to(device)
            for name in ("linear", "quadratic", "quadratic_sgd") if name in group}

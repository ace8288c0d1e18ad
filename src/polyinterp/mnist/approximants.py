"""Per-checkpoint linear and quadratic approximants of the MNIST MLP under the class mixture."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from polyinterp.approx import (MLP, Approximant, GaussianMixture, SolverPlan, linear_approximant,
                               quadratic_approximant)
from polyinterp.cpu_share import allotted_threads
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError
from polyinterp.io import load_torch, save_torch
from polyinterp.mnist.model import load_mlp

log = logging.getLogger(__name__)


def load_gaussian_mixture(mixture: dict, device: torch.device, dtype=torch.float64) -> GaussianMixture:
    return GaussianMixture(mixture["weights"], mixture["means"], mixture["covs"]).to(device, dtype)


def fit_approximants(ckpt: dict, mixture: dict, params: dict, plan: SolverPlan,
                     warm_start: dict | None = None) -> dict:
    """Linear, exact quadratic and (when enabled) the paper's SGD quadratic, as state dicts.
    ``plan``: the mixture's :class:`SolverPlan` (rule ``mnist_solver_plan``)."""
    device = resolve_device(params["device"])
    mix = load_gaussian_mixture(mixture, device)
    mlp = MLP.from_module(load_mlp(ckpt, device).to(torch.float64))
    out = {"step": ckpt["step"], "seed": ckpt["seed"], "ridge": mixture["ridge"], "preprocess": ckpt["preprocess"],
           "mlp": {"arch": ckpt["arch"], "state": ckpt["state"]}}  # the network approximated (next warm start)
    lin = linear_approximant(mlp, mix)
    out["linear"] = lin.to("cpu").state_dict()
    start = Approximant.from_state_dict(warm_start["quadratic"]).to(device) if warm_start else None
    start_model = (MLP.from_module(load_mlp(warm_start["mlp"], device).to(torch.float64))
                   if warm_start and "mlp" in warm_start else None)
    quad = quadratic_approximant(
        mlp, mix, method="exact", tol=params["tol"], max_iter=params["max_iter"], inner_dtype=params["inner_dtype"],
        plan=plan.to(device), warm_start=start, warm_start_model=start_model,
    )
    out["quadratic"] = quad.to("cpu").state_dict()
    log.info("step %d: linear %s; quadratic exact %s", ckpt["step"], lin.fit_info, quad.fit_info)
    if params["sgd"]["enabled"]:
        with allotted_threads():  # a fixed number of steps: its result depends on the thread count
            sgd = quadratic_approximant(
                mlp, mix, method="sgd", steps=params["sgd"]["steps"], batch=params["sgd"]["batch"],
                lr=params["sgd"]["lr"], seed=int(ckpt["seed"]) * 1_000_003 + int(ckpt["step"]),
            )
        out["quadratic_sgd"] = sgd.to("cpu").state_dict()
        log.info("step %d: quadratic sgd %s", ckpt["step"], sgd.fit_info)
    return out


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
    built = SolverPlan.build(mix, sweeps=params["jd_sweeps"], lanczos_steps=params["deflation_steps"])
    log.info("solver plan: %d Jacobi sweeps, %d deflated eigenvectors, %.1f s (rank %d)", built.sweeps,
             0 if built.deflation is None else built.deflation[0].shape[0], built.seconds, built.whitening.rank)
    info = built.deflation_info
    if info:
        log.info("deflation: %d candidate Ritz pairs, %d kept, %d rejected by their true residual; "
                 "Ritz values %s, true relative residuals %s", info["candidates"], info["kept"], info["rejected"],
                 [f"{v:.4g}" for v in info["candidate_ritz_values"]],
                 [f"{v:.2e}" for v in info["candidate_residuals"]])
    save_torch(built.to("cpu").state_dict(), plan)


def load_approximants(path: str | Path, device="cpu") -> dict[str, Approximant]:
    """The approximants saved by :func:`approximants_step`, keyed linear / quadratic / quadratic_sgd."""
    saved = load_torch(path)
    return {name: Approximant.from_state_dict(saved[name]).to(device)
            for name in ("linear", "quadratic", "quadratic_sgd") if name in saved}

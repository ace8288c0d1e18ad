"""The single-polynomial grid (the blog's early result): one network per polynomial.

For each (a, b) of a ``cubic.grid.a_points`` × ``b_points`` grid over the training box, a network
``cubic.grid.widths`` (1 → 15 → 15 → 15 → 15 → 1, ReLU) regresses that one cubic
y = x³ + a·x² + b·x from x alone, x uniform on the training x range, and a TopK SAE is fitted on its
last hidden layer (folder ``results/cubic/seed{seed}/grid/a{i}_b{j}/``; rule ``cubic_grid_seed`` trains
every point of a seed in one job). Every grid network of a seed starts from the same weights and sees
the same x batches (its own seeded streams, :mod:`polyinterp.cubic.regressor.task`): only the target
differs. So the job trains the seed's networks side by side as one batched model
(:mod:`polyinterp.cubic.regressor.batched`), then their SAEs as one batched SAE
(:mod:`polyinterp.cubic.sae.batched`): each network and SAE gets exactly its own gradient and update,
and its files are those of training it alone.

``grid_summary_step`` (rule ``cubic_grid_summary``) reads each network's latents along x, and the
(x, a, b) regressor's latents (today's SAE) along x at the same (a, b), and scores every latent on
whether it tracks the x range or the landmarks (:mod:`polyinterp.cubic.probes.tracking`): per latent
``results/cubic/grid_latents.parquet``, per (seed, a, b, network) ``results/cubic/grid.parquet``.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import pandas as pd
import torch

from polyinterp.config import config_hash
from polyinterp.cubic.regressor.batched import BatchedMLP
from polyinterp.cubic.regressor.model import CubicMLP, build_model
from polyinterp.cubic.regressor.task import (STREAM_GRID_ACTS, STREAM_GRID_HELDOUT, STREAM_GRID_TRAIN, STREAM_GRID_VAL, cubic,
                                   generator, sample_x)
from polyinterp.cubic.regressor.train import check_alive, lr_factor
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError, DataError, TrainingError

log = logging.getLogger(__name__)
NETWORKS = ("single", "joint")  # the one-polynomial network; the (x, a, b) regressor at the same (a, b)


# ------------------------------------------------------------------------------------------ grid
def grid_values(lo: float, hi: float, n: int) -> list[float]:
    """``n`` evenly spaced values from ``lo`` to ``hi`` (both included); one value: the midpoint."""
    lo, hi, n = float(lo), float(hi), int(n)
    return [(lo + hi) / 2] if n == 1 else [float(v) for v in np.linspace(lo, hi, n)]


def grid_points(grid: dict, ranges: dict) -> list[dict]:
    """The (a, b) of ``cubic.grid`` over ``cubic.task.ranges``: ``[{"ia", "ib", "a", "b"}]``, a slowest."""
    a_vals = grid_values(*ranges["a"], grid["a_points"])
    b_vals = grid_values(*ranges["b"], grid["b_points"])
    return [{"ia": i, "ib": j, "a": a, "b": b} for i, a in enumerate(a_vals) for j, b in enumerate(b_vals)]


def check_widths(widths) -> list[int]:
    widths = [int(w) for w in widths]
    if len(widths) < 3 or widths[0] != 1 or widths[-1] != 1:
        raise ConfigError(f"config key 'cubic.grid.widths' is {widths}; a single-polynomial network reads x alone "
                          f"and outputs y: it starts and ends at 1 with at least one hidden layer, e.g. "
                          f"[1, 15, 15, 15, 15, 1].")
    return widths


# -------------------------------------------------------------------------------------- training
@torch.no_grad()
def line_rel_mse(model, x: torch.Tensor, a: float, b: float) -> tuple[float, float, float]:
    """(MSE, MSE / Var(y), max |error|) of ``model`` on inputs ``x`` [n, 1] against x³ + a·x² + b·x."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    err = (model(x.to(device)).cpu() - cubic(x[:, 0], a, b)).double()
    model.train(was_training)
    mse, var = float(err.pow(2).mean()), float(cubic(x[:, 0], a, b).double().var())
    return mse, mse / var, float(err.abs().max())


def point_name(point: dict) -> str:
    """The grid network of ``point`` in words, for logs and errors."""
    return f"single-polynomial network (a = {point['a']:g}, b = {point['b']:g})"


def train_singles(points: list[dict], x_range, widths, tp: dict, seed: int, device) -> list[tuple[CubicMLP, dict]]:
    """Train the network ``widths`` (input width 1) on y = x³ + a·x² + b·x for every (a, b) of
    ``points``, x uniform on ``x_range``: Adam, linear warm-up then cosine decay (the regressor's
    schedule), loss MSE / Var(y) of the validation set. Returns per point (model in eval mode, fit info).

    Every network starts from ``build_model(widths, seed)`` and reads the same x batches, so all are
    trained as one :class:`~polyinterp.cubic.regressor.batched.BatchedMLP` on the sum of their
    losses: each network gets its own gradient and Adam update, the numbers of training it alone.
    ``train_seconds`` is each network's share of the batched training's wall time (the time / P).
    """
    widths = check_widths(widths)
    val = sample_x(tp["val_samples"], x_range, generator(seed, STREAM_GRID_VAL))
    var_val = [float(cubic(val[:, 0], p["a"], p["b"]).double().var()) for p in points]
    for p, v in zip(points, var_val):
        if v <= 0:
            raise ConfigError(f"y = x³ + {p['a']}·x² + {p['b']}·x is constant on the x range {list(x_range)}; "
                              f"widen cubic.task.ranges.x.")
    model = BatchedMLP(build_model(widths, seed), len(points)).to(device)
    a = torch.tensor([p["a"] for p in points], dtype=torch.float32, device=device).unsqueeze(1)
    b = torch.tensor([p["b"] for p in points], dtype=torch.float32, device=device).unsqueeze(1)
    var_t = torch.tensor(var_val, dtype=torch.float32, device=device)
    opt = torch.optim.Adam(model.parameters(), lr=tp["lr"], foreach=True)
    gen = generator(seed, STREAM_GRID_TRAIN)
    total, t0 = int(tp["steps"]), time.time()
    for step in range(total):
        for group in opt.param_groups:
            group["lr"] = tp["lr"] * lr_factor(step, tp["warmup_steps"], total, tp["final_lr_ratio"])
        xb = sample_x(tp["batch_size"], x_range, gen).to(device)
        losses = ((model(xb) - cubic(xb[:, 0], a, b)) ** 2).mean(1) / var_t
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
        if (step + 1) % 200 == 0:
            bad = [point_name(p) for p, v in zip(points, losses.detach().tolist()) if not math.isfinite(v)]
            if bad:
                raise TrainingError(f"{', '.join(bad)} (seed {seed}) diverged at step {step + 1}; lower "
                                    f"cubic.grid.train.lr or raise cubic.grid.train.warmup_steps.")
    seconds = (time.time() - t0) / len(points)
    out = []
    for i, p in enumerate(points):
        net = model.copy(i)
        mse, rel, max_err = line_rel_mse(net, val, p["a"], p["b"])
        check_alive(net, val.to(device), rel, seed, total, tp, key="cubic.grid.train", what_net=point_name(p))
        log.info("a = %g, b = %g: val rel-MSE %.3e after %d steps", p["a"], p["b"], rel, total)
        out.append((net, {"val_mse": mse, "val_rel_mse": rel, "val_max_abs_err": max_err, "var_y": var_val[i],
                          "steps_trained": total, "train_seconds": seconds}))
    return out


def grid_seed_step(*, model: list[str], sae: list[str], metrics: list[str], params: dict) -> None:
    """Rule ``cubic_grid_seed``: every grid point of one seed, trained together. For each (a, b) of
    ``params["points"]``, the single-polynomial network (``widths``, ``train``, on ``x_range``;
    :func:`train_singles`), then a TopK SAE (``sae``) on its last hidden layer at
    ``activations.n_train`` fresh x, scored on ``n_heldout`` more (all SAEs fitted together,
    :func:`polyinterp.cubic.sae.batched.train_saes`); write per point ``model``, ``sae`` and a one-row
    ``metrics`` table (one file each per point of ``params["points"]``, in its order). ``params`` is
    :func:`polyinterp.rules.seed_params`'s. Every draw comes from the seed's own generators, so a
    point's files do not depend on the other points of the grid."""
    from polyinterp.cubic.sae.batched import train_saes

    points = params["points"]
    for name, paths in (("model", model), ("sae", sae), ("metrics", metrics)):
        if len(paths) != len(points):
            raise DataError(f"{len(paths)} {name} files for {len(points)} grid points; the rule must pass one per "
                            f"point.")
    seed = int(params["seed"])
    x_range = [float(v) for v in params["x_range"]]
    device = resolve_device(params["device"])
    fits = train_singles(points, x_range, params["widths"], params["train"], seed, device)
    inputs = {split: sample_x(n, x_range, generator(seed, stream))
              for split, n, stream in (("train", params["activations"]["n_train"], STREAM_GRID_ACTS),
                                       ("heldout", params["activations"]["n_heldout"], STREAM_GRID_HELDOUT))}
    acts = {}
    with torch.no_grad():
        for split, x in inputs.items():  # [P, n, width], filled network by network (no second copy)
            acts[split] = torch.empty(len(fits), len(x), fits[0][0].widths[-2])
            for i, (net, _) in enumerate(fits):
                acts[split][i] = net.hidden(x.to(device)).cpu()
    t0 = time.time()
    saes, since_fired = train_saes(acts["train"], params["sae"], seed, device, [point_name(p) for p in points])
    sae_seconds = (time.time() - t0) / len(points)  # each SAE's share
    common = {k: v for k, v in params.items() if k != "points"}
    for i, point in enumerate(points):
        net, info = fits[i]
        write_point(net, info, saes[i], since_fired[i], (inputs["heldout"], acts["heldout"][i]),
                    {**common, **point}, sae_seconds, model=model[i], sae=sae[i], metrics=metrics[i])


def write_point(net: CubicMLP, info: dict, fitted, since_fired: torch.Tensor, heldout: tuple, params: dict,
                sae_seconds: float, *, model: str, sae: str, metrics: str) -> None:
    """One grid point's files: the network ``net`` (``info``: its fit) to ``model``, its SAE ``fitted``
    to ``sae``, and the one-row ``metrics`` table: the fit, the SAE's held-out R², L0 and dead share on
    ``heldout`` (x, hidden layer), its dead share in training (``since_fired``, samples since each
    latent fired, against ``dead_threshold``), and the network's rel-MSE with the SAE spliced in;
    ``sae_seconds`` is this SAE's share of the batched fit's wall time. ``params``: the rule's
    settings and the point's ``ia``, ``ib``, ``a``, ``b``."""
    from polyinterp.cubic.sae.autoencoder import evaluate_sae
    from polyinterp.io import save_parquet, save_torch

    seed, a, b = int(params["seed"]), float(params["a"]), float(params["b"])
    x_range = [float(v) for v in params["x_range"]]
    device = next(net.parameters()).device
    x_ho, h_ho = heldout
    ev = evaluate_sae(fitted, h_ho)
    with torch.no_grad():
        y_splice = net.head(fitted(h_ho.to(device))).cpu().double()
    y_true = cubic(x_ho[:, 0], a, b).double()
    rel_spliced = float((y_splice - y_true).pow(2).mean()) / float(y_true.var())
    widths = [int(w) for w in net.widths]
    save_torch({"state": {k: v.cpu() for k, v in net.state_dict().items()}, "widths": widths, "seed": seed,
                "a": a, "b": b, "ranges": {"x": x_range}, **info, "config_hash": config_hash(params)}, model)
    save_torch({**fitted.state(), "seed": seed, "layer": net.n_hidden, "a": a, "b": b,
                "config_hash": config_hash(params)}, sae)
    row = {"seed": seed, "ia": int(params["ia"]), "ib": int(params["ib"]), "a": a, "b": b,
           "widths": "-".join(map(str, widths)), **info, "latents": fitted.m, "k": fitted.k,
           "sae_r2_heldout": ev["r2"], "sae_l0_heldout": ev["l0"], "sae_dead_frac_heldout": ev["dead_frac"],
           "sae_dead_frac_train": float((since_fired >= params["sae"]["dead_threshold"]).double().mean()),
           "rel_mse_spliced": rel_spliced, "sae_seconds": sae_seconds}
    log.info("a = %g, b = %g: SAE held-out R² %.4f, L0 %.2f, dead %.3f; spliced rel-MSE %.2e",
             a, b, ev["r2"], ev["l0"], ev["dead_frac"], rel_spliced)
    save_parquet(pd.DataFrame([row]), metrics)


# --------------------------------------------------------------------------------------- summary
def _line(xs: torch.Tensor, a: float, b: float, width: int) -> torch.Tensor:
    """Inputs along x at (a, b) for a network of input ``width`` (1: x; 3: x, a, b)."""
    if width == 1:
        return xs[:, None]
    return torch.stack([xs, torch.full_like(xs, a), torch.full_like(xs, b)], 1)


@torch.no_grad()
def line_profiles(net, dictionary, xs: torch.Tensor, a: float, b: float, device, layer: int | None = None):
    """Along ``xs`` at (a, b): (SAE latents [n, m] as float64 numpy, the network's rel-MSE against
    the cubic there, the SAE's R² on the hidden layer there)."""
    inputs = _line(xs, a, b, net.widths[0]).to(device)
    layer = net.n_hidden if layer is None else layer
    h = net.layer_acts(inputs, layer)
    z = dictionary.encode(h)
    recon = dictionary.decode(z)
    y = net.from_layer(h, layer).cpu().double()
    y_true = cubic(xs, a, b).double()
    rel = float((y - y_true).pow(2).mean()) / float(y_true.var())
    hd = h.double().cpu()
    sst = float((hd - hd.mean(0)).pow(2).sum())
    r2 = 1 - float((recon.double().cpu() - hd).pow(2).sum()) / sst if sst > 0 else float("nan")
    return z.cpu().double().numpy(), rel, r2


def _median(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.median()) if len(s) else float("nan")


def summarize_network(scores: pd.DataFrame, chance_near_landmark: float) -> dict:
    """Per (seed, a, b, network): the live latents' median / mean range and landmark scores, the
    share of live latents that track the x range (a latent is live when active somewhere on the line),
    the share that peak within bump_width of a landmark, ``chance_near_landmark`` (the share of the x
    range that is, :func:`polyinterp.cubic.probes.tracking.near_landmark_share`) and their ratio."""
    live = scores[scores.active_frac > 0]
    near = float(live.near_landmark.mean()) if len(live) else float("nan")
    return {
        "latents": int(len(scores)), "n_live": int(len(live)),
        "median_range_corr": _median(live.range_corr), "median_landmark_corr": _median(live.landmark_corr),
        "mean_range_corr": float(live.range_corr.mean()) if len(live) else float("nan"),
        "mean_landmark_corr": float(live.landmark_corr.mean()) if len(live) else float("nan"),
        "frac_tracks_range": float(live.tracks_range.mean()) if len(live) else float("nan"),
        "median_active_frac": _median(live.active_frac),
        "frac_near_landmark": near, "chance_near_landmark": float(chance_near_landmark),
        "landmark_enrichment": near / chance_near_landmark if chance_near_landmark > 0 else float("nan"),
    }


def grid_summary_step(*, model: list[str], sae: list[str], metrics: list[str], joint_model: list[str],
                      joint_sae: list[str], table: str, latents: str, params: dict) -> None:
    """Rule ``cubic_grid_summary``: for every grid point of ``params["rows"]`` (``seed``, ``ia``,
    ``ib``, ``a``, ``b``; in the order of ``model``, ``sae`` and ``metrics``), the single network's
    SAE latents and the (x, a, b) regressor's (``joint_model``, ``joint_sae``: one per seed, in the
    order of ``params["seeds"]``) along ``x_points`` x over ``x_range`` at that (a, b), scored by
    :func:`polyinterp.cubic.probes.tracking.score_latents` (``x_bins``, ``bump_width``); write the per-latent
    ``latents`` table and the per-(seed, a, b, network) ``table``."""
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.sae.autoencoder import load_sae, sae_layer
    from polyinterp.cubic.probes.tracking import near_landmark_share, score_latents
    from polyinterp.io import load_parquet, save_parquet

    rows_in, seeds = params["rows"], [int(s) for s in params["seeds"]]
    for name, paths, want in (("model", model, len(rows_in)), ("sae", sae, len(rows_in)),
                              ("metrics", metrics, len(rows_in)), ("joint_model", joint_model, len(seeds)),
                              ("joint_sae", joint_sae, len(seeds))):
        if len(paths) != want:
            raise DataError(f"{len(paths)} {name} files for {want} expected; the rule must pass one per "
                            f"{'grid point' if want == len(rows_in) else 'seed'}.")
    device = resolve_device(params["device"])
    x_range = [float(v) for v in params["x_range"]]
    xs = torch.linspace(*x_range, int(params["x_points"]))
    joint = {s: (load_model(mp, device), load_sae(sp, device), sae_layer(sp))
             for s, mp, sp in zip(seeds, joint_model, joint_sae)}
    per_latent, per_net = [], []
    for key, mp, sp, metp in zip(rows_in, model, sae, metrics):
        seed, a, b = int(key["seed"]), float(key["a"]), float(key["b"])
        met = load_parquet(metp).iloc[0]
        if (int(met.seed), float(met.a), float(met.b)) != (seed, a, b):
            raise DataError(f"{metp} holds seed {int(met.seed)} at (a, b) = ({met.a}, {met.b}), not seed {seed} at "
                            f"({a}, {b}); the rule passed its files out of order.")
        nets = {"single": (load_model(mp, device), load_sae(sp, device), None), "joint": joint[seed]}
        chance = near_landmark_share(x_range, a, b, float(params["bump_width"]))
        for network in NETWORKS:
            net, dictionary, layer = nets[network]
            z, rel, r2 = line_profiles(net, dictionary, xs, a, b, device, layer)
            scores = score_latents(z, xs.numpy(), x_range, a, b, int(params["x_bins"]), float(params["bump_width"]))
            scores.insert(0, "network", network)
            for col, v in (("b", b), ("a", a), ("ib", int(key["ib"])), ("ia", int(key["ia"])), ("seed", seed)):
                scores.insert(0, col, v)
            per_latent.append(scores)
            single = network == "single"
            per_net.append({"seed": seed, "ia": int(key["ia"]), "ib": int(key["ib"]), "a": a, "b": b,
                            "network": network, **summarize_network(scores, chance), "rel_mse_line": rel, "sae_r2_line": r2,
                            "val_rel_mse": float(met.val_rel_mse) if single else float("nan"),
                            "sae_r2_heldout": float(met.sae_r2_heldout) if single else float("nan")})
            r = per_net[-1]
            log.info("seed %d (a, b) = (%g, %g) %s: %d live latents, median range corr %.3f vs landmark %.3f, "
                     "%.0f%% track the x range, landmark enrichment %.2f; rel-MSE on the line %.2e", seed, a, b, network, r["n_live"],
                     r["median_range_corr"], r["median_landmark_corr"], 100 * r["frac_tracks_range"],
                     r["landmark_enrichment"], rel)
    save_parquet(pd.concat(per_latent, ignore_index=True), latents)
    save_parquet(pd.DataFrame(per_net), table)

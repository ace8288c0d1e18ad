"""Seeded training of the cubic regressor towards a relative-MSE target, with eval checkpoints.

Every step draws a fresh batch from the input box (CPU generator, so the batch sequence is the same
on every device); the loss is the MSE divided by Var(y) of the validation set, i.e. the relative MSE
that the target is stated in. Adam with a linear warm-up and a cosine decay to
``final_lr_ratio × lr`` over ``steps``. Every ``eval_every`` steps the model is evaluated on a fixed
validation set and its weights are kept as an eval checkpoint. Training stops at ``steps`` or, when
``stop_at_target`` is set, at the first evaluation that meets ``target_rel_mse``. Missing the target
is logged as a warning and recorded (``target_met``), not an error: the value reached is the result.
A *dead* regressor (a hidden layer silent on every validation input, or no better than the mean) is
an error raised here, naming ``cubic.train.lr`` and ``cubic.train.warmup_steps``, not one rule later.
"""

from __future__ import annotations

import logging
import math
import time

import pandas as pd
import torch

from polyinterp.config import config_hash
from polyinterp.cubic.regressor.model import build_model
from polyinterp.cubic.regressor.task import (
    STREAM_OOR,
    STREAM_TRAIN,
    STREAM_VAL,
    check_ranges,
    cubic,
    generator,
    sample_inputs,
    sample_out_of_range,
    target,
)
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError, TrainingError
from polyinterp.io import save_parquet, save_torch

log = logging.getLogger(__name__)


def lr_factor(step: int, warmup: int, total: int, final_ratio: float) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine from 1 to ``final_ratio`` at ``total``."""
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    t = min(step, total) / max(total, 1)
    return warm * (final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def relative_mse(model, inputs: torch.Tensor, var_y: float, batch: int = 65536) -> tuple[float, float, float]:
    """(MSE, MSE / var_y, max |error|) of ``model`` on ``inputs`` against the true cubic."""
    model.eval()
    device = next(model.parameters()).device
    sse, max_err, n = 0.0, 0.0, len(inputs)
    for i in range(0, n, batch):
        xb = inputs[i : i + batch].to(device)
        err = (model(xb) - target(xb)).double()
        sse += float((err**2).sum())
        max_err = max(max_err, float(err.abs().max()))
    model.train()
    mse = sse / n
    return mse, mse / var_y, max_err


def _check(params: dict) -> None:
    t = params["train"]
    if t["eval_every"] > t["steps"]:
        raise ConfigError(
            f"config key 'cubic.train.eval_every' ({t['eval_every']}) exceeds cubic.train.steps ({t['steps']});"
            " make it at most the number of steps."
        )
    check_ranges(params["task"]["ranges"])


def train_regressor(params: dict, seed: int):
    """Train one seed. Returns (model, curve rows, checkpoints dict, fit rows, curves rows, meta).

    Runs on torch's threads as the caller set them (the rules give the training steps one thread:
    ``threads: 1``); one and two threads give bit-identical results (bench/README.md, "Cubic threads").
    """
    _check(params)
    tp, task = params["train"], params["task"]
    ranges = task["ranges"]
    device = resolve_device(params["device"])

    val = sample_inputs(tp["val_samples"], ranges, generator(seed, STREAM_VAL))
    oor = sample_out_of_range(tp["val_samples"], ranges, task["out_of_range_expand"], generator(seed, STREAM_OOR))
    var_val = float(target(val).double().var())
    var_oor = float(target(oor).double().var())

    model = build_model(params["model"]["widths"], seed).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=tp["lr"], foreach=True)  # same numbers as the for-loop, fewer ops
    gen = generator(seed, STREAM_TRAIN)
    total = tp["steps"]

    curve, ckpts = [], {"steps": [], "states": [], "val_rel_mse": []}
    running, n_run = 0.0, 0
    reached_step = None
    t0 = time.time()
    step = 0

    def evaluate(step):
        nonlocal running, n_run, reached_step
        _, rel, _ = relative_mse(model, val, var_val)
        _, rel_oor, _ = relative_mse(model, oor, var_oor)
        lr = opt.param_groups[0]["lr"]
        if n_run:
            curve.append({"step": step, "split": "train", "rel_mse": running / n_run, "lr": lr})
        curve.append({"step": step, "split": "val", "rel_mse": rel, "lr": lr})
        curve.append({"step": step, "split": "out_of_range", "rel_mse": rel_oor, "lr": lr})
        ckpts["steps"].append(step)
        ckpts["states"].append({k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
        ckpts["val_rel_mse"].append(rel)
        if reached_step is None and rel <= tp["target_rel_mse"]:
            reached_step = step
        log.info("step %d  val rel-MSE %.3e  out-of-range %.3e  lr %.2e  (%.1f s)", step, rel, rel_oor, lr, time.time() - t0)
        running, n_run = 0.0, 0
        return rel

    evaluate(0)
    while step < total:
        for group in opt.param_groups:
            group["lr"] = tp["lr"] * lr_factor(step, tp["warmup_steps"], total, tp["final_lr_ratio"])
        xb = sample_inputs(tp["batch_size"], ranges, gen).to(device)
        loss = ((model(xb) - target(xb)) ** 2).mean() / var_val
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        running += float(loss.detach()) if step % 10 == 0 or step == total else 0.0
        n_run += 1 if step % 10 == 0 or step == total else 0
        if step % 200 == 0 and not math.isfinite(float(loss.detach())):
            raise TrainingError(
                f"cubic training (seed {seed}) diverged at step {step} (loss {float(loss)}); "
                "lower cubic.train.lr or raise cubic.train.warmup_steps."
            )
        if step % tp["eval_every"] == 0 or step == total:
            rel = evaluate(step)
            if tp["stop_at_target"] and rel <= tp["target_rel_mse"]:
                log.info("target rel-MSE %.1e met at step %d; stopping (stop_at_target)", tp["target_rel_mse"], step)
                break
    seconds = time.time() - t0
    model.eval()

    fit = []
    for split, inputs, var in (("val", val, var_val), ("out_of_range", oor, var_oor)):
        mse, rel, max_err = relative_mse(model, inputs, var)
        fit.append({
            "split": split, "n": len(inputs), "mse": mse, "var_y": var, "rel_mse": rel, "max_abs_err": max_err,
        })
    final_rel = fit[0]["rel_mse"]
    check_alive(model, val.to(device), final_rel, seed, step, tp)
    met = final_rel <= tp["target_rel_mse"]
    for row in fit:
        row.update({
            "target_rel_mse": float(tp["target_rel_mse"]), "target_met": bool(met), "steps_trained": step,
            "first_step_at_target": -1 if reached_step is None else int(reached_step), "train_seconds": seconds,
        })
    if met:
        log.info("final validation rel-MSE %.3e <= target %.1e (first met at step %s)", final_rel, tp["target_rel_mse"], reached_step)
    else:
        log.warning(
            "TARGET NOT MET: final validation rel-MSE %.3e > target %.1e after %d steps "
            "(raise cubic.train.steps to train longer)", final_rel, tp["target_rel_mse"], step,
        )

    rows = []
    r = check_ranges(ranges)
    xs = torch.linspace(r["x"][0], r["x"][1], tp["curve_points"])
    with torch.no_grad():
        for i, (a, b) in enumerate(tp["curves"]):
            inp = torch.stack([xs, torch.full_like(xs, a), torch.full_like(xs, b)], 1)
            y_model = model(inp.to(device)).cpu()
            inside = r["a"][0] <= a <= r["a"][1] and r["b"][0] <= b <= r["b"][1]
            for xv, yt, ym in zip(xs.tolist(), cubic(xs, torch.tensor(a), torch.tensor(b)).tolist(), y_model.tolist()):
                rows.append({"curve": i, "a": float(a), "b": float(b), "in_range": inside, "x": xv, "y_true": yt, "y_model": ym})

    meta = {
        "widths": list(model.widths), "seed": seed, "steps_trained": step, "val_rel_mse": final_rel,
        "target_met": bool(met), "var_y": var_val, "ranges": {k: list(v) for k, v in r.items()},
        "config_hash": config_hash(params),
    }
    return model, curve, ckpts, fit, rows, meta


def check_alive(model, inputs: torch.Tensor, rel_mse: float, seed: int, step: int, tp: dict,
                key: str = "cubic.train", what_net: str = "cubic regressor") -> None:
    """Refuse a dead regressor where it happens, naming the keys that cause it (``key``.lr and
    ``key``.warmup_steps: the training section that made ``model``).

    Dead means a hidden layer with no unit active on the validation inputs (the network is then a
    constant) or a validation relative MSE ≥ 1 (no better than predicting the mean). Either way the
    SAE of the next rule would have nothing to read, so this raises instead of warning.
    """
    live = model.live_units(inputs)
    dead = [i for i, n in enumerate(live) if n == 0]
    if not dead and rel_mse < 1.0:
        return
    widths = model.widths[1:-1]
    what = (
        "; ".join(f"hidden layer {i + 1} (width {widths[i]}) has no unit active on the validation inputs" for i in dead)
        if dead else f"validation rel-MSE {rel_mse:.3g} >= 1, no better than predicting the mean"
    )
    raise TrainingError(
        f"{what_net} (seed {seed}) is dead after {step} steps: {what}. Usually the rate was too high "
        f"at the start: lower {key}.lr (now {tp['lr']}) or raise {key}.warmup_steps (now "
        f"{tp['warmup_steps']})."
    )


def train_step(*, model: str, checkpoints: str, curve: str, fit: str, curves: str, params: dict) -> None:
    """Rule ``cubic_train``: train one seed; write ``model``, the eval ``checkpoints`` and the
    ``curve`` (training curve), ``fit`` and ``curves`` (fit curves) Parquet tables."""
    seed = int(params["seed"])
    net, curve_rows, ckpts, fit_rows, curve_points, meta = train_regressor(params, seed)
    save_torch({"state": {k: v.cpu() for k, v in net.state_dict().items()}, **meta}, model)
    save_torch({**ckpts, "widths": meta["widths"], "seed": seed}, checkpoints)

    def frame(rows):
        df = pd.DataFrame(rows)
        df.insert(0, "seed", seed)
        return df

    save_parquet(frame(curve_rows), curve)
    save_parquet(frame(fit_rows), fit)
    save_parquet(frame(curve_points), curves)

"""Capacity: the SAE pipeline on regressors of other widths, one row per (seed, variant).

A variant of ``cubic.capacity.variants`` is another regressor (its own ``widths``, from 3 inputs to
1 output), trained by rule ``cubic_capacity_train`` with ``cubic.train``'s settings (steps
``cubic.capacity.train_steps``) into ``results/cubic/seed{seed}/capacity_{name}/``; the activations,
SAE (``cubic.sae``'s size for every variant), band and slope-search rules then read its last hidden
layer there, as the view ``/capacity_{name}`` (:mod:`polyinterp.cubic.views.regressor_views`). A variant with
``cubic.model.widths`` and ``cubic.train.steps`` is today's regressor: its row reads today's files.

``capacity_summary_step`` condenses each variant: its widths as saved in its model file, parameter
count, validation and out-of-range rel-MSE, and the columns of :func:`polyinterp.cubic.views.summary.view_row`
(SAE R², band count, median c, best slope search).
"""

from __future__ import annotations

import logging

import pandas as pd

from polyinterp.cubic.views.summary import _check, _seed_of, view_row
from polyinterp.cubic.views.regressor_views import n_params
from polyinterp.errors import DataError
from polyinterp.io import load_parquet, load_torch, save_parquet

log = logging.getLogger(__name__)


def widths_text(widths) -> str:
    """Layer widths as the table stores them: ``"3-64-64-64-8-1"``."""
    return "-".join(str(int(w)) for w in widths)


def capacity_summary_step(*, model: list[str], fit: list[str], metrics: list[str], slopes: list[str], table: str,
                          params: dict) -> None:
    """Rule ``cubic_capacity_summary``: one ``table`` row per (seed, variant) of ``params["rows"]``
    (``seed``, ``variant``, ``widths``, ``is_model``, ``steps``; in the order of the files) from each
    variant's ``model`` file (its widths), training ``fit`` table, SAE ``metrics`` and ``slopes``."""
    rows_in = params["rows"]
    _check(rows_in, model=model, fit=fit, metrics=metrics, slopes=slopes)
    rows = []
    for key, model_path, fit_path, metrics_path, slopes_path in zip(rows_in, model, fit, metrics, slopes):
        seed, name = int(key["seed"]), str(key["variant"])
        saved = [int(w) for w in load_torch(model_path)["widths"]]
        if saved != [int(w) for w in key["widths"]]:
            raise DataError(f"{model_path} holds a regressor of widths {saved}, but capacity variant {name!r} has widths "
                            f"{list(key['widths'])} (config key 'cubic.capacity.variants'); rebuild it with the "
                            f"cubic_capacity_train rule.")
        f, m, s = load_parquet(fit_path), load_parquet(metrics_path), load_parquet(slopes_path)
        _seed_of(f, fit_path, seed)
        _seed_of(m, metrics_path, seed)
        val, oor = f[f.split == "val"].iloc[0], f[f.split == "out_of_range"].iloc[0]
        rows.append({
            "seed": seed, "variant": name, "widths": widths_text(saved), "n_hidden": len(saved) - 2,
            "last_width": saved[-2], "n_params": n_params(saved), "is_model": bool(key["is_model"]),
            "steps_trained": int(val.steps_trained), "val_rel_mse": float(val.rel_mse),
            "rel_mse_out_of_range": float(oor.rel_mse), "target_met": bool(val.target_met),
            "train_seconds": float(val.train_seconds), **view_row(m, s),
        })
        r = rows[-1]
        log.info("seed %d variant %s (%s, %d parameters): val rel-MSE %.2e, SAE R² %.4f, %d band latents, "
                 "median c %.4f", seed, name, r["widths"], r["n_params"], r["val_rel_mse"], r["r2_heldout"],
                 r["n_band_latents"], r["median_c"])
    save_parquet(pd.DataFrame(rows), table)

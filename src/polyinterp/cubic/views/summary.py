"""Per-layer and across-training summaries: one row per (seed, layer) and per (seed, checkpoint step).

Each row condenses one view's SAE pipeline (see :mod:`polyinterp.cubic.views.regressor_views`): the SAE's held-out
R², L0 and dead fraction and the regressor's relative MSE with the reconstruction spliced in
(``sae_metrics.parquet``); the band latents and their median slope-search c, the same rule as
``slopes_per_seed.parquet`` (:func:`polyinterp.cubic.probes.bands.summarize_slopes`); and the best slope
search over every live latent, whether or not it passed the band criteria: the highest held-out R²
of a function of x + c·a (``best_slope_r2``, at ``best_slope_c``) and of x + a/3
(``best_r2_at_cardano``). Per layer also the top mean landmark correlation of each kind.
"""

from __future__ import annotations

import logging
import math

import pandas as pd

from polyinterp.cubic.probes.bands import CARDANO_C, summarize_slopes
from polyinterp.cubic.probes.landmarks import KINDS
from polyinterp.errors import DataError
from polyinterp.io import load_parquet, save_parquet

log = logging.getLogger(__name__)

SAE_COLUMNS = ("latents", "k", "r2_heldout", "l0_heldout", "dead_frac_heldout", "rel_mse_model", "rel_mse_spliced")


def _max(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.max()) if len(s) else float("nan")


def view_row(metrics: pd.DataFrame, slopes: pd.DataFrame) -> dict:
    """One view's SAE metrics (one-row table) and slope-search table → the summary columns."""
    m = metrics.iloc[0]
    row = {c: (int(m[c]) if c in ("latents", "k") else float(m[c])) for c in SAE_COLUMNS}
    per_seed, _ = summarize_slopes([slopes])
    s = per_seed.iloc[0]
    band = slopes[slopes.is_band]
    fit = slopes.dropna(subset=["r2_best"])
    best = fit.loc[fit.r2_best.idxmax()] if len(fit) else None
    row.update({
        "n_live_latents": int(len(slopes)), "n_band_latents": int(s.n_band_latents), "band_latents": s.band_latents,
        "median_c": float(s.median_c), "mean_c": float(s.mean_c), "median_r2_band": float(s.median_r2),
        "median_c_grad": float(band.c_grad_median.median()) if len(band) else float("nan"),
        "best_slope_r2": float("nan") if best is None else float(best.r2_best),
        "best_slope_c": float("nan") if best is None else float(best.c_best),
        "best_slope_latent": -1 if best is None else int(best.latent),
        "best_r2_at_cardano": _max(slopes.r2_at_cardano), "cardano_c": CARDANO_C,
    })
    return row


def _check(rows: list[dict], **tables: list[str]) -> None:
    for name, paths in tables.items():
        if len(paths) != len(rows):
            raise DataError(f"{len(paths)} {name} tables for {len(rows)} summary rows; the rule must pass one per row.")


def _seed_of(df: pd.DataFrame, path: str, seed: int) -> None:
    if len(df) and int(df.seed.iloc[0]) != seed:
        raise DataError(f"{path} holds seed {int(df.seed.iloc[0])}, not {seed}; the rule passed its files out of order.")


def layers_summary_step(*, metrics: list[str], slopes: list[str], ranking: list[str], table: str, params: dict) -> None:
    """Rule ``cubic_layers_summary``: one ``table`` row per (seed, hidden layer) of ``params["rows"]``
    (``seed``, ``layer``, ``width``, ``is_last``; in the order of the files) from each view's SAE
    ``metrics``, ``slopes`` and landmark ``ranking`` tables."""
    rows_in = params["rows"]
    _check(rows_in, metrics=metrics, slopes=slopes, ranking=ranking)
    rows = []
    for key, mp, sp, rp in zip(rows_in, metrics, slopes, ranking):
        m, s, r = load_parquet(mp), load_parquet(sp), load_parquet(rp)
        _seed_of(m, mp, int(key["seed"]))
        row = {"seed": int(key["seed"]), "layer": int(key["layer"]), "width": int(key["width"]),
               "is_last": bool(key["is_last"]), **view_row(m, s)}
        for kind in KINDS:
            row[f"top_corr_{kind}"] = _max(r[r.kind == kind].mean_corr)
        rows.append(row)
        log.info("seed %d layer %d (%d wide): SAE R² %.4f, %d band latents, median c %.4f, best slope R² %.3f at c %.3f",
                 row["seed"], row["layer"], row["width"], row["r2_heldout"], row["n_band_latents"], row["median_c"],
                 row["best_slope_r2"], row["best_slope_c"])
    save_parquet(pd.DataFrame(rows), table)


def training_summary_step(*, metrics: list[str], slopes: list[str], curve: list[str], table: str, params: dict) -> None:
    """Rule ``cubic_training_summary``: one ``table`` row per (seed, checkpoint step) of
    ``params["rows"]`` (``seed``, ``step``, ``is_final``; in the order of the files) from each view's
    SAE ``metrics`` and ``slopes`` tables, with the regressor's validation rel-MSE at that step from
    each seed's training ``curve``."""
    rows_in = params["rows"]
    _check(rows_in, metrics=metrics, slopes=slopes)
    curves = pd.concat([load_parquet(p) for p in curve], ignore_index=True)
    val = curves[curves.split == "val"].set_index(["seed", "step"]).rel_mse
    rows = []
    for key, mp, sp in zip(rows_in, metrics, slopes):
        seed, step = int(key["seed"]), int(key["step"])
        m, s = load_parquet(mp), load_parquet(sp)
        _seed_of(m, mp, seed)
        rows.append({"seed": seed, "step": step, "is_final": bool(key["is_final"]),
                     "val_rel_mse": float(val.get((seed, step), math.nan)), **view_row(m, s)})
        r = rows[-1]
        log.info("seed %d step %d: val rel-MSE %.2e, SAE R² %.4f, %d band latents, median c %.4f, best slope R² %.3f",
                 seed, step, r["val_rel_mse"], r["r2_heldout"], r["n_band_latents"], r["median_c"], r["best_slope_r2"])
    save_parquet(pd.DataFrame(rows), table)

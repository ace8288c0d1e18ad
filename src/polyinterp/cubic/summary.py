"""Headline numbers across seeds: regressor fit, SAE quality, band latents and median slope vs 1/3."""

from __future__ import annotations

import logging

import pandas as pd

from polyinterp.cubic.probes.bands import CARDANO_C, summarize_slopes
from polyinterp.io import load_parquet, save_parquet

log = logging.getLogger(__name__)


def summary_step(*, fit: list[str], sae: list[str], slopes: list[str], summary: str, seeds: str, spread: str) -> None:
    """Rule ``cubic_summary``: from every seed's ``fit``, ``sae`` metrics and ``slopes`` tables, one
    ``summary`` row per seed, the per-seed slope summary (``seeds``) and its ``spread`` across seeds."""
    fits = pd.concat([load_parquet(p) for p in fit], ignore_index=True)
    saes = pd.concat([load_parquet(p) for p in sae], ignore_index=True)
    bests = [load_parquet(p) for p in slopes]
    per_seed, spread_df = summarize_slopes(bests)
    val = fits[fits.split == "val"].set_index("seed")
    oor = fits[fits.split == "out_of_range"].set_index("seed")
    rows = []
    for seed in sorted(val.index):
        s = saes[saes.seed == seed].iloc[0]
        sl = per_seed[per_seed.seed == seed].iloc[0]
        rows.append({
            "seed": int(seed), "rel_mse_val": float(val.loc[seed, "rel_mse"]),
            "rel_mse_out_of_range": float(oor.loc[seed, "rel_mse"]),
            "target_rel_mse": float(val.loc[seed, "target_rel_mse"]), "target_met": bool(val.loc[seed, "target_met"]),
            "steps_trained": int(val.loc[seed, "steps_trained"]),
            "sae_r2_heldout": float(s.r2_heldout), "sae_l0": float(s.l0_heldout),
            "sae_dead_frac": float(s.dead_frac_heldout), "rel_mse_spliced": float(s.rel_mse_spliced),
            "n_band_latents": int(sl.n_band_latents), "band_latents": sl.band_latents,
            "median_c": float(sl.median_c), "cardano_c": CARDANO_C,
        })
    summary_df = pd.DataFrame(rows)
    for r in rows:
        log.info("seed %d: rel-MSE %.2e (target met: %s), SAE R² %.4f, L0 %.2f, dead %.3f, bands [%s], median c %.4f",
                 r["seed"], r["rel_mse_val"], r["target_met"], r["sae_r2_heldout"], r["sae_l0"], r["sae_dead_frac"],
                 r["band_latents"], r["median_c"])
    save_parquet(summary_df, summary)
    save_parquet(per_seed, seeds)
    save_parquet(spread_df, spread)

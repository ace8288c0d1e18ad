"""Band-threshold sensitivity: band count and median slope c over a grid of the four band thresholds.

The band criteria (:func:`polyinterp.cubic.probes.bands.detect_bands`) were set after looking at seed 0. A
latent is a band when every b slice has a finite direction with |c| ≤ ``c_max`` and

    min_active_frac ≥ θ_active,   min_coherence ≥ θ_coherence,
    c_grad_spread ≤ θ_c_tol,      b_invariance_r2 ≥ θ_invariance        (NaN scores fail).

Every score on the left is saved per latent (``band_latents.parquet``; the direction test from the
per-slice ``band_slices.parquet``) and none depends on a threshold, so re-thresholding them gives
exactly the bands detection would have found: no model, SAE or grid is recomputed. Raising
``coherence_min``, ``invariance_min`` or ``min_active_frac`` or lowering ``c_tol`` only removes
bands. The median c is the slope search's best c (``slopes.parquet``, as in the cubic summary) over
the re-thresholded bands, beside the median structure-tensor c.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pandas as pd

from polyinterp.errors import ConfigError, DataError

log = logging.getLogger(__name__)
CRITERIA = ("coherence_min", "c_tol", "invariance_min", "min_active_frac")


def latent_scores(latents: pd.DataFrame, slices: pd.DataFrame, c_max: float) -> pd.DataFrame:
    """Per latent: the threshold-free scores of ``latents`` (``band_latents.parquet``) and
    ``direction_ok`` (every slice of ``slices`` has a finite c with |c| ≤ ``c_max``)."""
    c = slices.c_grad.to_numpy(np.float64)
    finite = np.isfinite(c)
    ok = pd.Series(finite & (np.abs(np.where(finite, c, 0.0)) <= c_max), index=slices.index)
    direction = ok.groupby(slices.latent).all().rename("direction_ok")
    cols = ["latent", "min_coherence", "c_grad_spread", "b_invariance_r2", "min_active_frac", "c_grad_median"]
    out = latents[cols].merge(direction, left_on="latent", right_index=True, how="left")
    out["direction_ok"] = out["direction_ok"].fillna(False).astype(bool)
    return out.reset_index(drop=True)


def band_mask(scores: pd.DataFrame, *, coherence_min: float, c_tol: float, invariance_min: float,
              min_active_frac: float) -> np.ndarray:
    """Boolean band flag per row of ``scores`` (:func:`latent_scores`) at these thresholds: the rule of
    :func:`polyinterp.cubic.probes.bands.detect_bands` applied to its saved scores."""
    spread = scores.c_grad_spread.to_numpy(np.float64)
    inv = scores.b_invariance_r2.to_numpy(np.float64)
    with np.errstate(invalid="ignore"):
        return (scores.direction_ok.to_numpy(bool)
                & (scores.min_active_frac.to_numpy(np.float64) >= min_active_frac)
                & (scores.min_coherence.to_numpy(np.float64) >= coherence_min)
                & np.isfinite(spread) & (spread <= c_tol)
                & np.isfinite(inv) & (inv >= invariance_min))


def grid_axes(grid: dict, configured: dict) -> dict[str, list[float]]:
    """Each criterion's values: ``grid[name]`` with the configured value added, sorted ascending."""
    axes = {}
    for name in CRITERIA:
        values = grid.get(name)
        if not values:
            raise ConfigError(f"config key 'cubic.thresholds.{name}' is missing or empty; give a list of values.")
        axes[name] = sorted({float(v) for v in values} | {float(configured[name])})
    return axes


def threshold_table(scores: pd.DataFrame, c_best: pd.Series, axes: dict[str, list[float]],
                    configured: dict) -> pd.DataFrame:
    """One row per combination of the ``axes`` values: the thresholds, ``at_config`` (all four are
    the configured ones), ``n_band_latents``, ``band_latents`` ("3,7"), ``median_c`` (median slope-
    search c of the bands, ``c_best`` indexed by latent; NaN without bands or without a c) and
    ``median_c_grad`` (median structure-tensor c)."""
    ids = scores.latent.to_numpy()
    cb = c_best.reindex(ids).to_numpy(np.float64)
    cg = scores.c_grad_median.to_numpy(np.float64)
    rows = []
    for values in itertools.product(*(axes[n] for n in CRITERIA)):
        th = dict(zip(CRITERIA, values))
        mask = band_mask(scores, **th)
        c_sel, g_sel = cb[mask], cg[mask]
        c_sel, g_sel = c_sel[np.isfinite(c_sel)], g_sel[np.isfinite(g_sel)]
        rows.append({
            **th, "at_config": all(th[n] == float(configured[n]) for n in CRITERIA),
            "n_band_latents": int(mask.sum()), "band_latents": ",".join(str(int(j)) for j in sorted(ids[mask])),
            "median_c": float(np.median(c_sel)) if len(c_sel) else float("nan"),
            "median_c_grad": float(np.median(g_sel)) if len(g_sel) else float("nan"),
        })
    return pd.DataFrame(rows)


def thresholds_step(*, bands: str, slices: str, slopes: str, table: str, params: dict) -> None:
    """Rule ``cubic_band_thresholds``: band count and median c (``table``) over every combination of
    the ``params['grid']`` thresholds (each with the configured ``params['bands']`` value added),
    from one seed's saved per-latent scores (``bands``, ``slices``) and slope search (``slopes``).
    Raises DataError if re-thresholding at the configured values does not give ``bands``' is_band."""
    from polyinterp.io import load_parquet, save_parquet

    seed = int(params["seed"])
    configured = params["bands"]
    axes = grid_axes(params["grid"], configured)
    latents = load_parquet(bands)
    scores = latent_scores(latents, load_parquet(slices), float(configured["c_max"]))
    here = band_mask(scores, **{n: float(configured[n]) for n in CRITERIA})
    saved = latents.set_index("latent").is_band.reindex(scores.latent).to_numpy(bool)
    if not np.array_equal(here, saved):
        raise DataError(f"{bands}: its is_band flags differ from the band rule applied to its own scores at the "
                        "configured cubic.bands thresholds; rebuild it with the cubic_band_detection rule.")
    best = load_parquet(slopes)
    out = threshold_table(scores, best.set_index("latent").c_best, axes, configured)
    out.insert(0, "seed", seed)
    out["c_max"] = float(configured["c_max"])
    counts = out.n_band_latents
    log.info("seed %d: %d threshold combinations; band latents %d–%d (configured: %d); median c %.3f–%.3f",
             seed, len(out), counts.min(), counts.max(), int(out[out.at_config].n_band_latents.iloc[0]),
             np.nanmin(out.median_c) if out.median_c.notna().any() else float("nan"),
             np.nanmax(out.median_c) if out.median_c.notna().any() else float("nan"))
    save_parquet(out, table)

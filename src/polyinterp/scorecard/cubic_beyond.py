"""Scorecard rows for the cubic study beyond the blog: joint clamping (stretch or shift?),
SAEs on every hidden layer and across training, capacity, the single-polynomial grid and the
band-threshold sensitivity, each read from its table, one value per seed.

Where the blog made an observation (a vertical stretch under clamping, median c ≈ 0.3, one-
polynomial latents that follow the x range) the row has its reference and a verdict as in
:mod:`polyinterp.scorecard`. Where the blog leaves the question open the reference says so and the
verdict is ``measured``: ours is the answer, there is nothing to compare it with. A table the run did
not build (``None``) gives no rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from polyinterp.scorecard.claim import Claim, Within

STUDY = "cubic+"
OPEN = "open in the blog"


def _per_seed(table: pd.DataFrame, value) -> list[float]:
    """``value(rows of one seed)`` for each seed, in seed order."""
    return [float(value(g)) for _, g in table.groupby("seed", sort=True)]


def _share(mask: pd.Series) -> float:
    return float(mask.mean()) if len(mask) else math.nan


def joint_clamp_claims(fits: pd.DataFrame) -> list[Claim]:
    """All band latents clamped together (intervention ``bands``): the share of clamped polynomials
    whose curve is a vertical stretch (the blog's observation) and a horizontal shift (the Cardano
    reading's prediction), verdicts of :func:`polyinterp.cubic.interventions.stretch_shift.verdict`."""
    sub = fits[(fits.intervention == "bands") & (fits.verdict != "no_effect")]
    if sub.empty:
        return []
    where = "intervention `bands` (all band latents × factor), clamped polynomials where it has an effect"
    seeds = sorted(int(x) for x in sub.seed.unique())
    return [
        Claim(STUDY, "clamping band latents stretches the curve vertically", "blog: a vertical stretch", "> 0.5",
              "share of the clamped polynomials with an effect whose verdict is `stretch`", where,
              _per_seed(sub, lambda g: _share(g.verdict == "stretch")), Within(lo=0.5, strict=True), seeds=seeds),
        Claim(STUDY, "clamping band latents does not shift the curve", "blog: no horizontal shift (the Cardano "
              "reading would predict one by ≈ a/3)", "< 0.5 (the blog's words: none)",
              "share of the clamped polynomials with an effect whose verdict is `shift`; the blog's observation "
              "(no shift) is reproduced when fewer than half shift", where,
              _per_seed(sub, lambda g: _share(g.verdict == "shift")), Within(hi=0.5, strict=True), seeds=seeds),
    ]


def layer_claims(layers: pd.DataFrame) -> list[Claim]:
    """Does the x + c·a coordinate appear before the last hidden layer? The number of earlier layers
    with band latents, and the earliest layer with any."""
    early = layers[~layers.is_last]
    if early.empty:
        return []
    first = _per_seed(layers, lambda g: g[g.n_band_latents > 0].layer.min() if (g.n_band_latents > 0).any() else math.nan)
    return [
        Claim(STUDY, "hidden layers before the last with band latents", OPEN, "—",
              "per seed, the number of SAE'd layers before the last with ≥ 1 band latent",
              f"layers {', '.join(str(int(v)) for v in sorted(early.layer.unique()))}",
              _per_seed(early, lambda g: (g.n_band_latents > 0).sum()), "measured"),
        Claim(STUDY, "earliest hidden layer with band latents", OPEN, "—",
              "per seed, the lowest layer (1 = nearest the input) whose SAE has a band latent",
              f"layers {', '.join(str(int(v)) for v in sorted(layers.layer.unique()))}", first, "measured"),
    ]


def training_claims(training: pd.DataFrame) -> list[Claim]:
    """When does the coordinate emerge? The first saved checkpoint with band latents."""
    if training.step.nunique() < 2:
        return []
    return [Claim(STUDY, "first checkpoint with band latents", OPEN, "—",
                  "per seed, the earliest SAE'd regressor checkpoint (training step) with ≥ 1 band latent",
                  f"steps {', '.join(str(int(v)) for v in sorted(training.step.unique()))}",
                  _per_seed(training, lambda g: g[g.n_band_latents > 0].step.min()
                            if (g.n_band_latents > 0).any() else math.nan), "measured")]


def capacity_claims(capacity: pd.DataFrame) -> list[Claim]:
    """Band latents at every regressor width, and the median band c of each variant against the
    blog's ≈ 0.3."""
    where = ", ".join(dict.fromkeys(capacity.variant))
    out = [Claim(STUDY, "band latents at every regressor width", OPEN, "—",
                 "per seed, the fewest band latents over the capacity variants", f"variants {where}",
                 _per_seed(capacity, lambda g: g.n_band_latents.min()), "measured")]
    for variant, g in capacity.groupby("variant", sort=False):
        widths = g.widths.iloc[0]
        out.append(Claim(STUDY, f"median band slope c ≈ 0.3 at widths {widths}", "0.3 (Cardano: 1/3)", "± 0.1",
                         "per-seed median best c over band latents of this variant's regressor",
                         f"capacity variant {variant}", _per_seed(g, lambda s: s.median_c.iloc[0]),
                         lambda m: abs(m - 0.3) <= 0.1))
    return out


def grid_claims(grid: pd.DataFrame) -> list[Claim]:
    """One-polynomial networks against the (x, a, b) regressor at the same (a, b): the share of
    live latents tracking the x range (the blog's early result) and the landmark enrichment of both."""
    single, joint = grid[grid.network == "single"], grid[grid.network == "joint"]
    n = f"{grid[['ia', 'ib']].drop_duplicates().shape[0]} (a, b)"
    return [
        Claim(STUDY, "one-polynomial networks' latents track the x range, not the landmarks",
              "blog (early result): the x range", "enrichment ≤ 1",
              "per seed, the median over the grid of the landmark enrichment: (share of live latents peaking "
              "within bump_width of a landmark) / (share of the x range that is); ≤ 1: no more than chance",
              f"single-polynomial grid, {n}", _per_seed(single, lambda g: g.landmark_enrichment.median()),
              lambda m: m <= 1.0),
        Claim(STUDY, "one-polynomial networks: share of latents whose range score beats the landmark score", OPEN,
              "—", "per seed, the mean over the grid of that share (a maximum over many intervals against four "
              "templates: compare networks, not the share with 0.5)", f"single-polynomial grid, {n}",
              _per_seed(single, lambda g: g.frac_tracks_range.mean()), "measured"),
        Claim(STUDY, "landmark enrichment, (x, a, b) regressor on the same lines", OPEN, "—",
              "as the first grid row, the (x, a, b) regressor's SAE read at each grid (a, b)",
              f"single-polynomial grid, {n}", _per_seed(joint, lambda g: g.landmark_enrichment.median()), "measured"),
    ]


def threshold_claims(thresholds: pd.DataFrame) -> list[Claim]:
    """How much the band count and the median c depend on the four band thresholds."""
    n = int(thresholds.groupby("seed").size().max())
    where = f"band-threshold grid ({n} combinations)"
    return [
        Claim(STUDY, "threshold combinations that keep band latents", OPEN, "—",
              "per seed, the share of threshold combinations with ≥ 1 band latent", where,
              _per_seed(thresholds, lambda g: _share(g.n_band_latents > 0)), "measured"),
        Claim(STUDY, "spread of the median c over the threshold grid", OPEN, "—",
              "per seed, max − min of the bands' median c over the combinations that have bands", where,
              _per_seed(thresholds, lambda g: np.ptp(g.median_c.dropna()) if g.median_c.notna().any() else math.nan),
              "measured"),
    ]


def beyond_claims(*, joint_clamp: pd.DataFrame | None = None, layers: pd.DataFrame | None = None,
                  training: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None,
                  grid: pd.DataFrame | None = None, thresholds: pd.DataFrame | None = None) -> list[Claim]:
    """Every row above for the tables given (``None``: not built by this run, no rows)."""
    out: list[Claim] = []
    for table, claims in ((joint_clamp, joint_clamp_claims), (layers, layer_claims), (training, training_claims),
                          (capacity, capacity_claims), (grid, grid_claims), (thresholds, threshold_claims)):
        if table is not None and len(table):
            out += claims(table)
    return out

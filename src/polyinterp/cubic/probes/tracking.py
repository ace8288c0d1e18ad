"""Does a latent track the x range or the polynomial's landmarks? Scores of latent profiles along x
at one fixed (a, b).

For a profile z(x) sampled on a grid ``xs`` over the x range:

- **range score**: the highest Pearson correlation of z with the indicator of one x sub-interval,
  over every interval made of contiguous bins of ``x_bins`` equal-width bins of the x range (the whole
  range excluded: its indicator is constant), and that interval [range_lo, range_hi). A latent that
  fires on one stretch of x, flat or ramped, scores high; 1 exactly for an indicator of such an
  interval.
- **landmark scores**: the Pearson correlation of z with the Gaussian bumps at the polynomial's real
  roots, critical points, inflection point and all of them (:mod:`polyinterp.cubic.probes.landmarks`, one
  template per kind, NaN where the kind has no landmark near the x range), and the best kind.

A latent *tracks the x range* when its range score exceeds its best landmark correlation. The range
score is a maximum over x_bins·(x_bins + 1)/2 − 1 intervals and the landmark score over 4 templates,
so the two are not on an equal footing for one network; comparing networks scored the same way is.

- **landmark enrichment** (a score on equal footing): the x where a latent peaks, its distance to the
  nearest landmark (any kind) and whether that is within ``bump_width``; over a network's live latents,
  the share that peak near a landmark divided by the share of the x range within ``bump_width`` of a
  landmark (the share expected if peaks fell uniformly on the range). 1 means no preference for
  landmarks; a landmark-reading network scores well above 1, a network that tiles the x range ≈ 1.

Silent latents (zero on the whole grid) score NaN and do not track anything.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from polyinterp.cubic.probes.landmarks import KINDS, bump_template, cubic_landmarks, pearson_columns
from polyinterp.errors import ConfigError


def bin_index(xs: np.ndarray, x_range, n_bins: int) -> np.ndarray:
    """Bin of each x among ``n_bins`` equal-width bins of ``x_range`` (the top end in the last bin)."""
    lo, hi = (float(v) for v in x_range)
    return np.clip(np.floor((np.asarray(xs, dtype=np.float64) - lo) / (hi - lo) * n_bins).astype(int), 0, n_bins - 1)


def interval_indicators(xs: np.ndarray, x_range, n_bins: int):
    """Every interval of contiguous bins but the whole range: (indicators [n_intervals, len(xs)] as
    float64, first bin [n_intervals], end bin [n_intervals], exclusive), ordered by (first, end)."""
    if n_bins < 2:
        raise ConfigError(f"config key 'cubic.grid.score.x_bins' is {n_bins}; at least 2 bins are needed "
                          f"(one bin's indicator is the whole range, a constant).")
    idx = bin_index(xs, x_range, n_bins)
    first, end = zip(*[(i, j) for i in range(n_bins) for j in range(i + 1, n_bins + 1) if (i, j) != (0, n_bins)])
    first, end = np.array(first), np.array(end)
    ind = ((idx[None, :] >= first[:, None]) & (idx[None, :] < end[:, None])).astype(np.float64)
    return ind, first, end


def range_scores(profiles: np.ndarray, xs: np.ndarray, x_range, n_bins: int, eps: float = 1e-10):
    """Per column of ``profiles`` [n, m]: (best interval correlation [m], its low end [m], its high
    end [m]); NaN for a column constant along x. An interval with no grid point is never chosen."""
    z = np.asarray(profiles, dtype=np.float64)
    ind, first, end = interval_indicators(xs, x_range, n_bins)
    zc = z - z.mean(0, keepdims=True)
    ic = ind - ind.mean(1, keepdims=True)
    zn, inorm = np.sqrt((zc**2).sum(0)), np.sqrt((ic**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = (ic @ zc) / (inorm[:, None] * zn[None, :])  # [n_intervals, m]
    corr[inorm < eps] = -np.inf  # an interval holding no (or every) grid point
    best = np.argmax(corr, axis=0)
    score = corr[best, np.arange(z.shape[1])]
    lo, hi = (float(v) for v in x_range)
    width = (hi - lo) / n_bins
    low, high = lo + first[best] * width, lo + end[best] * width
    dead = zn < eps * max(1.0, float(np.abs(z).max(initial=0.0)))
    score, low, high = (np.where(dead | ~np.isfinite(score), np.nan, v) for v in (score, low, high))
    return np.clip(score, -1.0, 1.0), low, high


def landmark_scores(profiles: np.ndarray, xs: np.ndarray, a: float, b: float, width: float) -> dict[str, np.ndarray]:
    """Per landmark kind (``KINDS``): Pearson correlation [m] of each column of ``profiles`` with the
    bumps at the landmarks of x³ + a·x² + b·x."""
    marks = cubic_landmarks(float(a), float(b))
    z = np.asarray(profiles, dtype=np.float64)
    return {kind: pearson_columns(z, bump_template(xs, marks[kind], width)) for kind in KINDS}


def near_landmark_share(x_range, a: float, b: float, width: float) -> float:
    """Share of the x range within ``width`` of a landmark of x³ + a·x² + b·x (the measure of the union
    of [p − width, p + width] over every landmark p, intersected with the range, over its length)."""
    lo, hi = (float(v) for v in x_range)
    spans = sorted((max(lo, p - width), min(hi, p + width)) for p in cubic_landmarks(float(a), float(b))["all"])
    covered, end = 0.0, lo
    for s, e in spans:
        s = max(s, end)
        if e > s:
            covered, end = covered + e - s, e
    return covered / (hi - lo)


def peak_landmark_distance(profiles: np.ndarray, xs: np.ndarray, a: float, b: float):
    """Per column of ``profiles`` [n, m]: (x of its maximum [m], distance from there to the nearest
    landmark [m]); NaN for a column that is nowhere positive, distance inf when no landmark exists."""
    z = np.asarray(profiles, dtype=np.float64)
    xs = np.asarray(xs, dtype=np.float64)
    peak = xs[np.argmax(z, axis=0)]
    marks = np.array(cubic_landmarks(float(a), float(b))["all"], dtype=np.float64)
    dist = np.abs(peak[:, None] - marks[None, :]).min(1) if len(marks) else np.full(len(peak), np.inf)
    silent = ~(z > 0).any(0)
    return np.where(silent, np.nan, peak), np.where(silent, np.nan, dist)


def score_latents(profiles: np.ndarray, xs: np.ndarray, x_range, a: float, b: float, n_bins: int,
                  bump_width: float) -> pd.DataFrame:
    """One row per latent (column of ``profiles`` [len(xs), m]): ``active_frac`` (share of the grid
    where it is positive), the range score and interval, the correlation per landmark kind, the best
    (``landmark_corr``, ``landmark_kind``, "" when none is defined), ``tracks_range``, and the peak's
    ``peak_x``, ``landmark_dist`` and ``near_landmark`` (distance ≤ ``bump_width``)."""
    z = np.asarray(profiles, dtype=np.float64)
    r, lo, hi = range_scores(z, xs, x_range, n_bins)
    lm = landmark_scores(z, xs, a, b, bump_width)
    stack = np.stack([lm[k] for k in KINDS], 1)  # [m, kinds]
    defined = np.isfinite(stack).any(1)
    best_k = np.argmax(np.where(np.isfinite(stack), stack, -np.inf), 1)
    best = np.where(defined, stack[np.arange(len(stack)), best_k], np.nan)
    df = pd.DataFrame({"latent": np.arange(z.shape[1]), "active_frac": (z > 0).mean(0), "range_corr": r,
                       "range_lo": lo, "range_hi": hi,
                       **{f"corr_{k}": lm[k] for k in KINDS},
                       "landmark_corr": best,
                       "landmark_kind": np.where(defined, np.array(KINDS, dtype=object)[best_k], "")})
    df["tracks_range"] = np.isfinite(r) & (r > np.where(defined, best, -np.inf))
    df["peak_x"], df["landmark_dist"] = peak_landmark_distance(z, xs, a, b)
    df["near_landmark"] = np.isfinite(df["landmark_dist"].to_numpy()) & (df["landmark_dist"].to_numpy() <= bump_width)
    return df

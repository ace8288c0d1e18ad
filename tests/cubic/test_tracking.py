"""Range and landmark scores of latent profiles along x (polyinterp.cubic.probes.tracking), against hand
computations on planted latents."""

import math

import numpy as np
import pytest

from polyinterp.cubic.probes.landmarks import KINDS
from polyinterp.cubic.probes.tracking import (bin_index, interval_indicators, landmark_scores, near_landmark_share,
                                       peak_landmark_distance, range_scores, score_latents)
from polyinterp.errors import ConfigError

X_RANGE = (-2.0, 2.0)
XS = np.linspace(-2.0, 2.0, 161)
BINS = 8  # bins of width 0.5: edges -2, -1.5, …, 2


def brute_range(z, xs=XS, bins=BINS, lo=-2.0, hi=2.0):
    """The best interval by loops over every (first, end) bin pair and np.corrcoef."""
    width = (hi - lo) / bins
    best = (-np.inf, None, None)
    for i in range(bins):
        for j in range(i + 1, bins + 1):
            if (i, j) == (0, bins):
                continue
            ind = np.array([1.0 if (lo + i * width <= x < lo + j * width) or (j == bins and x == hi) else 0.0
                            for x in xs])
            r = np.corrcoef(z, ind)[0, 1]
            if r > best[0]:
                best = (r, lo + i * width, lo + j * width)
    return best


def test_bins_put_the_top_end_in_the_last_bin():
    idx = bin_index(np.array([-2.0, -1.5, -1.49, 1.99, 2.0]), X_RANGE, BINS)
    assert idx.tolist() == [0, 1, 1, 7, 7]
    ind, first, end = interval_indicators(XS, X_RANGE, BINS)
    assert len(ind) == BINS * (BINS + 1) // 2 - 1 and (0, BINS) not in set(zip(first, end))
    with pytest.raises(ConfigError, match="cubic.grid.score.x_bins"):
        interval_indicators(XS, X_RANGE, 1)


def test_a_planted_interval_indicator_scores_one_at_its_interval():
    z = ((XS >= -1.0) & (XS < 0.5)).astype(float)  # bins 2 … 4
    r, lo, hi = range_scores(z[:, None], XS, X_RANGE, BINS)
    assert r[0] == pytest.approx(1.0, abs=1e-12) and (lo[0], hi[0]) == (-1.0, 0.5)
    df = score_latents(z[:, None], XS, X_RANGE, 0.0, -1.0, BINS, 0.15)
    assert bool(df.tracks_range.iloc[0]) and df.active_frac.iloc[0] == pytest.approx(z.mean())


@pytest.mark.parametrize("z", [np.maximum(XS - 0.3, 0), np.maximum(0.7 - np.abs(XS + 0.4), 0),
                               np.sin(3 * XS) + 0.1 * XS])
def test_range_score_equals_a_hand_computed_best_interval(z):
    r, lo, hi = range_scores(z[:, None], XS, X_RANGE, BINS)
    want, want_lo, want_hi = brute_range(z)
    assert r[0] == pytest.approx(want, abs=1e-12) and (lo[0], hi[0]) == (want_lo, want_hi)


def test_landmark_scores_equal_hand_built_bumps():
    a, b, width = 0.0, -1.0, 0.15  # y = x³ − x: roots 0, ±1; critical ±1/√3; inflection 0
    roots, crit, infl = [-1.0, 0.0, 1.0], [-1 / math.sqrt(3), 1 / math.sqrt(3)], [0.0]
    bump = lambda ps: sum(np.exp(-(XS - p) ** 2 / (2 * width**2)) for p in ps)  # noqa: E731
    z = np.stack([np.maximum(XS - 0.3, 0), bump(roots), bump(crit) + 0.01 * XS], 1)
    got = landmark_scores(z, XS, a, b, width)
    for kind, ps in (("root", roots), ("critical", crit), ("inflection", infl), ("all", roots + crit + infl)):
        want = [np.corrcoef(z[:, j], bump(ps))[0, 1] for j in range(3)]
        np.testing.assert_allclose(got[kind], want, rtol=0, atol=1e-12)
    df = score_latents(z, XS, X_RANGE, a, b, BINS, width)
    # the planted root bumps are the root template: landmark_corr 1 beats any interval
    assert df.landmark_kind.iloc[1] == "root" and df.landmark_corr.iloc[1] == pytest.approx(1.0, abs=1e-12)
    assert not bool(df.tracks_range.iloc[1]) and df.range_corr.iloc[1] < 1
    best = np.nanmax(np.stack([got[k] for k in KINDS]), 0)
    np.testing.assert_allclose(df.landmark_corr, best, rtol=0, atol=0)
    assert (df.tracks_range == (df.range_corr > df.landmark_corr)).all()


def test_a_silent_latent_scores_nan_and_tracks_nothing():
    z = np.stack([np.zeros_like(XS), np.maximum(XS, 0)], 1)
    df = score_latents(z, XS, X_RANGE, 0.5, -1.0, BINS, 0.15)
    silent = df.iloc[0]
    assert np.isnan(silent.range_corr) and np.isnan(silent.landmark_corr) and silent.landmark_kind == ""
    assert not silent.tracks_range and silent.active_frac == 0
    assert np.isfinite(df.range_corr.iloc[1])


def test_near_landmark_share_is_the_measure_of_the_union_of_windows():
    # y = x³ − x: landmarks −1, −1/√3, 0 (root and inflection, once), 1/√3, 1; windows ±0.3 on [−2, 2]
    s3 = 1 / math.sqrt(3)
    marks = [-1.0, -s3, 0.0, s3, 1.0]
    fine = np.linspace(-2.0, 2.0, 400001)
    want = (np.abs(fine[:, None] - np.array(marks)[None, :]).min(1) <= 0.3).mean()
    assert near_landmark_share(X_RANGE, 0.0, -1.0, 0.3) == pytest.approx(want, abs=1e-4)
    # one landmark near the edge: its window is cut by the range (x³ + 3x² + 3x: x = −1 thrice, and 0)
    assert near_landmark_share((-1.2, 2.0), 3.0, 3.0, 0.5) == pytest.approx((0.7 + 1.0) / 3.2)  # [−1.2, −0.5] and [−0.5, 0.5]
    assert near_landmark_share(X_RANGE, 0.0, -1.0, 10.0) == pytest.approx(1.0)


def test_peak_distance_finds_a_planted_landmark_bump_and_ignores_silent_latents():
    a, b = 0.0, -1.0  # landmarks −1, −1/√3, 0, 1/√3, 1
    at_root = np.exp(-((XS - 1.0) ** 2) / (2 * 0.1**2))
    off = np.exp(-((XS + 1.8) ** 2) / (2 * 0.1**2))  # nearest landmark −1: 0.8 away
    z = np.stack([at_root, off, np.zeros_like(XS)], 1)
    peak, dist = peak_landmark_distance(z, XS, a, b)
    assert peak[:2] == pytest.approx([1.0, -1.8]) and dist[:2] == pytest.approx([0.0, 0.8], abs=1e-12)
    assert np.isnan(peak[2]) and np.isnan(dist[2])
    df = score_latents(z, XS, X_RANGE, a, b, BINS, 0.15)
    assert df.near_landmark.tolist() == [True, False, False]

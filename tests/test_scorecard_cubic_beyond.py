"""The cubic-beyond-the-blog scorecard rows on hand-built tables whose answers are counted by hand,
and in the smoke run's scorecard."""

import math

import numpy as np
import pandas as pd
import pytest

from polyinterp.scorecard.cubic_beyond import beyond_claims


def _rows(**tables):
    return {c.claim: c.row() for c in beyond_claims(**tables)}


def test_joint_clamp_shares_count_the_verdicts_of_the_bands_intervention_only():
    fits = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1, 0, 1],
                         "intervention": ["bands"] * 6 + ["landmark_zero", "bands"],
                         "verdict": ["stretch", "stretch", "shift", "shift", "shift", "neither", "stretch",
                                     "no_effect"]})  # no_effect: left out of the shares
    rows = _rows(joint_clamp=fits)
    stretch = rows["clamping band latents stretches the curve vertically"]
    shift = rows["clamping band latents does not shift the curve"]
    assert (stretch["ours_min"], stretch["ours_max"]) == pytest.approx((0.0, 2 / 3))
    assert stretch["ours_mean"] == pytest.approx(1 / 3) and stretch["verdict"] == "differs"
    # the blog saw no shift: reproduced when fewer than half shift; seed 0 (1 of 3) holds, seed 1 (2 of 3) not
    assert shift["ours_mean"] == pytest.approx(0.5) and shift["n_seeds"] == 2 and shift["verdict"] == "differs"
    assert shift["seed_agreement"] == "differs in 1 of 2 seeds"
    assert shift["per_seed"] == "seed 0: 0.3333, seed 1: 0.6667"
    fits.loc[fits.seed == 0, "verdict"] = "stretch"  # seed 0: 3/3 stretch, seed 1: 0/3 → mean 0.5, not > 0.5
    stretch = _rows(joint_clamp=fits)["clamping band latents stretches the curve vertically"]
    assert stretch["verdict"] == "differs" and stretch["seed_agreement"] == "differs in 1 of 2 seeds"
    assert _rows(joint_clamp=fits)["clamping band latents does not shift the curve"]["verdict"] == "reproduced"
    fits.loc[(fits.seed == 1) & (fits.verdict == "neither"), "verdict"] = "stretch"
    assert _rows(joint_clamp=fits)["clamping band latents stretches the curve vertically"]["verdict"] == "reproduced"


def test_layer_and_training_rows_find_the_earliest_bands():
    layers = pd.DataFrame({"seed": [0, 0, 0, 0, 1, 1, 1, 1], "layer": [1, 2, 3, 4] * 2,
                           "is_last": [False, False, False, True] * 2, "n_band_latents": [0, 2, 1, 5, 0, 0, 0, 3]})
    rows = _rows(layers=layers)
    before = rows["hidden layers before the last with band latents"]
    assert (before["ours_min"], before["ours_max"], before["verdict"]) == (0.0, 2.0, "measured")
    first = rows["earliest hidden layer with band latents"]
    assert (first["ours_min"], first["ours_max"]) == (2.0, 4.0)
    assert _rows(layers=layers[layers.is_last]) == {}  # the last layer alone answers nothing
    training = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1], "step": [500, 2500, 12000] * 2,
                             "n_band_latents": [0, 1, 4, 0, 0, 0]})
    t = _rows(training=training)["first checkpoint with band latents"]
    assert t["ours_mean"] == 2500 and t["n_seeds"] == 1  # seed 1 never has bands: NaN, left out


def test_capacity_rows_per_variant_and_the_fewest_bands():
    cap = pd.DataFrame({"seed": [0, 0, 1, 1], "variant": ["last8", "base"] * 2,
                        "widths": ["3-64-64-64-8-1", "3-64-64-64-15-1"] * 2,
                        "n_band_latents": [4, 6, 0, 5], "median_c": [0.31, 0.29, math.nan, 0.45]})
    rows = _rows(capacity=cap)
    fewest = rows["band latents at every regressor width"]
    assert (fewest["ours_min"], fewest["ours_max"], fewest["verdict"]) == (0.0, 4.0, "measured")
    last8 = rows["median band slope c ≈ 0.3 at widths 3-64-64-64-8-1"]
    assert last8["n_seeds"] == 1 and last8["ours_mean"] == pytest.approx(0.31) and last8["verdict"] == "reproduced"
    base = rows["median band slope c ≈ 0.3 at widths 3-64-64-64-15-1"]
    assert base["ours_mean"] == pytest.approx(0.37) and base["verdict"] == "reproduced"
    cap.loc[3, "median_c"] = 0.6
    assert _rows(capacity=cap)["median band slope c ≈ 0.3 at widths 3-64-64-64-15-1"]["verdict"] == "differs"


def test_grid_rows_average_over_the_grid_per_seed():
    grid = pd.DataFrame({"seed": [0] * 4, "ia": [0, 0, 1, 1], "ib": [0] * 4,
                         "network": ["single", "joint"] * 2, "frac_tracks_range": [0.9, 0.2, 0.7, 0.4],
                         "landmark_enrichment": [1.0, 3.0, 1.2, 2.0]})
    rows = _rows(grid=grid)
    tracks = rows["one-polynomial networks' latents track the x range, not the landmarks"]
    assert tracks["ours_mean"] == pytest.approx(1.1) and tracks["verdict"] == "differs"  # median of 1.0, 1.2
    share = rows["one-polynomial networks: share of latents whose range score beats the landmark score"]
    assert share["ours_mean"] == pytest.approx(0.8) and share["verdict"] == "measured"
    assert rows["landmark enrichment, (x, a, b) regressor on the same lines"]["ours_mean"] == pytest.approx(2.5)
    assert "2 (a, b)" in tracks["where"]
    grid.loc[2, "landmark_enrichment"] = 0.8  # single: median of 1.0, 0.8 = 0.9
    assert _rows(grid=grid)["one-polynomial networks' latents track the x range, not the landmarks"]["verdict"] \
        == "reproduced"


def test_threshold_rows_share_and_spread():
    th = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1], "n_band_latents": [0, 2, 3, 1, 1, 1],
                       "median_c": [math.nan, 0.25, 0.32, 0.3, 0.3, 0.3]})
    rows = _rows(thresholds=th)
    keep = rows["threshold combinations that keep band latents"]
    assert (keep["ours_min"], keep["ours_max"]) == pytest.approx((2 / 3, 1.0))
    spread = rows["spread of the median c over the threshold grid"]
    assert (spread["ours_min"], spread["ours_max"]) == pytest.approx((0.0, 0.07))


def test_tables_not_built_give_no_rows():
    assert beyond_claims() == [] and beyond_claims(grid=None, capacity=pd.DataFrame()) == []


@pytest.mark.e2e
def test_smoke_scorecard_has_the_beyond_rows(smoke_run):
    t = pd.read_parquet(smoke_run / "results/scorecard.parquet")
    beyond = t[t.study == "cubic+"]
    claims = set(beyond.claim)
    fits = pd.read_parquet(smoke_run / "results/cubic/seed0/joint_clamp_fits.parquet")
    effect = bool(((fits.intervention == "bands") & (fits.verdict != "no_effect")).any())
    assert ("clamping band latents stretches the curve vertically" in claims) == effect
    for claim in ("hidden layers before the last with band latents",
                  "first checkpoint with band latents", "band latents at every regressor width",
                  "one-polynomial networks' latents track the x range, not the landmarks",
                  "threshold combinations that keep band latents"):
        assert claim in claims
    assert set(beyond.verdict) <= {"reproduced", "differs", "not comparable", "measured"}
    shares = beyond[beyond.claim.isin([
        "clamping band latents stretches the curve vertically", "clamping band latents does not shift the curve",
        "one-polynomial networks: share of latents whose range score beats the landmark score",
        "threshold combinations that keep band latents"])]
    assert len(shares) == 2 + 2 * effect and shares.ours_mean.dropna().between(0, 1).all()
    assert np.isfinite(beyond[beyond.claim == "threshold combinations that keep band latents"].ours_mean).all()
    enrichment = beyond[beyond.claim.str.contains("enrichment|not the landmarks")]
    assert len(enrichment) == 2 and (enrichment.ours_mean.dropna() >= 0).all()

"""Band-threshold sensitivity: re-thresholding the saved scores is the detection rule itself, tighter
thresholds never add bands, the table's configured row is the summary's median c."""

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyinterp.cubic.probes.bands import detect_bands, summarize_slopes
from polyinterp.cubic.probes.thresholds import (CRITERIA, band_mask, grid_axes, latent_scores, threshold_table,
                                         thresholds_step)
from polyinterp.errors import ConfigError, DataError
from polyinterp.figures.cubic.thresholds import one_at_a_time, thresholds_figure
from polyinterp.io import save_parquet

XS, AS, BS = np.linspace(-2, 2, 41), np.linspace(-2, 2, 41), np.array([-1.0, 0.0, 1.0])
CONFIG = {"coherence_min": 0.8, "c_tol": 0.15, "invariance_min": 0.6, "min_active_frac": 0.005, "c_max": 2.0}


def planted_grid():
    """Latents that pass or fail each criterion at different thresholds."""
    B, A, X = np.meshgrid(BS, AS, XS, indexing="ij")
    rng = np.random.default_rng(0)
    return np.stack([
        np.maximum(np.sin(2 * (X + A / 3)), 0),                    # clean band, c = 1/3
        np.maximum(np.sin(2 * (X + (0.3 + 0.05 * B) * A)), 0),     # band whose c drifts a little with b
        np.maximum(X + 0.25 * A - 2.1, 0),                         # band active on a small corner only
        np.maximum(np.sin(2 * (X + 0.4 * A)) + 0.4 * rng.standard_normal(X.shape), 0),   # noisy band
        np.maximum(X + (0.3 + 0.4 * B) * A, 0),                    # direction turns with b
        np.maximum(X * A, 0),                                      # no single direction
        np.maximum(A - 0.5, 0),                                    # depends on a alone: |c| large
        np.zeros_like(X),                                          # dead
    ], -1)


@pytest.fixture(scope="module")
def detected():
    slices, latents = detect_bands(planted_grid(), XS, AS, BS, {**CONFIG, "buckets": 30})
    return slices, latents, latent_scores(latents, slices, CONFIG["c_max"])


GRID = {"coherence_min": [0.5, 0.8, 0.95], "c_tol": [0.02, 0.15, 0.5],
        "invariance_min": [0.3, 0.6, 0.9], "min_active_frac": [0.001, 0.01, 0.1]}


@pytest.mark.parametrize("values", list(itertools.product(*GRID.values())))
def test_rethresholding_the_scores_is_the_detection_rule(detected, values):
    """An independent route: detection rerun on the activation grid at each threshold combination."""
    th = dict(zip(GRID, values))
    _, again = detect_bands(planted_grid(), XS, AS, BS, {**CONFIG, **th, "buckets": 30})
    np.testing.assert_array_equal(band_mask(detected[2], **th), again.is_band.to_numpy())


def test_the_planted_latents_span_the_cases(detected):
    _, latents, scores = detected
    counts = {band_mask(scores, **dict(zip(GRID, v))).sum() for v in itertools.product(*GRID.values())}
    assert latents.is_band.iloc[0] and not latents.is_band.iloc[4:].any()
    assert len(counts) >= 3   # the grid moves the band count


def scores_strategy():
    val = st.one_of(st.floats(-1, 1), st.just(float("nan")))
    row = st.tuples(st.floats(0, 1), st.one_of(st.floats(0, 1), st.just(float("nan"))), val, st.floats(0, 1),
                    st.booleans())
    return st.lists(row, min_size=1, max_size=30).map(lambda rows: pd.DataFrame({
        "latent": range(len(rows)), "min_coherence": [r[0] for r in rows], "c_grad_spread": [r[1] for r in rows],
        "b_invariance_r2": [r[2] for r in rows], "min_active_frac": [r[3] for r in rows],
        "c_grad_median": 0.3, "direction_ok": [r[4] for r in rows]}))


THRESHOLDS = st.fixed_dictionaries({"coherence_min": st.floats(0, 1), "c_tol": st.floats(0, 1),
                                    "invariance_min": st.floats(-1, 1), "min_active_frac": st.floats(0, 1)})


@settings(max_examples=200, deadline=None)
@given(scores=scores_strategy(), th=THRESHOLDS, name=st.sampled_from(CRITERIA), step=st.floats(0, 1))
def test_tightening_a_threshold_never_adds_band_latents(scores, th, name, step):
    """Raising coherence_min, invariance_min or min_active_frac, or lowering c_tol (a maximum), keeps a
    subset of the bands; raising c_tol keeps a superset."""
    before = band_mask(scores, **th)
    tighter = {**th, name: th[name] - step if name == "c_tol" else th[name] + step}
    after = band_mask(scores, **tighter)
    assert not (after & ~before).any()
    if name == "c_tol":
        looser = band_mask(scores, **{**th, "c_tol": th["c_tol"] + step})
        assert not (before & ~looser).any()


def test_grid_table_is_monotone_and_its_configured_row_is_the_summary(detected):
    _, latents, scores = detected
    best = pd.DataFrame({"seed": 0, "latent": latents.latent, "is_band": latents.is_band,
                         "c_best": np.linspace(0.2, 0.5, len(latents)), "r2_best": 0.9})
    axes = grid_axes(GRID, CONFIG)
    assert all(CONFIG[n] in axes[n] for n in CRITERIA) and axes["min_active_frac"] == [0.001, 0.005, 0.01, 0.1]
    table = threshold_table(scores, best.set_index("latent").c_best, axes, CONFIG)
    assert len(table) == np.prod([len(v) for v in axes.values()]) and table.at_config.sum() == 1
    conf = table[table.at_config].iloc[0]
    per_seed, _ = summarize_slopes([best])
    assert conf.n_band_latents == per_seed.n_band_latents.iloc[0] == latents.is_band.sum()
    assert conf.median_c == pytest.approx(per_seed.median_c.iloc[0], abs=1e-15)
    assert conf.band_latents == per_seed.band_latents.iloc[0]
    for name in CRITERIA:   # along each axis with the others fixed: monotone band count
        others = [n for n in CRITERIA if n != name]
        for _, line in table.groupby(others):
            n = line.sort_values(name).n_band_latents.to_numpy()
            assert (np.diff(n) >= 0).all() if name == "c_tol" else (np.diff(n) <= 0).all()
    assert table[table.n_band_latents == 0].median_c.isna().all()


def test_grid_axes_needs_every_criterion():
    with pytest.raises(ConfigError, match=r"cubic\.thresholds\.c_tol"):
        grid_axes({**GRID, "c_tol": []}, CONFIG)


def test_step_writes_the_table_and_refuses_inconsistent_flags(detected, tmp_path):
    slices, latents, _ = detected
    save_parquet(slices.assign(seed=4), tmp_path / "slices.parquet")
    save_parquet(latents.assign(seed=4), tmp_path / "bands.parquet")
    best = pd.DataFrame({"seed": 4, "latent": latents.latent, "is_band": latents.is_band, "c_best": 0.3, "r2_best": 0.9})
    save_parquet(best, tmp_path / "slopes.parquet")
    files = {k: str(tmp_path / f"{k}.parquet") for k in ("bands", "slices", "slopes")}
    params = {"seed": 4, "grid": GRID, "bands": CONFIG}
    thresholds_step(**files, table=str(tmp_path / "out.parquet"), params=params)
    out = pd.read_parquet(tmp_path / "out.parquet")
    assert (out.seed == 4).all() and (out.c_max == 2.0).all()
    assert list(out.columns[:5]) == ["seed", *CRITERIA]
    assert out[out.at_config].n_band_latents.iloc[0] == latents.is_band.sum()
    # the figure: per criterion, the configured line and the range over the rest of the grid
    drawn = thresholds_figure(tables=[str(tmp_path / "out.parquet")], out=[str(tmp_path / "f.pdf"), str(tmp_path / "f.png")])
    assert {(d["criterion"], d["seed"]) for d in drawn["lines"]} == {(n, 4) for n in CRITERIA}
    for d in drawn["lines"]:
        line = one_at_a_time(out, d["criterion"])
        assert d["values"] == sorted(set(GRID[d["criterion"]]) | {CONFIG[d["criterion"]]})
        assert d["n_band_latents"] == line.n_band_latents.tolist()
        assert d["spread"]["n_max"] == out.groupby(d["criterion"]).n_band_latents.max().tolist()
    assert drawn["ranges"]["n_band_latents"] == [out.n_band_latents.min(), out.n_band_latents.max()]
    flipped = latents.assign(seed=4, is_band=~latents.is_band)
    save_parquet(flipped, tmp_path / "bands.parquet")
    with pytest.raises(DataError, match="cubic_band_detection"):
        thresholds_step(**files, table=str(tmp_path / "out2.parquet"), params=params)

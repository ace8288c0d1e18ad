"""End to end: the cubic tables and figures of the smoke DAG; every table's schema and ranges."""

import numpy as np
import pandas as pd
import pytest

FIGURES = ["cubic_fit", "cubic_landmarks", "cubic_bands", "cubic_slopes", "cubic_clamp", "cubic_joint_clamp",
           "cubic_thresholds", "cubic_layers", "cubic_training", "cubic_capacity", "cubic_grid"]


@pytest.fixture(scope="module")
def smoke(smoke_run):
    """The results folder of the session's whole-DAG smoke run (tests/conftest.py)."""
    return smoke_run / "results"


def table(results, name, seed=0):
    return pd.read_parquet(results / "cubic" / f"seed{seed}" / name)


def columns(df, expected):
    assert set(expected) <= set(df.columns), set(expected) - set(df.columns)
    for col, kind in expected.items():
        assert pd.api.types.is_dtype_equal(df[col].dtype, kind) or {
            "float": pd.api.types.is_float_dtype, "int": pd.api.types.is_integer_dtype,
            "bool": pd.api.types.is_bool_dtype, "str": lambda d: d == object or pd.api.types.is_string_dtype(d),
        }[kind](df[col].dtype), (col, df[col].dtype)


@pytest.mark.e2e
def test_figures_exist(smoke):
    for name in FIGURES:
        for ext in ("pdf", "png"):
            f = smoke / "figures" / f"{name}.{ext}"
            assert f.exists() and f.stat().st_size > 5000, f


@pytest.mark.e2e
def test_training_tables(smoke):
    fit = table(smoke, "fit.parquet")
    columns(fit, {"seed": "int", "split": "str", "n": "int", "mse": "float", "var_y": "float", "rel_mse": "float",
                  "max_abs_err": "float", "target_met": "bool", "steps_trained": "int", "first_step_at_target": "int"})
    assert set(fit.split) == {"val", "out_of_range"}
    assert (fit.rel_mse > 0).all() and (fit.rel_mse < 1).all() and (fit.var_y > 0).all()
    np.testing.assert_allclose(fit.rel_mse, fit.mse / fit.var_y)
    assert (fit.target_met == (fit.rel_mse.where(fit.split == "val") <= fit.target_rel_mse)).iloc[
        list(fit.split).index("val")]
    curve = table(smoke, "train_curve.parquet")
    columns(curve, {"step": "int", "split": "str", "rel_mse": "float", "lr": "float"})
    val = curve[curve.split == "val"].sort_values("step")
    assert val.rel_mse.iloc[-1] < val.rel_mse.iloc[0]
    curves = table(smoke, "fit_curves.parquet")
    columns(curves, {"curve": "int", "a": "float", "b": "float", "in_range": "bool", "x": "float",
                     "y_true": "float", "y_model": "float"})
    np.testing.assert_allclose(curves.y_true, curves.x**3 + curves.a * curves.x**2 + curves.b * curves.x, atol=1e-5)


@pytest.mark.e2e
def test_sae_tables(smoke):
    m = table(smoke, "sae_metrics.parquet").iloc[0]
    assert m.latents == 64 and m.k == 4
    assert 0.5 < m.r2_heldout <= 1 and 0 < m.l0_heldout <= m.k and 0 <= m.dead_frac_heldout < 1
    assert 0 <= m.dead_frac_train <= 1 and m.rel_mse_spliced > 0
    lat = table(smoke, "sae_latents.parquet")
    columns(lat, {"latent": "int", "fire_rate": "float", "mean_act": "float", "dead": "bool", "decoder_norm": "float"})
    assert len(lat) == 64 and lat.fire_rate.between(0, 1).all()
    np.testing.assert_allclose(lat.decoder_norm, 1.0, atol=1e-5)
    assert lat.fire_rate.sum() == pytest.approx(m.l0_heldout, rel=1e-6)


@pytest.mark.e2e
def test_landmark_tables(smoke):
    t = table(smoke, "landmarks.parquet")
    columns(t, {"latent": "int", "a": "float", "b": "float", "kind": "str", "n_landmarks": "int", "corr": "float"})
    assert set(t.kind) == {"root", "critical", "inflection", "all"}
    c = t["corr"].dropna()
    assert len(c) > 0 and c.between(-1, 1).all()
    assert (t[t.kind == "inflection"].n_landmarks == 1).all() and t[t.kind == "root"].n_landmarks.between(1, 3).all()
    r = table(smoke, "landmark_ranking.parquet")
    columns(r, {"kind": "str", "latent": "int", "mean_corr": "float", "frac_defined": "float", "rank": "int"})
    for _, g in r.groupby("kind"):
        assert sorted(g["rank"]) == list(range(1, len(g) + 1))
        ranked = g.sort_values("rank").mean_corr.dropna()
        assert ranked.is_monotonic_decreasing


@pytest.mark.e2e
def test_band_and_slope_tables(smoke):
    s = table(smoke, "band_slices.parquet")
    columns(s, {"latent": "int", "b": "float", "active_frac": "float", "coherence": "float", "c_grad": "float"})
    assert s.active_frac.between(0, 1).all() and s.coherence.between(0, 1 + 1e-9).all()
    bl = table(smoke, "band_latents.parquet")
    columns(bl, {"latent": "int", "is_band": "bool", "c_grad_median": "float", "min_coherence": "float"})
    assert len(bl) == 64
    best = table(smoke, "slopes.parquet")
    columns(best, {"latent": "int", "c_best": "float", "r2_best": "float", "r2_at_cardano": "float", "is_band": "bool"})
    assert best.c_best.dropna().between(-1, 1).all() and (best.r2_best.dropna() <= 1).all()
    scan = table(smoke, "slope_scan.parquet")
    columns(scan, {"stage": "str", "latent": "int", "c": "float", "r2": "float"})
    # the best c is the best of every c scanned (1/3 itself is not on the grid, so r2_at_cardano may
    # exceed r2_best for a latent that peaks between grid points near 1/3)
    scanned_max = scan.groupby("latent").r2.max()
    b = best.dropna(subset=["r2_best"]).set_index("latent")
    np.testing.assert_allclose(b.r2_best, scanned_max.loc[b.index], rtol=0, atol=1e-12)
    assert set(scan.stage) <= {"coarse", "fine"} and set(best.latent) == set(scan.latent)
    seeds = pd.read_parquet(smoke / "cubic" / "slopes_per_seed.parquet")
    columns(seeds, {"seed": "int", "n_band_latents": "int", "median_c": "float", "cardano_c": "float"})
    band = best[best.is_band]
    detected = table(smoke, "band_latents.parquet")
    assert set(band.latent) == set(detected[detected.is_band].latent)  # flags carried from detection
    assert seeds.n_band_latents.iloc[0] == len(band)
    # the median over band latents, NaN exactly when there is none (the documented rule); which branch
    # runs depends on the dictionary the SAE found, and both check the rule
    if len(band):
        assert seeds.median_c.iloc[0] == pytest.approx(band.c_best.median(), abs=1e-15)
    else:
        assert np.isnan(seeds.median_c.iloc[0])
    spread = pd.read_parquet(smoke / "cubic" / "slopes_spread.parquet")
    assert spread.n_seeds.iloc[0] == 1 and spread.cardano_c.iloc[0] == pytest.approx(1 / 3)
    summary = pd.read_parquet(smoke / "cubic" / "summary.parquet")
    columns(summary, {"seed": "int", "rel_mse_val": "float", "sae_r2_heldout": "float", "median_c": "float"})


@pytest.mark.e2e
def test_clamp_tables(smoke):
    cl = table(smoke, "clamp.parquet")
    columns(cl, {"latent": "int", "selection": "str", "factor": "float", "curve": "int", "x": "float",
                 "y_true": "float", "y_model": "float", "y_sae": "float", "y_clamped": "float"})
    assert {0.0, 0.5, 1.0, 1.5, 2.0} <= set(cl.factor)
    one = cl[cl.factor == 1.0]
    np.testing.assert_allclose(one.y_clamped, one.y_sae)
    sm = table(smoke, "clamp_summary.parquet")
    columns(sm, {"latent": "int", "factor": "float", "rms_change": "float", "recon_rms": "float", "active_frac": "float"})
    assert (sm.rms_change >= 0).all() and (sm[sm.factor == 1.0].rms_change < 1e-6).all()
    assert sm.active_frac.between(0, 1).all()


@pytest.mark.e2e
def test_joint_clamp_tables(smoke):
    sets = table(smoke, "joint_clamp_sets.parquet")
    columns(sets, {"seed": "int", "intervention": "str", "latent": "int", "factor": "float", "selection": "str"})
    fits = table(smoke, "joint_clamp_fits.parquet")
    columns(fits, {"seed": "int", "intervention": "str", "n_latents": "int", "curve": "int", "a": "float",
                   "stretch_s": "float", "r2_stretch": "float", "effect_r2_stretch": "float", "shift_delta": "float",
                   "r2_shift": "float", "effect_r2_shift": "float", "shift_at_bound": "bool", "a_over_3": "float",
                   "verdict": "str"})
    assert set(fits.intervention) == set(sets.intervention)
    assert (fits.n_latents == fits.intervention.map(sets.groupby("intervention").size())).all()
    assert set(fits.verdict) <= {"no_effect", "neither", "indistinguishable", "stretch", "shift"}
    assert fits.shift_delta.between(-1, 1).all()
    np.testing.assert_allclose(fits.a_over_3, fits.a / 3)
    curves = table(smoke, "joint_clamp.parquet")
    columns(curves, {"intervention": "str", "curve": "int", "x": "float", "y_sae": "float", "y_clamped": "float",
                     "y_stretch": "float", "y_shift": "float"})
    # the SAE reconstruction here is the single clamp's factor-1 curve (float64 here, float32 there)
    single = table(smoke, "clamp.parquet")
    one = single[single.factor == 1.0].drop_duplicates(["curve", "x"]).set_index(["curve", "x"]).y_sae
    mine = curves.drop_duplicates(["curve", "x"]).set_index(["curve", "x"]).y_sae
    shared = mine.index.intersection(one.index)
    np.testing.assert_allclose(mine.loc[shared], one.loc[shared], rtol=1e-4, atol=1e-4)


@pytest.mark.e2e
def test_threshold_table(smoke):
    t = table(smoke, "band_thresholds.parquet")
    columns(t, {"seed": "int", "coherence_min": "float", "c_tol": "float", "invariance_min": "float",
                "min_active_frac": "float", "at_config": "bool", "n_band_latents": "int", "band_latents": "str",
                "median_c": "float", "median_c_grad": "float", "c_max": "float"})
    assert t.at_config.sum() == 1
    seeds = pd.read_parquet(smoke / "cubic" / "slopes_per_seed.parquet")
    conf = t[t.at_config].iloc[0]
    assert conf.n_band_latents == seeds.n_band_latents.iloc[0] and conf.band_latents == seeds.band_latents.iloc[0]
    assert (np.isnan(conf.median_c) and np.isnan(seeds.median_c.iloc[0])) or \
        conf.median_c == pytest.approx(seeds.median_c.iloc[0], abs=1e-15)
    assert (t[t.n_band_latents == 0].median_c.isna()).all()


VIEW_COLUMNS = {"seed": "int", "latents": "int", "k": "int", "r2_heldout": "float", "l0_heldout": "float",
                "dead_frac_heldout": "float", "rel_mse_model": "float", "rel_mse_spliced": "float",
                "n_live_latents": "int", "n_band_latents": "int", "band_latents": "str", "median_c": "float",
                "mean_c": "float", "median_r2_band": "float", "median_c_grad": "float", "best_slope_r2": "float",
                "best_slope_c": "float", "best_slope_latent": "int", "best_r2_at_cardano": "float",
                "cardano_c": "float"}


def same_as_todays(row, results, seed=0):
    """A summary row of the last layer / final model equals today's files under seed{seed}/."""
    m = table(results, "sae_metrics.parquet", seed).iloc[0]
    for col in ("latents", "k", "r2_heldout", "l0_heldout", "dead_frac_heldout", "rel_mse_model", "rel_mse_spliced"):
        assert row[col] == m[col], col
    per_seed = pd.read_parquet(results / "cubic" / "slopes_per_seed.parquet").set_index("seed").loc[seed]
    assert row.n_band_latents == per_seed.n_band_latents and row.band_latents == per_seed.band_latents
    assert (np.isnan(row.median_c) and np.isnan(per_seed.median_c)) or row.median_c == per_seed.median_c
    best = table(results, "slopes.parquet", seed)
    assert row.n_live_latents == len(best) and row.best_slope_r2 == best.r2_best.max()
    assert row.best_r2_at_cardano == best.r2_at_cardano.max()


@pytest.mark.e2e
def test_layers_table(smoke):
    """Smoke reads hidden layer 1 (64 wide, 128 latents) besides the last (4, today's pipeline)."""
    t = pd.read_parquet(smoke / "cubic" / "layers.parquet")
    columns(t, {**VIEW_COLUMNS, "layer": "int", "width": "int", "is_last": "bool", "top_corr_root": "float",
                "top_corr_critical": "float", "top_corr_inflection": "float", "top_corr_all": "float"})
    assert list(zip(t.seed, t.layer, t.width, t.latents)) == [(0, 1, 64, 128), (0, 4, 15, 64)]
    assert list(t.is_last) == [False, True]
    assert t.r2_heldout.between(0.5, 1).all() and (t.l0_heldout <= t.k).all() and t.best_slope_r2.le(1).all()
    same_as_todays(t[t.is_last].iloc[0], smoke)
    rank = table(smoke, "landmark_ranking.parquet")
    assert t[t.is_last].iloc[0].top_corr_inflection == rank[rank.kind == "inflection"].mean_corr.max()
    # layer 1's own files, under seed0/layer1/
    m = table(smoke, "layer1/sae_metrics.parquet").iloc[0]
    assert (m.layer, m.width, m.latents) == (1, 64, 128)
    assert t.iloc[0].r2_heldout == m.r2_heldout
    assert len(table(smoke, "layer1/band_latents.parquet")) == 128
    best = table(smoke, "layer1/slopes.parquet")
    assert set(best.latent) <= set(range(128)) and t.iloc[0].n_live_latents == len(best)
    import torch

    grid = torch.load(smoke / "cubic" / "seed0" / "layer1" / "band_grid.pt")
    bands = table(smoke, "layer1/band_latents.parquet")
    assert grid["latent_ids"] == [int(v) for v in bands.latent[bands.is_band]]  # only the bands' grid is kept
    assert grid["latents"].shape[-1] == len(grid["latent_ids"])
    assert torch.load(smoke / "cubic" / "seed0" / "band_grid.pt")["latents"].shape[-1] == 64  # today's: all


@pytest.mark.e2e
def test_training_table(smoke):
    """Smoke reads the checkpoint at step 200 and the final model (step 400, today's pipeline)."""
    t = pd.read_parquet(smoke / "cubic" / "training.parquet")
    columns(t, {**VIEW_COLUMNS, "step": "int", "is_final": "bool", "val_rel_mse": "float"})
    assert list(zip(t.seed, t.step, t.is_final)) == [(0, 200, False), (0, 400, True)]
    same_as_todays(t[t.is_final].iloc[0], smoke)
    curve = table(smoke, "train_curve.parquet")
    val = curve[curve.split == "val"].set_index("step").rel_mse
    assert list(t.val_rel_mse) == [val.loc[200], val.loc[400]]
    import torch

    ck = torch.load(smoke / "cubic" / "seed0" / "train_step200" / "model.pt")
    assert ck["steps_trained"] == 200 and ck["val_rel_mse"] == pytest.approx(val.loc[200], rel=1e-12)
    early = table(smoke, "train_step200/sae_metrics.parquet").iloc[0]
    assert t.iloc[0].r2_heldout == early.r2_heldout and t.iloc[0].rel_mse_model == early.rel_mse_model
    assert early.rel_mse_model != table(smoke, "sae_metrics.parquet").iloc[0].rel_mse_model  # another model


@pytest.mark.e2e
def test_capacity_table(smoke):
    """Smoke trains one variant (last hidden width 8) beside the base (today's regressor, not retrained)."""
    import torch

    t = pd.read_parquet(smoke / "cubic" / "capacity.parquet")
    columns(t, {**VIEW_COLUMNS, "variant": "str", "widths": "str", "n_hidden": "int", "last_width": "int",
                "n_params": "int", "is_model": "bool", "steps_trained": "int", "val_rel_mse": "float",
                "rel_mse_out_of_range": "float", "target_met": "bool", "train_seconds": "float"})
    assert list(zip(t.seed, t.variant, t.widths, t.is_model)) == [
        (0, "last8", "3-64-64-64-8-1", False), (0, "base", "3-64-64-64-15-1", True)]
    assert list(t.last_width) == [8, 15] and list(t.n_params) == [9105, 9567]  # 3·64+64 + 2·(64·64+64) + 64·w+w + w+1
    assert (t.steps_trained == 400).all() and t.val_rel_mse.between(0, 1).all() and t.r2_heldout.between(0.5, 1).all()
    same_as_todays(t[t.is_model].iloc[0], smoke)
    fit = table(smoke, "fit.parquet")
    assert t[t.is_model].val_rel_mse.iloc[0] == fit[fit.split == "val"].rel_mse.iloc[0]
    # the variant's own files under seed0/capacity_last8/: its widths in its saved model
    assert torch.load(smoke / "cubic" / "seed0" / "capacity_last8" / "model.pt")["widths"] == [3, 64, 64, 64, 8, 1]
    m = table(smoke, "capacity_last8/sae_metrics.parquet").iloc[0]
    assert (m.width, m.latents, m.layer) == (8, 64, 4) and t.iloc[0].r2_heldout == m.r2_heldout
    vfit = table(smoke, "capacity_last8/fit.parquet")
    assert t.iloc[0].val_rel_mse == vfit[vfit.split == "val"].rel_mse.iloc[0]
    assert t.iloc[0].n_live_latents == len(table(smoke, "capacity_last8/slopes.parquet"))


@pytest.mark.e2e
def test_grid_tables(smoke):
    """Smoke: a 2 × 1 (a, b) grid, one network 1 → 15 → 15 → 15 → 15 → 1 each, 32-latent SAEs."""
    import torch

    t = pd.read_parquet(smoke / "cubic" / "grid.parquet")
    columns(t, {"seed": "int", "ia": "int", "ib": "int", "a": "float", "b": "float", "network": "str",
                "latents": "int", "n_live": "int", "median_range_corr": "float", "median_landmark_corr": "float",
                "mean_range_corr": "float", "mean_landmark_corr": "float", "frac_tracks_range": "float",
                "median_active_frac": "float", "frac_near_landmark": "float", "chance_near_landmark": "float",
                "landmark_enrichment": "float", "rel_mse_line": "float", "sae_r2_line": "float",
                "val_rel_mse": "float", "sae_r2_heldout": "float"})
    assert len(t) == 2 * 2 and set(t.network) == {"single", "joint"}
    assert sorted(set(zip(t.a, t.b))) == [(-2.0, 0.0), (2.0, 0.0)]  # b_points 1: the midpoint of the b range
    assert (t[t.network == "single"].latents == 32).all() and (t[t.network == "joint"].latents == 64).all()
    assert (t.n_live <= t.latents).all() and t.frac_tracks_range.dropna().between(0, 1).all()
    single = t[t.network == "single"]
    assert single.val_rel_mse.between(0, 1).all() and single.rel_mse_line.between(0, 1).all()
    assert t[t.network == "joint"].val_rel_mse.isna().all()
    lat = pd.read_parquet(smoke / "cubic" / "grid_latents.parquet")
    columns(lat, {"seed": "int", "ia": "int", "ib": "int", "a": "float", "b": "float", "network": "str",
                  "latent": "int", "active_frac": "float", "range_corr": "float", "range_lo": "float",
                  "range_hi": "float", "corr_root": "float", "corr_critical": "float", "corr_inflection": "float",
                  "corr_all": "float", "landmark_corr": "float", "landmark_kind": "str", "tracks_range": "bool",
                  "peak_x": "float", "landmark_dist": "float", "near_landmark": "bool"})
    assert len(lat) == 2 * (32 + 64)
    live = lat[lat.active_frac > 0]
    assert live.range_corr.between(-1, 1).all() and (live.range_lo < live.range_hi).all()
    assert set(live.landmark_kind) <= {"root", "critical", "inflection", "all", ""}
    assert (lat.tracks_range == (lat.range_corr > lat.landmark_corr.fillna(-np.inf))).all()
    per = live.groupby(["ia", "ib", "network"])
    summary = t.set_index(["ia", "ib", "network"])
    np.testing.assert_allclose(per.tracks_range.mean().loc[summary.index], summary.frac_tracks_range)
    np.testing.assert_allclose(per.near_landmark.mean().loc[summary.index], summary.frac_near_landmark)
    assert t.chance_near_landmark.between(0, 1).all() and (live.landmark_dist >= 0).all()
    assert (per.size().loc[summary.index] == summary.n_live).all()
    # each grid network's files: a 1-D network, its SAE, and the metrics row the table repeats
    point = smoke / "cubic" / "seed0" / "grid" / "a1_b0"
    blob = torch.load(point / "model.pt")
    assert blob["widths"] == [1, 15, 15, 15, 15, 1] and (blob["a"], blob["b"]) == (2.0, 0.0)
    m = pd.read_parquet(point / "metrics.parquet").iloc[0]
    row = summary.loc[(1, 0, "single")]
    assert row.val_rel_mse == m.val_rel_mse and row.sae_r2_heldout == m.sae_r2_heldout


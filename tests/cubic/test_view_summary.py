"""Per-layer and across-training summary rows (polyinterp.cubic.views.summary) and their figures."""

import numpy as np
import pandas as pd
import pytest

from polyinterp.cubic.probes.bands import summarize_slopes
from polyinterp.cubic.views.summary import layers_summary_step, training_summary_step, view_row
from polyinterp.errors import DataError
from polyinterp.io import save_parquet
from polyinterp.figures.cubic.views import layers_figure, training_figure


def metrics(seed, latents=64, r2=0.99):
    return pd.DataFrame([{"seed": seed, "latents": latents, "k": 4, "r2_heldout": r2, "l0_heldout": 3.9,
                          "dead_frac_heldout": 0.1, "rel_mse_model": 1e-4, "rel_mse_spliced": 2e-3}])


def slopes(seed, bands=(1, 3), c=(0.30, 0.36, 0.1, 0.34), r2=(0.5, 0.9, 0.95, 0.8)):
    n = len(c)
    return pd.DataFrame({"seed": seed, "latent": [0, 1, 2, 3][:n], "c_best": c, "r2_best": r2,
                         "r2_at_cardano": [0.4, 0.85, 0.3, 0.79][:n], "r2_at_zero": 0.1,
                         "is_band": [j in bands for j in range(n)], "c_grad_median": [0.2, 0.31, 0.0, 0.35][:n]})


def test_view_row_is_the_per_seed_slope_rule_plus_the_best_latent():
    row = view_row(metrics(0), slopes(0))
    per_seed, _ = summarize_slopes([slopes(0)])
    assert row["n_band_latents"] == 2 == per_seed.n_band_latents.iloc[0] and row["band_latents"] == "1,3"
    assert row["median_c"] == pytest.approx(0.35) == per_seed.median_c.iloc[0]
    assert row["median_c_grad"] == pytest.approx(0.33)
    # the best latent by slope-search R² need not be a band
    assert (row["best_slope_r2"], row["best_slope_c"], row["best_slope_latent"]) == (0.95, 0.1, 2)
    assert row["best_r2_at_cardano"] == 0.85 and row["n_live_latents"] == 4 and row["latents"] == 64
    none = view_row(metrics(0), slopes(0, bands=()))
    assert none["n_band_latents"] == 0 and np.isnan(none["median_c"]) and np.isnan(none["median_c_grad"])
    empty = view_row(metrics(0), slopes(0).iloc[:0])
    assert np.isnan(empty["best_slope_r2"]) and empty["best_slope_latent"] == -1


def test_summaries_one_row_per_key_in_file_order_and_figures(tmp_path):
    files = {}
    for seed in (0, 1):
        for layer, lat in ((1, 256), (4, 64)):
            files[(seed, layer)] = [str(tmp_path / f"{n}{seed}_{layer}.parquet") for n in ("m", "s", "r")]
            save_parquet(metrics(seed, lat, r2=0.9 + 0.01 * layer), files[(seed, layer)][0])
            save_parquet(slopes(seed, bands=(1,) if layer == 4 else ()), files[(seed, layer)][1])
            save_parquet(pd.DataFrame({"seed": seed, "kind": ["root", "inflection", "inflection"], "latent": [0, 0, 1],
                                       "mean_corr": [0.2, 0.5 + layer / 10, np.nan]}), files[(seed, layer)][2])
    keys = [(s, la) for s in (0, 1) for la in (1, 4)]
    rows = [{"seed": s, "layer": la, "width": 64 if la == 1 else 15, "is_last": la == 4} for s, la in keys]
    out = str(tmp_path / "layers.parquet")
    layers_summary_step(metrics=[files[k][0] for k in keys], slopes=[files[k][1] for k in keys],
                        ranking=[files[k][2] for k in keys], table=out, params={"rows": rows})
    t = pd.read_parquet(out)
    assert list(zip(t.seed, t.layer)) == keys and list(t.latents) == [256, 64, 256, 64]
    assert list(t.n_band_latents) == [0, 1, 0, 1] and t.top_corr_inflection.tolist() == pytest.approx([0.6, 0.9] * 2)
    assert t.top_corr_critical.isna().all() and list(t.is_last) == [False, True] * 2
    drawn = layers_figure(table=out, out=[str(tmp_path / "l.png")])
    assert [ln["seed"] for ln in drawn["lines"]] == [0, 1] and drawn["lines"][0]["layer"] == [1, 4]
    assert (tmp_path / "l.png").stat().st_size > 5000
    with pytest.raises(DataError, match="out of order"):
        layers_summary_step(metrics=[files[k][0] for k in reversed(keys)], slopes=[files[k][1] for k in keys],
                            ranking=[files[k][2] for k in keys], table=out, params={"rows": rows})
    with pytest.raises(DataError, match="one per row"):
        layers_summary_step(metrics=[files[keys[0]][0]], slopes=[files[k][1] for k in keys],
                            ranking=[files[k][2] for k in keys], table=out, params={"rows": rows})

    curve = str(tmp_path / "curve.parquet")
    save_parquet(pd.DataFrame({"seed": 0, "step": [0, 100, 100, 200], "split": ["val", "val", "train", "val"],
                               "rel_mse": [1.0, 0.1, 0.2, 0.01], "lr": 0.0}), curve)
    rows = [{"seed": 0, "step": 100, "is_final": False}, {"seed": 0, "step": 200, "is_final": True}]
    out = str(tmp_path / "training.parquet")
    training_summary_step(metrics=[files[(0, 1)][0], files[(0, 4)][0]], slopes=[files[(0, 1)][1], files[(0, 4)][1]],
                          curve=[curve], table=out, params={"rows": rows})
    t = pd.read_parquet(out)
    assert list(t.step) == [100, 200] and list(t.val_rel_mse) == [0.1, 0.01] and list(t.is_final) == [False, True]
    drawn = training_figure(table=out, out=[str(tmp_path / "t.png")])
    assert drawn["lines"][0]["val_rel_mse"] == [0.1, 0.01]

"""Capacity variants (polyinterp.cubic.views.capacity, the /capacity_{name} view of polyinterp.cubic.views.regressor_views):
parse-time checks, the view's files and params, a variant's widths in its saved model, the summary."""

import copy
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from polyinterp.config import load_yaml
from polyinterp.cubic.views.capacity import capacity_summary_step, widths_text
from polyinterp.cubic.regressor.model import load_model
from polyinterp.cubic.regressor.train import train_step
from polyinterp.cubic.views.regressor_views import capacity_variants, n_params
from polyinterp.rules import VIEW_PATTERN, CubicViews
from polyinterp.errors import ConfigError, DataError
from polyinterp.io import load_torch, save_parquet, save_torch

ROOT = Path(__file__).resolve().parents[2]
CUBIC = load_yaml(ROOT / "config.yaml")["cubic"]
MODEL = [3, 64, 64, 64, 15, 1]
TRAIN = {"steps": 12000, "eval_every": 500}


def variants(*pairs, train_steps=None):
    return {"enabled": True, "train_steps": train_steps, "variants": [{"name": n, "widths": w} for n, w in pairs]}


def test_variants_are_checked_and_the_model_widths_are_todays_regressor():
    got = capacity_variants(variants(("last8", [3, 64, 64, 64, 8, 1]), ("base", MODEL)), MODEL, TRAIN)
    assert list(got) == ["last8", "base"]
    assert (got["last8"]["is_model"], got["base"]["is_model"]) == (False, True)
    assert got["last8"]["steps"] == got["base"]["steps"] == 12000
    # fewer steps: every variant is trained, the base one too
    short = capacity_variants(variants(("base", MODEL), train_steps=2000), MODEL, TRAIN)
    assert short["base"] == {"widths": MODEL, "is_model": False, "steps": 2000}
    bad = [
        (variants(("a", MODEL), ("a", [3, 8, 1])), "a second time"),
        (variants(("a", MODEL), ("b", MODEL)), "list each architecture once"),
        (variants(("a", [3, 8, 2])), "ends at 1"),
        (variants(("a", MODEL), train_steps=100), "cubic.capacity.train_steps"),
    ]
    for spec, match in bad:
        with pytest.raises(ConfigError, match=match):
            capacity_variants(spec, MODEL, TRAIN)


def test_n_params_counts_weights_and_biases():
    from polyinterp.cubic.regressor.model import build_model

    for widths in ([3, 64, 64, 64, 15, 1], [1, 15, 15, 1], [3, 8, 1]):
        assert n_params(widths) == sum(p.numel() for p in build_model(widths, 0).parameters())


def views(cap):
    cfg = copy.deepcopy(CUBIC)
    cfg["capacity"] = cap
    return CubicViews(cfg, "cpu")


def test_the_capacity_view_reads_its_own_model_with_todays_settings():
    v = views(variants(("last8", [3, 64, 64, 64, 8, 1]), ("base", MODEL)))
    assert v.kind("/capacity_last8") == ("capacity", "last8")
    assert (v.capacity_view("last8"), v.capacity_view("base")) == ("/capacity_last8", "")
    assert v.model(0, "/capacity_last8") == "results/cubic/seed0/capacity_last8/model.pt"
    assert v.model(0, "") == "results/cubic/seed0/model.pt"
    # the same activations and SAE settings as today's pipeline; bands keep only the band latents
    assert v.activations_params(0, "/capacity_last8") == v.activations_params(0, "")
    assert v.sae_params(0, "/capacity_last8") == v.sae_params(0, "")
    assert v.bands_params(0, "/capacity_last8")["grid_latents"] == "bands"
    p = v.capacity_train_params(1, "last8")
    assert p["model"] == {"widths": [3, 64, 64, 64, 8, 1]} and p["seed"] == 1
    assert p["train"] == CUBIC["train"] and p["task"] == CUBIC["task"]
    assert v.capacity_files("results/cubic/seed{seed}/fit.parquet", [0, 1]) == [
        "results/cubic/seed0/capacity_last8/fit.parquet", "results/cubic/seed0/fit.parquet",
        "results/cubic/seed1/capacity_last8/fit.parquet", "results/cubic/seed1/fit.parquet"]
    assert v.capacity_files("results/cubic/seed{seed}{view}/slopes.parquet", [0]) == [
        "results/cubic/seed0/capacity_last8/slopes.parquet", "results/cubic/seed0/slopes.parquet"]
    for bad in ("/capacity_base", "/capacity_other"):
        with pytest.raises(ConfigError, match="capacity variant"):
            v.model(0, bad)
    assert re.fullmatch(VIEW_PATTERN, "/capacity_last8") and re.fullmatch(VIEW_PATTERN, "/capacity_all_x2")
    assert not re.fullmatch(VIEW_PATTERN, "/capacity_8") and not re.fullmatch(VIEW_PATTERN, "/capacity_a/b")


def test_a_variants_widths_are_those_of_its_saved_model(tmp_path):
    """Rule cubic_capacity_train runs cubic_train's step on the variant's params."""
    cfg = copy.deepcopy(CUBIC)
    cfg["train"].update({"steps": 60, "eval_every": 30, "batch_size": 256, "val_samples": 512, "warmup_steps": 5,
                         "curve_points": 5})
    cfg["capacity"] = variants(("narrow", [3, 16, 7, 1]), ("base", MODEL), train_steps=60)
    params = CubicViews(cfg, "cpu").capacity_train_params(0, "narrow")
    paths = {k: str(tmp_path / f"{k}.x") for k in ("model", "checkpoints", "curve", "fit", "curves")}
    train_step(**paths, params=params)
    assert load_torch(paths["model"])["widths"] == [3, 16, 7, 1]
    net = load_model(paths["model"])
    assert net.widths == (3, 16, 7, 1) and net.hidden(torch.zeros(2, 3)).shape == (2, 7)
    assert load_torch(paths["checkpoints"])["widths"] == [3, 16, 7, 1]
    assert n_params([3, 16, 7, 1]) == sum(p.numel() for p in net.parameters())


def fake_view(tmp_path, name, seed, widths, rel_mse, bands):
    d = tmp_path / name
    d.mkdir()
    save_torch({"widths": widths, "state": {}}, d / "model.pt")
    save_parquet(pd.DataFrame([
        {"seed": seed, "split": "val", "rel_mse": rel_mse, "target_met": rel_mse < 1e-4, "steps_trained": 100,
         "train_seconds": 1.5},
        {"seed": seed, "split": "out_of_range", "rel_mse": 10 * rel_mse, "target_met": False, "steps_trained": 100,
         "train_seconds": 1.5}]), d / "fit.parquet")
    save_parquet(pd.DataFrame([{"seed": seed, "latents": 64, "k": 4, "r2_heldout": 0.99, "l0_heldout": 4.0,
                                "dead_frac_heldout": 0.1, "rel_mse_model": rel_mse, "rel_mse_spliced": 2 * rel_mse}]),
                 d / "metrics.parquet")
    save_parquet(pd.DataFrame({"seed": seed, "latent": [0, 1, 2], "c_best": [0.3, 0.35, 0.0],
                               "r2_best": [0.9, 0.8, 0.5], "r2_at_cardano": [0.85, 0.8, 0.1],
                               "c_grad_median": [0.3, 0.36, 0.0], "is_band": bands}), d / "slopes.parquet")
    return {k: str(d / f"{k}.{'pt' if k == 'model' else 'parquet'}") for k in ("model", "fit", "metrics", "slopes")}


def test_capacity_summary_rows(tmp_path):
    a = fake_view(tmp_path, "a", 0, [3, 8, 1], 1e-3, [True, True, False])
    b = fake_view(tmp_path, "b", 0, MODEL, 1e-5, [False, False, False])
    rows = [{"seed": 0, "variant": "small", "widths": [3, 8, 1], "is_model": False, "steps": 100},
            {"seed": 0, "variant": "base", "widths": MODEL, "is_model": True, "steps": 100}]
    out = str(tmp_path / "capacity.parquet")
    files = {k: [a[k], b[k]] for k in a}
    capacity_summary_step(**files, table=out, params={"rows": rows})
    t = pd.read_parquet(out)
    assert list(t.variant) == ["small", "base"] and list(t.widths) == ["3-8-1", widths_text(MODEL)]
    assert list(t.n_params) == [n_params([3, 8, 1]), n_params(MODEL)] and list(t.last_width) == [8, 15]
    assert list(t.n_hidden) == [1, 4] and list(t.is_model) == [False, True]
    assert list(t.val_rel_mse) == [1e-3, 1e-5] and list(t.rel_mse_out_of_range) == [1e-2, 1e-4]
    assert list(t.n_band_latents) == [2, 0] and t.median_c.iloc[0] == pytest.approx(0.325)
    assert pd.isna(t.median_c.iloc[1]) and t.best_slope_c.iloc[1] == 0.3
    rows[0]["widths"] = [3, 9, 1]
    with pytest.raises(DataError, match="cubic_capacity_train"):
        capacity_summary_step(**files, table=out, params={"rows": rows})

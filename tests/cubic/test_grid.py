"""The single-polynomial grid (polyinterp.cubic.views.grid): networks reading x alone, their data, training,
SAE and the summary's scores, each against an independent route."""

import copy
from pathlib import Path

import math

import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp.config import load_yaml
from polyinterp.cubic.views.grid import (grid_point_step, grid_points, grid_seed_step, grid_summary_step, grid_values,
                                         line_rel_mse, summarize_network, train_single)
from polyinterp.rules import point_params
from polyinterp.rules import point_files, seed_params, summary_params
from polyinterp.cubic.regressor.model import CubicMLP, build_model, load_model
from polyinterp.cubic.sae.probe import grid_inputs, latent_activations
from polyinterp.cubic.sae.autoencoder import TopKSAE, load_sae
from polyinterp.cubic.regressor.task import STREAM_GRID_VAL, generator, sample_x, target
from polyinterp.cubic.probes.tracking import near_landmark_share, score_latents
from polyinterp.errors import ConfigError, DataError
from polyinterp.io import load_parquet, load_torch, save_torch

ROOT = Path(__file__).resolve().parents[2]
CUBIC = load_yaml(ROOT / "config.yaml")["cubic"]
TRAIN = {"steps": 300, "batch_size": 256, "lr": 0.01, "warmup_steps": 20, "final_lr_ratio": 0.01, "val_samples": 1024}
SAE = {"latents": 8, "k": 2, "steps": 40, "batch_size": 128, "lr": 3e-3, "decay_frac": 0.2, "aux_k": 4,
       "aux_coef": 1 / 32, "dead_threshold": 2000, "geometric_median_samples": 300, "geometric_median_iters": 10,
       "log_every": 20}


def tiny_cubic(**grid):
    cfg = copy.deepcopy(CUBIC)
    cfg["grid"].update({"a_points": 2, "b_points": 2, "widths": [1, 8, 6, 1], "train": TRAIN,
                        "activations": {"n_train": 600, "n_heldout": 200}, "sae": {"latents": 8, "k": 2, "steps": 40},
                        "score": {"x_points": 41, "x_bins": 4}, **grid})
    cfg["sae"].update({k: v for k, v in SAE.items() if k not in cfg["grid"]["sae"]})
    return cfg


# ------------------------------------------------------------------------------------- the network
def hand_forward(model, x):
    """The network's output by explicit matrix products over its Linear weights."""
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    h = x
    for layer in lin[:-1]:
        h = torch.relu(h @ layer.weight.T + layer.bias)
    return (h @ lin[-1].weight.T + lin[-1].bias).squeeze(-1), h


def test_the_model_reads_x_alone_when_its_input_width_is_1(tmp_path):
    model = build_model((1, 15, 15, 15, 15, 1), seed=0)
    x = torch.linspace(-2, 2, 50)[:, None]
    y, h = hand_forward(model, x)
    with torch.no_grad():
        torch.testing.assert_close(model(x), y)
        torch.testing.assert_close(model.hidden(x), h)
    assert model.n_hidden == 4 and model.widths[0] == 1
    save_torch({"state": model.state_dict(), "widths": list(model.widths)}, tmp_path / "m.pt")
    assert load_model(tmp_path / "m.pt").widths == (1, 15, 15, 15, 15, 1)
    for bad in ((2, 8, 1), (1, 1), (1, 8, 2)):
        with pytest.raises(DataError, match="start at 3 .* or 1"):
            CubicMLP(bad)


def test_the_1d_data_is_the_cubic_at_fixed_a_b():
    """The grid network's samples and target are the study's task with a and b held fixed."""
    a, b = -1.3, 0.7
    x = sample_x(500, (-2.0, 2.0), generator(0, STREAM_GRID_VAL))
    assert x.shape == (500, 1) and x.dtype == torch.float32 and bool(((x >= -2) & (x <= 2)).all())
    joint = torch.cat([x, torch.full_like(x, a), torch.full_like(x, b)], 1)
    from polyinterp.cubic.regressor.task import cubic

    torch.testing.assert_close(cubic(x[:, 0], a, b), target(joint), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cubic(x[:, 0], a, b).numpy(), (x[:, 0] ** 3 + a * x[:, 0] ** 2 + b * x[:, 0]).numpy(),
                               rtol=1e-5, atol=1e-5)

    class Exact(torch.nn.Module):  # a "network" that is the cubic: rel-MSE 0 on its line
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Parameter(torch.zeros(1))  # line_rel_mse reads the device off a parameter

        def forward(self, inp):
            t = inp[:, 0]
            return t**3 + a * t**2 + b * t

    mse, rel, err = line_rel_mse(Exact(), x, a, b)
    assert mse < 1e-10 and rel < 1e-10 and err < 1e-5


def test_training_learns_the_one_polynomial_and_is_seeded():
    a, b = 1.0, -1.0
    net, info = train_single(a, b, (-2.0, 2.0), [1, 16, 16, 1], {**TRAIN, "steps": 400}, 0, torch.device("cpu"))
    net2, info2 = train_single(a, b, (-2.0, 2.0), [1, 16, 16, 1], {**TRAIN, "steps": 400}, 0, torch.device("cpu"))
    for p, q in zip(net.parameters(), net2.parameters()):
        assert torch.equal(p, q)
    # the recorded validation rel-MSE, recomputed through the (x, a, b) task's target
    x = sample_x(TRAIN["val_samples"], (-2.0, 2.0), generator(0, STREAM_GRID_VAL))
    y = target(torch.cat([x, torch.full_like(x, a), torch.full_like(x, b)], 1)).double()
    with torch.no_grad():
        rel = float((net(x).double() - y).pow(2).mean() / y.var())
    assert info["val_rel_mse"] == pytest.approx(rel, rel=1e-4) and rel < 0.05
    assert info["steps_trained"] == 400


def test_grid_points_and_their_params():
    assert grid_values(-2, 2, 3) == [-2.0, 0.0, 2.0] and grid_values(-2, 2, 1) == [0.0]
    pts = grid_points({"a_points": 2, "b_points": 3}, {"a": [-1, 1], "b": [0, 4]})
    assert [(p["ia"], p["ib"], p["a"], p["b"]) for p in pts] == [
        (0, 0, -1.0, 0.0), (0, 1, -1.0, 2.0), (0, 2, -1.0, 4.0), (1, 0, 1.0, 0.0), (1, 1, 1.0, 2.0), (1, 2, 1.0, 4.0)]
    cfg = tiny_cubic()
    p = point_params(cfg, 0, 1, 0, "cpu")
    assert (p["a"], p["b"], p["widths"], p["x_range"]) == (2.0, -2.0, [1, 8, 6, 1], [-2.0, 2.0])
    assert p["sae"]["latents"] == 8 and "r2_target" not in p["sae"] and p["sae"]["aux_k"] == cfg["sae"]["aux_k"]
    with pytest.raises(ConfigError, match="cubic.grid.a_points"):
        point_params(cfg, 0, 2, 0, "cpu")
    with pytest.raises(ConfigError, match="cubic.grid.sae.k"):
        point_params(tiny_cubic(sae={"latents": 4, "k": 5, "steps": 10}), 0, 0, 0, "cpu")
    with pytest.raises(ConfigError, match="cubic.grid.widths"):
        point_params(tiny_cubic(widths=[3, 8, 1]), 0, 0, 0, "cpu")


def run_point(tmp_path, cfg, ia, ib):
    d = tmp_path / f"a{ia}_b{ib}"
    d.mkdir(exist_ok=True)
    paths = {k: str(d / f) for k, f in (("model", "model.pt"), ("sae", "sae.pt"), ("metrics", "metrics.parquet"))}
    grid_point_step(**paths, params=point_params(cfg, 0, ia, ib, "cpu"))
    return paths


def test_grid_point_step_writes_a_1d_network_and_its_sae(tmp_path):
    cfg = tiny_cubic()
    paths = run_point(tmp_path, cfg, 1, 1)
    blob = load_torch(paths["model"])
    assert blob["widths"] == [1, 8, 6, 1] and (blob["a"], blob["b"]) == (2.0, 2.0)
    sae = load_sae(paths["sae"])
    assert (sae.d, sae.m, sae.k) == (6, 8, 2)
    m = load_parquet(paths["metrics"])
    assert len(m) == 1 and (m.ia.iloc[0], m.ib.iloc[0], m.widths.iloc[0]) == (1, 1, "1-8-6-1")
    assert 0 < m.val_rel_mse.iloc[0] < 1 and m.sae_r2_heldout.iloc[0] <= 1
    assert m.val_rel_mse.iloc[0] == blob["val_rel_mse"]


def identical(a, b) -> bool:
    """Nested dicts, lists, tensors and numbers equal exactly (tensors bit for bit)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    return a == b


def test_one_job_per_seed_writes_what_one_job_per_point_writes(tmp_path):
    """Rule cubic_grid_seed trains every point of a seed in one process: each point's network, SAE and
    metrics equal, bit for bit, those of the point trained alone (in reverse order, in a fresh call)."""
    cfg = tiny_cubic()
    points = grid_points(cfg["grid"], cfg["task"]["ranges"])
    (tmp_path / "alone").mkdir()
    alone = {(p["ia"], p["ib"]): run_point(tmp_path / "alone", cfg, p["ia"], p["ib"]) for p in reversed(points)}
    pattern = str(tmp_path / "seed{seed}" / "a{ia}_b{ib}")
    files = {k: point_files(pattern + "/" + f, cfg, [0]) for k, f in (("model", "model.pt"), ("sae", "sae.pt"),
                                                                     ("metrics", "metrics.parquet"))}
    grid_seed_step(**files, params=seed_params(cfg, 0, "cpu"))
    for i, p in enumerate(points):
        one = alone[(p["ia"], p["ib"])]
        for key in ("model", "sae"):
            got, want = load_torch(files[key][i]), load_torch(one[key])
            assert identical({k: v for k, v in got.items() if k != "train_seconds"},
                             {k: v for k, v in want.items() if k != "train_seconds"}), (key, p)
        got, want = load_parquet(files["metrics"][i]), load_parquet(one["metrics"])
        pd.testing.assert_frame_equal(got.drop(columns=["train_seconds", "sae_seconds"]),
                                      want.drop(columns=["train_seconds", "sae_seconds"]))
    with pytest.raises(DataError, match="3 model files for 4 grid points"):
        grid_seed_step(model=files["model"][:3], sae=files["sae"], metrics=files["metrics"],
                       params=seed_params(cfg, 0, "cpu"))


def test_grid_summary_scores_both_networks_by_independent_routes(tmp_path):
    cfg = tiny_cubic()
    files = [run_point(tmp_path, cfg, p["ia"], p["ib"]) for p in grid_points(cfg["grid"], cfg["task"]["ranges"])]
    joint = build_model((3, 8, 6, 1), seed=2)
    save_torch({"state": joint.state_dict(), "widths": list(joint.widths)}, tmp_path / "joint.pt")
    jsae = TopKSAE(6, 10, 3)
    jsae.init_weights(generator(0, 0))
    save_torch({**jsae.state(), "seed": 0, "layer": 2}, tmp_path / "joint_sae.pt")  # the last hidden layer
    params = summary_params(cfg, [0], "cpu")
    out = {"table": str(tmp_path / "grid.parquet"), "latents": str(tmp_path / "grid_latents.parquet")}
    grid_summary_step(model=[f["model"] for f in files], sae=[f["sae"] for f in files],
                      metrics=[f["metrics"] for f in files], joint_model=[str(tmp_path / "joint.pt")],
                      joint_sae=[str(tmp_path / "joint_sae.pt")], **out, params=params)
    t, lat = pd.read_parquet(out["table"]), pd.read_parquet(out["latents"])
    assert len(t) == 4 * 2 and set(t.network) == {"single", "joint"}
    assert len(lat) == 4 * (8 + 10)
    xs = torch.linspace(-2, 2, 41)
    for f, p in zip(files, grid_points(cfg["grid"], cfg["task"]["ranges"])):
        a, b = p["a"], p["b"]
        # single: latents by a hand forward pass through the saved weights and the SAE encoder
        net, sae = load_model(f["model"]), load_sae(f["sae"])
        _, h = hand_forward(net, xs[:, None])
        with torch.no_grad():
            z = sae.encode(h).double().numpy()
        want = score_latents(z, xs.numpy(), (-2.0, 2.0), a, b, 4, cfg["landmarks"]["bump_width"])
        got = lat[(lat.ia == p["ia"]) & (lat.ib == p["ib"]) & (lat.network == "single")].reset_index(drop=True)
        np.testing.assert_allclose(got.range_corr, want.range_corr, atol=1e-5)
        np.testing.assert_allclose(got.landmark_corr, want.landmark_corr, atol=1e-5)
        # joint: the (x, a, b) regressor's latents on the probe grid at this (a, b)
        zj = latent_activations(joint, jsae, grid_inputs(xs, torch.tensor([a]), torch.tensor([b])), "cpu")
        wj = score_latents(zj.double().numpy(), xs.numpy(), (-2.0, 2.0), a, b, 4, cfg["landmarks"]["bump_width"])
        gj = lat[(lat.ia == p["ia"]) & (lat.ib == p["ib"]) & (lat.network == "joint")].reset_index(drop=True)
        np.testing.assert_allclose(gj.range_corr, wj.range_corr, atol=1e-5)
        row = t[(t.ia == p["ia"]) & (t.ib == p["ib"]) & (t.network == "single")].iloc[0]
        assert row.val_rel_mse == load_parquet(f["metrics"]).val_rel_mse.iloc[0]
        chance = near_landmark_share((-2.0, 2.0), a, b, cfg["landmarks"]["bump_width"])
        assert row.frac_tracks_range == pytest.approx(summarize_network(got, chance)["frac_tracks_range"], nan_ok=True)
        np.testing.assert_array_equal(got.near_landmark, want.near_landmark)
        assert row.chance_near_landmark == pytest.approx(chance)
        assert row.landmark_enrichment == pytest.approx(got[got.active_frac > 0].near_landmark.mean() / chance,
                                                        nan_ok=True)
    assert t[t.network == "joint"].val_rel_mse.isna().all()
    with pytest.raises(DataError, match="out of order"):
        grid_summary_step(model=[f["model"] for f in files][::-1], sae=[f["sae"] for f in files][::-1],
                          metrics=[f["metrics"] for f in files][::-1], joint_model=[str(tmp_path / "joint.pt")],
                          joint_sae=[str(tmp_path / "joint_sae.pt")], **out, params=params)


def test_summarize_network_counts_only_live_latents():
    scores = pd.DataFrame({"active_frac": [0.0, 0.5, 0.2, 1.0], "range_corr": [np.nan, 0.9, 0.4, 0.8],
                           "landmark_corr": [np.nan, 0.5, 0.6, np.nan], "tracks_range": [False, True, False, True],
                           "near_landmark": [True, True, False, False]})  # the silent latent's True is not counted
    s = summarize_network(scores, 0.25)
    assert s["frac_near_landmark"] == pytest.approx(1 / 3) and s["landmark_enrichment"] == pytest.approx(4 / 3)
    assert math.isnan(summarize_network(scores, 0.0)["landmark_enrichment"])
    assert (s["latents"], s["n_live"]) == (4, 3)
    assert s["frac_tracks_range"] == pytest.approx(2 / 3) and s["median_range_corr"] == pytest.approx(0.8)
    assert s["median_landmark_corr"] == pytest.approx(0.55) and s["median_active_frac"] == pytest.approx(0.5)

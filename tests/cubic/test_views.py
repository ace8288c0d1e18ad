"""Other hidden layers and earlier checkpoints (polyinterp.cubic.views.regressor_views): the layer split of the model,
activations and SAE steps at any layer, checkpoint extraction, and the config keys' resolution."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import torch

from polyinterp.cubic.sae.activations import activations_step, load_activations
from polyinterp.cubic.probes.bands import bands_step, slopes_step
from polyinterp.cubic.probes.landmarks import landmarks_step
from polyinterp.cubic.regressor.model import build_model, load_model
from polyinterp.cubic.sae.probe import grid_inputs
from polyinterp.cubic.sae.autoencoder import load_sae, sae_layer, sae_step
from polyinterp.cubic.regressor.task import STREAM_ACTS, generator, sample_inputs, target
from polyinterp.cubic.regressor.train import train_step
from polyinterp.cubic.views.regressor_views import (checkpoint_model_step, eval_checkpoint_steps, layer_saes,
                                                      training_steps)
from polyinterp.rules import CubicViews
from polyinterp.errors import ConfigError, DataError
from polyinterp.io import load_torch, save_torch
from workflow_helpers import merged_config

ROOT = Path(__file__).resolve().parents[2]
RANGES = {"x": [-2.0, 2.0], "a": [-2.0, 2.0], "b": [-2.0, 2.0]}
WIDTHS = (3, 8, 7, 6, 1)  # three hidden layers of different widths: a wrong layer cannot fit by accident
ACTS = {"n_train": 3000, "n_heldout": 800, "seed": 0, "device": "cpu"}
SAE = {"latents": 12, "k": 2, "steps": 60, "batch_size": 256, "lr": 3e-3, "decay_frac": 0.2, "aux_k": 4,
       "aux_coef": 1 / 32, "dead_threshold": 2000, "geometric_median_samples": 500, "geometric_median_iters": 20,
       "log_every": 30, "r2_target": 0.9, "seed": 0, "device": "cpu"}


def hand_forward(model, x, layer):
    """Hidden layer ``layer`` by explicit matrix products over the Linear weights."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    h = x
    for lin in linears[:layer]:
        h = torch.relu(h @ lin.weight.T + lin.bias)
    return h


def write_model(path, model, **meta):
    save_torch({"state": model.state_dict(), "widths": list(model.widths), "ranges": RANGES, "seed": 0,
                "steps_trained": 0, **meta}, path)
    return str(path)


# --------------------------------------------------------------------------------------------- model
def test_layer_acts_equal_a_hand_forward_pass_and_from_layer_finishes_it():
    model = build_model(WIDTHS, seed=3)
    x = sample_inputs(200, RANGES, generator(0, 0))
    assert model.n_hidden == 3
    for layer in (1, 2, 3):
        h = model.layer_acts(x, layer)
        assert h.shape == (200, WIDTHS[layer]) and bool((h >= 0).all())
        torch.testing.assert_close(h, hand_forward(model, x, layer), rtol=1e-6, atol=1e-6)
        assert torch.equal(model.from_layer(h, layer), model(x))  # same operations as the plain forward pass
    assert torch.equal(model.layer_acts(x, 3), model.hidden(x))
    for bad in (0, 4):
        with pytest.raises(DataError, match="hidden layers 1 … 3"):
            model.layer_acts(x, bad)


def test_activations_of_layer_l_equal_the_hand_forward_pass(tmp_path):
    model = build_model(WIDTHS, seed=1)
    path = write_model(tmp_path / "model.pt", model)
    activations_step(model=path, acts=str(tmp_path / "l2.pt"), params={**ACTS, "layer": 2})
    activations_step(model=path, acts=str(tmp_path / "last.pt"), params=ACTS)  # no "layer": the last (today's)
    l2, last = load_activations(tmp_path / "l2.pt"), load_activations(tmp_path / "last.pt")
    assert (l2["layer"], l2["width"], last["layer"], last["width"]) == (2, 7, 3, 6)
    inputs = sample_inputs(ACTS["n_train"], RANGES, generator(0, STREAM_ACTS))
    for blob in (l2, last):
        assert torch.equal(blob["train"]["inputs"], inputs)  # every layer reads the same seeded inputs
    with torch.no_grad():
        torch.testing.assert_close(l2["train"]["acts"], hand_forward(model, inputs, 2), rtol=1e-6, atol=1e-6)
        assert torch.equal(last["train"]["acts"], model.hidden(inputs))
        for blob in (l2, last):
            assert torch.equal(blob["train"]["y_model"], model(inputs))


def test_sae_landmarks_bands_and_slopes_read_the_layer_their_inputs_record(tmp_path):
    """An SAE on layer 1 (8 wide) records its layer; splicing and probing go through that layer (a
    wrong one would not even fit: the layers are 8, 7 and 6 wide)."""
    model = build_model(WIDTHS, seed=2)
    path = write_model(tmp_path / "model.pt", model)
    acts, sae = str(tmp_path / "acts.pt"), str(tmp_path / "sae.pt")
    activations_step(model=path, acts=acts, params={**ACTS, "layer": 1})
    sae_step(acts=acts, model=path, sae=sae, metrics=str(tmp_path / "m.parquet"), latents=str(tmp_path / "l.parquet"),
             curve=str(tmp_path / "c.parquet"), params=SAE)
    assert sae_layer(sae) == 1
    m = pd.read_parquet(tmp_path / "m.parquet").iloc[0]
    assert (m.layer, m.width, m.latents, m.k) == (1, 8, 12, 2)
    dictionary, blob = load_sae(sae), load_activations(acts)
    ho = blob["heldout"]
    with torch.no_grad():
        y = model.from_layer(dictionary(ho["acts"]), 1).double()
    y_true = target(ho["inputs"]).double()
    assert m.rel_mse_spliced == pytest.approx(float((y - y_true).pow(2).mean() / y_true.var()), rel=1e-6)

    bands = {"x_points": 9, "a_points": 9, "b_slices": [-1.0, 1.0], "min_active_frac": 0.005, "coherence_min": 0.8,
             "c_max": 2.0, "c_tol": 0.15, "invariance_min": 0.6, "buckets": 10, "seed": 0, "device": "cpu"}
    out = {k: str(tmp_path / f"{k}.x") for k in ("slices", "latents", "grid")}
    bands_step(model=path, sae=sae, **out, params=bands)
    grid = load_torch(out["grid"])
    xs, as_ = torch.linspace(-2, 2, 9), torch.linspace(-2, 2, 9)
    with torch.no_grad():
        z = dictionary.encode(hand_forward(model, grid_inputs(xs, as_, torch.tensor([-1.0, 1.0])), 1))
    torch.testing.assert_close(grid["latents"], z.reshape(2, 9, 9, 12), rtol=1e-5, atol=1e-6)
    assert grid["latent_ids"] == list(range(12))
    # a view keeps only its band latents' grid
    bands_step(model=path, sae=sae, **{**out, "grid": str(tmp_path / "g2.pt")}, params={**bands, "grid_latents": "bands"})
    g2, flags = load_torch(tmp_path / "g2.pt"), pd.read_parquet(out["latents"])
    assert g2["latent_ids"] == [int(v) for v in flags.latent[flags.is_band]]
    assert torch.equal(g2["latents"], grid["latents"][..., g2["latent_ids"]])

    lm = {"x_points": 11, "a_points": 3, "b_points": 3, "bump_width": 0.15, "strong_corr": 0.5, "seed": 0, "device": "cpu"}
    landmarks_step(model=path, sae=sae, table=str(tmp_path / "t.parquet"), ranking=str(tmp_path / "r.parquet"), params=lm)
    assert set(pd.read_parquet(tmp_path / "t.parquet").latent) == set(range(12))
    slopes = {"c_range": [-1.0, 1.0], "c_step": 0.1, "refine": 2, "buckets": 10, "seed": 0, "device": "cpu"}
    slopes_step(acts=acts, sae=sae, bands=out["latents"], scan=str(tmp_path / "s.parquet"),
                best=str(tmp_path / "b.parquet"), params=slopes)
    best = pd.read_parquet(tmp_path / "b.parquet")
    assert set(best.latent) <= set(range(12)) and len(best)


# ------------------------------------------------------------------------------------ checkpoints
def train_params():
    return {"seed": 0, "device": "cpu", "task": {"ranges": RANGES, "out_of_range_expand": 1.5},
            "model": {"widths": list(WIDTHS)},
            "train": {"steps": 200, "batch_size": 256, "lr": 0.01, "warmup_steps": 20, "final_lr_ratio": 0.01,
                      "eval_every": 100, "val_samples": 1024, "target_rel_mse": 1e-4, "stop_at_target": False,
                      "curves": [[0.0, -1.0]], "curve_points": 5}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("trained")
    paths = {k: str(d / f"{k}.x") for k in ("model", "checkpoints", "curve", "fit", "curves")}
    train_step(**paths, params=train_params())
    return d, paths


def test_checkpoint_at_the_final_step_is_the_final_model(trained):
    d, paths = trained
    final = load_torch(paths["model"])
    checkpoint_model_step(final=paths["model"], checkpoints=paths["checkpoints"], model=str(d / "s200.pt"),
                          params={"step": 200})
    ck = load_torch(d / "s200.pt")
    assert ck["steps_trained"] == 200 and ck["ranges"] == final["ranges"] and ck["widths"] == final["widths"]
    assert all(torch.equal(ck["state"][k], final["state"][k]) for k in final["state"])
    assert ck["val_rel_mse"] == pytest.approx(final["val_rel_mse"], rel=1e-12)
    # the activations of the final checkpoint are the final model's, bit for bit
    activations_step(model=paths["model"], acts=str(d / "a_final.pt"), params=ACTS)
    activations_step(model=str(d / "s200.pt"), acts=str(d / "a_200.pt"), params=ACTS)
    a, b = load_activations(d / "a_final.pt"), load_activations(d / "a_200.pt")
    for split in ("train", "heldout"):
        for key in ("inputs", "acts", "y_model"):
            assert torch.equal(a[split][key], b[split][key]), (split, key)
    assert b["steps_trained"] == 200


def test_an_earlier_checkpoint_is_that_step_and_a_missing_one_names_the_key(trained):
    d, paths = trained
    checkpoint_model_step(final=paths["model"], checkpoints=paths["checkpoints"], model=str(d / "s100.pt"),
                          params={"step": 100})
    ck, blob = load_torch(d / "s100.pt"), load_torch(paths["checkpoints"])
    i = blob["steps"].index(100)
    assert ck["steps_trained"] == 100 and ck["val_rel_mse"] == blob["val_rel_mse"][i]
    net = load_model(d / "s100.pt")
    assert all(torch.equal(net.state_dict()[k], blob["states"][i][k]) for k in blob["states"][i])
    assert not torch.equal(net.state_dict()["out.weight"], load_model(paths["model"]).state_dict()["out.weight"])
    with pytest.raises(DataError, match=r"no eval checkpoint at step 150.*cubic\.training\.steps"):
        checkpoint_model_step(final=paths["model"], checkpoints=paths["checkpoints"], model=str(d / "x.pt"),
                              params={"step": 150})
    assert not (d / "x.pt").exists()


# ------------------------------------------------------------------------------------- config keys
def test_training_steps_log_spaced_and_lists():
    train = {"steps": 12000, "eval_every": 500}
    assert eval_checkpoint_steps(train) == list(range(0, 12001, 500))
    assert eval_checkpoint_steps({"steps": 1100, "eval_every": 500}) == [0, 500, 1000, 1100]
    assert training_steps({"log_spaced": 6}, train) == [500, 1000, 2000, 3500, 6500, 12000]
    assert training_steps({"log_spaced": 3}, train) == [500, 2500, 12000]
    assert training_steps({"log_spaced": 1}, train) == [12000]
    assert training_steps({"log_spaced": 50}, {"steps": 400, "eval_every": 200}) == [200, 400]
    assert training_steps({"log_spaced": 6}, {"steps": 30000, "eval_every": 1000}) == [1000, 2000, 4000, 8000, 15000, 30000]
    assert training_steps([0, "last", 1000], train) == [0, 1000, 12000]
    with pytest.raises(ConfigError, match=r"cubic\.training\.steps.*step 750.*such as 500 or 1000"):
        training_steps([500, 750], train)
    with pytest.raises(ConfigError, match=r"cubic\.training\.steps.*twice"):
        training_steps([12000, "last"], train)


def test_layer_saes_are_checked_against_the_widths():
    widths = [3, 64, 64, 64, 15, 1]
    assert layer_saes([{"layer": 3, "latents": 256, "k": 4}, {"layer": 1, "latents": 128, "k": 2}], widths) == {
        1: {"latents": 128, "k": 2}, 3: {"latents": 256, "k": 4}}
    for saes, match in [
        ([{"layer": 4, "latents": 64, "k": 4}], r"saes\.0.*the last one.*cubic\.sae\.latents"),
        ([{"layer": 5, "latents": 64, "k": 4}], r"saes\.0.*hidden layers 1 … 4"),
        ([{"layer": 1, "latents": 8, "k": 4}, {"layer": 1, "latents": 8, "k": 4}], r"saes\.1.*second time"),
        ([{"layer": 2, "latents": 8, "k": 9}], r"saes\.0.*k = 9"),
    ]:
        with pytest.raises(ConfigError, match=r"cubic\.layers\." + match):
            layer_saes(saes, widths)


def merged(*overrides):
    return merged_config(*overrides)


def test_views_keep_todays_params_and_paths_for_the_last_layer_and_final_model():
    cubic = merged()["cubic"]
    v = CubicViews(cubic, "cpu")
    assert v.last == 4 and v.layers == [3, 4] and v.steps == [500, 2500, 12000]
    assert (v.layer_view(4), v.layer_view(3), v.step_view(12000), v.step_view(500)) == ("", "/layer3", "", "/train_step500")
    # today's rules get exactly today's params (no rerun of existing results)
    assert v.activations_params(0, "") == {**cubic["activations"], "seed": 0, "device": "cpu"}
    assert v.sae_params(0, "") == {**cubic["sae"], "seed": 0, "device": "cpu"}
    assert v.bands_params(0, "") == {**cubic["bands"], "seed": 0, "device": "cpu"}
    assert v.model(0, "") == "results/cubic/seed0/model.pt" == v.model(0, "/layer3")
    assert v.model(2, "/train_step500") == "results/cubic/seed2/train_step500/model.pt"
    assert v.activations_params(0, "/layer3")["layer"] == 3 and "layer" not in v.activations_params(0, "/train_step500")
    assert v.sae_params(1, "/layer3") == {**cubic["sae"], "latents": 256, "k": 4, "seed": 1, "device": "cpu"}
    assert v.sae_params(1, "/train_step500") == {**cubic["sae"], "seed": 1, "device": "cpu"}
    assert v.bands_params(0, "/layer3")["grid_latents"] == "bands"
    with pytest.raises(ConfigError, match=r"cubic\.layers\.saes"):
        v.sae_params(0, "/layer2")
    assert v.files("r/seed{seed}{view}/x", ["", "/layer3"], [0, 1]) == [
        "r/seed0/x", "r/seed0/layer3/x", "r/seed1/x", "r/seed1/layer3/x"]
    assert v.layer_rows([0]) == [{"seed": 0, "layer": 3, "width": 64, "is_last": False},
                                 {"seed": 0, "layer": 4, "width": 15, "is_last": True}]
    stop = copy.deepcopy(cubic)
    stop["train"]["stop_at_target"] = True  # the final model may be earlier than the last step: read it as a checkpoint
    assert CubicViews(stop, "cpu").step_view(12000) == "/train_step12000"
    paper = CubicViews(merged("paper.yaml")["cubic"], "cpu")
    assert paper.layers == [1, 2, 3, 4] and paper.steps == [500, 1000, 2000, 3500, 6500, 12000]  # the default training: 12 000 steps, eval every 500

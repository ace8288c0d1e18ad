import math

import pandas as pd
import pytest
import torch

from polyinterp.cubic.regressor.model import build_model
from polyinterp.cubic.regressor.train import check_alive, lr_factor, train_step
from polyinterp.errors import ConfigError, TrainingError
from polyinterp.io import load_torch


def params(steps=300, **train):
    return {
        "seed": 0, "device": "cpu",
        "task": {"ranges": {"x": [-2, 2], "a": [-2, 2], "b": [-2, 2]}, "out_of_range_expand": 1.5},
        "model": {"widths": [3, 32, 15, 1]},
        "train": {"steps": steps, "batch_size": 512, "lr": 0.01, "warmup_steps": 20, "final_lr_ratio": 0.01,
                  "eval_every": 100, "val_samples": 2048, "target_rel_mse": 1e-4, "stop_at_target": False,
                  "curves": [[0.0, -1.0], [3.0, -3.0]], "curve_points": 11, **train},
    }


def test_lr_schedule_warmup_then_cosine():
    assert lr_factor(0, 10, 100, 0.1) == pytest.approx(0.1 * (0.1 + 0.9 * 0.5 * (1 + math.cos(0))))
    assert lr_factor(9, 10, 100, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.09)))
    assert lr_factor(50, 10, 100, 0.1) == pytest.approx(0.55)
    assert lr_factor(100, 10, 100, 0.1) == pytest.approx(0.1)


def _run(tmp_path, p, tag):
    paths = [tmp_path / f"{tag}_{n}" for n in ("model.pt", "ck.pt", "curve.parquet", "fit.parquet", "curves.parquet")]
    train_step(**dict(zip(("model", "checkpoints", "curve", "fit", "curves"), map(str, paths))), params=p)
    return paths


def test_training_learns_records_and_is_deterministic(tmp_path):
    p = params()
    m1, ck, curve, fit, curves = _run(tmp_path, p, "a")
    m2, *_ = _run(tmp_path, p, "b")
    s1, s2 = load_torch(m1)["state"], load_torch(m2)["state"]
    assert all((s1[k] == s2[k]).all() for k in s1)
    c = pd.read_parquet(curve)
    val = c[c.split == "val"].sort_values("step")
    assert list(val.step) == [0, 100, 200, 300]
    assert val.rel_mse.iloc[-1] < 0.1 * val.rel_mse.iloc[0]
    f = pd.read_parquet(fit)
    assert set(f.split) == {"val", "out_of_range"}
    v = f[f.split == "val"].iloc[0]
    assert v.rel_mse == pytest.approx(v.mse / v.var_y)
    assert bool(v.target_met) == (v.rel_mse <= 1e-4) and v.steps_trained == 300
    ckpts = load_torch(ck)
    assert ckpts["steps"] == [0, 100, 200, 300] and len(ckpts["states"]) == 4
    cv = pd.read_parquet(curves)
    assert list(cv.groupby("curve").in_range.first()) == [True, False]


def test_stop_at_target_stops_early(tmp_path):
    p = params(steps=400, target_rel_mse=0.5, stop_at_target=True)
    _, _, _, fit, _ = _run(tmp_path, p, "s")
    f = pd.read_parquet(fit).iloc[0]
    assert f.steps_trained < 400 and bool(f.target_met) and f.first_step_at_target == f.steps_trained


def test_eval_every_above_steps_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="eval_every"):
        _run(tmp_path, params(steps=50), "e")


def test_dead_regressor_fails_in_cubic_train_naming_the_rate(tmp_path):
    """Issue 16: lr 1 without warm-up used to pass cubic_train with a warning and fail in cubic_sae."""
    p = params(steps=200, lr=1.0, warmup_steps=0)
    p["model"]["widths"] = [3, 64, 64, 64, 15, 1]
    with pytest.raises(TrainingError, match=r"dead.*cubic\.train\.lr \(now 1\.0\).*cubic\.train\.warmup_steps \(now 0\)"):
        _run(tmp_path, p, "dead")
    assert not list(tmp_path.iterdir())  # nothing written


def _model(bias_last=0.0):
    model = build_model([3, 8, 4, 1], seed=0)
    with torch.no_grad():
        model.body[2].bias.fill_(bias_last)
    return model


def test_check_alive_names_the_dead_layer_and_passes_a_live_one():
    x = torch.rand(500, 3) * 4 - 2
    tp = {"lr": 0.5, "warmup_steps": 3}
    check_alive(_model(), x, 0.2, 0, 10, tp)  # live and better than the mean: no error
    dead = _model(bias_last=-1e4)  # every unit of layer 2 below zero on every input
    assert dead.live_units(x)[1] == 0
    with pytest.raises(TrainingError, match=r"hidden layer 2 \(width 4\) has no unit active"):
        check_alive(dead, x, 0.2, 0, 10, tp)
    with pytest.raises(TrainingError, match=r"rel-MSE 1\.3 >= 1"):
        check_alive(_model(), x, 1.3, 0, 10, tp)


def test_live_units_counts_units_positive_somewhere():
    model = _model()
    x = torch.rand(300, 3) * 4 - 2
    h, counts = x, []
    for layer in model.body:
        h = layer(h)
        if isinstance(layer, torch.nn.ReLU):
            counts.append(int(sum(bool((h[:, j] > 0).any()) for j in range(h.shape[1]))))
    assert model.live_units(x) == counts

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
from polyinterp.cubic.views.grid import (grid_points, grid_seed_step, grid_summary_step, grid_values, line_rel_mse,
                                         summarize_network, train_singles)
from polyinterp.rules import point_files, seed_params, summary_params
from polyinterp.cubic.regressor.batched import BatchedMLP
from polyinterp.cubic.regressor.model import CubicMLP, build_model, load_model
from polyinterp.cubic.regressor.train import lr_factor
from polyinterp.cubic.sae.probe import grid_inputs, latent_activations
from polyinterp.cubic.sae import batched as batched_sae
from polyinterp.cubic.sae.autoencoder import TopKSAE, evaluate_sae, load_sae, train_sae
from polyinterp.cubic.regressor.task import (STREAM_GRID_ACTS, STREAM_GRID_HELDOUT, STREAM_GRID_TRAIN, STREAM_GRID_VAL,
                                             cubic, generator, sample_x, target)
from polyinterp.cubic.probes.tracking import near_landmark_share, score_latents
from polyinterp.errors import ConfigError, DataError, TrainingError
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
    point = {"ia": 0, "ib": 0, "a": a, "b": b}
    tp = {**TRAIN, "steps": 400}
    [(net, info)] = train_singles([point], (-2.0, 2.0), [1, 16, 16, 1], tp, 0, torch.device("cpu"))
    [(net2, _)] = train_singles([point], (-2.0, 2.0), [1, 16, 16, 1], tp, 0, torch.device("cpu"))
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
    p = seed_params(cfg, 0, "cpu")
    assert (p["widths"], p["x_range"], p["seed"]) == ([1, 8, 6, 1], [-2.0, 2.0], 0)
    assert [(q["ia"], q["ib"], q["a"], q["b"]) for q in p["points"]] == [
        (0, 0, -2.0, -2.0), (0, 1, -2.0, 2.0), (1, 0, 2.0, -2.0), (1, 1, 2.0, 2.0)]
    assert p["sae"]["latents"] == 8 and "r2_target" not in p["sae"] and p["sae"]["aux_k"] == cfg["sae"]["aux_k"]
    with pytest.raises(ConfigError, match="cubic.grid.sae.k"):
        seed_params(tiny_cubic(sae={"latents": 4, "k": 5, "steps": 10}), 0, "cpu")
    with pytest.raises(ConfigError, match="cubic.grid.widths"):
        seed_params(tiny_cubic(widths=[3, 8, 1]), 0, "cpu")
    with pytest.raises(ConfigError, match="cubic.grid.activations.n_train"):
        seed_params(tiny_cubic(activations={"n_train": 100, "n_heldout": 50}), 0, "cpu")


def run_grid(tmp_path, cfg) -> list[dict]:
    """Rule cubic_grid_seed on ``cfg``'s grid at seed 0: each point's files, in the points' order."""
    pattern = str(tmp_path / "seed{seed}" / "a{ia}_b{ib}")
    files = {k: point_files(pattern + "/" + f, cfg, [0]) for k, f in (("model", "model.pt"), ("sae", "sae.pt"),
                                                                     ("metrics", "metrics.parquet"))}
    grid_seed_step(**files, params=seed_params(cfg, 0, "cpu"))
    return [{k: files[k][i] for k in files} for i in range(len(files["model"]))]


def test_the_seed_step_writes_a_1d_network_and_its_sae_per_point(tmp_path):
    cfg = tiny_cubic()
    files = run_grid(tmp_path, cfg)
    assert len(files) == 4
    paths = files[3]  # (1, 1)
    blob = load_torch(paths["model"])
    assert blob["widths"] == [1, 8, 6, 1] and (blob["a"], blob["b"]) == (2.0, 2.0)
    sae = load_sae(paths["sae"])
    assert (sae.d, sae.m, sae.k) == (6, 8, 2)
    m = load_parquet(paths["metrics"])
    assert len(m) == 1 and (m.ia.iloc[0], m.ib.iloc[0], m.widths.iloc[0]) == (1, 1, "1-8-6-1")
    assert 0 < m.val_rel_mse.iloc[0] < 1 and m.sae_r2_heldout.iloc[0] <= 1
    assert m.val_rel_mse.iloc[0] == blob["val_rel_mse"]
    with pytest.raises(DataError, match="3 model files for 4 grid points"):
        grid_seed_step(model=[f["model"] for f in files][:3], sae=[f["sae"] for f in files],
                       metrics=[f["metrics"] for f in files], params=seed_params(cfg, 0, "cpu"))


# ------------------------------------------------------------------ batched = one at a time
def alone(params: dict, point: dict):
    """The one-at-a-time route (the grid's code before a seed's networks were trained together): one
    ``CubicMLP`` and one Adam for this point alone, its validation rel-MSE, then ``train_sae`` on its
    last hidden layer and the SAE's held-out R². Returns (network, val rel-MSE, SAE, R², since fired)."""
    seed, tp, x_range, a, b = params["seed"], params["train"], params["x_range"], point["a"], point["b"]
    val = sample_x(tp["val_samples"], x_range, generator(seed, STREAM_GRID_VAL))
    y_val = cubic(val[:, 0], a, b).double()
    net = build_model(params["widths"], seed)
    opt = torch.optim.Adam(net.parameters(), lr=tp["lr"], foreach=True)
    gen = generator(seed, STREAM_GRID_TRAIN)
    for step in range(tp["steps"]):
        for group in opt.param_groups:
            group["lr"] = tp["lr"] * lr_factor(step, tp["warmup_steps"], tp["steps"], tp["final_lr_ratio"])
        xb = sample_x(tp["batch_size"], x_range, gen)
        loss = ((net(xb) - cubic(xb[:, 0], a, b)) ** 2).mean() / float(y_val.var())
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        rel = float((net(val).double() - y_val).pow(2).mean() / y_val.var())
        acts = {split: net.hidden(sample_x(n, x_range, generator(seed, stream)))
                for split, n, stream in (("train", params["activations"]["n_train"], STREAM_GRID_ACTS),
                                         ("heldout", params["activations"]["n_heldout"], STREAM_GRID_HELDOUT))}
    sae, _, since_fired = train_sae(acts["train"], params["sae"], seed)
    return net, rel, sae, evaluate_sae(sae, acts["heldout"])["r2"], since_fired


def test_a_seeds_networks_and_saes_trained_together_are_those_trained_alone(tmp_path):
    """Rule cubic_grid_seed trains a seed's grid as one batched network and one batched SAE: each
    point's files match the one-at-a-time route (:func:`alone`), 300 network steps and 300 SAE steps
    with dead latents (the AuxK loss on) from about step 20.

    On the CPU (MKL) the two routes agree bit for bit. The tolerances admit another BLAS, whose
    batched and single products may round differently in the last bit: a last-bit difference in one
    layer's gradient at every step moved the paper grid's weights by at most 1.4e-4 after 300 steps,
    its validation rel-MSE by 4e-6 relative and its SAEs' held-out R² by 3e-5 (the SAE's weights
    themselves move more: a TopK choice near a tie can flip, so they are compared over a short run,
    in the next test). A mistake (a network reading another's target, gradient or Adam state, a wrong
    schedule) moves them by orders of magnitude more."""
    cfg = tiny_cubic(a_points=3, b_points=1, widths=[1, 8, 8, 6, 1], sae={"latents": 8, "k": 2, "steps": 300})
    cfg["sae"]["dead_threshold"] = 2000
    params = seed_params(cfg, 0, "cpu")
    files = run_grid(tmp_path, cfg)
    for point, paths in zip(params["points"], files):
        net, rel, sae, r2, since_fired = alone(params, point)
        got = load_model(paths["model"])
        for name, want in net.state_dict().items():
            torch.testing.assert_close(got.state_dict()[name], want, atol=1e-3, rtol=1e-3, msg=f"{point} {name}")
        row = load_parquet(paths["metrics"]).iloc[0]
        assert row.val_rel_mse == pytest.approx(rel, rel=1e-3)
        assert row.sae_r2_heldout == pytest.approx(r2, abs=1e-3)
        assert row.sae_dead_frac_train > 0  # the AuxK loss ran
        assert row.sae_dead_frac_train == pytest.approx(float((since_fired >= 2000).double().mean()), abs=1 / 8 + 1e-9)


def test_batched_saes_are_each_fitted_as_alone_through_every_auxk_case(monkeypatch):
    """Three SAEs fitted together, 40 steps, equal those fitted one at a time by ``train_sae``
    within 1e-4 (equal bit for bit on the CPU; the tolerance admits another BLAS's last bits over 40
    steps, where no TopK choice is near a tie with these seeds). The sets differ so that at one step
    one SAE has no dead latent, one at most ``aux_k`` and one more than ``aux_k``: each AuxK case,
    side by side."""
    g = torch.Generator().manual_seed(5)
    n, d = 1500, 6
    u = torch.randn(n, 1, generator=g)
    x = torch.stack([torch.relu(torch.randn(n, d, generator=g)),  # full rank: every latent fires
                     torch.relu(torch.randn(n, 2, generator=g) @ torch.randn(2, d, generator=g)),
                     torch.relu(u @ torch.randn(1, d, generator=g) + 0.1)])  # rank one: most latents dead
    params = {"latents": 12, "k": 2, "steps": 40, "batch_size": 100, "lr": 1e-2, "decay_frac": 0.2, "aux_k": 3,
              "aux_coef": 1 / 32, "dead_threshold": 300, "geometric_median_samples": 500,
              "geometric_median_iters": 20, "log_every": 20}
    seen = []
    real = batched_sae.auxk_losses

    def spy(sae, pre, residual, dead, aux_k):
        seen.append(dead.sum(-1).tolist())
        return real(sae, pre, residual, dead, aux_k)

    monkeypatch.setattr(batched_sae, "auxk_losses", spy)
    saes, since_fired = batched_sae.train_saes(x, params, 3, torch.device("cpu"), ["set 0", "set 1", "set 2"])
    assert any(c[0] == 0 and 0 < min(c[1:]) and min(c[1:]) <= 3 < max(c[1:]) for c in seen), seen
    for p in range(3):
        want, _, want_since = train_sae(x[p], params, 3)
        for name, value in want.state()["state"].items():
            torch.testing.assert_close(saes[p].state()["state"][name], value, atol=1e-4, rtol=1e-4, msg=f"{p} {name}")
        assert torch.equal(since_fired[p], want_since)
    flat = x.clone()
    flat[1] = 0.5
    with pytest.raises(DataError, match="SAE of the set 1 on are constant"):
        batched_sae.train_saes(flat, params, 3, torch.device("cpu"), ["set 0", "set 1", "set 2"])


def test_batched_auxk_losses_select_only_where_a_row_has_more_positive_dead_than_aux_k():
    """Four SAEs' AuxK losses at once against a torch.topk selection among each one's dead latents (an
    independent route): none dead; at most aux_k dead; more dead than aux_k with at most aux_k positive per
    row (no selection needed); more dead with rows of more positive (selected). Loss and gradient
    equal to round-off (bit for bit on the CPU; a wrong selection moves the loss by a tenth or more)."""
    g = torch.Generator().manual_seed(11)
    P, n, d, m, aux_k = 4, 50, 5, 10, 3
    sae = batched_sae.BatchedTopKSAE(P, d, m, 2)
    sae.init_weights(g, torch.zeros(P, d))
    residual = torch.randn(P, n, d, generator=g)
    dead = torch.zeros(P, m, dtype=torch.bool)
    dead[1, [1, 4]] = True  # at most aux_k dead first: the others' positions among the SAEs with dead latents
    dead[2, :7] = dead[3, 2:9] = True  # are not their positions among those with more than aux_k
    base = torch.randn(P, n, m, generator=g)
    base[2, :, :7] = base[2, :, :7].abs() * torch.where(torch.rand(n, 7, generator=g).argsort(1) < 2, 1.0, -1.0)
    base[3, :, 2:9] = base[3, :, 2:9].abs()  # 7 positive dead in every row
    pre1, pre2 = base.clone().requires_grad_(), base.clone().requires_grad_()
    got = batched_sae.auxk_losses(sae, pre1, residual, dead, aux_k)
    want = []
    for p in range(P):
        if not dead[p].any():
            want.append(pre2.new_zeros(()))
            continue
        masked = pre2[p].masked_fill(~dead[p], float("-inf"))
        vals, idx = masked.topk(min(aux_k, int(dead[p].sum())), dim=-1)
        z = torch.zeros_like(masked).scatter(-1, idx, torch.relu(vals))
        recon = z @ sae.W_dec[p].detach().T
        r = residual[p]
        want.append((r - recon).pow(2).sum(-1).mean() / (r - r.mean(0)).pow(2).sum(-1).mean())
    want = torch.stack(want)
    torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-6, atol=0)
    assert bool((got[1:] > 0).all())
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(pre1.grad, pre2.grad, rtol=1e-6, atol=1e-9)


def test_batched_networks_stay_apart_and_errors_name_the_point():
    """A diverging network (its target overflows float32) is named alone and leaves the others'
    training as it would be without it; a constant target is refused naming its polynomial."""
    ok = {"ia": 0, "ib": 0, "a": 1.0, "b": -1.0}
    huge = {"ia": 1, "ib": 0, "a": 1e30, "b": 0.0}
    tp = {**TRAIN, "steps": 200}
    model = build_model([1, 8, 6, 1], 0)
    with pytest.raises(TrainingError, match=r"single-polynomial network \(a = 1e\+30, b = 0\) \(seed 0\) diverged"
                                             r" at step 200") as err:
        train_singles([ok, huge], (-2.0, 2.0), [1, 8, 6, 1], tp, 0, torch.device("cpu"))
    assert "a = 1," not in str(err.value)
    with pytest.raises(ConfigError, match=r"x³ \+ 1.0·x² \+ -1.0·x is constant on the x range \[0.5, 0.5\]"):
        train_singles([ok], (0.5, 0.5), [1, 8, 6, 1], tp, 0, torch.device("cpu"))
    # the batched model's copies: each copy's output and gradient are its own
    both = BatchedMLP(model, 2)
    x = sample_x(64, (-2.0, 2.0), generator(0, 99))
    with torch.no_grad():
        both.weights[0][1].mul_(float("nan"))  # copy 1 broken: copy 0 must not notice
    out = both(x)
    out.sum().backward()
    torch.testing.assert_close(out[0], model(x).detach())
    assert bool(out[1].isnan().all())
    ref = build_model([1, 8, 6, 1], 0)
    ref(x).sum().backward()
    for w, lin in zip(both.weights, [m for m in ref.modules() if isinstance(m, torch.nn.Linear)]):
        torch.testing.assert_close(w.grad[0], lin.weight.grad)
    assert isinstance(both.copy(0), CubicMLP)


def test_grid_summary_scores_both_networks_by_independent_routes(tmp_path):
    cfg = tiny_cubic()
    files = run_grid(tmp_path, cfg)
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

"""Training: checkpoint schedule, bit-identical reruns on CPU, NaN detection with the step number, and the
authors' recipe (plain AdamW, cosine annealing stepped once per epoch)."""

import math

import numpy as np
import pytest
import torch

from torch.optim.optimizer import register_optimizer_step_pre_hook

from polyinterp.errors import ConfigError, TrainingError
from polyinterp.io import load_torch
from polyinterp.mnist.data import MNIST
from polyinterp.mnist.model import make_mlp
from polyinterp.rules import checkpoint_steps
from polyinterp.mnist.train import EpochBatches, learning_rate, recipe, train_mlp


def synthetic_mnist(n_train=2000, n_test=400, seed=0):
    """Learnable stand-in: each class lights up its own 4×4 block of the 28×28 image, plus noise."""
    rng = np.random.default_rng(seed)

    def make(n):
        y = rng.integers(0, 10, n)
        x = rng.integers(0, 60, (n, 28, 28))
        for i, k in enumerate(y):
            r, c = divmod(int(k), 5)
            x[i, 4 + 8 * r : 8 + 8 * r, 2 + 5 * c : 6 + 5 * c] += 190
        return x.astype(np.uint8), y.astype(np.int64)

    (a, b), (c, d) = make(n_train), make(n_test)
    return MNIST(a, b, c, d, source="synthetic")


PARAMS = dict(model="mlp_relu", arch="mlp", activation="relu", hidden=16, lr=0.01, warmup_steps=20, batch_size=64,
              weight_decay=0.1, preprocess=dict(pool=4, center=False), device="cpu")
# the authors' recipe, shrunk: plain AdamW, warm-up, cosine annealing stepped once per epoch
ADAMW = {**PARAMS, "optimizer": "adamw", "lr": 0.003, "warmup_steps": 4, "batch_size": 32,
         "schedule": "cosine_per_epoch", "cosine_epochs": 3}


def test_checkpoint_steps_log_spaced():
    assert checkpoint_steps(4, 6, 1) == [0, 16, 32, 64]
    assert checkpoint_steps(4, 5, 2) == [0, 16, round(16 * 2**0.5), 32]
    steps = checkpoint_steps(4, 18, 2)
    assert steps[0] == 0 and steps[-1] == 2**18 and len(steps) == 30
    ratios = np.diff(np.log2(steps[1:]))
    np.testing.assert_allclose(ratios, 0.5, atol=0.05)


def test_epoch_batches_cover_every_index_once_per_epoch():
    batches = EpochBatches(100, 10, torch.Generator().manual_seed(0))
    first = torch.cat([batches.next() for _ in range(10)])
    second = torch.cat([batches.next() for _ in range(10)])
    assert sorted(first.tolist()) == list(range(100)) == sorted(second.tolist())
    assert not torch.equal(first, second)


def test_training_is_bit_identical_and_learns(tmp_path):
    data = synthetic_mnist()
    steps = [0, 50, 200]
    runs = []
    for r in range(2):
        paths = {s: tmp_path / f"run{r}" / f"step{s}.pt" for s in steps}
        meta = train_mlp(data, PARAMS, seed=3, ckpt_paths=paths)
        runs.append([load_torch(paths[s]) for s in steps])
    for a, b in zip(*runs):
        assert a["step"] == b["step"]
        for k in a["state"]:
            assert torch.equal(a["state"][k], b["state"][k]), k
        assert a["train_loss"] == b["train_loss"] and a["test_accuracy"] == b["test_accuracy"]
    assert meta[-1]["test_accuracy"] > 0.9 > meta[0]["test_accuracy"]
    other = tmp_path / "seed4.pt"
    train_mlp(data, PARAMS, seed=4, ckpt_paths={200: other})
    assert not torch.equal(load_torch(other)["state"]["0.weight"], runs[0][-1]["state"]["0.weight"])


def test_checkpoint_holds_eval_weights_and_metadata(tmp_path):
    data = synthetic_mnist()
    path = tmp_path / "step100.pt"
    train_mlp(data, PARAMS, seed=0, ckpt_paths={100: path})
    ckpt = load_torch(path)
    assert ckpt["arch"] == {"d": 49, "hidden": 16, "n_out": 10, "arch": "mlp", "activation": "relu"}
    assert {"step", "seed", "config_hash", "train_loss", "test_accuracy", "preprocess"} <= set(ckpt)
    # the saved weights reproduce the recorded accuracy (they are the eval-mode weights)
    from polyinterp.mnist.model import accuracy, load_network
    from polyinterp.mnist.preprocess import apply_preprocess

    model = load_network(ckpt)
    acc = accuracy(model, apply_preprocess(data.test_images, ckpt["preprocess"]), torch.as_tensor(data.test_labels))
    assert acc == ckpt["test_accuracy"]


def test_nan_loss_stops_with_step_number(tmp_path):
    data = synthetic_mnist()
    with pytest.raises(TrainingError, match=r"non-finite training loss at step \d+"):
        train_mlp(data, {**PARAMS, "lr": 1e30, "weight_decay": 0.0, "warmup_steps": 0}, seed=0, ckpt_paths={300: tmp_path / "x.pt"})
    assert not (tmp_path / "x.pt").exists()


def test_sgd_settings_only_where_the_baseline_runs():
    from polyinterp.rules import sgd_checkpoints, sgd_settings

    steps = [0, 16, 1024, 16384, 65536]
    assert sgd_checkpoints("all", steps) == steps
    assert sgd_checkpoints([1024, "last"], steps) == [1024, 65536]
    with pytest.raises(ConfigError, match="mnist.approx.sgd.checkpoints"):
        sgd_checkpoints([1000], steps)
    sgd = {"enabled": True, "checkpoints": [1024], "steps": 10, "batch": 4, "lr": 0.1}
    assert sgd_settings(sgd, 1024, [1024]) == {"enabled": True, "steps": 10, "batch": 4, "lr": 0.1}
    # elsewhere (or when off) nothing but the switch: changing lr reruns no job that does not fit SGD
    assert sgd_settings(sgd, 16, [1024]) == {"enabled": False}
    assert sgd_settings({**sgd, "enabled": False}, 1024, [1024]) == {"enabled": False}


def test_adamw_recipe_is_bit_identical_and_starts_from_default_init(tmp_path):
    data = synthetic_mnist(n_train=600, n_test=200)
    steps = [0, 16, 40]
    runs = []
    for r in range(2):
        paths = {s: tmp_path / f"run{r}" / f"step{s}.pt" for s in steps}
        train_mlp(data, ADAMW, seed=5, ckpt_paths=paths)
        runs.append([load_torch(paths[s]) for s in steps])
    for a, b in zip(*runs):
        assert a["step"] == b["step"] and set(a["state"]) == set(b["state"])
        for k in a["state"]:
            assert torch.equal(a["state"][k], b["state"][k]), (a["step"], k)
        assert a["train_loss"] == b["train_loss"] and a["test_accuracy"] == b["test_accuracy"]
    # step 0 is PyTorch's default init under the seed; training moved every tensor
    torch.manual_seed(5)
    init = make_mlp(49, 16).state_dict()
    for k, v in init.items():
        assert torch.equal(runs[0][0]["state"][k], v), k
        assert not torch.equal(runs[0][-1]["state"][k], v), k


def _cosine_annealing_per_epoch(lr, steps_per_epoch, t_max, n_epochs):
    """Rate of every step from torch's CosineAnnealingLR, stepped at the end of each epoch."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=t_max, eta_min=0.0)
    rates = []
    for _ in range(n_epochs):
        rates += [opt.param_groups[0]["lr"]] * steps_per_epoch
        opt.step()
        sched.step()
    return rates


def test_learning_rate_is_cosine_annealing_stepped_per_epoch_times_warmup():
    spe, t_max, warm, lr = 5, 4, 7, 0.02
    ref = _cosine_annealing_per_epoch(lr, spe, t_max, t_max + 1)
    kw = dict(lr=lr, warmup_steps=warm, schedule="cosine_per_epoch", steps_per_epoch=spe, cosine_epochs=t_max)
    for step, r in enumerate(ref, start=1):
        assert learning_rate(step, **kw) == pytest.approx(r * min(1.0, step / warm), rel=1e-12, abs=1e-18), step
    assert ref[0] == lr and ref[-1] < 1e-18 < ref[-spe - 1]  # a full half cosine, down to 0 at epoch T
    # clamped at T (CosineAnnealingLR would rise again): 0 from epoch T on
    assert learning_rate(t_max * spe + 1, **kw) == learning_rate(10 * t_max * spe, **kw) == 0.0
    # no schedule: warm-up, then constant; no warm-up: lr from step 1
    flat = {**kw, "schedule": "none"}
    assert [learning_rate(s, **flat) for s in (1, 7, 100)] == [lr / 7, lr, lr]
    assert learning_rate(1, **{**kw, "warmup_steps": 0}) == lr


def test_adamw_loop_uses_the_scheduled_rate_at_every_step(tmp_path):
    data = synthetic_mnist(n_train=200, n_test=100)   # 200 // 32 = 6 steps per epoch
    seen = []
    hook = register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: seen.append([g["lr"] for g in opt.param_groups]))
    try:
        train_mlp(data, ADAMW, seed=0, ckpt_paths={30: tmp_path / "c.pt"})
    finally:
        hook.remove()
    assert len(seen) == 30
    for step, rates in enumerate(seen, start=1):
        e = min((step - 1) // 6, 3)
        want = 0.003 * min(1.0, step / 4) * 0.5 * (1 + math.cos(math.pi * e / 3))
        assert rates == pytest.approx([want], rel=1e-12, abs=1e-18), step
    assert seen[-1] == [0.0] and seen[5] == [0.003] and seen[6][0] == pytest.approx(0.003 * 0.75)


def test_adamw_recipe_matches_a_plain_torch_loop(tmp_path):
    """Independent route: torch.optim.AdamW + CosineAnnealingLR.step() once per epoch, written out."""
    from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess

    data = synthetic_mnist(n_train=200, n_test=100)
    params = {**ADAMW, "warmup_steps": 0}
    total = 24   # epochs 0..3 of 6 steps, up to T = 3 where both schedules reach 0
    train_mlp(data, params, seed=2, ckpt_paths={total: tmp_path / "c.pt"})
    ours = load_torch(tmp_path / "c.pt")["state"]

    spec = make_preprocess(data.train_images, 4, False)
    x, y = apply_preprocess(data.train_images, spec), torch.as_tensor(data.train_labels)
    torch.manual_seed(2)
    model = make_mlp(49, 16)
    opt = torch.optim.AdamW(model.parameters(), lr=params["lr"], weight_decay=params["weight_decay"])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3, eta_min=0.0)
    batches = EpochBatches(200, 32, torch.Generator().manual_seed(2))
    for step in range(1, total + 1):
        idx = batches.next()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        last_rate = opt.param_groups[0]["lr"]
        opt.step()
        if step % 6 == 0:
            sched.step()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(ours[k], v, rtol=1e-5, atol=1e-7, msg=k)
    assert last_rate < 1e-18   # the comparison spans the whole half cosine, down to 0 at epoch T


def test_adamw_with_zero_rate_leaves_the_weights_alone(tmp_path):
    """AdamW scales both the Adam step and the decoupled weight decay by the rate: lr 0 changes nothing."""
    data = synthetic_mnist(n_train=200, n_test=100)
    paths = {0: tmp_path / "s0.pt", 20: tmp_path / "s20.pt"}
    train_mlp(data, {**ADAMW, "lr": 0.0, "weight_decay": 0.5}, seed=1, ckpt_paths=paths)
    a, b = load_torch(paths[0])["state"], load_torch(paths[20])["state"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the same run at a small positive rate does move them (the test above can fail)
    train_mlp(data, {**ADAMW, "lr": 1e-4, "weight_decay": 0.5}, seed=1, ckpt_paths={20: tmp_path / "p.pt"})
    assert not torch.equal(load_torch(tmp_path / "p.pt")["state"]["0.weight"], a["0.weight"])


def test_schedule_free_with_a_cosine_schedule_is_refused(tmp_path):
    data = synthetic_mnist(n_train=200, n_test=100)
    bad = {**PARAMS, "optimizer": "schedulefree_adamw", "schedule": "cosine_per_epoch", "cosine_epochs": 4}
    with pytest.raises(ConfigError, match=r"'mnist\.train\.schedule'.*'mnist\.train\.optimizer'.*schedule: none.*optimizer: adamw"):
        train_mlp(data, bad, seed=0, ckpt_paths={10: tmp_path / "x.pt"})
    with pytest.raises(ConfigError, match=r"'mnist\.train\.optimizer' is 'sgd'"):
        train_mlp(data, {**PARAMS, "optimizer": "sgd"}, seed=0, ckpt_paths={10: tmp_path / "x.pt"})
    assert not (tmp_path / "x.pt").exists()


def test_recipe_keys_that_change_nothing_are_not_passed_to_the_training_rule():
    """Adding the recipe keys at their defaults must not retrain existing runs (Snakemake's params trigger)."""
    from polyinterp.rules import train_params

    base = {"hidden": 256, "lr": 0.002}
    assert train_params({**base, "optimizer": "schedulefree_adamw", "schedule": "none", "cosine_epochs": 2048}) == base
    assert train_params({**base, "optimizer": "adamw", "schedule": "none", "cosine_epochs": 7}) == {**base, "optimizer": "adamw"}
    cos = {**base, "optimizer": "adamw", "schedule": "cosine_per_epoch", "cosine_epochs": 7}
    assert train_params(cos) == cos
    assert recipe(train_params({**base, "optimizer": "schedulefree_adamw", "schedule": "none"})) == recipe({})


def test_nan_message_names_every_key_that_can_cause_it(tmp_path):
    """Issue 16: a NaN used to be blamed on lr alone, also when weight decay caused it."""
    data = synthetic_mnist()
    with pytest.raises(TrainingError, match=r"mnist\.train\.lr.*mnist\.train\.weight_decay.*mnist\.train\.warmup_steps"):
        train_mlp(data, {**PARAMS, "lr": 1e30, "weight_decay": 0.0, "warmup_steps": 0}, seed=0, ckpt_paths={300: tmp_path / "x.pt"})


def test_weight_decay_that_flips_weights_is_refused_before_training(tmp_path):
    data = synthetic_mnist()
    with pytest.raises(ConfigError, match=r"mnist\.train\.weight_decay.*>= 1"):
        train_mlp(data, {**PARAMS, "lr": 0.01, "weight_decay": 1000.0}, seed=0, ckpt_paths={10: tmp_path / "x.pt"})
    assert not (tmp_path / "x.pt").exists()

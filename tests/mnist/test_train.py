"""Training: checkpoint schedule, bit-identical reruns on CPU, NaN detection with the step number."""

import numpy as np
import pytest
import torch

from polyinterp.errors import ConfigError, TrainingError
from polyinterp.io import load_torch
from polyinterp.mnist.data import MNIST
from polyinterp.mnist.schedule import checkpoint_steps
from polyinterp.mnist.train import EpochBatches, train_mlp


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


PARAMS = dict(hidden=16, lr=0.01, warmup_steps=20, batch_size=64, weight_decay=0.1,
              preprocess=dict(pool=4, center=False), device="cpu")


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
    assert ckpt["arch"] == {"d": 49, "hidden": 16, "n_out": 10}
    assert {"step", "seed", "config_hash", "train_loss", "test_accuracy", "preprocess"} <= set(ckpt)
    # the saved weights reproduce the recorded accuracy (they are the eval-mode weights)
    from polyinterp.mnist.model import accuracy, load_mlp
    from polyinterp.mnist.preprocess import apply_preprocess

    model = load_mlp(ckpt)
    acc = accuracy(model, apply_preprocess(data.test_images, ckpt["preprocess"]), torch.as_tensor(data.test_labels))
    assert acc == ckpt["test_accuracy"]


def test_nan_loss_stops_with_step_number(tmp_path):
    data = synthetic_mnist()
    with pytest.raises(TrainingError, match=r"non-finite training loss at step \d+"):
        train_mlp(data, {**PARAMS, "lr": 1e30, "warmup_steps": 0}, seed=0, ckpt_paths={300: tmp_path / "x.pt"})
    assert not (tmp_path / "x.pt").exists()


def test_sgd_settings_only_where_the_baseline_runs():
    from polyinterp.mnist.schedule import sgd_checkpoints, sgd_settings

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

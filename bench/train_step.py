"""Benchmark: cost of one MNIST training step (batch gather + forward/backward + optimizer step).

    PYTHONPATH=src python bench/train_step.py [--steps 3000] [--device cpu|cuda] [--threads 2] [--recipe paper|authors]

``--recipe paper`` (the default): schedule-free AdamW, lr 2e-3, 1000 warm-up steps, batch 64
(workflow/configs/paper.yaml, config.yaml); ``--recipe authors``: AdamW lr 1e-5, weight decay 0.1,
batch 32, the per-epoch cosine rate (workflow/configs/authors_code.yaml). 784-256-10 ReLU MLP on a
random 60 000-image stand-in for MNIST.

Prints ms/step of the real loop (`polyinterp.mnist.train.train_mlp`, one checkpoint at the end):
with its setup (preprocessing, the checkpoint's evaluation) spread over the steps, and per step alone
(the difference of a run of ``--steps`` and a run of 200 steps, after a first 200-step run that
warms up: the difference cancels the setup); then the
same arithmetic done the plain way on one fixed batch (the optimizer over the parameter tensors one by
one, no batching, no NaN checks). Only ``train_mlp``'s signature is used, so the script times any
commit of the package. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import schedulefree
import torch
from torch import nn

from polyinterp.mnist.data import MNIST
from polyinterp.mnist.model import make_mlp
from polyinterp.mnist.train import train_mlp

WARM = 200
RECIPES = {
    "paper": dict(lr=0.002, warmup_steps=1000, batch_size=64, weight_decay=0.1),
    "authors": dict(optimizer="adamw", lr=1e-5, warmup_steps=0, batch_size=32, weight_decay=0.1,
                    schedule="cosine_per_epoch", cosine_epochs=2048),
}


def fake_mnist(n_train=60_000, n_test=10_000) -> MNIST:
    rng = np.random.default_rng(0)
    return MNIST(rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_train),
                 rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_test), "bench")


def bare_steps(steps, device, recipe: dict, hidden=256):
    torch.manual_seed(0)
    model = make_mlp(784, hidden).to(device)
    if recipe.get("optimizer", "schedulefree_adamw") == "schedulefree_adamw":
        opt = schedulefree.AdamWScheduleFree(model.parameters(), lr=recipe["lr"], warmup_steps=recipe["warmup_steps"],
                                             weight_decay=recipe["weight_decay"])
        opt.train()
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    batch = recipe["batch_size"]
    x = torch.randn(batch, 784, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="paper")
    args = ap.parse_args()
    if args.steps <= WARM:
        ap.error(f"--steps must exceed the {WARM}-step warm-up run")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = fake_mnist()
    recipe = RECIPES[args.recipe]
    params = dict(model="mlp_relu", hidden=256, preprocess=dict(pool=1, center=False), device=args.device, **recipe)
    with tempfile.TemporaryDirectory() as tmp:
        train_mlp(data, params, 0, {WARM: Path(tmp) / "warm.pt"})  # warm-up: first-call costs
        t0 = time.perf_counter()
        train_mlp(data, params, 0, {WARM: Path(tmp) / "short.pt"})
        short = time.perf_counter() - t0
        t0 = time.perf_counter()
        train_mlp(data, params, 0, {args.steps: Path(tmp) / "c.pt"})
        run = time.perf_counter() - t0
    bare = bare_steps(args.steps, device, recipe)
    print(f"device {device}, threads {torch.get_num_threads()}, {args.steps} steps, recipe {args.recipe}"
          f" (batch {recipe['batch_size']}), 784-256-10")
    print(f"{'training loop, setup + 1 checkpoint included':45s} {run / args.steps * 1e3:8.3f} ms/step")
    print(f"{'training loop, per step (run - 200-step run)':45s} {(run - short) / (args.steps - WARM) * 1e3:8.3f} ms/step")
    print(f"{'plain loop, fixed batch':45s} {bare:8.3f} ms/step")


if __name__ == "__main__":
    main()

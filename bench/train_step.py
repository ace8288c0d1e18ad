"""Benchmark: cost of one MNIST training step (batch gather + forward/backward + schedule-free step).

    .venv/bin/python bench/train_step.py [--steps 3000] [--device cpu|cuda] [--threads 2]

Prints ms/step of the real loop (`polyinterp.mnist.train.train_mlp`, one checkpoint at the end) and
of the same arithmetic on one fixed batch (no batching, no NaN checks): the difference is the
loop's overhead. Not a test: numbers depend on the machine.
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


def fake_mnist(n_train=60_000, n_test=10_000) -> MNIST:
    rng = np.random.default_rng(0)
    return MNIST(rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_train),
                 rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_test), "bench")


def bare_steps(steps, device, hidden=256, batch=64):
    torch.manual_seed(0)
    model = make_mlp(784, hidden).to(device)
    opt = schedulefree.AdamWScheduleFree(model.parameters(), lr=0.002, warmup_steps=1000, weight_decay=0.1)
    opt.train()
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = fake_mnist()
    params = dict(hidden=256, lr=0.002, warmup_steps=1000, batch_size=64, weight_decay=0.1,
                  preprocess=dict(pool=1, center=False), device=args.device)
    with tempfile.TemporaryDirectory() as tmp:
        train_mlp(data, params, 0, {200: Path(tmp) / "warm.pt"})  # warm-up
        t0 = time.perf_counter()
        train_mlp(data, params, 0, {args.steps: Path(tmp) / "c.pt"})
        loop = (time.perf_counter() - t0) / args.steps * 1e3
    bare = bare_steps(args.steps, device)
    print(f"device {device}, threads {torch.get_num_threads()}, {args.steps} steps, batch 64, 784-256-10")
    print(f"{'training loop (incl. setup + 1 checkpoint)':45s} {loop:8.3f} ms/step")
    print(f"{'bare forward/backward/step, fixed batch':45s} {bare:8.3f} ms/step")
    print(f"{'loop overhead':45s} {loop - bare:8.3f} ms/step")


if __name__ == "__main__":
    main()

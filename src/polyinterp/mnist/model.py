"""The MNIST model: one-hidden-layer ReLU MLP d → hidden → 10."""

from __future__ import annotations

import torch
from torch import nn


def make_mlp(d: int, hidden: int, n_out: int = 10) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


def load_mlp(ckpt: dict, device: torch.device | str = "cpu") -> nn.Sequential:
    """Rebuild the eval-mode MLP saved in a training checkpoint."""
    arch = ckpt["arch"]
    model = make_mlp(arch["d"], arch["hidden"], arch["n_out"])
    model.load_state_dict(ckpt["state"])
    return model.to(device).eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> float:
    correct = sum(int((model(x[i : i + chunk]).argmax(1) == y[i : i + chunk]).sum()) for i in range(0, len(x), chunk))
    return correct / len(x)


@torch.no_grad()
def mean_cross_entropy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> float:
    total = sum(float(nn.functional.cross_entropy(model(x[i : i + chunk]), y[i : i + chunk], reduction="sum"))
                for i in range(0, len(x), chunk))
    return total / len(x)

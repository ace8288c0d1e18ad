"""Random approximation problems shared by the approximant-library tests (a mixture, an MLP or GLU)."""

from __future__ import annotations

import math

import torch

from polyinterp.approx import GLU, MLP, GaussianMixture

DT = torch.float64


def random_mixture(d: int, K: int, seed: int, spread: float = 1.0, weights=None) -> GaussianMixture:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT) / math.sqrt(d)
    covs = A @ A.transpose(1, 2) + 0.2 * torch.eye(d, dtype=DT)
    means = spread * torch.randn(K, d, generator=g, dtype=DT)
    if weights is None:
        weights = torch.rand(K, generator=g, dtype=DT) + 0.2
        weights = weights / weights.sum()
    return GaussianMixture(weights, means, covs)


def random_model(kind: str, d: int, h: int, o: int, seed: int, activation: str = "relu"):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    if kind == "mlp":
        return MLP(r(h, d) / math.sqrt(d), 0.5 * r(h), r(o, h) / math.sqrt(h), r(o), activation)
    return GLU(r(h, d) / math.sqrt(d), 0.5 * r(h), r(h, d) / math.sqrt(d), 0.5 * r(h), r(o, h) / math.sqrt(h), r(o),
               activation)

"""The one preprocessing shared by the mixture, the MLP and every evaluation: uint8 → pixels/255,
optional average pooling (28×28 → 28/pool × 28/pool), flatten, optional centring by the training mean."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from polyinterp.errors import ConfigError


def make_preprocess(train_images: np.ndarray, pool: int, center: bool) -> dict:
    """The preprocessing spec stored with every result: pool factor and the centring mean (or None)."""
    if 28 % pool:
        raise ConfigError(f"config key 'mnist.preprocess.pool' = {pool} must divide 28.")
    spec = {"pool": int(pool), "center": bool(center), "mean": None}
    if center:
        spec["mean"] = apply_preprocess(train_images, {**spec, "center": False}, dtype=torch.float64).mean(0)
    return spec


def apply_preprocess(images: np.ndarray | torch.Tensor, spec: dict, dtype=torch.float32) -> torch.Tensor:
    """uint8 [N, 28, 28] → float [N, d] with d = (28/pool)²."""
    x = torch.as_tensor(np.asarray(images)).to(torch.float64) / 255.0
    pool = spec["pool"]
    if pool > 1:
        x = F.avg_pool2d(x.unsqueeze(1), pool).squeeze(1)
    x = x.reshape(x.shape[0], -1)
    if spec["center"]:
        x = x - spec["mean"].to(torch.float64)
    return x.to(dtype)

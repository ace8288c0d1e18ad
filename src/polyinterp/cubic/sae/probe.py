"""SAE latent activations of the regressor on arbitrary inputs (x, a, b): model → hidden layer (the
15-wide last one unless told) → SAE encoder."""

from __future__ import annotations

import torch


@torch.no_grad()
def latent_activations(model, sae, inputs: torch.Tensor, device, batch: int = 65536,
                       layer: int | None = None) -> torch.Tensor:
    """``[n, m]`` SAE latents (CPU, float32) of hidden layer ``layer`` (None: the last) at ``inputs`` ``[n, 3]``."""
    layer = model.n_hidden if layer is None else layer
    out = []
    for i in range(0, len(inputs), batch):
        out.append(sae.encode(model.layer_acts(inputs[i : i + batch].to(device), layer)).cpu())
    return torch.cat(out) if out else torch.zeros(0, sae.m)


def grid_inputs(xs: torch.Tensor, as_: torch.Tensor, bs: torch.Tensor) -> torch.Tensor:
    """All (x, a, b) combinations, ordered with b slowest and x fastest: ``[len(bs)·len(as_)·len(xs), 3]``."""
    b, a, x = torch.meshgrid(bs, as_, xs, indexing="ij")
    return torch.stack([x.reshape(-1), a.reshape(-1), b.reshape(-1)], 1)

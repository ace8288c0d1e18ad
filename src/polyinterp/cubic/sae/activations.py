"""Activations of a hidden layer of the regressor (by default the last, 15 wide; after its ReLU) on
fresh inputs.

Two sets per seed, from their own random streams (never the training or validation samples): the
``train`` set the SAE is fitted on and the slope search buckets, and a ``heldout`` set for every
held-out score. Stored as one torch file with the inputs (x, a, b), the activations and the model's
output, so later steps need not rerun the regressor. The file records which hidden ``layer`` it holds
(1 … n_hidden, see :mod:`polyinterp.cubic.regressor.model`); the SAE fitted on it records it in turn, so every
later step reads the layer from its inputs and no other rule needs to be told.
"""

from __future__ import annotations

import torch

from polyinterp.cubic.regressor.model import load_model
from polyinterp.cubic.regressor.task import STREAM_ACTS, STREAM_HELDOUT, generator, sample_inputs
from polyinterp.device import resolve_device
from polyinterp.errors import DataError
from polyinterp.io import load_torch, save_torch


@torch.no_grad()
def hidden_activations(model, inputs: torch.Tensor, device, batch: int = 65536,
                       layer: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden-layer activations ``[n, w]``, model outputs ``[n]``) on the CPU, computed in batches;
    ``layer`` None is the last hidden layer."""
    layer = model.n_hidden if layer is None else layer
    hs, ys = [], []
    for i in range(0, len(inputs), batch):
        h = model.layer_acts(inputs[i : i + batch].to(device), layer)
        hs.append(h.cpu())
        ys.append(model.from_layer(h, layer).cpu())
    return torch.cat(hs), torch.cat(ys)


def activations_step(*, model: str, acts: str, params: dict) -> None:
    """Rule ``cubic_activations``: write ``acts``, ``{split: {inputs, acts, y_model}}`` of hidden layer
    ``params["layer"]`` (absent: the last) of the regressor ``model`` for the train and held-out splits
    (fresh seeded inputs, the same for every layer and checkpoint of a seed)."""
    seed = int(params["seed"])
    device = resolve_device(params["device"])
    net = load_model(model, device)
    layer = net.check_layer(params.get("layer", net.n_hidden))
    meta = load_torch(model)
    ranges = meta["ranges"]
    blob = {"seed": seed, "ranges": ranges, "width": net.widths[layer], "layer": layer,
            "steps_trained": meta.get("steps_trained")}
    for split, n, stream in (("train", params["n_train"], STREAM_ACTS), ("heldout", params["n_heldout"], STREAM_HELDOUT)):
        inputs = sample_inputs(n, ranges, generator(seed, stream))
        hidden, y = hidden_activations(net, inputs, device, layer=layer)
        blob[split] = {"inputs": inputs, "acts": hidden, "y_model": y}
    save_torch(blob, acts)


def load_activations(path) -> dict:
    blob = load_torch(path)
    for split in ("train", "heldout"):
        if split not in blob or "acts" not in blob[split]:
            raise DataError(f"{path} has no '{split}' activations; rebuild it with the cubic_activations rule.")
    return blob

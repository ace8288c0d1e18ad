"""The cubic regressor: an MLP 3 → 64 → 64 → 64 → 15 → 1 with ReLU, split at the 15-wide layer.

``hidden(inputs)`` is the 15-wide activation after its ReLU (the input of the last Linear), and
``head(h)`` finishes the forward pass, so ``model(inputs) == head(hidden(inputs))``. Any hidden layer
splits the same way: hidden layers are numbered 1 … ``n_hidden`` from the input (1 is the first
64-wide layer, ``n_hidden`` = 4 the 15-wide one), ``layer_acts(inputs, L)`` is layer L after its ReLU
and ``from_layer(h, L)`` finishes the forward pass from it; for L = ``n_hidden`` they are ``hidden``
and ``head``.

The input is (x, a, b), width 3, for the study's regressor, or x alone, width 1, for a network that
regresses one polynomial at fixed (a, b) (the single-polynomial grid, :mod:`polyinterp.cubic.views.grid`).
"""

from __future__ import annotations

import torch
from torch import nn

from polyinterp.errors import DataError

DEFAULT_WIDTHS = (3, 64, 64, 64, 15, 1)
INPUT_WIDTHS = {3: "(x, a, b)", 1: "x alone, (a, b) fixed"}


class CubicMLP(nn.Module):
    def __init__(self, widths=DEFAULT_WIDTHS):
        super().__init__()
        widths = tuple(int(w) for w in widths)
        if len(widths) < 3 or widths[0] not in INPUT_WIDTHS or widths[-1] != 1 or min(widths) < 1:
            raise DataError(f"cubic MLP widths {widths} must start at 3 (x, a, b) or 1 (x alone, a and b fixed), "
                            f"end at 1 (y) and have at least one hidden layer.")
        self.widths = widths
        layers = []
        for i in range(len(widths) - 2):
            # In-place ReLU: autograd does not need the Linear output it overwrites; saves one [n, w]
            # buffer and pass per layer (training speed; same numbers).
            layers += [nn.Linear(widths[i], widths[i + 1]), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(widths[-2], widths[-1])

    @property
    def n_hidden(self) -> int:
        """Number of hidden layers (4 for the study's 3 → 64 → 64 → 64 → 15 → 1)."""
        return len(self.widths) - 2

    def check_layer(self, layer: int) -> int:
        layer = int(layer)
        if not 1 <= layer <= self.n_hidden:
            raise DataError(f"hidden layer {layer} does not exist: the regressor {self.widths} has hidden layers "
                            f"1 … {self.n_hidden} (cubic.layers.saes names them, 1 nearest the input).")
        return layer

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """Last hidden layer, after its ReLU: ``[n, widths[-2]]``."""
        return self.body(inputs)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Finish the forward pass from the last hidden layer: ``[n]``."""
        return self.out(h).squeeze(-1)

    def layer_acts(self, inputs: torch.Tensor, layer: int) -> torch.Tensor:
        """Hidden layer ``layer`` (1 … n_hidden) after its ReLU: ``[n, widths[layer]]``; the last is ``hidden``."""
        layer = self.check_layer(layer)
        return self.body(inputs) if layer == self.n_hidden else self.body[: 2 * layer](inputs)

    def from_layer(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Finish the forward pass from hidden layer ``layer``'s activation ``h``: ``[n]``; the last is ``head``."""
        layer = self.check_layer(layer)
        return self.head(h if layer == self.n_hidden else self.body[2 * layer :](h))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(inputs))

    @torch.no_grad()
    def live_units(self, inputs: torch.Tensor) -> list[int]:
        """Per hidden layer, how many units are positive on at least one of ``inputs``.

        A ReLU layer with 0 live units outputs exactly zero everywhere on those inputs, so the network
        is a constant there and nothing downstream of it (the SAE on the last layer) can be read.
        """
        counts, h = [], inputs
        for layer in self.body:
            h = layer(h)
            if isinstance(layer, nn.ReLU):
                counts.append(int((h > 0).any(0).sum()))
        return counts


def build_model(widths, seed: int) -> CubicMLP:
    """A freshly initialised model; the seed fixes the initial weights."""
    from polyinterp.cubic.regressor.task import STREAM_INIT, generator

    model = CubicMLP(widths)
    g = generator(seed, STREAM_INIT)
    with torch.no_grad():
        for layer in [m for m in model.modules() if isinstance(m, nn.Linear)]:
            bound = 1.0 / layer.in_features**0.5
            # Kaiming-uniform for ReLU (gain √2) on weights, PyTorch's default range on biases.
            w_bound = (6.0 / layer.in_features) ** 0.5
            layer.weight.copy_((torch.rand(layer.weight.shape, generator=g) * 2 - 1) * w_bound)
            layer.bias.copy_((torch.rand(layer.bias.shape, generator=g) * 2 - 1) * bound)
    return model


def load_model(path, device="cpu") -> CubicMLP:
    """Load the final model written by the train step (``model.pt``)."""
    from polyinterp.io import load_torch

    blob = load_torch(path)
    if "state" not in blob or "widths" not in blob:
        raise DataError(f"{path} is not a cubic model file (no 'state'/'widths'); rebuild it with the cubic_train rule.")
    model = CubicMLP(blob["widths"])
    model.load_state_dict(blob["state"])
    return model.to(device).eval()

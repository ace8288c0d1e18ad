"""The MNIST networks: a one-hidden-layer MLP d → hidden → 10 or a GLU d → hidden (gated) → 10.

``make_network`` builds the torch module a model spec names (:mod:`polyinterp.mnist.model_specs`);
``load_network`` rebuilds it from a training checkpoint; ``polynomial_network`` turns it into the
library's :class:`~polyinterp.approx.MLP` or :class:`~polyinterp.approx.GLU`, whose approximants the
pipeline computes.
"""

from __future__ import annotations

import torch
from torch import nn

from polyinterp.approx import GLU, MLP
from polyinterp.mnist.model_specs import ARCHS

# The torch module of each activation a network can be trained with (model_specs.ACTIVATIONS).
TRAINABLE_ACTIVATIONS = {
    "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid, "silu": nn.SiLU,
}


class GLUNet(nn.Module):
    """f(x) = out(φ(gate(x)) ⊙ value(x)): a gated linear unit with one hidden layer of ``hidden`` units."""

    def __init__(self, d: int, hidden: int, n_out: int, activation: str = "relu"):
        super().__init__()
        self.gate, self.value = nn.Linear(d, hidden), nn.Linear(d, hidden)
        self.act = TRAINABLE_ACTIVATIONS[activation]()
        self.out = nn.Linear(hidden, n_out)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.gate(x)) * self.value(x))


def make_mlp(d: int, hidden: int, n_out: int = 10, activation: str = "relu") -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, hidden), TRAINABLE_ACTIVATIONS[activation](), nn.Linear(hidden, n_out))


def make_network(d: int, hidden: int, n_out: int = 10, arch: str = "mlp", activation: str = "relu") -> nn.Module:
    """The untrained network of an architecture (``mlp`` or ``glu``) and activation; the ReLU MLP is
    built exactly as before models were configurable (same parameters from the same seed)."""
    if arch == "mlp":
        return make_mlp(d, hidden, n_out, activation)
    if arch == "glu":
        return GLUNet(d, hidden, n_out, activation)
    raise ValueError(f"unknown network architecture {arch!r}; use one of {ARCHS}")


def network_arch(model: nn.Module) -> dict:
    """What a checkpoint records to rebuild ``model``: d, hidden, n_out, arch, activation."""
    if isinstance(model, GLUNet):
        return {"d": model.gate.in_features, "hidden": model.gate.out_features, "n_out": model.out.out_features,
                "arch": "glu", "activation": model.activation}
    act = {cls: name for name, cls in TRAINABLE_ACTIVATIONS.items() if isinstance(cls, type)}
    name = "gelu_tanh" if isinstance(model[1], nn.GELU) and model[1].approximate == "tanh" else act[type(model[1])]
    return {"d": model[0].in_features, "hidden": model[0].out_features, "n_out": model[2].out_features,
            "arch": "mlp", "activation": name}


def model_name(saved: dict) -> str:
    """The model a checkpoint, approx file or attack-examples file belongs to (its ``mnist.models`` name)."""
    return saved["model"]


def load_network(ckpt: dict, device: torch.device | str = "cpu") -> nn.Module:
    """Rebuild the eval-mode network saved in a training checkpoint."""
    arch = ckpt["arch"]
    model = make_network(arch["d"], arch["hidden"], arch["n_out"], arch["arch"], arch["activation"])
    model.load_state_dict(ckpt["state"])
    return model.to(device).eval()


def polynomial_network(module: nn.Module, dtype: torch.dtype = torch.float64) -> MLP | GLU:
    """The library's :class:`MLP` or :class:`GLU` with the module's weights (detached, cast to ``dtype``)."""
    if isinstance(module, GLUNet):
        c = lambda t: t.detach().to(dtype)  # noqa: E731
        return GLU(c(module.gate.weight), c(module.gate.bias), c(module.value.weight), c(module.value.bias),
                   c(module.out.weight), c(module.out.bias), module.activation)
    return MLP.from_module(module, dtype)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> float:
    correct = sum(int((model(x[i : i + chunk]).argmax(1) == y[i : i + chunk]).sum()) for i in range(0, len(x), chunk))
    return correct / len(x)


@torch.no_grad()
def mean_cross_entropy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> float:
    total = sum(float(nn.functional.cross_entropy(model(x[i : i + chunk]), y[i : i + chunk], reduction="sum"))
                for i in range(0, len(x), chunk))
    return total / len(x)

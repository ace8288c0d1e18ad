"""The networks of the MNIST study (config key ``mnist.models``), resolved and checked when the
workflow is parsed (pure Python, imported by Snakemake).

Each entry names a network trained and analysed side by side with the others: ``name`` (the
``{model}`` wildcard: outputs under ``results/mnist/{name}/``, the ``model`` column of every table),
``arch`` (``mlp``: W₂φ(W₁x + b₁) + b₂; ``glu``: W₂(φ(Wx + b) ⊙ (Vx + c)) + b₂), ``activation`` φ,
optionally ``hidden`` (default ``mnist.train.hidden``) and ``train``: keys of ``mnist.train`` that this
network sets differently (the checkpoint schedule is shared, so that models compare step by step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from polyinterp.errors import ConfigError

NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_]*"
ARCHS = ("mlp", "glu")
# Activations a network can be trained with (polyinterp.mnist.model builds their modules): the library
# approximates each (closed forms for ReLU and GELU, Gauss–Hermite for the others).
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "silu")
SHARED_TRAIN_KEYS = ("checkpoints", "hidden")  # one schedule for all models; width is the model's own key


@dataclass(frozen=True)
class ModelSpec:
    name: str
    arch: str
    activation: str
    hidden: int
    train: dict = field(hash=False)  # mnist.train with this model's overrides, without the shared keys

    def arch_params(self) -> dict:
        """What rule ``mnist_train`` passes besides the recipe: the network to build."""
        return {"model": self.name, "arch": self.arch, "activation": self.activation, "hidden": self.hidden}


def resolve_models(mnist: dict) -> list[ModelSpec]:
    """``mnist.models`` as :class:`ModelSpec` s, in config order. Refused, naming the key: an empty
    list, a name that is not a plain identifier or appears twice, an architecture or activation the
    library cannot approximate, a ``train`` key that does not exist or is shared by all models."""
    entries = mnist.get("models")
    if not entries:
        raise ConfigError("config key 'mnist.models' is empty; list at least one network, e.g."
                          " [{name: mlp_relu, arch: mlp, activation: relu}].")
    base = {k: v for k, v in mnist["train"].items() if k not in SHARED_TRAIN_KEYS}
    specs, seen = [], set()
    for i, entry in enumerate(entries):
        key = f"mnist.models[{i}]"
        name = entry.get("name")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            raise ConfigError(f"config key '{key}.name' is {name!r}; use a name of letters, digits and '_' that"
                              " starts with a letter (it becomes a folder and the tables' model column).")
        if name in seen:
            raise ConfigError(f"config key '{key}.name' repeats the model name {name!r}; give every model its own name.")
        seen.add(name)
        arch = entry.get("arch", "mlp")
        if arch not in ARCHS:
            raise ConfigError(f"config key '{key}.arch' is {arch!r}; the library approximates {', '.join(ARCHS)}.")
        activation = entry.get("activation", "relu")
        if activation not in ACTIVATIONS:
            raise ConfigError(f"config key '{key}.activation' is {activation!r}; the library approximates"
                              f" {', '.join(ACTIVATIONS)}.")
        overrides = entry.get("train") or {}
        for k in overrides:
            if k in SHARED_TRAIN_KEYS:
                raise ConfigError(f"config key '{key}.train.{k}' cannot be set per model: "
                                  + ("the checkpoint schedule is shared by all models (mnist.train.checkpoints)."
                                     if k == "checkpoints" else f"use '{key}.hidden'."))
            if k not in mnist["train"]:
                raise ConfigError(f"config key '{key}.train.{k}' is not a key of mnist.train; use one of"
                                  f" {', '.join(sorted(base))}.")
        hidden = entry.get("hidden", mnist["train"]["hidden"])
        specs.append(ModelSpec(name, arch, activation, int(hidden), {**base, **overrides}))
    return specs

"""Resolve the ``device`` config value ("auto", "cpu", "cuda", "cuda:N") to a torch.device."""

from __future__ import annotations

import torch

from polyinterp.errors import ConfigError


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; an explicit CUDA request without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"config key 'device': {name!r} is not a device; use auto, cpu or cuda[:N].") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"config key 'device' is {name!r} but CUDA is not available here; use auto or cpu.")
    return device

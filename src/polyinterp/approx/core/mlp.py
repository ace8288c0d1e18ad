"""The two model families the library approximates: an MLP and a GLU (one hidden layer each)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyinterp.approx.core.activations import Activation, activation_from_module, get_activation
from polyinterp.approx.core.errors import ApproxInputError


def _as(t, like: torch.Tensor | None, name: str) -> torch.Tensor:
    t = torch.as_tensor(t)
    if like is not None:
        t = t.to(device=like.device, dtype=like.dtype)
    elif not t.is_floating_point():
        t = t.to(torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ApproxInputError(f"{name} contains NaN or inf")
    return t.detach()


def _check_shape(t: torch.Tensor, shape: tuple, name: str, hint: str) -> None:
    if tuple(t.shape) != shape:
        raise ApproxInputError(f"{name} has shape {tuple(t.shape)}, expected {shape} ({hint})")


@dataclass(init=False)
class MLP:
    """f(x) = W2 φ(W1 x + b1) + b2 with W1 [h, d], b1 [h], W2 [o, h], b2 [o]."""

    W1: torch.Tensor
    b1: torch.Tensor
    W2: torch.Tensor
    b2: torch.Tensor
    activation: Activation

    def __init__(self, W1, b1, W2, b2, activation="relu"):
        self.W1 = _as(W1, None, "W1")
        if self.W1.dim() != 2:
            raise ApproxInputError(f"W1 must be [h, d], got shape {tuple(self.W1.shape)}")
        h, d = self.W1.shape
        self.b1, self.W2 = _as(b1, self.W1, "b1"), _as(W2, self.W1, "W2")
        if self.W2.dim() != 2:
            raise ApproxInputError(f"W2 must be [o, h], got shape {tuple(self.W2.shape)}")
        self.b2 = _as(b2, self.W1, "b2")
        _check_shape(self.b1, (h,), "b1", "one bias per hidden unit")
        _check_shape(self.W2, (self.W2.shape[0], h), "W2", f"[o, h] with h = {h} hidden units")
        _check_shape(self.b2, (self.W2.shape[0],), "b2", "one bias per output")
        self.activation = get_activation(activation)

    d = property(lambda self: self.W1.shape[1])
    h = property(lambda self: self.W1.shape[0])
    o = property(lambda self: self.W2.shape[0])
    dtype = property(lambda self: self.W1.dtype)
    device = property(lambda self: self.W1.device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        return self.activation(x @ self.W1.T + self.b1) @ self.W2.T + self.b2

    def to(self, device=None, dtype=None) -> "MLP":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        return MLP(f(self.W1), f(self.b1), f(self.W2), f(self.b2), self.activation)

    def affine(self, M: torch.Tensor, shift: torch.Tensor) -> "MLP":
        """The MLP x' ↦ f(shift + M x') (M [d, d'])."""
        return MLP(self.W1 @ M, self.b1 + self.W1 @ shift, self.W2, self.b2, self.activation)

    @classmethod
    def from_module(cls, module: torch.nn.Module, dtype: torch.dtype | None = torch.float64) -> "MLP":
        """From ``nn.Sequential(nn.Linear(d, h), <activation>, nn.Linear(h, o))`` (an optional leading
        ``nn.Flatten`` is skipped). Weights are detached and cast to ``dtype`` (float64 by default)."""
        layers = [m for m in module.children() if not isinstance(m, torch.nn.Flatten)] \
            if isinstance(module, torch.nn.Sequential) else []
        if len(layers) != 3 or not isinstance(layers[0], torch.nn.Linear) or not isinstance(layers[2], torch.nn.Linear):
            raise ApproxInputError("MLP.from_module needs nn.Sequential(nn.Linear, activation, nn.Linear), got "
                                   f"{module.__class__.__name__} with children {[type(m).__name__ for m in layers]}")
        l1, act, l2 = layers
        c = (lambda t: t.detach().to(dtype)) if dtype else (lambda t: t.detach())
        zeros = lambda lin: torch.zeros(lin.out_features, dtype=lin.weight.dtype, device=lin.weight.device)  # noqa
        b1 = l1.bias if l1.bias is not None else zeros(l1)
        b2 = l2.bias if l2.bias is not None else zeros(l2)
        return cls(c(l1.weight), c(b1), c(l2.weight), c(b2), activation_from_module(act))


@dataclass(init=False)
class GLU:
    """f(x) = W2 (φ(W x + b) ⊙ (V x + c)) + b2 with W, V [h, d], b, c [h], W2 [o, h], b2 [o]."""

    W: torch.Tensor
    b: torch.Tensor
    V: torch.Tensor
    c: torch.Tensor
    W2: torch.Tensor
    b2: torch.Tensor
    activation: Activation

    def __init__(self, W, b, V, c, W2, b2, activation="relu"):
        self.W = _as(W, None, "W")
        if self.W.dim() != 2:
            raise ApproxInputError(f"W must be [h, d], got shape {tuple(self.W.shape)}")
        h, d = self.W.shape
        self.b, self.V, self.c = _as(b, self.W, "b"), _as(V, self.W, "V"), _as(c, self.W, "c")
        self.W2, self.b2 = _as(W2, self.W, "W2"), _as(b2, self.W, "b2")
        if self.W2.dim() != 2:
            raise ApproxInputError(f"W2 must be [o, h], got shape {tuple(self.W2.shape)}")
        _check_shape(self.b, (h,), "b", "one bias per hidden unit")
        _check_shape(self.V, (h, d), "V", "same shape as W")
        _check_shape(self.c, (h,), "c", "one bias per hidden unit")
        _check_shape(self.W2, (self.W2.shape[0], h), "W2", f"[o, h] with h = {h}")
        _check_shape(self.b2, (self.W2.shape[0],), "b2", "one bias per output")
        self.activation = get_activation(activation)

    d = property(lambda self: self.W.shape[1])
    h = property(lambda self: self.W.shape[0])
    o = property(lambda self: self.W2.shape[0])
    dtype = property(lambda self: self.W.dtype)
    device = property(lambda self: self.W.device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        return (self.activation(x @ self.W.T + self.b) * (x @ self.V.T + self.c)) @ self.W2.T + self.b2

    def to(self, device=None, dtype=None) -> "GLU":
        f = lambda t: t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        return GLU(f(self.W), f(self.b), f(self.V), f(self.c), f(self.W2), f(self.b2), self.activation)

    def affine(self, M: torch.Tensor, shift: torch.Tensor) -> "GLU":
        """The GLU x' ↦ f(shift + M x') (M [d, d'])."""
        return GLU(self.W @ M, self.b + self.W @ shift, self.V @ M, self.c + self.V @ shift, self.W2, self.b2,
                   self.activation)


def check_model(model, d: int | None = None, device=None) -> None:
    if not isinstance(model, (MLP, GLU)):
        raise ApproxInputError(f"model must be an MLP or a GLU (polyinterp.approx), got {type(model).__name__}; "
                               "wrap an nn.Sequential with MLP.from_module")
    if d is not None and model.d != d:
        raise ApproxInputError(f"model input dimension {model.d} differs from the mixture's d = {d}")
    if device is not None and model.device != torch.device(device):
        raise ApproxInputError(f"model is on {model.device} but the mixture is on {device}; move one with .to(device)")

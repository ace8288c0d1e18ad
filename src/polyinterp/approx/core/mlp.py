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
            raise ApproxInputError(f"cannot read {_describe(module)} as an MLP; supported: {SUPPORTED_MODELS}")
        l1, act, l2 = layers
        W1, b1 = _linear(l1, dtype)
        W2, b2 = _linear(l2, dtype)
        return cls(W1, b1, W2, b2, activation_from_module(act))


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


SUPPORTED_MODELS = ("nn.Sequential(nn.Linear, activation, nn.Linear) with activation nn.ReLU, nn.GELU "
                    "(approximate 'none' or 'tanh'), nn.Tanh, nn.Sigmoid, nn.SiLU or nn.Identity (a leading nn.Flatten "
                    "is skipped); a gated MLP block with gate_proj, up_proj, down_proj (nn.Linear) and act_fn; "
                    "an MLP or GLU built from weight tensors")


def _describe(module) -> str:
    if isinstance(module, torch.nn.Sequential):
        return f"nn.Sequential({', '.join(type(m).__name__ for m in module.children())})"
    return type(module).__name__


def _linear(lin, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) of an ``nn.Linear``, detached and cast to ``dtype`` (zeros for a missing bias)."""
    if not isinstance(lin, torch.nn.Linear):
        raise ApproxInputError(f"expected an nn.Linear, got {type(lin).__name__}")
    W = lin.weight.detach()
    b = lin.bias.detach() if lin.bias is not None else torch.zeros(lin.out_features, dtype=W.dtype, device=W.device)
    return (W.to(dtype), b.to(dtype)) if dtype else (W, b)


def glu_from_linears(gate: torch.nn.Linear, up: torch.nn.Linear, down: torch.nn.Linear, activation,
                     dtype: torch.dtype | None = torch.float64) -> GLU:
    """The GLU down(φ(gate x) ⊙ up x) of the gate / up / down linear maps of a gated MLP block (the layout
    of LLM MLP blocks, e.g. SwiGLU: φ = SiLU); ``activation``: an ``nn`` activation module, a name or an
    :class:`Activation`. Weights detached and cast to ``dtype`` (float64 by default)."""
    W, b = _linear(gate, dtype)
    V, c = _linear(up, dtype)
    W2, b2 = _linear(down, dtype)
    act = activation_from_module(activation) if isinstance(activation, torch.nn.Module) else activation
    return GLU(W, b, V, c, W2, b2, act)


def as_model(model, dtype: torch.dtype | None = torch.float64):
    """The :class:`MLP` or :class:`GLU` of ``model``: an MLP or GLU as it is; an
    ``nn.Sequential(nn.Linear, activation, nn.Linear)`` (:meth:`MLP.from_module`); a module with
    ``gate_proj``, ``up_proj``, ``down_proj`` and ``act_fn`` (a gated MLP block, :func:`glu_from_linears`).
    Anything else raises :class:`ApproxInputError` naming the module and what is supported."""
    if isinstance(model, (MLP, GLU)):
        return model
    if isinstance(model, torch.nn.Sequential):
        return MLP.from_module(model, dtype)
    if isinstance(model, torch.nn.Module) and all(hasattr(model, a) for a in ("gate_proj", "up_proj", "down_proj")):
        act = getattr(model, "act_fn", None)
        if act is None:
            raise ApproxInputError(f"the gated block {type(model).__name__} has no act_fn; build the GLU with "
                                   "glu_from_linears(gate, up, down, activation)")
        return glu_from_linears(model.gate_proj, model.up_proj, model.down_proj, act, dtype)
    raise ApproxInputError(f"cannot approximate {_describe(model)}; supported: {SUPPORTED_MODELS}")


def check_model(model, d: int | None = None, device=None) -> None:
    if not isinstance(model, (MLP, GLU)):
        raise ApproxInputError(f"model must be an MLP or a GLU (polyinterp.approx), got {type(model).__name__}; "
                               "wrap an nn.Sequential with MLP.from_module")
    if d is not None and model.d != d:
        raise ApproxInputError(f"model input dimension {model.d} differs from the mixture's d = {d}")
    if device is not None and model.device != torch.device(device):
        raise ApproxInputError(f"model is on {model.device} but the mixture is on {device}; move one with .to(device)")

"""Elementwise activations and their Gaussian expectations E[φ⁽ᵏ⁾(y)], y ~ N(m, s²).

ReLU and the exact (erf) GELU have closed forms; every other activation is integrated numerically
(see :mod:`polyinterp.approx.moments.univariate`), which needs it to be smooth (k-times differentiable by
autograd) for the derivative expectations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from polyinterp.approx.core.errors import ApproxInputError

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def normal_pdf(a: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * a * a) * _INV_SQRT_2PI


def normal_cdf(a: torch.Tensor) -> torch.Tensor:
    """Φ(a) = erfc(−a/√2)/2, accurate in both tails (``torch.special.ndtr`` returns 0 at a = −10 on CPU
    in torch 2.x because it goes through 1 + erf)."""
    return 0.5 * torch.special.erfc(-a / math.sqrt(2.0))


def relu_expectations(m: torch.Tensor, s: torch.Tensor, kmax: int) -> torch.Tensor:
    """E[ReLU⁽ᵏ⁾(y)], k = 0..kmax, y ~ N(m, s²); shape [..., kmax+1].

    With a = m/s: E[ReLU] = s(φ(a) + aΦ(a)), E[ReLU'] = Φ(a), and for k ≥ 2
    E[ReLU⁽ᵏ⁾] = (-1)ᵏ He_{k-2}(a) φ(a) / s^{k-1}. The left tail is evaluated as
    s·e^{-a²/2}(1/√(2π) + (a/2)·erfcx(-a/√2)) (no 1 − Φ subtraction). At s = 0 the limits
    ReLU(m), [m > 0], 0, 0, ... are returned (the derivative at the kink m = 0 is taken as 1/2).
    """
    pos = s > 0
    s_safe = torch.where(pos, s, torch.ones_like(s))
    a = torch.where(pos, m / s_safe, torch.zeros_like(m))
    pdf = normal_pdf(a)
    cdf = normal_cdf(a)
    # E[ReLU(y)] / s = φ(a) + aΦ(a); stable left tail through erfcx (no cancellation of 1 − Φ).
    left = torch.exp(-0.5 * a * a) * (_INV_SQRT_2PI + 0.5 * a * torch.special.erfcx(-a / math.sqrt(2.0)))
    g0 = torch.where(a < 0, left, pdf + a * cdf)
    out = [torch.where(pos, s * g0, torch.clamp(m, min=0))]
    if kmax >= 1:
        step = torch.where(m > 0, torch.ones_like(m), torch.where(m < 0, torch.zeros_like(m), torch.full_like(m, 0.5)))
        out.append(torch.where(pos, cdf, step))
    he_prev, he = torch.zeros_like(a), torch.ones_like(a)  # He_{-1}, He_0
    for k in range(2, kmax + 1):
        n = k - 2  # He_n(a)
        if n >= 1:
            he_prev, he = he, a * he - (n - 1) * he_prev
        val = ((-1) ** k) * he * pdf / s_safe ** (k - 1)
        out.append(torch.where(pos, val, torch.zeros_like(val)))
    return torch.stack(out[: kmax + 1], dim=-1)


def gelu_expectations(m: torch.Tensor, s: torch.Tensor, kmax: int) -> torch.Tensor:
    """E[GELU⁽ᵏ⁾(y)], k = 0..kmax (≤ 4), y ~ N(m, s²), for the exact GELU(y) = yΦ(y).

    With r = √(1+s²), b = m/r: G(m) = E[GELU] = mΦ(b) + (s²/r)φ(b) and G⁽ᵏ⁾ = E[GELU⁽ᵏ⁾]
    (differentiation under the expectation): G' = Φ(b) + bφ(b)/r², G'' = φ(b)(r²+1−b²)/r³,
    G''' = −bφ(b)(r²+3−b²)/r⁴, G'''' = φ(b)((b²−1)(r²+3−b²) + 2b²)/r⁵. Defined at s = 0.
    """
    if kmax > 4:
        raise ApproxInputError(f"GELU closed form is implemented up to k = 4, got kmax = {kmax}; use kmax <= 4")
    r2 = 1.0 + s * s
    r = torch.sqrt(r2)
    b = m / r
    pdf = normal_pdf(b)
    cdf = normal_cdf(b)
    # mΦ(b) + (s²/r)φ(b) = r(bΦ(b) + φ(b)) − φ(b)/r; bΦ + φ is evaluated stably in the left tail.
    left = torch.exp(-0.5 * b * b) * (_INV_SQRT_2PI + 0.5 * b * torch.special.erfcx(-b / math.sqrt(2.0)))
    g = torch.where(b < 0, left, pdf + b * cdf)
    out = [r * g - pdf / r, cdf + b * pdf / r2, pdf * (r2 + 1 - b * b) / (r2 * r),
           -b * pdf * (r2 + 3 - b * b) / (r2 * r2), pdf * ((b * b - 1) * (r2 + 3 - b * b) + 2 * b * b) / (r2 * r2 * r)]
    return torch.stack(out[: kmax + 1], dim=-1)


@dataclass(frozen=True)
class Activation:
    """An elementwise activation: its torch function and, when known, closed-form expectations."""

    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    closed_form: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor] | None = None
    max_closed_order: int = 0

    def __call__(self, y: torch.Tensor) -> torch.Tensor:
        return self.fn(y)


def _identity(y: torch.Tensor) -> torch.Tensor:
    return y


def _identity_expectations(m: torch.Tensor, s: torch.Tensor, kmax: int) -> torch.Tensor:
    out = [m, torch.ones_like(m)] + [torch.zeros_like(m)] * max(0, kmax - 1)
    return torch.stack(out[: kmax + 1], dim=-1)


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation("relu", torch.relu, relu_expectations, 10**6),
    "gelu": Activation("gelu", F.gelu, gelu_expectations, 4),
    "gelu_tanh": Activation("gelu_tanh", lambda y: F.gelu(y, approximate="tanh")),
    "tanh": Activation("tanh", torch.tanh),
    "sigmoid": Activation("sigmoid", torch.sigmoid),
    "silu": Activation("silu", F.silu),
    "identity": Activation("identity", _identity, _identity_expectations, 10**6),
}


def get_activation(activation: str | Activation | Callable) -> Activation:
    """An :class:`Activation` from a name (``relu``, ``gelu``, ``gelu_tanh``, ``tanh``, ``sigmoid``,
    ``silu``, ``identity``), an :class:`Activation`, or any smooth elementwise torch callable."""
    if isinstance(activation, Activation):
        return activation
    if isinstance(activation, str):
        key = activation.lower()
        if key not in ACTIVATIONS:
            raise ApproxInputError(
                f"unknown activation {activation!r}; use one of {sorted(ACTIVATIONS)} or pass a smooth torch callable"
            )
        return ACTIVATIONS[key]
    if callable(activation):
        return Activation(getattr(activation, "__name__", "custom"), activation)
    raise ApproxInputError(f"activation must be a name or a callable, got {type(activation).__name__}")


_MODULE_NAMES = {
    torch.nn.ReLU: "relu", torch.nn.Tanh: "tanh", torch.nn.Sigmoid: "sigmoid", torch.nn.SiLU: "silu",
    torch.nn.Identity: "identity",
}


def activation_from_module(module: torch.nn.Module) -> Activation:
    """The :class:`Activation` of an ``nn`` activation module (ReLU, GELU (both forms), Tanh, Sigmoid, SiLU)."""
    if isinstance(module, torch.nn.GELU):
        return ACTIVATIONS["gelu_tanh" if module.approximate == "tanh" else "gelu"]
    for cls, name in _MODULE_NAMES.items():
        if isinstance(module, cls):
            return ACTIVATIONS[name]
    raise ApproxInputError(
        f"unsupported activation module {type(module).__name__}; supported: nn.ReLU, nn.GELU (approximate 'none' "
        "or 'tanh'), nn.Tanh, nn.Sigmoid, nn.SiLU, nn.Identity"
    )

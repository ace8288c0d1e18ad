"""Errors of the approximant library (all subclass :class:`polyinterp.errors.PolyinterpError`)."""

from __future__ import annotations

from polyinterp.errors import PolyinterpError


class ApproxInputError(PolyinterpError, ValueError):
    """An argument of the approximant library has the wrong shape, dtype, device or value."""


class ApproxConvergenceError(PolyinterpError, RuntimeError):
    """An iterative solve did not reach its tolerance (raised only when asked to be strict)."""

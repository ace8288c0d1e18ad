"""Hooks that long solver loops call between iterations (no I/O here: a caller installs them).

The iterative solvers (block PCG of the exact quadratic, the Lanczos run of the solver plan, the
Jacobi sweeps of the joint diagonalisation) call :func:`between_iterations` once per iteration, on
the thread that runs the computation; whatever :func:`installed` put in place runs there. The
workflow uses it to fit torch's thread count to the cores that are free
(:mod:`polyinterp.cpu_share`): OpenMP threads stall at every barrier when another process holds one
of their cores, and the thread count can only be changed from the computing thread.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_HOOKS: list[tuple[int, Callable[[], None]]] = []


def between_iterations() -> None:
    """Run every hook installed by this thread (none: nothing happens)."""
    me = threading.get_ident()
    for owner, hook in tuple(_HOOKS):
        if owner == me:
            hook()


@contextmanager
def installed(hook: Callable[[], None]) -> Iterator[None]:
    """``hook`` runs at every :func:`between_iterations` of this thread inside the ``with`` block
    (a solver running on another thread does not call it: thread settings are per thread)."""
    entry = (threading.get_ident(), hook)
    _HOOKS.append(entry)
    try:
        yield
    finally:
        _HOOKS.remove(entry)

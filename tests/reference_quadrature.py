"""Reference quadrature for the tests: composite Gauss–Legendre against the standard normal density."""

import itertools
import math

import numpy as np


def split_normal_nodes(t0: float, L: float = 12.0, pts: int = 20):
    """Composite Gauss–Legendre nodes on [−L, L] split at t0, panels ≤ 1 wide; weights include ϕ(t)."""
    x, w = np.polynomial.legendre.leggauss(pts)
    t0 = min(max(t0, -L), L)
    ts, ws = [], []
    for lo, hi in ((-L, t0), (t0, L)):
        if hi <= lo:
            continue
        edges = np.linspace(lo, hi, math.ceil(hi - lo) + 1)
        for a, b in itertools.pairwise(edges):
            ts.append(0.5 * (a + b) + 0.5 * (b - a) * x)
            ws.append(0.5 * (b - a) * w)
    t, w = np.concatenate(ts), np.concatenate(ws)
    return t, w * np.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)

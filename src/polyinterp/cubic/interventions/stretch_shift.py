"""Stretch or shift? Fit a clamped curve y(x) by a vertical stretch or by a horizontal shift of ŷ(x).

    stretch   y(x) ≈ s·ŷ(x) + c          least squares, closed form
    shift     y(x) ≈ ŷ(x − δ) + c        c in closed form for each δ (the mean residual); δ by a
                                          grid over ``delta_range`` then golden-section refinement

The blog saw a vertical stretch when it clamped band latents; the Cardano reading (the network works
in t = x + a/3) predicts a horizontal shift by a/3. ŷ is the curve before the intervention (in the
clamping step: the plain SAE reconstruction), and ``f`` evaluates it at any points, so ŷ(x − δ) is
the curve itself, not an interpolation (the step runs the model there).

Scores: ``r2`` is the usual 1 − SSE/SST of y; ``effect_r2`` is 1 − SSE/Σ(y − ŷ)², the fraction of
the intervention's *effect* y − ŷ that the fit explains (the usual R² is near 1 for both fits when
the effect is small next to the cubic's own variance). The verdict compares the effect R².
Where ŷ is linear in x a shift and a constant are the same thing (δ and c are not identifiable).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from polyinterp.errors import ConfigError

VERDICTS = ("no_effect", "neither", "indistinguishable", "stretch", "shift")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    """1 − Σ(y − pred)² / Σ(y − ȳ)²; NaN when y is constant."""
    y, pred = np.asarray(y, np.float64), np.asarray(pred, np.float64)
    sst = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / sst if sst > 0 else float("nan")


def effect_r2(y: np.ndarray, base: np.ndarray, pred: np.ndarray) -> float:
    """1 − Σ(y − pred)² / Σ(y − base)²: the fraction of the change y − base that ``pred`` explains
    (1: all of it, 0: no better than "nothing changed"); NaN when y equals base."""
    y, base, pred = (np.asarray(v, np.float64) for v in (y, base, pred))
    ss = float(((y - base) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else float("nan")


def fit_stretch(base: np.ndarray, y: np.ndarray) -> dict:
    """Least-squares y ≈ s·base + c. Returns ``s``, ``c``, ``pred``, ``r2``, ``effect_r2``.

    Exact for a planted stretch (y = s·base + c up to round-off). A constant ``base`` leaves s
    undefined: s = NaN and the fit is the mean of y."""
    base, y = np.asarray(base, np.float64), np.asarray(y, np.float64)
    db = base - base.mean()
    var = float(db @ db)
    if var > 0:
        s = float(db @ (y - y.mean())) / var
        c = float(y.mean() - s * base.mean())
        pred = s * base + c
    else:
        s, c, pred = float("nan"), float(y.mean()), np.full_like(y, y.mean())
    return {"s": s, "c": c, "pred": pred, "r2": r2_score(y, pred), "effect_r2": effect_r2(y, base, pred)}


def delta_grid(delta_range, delta_step: float, key: str = "cubic.joint_clamp.shift") -> np.ndarray:
    """The δ grid low, low + step, …, high (``delta_range`` = [low, high]); a ConfigError naming
    ``key`` unless low < high and 0 < step ≤ high − low."""
    lo, hi = (float(v) for v in delta_range)
    step = float(delta_step)
    if not lo < hi or not 0 < step <= hi - lo:
        raise ConfigError(f"config keys '{key}.delta_range' {list(delta_range)} / '{key}.delta_step' {delta_step}: "
                          "need low < high and 0 < step ≤ high − low.")
    n = int(math.floor((hi - lo) / step + 1e-9))
    grid = lo + step * np.arange(n + 1)
    return grid if grid[-1] >= hi - 1e-12 else np.append(grid, hi)


def _shift_sse(x: np.ndarray, y: np.ndarray, f: Callable, delta: float) -> tuple[float, float, np.ndarray]:
    shifted = np.asarray(f(x - delta), np.float64)
    c = float((y - shifted).mean())
    resid = y - shifted - c
    return float(resid @ resid), c, shifted + c


def fit_shift(x: np.ndarray, y: np.ndarray, f: Callable[[np.ndarray], np.ndarray], delta_range, delta_step: float,
              xtol: float = 1e-10) -> dict:
    """Least-squares y(x) ≈ f(x − δ) + c over δ in ``delta_range``.

    For each δ, c is the mean of y − f(x − δ) (exact). δ: the best point of the grid
    :func:`delta_grid`, then a golden-section search on the two grid cells around it (to ``xtol``);
    the refined δ is kept only when it lowers the SSE, so the result is never worse than the grid's
    best. ``f`` maps a 1-D array of x values to ŷ there (the whole grid in one call). Returns
    ``delta``, ``c``, ``pred``, ``r2``, ``effect_r2`` (against ŷ = f(x)) and ``at_bound`` (the grid's
    best δ is an end of the range: the true optimum may lie outside it).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    grid = delta_grid(delta_range, delta_step)
    shifted = np.asarray(f((x[None, :] - grid[:, None]).ravel()), np.float64).reshape(len(grid), len(x))
    resid = y[None, :] - shifted
    resid -= resid.mean(1, keepdims=True)
    sse = (resid * resid).sum(1)
    k = int(np.argmin(sse))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    best_d, best_sse = float(grid[k]), float(sse[k])
    a, b = float(lo), float(hi)
    p, q = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fp, fq = _shift_sse(x, y, f, p)[0], _shift_sse(x, y, f, q)[0]
    while b - a > xtol:
        if fp <= fq:
            b, q, fq = q, p, fp
            p = b - _GOLDEN * (b - a)
            fp = _shift_sse(x, y, f, p)[0]
        else:
            a, p, fp = p, q, fq
            q = a + _GOLDEN * (b - a)
            fq = _shift_sse(x, y, f, q)[0]
    d = 0.5 * (a + b)
    s_d, c, pred = _shift_sse(x, y, f, d)
    if s_d > best_sse:
        d = best_d
        s_d, c, pred = _shift_sse(x, y, f, d)
    base = np.asarray(f(x), np.float64)
    return {"delta": d, "c": c, "pred": pred, "r2": r2_score(y, pred), "effect_r2": effect_r2(y, base, pred),
            "at_bound": bool(k == 0 or k == len(grid) - 1)}


def verdict(effect_rel: float, effect_r2_stretch: float, effect_r2_shift: float, *, r2_min: float, margin: float,
            min_effect: float) -> str:
    """Which reading the clamped curve supports, one of :data:`VERDICTS`:

    ``no_effect`` when the effect's RMS relative to ŷ's standard deviation (``effect_rel``) is below
    ``min_effect``; else ``neither`` when neither fit explains ``r2_min`` of the effect; else
    ``indistinguishable`` when the two effect R² differ by less than ``margin``; else the better one
    (``stretch`` or ``shift``). A NaN effect R² counts as 0."""
    if not effect_rel >= min_effect:
        return "no_effect"
    st = effect_r2_stretch if np.isfinite(effect_r2_stretch) else 0.0
    sh = effect_r2_shift if np.isfinite(effect_r2_shift) else 0.0
    if max(st, sh) < r2_min:
        return "neither"
    if abs(st - sh) < margin:
        return "indistinguishable"
    return "stretch" if st > sh else "shift"

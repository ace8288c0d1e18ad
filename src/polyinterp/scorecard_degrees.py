"""Scorecard rows beyond the paper's degree 2 (issue 14): does a cubic close the rise of the
quadratic's FVU?

The paper sees the exact-mixture FVU of the quadratic fall and then rise late in training (after
≈ 2^16 steps) and leaves open whether what the quadratic misses then is cubic structure. The rows
read the metrics table's ``mixture_exact`` FVU of the full-d ``quadratic`` and of the principal-
component fits ``quadratic_pc{p}`` and ``cubic_pc{p}`` (:mod:`polyinterp.mnist.degree_approximants`),
per seed:

- the rise: FVU_quadratic(last checkpoint) / min over checkpoints (step > 0) of FVU_quadratic, the
  minimum at step t* (the row names t* per seed). In a run to 2^18 steps this contains the paper's
  late rise; in a shorter run it is the rise after the linear → quadratic transition;
- the cubic's share of the rise: the cubic's gain over its own reduced-input quadratic,
  gain(t) = FVU(quadratic_pc{p}) − FVU(cubic_pc{p}), grows by gain(last) − gain(t*) after the
  quadratic's best checkpoint; divided by the rise FVU_quadratic(last) − FVU_quadratic(t*) it is the
  part of the rise that cubic terms (in p coordinates) account for. ≥ 1 answers yes: the cubic closes
  the rise. Not comparable where the quadratic does not rise after its minimum (e.g. a run that stops
  before 2^16 steps);
- the cubic against the full quadratic at the last checkpoint: FVU(cubic_pc{p}) / FVU(quadratic).

The answer rows have verdict ``yes`` / ``no`` (see :class:`polyinterp.scorecard.Claim`); the
descriptive ones ``measured``. A metrics table without the PC fits gives no rows.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from polyinterp.scorecard import Claim

STUDY = "mnist+"
OPEN = "open in the paper"


def _exact(metrics: pd.DataFrame, name: str) -> pd.DataFrame:
    """step × seed exact-mixture FVU of one approximant (steps > 0)."""
    sub = metrics[(metrics.approximant == name) & (metrics.distribution == "mixture_exact") & (metrics.metric == "fvu")]
    table = sub.pivot_table(index="step", columns="seed", values="value")
    return table[table.index > 0]


def _pc_components(metrics: pd.DataFrame) -> int | None:
    found = sorted({int(m.group(1)) for name in set(metrics.approximant)
                    if (m := re.fullmatch(r"cubic_pc(\d+)", str(name)))})
    return found[-1] if found else None


def rise_share(quad: pd.Series, quad_pc: pd.Series, cubic_pc: pd.Series) -> tuple[float, float]:
    """(last / min of ``quad``, share of the rise after the minimum that the cubic's gain over
    ``quad_pc`` covers; NaN when ``quad`` does not rise after its minimum or the PC fits lack a step)."""
    q = quad.dropna()
    if len(q) < 2:
        return math.nan, math.nan
    t_min, last = q.idxmin(), q.index[-1]
    ratio = float(q[last] / q[t_min]) if q[t_min] > 0 else math.nan
    rise = float(q[last] - q[t_min])
    if not rise > 0 or any(t not in s.dropna().index for s in (quad_pc, cubic_pc) for t in (t_min, last)):
        return ratio, math.nan
    gain = quad_pc - cubic_pc
    return ratio, float(gain[last] - gain[t_min]) / rise


def degree_claims(metrics: pd.DataFrame) -> list[Claim]:
    """The rows of the module docstring from the metrics table (``mlp`` and other approximants ignored)."""
    p = _pc_components(metrics)
    if p is None:
        return []
    quad, quad_pc, cubic_pc = _exact(metrics, "quadratic"), _exact(metrics, f"quadratic_pc{p}"), _exact(metrics, f"cubic_pc{p}")
    seeds = [s for s in quad.columns if s in cubic_pc.columns and s in quad_pc.columns]
    if not seeds:
        return []
    pairs = [rise_share(quad[s], quad_pc[s], cubic_pc[s]) for s in seeds]
    common = {s: quad[s].dropna().index.intersection(cubic_pc[s].dropna().index) for s in seeds}
    last = [float(cubic_pc[s][common[s].max()] / quad[s][common[s].max()]) if len(common[s]) else math.nan
            for s in seeds]
    last_step = max((int(c.max()) for c in common.values() if len(c)), default=int(quad.index.max()))
    steps = f"checkpoints to step {int(quad.index.max())}"
    best = "quadratic best at step " + ", ".join(str(int(quad[s].dropna().idxmin())) for s in seeds)
    shares = [b for _, b in pairs]
    rises = any(math.isfinite(b) for b in shares)
    return [
        Claim(STUDY, "quadratic FVU rises after its best checkpoint", "paper: rises after ≈ 2^16 steps", "—",
              "FVU of the exact quadratic at the last checkpoint / its minimum over training (> 1: a rise)",
              f"mixture_exact, {steps}; {best}", [a for a, _ in pairs], "measured"),
        Claim(STUDY, f"the cubic closes the rise of quadratic FVU (on {p} PCs)", OPEN, "share ≥ 1",
              f"increase, after the quadratic's best checkpoint, of the gain FVU(quadratic_pc{p}) − FVU(cubic_pc{p}), "
              "divided by the quadratic's rise FVU(last) − FVU(min); yes when ≥ 1",
              f"mixture_exact, {steps}; {best}" if rises else "no rise of quadratic FVU after its minimum in this run",
              shares if rises else [], ("answer", lambda m: m >= 1.0) if rises else None),
        Claim(STUDY, f"cubic on {p} PCs vs the full quadratic at the last checkpoint", OPEN, "—",
              f"FVU(cubic_pc{p}) / FVU(quadratic) at the last checkpoint (< 1: the reduced cubic is closer to the MLP)",
              f"mixture_exact, step {last_step}", last, "measured"),
    ]

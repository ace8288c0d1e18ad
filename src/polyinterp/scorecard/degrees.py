"""Scorecard rows beyond the paper's degree 2: does a cubic close the rise of the
quadratic's FVU?

The paper sees the exact-mixture FVU of the quadratic fall and then rise late in training (after
≈ 2^16 steps) and leaves open whether what the quadratic misses then is cubic structure. The rows
read the metrics table's ``mixture_exact`` FVU of the full-d ``quadratic`` and of the principal-
component fits ``quadratic_pc{p}`` and ``cubic_pc{p}`` (:mod:`polyinterp.mnist.degrees.approximants`),
per seed:

- the rise: FVU_quadratic(last checkpoint) / min over checkpoints (step > 0) of FVU_quadratic (the
  row names the step of the minimum per seed). In a run to 2^18 steps this contains the paper's late
  rise; in a shorter run it is the rise after the linear → quadratic transition;
- the cubic's share of the rise, within one model family: on the same p coordinates, the quadratic
  FVU(quadratic_pc{p}) has its minimum at t* and rises by Δq to the last checkpoint, the cubic's
  FVU(cubic_pc{p}) changes by Δc over the same steps; share = 1 − Δc/Δq = the part of the rise the
  cubic terms remove (the growth of the gain quadratic_pc − cubic_pc over Δq). ≥ 1 answers yes: the
  cubic does not rise. Not comparable (the row says why) where the PC quadratic does not rise after
  its minimum, or fewer than two checkpoints have the PC fits;
- the cubic against the full quadratic at the last checkpoint: FVU(cubic_pc{p}) / FVU(quadratic).

The answer rows have verdict ``yes`` / ``no`` (see :class:`polyinterp.scorecard.Claim`); the
descriptive ones ``measured``. A metrics table without the PC fits gives no rows.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from polyinterp.scorecard.claim import Claim

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


def rise(curve: pd.Series) -> tuple[float, float, float]:
    """(step t* of the minimum, last / min, last − min) of one FVU curve (NaN for fewer than two points)."""
    c = curve.dropna()
    if len(c) < 2:
        return math.nan, math.nan, math.nan
    t = c.idxmin()
    return float(t), float(c.iloc[-1] / c[t]) if c[t] > 0 else math.nan, float(c.iloc[-1] - c[t])


def rise_share(quad_pc: pd.Series, cubic_pc: pd.Series) -> tuple[float, float, str]:
    """(share, t*, reason): the part of the rise of ``quad_pc`` after its minimum t* that the cubic on the
    same coordinates removes, (gain(last) − gain(t*)) / (quad_pc(last) − quad_pc(t*)) with gain =
    quad_pc − cubic_pc, i.e. 1 − (cubic_pc(last) − cubic_pc(t*)) / (that rise); read on the
    checkpoints both fits have. NaN with the reason when there is no such rise."""
    both = pd.concat([quad_pc, cubic_pc], axis=1, keys=["q", "c"]).dropna()
    if len(both) < 2:
        return math.nan, math.nan, "fewer than two checkpoints with the PC fits"
    t, _, up = rise(both.q)
    if not up > 0:
        return math.nan, t, "no rise of the PC quadratic's FVU after its minimum in this run"
    return 1.0 - float(both.c.iloc[-1] - both.c[t]) / up, t, ""


def degree_claims(metrics: pd.DataFrame) -> list[Claim]:
    """The rows of the module docstring from the metrics table (``mlp`` and other approximants ignored)."""
    p = _pc_components(metrics)
    if p is None:
        return []
    quad, quad_pc, cubic_pc = _exact(metrics, "quadratic"), _exact(metrics, f"quadratic_pc{p}"), _exact(metrics, f"cubic_pc{p}")
    seeds = [s for s in quad.columns if s in cubic_pc.columns and s in quad_pc.columns]
    if not seeds:
        return []
    rises = [rise(quad[s]) for s in seeds]
    shares = [rise_share(quad_pc[s], cubic_pc[s]) for s in seeds]
    common = {s: quad[s].dropna().index.intersection(cubic_pc[s].dropna().index) for s in seeds}
    last = [float(cubic_pc[s][common[s].max()] / quad[s][common[s].max()]) if len(common[s]) else math.nan
            for s in seeds]
    last_step = max((int(c.max()) for c in common.values() if len(c)), default=int(quad.index.max()))
    steps = f"checkpoints to step {int(quad.index.max())}"
    best = "best at step " + ", ".join(str(int(t)) if math.isfinite(t) else "—" for t, _, _ in rises)
    pc_best = f"quadratic_pc{p} best at step " + ", ".join(str(int(t)) for v, t, _ in shares if math.isfinite(v))
    measurable = [v for v, _, _ in shares if math.isfinite(v)]
    why = "; ".join(sorted({r for v, _, r in shares if not math.isfinite(v)}))
    return [
        Claim(STUDY, "quadratic FVU rises after its best checkpoint", "paper: rises after ≈ 2^16 steps", "—",
              "FVU of the exact quadratic at the last checkpoint / its minimum over training (> 1: a rise)",
              f"mixture_exact, {steps}; {best}", [r for _, r, _ in rises], "measured"),
        Claim(STUDY, f"the cubic closes the rise of quadratic FVU (on {p} PCs)", OPEN, "share ≥ 1",
              f"on the same {p} PCs, the part of the rise of FVU(quadratic_pc{p}) after its minimum that the cubic "
              f"removes: 1 − ΔFVU(cubic_pc{p}) / ΔFVU(quadratic_pc{p}) from that minimum to the last checkpoint; "
              "yes when ≥ 1 (the cubic does not rise)",
              f"mixture_exact, {steps}; {pc_best}" if measurable else why,
              [v for v, _, _ in shares] if measurable else [], ("answer", lambda m: m >= 1.0) if measurable else None),
        Claim(STUDY, f"cubic on {p} PCs vs the full quadratic at the last checkpoint", OPEN, "—",
              f"FVU(cubic_pc{p}) / FVU(quadratic) at the last checkpoint (< 1: the reduced cubic is closer to the MLP)",
              f"mixture_exact, step {last_step}", last, "measured"),
    ]

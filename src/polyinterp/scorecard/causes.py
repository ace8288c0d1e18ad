"""A cause beside every verdict that differs: the measured conditions of the same claim (its family)
under which it holds, or, when it holds under none, the closest one.

Within one run the conditions are the rows of one family (the fit, the checkpoint the attack reads,
the FVU definition); :mod:`polyinterp.scorecard.why` adds the training recipe across published runs."""

from __future__ import annotations

import math

import pandas as pd


def condition_label(row) -> str:
    return row.condition or row.where


def _value(row) -> str:
    return f"{row.ours_mean:.4g}"


def cause_text(row, family: pd.DataFrame, scope: str = "in this run") -> str:
    """Why ``row`` (verdict differs) differs, from the other rows of its ``family``: the conditions under
    which the claim is reproduced (with their values), or that it holds under none measured ``scope``
    and the closest condition by the criterion's distance (:class:`~polyinterp.scorecard.claim.Within`)."""
    holds = family[family.verdict == "reproduced"]
    if len(holds):
        return "reproduced " + "; ".join(f"at {condition_label(r)} ({_value(r)})" for r in holds.itertuples()) + \
            f", not at {condition_label(row)}"
    ranked = family[family.verdict == "differs"]
    ranked = ranked[ranked.distance.map(lambda d: isinstance(d, float) and math.isfinite(d))]
    if len(family) == 1 or not len(ranked):
        return f"differs under the one condition measured {scope} ({condition_label(row)})"
    best = ranked.sort_values("distance", kind="stable").iloc[0]
    closest = "this one" if best.claim == row.claim else f"{condition_label(best)} ({_value(best)})"
    return f"holds under none of the {len(family)} conditions measured {scope}; closest: {closest}"


def add_causes(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the ``cause`` of every row whose verdict is ``differs`` filled in (other rows: "")."""
    out = table.copy()
    causes = []
    for row in out.itertuples():
        if row.verdict != "differs":
            causes.append("")
            continue
        family = out[(out.family == row.family) & (out.model == row.model)
                     & out.verdict.isin(["reproduced", "differs"])]
        causes.append(cause_text(row, family))
    out["cause"] = pd.Series(causes, index=out.index, dtype="string")
    return out

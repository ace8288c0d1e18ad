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


def holding_or_closest(rows: list) -> tuple[list, object | None]:
    """Of scorecard rows of one claim (each under its own condition), those reproduced; and, when none
    is, the one closest to holding by the criterion's distance (:class:`~polyinterp.scorecard.claim.Within`;
    None when no row has a finite distance). The first of equals wins."""
    good = [r for r in rows if r.verdict == "reproduced"]
    ranked = [r for r in rows if isinstance(r.distance, float) and math.isfinite(r.distance)]
    return good, (None if good or not ranked else min(ranked, key=lambda r: r.distance))


def cause_text(row, family: pd.DataFrame) -> str:
    """Why ``row`` (verdict differs) differs, from the rows of its ``family`` in this run: the conditions
    under which the claim is reproduced (with their values), or that it holds under none and the closest
    (:func:`holding_or_closest`)."""
    good, best = holding_or_closest(list(family.itertuples()))
    if good:
        return "reproduced " + "; ".join(f"at {condition_label(r)} ({_value(r)})" for r in good) + \
            f", not at {condition_label(row)}"
    if len(family) == 1 or best is None:
        return f"differs under the one condition measured in this run ({condition_label(row)})"
    closest = "this one" if best.claim == row.claim else f"{condition_label(best)} ({_value(best)})"
    return f"holds under none of the {len(family)} conditions measured in this run; closest: {closest}"


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

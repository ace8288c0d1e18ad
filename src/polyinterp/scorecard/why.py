"""The "why it differs" table: for every claim (family) that differs in the reference run, each
measured condition (rows: the fit, the checkpoint the attack reads, the FVU definition) under each
run (columns: one per published run, named by its config and training recipe), every cell our value
and its verdict, and one line per claim saying under which conditions it holds, or the closest one
when it holds under none. Pure functions of scorecard tables (:mod:`polyinterp.scorecard.claim`'s
columns); the callers read them (rule ``scorecard`` for one run, ``polyinterp results_page`` for the
published runs)."""

from __future__ import annotations

import math

import pandas as pd

from polyinterp.scorecard.causes import holding_or_closest

RECIPES = {"schedulefree_adamw": "the paper's text recipe", "adamw": "the authors' code's recipe"}


def recipe_label(train: dict) -> str:
    """The training recipe of an ``mnist.train`` config section, in words."""
    return RECIPES.get(train.get("optimizer", "schedulefree_adamw"), f"optimizer {train.get('optimizer')}")


def _cell(row) -> str:
    if row is None:
        return "—"
    value = f"{row.ours_mean:.4g}" if math.isfinite(row.ours_mean) else "—"
    agreement = row.seed_agreement if isinstance(row.seed_agreement, str) and row.seed_agreement else row.verdict
    detail = f"{row.detail}: " if isinstance(row.detail, str) and row.detail else ""
    return f"{detail}{value} ({agreement})"


def why_differs(runs: dict[str, pd.DataFrame], reference: str) -> pd.DataFrame:
    """One row per (family, condition) of every family with a ``differs`` row in ``runs[reference]``,
    with a column per run (its cell: value and verdict, "—" where that run did not measure it) and the
    family's ``holds`` line (repeated on its rows). ``runs`` maps a column label to a scorecard table."""
    ref = runs[reference]
    families = list(dict.fromkeys(ref.family[ref.verdict == "differs"]))
    rows = []
    for family in families:
        conditions = list(dict.fromkeys(c for t in runs.values() for c in t.condition[t.family == family]))
        measured = []
        for condition in conditions:
            cells = {}
            for label, table in runs.items():
                hit = table[(table.family == family) & (table.condition == condition)]
                row = next(hit.itertuples(), None)
                cells[label] = _cell(row)
                if row is not None and row.verdict in ("reproduced", "differs"):
                    measured.append((label, condition, row))
            rows.append({"claim": family, "condition": condition or "—", **cells})
        holds_line = holds(measured)
        for r in rows[len(rows) - len(conditions):]:
            r["holds"] = holds_line
    columns = ["claim", "condition", *runs, "holds"]
    return pd.DataFrame(rows, columns=columns)


def _where(label: str, condition: str) -> str:
    return f"{label}, {condition}" if condition else label


def holds(measured: list[tuple[str, str, object]]) -> str:
    """Under which measured (run, condition) the claim is reproduced; when under none, the closest
    (:func:`~polyinterp.scorecard.causes.holding_or_closest`)."""
    where = {id(r): _where(label, c) for label, c, r in measured}
    good, best = holding_or_closest([r for _, _, r in measured])
    if good:
        return "reproduced under " + "; ".join(f"{where[id(r)]} ({r.ours_mean:.4g})" for r in good)
    if best is None:
        return "holds under no measured condition"
    return f"holds under no measured condition; closest: {where[id(best)]} ({best.ours_mean:.4g})"


def why_markdown(table: pd.DataFrame, title: str, note: str = "") -> str:
    """The table as Markdown: a section per claim, its conditions × runs, then its ``holds`` line."""
    lines = [f"# {title}", ""] + ([note, ""] if note else [])
    if not len(table):
        return "\n".join(lines + ["No claim differs.", ""])
    runs = [c for c in table.columns if c not in ("claim", "condition", "holds")]
    for family, rows in table.groupby("claim", sort=False):
        lines += [f"**{family}**: {rows.holds.iloc[0]}.", "",
                  "| condition | " + " | ".join(runs) + " |", "|---" * (1 + len(runs)) + "|"]
        lines += ["| " + " | ".join([r["condition"], *(r[c] for c in runs)]) + " |" for _, r in rows.iterrows()]
        lines.append("")
    return "\n".join(lines)

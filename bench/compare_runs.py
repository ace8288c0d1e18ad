"""Compare the tables of two runs: every Parquet file under ``results/`` of run A and run B.

    python bench/compare_runs.py RUN_A RUN_B

RUN_A and RUN_B are run folders (the folder that holds ``results/``). For each table both runs have,
rows are matched on the columns that are not floating point (step, seed, metric, approximant, …) and
every float column but timings (a name with "second", "time" or "wall") is compared: ``identical``
(bitwise, NaN equal to NaN), or the largest absolute and relative difference. Columns, rows and tables
that only one run has are listed as such (a rule added between the two commits writes new ones).
Used to check that a refactor leaves a run's numbers unchanged (bench/README.md, "Same tables").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

TIMING_WORDS = ("second", "time", "wall")


def is_timing(column: str) -> bool:
    return any(word in column for word in TIMING_WORDS)


def _hashable(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """The key columns as strings (lists and arrays in a cell compare by their text)."""
    return df[cols].astype(str)


def compare_table(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """One row of the report for tables ``a`` (run A) and ``b`` (run B)."""
    out = {"rows_a": len(a), "rows_b": len(b)}
    common = [c for c in a.columns if c in b.columns]
    out["only_a_columns"] = [c for c in a.columns if c not in b.columns]
    out["only_b_columns"] = [c for c in b.columns if c not in a.columns]
    floats = [c for c in common if pd.api.types.is_float_dtype(a[c]) and pd.api.types.is_float_dtype(b[c])]
    keys = [c for c in common if c not in floats]
    values = [c for c in floats if not is_timing(c)]
    if keys:
        ka, kb = _hashable(a, keys), _hashable(b, keys)
        ka["_i"], kb["_j"] = np.arange(len(a)), np.arange(len(b))
        ka["_n"] = ka.groupby(keys).cumcount()  # repeated keys pair up in order
        kb["_n"] = kb.groupby(keys).cumcount()
        m = ka.merge(kb, on=[*keys, "_n"], how="outer", indicator=True)
        out["only_a_rows"] = int((m["_merge"] == "left_only").sum())
        out["only_b_rows"] = int((m["_merge"] == "right_only").sum())
        both = m[m["_merge"] == "both"]
        ia, ib = both["_i"].to_numpy(dtype=int), both["_j"].to_numpy(dtype=int)
    else:
        n = min(len(a), len(b))
        out["only_a_rows"], out["only_b_rows"] = len(a) - n, len(b) - n
        ia = ib = np.arange(n)
    out["matched_rows"] = len(ia)
    worst_abs, worst_rel, worst_col, differ = 0.0, 0.0, "", []
    for c in values:
        x, y = a[c].to_numpy(dtype=float)[ia], b[c].to_numpy(dtype=float)[ib]
        if np.array_equal(x, y, equal_nan=True):
            continue
        differ.append(c)
        d = np.abs(x - y)
        d[np.isnan(x) & np.isnan(y)] = 0.0
        rel = d / np.maximum(np.abs(x), np.finfo(float).tiny)
        if np.nanmax(d) > worst_abs:
            worst_abs, worst_col = float(np.nanmax(d)), c
        worst_rel = max(worst_rel, float(np.nanmax(rel)))
    out.update(compared_columns=len(values), differing_columns=differ, max_abs=worst_abs, max_rel=worst_rel,
               worst_column=worst_col)
    return out


def compare_runs(run_a: Path, run_b: Path) -> list[dict]:
    ta = {p.relative_to(run_a) for p in (run_a / "results").rglob("*.parquet")}
    tb = {p.relative_to(run_b) for p in (run_b / "results").rglob("*.parquet")}
    rows = []
    for rel in sorted(ta | tb):
        if rel not in tb or rel not in ta:
            rows.append({"table": str(rel), "status": "only in A" if rel in ta else "only in B"})
            continue
        r = compare_table(pd.read_parquet(run_a / rel), pd.read_parquet(run_b / rel))
        extra = r["only_a_rows"] or r["only_b_rows"] or r["only_a_columns"] or r["only_b_columns"]
        status = "identical" if not r["differing_columns"] else f"differs (max abs {r['max_abs']:.3g}, max rel {r['max_rel']:.3g} in {r['worst_column']})"
        if extra:
            status += (f"; rows only in A/B {r['only_a_rows']}/{r['only_b_rows']}, columns only in A "
                       f"{r['only_a_columns']} only in B {r['only_b_columns']}")
        rows.append({"table": str(rel), "status": status, **r})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args(argv)
    for run in (args.run_a, args.run_b):
        if not (run / "results").is_dir():
            print(f"compare_runs: {run} has no results/ folder; pass the folder a run was started in", file=sys.stderr)
            return 2
    rows = compare_runs(args.run_a, args.run_b)
    counts = {}
    for r in rows:
        kind = r["status"].split(" (")[0].split(";")[0]
        counts[kind] = counts.get(kind, 0) + 1
        print(f"| {r['table']} | {r['status']} |")
    print("\n" + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

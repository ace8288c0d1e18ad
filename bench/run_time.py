"""Per-rule time of a finished run, from the rules' ``benchmark:`` files (``results/benchmarks/**.tsv``).

    .venv/bin/python bench/run_time.py [RESULTS_DIR]        (default: results)

Prints a Markdown table: one row per benchmark name with its wildcard values folded
(``mnist/approximants_seed{}_step{}``): jobs, wall seconds per job (min–max) and in all, CPU seconds
in all (user + system of the job's processes, what the job cost whatever else ran), peak RSS. The
last line sums every job: Σ CPU / cores is the wall time a perfectly packed run on that many quiet
cores would need (a lower bound), to set beside the measured wall clock of the run.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd


def benchmark_table(results: Path) -> pd.DataFrame:
    """One row per benchmark file: name (wildcards folded), wall s, CPU s, peak RSS (MB)."""
    rows = []
    for path in sorted((results / "benchmarks").rglob("*.tsv")):
        df = pd.read_csv(path, sep="\t")
        if df.empty:
            continue
        name = re.sub(r"\d+", "{}", str(path.relative_to(results / "benchmarks").with_suffix("")))
        last = df.iloc[-1]  # one row per repeat; Snakemake writes one unless asked for more
        rows.append({"name": name, "wall_s": float(last["s"]), "cpu_s": float(last["cpu_time"]),
                     "max_rss_mb": float(last["max_rss"]) if last["max_rss"] != "-" else float("nan")})
    if not rows:
        raise SystemExit(f"no benchmark files under {results / 'benchmarks'}; run the workflow first")
    return pd.DataFrame(rows)


def summary_markdown(table: pd.DataFrame, cores: int) -> str:
    g = table.groupby("name")
    out = ["| benchmark (wildcards folded) | jobs | wall s per job | wall s in all | CPU s in all | peak RSS MB |",
           "| --- | --- | --- | --- | --- | --- |"]
    for name, t in sorted(g, key=lambda kv: -kv[1].cpu_s.sum()):
        lo, hi = t.wall_s.min(), t.wall_s.max()
        per = f"{lo:.1f}" if len(t) == 1 else f"{lo:.1f}–{hi:.1f}"
        out.append(f"| {name} | {len(t)} | {per} | {t.wall_s.sum():.0f} | {t.cpu_s.sum():.0f} | {t.max_rss_mb.max():.0f} |")
    cpu = table.cpu_s.sum()
    out.append(f"| **all** | {len(table)} | | {table.wall_s.sum():.0f} | {cpu:.0f} | {table.max_rss_mb.max():.0f} |")
    out.append("")
    out.append(f"Σ CPU / {cores} cores = {cpu / cores / 60:.1f} min: the wall time of a perfectly packed run on "
               f"{cores} quiet cores (a lower bound).")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="results", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args(argv)
    print(summary_markdown(benchmark_table(args.results), args.cores))
    return 0


if __name__ == "__main__":
    sys.exit(main())

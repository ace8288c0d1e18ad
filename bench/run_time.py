"""Per-rule time of a finished run, from its jobs' own records (the last line of each ``results/logs/**.log``).

    .venv/bin/python bench/run_time.py [RESULTS_DIR]        (default: results)

Prints a Markdown table: one row per job log name with its wildcard values folded
(``mnist/approximants_seed{}_step{}``): jobs, wall seconds per job (min–max) and in all, CPU seconds
in all (user + system of the job's processes, what the job cost whatever else ran), peak RSS, each as
the step wrote it at its end (``polyinterp.run_log.job_line``; a log without that line, a failed job,
is left out). The last line sums every job: Σ CPU / cores is the wall time a perfectly packed run on that many quiet
cores would need (a lower bound), to set beside the measured wall clock of the run.

    .venv/bin/python bench/run_time.py SAMPLE_RESULTS --project DRYRUN.txt [--like REGEX=SAMPLED ...]

projects the time of a run that has not been made from a sample of it: DRYRUN.txt is the output of
``snakemake -n --forceall`` for the full configuration (each planned job's ``rule`` and ``log:``
path), SAMPLE_RESULTS a results directory in which one or a few jobs of each heavy rule ran. Each planned
job takes the time of the sampled job with the same log path, else of the first ``--like`` whose
regular expression matches its path (SAMPLED names a sampled job's log, relative to ``results/logs``
without ``.log``, e.g.
``mnist/mlp_relu/approx_seed0_step16384``: the way to say that the SGD checkpoints cost what the sampled
SGD checkpoint cost), else the mean of the sampled jobs with the same folded name. Jobs with none of these
are counted and listed as not sampled (0 s in the sums: the projection is then a lower bound).
``--scale REGEX=FACTOR`` multiplies the seconds of matching jobs (a training job of 16 times the sampled
steps), ``--add REGEX=SECONDS`` adds a time measured apart (an SGD fit beside the exact one).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

from polyinterp.run_log import logged_job_seconds, parse_run_log


def fold(path: str) -> str:
    """A job's log path with its wildcard values (every run of digits) folded to ``{}``."""
    return re.sub(r"\d+", "{}", path)


def job_table(results: Path) -> pd.DataFrame:
    """One row per job log with the step's record: path, name (wildcards folded), wall s, CPU s, peak RSS (MB)."""
    rows = []
    for path in sorted((results / "logs").rglob("*.log")):
        job = logged_job_seconds(path)
        if job is None:
            continue
        rel = str(path.relative_to(results / "logs").with_suffix(""))
        rows.append({"path": rel, "name": fold(rel), **job})
    if not rows:
        raise SystemExit(f"no job log with a step's record under {results / 'logs'}: run the workflow first (a run "
                         f"made before commit 96c1ce1 kept its times in results/benchmarks: read it with that "
                         f"commit's bench/run_time.py)")
    return pd.DataFrame(rows)


def summary_markdown(table: pd.DataFrame, cores: int) -> str:
    g = table.groupby("name")
    out = ["| job log (wildcards folded) | jobs | wall s per job | wall s in all | CPU s in all | peak RSS MB |",
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


def planned_jobs(dry_run: str) -> pd.DataFrame:
    """Rule and log path (relative to ``results/logs``, without ``.log``) of each job in a ``snakemake -n``
    listing."""
    rows = []
    for job in parse_run_log(dry_run).jobs:
        if not job.logs:
            continue
        if not job.logs[0].startswith("results/logs/"):
            raise SystemExit(f"rule {job.rule}'s log {job.logs[0]} is not under results/logs/: a dry run of "
                             f"another workflow?")
        rows.append({"rule": job.rule, "path": str(Path(job.logs[0].removeprefix("results/logs/")).with_suffix(""))})
    if not rows:
        raise SystemExit("no 'log:' lines in the dry run; pass the output of 'snakemake -n --forceall'")
    return pd.DataFrame(rows)


def project(sample: pd.DataFrame, planned: pd.DataFrame, like: list[tuple[str, str]]) -> pd.DataFrame:
    """Each planned job with the wall and CPU seconds of the sampled job it is taken to cost, and how."""
    by_path = sample.set_index("path")
    by_name = sample.groupby("name")[["wall_s", "cpu_s"]].mean()
    for _, sampled in like:
        if sampled not in by_path.index:
            raise SystemExit(f"--like names {sampled!r}, which is not a sampled job's log; "
                             f"sampled: {', '.join(sorted(by_path.index))}")
    out = []
    for job in planned.itertuples():
        name = fold(job.path)
        source, wall, cpu = "not sampled", 0.0, 0.0
        if job.path in by_path.index:
            source = "sampled"
            wall, cpu = by_path.loc[job.path, ["wall_s", "cpu_s"]]
        else:
            match = next((sampled for rx, sampled in like if re.search(rx, job.path)), None)
            if match is not None:
                source = f"like {match}"
                wall, cpu = by_path.loc[match, ["wall_s", "cpu_s"]]
            elif name in by_name.index:
                source = "mean of its folded name"
                wall, cpu = by_name.loc[name]
        out.append({"rule": job.rule, "path": job.path, "name": name, "source": source,
                    "wall_s": float(wall), "cpu_s": float(cpu)})
    return pd.DataFrame(out)


def _pair(item: str, flag: str, kind):
    if "=" not in item:
        raise SystemExit(f"{flag} {item!r}: expected REGEX=NUMBER")
    rx, value = item.rsplit("=", 1)
    return rx, kind(value)


def adjust(proj: pd.DataFrame, scale: list[tuple[str, float]], add: list[tuple[str, float]]) -> pd.DataFrame:
    """Each planned job's seconds times the first ``scale`` factor whose regex matches its path, plus
    every ``add`` whose regex matches (a job left unsampled stays so unless something is added)."""
    proj = proj.copy()
    for i, path in proj.path.items():
        factor = next((f for rx, f in scale if re.search(rx, path)), None)
        if factor is not None:
            proj.loc[i, ["wall_s", "cpu_s"]] *= factor
            proj.loc[i, "source"] += f" × {factor:g}"
        extra = sum(sec for rx, sec in add if re.search(rx, path))
        if extra:
            proj.loc[i, ["wall_s", "cpu_s"]] += extra
            proj.loc[i, "source"] = ("" if proj.loc[i, "source"] == "not sampled" else proj.loc[i, "source"]) + \
                f" + {extra:g} s"
    return proj


def projection_markdown(proj: pd.DataFrame, cores: int) -> str:
    out = ["| rule | jobs | sampled | projected wall s | projected CPU s |", "| --- | --- | --- | --- | --- |"]
    for rule, t in sorted(proj.groupby("rule"), key=lambda kv: -kv[1].cpu_s.sum()):
        known = int((t.source != "not sampled").sum())
        if known == 0:
            continue  # listed below
        out.append(f"| {rule} | {len(t)} | {known} | {t.wall_s.sum():.0f} | {t.cpu_s.sum():.0f} |")
    wall, cpu = proj.wall_s.sum(), proj.cpu_s.sum()
    missing = proj[proj.source == "not sampled"]
    out.append(f"| **all** | {len(proj)} | {len(proj) - len(missing)} | {wall:.0f} | {cpu:.0f} |")
    out.append("")
    out.append(f"Projected: Σ wall (one job at a time) = {wall / 3600:.1f} h; Σ CPU / {cores} cores = "
               f"{cpu / cores / 3600:.1f} h (a perfectly packed run on {cores} quiet cores, a lower bound).")
    if len(missing):
        rules = ", ".join(f"{r} ({n})" for r, n in missing.rule.value_counts().sort_index().items())
        out.append(f"Not sampled, counted as 0 s: {len(missing)} jobs: {rules}.")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="results", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--project", type=Path, metavar="DRYRUN",
                    help="output of 'snakemake -n --forceall' for the configuration to project")
    ap.add_argument("--like", action="append", default=[], metavar="REGEX=SAMPLED",
                    help="planned jobs whose log path matches REGEX cost what sampled job SAMPLED cost")
    ap.add_argument("--scale", action="append", default=[], metavar="REGEX=FACTOR",
                    help="multiply the projected seconds of planned jobs whose path matches REGEX by FACTOR "
                         "(e.g. a training job of 16 times the sampled steps)")
    ap.add_argument("--add", action="append", default=[], metavar="REGEX=SECONDS",
                    help="add SECONDS (wall and CPU, one thread) to planned jobs whose path matches REGEX "
                         "(e.g. an SGD fit measured apart)")
    args = ap.parse_args(argv)
    sample = job_table(args.results)
    if args.project is None:
        print(summary_markdown(sample, args.cores))
        return 0
    like = []
    for item in args.like:
        if "=" not in item:
            raise SystemExit(f"--like {item!r}: expected REGEX=SAMPLED_LOG")
        rx, sampled = item.rsplit("=", 1)
        like.append((rx, sampled))
    proj = project(sample, planned_jobs(args.project.read_text()), like)
    proj = adjust(proj, [_pair(item, "--scale", float) for item in args.scale],
                  [_pair(item, "--add", float) for item in args.add])
    print(projection_markdown(proj, args.cores))
    return 0


if __name__ == "__main__":
    sys.exit(main())

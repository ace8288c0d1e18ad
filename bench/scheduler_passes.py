"""Snakemake's own CPU while jobs queue: its re-evaluation timers as installed and one at a time.

    python bench/scheduler_passes.py [--jobs N] [--seconds S] [--cores C] [--rounds R]

Snakemake 9's scheduler ends every pass that had ready jobs by starting a ``threading.Timer`` of the job
rate limit's timespan (``--max-jobs-per-timespan``, default ``100/1s``) that triggers one more pass.
A pass started by a finished job starts a timer of its own, so while jobs wait for a core every
finished job adds one chain of passes a timespan, until the queue runs empty: after k finished jobs,
about k passes and k live timer threads a second, each pass re-reading every ready job's params,
resources and input sizes (snakemake/scheduling/job_scheduler.py, ``schedule`` and
``_schedule_reevalutation``).

The script writes a workflow of N jobs that each sleep S seconds (no CPU of their own) into a temporary
folder and runs it on C cores (so that N − C jobs wait), once as it is and once with the call the
workflow's Snakefile makes, ``polyinterp.rules.one_reevaluation_timer()`` (one pending re-evaluation at a
time), R rounds in turn; both import ``polyinterp.rules`` (with torch), as the workflow does. It prints, per
run, the wall seconds, Snakemake's own CPU seconds (utime + stime of its process, all its threads:
``/proc/PID/stat`` read every 0.2 s, its last reading before the process ended) and the most threads it had
at once (the same readings). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORT = f"""\
import sys
sys.path.insert(0, {str(REPO / "src")!r})
from polyinterp.rules import one_reevaluation_timer
"""  # both variants: the workflow imports polyinterp.rules (and torch with it) at parse time anyway
SNAKEFILE = """\
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))

rule sleep:
    output: "out/{{i}}.txt"
    shell: "sleep {seconds} && touch {{output}}"
"""


def _stat(pid: int) -> tuple[float, int] | None:
    """(own utime + stime in seconds, threads) of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        threads = int(fields[17])
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), threads


def run_once(folder: Path, snakefile: str, cores: int, every: float = 0.2) -> dict:
    """Run ``snakefile`` (its target ``all``) in ``folder`` from a clean start on ``cores`` cores; its wall s,
    Snakemake's own CPU s and the most threads it had, read every ``every`` s."""
    shutil.rmtree(folder / "out", ignore_errors=True)
    shutil.rmtree(folder / ".snakemake", ignore_errors=True)
    (folder / "Snakefile").write_text(snakefile)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "all", "--cores", str(cores), "--quiet", "progress"],
                            cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    own, threads = 0.0, 0
    while proc.poll() is None:
        now = _stat(proc.pid)
        if now is not None:
            own, threads = now[0], max(threads, now[1])
        time.sleep(every)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed in {folder} (status {proc.returncode}) on:\n{snakefile}")
    return {"wall": time.monotonic() - start, "own_cpu": own, "threads": threads}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    if args.jobs <= args.cores:
        ap.error(f"--jobs ({args.jobs}) must exceed --cores ({args.cores}), so that jobs wait for a core")
    plain = SNAKEFILE.format(jobs=args.jobs, seconds=args.seconds)
    variants = {"as installed": IMPORT + plain,
                "one pending timer": IMPORT + "assert one_reevaluation_timer()\n" + plain}
    results = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="scheduler_passes_") as tmp:
        for _ in range(args.rounds):
            for name, snakefile in variants.items():
                results[name].append(run_once(Path(tmp), snakefile, args.cores))
    print(f"{args.jobs} jobs of `sleep {args.seconds}` on {args.cores} core(s), {args.rounds} round(s), medians "
          f"(min–max)\n")
    print("| scheduler | wall s | Snakemake's own CPU s | most threads |")
    print("| --- | --- | --- | --- |")
    for name, runs in results.items():
        cells = []
        for key, fmt in (("wall", "{:.1f}"), ("own_cpu", "{:.2f}"), ("threads", "{:.0f}")):
            vals = [r[key] for r in runs]
            cells.append(f"{fmt.format(statistics.median(vals))} ({fmt.format(min(vals))}–{fmt.format(max(vals))})")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())

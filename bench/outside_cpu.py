"""Where a run's CPU outside its jobs' own records goes, from what ``bench/timed_run.sh`` sampled.

    python bench/outside_cpu.py RUN_DIR [TIMING_DIR]       (TIMING_DIR default: RUN_DIR/timing)

``timed_run.sh`` reads Snakemake's ``/proc/PID/stat`` every second (``snakemake_stat.txt``: epoch seconds,
then utime stime cutime cstime in clock ticks). Snakemake's own utime + stime is its process (all its
threads: the scheduler, the job threads that wait on each job's shell); its cutime + cstime grows when it
reaps a finished job's shell by what that job's process tree cost (bash, the step's Python process and any
children). Each job's step writes its own record as the last line of its log (``polyinterp.run_log``):
the Python process and its reaped children, from the process's start to the record.

The script pairs the reaps with the jobs that Snakemake's log says finished then: events (a growth of the
reaped CPU, a job's "Finished" stamp) less than ``--join`` seconds apart form one cluster, whose reaped CPU
less its jobs' records is CPU of those jobs' trees outside their records (split between a cluster's jobs in
proportion to their records; a cluster with a finished job that wrote no record, a failed step, is counted
apart). It prints Snakemake's own CPU, the reaped CPU against Σ records, per rule the
CPU outside the records, and both over the run in windows of ``--window`` seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

from polyinterp.run_log import logged_job_seconds, parse_run_log


def read_stat(path: Path, hz: int) -> list[tuple[int, float, float]]:
    """(epoch s, Snakemake's own CPU s, its reaped children's CPU s) per sampled second."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 5:
            continue
        t, ut, st, cut, cst = map(int, parts)
        rows.append((t, (ut + st) / hz, (cut + cst) / hz))
    if not rows:
        raise SystemExit(f"{path} holds no samples: run the workflow under bench/timed_run.sh")
    return rows


def clusters(reaps: list[tuple[int, float]], finishes: list[tuple[int, dict]], join: int):
    """Events sorted by time, cut where two are ``join`` s or more apart: [(reaps, jobs)] per cluster."""
    events = sorted([(t, 0, d) for t, d in reaps] + [(t, 1, j) for t, j in finishes], key=lambda e: (e[0], e[1]))
    out, cur, last = [], ([], []), None
    for t, kind, what in events:
        if last is not None and t - last >= join and (cur[0] or cur[1]):
            out.append(cur)
            cur = ([], [])
        cur[kind].append((t, what))
        last = t
    if cur[0] or cur[1]:
        out.append(cur)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("timing", type=Path, nargs="?")
    ap.add_argument("--join", type=int, default=3, help="events closer than this (s) are one cluster")
    ap.add_argument("--window", type=int, default=900, help="seconds per row of the table over time")
    args = ap.parse_args(argv)
    timing = args.timing or args.run / "timing"
    hz = os.sysconf("SC_CLK_TCK")
    stat = read_stat(timing / "snakemake_stat.txt", hz)
    logs = [parse_run_log(p.read_text(errors="replace"))
            for p in sorted((args.run / ".snakemake" / "log").glob("*.snakemake.log"))]
    logs = [lg for lg in logs if lg.first is not None]
    if not logs:
        raise SystemExit(f"no Snakemake log under {args.run / '.snakemake/log'}")
    # the invocation that was sampled: the log that starts nearest the first sample (its stamps: local time)
    run_log = min(logs, key=lambda lg: abs(lg.first.timestamp() - stat[0][0]))

    # reaps: growth of the reaped children's CPU between samples, at the later sample's second
    reaps = [(b[0], b[2] - a[2]) for a, b in zip(stat, stat[1:]) if b[2] > a[2]]
    finishes, unrecorded = [], 0
    for job in run_log.jobs:
        if not job.logs or job.finished is None:  # a target rule (all): no step; or a job that never finished
            continue
        rec = next((r for r in (logged_job_seconds(args.run / p) for p in job.logs) if r), None)
        unrecorded += rec is None
        epoch = int(job.finished.timestamp())  # naive: the log's stamps are local time, as timestamp() takes them
        finishes.append((epoch, {"rule": job.rule, "cpu": None if rec is None else rec["cpu_s"]}))

    outside = defaultdict(float)
    records = defaultdict(float)
    jobs_of = defaultdict(int)
    orphan = 0.0  # reaped CPU in clusters without a finished job
    unmatched = 0.0  # reaped CPU in clusters with a finished job without a record (a failed step)
    over_time = defaultdict(lambda: [0.0, 0.0])  # window → [reaped, records]
    t0 = stat[0][0]
    for cl_reaps, cl_jobs in clusters(reaps, finishes, args.join):
        reaped = sum(d for _, d in cl_reaps)
        window = over_time[((cl_reaps or cl_jobs)[0][0] - t0) // args.window]
        window[0] += reaped
        if not cl_jobs:
            orphan += reaped
            continue
        if any(j["cpu"] is None for _, j in cl_jobs):
            unmatched += reaped
            continue
        recorded = sum(j["cpu"] for _, j in cl_jobs)
        window[1] += recorded
        for _, j in cl_jobs:
            share = j["cpu"] / recorded if recorded > 0 else 1 / len(cl_jobs)
            outside[j["rule"]] += (reaped - recorded) * share
            records[j["rule"]] += j["cpu"]
            jobs_of[j["rule"]] += 1

    own_total, reaped_total = stat[-1][1] - stat[0][1], stat[-1][2] - stat[0][2]
    total_rec = sum(records.values())
    print(f"samples {stat[0][0]}–{stat[-1][0]} ({stat[-1][0] - stat[0][0]} s), {len(finishes) - unrecorded} jobs "
          f"with a record" + (f", {unrecorded} finished without one" if unrecorded else ""))
    print(f"Snakemake's own process: {own_total:.1f} CPU s; reaped children: {reaped_total:.1f} CPU s against "
          f"Σ records {total_rec:.1f} s: {reaped_total - total_rec:+.1f} s outside the records")
    print(f"reaped CPU in clusters without a finished job: {orphan:.1f} s"
          + (f"; with a job without a record (left out of the rules' rows): {unmatched:.1f} s" if unmatched else "")
          + "\n")
    print("| rule | jobs | Σ records CPU s | reaped − records s | per job s |")
    print("| --- | --- | --- | --- | --- |")
    for rule in sorted(records, key=lambda r: -abs(outside[r])):
        per_job = outside[rule] / jobs_of[rule]
        print(f"| {rule} | {jobs_of[rule]} | {records[rule]:.1f} | {outside[rule]:+.1f} | {per_job:+.2f} |")
    print("\n| window (min from start) | Snakemake's own CPU s | reaped CPU s | Σ records s | reaped − records s |")
    print("| --- | --- | --- | --- | --- |")
    own_at = {(t - t0) // args.window: o for t, o, _ in stat}  # the last sample of each window
    prev = stat[0][1]
    for w in sorted(set(own_at) | set(over_time)):
        own = own_at.get(w, prev) - prev
        prev = own_at.get(w, prev)
        reaped, rec = over_time[w]
        print(f"| {w * args.window // 60}–{(w + 1) * args.window // 60} | {own:.1f} | {reaped:.1f} | {rec:.1f} | "
              f"{reaped - rec:+.1f} |")


if __name__ == "__main__":
    sys.exit(main())

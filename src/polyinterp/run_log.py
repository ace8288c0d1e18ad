"""What a Snakemake invocation did, read from its log (``.snakemake/log/*.snakemake.log``, or the
output of ``snakemake -n``): the cores it was given, the jobs it planned (rule and count), and each
job it started with its rule, outputs, logs, benchmark file, start and finish times, and its shell
command where Snakemake printed it (``-p``).

Snakemake (9.x) prints a job as a block::

    [Sat Dec  5 08:10:01 2026]
    rule mnist_train:            (``localrule``, ``checkpoint`` likewise)
        output: a, b
        log: ...
        jobid: 12
        benchmark: results/benchmarks/....tsv
        ...
    Shell command: polyinterp ...   (with ``-p``)

and its end as ``[time]`` followed by ``Finished jobid: 12 (Rule: mnist_train)``; the plan is the
``Job stats`` table (``rule count`` rows, then ``total N``). Times are the local time of the machine
that ran Snakemake (``time.asctime``).

Also a step's own CPU time, which the command line writes at the end of the step's job log
(:func:`cpu_line`, :func:`logged_cpu_seconds`; below).
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
_FINISHED = re.compile(r"^Finished job(?:id:)? (\d+)")
_CORES = re.compile(r"^Provided cores: (\d+)")


@dataclass
class LoggedJob:
    """One job of a log: its rule, Snakemake's job id, outputs, logs, benchmark path (or None), shell
    command (None unless printed), and when it started and finished (None while it has not)."""

    rule: str
    jobid: int | None = None
    outputs: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    benchmark: str | None = None
    command: str | None = None
    started: dt.datetime | None = None
    finished: dt.datetime | None = None


@dataclass
class RunLog:
    """A parsed Snakemake log: ``cores`` (None if not printed), ``planned`` (rule → job count of the
    ``Job stats`` table, ``total`` excluded), ``jobs`` in the order they started, and the first and
    last time stamp."""

    cores: int | None
    planned: dict[str, int]
    jobs: list[LoggedJob]
    first: dt.datetime | None
    last: dt.datetime | None

    @property
    def unfinished(self) -> list[LoggedJob]:
        return [j for j in self.jobs if j.finished is None]

    @property
    def complete(self) -> bool:
        """Every planned job started and finished (a dry run is never complete)."""
        return bool(self.planned) and len(self.jobs) == sum(self.planned.values()) and not self.unfinished


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.strptime(re.sub(r" +", " ", text), "%a %b %d %H:%M:%S %Y")


def parse_run_log(text: str) -> RunLog:
    """Parse a Snakemake log (see the module docstring). Lines it does not know are skipped."""
    cores, planned, jobs, by_id = None, {}, [], {}
    first = last = stamp = None
    job: LoggedJob | None = None
    in_stats = False
    for raw in text.splitlines():
        line = raw.strip()
        m = _STAMP.match(line)
        if m:
            stamp = _stamp(m.group(1))
            first, last, job = first or stamp, stamp, None
            continue
        if line == "Job stats:":
            in_stats = not planned  # the first table is the plan; later ones (reruns) repeat it
            continue
        if in_stats:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                if parts[0] == "total":
                    in_stats = False
                else:
                    planned[parts[0]] = int(parts[1])
            continue
        if (m := _CORES.match(line)) and cores is None:
            cores = int(m.group(1))
            continue
        if m := _RULE.match(line):
            job = LoggedJob(rule=m.group(1), started=stamp)
            jobs.append(job)
            continue
        if m := _FINISHED.match(line):
            done = by_id.get(int(m.group(1)))
            if done is not None:
                done.finished = stamp
            continue
        if job is not None and ":" in line:
            key, _, value = line.partition(":")
            value = value.strip()
            if key == "output":
                job.outputs = [v.strip() for v in value.split(",") if v.strip()]
            elif key == "log":
                job.logs = [v.strip() for v in value.split(",") if v.strip()]
            elif key == "Shell command":
                job.command = value
            elif key == "benchmark":
                job.benchmark = value
            elif key == "jobid" and value.isdigit():
                job.jobid = int(value)
                by_id[job.jobid] = job
    return RunLog(cores, planned, jobs, first, last)


# ---- a step's own CPU time, from its job log ------------------------------------------------------
# The command line writes it as the last line of the step's log, and the
# run-time readers (``polyinterp publish``'s run.json, ``bench/run_time.py``) prefer it to the
# ``cpu_time`` of the job's Snakemake benchmark file, which under-counts. Snakemake 9's benchmark
# poller samples the job's processes every 0.5 s for its first 15 s and then every 30 s
# (``snakemake/benchmark.py``, ``BENCHMARK_INTERVAL``), so what a job spends after its last sample is
# lost: a 27 s SAE job's benchmark file said 14.7 CPU s, where the same job alone keeps its core busy
# for its whole 21.9 s (``/usr/bin/time``; bench/README.md, "Packing: one thread a job").

_CPU_LINE = re.compile(r"polyinterp (\S+): CPU ([0-9]+(?:\.[0-9]+)?) s \(user \+ system")


def process_cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have been waited for (getrusage)."""
    import resource  # Unix only: imported where it is used, so that reading logs works anywhere

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_line(step: str, seconds: float) -> str:
    """The log line :func:`logged_cpu_seconds` reads back."""
    return f"polyinterp {step}: CPU {seconds:.2f} s (user + system, this process and its children)"


def logged_cpu_seconds(log: Path) -> float | None:
    """The CPU seconds of the last :func:`cpu_line` in ``log``; None where the log is missing or has none
    (a step that failed, or a log written before the line existed)."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return None
    found = _CPU_LINE.findall(text)
    return float(found[-1][1]) if found else None


def job_seconds(benchmark: Path) -> dict | None:
    """A job's wall s and peak RSS (MB) from its Snakemake benchmark file (its last row: one per repeat),
    and its CPU s from the step's own count in its log where present, else the benchmark's
    ``cpu_time``; a value Snakemake could not measure ("-", "NA") is NaN. None for an empty file."""
    with open(benchmark, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        return None
    last = rows[-1]

    def number(key: str) -> float:
        try:
            return float(last.get(key))
        except (TypeError, ValueError):
            return float("nan")

    logged = logged_cpu_seconds(log_of_benchmark(benchmark))
    return {"wall_s": number("s"), "cpu_s": logged if logged is not None else number("cpu_time"),
            "max_rss_mb": number("max_rss")}


def log_of_benchmark(benchmark: Path) -> Path:
    """The log beside a benchmark file: every rule names both after one name (workflow/rules/common.smk,
    ``log_path`` and ``bench_path``): ``<results>/benchmarks/<name>.tsv`` → ``<results>/logs/<name>.log``."""
    parts = Path(benchmark).with_suffix(".log").parts
    at = len(parts) - 1 - parts[::-1].index("benchmarks")
    return Path(*parts[:at], "logs", *parts[at + 1:])

"""What a Snakemake invocation did, read from its log (``.snakemake/log/*.snakemake.log``, or the
output of ``snakemake -n``): the cores it was given, the jobs it planned (rule and count), and each
job it started with its rule, outputs, logs, start and finish times, and its shell command where
Snakemake printed it (``-p``).

Snakemake (9.x) prints a job as a block::

    [Sat Dec  5 08:10:01 2026]
    rule mnist_train:            (``localrule``, ``checkpoint`` likewise)
        output: a, b
        log: ...
        jobid: 12
        ...
    Shell command: polyinterp ...   (with ``-p``)

and its end as ``[time]`` followed by ``Finished jobid: 12 (Rule: mnist_train)``; the plan is the
``Job stats`` table (``rule count`` rows, then ``total N``). Times are the local time of the machine
that ran Snakemake (``time.asctime``).

Also a step's own record of what it cost, which the command line writes as the last line of the step's
job log (:func:`job_line`, :func:`logged_job_seconds`; below).
"""

from __future__ import annotations

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
    """One job of a log: its rule, Snakemake's job id, outputs, logs, shell command (None unless printed),
    and when it started and finished (None while it has not)."""

    rule: str
    jobid: int | None = None
    outputs: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
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
                job.command = None if value == "None" else value  # a rule without one prints None
            elif key == "jobid" and value.isdigit():
                job.jobid = int(value)
                by_id[job.jobid] = job
    return RunLog(cores, planned, jobs, first, last)


# ---- a step's own record, from its job log -------------------------------------------------------
# The command line writes it as the last line of the step's log (polyinterp.cli), and the run-time
# readers (``polyinterp publish``'s run.json, ``bench/run_time.py``) read it back. The rules declare no
# Snakemake ``benchmark:`` file: its poller read each job's process tree (``memory_full_info``, the
# whole ``/proc/PID/smaps``) every 0.5 s for the job's first 15 s and every 30 s after, about 1 CPU s
# in Snakemake's process for a 2 GB fit job, and its ``cpu_time`` missed what a job spent after the
# last sample (bench/README.md, "Packing: one thread a job" and "Job records instead of Snakemake's
# benchmark files").

_JOB_LINE = re.compile(r"polyinterp (\S+): CPU ([0-9]+(?:\.[0-9]+)?) s \(user \+ system[^)]*\), "
                       r"wall ([0-9]+(?:\.[0-9]+)?) s, peak RSS ([0-9]+(?:\.[0-9]+)?) MB")


def process_cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have been waited for (getrusage)."""
    import resource  # Unix only: imported where it is used, so that reading logs works anywhere

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def process_peak_rss_mb() -> float:
    """The peak resident memory (MiB) of this process, or of its largest waited-for child where that was
    larger.

    On Linux this process's own peak is ``VmHWM`` of ``/proc/self/status``, not getrusage's ``ru_maxrss``:
    the kernel carries ``ru_maxrss`` across ``execve`` (the replaced image's high-water mark is kept), so a
    step started from a large process (Snakemake, pytest, a shell that execs its last command) would report
    that process's peak (vfork or posix_spawn, as Python's ``subprocess`` starts children) or its RSS at the
    fork (fork) instead of its own. A child's ``ru_maxrss`` (RUSAGE_CHILDREN) carries at most this
    process's own peak the same way, so the larger of the two stays this process's or its child's. Where
    ``/proc/self/status`` has no ``VmHWM`` (not Linux) it is ``ru_maxrss`` (bytes on macOS)."""
    import resource
    import sys

    scale = 2 ** 20 if sys.platform == "darwin" else 2 ** 10
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / scale
    own = _proc_status_peak_mb()
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
    return max(own, children)


def _proc_status_peak_mb() -> float | None:
    """``VmHWM`` of ``/proc/self/status`` in MiB, or None where there is no such line (not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2 ** 10  # the kernel writes it in kB
    except OSError:
        pass
    return None


def job_line(step: str, cpu_s: float, wall_s: float, max_rss_mb: float) -> str:
    """The log line :func:`logged_job_seconds` reads back."""
    return (f"polyinterp {step}: CPU {cpu_s:.2f} s (user + system, this process and its children), "
            f"wall {wall_s:.2f} s, peak RSS {max_rss_mb:.0f} MB")


def logged_job_seconds(log: Path) -> dict | None:
    """``wall_s``, ``cpu_s`` and ``max_rss_mb`` of the last :func:`job_line` in ``log``; None where the log
    is missing or has none: a step that failed, or a run made before the record (commit 96c1ce1), whose
    CPU-only line is not a record (its wall and peak were in Snakemake's benchmark files)."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return None
    found = _JOB_LINE.findall(text)
    if not found:
        return None
    _, cpu, wall, rss = found[-1]
    return {"wall_s": float(wall), "cpu_s": float(cpu), "max_rss_mb": float(rss)}

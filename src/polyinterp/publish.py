"""Publish a finished run into the repository: ``polyinterp publish --run DIR --to docs/results/NAME``.

``DIR`` is the checkout in which ``snakemake`` ran (its ``results/`` and ``.snakemake/log/``). The
run must be one complete, uninterrupted Snakemake invocation of a commit with no tracked file
changed: its log (the newest ``.snakemake/log/*.snakemake.log``, or ``params.log``) planned jobs that
all finished, and every job log under ``results/logs`` belongs to a job of that log
(a run resumed after an interruption has jobs from an earlier invocation and is refused: its wall
time would not be one run's). What is copied, into a temporary folder renamed onto the destination:

- ``scorecard.md``, ``scorecard.parquet``, ``why_differs.md`` (where the run wrote it); ``figures/*.png`` (every PNG of ``results/figures``);
- ``tables/``: the summary tables the scorecard and figures read (``results/mnist/*.parquet`` and
  ``*.md``, ``results/mnist/<model>/*.parquet``, ``results/cubic/*.parquet``), each at most
  ``MAX_TABLE_BYTES`` (a larger one is left out and listed in ``run.json``);
- ``config.yaml``: ``results/run_config.yaml`` (the resolved config, its hash and config files);
- ``run.json``: ``commit``, ``config`` (name, config files, hash), ``cpu``, ``cpu_family_model``
  (null where the run predates it), ``cpu_flags`` and ``cores_online`` of the machine that ran it
  (recorded by rule ``run_config`` at the start of the run), ``software`` (the Python, torch, numpy and
  Snakemake versions it ran with, from the same record; null where the run predates it), ``cores`` (Snakemake's
  ``--cores``), ``started`` and ``finished`` (the first and last time stamp of the log, UTC),
  ``wall_s``, ``jobs``, and per rule its job count, the sums of its jobs' wall and CPU seconds and their
  peak RSS (each step's own record, the last line of its job log: ``polyinterp.run_log.job_line``).

A run that is not finished is refused with the outputs it is missing named.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from polyinterp.errors import DataError
from polyinterp.run_config import repository_relative
from polyinterp.run_log import RunLog, logged_job_seconds, parse_run_log

MAX_TABLE_BYTES = 4 * 2**20
TABLE_GLOBS = ("mnist/*.parquet", "mnist/*.md", "mnist/*/*.parquet", "cubic/*.parquet")
REQUIRED = ("scorecard.md", "scorecard.parquet", "run_config.yaml", "mnist/metrics.parquet")


class PublishError(DataError):
    """A run that cannot be published as it is; the message names what is missing and what to do."""


def newest_log(run: Path) -> Path:
    logs = sorted((run / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        raise PublishError(f"{run} has no Snakemake log (.snakemake/log/*.snakemake.log): run "
                           f"'snakemake --cores 2 [--configfile ...]' there first, then publish.")
    return logs[-1]


def _missing_outputs(log: RunLog, run: Path) -> list[str]:
    """Outputs of the log's jobs that did not finish, and of the planned rules that never started."""
    missing = [o for j in log.unfinished for o in j.outputs if not (run / o).exists()] or \
        [f"(outputs of rule {j.rule}, job {j.jobid})" for j in log.unfinished]
    started = pd.Series([j.rule for j in log.jobs]).value_counts().to_dict() if log.jobs else {}
    for rule, n in log.planned.items():
        if rule not in ("all",) and n > started.get(rule, 0):
            missing.append(f"{n - started.get(rule, 0)} job(s) of rule {rule} never started")
    return missing


def check_complete(log: RunLog, log_path: Path, run: Path) -> None:
    """Refuse a log whose run did not finish every planned job, naming what is missing."""
    if not log.planned:
        raise PublishError(f"{log_path} lists no planned jobs ('Job stats'); it is not the log of a run. Pass the "
                           f"run's log, or rerun it.")
    if not log.complete:
        missing = _missing_outputs(log, run)
        shown = "\n  ".join(missing[:20]) + (f"\n  … and {len(missing) - 20} more" if len(missing) > 20 else "")
        done = len(log.jobs) - len(log.unfinished)
        raise PublishError(f"the run of {log_path} is unfinished ({done} of {sum(log.planned.values())} jobs "
                           f"finished); missing:\n  {shown}\nFinish it (rerun the same snakemake command from an "
                           f"empty results/ for a publishable wall time), then publish.")
    results = run / "results"
    absent = [f"results/{name}" for name in REQUIRED if not (results / name).exists()]
    if absent:
        raise PublishError(f"the run in {run} finished but lacks {', '.join(absent)}: it was not a run of the "
                           f"whole workflow (rule all); run 'snakemake --cores 2 [--configfile ...]' without targets.")


def check_one_invocation(log: RunLog, log_path: Path, run: Path) -> None:
    """Refuse job logs that no job of this log wrote (an earlier, interrupted invocation)."""
    ours = {str(Path(p)) for j in log.jobs for p in j.logs}
    logs = run / "results" / "logs"
    foreign = sorted(str(p.relative_to(run)) for p in logs.rglob("*.log") if str(p.relative_to(run)) not in ours)
    if foreign:
        raise PublishError(f"{len(foreign)} job log(s) under {logs} were written by another invocation than "
                           f"{log_path.name} (e.g. {foreign[0]}): the run was resumed or extended, so its wall time is "
                           f"not one run's. Delete results/ and .snakemake/ and run it again from empty.")


def git_commit(run: Path) -> str:
    """The commit checked out in ``run``; refused when a tracked file differs from it."""
    def git(*args):
        return subprocess.run(["git", "-C", str(run), *args], capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        raise PublishError(f"{run} is not a git checkout ({head.stderr.strip()}); run the workflow in a clone of "
                           f"the repository at the commit to publish.")
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    if dirty:
        raise PublishError(f"tracked files in {run} differ from commit {head.stdout.strip()[:12]} "
                           f"({dirty.splitlines()[0].strip()} …): a published run is of one commit; commit or "
                           f"restore them and run again.")
    return head.stdout.strip()


def rule_seconds(log: RunLog, run: Path) -> dict:
    """Per rule: jobs, Σ wall s and Σ CPU s of its jobs, their peak RSS (MB), from each job's own record
    (:func:`polyinterp.run_log.logged_job_seconds`); a job with no log (rule ``all``) counts no seconds, a
    step's log without its record is refused."""
    out: dict[str, dict] = {}
    for job in log.jobs:
        row = out.setdefault(job.rule, {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "max_rss_mb": 0.0})
        row["jobs"] += 1
        if not job.logs:  # rule all and the other target rules run no step
            continue
        b = logged_job_seconds(run / job.logs[0])
        if b is None:
            raise PublishError(f"{job.logs[0]} (rule {job.rule}) has no job record (the step's last line: CPU, "
                               f"wall, peak RSS): the run was made before commit 96c1ce1, or its log was changed. "
                               f"Publish a run of the current code, made from an empty results/.")
        row["wall_s"] += b["wall_s"]
        row["cpu_s"] += b["cpu_s"]
        row["max_rss_mb"] = max(row["max_rss_mb"], b["max_rss_mb"])
    return {rule: {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}
            for rule, row in sorted(out.items(), key=lambda kv: -kv[1]["wall_s"])}


def config_name(configfiles: list[str]) -> str:
    """``default`` for config.yaml alone, else the stem of the last ``--configfile`` (``paper``)."""
    return Path(configfiles[-1]).stem if configfiles else "default"


def _utc(stamp: dt.datetime) -> str:
    return stamp.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_record(run: Path, log_path: Path, log: RunLog, commit: str, left_out: list[str]) -> dict:
    record = yaml.safe_load((run / "results" / "run_config.yaml").read_text())
    files = repository_relative(record.get("configfiles", []), run)  # never the machine's path of the clone
    machine = record.get("machine", {})
    return {
        "commit": commit,
        "config": {"name": config_name(files), "configfiles": files, "config_hash": record["config_hash"]},
        "cpu": machine.get("cpu", "unknown (run_config.yaml has no machine record)"),
        "cpu_family_model": [machine.get("family"), machine.get("model")],
        "cpu_flags": machine.get("flags", []),
        "cores_online": machine.get("cores_online"),
        "software": record.get("software"),  # None where the run predates the record
        "cores": log.cores,
        "started": _utc(log.first),
        "finished": _utc(log.last),
        "wall_s": round((log.last - log.first).total_seconds(), 1),
        "jobs": len(log.jobs),
        "log": log_path.name,
        "rules": rule_seconds(log, run),
        "left_out": left_out,
    }


def publish(run: str | Path, to: str | Path, log: str | Path | None = None, repo: str | Path | None = None) -> dict:
    """Copy the finished run in ``run`` to ``to`` (see the module docstring); return its run.json.
    ``repo``: the checkout whose Snakefile ran (default ``run``; differs with ``snakemake --directory``)."""
    run, to = Path(run).resolve(), Path(to)
    log_path = Path(log) if log else newest_log(run)
    parsed = parse_run_log(log_path.read_text(errors="replace"))
    check_complete(parsed, log_path, run)
    check_one_invocation(parsed, log_path, run)
    commit = git_commit(Path(repo) if repo else run)
    results = run / "results"
    to.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{to.name}.", dir=to.parent))
    try:
        for name in ("scorecard.md", "scorecard.parquet", "why_differs.md"):
            if (results / name).exists():  # why_differs.md: runs of a commit that writes it
                shutil.copy2(results / name, tmp / name)
        shutil.copy2(results / "run_config.yaml", tmp / "config.yaml")
        (tmp / "figures").mkdir()
        for png in sorted((results / "figures").glob("*.png")):
            shutil.copy2(png, tmp / "figures" / png.name)
        left_out = []
        for pattern in TABLE_GLOBS:
            for path in sorted(results.glob(pattern)):
                rel = path.relative_to(results)
                if path.stat().st_size > MAX_TABLE_BYTES:
                    left_out.append(f"results/{rel} ({path.stat().st_size} bytes > {MAX_TABLE_BYTES})")
                    continue
                (tmp / "tables" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, tmp / "tables" / rel)
        record = run_record(run, log_path, parsed, commit, left_out)
        (tmp / "run.json").write_text(json.dumps(record, indent=2) + "\n")
        old = None
        if to.exists():
            old = to.with_name(f".{to.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            to.rename(old)
        tmp.rename(to)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def publish_step(*, run: str, to: str, params: dict | None = None) -> None:
    """``polyinterp publish --run DIR --to docs/results/NAME [--params '{"log": PATH, "repo": PATH}']``:
    copy the finished, uninterrupted run in DIR (a clone at a commit) to the repository's results page."""
    params = params or {}
    record = publish(run, to, params.get("log"), params.get("repo"))
    print(f"published {record['config']['name']} run of {record['commit'][:12]} ({record['jobs']} jobs, "
          f"{record['wall_s']:.0f} s wall, {record['cores']} cores) to {to}")

"""bench/outside_cpu.py: the CPU of Snakemake's reaped jobs against the jobs' own records, on a hand-made run
(a Snakemake log, job logs with records, Snakemake's sampled /proc stat) whose answer is derived by hand."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "bench" / "outside_cpu.py"
T0 = 1_800_000_000


def _stamp(epoch: int) -> str:
    return time.strftime("[%a %b %d %H:%M:%S %Y]", time.localtime(epoch))  # Snakemake's local time


def _job(rule: str, jobid: int, start: int, log: str) -> str:
    return f"{_stamp(start)}\nrule {rule}:\n    log: {log}\n    jobid: {jobid}\n"


def _finished(rule: str, jobid: int, end: int) -> str:
    return f"{_stamp(end)}\nFinished jobid: {jobid} (Rule: {rule})\n"


def _record(run: Path, log: str, step: str, cpu: float) -> None:
    path = run / log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"working\n2026-12-07 00:00:00,000 polyinterp.cli INFO polyinterp {step}: CPU {cpu:.2f} s (user + "
                    f"system, this process and its children), wall {cpu:.2f} s, peak RSS 100 MB\n")


def test_reaped_cpu_is_matched_to_the_jobs_that_finished_then(tmp_path):
    hz = os.sysconf("SC_CLK_TCK")
    run = tmp_path / "run"
    (run / ".snakemake" / "log").mkdir(parents=True)
    (run / "timing").mkdir()
    # fit A alone at T0+100 (record 50 s, reaped 52 s: +2 outside); fit B and metrics M together at T0+200
    # (records 30 + 10, reaped 44: +4, split 3 : 1 by record); a failed job F at T0+300 (no record, reaped 2 s:
    # counted apart); a reap of 1 s at T0+400 with no job (Snakemake's own child); Snakemake's own process 3 s
    # at the start and 5 s more by the end; an older log of another invocation, which the script leaves aside
    log = "Provided cores: 2\nJob stats:\njob count\nfit 2\nmetrics 1\ntotal 3\n\n"
    log += _job("fit", 1, T0 + 1, "results/logs/a.log") + _job("fit", 2, T0 + 101, "results/logs/b.log")
    log += _finished("fit", 1, T0 + 100)
    log += _job("metrics", 3, T0 + 101, "results/logs/m.log")
    log += _finished("fit", 2, T0 + 201) + _finished("metrics", 3, T0 + 201)
    log += _job("fit", 4, T0 + 202, "results/logs/f.log") + _finished("fit", 4, T0 + 300)
    (run / ".snakemake" / "log" / "2026-12-07T000000.000000.snakemake.log").write_text(log)
    (run / "results" / "logs").mkdir(parents=True)
    (run / "results" / "logs" / "f.log").write_text("Traceback ...\n")
    older = _job("fit", 1, T0 - 90_000, "results/logs/a.log") + _finished("fit", 1, T0 - 89_900)
    (run / ".snakemake" / "log" / "2026-12-08T000000.000000.snakemake.log").write_text(older)  # sorts last
    _record(run, "results/logs/a.log", "fit", 50)
    _record(run, "results/logs/b.log", "fit", 30)
    _record(run, "results/logs/m.log", "metrics", 10)
    stat = [(T0, 0, 0), (T0 + 1, 3, 0), (T0 + 100, 3, 52), (T0 + 200, 3, 96), (T0 + 300, 3, 98), (T0 + 400, 3, 99),
            (T0 + 600, 8, 99)]
    (run / "timing" / "snakemake_stat.txt").write_text(
        "".join(f"{t} {own * hz} 0 {reaped * hz} 0\n" for t, own, reaped in stat))

    done = subprocess.run([sys.executable, str(SCRIPT), str(run), "--window", "300"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "3 jobs with a record, 1 finished without one" in out
    assert "Snakemake's own process: 8.0 CPU s; reaped children: 99.0 CPU s against Σ records 90.0 s: +9.0 s" in out
    assert ("reaped CPU in clusters without a finished job: 1.0 s; with a job without a record (left out of the "
            "rules' rows): 2.0 s") in out
    rows = {cells[1].strip(): [c.strip() for c in cells[2:-1]]
            for cells in (line.split("|") for line in out.splitlines() if line.startswith("| "))}
    assert rows["fit"] == ["2", "80.0", "+5.0", "+2.50"]  # A +2, B 3/4 of +4
    assert rows["metrics"] == ["1", "10.0", "+1.0", "+1.00"]
    assert rows["0–5"] == ["3.0", "96.0", "90.0", "+6.0"]
    assert rows["5–10"] == ["0.0", "3.0", "0.0", "+3.0"]
    assert rows["10–15"] == ["5.0", "0.0", "0.0", "+0.0"]


def test_a_run_without_samples_says_what_to_do(tmp_path):
    (tmp_path / "timing").mkdir()
    (tmp_path / "timing" / "snakemake_stat.txt").write_text("")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert done.returncode != 0 and "run the workflow under bench/timed_run.sh" in done.stderr

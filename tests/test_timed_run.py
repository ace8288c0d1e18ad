"""bench/timed_run.sh: a run measured from outside. With a stand-in `snakemake` on PATH (a script that
records its arguments and burns a little CPU), the script passes its arguments through, writes time.txt
and proc_stat.txt, prints the run's CPU and the machine's busy and idle core-seconds, tells the stand-in's
own CPU from its reaped children's (snakemake_stat.txt), and returns the run's exit status; without an
output folder it stops with its usage."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "bench" / "timed_run.sh"
pytestmark = pytest.mark.skipif(not Path("/usr/bin/time").exists() or not Path("/proc/stat").exists(),
                                reason="needs /usr/bin/time and /proc/stat (Linux)")


def _fake_snakemake(tmp_path: Path, status: int = 0, body: str | None = None) -> dict:
    """The environment with a stand-in `snakemake` first on PATH: by default it records its arguments, burns a
    little CPU in a child and exits with ``status``; ``body`` replaces what it does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "snakemake"
    fake.write_text("#!/bin/bash\n" + (body if body is not None else
                                       f'echo "$@" > {tmp_path}/args.txt\n'
                                       'python3 -c "sum(i * i for i in range(2_000_000))"\n'
                                       f"exit {status}\n"))
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_run_is_timed_and_the_machine_sampled(tmp_path):
    env = _fake_snakemake(tmp_path, 0)
    out = tmp_path / "timing"
    done = subprocess.run(["bash", str(SCRIPT), str(out), "--cores", "2", "--configfile", "x.yaml"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "args.txt").read_text().split() == ["--cores", "2", "--configfile", "x.yaml"]
    time_txt = (out / "time.txt").read_text()
    assert "User time (seconds)" in time_txt and "Elapsed (wall clock) time" in time_txt
    rows = [line.split() for line in (out / "proc_stat.txt").read_text().splitlines()]
    assert len(rows) >= 2 and all(len(r) == 9 and all(v.isdigit() for v in r) for r in rows)
    user = float(re.search(r"user ([\d.]+) s", done.stdout).group(1))
    assert user > 0  # the stand-in's CPU, measured by time
    assert re.search(r"machine over the run: busy \d+ core-s, idle \d+, iowait \d+, steal \d+", done.stdout)


def test_the_run_status_comes_back_and_no_folder_is_a_usage_error(tmp_path):
    env = _fake_snakemake(tmp_path, 3)
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "t")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3 and (tmp_path / "t" / "time.txt").exists()
    usage = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage: bench/timed_run.sh OUT_DIR" in usage.stderr


def test_snakemakes_own_cpu_is_told_from_its_jobs(tmp_path):
    """The stand-in burns CPU in a child (a job) and then in its own process (a shell loop), then waits past a
    sample: the summary gives each, and the two add up to what time measured for the whole tree."""
    env = _fake_snakemake(tmp_path, body='python3 -c "sum(i * i for i in range(10_000_000))"\n'
                                         "x=0; for i in $(seq 1 400000); do x=$((x + i)); done\nsleep 2.5\n")
    out = tmp_path / "timing"
    done = subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = re.search(r"snakemake's own process: ([\d.]+) CPU s; the jobs it had reaped: ([\d.]+) CPU s", done.stdout)
    assert line, done.stdout
    own, reaped = float(line.group(1)), float(line.group(2))
    assert own > 0.1 and reaped > 0.1  # the loop ran in the stand-in itself, the python in its child
    total = sum(float(v) for v in re.search(r"user ([\d.]+) s, system ([\d.]+) s", done.stdout).groups())
    assert abs(own + reaped - total) <= 0.05 + 0.02 * total  # clock ticks against time's microseconds

"""profiles/default: the workflow profile Snakemake reads by itself, so that the README's plain
`snakemake --cores 2` shows a failing job's log and resumes after a kill."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from workflow_helpers import REPO, SMOKE

DEFAULT = REPO / "profiles" / "default"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

TINY = """
rule all:
    input: "out/slow.txt", "out/broken.txt"

rule slow:
    output: "out/slow.txt"
    log: "out/logs/slow.log"
    shell: "echo partial > {output}; sleep ${{POLYINTERP_TEST_SLEEP:-0}}; echo done > {output}"

rule broken:
    input: "out/slow.txt"
    output: "out/broken.txt"
    log: "out/logs/broken.log"
    shell: "echo SHELL-MARK; where=console; echo 'broken on purpose, see this on the '$where > {log}; exit 7"
"""
LOG_TEXT = "broken on purpose, see this on the console"  # not in the shell command Snakemake echoes


def read_profile(folder: Path, monkeypatch=None) -> dict:
    """The profile as Snakemake parses it (yte templates included): {option: value as text}."""
    from snakemake.profiles import ProfileConfigFileParser

    if monkeypatch is not None:
        for var in [v for v in os.environ if v.startswith("POLYINTERP_SLURM_")]:
            monkeypatch.delenv(var)
    with open(folder / "config.yaml") as fh:
        return dict(ProfileConfigFileParser().parse(fh))


def tiny_workflow(tmp_path: Path) -> Path:
    """A Snakefile with the repo's profiles/default beside it; returns its folder."""
    wf = tmp_path / "wf"
    (wf / "profiles" / "default").mkdir(parents=True)
    (wf / "Snakefile").write_text(TINY)
    shutil.copy(DEFAULT / "config.yaml", wf / "profiles" / "default" / "config.yaml")
    return wf


def snakemake(wf: Path, workdir: Path, *args: str, env=None, **kw) -> subprocess.CompletedProcess:
    """Run the tiny workflow from a third directory, so only the Snakefile's folder can supply the profile."""
    cwd = workdir.parent / "elsewhere"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [*SNAKEMAKE, "-s", str(wf / "Snakefile"), "--directory", str(workdir), "--cores", "1", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}, **kw,
    )


def test_repo_profile_parses_and_sets_the_options():
    raw = yaml.safe_load((DEFAULT / "config.yaml").read_text())
    assert raw == {"show-failed-logs": True, "rerun-incomplete": True}
    from snakemake.cli import get_argument_parser

    args = get_argument_parser(profiles=[str(DEFAULT)]).parse_args([])
    assert args.show_failed_logs and args.rerun_incomplete


def test_default_profile_agrees_with_local_and_slurm(monkeypatch):
    """The workflow profile wins over --profile key by key: it may only hold keys both profiles share."""
    default = read_profile(DEFAULT)
    for name in ("local", "slurm"):
        other = read_profile(REPO / "workflow" / "profiles" / name, monkeypatch)
        for key, value in default.items():
            assert other.get(key) == value, f"profiles/default sets {key}: {value}, workflow/profiles/{name} {other.get(key)}"


def test_failing_job_log_is_on_the_console(tmp_path):
    wf = tiny_workflow(tmp_path)
    proc = snakemake(wf, tmp_path / "w1")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"workflow specific profile {wf / 'profiles' / 'default'}" in out
    assert LOG_TEXT in out  # show-failed-logs: the log's contents, not only its path
    # The control: without the profile only the log's path is printed.
    off = snakemake(wf, tmp_path / "w2", "--workflow-profile", "none")
    assert off.returncode != 0 and "broken.log" in off.stdout + off.stderr
    assert LOG_TEXT not in off.stdout + off.stderr


def test_profile_option_is_merged_under_the_default_profile(tmp_path):
    """--profile adds its keys; where both set one, profiles/default wins; the command line beats both."""
    wf = tiny_workflow(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("show-failed-logs: false\nprintshellcmds: true\n")
    proc = snakemake(wf, tmp_path / "w", "--profile", str(other))
    out = proc.stdout + proc.stderr
    assert f"Using profiles {other} and workflow specific profile" in out
    assert LOG_TEXT in out  # show-failed-logs from profiles/default won over the other profile's false
    assert "Shell command: echo SHELL-MARK" in out  # printshellcmds came through from --profile


def test_resume_after_kill(tmp_path):
    """SIGKILL mid-job: the lock needs --unlock once, then the same command rebuilds the killed job."""
    wf = tiny_workflow(tmp_path)
    work = tmp_path / "w"
    proc = subprocess.Popen(
        [*SNAKEMAKE, "-s", str(wf / "Snakefile"), "--directory", str(work), "--cores", "1", "out/slow.txt"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "POLYINTERP_TEST_SLEEP": "120"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (work / "out" / "slow.txt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the slow job never started"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its job, as a lost session would
        proc.wait(timeout=30)
    assert (work / "out" / "slow.txt").read_text() == "partial\n"

    locked = snakemake(wf, work, "out/slow.txt")
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    assert snakemake(wf, work, "--unlock").returncode == 0
    resumed = snakemake(wf, work, "out/slow.txt")  # no --rerun-incomplete: the profile sets it
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (work / "out" / "slow.txt").read_text() == "done\n"


def test_repo_snakefile_picks_up_the_profile(tmp_path):
    """A dry run of the real workflow, from another directory, with and without --profile local."""
    base = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path / "w"), "-n"]
    for extra, words in (([], "Using workflow specific profile"),
                         (["--profile", str(REPO / "workflow" / "profiles" / "local")], "and workflow specific profile")):
        proc = subprocess.run([*base, *extra, "--configfile", str(SMOKE)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"{words} {DEFAULT}" in proc.stderr

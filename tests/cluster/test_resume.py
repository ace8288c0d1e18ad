"""A run killed with SIGKILL in the middle of training resumes to the same outputs as a run that was
never interrupted, and no partial file ever shows up under an output name."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from cluster_helpers import LOCAL_PROFILE, compare_results, run, smoke_configfiles, snakemake_cmd, write_overlay
from workflow_helpers import SMOKE

pytestmark = pytest.mark.e2e

# Longer than the smoke schedule (2^9 steps), so that "mid-training" is a window of seconds.
LAST_POW = 10
LAST_STEP = 2**LAST_POW
CKPT_DIR = Path("results/mnist/mlp_relu/seed0/ckpt")
TARGET = str(CKPT_DIR / f"step{LAST_STEP}.pt")
OUTPUT_NAME = re.compile(r"^step\d+\.pt$")


class OutputWatcher:
    """Polls a folder; every file that appears under an output name must load completely."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.seen: dict[str, tuple[int, int, int]] = {}
        self.broken: list[str] = []
        self.temp_names: set[str] = set()

    def poll(self) -> list[str]:
        import torch

        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return []
        names = []
        for entry in entries:
            if not OUTPUT_NAME.match(entry.name):
                self.temp_names.add(entry.name)
                continue
            names.append(entry.name)
            try:
                st = entry.stat()
                key = (st.st_ino, st.st_size, st.st_mtime_ns)
                if self.seen.get(entry.name) == key:
                    continue
                data = Path(entry.path).read_bytes()
            except FileNotFoundError:  # removed between listing and reading (Snakemake cleanup)
                continue
            try:
                torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            except Exception as exc:  # noqa: BLE001 - any failure to load is a partial file
                self.broken.append(f"{entry.name} ({len(data)} bytes): {type(exc).__name__}: {exc}")
            self.seen[entry.name] = key
        return names


def run_watched(cmd, folder: Path, log: Path, kill_when=None, timeout: float = 600) -> tuple[int, OutputWatcher, bool]:
    """Run cmd in its own process group, polling `folder` every 5 ms; SIGKILL the whole group as
    soon as kill_when(visible output names) is true. Returns (exit code, watcher, killed)."""
    watcher = OutputWatcher(folder)
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    killed = False
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None:
            names = watcher.poll()
            if kill_when is not None and not killed and kill_when(names):
                os.killpg(proc.pid, signal.SIGKILL)  # snakemake and the training job, like a node dying
                killed = True
            if time.monotonic() > deadline:
                raise AssertionError(f"{' '.join(cmd)} ran past {timeout}s")
            time.sleep(0.005)
        watcher.poll()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if killed:
        # Nothing of the killed run may survive it (a surviving job could still write outputs).
        deadline = time.monotonic() + 10
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(proc.pid), f"processes of the killed run survive: {group_alive(proc.pid)}"
    return proc.returncode, watcher, killed


def group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):  # fields: state, ppid, pgrp, ...
            alive.append(int(stat.parent.name))
    return alive


def test_sigkill_mid_training_then_rerun_gives_identical_outputs(tmp_path, mnist_wheel):
    extra = f"  train:\n    checkpoints:\n      last_pow: {LAST_POW}\n"
    smoke_pow = yaml.safe_load(SMOKE.read_text())["mnist"]["train"]["checkpoints"]["last_pow"]
    assert LAST_POW > smoke_pow

    ref, work = tmp_path / "reference", tmp_path / "resumed"
    for d in (ref, work):
        d.mkdir()
    args = ("--profile", str(LOCAL_PROFILE), "--cores", "2", TARGET)

    # The uninterrupted run.
    ref_cmd = snakemake_cmd(ref, *args, configfiles=smoke_configfiles(write_overlay(ref, mnist_wheel, extra)))
    code, ref_watch, _ = run_watched(ref_cmd, ref / CKPT_DIR, tmp_path / "reference.log")
    assert code == 0, (tmp_path / "reference.log").read_text()[-4000:]
    assert not ref_watch.broken, ref_watch.broken

    # The same run, killed (SIGKILL, whole process group) once training has written two
    # checkpoints and before it wrote the last one.
    cmd = snakemake_cmd(work, *args, configfiles=smoke_configfiles(write_overlay(work, mnist_wheel, extra)))
    last = f"step{LAST_STEP}.pt"
    code, watch, killed = run_watched(cmd, work / CKPT_DIR, tmp_path / "killed.log",
                                      kill_when=lambda names: len(names) >= 2 and last not in names)
    assert killed and code == -signal.SIGKILL, f"not killed mid-training (exit {code}): " + \
        (tmp_path / "killed.log").read_text()[-3000:]
    assert not watch.broken, f"partial files visible under output names: {watch.broken}"
    left = sorted(p.name for p in (work / CKPT_DIR).iterdir() if OUTPUT_NAME.match(p.name))
    assert left and last not in left, left
    # Whatever the killed run left under an output name is complete and equals the reference.
    for name in left:
        from cluster_helpers import compare_file

        assert not compare_file(work / CKPT_DIR / name, ref / CKPT_DIR / name, name), name
    # Temporary files are hidden (dot) names beside the outputs, never an output's own name.
    assert all(n.startswith(".") for n in watch.temp_names), watch.temp_names

    # Resuming: the documented two commands. A SIGKILL leaves Snakemake's lock behind.
    locked = run(cmd, check=False)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    run(snakemake_cmd(work, *args, "--unlock", configfiles=cmd[cmd.index("--configfile") + 1:]))
    code, watch2, _ = run_watched(cmd, work / CKPT_DIR, tmp_path / "rerun.log")
    rerun_log = (tmp_path / "rerun.log").read_text()
    assert code == 0, rerun_log[-4000:]
    assert not watch2.broken, f"partial files visible under output names: {watch2.broken}"
    # The incomplete training job ran again (from scratch); the finished data job did not.
    assert re.search(r"^\s*mnist_train\s+1$", rerun_log, re.M), rerun_log[:3000]
    assert not re.search(r"^\s*mnist_data\s+\d+$", rerun_log, re.M), rerun_log[:3000]

    diffs = compare_results(ref, work)
    assert not diffs, "resumed outputs differ from the uninterrupted run:\n" + "\n".join(diffs[:30])

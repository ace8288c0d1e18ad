"""The smoke config through workflow/profiles/slurm on a real one-node SLURM cluster: every job is a
SLURM job, GPU rules ask SLURM for a GPU, and the outputs equal a local run's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cluster_helpers import (FAST_POLL, SLURM_PROFILE, compare_results, gpu_rules, job_blocks, run,
                             slurm_submissions, smoke_configfiles, snakemake_cmd, write_overlay)

pytestmark = pytest.mark.cluster

PARTITION = "main"  # the test cluster's only partition (tests/cluster/slurm.sh)


def scontrol_job(jobid: int) -> str:
    """`scontrol show job` (finished jobs stay visible for MinJobAge = 3600 s on the test cluster)."""
    return subprocess.run(["scontrol", "show", "job", str(jobid)], capture_output=True, text=True).stdout


def test_smoke_config_on_slurm_matches_local_run(tmp_path, slurm_env, mnist_wheel, smoke_run):
    work = tmp_path / "slurm"
    work.mkdir()
    env = {**slurm_env, "POLYINTERP_SLURM_PARTITION": PARTITION}
    cmd = snakemake_cmd(work, "--profile", str(SLURM_PROFILE), *FAST_POLL,
                        configfiles=smoke_configfiles(write_overlay(work, mnist_wheel)))
    # Every job is its own SLURM job (a Snakemake start-up in the job, then the step's), and on the test
    # cluster's 2 CPUs and one fake GPU they run nearly one at a time: the 79-job smoke DAG of
    # 2026-12-01 took 29 min here with a local smoke run beside it (CI: it passed 1200 s until
    # the DAG grew past ~65 jobs). The limit leaves room for the DAG to grow; CI's own is 90 min.
    proc = run(cmd, env=env, timeout=2700)
    text = proc.stdout + proc.stderr
    (tmp_path / "slurm_run.log").write_text(text)

    jobs = job_blocks(text)
    submissions = slurm_submissions(text)
    remote = [j for j in jobs if not j["local"]]
    assert remote, text[-3000:]
    # Every job that runs a command went through SLURM; only aggregate target rules ran locally.
    assert not [j["rule"] for j in jobs if j["local"] and j["shell"]], "jobs with a command ran locally"
    submitted = {job: slurm_id for job, slurm_id, _ in submissions}
    assert {j["jobid"] for j in remote} == set(submitted), (sorted(j["jobid"] for j in remote), sorted(submitted))
    assert "Error in rule" not in text, "no job should have needed a retry"

    # Each SLURM job kept its log (slurm-keep-successful-logs), named by its SLURM job id, and
    # SLURM itself recorded it as completed, on our partition, with the account the tests gave.
    rule_of = {j["jobid"]: j["rule"] for j in remote}
    gpu = gpu_rules()
    for job, slurm_id, log in submissions:
        log = Path(log)
        assert log.name == f"{slurm_id}.log" and log.is_file(), log
        assert f"rule_{rule_of[job]}" in log.parts, log
        info = scontrol_job(slurm_id)
        assert "JobState=COMPLETED" in info, info
        assert f"Partition={PARTITION}" in info and "Account=polyinterp" in info, info
        tres = re.search(r"TresPerJob=(\S+)", info)  # e.g. gres:gpu:1 for --gpus=1
        asked_gpu = bool(tres and "gpu" in tres.group(1))
        assert asked_gpu == (rule_of[job] in gpu), (rule_of[job], info)

    diffs = compare_results(smoke_run, work)
    assert not diffs, "SLURM outputs differ from the local run:\n" + "\n".join(diffs[:30])

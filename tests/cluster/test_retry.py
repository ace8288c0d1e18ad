"""On SLURM, a failing job is resubmitted as the profile says, and one that keeps failing ends the
run with an error that names the rule's log file."""

from __future__ import annotations

import shutil

import pytest
import yaml

from cluster_helpers import FAST_POLL, HERE, SLURM_PROFILE, error_blocks, run, slurm_submissions, snakemake_cmd

pytestmark = pytest.mark.cluster


def test_failed_jobs_are_retried_then_fail_with_the_rule_log(tmp_path, slurm_env):
    retries = int(yaml.safe_load((SLURM_PROFILE / "config.yaml").read_text())["retries"])
    assert retries >= 1, "the slurm profile should resubmit failed jobs"
    shutil.copy(HERE / "retry.smk", tmp_path / "Snakefile")

    cmd = snakemake_cmd(tmp_path, "--profile", str(SLURM_PROFILE), *FAST_POLL, "--keep-going",
                        snakefile=tmp_path / "Snakefile")
    proc = run(cmd, env=slurm_env, timeout=420, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"a job that always fails must fail the run:\n{text[-3000:]}"

    # Every attempt was a SLURM job of its own (the job writes its SLURM_JOB_ID).
    flaky = (tmp_path / "out" / "flaky.attempts").read_text().split()
    broken = (tmp_path / "out" / "broken.attempts").read_text().split()
    assert len(flaky) == 2 and len(set(flaky)) == 2 and "none" not in flaky, flaky
    assert len(broken) == retries + 1 and len(set(broken)) == retries + 1 and "none" not in broken, broken
    submitted = {str(slurm_id) for _, slurm_id, _ in slurm_submissions(text)}
    assert set(flaky) | set(broken) <= submitted, (flaky, broken, submitted)

    # The flaky job's second attempt succeeded; the broken one produced nothing.
    assert (tmp_path / "out" / "flaky.txt").read_text().strip() == "ok"
    assert not (tmp_path / "out" / "broken.txt").exists()
    assert text.count("Trying to restart job") >= 1 + retries

    # The error names the rule's own log file (and shows it: show-failed-logs), for each attempt.
    blocks = error_blocks(text, "broken")
    assert len(blocks) >= retries + 1, text[-3000:]
    assert all("out/logs/broken.log" in block for block in blocks), blocks[-1]
    assert f"broken on purpose (SLURM job {broken[-1]})" in text
    assert "At least one job did not complete successfully" in text

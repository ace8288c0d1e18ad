"""The Snakemake profiles, read the way Snakemake reads them (no cluster needed)."""

from __future__ import annotations

import re

import pytest

from cluster_helpers import LOCAL_PROFILE, SLURM_PROFILE, SLURM_SH, gpu_rules, rule_resources
from workflow_helpers import REPO

SITE_VARS = ("POLYINTERP_SLURM_ACCOUNT", "POLYINTERP_SLURM_PARTITION", "POLYINTERP_SLURM_GPU_PARTITION",
             "POLYINTERP_SLURM_GPU_MODEL", "POLYINTERP_SLURM_GPUS")


def parse_profile(profile, monkeypatch, **env):
    """The profile as Snakemake sees it: {option: value}, key=value lists split into dicts."""
    from snakemake.profiles import ProfileConfigFileParser

    for var in SITE_VARS:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    with open(profile / "config.yaml") as fh:
        parsed = ProfileConfigFileParser().parse(fh)
    out = dict(parsed)
    if "default-resources" in out:
        out["default-resources"] = dict(item.split("=", 1) for item in out["default-resources"])
    if "set-resources" in out:
        per_rule: dict[str, dict[str, str]] = {}
        for item in out["set-resources"]:
            rule_res, value = item.split("=", 1)
            rule, res = rule_res.split(":", 1)
            per_rule.setdefault(rule, {})[res] = value
        out["set-resources"] = per_rule
    if "resources" in out:
        out["resources"] = dict(item.split("=", 1) for item in out["resources"])
    return out


def test_slurm_profile_defaults(monkeypatch):
    p = parse_profile(SLURM_PROFILE, monkeypatch)
    assert p["executor"] == "slurm"
    # sacct hangs forever without SLURM accounting; squeue cannot.
    assert p["slurm-status-command"] == "squeue"
    assert int(p["retries"]) >= 1 and int(p["latency-wait"]) >= 30
    assert p["rerun-incomplete"] == "True"
    assert {"mem_mb", "runtime"} <= set(p["default-resources"])
    # Without site settings: no account, no partition (the plugin guesses / the cluster default).
    assert "slurm_account" not in p["default-resources"]
    assert "slurm_partition" not in p["default-resources"]


def test_slurm_profile_gpu_rules_match_the_workflow(monkeypatch):
    declared = gpu_rules()
    assert {"mnist_train", "mnist_approximants"} <= declared, declared
    p = parse_profile(SLURM_PROFILE, monkeypatch)
    assert set(p["set-resources"]) == declared, (
        "workflow/profiles/slurm set-resources must list exactly the rules that declare `gpu` "
        f"in workflow/rules: profile {sorted(p['set-resources'])}, rules {sorted(declared)}"
    )
    assert all(res == {"gpu": "1"} for res in p["set-resources"].values()), p["set-resources"]
    figure_rules = {r for r in rule_resources() if r.startswith("fig") or "_fig_" in r}
    assert figure_rules and not (figure_rules & declared), "figures must stay on CPU"


def test_slurm_profile_site_settings_from_environment(monkeypatch):
    p = parse_profile(SLURM_PROFILE, monkeypatch, POLYINTERP_SLURM_ACCOUNT="proj42",
                      POLYINTERP_SLURM_PARTITION="all", POLYINTERP_SLURM_GPU_PARTITION="gpu",
                      POLYINTERP_SLURM_GPU_MODEL="a100")
    # Quoted, so that a partition called e.g. `all` is not evaluated as Python's all().
    assert p["default-resources"]["slurm_account"] == "'proj42'"
    assert p["default-resources"]["slurm_partition"] == "'all'"
    for rule, res in p["set-resources"].items():
        assert res == {"gpu": "1", "gpu_model": "'a100'", "slurm_partition": "'gpu'"}, (rule, res)


def test_slurm_profile_without_gpus(monkeypatch):
    p = parse_profile(SLURM_PROFILE, monkeypatch, POLYINTERP_SLURM_GPUS="0", POLYINTERP_SLURM_PARTITION="cpu",
                      POLYINTERP_SLURM_GPU_MODEL="a100")
    assert all(res == {"gpu": "0"} for res in p["set-resources"].values()), p["set-resources"]


def test_squeue_status_needs_min_job_age_above_three_polls(monkeypatch):
    """The plugin switches from squeue back to sacct when MinJobAge < 3 x the first poll delay."""
    p = parse_profile(SLURM_PROFILE, monkeypatch)
    init = int(p["slurm-init-seconds-before-status-checks"])
    min_job_age = int(re.search(r"^MinJobAge=(\d+)$", SLURM_SH.read_text(), re.M).group(1))
    assert min_job_age >= 3 * init
    assert 300 >= 3 * init, "SLURM's default MinJobAge (300 s) must be enough for the profile"


def test_local_profile_queues_gpu_jobs_one_at_a_time(monkeypatch):
    p = parse_profile(LOCAL_PROFILE, monkeypatch)
    assert p["resources"]["gpu"] == "1"
    assert p["cores"] == "all"
    assert p["rerun-incomplete"] == "True"


@pytest.mark.parametrize("gpus, expect", [("1", "gpu=1"), ("0", "gpu=0")])
def test_slurm_profile_applies_to_the_workflow(tmp_path, monkeypatch, gpus, expect):
    """A dry run through the profile shows the GPU request on the training job, none on figures."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    import subprocess
    import sys

    from workflow_helpers import SMOKE

    env = {"POLYINTERP_SLURM_GPUS": gpus, "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--profile", str(SLURM_PROFILE), "-n", "--configfile", str(REPO / "config.yaml"), str(SMOKE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = re.split(r"\n(?=\[.*\]\n)|\n(?=rule \w+:)", proc.stdout)
    train = [j for j in jobs if re.search(r"^rule mnist_train:", j, re.M)]
    figs = [j for j in jobs if re.search(r"^rule fig\d\w*:", j, re.M)]
    assert train and figs, proc.stdout[-3000:]
    assert all(re.search(rf"resources:.*\b{expect}\b", j) for j in train), train[0]
    assert not any(re.search(r"resources:.*\bgpu=", j) for j in figs), figs[0]

"""A rule's params carry only the keys its step reads: changing a figure-only key reruns figure jobs
only, and the solver plan does not depend on the solver's tolerance (Snakemake's params trigger)."""

from __future__ import annotations

import re
import shutil

import pytest
from workflow_helpers import SMOKE, run_snakemake

pytestmark = pytest.mark.e2e


def _jobs(stdout: str) -> set[str]:
    """Rule names in the job-stats table of a dry run."""
    table = stdout.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"total", "all"}


@pytest.fixture(scope="module")
def copy(smoke_run, tmp_path_factory):
    work = tmp_path_factory.mktemp("scoped") / "work"
    shutil.copytree(smoke_run, work, ignore=shutil.ignore_patterns("locks", "incomplete"))
    return work


def _dry(work, overlay_text: str | None) -> set[str]:
    """Jobs of a dry run with ``overlay_text`` as one more config file, less rule run_config (it
    records the config and its files, so it reruns on every change by design: tests/test_run_config.py)."""
    extra = ()
    if overlay_text is not None:
        extra = (work / "change.yaml",)
        extra[0].write_text(overlay_text)
    proc = run_snakemake(work, "-n", configfiles=(SMOKE, work / "overlay.yaml", *extra))
    out = proc.stdout + proc.stderr
    return _jobs(out) - {"run_config"} if "Job stats:" in out else set()


def test_nothing_to_do_without_a_change(smoke_run, copy):
    # where the run was made, with its very config files: nothing at all
    proc = run_snakemake(smoke_run, "-n", configfiles=(SMOKE, smoke_run / "overlay.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr
    # in the copy (its overlay has another path) and with an empty overlay: only the config record
    assert _dry(copy, None) == set()
    assert _dry(copy, "{}\n") == set()


def test_figure_keys_rerun_figures_only(copy):
    jobs = _dry(copy, "mnist:\n  figures:\n    digit: 5\ncubic:\n  figures:\n    band_latents: 2\n"
                      "    landmarks_top: 2\n    clamp_latents: 1\n")
    assert jobs == {"fig1_features", "fig4_ablated_digits", "cubic_fig_bands", "cubic_fig_landmarks",
                    "cubic_fig_clamp"}, jobs


def test_solver_tolerance_does_not_rerun_the_solver_plan(copy):
    jobs = _dry(copy, "mnist:\n  approx:\n    tol: 1.0e-7\n")
    assert "mnist_approximants" in jobs and "mnist_solver_plan" not in jobs, jobs
    assert not {"mnist_train", "mnist_mixture", "mnist_data"} & jobs


@pytest.mark.parametrize("key,value", [("deflation_steps", 30), ("jd_newton_iterations", 10), ("jd_basis", "jacobi"),
                                       ("coarse_ritz", 5), ("coarse_rank", 2)])
def test_plan_keys_rerun_the_plan_but_not_training(copy, key, value):
    jobs = _dry(copy, f"mnist:\n  approx:\n    {key}: {value}\n")
    assert "mnist_solver_plan" in jobs and "mnist_train" not in jobs, jobs


def test_jacobi_keys_do_not_rerun_a_newton_plan(copy):
    # the default basis is newton: the Jacobi sweeps' keys are not the plan's params then
    assert "mnist_solver_plan" not in _dry(copy, "mnist:\n  approx:\n    jd_logdet_sweeps: 1\n    jd_sweeps: 3\n")


def test_accuracy_level_reruns_the_attack_summary_not_the_attacks(copy):
    jobs = _dry(copy, "mnist:\n  ablation:\n    accuracy_level: 0.5\n")
    assert jobs == {"mnist_svd_ablation_all", "mnist_attack_summary", "fig4_ablated_digits", "fig5_ablation_accuracy",
                    "fig6_attack_strength", "scorecard"}, jobs

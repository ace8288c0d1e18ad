"""bench/run_time.py's projection of a run from a sample of it: which sampled job each planned job is
priced at (its own, a --like, the mean of its folded name, or none), on a hand-made sample."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from polyinterp.run_log import job_line

_spec = importlib.util.spec_from_file_location("run_time", Path(__file__).parents[1] / "bench" / "run_time.py")
run_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_time)

DRY_RUN = """
[Wed Dec  2 14:54:25 2026]
rule mnist_approximants:
    output: results/mnist/m/seed1/approx/step16.pt
    log: results/logs/mnist/m/approx_seed1_step16.log
    wildcards: model=m, seed=1, step=16
[Wed Dec  2 14:54:25 2026]
rule mnist_approximants:
    log: results/logs/mnist/m/approx_seed2_step1024.log
[Wed Dec  2 14:54:25 2026]
rule cubic_grid_point:
    log: results/logs/cubic/grid_seed0/a0_b0.log
[Wed Dec  2 14:54:25 2026]
rule cubic_grid_point:
    log: results/logs/cubic/grid_seed1/a2_b3.log
[Wed Dec  2 14:54:25 2026]
localrule all:
    input: results/scorecard.md
[Wed Dec  2 14:54:25 2026]
rule scorecard:
    log: results/logs/scorecard.log
"""


def _sample(tmp_path: Path) -> Path:
    """A results folder whose job logs end with the steps' records (job_line), as the command line writes them."""
    rows = {"mnist/m/approx_seed0_step4096": (100.0, 150.0), "mnist/m/approx_seed0_step16384": (700.0, 900.0),
            "cubic/grid_seed0/a0_b0": (20.0, 10.0), "cubic/grid_seed0/a6_b6": (30.0, 20.0)}
    for name, (wall, cpu) in rows.items():
        path = tmp_path / "logs" / f"{name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("2026-12-06 10:04:22 polyinterp.x INFO working\n"
                        f"2026-12-06 10:04:23 polyinterp.cli INFO {job_line('x', cpu, wall, 10.0)}\n")
    return tmp_path


def test_planned_jobs_are_read_from_a_dry_run():
    jobs = run_time.planned_jobs(DRY_RUN)
    assert list(jobs.rule) == ["mnist_approximants", "mnist_approximants", "cubic_grid_point",
                               "cubic_grid_point", "scorecard"]  # 'all' has no log
    assert jobs.path.iloc[0] == "mnist/m/approx_seed1_step16"


def test_each_planned_job_is_priced_by_the_first_route_that_applies(tmp_path):
    sample = run_time.job_table(_sample(tmp_path))
    like = [(r"approx_seed\d+_step(1024|16384)$", "mnist/m/approx_seed0_step16384"),
            (r"approx_seed", "mnist/m/approx_seed0_step4096")]
    proj = run_time.project(sample, run_time.planned_jobs(DRY_RUN), like).set_index("path")
    assert proj.loc["mnist/m/approx_seed1_step16", ["wall_s", "cpu_s"]].tolist() == [100.0, 150.0]
    assert proj.loc["mnist/m/approx_seed2_step1024", ["wall_s", "cpu_s"]].tolist() == [700.0, 900.0]
    assert proj.loc["cubic/grid_seed0/a0_b0", "source"] == "sampled"
    assert proj.loc["cubic/grid_seed0/a0_b0", "wall_s"] == 20.0
    assert proj.loc["cubic/grid_seed1/a2_b3", "source"] == "mean of its folded name"
    assert proj.loc["cubic/grid_seed1/a2_b3", "wall_s"] == 25.0
    assert proj.loc["scorecard", "source"] == "not sampled" and proj.loc["scorecard", "wall_s"] == 0.0
    text = run_time.projection_markdown(proj.reset_index(), cores=2)
    assert "| **all** | 5 | 4 | 845 | 1075 |" in text
    assert "Not sampled, counted as 0 s: 1 jobs: scorecard (1)." in text


def test_a_like_that_names_no_sampled_job_is_refused(tmp_path):
    sample = run_time.job_table(_sample(tmp_path))
    with pytest.raises(SystemExit, match="not a sampled job's log"):
        run_time.project(sample, run_time.planned_jobs(DRY_RUN), [("x", "mnist/m/nothing")])


def test_scale_and_add_adjust_the_matching_jobs(tmp_path):
    sample = run_time.job_table(_sample(tmp_path))
    proj = run_time.project(sample, run_time.planned_jobs(DRY_RUN), [(r"approx_seed", "mnist/m/approx_seed0_step4096")])
    got = run_time.adjust(proj, [(r"step1024$", 16.0)], [(r"approx_seed\d+_step1024$", 5.0), (r"scorecard", 2.0)])
    by_path = got.set_index("path")
    assert by_path.loc["mnist/m/approx_seed2_step1024", "wall_s"] == 100.0 * 16 + 5  # scaled, then added
    assert by_path.loc["mnist/m/approx_seed2_step1024", "cpu_s"] == 150.0 * 16 + 5
    assert by_path.loc["mnist/m/approx_seed1_step16", "wall_s"] == 100.0  # untouched
    assert by_path.loc["scorecard", "wall_s"] == 2.0 and by_path.loc["scorecard", "source"] == " + 2 s"


def test_a_log_without_the_steps_record_is_left_out(tmp_path):
    """A failed job's log has no record line: the table has the jobs that wrote one, and a results folder
    with none is refused with what to do."""
    results = _sample(tmp_path)
    failed = results / "logs" / "cubic" / "grid_seed0" / "a1_b1.log"
    failed.write_text("2026-12-06 10:04:22 polyinterp.x ERROR out of memory\n")
    table = run_time.job_table(results)
    assert sorted(table.path) == ["cubic/grid_seed0/a0_b0", "cubic/grid_seed0/a6_b6", "mnist/m/approx_seed0_step16384",
                                  "mnist/m/approx_seed0_step4096"]
    assert table.set_index("path").loc["cubic/grid_seed0/a0_b0", ["wall_s", "cpu_s", "max_rss_mb"]].tolist() == \
        [20.0, 10.0, 10.0]
    empty = tmp_path / "empty"
    (empty / "logs").mkdir(parents=True)
    with pytest.raises(SystemExit, match="run the workflow first"):
        run_time.job_table(empty)

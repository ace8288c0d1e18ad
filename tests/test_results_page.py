"""The results pages (polyinterp.results_page) are generated from the published runs: their numbers
are those of each run's run.json and scorecard, and the repository's pages are up to date."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from polyinterp.errors import DataError
from polyinterp.results_page import BEGIN, END, update

REPO = Path(__file__).resolve().parents[1]


def publish_fake(root: Path, name: str, verdicts: list[str], wall_s: float, jobs: int, **extra) -> None:
    folder = root / "docs" / "results" / name
    (folder / "figures").mkdir(parents=True)
    (folder / "figures" / "fig2.png").write_bytes(b"png")
    pd.DataFrame({"claim": [f"c{i}" for i in range(len(verdicts))], "verdict": verdicts}).to_parquet(
        folder / "scorecard.parquet")
    (folder / "scorecard.md").write_text("| claim | verdict |\n|---|---|\n| c0 | **x** |\n")
    run = {"commit": "0123456789abcdef" + name, "cpu": "Test CPU", "cores": 2, "jobs": jobs, "wall_s": wall_s,
           "started": "2026-12-05 08:00:00 UTC", "finished": "later", "config": {"configfiles": []},
           "rules": {"a": {"jobs": 1, "wall_s": 5.0}}, **extra}
    (folder / "run.json").write_text(json.dumps(run))


def test_pages_carry_each_runs_numbers(tmp_path):
    (tmp_path / "README.md").write_text(f"intro\n{BEGIN}\nstale\n{END}\nafter\n")
    publish_fake(tmp_path, "smoke", ["reproduced", "differs", "reproduced"], 125.0, 120)
    publish_fake(tmp_path, "default", ["not comparable", "reproduced"], 3725.0, 125, cpu_family_model=[25, 17])
    assert sorted(update(tmp_path)) == sorted([str(tmp_path / "docs" / "results.md"), str(tmp_path / "README.md")])
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("intro\n") and readme.endswith("after\n") and "stale" not in readme
    rows = [line for line in readme.splitlines() if line.startswith("| [")]
    assert [r.split("]")[0] for r in rows] == ["| [default", "| [smoke"]  # default first
    assert "1 h 02 min" in rows[0] and "1 reproduced, 1 not comparable" in rows[0] and "| 125 |" in rows[0]
    assert "| Test CPU (family 25, model 17) |" in rows[0] and "| Test CPU |" in rows[1]  # the smoke run predates them
    assert "2 min 05 s" in rows[1] and "2 reproduced, 1 differs" in rows[1] and "| 120 |" in rows[1]
    page = (tmp_path / "docs" / "results.md").read_text()
    assert "## default" in page and "results/smoke/figures/fig2.png" in page and "| c0 | **x** |" in page
    assert update(tmp_path, check=True) == []  # a second run changes nothing


def test_a_folder_without_run_json_is_named(tmp_path):
    (tmp_path / "README.md").write_text(f"{BEGIN}\n{END}\n")
    (tmp_path / "docs" / "results" / "half").mkdir(parents=True)
    with pytest.raises(DataError, match=r"half has no run.json.*polyinterp publish"):
        update(tmp_path)


def test_the_repositorys_pages_are_generated_from_its_published_runs():
    assert update(REPO, check=True) == [], "run 'polyinterp results_page' and commit docs/results.md and README.md"


def test_the_why_table_re_reads_each_published_run_from_its_own_tables():
    """The "why it differs" section re-reads each published run's MNIST claims from its published tables:
    where a claim is scored as the run's own scorecard scored it, the two values are the same; and the
    section explains each claim that differs in the paper run."""
    from polyinterp.results_page import rescored_mnist

    folder = REPO / "docs" / "results" / "paper"
    label, table = rescored_mnist(folder)
    assert label.startswith("paper: the paper's text recipe, to step 262144")
    published = pd.read_parquet(folder / "scorecard.parquet").set_index("claim")
    same = ["final quadratic R² > 0.95", "linear FVU ≈ 0.025 early in training", "KL(MLP ‖ linear) rises over training",
            "linear → quadratic transition between 500 and 4000 steps", "quadratic FVU rises after 2^16 steps"]
    ours = table.set_index("claim")
    for claim in same:
        assert ours.loc[claim, "ours_mean"] == pytest.approx(published.loc[claim, "ours_mean"], rel=1e-12), claim
    page = (REPO / "docs" / "results.md").read_text()
    section = page.split("## Why it differs", 1)[1].split("\n## ", 1)[0]
    for family in table.family[table.verdict == "differs"].unique():
        assert f"**{family}**:" in section, family

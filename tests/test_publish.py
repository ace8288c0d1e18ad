"""Publishing a finished run (polyinterp.publish): the smoke run's log and files give a results page
whose run.json agrees with the jobs' logs read directly and with Snakemake's own time stamps; unfinished, resumed and uncommitted
runs are refused with what is missing named."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from polyinterp import cli
from polyinterp.publish import PublishError, publish
from polyinterp.run_log import parse_run_log


def git_repo(path: Path) -> str:
    """A one-commit git repository at ``path``; returns its commit."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "Snakefile").write_text("# stand-in\n")
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "Snakefile"], [*env, "commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def first_log(run: Path) -> Path:
    """The log of the fixture's own invocation (the oldest; other tests may run more in the folder)."""
    logs = sorted((run / ".snakemake" / "log").glob("*.snakemake.log"))
    assert logs, run
    return logs[0]


@pytest.mark.e2e
def test_the_smoke_run_publishes_with_its_log_and_job_records(smoke_run, tmp_path):
    commit = git_repo(tmp_path / "repo")
    log = first_log(smoke_run)
    dest = tmp_path / "docs" / "results" / "smoke"
    record = publish(smoke_run, dest, log=log, repo=tmp_path / "repo")

    on_disk = json.loads((dest / "run.json").read_text())
    assert on_disk == record and record["commit"] == commit
    assert record["config"]["name"] == "overlay"  # the last --configfile of the fixture
    assert record["cores"] == 2 and record["cpu"] != "unknown"
    # the job count and the wall time are the log's: count its job blocks and time stamps independently
    text = log.read_text()
    blocks = [line for line in text.splitlines() if line.strip().startswith(("rule ", "localrule ", "checkpoint "))
              and line.strip().endswith(":")]
    assert record["jobs"] == len(blocks) == sum(r["jobs"] for r in record["rules"].values())
    assert 0 < record["wall_s"] < 3600
    # per-rule seconds: the sums of that rule's job records, read here without the module; each job's
    # wall inside Snakemake's own span of it (its start and finish stamps, whole seconds: 1 s of slack)
    parsed = parse_run_log(text)
    for rule in ("mnist_train", "mnist_approximants", "scorecard"):
        jobs = [j for j in parsed.jobs if j.rule == rule]
        last = [[line for line in (smoke_run / j.logs[0]).read_text().splitlines() if ": CPU " in line][-1]
                for j in jobs]
        cpu = sum(float(line.split(": CPU ")[1].split(" s ")[0]) for line in last)
        wall = sum(float(line.split(", wall ")[1].split(" s,")[0]) for line in last)
        peak = max(float(line.split("peak RSS ")[1].split(" MB")[0]) for line in last)
        assert record["rules"][rule] == {"jobs": len(jobs), "wall_s": pytest.approx(wall, abs=0.06),
                                         "cpu_s": pytest.approx(cpu, abs=0.06), "max_rss_mb": peak}, rule
        for job, line in zip(jobs, last):
            own = float(line.split(", wall ")[1].split(" s,")[0])
            assert 0 < own <= (job.finished - job.started).total_seconds() + 1, (rule, job.logs)
        assert 0 < cpu and peak > 100  # every step imports torch or pandas: over 100 MB
    # what the page holds
    pngs = sorted(p.name for p in (smoke_run / "results" / "figures").glob("*.png"))
    assert pngs and sorted(p.name for p in (dest / "figures").glob("*.png")) == pngs
    assert (dest / "scorecard.md").read_text() == (smoke_run / "results" / "scorecard.md").read_text()
    metrics = pd.read_parquet(dest / "tables" / "mnist" / "metrics.parquet")
    assert {"seed", "step", "metric", "value", "se"} <= set(metrics.columns)
    assert (dest / "tables" / "mnist" / "attack_strength.parquet").exists()
    assert (dest / "tables" / "cubic" / "summary.parquet").exists()
    assert not list(dest.rglob("*.pdf")) and not list(dest.rglob("*.pt"))
    # publishing again replaces the page whole, leaving no temporary folder
    publish(smoke_run, dest, log=log, repo=tmp_path / "repo")
    assert sorted(p.name for p in dest.parent.iterdir()) == ["smoke"]


def fake_run(root: Path, *, finish_all: bool = True) -> Path:
    """A run folder with a two-job log (the second unfinished unless ``finish_all``) and its files."""
    run = root / "run"
    (run / ".snakemake" / "log").mkdir(parents=True)
    (run / "results" / "logs").mkdir(parents=True)
    for name in ("scorecard.md", "scorecard.parquet", "mnist/metrics.parquet"):
        (run / "results" / name).parent.mkdir(parents=True, exist_ok=True)
        (run / "results" / name).write_text("x")
    (run / "results" / "run_config.yaml").write_text("config_hash: abc\nconfigfiles: []\nconfig: {}\n")
    (run / "results" / "logs" / "a.log").write_text(
        "2026-12-05 08:00:01 polyinterp.cli INFO polyinterp a: CPU 1.00 s (user + system, this process and its "
        "children), wall 1.50 s, peak RSS 10 MB\n")
    log = ["Provided cores: 2", "Job stats:", "job      count", "-----  -------", "a            1",
           "scorecard    1", "total        2", "",
           "[Sat Dec  5 08:00:00 2026]", "rule a:", "    output: results/a.pt", "    jobid: 1",
           "    log: results/logs/a.log", "[Sat Dec  5 08:00:02 2026]", "Finished jobid: 1 (Rule: a)",
           "[Sat Dec  5 08:00:03 2026]", "rule scorecard:", "    output: results/scorecard.md, results/table.parquet",
           "    jobid: 2"]
    if finish_all:
        log += ["[Sat Dec  5 08:01:03 2026]", "Finished jobid: 2 (Rule: scorecard)"]
    (run / ".snakemake" / "log" / "2026-12-05T080000.snakemake.log").write_text("\n".join(log) + "\n")
    return run


def test_an_unfinished_run_is_refused_naming_its_missing_outputs(tmp_path):
    run = fake_run(tmp_path, finish_all=False)
    with pytest.raises(PublishError, match=r"unfinished \(1 of 2 jobs finished\)") as err:
        publish(run, tmp_path / "out", repo=tmp_path / "repo")
    assert "results/table.parquet" in str(err.value) and "results/scorecard.md" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_rule_that_never_started_is_named(tmp_path):
    run = fake_run(tmp_path)
    path = next((run / ".snakemake" / "log").glob("*.log"))
    path.write_text(path.read_text().replace("scorecard    1", "scorecard    2").replace("total        2",
                                                                                           "total        3"))
    with pytest.raises(PublishError, match=r"1 job\(s\) of rule scorecard never started"):
        publish(run, tmp_path / "out", repo=tmp_path / "repo")


def test_a_resumed_run_and_a_changed_checkout_are_refused(tmp_path):
    commit = git_repo(tmp_path / "repo")
    run = fake_run(tmp_path)
    (run / "results" / "logs" / "earlier.log").write_text("from an earlier invocation\n")
    with pytest.raises(PublishError, match=r"1 job log\(s\).*earlier\.log.*run it again from empty"):
        publish(run, tmp_path / "out", repo=tmp_path / "repo")
    (run / "results" / "logs" / "earlier.log").unlink()
    (tmp_path / "repo" / "Snakefile").write_text("# edited\n")
    with pytest.raises(PublishError, match=rf"differ from commit {commit[:12]}.*Snakefile"):
        publish(run, tmp_path / "out", repo=tmp_path / "repo")
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "checkout", "-q", "Snakefile"], check=True)
    record = publish(run, tmp_path / "out", repo=tmp_path / "repo")
    assert record["jobs"] == 2 and record["wall_s"] == 63.0 and record["cores"] == 2
    assert record["rules"]["a"] == {"jobs": 1, "wall_s": 1.5, "cpu_s": 1.0, "max_rss_mb": 10.0}
    local = dt.datetime(2026, 12, 5, 8, 0, 0).astimezone(dt.timezone.utc)  # the log's stamps are local time
    assert record["started"] == local.strftime("%Y-%m-%d %H:%M:%S UTC")


def test_publish_is_a_command_not_a_step(tmp_path, capsys):
    assert "publish" not in cli.step_table()
    run = fake_run(tmp_path, finish_all=False)
    assert cli.main(["publish", "--run", str(run), "--to", str(tmp_path / "out")]) == 2
    assert "unfinished" in capsys.readouterr().err
    shutil.rmtree(run)


def test_a_step_log_without_its_record_is_refused(tmp_path):
    """A run made before the job records (its logs end with a CPU-only line) cannot give run.json's seconds:
    refused, naming the log and what to do."""
    git_repo(tmp_path / "repo")
    run = fake_run(tmp_path)
    (run / "results" / "logs" / "a.log").write_text(
        "2026-12-05 08:00:01 polyinterp.cli INFO polyinterp a: CPU 1.00 s (user + system, this process and its "
        "children)\n")
    with pytest.raises(PublishError, match=r"results/logs/a\.log \(rule a\) has no job record.*96c1ce1"):
        publish(run, tmp_path / "out", repo=tmp_path / "repo")
    assert not (tmp_path / "out").exists()

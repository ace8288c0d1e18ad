"""bench/project_by_rule.py: a run's rules scaled by the sample/reference ratio of each rule, hand-derived."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "bench" / "project_by_rule.py"


def _write(path: Path, rules: dict, **extra) -> str:
    path.write_text(json.dumps({"rules": {k: {"jobs": 1, "wall_s": v, "cpu_s": v} for k, v in rules.items()},
                                **extra}))
    return str(path)


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_each_rule_takes_its_own_ratio_and_a_missing_one_the_overall(tmp_path):
    # target: a 100 s, b 60 s (b in the reference only), wall 100 s on 2 cores: packing 160 / 2 / 100 = 0.8
    # reference a 10, b 5, c 10; sample a 20, c 40: a's factor 2, all rules' (20 + 40) / (10 + 10) = 3
    # projected: 100 × 2 + 60 × 3 = 380 CPU s, wall 100 × 380 / 160 = 237.5 s (= 380 / 2 / 0.8)
    target = _write(tmp_path / "t.json", {"a": 100.0, "b": 60.0}, wall_s=100.0, cores=2)
    reference = _write(tmp_path / "r.json", {"a": 10.0, "b": 5.0, "c": 10.0})
    sample = _write(tmp_path / "s.json", {"a": 20.0, "c": 40.0})
    done = _run(target, "--from", reference, "--sample", sample)
    assert done.returncode == 0, done.stderr
    lines = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")]
    rows = {cells[1].strip(): cells for cells in lines}
    assert rows["a"][3].strip() == "2.00 (rule)" and float(rows["a"][4]) == 200
    assert rows["b"][3].strip() == "3.00 (all rules)" and float(rows["b"][4]) == 180
    assert [cells[1].strip() for cells in lines[2:4]] == ["a", "b"]  # largest projected first
    assert float(rows["**all**"][4]) == 380
    assert "packing (Σ CPU / 2 cores / wall) 0.800" in done.stdout
    assert "projected wall 238 s" in done.stdout


@pytest.mark.parametrize("content, says", [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    (json.dumps({"wall_s": 1}), "has no 'rules'"),
    (json.dumps({"rules": {}}), "has no 'rules'"),
    (json.dumps({"rules": {"a": {"cpu_s": None}}}), "has no 'rules'"),
])
def test_a_bad_run_json_is_named(tmp_path, content, says):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = _write(tmp_path / "g.json", {"a": 1.0}, wall_s=1.0)
    done = _run(good, "--from", str(bad), "--sample", good)
    assert done.returncode != 0 and says in done.stderr and "bad.json" in done.stderr


def test_runs_sharing_no_rule_and_a_target_without_wall_are_refused(tmp_path):
    target = _write(tmp_path / "t.json", {"a": 1.0}, wall_s=1.0)
    done = _run(target, "--from", _write(tmp_path / "r.json", {"x": 1.0}),
                "--sample", _write(tmp_path / "s.json", {"y": 1.0}))
    assert done.returncode != 0 and "share no rule" in done.stderr
    assert "r.json" in done.stderr and "s.json" in done.stderr
    for bad, extra in (("nowall.json", {}), ("zerowall.json", {"wall_s": 0})):
        done = _run(_write(tmp_path / bad, {"a": 1.0}, **extra), "--from", target, "--sample", target)
        assert done.returncode != 0 and bad in done.stderr and "positive 'wall_s'" in done.stderr

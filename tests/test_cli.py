"""The command line is generated from the step functions: every rule's command of a dry run parses
against its step's parser with exactly the step's arguments, and every step is named after a rule."""

from __future__ import annotations

import inspect
import re
import shlex

import pytest
from workflow_helpers import run_snakemake

from polyinterp import cli


def test_every_step_is_a_keyword_only_function():
    table = cli.step_table()
    assert len(table) >= 26
    for step, target in table.items():
        func = cli.step_function(target)
        params = inspect.signature(func).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), step
        cli.step_parser(step, func)  # builds


def test_help_lists_the_steps(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for step in cli.step_table():
        assert f"  {step}\n" in out + "\n"
    assert cli.main(["no_such_step"]) == 2
    assert "unknown step 'no_such_step'" in capsys.readouterr().err


def test_a_missing_file_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        cli.main(["mnist_mixture", "--data", "x.npz", "--params", "{}"])
    assert "--mixture" in capsys.readouterr().err


def test_every_rule_command_parses_against_its_step(tmp_path):
    proc = run_snakemake(tmp_path, "-n", "-p", "--forceall")
    table = cli.step_table()
    current, seen = None, set()
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line)
        if m:
            current = m.group(1)
        m = re.match(r"^Shell command: (polyinterp .*)$", line)
        if not m:
            continue
        words = shlex.split(m.group(1).split(" > ")[0])
        step, rest = words[1], words[2:]
        assert step == current, (step, current)  # one name: the rule runs the step of its own name
        seen.add(step)
        func = cli.step_function(table[step])
        args = vars(cli.step_parser(step, func).parse_args(rest))
        given = {k for k, v in args.items() if v not in (None, [])} - {"threads"}
        signature = inspect.signature(func).parameters
        required = {n for n, p in signature.items() if p.default is inspect.Parameter.empty}
        assert required <= given <= set(signature), (step, required, given)
    assert seen == set(table), set(table) ^ seen  # every step runs in the DAG, and only steps run

"""The command line is generated from the step functions: every rule's command of a dry run parses
against its step's parser with exactly the step's arguments, and every step is named after a rule."""

from __future__ import annotations

import inspect
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from workflow_helpers import run_snakemake

from polyinterp import cli

# the steps whose training loops (many small operations) run on the one thread their rule declares
ONE_THREAD = {"mnist_train", "cubic_train", "cubic_sae", "cubic_capacity_train", "cubic_grid_seed"}


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


def test_the_command_line_runs_a_step_on_the_threads_it_is_given(monkeypatch):
    import torch

    seen = []

    def probe(*, params: dict) -> None:
        seen.append((torch.get_num_threads(), params))

    monkeypatch.setattr(cli, "step_table", lambda: {"probe": "anywhere:probe"})
    monkeypatch.setattr(cli, "step_function", lambda target: probe)
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(3 - n)
            assert cli.main(["probe", "--params", '{"a": 1}', "--threads", str(n)]) == 0
        assert seen == [(1, {"a": 1}), (2, {"a": 1})]
    finally:
        torch.set_num_threads(before)


def test_a_step_writes_its_own_record_last(monkeypatch, caplog, tmp_path):
    """The last line a step logs is what its process cost: CPU (user + system, getrusage), wall and peak
    RSS, read back by polyinterp.run_log.logged_job_seconds. A step that burns 0.3 CPU s and sleeps 0.3 s
    reports at least that CPU and at least the wall that its own clock saw."""
    import time

    from polyinterp.run_log import logged_job_seconds

    seen = {}

    def probe(*, params: dict) -> None:
        t0, start = time.monotonic(), time.process_time()
        while time.process_time() - start < 0.3:
            pass
        time.sleep(0.3)
        seen["wall"] = time.monotonic() - t0

    monkeypatch.setattr(cli, "step_table", lambda: {"probe": "anywhere:probe"})
    monkeypatch.setattr(cli, "step_function", lambda target: probe)
    with caplog.at_level("INFO"):
        assert cli.main(["probe", "--params", "{}"]) == 0
    assert caplog.records[-1].getMessage().startswith("polyinterp probe: CPU ")
    log = tmp_path / "probe.log"  # the lines as the job's log holds them
    log.write_text("".join(f"2026-12-06 10:00:00 {r.name} {r.levelname} {r.getMessage()}\n" for r in caplog.records))
    got = logged_job_seconds(log)
    assert 0.3 <= got["cpu_s"] < 1e4
    assert seen["wall"] - 0.01 <= got["wall_s"] < 1e4  # the line rounds to 0.01 s


def test_a_steps_record_has_its_own_peak_memory_not_its_parents(tmp_path):
    """A step that fills a 200 MiB block records a peak RSS of at least 200 MB and less than 1 GB (the
    interpreter, numpy and the command line are tens of MB), even when the process that starts it holds
    1.5 GiB: Linux carries getrusage's peak across fork + exec, so a step run under pytest or Snakemake
    once recorded its parent's peak (2 244 MB on CI)."""
    from polyinterp.run_log import logged_job_seconds

    step = (
        "import sys\n"
        "import numpy as np\n"
        "from polyinterp import cli\n"
        "def probe(*, params):\n"
        "    np.ones(200 * 2**20 // 8).sum()  # 200 MiB, every page written\n"
        "cli.step_table = lambda: {'probe': 'anywhere:probe'}\n"
        "cli.step_function = lambda target: probe\n"
        "sys.exit(cli.main(['probe', '--params', '{}']))\n"
    )
    parent = (  # a large parent, every page written, that starts the step as Snakemake's shell does
        "import subprocess, sys\n"
        "block = bytearray(1536 * 2**20)\n"
        "block[::4096] = b'\\1' * len(block[::4096])\n"
        f"done = subprocess.run([sys.executable, '-c', {step!r}], capture_output=True, text=True)\n"
        "sys.stderr.write(done.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "probe.log"
    log.write_text(done.stderr)
    got = logged_job_seconds(log)
    assert got is not None, done.stderr
    assert 200 <= got["max_rss_mb"] < 1024


def _run_probe(body: str, tmp_path) -> subprocess.CompletedProcess:
    """``cli.run()`` in a fresh interpreter, on a one-step table whose step is ``probe(*, out)``, defined by
    ``body`` (the function's indented lines); stdout and stderr are pipes, so block-buffered."""
    script = (
        "import atexit, sys\n"
        "from polyinterp import cli\n"
        "from polyinterp.errors import DataError\n"
        "from polyinterp.io import atomic_path\n"
        "def probe(*, out):\n" + body +
        "cli.step_table = lambda: {'probe': 'anywhere:probe'}\n"
        "cli.step_function = lambda target: probe\n"
        f"sys.argv = ['polyinterp', 'probe', '--out', {str(tmp_path / 'out.txt')!r}]\n"
        "cli.run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # it unbuffers C stdio too
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)


def test_the_command_ends_at_its_last_line_with_its_output_whole_and_its_streams_flushed(tmp_path):
    """``polyinterp`` (cli.run) ends the process without finalisation: an atexit hook the step registered
    never runs; yet the step's output file is whole, and what it printed into a pipe's buffer (Python's,
    unterminated, and the C library's) and its record line reach the streams; the status is main's."""
    done = _run_probe(
        "    atexit.register(lambda: print('FINALISED', file=sys.stderr))\n"
        "    with atomic_path(out) as tmp:\n"
        "        tmp.write_text('x' * 100000)\n"
        "    sys.stdout.write('y' * 5000)  # no newline: only a flush sends it\n"
        "    import ctypes; ctypes.CDLL(None).puts(b'from C')  # C stdio, block-buffered into a pipe\n",
        tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.txt").read_text() == "x" * 100000
    assert done.stdout == "y" * 5000 + "from C\n"
    assert "polyinterp probe: CPU" in done.stderr
    assert "FINALISED" not in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary file left


def test_the_command_keeps_its_exit_status_on_a_refusal_and_a_bug(tmp_path):
    """A step's expected failure (PolyinterpError) is status 2 with its message; an unexpected exception
    takes Python's usual way out, status 1 and a traceback."""
    refused = _run_probe("    raise DataError('the file is bad; rerun the rule')\n", tmp_path)
    assert refused.returncode == 2
    assert "polyinterp probe: error: the file is bad; rerun the rule" in refused.stderr
    bug = _run_probe("    raise ZeroDivisionError('a bug')\n", tmp_path)
    assert bug.returncode == 1
    assert "Traceback" in bug.stderr and "ZeroDivisionError: a bug" in bug.stderr


def test_both_forms_of_the_command_are_run(tmp_path):
    """The ``polyinterp`` script (pyproject's entry point) and ``python -m polyinterp`` (the rules' form) are
    :func:`cli.run`, not :func:`cli.main`: run as ``__main__``, the module ends before an atexit hook."""
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["polyinterp"] == "polyinterp.cli:run"
    script = ("import atexit, runpy, sys\n"
              "atexit.register(lambda: print('FINALISED', file=sys.stderr))\n"
              "sys.argv = ['polyinterp', '--help']\n"
              "runpy.run_module('polyinterp', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: polyinterp STEP" in done.stdout
    assert "FINALISED" not in done.stderr


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
        if step in ONE_THREAD:  # threads are set once, by the rule: its training loop runs on one
            assert args["threads"] == 1, step
        given = {k for k, v in args.items() if v not in (None, [])} - {"threads"}
        signature = inspect.signature(func).parameters
        required = {n for n, p in signature.items() if p.default is inspect.Parameter.empty}
        assert required <= given <= set(signature), (step, required, given)
    assert seen == set(table), set(table) ^ seen  # every step runs in the DAG, and only steps run


class _Files(list):
    """The part of Snakemake's Namedlist that step_files reads: a list with named entries."""

    def __init__(self, items, names):
        super().__init__(items)
        self._names = names

    def keys(self):
        return list(self._names)

    def __getitem__(self, key):
        return self._names[key] if isinstance(key, str) else list.__getitem__(self, key)


def test_step_files_names_every_file_once():
    inp = _Files(["a.pt", "b 1.pt", "c.pt"], {"model": "a.pt", "parts": ["b 1.pt", "c.pt"]})
    out = _Files(["o.pt"], {"out": "o.pt"})
    assert cli.step_files(None, inp, out) == "--model a.pt --parts 'b 1.pt' c.pt --out o.pt"
    with pytest.raises(ValueError, match="needs a key"):
        cli.step_files(None, _Files(["a.pt", "x.pt"], {"model": "a.pt"}), out)
    with pytest.raises(ValueError, match="'model' is also an input key"):
        cli.step_files(None, inp, _Files(["o.pt"], {"model": "o.pt"}))
    # an empty list (e.g. no warm start) is left out
    assert cli.step_files(None, _Files([], {"warm": []}), out) == "--out o.pt"


def test_step_params_heads_the_command_with_its_step_and_refuses_an_unknown_one():
    assert cli.step_params("mnist_data")(None) == "mnist_data"
    assert cli.step_params("mnist_data", lambda wc: {"b": 1, "a": "x y"})(None) == \
        """mnist_data --params '{"a": "x y", "b": 1}'"""
    with pytest.raises(ValueError, match="'no_such_step'"):
        cli.step_params("no_such_step")

"""One job of a finished run, with its rule's command and the run's code, written out as a script that can be
timed alone.

    .venv/bin/python bench/one_job.py RUN TARGET OUT [--set KEY=JSON ...] [-- SNAKEMAKE ARGUMENTS ...]

RUN is a finished run's checkout (its ``results/`` holds the job's inputs), TARGET one output of the job
(``results/mnist/mlp_relu/seed0/approx/step2048.pt``), OUT a new folder. Snakemake is asked, in RUN,
for the job's shell command (``snakemake -n -p -f TARGET``, plus the arguments after ``--``: the
run's ``--configfile``); its outputs and log are moved under OUT (so that the run's own files are
only read), each ``--set KEY=JSON`` replaces one key of the step's ``--params`` (``--set
inner_dtype='"float32"'``; a nested one as ``--set sgd.product_dtype='"float32"'``), and the result
is written to ``OUT/job.sh``: ``cd RUN``, then the step's command with the package imported from
``RUN/src`` by this Python, as the rule's shell prefix does (``workflow/rules/common.smk``; set
``JOB_SRC`` to another checkout's ``src`` and ``JOB_PYTHON`` to another interpreter to time those
instead). ``OUT/job.sh`` is printed, so that a timer runs it directly, as a whole process
(``bench/ab_pairs.py``):

    python bench/ab_pairs.py -n 3 --vs OUT/job.sh -- env ATEN_CPU_CAPABILITY=avx2 OUT/job.sh

Snakemake runs once, here, not in each timed run. Stops with a message, before writing anything, if
RUN is not a folder or Snakemake cannot be started; if Snakemake plans no job for the target, or more
than one (the run is not finished), or one without outputs to move; if OUT is RUN or a folder that is
not empty; or if a ``--set`` names none of the step's parameters.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from polyinterp.run_log import parse_run_log


def moved(command: str, paths: list[str], out: Path) -> str:
    """``command`` with each of ``paths``, where it stands as a word of its own (quoted or not), replaced
    by the same relative path under ``out``."""
    for path in paths:
        new = shlex.quote(str(out / path))
        command = re.sub(r"(?<=\s)(['\"]?)" + re.escape(path) + r"\1(?=\s|$)", lambda m: new, command)
    return command


def with_params(command: str, settings: dict) -> str:
    """``command`` with keys of its ``--params '<JSON>'`` replaced by ``settings`` (a nested key as
    ``sgd.product_dtype``); a key the params lack stops with a message listing theirs."""
    if not settings:
        return command
    match = re.search(r"--params ('(?:[^']*)')", command)
    if match is None:
        raise SystemExit("one_job: the job's command has no --params '<JSON>' to --set")
    try:
        params = json.loads(shlex.split(match.group(1))[0])
    except (ValueError, IndexError) as err:
        raise SystemExit(f"one_job: the job's --params is not one quoted JSON object ({err}); write the script "
                         "without --set and edit its --params by hand")
    for key, value in settings.items():
        *parents, last = key.split(".")
        node = params
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node:
            raise SystemExit(f"one_job: --set {key}: not a parameter of this step; its parameters are "
                             f"{', '.join(sorted(params))} (a nested one as sgd.product_dtype)")
        node[last] = value
    return command[:match.start(1)] + shlex.quote(json.dumps(params)) + command[match.end(1):]


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished run's checkout (its results/ are the job's inputs)")
    ap.add_argument("target", help="one output of the job, relative to RUN")
    ap.add_argument("out", type=Path, help="a new folder: the job's outputs and log, and job.sh")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="replace a key of the step's --params, nested as a.b (repeatable)")
    ap.add_argument("--snakemake", default="snakemake", help="the Snakemake to ask (default: on PATH)")
    args = ap.parse_args(argv)
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"one_job: --set {item!r}: write KEY=JSON, e.g. inner_dtype='\"float32\"'")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError as err:
            raise SystemExit(f"one_job: --set {key}: {value!r} is not JSON ({err}); a string needs its quotes")
    run = args.run.resolve()
    out = args.out.resolve()
    if not run.is_dir():
        raise SystemExit(f"one_job: RUN {run} is not a folder; give a finished run's checkout")
    if out == run or (out.exists() and any(out.iterdir())):
        raise SystemExit(f"one_job: OUT {out} is the run itself or a folder that is not empty; give a new folder")
    try:
        dry = subprocess.run([args.snakemake, "-n", "-p", "-f", args.target, "--cores", "1", *extra], cwd=run,
                             capture_output=True, text=True)
    except OSError as err:
        raise SystemExit(f"one_job: cannot start {args.snakemake!r} ({err}); put Snakemake on PATH or pass "
                         "--snakemake")
    jobs = [j for j in parse_run_log(dry.stdout + dry.stderr).jobs if j.command]
    if dry.returncode != 0 or not jobs:
        tail = "\n".join((dry.stdout + dry.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"one_job: Snakemake planned no job with a shell command for {args.target} in {run} "
                         f"(exit {dry.returncode}); is it an output of the run's config "
                         f"(pass its --configfile after --)?\n{tail}")
    if len(jobs) > 1:
        raise SystemExit(f"one_job: Snakemake plans {len(jobs)} jobs for {args.target} in {run}, not one: "
                         "the run is not finished there (an input of the job is missing or out of date); "
                         "finish the run, or give the target of the first missing input")
    job = jobs[0]
    if not job.outputs:
        raise SystemExit(f"one_job: Snakemake printed no output files for the job of {args.target}, so its "
                         "outputs cannot be moved off the run's; does the rule have a message: line?")
    files = job.outputs + job.logs
    command = with_params(moved(job.command, files, out), settings)
    if command.startswith("polyinterp "):  # the rule's shell prefix: the run's src, Snakemake's Python
        command = '"${JOB_PYTHON:-%s}" -m %s' % (sys.executable, command)
    for path in files:
        (out / path).parent.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    script = out / "job.sh"
    tmp = script.with_suffix(".tmp")
    src = shlex.quote(str(run / "src"))
    tmp.write_text(f"#!/bin/bash\n# {job.rule}: the job of {run} that writes {args.target}, its outputs "
                   f"under {out}\ncd {shlex.quote(str(run))}\n"
                   f'export PYTHONPATH="${{JOB_SRC:-{src}}}"${{PYTHONPATH:+:$PYTHONPATH}}\n'
                   f"exec {command}\n")
    tmp.chmod(0o755)
    tmp.replace(script)
    print(script)


if __name__ == "__main__":
    main()

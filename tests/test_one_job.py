"""bench/one_job.py: one job of a finished run written out as a script. With a stand-in `snakemake` that
prints a dry run's job (as Snakemake 9 prints it) and a stand-in package in the run's src/ (its
`python -m polyinterp` records what it was given), the script runs the job's command from the run's folder
with the run's code (or JOB_SRC's), the outputs and log (quoted or not) moved under OUT and the --set keys
replaced, and leaves the run's own files alone. Bad input stops with a message and writes nothing: no
planned job, several (an unfinished run), no RUN, a used OUT, a --set key the step lacks or without `=`,
a value that is not JSON, a command without readable --params."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "bench" / "one_job.py"

DRY_RUN = """Building DAG of jobs...
[Sun Dec  6 21:45:16 2026]
rule mnist_approximants:
    input: results/in.pt
    output: results/mnist/approx/step2048.pt, results/mnist/approx/extra.txt
    log: results/logs/approx_step2048.log
    jobid: 0
    reason: Forced execution
Shell command: polyinterp mnist_approximants --params '{"device": "auto", "inner_dtype": "auto", \
"sgd": {"lr": 0.1, "product_dtype": "auto"}, "tol": 1e-06}' \
--in results/in.pt --approx results/mnist/approx/step2048.pt --extra results/mnist/approx/extra.txt --threads 1 \
> results/logs/approx_step2048.log 2>&1
This was a dry-run (flag -n).
"""


STEP = ("import json, os, sys\n"
        "a = sys.argv[1:]\n"
        "json.dump({'cwd': os.getcwd(), 'argv': a, 'code': os.path.dirname(__file__)}, sys.stdout)\n"
        "for k in ('--approx', '--extra'):\n"
        "    open(a[a.index(k) + 1], 'w').write('made')\n")


def _stand_ins(tmp_path: Path, dry_run: str) -> dict:
    """A stand-in `snakemake` on PATH that prints ``dry_run``, and a run folder whose src/ holds a stand-in
    package: its ``python -m polyinterp`` records its folder, arguments and code, and writes the outputs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "dry.txt").write_text(dry_run)
    snakemake = bin_dir / "snakemake"
    snakemake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path}/args.txt\ncat {tmp_path}/dry.txt\n')
    snakemake.chmod(0o755)
    for src in ("run/src", "other/src"):
        package = tmp_path / src / "polyinterp"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "__main__.py").write_text(STEP)
    (tmp_path / "run" / "results").mkdir()
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _run(args, env):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_job_runs_from_the_run_with_its_outputs_moved_and_params_set(tmp_path):
    # the log path quoted, as {log:q} writes a path that needs it
    log_rel = "results/logs/approx_step2048.log"
    env = _stand_ins(tmp_path, DRY_RUN.replace(f"> {log_rel}", f"> '{log_rel}'"))
    run, out = tmp_path / "run", tmp_path / "out"
    done = _run([run, "results/mnist/approx/step2048.pt", out, "--set", 'inner_dtype="float32"',
                 "--set", 'sgd.product_dtype="float32"', "--", "--configfile", "paper.yaml"], env)
    assert done.returncode == 0, done.stderr
    script = Path(done.stdout.strip())
    assert script == out.resolve() / "job.sh"
    asked = (tmp_path / "args.txt").read_text().split()
    assert asked == ["-n", "-p", "-f", "results/mnist/approx/step2048.pt", "--cores", "1",
                     "--configfile", "paper.yaml"]

    ran = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    log = out / "results/logs/approx_step2048.log"
    record = json.loads(log.read_text())  # the step's stdout went to the moved log
    assert record["cwd"] == str(run.resolve())
    assert record["code"] == str(run.resolve() / "src" / "polyinterp")  # the run's code, as the rule's prefix
    argv = record["argv"]
    assert argv[0] == "mnist_approximants"
    params = json.loads(argv[argv.index("--params") + 1])
    assert params == {"device": "auto", "inner_dtype": "float32", "sgd": {"lr": 0.1, "product_dtype": "float32"},
                      "tol": 1e-06}
    assert argv[argv.index("--in") + 1] == "results/in.pt"  # inputs are read from the run
    for key, rel in (("--approx", "results/mnist/approx/step2048.pt"), ("--extra", "results/mnist/approx/extra.txt")):
        assert argv[argv.index(key) + 1] == str(out.resolve() / rel)
        assert (out / rel).read_text() == "made"
    assert not (run / "results/mnist").exists() and not (run / "results/logs").exists()

    other = subprocess.run([str(script)], env={**env, "JOB_SRC": str(tmp_path / "other/src")}, capture_output=True,
                           text=True, timeout=60)
    assert other.returncode == 0, other.stderr
    assert json.loads(log.read_text())["code"] == str(tmp_path / "other/src/polyinterp")


def test_bad_input_stops_with_a_message_and_writes_nothing(tmp_path):
    env = _stand_ins(tmp_path, "Building DAG of jobs...\nNothing to be done.\n")
    run, target = tmp_path / "run", "results/mnist/approx/step2048.pt"

    def refused(out, *args, text):
        done = _run([run, target, tmp_path / out, *args], env)
        assert done.returncode != 0 and text in done.stderr, done.stderr
        assert not (tmp_path / out / "job.sh").exists()

    refused("o0", text="planned no job with a shell command for results/mnist/approx/step2048.pt")
    job = DRY_RUN[DRY_RUN.index("[Sun"):DRY_RUN.index("This was")]
    (tmp_path / "dry.txt").write_text(DRY_RUN.replace("This was", job + "This was"))  # the same job planned twice
    refused("o1", text="plans 2 jobs")
    (tmp_path / "dry.txt").write_text(DRY_RUN.replace("    output: ", "    outputs moved away: "))
    refused("o2", text="no output files")
    (tmp_path / "dry.txt").write_text(DRY_RUN)
    refused("o3", "--set", "max_iters=3", text="--set max_iters: not a parameter of this step")
    refused("o4", "--set", "sgd.steps=3", text="--set sgd.steps: not a parameter of this step")
    refused("o5", "--set", "tol=abc", text="is not JSON")
    refused("o6", "--set", "tol", text="write KEY=JSON")
    (tmp_path / "o7").mkdir()
    (tmp_path / "o7" / "old.txt").write_text("x")
    refused("o7", text="not empty")
    assert _run([tmp_path / "nowhere", target, tmp_path / "o8"], env).stderr.count("is not a folder") == 1
    (tmp_path / "dry.txt").write_text(DRY_RUN.replace("--params '{", "--params '{'\"'\"'"))
    refused("o9", "--set", "tol=1", text="not one quoted JSON object")
    (tmp_path / "dry.txt").write_text(DRY_RUN.replace("--params ", "--options "))
    refused("o10", "--set", "tol=1", text="has no --params")

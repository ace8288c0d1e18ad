"""bench/one_job.py: one job of a finished run written out as a script. With a stand-in `snakemake` that
prints a dry run's job (as Snakemake 9 prints it) and a stand-in step, the script it writes runs the job's
command from the run's folder with the outputs and log moved under OUT and the --set keys replaced, and
leaves the run's own files alone; no planned job, several (an unfinished run), or a --set key the step lacks,
stops with a message."""

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
    benchmark: results/benchmarks/approx_step2048.tsv
    reason: Forced execution
Shell command: polyinterp mnist_approximants --params '{"device": "auto", "inner_dtype": "auto", \
"sgd": {"lr": 0.1, "product_dtype": "auto"}, "tol": 1e-06}' \
--in results/in.pt --approx results/mnist/approx/step2048.pt --extra results/mnist/approx/extra.txt --threads 1 \
> results/logs/approx_step2048.log 2>&1
This was a dry-run (flag -n).
"""


def _stand_ins(tmp_path: Path, dry_run: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "dry.txt").write_text(dry_run)
    snakemake = bin_dir / "snakemake"
    snakemake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path}/args.txt\ncat {tmp_path}/dry.txt\n')
    # the step: records its folder and arguments, writes each --approx / --extra path it is given
    step = bin_dir / "polyinterp"
    step.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "a = sys.argv[1:]\n"
                    "json.dump({'cwd': os.getcwd(), 'argv': a}, sys.stdout)\n"
                    "for k in ('--approx', '--extra'):\n"
                    "    open(a[a.index(k) + 1], 'w').write('made')\n")
    for exe in (snakemake, step):
        exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _run(args, env):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_job_runs_from_the_run_with_its_outputs_moved_and_params_set(tmp_path):
    dry = DRY_RUN  # the backslash-newlines above are joined by Python: Snakemake prints the command on one line
    env = _stand_ins(tmp_path, dry)
    run, out = tmp_path / "run", tmp_path / "out"
    (run / "results").mkdir(parents=True)
    done = _run([run, "results/mnist/approx/step2048.pt", out, "--set", 'inner_dtype="float32"',
                 "--set", 'sgd.product_dtype="float32"',
                 "--", "--configfile", "paper.yaml"], env)
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
    argv = record["argv"]
    params = json.loads(argv[argv.index("--params") + 1])
    assert params == {"device": "auto", "inner_dtype": "float32", "sgd": {"lr": 0.1, "product_dtype": "float32"},
                      "tol": 1e-06}
    assert argv[argv.index("--in") + 1] == "results/in.pt"  # inputs are read from the run
    for key, rel in (("--approx", "results/mnist/approx/step2048.pt"), ("--extra", "results/mnist/approx/extra.txt")):
        assert argv[argv.index(key) + 1] == str(out.resolve() / rel)
        assert (out / rel).read_text() == "made"
    assert not (run / "results/mnist").exists() and not (run / "results/logs").exists()


def test_no_job_or_an_unknown_key_stops_with_a_message(tmp_path):
    env = _stand_ins(tmp_path, "Building DAG of jobs...\nNothing to be done.\n")
    (tmp_path / "run").mkdir()
    done = _run([tmp_path / "run", "results/nope.pt", tmp_path / "out"], env)
    assert done.returncode != 0 and "planned no job with a shell command for results/nope.pt" in done.stderr
    assert not (tmp_path / "out" / "job.sh").exists()

    job = DRY_RUN[DRY_RUN.index("[Sun"):DRY_RUN.index("This was")]
    (tmp_path / "dry.txt").write_text(DRY_RUN.replace("This was", job + "This was"))  # the same job planned twice
    done = _run([tmp_path / "run", "results/mnist/approx/step2048.pt", tmp_path / "out1"], env)
    assert done.returncode != 0 and "plans 2 jobs" in done.stderr and "not finished" in done.stderr

    (tmp_path / "dry.txt").write_text(DRY_RUN)
    done = _run([tmp_path / "run", "results/mnist/approx/step2048.pt", tmp_path / "out2", "--set", "max_iters=3"], env)
    assert done.returncode != 0 and "--set max_iters: not a parameter of this step" in done.stderr
    done = _run([tmp_path / "run", "results/mnist/approx/step2048.pt", tmp_path / "out2", "--set", "sgd.steps=3"], env)
    assert done.returncode != 0 and "--set sgd.steps: not a parameter of this step" in done.stderr
    assert "inner_dtype" in done.stderr  # the message lists the step's parameters
    done = _run([tmp_path / "run", "results/mnist/approx/step2048.pt", tmp_path / "out3", "--set", "tol=abc"], env)
    assert done.returncode != 0 and "is not JSON" in done.stderr

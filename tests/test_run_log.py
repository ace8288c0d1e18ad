"""polyinterp.run_log.parse_run_log on a dry run printed with -p (as Snakemake 9 prints it, written here by
hand; the backslash-newline is Python's, the command is one line): each job's rule, outputs, logs,
benchmark and shell command, and the plan's job count."""

from __future__ import annotations

from polyinterp.run_log import parse_run_log

DRY_RUN = """Building DAG of jobs...
Job stats:
job                   count
------------------  -------
mnist_approximants        1
mnist_metrics             1
total                     2

[Sun Dec  6 21:45:16 2026]
rule mnist_approximants:
    input: results/in.pt
    output: results/approx/step16.pt, results/approx/extra.txt
    log: results/logs/approx_step16.log
    jobid: 0
    benchmark: results/benchmarks/approx_step16.tsv
    reason: Forced execution
Shell command: polyinterp mnist_approximants --params '{"tol": 1e-06}' --approx results/approx/step16.pt \
--threads 1 > results/logs/approx_step16.log 2>&1

[Sun Dec  6 21:45:16 2026]
rule mnist_metrics:
    output: results/metrics/step16.parquet
    jobid: 1
This was a dry-run (flag -n).
"""


def test_a_dry_run_gives_each_job_its_files_and_command():
    log = parse_run_log(DRY_RUN)
    assert log.planned == {"mnist_approximants": 1, "mnist_metrics": 1}
    first, second = log.jobs
    assert (first.rule, first.jobid) == ("mnist_approximants", 0)
    assert first.outputs == ["results/approx/step16.pt", "results/approx/extra.txt"]
    assert first.logs == ["results/logs/approx_step16.log"]
    assert first.benchmark == "results/benchmarks/approx_step16.tsv"
    assert first.command == ("polyinterp mnist_approximants --params '{\"tol\": 1e-06}' --approx "
                             "results/approx/step16.pt --threads 1 > results/logs/approx_step16.log 2>&1")
    # a job printed without -p, or without a log: no command, no logs
    assert (second.rule, second.outputs, second.logs, second.command) == (
        "mnist_metrics", ["results/metrics/step16.parquet"], [], None)

"""polyinterp.run_log.parse_run_log on a dry run printed with -p (as Snakemake 9 prints it, written here by
hand; the backslash-newline is Python's, the command is one line): each job's rule, outputs, logs and
shell command, and the plan's job count; and a step's own record, the last line of its job log, read back
by logged_job_seconds."""

from __future__ import annotations

from polyinterp.run_log import job_line, logged_job_seconds, parse_run_log

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
    reason: Forced execution
Shell command: polyinterp mnist_approximants --params '{"tol": 1e-06}' --approx results/approx/step16.pt \
--threads 1 > results/logs/approx_step16.log 2>&1

[Sun Dec  6 21:45:16 2026]
rule mnist_metrics:
    output: results/metrics/step16.parquet
    jobid: 1

[Sun Dec  6 21:45:16 2026]
localrule all:
    input: results/metrics/step16.parquet
    jobid: 2
Shell command: None
This was a dry-run (flag -n).
"""


def test_a_dry_run_gives_each_job_its_files_and_command():
    log = parse_run_log(DRY_RUN)
    assert log.planned == {"mnist_approximants": 1, "mnist_metrics": 1}
    first, second, target = log.jobs
    assert (target.rule, target.command) == ("all", None)  # Snakemake prints "None" for a rule without one
    assert (first.rule, first.jobid) == ("mnist_approximants", 0)
    assert first.outputs == ["results/approx/step16.pt", "results/approx/extra.txt"]
    assert first.logs == ["results/logs/approx_step16.log"]
    assert first.command == ("polyinterp mnist_approximants --params '{\"tol\": 1e-06}' --approx "
                             "results/approx/step16.pt --threads 1 > results/logs/approx_step16.log 2>&1")
    # a job printed without -p, or without a log: no command, no logs
    assert (second.rule, second.outputs, second.logs, second.command) == (
        "mnist_metrics", ["results/metrics/step16.parquet"], [], None)


def test_a_job_log_gives_its_last_record(tmp_path):
    """The record as written by hand (the format is the contract with published logs), the last of two
    wins, a log without one (a failed step), a missing log and the CPU-only line of a run made before the
    record give None."""
    log = tmp_path / "job.log"
    log.write_text("2026-12-07 01:00:00 polyinterp.cli INFO polyinterp a: CPU 1.00 s (user + system, this process "
                   "and its children), wall 2.00 s, peak RSS 3 MB\n"
                   "2026-12-07 01:00:01 polyinterp.x INFO retried\n"
                   "2026-12-07 01:00:09 polyinterp.cli INFO polyinterp a: CPU 12.34 s (user + system, this process "
                   "and its children), wall 56.78 s, peak RSS 2048 MB\n")
    assert logged_job_seconds(log) == {"wall_s": 56.78, "cpu_s": 12.34, "max_rss_mb": 2048.0}
    assert job_line("a", 12.34, 56.78, 2048.0) in log.read_text()
    log.write_text("2026-12-07 01:00:00 polyinterp.x ERROR out of memory\n")
    assert logged_job_seconds(log) is None
    assert logged_job_seconds(tmp_path / "absent.log") is None
    log.write_text("2026-12-06 10:04:23 polyinterp.cli INFO polyinterp a: CPU 19.50 s (user + system, this process "
                   "and its children)\n")
    assert logged_job_seconds(log) is None

"""Two commands timed against each other as whole processes, in turn, pair by pair.

    python bench/ab_pairs.py [-n PAIRS] [--log LOG] --vs 'COMMAND_B' -- COMMAND_A [ARG ...]

Runs A, B, A, B, ... (``PAIRS`` of each, default 3), each as one child process with its output thrown
away, and prints a Markdown table: for A and B the median (min–max) of wall seconds (a monotonic clock
around the child), CPU seconds (user + system of the child and what it waited for, from ``wait4``),
peak RSS (MiB, the largest process it waited for; at least this script's own, which Linux carries
into a child it starts) and, of the CPU, the system seconds (the kernel's work
for the process: page faults, system calls), then the medians of the pair-by-pair ratios A/B of
wall, CPU and system. Pairing keeps a ratio meaningful when the machine's speed drifts during the call; quote
the medians. COMMAND_B is one string split as a shell splits words (``shlex``); neither command gets a
shell, so one that needs a pipe or a redirection is written ``sh -c '...'``, and environment variables
go in front as ``env NAME=VALUE ...``. Exits 1 naming the command, and its status or why it could not
start, if a run fails; a COMMAND_B that does not split into words (empty, an open quote) is refused first.

``--log LOG``: both commands are one pipeline step that writes its record line to LOG (a job script of
``bench/one_job.py``: ``polyinterp.run_log.job_line``, read back by ``logged_job_seconds``). LOG is removed
before each run, and two more columns give what each run spent after the step's record line:
wait4's CPU minus the record's CPU (the record counts from the process's start, so this is the process's
exit after the line, plus whatever wrapper the command runs in, such as the job script's shell), and the
wall around the child minus the record's wall (the same, plus the interpreter's start before the record's
clock, about 0.1 s). A run that leaves no record in LOG stops the call, naming LOG.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], log: Path | None = None, read_record=None) -> dict:
    """Run ``argv`` once as a child; its wall s, CPU s (user + system), peak RSS MiB and system s; with
    ``log``, also the CPU s and wall s after the record line the child writes there (``after_cpu``,
    ``after_wall``), read by ``read_record`` (``polyinterp.run_log.logged_job_seconds``)."""
    if log is not None:
        log.unlink(missing_ok=True)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as err:
        raise SystemExit(f"ab_pairs: cannot start {shlex.join(argv)} ({err})")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"ab_pairs: {shlex.join(argv)} exited with status {proc.returncode}")
    out = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak": usage.ru_maxrss / 1024, "system": usage.ru_stime}
    if log is not None:
        record = read_record(log)
        if record is None:
            raise SystemExit(f"ab_pairs: {shlex.join(argv)} left no record line in --log {log.resolve()}; give "
                             "the log its step writes (the '> LOG' of a bench/one_job.py script)")
        out["after_cpu"], out["after_wall"] = out["cpu"] - record["cpu_s"], wall - record["wall_s"]
    return out


def spread(values: list[float], digits: int) -> str:
    """``median (min–max)`` of ``values`` at ``digits`` decimals; the one value where there is one; ``–``
    where no value is a number (a ratio whose B was 0 s)."""
    values = [v for v in values if v == v]  # NaN, a ratio over 0 s, left out
    if not values:
        return "–"
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"
            if len(values) > 1 else f"{values[0]:.{digits}f}")


def main(argv=None) -> None:
    """Parse the arguments, run the pairs, print the table (the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="bench/ab_pairs.py [-n PAIRS] [--log LOG] --vs 'COMMAND_B' -- COMMAND_A [ARG ...]")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        if {"-h", "--help"} & set(argv):
            ap.parse_args(["-h"])
        raise SystemExit("usage: bench/ab_pairs.py [-n PAIRS] [--log LOG] --vs 'COMMAND_B' -- COMMAND_A [ARG ...]")
    cut = argv.index("--")
    ap.add_argument("-n", type=int, default=3, help="pairs (default 3)")
    ap.add_argument("--vs", required=True, help="command B, one string split as a shell splits words")
    ap.add_argument("--log", type=Path, help="the log both commands write their step's record line to: adds the "
                                             "CPU and wall after that line")
    args = ap.parse_args(argv[:cut])
    if args.n < 1:
        raise SystemExit(f"ab_pairs: -n {args.n}: give at least one pair")
    try:
        command_b = shlex.split(args.vs)
    except ValueError as err:
        raise SystemExit(f"ab_pairs: --vs {args.vs!r} does not split into words ({err})")
    if not command_b:
        raise SystemExit("ab_pairs: --vs is empty; give command B")
    read_record = None
    if args.log is not None:
        try:
            from polyinterp.run_log import logged_job_seconds as read_record
        except ImportError as err:
            raise SystemExit(f"ab_pairs: --log needs the polyinterp package ({err}); run this script with the "
                             "project's Python (.venv/bin/python)")
    commands = {"A": argv[cut + 1:], "B": command_b}
    runs = {"A": [], "B": []}
    for _ in range(args.n):
        for name in ("A", "B"):
            runs[name].append(timed(commands[name], args.log, read_record))
    # (key, heading, decimals, ratio printed?)
    columns = [("wall", "wall s", 2, True), ("cpu", "CPU s", 2, True), ("peak", "peak MiB", 0, False),
               ("system", "system s", 2, True)]
    if args.log is not None:
        columns += [("after_cpu", "after the record: CPU s", 2, False),
                    ("after_wall", "after the record: wall s", 2, False)]
    print("| |" + "".join(f" {heading} |" for _, heading, _, _ in columns))
    print("| --- |" + " --- |" * len(columns))
    for name in ("A", "B"):
        r = runs[name]
        shown = shlex.join(commands[name]).replace("|", "\\|")  # a pipe would end the table cell
        print(f"| {name}: `{shown}` |" + "".join(f" {spread([x[k] for x in r], d)} |" for k, _, d, _ in columns))
    pairs = list(zip(runs["A"], runs["B"]))
    ratio = {k: [a[k] / b[k] if b[k] else float("nan") for a, b in pairs] for k, _, _, shown in columns if shown}
    print("| A/B, pair by pair |" + "".join(f" {spread(ratio[k], 3)} |" if k in ratio else " |"
                                            for k, _, _, _ in columns))
    print(f"\n{args.n} pair(s), A then B in each; median (min–max).")


if __name__ == "__main__":
    main()

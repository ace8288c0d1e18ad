"""bench/ab_pairs.py: two commands timed in turn as whole processes. Its stand-in commands append their name
to a file, so the order A B A B is seen; the table has a row per command and the pair ratios; a command that
burns CPU against one that does not has a CPU ratio above 1 (CPU seconds, not wall, so a busy machine does
not change it); a failing command stops the call with its status, one that cannot start with why; no command,
an empty or unsplittable B, or no pair is refused with a message; a command that faults in fresh pages
has system seconds that one that only starts Python has not; with --log, a step that burns CPU after its
record line shows it in the columns after the record, and one that leaves no record stops the call."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "bench" / "ab_pairs.py"


def _number(cell: str) -> float:
    """The median a table cell starts with (``1.23 (1.20–1.30)`` → 1.23)."""
    return float(re.match(r"\s*([\d.]+)", cell).group(1))


def _cells(stdout: str) -> dict:
    """The table's rows by their first two characters (``A:``, ``B:``, ``A/``), split into cells."""
    return {line.split("|")[1].strip()[:2]: line.split("|") for line in stdout.splitlines() if line.startswith("| ")}


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_the_commands_run_in_turn_and_the_ratio_is_pair_by_pair(tmp_path):
    log = tmp_path / "order.txt"
    a = [sys.executable, "-c", f"open({str(log)!r}, 'a').write('A'); sum(i * i for i in range(3_000_000))"]
    b = f"{sys.executable} -c \"open({str(log)!r}, 'a').write('B')\""
    done = _run("-n", 2, "--vs", b, "--", *a)
    assert done.returncode == 0, done.stderr
    assert log.read_text() == "ABAB"
    rows = _cells(done.stdout)
    assert set(rows) >= {"A:", "B:", "A/"}
    assert _number(rows["A/"][3]) > 1  # the CPU ratio
    assert "2 pair(s)" in done.stdout


def test_the_system_seconds_are_the_kernels_work(tmp_path):
    """A command that writes 3 GiB of fresh pages (a page fault per 4 KiB page, the kernel zeroing each)
    spends far more system time than one that only starts Python; both are part of the CPU column."""
    a = [sys.executable, "-c", "n = 1 << 28; any(len(b'\\1' * n) == 0 for _ in range(12))"]
    done = _run("-n", 1, "--vs", f"{sys.executable} -c pass", "--", *a)
    assert done.returncode == 0, done.stderr
    rows = _cells(done.stdout)
    system = {k: _number(rows[k][5]) for k in ("A:", "B:")}
    assert system["A:"] > 0.05 and system["A:"] > 5 * system["B:"]
    ratio = rows["A/"][5].strip()  # "–" only where B's system time was exactly 0
    assert ratio == "–" or _number(ratio) > 5


def test_a_failing_command_or_no_command_stops(tmp_path):
    done = _run("-n", 1, "--vs", "true", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert done.returncode == 1 and "exited with status 3" in done.stderr
    assert "usage: bench/ab_pairs.py" in _run("--vs", "true").stderr
    assert "give at least one pair" in _run("-n", 0, "--vs", "true", "--", "true").stderr
    assert "cannot start" in _run("-n", 1, "--vs", "true", "--", str(tmp_path / "no_such_command")).stderr
    assert "--vs is empty" in _run("--vs", "", "--", "true").stderr
    assert "does not split into words" in _run("--vs", "echo 'open", "--", "true").stderr


def _step(log, burn_after: int) -> str:
    """A stand-in step: writes its record line (its own CPU and wall so far) to ``log``, then burns
    ``burn_after`` loop iterations of CPU."""
    return (f"import time; from polyinterp.run_log import job_line, process_cpu_seconds; t = time.monotonic(); "
            f"open({str(log)!r}, 'w').write(job_line('probe', process_cpu_seconds(), time.monotonic() - t, 10)"
            f" + '\\n'); sum(i * i for i in range({burn_after}))")


def test_the_log_gives_what_each_process_spends_after_its_record_line(tmp_path):
    """A burns CPU after its record line, B nothing: A's CPU after the record exceeds B's by at least half of
    the two commands' difference in CPU (CPU seconds, so a busy machine does not change it); the log is read
    fresh for each run."""
    log = tmp_path / "step.log"
    done = _run("-n", 2, "--log", log, "--vs", f"{sys.executable} -c \"{_step(log, 0)}\"", "--",
                sys.executable, "-c", _step(log, 8_000_000))
    assert done.returncode == 0, done.stderr
    rows = _cells(done.stdout)
    assert "after the record: CPU s" in done.stdout
    after = {k: _number(rows[k][6]) for k in ("A:", "B:")}
    cpu = {k: _number(rows[k][3]) for k in ("A:", "B:")}
    assert after["A:"] > after["B:"] + 0.5 * (cpu["A:"] - cpu["B:"]) > after["B:"], done.stdout
    # the log is removed before each run: a record already in it does not count for a command that writes none
    missing = _run("-n", 1, "--log", log, "--vs", "true", "--", "true")
    assert missing.returncode == 1 and "left no record line in --log" in missing.stderr

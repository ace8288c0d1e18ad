"""polyinterp.rules.one_reevaluation_timer: one pending re-evaluation timer per delay, in place of Snakemake's timer
per pass. On a stand-in scheduler (a semaphore): however often a pass asks, one release per delay, and a
new one once it fired. On Snakemake itself: its scheduler takes the method, and a workflow whose jobs wait
for the one core keeps as few threads as a workflow of one job (each pending timer is a thread: without
the change, every finished job added one)."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

from polyinterp.rules import _one_pending_reevaluation, one_reevaluation_timer

_SPEC = importlib.util.spec_from_file_location("scheduler_passes",
                                               Path(__file__).parents[1] / "bench" / "scheduler_passes.py")
passes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(passes)


class _Scheduler:
    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def test_one_pending_timer_per_delay_and_a_new_one_after_it_fired():
    sched = _Scheduler()
    for _ in range(5):
        _one_pending_reevaluation(sched, 0.05)
    _one_pending_reevaluation(sched, 0.1)  # another delay: its own timer
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    assert timers and all(t.daemon for t in timers)  # the process never waits for one at its end
    assert sched._open_jobs.acquire(timeout=10) and sched._open_jobs.acquire(timeout=10)
    assert not sched._open_jobs.acquire(timeout=0.5)  # five asks at 0.05 s released once
    _one_pending_reevaluation(sched, 0.05)  # fired: the next ask starts a new one
    assert sched._open_jobs.acquire(timeout=10)


def test_a_pass_started_by_the_timer_can_ask_for_the_next_one():
    """The timer leaves the pending set before it releases: the pass it starts (here at once, inside the
    release) finds none pending and starts the next timer, so re-evaluations go on while jobs wait."""
    releases = threading.Semaphore(0)

    class _Rearming:
        def __init__(self, sched):
            self.sched, self.calls = sched, 0

        def release(self):
            self.calls += 1
            if self.calls == 1:
                _one_pending_reevaluation(self.sched, 0.05)  # the pass asks again
            releases.release()

    sched = _Scheduler()
    sched._open_jobs = _Rearming(sched)
    _one_pending_reevaluation(sched, 0.05)
    assert releases.acquire(timeout=10) and releases.acquire(timeout=10)  # the second timer fired too


def test_snakemakes_scheduler_takes_it(monkeypatch):
    from snakemake.scheduling import job_scheduler

    if not hasattr(job_scheduler.JobScheduler, "_schedule_reevalutation"):
        assert not one_reevaluation_timer()
        pytest.skip("this Snakemake's scheduler has no _schedule_reevalutation: left as it is")
    monkeypatch.setattr(job_scheduler.JobScheduler, "_schedule_reevalutation",
                        job_scheduler.JobScheduler._schedule_reevalutation)  # restored after the test
    assert one_reevaluation_timer() and one_reevaluation_timer()
    assert job_scheduler.JobScheduler._schedule_reevalutation is _one_pending_reevaluation


def _most_threads(folder: Path, jobs: int) -> int:
    """The most threads Snakemake had while running ``jobs`` jobs of `sleep 0.3` one at a time, with the
    one-timer change applied by the Snakefile (bench/scheduler_passes.py's workflow and runner)."""
    run = passes.run_once(folder, passes.IMPORT + "assert one_reevaluation_timer()\n"
                          + passes.SNAKEFILE.format(jobs=jobs, seconds=0.3), cores=1, every=0.05)
    assert (folder / "out" / f"{jobs - 1}.txt").exists()
    return run["threads"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_waiting_jobs_add_no_threads_to_snakemake(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    one = _most_threads(tmp_path / "one", 1)
    many = _most_threads(tmp_path / "many", 15)  # 14 waiting at first: 14 more chains as Snakemake has it
    assert many <= one + 2, (one, many)

"""The core governor (polyinterp.cpu_share): its reading of /proc/stat, its rule, and its decisions on
a scripted clock and load (no test here depends on this machine's real load or speed)."""

from __future__ import annotations

import os

import pytest

from polyinterp.approx.core.iteration_hooks import between_iterations
from polyinterp.cpu_share import ENV_ENABLE, CoreGovernor, governed, read_busy_seconds, threads_for

STAT = """cpu  900 0 300 5000 100 0 0 0 0 0
cpu0 400 10 100 2000 50 5 5 0 0 0
cpu1 500 0 200 3000 50 0 0 30 0 0
intr 12345
"""


def test_busy_seconds_sum_every_field_but_idle_and_iowait(tmp_path):
    path = tmp_path / "stat"
    path.write_text(STAT)
    tick = os.sysconf("SC_CLK_TCK")
    assert read_busy_seconds([0], str(path)) == pytest.approx((400 + 10 + 100 + 5 + 5) / tick)
    assert read_busy_seconds([0, 1], str(path)) == pytest.approx((520 + 730) / tick)
    assert read_busy_seconds([2], str(path)) is None  # a CPU the file does not list
    assert read_busy_seconds([0], str(tmp_path / "missing")) is None


def test_the_real_proc_stat_is_read_where_there_is_one():
    from polyinterp.cpu_share import _cpu_ids

    if not os.path.exists("/proc/stat"):
        pytest.skip("no /proc/stat here")
    cpus = _cpu_ids()
    a = read_busy_seconds(cpus)
    sum(i * i for i in range(200_000))
    assert a is not None and read_busy_seconds(cpus) >= a


@pytest.mark.parametrize("others, cores, allotted, want", [
    (0.0, 2, 2, 2), (0.4, 2, 2, 2), (0.6, 2, 2, 1), (1.0, 2, 2, 1), (1.9, 2, 2, 1),  # never below 1
    (0.0, 16, 4, 4), (13.2, 16, 4, 3), (-0.3, 2, 2, 2), (0.0, 2, 1, 1)])
def test_threads_are_the_cores_left_free(others, cores, allotted, want):
    assert threads_for(others, cores, allotted) == want


class Script:
    """A clock, the machine's busy CPU-seconds and this process's, advanced by hand."""

    def __init__(self):
        self.t, self.busy, self.own = 0.0, 0.0, 0.0

    def advance(self, seconds: float, others_cores: float, own_cores: float):
        self.t += seconds
        self.own += own_cores * seconds
        self.busy += (others_cores + own_cores) * seconds


def test_governor_follows_the_load_and_waits_min_interval_between_looks():
    s, set_to = Script(), []
    gov = CoreGovernor(2, min_interval=1.0, set_threads=set_to.append, clock=lambda: s.t,
                       busy=lambda: s.busy, own=lambda: s.own, n_cores=2)
    s.advance(2.0, others_cores=0.0, own_cores=2.0)  # alone, spinning on both cores
    assert gov.update() == 2 and set_to == []
    s.advance(2.0, others_cores=1.0, own_cores=1.0)  # another process takes a core
    assert gov.update() == 1 and set_to == [1]
    s.advance(0.5, others_cores=0.0, own_cores=1.0)  # too soon to look again
    assert gov.update() == 1 and set_to == [1]
    s.advance(1.5, others_cores=0.0, own_cores=1.0)  # it has gone: one look with a core to spare ...
    assert gov.update() == 1 and set_to == [1]
    s.advance(1.0, others_cores=0.0, own_cores=1.0)  # ... and a second in a row: one thread more
    assert gov.update() == 2 and set_to == [1, 2]
    assert [h[2] for h in gov.history] == [2, 1, 1, 2] and gov.history[1][1] == pytest.approx(1.0)


def test_governor_holds_the_allotted_threads_while_told_to():
    s, set_to = Script(), []
    gov = CoreGovernor(2, min_interval=0.0, set_threads=set_to.append, clock=lambda: s.t,
                       busy=lambda: s.busy, own=lambda: s.own, n_cores=2)
    s.advance(1.0, others_cores=1.0, own_cores=1.0)
    assert gov.update() == 1
    with gov.holding():
        assert gov.threads == 2 and set_to == [1, 2]
        s.advance(1.0, others_cores=1.0, own_cores=1.0)
        assert gov.update() == 2  # busy core or not
    s.advance(1.0, others_cores=1.0, own_cores=1.0)
    assert gov.update() == 1 and set_to == [1, 2, 1]


def test_hooks_run_only_on_the_thread_that_installed_them():
    import threading

    from polyinterp.approx.core.iteration_hooks import installed

    seen = []
    with installed(lambda: seen.append(threading.get_ident())):
        worker = threading.Thread(target=between_iterations)
        worker.start()
        worker.join()
        between_iterations()
    assert seen == [threading.get_ident()]


def test_governor_without_a_load_source_changes_nothing():
    set_to = []
    gov = CoreGovernor(2, set_threads=set_to.append, busy=lambda: None, n_cores=2)
    assert gov.update(force=True) == 2 and set_to == [] and gov.history == []


def test_governed_installs_the_update_between_iterations(monkeypatch):
    from polyinterp.cpu_share import _cpu_ids, allotted_threads

    monkeypatch.setenv(ENV_ENABLE, "1")
    if read_busy_seconds(_cpu_ids()) is None:
        pytest.skip("no /proc/stat here")
    import torch

    before = torch.get_num_threads()
    try:
        with governed(2, sample_seconds=0.01) as gov:
            assert gov is not None and len(gov.history) == 1 and 1 <= gov.threads <= 2
            gov.min_interval = 0.0
            between_iterations()
            assert len(gov.history) == 2
            with allotted_threads():
                assert gov.held and torch.get_num_threads() == 2
            assert not gov.held
        between_iterations()  # uninstalled on exit
        assert len(gov.history) == 2
    finally:
        torch.set_num_threads(before)


def test_governed_leaves_one_thread_alone_and_is_off_unless_enabled(monkeypatch):
    monkeypatch.setenv(ENV_ENABLE, "1")
    with governed(1) as gov:
        assert gov is None
    for value in (None, "0", "yes"):
        if value is None:
            monkeypatch.delenv(ENV_ENABLE, raising=False)
        else:
            monkeypatch.setenv(ENV_ENABLE, value)
        with governed(2) as gov:
            assert gov is None, value


def test_only_existing_solver_steps_are_load_adaptive():
    from polyinterp.cli import step_table
    from polyinterp.cpu_share import LOAD_ADAPTIVE_STEPS

    assert LOAD_ADAPTIVE_STEPS <= set(step_table())
    assert not any("train" in s or "sae" in s for s in LOAD_ADAPTIVE_STEPS)  # non-convex fits keep their threads

"""Use only the cores other processes leave free.

torch's CPU kernels run in OpenMP teams that meet at a barrier after every parallel region; when
another process takes one of the team's cores, the whole team waits for the preempted thread, and
a 2-thread job on a 2-core machine with one other busy process runs 5-10x slower than alone
(measured: bench/README.md). :class:`CoreGovernor` measures, from ``/proc/stat``, how many cores
of this process's affinity set *other* processes kept busy since its last look (this process's own
CPU time, spinning OpenMP threads included, is subtracted), and sets torch's intra-op thread count
to the cores left, between 1 and the job's allotted threads. It looks when a step starts (after a
short sample) and again between solver iterations (:mod:`polyinterp.approx.core.iteration_hooks`),
no more often than every ``min_interval`` seconds.

Where ``/proc/stat`` cannot be read (not Linux) the governor leaves the thread count alone.

The governor is opt-in (``POLYINTERP_ADAPTIVE_THREADS=1``): by default every step keeps the thread
count its rule allots, so the same config on the same machine gives the same bytes whatever else
runs. When enabled, only the steps of :data:`LOAD_ADAPTIVE_STEPS` are governed: iterative solves whose
result is the same to their tolerance whatever the thread count (another count rounds parallel
reductions differently, so the tables then agree with a quiet run's to the solver's tolerance, not bit
for bit). Training steps keep their thread count: a non-convex fit (the SAE) can land elsewhere.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger(__name__)

# Opt-in: set to 1 to let the solver steps follow the machine's load. Off by default, so that a run's
# tables do not depend on what else runs (measured: the governor saved nothing on a solve, cold 194.7 s
# governed against 192.4 s fixed under one busy process, and sped up only the solver plan; bench/README.md).
ENV_ENABLE = "POLYINTERP_ADAPTIVE_THREADS"
LOAD_ADAPTIVE_STEPS = frozenset({"mnist_approximants", "mnist_solver_plan"})


def _cpu_ids() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def read_busy_seconds(cpus: list[int], path: str = "/proc/stat") -> float | None:
    """Busy CPU-seconds (every field but idle and iowait) summed over ``cpus`` since boot, or None
    when ``path`` cannot be read or lacks one of them."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    want, total = {f"cpu{c}" for c in cpus}, 0.0
    for line in lines:
        parts = line.split()
        if parts and parts[0] in want:
            vals = [int(v) for v in parts[1:]]
            # user nice system idle iowait irq softirq steal (guest counted in user already)
            busy = sum(vals[:8]) - vals[3] - (vals[4] if len(vals) > 4 else 0)
            total += busy / tick
            want.discard(parts[0])
    return None if want else total


def own_cpu_seconds() -> float:
    """CPU time of this process, every thread (user + system)."""
    t = os.times()
    return t.user + t.system


def threads_for(others_busy: float, n_cores: int, max_threads: int, busy_share: float = 0.5) -> int:
    """Threads to use when other processes kept ``others_busy`` cores busy on average: one per core
    they left free (a core counts as taken from ``busy_share`` of it on), between 1 and ``max_threads``."""
    taken = int(max(0.0, others_busy) + (1.0 - busy_share))
    return max(1, min(int(max_threads), int(n_cores) - taken))


class CoreGovernor:
    """Keeps torch's intra-op threads at the cores other processes leave free (module docstring).

    ``max_threads``: the job's allotment (Snakemake's ``threads``); ``set_threads``: the setter
    (torch.set_num_threads by default); ``clock``/``busy``/``own``: sources, replaceable in tests.
    ``history``: (seconds since start, others' busy cores, threads set) at every decision."""

    def __init__(self, max_threads: int, *, min_interval: float = 1.0, set_threads: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, busy: Callable[[], float | None] | None = None,
                 own: Callable[[], float] = own_cpu_seconds, n_cores: int | None = None):
        cpus = _cpu_ids()
        self.n_cores = int(n_cores or len(cpus))
        self.max_threads = max(1, int(max_threads))
        self.min_interval = float(min_interval)
        if set_threads is None:
            import torch

            set_threads = torch.set_num_threads
        self._set, self._clock, self._own = set_threads, clock, own
        self._busy = busy or (lambda: read_busy_seconds(cpus))
        self.threads = self.max_threads
        self.held = False
        self._spare = 0
        self.history: list[tuple[float, float, int]] = []
        self._t0 = clock()
        self._mark = self._sample()

    def _sample(self):
        b = self._busy()
        return None if b is None else (self._clock(), b, self._own())

    def update(self, force: bool = False) -> int:
        """Look at the load since the last look (if ``min_interval`` has passed or ``force``) and set
        the thread count; returns the count in use."""
        if self._mark is None:
            return self.threads
        now = self._clock()
        if not force and now - self._mark[0] < self.min_interval:
            return self.threads
        new = self._sample()
        if new is None:
            return self.threads
        wall = new[0] - self._mark[0]
        if wall <= 0:
            return self.threads
        others = ((new[1] - self._mark[1]) - (new[2] - self._mark[2])) / wall
        self._mark = new
        threads = threads_for(others, self.n_cores, self.max_threads)
        if threads > self.threads:
            # up one thread at a time, and only after two looks in a row with a core to spare: jobs
            # that all see the same free core would otherwise all take it at once, and all give it back
            self._spare += 1
            threads = self.threads + 1 if self._spare >= 2 else self.threads
        else:
            self._spare = 0
        if self.held:
            threads = self.max_threads
        if threads != self.threads:
            if threads > self.threads:
                self._spare = 0
            log.info("other processes keep %.2f of %d cores busy: %d torch thread(s) instead of %d",
                     others, self.n_cores, threads, self.threads)
            self._set(threads)
            self.threads = threads
        self.history.append((now - self._t0, others, threads))
        return threads

    @contextmanager
    def holding(self) -> Iterator[None]:
        """The allotted threads, unchanged, inside the block (for a fit whose result depends on the
        thread count, e.g. a fixed number of SGD steps); governed again after it."""
        self.held = True
        if self.threads != self.max_threads:
            self._set(self.max_threads)
            self.threads = self.max_threads
        try:
            yield
        finally:
            self.held = False


_ACTIVE: list[CoreGovernor] = []


@contextmanager
def allotted_threads() -> Iterator[None]:
    """Inside a governed step: the step's allotted threads, unchanged, for the block (no-op outside)."""
    if not _ACTIVE:
        yield
        return
    with _ACTIVE[-1].holding():
        yield


@contextmanager
def governed(max_threads: int, sample_seconds: float = 0.1) -> Iterator[CoreGovernor | None]:
    """For a step allotted ``max_threads`` (≥ 2): a :class:`CoreGovernor`, first decided after a
    ``sample_seconds`` look at the machine, then again between solver iterations. Yields None (and
    changes nothing) for one thread, where ``/proc/stat`` is unreadable, or unless
    ``POLYINTERP_ADAPTIVE_THREADS=1`` (the governor is opt-in)."""
    from polyinterp.approx.core.iteration_hooks import installed

    if max_threads < 2 or os.environ.get(ENV_ENABLE, "") != "1":
        yield None
        return
    gov = CoreGovernor(max_threads)
    if gov._mark is None:
        yield None
        return
    time.sleep(sample_seconds)
    gov.update(force=True)
    _ACTIVE.append(gov)
    try:
        with installed(gov.update):
            yield gov
    finally:
        _ACTIVE.remove(gov)

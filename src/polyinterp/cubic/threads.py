"""Intra-op CPU threads for the cubic study's training loops.

The regressor and SAE steps run tens of thousands of small operations (matrices 4096 × 64 and
1024 × 64). On an idle 2-core machine a second OpenMP thread saves little (regressor: about 3.7 s
instead of 4 s per 1000 steps); when other processes hold the cores, the OpenMP threads spin and
wait at the barrier of every operation and the same 1000 steps took 26–44 s with two threads against
5–8 s with one. The training steps therefore run on one intra-op thread whatever the step's
``--threads``. The results do not depend on it: two and one thread give bit-identical models,
checkpoints and tables on the default configuration.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

TRAIN_THREADS = 1


@contextmanager
def intra_op_threads(n: int = TRAIN_THREADS):
    """Run the block (or, as ``@intra_op_threads()``, the decorated function) with ``n`` torch intra-op
    threads; the previous count is restored afterwards."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)

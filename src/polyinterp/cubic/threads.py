"""Intra-op CPU threads for the cubic study's training loops.

The regressor and SAE steps run tens of thousands of small operations (matrices 4096 × 64 and
1024 × 64), where OpenMP threads mostly wait at each operation's barrier, badly so when other
processes hold the cores (timings in ``bench/README.md``). The training steps therefore run on one
intra-op thread whatever the step's ``--threads``.
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

"""Wall-clock time that counts the work queued on a device (CUDA runs asynchronously: without a
synchronisation a timer would measure only the launches)."""

from __future__ import annotations

import time

import torch


def clock(t: torch.Tensor) -> float:
    """``time.perf_counter()`` once the work queued on ``t``'s device is done."""
    if t.is_cuda:
        torch.cuda.synchronize(t.device)
    return time.perf_counter()

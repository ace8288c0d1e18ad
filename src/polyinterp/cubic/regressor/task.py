"""The regression task: inputs (x, a, b) uniform on a box, target y = x³ + a·x² + b·x.

Columns of an input tensor are always ``[x, a, b]``. A seeded ``torch.Generator`` on the CPU draws
every sample, so the same seed gives the same inputs on every device.
"""

from __future__ import annotations

import torch

from polyinterp.errors import ConfigError

COLUMNS = ("x", "a", "b")


def cubic(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y = x³ + a·x² + b·x, elementwise."""
    return x * (x * (x + a) + b)


def target(inputs: torch.Tensor) -> torch.Tensor:
    """Target of an ``[n, 3]`` input tensor (columns x, a, b) as an ``[n]`` tensor."""
    return cubic(inputs[:, 0], inputs[:, 1], inputs[:, 2])


def check_ranges(ranges: dict, key: str = "cubic.task.ranges") -> dict[str, tuple[float, float]]:
    """Validate ``{"x": [lo, hi], "a": [...], "b": [...]}`` and return it as tuples."""
    out = {}
    for name in COLUMNS:
        if name not in ranges:
            raise ConfigError(f"config key '{key}.{name}' is missing; give it as [low, high].")
        lo, hi = (float(v) for v in ranges[name])
        if not lo < hi:
            raise ConfigError(f"config key '{key}.{name}' is [{lo}, {hi}]; the low end must be below the high end.")
        out[name] = (lo, hi)
    return out


def sample_inputs(n: int, ranges: dict, generator: torch.Generator) -> torch.Tensor:
    """``[n, 3]`` float32 inputs drawn uniformly from the box ``ranges`` (CPU, seeded)."""
    r = check_ranges(ranges)
    lo = torch.tensor([r[c][0] for c in COLUMNS], dtype=torch.float64)
    hi = torch.tensor([r[c][1] for c in COLUMNS], dtype=torch.float64)
    u = torch.rand(n, 3, generator=generator, dtype=torch.float64)
    return (lo + u * (hi - lo)).float()


def sample_out_of_range(n: int, ranges: dict, expand: float, generator: torch.Generator) -> torch.Tensor:
    """Inputs whose coefficients (a, b) lie in the box enlarged ``expand``-fold about its centre but
    outside the training box; x stays in its training range.

    Rejection sampling from the enlarged (a, b) box; ``expand`` must exceed 1.
    """
    if expand <= 1:
        raise ConfigError(f"config key 'cubic.task.out_of_range_expand' is {expand}; it must exceed 1.")
    r = check_ranges(ranges)
    big = {}
    for c in ("a", "b"):
        lo, hi = r[c]
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        big[c] = (mid - expand * half, mid + expand * half)
    big["x"] = r["x"]
    chunks, have = [], 0
    while have < n:
        cand = sample_inputs(2 * n, big, generator)
        a, b = cand[:, 1], cand[:, 2]
        inside = (a >= r["a"][0]) & (a <= r["a"][1]) & (b >= r["b"][0]) & (b <= r["b"][1])
        cand = cand[~inside]
        chunks.append(cand)
        have += len(cand)
    return torch.cat(chunks)[:n]


def generator(seed: int, stream: int) -> torch.Generator:
    """A CPU generator for one named use (``stream``) of one seed; streams never share samples."""
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed) * 1_000_003 + int(stream))
    return g


def sample_x(n: int, x_range, generator: torch.Generator) -> torch.Tensor:
    """``[n, 1]`` float32 x drawn uniformly from ``x_range`` = (low, high) (CPU, seeded): the inputs of
    a network that regresses one polynomial at fixed (a, b) (:mod:`polyinterp.cubic.views.grid`)."""
    lo, hi = (float(v) for v in x_range)
    u = torch.rand(n, 1, generator=generator, dtype=torch.float64)
    return (lo + u * (hi - lo)).float()


# Fixed stream numbers: one per use of random numbers, so adding a use never shifts another.
STREAM_INIT, STREAM_TRAIN, STREAM_VAL, STREAM_OOR, STREAM_ACTS, STREAM_HELDOUT, STREAM_SAE = range(7)
# The single-polynomial grid's networks (x alone): training batches, validation, SAE inputs, held out.
STREAM_GRID_TRAIN, STREAM_GRID_VAL, STREAM_GRID_ACTS, STREAM_GRID_HELDOUT = range(7, 11)

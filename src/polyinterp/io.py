"""Atomic file output and small load helpers shared by every study step.

Every output is written to a temporary name in the destination folder and renamed into place, so a
killed job never leaves a partial file under an output name.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from polyinterp.errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix); rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs get the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_torch(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to ``path`` atomically."""
    import torch

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:  # through a file object: the zip folder is "archive", bytes reproducible
            torch.save(obj, fh)


def load_torch(path: str | os.PathLike, map_location: Any = "cpu") -> Any:
    """Load a file written by :func:`save_torch` (tensors, numbers, strings, lists and dicts only)."""
    import torch

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist: run the rule that builds it (snakemake {path}).")
    return torch.load(path, map_location=map_location, weights_only=True)


def save_parquet(df, path: str | os.PathLike) -> None:
    """Write a pandas DataFrame as Parquet (pyarrow, no index) atomically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, engine="pyarrow", index=False)


def save_npz(path: str | os.PathLike, **arrays) -> None:
    """``numpy.savez_compressed`` to ``path`` atomically."""
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def save_figure(fig, *paths: str | os.PathLike) -> None:
    """Save a matplotlib figure to each path (format from the suffix) atomically, then close it."""
    import matplotlib.pyplot as plt

    for path in paths:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip("."), bbox_inches="tight", dpi=150)
    plt.close(fig)

"""Atomic file output and small load helpers shared by every study step.

Every output is written to a temporary name in the destination folder and renamed into place, so a
killed job never leaves a partial file under an output name.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from polyinterp.errors import DataError

# Errors that mean "the filesystem is full" (quota included), by errno.
_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover


def _free(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _full_disk(exc: BaseException, folder: Path) -> str | None:
    """``"no space left on device"`` (or the quota's words) when ``exc`` comes from a full filesystem.

    Looks through the exception's chain: pyarrow raises OSError(ENOSPC) itself, torch.save wraps the
    OSError of its file object in ``RuntimeError("... unexpected pos 5248 vs 5152")``. Without an
    errno in the chain (torch writing to a path name), that RuntimeError on a filesystem with less
    than 1 MiB free counts as a full disk too.
    """
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL:
            return _FULL[e.errno]
        e = e.__cause__ or e.__context__
    if isinstance(exc, RuntimeError) and "unexpected pos" in str(exc):
        free = _free(folder)
        if free is not None and free < 2**20:
            return _FULL[errno.ENOSPC]
    return None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix); rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is left untouched. A full filesystem
    (ENOSPC, EDQUOT, also when wrapped by torch or pyarrow) becomes a :class:`DataError` that names
    ``path`` and the free space left.
    """
    path = Path(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs get the usual permissions
        yield tmp
        os.replace(tmp, path)
    except Exception as exc:
        if tmp is not None and tmp.exists():
            tmp.unlink()  # first, so that the free space below counts what the failed write took
        full = _full_disk(exc, path.parent)
        if full is None:
            raise
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        free = _free(folder)
        room = f"{_human(free)} free on its filesystem" if free is not None else "free space unknown"
        raise DataError(
            f"{full} while writing {path} ({room}); free space or point results/ elsewhere "
            f"(e.g. a symlink to a bigger disk), then rerun. {path} was left as it was."
        ) from exc
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


# A torch file carries the sha256 of its content under this key (PyTorch's zip reader does not check
# its CRCs, so a changed byte in a tensor would load silently); a non-dict object is wrapped in PAYLOAD.
DIGEST_KEY = "_polyinterp_sha256"
PAYLOAD_KEY = "_polyinterp_payload"


def content_digest(obj: Any) -> str:
    """sha256 of what a torch file holds, by value: tensors and numpy arrays (dtype, shape, bytes),
    dicts (keys in sorted order), lists, tuples, strings, numbers, None. Two objects that load equal
    have equal digests; a changed element changes it."""
    import hashlib

    import numpy as np
    import torch

    h = hashlib.sha256()

    def walk(o):
        if isinstance(o, torch.Tensor):
            t = o.detach().to("cpu").contiguous().reshape(-1)
            h.update(f"T{t.dtype}{tuple(o.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(o, np.ndarray):
            h.update(f"A{o.dtype.str}{o.shape}".encode())
            h.update(np.ascontiguousarray(o).tobytes())
        elif isinstance(o, dict):
            h.update(f"D{len(o)}".encode())
            for k in sorted(o, key=repr):
                walk(k)
                walk(o[k])
        elif isinstance(o, (list, tuple)):
            h.update(f"{'L' if isinstance(o, list) else 'U'}{len(o)}".encode())
            for x in o:
                walk(x)
        else:
            h.update(f"{type(o).__name__}:{o!r};".encode())

    walk(obj)
    return h.hexdigest()


def save_torch(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to ``path`` atomically, with the :func:`content_digest` of ``obj`` inside (a dict
    gets key ``DIGEST_KEY``; anything else is wrapped); :func:`load_torch` verifies and removes it."""
    import torch

    body = dict(obj) if isinstance(obj, dict) and DIGEST_KEY not in obj else {PAYLOAD_KEY: obj}
    body[DIGEST_KEY] = content_digest(obj)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:  # through a file object: the zip folder is "archive", bytes reproducible
            torch.save(body, fh)


def load_torch(path: str | os.PathLike, map_location: Any = "cpu") -> Any:
    """Load a file written by :func:`save_torch` (tensors, numbers, strings, lists and dicts only) and
    verify its content digest: a file changed after it was written is a :class:`DataError` naming the
    file, the rule that writes it and the fix, before any of its numbers is used."""
    import torch

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist: run the rule that builds it (snakemake {path}).")
    try:
        body = torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, EOFError, pickle.UnpicklingError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from exc
    except RuntimeError as exc:  # torch's zip reader; other RuntimeErrors (e.g. no CUDA) are not the file's fault
        if not any(word in str(exc) for word in ("PytorchStreamReader", "zip archive", "corrupt")):
            raise
        raise unreadable(path, exc) from exc
    if not isinstance(body, dict) or DIGEST_KEY not in body:
        raise changed(path, "has no content digest: it was written before digests were recorded, or not by "
                            "save_torch, so what it holds cannot be checked")
    want = body.pop(DIGEST_KEY)
    obj = body[PAYLOAD_KEY] if set(body) == {PAYLOAD_KEY} else body
    got = content_digest(obj)
    if got != want:
        raise changed(path, f"was changed after it was written: its content has sha256 {got[:16]}…, not the "
                            f"{want[:16]}… recorded when it was written")
    return obj


def load_parquet(path: str | os.PathLike, **kw) -> Any:
    """``pandas.read_parquet(path, **kw)`` for a table written by :func:`save_parquet`.

    A missing file or one that cannot be read (truncated, not Parquet) is a :class:`DataError` that
    names the file, the rule that wrote it and the fix.
    """
    import pandas as pd
    import pyarrow as pa

    if not Path(path).exists():
        raise DataError(f"{path} does not exist: run the rule that builds it (snakemake {path}).")
    try:
        return pd.read_parquet(path, page_checksum_verification=True, **kw)
    except (pa.ArrowException, OSError) as exc:
        if "CRC" in str(exc) or "checksum" in str(exc).lower():
            raise changed(path, f"was changed after it was written: a data page fails its checksum "
                                f"({' '.join(str(exc).split())[:160]})") from exc
        raise unreadable(path, exc) from exc


def changed(path: str | os.PathLike, why: str) -> DataError:
    """The :class:`DataError` for a file whose content cannot be trusted: ``why`` completes "{path} …"."""
    rule = writer_rule(path)
    fix = (f"delete it and rerun, or `snakemake --forcerun {rule}` (rule {rule} writes it)" if rule else
           "delete it and rerun, or `snakemake --forcerun <rule>` with the rule that writes it")
    return DataError(f"{path} {why}. Every number computed from it would be wrong; {fix}.")


def writer_rule(path: str | os.PathLike) -> str | None:
    """The Snakemake rule that wrote ``path``, from ``.snakemake/metadata`` in the current directory.

    Snakemake keeps one JSON record per output, named by the urlsafe base64 of the output path as the
    workflow spells it (relative to the working directory, where jobs run), split into chunks of
    NAME_MAX - 1 characters (all but the last prefixed by ``@``) when longer than a file name. Tries
    the path as given, normalised, relative to the current directory and absolute. Returns None when
    there is no record or it cannot be read; never raises.
    """
    try:
        meta = Path(".snakemake") / "metadata"
        if not meta.is_dir():
            return None
        given = os.fspath(path)
        absolute = os.path.abspath(given)
        candidates = [given, os.path.normpath(given), os.path.relpath(absolute), absolute]
        try:
            max_len = os.pathconf(meta, "PC_NAME_MAX") or 255
        except (OSError, ValueError):
            max_len = 255
        for name in dict.fromkeys(candidates):
            b64 = base64.urlsafe_b64encode(name.encode()).decode()
            parts = [b64[i : i + max_len - 1] for i in range(0, len(b64), max_len - 1)]
            record = meta.joinpath(*["@" + p for p in parts[:-1]], parts[-1])
            if record.is_file():
                rule = json.loads(record.read_text()).get("rule")
                if isinstance(rule, str) and rule:
                    return rule
    except Exception:  # the lookup only improves a message: it must never replace it
        return None
    return None


def unreadable(path: str | os.PathLike, exc: BaseException) -> DataError:
    """The :class:`DataError` for a file that exists but cannot be read (raise it ``from exc``)."""
    detail = " ".join(str(exc).split())
    if "WeightsUnpickler error:" in detail:  # torch's long advice to drop weights_only does not apply
        detail = "not a file that save_torch wrote: " + detail.split("WeightsUnpickler error:")[1].split(" Check the")[0].strip()
    if len(detail) > 200:
        detail = detail[:200] + "…"
    try:
        if os.path.getsize(path) == 0:
            detail = "the file is empty" + (f"; {detail}" if detail else "")
    except OSError:
        pass
    what = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    rule = writer_rule(path)
    if rule:
        fix = f"It was written by rule {rule}: delete it and rerun, or `snakemake --forcerun {rule}` (which rebuilds all of that rule's outputs)."
    else:
        fix = (
            "It was written by the rule that builds it (no Snakemake record of it in .snakemake/metadata here): "
            "delete it and rerun, or `snakemake --forcerun <rule>` with that rule."
        )
    return DataError(
        f"{path} cannot be read ({what}); it is truncated or corrupt (an interrupted "
        f"copy, a full disk or quota) and, being newer than its inputs, is not rebuilt by itself. {fix}"
    )


def save_parquet(df, path: str | os.PathLike) -> None:
    """Write a pandas DataFrame as Parquet (pyarrow, no index) atomically, with a CRC-32 on every data
    page (Parquet's page checksums), which :func:`load_parquet` verifies."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, engine="pyarrow", index=False, write_page_checksum=True)


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

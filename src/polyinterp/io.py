"""Atomic file output and small load helpers shared by every study step.

Every output is written to a temporary name in the destination folder and renamed into place, so a
killed job never leaves a partial file under an output name.
"""

from __future__ import annotations

import contextlib
import errno
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
WRITER_KEY = "_polyinterp_rule"  # the rule (step) that wrote the file, for the fix an error names

_writer: list[str] = []


def record_writer(step: str | None) -> None:
    """The step (rule) this process runs: every file it writes records it, so that an error about the
    file later names the rule to rerun (``polyinterp.cli`` calls this before running a step)."""
    _writer[:] = [step] if step else []


def _current_writer() -> str | None:
    return _writer[0] if _writer else None


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
    if _current_writer():
        body[WRITER_KEY] = _current_writer()
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
    _check_zip(path)
    try:
        body = torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, EOFError, pickle.UnpicklingError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from exc
    if not isinstance(body, dict) or DIGEST_KEY not in body:
        raise changed(path, "has no content digest: it was not written by save_torch (or by a version "
                            "before digests), so what it holds cannot be checked")
    want = body.pop(DIGEST_KEY)
    writer = body.pop(WRITER_KEY, None)
    obj = body[PAYLOAD_KEY] if set(body) == {PAYLOAD_KEY} else body
    got = content_digest(obj)
    if got != want:
        raise changed(path, f"was changed after it was written: its content has sha256 {got[:16]}…, not the "
                            f"{want[:16]}… recorded when it was written", writer)
    return obj


def _check_zip(path: Path) -> None:
    """A torch file is a zip archive: refuse one whose central directory cannot be read (empty,
    truncated, not a zip) before torch reads it, so that torch's own error texts are never parsed. A
    changed byte inside a member is the content digest's to find (torch does not check the CRCs)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise unreadable(path, exc) from exc


# A Parquet file carries, in its key-value metadata, the sha256 of all its bytes (with the 64 hex digits
# of the digest itself read as zeros) and the rule that wrote it; load_parquet checks the bytes before
# pyarrow parses anything (a changed footer byte can abort pyarrow's Thrift reader).
PARQUET_DIGEST_KEY = "polyinterp.sha256"
PARQUET_WRITER_KEY = "polyinterp.rule"
_DIGEST_MARK = b"sha256:"
_PLACEHOLDER = b"0" * 64


def _digest_at(blob: bytes) -> int | None:
    """Where the 64 hex digits of the digest start in a Parquet file's footer; None without one."""
    if len(blob) < 12 or blob[-4:] != b"PAR1":
        return None
    length = int.from_bytes(blob[-8:-4], "little")
    start = len(blob) - 8 - length
    if not 4 <= start < len(blob) - 8:
        return None
    at = blob.find(_DIGEST_MARK, start, len(blob) - 8)
    return None if at < 0 else at + len(_DIGEST_MARK)


def _file_digest(blob: bytes, at: int) -> str:
    import hashlib

    return hashlib.sha256(blob[:at] + _PLACEHOLDER + blob[at + 64:]).hexdigest()


def _parquet_writer(blob: bytes) -> str | None:
    import re

    m = re.search(rb"rule:([A-Za-z0-9_]{1,100});", blob[-4096:])
    return m.group(1).decode() if m else None


def load_parquet(path: str | os.PathLike, **kw) -> Any:
    """``pandas.read_parquet(path, **kw)`` for a table written by :func:`save_parquet`, after checking
    the sha256 of the whole file recorded in it (data, schema, statistics, pandas metadata) and, while
    reading, every data page's CRC-32. A missing, unreadable or changed file is a :class:`DataError`
    that names the file, the rule that wrote it where the file says, and the fix."""
    import pandas as pd
    import pyarrow as pa

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist: run the rule that builds it (snakemake {path}).")
    blob = path.read_bytes()
    if len(blob) < 12 or blob[:4] != b"PAR1" or blob[-4:] != b"PAR1":
        exc = ValueError(f"not a whole Parquet file ({len(blob)} bytes, no PAR1 at both ends)")
        raise unreadable(path, exc) from exc
    at = _digest_at(blob)
    if at is None:
        raise changed(path, "has no content digest: it was not written by save_parquet (or by a version "
                            "before digests), so what it holds cannot be checked")
    want, got = blob[at:at + 64].decode(errors="replace"), _file_digest(blob, at)
    if got != want:
        raise changed(path, f"was changed after it was written: its bytes have sha256 {got[:16]}…, not the "
                            f"{want[:16]}… recorded when it was written", _parquet_writer(blob))
    try:
        return pd.read_parquet(path, page_checksum_verification=True, **kw)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable(path, exc) from exc


def _fix(rule: str | None) -> str:
    if rule:
        return f"delete it and rerun, or `snakemake --forcerun {rule}` (rule {rule} writes it)"
    return ("delete it and rerun (Snakemake rebuilds a missing output from its inputs; `snakemake -n <file>` "
            "names the rule that builds it), or `snakemake --forcerun <rule>` with that rule")


def changed(path: str | os.PathLike, why: str, rule: str | None = None) -> DataError:
    """The :class:`DataError` for a file whose content cannot be trusted: ``why`` completes "{path} …";
    ``rule``, the rule that wrote it where the file records it, is named in the fix."""
    return DataError(f"{path} {why}. Every number computed from it would be wrong; {_fix(rule)}.")


def unreadable(path: str | os.PathLike, exc: BaseException) -> DataError:
    """The :class:`DataError` for a file that exists but cannot be read (raise it ``from exc``)."""
    detail = " ".join(str(exc).split())
    if len(detail) > 200:
        detail = detail[:200] + "…"
    try:
        if os.path.getsize(path) == 0:
            detail = "the file is empty" + (f"; {detail}" if detail else "")
    except OSError:
        pass
    what = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return DataError(
        f"{path} cannot be read ({what}); it is truncated or corrupt (an interrupted copy, a full disk or "
        f"quota) and, being newer than its inputs, is not rebuilt by itself: {_fix(None)}."
    )


def save_parquet(df, path: str | os.PathLike) -> None:
    """Write a pandas DataFrame as Parquet (pyarrow, no index) atomically, with a CRC-32 on every data
    page and, in its key-value metadata, the rule that wrote it and the sha256 of the whole file
    (the digest's own 64 hex digits read as zeros); :func:`load_parquet` checks both."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    extra = {PARQUET_DIGEST_KEY: (_DIGEST_MARK + _PLACEHOLDER).decode()}
    if _current_writer():
        extra[PARQUET_WRITER_KEY] = f"rule:{_current_writer()};"
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True)
        blob = bytearray(tmp.read_bytes())
        at = _digest_at(bytes(blob))
        blob[at:at + 64] = _file_digest(bytes(blob), at).encode()
        tmp.write_bytes(bytes(blob))


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

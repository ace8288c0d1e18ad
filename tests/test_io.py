"""polyinterp.io: unreadable or changed intermediates name the file, the rule that wrote it (where the
file records it) and the fix; a full disk while writing says so and leaves the destination untouched."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp import io
from polyinterp.errors import DataError
from polyinterp.io import load_parquet, load_torch, record_writer, save_npz, save_parquet, save_torch


@pytest.fixture
def as_rule():
    """Write files as the step of a rule would (``polyinterp.cli`` records the step it runs)."""
    def set_rule(rule):
        record_writer(rule)
    yield set_rule
    record_writer(None)


def write(kind: str, path: Path) -> None:
    if kind == "pt":
        save_torch({"weights": torch.randn(64, 32), "step": 3}, path)
    else:
        save_parquet(pd.DataFrame({"step": range(200), "value": np.linspace(0, 1, 200)}), path)


LOAD = {"pt": load_torch, "parquet": load_parquet}


@pytest.mark.parametrize("kind", ["pt", "parquet"])
def test_truncated_file_names_the_file_and_the_fix(kind, tmp_path, monkeypatch, as_rule):
    monkeypatch.chdir(tmp_path)
    rel = f"results/mnist/seed0/thing.{kind}"
    as_rule("mnist_thing")
    write(kind, Path(rel))
    LOAD[kind](rel)  # readable before the damage
    os.truncate(rel, os.path.getsize(rel) // 2)
    with pytest.raises(DataError) as ei:
        LOAD[kind](rel)
    msg = str(ei.value)
    assert rel in msg and "cannot be read" in msg
    assert "delete it and rerun" in msg and "`snakemake -n <file>` names the rule that builds it" in msg
    assert ei.value.__cause__ is not None  # the original error is kept in the chain
    assert type(ei.value.__cause__).__name__ in msg


@pytest.mark.parametrize("kind", ["pt", "parquet"])
@pytest.mark.parametrize("content", [b"", b"garbage" * 40, b"PK\x03\x04" + b"\0" * 100])
def test_garbage_without_metadata_says_the_rule_that_builds_it(kind, content, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"bad.{kind}"
    path.write_bytes(content)
    with pytest.raises(DataError) as ei:
        LOAD[kind](path)
    msg = str(ei.value)
    assert str(path) in msg
    assert "the rule that builds it" in msg
    assert "delete it and rerun" in msg and "--forcerun" in msg
    assert ei.value.__cause__ is not None


@pytest.mark.parametrize("kind", ["pt", "parquet"])
def test_missing_file_is_a_data_error(kind, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        LOAD[kind](tmp_path / f"absent.{kind}")


def test_load_parquet_passes_keywords(tmp_path):
    path = tmp_path / "t.parquet"
    write("parquet", path)
    assert list(load_parquet(path, columns=["value"]).columns) == ["value"]


# ---- full disk -------------------------------------------------------------------------------

def io_pq():
    import pyarrow.parquet as pq

    return pq


def left_over(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left on device"), (errno.EDQUOT, "disk quota exceeded")])
def test_full_disk_while_writing_parquet(code, words, tmp_path, monkeypatch):
    dest = tmp_path / "results" / "t.parquet"
    write("parquet", dest)
    before = dest.read_bytes()

    def full(self, *a, **k):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(io_pq(), "write_table", full)
    with pytest.raises(DataError) as ei:
        save_parquet(pd.DataFrame({"a": [1]}), dest)
    msg = str(ei.value)
    assert f"{words} while writing {dest}" in msg
    assert "free on its filesystem" in msg and "point results/ elsewhere" in msg
    assert isinstance(ei.value.__cause__, OSError)
    assert dest.read_bytes() == before  # destination untouched
    assert left_over(dest.parent) == []  # temp file removed


def test_full_disk_inside_torch_save(tmp_path, monkeypatch):
    """torch.save wraps the OSError of its file object in RuntimeError('unexpected pos ...')."""
    dest = tmp_path / "m.pt"

    def full(obj, fh, *a, **k):
        fh.write(b"PK partial")
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 5248 vs 5152")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(DataError, match=f"no space left on device while writing {dest}"):
        save_torch({"a": 1}, dest)
    assert not dest.exists() and left_over(tmp_path) == []


def test_unexpected_pos_on_a_full_filesystem(tmp_path, monkeypatch):
    """Without the OSError in the chain (torch.save to a path), a filesystem with no room left decides."""
    dest = tmp_path / "m.pt"

    def full(obj, fh, *a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(io.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(65536, 65536, 0))
    with pytest.raises(DataError, match="no space left on device while writing"):
        save_torch({"a": 1}, dest)


def test_other_write_errors_pass_through(tmp_path, monkeypatch):
    dest = tmp_path / "t.parquet"

    def denied(self, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(io_pq(), "write_table", denied)
    with pytest.raises(PermissionError):
        save_parquet(pd.DataFrame({"a": [1]}), dest)
    assert left_over(tmp_path) == [] and not dest.exists()


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs (needs root and a kernel that allows it); skipped where it cannot be mounted."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip() or proc.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


@pytest.mark.parametrize("kind", ["pt", "parquet", "npz"])
def test_full_tmpfs(kind, tiny_fs):
    dest = tiny_fs / "results" / f"big.{kind}"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    big = np.random.default_rng(0).standard_normal(40_000)  # 320 kB, five times the filesystem
    with pytest.raises(DataError) as ei:
        if kind == "pt":
            save_torch({"a": torch.from_numpy(big)}, dest)
        elif kind == "parquet":
            save_parquet(pd.DataFrame({"a": big}), dest)
        else:
            save_npz(dest, a=big)
    msg = str(ei.value)
    assert f"no space left on device while writing {dest}" in msg
    assert "free on its filesystem" in msg
    assert dest.read_bytes() == b"old"
    assert left_over(dest.parent) == []


@pytest.mark.parametrize("size", [0, 100, None])
def test_truncated_mnist_npz(size, tmp_path, monkeypatch):
    from polyinterp.mnist.data import load_mnist

    monkeypatch.chdir(tmp_path)
    rel = "results/data/mnist.npz"
    save_npz(rel, train_images=np.zeros((2, 28, 28), np.uint8), source=np.array("idx"))
    os.truncate(rel, os.path.getsize(rel) // 2 if size is None else size)
    with pytest.raises(DataError, match=r"results/data/mnist.npz cannot be read .*delete it and rerun"):
        load_mnist(rel)


def flip_byte_in(path: Path, needle: bytes) -> int:
    """Flip one bit in the middle of the first occurrence of ``needle`` (payload bytes, not a header)."""
    blob = bytearray(path.read_bytes())
    at = blob.find(needle)
    assert at >= 0, "payload not found in the file"
    at += len(needle) // 2
    blob[at] ^= 0x04
    path.write_bytes(bytes(blob))
    return at


def test_a_changed_byte_in_a_torch_payload_names_the_file_the_rule_and_the_fix(tmp_path, monkeypatch, as_rule):
    monkeypatch.chdir(tmp_path)
    weights = torch.arange(4096, dtype=torch.float32).reshape(64, 64) / 7
    path = Path("results/mnist/m/seed0/approx/step16.pt")
    as_rule("mnist_approximants")
    save_torch({"quadratic": {"gamma": weights}, "step": 16}, path)
    assert torch.equal(load_torch(path)["quadratic"]["gamma"], weights)  # the digest key is not returned
    assert set(load_torch(path)) == {"quadratic", "step"}
    flip_byte_in(path, weights.numpy().tobytes()[4000:4400])
    assert torch.load(path, weights_only=True)["step"] == 16  # the container still parses: torch alone loads it
    with pytest.raises(DataError, match=r"step16\.pt was changed after it was written: its content has sha256 .*"
                                        r"`snakemake --forcerun mnist_approximants` \(rule mnist_approximants"):
        load_torch(path)
    path.unlink()  # the fix: the rule writes it anew and it loads
    save_torch({"quadratic": {"gamma": weights}, "step": 16}, path)
    assert torch.equal(load_torch(path)["quadratic"]["gamma"], weights)


def test_a_changed_byte_in_a_parquet_page_names_the_file(tmp_path, monkeypatch, as_rule):
    monkeypatch.chdir(tmp_path)
    values = np.random.default_rng(0).standard_normal(300)
    path = Path("results/mnist/m/seed0/metrics/step16.parquet")
    as_rule("mnist_metrics")
    save_parquet(pd.DataFrame({"value": values, "step": np.arange(300)}), path)
    flip_byte_in(path, values.tobytes()[800:1200])
    with pytest.raises(DataError, match=r"step16\.parquet was changed after it was written: its bytes have sha256 .*"
                                        r"`snakemake --forcerun mnist_metrics` \(rule mnist_metrics writes it\)"):
        load_parquet(path)


def _footer(path: Path) -> range:
    """The byte range of a Parquet file's footer (its Thrift FileMetaData: schema, statistics, key-value
    metadata), before the 4-byte length and the closing magic."""
    blob = path.read_bytes()
    length = int.from_bytes(blob[-8:-4], "little")
    return range(len(blob) - 8 - length, len(blob) - 8)


def test_a_changed_footer_byte_never_loads_other_data_silently(tmp_path, monkeypatch, as_rule):
    """Every single-bit change in the footer (schema, statistics, the pandas and digest metadata) either
    is refused with a DataError or changes nothing a reader gets (e.g. the writer library's name); the
    middle byte of the footer is refused, naming the file and the rule."""
    monkeypatch.chdir(tmp_path)
    as_rule("mnist_metrics")
    df = pd.DataFrame({"step": np.arange(50), "approximant": ["linear", "quadratic"] * 25,
                       "value": np.random.default_rng(1).standard_normal(50)})
    path = Path("results/metrics.parquet")
    save_parquet(df, path)
    clean = path.read_bytes()
    footer = _footer(path)
    refused = silent = 0
    for at in footer:
        blob = bytearray(clean)
        blob[at] ^= 0x04
        path.write_bytes(bytes(blob))
        try:
            got = load_parquet(path)
        except DataError:
            refused += 1
            continue
        pd.testing.assert_frame_equal(got, df)   # loaded: then exactly the table that was written
        silent += 1
    assert silent == 0, silent   # the file's digest covers every byte
    blob = bytearray(clean)
    blob[footer[len(footer) // 2]] ^= 0x04
    path.write_bytes(bytes(blob))
    with pytest.raises(DataError, match=r"metrics\.parquet (was changed|cannot be read).*delete it and rerun"):
        load_parquet(path)


def test_a_parquet_file_without_a_digest_is_refused_naming_the_fix(tmp_path):
    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "old.parquet")
    with pytest.raises(DataError, match=r"old\.parquet has no content digest.*delete it and rerun"):
        load_parquet(tmp_path / "old.parquet")


@pytest.mark.parametrize("obj", [[torch.ones(3), "a"], torch.zeros(2, 2), {"_polyinterp_sha256": 1, "x": 2}])
def test_objects_that_are_not_plain_dicts_round_trip(obj, tmp_path):
    save_torch(obj, tmp_path / "x.pt")
    got = load_torch(tmp_path / "x.pt")
    assert io.content_digest(got) == io.content_digest(obj) and type(got) is type(obj)


def test_a_torch_file_without_a_digest_is_refused(tmp_path):  # noqa: D103
    torch.save({"step": 1}, tmp_path / "old.pt")
    with pytest.raises(DataError, match=r"old\.pt has no content digest.*delete it and rerun"):
        load_torch(tmp_path / "old.pt")


def test_the_digest_sees_values_not_layout():
    a = torch.arange(12.0).reshape(3, 4)
    assert io.content_digest({"a": a.t().contiguous(), "b": 1}) == io.content_digest({"b": 1, "a": a.t()})
    assert io.content_digest({"a": a}) != io.content_digest({"a": a.reshape(4, 3)})  # shape counts
    assert io.content_digest({"a": a}) != io.content_digest({"a": a.double()})  # dtype counts
    b = a.clone()
    b[2, 3] = torch.nextafter(b[2, 3], torch.tensor(100.0))
    assert io.content_digest({"a": a}) != io.content_digest({"a": b})

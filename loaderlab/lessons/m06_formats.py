"""Module 06's format helpers: write the course samples as TFRecord, HDF5 or LMDB, read them back, time it.

- `disk_bytes`: space a file takes on disk (allocated blocks where the OS reports
  them, the file size on Windows, which has no `st_blocks`).
- `best_of` and `FormatRow` / `measure_format`: one format's write time, size on
  disk, and records read per second locally and through emulated storage.
- TFRecord (`write_tfrecords`, `read_tfrecords`, `tfrecord_records`), tar members
  from memory (`tar_members`), HDF5 from memory (`write_hdf5`, `read_hdf5_buffer`).
- LMDB read the right way: `write_lmdb`, `lmdb_keys`, and `LMDBSamples`, one
  environment per process, opened lazily with `readonly=True, lock=False`; its
  `open_mode` also builds the two wrong ways the notebook measures it against.

Below them: the NumPy shards (crops stored once at the training size, read back by memory map, no decode) and the
HDF5 dataset that opens its file per worker (or, to show the pitfall, in `__init__`).
"""

from __future__ import annotations

import io
import os
import struct
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from torch.utils.data import Dataset

from loaderlab.images import CROP, Sample, reference_crop

TFRECORD_FRAMING = 16  # bytes around each record: length (8), its CRC (4), the record's CRC (4)


def disk_bytes(path: Path | str) -> int:
    """Bytes `path` takes on disk: its allocated blocks (`st_blocks * 512`) where the OS has them, else its size."""
    info = Path(path).stat()
    blocks = getattr(info, "st_blocks", None)  # POSIX only: Windows has no st_blocks
    return blocks * 512 if blocks is not None else info.st_size


def sample_key(sample: Sample) -> str:
    """A sample's key in every format: `<class folder>/<file stem>`."""
    return f"{sample.path.parent.name}/{sample.path.stem}"


def best_of(run: Callable[[], Any], repeats: int = 2) -> tuple[float, Any]:
    """The fastest of `repeats` calls of `run`, in seconds, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


@dataclass(frozen=True)
class FormatRow:
    """One format, measured: files, MB on disk, write seconds, records read per second locally and remotely."""

    name: str
    files: int
    disk_mb: float
    write_s: float | None    # None: nothing was written (the JPEG files are already there)
    local_per_s: float
    remote_per_s: float | None  # None: the format cannot be parsed from a buffer fetched in one request

    def __str__(self) -> str:
        write = "-" if self.write_s is None else f"{self.write_s:.2f} s"
        remote = "n/a" if self.remote_per_s is None else f"{self.remote_per_s:.0f}/s"
        return (f"{self.name}: {self.files} files, {self.disk_mb:.1f} MB on disk, write {write}, "
                f"local read {self.local_per_s:.0f}/s, emulated remote read {remote}")


def measure_format(name: str, paths: Sequence[Path], write_s: float | None, count: int,
                   local_read: Callable[[], Sequence[Any]],
                   remote_read: Callable[[], Sequence[Any]] | None = None) -> FormatRow:
    """Time `local_read` (best of 2) and `remote_read` (once: it sleeps), checking that each returns `count` records."""
    local_s, records = best_of(local_read)
    if len(records) != count:
        raise AssertionError(f"{name}: the local read returned {len(records)} records, expected {count}")
    remote_per_s = None
    if remote_read is not None:
        remote_s, records = best_of(remote_read, repeats=1)
        if len(records) != count:
            raise AssertionError(f"{name}: the remote read returned {len(records)} records, expected {count}")
        remote_per_s = count / remote_s
    return FormatRow(name, len(paths), sum(disk_bytes(p) for p in paths) / 1e6, write_s, count / local_s, remote_per_s)


# ---- tar and TFRecord ----------------------------------------------------------------------------------

def tar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """`(name, bytes)` of every member of a tar archive held in memory, in written order."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        for member in tar:
            handle = tar.extractfile(member)
            if handle is not None:
                yield member.name, handle.read()


def write_tfrecords(samples: Sequence[Sample], out_dir: Path | str, shard_bytes: float) -> list[Path]:
    """`tf.train.Example`s (`image`: the JPEG bytes, `label`: int64) in shards of about `shard_bytes`; their paths."""
    import tensorflow as tf

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    writer, size = None, 0
    try:
        for sample in samples:
            if writer is None:
                paths.append(out_dir / f"shard-{len(paths):05d}.tfrecord")
                writer, size = tf.io.TFRecordWriter(str(paths[-1])), 0
            example = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[sample.path.read_bytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[sample.label])),
            }))
            record = example.SerializeToString()
            writer.write(record)
            size += len(record) + TFRECORD_FRAMING
            if size >= shard_bytes:
                writer.close()
                writer = None
    finally:
        if writer is not None:
            writer.close()
    return paths


def read_tfrecords(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every record of the TFRecord shards through `tf.data` (two shards interleaved), parsed to numpy."""
    import tensorflow as tf

    features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
    files = tf.data.Dataset.from_tensor_slices([str(p) for p in paths])
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=tf.data.AUTOTUNE)
    return list(records.map(lambda r: tf.io.parse_single_example(r, features)).as_numpy_iterator())


def tfrecord_records(data: bytes) -> Iterator[bytes]:
    """The serialized records of a TFRecord file held in memory (framing: length, its CRC, record, its CRC)."""
    offset = 0
    while offset < len(data):
        if offset + 12 > len(data):
            raise ValueError(f"TFRecord data cut short at byte {offset} of {len(data)}")
        (length,) = struct.unpack_from("<Q", data, offset)
        if offset + length + TFRECORD_FRAMING > len(data):
            raise ValueError(f"TFRecord data cut short: a {length}-byte record at byte {offset} of {len(data)}")
        yield data[offset + 12 : offset + 12 + length]
        offset += length + TFRECORD_FRAMING


# ---- HDF5 ------------------------------------------------------------------------------------------------

def write_hdf5(samples: Sequence[Sample], path: Path | str) -> list[Path]:
    """One HDF5 file: `data` (variable-length uint8, the JPEG bytes) and `labels` (int64), as `HDF5Samples` reads."""
    import h5py

    path = Path(path)
    with h5py.File(path, "w") as handle:
        images = handle.create_dataset("data", (len(samples),), dtype=h5py.vlen_dtype(np.uint8))
        for i, sample in enumerate(samples):
            images[i] = np.frombuffer(sample.path.read_bytes(), np.uint8)
        handle.create_dataset("labels", data=np.array([s.label for s in samples], np.int64))
    return [path]


def read_hdf5_buffer(data: bytes) -> list[tuple[bytes, int]]:
    """Every `(encoded bytes, label)` of a `write_hdf5` file held in memory."""
    import h5py

    with h5py.File(io.BytesIO(data), "r") as handle:
        return [(handle["data"][i].tobytes(), int(handle["labels"][i])) for i in range(len(handle["labels"]))]


# ---- LMDB ------------------------------------------------------------------------------------------------

LABEL_BYTES = 2  # each LMDB value is the label (2 bytes, little-endian) followed by the JPEG bytes


def write_lmdb(samples: Sequence[Sample], path: Path | str) -> list[Path]:
    """One LMDB environment (a folder): key `sample_key`, value label + JPEG bytes, in one write transaction."""
    import lmdb

    path = Path(path)
    payload = sum(s.path.stat().st_size for s in samples)
    env = lmdb.open(str(path), map_size=4 * payload + 2**24)
    try:
        with env.begin(write=True) as txn:
            for sample in samples:
                txn.put(sample_key(sample).encode(), sample.label.to_bytes(LABEL_BYTES, "little") + sample.path.read_bytes())
    finally:
        env.close()
    return sorted(path.iterdir())


def split_lmdb_value(value: bytes) -> tuple[bytes, int]:
    """`(JPEG bytes, label)` from one `write_lmdb` value."""
    return bytes(value[LABEL_BYTES:]), int.from_bytes(value[:LABEL_BYTES], "little")


def lmdb_keys(path: Path | str) -> np.ndarray:
    """Every key of the environment, in key order, as a NumPy bytes array (no per-key Python objects to copy on read).

    The cursor walks the keys with `iternext(keys=True, values=False)`: py-lmdb has no `iternames()`.
    The environment is opened and closed here, so no handle outlives the call (nor reaches a worker).
    """
    import lmdb

    with lmdb.open(str(path), readonly=True, lock=False) as env, env.begin() as txn:
        return np.array(list(txn.cursor().iternext(keys=True, values=False)), dtype=bytes)


OpenMode = Literal["per_worker", "in_init", "per_item"]


class LMDBSamples(Dataset):
    """Map-style dataset over a `write_lmdb` environment: item i is `(JPEG bytes, label)`.

    `open_mode` says when the environment is opened:
    - `"per_worker"` (the rule): lazily, on the first item a process reads, with
      `readonly=True, lock=False` (nothing writes while we train, so readers need no
      lock table), then kept for that process's every later item;
    - `"in_init"` (the popular recipe, to measure it): in `__init__`, in the parent,
      with `readonly=True` and lmdb's default lock; the workers inherit it through fork, or spawn fails to pickle it;
    - `"per_item"` (the usual patch for it): opened and closed around every item.
    Call `close()` before starting workers if the parent read items itself: py-lmdb
    refuses to open an environment twice in one process, and a forked child inherits
    the parent's open environment (the per-worker rule then raises, naming the cure).
    """

    def __init__(self, path: Path | str, open_mode: OpenMode = "per_worker") -> None:
        import lmdb

        if open_mode not in ("per_worker", "in_init", "per_item"):
            raise ValueError(f"open_mode must be 'per_worker', 'in_init' or 'per_item', not {open_mode!r}")
        self.path = Path(path)
        if not (self.path / "data.mdb").is_file():
            raise FileNotFoundError(f"{self.path} holds no LMDB environment (data.mdb): write it with write_lmdb()")
        self.open_mode = open_mode
        self.keys = lmdb_keys(self.path)
        self._env = lmdb.open(str(self.path), readonly=True) if open_mode == "in_init" else None
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> tuple[bytes, int]:
        import lmdb

        key = bytes(self.keys[index])
        if self.open_mode == "per_item":
            with lmdb.open(str(self.path), readonly=True, lock=False) as env, env.begin() as txn:
                return split_lmdb_value(txn.get(key))
        if self.open_mode == "per_worker":
            if self._env is not None and self._pid != os.getpid():
                raise RuntimeError(f"this LMDBSamples opened {self.path} in process {self._pid} before the workers "
                                   "started; call close() in the parent first: an LMDB environment must not cross fork")
            if self._env is None:
                self._env, self._pid = lmdb.open(str(self.path), readonly=True, lock=False), os.getpid()
        with self._env.begin() as txn:
            value = txn.get(key)
        if value is None:
            raise KeyError(f"{self.path}: key {key!r} is missing")
        return split_lmdb_value(value)

    def close(self) -> None:
        """Close this process's environment, if it opened one."""
        if self._env is not None and self._pid == os.getpid():
            self._env.close()
        self._env = None

    def __getstate__(self) -> dict[str, object]:
        # The rule sends no handle to a spawned worker; the recipe tries to (and pickling it fails).
        return self.__dict__ if self.open_mode == "in_init" else self.__dict__ | {"_env": None}


def scan_lmdb(path: Path | str) -> list[tuple[bytes, int]]:
    """Every `(JPEG bytes, label)` in key order, with one cursor over one read transaction (the fastest full pass)."""
    import lmdb

    with lmdb.open(str(path), readonly=True, lock=False) as env, env.begin() as txn:
        return [split_lmdb_value(value) for _, value in txn.cursor()]


def loader_outcome(run: Callable[[], Iterable[Any]]) -> tuple[str, int]:
    """Run a loader to the end: ("ok", items) or ("<Error>: <first line>", 0), for showing a pitfall without a crash."""
    import gc
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch repeats the same error as a warning
            return "ok", sum(1 for _ in run())
    except Exception as err:  # the pitfall's error, whatever the platform makes of it
        lines = str(err).strip().splitlines() or [""]
        line = next((line for line in lines if "Error" in line and ":" in line), lines[0]).strip()
        named, _, rest = line.partition(": ")
        return f"{type(err).__name__}: {rest if named.endswith('Error') and rest else line}", 0
    finally:
        gc.collect()  # drop the failed loader's iterator now, not inside a later fork


# ---- shards that need no decoding, and HDF5 opened per worker ------------------------------------------------

IMAGE_SHAPE = (CROP, CROP, 3)


def write_array_shards(samples: Sequence[Sample], out_dir: Path | str, samples_per_shard: int) -> list[Path]:
    """Decode and centre-crop every sample once, and store shards of `(images uint8 (N, 224, 224, 3), labels)`.

    Shard k is `images-{k:05d}.npy` plus `labels-{k:05d}.npy`; the last one may be partial.
    Returns the image files written.
    """
    if samples_per_shard < 1:
        raise ValueError("samples_per_shard must be at least 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shard, start in enumerate(range(0, len(samples), samples_per_shard)):
        chunk = samples[start : start + samples_per_shard]
        images = np.lib.format.open_memmap(out_dir / f"images-{shard:05d}.npy", mode="w+", dtype=np.uint8,
                                           shape=(len(chunk), *IMAGE_SHAPE))
        for row, sample in enumerate(chunk):
            images[row] = reference_crop(sample.path)
        images.flush()
        del images
        np.save(out_dir / f"labels-{shard:05d}.npy", np.array([s.label for s in chunk], dtype=np.int64))
        written.append(out_dir / f"images-{shard:05d}.npy")
    return written


class ArrayShards(Dataset):
    """Map-style dataset over `write_array_shards` output: item i is `(image uint8 (224, 224, 3), label)`.

    The shards are memory-mapped on first use in each process (a map is not shared
    across fork safely and does not pickle for spawn), so reading a sample is a
    page-cache copy, with no decode.
    """

    def __init__(self, out_dir: Path | str) -> None:
        self.image_files = sorted(Path(out_dir).glob("images-*.npy"))
        if not self.image_files:
            raise FileNotFoundError(f"{out_dir} holds no images-*.npy shards: write them with write_array_shards().")
        self.labels = [np.load(str(f).replace("images-", "labels-")) for f in self.image_files]
        self.starts = np.cumsum([0] + [len(labels) for labels in self.labels])
        self._maps: dict[int, np.ndarray] = {}
        self._pid = -1

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        if self._pid != os.getpid():  # a new process: map the files afresh
            self._maps, self._pid = {}, os.getpid()
        shard = int(np.searchsorted(self.starts, index, side="right") - 1)
        if shard not in self._maps:
            self._maps[shard] = np.load(self.image_files[shard], mmap_mode="r")
        row = index - int(self.starts[shard])
        return np.array(self._maps[shard][row]), int(self.labels[shard][row])

    def __getstate__(self) -> dict[str, object]:
        return self.__dict__ | {"_maps": {}, "_pid": -1}


class HDF5Samples(Dataset):
    """Map-style dataset over an HDF5 file of encoded images: item i is `(encoded bytes, label)`.

    The file holds `data` (variable-length uint8, one encoded image per row) and
    `labels` (int64). The rule: open the file in each worker, on first use. With
    `open_in_init=True` the handle is opened in `__init__`, in the parent, which is
    the pitfall: spawn cannot pickle it, and a handle inherited through fork shares
    the HDF5 library's state with the parent, which h5py does not support.
    """

    def __init__(self, path: Path | str, open_in_init: bool = False) -> None:
        import h5py

        self.path = Path(path)
        with h5py.File(self.path, "r") as handle:
            self.length = len(handle["labels"])
        self.open_in_init = open_in_init
        self._file = h5py.File(self.path, "r") if open_in_init else None
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[bytes, int]:
        import h5py

        if self._file is None or (not self.open_in_init and self._pid != os.getpid()):
            self._file, self._pid = h5py.File(self.path, "r"), os.getpid()
        return self._file["data"][index].tobytes(), int(self._file["labels"][index])

    def __getstate__(self) -> dict[str, object]:
        # The rule's version sends no handle to a worker; the pitfall's tries to (and spawn fails).
        return self.__dict__ if self.open_in_init else self.__dict__ | {"_file": None}

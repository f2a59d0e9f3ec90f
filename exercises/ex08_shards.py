"""Exercise 08: pack a dataset into shards, and read them back with any number of DataLoader workers.

`write_shards(root, out_dir, target_shard_mb)` packs every image of an
ImageFolder split into a few large files; `ShardDataset(out_dir, shuffle, seed,
buffer_size)` is a torch IterableDataset that streams the samples back, each
worker reading only its own shards, shuffled by shard order plus a shuffle buffer.

Format: the reference solution writes tar shards in the WebDataset layout (each
sample is two members, `<key>.jpg` with the file's bytes and `<key>.cls` with its
label as text), written with the standard library's `tarfile` or with
`webdataset.TarWriter`, and read back with `tarfile.open(fileobj=..., mode="r|")`.
TFRecord (`tf.train.Example` records) is allowed too; the grader only talks to
your two functions. Say in `write_shards`'s docstring which format you chose.
Grade: `pytest grader/test_ex08_shards.py`. Hints: `make hint EX=ex08`.
"""

from __future__ import annotations

import io  # noqa: F401  (you will need these)
import tarfile  # noqa: F401
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info  # noqa: F401

from loaderlab.images import list_samples  # noqa: F401
from loaderlab.sim import SlowStorage

T = TypeVar("T")


class ShardSample(NamedTuple):
    """One sample read back from the shards (what ShardDataset yields)."""

    key: str     # the file's path under root, without its suffix: "circles/circles_000003"
    data: Any    # the file's bytes, exactly as written (or decode(bytes) when a decode is given)
    label: int   # the ImageFolder label (index of the class folder in sorted order)


def write_shards(root: Path | str, out_dir: Path | str, target_shard_mb: float) -> list[Path]:
    """Pack every image under `root/<class>/` into shards of about `target_shard_mb` MB (10^6 bytes); return their paths.

    Contract (the grader checks each point):
    - every sample of `list_samples(root)`, in that order, with its bytes untouched
      (the grader compares sha256 digests) and its label;
    - the key of a sample is its path under root without the suffix, POSIX-style
      ("circles/circles_000003");
    - every shard but the last is within one sample (plus 64 KiB of format
      overhead) of the target; the last, partial shard holds what is left and is
      written too;
    - the shard files are written into `out_dir` (created if missing), named so
      that sorting their names gives the written order.
    State your format here: ...
    """
    # TODO(ex08a): samples = list_samples(root); open shard 0 (out_dir / "shard-00000.tar",
    # tarfile.open(path, "w")); for each sample add two members: f"{key}.jpg" with
    # sample.path.read_bytes() and f"{key}.cls" with str(label).encode() (tarfile.TarInfo
    # with .size set, then tar.addfile(info, io.BytesIO(data))). Once tar.offset reaches the
    # target bytes, close it and open the next shard. After the loop, close the last one.
    raise NotImplementedError("TODO(ex08a) in exercises/ex08_shards.py: write_shards")


def shuffle_buffer(items: Iterable[T], buffer_size: int, rng: np.random.Generator) -> Iterator[T]:
    """Yield `items` in a random order, holding at most `buffer_size` of them at a time (all randomness from `rng`)."""
    # TODO(ex08b): fill a list up to buffer_size; then for each new item, pick a random
    # index, yield that buffered item and put the new one in its place. At the end,
    # shuffle what is left with rng and yield it all.
    raise NotImplementedError("TODO(ex08b) in exercises/ex08_shards.py: shuffle_buffer")


class ShardDataset(IterableDataset):
    """The samples of the shards in `out_dir`, as `ShardSample(key, data, label)`; usable with any `num_workers`.

    Contract (the grader checks each point):
    - every sample exactly once per epoch, for `num_workers` 0 to 4 of a
      `DataLoader(dataset, batch_size=None, num_workers=...)`, and across
      `world_size` ranks (`rank` in 0..world_size-1), including the last, partial
      shard; with fewer shards than workers, some workers get none;
    - `shuffle=False`: samples in written order (with num_workers=0);
      `shuffle=True`: shard order permuted, then a shuffle buffer of `buffer_size`;
      the order changes with `set_epoch(epoch)` and with `seed`, and repeats for
      the same (seed, epoch, num_workers);
    - `storage` (a loaderlab.sim.SlowStorage, or None for local files): read each
      shard through `storage.read(path)` (one request per shard) or a few large
      `storage.read_range` requests, never one request per sample;
    - `decode(bytes) -> anything`, if given, is applied to each sample's data, in the worker;
    - a folder with no shards, or a truncated shard, raises an error naming the folder or shard.
    """

    def __init__(self, out_dir: Path | str, shuffle: bool = True, seed: int = 0, buffer_size: int = 256, *,
                 storage: SlowStorage | None = None, rank: int = 0, world_size: int = 1,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        # TODO(ex08c): list the shard files (sorted) and raise FileNotFoundError naming
        # out_dir if there are none; keep every argument; self.epoch = 0.
        raise NotImplementedError("TODO(ex08c) in exercises/ex08_shards.py: ShardDataset.__init__")

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration gives (call it before creating the DataLoader iterator)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[ShardSample]:
        # TODO(ex08d): inside a DataLoader worker, get_worker_info() gives .id and
        # .num_workers (None in the main process: one worker). If shuffling, permute the
        # shard list with np.random.default_rng([seed, epoch]): the SAME permutation in
        # every worker and rank. Then take this slot's shards: order[slot::slots] with
        # slot = rank * num_workers + worker_id and slots = world_size * num_workers.
        # Read each shard (through storage.read when storage is given), yield ShardSample
        # per sample (decode applied), through shuffle_buffer when shuffling, with
        # rng = np.random.default_rng([seed, epoch, rank, worker_id]).
        raise NotImplementedError("TODO(ex08d) in exercises/ex08_shards.py: ShardDataset.__iter__")

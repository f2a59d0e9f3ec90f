"""Exercise 08: pack a dataset into shards, and read them back with any number of DataLoader workers and ranks.

`write_shards(root, out_dir, target_shard_mb)` packs every image of an
ImageFolder split into a few large files; `ShardDataset(out_dir, ...)` is a
torch IterableDataset that streams the samples back, each (rank, worker) slot
reading only its own shards, shuffled by shard order plus a shuffle buffer.

Format: the reference solution writes tar shards in the WebDataset layout (each
sample is two members, `<key>.jpg` with the file's bytes and `<key>.cls` with its
label as text), written with the standard library's `tarfile` or with
`webdataset.TarWriter`, and read back with `tarfile.open(fileobj=..., mode="r|")`.
TFRecord (`tf.train.Example` records) is allowed too; the grader only talks to
your two functions. Say in `write_shards`'s docstring which format you chose.

Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive,
4:2:2 and 4:4:4, grayscale, Adobe CMYK and YCCK, EXIF-tagged camera files, a PNG
under a .jpg name) gives the reference's pixels (`loaderlab.images`: read by its
content, kept as stored with no EXIF rotation, grayscale as three equal
channels, CMYK as Pillow converts it). A shard keeps each file's bytes as they
are, whatever its kind (a PNG under a .jpg name stays a PNG in `<key>.jpg`), so
that a decode reads them as the reference does.

Build it in steps; each TODO names its step, and `pytest grader/test_ex08_shards.py`
shows each step's status, so you can stop after any step with something that passes:
  1 write shards   2 read them back in order   3 split across workers and ranks
  4 shuffle per epoch   5 remote reads and bad shards   6 speed
Hints: `make hint EX=ex08` (LEVEL=1 to 6, from a nudge to nearly the answer).
"""

from __future__ import annotations

import io  # noqa: F401  (you will need these)
import tarfile  # noqa: F401
from collections.abc import Callable, Iterable, Iterator  # noqa: F401
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar

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

    Contract (the grader checks each point; [n] is the step that checks it):
    - [1] the shards are written into `out_dir` (created if missing) and returned
      in written order; their names sort in that order (zero-padded numbers);
    - [1] every shard but the last is within one sample of the target
      (`target_shard_mb * 10**6` bytes), plus the format's own bytes (headers,
      padding, framing: up to 64 KiB or 5% of the target, whichever is more). You
      may count the file's bytes or only the samples' bytes. The last, partial
      shard holds what is left and is written too;
    - [1] no shard is empty: a target smaller than one sample gives one sample per shard;
    - [2] every sample of `list_samples(root)`, in that order, with its bytes
      untouched (the grader compares sha256 digests) and its label; the key of a
      sample is its path under root without the suffix, POSIX-style
      ("circles/circles_000003").
    State your format here: ...
    """
    # TODO(ex08, step 1): walk the samples in list_samples order and append
    # each one (its bytes untouched, its key, its label) to the open shard; once the open
    # shard has reached the target, close it, so the next sample starts a new one. Why
    # "reached" and not "would overflow": a sample larger than the target must still land in
    # a shard of its own, never leave an empty shard behind. Close the last, partial shard too.
    raise NotImplementedError("TODO(ex08, step 1) in exercises/ex08_shards.py: write_shards (write shards)")


def shuffle_buffer(items: Iterable[T], buffer_size: int, rng: np.random.Generator) -> Iterator[T]:
    """Yield `items` in a random order, holding at most `buffer_size` of them at a time (all randomness from `rng`)."""
    # TODO(ex08, step 4): a shuffle buffer, as tf.data's shuffle and
    # webdataset's shuffle: keep up to buffer_size items; once it is full, each new item
    # sends out one of the kept items, picked at random, and takes its place. Why: memory
    # stays at buffer_size samples, yet a sample can leave long after it came in. When the
    # items run out, what is still kept comes out too, in random order (not as it was kept).
    raise NotImplementedError("TODO(ex08, step 4) in exercises/ex08_shards.py: shuffle_buffer (shuffle per epoch)")


class ShardDataset(IterableDataset):
    """The samples of the shards in `out_dir`, as `ShardSample(key, data, label)`; usable with any `num_workers`.

    Contract (the grader checks each point; [n] is the step that checks it):
    - [2] iterating yields `ShardSample(key, data, label)`: `data` is the file's
      bytes as written, or `decode(bytes)` when a decode is given; with
      `shuffle=False` in one process, the samples come in written order, and
      iterating again gives the same epoch again;
    - [3] every sample exactly once per epoch for
      `DataLoader(dataset, batch_size=None, num_workers=0..3)`, across `world_size`
      ranks (one dataset per rank, `rank` in 0..world_size-1), whichever way the
      workers start (fork or spawn). Shards are divided, not samples: each shard is
      read whole by exactly one (rank, worker) slot, and `decode` runs in that
      worker. With `shuffle=False` each slot reads its shards in written order (a
      DataLoader interleaves its workers, so only each worker's own samples keep
      that order). With fewer shards than slots, some slots get none;
    - [4] `shuffle=True` means two stages, measured with `loaderlab.order`:
      (a) the shard order is permuted per (seed, epoch), the same permutation in
      every worker and rank (so the split stays a partition): with `buffer_size=1`
      every shard still comes straight through, in written order, but the shards
      do not come in written order, and their order changes with the epoch;
      (b) then each slot's samples pass a shuffle buffer of `buffer_size` samples
      (`shuffle_buffer`): with a buffer of 64 over the 200 graded samples, at most
      30% of consecutive samples were neighbours when written
      (`adjacent_pair_share`); with a buffer larger than the dataset the epoch is a
      full shuffle (`adjacent_pair_share` at most 5% and `mean_neighbour_distance`
      at least 0.25; a full shuffle of n gives about 1/n and 1/3).
      `buffer_size=0` either acts as 1 or raises ValueError naming buffer_size;
    - [4] the order is a function of (seed, epoch, num_workers, rank, world_size)
      only: a new dataset starts at epoch 0; `set_epoch(e)` chooses the epoch of
      the next iteration; iterating again without `set_epoch` repeats the epoch
      (it never advances by itself: an increment inside `__iter__` would happen in
      a worker's copy and be lost); another seed or epoch gives another order; two
      datasets alive at once never change each other's order;
    - [5] `storage` (a loaderlab.sim.SlowStorage, or None for local files): read
      each shard through `storage.read(path)` (one request) or a few large
      `storage.read_range` requests, never one request per sample, and each shard
      once per epoch over all ranks;
    - [5] a folder with no shards (or no folder) raises an error naming it; a shard
      cut short raises an error naming the shard, read locally, through storage or
      in a worker: never a silently short epoch;
    - [6] under 5 ms and 200 MB/s per request, 4 MB shards read at least 3x the
      samples/s of one request per file.
    """

    def __init__(self, out_dir: Path | str, shuffle: bool = True, seed: int = 0, buffer_size: int = 256, *,
                 storage: SlowStorage | None = None, rank: int = 0, world_size: int = 1,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        # TODO(ex08, step 2): find this folder's shard files, sorted, in
        # self.shards, and keep every argument on self, with self.epoch = 0. Keep nothing on the
        # class or the module: several datasets (and their worker copies) live at once. Step 5
        # asks for a clear error here when the folder holds no shard: a typo must not train on nothing.
        raise NotImplementedError("TODO(ex08, step 2) in exercises/ex08_shards.py: "
                                  "ShardDataset.__init__ (read them back in order)")

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration gives (call it before creating the DataLoader iterator)."""
        self.epoch = epoch

    def shard_order(self) -> list[Path]:
        """Every shard, in the order this epoch reads them: the same list in every worker and every rank."""
        if not self.shuffle:
            return list(self.shards)
        # TODO(ex08, step 4): the shards in an order that depends on
        # (seed, epoch) and on nothing else, so that every worker and every rank, each
        # computing it alone (in another process), gets the same list.
        raise NotImplementedError("TODO(ex08, step 4) in exercises/ex08_shards.py: "
                                  "ShardDataset.shard_order (shuffle per epoch)")

    def shards_for(self, worker_id: int, num_workers: int) -> list[Path]:
        """The shards that (self.rank, worker_id) reads this epoch: its share of shard_order()."""
        if self.world_size * num_workers == 1:
            return self.shard_order()
        # TODO(ex08, step 3): give this slot its own share of
        # shard_order(): the world_size * num_workers slots together must cover every shard
        # exactly once, leftovers included, and a slot may get none. Why whole shards: a
        # worker that read every shard and kept every k-th sample would read k times the bytes.
        raise NotImplementedError("TODO(ex08, step 3) in exercises/ex08_shards.py: "
                                  "ShardDataset.shards_for (split across workers and ranks)")

    def __iter__(self) -> Iterator[ShardSample]:
        # TODO(ex08, step 2): find out which DataLoader worker runs
        # this (none: the main process is the only one), read this slot's shards (shards_for)
        # one after the other, each front to back, and yield a ShardSample per sample, with
        # decode applied when given. When shuffling, pass the samples through shuffle_buffer
        # (step 4), with a generator seeded by the epoch too. Read each shard's bytes through
        # self._open(shard).
        raise NotImplementedError("TODO(ex08, step 2) in exercises/ex08_shards.py: "
                                  "ShardDataset.__iter__ (read them back in order)")

    def _open(self, shard: Path) -> BinaryIO:
        """The shard as a file object: the local file, or (step 5) its bytes fetched through storage."""
        if self.storage is None:
            return shard.open("rb")
        # TODO(ex08, step 5): fetch the shard through
        # self.storage in one request (as from object storage: every request pays a
        # latency) and hand its bytes on as a file object. Then make bad input loud: a
        # shard that stops short must raise an error that names the shard (wherever your
        # reader parses it), and __init__ must raise one naming the folder when it holds no shard.
        raise NotImplementedError("TODO(ex08, step 5) in exercises/ex08_shards.py: "
                                  "ShardDataset._open (remote reads and bad shards)")

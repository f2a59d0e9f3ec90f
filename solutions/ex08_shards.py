"""Exercise 08, reference solution: tar shards in the WebDataset layout, and an IterableDataset over them.

Design choices:
- tar, because a shard is then a plain archive any tool can list, and the
  `webdataset` library reads it as is: each sample is two members, `<key>.jpg`
  (the file's bytes, untouched) and `<key>.cls` (the label as text);
- a shard is closed as soon as it reaches the target, so every shard but the
  last is between the target and the target plus one sample (plus tar's padding);
- shards are split across (rank, worker) slots AFTER one shared, seeded
  permutation, so every slot agrees on the order and no shard is read twice;
- a seeded shuffle buffer mixes samples within and across the slot's shards.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from loaderlab.images import list_samples
from loaderlab.sim import SlowStorage

T = TypeVar("T")
SHARD_NAME = "shard-{:05d}.tar"
SHARD_GLOB = "shard-*.tar"
LABEL_SUFFIX = ".cls"


class ShardSample(NamedTuple):
    """One sample read back from the shards."""

    key: str     # the file's path under root, without its suffix: "circles/circles_000003"
    data: Any    # the file's bytes, exactly as written (or decode(bytes) when a decode is given)
    label: int   # the ImageFolder label (index of the class folder in sorted order)


class CorruptShard(ValueError):
    """A shard that does not read back as a whole tar archive of complete samples."""


def write_shards(root: Path | str, out_dir: Path | str, target_shard_mb: float) -> list[Path]:
    """Pack every image under `root/<class>/` into tar shards of about `target_shard_mb` MB (10^6 bytes).

    Samples go in `list_samples(root)` order. A shard is closed once it holds at
    least the target, so every shard but the last is within one sample (plus
    tar's padding, under 64 KiB) of the target; the last holds what is left.
    Returns the shard paths, in order. Refuses a folder that already holds shards.
    """
    if target_shard_mb <= 0:
        raise ValueError(f"target_shard_mb must be positive, got {target_shard_mb}")
    root, out_dir = Path(root), Path(out_dir)
    samples = list_samples(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.glob(SHARD_GLOB)):
        raise FileExistsError(f"{out_dir} already holds shards; write into an empty folder (stale shards would be read too).")
    target_bytes = target_shard_mb * 1_000_000
    paths: list[Path] = []

    def next_shard() -> tarfile.TarFile:
        paths.append(out_dir / SHARD_NAME.format(len(paths)))
        return tarfile.open(paths[-1], "w", format=tarfile.PAX_FORMAT)

    tar = next_shard() if samples else None
    try:
        for sample in samples:
            data = sample.path.read_bytes()
            if shard_is_full(tar, len(data), target_bytes):
                tar.close()
                tar = next_shard()
            key = sample.path.relative_to(root).with_suffix("").as_posix()
            add_member(tar, key + sample.path.suffix.lower(), data)
            add_member(tar, key + LABEL_SUFFIX, str(sample.label).encode())
    finally:
        if tar is not None:
            tar.close()  # the last, partial shard
    return paths


def shard_is_full(tar: tarfile.TarFile, next_bytes: int, target_bytes: float) -> bool:
    """Whether the open shard is closed before the next sample (of `next_bytes`) goes in: once it holds the target,
    whatever comes next, so that it ends within one sample of the target and never empty."""
    return tar.offset >= target_bytes


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Write one member, `name` holding `data` as is, into the open shard."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def shuffle_buffer(items: Iterable[T], buffer_size: int, rng: np.random.Generator) -> Iterator[T]:
    """Yield `items` in a random order, holding at most `buffer_size` of them at a time.

    Fill the buffer; then for each new item, yield a random buffered one and put the
    new one in its place; at the end, yield what is left in random order.
    """
    buffer: list[T] = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        index = int(rng.integers(buffer_size))
        yield buffer[index]
        buffer[index] = item
    rng.shuffle(buffer)
    yield from buffer


class ShardDataset(IterableDataset):
    """The samples of the shards in `out_dir`, as `ShardSample(key, data, label)`; usable with any `num_workers`.

    - Every sample once per epoch, across all `num_workers` DataLoader workers and
      all `world_size` ranks: shards are dealt to (rank, worker) slots round-robin,
      slot = rank * num_workers + worker id. With fewer shards than slots, some
      workers get none and end at once (no sample is repeated to fill them).
    - `shuffle=False`: shards and samples in written order. `shuffle=True`: the
      shard order is permuted with `default_rng([seed, epoch])` (the same in every
      slot, so the split stays a partition), then each slot's samples pass a
      shuffle buffer of `buffer_size` seeded with `[seed, epoch, rank, worker]`.
      Call `set_epoch(e)` before each epoch (as with DistributedSampler): the order
      is a function of (seed, epoch, num_workers, rank, world_size) only, so
      iterating again without `set_epoch` repeats the epoch.
    - `storage`: read each shard through `storage.read` (one request per shard),
      as from object storage; None reads local files.
    - `decode(bytes) -> anything` runs in the worker on each sample's data.
    - A truncated or malformed shard raises CorruptShard naming the shard.
    """

    def __init__(self, out_dir: Path | str, shuffle: bool = True, seed: int = 0, buffer_size: int = 256, *,
                 storage: SlowStorage | None = None, rank: int = 0, world_size: int = 1,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        out_dir = Path(out_dir)
        self.shards = sorted(out_dir.glob(SHARD_GLOB))
        if not self.shards:
            raise FileNotFoundError(f"{out_dir} holds no {SHARD_GLOB} files: write them with write_shards() first "
                                    "(or check the folder).")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be at least 1 (1 shuffles the shard order only), got {buffer_size}")
        self.shuffle, self.seed, self.buffer_size = shuffle, seed, buffer_size
        self.storage, self.rank, self.world_size, self.decode = storage, rank, world_size, decode
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration gives (call it before creating the DataLoader iterator)."""
        self.epoch = epoch

    def shard_order(self) -> list[Path]:
        """Every shard, in the order this epoch reads them: the same list in every worker and every rank."""
        if not self.shuffle:
            return list(self.shards)
        permutation = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.shards))
        return [self.shards[i] for i in permutation]

    def shards_for(self, worker_id: int, num_workers: int) -> list[Path]:
        """The shards of one (rank, worker) slot, in the order that slot reads them."""
        slots = self.world_size * num_workers
        return self.shard_order()[self.rank * num_workers + worker_id :: slots]

    def __iter__(self) -> Iterator[ShardSample]:
        info = get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        samples = self.slot_samples(worker_id, num_workers)
        if self.shuffle:
            samples = self.mix(samples, np.random.default_rng([self.seed, self.epoch, self.rank, worker_id]))
        for sample in samples:
            yield sample if self.decode is None else sample._replace(data=self.decode(sample.data))

    def slot_samples(self, worker_id: int, num_workers: int) -> Iterator[ShardSample]:
        """The samples of one (rank, worker) slot's shards, shard after shard, each in written order."""
        return (sample for shard in self.shards_for(worker_id, num_workers) for sample in self.read_shard(shard))

    def mix(self, samples: Iterable[ShardSample], rng: np.random.Generator) -> Iterator[ShardSample]:
        """A slot's samples through the shuffle buffer (shuffle=True)."""
        return shuffle_buffer(samples, self.buffer_size, rng)

    def _open(self, shard: Path) -> BinaryIO:
        """The shard as a file object: the local file, or its bytes fetched in one storage request."""
        return io.BytesIO(self.storage.read(shard)) if self.storage is not None else shard.open("rb")

    def read_shard(self, shard: Path) -> Iterator[ShardSample]:
        """The samples of one shard in written order; a shard that does not parse raises CorruptShard naming it."""
        try:
            yield from self._parse(shard)
        except tarfile.TarError as err:
            raise CorruptShard(f"{shard}: not a complete tar shard ({err}); rewrite it with write_shards()") from err

    def _parse(self, shard: Path) -> Iterator[ShardSample]:
        """The samples of one shard in written order, as tarfile reads them (its errors as it raises them)."""
        key, parts = None, {}
        with self._open(shard) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                member_key, _, suffix = member.name.rpartition(".")
                if member_key != key:
                    if key is not None:
                        yield sample_from_parts(shard, key, parts)
                    key, parts = member_key, {}
                parts["." + suffix] = tar.extractfile(member).read()
        if key is not None:
            yield sample_from_parts(shard, key, parts)


def sample_from_parts(shard: Path, key: str, parts: dict[str, bytes]) -> ShardSample:
    """One sample from its members (suffix -> bytes): one image and one label, or CorruptShard naming the shard."""
    data = [value for suffix, value in parts.items() if suffix != LABEL_SUFFIX]
    if LABEL_SUFFIX not in parts or len(data) != 1:
        raise CorruptShard(f"{shard}: sample {key!r} has parts {sorted(parts)}; expected one image and one {LABEL_SUFFIX}")
    return ShardSample(key, data[0], int(parts[LABEL_SUFFIX]))

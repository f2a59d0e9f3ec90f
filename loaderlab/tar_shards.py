"""Module 06's tar shards as course infrastructure: a plain writer and a reader in written order.

Exercise 10, its grader, notebook 07 and the league write and read shards with these, so that none of them
depends on exercise 08 (yours or its answer). The layout is module 06's, WebDataset's: each sample is two
members, `<class>/<stem>.jpg` (the file's bytes, untouched) and `<class>/<stem>.cls` (the label as text), in
`list_samples` order, in files `shard-00000.tar`, `shard-00001.tar`, ... Exercise 08 asks for more than this
reader does: a shuffled order per epoch, a shuffle buffer, and shards split over ranks as well as workers.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from torch.utils.data import IterableDataset, get_worker_info

from loaderlab.images import Sample, list_samples

SHARD_NAME = "shard-{:05d}.tar"
SHARD_GLOB = "shard-*.tar"
LABEL_SUFFIX = "cls"


class ShardSample(NamedTuple):
    """One sample read back from the shards."""

    key: str    # the file's path under the split, without its suffix: "circles/circles_000003"
    data: bytes  # the file's bytes, exactly as written
    label: int   # the ImageFolder label


class CorruptShard(ValueError):
    """A shard that does not read back as a whole tar archive of complete samples."""


def sample_key(sample: Sample) -> str:
    """A sample's key in the shards: its class folder and file name without the suffix."""
    return f"{sample.path.parent.name}/{sample.path.stem}"


def write_tar_shards(root: Path | str, out_dir: Path | str, samples_per_shard: int,
                     samples: Sequence[Sample] | None = None) -> list[Path]:
    """Write the samples of the ImageFolder split `root` (or `samples`, in their order) into tar shards of
    `samples_per_shard` samples each (the last may hold fewer), with webdataset's TarWriter. Returns the shards.
    Refuses a folder that already holds shards (stale shards would be read too)."""
    import webdataset as wds

    if samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be at least 1, got {samples_per_shard}")
    samples = list_samples(root) if samples is None else samples
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.glob(SHARD_GLOB)):
        raise FileExistsError(f"{out_dir} already holds shards; write into an empty folder.")
    paths = []
    for number, start in enumerate(range(0, len(samples), samples_per_shard)):
        paths.append(out_dir / SHARD_NAME.format(number))
        with wds.TarWriter(str(paths[-1])) as shard:
            for sample in samples[start:start + samples_per_shard]:
                shard.write({"__key__": sample_key(sample), sample.path.suffix.lower().lstrip("."): sample.path.read_bytes(),
                             LABEL_SUFFIX: str(sample.label).encode()})
    return paths


class TarShardReader(IterableDataset):
    """The samples of the shards in `shard_dir` as `ShardSample(key, data, label)`, every one once, in written order.

    In DataLoader workers, worker i of n reads shards i, i + n, ... in order (a worker with no shard ends at once),
    so with 0 or 1 workers the order is the written one. A missing or empty folder raises FileNotFoundError; a
    truncated or malformed shard raises CorruptShard naming it.
    """

    def __init__(self, shard_dir: Path | str) -> None:
        self.shards = sorted(Path(shard_dir).glob(SHARD_GLOB))
        if not self.shards:
            raise FileNotFoundError(f"{shard_dir} holds no {SHARD_GLOB} files (write them with write_tar_shards, "
                                    "or check the folder)")

    def __iter__(self) -> Iterator[ShardSample]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for shard in self.shards[worker::workers]:
            yield from read_shard(shard)


def read_shard(shard: Path) -> Iterator[ShardSample]:
    """The samples of one shard, in written order (members of one key are adjacent, as every writer puts them)."""
    key, parts = None, {}
    try:
        with tarfile.open(shard, mode="r|") as tar:
            for member in tar:
                member_key, _, suffix = member.name.rpartition(".")
                if key is not None and member_key != key:
                    yield _sample(shard, key, parts)
                    parts = {}
                key = member_key
                parts[suffix] = tar.extractfile(member).read()
    except tarfile.TarError as err:
        raise CorruptShard(f"{shard}: not a complete tar shard ({err})") from err
    if key is not None:
        yield _sample(shard, key, parts)


def _sample(shard: Path, key: str, parts: dict[str, bytes]) -> ShardSample:
    data = [value for suffix, value in parts.items() if suffix != LABEL_SUFFIX]
    if LABEL_SUFFIX not in parts or len(data) != 1:
        raise CorruptShard(f"{shard}: sample {key!r} has parts {sorted(parts)}; expected one image and one .{LABEL_SUFFIX}")
    return ShardSample(key, data[0], int(parts[LABEL_SUFFIX]))

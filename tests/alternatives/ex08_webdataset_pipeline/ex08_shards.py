"""Exercise 08, a correct alternative built on the webdataset library (webdataset==1.0.2).

Another route than solutions/ex08_shards.py at every stage:
- writer: `webdataset.ShardWriter`, which counts only the samples' bytes towards
  `maxsize` (tar's headers and padding come on top) and names shards with six digits;
- shard order: `webdataset.SimpleShardList`'s own shuffle, `random.Random` seeded
  with the text "<seed>/<epoch>" (the same in every process);
- split: two levels, as webdataset does across nodes and workers: rank r takes
  shards r, r + world_size, ...; then `webdataset.split_by_worker` strides those;
- parsing: webdataset's `tar_file_expander` and `group_by_keys`; errors re-raised
  with the shard's URL appended by webdataset;
- sample buffer: webdataset's `shuffle` filter with `initial=buffer_size`;
  `buffer_size` 0 or 1 passes the samples through, as webdataset's own
  `.shuffle(0)` does.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

import webdataset as wds
from torch.utils.data import IterableDataset, get_worker_info
from webdataset.handlers import reraise_exception
from webdataset.tariterators import group_by_keys, tar_file_expander

from loaderlab.images import list_samples
from loaderlab.sim import SlowStorage

SHARD_PATTERN = "shard-%06d.tar"
SHARD_GLOB = "shard-*.tar"
LABEL = "cls"


class ShardSample(NamedTuple):
    """One sample read back from the shards."""

    key: str
    data: Any
    label: int


def write_shards(root: Path | str, out_dir: Path | str, target_shard_mb: float) -> list[Path]:
    """Format: WebDataset tar shards written by `webdataset.ShardWriter(maxsize=target_shard_mb * 1e6)`.

    Each sample is `<key>.cls` (the label as text) and `<key>.<suffix>` (the file's bytes).
    """
    if target_shard_mb <= 0:
        raise ValueError(f"target_shard_mb must be positive, got {target_shard_mb}")
    root, out_dir = Path(root), Path(out_dir)
    samples = list_samples(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    with wds.ShardWriter(str(out_dir / SHARD_PATTERN), maxsize=target_shard_mb * 1e6, verbose=0,
                         post=written.append) as sink:
        for sample in samples:
            sink.write({"__key__": sample.path.relative_to(root).with_suffix("").as_posix(),
                        sample.path.suffix.lower().lstrip("."): sample.path.read_bytes(),
                        LABEL: str(sample.label)})
    return [Path(name) for name in written]


class ShardDataset(IterableDataset):
    """The samples of the shards in `out_dir` as `ShardSample(key, data, label)`, through a webdataset pipeline."""

    def __init__(self, out_dir: Path | str, shuffle: bool = True, seed: int = 0, buffer_size: int = 256, *,
                 storage: SlowStorage | None = None, rank: int = 0, world_size: int = 1,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        self.urls = [str(path) for path in sorted(Path(out_dir).glob(SHARD_GLOB))]
        if not self.urls:
            raise FileNotFoundError(f"no {SHARD_GLOB} shards in {out_dir}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.shuffle, self.seed, self.buffer_size = shuffle, seed, buffer_size
        self.storage, self.rank, self.world_size, self.decode = storage, rank, world_size, decode
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[ShardSample]:
        info = get_worker_info()
        worker = info.id if info is not None else 0
        seed_text = f"{self.seed}/{self.epoch}"
        stages: list[Any] = [
            wds.SimpleShardList(self.urls, seed=seed_text if self.shuffle else None),
            self._split_by_rank,
            wds.split_by_worker,
            self._open_shards,
            partial(tar_file_expander, handler=reraise_exception),
            partial(group_by_keys, handler=reraise_exception),
        ]
        if self.shuffle and self.buffer_size > 1:
            rng = random.Random(f"{seed_text}/{self.rank}/{worker}")
            stages.append(wds.shuffle(self.buffer_size, initial=self.buffer_size, rng=rng))
        stages.append(wds.map(self._to_sample))
        return iter(wds.DataPipeline(*stages))

    def _split_by_rank(self, source: Iterator[dict]) -> Iterator[dict]:
        return islice(source, self.rank, None, self.world_size)

    def _open_shards(self, source: Iterator[dict]) -> Iterator[dict]:
        for shard in source:
            url = shard["url"]
            with io.BytesIO(self.storage.read(url)) if self.storage is not None else open(url, "rb") as stream:
                yield {"url": url, "stream": stream}

    def _to_sample(self, sample: dict) -> ShardSample:
        data = [value for name, value in sample.items() if not name.startswith("__") and name != LABEL]
        if len(data) != 1 or LABEL not in sample:
            raise ValueError(f"{sample.get('__url__')}: sample {sample.get('__key__')!r} has parts {sorted(sample)}")
        return ShardSample(sample["__key__"], data[0] if self.decode is None else self.decode(data[0]),
                           int(sample[LABEL]))

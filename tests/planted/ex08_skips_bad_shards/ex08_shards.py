"""Planted defect: a shard that fails to parse is skipped with a warning (as webdataset's warn_and_continue handler
does), so a truncated shard silently shortens the epoch."""

import warnings

from solutions.ex08_shards import CorruptShard
from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def read_shard(self, shard):
        try:
            yield from super().read_shard(shard)
        except CorruptShard as err:
            warnings.warn(f"skipping the rest of {shard}: {err}")  # planted

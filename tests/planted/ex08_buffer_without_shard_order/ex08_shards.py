"""Planted defect: only the sample buffer shuffles; the shards are always read in written order, so each epoch
starts with the first shards written (and a small buffer keeps the written order at large)."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shard_order(self):
        return list(self.shards)  # planted

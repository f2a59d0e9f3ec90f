"""Planted defect: ShardCache names a shard's file after its basename: shards/train/shard-00000.tar and
shards/val/shard-00000.tar share one file, and a hit on one returns the other's bytes."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest


class ShardCache(_Honest):
    def path_of(self, shard_key):
        return self.cache_dir / shard_key.rsplit("/", 1)[-1]  # planted: the basename alone

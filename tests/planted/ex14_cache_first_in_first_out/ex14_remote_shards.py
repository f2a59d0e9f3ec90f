"""Planted defect: a hit does not make the shard the most recently used: the cache evicts first in, first out."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest


class ShardCache(_Honest):
    def get(self, shard_key):
        with self.lock:
            if shard_key in self.on_disk:
                return self.path_of(shard_key).read_bytes()  # planted: no move_to_end
        return super().get(shard_key)

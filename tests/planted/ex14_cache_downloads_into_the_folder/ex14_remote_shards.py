"""Planted defect: ShardCache streams a download into cache_dir and makes room only once it is there."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest


class ShardCache(_Honest):
    def keep(self, shard_key, data):
        partial = self.path_of(shard_key).with_suffix(".part")
        with open(partial, "wb") as out:  # planted: written before room is made
            for start in range(0, len(data), 1 << 16):
                out.write(data[start:start + (1 << 16)])
                out.flush()
        partial.unlink()
        super().keep(shard_key, data)

"""Planted defect: two threads that miss the same shard at once each download it."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest


class ShardCache(_Honest):
    def get(self, shard_key):
        with self.lock:
            if shard_key in self.on_disk:
                self.on_disk.move_to_end(shard_key)
                return self.path_of(shard_key).read_bytes()
        data = self.download(shard_key)  # planted: nobody waits for anybody
        with self.lock:
            if shard_key in self.on_disk:
                return data
        self.keep(shard_key, data)
        return data

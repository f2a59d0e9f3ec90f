"""Planted defect: ShardCache makes room for a new shard by removing one shard, the least recently used: enough while
every shard has one size, over the budget when a large one replaces a small one."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest


class ShardCache(_Honest):
    def keep(self, shard_key, data):
        with self.lock:
            if self.on_disk and sum(self.on_disk.values()) + len(data) > self.budget:  # planted: if, not while
                oldest, _ = self.on_disk.popitem(last=False)
                self.path_of(oldest).unlink()
            self.path_of(shard_key).write_bytes(data)
            self.on_disk[shard_key] = len(data)

"""Planted defect: ShardCache keeps a failed fetch's Future: every later get of that shard raises the old error, even
once the network works again."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardCache as _Honest
from concurrent.futures import Future


class ShardCache(_Honest):
    def get(self, shard_key):
        with self.lock:
            if shard_key in self.on_disk:
                self.on_disk.move_to_end(shard_key)
                return self.path_of(shard_key).read_bytes()
            pending = self.fetching.get(shard_key)
            if pending is None:
                mine = self.fetching[shard_key] = Future()
        if pending is not None:
            return pending.result()
        try:
            data = self.download(shard_key)
            self.keep(shard_key, data)
        except BaseException as err:
            mine.set_exception(err)
            raise   # planted: the failed Future stays in self.fetching
        with self.lock:
            del self.fetching[shard_key]
        mine.set_result(data)
        return data

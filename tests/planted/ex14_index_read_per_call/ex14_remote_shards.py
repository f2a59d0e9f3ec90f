"""Planted defect: ShardIndex.read reads the index again on every call (to be sure it is fresh)."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def __init__(self, endpoint, bucket, index_key):
        super().__init__(endpoint, bucket, index_key)
        self.index_key = index_key

    def read(self, keys):
        _Honest.__init__(self, self.endpoint, self.bucket, self.index_key)  # planted: the index again, every call
        return super().read(keys)

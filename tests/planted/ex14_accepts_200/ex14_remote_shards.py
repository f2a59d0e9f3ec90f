"""Planted defect: ShardIndex reads whatever answer comes, 200 or 206, and keeps the bytes it asked for the length of."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def read_range(self, shard, start, end, run):
        response = _honest.open_object(self.client, self.endpoint, self.bucket, shard, (start, end))
        return response["Body"].read()[:end - start]  # planted: the status is never looked at

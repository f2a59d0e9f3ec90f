"""Planted defect: ShardIndex.read gets each shard it needs whole (one GET per shard, no Range) and slices the
samples out of it."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import RemoteSample
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def read(self, keys):
        shards = {}
        for shard in {self.entries[key].shard for key in keys}:  # planted: whole shards
            shards[shard] = _honest.fetch_object(self.client, self.endpoint, self.bucket, shard)
        out = []
        for key in keys:
            entry = self.entries[key]
            out.append(RemoteSample(key, shards[entry.shard][entry.offset:entry.offset + entry.size], entry.label))
        return out

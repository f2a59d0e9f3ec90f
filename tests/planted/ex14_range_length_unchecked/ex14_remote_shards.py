"""Planted defect: ShardIndex checks the 206 but not the length: an index entry past its shard's end gives a short sample."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def read_range(self, shard, start, end, run):
        response = _honest.open_object(self.client, self.endpoint, self.bucket, shard, (start, end))
        if response["ResponseMetadata"]["HTTPStatusCode"] != 206:
            raise _honest.RemoteReadError(f"{shard}: not 206")
        return response["Body"].read()  # planted: however many bytes came

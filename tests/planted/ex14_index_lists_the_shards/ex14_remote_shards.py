"""Planted defect: ShardIndex lists the shards' folder to check that every shard the index names exists."""

from solutions.ex14_remote_shards import *  # noqa: F403
from solutions.ex14_remote_shards import ShardIndex as _Honest


class ShardIndex(_Honest):
    def __init__(self, endpoint, bucket, index_key):
        super().__init__(endpoint, bucket, index_key)
        prefix = index_key.rsplit("/", 1)[0] + "/"
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=prefix)  # planted: a LIST
        present = {entry["Key"] for entry in listed.get("Contents", [])}
        missing = {entry.shard for entry in self.entries.values()} - present
        if missing:
            raise FileNotFoundError(f"shards missing from s3://{bucket}/{prefix}: {sorted(missing)[:3]}")

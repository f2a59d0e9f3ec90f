"""Planted defect: tarfile's own error escapes the reader unchanged ("unexpected end of data"): it is loud, but it
names no shard, so the learner cannot tell which of the files to rewrite."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def read_shard(self, shard):
        return self._parse(shard)  # planted: no wrapping

"""Planted defect: tarfile's own error escapes the reader unchanged ("unexpected end of data"): it is loud, but it
names no shard, so the learner cannot tell which of the files to rewrite."""

import tarfile

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, _sample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def _read(self, shard):
        key, parts = None, {}
        with self._open(shard) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:  # planted: no wrapping
            for member in tar:
                member_key, _, suffix = member.name.rpartition(".")
                if member_key != key:
                    if key is not None:
                        yield _sample(shard, key, parts)
                    key, parts = member_key, {}
                parts["." + suffix] = tar.extractfile(member).read()
        if key is not None:
            yield _sample(shard, key, parts)

"""Planted defect: a sample is yielded when the next key starts, never once the shard ends: each shard's last is lost."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def _samples_of(stream, decode, where):
    import tarfile

    key, parts = None, {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            member_key, _, suffix = member.name.rpartition(".")
            if key is not None and member_key != key:
                yield _honest._sample(key, parts, decode, where)
                parts = {}
            key = member_key
            parts[suffix] = tar.extractfile(member).read()
    # planted: the last sample, still in `parts`, is never yielded


_honest._samples_of = _samples_of  # shard_samples looks it up in its own module

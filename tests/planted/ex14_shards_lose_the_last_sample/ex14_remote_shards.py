"""Planted defect: a sample is yielded when the next key starts, never once the shard ends: each shard's last is lost."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403

_whole = _honest.tar_samples


def tar_samples(stream, size, decode, where):
    samples = _whole(stream, size, decode, where)
    previous = next(samples, None)
    for sample in samples:
        yield previous
        previous = sample
    # planted: the last sample, held back until the next one came, is never yielded


_honest.tar_samples = tar_samples  # shard_samples looks it up in its own module

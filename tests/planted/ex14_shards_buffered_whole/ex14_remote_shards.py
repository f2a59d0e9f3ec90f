"""Planted defect: shard_samples reads each shard's body whole into memory, then parses it: one GET per shard, every
sample right, but nothing comes before the shard's last byte."""

import io

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403

_parsed = _honest.tar_samples


def tar_samples(stream, size, decode, where):
    whole = io.BytesIO(stream.read())  # planted: the whole shard before its first sample
    yield from _parsed(whole, size, decode, where)


_honest.tar_samples = tar_samples  # shard_samples looks it up in its own module

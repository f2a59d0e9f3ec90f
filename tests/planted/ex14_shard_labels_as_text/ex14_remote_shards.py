"""Planted defect: shard_samples hands the label on as the .cls member stores it, text, never parsed to an int."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403

_parsed = _honest.tar_samples


def tar_samples(stream, size, decode, where):
    for sample in _parsed(stream, size, decode, where):
        yield sample._replace(label=str(sample.label))  # planted: "3", not 3


_honest.tar_samples = tar_samples  # shard_samples looks it up in its own module

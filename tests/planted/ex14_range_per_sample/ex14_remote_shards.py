"""Planted defect: ShardIndex.read sends one Range request per sample, neighbours or not."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def _runs(entries):
    for entry in entries:  # planted: never merged
        yield [entry]


_honest._runs = _runs  # ShardIndex.read looks it up in its own module

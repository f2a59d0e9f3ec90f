"""Planted defect: ShardIndex.read sends one Range request per sample, neighbours or not."""

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def coalesced_runs(entries):
    for entry in entries:  # planted: never merged
        yield [entry]


_honest.coalesced_runs = coalesced_runs  # ShardIndex.read looks it up in its own module

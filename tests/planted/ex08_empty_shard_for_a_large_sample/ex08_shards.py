"""Planted defect: the writer starts a new shard before adding a sample that would overflow the open one, even when
the open one is still empty, so with a target smaller than a sample the first shard is left empty."""

import solutions.ex08_shards as _solution
from solutions.ex08_shards import ShardDataset, ShardSample, shuffle_buffer, write_shards  # noqa: F401


def _overflows(tar, next_bytes, target_bytes):
    return tar.offset + next_bytes > target_bytes  # planted: also when the open shard holds nothing yet


_solution.shard_is_full = _overflows

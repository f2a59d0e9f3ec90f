"""Planted defect: labels are written one-based (label + 1), so every label comes back shifted by one."""

import solutions.ex08_shards as _solution
from solutions.ex08_shards import ShardDataset, ShardSample, shuffle_buffer, write_shards  # noqa: F401


def _shifted_label(tar, name, data):
    if name.endswith(_solution.LABEL_SUFFIX):
        data = str(int(data) + 1).encode()  # planted
    _honest_add_member(tar, name, data)


_honest_add_member = _solution.add_member
_solution.add_member = _shifted_label

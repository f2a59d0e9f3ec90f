"""Planted defect: the epoch is kept in a module-level variable (so that "every worker sees it"), so set_epoch on one
dataset changes the order of every other dataset in the process."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401

_EPOCH = 0  # planted: one epoch for every dataset


class ShardDataset(_Honest):
    @property
    def epoch(self):
        return _EPOCH

    @epoch.setter
    def epoch(self, value):
        global _EPOCH
        _EPOCH = value

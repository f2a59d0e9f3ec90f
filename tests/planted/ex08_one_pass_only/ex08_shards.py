"""Planted defect: __init__ makes one generator and __iter__ hands it out, so the dataset is an iterator, not an
iterable: the second pass (the second epoch) is empty."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._samples = super().__iter__()  # planted: made once

    def __iter__(self):
        return self._samples

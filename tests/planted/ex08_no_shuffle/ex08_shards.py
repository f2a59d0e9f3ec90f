"""Planted defect: the shuffle flag is ignored; every epoch reads the samples in written order."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __init__(self, out_dir, shuffle=True, seed=0, buffer_size=256, **kwargs):
        super().__init__(out_dir, False, seed, buffer_size, **kwargs)  # planted

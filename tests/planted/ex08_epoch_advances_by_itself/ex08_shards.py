"""Planted defect: each pass advances the epoch by itself (as webdataset's detshuffle does). With num_workers=0 the
order changes at every pass; with workers the increment happens in a worker's copy and is lost."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __iter__(self):
        self.epoch += 1  # planted
        yield from super().__iter__()

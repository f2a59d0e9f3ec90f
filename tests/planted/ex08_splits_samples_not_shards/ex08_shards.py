"""Planted defect: every (rank, worker) slot reads every shard and keeps every k-th sample: each sample still comes
once, but each slot reads all the bytes."""

from itertools import islice

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __iter__(self):
        info = get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        slots, slot = self.world_size * num_workers, self.rank * num_workers + worker_id
        everything = (sample for shard in self.shard_order() for sample in self._read(shard))
        samples = islice(everything, slot, None, slots)  # planted: divide the samples, not the shards
        if self.shuffle:
            samples = shuffle_buffer(samples, self.buffer_size,
                                     np.random.default_rng([self.seed, self.epoch, self.rank, worker_id]))
        for sample in samples:
            yield sample if self.decode is None else sample._replace(data=self.decode(sample.data))

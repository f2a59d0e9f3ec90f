"""Planted defect: the shard order is permuted, then each shard is shuffled on its own and buffer_size is ignored:
samples never mix across shards, and a buffer of 1 still reorders them."""

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def __iter__(self):
        info = get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, worker_id])
        for shard in self.shards_for(worker_id, num_workers):
            samples = list(self._read(shard))
            if self.shuffle:
                rng.shuffle(samples)  # planted: within the shard only
            for sample in samples:
                yield sample if self.decode is None else sample._replace(data=self.decode(sample.data))

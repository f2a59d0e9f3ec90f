"""Planted defect: the shard permutation is seeded with the worker and rank too, so each slot takes its stride of a
different order: shards are read twice or never when shuffling (shuffle=False is right)."""

import numpy as np
from torch.utils.data import get_worker_info

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shard_order(self):
        if not self.shuffle:
            return list(self.shards)
        info = get_worker_info()
        worker = info.id if info is not None else 0
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, worker])  # planted: per slot
        return [self.shards[i] for i in rng.permutation(len(self.shards))]

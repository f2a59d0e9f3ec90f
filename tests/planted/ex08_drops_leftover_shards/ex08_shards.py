"""Planted defect: each worker gets len(shards) // workers shards, so the leftover ones (the last, partial shard
among them, when unshuffled) are never read."""

from pathlib import Path

import numpy as np

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shards_for(self, worker_id: int, num_workers: int) -> list[Path]:
        order = list(self.shards)
        if self.shuffle:
            order = [order[i] for i in np.random.default_rng([self.seed, self.epoch]).permutation(len(order))]
        slots = self.world_size * num_workers
        slot = self.rank * num_workers + worker_id
        per_slot = len(order) // slots  # planted: the remainder is dropped
        return order[slot * per_slot : (slot + 1) * per_slot]

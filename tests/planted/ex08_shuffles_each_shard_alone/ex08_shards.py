"""Planted defect: the shard order is permuted, then each shard is shuffled on its own and buffer_size is ignored:
samples never mix across shards, and a buffer of 1 still reorders them."""

import numpy as np

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def slot_samples(self, worker_id, num_workers):
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, worker_id])
        for shard in self.shards_for(worker_id, num_workers):
            samples = list(self.read_shard(shard))
            if self.shuffle:
                rng.shuffle(samples)  # planted: within the shard only ...
            yield from samples

    def mix(self, samples, rng):
        return samples  # ... and no buffer across them

"""Planted defect: every (rank, worker) slot reads every shard and keeps every k-th sample: each sample still comes
once, but each slot reads all the bytes."""

from itertools import islice

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def slot_samples(self, worker_id, num_workers):
        slots, slot = self.world_size * num_workers, self.rank * num_workers + worker_id
        everything = (sample for shard in self.shard_order() for sample in self.read_shard(shard))
        return islice(everything, slot, None, slots)  # planted: divide the samples, not the shards

"""Planted defect: each worker gets len(shards) // workers shards, so the leftover ones (the last, partial shard
among them, when unshuffled) are never read."""

from pathlib import Path

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shards_for(self, worker_id: int, num_workers: int) -> list[Path]:
        slots, slot = self.world_size * num_workers, self.rank * num_workers + worker_id
        per_slot = len(self.shards) // slots  # planted: the remainder is dropped
        return self.shard_order()[slot * per_slot : (slot + 1) * per_slot]

"""Planted defect: the shards are never split across workers or ranks; every worker reads them all."""

from pathlib import Path

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shards_for(self, worker_id: int, num_workers: int) -> list[Path]:
        return super().shards_for(0, 1) if self.world_size == 1 else list(self.shards)  # planted: no split

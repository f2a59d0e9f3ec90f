"""Planted defect: a shard goes to slot hash(name) % slots. Forked workers share the parent's string hashes and
agree; spawned workers each hash strings with their own random seed, so shards are read twice or never."""

from solutions.ex08_shards import ShardDataset as _Honest
from solutions.ex08_shards import ShardSample, shuffle_buffer, write_shards  # noqa: F401


class ShardDataset(_Honest):
    def shards_for(self, worker_id, num_workers):
        slots, slot = self.world_size * num_workers, self.rank * num_workers + worker_id
        return [shard for shard in self.shard_order() if hash(shard.name) % slots == slot]  # planted

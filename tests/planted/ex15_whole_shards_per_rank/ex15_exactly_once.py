"""Planted defect: each rank takes whole shards, the epoch's shards dealt round robin (webdataset's split_by_node):
a rank that gets no whole shard yields nothing, and ranks with smaller shards yield fewer batches."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def share(self):
        order = self.epoch_order()
        shards = list(dict.fromkeys(entry.shard for entry in order))
        mine = set(shards[self.rank::self.world_size])   # planted: whole shards per rank, whatever their sizes
        return [entry for entry in order if entry.shard in mine]

    def share_size(self):
        return len(self.share())

"""Planted defect: the epoch's order drawn from hash() of a string made of the index's key, the seed and the epoch:
the same in every process started by fork (they inherit the hash seed), another in each one started by spawn."""

import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def epoch_order(self):
        shards = list(self.shards)
        random.Random(hash(f"{self.index_key}:{self.seed}:{self.epoch}")).shuffle(shards)  # planted: str hash
        return [entry for shard in shards for entry in self.shards[shard]]

"""Planted defect: the shards' order is drawn from the seed alone: every epoch repeats the first one."""

import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def epoch_order(self):
        shards = list(self.shards)
        random.Random(f"{self.seed}").shuffle(shards)   # planted: the epoch does not reach the order
        return [entry for shard in shards for entry in self.shards[shard]]

"""Planted defect: the epoch's order is drawn from (seed, epoch) and the process id (as one seeds augmentations per
worker): every instance in one process agrees, but each rank, a process of its own, follows another plan."""

import os
import random

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def epoch_order(self):
        order = [entry for samples in self.shards.values() for entry in samples]
        random.Random(f"{self.seed}:{self.epoch}:{os.getpid()}").shuffle(order)   # planted: per process
        return order

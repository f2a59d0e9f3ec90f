"""Planted defect: every rank's share is padded up to a multiple of batch_size (so that no batch is short): equal
batches, but more repeats than the fewest that even the ranks out."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def share_size(self):
        fewest = super().share_size()
        return -(-fewest // self.batch_size) * self.batch_size   # planted: padded past the fewest

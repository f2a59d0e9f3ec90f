"""Planted defect: a resume reads the rank's share from its start and throws away what the loop had received (a
fast-forward): exactly the rest, but the epoch's start is read again."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


def _after(samples, count):
    for position, sample in enumerate(samples):
        if position >= count:
            yield sample


class RemoteEpochs(_honest.RemoteEpochs):
    def __iter__(self):
        start, self._resume_at = self._resume_at, 0
        self.samples_received = start
        everything = self.read_samples(self.share())   # planted: reads the skipped samples too
        return self.counted_batches(_after(everything, start))

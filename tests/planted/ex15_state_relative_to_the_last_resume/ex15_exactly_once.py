"""Planted defect: the state counts the samples received since the iteration began, not since the epoch's start
(huggingface/datasets#8308): the first resume is right, the second starts too early."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    began_at = 0

    def __iter__(self):
        self.began_at = self._resume_at
        return super().__iter__()

    def state_dict(self):
        state = super().state_dict()
        state["samples_received"] -= self.began_at   # planted: relative to where the last resume began
        return state

"""Planted defect: twice num_workers reader threads ("one reading, one waiting per worker"): twice the requests open
that the caller allowed."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.num_workers *= 2  # planted: more threads than num_workers

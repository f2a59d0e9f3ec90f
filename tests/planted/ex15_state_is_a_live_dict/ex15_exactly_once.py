"""Planted defect: state_dict() returns the loader's own state dict, which it keeps updating as the loop goes on: a
checkpoint written after a few more batches (or kept in memory) holds a later position than when it was saved."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "samples_received" and "_state" in self.__dict__:
            self._state["samples_received"] = value   # planted: the dict handed out follows the loader

    def state_dict(self):
        self.__dict__["_state"] = state = super().state_dict()
        return state

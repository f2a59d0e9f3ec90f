"""Planted defect: load_state_dict takes the state's epoch (as exercise 13's loader does) instead of refusing a state
saved for another epoch than the one set_epoch chose."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def load_state_dict(self, state):
        chosen = self.epoch
        if isinstance(state, dict) and type(state.get("epoch")) is int:
            self.epoch = state["epoch"]   # planted: the state's epoch wins over set_epoch's
        try:
            super().load_state_dict(state)
        except ValueError:
            self.epoch = chosen
            raise

"""Planted defect: load_state_dict assigns the position first and checks the state after: a refused state has
already moved the loader."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def load_state_dict(self, state):
        if isinstance(state, dict) and type(state.get("samples_received")) is int:
            self.samples_received = self._resume_at = state["samples_received"]   # planted: before the checks
        super().load_state_dict(state)

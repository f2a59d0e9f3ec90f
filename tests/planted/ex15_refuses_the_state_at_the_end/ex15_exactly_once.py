"""Planted defect: load_state_dict takes a position past the last sample received as out of range when it equals the
share (an off-by-one bound): a checkpoint written after the epoch's last batch cannot be loaded."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def load_state_dict(self, state):
        if isinstance(state, dict) and state.get("samples_received") == self.share_size():  # planted: < not <=
            raise ValueError(f"the state's samples_received is {state['samples_received']}, outside 0.."
                             f"{self.share_size() - 1}")
        super().load_state_dict(state)

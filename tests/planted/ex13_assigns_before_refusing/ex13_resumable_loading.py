"""Exercise 13, planted defect: load_state_dict takes the state's epoch before checking the state, so a refused
state still moves the loader to its epoch (and drops the position it held)."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def load_state_dict(self, state):
        if isinstance(state, dict) and type(state.get("epoch")) is int:
            self.set_epoch(state["epoch"])  # planted: assigned before the checks below
        super().load_state_dict(state)

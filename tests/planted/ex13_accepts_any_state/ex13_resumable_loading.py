"""Exercise 13, planted defect: load_state_dict checks nothing; whatever the state holds becomes the epoch and the position."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def load_state_dict(self, state):
        self.epoch = state.get("epoch", 0)  # planted: no check at all
        self.samples_received = self._resume_at = state.get("samples_received", 0)

"""Exercise 13, planted defect: the state leaves the epoch out, so a fresh loader resumes the position in epoch 0."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def state_dict(self):
        state = super().state_dict()
        del state["epoch"]  # planted: no epoch
        return state

    def load_state_dict(self, state):
        super().load_state_dict({**state, "epoch": self.epoch})

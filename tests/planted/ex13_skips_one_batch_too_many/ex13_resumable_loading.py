"""Exercise 13, planted defect: off by one: the resume starts one batch after the first one the loop had not received."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def load_state_dict(self, state):
        super().load_state_dict(state)
        # planted: "the next batch after the last one received" counted once too often
        self.samples_received = self._resume_at = min(self._resume_at + self.batch_size, len(self.dataset))

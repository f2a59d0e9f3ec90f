"""Exercise 13, planted defect: the loaded position is never used up: every iter() of the epoch, not only the first
after load_state_dict, starts at the saved sample."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def __iter__(self):
        start = self._resume_at
        for batch in super().__iter__():
            yield batch
        self._resume_at = start  # planted: the next iter() resumes there again

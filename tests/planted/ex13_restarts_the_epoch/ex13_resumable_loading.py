"""Exercise 13, planted defect: a resume that restarts the epoch: iter() ignores the loaded position."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def __iter__(self):
        self._resume_at = 0  # planted: the loaded position is ignored, the epoch starts over
        return super().__iter__()

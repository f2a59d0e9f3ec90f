"""Exercise 13, planted defect: state_dict returns the same dict every time, updated as the loop goes on."""

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def __iter__(self):
        for batch in super().__iter__():
            self.state_dict()
            yield batch

    def state_dict(self):
        self._state = getattr(self, "_state", {})
        self._state.update(super().state_dict())  # planted: one dict, updated in place
        return self._state

"""Exercise 13, planted defect: the state reads the sampler's position, which runs ahead of the loop with workers."""

from torch.utils.data import DataLoader

from loaderlab.lessons.m09_resume import CountingSampler
from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    _sampler: CountingSampler | None = None

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self._sampler = None
        super().set_epoch(epoch)

    def __iter__(self):
        start, self._resume_at = self._resume_at, 0
        self._sampler, self.samples_received = CountingSampler(self.epoch_order()[start:]), start
        yield from DataLoader(self.dataset, batch_size=self.batch_size, sampler=self._sampler,
                              num_workers=self.num_workers, timeout=60 if self.num_workers else 0)

    def state_dict(self):
        state = super().state_dict()
        if self._sampler is not None:
            state["samples_received"] += self._sampler.handed_out  # planted: the sampler's position
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._sampler = None

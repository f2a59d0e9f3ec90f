"""Exercise 13, planted defect: the state reads the sampler's position, which runs ahead of the loop with workers."""

from torch.utils.data import DataLoader

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class _CountingSampler:
    """Counts the indices it hands out; with workers the DataLoader asks for them ahead of the loop."""

    def __init__(self, indices, start):
        self.indices, self.handed_out = indices, start

    def __iter__(self):
        for index in self.indices:
            self.handed_out += 1
            yield index

    def __len__(self):
        return len(self.indices)


class ResumableLoader(_Honest):
    _sampler = None

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self._sampler = None
        super().set_epoch(epoch)

    def __iter__(self):
        start, self._resume_at = self._resume_at, 0
        self._sampler = _CountingSampler(self._order()[start:], start)
        self.samples_received = start
        yield from DataLoader(self.dataset, batch_size=self.batch_size, sampler=self._sampler,
                              num_workers=self.num_workers, timeout=60 if self.num_workers else 0)

    def state_dict(self):
        state = super().state_dict()
        if self._sampler is not None:
            state["samples_received"] = self._sampler.handed_out  # planted: the sampler's position
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._sampler = None

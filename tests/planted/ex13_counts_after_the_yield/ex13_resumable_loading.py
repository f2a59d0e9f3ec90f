"""Exercise 13, planted defect: __iter__ counts a batch after yielding it, so the state lags one batch behind what
the loop received (after 1 batch it still reads 0: the resume gives the whole epoch again, though load_state_dict
and the next iter() honour the position they are given)."""

from torch.utils.data import DataLoader

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def __iter__(self):
        start, self._resume_at = self._resume_at, 0
        loader = DataLoader(self.dataset, batch_size=self.batch_size, sampler=self.epoch_order()[start:],
                            num_workers=self.num_workers, timeout=60 if self.num_workers else 0)
        self.samples_received = start
        for batch in loader:
            yield batch
            # planted: counted after the yield, once the loop asks for the next batch
            self.samples_received += min(self.batch_size, len(self.dataset) - self.samples_received)

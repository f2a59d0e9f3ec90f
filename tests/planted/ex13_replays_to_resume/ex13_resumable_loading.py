"""Exercise 13, planted defect: a resume that fast-forwards: it loads the epoch's first part and throws it away before the rest."""

from torch.utils.data import DataLoader

from solutions.ex13_resumable_loading import ResumableLoader as _Honest


class ResumableLoader(_Honest):
    def __iter__(self):
        skipped = self.epoch_order()[:self._resume_at]
        for _ in DataLoader(self.dataset, batch_size=self.batch_size, sampler=skipped,  # planted: fast-forward
                            num_workers=self.num_workers, timeout=60 if self.num_workers else 0):
            pass
        yield from super().__iter__()

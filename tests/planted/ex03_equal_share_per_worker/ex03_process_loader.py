"""Planted defect: each worker gets an equal share of the epoch, len(batches) // num_workers batches, and the
remainder is lost: right whenever the batches divide evenly among the workers, short otherwise."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def submit(self):
        share = len(self.batches) // len(self.workers)
        del self.batches[share * len(self.workers):]  # planted: the batches left over after equal shares
        super().submit()

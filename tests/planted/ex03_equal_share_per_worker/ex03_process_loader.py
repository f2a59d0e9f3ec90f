"""Planted defect: each worker gets an equal share of the epoch, len(batches) // num_workers batches, and the
remainder is lost: right whenever the batches divide evenly among the workers, short otherwise."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def _submit(self):
        share = len(self._batches) // len(self._workers)
        del self._batches[share * len(self._workers):]  # planted: the batches left over after equal shares
        super()._submit()

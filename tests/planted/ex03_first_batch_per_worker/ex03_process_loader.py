"""Planted defect: every worker is handed a first batch at start, as if an epoch always had a batch per worker;
with more workers than batches, the loader asks for batches that do not exist."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def _submit(self):
        if self._submitted == 0:
            for worker, pipe in enumerate(self._pipes):
                start, stop = self._batches[worker]  # planted: no check that batch `worker` exists
                pipe.send((worker, worker % len(self._slots), start, stop))
            self._submitted = len(self._pipes)
        super()._submit()

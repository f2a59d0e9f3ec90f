"""Planted defect: every worker is handed a first batch at start, as if an epoch always had a batch per worker;
with more workers than batches, the loader asks for batches that do not exist."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def submit(self):
        if self.submitted == 0:
            for worker in range(len(self.workers)):
                self.send_task(worker)  # planted: no check that batch `worker` exists
            self.submitted = len(self.workers)
        super().submit()

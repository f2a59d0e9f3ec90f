"""Planted defect: close() tells the workers to stop, then joins each one with no timeout: a worker busy on a
slow sample keeps close() waiting until it is done, however long that takes."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def join_workers(self):
        for process in self.workers:
            process.join()  # planted: no timeout, no kill

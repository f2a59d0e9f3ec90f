"""Planted defect: batches are collected worker by worker (all of worker 0's, then worker 1's, ...), not in sample order."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        # every batch in flight at once, so any order can be served from the slots
        super().__init__(samples, transform, batch_size, num_workers, seed, timeout_s, start_method,
                         prefetch=max(1, len(samples)), epoch=epoch)
        count, workers = len(self.batches), len(self.workers)
        self.order = [b for w in range(workers) for b in range(w, count, workers)]

    def collect(self, batch):
        return super().collect(self.order[batch])  # planted: worker-major order

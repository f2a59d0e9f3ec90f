"""Planted defect: the slot ring is sized for prefetch=2 whatever `prefetch` says, while the loader keeps
`num_workers * prefetch` batches in flight: above 2, two batches in flight share a slot and overwrite each other."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        self.planned = num_workers * prefetch
        super().__init__(samples, transform, batch_size, num_workers, seed, timeout_s, start_method,
                         prefetch=2, epoch=epoch)  # planted: the slots are made for prefetch=2

    def in_flight(self):
        return self.planned

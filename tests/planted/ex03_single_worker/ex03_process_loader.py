"""Planted defect: num_workers is ignored; one worker process does all the work."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        super().__init__(samples, transform, batch_size, 1, seed, timeout_s, start_method, prefetch,  # planted
                         epoch=epoch)

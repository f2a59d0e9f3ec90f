"""Planted defect: the loader notices a worker that dies, but waits forever on one that lives and sends
nothing (stuck on a read): timeout_s is never applied."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timeout_s = float("inf")  # planted: liveness is watched, time is not

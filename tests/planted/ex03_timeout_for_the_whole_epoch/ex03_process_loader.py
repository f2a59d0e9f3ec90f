"""Planted defect: timeout_s is one budget for the whole epoch (a deadline set at the first wait), as with
`Pool.map_async(...).get(timeout_s)`: a slow but steady epoch times out although batches keep arriving."""

import time

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def wait_for(self, batch):
        if not hasattr(self, "epoch_deadline"):
            self.epoch_deadline = time.monotonic() + self.timeout_s
        self.timeout_s = self.epoch_deadline - time.monotonic()  # planted: what is left of the epoch's budget
        return super().wait_for(batch)

"""Planted defect: waits for a worker's reply with no timeout and never checks that the worker is alive."""

import time

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def receive(self, worker_id, batch, timeout_s):
        while True:
            try:
                return self.pipes[worker_id].recv()
            except (EOFError, OSError):  # planted: a closed pipe is taken for "no reply yet", forever
                time.sleep(0.1)

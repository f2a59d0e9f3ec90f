"""Planted defect: waits for a worker's reply with no timeout and never checks that the worker is alive."""

import time

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def _wait_for(self, batch):
        worker_id = batch % len(self._workers)
        while batch not in self._ready:
            try:
                message = self._pipes[worker_id].recv()
            except (EOFError, OSError):  # planted: a closed pipe is taken for "no reply yet", forever
                time.sleep(0.1)
                continue
            self._handle(worker_id, message)
        return self._ready.pop(batch)

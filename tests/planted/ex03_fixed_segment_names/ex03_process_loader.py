"""Planted defect: the slots get fixed names (unique per program, the same for every loader in it), so a
second loader alive at the same time cannot make its own."""

import multiprocessing
import os
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from solutions.ex03_process_loader import IMAGE_SHAPE
from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        self._samples = list(samples)
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._batches = [(start, min(start + batch_size, len(self._samples)))
                         for start in range(0, len(self._samples), batch_size)]
        self._next_batch = self._submitted = 0
        self._closed = False
        self._workers, self._pipes, self._ready, self._slots = [], [], {}, []
        context = multiprocessing.get_context(start_method)
        slot_bytes = batch_size * int(np.prod(IMAGE_SHAPE))
        try:
            for slot in range(min(num_workers * prefetch, max(1, len(self._batches)))):
                self._slots.append(SharedMemory(name=f"ex03_slot_{os.getpid()}_{slot}", create=True,  # planted
                                                size=slot_bytes))
            for worker_id in range(num_workers):
                parent_end, child_end = context.Pipe(duplex=True)
                process = context.Process(
                    target=self.worker, name=f"ProcessLoader-{worker_id}", daemon=True,
                    args=(self._samples, transform, seed, epoch, [s.name for s in self._slots], batch_size, child_end))
                process.start()
                child_end.close()
                self._workers.append(process)
                self._pipes.append(parent_end)
            self._submit()
        except BaseException:
            self.close()
            raise

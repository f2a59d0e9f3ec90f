"""Planted defect: batches are collected worker by worker (all of worker 0's, then worker 1's, ...), not in sample order."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter, slot_array  # noqa: F401


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        # every batch in flight at once, so any order can be served from the slots
        super().__init__(samples, transform, batch_size, num_workers, seed, timeout_s, start_method,
                         prefetch=max(1, len(samples)), epoch=epoch)
        count, workers = len(self._batches), len(self._workers)
        self._order = [b for w in range(workers) for b in range(w, count, workers)]

    def __next__(self):
        if self._closed or self._next_batch >= len(self._batches):
            self.close()
            raise StopIteration
        batch = self._order[self._next_batch]  # planted: worker-major order
        labels = self._wait_for(batch)
        start, stop = self._batches[batch]
        view = slot_array(self._slots[batch % len(self._slots)].buf, self._batch_size)
        images = view[: stop - start].copy()
        del view
        self._next_batch += 1
        self._submit()
        return images, labels

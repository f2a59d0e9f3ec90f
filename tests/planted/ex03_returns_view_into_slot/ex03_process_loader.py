"""Planted defect: next() returns a view into the batch's shared-memory slot instead of a copy, and close()
silences the BufferError that those views cause: a later batch written into the slot changes a returned one."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter, slot_array, stop_processes  # noqa: F401


class ProcessLoader(_Honest):
    def __next__(self):
        if self._closed or self._next_batch >= len(self._batches):
            self.close()
            raise StopIteration
        batch = self._next_batch
        labels = self._wait_for(batch)
        start, stop = self._batches[batch]
        images = slot_array(self._slots[batch % len(self._slots)].buf, self._batch_size)[: stop - start]  # planted
        self._next_batch += 1
        self._submit()
        return images, labels

    def close(self):
        if self._closed:
            return
        self._closed = True
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except (OSError, ValueError):
                pass
        stop_processes(self._workers, 3.0)
        for pipe in self._pipes:
            pipe.close()
        for shm in self._slots:
            try:
                shm.close()
            except BufferError:  # planted: "cannot close exported pointers exist", silenced
                pass
            shm.unlink()
        self._ready.clear()

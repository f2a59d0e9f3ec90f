"""Planted defect: next() returns a view into the batch's shared-memory slot instead of a copy, and close()
silences the BufferError that those views cause: a later batch written into the slot changes a returned one."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def collect(self, batch):
        labels = self.wait_for(batch)
        start, stop = self.batches[batch]
        return self.slot_view(batch)[: stop - start], labels  # planted: a view, not a copy

    def release_slot(self, shm):
        try:
            shm.close()
        except BufferError:  # planted: "cannot close exported pointers exist", silenced
            pass
        shm.unlink()

"""Planted defect: close() closes the shared-memory segments but never unlinks them."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def release_slot(self, shm):
        shm.close()  # planted: no shm.unlink(), so /dev/shm keeps the segment

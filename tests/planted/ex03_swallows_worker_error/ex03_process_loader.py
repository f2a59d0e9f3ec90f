"""Planted defect: a batch whose worker reported an error is silently skipped."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def handle(self, worker_id, message):
        if message[0] == "error":
            return message[1], None  # planted: the failed batch is dropped without a word
        return super().handle(worker_id, message)

    def __next__(self):
        images, labels = super().__next__()
        if labels is None:
            return next(self)
        return images, labels

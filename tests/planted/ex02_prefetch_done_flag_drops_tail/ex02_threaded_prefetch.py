"""Planted defect: the end of the stream is a flag beside the queue, not a marker in it, so the items still queued when the producer finishes are lost."""

import queue
import threading

from solutions.ex02_threaded_prefetch import END, Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class DoneFlag(Handoff):
    def __init__(self, depth):
        super().__init__(depth)
        self.done = threading.Event()

    def put(self, entry):
        if entry is END:
            self.done.set()  # the defect: the consumer may see this before it has taken the last items
            return True
        return super().put(entry)

    def get(self):
        if self.done.is_set():
            return END
        try:
            return super().get()
        except queue.Empty:
            if self.done.is_set():
                return END
            raise


class ThreadedPrefetcher(_Honest):
    handoff_type = DoneFlag

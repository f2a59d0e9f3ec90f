"""Planted defect: the producer puts with a plain blocking put() and checks the stop signal between items; close() sets the signal and joins, but never frees a put() that waits for room."""

from solutions.ex02_threaded_prefetch import Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class BlockingHandoff(Handoff):
    def put(self, entry):
        if self.stop.is_set():
            return False
        self.entries.put(entry)  # the defect: blocks for as long as the queue stays full
        return True

    def drain(self):
        pass  # the defect: nothing frees the waiting put()


class ThreadedPrefetcher(_Honest):
    handoff_type = BlockingHandoff
    join_timeout_s = 1.0

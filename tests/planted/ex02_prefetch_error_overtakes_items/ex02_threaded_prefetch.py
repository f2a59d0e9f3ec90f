"""Planted defect: the producer's exception is kept in an attribute that next() looks at first, so it overtakes the items still in the queue."""

from solutions.ex02_threaded_prefetch import Failure, Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class ErrorAside(Handoff):
    failure = None

    def put(self, entry):
        if isinstance(entry, Failure):
            self.failure = entry  # the defect: the error skips the queue
            return True
        return super().put(entry)

    def get(self):
        return self.failure or super().get()


class ThreadedPrefetcher(_Honest):
    handoff_type = ErrorAside

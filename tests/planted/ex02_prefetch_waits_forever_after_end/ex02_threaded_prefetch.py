"""Planted defect: next() waits on the queue without a time limit and forgets that the stream has ended, so a second loop over a finished prefetcher hangs."""

from solutions.ex02_threaded_prefetch import Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class NoTimeLimit(Handoff):
    def get(self):
        return self.entries.get()  # the defect: no timeout


class ThreadedPrefetcher(_Honest):
    handoff_type = NoTimeLimit

    def __next__(self):
        return self.item_of(self.take())  # the defect: no memory of the end

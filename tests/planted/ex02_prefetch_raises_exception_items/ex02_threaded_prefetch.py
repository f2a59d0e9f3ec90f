"""Planted defect: next() raises any exception object it takes from the queue (as if every one were the producer's failure), so an exception yielded as a plain value is raised."""

from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class ThreadedPrefetcher(_Honest):
    def item_of(self, entry):
        if isinstance(entry, BaseException):  # the defect: an exception object is also an item
            raise entry
        return super().item_of(entry)

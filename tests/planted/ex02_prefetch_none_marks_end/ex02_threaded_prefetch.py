"""Planted defect: None marks the end of the stream, so a source that yields None ends early."""

from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class ThreadedPrefetcher(_Honest):
    def item_of(self, entry):
        if entry is None:  # the defect: None is also an item
            raise StopIteration
        return super().item_of(entry)

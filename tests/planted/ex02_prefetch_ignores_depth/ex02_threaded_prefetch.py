"""Planted defect: depth is ignored: the buffer always holds the default two items."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Reference
from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401


class ThreadedPrefetcher(_Reference):
    def __init__(self, iterable, depth=2):
        super().__init__(iterable, depth=2)

"""Planted defect: the 'prefetcher' reads the whole source ahead (unbounded memory)."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Bounded
from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401


class ThreadedPrefetcher(_Bounded):
    def __init__(self, iterable, depth=2):
        super().__init__(iterable, depth=10**9)

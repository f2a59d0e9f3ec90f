"""Planted defect: an exception in the source silently ends the stream."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest
from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401


def _quietly(iterable):
    try:
        yield from iterable
    except Exception:
        return


class ThreadedPrefetcher(_Honest):
    def __init__(self, iterable, depth=2):
        super().__init__(_quietly(iterable), depth)

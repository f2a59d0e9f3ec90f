"""Planted defect: the queue holds depth - 1 items to count the one in hand, so depth=1 makes Queue(maxsize=0): no bound at all."""

from solutions.ex02_threaded_prefetch import Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class OneShort(Handoff):
    def __init__(self, depth):
        super().__init__(depth - 1)  # the defect


class ThreadedPrefetcher(_Honest):
    handoff_type = OneShort

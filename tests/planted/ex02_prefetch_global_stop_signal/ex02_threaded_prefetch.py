"""Planted defect: the stop signal is one module-level Event that each prefetcher clears when it starts, so closing one prefetcher stops every other one alive."""

import threading

from solutions.ex02_threaded_prefetch import Handoff, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest

STOP = threading.Event()  # the defect: one signal for every prefetcher


class GlobalStop(Handoff):
    def __init__(self, depth):
        super().__init__(depth)
        self.stop = STOP
        STOP.clear()


class ThreadedPrefetcher(_Honest):
    handoff_type = GlobalStop

"""Planted defect: the thread runs a bound method, so it keeps the prefetcher alive: dropped after a `break`, the prefetcher is never collected and its thread never stops."""

import threading

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest
from solutions.ex02_threaded_prefetch import produce, threaded_map  # noqa: F401


class ThreadedPrefetcher(_Honest):
    def start_producer(self, iterable, handoff):
        thread = threading.Thread(target=self.run_producer, args=(iterable, handoff), name="prefetcher", daemon=True)
        thread.start()
        return thread

    def run_producer(self, iterable, handoff):  # the defect: the thread holds `self`
        produce(iterable, handoff)

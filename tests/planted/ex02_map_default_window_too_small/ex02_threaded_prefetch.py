"""Planted defect: max_in_flight=None means num_threads in flight, not the documented 2 * num_threads."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


class TooSmallWindow(ThreadMap):
    def window(self):
        return self.max_in_flight or self.num_threads  # the defect


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from TooSmallWindow(fn, num_threads, max_in_flight).results(items)

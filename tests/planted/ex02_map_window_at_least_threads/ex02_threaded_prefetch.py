"""Planted defect: the window is never smaller than num_threads ("or threads sit idle"), so a max_in_flight below num_threads is ignored."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


class WindowAtLeastThreads(ThreadMap):
    def window(self):
        return max(super().window(), self.num_threads)  # the defect


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from WindowAtLeastThreads(fn, num_threads, max_in_flight).results(items)

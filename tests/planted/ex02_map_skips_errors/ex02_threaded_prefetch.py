"""Planted defect: an item whose fn raised is skipped ("keep training"), so the caller never hears of it."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


class SkipsErrors(ThreadMap):
    def deliver(self, future):
        try:
            yield future.result()
        except Exception:  # the defect: the error is dropped with its item
            return


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from SkipsErrors(fn, num_threads, max_in_flight).results(items)

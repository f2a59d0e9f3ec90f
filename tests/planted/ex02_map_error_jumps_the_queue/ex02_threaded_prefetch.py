"""Planted defect: to fail fast, the first exception among the pending futures is raised at once, before the results of the items ahead of it."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


class FailsFast(ThreadMap):
    def deliver(self, future):
        yield from super().deliver(future)
        for other in self.pending:  # the defect: fail fast, out of order
            if other.done() and other.exception() is not None:
                raise other.exception()


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from FailsFast(fn, num_threads, max_in_flight).results(items)

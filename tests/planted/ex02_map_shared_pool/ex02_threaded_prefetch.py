"""Planted defect: one module-level pool serves every call (threads are started once), and the call that finishes first shuts it down under the others."""

from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401

_POOL: ThreadPoolExecutor | None = None


class SharedPool(ThreadMap):
    def start_pool(self):
        global _POOL
        if _POOL is None:  # the defect: shared by every call alive at once
            _POOL = super().start_pool()
        return _POOL

    def stop_pool(self, pool):
        global _POOL
        super().stop_pool(pool)
        _POOL = None


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from SharedPool(fn, num_threads, max_in_flight).results(items)

"""Planted defect: the pool is created without max_workers, so it runs as many threads as the executor's default, not num_threads."""

from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


class DefaultPool(ThreadMap):
    def start_pool(self):
        return ThreadPoolExecutor(thread_name_prefix="threaded_map")  # the defect: the default, not num_threads


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from DefaultPool(fn, num_threads, max_in_flight).results(items)

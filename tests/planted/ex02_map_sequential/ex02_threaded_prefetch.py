"""Planted defect: a sequential map dressed up with a thread pool it never uses."""

from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher  # noqa: F401


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    with ThreadPoolExecutor(num_threads):
        for item in items:
            yield fn(item)

"""Planted defect: Executor.map keeps the order, but submits the whole input before the first result."""

from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher  # noqa: F401


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    with ThreadPoolExecutor(max_workers=num_threads) as pool:
        yield from pool.map(fn, items)

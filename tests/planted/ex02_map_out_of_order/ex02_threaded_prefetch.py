"""Planted defect: results are yielded as they complete, not in input order."""

from concurrent.futures import ThreadPoolExecutor, as_completed

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher  # noqa: F401


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    with ThreadPoolExecutor(num_threads) as pool:
        for future in as_completed([pool.submit(fn, item) for item in items]):
            yield future.result()
